/* common.c — modules shared by every family: parameter registration with the reference names,
 * init schemes and weight-decay flags; Linear, LayerNorm, BatchNorm, Conv and
 * Mlp forwards; the attention kinds of ViT/XCiT blocks (msa, xca, sima: token mixing, cost
 * and table entry, mdl_attn_<name>; soft's is in soft.c), and the SimA token-norm record used by `sfvit viz`.
 *
 * Deliberately not here: family-specific blocks (vit.c, xcit.c, soft.c); op math (src/ops/).
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- registration ---- */

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* timm `add_weight_decay`: no decay iff 1-D, *.bias, or in model.no_weight_decay()
 * (DeiT {pos_embed, cls_token}; XCiT {pos_embed, cls_token, dist_token}; SOFT {cls_token};
 * CvT {stage<i>.pos_embed, stage<i>.cls_token}). */
static int official_decay(sf_family fam, const char *name, int ndim) {
    if (ndim <= 1 || ends_with(name, ".bias")) return 0;
    if (!strcmp(name, "cls_token")) return 0;
    if (fam == SF_FAMILY_CVT && ends_with(name, ".cls_token")) return 0;
    if (fam != SF_FAMILY_SOFT && !strcmp(name, "pos_embed")) return 0;
    return 1;
}

sf_tensor *mdl_param(sf_params *ps, sf_family fam, const char *prefix, const char *name,
                     int ndim, const int *shape, int trainable, int decay, sf_init init,
                     float arg) {
    char full[256];
    int n = snprintf(full, sizeof full, "%s%s", prefix, name);
    SF_ASSERT(n > 0 && (size_t)n < sizeof full, "parameter name too long: %s%s", prefix, name);
    int flags = 0;
    if (trainable) {
        flags |= SF_PARAM_TRAINABLE;
        if (decay) flags |= SF_PARAM_DECAY;
        if (official_decay(fam, full, ndim)) flags |= SF_PARAM_DECAY_OFFICIAL;
    }
    return sf_param_add(ps, full, ndim, shape, flags, init, arg);
}

static void join(char *buf, size_t n, const char *prefix, const char *name) {
    int k = snprintf(buf, n, "%s%s", prefix, name);
    SF_ASSERT(k > 0 && (size_t)k < n, "parameter name too long: %s%s", prefix, name);
}

mdl_linear mdl_linear_add(sf_params *ps, sf_family fam, const char *prefix, int out, int in,
                          int bias) {
    mdl_linear l = {0};
    l.w = mdl_param(ps, fam, prefix, ".weight", 2, (int[]){out, in}, 1, 1, SF_INIT_TRUNC_NORMAL,
                    0.02f);
    if (bias) l.b = mdl_param(ps, fam, prefix, ".bias", 1, (int[]){out}, 1, 0, SF_INIT_ZEROS, 0);
    return l;
}

mdl_ln mdl_ln_add(sf_params *ps, sf_family fam, const char *prefix, int C, float eps) {
    mdl_ln l;
    l.w = mdl_param(ps, fam, prefix, ".weight", 1, (int[]){C}, 1, 0, SF_INIT_ONES, 0);
    l.b = mdl_param(ps, fam, prefix, ".bias", 1, (int[]){C}, 1, 0, SF_INIT_ZEROS, 0);
    l.eps = eps;
    return l;
}

mdl_bn mdl_bn_add(sf_params *ps, sf_family fam, const char *prefix, int C) {
    mdl_bn l;
    l.w = mdl_param(ps, fam, prefix, ".weight", 1, (int[]){C}, 1, 0, SF_INIT_ONES, 0);
    l.b = mdl_param(ps, fam, prefix, ".bias", 1, (int[]){C}, 1, 0, SF_INIT_ZEROS, 0);
    l.mean = mdl_param(ps, fam, prefix, ".running_mean", 1, (int[]){C}, 0, 0, SF_INIT_ZEROS, 0);
    l.var = mdl_param(ps, fam, prefix, ".running_var", 1, (int[]){C}, 0, 0, SF_INIT_ONES, 0);
    /* num_batches_tracked is a 0-d int64 in PyTorch; one float here, saved as int64. */
    char full[256];
    join(full, sizeof full, prefix, ".num_batches_tracked");
    l.count = sf_param_add(ps, full, 0, (int[]){1}, SF_PARAM_I64, SF_INIT_ZEROS, 0);
    return l;
}

