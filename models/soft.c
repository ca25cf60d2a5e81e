/* soft.c — SOFT / SOFT++ pyramids (fudan-zvg/SOFT master): conv-BN-ReLU stem and
 * downsamplings, learned positional embeddings (bilinearly resized when the input grid
 * differs from the one they were built for), softmax-free layers in stages 1–3 and softmax
 * attention with a cls token in stage 4.
 *
 * SOFT layer (post-norm): h = LN1(x + Drop(mha(x))); out = LN2(h + Drop(ff2(GELU_tanh(ff1 h)))),
 * Drop = element dropout at the layer's drop-path rate (official). mha per head:
 * Q = W_q x, V = W_v x, K = Q; Q ← Q/D^¼; landmarks L = GELU(LN(conv_r(Q as (D, Hs, Ws))))
 * (model.soft_landmarks stride) or L = GELU(LN(adaptive_avg_pool(Q, √m x √m))) (fixed);
 * K1 = exp(−‖q_i − l_j‖²/2), K2 = exp(−‖l_i − l_j‖²/2); Z = NR(K2) (SOFT) or
 * D^−½ NR(K2) D^−½ (SOFT++); core = (K1 Z)(K1ᵀ V) + Vconv(V); heads merged; `ff`.
 *
 * The soft kind in a ViT block (mdl_attn_soft, at the end) shares the core: fixed landmarks
 * from the patch tokens' grid (the cls token is a query and a value, never pooled), K = Q.
 *
 * Deliberately not here: the `ratio == 1` softmax-free path (dead in the official code; stage
 * 4 is softmax attention), SOFT-Huge's extra registry name beyond the table of docs/models.md, the
 * paper's random landmark variant.
 *
 * Dimension legend: B batch, n tokens of a stage, C channels, H heads, D head dim,
 * M landmarks, Hs×Ws stage grid.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int soft_ratio[3] = {8, 4, 2};   // landmark conv kernel = stride per stage
static const int soft_vconv[3] = {9, 5, 3};   // V depthwise conv kernel per stage

typedef struct soft_layer {
    mdl_linear wq, wv, ff, ff1, ff2;
    mdl_conv landmark;        // (D, D, r, r), shared by the heads; none with fixed landmarks
    mdl_ln lnorm;             // Qnorm_act.0: LN(D), eps 1e-5
    mdl_conv vconv;           // (H, 1, k, k), groups H
    mdl_ln norm1, norm2;      // eps 1e-5
    int H;
    float drop;
} soft_layer;

typedef struct soft_block4 {
    mdl_ln norm1, norm2;
    mdl_linear q, kv, proj;
    mdl_mlp mlp;
    float drop_path;
} soft_block4;

typedef struct soft_model {
    mdl_conv stem_conv[3];
    mdl_bn stem_bn[3];
    mdl_conv down_conv[3];    // patch_embed2..4
    mdl_bn down_bn[3];
    sf_tensor *pos[4];        // (1, n_s, C_s); pos[3] has n_4 + 1 (cls) rows
    sf_tensor *cls_token;     // (1, 1, C4)
    int pos_grid[4];          // grid side each pos_embed was built for
    soft_layer *layers[3];
    soft_block4 *b4;
    mdl_ln norm;
    mdl_linear head;
} soft_model;

static int soft_build(sf_model *m, sf_params *ps) {
    const sf_model_cfg *c = &m->cfg;
    const sf_family F = SF_FAMILY_SOFT;
    soft_model *s = sf_calloc(1, sizeof(*s));
    m->family = s;
    char p[160];
    int total = 0;
    for (int st = 0; st < 4; st++) total += c->depths[st];
    int t = 0;  // layer counter over all stages for the drop-rate linspace
    const float p_max = c->drop_path_rate;

    /* stem: conv3x3 s2 3→32, conv3x3 s1 32→32, conv3x3 s2 32→C1, each + BN + ReLU */
    const int stem_out[3] = {32, 32, c->embed_dims[0]}, stem_stride[3] = {2, 1, 2};
    int cin = c->in_chans;
    for (int u = 0; u < 3; u++) {
        snprintf(p, sizeof p, "patch_embed1.proj.%d", 3 * u);
        s->stem_conv[u] = mdl_conv_add(ps, F, p, stem_out[u], cin, 3, stem_stride[u], 1, 1, 1);
        snprintf(p, sizeof p, "patch_embed1.proj.%d", 3 * u + 1);
        s->stem_bn[u] = mdl_bn_add(ps, F, p, stem_out[u]);
        cin = stem_out[u];
    }
    int grid = c->img_size / 4;
    for (int st = 0; st < 4; st++) {
        const int C = c->embed_dims[st], H = c->stage_heads[st], D = C / H;
        if (st > 0) {
            snprintf(p, sizeof p, "patch_embed%d.proj.0", st + 1);
            s->down_conv[st - 1] = mdl_conv_add(ps, F, p, C, c->embed_dims[st - 1], 3, 2, 1, 1, 1);
            snprintf(p, sizeof p, "patch_embed%d.proj.1", st + 1);
            s->down_bn[st - 1] = mdl_bn_add(ps, F, p, C);
            grid = (grid - 1) / 2 + 1;  // conv3x3 s2 p1
        }
        s->pos_grid[st] = grid;
        snprintf(p, sizeof p, "pos_embed%d", st + 1);
        s->pos[st] = mdl_param(ps, F, "", p, 3, (int[]){1, grid * grid + (st == 3), C}, 1, 0,
                               SF_INIT_TRUNC_NORMAL, 0.02f);
        if (st == 3) {
            s->cls_token = mdl_param(ps, F, "", "cls_token", 3, (int[]){1, 1, C}, 1, 0,
                                     SF_INIT_TRUNC_NORMAL, 0.02f);
            s->b4 = sf_calloc((size_t)(c->depths[3] > 0 ? c->depths[3] : 1), sizeof(soft_block4));
            for (int i = 0; i < c->depths[3]; i++, t++) {
                soft_block4 *b = &s->b4[i];
                snprintf(p, sizeof p, "block4.%d.norm1", i);
                b->norm1 = mdl_ln_add(ps, F, p, C, 1e-6f);
                snprintf(p, sizeof p, "block4.%d.attn.q", i);
                b->q = mdl_linear_add(ps, F, p, C, C, 1);
                snprintf(p, sizeof p, "block4.%d.attn.kv", i);
                b->kv = mdl_linear_add(ps, F, p, 2 * C, C, 1);
                snprintf(p, sizeof p, "block4.%d.attn.proj", i);
                b->proj = mdl_linear_add(ps, F, p, C, C, 1);
                snprintf(p, sizeof p, "block4.%d.norm2", i);
                b->norm2 = mdl_ln_add(ps, F, p, C, 1e-6f);
                snprintf(p, sizeof p, "block4.%d.mlp.", i);
                b->mlp = mdl_mlp_add(ps, F, p, C, (int)(C * c->mlp_ratio), c->act, c->drop_rate);
                b->drop_path = total > 1 ? p_max * (float)t / (float)(total - 1) : 0.0f;
            }
            continue;
        }
        const int r = soft_ratio[st], k = soft_vconv[st];
        s->layers[st] = sf_calloc((size_t)(c->depths[st] > 0 ? c->depths[st] : 1), sizeof(soft_layer));
        for (int i = 0; i < c->depths[st]; i++, t++) {
            soft_layer *l = &s->layers[st][i];
            char q[128];
            snprintf(q, sizeof q, "block%d.%d.att.", st + 1, i);
            l->H = H;
            snprintf(p, sizeof p, "%smha.W_q", q);
            l->wq = mdl_linear_add(ps, F, p, C, C, 1);
            snprintf(p, sizeof p, "%smha.W_v", q);
            l->wv = mdl_linear_add(ps, F, p, C, C, 1);
            if (c->soft_landmarks == SF_LANDMARKS_STRIDE) {
                snprintf(p, sizeof p, "%smha.attn.Qlandmark_op", q);
                l->landmark = mdl_conv_add(ps, F, p, D, D, r, r, 0, 1, 0);
            }
            snprintf(p, sizeof p, "%smha.attn.Qnorm_act.0", q);
            l->lnorm = mdl_ln_add(ps, F, p, D, 1e-5f);
            snprintf(p, sizeof p, "%smha.attn.conv", q);
            l->vconv = mdl_conv_add(ps, F, p, H, H, k, 1, k / 2, H, 0);
            snprintf(p, sizeof p, "%smha.ff", q);
            l->ff = mdl_linear_add(ps, F, p, C, C, 1);
            snprintf(p, sizeof p, "%snorm1", q);
            l->norm1 = mdl_ln_add(ps, F, p, C, 1e-5f);
            snprintf(p, sizeof p, "%snorm2", q);
            l->norm2 = mdl_ln_add(ps, F, p, C, 1e-5f);
            /* mlp ratio is always 4 here (mlp_ratios only reach stage 4 in the official code) */
            snprintf(p, sizeof p, "%sff1", q);
            l->ff1 = mdl_linear_add(ps, F, p, 4 * C, C, 1);
            snprintf(p, sizeof p, "%sff2", q);
            l->ff2 = mdl_linear_add(ps, F, p, C, 4 * C, 1);
            l->drop = total > 1 ? p_max * (float)t / (float)(total - 1) : 0.0f;
        }
    }
    s->norm = mdl_ln_add(ps, F, "norm", c->embed_dims[3], 1e-6f);
    s->head = mdl_linear_add(ps, F, "head", c->num_classes, c->embed_dims[3], 1);
    return 0;
}

