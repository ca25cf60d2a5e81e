/* registry.c — model names and their defaults (docs/models.md), config
 * checks, and the public model API: build, init, forward, free, SimA order switch and the
 * SimA token-norm record.
 *
 * Deliberately not here: the block table and FLOP counts (info.c), family code (vit.c,
 * xcit.c, soft.c; CvT's defaults and checks too: its family table in cvt.c).
 */
#include "models_internal.h"

#include <stdlib.h>
#include <string.h>

const char *const sf_model_names[] = {
    "deit_tiny",        "deit_small",        "vit",
    "xcit_tiny_12_p16", "xcit_small_12_p16", "xcit_tiny_12_p8", "xcit_tiny_24_p16",
    "soft_tiny",        "soft_small",        "soft_small_repo", "soft_medium",
    "soft_large",       "soft_huge",         "cvt_13",          "cvt_21",
    NULL,
};

static void base_defaults(sf_model_cfg *c) {
    memset(c, 0, sizeof(*c));
    c->img_size = 224;
    c->in_chans = 3;
    c->num_classes = 1000;
    c->mlp_ratio = 4.0f;
    c->num_stages = 4;
    c->nr_iters = 20;
    c->nr_init = SF_NR_MASTER;
    c->attn_norm = SF_NORM_L1;
    c->sima_order = SF_SIMA_AUTO;
    c->act = SF_ACT_GELU;
    c->lpi = 1;
    c->layer_scale_init = 1.0f;  // used by XCiT only
    c->cls_attn_layers = 2;      // used by XCiT only
}

static void vit_defaults(sf_model_cfg *c, int C, int L, int H) {
    c->family = SF_FAMILY_VIT;
    c->patch_size = 16;
    c->embed_dim = C;
    c->depth = L;
    c->num_heads = H;
    c->attn = SF_ATTN_MSA;
    c->drop_path_rate = 0.1f;  // deit main.py default, linear over depth
}

static void xcit_defaults(sf_model_cfg *c, int C, int L, int H, int P, float eta) {
    c->family = SF_FAMILY_XCIT;
    c->patch_size = P;
    c->embed_dim = C;
    c->depth = L;
    c->num_heads = H;
    c->attn = SF_ATTN_XCA;
    c->layer_scale_init = eta;
    c->drop_path_rate = 0.05f;  // SimA paper (all models) and XCiT README S12/16; constant
}

static void soft_defaults(sf_model_cfg *c, const int dims[4], const int heads[4], const int depths[4]) {
    c->family = SF_FAMILY_SOFT;
    c->num_stages = 4;
    c->depth = 0;
    for (int s = 0; s < 4; s++) {
        c->embed_dims[s] = dims[s];
        c->stage_heads[s] = heads[s];
        c->depths[s] = depths[s];
        c->depth += depths[s];
    }
    /* the single-width keys mirror stage 4 (informational) */
    c->patch_size = 4;
    c->embed_dim = dims[3];
    c->num_heads = heads[3];
    c->attn = SF_ATTN_SOFT;
    c->attn_norm = SF_NORM_NONE;  // SOFT; symmetric = SOFT++
    c->drop_path_rate = 0.1f;     // SOFT configs, linear over all layers
}