mdl_conv mdl_conv_add(sf_params *ps, sf_family fam, const char *prefix, int out, int in, int k,
                      int stride, int pad, int groups, int bias) {
    mdl_conv c = {0};
    float fan_in = (float)(in / groups * k * k);
    c.w = mdl_param(ps, fam, prefix, ".weight", 4, (int[]){out, in / groups, k, k}, 1, 1,
                    SF_INIT_KAIMING_UNIFORM, fan_in);
    if (bias)
        c.b = mdl_param(ps, fam, prefix, ".bias", 1, (int[]){out}, 1, 0, SF_INIT_KAIMING_UNIFORM,
                        fan_in);
    c.stride = stride;
    c.pad = pad;
    c.groups = groups;
    return c;
}

mdl_mlp mdl_mlp_add(sf_params *ps, sf_family fam, const char *prefix, int C, int hidden,
                    sf_act act, float drop) {
    char p[256];
    mdl_mlp l;
    join(p, sizeof p, prefix, "fc1");
    l.fc1 = mdl_linear_add(ps, fam, p, hidden, C, 1);
    join(p, sizeof p, prefix, "fc2");
    l.fc2 = mdl_linear_add(ps, fam, p, C, hidden, 1);
    l.act = act;
    l.drop = drop;
    return l;
}

mdl_attn mdl_attn_add(sf_params *ps, sf_family fam, const char *prefix, int C, int H,
                      sf_attn_kind kind, sf_attn_norm norm, float drop) {
    char p[256];
    mdl_attn a = {0};
    a.kind = kind;
    a.norm = norm;
    a.H = H;
    a.drop = drop;
    /* XCiT registers temperature first (its state_dict order); SimA deletes it. */
    if (mdl_attn_defs[kind]->temperature)
        a.temperature = mdl_param(ps, fam, prefix, "temperature", 3, (int[]){H, 1, 1}, 1, 0,
                                  SF_INIT_ONES, 0);
    if (mdl_attn_defs[kind]->q_v) {  /* SOFT: K = Q, so no key Linear (nor a zero gradient) */
        join(p, sizeof p, prefix, "q");
        a.q = mdl_linear_add(ps, fam, p, C, C, 1);
        join(p, sizeof p, prefix, "v");
        a.v = mdl_linear_add(ps, fam, p, C, C, 1);
        join(p, sizeof p, prefix, "Qnorm_act.0");
        a.lnorm = mdl_ln_add(ps, fam, p, C / H, 1e-5f);
    } else {
        join(p, sizeof p, prefix, "qkv");
        a.qkv = mdl_linear_add(ps, fam, p, 3 * C, C, 1);
    }
    join(p, sizeof p, prefix, "proj");
    a.proj = mdl_linear_add(ps, fam, p, C, C, 1);
    return a;
}

/* ---- forwards ---- */

sf_tensor *mdl_linear_fwd(sf_ctx *g, const mdl_linear *l, sf_tensor *x) {
    return sf_linear(g, x, l->w, l->b);
}

sf_tensor *mdl_linear_last_use(sf_ctx *g, const mdl_linear *l, sf_tensor *x) {
    return sf_linear_last_use(g, x, l->w, l->b);
}

sf_tensor *mdl_ln_fwd(sf_ctx *g, const mdl_ln *l, sf_tensor *x) {
    return sf_layernorm(g, x, l->w, l->b, l->eps);
}

sf_tensor *mdl_bn_fwd(sf_ctx *g, const mdl_bn *l, sf_tensor *x) {
    return sf_batchnorm2d(g, x, l->w, l->b, l->mean, l->var, l->count, 1e-5f, 0.1f);
}

sf_tensor *mdl_conv_fwd(sf_ctx *g, const mdl_conv *l, sf_tensor *x) {
    return sf_conv2d(g, x, l->w, l->b, l->stride, l->pad, l->groups);
}

sf_tensor *mdl_conv_last_use(sf_ctx *g, const mdl_conv *l, sf_tensor *x) {
    return sf_conv2d_last_use(g, x, l->w, l->b, l->stride, l->pad, l->groups);
}