static void soft_free(sf_model *m) {
    soft_model *s = m->family;
    if (!s) return;
    for (int st = 0; st < 3; st++) free(s->layers[st]);
    free(s->b4);
    free(s);
}

/* (dst, src) weights of a 1-D bilinear resize, align_corners=false (F.interpolate). */
static sf_tensor *bilinear_matrix(sf_ctx *g, int src, int dst) {
    sf_tensor *W = sf_tensor_new2(g, dst, src);  // (dst, src)
    memset(W->data, 0, W->numel * sizeof(float));
    const float scale = (float)src / (float)dst;
    for (int i = 0; i < dst; i++) {
        float s = scale * ((float)i + 0.5f) - 0.5f;
        if (s < 0) s = 0;
        int i0 = (int)s, i1 = i0 < src - 1 ? i0 + 1 : i0;
        float l1 = s - (float)i0;
        W->data[(size_t)i * src + i0] += 1.0f - l1;
        W->data[(size_t)i * src + i1] += l1;
    }
    return W;
}

/* pos (1, S*S, C) -> (1, Ht*Wt, C): bilinear over the grid, differentiable (two products with
 * constant matrices: rows, then columns). Identity when the grids agree. */
static sf_tensor *pos_resize(sf_ctx *g, sf_tensor *pos, int S, int Ht, int Wt) {
    const int C = pos->shape[2];
    if (S == Ht && S == Wt) return pos;
    sf_tensor *x = sf_reshape(g, pos, 2, (int[]){S, S * C});                     // (S, S·C)
    x = sf_matmul(g, bilinear_matrix(g, S, Ht), x, 0, 0);                         // (Ht, S·C)
    x = sf_permute(g, sf_reshape(g, x, 3, (int[]){Ht, S, C}), (int[]){1, 0, 2});  // (S, Ht, C)
    x = sf_matmul(g, bilinear_matrix(g, S, Wt), sf_reshape(g, x, 2, (int[]){S, Ht * C}), 0, 0);
    x = sf_permute(g, sf_reshape(g, x, 3, (int[]){Wt, Ht, C}), (int[]){1, 0, 2});  // (Ht, Wt, C)
    return sf_reshape(g, x, 3, (int[]){1, Ht * Wt, C});
}

