/* xcit.c — XCiT (facebookresearch/xcit `xcit.py`) and its SimA variant (UCDvision
 * sima.py): conv patch embedding, Fourier positional encoding, XCA or SimA blocks with
 * LPI and layer scale, class-attention layers with the official semantics, head.
 *
 * Block: x += DropPath(γ1 ⊙ attn(LN1 x)); x += DropPath(γ3 ⊙ LPI(LN3 x));
 *        x += DropPath(γ2 ⊙ MLP(LN2 x)); drop path constant over depth.
 * Class attention (cls prepended, N+1 tokens): u = LN1 x; a = [proj(CA(u)_0); u_1..N];
 * x += γ1 ⊙ a; x = LN2 x; x += [γ2 ⊙ MLP(x_0); x_1..N] (patch tokens doubled, as official).
 *
 * Deliberately not here: the distillation (x, x) return, tokens_norm=false (nano only),
 * patch sizes other than 8 and 16. `act` (relu) replaces only the MLP GELUs; the patch-embed
 * and LPI GELUs stay (the ablation is about the MLP activation).
 *
 * Dimension legend: B batch, N patch tokens, C channels, H heads, D head dim.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct xcit_block {
    mdl_ln norm1, norm2, norm3;
    mdl_attn attn;
    mdl_conv lpi1, lpi2;      // depthwise 3x3 (C, 1, 3, 3) with bias
    mdl_bn lpi_bn;
    mdl_mlp mlp;
    sf_tensor *gamma1, *gamma2, *gamma3;  // (C)
    float drop_path;
} xcit_block;

typedef struct xcit_ca {
    mdl_ln norm1, norm2;
    mdl_linear qkv, proj;
    mdl_mlp mlp;
    sf_tensor *gamma1, *gamma2;  // (C)
} xcit_ca;

typedef struct xcit_model {
    sf_tensor *cls_token;     // (1, 1, C)
    int n_units;              // conv-BN units of the patch embedding (4 for P16, 3 for P8)
    mdl_conv pe_conv[4];
    mdl_bn pe_bn[4];
    mdl_conv pos_proj;        // (C, 64, 1, 1)
    xcit_block *blocks;       // (L)
    xcit_ca *ca;              // (cls_attn_layers)
    mdl_ln norm;
    mdl_linear head;
} xcit_model;

static int xcit_build(sf_model *m, sf_params *ps) {
    const sf_model_cfg *c = &m->cfg;
    const sf_family F = SF_FAMILY_XCIT;
    const int C = c->embed_dim, L = c->depth, H = c->num_heads, P = c->patch_size;
    const int hidden = (int)(C * c->mlp_ratio);
    const float eta = c->layer_scale_init;
    xcit_model *x = sf_calloc(1, sizeof(*x));
    m->family = x;
    char p[160];
    x->cls_token = mdl_param(ps, F, "", "cls_token", 3, (int[]){1, 1, C}, 1, 0,
                             SF_INIT_TRUNC_NORMAL, 0.02f);
    /* P16: 3 -> C/8 -> C/4 -> C/2 -> C; P8: 3 -> C/4 -> C/2 -> C (Sequential indices 0,2,4,6) */
    x->n_units = P == 16 ? 4 : 3;
    int cin = c->in_chans;
    for (int u = 0; u < x->n_units; u++) {
        int cout = C >> (x->n_units - 1 - u);
        snprintf(p, sizeof p, "patch_embed.proj.%d.0", 2 * u);
        x->pe_conv[u] = mdl_conv_add(ps, F, p, cout, cin, 3, 2, 1, 1, 0);
        snprintf(p, sizeof p, "patch_embed.proj.%d.1", 2 * u);
        x->pe_bn[u] = mdl_bn_add(ps, F, p, cout);
        cin = cout;
    }
    x->pos_proj = mdl_conv_add(ps, F, "pos_embeder.token_projection", C, 64, 1, 1, 0, 1, 1);

    x->blocks = sf_calloc((size_t)L, sizeof(xcit_block));
    int last_sima = -1;
    for (int i = 0; i < L; i++)
        if (mdl_block_attn(c, i) == SF_ATTN_SIMA) last_sima = i;
    for (int i = 0; i < L; i++) {
        xcit_block *b = &x->blocks[i];
        snprintf(p, sizeof p, "blocks.%d.norm1", i);
        b->norm1 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.attn.", i);
        b->attn = mdl_attn_add(ps, F, p, C, H, mdl_block_attn(c, i), c->attn_norm,
                               c->drop_rate);
        b->attn.record_viz = (i == last_sima);
        b->attn.viz_skip = 0;
        if (c->lpi) {
            snprintf(p, sizeof p, "blocks.%d.norm3", i);
            b->norm3 = mdl_ln_add(ps, F, p, C, 1e-6f);
            snprintf(p, sizeof p, "blocks.%d.local_mp.conv1", i);
            b->lpi1 = mdl_conv_add(ps, F, p, C, C, 3, 1, 1, C, 1);
            snprintf(p, sizeof p, "blocks.%d.local_mp.bn", i);
            b->lpi_bn = mdl_bn_add(ps, F, p, C);
            snprintf(p, sizeof p, "blocks.%d.local_mp.conv2", i);
            b->lpi2 = mdl_conv_add(ps, F, p, C, C, 3, 1, 1, C, 1);
        }
        snprintf(p, sizeof p, "blocks.%d.norm2", i);
        b->norm2 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.mlp.", i);
        b->mlp = mdl_mlp_add(ps, F, p, C, hidden, c->act, c->drop_rate);
        snprintf(p, sizeof p, "blocks.%d.", i);
        b->gamma1 = mdl_param(ps, F, p, "gamma1", 1, (int[]){C}, 1, 0, SF_INIT_CONST, eta);
        if (c->lpi) b->gamma3 = mdl_param(ps, F, p, "gamma3", 1, (int[]){C}, 1, 0, SF_INIT_CONST, eta);
        b->gamma2 = mdl_param(ps, F, p, "gamma2", 1, (int[]){C}, 1, 0, SF_INIT_CONST, eta);
        b->drop_path = c->drop_path_rate;
    }
    x->ca = sf_calloc((size_t)(c->cls_attn_layers > 0 ? c->cls_attn_layers : 1), sizeof(xcit_ca));
    for (int j = 0; j < c->cls_attn_layers; j++) {
        xcit_ca *a = &x->ca[j];
        snprintf(p, sizeof p, "cls_attn_blocks.%d.norm1", j);
        a->norm1 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "cls_attn_blocks.%d.attn.qkv", j);
        a->qkv = mdl_linear_add(ps, F, p, 3 * C, C, 1);
        snprintf(p, sizeof p, "cls_attn_blocks.%d.attn.proj", j);
        a->proj = mdl_linear_add(ps, F, p, C, C, 1);
        snprintf(p, sizeof p, "cls_attn_blocks.%d.norm2", j);
        a->norm2 = mdl_ln_add(ps, F, p, C, 1e-6f);
        snprintf(p, sizeof p, "cls_attn_blocks.%d.mlp.", j);
        a->mlp = mdl_mlp_add(ps, F, p, C, hidden, c->act, c->drop_rate);
        snprintf(p, sizeof p, "cls_attn_blocks.%d.", j);
        a->gamma1 = mdl_param(ps, F, p, "gamma1", 1, (int[]){C}, 1, 0, SF_INIT_CONST, eta);
        a->gamma2 = mdl_param(ps, F, p, "gamma2", 1, (int[]){C}, 1, 0, SF_INIT_CONST, eta);
    }
    x->norm = mdl_ln_add(ps, F, "norm", C, 1e-6f);
    x->head = mdl_linear_add(ps, F, "head", c->num_classes, C, 1);
    m->viz_h = m->viz_w = m->viz_kh = m->viz_kw = c->img_size / P;
    return 0;
}

