/* vit.c — DeiT / ViT (timm 0.3 VisionTransformer as used by facebookresearch/deit)
 * with a per-block choice of token mixing: softmax MSA, SimA or SOFT (q and v Linears, K = Q,
 * fixed landmarks pooled from the patch grid, no V conv: soft.c mdl_attn_soft).
 *
 * Forward: conv P×P stride P → tokens → [cls; x] + pos_embed → L pre-norm blocks
 * (x += DropPath(attn(LN1 x)); x += DropPath(mlp(LN2 x))) → LN → token 0 (or, with
 * global_pool avg, the mean of the patch tokens) → head.
 * Drop path of block i is p·i/(L−1) (linear over depth).
 *
 * Deliberately not here: XCA in a ViT block (XCA belongs to XCiT, whose blocks also carry
 * LPI and layer scale; a ViT with attn=xca is rejected at build), distillation tokens,
 * interpolating pos_embed inside the forward (the model runs at cfg->img_size; resizing a
 * checkpoint's pos_embed is sf_vit_interpolate_pos_embed, a loading step as in deit's
 * `--finetune`).
 *
 * Dimension legend: B batch, N tokens (patches + cls), C channels, H heads, D head dim.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vit_block {
    mdl_ln norm1, norm2;
    mdl_attn attn;
    mdl_mlp mlp;
    float drop_path;
} vit_block;

typedef struct vit_model {
    sf_tensor *cls_token;   // (1, 1, C)
    sf_tensor *pos_embed;   // (1, N+1, C)
    mdl_conv patch;         // (C, in_chans, P, P)
    vit_block *blocks;      // (L)
    mdl_ln norm;
    mdl_linear head;        // (K, C)
    int grid;               // patches per side
} vit_model;

static int vit_build(sf_model *m, sf_params *ps) {
    const sf_model_cfg *c = &m->cfg;
    const sf_family F = SF_FAMILY_VIT;
    const int C = c->embed_dim, L = c->depth, P = c->patch_size, G = c->img_size / P;
    const int hidden = (int)(C * c->mlp_ratio);
    vit_model *v = sf_calloc(1, sizeof(*v));
    m->family = v;
    v->grid = G;
    v->cls_token = mdl_param(ps, F, "", "cls_token", 3, (int[]){1, 1, C}, 1, 0,
                             SF_INIT_TRUNC_NORMAL, 0.02f);
    v->pos_embed = mdl_param(ps, F, "", "pos_embed", 3, (int[]){1, G * G + 1, C}, 1, 0,
                             SF_INIT_TRUNC_NORMAL, 0.02f);
    v->patch = mdl_conv_add(ps, F, "patch_embed.proj", C, c->in_chans, P, P, 0, 1, 1);
    v->blocks = sf_calloc((size_t)L, sizeof(vit_block));
    int last_sima = -1;
    for (int i = 0; i < L; i++)
        if (mdl_block_attn(c, i) == SF_ATTN_SIMA) last_sima = i;
    for (int i = 0; i < L; i++) {
        char p[128];
        vit_block *b = &v->blocks[i];
        snprintf(p, sizeof p, "blocks.%d.norm1", i);
        b->norm1 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.attn.", i);
        b->attn = mdl_attn_add(ps, F, p, C, c->num_heads, mdl_block_attn(c, i), c->attn_norm,
                               c->drop_rate);
        b->attn.record_viz = (i == last_sima);
        b->attn.viz_skip = 1;  // cls token excluded from the heat map and the soft landmarks
        b->attn.grid_h = b->attn.grid_w = G;
        snprintf(p, sizeof p, "blocks.%d.norm2", i);
        b->norm2 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.mlp.", i);
        b->mlp = mdl_mlp_add(ps, F, p, C, hidden, c->act, c->drop_rate);
        b->drop_path = L > 1 ? c->drop_path_rate * (float)i / (float)(L - 1) : 0.0f;
    }
    v->norm = mdl_ln_add(ps, F, "norm", C, 1e-6f);
    v->head = mdl_linear_add(ps, F, "head", c->num_classes, C, 1);
    m->viz_h = m->viz_w = m->viz_kh = m->viz_kw = G;
    return 0;
}

static void vit_free(sf_model *m) {
    vit_model *v = m->family;
    if (!v) return;
    free(v->blocks);
    free(v);
}

static sf_tensor *vit_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    /* a learned pos_embed fixes the grid; resize a checkpoint with sf_vit_interpolate_pos_embed */
    char shape_buf[64];
    SF_ASSERT(images->shape[2] == m->cfg.img_size, "ViT %s built for %d², got images %s", m->cfg.name,
              m->cfg.img_size, sf_shape_str(images, shape_buf, sizeof shape_buf));

    const sf_model_cfg *c = &m->cfg;
    vit_model *v = m->family;
    const int B = images->shape[0], C = c->embed_dim;
    sf_tensor *x = mdl_tokens_from_image_last_use(g, mdl_conv_fwd(g, &v->patch, images));  // (B, N, C)
    x = sf_concat_tokens(g, v->cls_token, x);                                  // (B, N+1, C)
    x = sf_add_broadcast(g, x, v->pos_embed);
    if (c->drop_rate > 0) x = sf_dropout(g, x, c->drop_rate);
    for (int i = 0; i < c->depth; i++) {
        const vit_block *b = &v->blocks[i];
        sf_tensor *in = x;
        sf_scope_begin(g);  // evaluation: the block's intermediates are scratch
        x = mdl_residual(g, x, mdl_norm_attn_fwd(g, m, &b->norm1, &b->attn, x),
                         b->drop_path);
        x = mdl_residual(g, x, mdl_norm_mlp_fwd(g, &b->norm2, &b->mlp, x), b->drop_path);
        x = sf_scope_end(g, x, in);
    }
    x = mdl_ln_fwd(g, &v->norm, x);
    sf_tensor *pooled;                                                              // (B, C)
    if (c->global_pool == SF_POOL_AVG) /* mean of the patch tokens, cls excluded (timm 'avg') */
        pooled = sf_mean_tokens(g, sf_slice_tokens(g, x, 1, x->shape[1] - 1));
    else
        pooled = sf_reshape(g, sf_slice_tokens(g, x, 0, 1), 2, (int[]){B, C});
    return mdl_linear_fwd(g, &v->head, pooled);                                     // (B, K)
}