int mdl_soft_landmark_side(const sf_model_cfg *c, int side) {
    int s = (int)lround(sqrt((double)c->num_landmarks));
    return s < side ? s : side;
}

void mdl_soft_pool_matrix(float *P, int Hs, int Ws, int hs, int ws, int skip) {
    const int n = skip + Hs * Ws;
    memset(P, 0, (size_t)hs * ws * n * sizeof(float));
    for (int i = 0; i < hs; i++) {
        const int y0 = i * Hs / hs, y1 = ((i + 1) * Hs + hs - 1) / hs;  // floor, ceil
        for (int j = 0; j < ws; j++) {
            const int x0 = j * Ws / ws, x1 = ((j + 1) * Ws + ws - 1) / ws;
            const float w = 1.0f / (float)((y1 - y0) * (x1 - x0));
            float *row = P + (size_t)(i * ws + j) * n + skip;
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++) row[y * Ws + x] = w;
        }
    }
}

/* A product with a constant (M, n) matrix: differentiable by the Linear's backward, n·M·D per
 * head, so linear in the tokens. */
sf_tensor *mdl_soft_pool_landmarks(sf_ctx *g, sf_tensor *Q, int Hs, int Ws, int hs, int ws, int skip) {
    const int n = Q->shape[2], M = hs * ws;
    SF_ASSERT(n == skip + Hs * Ws, "soft landmarks: %d tokens are not %d + %dx%d", n, skip, Hs, Ws);
    sf_tensor *P = sf_tensor_new2(g, M, n);  // (M, n)
    mdl_soft_pool_matrix(P->data, Hs, Ws, hs, ws, skip);
    sf_tensor *L = sf_linear(g, sf_permute(g, Q, (int[]){0, 1, 3, 2}), P, NULL);  // (B, H, D, M)
    return sf_permute(g, L, (int[]){0, 1, 3, 2});                                  // (B, H, M, D)
}

