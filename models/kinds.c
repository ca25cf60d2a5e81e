/* kinds.c — the models layer's tables, each generated from one list of model.h: the names
 * of families, attention kinds, norms, activations and pools; the table of families and of
 * attention kinds (each entry a struct defined with its code); the named presets; and the
 * one model validator, sf_model_check (the config layer adds only its file name).
 *
 * Deliberately not here: what a family or a kind does (vit.c, xcit.c, soft.c, common.c).
 */
#include "models_internal.h"

#include <stdarg.h>
#include <string.h>

/* ---- names and tables, from the lists ---- */
#define NAME(ID, name) #name,
const char *const sf_family_names[SF_FAMILY_COUNT + 1] = {SF_FAMILIES(NAME) NULL};
const char *const sf_attn_names[SF_ATTN_COUNT + 1] = {SF_ATTN_KINDS(NAME) NULL};
const char *const sf_attn_norm_names[SF_NORM_COUNT + 1] = {SF_ATTN_NORMS(NAME) NULL};
const char *const sf_act_names[SF_ACT_COUNT + 1] = {SF_ACTS(NAME) NULL};
const char *const sf_pool_names[SF_POOL_COUNT + 1] = {SF_POOLS(NAME) NULL};
const char *const sf_landmarks_names[SF_LANDMARKS_COUNT + 1] = {SF_LANDMARK_KINDS(NAME) NULL};
#undef NAME

/* An entry of a list without its struct (mdl_family_<name>, mdl_attn_<name>) does not link. */
#define FAMILY(ID, name) [SF_FAMILY_##ID] = &mdl_family_##name,
#define ATTN(ID, name) [SF_ATTN_##ID] = &mdl_attn_##name,
const mdl_family_def *const mdl_families[SF_FAMILY_COUNT] = {SF_FAMILIES(FAMILY)};
const mdl_attn_def *const mdl_attn_defs[SF_ATTN_COUNT] = {SF_ATTN_KINDS(ATTN)};
#undef FAMILY
#undef ATTN

/* ---- presets: one line per named model ---- */

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
    /* the single-width keys mirror stage 4 (informational; sf_model_derive keeps them so) */
    c->patch_size = 4;
    c->embed_dim = dims[3];
    c->num_heads = heads[3];
    c->attn = SF_ATTN_SOFT;
    c->attn_norm = SF_NORM_NONE;  // SOFT; symmetric = SOFT++
    c->drop_path_rate = 0.1f;     // SOFT configs, linear over all layers
}

static const int d_std[4] = {64, 128, 320, 512}, h_std[4] = {2, 4, 10, 16};
static const int d_med[4] = {64, 128, 288, 512}, h_med[4] = {2, 4, 9, 16};
static const int d_huge[4] = {64, 128, 352, 512}, h_huge[4] = {2, 4, 11, 16};

/* X(name, what it sets on the common defaults): the names and the setters follow from it. */
#define PRESETS(X)                                                            \
    X(deit_tiny, vit_defaults(c, 192, 12, 3))                                 \
    X(deit_small, vit_defaults(c, 384, 12, 6))                                \
    X(vit, vit_defaults(c, 192, 6, 3))                                        \
    X(xcit_tiny_12_p16, xcit_defaults(c, 192, 12, 4, 16, 1.0f))               \
    X(xcit_small_12_p16, xcit_defaults(c, 384, 12, 8, 16, 1.0f))              \
    X(xcit_tiny_12_p8, xcit_defaults(c, 192, 12, 4, 8, 1.0f))                 \
    X(xcit_tiny_24_p16, xcit_defaults(c, 192, 24, 4, 16, 1e-5f))              \
    X(soft_tiny, soft_defaults(c, d_std, h_std, (int[]){1, 2, 3, 2}))         \
    X(soft_small, soft_defaults(c, d_std, h_std, (int[]){1, 3, 7, 4}))        \
    X(soft_small_repo, soft_defaults(c, d_std, h_std, (int[]){1, 3, 20, 4}))  \
    X(soft_medium, soft_defaults(c, d_med, h_med, (int[]){1, 3, 29, 5}))      \
    X(soft_large, soft_defaults(c, d_std, h_std, (int[]){1, 3, 40, 5}))       \
    X(soft_huge, soft_defaults(c, d_huge, h_huge, (int[]){1, 5, 49, 5}))       \
    X(cvt_13, mdl_cvt_defaults(c, "cvt_13"))                                  \
    X(cvt_21, mdl_cvt_defaults(c, "cvt_21"))

