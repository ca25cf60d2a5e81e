/* models_internal.h — pieces shared by the model builders (the .c files of models/): parameter
 * registration with the reference names, init schemes and both weight-decay masks; the
 * module structs (Linear, LayerNorm, BatchNorm, Conv, Mlp, attention) and their forwards;
 * the tables of families and attention kinds (kinds.c) and the `sfvit info` rows.
 * Not a public header: the models layer's own.
 *
 * Deliberately not here: any op math (src/ops/), config parsing (train/).
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks.
 */
#ifndef SFVIT_MODELS_INTERNAL_H
#define SFVIT_MODELS_INTERNAL_H

#include "sfvit/model.h"

/* ---- modules: parameter views plus what their forward needs ---- */
typedef struct mdl_linear { sf_tensor *w, *b; } mdl_linear;         // w (out, in), b (out)
typedef struct mdl_ln { sf_tensor *w, *b; float eps; } mdl_ln;      // (C) each
typedef struct mdl_bn {
    sf_tensor *w, *b, *mean, *var, *count;                          // (C) each, count []
} mdl_bn;
typedef struct mdl_conv { sf_tensor *w, *b; int stride, pad, groups; } mdl_conv;
typedef struct mdl_mlp { mdl_linear fc1, fc2; sf_act act; float drop; } mdl_mlp;

/* Token-mixing attention of a ViT / XCiT block: msa, sima, xca or soft. */
typedef struct mdl_attn {
    sf_attn_kind kind;
    sf_attn_norm norm;          /* sima: l1 / l2 / none; soft: none / symmetric */
    int H;
    mdl_linear qkv, proj;       /* qkv (3C, C) with output order [3][H][D] */
    mdl_linear q, v;            /* soft only, instead of qkv: (C, C) each (K = Q) */
    mdl_ln lnorm;               /* soft only: the landmarks' LN(D) ("Qnorm_act.0") */
    int grid_h, grid_w;         /* soft only: the patch grid after the viz_skip leading tokens */
    sf_tensor *temperature;     /* xca only: (H, 1, 1) */
    float drop;                 /* proj dropout */
    int record_viz;             /* last SimA block: record Q-hat/K-hat token norms */
    int viz_skip;               /* leading tokens excluded from the record (1 = cls) */
} mdl_attn;


/* ---- the model ---- */
struct sf_model {
    sf_model_cfg cfg;
    void *family;               /* vit_model / xcit_model / soft_model / cvt_model (family files) */
    /* SimA token norms of the last SimA block, batch element 0 (sfvit viz): Q-hat's on the
     * viz_h x viz_w grid, K-hat's on viz_kh x viz_kw (the same grid but in CvT, whose keys
     * come from a stride-2 convolution of the query grid) */
    float *viz_q, *viz_k;       // (viz_n), (viz_kn)
    int viz_n, viz_h, viz_w, viz_kn, viz_kh, viz_kw, viz_valid;
};

/* ---- registration (common.c) ---- */
/* Registers "<prefix><name>" with the reference flags: trainable unless `flags_extra` says
 * otherwise; SF_PARAM_DECAY when `decay` (sfvit mask: only Linear/Conv weights);
 * SF_PARAM_DECAY_OFFICIAL by timm's rule (ndim > 1, not *.bias, not in the family's
 * no_weight_decay set). */
sf_tensor *mdl_param(sf_params *ps, sf_family fam, const char *prefix, const char *name,
                     int ndim, const int *shape, int trainable, int decay, sf_init init,
                     float arg);
mdl_linear mdl_linear_add(sf_params *ps, sf_family fam, const char *prefix, int out, int in,
                          int bias);
mdl_ln mdl_ln_add(sf_params *ps, sf_family fam, const char *prefix, int C, float eps);
mdl_bn mdl_bn_add(sf_params *ps, sf_family fam, const char *prefix, int C);
/* Conv2d weight (out, in/groups, k, k) at ku(fan_in) and, if bias, bias at ku(fan_in). */
mdl_conv mdl_conv_add(sf_params *ps, sf_family fam, const char *prefix, int out, int in, int k,
                      int stride, int pad, int groups, int bias);