sf_tensor *mdl_soft_attend(sf_ctx *g, const sf_model_cfg *c, sf_tensor *Q, sf_tensor *V, sf_tensor *L) {
    sf_tensor *K1 = sf_gauss_kernel(g, Q, L, 1.0f);  // (B, H, n, M)
    sf_tensor *K2 = sf_gauss_kernel(g, L, L, 1.0f);  // (B, H, M, M)
    sf_tensor *Z = c->attn_norm == SF_NORM_SYMMETRIC
                       ? sf_soft_symnorm(g, K2, c->nr_iters, (sf_nr_init)c->nr_init)
                       : sf_nr_pinv(g, K2, c->nr_iters, (sf_nr_init)c->nr_init);  // (B, H, M, M)
    sf_tensor *T = sf_matmul(g, K1, V, 1, 0);   // (B, H, M, D) K1ᵀV
    sf_tensor *R = sf_matmul(g, K1, Z, 0, 0);   // (B, H, n, M)
    return sf_matmul(g, R, T, 0, 0);            // (B, H, n, D)
}

/* The softmax-free core of one layer: q, v (B, n, C) -> (B, n, C) before `ff`. */
static sf_tensor *soft_core(sf_ctx *g, const sf_model_cfg *c, const soft_layer *l, sf_tensor *q,
                            sf_tensor *v, int Hs, int Ws) {
    const int B = q->shape[0], n = q->shape[1], H = l->H, D = q->shape[2] / H;
    sf_tensor *Q = sf_scale(g, sf_heads_split(g, q, 1, 0, H), 1.0f / sqrtf(sqrtf((float)D)));  // (B, H, n, D)
    sf_tensor *V = sf_heads_split(g, v, 1, 0, H);  // (B, H, n, D)
    sf_tensor *L;
    if (c->soft_landmarks == SF_LANDMARKS_FIXED) {
        L = mdl_soft_pool_landmarks(g, Q, Hs, Ws, mdl_soft_landmark_side(c, Hs), mdl_soft_landmark_side(c, Ws), 0);
    } else {
        /* landmarks: Q as (B·H, D, Hs, Ws) images, one conv shared by every head */
        sf_tensor *li = sf_reshape(g, sf_permute(g, Q, (int[]){0, 1, 3, 2}), 4, (int[]){B * H, D, Hs, Ws});
        li = mdl_conv_fwd(g, &l->landmark, li);  // (B·H, D, hs, ws)
        const int M = li->shape[2] * li->shape[3];
        L = sf_permute(g, sf_reshape(g, li, 3, (int[]){B * H, D, M}), (int[]){0, 2, 1});
        L = sf_reshape(g, L, 4, (int[]){B, H, M, D});
    }
    L = sf_gelu(g, mdl_ln_fwd(g, &l->lnorm, L));  // (B, H, M, D)
    sf_tensor *X = mdl_soft_attend(g, c, Q, V, L);  // (B, H, n, D)
    /* V conv: V viewed as (B·D, H, Hs, Ws), one k×k kernel per head shared over D */
    sf_tensor *vc = sf_reshape(g, sf_permute(g, V, (int[]){0, 3, 1, 2}), 4, (int[]){B * D, H, Hs, Ws});
    vc = mdl_conv_fwd(g, &l->vconv, vc);  // (B·D, H, Hs, Ws)
    vc = sf_permute(g, sf_reshape(g, vc, 4, (int[]){B, D, H, n}), (int[]){0, 2, 3, 1});  // (B, H, n, D)
    return sf_heads_merge(g, sf_add(g, X, vc));  // (B, n, C)
}