/* No default: an activation added to SF_ACTS is a -Wswitch warning until it has a case. */
static sf_tensor *act_fwd(sf_ctx *g, sf_act act, sf_tensor *x) {
    switch (act) {
    case SF_ACT_GELU: return sf_gelu(g, x);
    case SF_ACT_RELU: return sf_relu(g, x);
    case SF_ACT_QUICK_GELU: return sf_quick_gelu(g, x);
    case SF_ACT_COUNT: break;
    }
    SF_ASSERT(0, "activation %d", (int)act);
    return NULL;
}

static sf_tensor *dropout(sf_ctx *g, sf_tensor *x, float p) {
    return p > 0 ? sf_dropout(g, x, p) : x;
}

/* The op of a model's activation. No default, as act_fwd. */
static sf_op act_op(sf_act act) {
    switch (act) {
    case SF_ACT_GELU: return SF_OP_GELU;
    case SF_ACT_RELU: return SF_OP_RELU;
    case SF_ACT_QUICK_GELU: return SF_OP_QUICK_GELU;
    case SF_ACT_COUNT: break;
    }
    SF_ASSERT(0, "activation %d", (int)act);
    return SF_OP_NONE;
}

/* timm Mlp: fc2(drop(act(fc1 x))) then drop. Every activation's backward reads its input
 * and dropout's its mask, so the activation's output is dead once fc2 (or dropout) read it;
 * without dropout fc2 is its only reader, so in bf16 it is made in bf16 alone. */
sf_tensor *mdl_mlp_fwd(sf_ctx *g, const mdl_mlp *l, sf_tensor *x) {
    /* fc1's output goes only into the activation: without dropout the two are one op, which
     * keeps fc1's output in bf16 alone and whose backward sums and rounds fc1's output
     * gradient in one pass */
    sf_tensor *a = l->drop <= 0 ? sf_linear_act_to_linear(g, x, l->fc1.w, l->fc1.b, act_op(l->act))
                                : act_fwd(g, l->act, mdl_linear_last_use(g, &l->fc1, x));
    sf_tensor *h = dropout(g, a, l->drop);
    if (h != a) sf_tensor_release_data(g, a);
    return dropout(g, mdl_linear_last_use(g, &l->fc2, h), l->drop);
}

sf_tensor *mdl_heads_norm(sf_ctx *g, sf_tensor *x, int parts, int part, int H, sf_attn_norm norm, float eps) {
    switch (norm) {
    case SF_NORM_L1: return sf_heads_split_norm(g, x, parts, part, H, 1, eps);
    case SF_NORM_L2: return sf_heads_split_norm(g, x, parts, part, H, 2, eps);
    case SF_NORM_NONE: return sf_heads_split(g, x, parts, part, H);
    /* no default: a norm added to the list is a -Wswitch warning here until it has a case */
    case SF_NORM_SYMMETRIC:
    case SF_NORM_COUNT: break;
    }
    SF_ASSERT(0, "sima: normalization %d is not l1, l2 or none", (int)norm);
    return NULL;
}

/* The l2 norm of each token of x (B, H, N, D) after the first skip, the mean over heads, of
 * batch element 0 only ((H, N, D) at the start of x), into *out, (re)sized to *n. */
static void head_mean_norms(const sf_tensor *x, int skip, float **out, int *n) {
    const int H = x->shape[1], N = x->shape[2], D = x->shape[3];
    if (*n != N - skip) {
        *out = sf_realloc(*out, (size_t)(N - skip) * sizeof(float));
        *n = N - skip;
    }
    for (int t = 0; t < N - skip; t++) {
        double s = 0;
        for (int h = 0; h < H; h++) {
            const float *r = x->data + ((size_t)h * N + skip + t) * D;
            double a = 0;
            for (int d = 0; d < D; d++) a += (double)r[d] * r[d];
            s += sqrt(a);
        }
        (*out)[t] = (float)(s / H);
    }
}

void mdl_viz_record(sf_model *m, const sf_tensor *q, const sf_tensor *k, int skip) {
    if (q->shape[2] <= skip || k->shape[2] <= skip) return;
    head_mean_norms(q, skip, &m->viz_q, &m->viz_n);
    head_mean_norms(k, skip, &m->viz_k, &m->viz_kn);
    m->viz_valid = 1;
}