mdl_mlp mdl_mlp_add(sf_params *ps, sf_family fam, const char *prefix, int C, int hidden,
                    sf_act act, float drop);
/* prefix + "qkv", "proj" (+ "temperature" for xca; soft: "q", "v", "Qnorm_act.0", "proj"). */
mdl_attn mdl_attn_add(sf_params *ps, sf_family fam, const char *prefix, int C, int H,
                      sf_attn_kind kind, sf_attn_norm norm, float drop);

/* ---- forwards (common.c) ---- */
sf_tensor *mdl_linear_fwd(sf_ctx *g, const mdl_linear *l, sf_tensor *x);
/* The same for an x nothing reads afterwards (sf_linear_last_use): its memory is reused, and
 * in bf16 only its bf16 copy is kept for the backward. */
sf_tensor *mdl_linear_last_use(sf_ctx *g, const mdl_linear *l, sf_tensor *x);
sf_tensor *mdl_ln_fwd(sf_ctx *g, const mdl_ln *l, sf_tensor *x);
sf_tensor *mdl_bn_fwd(sf_ctx *g, const mdl_bn *l, sf_tensor *x);
sf_tensor *mdl_conv_fwd(sf_ctx *g, const mdl_conv *l, sf_tensor *x);
/* For an x nothing reads afterwards and that is no view of another tensor (sf_conv2d_last_use). */
sf_tensor *mdl_conv_last_use(sf_ctx *g, const mdl_conv *l, sf_tensor *x);
/* The two take x over: the caller passes a tensor nothing else reads (a LayerNorm output),
 * and its data may be gone afterwards (mdl_linear_last_use). */
sf_tensor *mdl_mlp_fwd(sf_ctx *g, const mdl_mlp *l, sf_tensor *x);
/* x (B, N, C) -> (B, N, C). */
sf_tensor *mdl_attn_fwd(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *x);
/* mdl_attn_fwd(LayerNorm(x)) and mdl_mlp_fwd(LayerNorm(x)), a pre-norm block's two halves:
 * in bf16 the norm's output is made in bf16 alone where one linear layer is its only reader. */
sf_tensor *mdl_norm_attn_fwd(sf_ctx *g, sf_model *m, const mdl_ln *ln, const mdl_attn *a, sf_tensor *x);
sf_tensor *mdl_norm_mlp_fwd(sf_ctx *g, const mdl_ln *ln, const mdl_mlp *l, sf_tensor *x);
/* Part `part` of x (B, N, parts·C) split into H heads (B, H, N, D), normalized over tokens
 * by norm (SimA's q̂, k̂: l1 or l2 in the same pass as the split; none: the plain split). */
sf_tensor *mdl_heads_norm(sf_ctx *g, sf_tensor *x, int parts, int part, int H, sf_attn_norm norm, float eps);
/* (B, C, h, w) <-> (B, h*w, C), a copy; x is handed over: its memory is given back once copied.
 * Every caller's x is read by nothing else afterwards, and the op that made it does not read
 * its output in its backward (a convolution, BatchNorm, LayerNorm, ReLU, a residual sum or a
 * slice read their inputs or nothing): a (B, N, C) activation a block less to keep, in every
 * precision (the permute's backward reads no data either). */
sf_tensor *mdl_tokens_from_image_last_use(sf_ctx *g, sf_tensor *x);
sf_tensor *mdl_image_from_tokens_last_use(sf_ctx *g, sf_tensor *x, int h, int w);
/* x + DropPath(y) (drop path skipped when p == 0). */
sf_tensor *mdl_residual(sf_ctx *g, sf_tensor *x, sf_tensor *y, float p);
/* Records per-token l2 norms of q-hat / k-hat (B, H, N, D), element 0, tokens >= skip. */
void mdl_viz_record(sf_model *m, const sf_tensor *q, const sf_tensor *k, int skip);
/* The attention kind of block i (cfg->block_attn override or cfg->attn). */
sf_attn_kind mdl_block_attn(const sf_model_cfg *cfg, int i);
/* The model's blocks: model.depth, or in the pyramids (SOFT, CvT) the sum of model.depths
 * (their model.depth is the named size's total, not updated when a config sets depths). */