/* ---- checkpoint helper: bicubic resize of pos_embed (deit main.py --finetune) ---- */

/* PyTorch's cubic convolution with A = −0.75 (upsample_bicubic2d). */
static double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

/* Row weights (dst, src) of a 1-D bicubic resize with align_corners=false; taps clamped at
 * the borders as PyTorch does. */
static void bicubic_matrix(double *W, int src, int dst) {
    const double A = -0.75, scale = (double)src / dst;
    memset(W, 0, (size_t)dst * src * sizeof(double));
    for (int i = 0; i < dst; i++) {
        double s = scale * (i + 0.5) - 0.5;
        int i0 = (int)floor(s);
        double t = s - i0;
        double w[4] = {cubic2(t + 1, A), cubic1(t, A), cubic1(1 - t, A), cubic2(2 - t, A)};
        for (int k = 0; k < 4; k++) {
            int j = i0 - 1 + k;
            j = j < 0 ? 0 : (j > src - 1 ? src - 1 : j);
            W[(size_t)i * src + j] += w[k];
        }
    }
}

int sf_vit_interpolate_pos_embed(const float *src, int src_grid, float *dst, int dst_grid, int C) {
    if (src_grid <= 0 || dst_grid <= 0 || C <= 0)
        return sf_error("pos_embed interpolation: grids %d -> %d, C %d", src_grid, dst_grid, C);
    const int S = src_grid, T = dst_grid;
    memcpy(dst, src, (size_t)C * sizeof(float));  // cls position kept
    double *W = sf_malloc((size_t)T * S * sizeof(double));          // (T, S)
    double *tmp = sf_calloc((size_t)T * S * C, sizeof(double));     // (T rows, S cols, C)
    bicubic_matrix(W, S, T);
    const float *g = src + C;  // (S, S, C) grid part, row-major over (y, x)
    /* separable: rows first, then columns (same as PyTorch's 2-D kernel: product weights) */
    for (int i = 0; i < T; i++)
        for (int y = 0; y < S; y++) {
            double w = W[(size_t)i * S + y];
            if (w == 0) continue;
            for (int x = 0; x < S; x++)
                for (int ch = 0; ch < C; ch++)
                    tmp[((size_t)i * S + x) * C + ch] += w * g[((size_t)y * S + x) * C + ch];
        }
    float *o = dst + C;  // (T, T, C)
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            for (int ch = 0; ch < C; ch++) {
                double s = 0;
                for (int x = 0; x < S; x++) s += W[(size_t)j * S + x] * tmp[((size_t)i * S + x) * C + ch];
                o[((size_t)i * T + j) * C + ch] = (float)s;
            }
    free(W);
    free(tmp);
    return 0;
}

static int vit_check(const sf_model_cfg *c, const char *where) { return mdl_check_tokens(c, where); }

/* `sfvit info` rows */
static void vit_info_rows(mdl_info_table *t, const sf_model_cfg *c) {
    const int C = c->embed_dim, G = c->img_size / c->patch_size, Np = G * G, N = Np + 1;
    mdl_info_row *r = mdl_info_row_add(t, "patch_embed", "patch_embed.", "patch_embed");
    mdl_shape3(r->in, c->in_chans, c->img_size, c->img_size);
    mdl_shape2(r->out, Np, C);
    r->macs = (double)Np * C * c->in_chans * c->patch_size * c->patch_size;
    r = mdl_info_row_add(t, "cls_token", "cls_token", "cls_token");
    mdl_shape2(r->in, Np, C);
    mdl_shape2(r->out, N, C);
    r = mdl_info_row_add(t, "pos_embed", "pos_embed", "pos_embed");
    mdl_shape2(r->in, N, C);
    mdl_shape2(r->out, N, C);
    for (int i = 0; i < c->depth; i++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "blocks.%d.", i);
        snprintf(nm, sizeof nm, "blocks.%d", i);
        r = mdl_info_row_add(t, "blocks", p, nm);
        mdl_shape2(r->in, N, C);
        mdl_shape2(r->out, N, C);
        r->macs = (mdl_attn_defs[mdl_block_attn(c, i)]->q_v ? 3.0 : 4.0) * N * C * C;  // qkv (or q, v) + proj
        mdl_info_mixing(t, r, c, mdl_block_attn(c, i), N);
        mdl_info_mlp(r, c, N, C);
    }
    mdl_info_norm_head(t, c, N, C);
}

const mdl_family_def mdl_family_vit = {
    .title = "a ViT", .sima_record = 1, .check = vit_check, .build = vit_build, .forward = vit_forward,
    .free = vit_free, .info_rows = vit_info_rows,
};