static sf_tensor *soft_layer_fwd(sf_ctx *g, const sf_model_cfg *c, const soft_layer *l,
                                 sf_tensor *x, int Hs, int Ws) {
    sf_tensor *a = mdl_linear_last_use(g, &l->ff, soft_core(g, c, l, mdl_linear_fwd(g, &l->wq, x),
                                                       mdl_linear_fwd(g, &l->wv, x), Hs, Ws));
    if (l->drop > 0) a = sf_dropout(g, a, l->drop);
    sf_tensor *h = mdl_ln_fwd(g, &l->norm1, sf_add(g, a, x));
    sf_tensor *f = mdl_linear_last_use(g, &l->ff2, sf_gelu_tanh_to_linear(g, mdl_linear_fwd(g, &l->ff1, h)));
    if (l->drop > 0) f = sf_dropout(g, f, l->drop);
    return mdl_ln_fwd(g, &l->norm2, sf_add(g, f, h));
}

/* PVT Block with sr_ratio 1: pre-norm softmax MSA with separate q and kv Linears. */
static sf_tensor *block4_fwd(sf_ctx *g, const sf_model_cfg *c, const soft_block4 *b, sf_tensor *x) {
    const int H = c->stage_heads[3], D = c->embed_dims[3] / H;
    sf_tensor *u = mdl_ln_fwd(g, &b->norm1, x);
    sf_tensor *q = sf_heads_split(g, mdl_linear_fwd(g, &b->q, u), 1, 0, H);  // (B, H, N, D)
    sf_tensor *kv = mdl_linear_fwd(g, &b->kv, u);                             // (B, N, 2C)
    sf_tensor *o = sf_msa(g, q, sf_heads_split(g, kv, 2, 0, H), sf_heads_split(g, kv, 2, 1, H),
                          1.0f / sqrtf((float)D));
    sf_tensor *a = mdl_linear_last_use(g, &b->proj, sf_heads_merge_to_linear(g, o));
    if (c->drop_rate > 0) a = sf_dropout(g, a, c->drop_rate);
    x = mdl_residual(g, x, a, b->drop_path);
    return mdl_residual(g, x, mdl_norm_mlp_fwd(g, &b->norm2, &b->mlp, x), b->drop_path);
}