int sf_model_defaults(sf_model_cfg *cfg, const char *name) {
    static const int d_std[4] = {64, 128, 320, 512}, h_std[4] = {2, 4, 10, 16};
    static const int d_med[4] = {64, 128, 288, 512}, h_med[4] = {2, 4, 9, 16};
    static const int d_huge[4] = {64, 128, 352, 512}, h_huge[4] = {2, 4, 11, 16};
    sf_model_cfg c;
    base_defaults(&c);
    if (!strcmp(name, "deit_tiny")) vit_defaults(&c, 192, 12, 3);
    else if (!strcmp(name, "deit_small")) vit_defaults(&c, 384, 12, 6);
    else if (!strcmp(name, "vit")) vit_defaults(&c, 192, 6, 3);
    else if (!name[0]) vit_defaults(&c, 192, 12, 3);  // the custom ViT of a config without model.name
    else if (!strcmp(name, "xcit_tiny_12_p16")) xcit_defaults(&c, 192, 12, 4, 16, 1.0f);
    else if (!strcmp(name, "xcit_small_12_p16")) xcit_defaults(&c, 384, 12, 8, 16, 1.0f);
    else if (!strcmp(name, "xcit_tiny_12_p8")) xcit_defaults(&c, 192, 12, 4, 8, 1.0f);
    else if (!strcmp(name, "xcit_tiny_24_p16")) xcit_defaults(&c, 192, 24, 4, 16, 1e-5f);
    else if (!strcmp(name, "soft_tiny")) soft_defaults(&c, d_std, h_std, (int[]){1, 2, 3, 2});
    else if (!strcmp(name, "soft_small")) soft_defaults(&c, d_std, h_std, (int[]){1, 3, 7, 4});
    else if (!strcmp(name, "soft_small_repo")) soft_defaults(&c, d_std, h_std, (int[]){1, 3, 20, 4});
    else if (!strcmp(name, "soft_medium")) soft_defaults(&c, d_med, h_med, (int[]){1, 3, 29, 5});
    else if (!strcmp(name, "soft_large")) soft_defaults(&c, d_std, h_std, (int[]){1, 3, 40, 5});
    else if (!strcmp(name, "soft_huge")) soft_defaults(&c, d_huge, h_huge, (int[]){1, 5, 49, 5});
    else if (mdl_cvt_family.defaults(&c, name) == 0) {}  // cvt_13, cvt_21
    else {
        sf_error("unknown model name '%s'", name);
        char list[512] = "";
        for (int i = 0; sf_model_names[i]; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, sf_model_names[i], sizeof list - strlen(list) - 1);
        }
        sf_hint("known models: %s", list);
        return -1;
    }
    snprintf(c.name, sizeof c.name, "%s", name);
    *cfg = c;
    return 0;
}

/* ---- checks (user errors: message + -1) ---- */

static int check_sima_norm(const sf_model_cfg *c) {
    if (c->attn_norm == SF_NORM_SYMMETRIC)
        return sf_error("model.attn_norm: 'symmetric' is for attn=soft; sima takes l1, l2 or none");
    return 0;
}