static void xcit_free(sf_model *m) {
    xcit_model *x = m->family;
    if (!x) return;
    free(x->blocks);
    free(x->ca);
    free(x);
}

/* The 64 Fourier features of every grid position, (1, 64, Hp, Wp): rows i and columns j
 * count from 1; ŷ = i/(Hp+1e-6)·2π; channel k of pos_y is sin (k even) or cos (k odd) of
 * ŷ/10000^(2⌊k/2⌋/32); channels 0..31 pos_y, 32..63 pos_x. Float arithmetic in the same
 * order as the official PositionalEncodingFourier (float32 tensors). */
void mdl_xcit_fourier(float *out, int Hp, int Wp) {
    const float scale = (float)(2.0 * M_PI), eps = 1e-6f;
    for (int k = 0; k < 32; k++) {
        float dim_t = powf(10000.0f, (float)(2 * (k / 2)) / 32.0f);
        for (int i = 0; i < Hp; i++)
            for (int j = 0; j < Wp; j++) {
                float ye = (float)(i + 1) / ((float)Hp + eps) * scale;
                float xe = (float)(j + 1) / ((float)Wp + eps) * scale;
                float py = ye / dim_t, px = xe / dim_t;
                out[((size_t)k * Hp + i) * Wp + j] = (k % 2 == 0) ? sinf(py) : cosf(py);
                out[((size_t)(32 + k) * Hp + i) * Wp + j] = (k % 2 == 0) ? sinf(px) : cosf(px);
            }
    }
}