static sf_tensor *soft_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    char shape_buf[64];
    SF_ASSERT(images->shape[2] % 32 == 0, "SOFT images %s: side not a multiple of 32",
              sf_shape_str(images, shape_buf, sizeof shape_buf));

    const sf_model_cfg *c = &m->cfg;
    soft_model *s = m->family;
    const int B = images->shape[0];
    sf_tensor *h = images;  // (B, Cin, H, W)
    for (int u = 0; u < 3; u++) {
        sf_scope_begin(g);  // evaluation: the unit's intermediates are scratch
        sf_tensor *in = u > 0 ? h : NULL; /* the caller's images stay theirs */
        /* after the first unit h is the previous unit's ReLU output, made for this conv alone */
        sf_tensor *y = u > 0 ? mdl_conv_last_use(g, &s->stem_conv[u], h) : mdl_conv_fwd(g, &s->stem_conv[u], h);
        h = sf_scope_end(g, sf_relu(g, mdl_bn_fwd(g, &s->stem_bn[u], y)), in);
    }
    sf_tensor *x = NULL;
    for (int st = 0; st < 4; st++) {
        if (st > 0) {
            h = mdl_image_from_tokens_last_use(g, x, h->shape[2], h->shape[3]);
            h = sf_relu(g, mdl_bn_fwd(g, &s->down_bn[st - 1], mdl_conv_fwd(g, &s->down_conv[st - 1], h)));
        }
        const int Hs = h->shape[2], Ws = h->shape[3], S = s->pos_grid[st];
        x = mdl_tokens_from_image_last_use(g, h);  // (B, Hs·Ws, C)
        if (st < 3) {
            x = sf_add_broadcast(g, x, pos_resize(g, s->pos[st], S, Hs, Ws));
            if (c->drop_rate > 0) x = sf_dropout(g, x, c->drop_rate);
            for (int i = 0; i < c->depths[st]; i++) {
                sf_scope_begin(g);  // evaluation: the layer's intermediates are scratch
                x = sf_scope_end(g, soft_layer_fwd(g, c, &s->layers[st][i], x, Hs, Ws), x);
            }
        } else {
            /* cls prepended before adding pos_embed4; its cls row is never resized */
            x = sf_concat_tokens(g, s->cls_token, x);
            sf_tensor *pos = s->pos[3];
            if (S != Hs || S != Ws)
                pos = sf_concat_tokens(g, sf_slice_tokens(g, pos, 0, 1),
                                       pos_resize(g, sf_slice_tokens(g, pos, 1, S * S), S, Hs, Ws));
            x = sf_add_broadcast(g, x, pos);
            for (int i = 0; i < c->depths[3]; i++) {
                sf_scope_begin(g);
                x = sf_scope_end(g, block4_fwd(g, c, &s->b4[i], x), x);
            }
        }
    }
    x = mdl_ln_fwd(g, &s->norm, x);
    const int C4 = c->embed_dims[3];
    return mdl_linear_fwd(g, &s->head, sf_reshape(g, sf_slice_tokens(g, x, 0, 1), 2, (int[]){B, C4}));
}

static int soft_check(const sf_model_cfg *c, const char *where) {
    if (c->num_stages != 4) return mdl_bad(where, "model.num_stages %d: SOFT has 4 stages", c->num_stages);
    if (c->img_size % 32 || c->img_size < 32)
        return mdl_bad(where, "model.img_size %d: SOFT needs a multiple of 32 (stride 32, landmark ratios 8/4/2)",
                       c->img_size);
    int blocks = 0;
    for (int s = 0; s < 4; s++) {
        if (c->embed_dims[s] < 1 || c->stage_heads[s] < 1 || c->embed_dims[s] % c->stage_heads[s])
            return mdl_bad(where, "model.embed_dims[%d] %d must be a positive multiple of model.stage_heads[%d] %d",
                           s, c->embed_dims[s], s, c->stage_heads[s]);
        if (c->depths[s] < 1 || c->depths[s] > 256)
            return mdl_bad(where, "model.depths[%d] %d must be in 1..256 (four values, one per stage)", s, c->depths[s]);
        blocks += c->depths[s];
    }
    /* the stages' kinds are fixed (soft, then msa in stage 4): a list is only checked for length */
    if (c->n_block_attn != 0 && c->n_block_attn != blocks)
        return mdl_bad(where, "model.block_attn: %d kinds given for %d blocks", c->n_block_attn, blocks);
    return 0;
}