#define PRESET_FN(name, call) static void preset_##name(sf_model_cfg *c) { call; }
PRESETS(PRESET_FN)
#undef PRESET_FN
#define PRESET_NAME(name, call) #name,
const char *const sf_model_names[] = {PRESETS(PRESET_NAME) NULL};
#undef PRESET_NAME
#define PRESET_ROW(name, call) preset_##name,
static void (*const presets[])(sf_model_cfg *c) = {PRESETS(PRESET_ROW)};
#undef PRESET_ROW

static void base_defaults(sf_model_cfg *c) {
    memset(c, 0, sizeof(*c));
    c->img_size = 224;
    c->in_chans = 3;
    c->num_classes = 1000;
    c->mlp_ratio = 4.0f;
    c->num_stages = 4;
    c->nr_iters = 20;
    c->nr_init = SF_NR_MASTER;
    c->soft_landmarks = SF_LANDMARKS_STRIDE;
    c->num_landmarks = 49;
    c->attn_norm = SF_NORM_L1;
    c->sima_order = SF_SIMA_AUTO;
    c->act = SF_ACT_GELU;
    c->lpi = 1;
    c->layer_scale_init = 1.0f;  // used by XCiT only
    c->cls_attn_layers = 2;      // used by XCiT only
}

int sf_model_defaults(sf_model_cfg *cfg, const char *name) {
    sf_model_cfg c;
    base_defaults(&c);
    int i = 0;
    while (sf_model_names[i] && strcmp(sf_model_names[i], name)) i++;
    if (sf_model_names[i]) presets[i](&c);
    else if (!name[0]) vit_defaults(&c, 192, 12, 3);  // the custom ViT of a config without model.name
    else {
        sf_error("unknown model name '%s'", name);
        char list[512] = "";
        for (int j = 0; sf_model_names[j]; j++) {
            strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, sf_model_names[j], sizeof list - strlen(list) - 1);
        }
        sf_hint("known models: %s", list);
        return -1;
    }
    snprintf(c.name, sizeof c.name, "%s", name);
    *cfg = c;
    return 0;
}

void sf_model_derive(sf_model_cfg *c) {
    if (c->family != SF_FAMILY_SOFT && c->family != SF_FAMILY_CVT) return;
    c->depth = mdl_block_count(c);
    const int last = c->num_stages - 1;
    if (last < 0 || last >= (int)(sizeof c->embed_dims / sizeof *c->embed_dims)) return; /* sf_model_check says why */
    c->embed_dim = c->embed_dims[last];
    c->num_heads = c->stage_heads[last];
}

/* ---- the one validator ---- */

int mdl_bad(const char *where, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sf_error("%s%s", where ? where : "", msg);
}

/* "a, b or c": the names in a bit set of list entries */
static const char *name_set(char *buf, size_t n, unsigned set, const char *const *names) {
    int total = 0, k = 0;
    for (int i = 0; names[i]; i++) total += (set >> i) & 1;
    buf[0] = 0;
    for (int i = 0; names[i]; i++) {
        if (!((set >> i) & 1)) continue;
        const char *sep = k == 0 ? "" : k == total - 1 ? " or " : ", ";
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", sep, names[i]);
        k++;
    }
    return buf;
}

/* Kind k (model.attn, or block `block` of model.block_attn when >= 0) in the config's family. */
static int check_kind(const sf_model_cfg *c, sf_attn_kind k, int block, const char *where) {
    char at[32] = "", list[128];
    if (block >= 0) snprintf(at, sizeof at, " (block %d)", block);
    if ((unsigned)k >= SF_ATTN_COUNT) return mdl_bad(where, "model.attn %d%s is not a known kind", (int)k, at);
    const mdl_attn_def *d = mdl_attn_defs[k];
    if (!(d->hosts & 1u << c->family)) {
        unsigned here = 0;
        for (int i = 0; i < SF_ATTN_COUNT; i++) here |= (mdl_attn_defs[i]->hosts >> c->family & 1u) << i;
        mdl_bad(where, "model.attn '%s'%s is not available in %s: use %s", sf_attn_names[k], at,
                mdl_families[c->family]->title, name_set(list, sizeof list, here, sf_attn_names));
        if (k == SF_ATTN_XCA) sf_hint("XCA comes with LPI, layer scale and class attention: use an xcit_* model");
        if (k == SF_ATTN_SOFT)
            sf_hint("soft attention runs in a SOFT pyramid (model.name soft_*) or a ViT (model.soft_landmarks fixed)");
        return -1;
    }
    if (d->norms && !(d->norms & 1u << c->attn_norm))
        return mdl_bad(where, "model.attn_norm '%s': %s takes %s", sf_attn_norm_names[c->attn_norm],
                       sf_attn_names[k], name_set(list, sizeof list, d->norms, sf_attn_norm_names));
    return d->check ? d->check(c, where) : 0;
}