/* ---- attention kinds of ViT/XCiT blocks: token mixing, its cost, the kind's table entry ---- */

static sf_tensor *msa_mix(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *q, sf_tensor *k, sf_tensor *v) {
    (void)m, (void)a;
    return sf_msa(g, q, k, v, 1.0f / sqrtf((float)q->shape[3]));
}

static void msa_cost(const sf_model_cfg *c, int N, mdl_mix_cost *out) {
    out->macs = 2.0 * N * N * c->embed_dim;
    out->softmax_exp = (double)c->num_heads * N * N;
    snprintf(out->note, sizeof out->note, "msa");
}

/* CvT's attention is its own block (cvt.c), with msa or sima mixing on q, k of different grids */
const mdl_attn_def mdl_attn_msa = {.hosts = 1u << SF_FAMILY_VIT | 1u << SF_FAMILY_CVT, .mix = msa_mix, .cost = msa_cost};

static sf_tensor *xca_mix(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *q, sf_tensor *k, sf_tensor *v) {
    (void)m;
    return sf_xca(g, q, k, v, a->temperature);
}

static void xca_cost(const sf_model_cfg *c, int N, mdl_mix_cost *out) {
    const int D = c->embed_dim / c->num_heads;
    out->macs = 2.0 * N * c->embed_dim * D;
    out->softmax_exp = (double)c->num_heads * D * D;
    snprintf(out->note, sizeof out->note, "xca");
}

const mdl_attn_def mdl_attn_xca = {.hosts = 1u << SF_FAMILY_XCIT, .temperature = 1, .mix = xca_mix, .cost = xca_cost};

/* q̂, k̂ come normalized (token_norm: mdl_attn_fwd splits and normalizes in one pass). */
static sf_tensor *sima_mix(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *q, sf_tensor *k, sf_tensor *v) {
    if (a->record_viz && m) mdl_viz_record(m, q, k, a->viz_skip);
    /* q̂, k̂, v: made for this alone */
    return sf_sima_last_use(g, q, k, v, m ? m->cfg.sima_order : SF_SIMA_AUTO, SF_SIMA_HAND_Q | SF_SIMA_HAND_K | SF_SIMA_HAND_V);
}

static void sima_cost(const sf_model_cfg *c, int N, mdl_mix_cost *out) {
    const int C = c->embed_dim, D = C / c->num_heads;
    out->sima_order = sf_sima_resolve(c->sima_order, N, D);
    out->macs = out->sima_order == SF_SIMA_QK_FIRST ? 2.0 * N * N * C : 2.0 * N * C * D;
    snprintf(out->note, sizeof out->note, "sima %s %s", sf_attn_norm_names[c->attn_norm],
             sf_sima_order_names[out->sima_order]);
}

const mdl_attn_def mdl_attn_sima = {
    .hosts = 1u << SF_FAMILY_VIT | 1u << SF_FAMILY_XCIT | 1u << SF_FAMILY_CVT,
    .norms = 1u << SF_NORM_L1 | 1u << SF_NORM_L2 | 1u << SF_NORM_NONE,
    .token_norm = 1, .mix = sima_mix, .cost = sima_cost,
};

/* soft (mdl_attn_soft) is defined in soft.c, next to the SOFT core it shares with the pyramid. */

/* ViT / XCiT token mixing: qkv -> heads -> the kind's mixing -> merge -> proj -> drop. */
sf_tensor *mdl_attn_fwd(sf_ctx *g, sf_model *m, const mdl_attn *a, sf_tensor *x) {
    const mdl_attn_def *kind = mdl_attn_defs[a->kind];
    sf_tensor *q, *k, *v;  // (B, H, N, D) each
    if (kind->q_v) {
        q = sf_heads_split(g, mdl_linear_fwd(g, &a->q, x), 1, 0, a->H);
        v = sf_heads_split(g, mdl_linear_fwd(g, &a->v, x), 1, 0, a->H);
        k = q;
    } else {
        sf_tensor *qkv = mdl_linear_last_use(g, &a->qkv, x);  // (B, N, 3C)
        /* SimA: F.normalize's default eps 1e-12 (sima.py) */
        const sf_attn_norm qk_norm = kind->token_norm ? a->norm : SF_NORM_NONE;
        q = mdl_heads_norm(g, qkv, 3, 0, a->H, qk_norm, 1e-12f);
        k = mdl_heads_norm(g, qkv, 3, 1, a->H, qk_norm, 1e-12f);
        v = sf_heads_split(g, qkv, 3, 2, a->H);
        /* Memory: the fused qkv output is dead once split (neither the splits' backward nor
         * the projection's reads it), and so is o once merged; their arena chunks are reused
         * at once. */
        sf_tensor_release_data(g, qkv);
    }
    sf_tensor *o = kind->mix(g, m, a, q, k, v);  // (B, H, N, D)
    sf_tensor *merged = sf_heads_merge_to_linear(g, o);  // (B, N, C)
    sf_tensor_release_data(g, o);
    sf_tensor *y = mdl_linear_last_use(g, &a->proj, merged);  // (B, N, C)
    return dropout(g, y, a->drop);
}

