/* models_internal.h — pieces shared by the model builders (the .c files of models/): parameter
 * registration with the reference names, init schemes and both weight-decay masks; the
 * module structs (Linear, LayerNorm, BatchNorm, Conv, Mlp, attention) and their forwards;
 * the per-family build/forward entry points used by registry.c. Not a public header.
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

/* Token-mixing attention of a ViT / XCiT block: msa, sima or xca. */
typedef struct mdl_attn {
    sf_attn_kind kind;
    sf_attn_norm norm;          /* sima: l1 / l2 / none; the order is m->cfg.sima_order */
    int H;
    mdl_linear qkv, proj;       /* qkv (3C, C) with output order [3][H][D] */
    sf_tensor *temperature;     /* xca only: (H, 1, 1) */
    float drop;                 /* proj dropout */
    int record_viz;             /* last SimA block: record Q-hat/K-hat token norms */
    int viz_skip;               /* leading tokens excluded from the record (1 = cls) */
} mdl_attn;

/* ---- `sfvit info` rows (info.c builds the table; a family may add its own rows) ---- */
typedef struct info_row {
    char name[48];      // "blocks.3"
    char part[32];      // "blocks": the per-part summary groups rows by this
    char prefix[48];    // parameter-name prefix counted for this row
    char in[40], out[40];
    char note[48];
    size_t params;
    double macs, nr_macs, softmax_exp, kernel_exp, gelu_erf, gelu_tanh, gelu_sigmoid;
} info_row;

typedef struct info_table {
    info_row *rows;
    int n, cap;
    sf_sima_order sima_used;  // resolved order of the SimA blocks (AUTO if none)
    int sima_N, sima_D;
    int sima_Nk;              // key/value tokens when they differ from the query tokens (CvT), else 0
} info_table;

/* Appends a zeroed row; its parameters are those whose names start with prefix. */
info_row *mdl_info_row_add(info_table *t, const char *part, const char *prefix, const char *name);

/* ---- the model ---- */
struct sf_model {
    sf_model_cfg cfg;
    void *family;               /* vit_model / xcit_model / soft_model / cvt_model (family files) */
    /* SimA token norms of the last SimA block, batch element 0 (sfvit viz) */
    float *viz_q, *viz_k;       // (N_patches) each
    int viz_n, viz_h, viz_w, viz_valid;
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
/* prefix + "qkv", "proj" (+ "temperature" for xca). */
mdl_attn mdl_attn_add(sf_params *ps, sf_family fam, const char *prefix, int C, int H,
                      sf_attn_kind kind, sf_attn_norm norm, float drop);

/* ---- forwards (common.c) ---- */
sf_tensor *mdl_linear_fwd(sf_ctx *g, const mdl_linear *l, sf_tensor *x);
sf_tensor *mdl_ln_fwd(sf_ctx *g, const mdl_ln *l, sf_tensor *x);
sf_tensor *mdl_bn_fwd(sf_ctx *g, const mdl_bn *l, sf_tensor *x);
sf_tensor *mdl_conv_fwd(sf_ctx *g, const mdl_conv *l, sf_tensor *x);
sf_tensor *mdl_mlp_fwd(sf_ctx *g, const mdl_mlp *l, sf_tensor *x);
/* x (B, N, C) -> (B, N, C). */
sf_tensor *mdl_attn_fwd(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *x);
/* Normalization of q or k over tokens for SimA. */
sf_tensor *mdl_sima_norm(sf_ctx *g, sf_tensor *x, sf_attn_norm norm, float eps);
/* (B, C, h, w) <-> (B, h*w, C). */
sf_tensor *mdl_tokens_from_image(sf_ctx *g, sf_tensor *x);
sf_tensor *mdl_image_from_tokens(sf_ctx *g, sf_tensor *x, int h, int w);
/* x + DropPath(y) (drop path skipped when p == 0). */
sf_tensor *mdl_residual(sf_ctx *g, sf_tensor *x, sf_tensor *y, float p);
/* Records per-token l2 norms of q-hat / k-hat (B, H, N, D), element 0, tokens >= skip. */
void mdl_viz_record(sf_model *m, const sf_tensor *q, const sf_tensor *k, int skip);
/* The attention kind of block i (cfg->block_attn override or cfg->attn). */
sf_attn_kind mdl_block_attn(const sf_model_cfg *cfg, int i);
const char *mdl_attn_name(sf_attn_kind k);
const char *mdl_norm_name(sf_attn_norm n);
const char *mdl_family_name(sf_family f);

/* ---- families ---- */
/* Each build registers parameters (and returns -1 with a message for a config the family
 * cannot build); forward maps images to logits. */
int vit_build(sf_model *m, sf_params *ps);
sf_tensor *vit_forward(sf_ctx *g, sf_model *m, sf_tensor *images);
void vit_free(sf_model *m);
int xcit_build(sf_model *m, sf_params *ps);
sf_tensor *xcit_forward(sf_ctx *g, sf_model *m, sf_tensor *images);
void xcit_free(sf_model *m);
int soft_build(sf_model *m, sf_params *ps);
sf_tensor *soft_forward(sf_ctx *g, sf_model *m, sf_tensor *images);
void soft_free(sf_model *m);

/* A family given as one table of entry points (CvT, models/cvt.c): the registry and `sfvit
 * info` call these and nothing else of the family. */
typedef struct mdl_family_ops {
    sf_family family;
    const char *name;                                    /* "cvt" */
    const char *const *models;                           /* its model names, NULL-terminated */
    int (*defaults)(sf_model_cfg *c, const char *name);  /* fills the sizes of a named model */
    int (*check)(const sf_model_cfg *c);                 /* the family's config constraints */
    int (*build)(sf_model *m, sf_params *ps);
    sf_tensor *(*forward)(sf_ctx *g, sf_model *m, sf_tensor *images);
    void (*free)(sf_model *m);
    void (*info_rows)(info_table *t, const sf_model_cfg *c);
} mdl_family_ops;
extern const mdl_family_ops mdl_cvt_family;

/* XCiT's 64 Fourier position features of an Hp x Wp grid: out (64, Hp, Wp). */
void mdl_xcit_fourier(float *out, int Hp, int Wp);

/* Checks a config for the family's constraints (called by build and info). */
int mdl_check_cfg(const sf_model_cfg *cfg);

#endif
