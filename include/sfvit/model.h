/* model.h — model configuration, builders and the forward pass for every family:
 * DeiT/ViT, XCiT, SOFT pyramids, CvT (models/), with attention kinds msa, xca, sima, soft.
 * Parameter names are the official/timm state_dict keys (docs/models.md).
 */
#ifndef SFVIT_MODEL_H
#define SFVIT_MODEL_H

#include "sfvit/ops.h"

/* One list per kind of thing. Each list gives the enum (plus a _COUNT), the names that
 * configs and `sfvit info` use (sf_*_names, NULL-terminated) and, in models/kinds.c, the
 * table of what each entry does: a family is a struct of functions defined in its own file
 * (mdl_family_<name>: check, build, forward, free, info rows), an attention kind a struct
 * (mdl_attn_<name>: where it may be used, which norms it takes, its token mixing and cost).
 * An entry without its struct does not link; docs/architecture.md has the recipes. */
#define SF_FAMILIES(X) X(VIT, vit) X(XCIT, xcit) X(SOFT, soft) X(CVT, cvt)
#define SF_ATTN_KINDS(X) X(MSA, msa) X(XCA, xca) X(SIMA, sima) X(SOFT, soft)
/* sima: l1 / l2 / none; soft: none (SOFT) / symmetric (SOFT++) */
#define SF_ATTN_NORMS(X) X(L1, l1) X(L2, l2) X(NONE, none) X(SYMMETRIC, symmetric)
#define SF_ACTS(X) X(GELU, gelu) X(RELU, relu) X(QUICK_GELU, quick_gelu)  /* quick_gelu: x·sigmoid(1.702 x), CvT */
#define SF_POOLS(X) X(TOKEN, token) X(AVG, avg)
/* SOFT landmarks: stride (the official learned stride-r conv of Q) or fixed (adaptive average
 * pooling of Q's token grid to model.num_landmarks; m fixed while N grows: the linear regime) */
#define SF_LANDMARK_KINDS(X) X(STRIDE, stride) X(FIXED, fixed)

#define SF_ENUM_ITEM_FAMILY(ID, name) SF_FAMILY_##ID,
#define SF_ENUM_ITEM_ATTN(ID, name) SF_ATTN_##ID,
#define SF_ENUM_ITEM_NORM(ID, name) SF_NORM_##ID,
#define SF_ENUM_ITEM_ACT(ID, name) SF_ACT_##ID,
#define SF_ENUM_ITEM_POOL(ID, name) SF_POOL_##ID,
#define SF_ENUM_ITEM_LANDMARKS(ID, name) SF_LANDMARKS_##ID,
typedef enum sf_family { SF_FAMILIES(SF_ENUM_ITEM_FAMILY) SF_FAMILY_COUNT } sf_family;
typedef enum sf_attn_kind { SF_ATTN_KINDS(SF_ENUM_ITEM_ATTN) SF_ATTN_COUNT } sf_attn_kind;
typedef enum sf_attn_norm { SF_ATTN_NORMS(SF_ENUM_ITEM_NORM) SF_NORM_COUNT } sf_attn_norm;
typedef enum sf_act { SF_ACTS(SF_ENUM_ITEM_ACT) SF_ACT_COUNT } sf_act;
typedef enum sf_global_pool { SF_POOLS(SF_ENUM_ITEM_POOL) SF_POOL_COUNT } sf_global_pool;
typedef enum sf_landmarks { SF_LANDMARK_KINDS(SF_ENUM_ITEM_LANDMARKS) SF_LANDMARKS_COUNT } sf_landmarks;

extern const char *const sf_family_names[SF_FAMILY_COUNT + 1];
extern const char *const sf_attn_names[SF_ATTN_COUNT + 1];
extern const char *const sf_attn_norm_names[SF_NORM_COUNT + 1];
extern const char *const sf_act_names[SF_ACT_COUNT + 1];
extern const char *const sf_pool_names[SF_POOL_COUNT + 1];
extern const char *const sf_landmarks_names[SF_LANDMARKS_COUNT + 1];

#define SF_MAX_BLOCKS 64

typedef struct sf_model_cfg {
    char name[64];            /* deit_small, xcit_small_12_p16, soft_tiny, cvt_13, ... or "" (custom vit) */
    sf_family family;
    int img_size, in_chans, num_classes;
    /* ViT / XCiT */
    int patch_size, embed_dim, depth, num_heads;
    float mlp_ratio;
    /* SOFT and CvT (per stage) */
    int num_stages;           /* SOFT 4, CvT 3 */
    int embed_dims[4], depths[4], stage_heads[4];
    int nr_iters;             /* Newton–Raphson iterations (20) */
    int nr_init;              /* sf_nr_init */
    sf_landmarks soft_landmarks; /* stride (official conv, pyramid only) or fixed (pooling) */
    int num_landmarks;        /* fixed: m, a perfect square (49); sqrt(m) per side, capped by the grid */
    /* attention */
    sf_attn_kind attn;
    sf_attn_norm attn_norm;
    sf_sima_order sima_order;
    int n_block_attn;         /* per-block override list (0 = none): block_attn[i] for block i */
    sf_attn_kind block_attn[SF_MAX_BLOCKS];
    sf_act act;
    int lpi;                  /* XCiT local patch interaction */
    float layer_scale_init;   /* XCiT eta */
    int cls_attn_layers;      /* XCiT class-attention layers (2) */
    float drop_path_rate, drop_rate;
    char init_from[1024];     /* fine-tune from this checkpoint ("" = none) */
    sf_global_pool global_pool; /* ViT classifier input: the cls token (DeiT) or the mean of the
                                 patch tokens (timm global_pool='avg'); the cls token exists either way */
} sf_model_cfg;