static sf_tensor *fourier_features(sf_ctx *g, int Hp, int Wp) {
    sf_tensor *f = sf_tensor_new4(g, 1, 64, Hp, Wp);  // (1, 64, Hp, Wp)
    mdl_xcit_fourier(f->data, Hp, Wp);
    return f;
}

/* Row 0 of each (b, h) matrix: (B, H, N, D) -> (B, H, 1, D). */
static sf_tensor *first_row(sf_ctx *g, sf_tensor *x) {
    const int B = x->shape[0], H = x->shape[1], N = x->shape[2], D = x->shape[3];
    sf_tensor *r = sf_reshape(g, x, 3, (int[]){B * H, N, D});
    return sf_reshape(g, sf_slice_tokens(g, r, 0, 1), 4, (int[]){B, H, 1, D});
}

/* Class attention: only the cls row is computed; softmax (xca models) or SimA
 * (sima models: q̂, k̂ normalized over all N+1 tokens with eps 1e-6, weight q̂₀·k̂_j). */
static sf_tensor *ca_forward(sf_ctx *g, const sf_model_cfg *c, const xcit_ca *a, sf_tensor *x) {
    const int N1 = x->shape[1], H = c->num_heads, D = c->embed_dim / H;
    sf_tensor *u = mdl_ln_fwd(g, &a->norm1, x);            // (B, N+1, C)
    sf_tensor *qkv = mdl_linear_fwd(g, &a->qkv, u);         // (B, N+1, 3C)
    const int sima = c->attn == SF_ATTN_SIMA;
    const sf_attn_norm qk_norm = sima ? c->attn_norm : SF_NORM_NONE;
    sf_tensor *q = mdl_heads_norm(g, qkv, 3, 0, H, qk_norm, 1e-6f);  // (B, H, N+1, D), q̂ for SimA
    sf_tensor *k = mdl_heads_norm(g, qkv, 3, 1, H, qk_norm, 1e-6f);
    sf_tensor *v = sf_heads_split(g, qkv, 3, 2, H);
    sf_tensor *o;                                           // (B, H, 1, D)
    if (sima) {
        /* one query row: (q̂₀K̂ᵀ)V costs 2(N+1)D, the cheaper order whatever N and D are */
        /* q's first row is a view (first_row), so only k̂ and v are handed over */
        o = sf_sima_last_use(g, first_row(g, q), k, v, SF_SIMA_QK_FIRST, SF_SIMA_HAND_K | SF_SIMA_HAND_V);
    } else {
        o = sf_msa(g, first_row(g, q), k, v, 1.0f / sqrtf((float)D));
    }
    sf_tensor *cls = mdl_linear_last_use(g, &a->proj, sf_heads_merge_to_linear(g, o));  // (B, 1, C)
    if (c->drop_rate > 0) cls = sf_dropout(g, cls, c->drop_rate);
    sf_tensor *att = sf_concat_tokens(g, cls, sf_slice_tokens(g, u, 1, N1 - 1));  // (B, N+1, C)
    x = sf_add(g, x, sf_mul_broadcast_last_use(g, att, a->gamma1));
    x = mdl_ln_fwd(g, &a->norm2, x);  // tokens_norm = true: every token
    sf_tensor *mc = sf_mul_broadcast_last_use(g, mdl_mlp_fwd(g, &a->mlp, sf_slice_tokens(g, x, 0, 1)),
                                              a->gamma2);  // (B, 1, C)
    return sf_add(g, x, sf_concat_tokens(g, mc, sf_slice_tokens(g, x, 1, N1 - 1)));
}