/* `sfvit info` rows */
static void soft_info_rows(mdl_info_table *t, const sf_model_cfg *c) {
    static const int ratio[3] = {8, 4, 2}, vk[3] = {9, 5, 3};
    mdl_info_row *r = mdl_info_row_add(t, "patch_embed1", "patch_embed1.", "patch_embed1");
    mdl_shape3(r->in, c->in_chans, c->img_size, c->img_size);
    int side = c->img_size, cin = c->in_chans;
    const int stem_out[3] = {32, 32, c->embed_dims[0]}, stem_stride[3] = {2, 1, 2};
    for (int u = 0; u < 3; u++) {
        side = (side - 1) / stem_stride[u] + 1;
        r->macs += (double)side * side * stem_out[u] * cin * 9;
        cin = stem_out[u];
    }
    mdl_shape2(r->out, side * side, c->embed_dims[0]);
    for (int st = 0; st < 4; st++) {
        const int C = c->embed_dims[st], H = c->stage_heads[st], D = C / H;
        char p[48], nm[48];
        if (st > 0) {
            snprintf(p, sizeof p, "patch_embed%d.", st + 1);
            snprintf(nm, sizeof nm, "patch_embed%d", st + 1);
            r = mdl_info_row_add(t, "downsample", p, nm);
            mdl_shape2(r->in, side * side, c->embed_dims[st - 1]);
            side = (side - 1) / 2 + 1;
            mdl_shape2(r->out, side * side, C);
            r->macs = (double)side * side * C * c->embed_dims[st - 1] * 9;
        }
        const int n = side * side;
        if (st == 3) {
            r = mdl_info_row_add(t, "cls_token", "cls_token", "cls_token");
            mdl_shape2(r->in, n, C);
            mdl_shape2(r->out, n + 1, C);
        }
        snprintf(p, sizeof p, "pos_embed%d", st + 1);
        r = mdl_info_row_add(t, "pos_embed", p, p);
        mdl_shape2(r->in, n + (st == 3), C);
        mdl_shape2(r->out, n + (st == 3), C);
        for (int i = 0; i < c->depths[st]; i++) {
            snprintf(p, sizeof p, "block%d.%d.", st + 1, i);
            snprintf(nm, sizeof nm, "block%d.%d", st + 1, i);
            r = mdl_info_row_add(t, st == 3 ? "stage4 (msa)" : "soft layers", p, nm);
            if (st == 3) {
                const int N = n + 1;
                mdl_shape2(r->in, N, C);
                mdl_shape2(r->out, N, C);
                r->macs = 4.0 * N * C * C + 2.0 * N * N * C;
                r->softmax_exp = (double)H * N * N;
                snprintf(r->note, sizeof r->note, "msa");
                mdl_info_mlp(r, c, N, C);
                continue;
            }
            const int fixed = c->soft_landmarks == SF_LANDMARKS_FIXED, rr = ratio[st], k = vk[st];
            const int hs = fixed ? mdl_soft_landmark_side(c, side) : (side - rr) / rr + 1, M = hs * hs;
            mdl_shape2(r->in, n, C);
            mdl_shape2(r->out, n, C);
            r->macs = 11.0 * n * C * C                 // W_q, W_v, ff, ff1, ff2
                      + (fixed ? (double)n * M * C     // pooling product
                               : (double)M * rr * rr * D * C)  // landmark conv (= nDC when r | side)
                      + ((double)n * M + (double)M * M) * C  // K1, K2 distances
                      + (double)n * M * M * H          // K1·Z
                      + 2.0 * n * M * C                // K1ᵀV, R·T
                      + (double)n * C * k * k;         // V conv
            r->nr_macs = (double)c->nr_iters * 2.0 * M * M * M * H;
            r->kernel_exp = (double)H * ((double)n * M + (double)M * M);
            r->gelu_erf = (double)M * D * H;           // landmark GELU
            r->gelu_tanh = (double)n * 4 * C;          // MLP (tanh GELU)
            snprintf(r->note, sizeof r->note, "%s M=%d NR%d", c->attn_norm == SF_NORM_SYMMETRIC ? "soft++" : "soft",
                     M, c->nr_iters);
        }
    }
    mdl_info_norm_head(t, c, side * side + 1, c->embed_dims[3]);
}