int mdl_check_tokens(const sf_model_cfg *c, const char *where) {
    if (c->depth < 1 || c->depth > SF_MAX_BLOCKS)
        return mdl_bad(where, "model.depth %d must be in 1..%d", c->depth, SF_MAX_BLOCKS);
    if (c->embed_dim < 1 || c->num_heads < 1 || c->embed_dim % c->num_heads)
        return mdl_bad(where, "model.embed_dim %d must be a positive multiple of model.num_heads %d",
                       c->embed_dim, c->num_heads);
    if (c->patch_size < 1 || c->img_size % c->patch_size)
        return mdl_bad(where, "model.img_size %d must be a multiple of model.patch_size %d", c->img_size,
                       c->patch_size);
    return mdl_check_block_kinds(c, c->depth, where);
}

int mdl_check_block_kinds(const sf_model_cfg *c, int blocks, const char *where) {
    if (c->n_block_attn != 0 && c->n_block_attn != blocks)
        return mdl_bad(where, "model.block_attn: %d kinds given for %d blocks", c->n_block_attn, blocks);
    for (int i = 0; i < c->n_block_attn; i++)
        if (check_kind(c, c->block_attn[i], i, where)) return -1;
    return 0;
}

int sf_model_check(const sf_model_cfg *c, const char *where) {
    if ((unsigned)c->family >= SF_FAMILY_COUNT) return mdl_bad(where, "model.family %d is not a known family", (int)c->family);
    if (c->img_size <= 0) return mdl_bad(where, "model.img_size %d must be positive", c->img_size);
    if (c->in_chans != 1 && c->in_chans != 3) return mdl_bad(where, "model.in_chans %d: expected 1 or 3", c->in_chans);
    if (c->num_classes < 1) return mdl_bad(where, "model.num_classes %d must be >= 1", c->num_classes);
    if (!(c->mlp_ratio > 0)) return mdl_bad(where, "model.mlp_ratio %g must be positive", c->mlp_ratio);
    if (c->drop_path_rate < 0 || c->drop_path_rate >= 1 || c->drop_rate < 0 || c->drop_rate >= 1)
        return mdl_bad(where, "model.drop_path_rate %g / model.drop_rate %g must be in [0, 1)", c->drop_path_rate,
                       c->drop_rate);
    if ((unsigned)c->sima_order >= SF_SIMA_COUNT)
        return mdl_bad(where, "model.sima_order %d is not a known order", (int)c->sima_order);
    if ((unsigned)c->attn_norm >= SF_NORM_COUNT) return mdl_bad(where, "model.attn_norm %d is not a known norm", (int)c->attn_norm);
    if ((unsigned)c->act >= SF_ACT_COUNT) return mdl_bad(where, "model.act %d is not a known activation", (int)c->act);
    if ((unsigned)c->global_pool >= SF_POOL_COUNT)
        return mdl_bad(where, "model.global_pool %d is not a known pool", (int)c->global_pool);
    if ((unsigned)c->soft_landmarks >= SF_LANDMARKS_COUNT)
        return mdl_bad(where, "model.soft_landmarks %d is not stride or fixed", (int)c->soft_landmarks);
    int side = 1;
    while (side * side < c->num_landmarks) side++;
    if (c->num_landmarks < 1 || side * side != c->num_landmarks)
        return mdl_bad(where, "model.num_landmarks %d must be a perfect square >= 1 (side x side landmarks)",
                       c->num_landmarks);
    if (mdl_families[c->family]->check(c, where)) return -1;
    return check_kind(c, c->attn, -1, where);
}