/* Fills cfg with the defaults of a named model ("" = the custom small ViT: DeiT-Tiny's
 * sizes, which a config refines key by key); returns -1 (and prints the known names) for an
 * unknown name. */
int sf_model_defaults(sf_model_cfg *cfg, const char *name);
/* A pyramid's (SOFT, CvT) single-width keys follow its per-stage lists: model.depth becomes
 * the total of model.depths, model.embed_dim and model.num_heads the last stage's. Nothing
 * builds from them; they are what `sfvit config` and a run's config.yaml show, so a config
 * that sets the lists does not print the preset's sizes. Other families are left alone. */
void sf_model_derive(sf_model_cfg *cfg);
/* Names of every registered model (the presets of models/kinds.c), NULL-terminated. */
extern const char *const sf_model_names[];

/* The one model validator: every constraint of a config on its family, attention kinds and
 * sizes. Prints the first failure as "<where>model.KEY ...", where = e.g. "file.yaml: " (the
 * config layer's part of the message) or NULL; returns 0 or -1. sf_model_build and `sfvit
 * info` call it too. */
int sf_model_check(const sf_model_cfg *cfg, const char *where);

typedef struct sf_model sf_model;

/* Registers every parameter in ps (names and shapes as docs/models.md lists them). Call
 * sf_params_alloc() and sf_model_init() afterwards. Returns NULL and prints why on a
 * config the family cannot build. */
sf_model *sf_model_build(const sf_model_cfg *cfg, sf_params *ps);
/* Spec init schemes (trunc normal 0.02, kaiming uniform, ones/zeros, eta). */
void sf_model_init(sf_model *m, sf_params *ps, sf_rng *rng);
void sf_model_free(sf_model *m);
/* images (B, in_chans, img, img) -> logits (B, num_classes). g->training selects dropout,
 * drop-path and BatchNorm batch statistics. */
sf_tensor *sf_model_forward(sf_ctx *g, sf_model *m, sf_tensor *images);
const sf_model_cfg *sf_model_config(const sf_model *m);

/* SimA visualization: after a forward, the per-token l2 norms (mean over heads) of Q-hat and
 * K-hat of the last SimA block for the first image, row-major over their token grids (cls
 * token left out); q_grid and k_grid get the grids' (h, w): one grid, but in CvT, whose keys
 * are on the stride-2 grid of its queries. With both norms NULL only the grids are given.
 * Returns -1 if the model has no SimA block or has not run a forward. */
int sf_model_sima_token_norms(sf_model *m, float *q_norms, float *k_norms, int q_grid[2], int k_grid[2]);

/* `sfvit info`: prints the block table, params per part and total, MACs per part and
 * total, exp() counts and the SimA order. */
void sf_model_info(const sf_model_cfg *cfg, FILE *f);
/* Totals used by tests: trainable parameters and forward MACs per image. */
size_t sf_model_param_count(const sf_model_cfg *cfg);
double sf_model_macs(const sf_model_cfg *cfg);
/* The model's largest product, (M x K) (K x N): its (first stage's) MLP's first layer on all
 * tokens of a batch. sfvit bench measures the sgemm and bf16 rates on it. */
void sf_model_largest_product(const sf_model_cfg *cfg, int batch, int *M, int *N, int *K);
/* exp() calls per image (softmax and SOFT kernel), as `sfvit info` counts them. */
double sf_model_exp_count(const sf_model_cfg *cfg);

/* SimA order used by every SimA block from the next forward on (eval-time switch; the
 * class-attention row always uses (q̂₀K̂ᵀ)V, its cheaper order). */
void sf_model_set_sima_order(sf_model *m, sf_sima_order order);
/* The token-norm record above is of batch element 0: q_norms and k_norms hold
 * grid_h*grid_w floats each. With both buffers NULL only the grid is returned (0), so a
 * caller can size its buffers before the forward. */

/* Checkpoint loading at another image size (deit main.py --finetune): resizes a ViT
 * pos_embed (1, 1+src_grid², C) to (1, 1+dst_grid², C); bicubic, align_corners=false, the
 * cls row copied. Returns 0, or -1 with a message on bad sizes. */
int sf_vit_interpolate_pos_embed(const float *src, int src_grid, float *dst, int dst_grid, int C);

/* ---- ONNX export (models/onnx.c) ---- */
typedef struct sf_onnx_stats {
    int nodes, initializers;
    size_t bytes;             /* the file */
    int n_op_types;
    char op_types[48][32];    /* op types in first-use order */
    int op_counts[48];
} sf_onnx_stats;

/* Writes the model of cfg with the weights in ps (allocated, loaded) to path as an ONNX
 * model (opset 17, input "images" (batch, C, S, S), output "logits" (batch, K)), atomically.
 * Families without an ONNX form yet are refused with a message naming them. st may be NULL. */
int sf_model_export_onnx(const sf_model_cfg *cfg, sf_params *ps, const char *path, sf_onnx_stats *st);
/* Nodes of one op type in an export (0 if none). */
int sf_onnx_stats_count(const sf_onnx_stats *st, const char *op_type);

#endif