int mdl_block_count(const sf_model_cfg *cfg);
/* CvT's geometry and SimA order (cvt.c), shared with its ONNX graph (onnx.c): the stages'
 * token-embedding convolutions, a stage's grid side after its embedding, the key/value grid
 * side of a query grid side, and the product order for Nq query and Nk key/value tokens. */
#define MDL_CVT_STAGES 3
extern const int mdl_cvt_embed_k[MDL_CVT_STAGES], mdl_cvt_embed_stride[MDL_CVT_STAGES],
    mdl_cvt_embed_pad[MDL_CVT_STAGES];
int mdl_cvt_embed_out(int side, int s);
int mdl_cvt_kv_side(int side);
sf_sima_order mdl_cvt_sima_order(sf_sima_order o, int Nq, int Nk, int D);

/* ---- SOFT's core (soft.c), shared by the pyramid's layers and the ViT's soft blocks ---- */
/* Landmarks per side with fixed landmarks: min(sqrt(num_landmarks), side). */
int mdl_soft_landmark_side(const sf_model_cfg *c, int side);
/* P (hs·ws, skip + Hs·Ws): adaptive average pooling of an Hs x Ws token grid to hs x ws (PyTorch
 * adaptive_avg_pool2d bins), the `skip` leading tokens (cls) getting weight 0. */
void mdl_soft_pool_matrix(float *P, int Hs, int Ws, int hs, int ws, int skip);
/* Q (B, H, skip + Hs·Ws, D) -> fixed landmarks (B, H, hs·ws, D) before their LN + GELU. */
sf_tensor *mdl_soft_pool_landmarks(sf_ctx *g, sf_tensor *Q, int Hs, int Ws, int hs, int ws, int skip);
/* (K1 Z)(K1ᵀ V) with K1 = gauss(Q, L), Z = NR(gauss(L, L)) (SOFT++: symnorm):
 * Q, V (B, H, n, D), L (B, H, M, D) -> (B, H, n, D). */
sf_tensor *mdl_soft_attend(sf_ctx *g, const sf_model_cfg *c, sf_tensor *Q, sf_tensor *V, sf_tensor *L);

/* ---- `sfvit info` (info.c): each family adds its rows ---- */
typedef struct mdl_info_row {
    char name[48];      // "blocks.3"
    char part[32];      // "blocks": the per-part summary groups rows by this
    char prefix[48];    // parameter-name prefix counted for this row
    char in[40], out[40];
    char note[48];
    size_t params;
    double macs, nr_macs, softmax_exp, kernel_exp, gelu_erf, gelu_tanh, gelu_sigmoid;
} mdl_info_row;

typedef struct mdl_info_table {
    mdl_info_row *rows;
    int n, cap;
    sf_sima_order sima_used;  // resolved order of the SimA blocks (AUTO if none)
    int sima_N, sima_D;
    int sima_Nk;              // key/value tokens when they differ from the query tokens (CvT), else 0
} mdl_info_table;

mdl_info_row *mdl_info_row_add(mdl_info_table *t, const char *part, const char *prefix, const char *name);
void mdl_shape3(char *buf, int a, int b, int c);  // "(a, b, c)" into a row's in/out
void mdl_shape2(char *buf, int a, int b);
/* A ViT/XCiT block's token mixing of kind k on N tokens, from the kind's cost function. */
void mdl_info_mixing(mdl_info_table *t, mdl_info_row *r, const sf_model_cfg *c, sf_attn_kind k, int N);
/* An MLP of width C on N tokens (MACs, GELU count). */
void mdl_info_mlp(mdl_info_row *r, const sf_model_cfg *c, int N, int C);
/* The final norm on norm_tokens tokens of width C, then the classifier on one token. */
void mdl_info_norm_head(mdl_info_table *t, const sf_model_cfg *c, int norm_tokens, int C);