int mdl_check_cfg(const sf_model_cfg *c) {
    const char *nm = c->name[0] ? c->name : "(custom)";
    if (c->img_size <= 0) return sf_error("model.img_size %d must be positive (%s)", c->img_size, nm);
    if (c->in_chans < 1 || c->in_chans > 4) return sf_error("model.in_chans %d: expected 1 or 3", c->in_chans);
    if (c->num_classes < 1) return sf_error("model.num_classes %d must be >= 1", c->num_classes);
    if (!(c->mlp_ratio > 0)) return sf_error("model.mlp_ratio %g must be positive", c->mlp_ratio);
    if (c->drop_path_rate < 0 || c->drop_path_rate >= 1 || c->drop_rate < 0 || c->drop_rate >= 1)
        return sf_error("model.drop_path_rate %g / model.drop_rate %g must be in [0, 1)",
                        c->drop_path_rate, c->drop_rate);
    if (c->sima_order < SF_SIMA_AUTO || c->sima_order > SF_SIMA_KV_FIRST)
        return sf_error("model.sima_order %d is not auto, qk_first or kv_first", (int)c->sima_order);
    if (c->family == SF_FAMILY_VIT || c->family == SF_FAMILY_XCIT) {
        const int xc = c->family == SF_FAMILY_XCIT;
        if (c->depth < 1 || c->depth > SF_MAX_BLOCKS)
            return sf_error("model.depth %d must be in 1..%d", c->depth, SF_MAX_BLOCKS);
        if (c->embed_dim < 1 || c->num_heads < 1 || c->embed_dim % c->num_heads)
            return sf_error("model.embed_dim %d must be a positive multiple of model.num_heads %d",
                            c->embed_dim, c->num_heads);
        if (xc && c->patch_size != 16 && c->patch_size != 8)
            return sf_error("model.patch_size %d: XCiT's conv patch embedding exists for 8 and 16",
                            c->patch_size);
        if (c->patch_size < 1 || c->img_size % c->patch_size)
            return sf_error("model.img_size %d must be a multiple of model.patch_size %d",
                            c->img_size, c->patch_size);
        if (xc && c->embed_dim % (c->patch_size == 16 ? 8 : 4))
            return sf_error("model.embed_dim %d must be divisible by %d (conv patch embedding widths)",
                            c->embed_dim, c->patch_size == 16 ? 8 : 4);
        if (c->n_block_attn < 0 || c->n_block_attn > c->depth)
            return sf_error("model: %d per-block attention kinds for depth %d", c->n_block_attn, c->depth);
        int uses_sima = 0;
        for (int i = 0; i < c->depth; i++) {
            sf_attn_kind k = mdl_block_attn(c, i);
            uses_sima |= k == SF_ATTN_SIMA;
            if (!xc && k != SF_ATTN_MSA && k != SF_ATTN_SIMA) {
                sf_error("model.attn '%s' (block %d) is not available in a ViT: use msa or sima",
                         mdl_attn_name(k), i);
                if (k == SF_ATTN_XCA) sf_hint("XCA comes with LPI, layer scale and class attention: use an xcit_* model");
                return -1;
            }
            if (xc && k != SF_ATTN_XCA && k != SF_ATTN_SIMA)
                return sf_error("model.attn '%s' (block %d) is not available in XCiT: use xca or sima",
                                mdl_attn_name(k), i);
        }
        if (xc && c->attn != SF_ATTN_XCA && c->attn != SF_ATTN_SIMA)
            return sf_error("model.attn '%s' is not available in XCiT: use xca or sima", mdl_attn_name(c->attn));
        if ((uses_sima || (xc && c->attn == SF_ATTN_SIMA)) && check_sima_norm(c)) return -1;
        if (xc && (c->cls_attn_layers < 0 || c->cls_attn_layers > 8))
            return sf_error("model.cls_attn_layers %d must be in 0..8", c->cls_attn_layers);
        return 0;
    }
    if (c->family == SF_FAMILY_SOFT) {
        if (c->attn != SF_ATTN_SOFT)
            return sf_error("model.attn '%s': SOFT stages 1-3 use attn=soft (stage 4 is softmax)",
                            mdl_attn_name(c->attn));
        if (c->attn_norm != SF_NORM_NONE && c->attn_norm != SF_NORM_SYMMETRIC)
            return sf_error("model.attn_norm '%s': soft takes none (SOFT) or symmetric (SOFT++)",
                            mdl_norm_name(c->attn_norm));
        if (c->num_stages != 4) return sf_error("model.num_stages %d: SOFT has 4 stages", c->num_stages);
        if (c->img_size % 32 || c->img_size < 32)
            return sf_error("model.img_size %d: SOFT needs a multiple of 32 (stride 32, landmark "
                            "ratios 8/4/2)", c->img_size);
        if (c->nr_iters < 1) return sf_error("model.nr_iters %d must be >= 1", c->nr_iters);
        if (c->nr_init != SF_NR_MASTER && c->nr_init != SF_NR_PAPER)
            return sf_error("model.nr_init %d is not master or paper", c->nr_init);
        for (int s = 0; s < 4; s++) {
            if (c->embed_dims[s] < 1 || c->stage_heads[s] < 1 || c->embed_dims[s] % c->stage_heads[s])
                return sf_error("model.embed_dims[%d] %d must be a positive multiple of num_heads[%d] %d",
                                s, c->embed_dims[s], s, c->stage_heads[s]);
            if (c->depths[s] < 0 || c->depths[s] > 256)
                return sf_error("model.depths[%d] %d must be in 0..256", s, c->depths[s]);
        }
        return 0;
    }
    if (c->family == SF_FAMILY_CVT) return mdl_cvt_family.check(c);
    return sf_error("model.family %d is not vit, xcit, soft or cvt", (int)c->family);
}

/* ---- the public model API ---- */