const mdl_family_def mdl_family_soft = {
    .title = "SOFT", .sima_record = 0, .check = soft_check, .build = soft_build, .forward = soft_forward,
    .free = soft_free, .info_rows = soft_info_rows,
};

/* ---- the soft kind in a ViT block (mdl_attn_fwd: q, v Linears, k = q) ---- */

/* No V depthwise conv here, unlike the pyramid: the cls token has no grid position. */
static sf_tensor *soft_mix(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *q, sf_tensor *k, sf_tensor *v) {
    (void)k;  // = q
    SF_ASSERT(m, "soft attention needs its model's config");
    const sf_model_cfg *c = &m->cfg;
    const int D = q->shape[3];
    sf_tensor *Q = sf_scale(g, q, 1.0f / sqrtf(sqrtf((float)D)));  // (B, H, N, D)
    sf_tensor *L = mdl_soft_pool_landmarks(g, Q, a->grid_h, a->grid_w, mdl_soft_landmark_side(c, a->grid_h),
                                           mdl_soft_landmark_side(c, a->grid_w), a->viz_skip);
    L = sf_gelu(g, mdl_ln_fwd(g, &a->lnorm, L));  // (B, H, M, D)
    return mdl_soft_attend(g, c, Q, v, L);
}

/* A ViT block's soft mixing on N = 1 + G² tokens (the G x G patch grid plus cls). */
static void soft_cost(const sf_model_cfg *c, int N, mdl_mix_cost *out) {
    const int C = c->embed_dim, H = c->num_heads, D = C / H;
    const int side = mdl_soft_landmark_side(c, c->img_size / c->patch_size), M = side * side;
    out->macs = (double)N * M * C                       // pooling product
                + ((double)N * M + (double)M * M) * C   // K1, K2 distances
                + (double)N * M * M * H                 // K1·Z
                + 2.0 * N * M * C;                      // K1ᵀV, R·T
    out->nr_macs = (double)c->nr_iters * 2.0 * M * M * M * H;
    out->kernel_exp = (double)H * ((double)N * M + (double)M * M);
    out->gelu_erf = (double)M * D * H;  // landmark GELU
    snprintf(out->note, sizeof out->note, "%s M=%d NR%d", c->attn_norm == SF_NORM_SYMMETRIC ? "soft++" : "soft", M,
             c->nr_iters);
}

static int soft_kind_check(const sf_model_cfg *c, const char *where) {
    if (c->nr_iters < 1) return mdl_bad(where, "model.nr_iters %d must be >= 1", c->nr_iters);
    if ((unsigned)c->nr_init >= SF_NR_COUNT) return mdl_bad(where, "model.nr_init %d is not master or paper", c->nr_init);
    if (c->family != SF_FAMILY_SOFT && c->soft_landmarks != SF_LANDMARKS_FIXED)
        return mdl_bad(where,
                       "model.soft_landmarks '%s': soft attention in %s takes fixed (the stride-r landmark conv "
                       "needs a grid without a cls token)",
                       sf_landmarks_names[c->soft_landmarks], mdl_families[c->family]->title);
    return 0;
}

const mdl_attn_def mdl_attn_soft = {
    .hosts = 1u << SF_FAMILY_SOFT | 1u << SF_FAMILY_VIT, .norms = 1u << SF_NORM_NONE | 1u << SF_NORM_SYMMETRIC,
    .q_v = 1, .mix = soft_mix, .cost = soft_cost, .check = soft_kind_check,
};