static sf_tensor *xcit_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    char shape_buf[64];
    SF_ASSERT(images->shape[2] % m->cfg.patch_size == 0, "XCiT images %s: side not a multiple of %d",
              sf_shape_str(images, shape_buf, sizeof shape_buf), m->cfg.patch_size);

    const sf_model_cfg *c = &m->cfg;
    xcit_model *x = m->family;
    const int B = images->shape[0], C = c->embed_dim;
    sf_tensor *h = images;  // (B, Cin, H, W)
    for (int u = 0; u < x->n_units; u++) {
        sf_tensor *in = u > 0 ? h : NULL; /* the caller's images stay theirs */
        sf_scope_begin(g);  // evaluation: the unit's intermediates are scratch
        /* after the first unit h is the previous unit's GELU output, made for this conv alone */
        h = mdl_bn_fwd(g, &x->pe_bn[u], u > 0 ? mdl_conv_last_use(g, &x->pe_conv[u], h) : mdl_conv_fwd(g, &x->pe_conv[u], h));
        if (u < x->n_units - 1) h = sf_gelu(g, h);
        h = sf_scope_end(g, h, in);
    }
    const int Hp = h->shape[2], Wp = h->shape[3];
    sf_tensor *t = mdl_tokens_from_image_last_use(g, h);  // (B, N, C)
    sf_tensor *pos = mdl_tokens_from_image_last_use(g, mdl_conv_fwd(g, &x->pos_proj, fourier_features(g, Hp, Wp)));
    t = sf_add_broadcast(g, t, pos);  // pos (1, N, C)
    if (c->drop_rate > 0) t = sf_dropout(g, t, c->drop_rate);
    m->viz_h = m->viz_kh = Hp;
    m->viz_w = m->viz_kw = Wp;
    for (int i = 0; i < c->depth; i++) {
        const xcit_block *b = &x->blocks[i];
        sf_tensor *in = t;
        sf_scope_begin(g);  // evaluation: the block's intermediates are scratch
        sf_tensor *a = mdl_norm_attn_fwd(g, m, &b->norm1, &b->attn, t);
        t = mdl_residual(g, t, sf_mul_broadcast_last_use(g, a, b->gamma1), b->drop_path);
        if (c->lpi) {
            /* code order (not the paper's): conv → GELU → BN → conv */
            sf_tensor *l = mdl_image_from_tokens_last_use(g, mdl_ln_fwd(g, &b->norm3, t), Hp, Wp);
            l = mdl_bn_fwd(g, &b->lpi_bn, sf_gelu(g, mdl_conv_fwd(g, &b->lpi1, l)));
            l = mdl_tokens_from_image_last_use(g, mdl_conv_fwd(g, &b->lpi2, l));
            t = mdl_residual(g, t, sf_mul_broadcast_last_use(g, l, b->gamma3), b->drop_path);
        }
        sf_tensor *f = mdl_norm_mlp_fwd(g, &b->norm2, &b->mlp, t);
        t = mdl_residual(g, t, sf_mul_broadcast_last_use(g, f, b->gamma2), b->drop_path);
        t = sf_scope_end(g, t, in);
    }
    t = sf_concat_tokens(g, x->cls_token, t);  // (B, N+1, C)
    for (int j = 0; j < c->cls_attn_layers; j++) {
        sf_scope_begin(g);
        t = sf_scope_end(g, ca_forward(g, c, &x->ca[j], t), t);
    }
    t = mdl_ln_fwd(g, &x->norm, t);
    sf_tensor *cls = sf_reshape(g, sf_slice_tokens(g, t, 0, 1), 2, (int[]){B, C});  // (B, C)
    return mdl_linear_fwd(g, &x->head, cls);
}