/* Pre-norm: the LayerNorm's output goes into the attention's qkv projection alone (handed
 * over), so in bf16 it is made in bf16 alone, the operand that projection reads; the soft
 * kind's two projections (q, v) both read it, so there it stays fp32. */
sf_tensor *mdl_norm_attn_fwd(sf_ctx *g, sf_model *m, const mdl_ln *ln, const mdl_attn *a, sf_tensor *x) {
    const int one_reader = !mdl_attn_defs[a->kind]->q_v;
    sf_tensor *u = one_reader ? sf_layernorm_to_linear(g, x, ln->w, ln->b, ln->eps) : mdl_ln_fwd(g, ln, x);
    return mdl_attn_fwd(g, m, a, u);
}

/* Pre-norm: the LayerNorm's output goes into fc1 alone (mdl_mlp_fwd takes it over). */
sf_tensor *mdl_norm_mlp_fwd(sf_ctx *g, const mdl_ln *ln, const mdl_mlp *l, sf_tensor *x) {
    return mdl_mlp_fwd(g, l, sf_layernorm_to_linear(g, x, ln->w, ln->b, ln->eps));
}

sf_tensor *mdl_tokens_from_image_last_use(sf_ctx *g, sf_tensor *x) {
    const int B = x->shape[0], C = x->shape[1], n = x->shape[2] * x->shape[3];
    sf_tensor *r = sf_reshape(g, x, 3, (int[]){B, C, n});  // (B, C, n), x's memory
    sf_tensor *t = sf_permute(g, r, (int[]){0, 2, 1});      // (B, n, C)
    sf_tensor_release_data(g, x);
    r->data = NULL; /* the view's memory went with x's */
    return t;
}

sf_tensor *mdl_image_from_tokens_last_use(sf_ctx *g, sf_tensor *x, int h, int w) {
    const int B = x->shape[0], C = x->shape[2];
    SF_ASSERT(x->shape[1] == h * w, "tokens %d do not form a %dx%d grid", x->shape[1], h, w);
    sf_tensor *t = sf_permute(g, x, (int[]){0, 2, 1});  // (B, C, n)
    sf_tensor_release_data(g, x);
    return sf_reshape(g, t, 4, (int[]){B, C, h, w});    // (B, C, h, w)
}

/* Every caller passes a branch output y made by a Linear, dropout or layer-scale product,
 * whose backward reads its inputs, not y; the sum's backward reads no data either. So y is
 * dead after the sum and its memory is reused. */
sf_tensor *mdl_residual(sf_ctx *g, sf_tensor *x, sf_tensor *y, float p) {
    if (y == x) return sf_add(g, x, y);
    sf_tensor *out = sf_residual(g, x, y, p);
    sf_tensor_release_data(g, y);
    return out;
}

sf_attn_kind mdl_block_attn(const sf_model_cfg *cfg, int i) {
    return (cfg->n_block_attn > 0 && i < cfg->n_block_attn) ? cfg->block_attn[i] : cfg->attn;
}

int mdl_block_count(const sf_model_cfg *cfg) {
    if (cfg->family != SF_FAMILY_SOFT && cfg->family != SF_FAMILY_CVT) return cfg->depth;
    int n = 0;
    const int stages = (int)(sizeof cfg->depths / sizeof *cfg->depths);
    for (int s = 0; s < cfg->num_stages && s < stages; s++) n += cfg->depths[s];
    return n;
}