/* ---- the tables (models/kinds.c; model.h has the lists) ---- */
/* A family: a struct of functions defined in the family's own file as mdl_family_<name>. */
typedef struct mdl_family_def {
    const char *title;  /* in messages: "model.attn 'xca' is not available in a ViT" */
    int sima_record;    /* its SimA blocks record token norms for `sfvit viz` (mdl_viz_record) */
    /* the family's own constraints, after the common ones (mdl_bad for messages) */
    int (*check)(const sf_model_cfg *c, const char *where);
    /* registers the parameters (and returns -1 with a message for a config it cannot build) */
    int (*build)(sf_model *m, sf_params *ps);
    sf_tensor *(*forward)(sf_ctx *g, sf_model *m, sf_tensor *images);  // images -> logits
    void (*free)(sf_model *m);
    void (*info_rows)(mdl_info_table *t, const sf_model_cfg *c);
} mdl_family_def;

/* The cost `sfvit info` shows for one block's token mixing. */
typedef struct mdl_mix_cost {
    double macs, softmax_exp, kernel_exp, nr_macs, gelu_erf;
    char note[48];
    sf_sima_order sima_order;  // SimA: the order it resolves to
} mdl_mix_cost;

/* An attention kind, defined next to its token mixing (common.c) as mdl_attn_<name>. */
typedef struct mdl_attn_def {
    unsigned hosts;   /* bit (1u << family) for each family whose blocks take this kind */
    unsigned norms;   /* bit (1u << norm) for each model.attn_norm it takes; 0: it has none */
    int temperature;  /* registers "<prefix>temperature" (H, 1, 1) before qkv (XCA) */
    int q_v;          /* registers "q", "v" (C, C) and "Qnorm_act.0" instead of qkv; k = q (SOFT) */
    int token_norm;   /* q and k come to mix normalized over tokens by model.attn_norm (SimA) */
    /* q, k, v (B, H, N, D) -> o (B, H, N, D) in a ViT/XCiT block (mdl_attn_fwd) */
    sf_tensor *(*mix)(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *q, sf_tensor *k, sf_tensor *v);
    /* MACs of the products (not the Linears) and counters, N tokens of a ViT/XCiT block */
    void (*cost)(const sf_model_cfg *c, int N, mdl_mix_cost *out);
    /* the kind's own config constraints (NULL: none), after hosts and norms */
    int (*check)(const sf_model_cfg *c, const char *where);
} mdl_attn_def;

#define MDL_DECLARE_FAMILY(ID, name) extern const mdl_family_def mdl_family_##name;
#define MDL_DECLARE_ATTN(ID, name) extern const mdl_attn_def mdl_attn_##name;
SF_FAMILIES(MDL_DECLARE_FAMILY)
SF_ATTN_KINDS(MDL_DECLARE_ATTN)
#undef MDL_DECLARE_FAMILY
#undef MDL_DECLARE_ATTN
/* Indexed by sf_family / sf_attn_kind (generated from the lists, so complete). */
extern const mdl_family_def *const mdl_families[SF_FAMILY_COUNT];
extern const mdl_attn_def *const mdl_attn_defs[SF_ATTN_COUNT];

/* "<where><message>" as one sf_error; returns -1. */
int mdl_bad(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The checks shared by the token families (ViT, XCiT): depth, width and heads, patch grid,
 * the per-block kinds. */
int mdl_check_tokens(const sf_model_cfg *c, const char *where);
/* model.block_attn of a model with `blocks` blocks: empty or one kind per block, each taken by
 * the family with the config's norm (the kind table). */
int mdl_check_block_kinds(const sf_model_cfg *c, int blocks, const char *where);

/* CvT's presets (cvt_13, cvt_21; models/kinds.c): its sizes on the common defaults. 0, or -1
 * for another name. */
int mdl_cvt_defaults(sf_model_cfg *c, const char *name);

/* XCiT's 64 Fourier position features of an Hp x Wp grid: out (64, Hp, Wp). */
void mdl_xcit_fourier(float *out, int Hp, int Wp);


#endif