static int xcit_check(const sf_model_cfg *c, const char *where) {
    if (c->patch_size != 16 && c->patch_size != 8)
        return mdl_bad(where, "model.patch_size %d: XCiT's conv patch embedding exists for 8 and 16", c->patch_size);
    if (mdl_check_tokens(c, where)) return -1;
    if (c->embed_dim % (c->patch_size == 16 ? 8 : 4))
        return mdl_bad(where, "model.embed_dim %d must be divisible by %d (conv patch embedding widths)",
                       c->embed_dim, c->patch_size == 16 ? 8 : 4);
    if (c->cls_attn_layers < 0 || c->cls_attn_layers > 8)
        return mdl_bad(where, "model.cls_attn_layers %d must be in 0..8", c->cls_attn_layers);
    return 0;
}

/* `sfvit info` rows */
static void xcit_info_rows(mdl_info_table *t, const sf_model_cfg *c) {
    const int C = c->embed_dim, H = c->num_heads, P = c->patch_size, G = c->img_size / P, N = G * G;
    const int units = P == 16 ? 4 : 3;
    mdl_info_row *r = mdl_info_row_add(t, "patch_embed", "patch_embed.", "patch_embed");
    mdl_shape3(r->in, c->in_chans, c->img_size, c->img_size);
    mdl_shape2(r->out, N, C);
    int cin = c->in_chans, side = c->img_size;
    for (int u = 0; u < units; u++) {
        int cout = C >> (units - 1 - u);
        side = (side - 1) / 2 + 1;  // conv3x3 s2 p1
        r->macs += (double)side * side * cout * cin * 9;
        if (u < units - 1) r->gelu_erf += (double)side * side * cout;
        cin = cout;
    }
    r = mdl_info_row_add(t, "pos_embeder", "pos_embeder.", "pos_embeder");
    mdl_shape2(r->in, N, 64);
    mdl_shape2(r->out, N, C);
    r->macs = (double)N * 64 * C;
    for (int i = 0; i < c->depth; i++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "blocks.%d.", i);
        snprintf(nm, sizeof nm, "blocks.%d", i);
        r = mdl_info_row_add(t, "blocks", p, nm);
        mdl_shape2(r->in, N, C);
        mdl_shape2(r->out, N, C);
        r->macs = 4.0 * N * C * C;
        mdl_info_mixing(t, r, c, mdl_block_attn(c, i), N);
        if (c->lpi) {
            r->macs += 18.0 * N * C;  // two depthwise 3×3
            r->gelu_erf += (double)N * C;
        }
        mdl_info_mlp(r, c, N, C);
    }
    r = mdl_info_row_add(t, "cls_token", "cls_token", "cls_token");
    mdl_shape2(r->in, N, C);
    mdl_shape2(r->out, N + 1, C);
    for (int j = 0; j < c->cls_attn_layers; j++) {
        char p[48], nm[48];
        snprintf(p, sizeof p, "cls_attn_blocks.%d.", j);
        snprintf(nm, sizeof nm, "cls_attn_blocks.%d", j);
        r = mdl_info_row_add(t, "cls_attn_blocks", p, nm);
        mdl_shape2(r->in, N + 1, C);
        mdl_shape2(r->out, N + 1, C);
        /* qkv on all tokens, one query row against N+1 keys, proj and MLP on the cls row */
        r->macs = 3.0 * (N + 1) * C * C + 2.0 * (N + 1) * C + (double)C * C;
        if (c->attn == SF_ATTN_SIMA) {
            snprintf(r->note, sizeof r->note, "sima %s qk_first", sf_attn_norm_names[c->attn_norm]);
        } else {
            r->softmax_exp = (double)H * (N + 1);
            snprintf(r->note, sizeof r->note, "softmax");
        }
        mdl_info_mlp(r, c, 1, C);
    }
    mdl_info_norm_head(t, c, N + 1, C);
}

const mdl_family_def mdl_family_xcit = {
    .title = "XCiT", .sima_record = 1, .check = xcit_check, .build = xcit_build, .forward = xcit_forward,
    .free = xcit_free, .info_rows = xcit_info_rows,
};