sf_model *sf_model_build(const sf_model_cfg *cfg, sf_params *ps) {
    if (mdl_check_cfg(cfg)) return NULL;
    sf_model *m = sf_calloc(1, sizeof(*m));
    m->cfg = *cfg;
    int rc = -1;
    switch (cfg->family) {
    case SF_FAMILY_VIT: rc = vit_build(m, ps); break;
    case SF_FAMILY_XCIT: rc = xcit_build(m, ps); break;
    case SF_FAMILY_SOFT: rc = soft_build(m, ps); break;
    case SF_FAMILY_CVT: rc = mdl_cvt_family.build(m, ps); break;
    }
    if (rc) {
        sf_model_free(m);
        return NULL;
    }
    return m;
}

void sf_model_init(sf_model *m, sf_params *ps, sf_rng *rng) {
    (void)m;
    sf_params_init_values(ps, rng);
}

void sf_model_free(sf_model *m) {
    if (!m) return;
    switch (m->cfg.family) {
    case SF_FAMILY_VIT: vit_free(m); break;
    case SF_FAMILY_XCIT: xcit_free(m); break;
    case SF_FAMILY_SOFT: soft_free(m); break;
    case SF_FAMILY_CVT: mdl_cvt_family.free(m); break;
    }
    free(m->viz_q);
    free(m->viz_k);
    free(m);
}

sf_tensor *sf_model_forward(sf_ctx *g, sf_model *m, sf_tensor *images) {
    const sf_model_cfg *c = &m->cfg;
    char b[64];
    SF_ASSERT(images->ndim == 4 && images->shape[1] == c->in_chans && images->shape[2] == images->shape[3],
              "model %s expects images (B, %d, S, S), got %s", c->name, c->in_chans,
              sf_shape_str(images, b, sizeof b));
    const int S = images->shape[2];
    m->viz_valid = 0;
    switch (c->family) {
    case SF_FAMILY_VIT:
        /* a learned pos_embed fixes the grid; resize a checkpoint with sf_vit_interpolate_pos_embed */
        SF_ASSERT(S == c->img_size, "ViT %s built for %d², got images %s", c->name, c->img_size,
                  sf_shape_str(images, b, sizeof b));
        return vit_forward(g, m, images);
    case SF_FAMILY_XCIT:
        SF_ASSERT(S % c->patch_size == 0, "XCiT images %s: side not a multiple of %d",
                  sf_shape_str(images, b, sizeof b), c->patch_size);
        return xcit_forward(g, m, images);
    case SF_FAMILY_SOFT:
        SF_ASSERT(S % 32 == 0, "SOFT images %s: side not a multiple of 32", sf_shape_str(images, b, sizeof b));
        return soft_forward(g, m, images);
    case SF_FAMILY_CVT: return mdl_cvt_family.forward(g, m, images);
    }
    SF_ASSERT(0, "family %d", (int)c->family);
    return NULL;
}

const sf_model_cfg *sf_model_config(const sf_model *m) { return &m->cfg; }

void sf_model_set_sima_order(sf_model *m, sf_sima_order order) { m->cfg.sima_order = order; }

static int model_has_sima(const sf_model_cfg *c) {
    /* no token-norm record in CvT: its queries and keys live on different grids */
    if (c->family == SF_FAMILY_SOFT || c->family == SF_FAMILY_CVT) return 0;
    for (int i = 0; i < c->depth; i++)
        if (mdl_block_attn(c, i) == SF_ATTN_SIMA) return 1;
    return 0;
}

int sf_model_sima_token_norms(sf_model *m, float *q_norms, float *k_norms, int *grid_h, int *grid_w) {
    if (!model_has_sima(&m->cfg)) return -1;
    if (grid_h) *grid_h = m->viz_h;
    if (grid_w) *grid_w = m->viz_w;
    if (!q_norms && !k_norms) return 0;  // grid query only
    if (!m->viz_valid) return -1;        // no forward since build
    SF_ASSERT(m->viz_n == m->viz_h * m->viz_w, "recorded %d tokens for a %dx%d grid", m->viz_n,
              m->viz_h, m->viz_w);
    if (q_norms) memcpy(q_norms, m->viz_q, (size_t)m->viz_n * sizeof(float));
    if (k_norms) memcpy(k_norms, m->viz_k, (size_t)m->viz_n * sizeof(float));
    return 0;
}
