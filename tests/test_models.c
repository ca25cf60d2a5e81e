/* test_models.c — the model builders: parameter counts and MACs of every named model against
 * the reference figures (docs/models.md: params exact, MACs within 0.1%), exp()/GELU
 * counters and per-part sums from `sfvit info`, parameter names/shapes/flags spot-checked
 * against the tables of docs/models.md, forward+backward of tiny configs of every family × attention kind
 * (finite logits, a gradient for every trainable parameter), SimA order switching, a
 * whole-model gradient check of a tiny ViT-SimA and XCiT-SimA, the pos_embed resize, and a
 * bf16 training step's activation memory below fp32's in every family, and the memory probe's
 * own footprint (no copy of the parameters next to its steps).
 *
 * Deliberately not here: comparisons with PyTorch logits (tests/golden).
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "sfvit/model.h"
#include "sfvit/precision.h"
#include "sfvit/train.h"

/* models/models_internal.h: the SOFT pooling matrix, checked entry by entry below */
void mdl_soft_pool_matrix(float *P, int Hs, int Ws, int hs, int ws, int skip);

/* ---- figures ---- */
typedef struct figure {
    const char *name;
    size_t params;
    double gmacs;         // rounded to 3 decimals as in docs/models.md
    const char *softmax;  // exp() counters and GELU evaluations as `sfvit info` prints them
    const char *kernel;
    const char *erf, *tanh_;
    const char *nr;       // "(0.188 G)" or NULL
} figure;

static const figure figures[] = {
    {"deit_tiny", 5717416, 1.254, "1,397,124", "0", "1,815,552", "0", NULL},
    {"deit_small", 22050664, 4.599, "2,794,248", "0", "3,631,104", "0", NULL},
    {"xcit_tiny_12_p16", 6716272, 1.245, "112,168", "0", "2,786,304", "0", NULL},
    {"xcit_small_12_p16", 26253304, 4.854, "224,336", "0", "5,572,608", "0", NULL},
    {"xcit_tiny_12_p8", 6706504, 4.829, "116,872", "0", "9,936,384", "0", NULL},
    {"xcit_tiny_24_p16", 12116896, 2.337, "222,760", "0", "5,044,224", "0", NULL},
    {"soft_tiny", 13069056, 1.969, "80,000", "998,816", "267,520", "2,358,272", "(0.188 G)"},
    {"soft_small", 24110092, 3.410, "160,000", "1,642,284", "541,312", "3,763,200", "(0.395 G)"},
    {"soft_small_repo", 38858462, 6.505, "160,000", "3,202,934", "745,152", "7,024,640", "(1.007 G)"},
    {"soft_medium", 45812707, 7.526, "200,000", "3,935,239", "943,200", "8,555,008", "(1.294 G)"},
    {"soft_large", 64700646, 11.425, "200,000", "5,603,934", "1,161,152", "12,042,240", "(1.948 G)"},
    {"soft_huge", 87108273, 16.278, "200,000", "7,599,165", "1,391,648", "16,332,288", "(2.640 G)"},
    /* CvT: the parameter totals of the official models (PyTorch reference, tests/golden/models.py);
     * MACs by the conventions above (docs/models.md: the paper says 4.5 G and 7.1 G) */
    {"cvt_13", 19997480, 4.566, "3,971,608", "0", "0", "0", NULL},
    {"cvt_21", 31622696, 7.178, "5,248,192", "0", "0", "0", NULL},
};

static char *info_text(const sf_model_cfg *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sf_model_info(c, f);
    fclose(f);
    return buf;
}

static int contains(const char *text, const char *a, const char *b) {
    char want[160];
    snprintf(want, sizeof want, "%s%s", a, b);
    return strstr(text, want) != NULL;
}

static void check_macs(const char *what, const sf_model_cfg *c, double gmacs) {
    double got = sf_model_macs(c) / 1e9;
    CHECK(fabs(got - gmacs) <= 1e-3 * gmacs, "%s: %.4f GMACs, expected %.3f", what, got, gmacs);
}

static void test_figures(void) {
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        const figure *f = &figures[i];
        sf_model_cfg c;
        CHECK(sf_model_defaults(&c, f->name) == 0, "%s has defaults", f->name);
        size_t p = sf_model_param_count(&c);
        CHECK(p == f->params, "%s: %zu params, expected %zu", f->name, p, f->params);
        check_macs(f->name, &c, f->gmacs);
        char *t = info_text(&c);
        CHECK(contains(t, "softmax ", f->softmax), "%s: softmax exp %s not in info", f->name, f->softmax);
        CHECK(contains(t, "SOFT kernel ", f->kernel), "%s: kernel exp %s not in info", f->name, f->kernel);
        CHECK(contains(t, "erf ", f->erf), "%s: GELU erf %s not in info", f->name, f->erf);
        CHECK(contains(t, "tanh ", f->tanh_), "%s: GELU tanh %s not in info", f->name, f->tanh_);
        if (f->nr) CHECK(contains(t, "Newton-Raphson ", "") && strstr(t, f->nr), "%s: NR %s", f->name, f->nr);
        free(t);
        printf("  %-18s params %10zu  GMACs %.3f  (expected %.3f)\n", f->name, p, sf_model_macs(&c) / 1e9, f->gmacs);
    }
}

/* SimA variants: XCiT minus L·H temperatures; DeiT-S orders. */
static void test_sima_variants(void) {
    static const struct { const char *name; size_t params; } xs[] = {
        {"xcit_tiny_12_p16", 6716224}, {"xcit_small_12_p16", 26253208},
        {"xcit_tiny_12_p8", 6706456}, {"xcit_tiny_24_p16", 12116800}};
    sf_model_cfg c;
    for (int i = 0; i < 4; i++) {
        sf_model_defaults(&c, xs[i].name);
        c.attn = SF_ATTN_SIMA;
        CHECK(sf_model_param_count(&c) == xs[i].params, "%s sima: %zu params, expected %zu", xs[i].name,
              sf_model_param_count(&c), xs[i].params);
    }
    sf_model_defaults(&c, "xcit_small_12_p16");
    c.attn = SF_ATTN_SIMA;
    check_macs("sima_small_12_p16", &c, 4.854);
    char *t = info_text(&c);
    CHECK(contains(t, "softmax ", "0,") && contains(t, "erf ", "5,572,608"), "sima_small counters");
    CHECK(strstr(t, "SimA order:               kv_first") != NULL, "sima_small resolves kv_first");
    free(t);
    c.lpi = 0;
    CHECK(sf_model_param_count(&c) == 26138008, "sima_small lpi off: %zu", sf_model_param_count(&c));
    check_macs("sima_small lpi off", &c, 4.837);
    t = info_text(&c);
    CHECK(contains(t, "erf ", "4,669,440"), "sima_small lpi off GELU");
    free(t);

    sf_model_defaults(&c, "deit_small");
    c.attn = SF_ATTN_SIMA;
    CHECK(sf_model_param_count(&c) == 22050664, "deit_small sima params");
    check_macs("deit_small sima (auto = kv-first)", &c, 4.357);
    c.sima_order = SF_SIMA_QK_FIRST;
    check_macs("deit_small sima qk-first", &c, 4.599);
    c.sima_order = SF_SIMA_AUTO;
    c.num_heads = 1;  // D = 384 > N = 197: qk-first
    check_macs("deit_small sima 1 head", &c, 4.599);
    t = info_text(&c);
    CHECK(strstr(t, "SimA order:               qk_first") != NULL, "1 head resolves qk_first");
    free(t);

    sf_model_defaults(&c, "soft_tiny");
    c.attn_norm = SF_NORM_SYMMETRIC;  // SOFT++: same shapes and keys
    CHECK(sf_model_param_count(&c) == 13069056, "soft_tiny symmetric params");
}

/* Custom ViT: the parameter formula of docs/models.md with hidden = mlp_ratio·C. */
static void test_custom_vit(void) {
    sf_model_cfg c;
    CHECK(sf_model_defaults(&c, "vit") == 0, "vit defaults");
    c.img_size = 32;
    c.patch_size = 4;
    c.embed_dim = 48;
    c.depth = 3;
    c.num_heads = 2;
    c.num_classes = 10;
    c.in_chans = 1;
    const size_t C = 48, L = 3, P = 4, N = 64, K = 10;
    size_t want = C * (1 * P * P + 1) + C + (N + 1) * C + L * (12 * C * C + 13 * C) + 2 * C + K * (C + 1);
    CHECK(sf_model_param_count(&c) == want, "custom vit: %zu params, formula %zu", sf_model_param_count(&c), want);
    double macs = (double)N * C * P * P + L * (12.0 * (N + 1) * C * C + 2.0 * (N + 1) * (N + 1) * C) + (double)C * K;
    CHECK(fabs(sf_model_macs(&c) - macs) < 0.5, "custom vit MACs %.0f, formula %.0f", sf_model_macs(&c), macs);
    /* rejected configs: message and NULL, nothing registered */
    sf_params ps;
    sf_params_init(&ps);
    c.attn = SF_ATTN_XCA;
    CHECK(sf_model_build(&c, &ps) == NULL && ps.count == 0, "vit with xca is rejected");
    c.attn = SF_ATTN_MSA;
    c.embed_dim = 49;
    CHECK(sf_model_build(&c, &ps) == NULL, "embed_dim not divisible by heads is rejected");
    sf_params_free(&ps);
    CHECK(sf_model_defaults(&c, "no_such_model") == -1, "unknown name is an error");
    int n = 0;
    for (; sf_model_names[n]; n++) CHECK(sf_model_defaults(&c, sf_model_names[n]) == 0, "%s", sf_model_names[n]);
    CHECK(n >= 12, "%d names", n);
}

/* Per-part params of xcit_small_12_p16. */
static size_t part_params(const char *text, const char *part) {
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", part);
    const char *s = strstr(text, key);
    if (!s) return 0;
    s = strstr(s, "params");
    if (!s) return 0;
    s += 6;
    size_t v = 0;
    while (*s == ' ') s++;
    for (; *s && *s != ' '; s++)
        if (*s >= '0' && *s <= '9') v = v * 10 + (size_t)(*s - '0');
    return v;
}

static void test_parts(void) {
    sf_model_cfg c;
    sf_model_defaults(&c, "xcit_small_12_p16");
    char *t = info_text(&c);
    static const struct { const char *part; size_t n; } want[] = {
        {"cls_token", 384}, {"patch_embed", 873648}, {"pos_embeder", 24960},
        {"blocks", 21418080}, {"cls_attn_blocks", 3550464}, {"norm", 768}, {"head", 385000}};
    for (int i = 0; i < 7; i++)
        CHECK(part_params(t, want[i].part) == want[i].n, "xcit_small part %s: %zu, expected %zu", want[i].part,
              part_params(t, want[i].part), want[i].n);
    free(t);
}

/* ---- names, shapes, flags ---- */
static void expect_param(sf_params *ps, const char *name, int ndim, const int *shape, int flags) {
    sf_param *p = sf_params_find(ps, name);
    CHECK(p != NULL, "parameter %s exists", name);
    if (!p) return;
    int ok = p->t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = p->t->shape[i] == shape[i];
    CHECK(ok, "%s shape", name);
    CHECK(p->flags == flags, "%s flags %d, want %d", name, p->flags, flags);
}

enum { TR = SF_PARAM_TRAINABLE, DEC = SF_PARAM_DECAY, OFF = SF_PARAM_DECAY_OFFICIAL };

static void test_names(void) {
    sf_model_cfg c;
    sf_params ps;
    sf_model *m;

    sf_model_defaults(&c, "deit_small");
    sf_params_init(&ps);
    m = sf_model_build(&c, &ps);
    CHECK(m != NULL, "deit_small builds");
    expect_param(&ps, "cls_token", 3, (int[]){1, 1, 384}, TR);
    expect_param(&ps, "pos_embed", 3, (int[]){1, 197, 384}, TR);
    expect_param(&ps, "patch_embed.proj.weight", 4, (int[]){384, 3, 16, 16}, TR | DEC | OFF);
    expect_param(&ps, "patch_embed.proj.bias", 1, (int[]){384}, TR);
    expect_param(&ps, "blocks.3.attn.qkv.weight", 2, (int[]){1152, 384}, TR | DEC | OFF);
    expect_param(&ps, "blocks.3.attn.qkv.bias", 1, (int[]){1152}, TR);
    expect_param(&ps, "blocks.11.mlp.fc2.weight", 2, (int[]){384, 1536}, TR | DEC | OFF);
    expect_param(&ps, "blocks.0.norm1.weight", 1, (int[]){384}, TR);
    expect_param(&ps, "head.weight", 2, (int[]){1000, 384}, TR | DEC | OFF);
    CHECK(ps.count == 4 + 12 * 12 + 4, "deit_small has %d views", ps.count);
    sf_model_free(m);
    sf_params_free(&ps);

    sf_model_defaults(&c, "xcit_small_12_p16");
    sf_params_init(&ps);
    m = sf_model_build(&c, &ps);
    expect_param(&ps, "patch_embed.proj.0.0.weight", 4, (int[]){48, 3, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "patch_embed.proj.6.0.weight", 4, (int[]){384, 192, 3, 3}, TR | DEC | OFF);
    CHECK(sf_params_find(&ps, "patch_embed.proj.6.0.bias") == NULL, "patch-embed convs have no bias");
    expect_param(&ps, "patch_embed.proj.6.1.running_var", 1, (int[]){384}, 0);
    expect_param(&ps, "patch_embed.proj.6.1.num_batches_tracked", 0, (int[]){1}, SF_PARAM_I64);
    expect_param(&ps, "pos_embeder.token_projection.weight", 4, (int[]){384, 64, 1, 1}, TR | DEC | OFF);
    expect_param(&ps, "blocks.5.attn.temperature", 3, (int[]){8, 1, 1}, TR | OFF);
    expect_param(&ps, "blocks.5.local_mp.conv1.weight", 4, (int[]){384, 1, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "blocks.5.local_mp.bn.weight", 1, (int[]){384}, TR);
    expect_param(&ps, "blocks.5.gamma3", 1, (int[]){384}, TR);
    expect_param(&ps, "cls_attn_blocks.1.attn.qkv.weight", 2, (int[]){1152, 384}, TR | DEC | OFF);
    expect_param(&ps, "cls_attn_blocks.1.gamma2", 1, (int[]){384}, TR);
    expect_param(&ps, "cls_token", 3, (int[]){1, 1, 384}, TR);
    sf_model_free(m);
    sf_params_free(&ps);

    sf_model_defaults(&c, "xcit_tiny_12_p8");
    c.attn = SF_ATTN_SIMA;
    c.lpi = 0;
    sf_params_init(&ps);
    m = sf_model_build(&c, &ps);
    expect_param(&ps, "patch_embed.proj.4.0.weight", 4, (int[]){192, 96, 3, 3}, TR | DEC | OFF);
    CHECK(sf_params_find(&ps, "patch_embed.proj.6.0.weight") == NULL, "p8 has 3 units");
    CHECK(sf_params_find(&ps, "blocks.0.attn.temperature") == NULL, "sima has no temperature");
    CHECK(sf_params_find(&ps, "blocks.0.norm3.weight") == NULL && sf_params_find(&ps, "blocks.0.gamma3") == NULL &&
              sf_params_find(&ps, "blocks.0.local_mp.conv1.weight") == NULL,
          "lpi off removes norm3, local_mp, gamma3");
    sf_model_free(m);
    sf_params_free(&ps);

    sf_model_defaults(&c, "xcit_tiny_24_p16");
    sf_params_init(&ps);
    m = sf_model_build(&c, &ps);
    sf_params_alloc(&ps);
    sf_rng r;
    sf_rng_seed(&r, 1);
    sf_model_init(m, &ps, &r);
    CHECK(sf_params_find(&ps, "blocks.23.gamma1")->t->data[7] == 1e-5f, "tiny_24 eta 1e-5");
    CHECK(sf_params_find(&ps, "blocks.0.local_mp.bn.running_var")->t->data[0] == 1.0f, "BN var init 1");
    {
        sf_tensor *w = sf_params_find(&ps, "blocks.0.local_mp.conv1.weight")->t;
        float mx = 0;
        for (size_t i = 0; i < w->numel; i++) mx = fmaxf(mx, fabsf(w->data[i]));
        CHECK(mx <= 1.0f / 3.0f && mx > 0.2f, "ku(9) bound 1/3, max |w| %g", mx);
        sf_tensor *q = sf_params_find(&ps, "blocks.0.attn.qkv.weight")->t;
        double s2 = 0;
        for (size_t i = 0; i < q->numel; i++) s2 += (double)q->data[i] * q->data[i];
        double sd = sqrt(s2 / q->numel);
        CHECK(fabs(sd - 0.02) < 0.001, "tn(0.02) std %g", sd);
    }
    sf_model_free(m);
    sf_params_free(&ps);

    sf_model_defaults(&c, "soft_tiny");
    sf_params_init(&ps);
    m = sf_model_build(&c, &ps);
    expect_param(&ps, "patch_embed1.proj.0.weight", 4, (int[]){32, 3, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "patch_embed1.proj.6.weight", 4, (int[]){64, 32, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "patch_embed1.proj.7.running_mean", 1, (int[]){64}, 0);
    expect_param(&ps, "patch_embed3.proj.0.weight", 4, (int[]){320, 128, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "pos_embed1", 3, (int[]){1, 3136, 64}, TR | OFF);
    expect_param(&ps, "pos_embed4", 3, (int[]){1, 50, 512}, TR | OFF);
    expect_param(&ps, "cls_token", 3, (int[]){1, 1, 512}, TR);
    expect_param(&ps, "block1.0.att.mha.attn.Qlandmark_op.weight", 4, (int[]){32, 32, 8, 8}, TR | DEC | OFF);
    expect_param(&ps, "block2.1.att.mha.attn.Qlandmark_op.weight", 4, (int[]){32, 32, 4, 4}, TR | DEC | OFF);
    expect_param(&ps, "block3.2.att.mha.attn.conv.weight", 4, (int[]){10, 1, 3, 3}, TR | DEC | OFF);
    expect_param(&ps, "block1.0.att.mha.attn.conv.weight", 4, (int[]){2, 1, 9, 9}, TR | DEC | OFF);
    expect_param(&ps, "block3.0.att.mha.attn.Qnorm_act.0.weight", 1, (int[]){32}, TR);
    expect_param(&ps, "block3.0.att.mha.W_q.weight", 2, (int[]){320, 320}, TR | DEC | OFF);
    expect_param(&ps, "block3.0.att.ff1.weight", 2, (int[]){1280, 320}, TR | DEC | OFF);
    expect_param(&ps, "block4.1.attn.kv.weight", 2, (int[]){1024, 512}, TR | DEC | OFF);
    expect_param(&ps, "block4.1.mlp.fc1.weight", 2, (int[]){2048, 512}, TR | DEC | OFF);
    CHECK(sf_params_find(&ps, "block1.0.att.mha.W_k.weight") == NULL, "SOFT has no W_k (K = Q)");
    sf_model_free(m);
    sf_params_free(&ps);
}

/* ---- tiny forward + backward ---- */
typedef struct tiny {
    const char *label;
    sf_model_cfg cfg;
} tiny;

static sf_model_cfg tiny_vit(sf_attn_kind k, sf_attn_norm n) {
    sf_model_cfg c;
    sf_model_defaults(&c, "vit");
    c.img_size = 32;
    c.patch_size = 8;
    c.embed_dim = 32;
    c.depth = 2;
    c.num_heads = 2;
    c.num_classes = 5;
    c.attn = k;
    c.attn_norm = n;
    c.drop_path_rate = 0;
    return c;
}

static sf_model_cfg tiny_xcit(sf_attn_kind k, sf_attn_norm n, int P) {
    sf_model_cfg c;
    sf_model_defaults(&c, "xcit_tiny_12_p16");
    c.img_size = 32;
    c.patch_size = P;
    c.embed_dim = 32;
    c.depth = 2;
    c.num_heads = 4;
    c.num_classes = 5;
    c.attn = k;
    c.attn_norm = n;
    c.drop_path_rate = 0;
    return c;
}

static sf_model_cfg tiny_soft(sf_attn_norm n) {
    sf_model_cfg c;
    sf_model_defaults(&c, "soft_tiny");
    c.img_size = 64;
    const int d[4] = {16, 16, 32, 32}, h[4] = {2, 2, 2, 2}, l[4] = {1, 1, 1, 1};
    for (int s = 0; s < 4; s++) {
        c.embed_dims[s] = d[s];
        c.stage_heads[s] = h[s];
        c.depths[s] = l[s];
    }
    c.num_classes = 5;
    c.attn_norm = n;
    c.drop_path_rate = 0;
    return c;
}

/* SOFT with fixed landmarks: 9 (3x3) on stage grids 16, 8, 4 (overlapping adaptive bins) and 2
 * (capped to 2x2). */
static sf_model_cfg tiny_soft_fixed(sf_attn_norm n) {
    sf_model_cfg c = tiny_soft(n);
    c.soft_landmarks = SF_LANDMARKS_FIXED;
    c.num_landmarks = 9;
    return c;
}

/* ViT with soft blocks: an 8x8 patch grid pooled to 3x3 landmarks (overlapping bins) + cls. */
static sf_model_cfg tiny_vit_soft(sf_attn_norm n) {
    sf_model_cfg c = tiny_vit(SF_ATTN_SOFT, n);
    c.soft_landmarks = SF_LANDMARKS_FIXED;
    c.patch_size = 4;
    c.num_landmarks = 9;
    return c;
}

static sf_attn_kind block_attn_of(const sf_model_cfg *c, int i) {
    return (c->n_block_attn > 0 && i < c->n_block_attn) ? c->block_attn[i] : c->attn;
}

/* CvT at 48 px: grids 12, 6, 3 (key/value grids 6, 3, 2); SimA auto resolves kv-first in
 * stages 0 (Nq 144, Nk 36, D 8) and 1 (36, 9, 8), qk-first in stage 2 (10, 5, 12). At 32 px the
 * last key/value grid would be 1x1: BatchNorm in training mode would normalize 2 values per
 * channel (the batch), and the finite differences drown in its rounding (errors up to 0.6 with a
 * correct backward). */
static sf_model_cfg tiny_cvt(sf_attn_kind k, sf_attn_norm n, sf_act act) {
    sf_model_cfg c;
    sf_model_defaults(&c, "cvt_13");
    c.img_size = 48;
    const int d[3] = {8, 16, 24}, h[3] = {1, 2, 2}, l[3] = {1, 1, 2};
    c.depth = 0;
    for (int s = 0; s < 3; s++) {
        c.embed_dims[s] = d[s];
        c.stage_heads[s] = h[s];
        c.depths[s] = l[s];
        c.depth += l[s];
    }
    c.num_classes = 5;
    c.attn = k;
    c.attn_norm = n;
    c.act = act;
    c.drop_path_rate = 0;
    return c;
}

/* CvT: the official counts of every part, SimA's counters, the order rule with Nq != Nk,
 * per-block attention kinds and the family's refusals. */
static void test_cvt_info(void) {
    sf_model_cfg c;
    sf_model_defaults(&c, "cvt_13");
    char *t = info_text(&c);
    CHECK(part_params(t, "stage0") == 61696 && part_params(t, "stage1") == 1013568 &&
              part_params(t, "stage2") == 18536448 && part_params(t, "head") == 385000,
          "cvt_13 per-stage parameters");
    CHECK(strstr(t, "stage2.blocks.9      (197, 384)") && strstr(t, "msa Nq=197 Nk=50"), "cvt_13 block rows");
    CHECK(strstr(t, "QuickGELU sigmoid 5,032,960"), "cvt_13 QuickGELU count");
    free(t);
    c.attn = SF_ATTN_SIMA;
    CHECK(sf_model_param_count(&c) == 19997480, "cvt_13 sima: same parameters");
    /* kv-first in every block at 224 (stage 2: 2·197·50 = 19700 > 247·64 = 15808):
     * 4.566 G − 2·Σ Nq·Nk·C + Σ (Nq + Nk)·D·C */
    check_macs("cvt_13 sima (kv-first everywhere)", &c, 4.159);
    t = info_text(&c);
    CHECK(contains(t, "softmax ", "0,") && strstr(t, "SimA order:               kv_first (last block: Nq=197, Nk=50, D=64"),
          "cvt_13 sima: no exp, kv-first");
    free(t);
    c.sima_order = SF_SIMA_QK_FIRST;
    check_macs("cvt_13 sima qk-first", &c, 4.566);
    c.sima_order = SF_SIMA_AUTO;
    c.n_block_attn = 13;
    for (int i = 0; i < 13; i++) c.block_attn[i] = i < 3 ? SF_ATTN_MSA : SF_ATTN_SIMA;
    t = info_text(&c);
    CHECK(contains(t, "softmax ", "3,"), "cvt_13 msa in stages 0-1 only: softmax exp");
    CHECK(strstr(t, "stage1.blocks.1      (784, 192)") && strstr(t, "sima l1 kv_first Nq=197 Nk=50"), "mixed rows");
    free(t);
    sf_model_defaults(&c, "cvt_13");
    c.attn = SF_ATTN_XCA;
    CHECK(sf_model_param_count(&c) == 0, "cvt with xca is refused");
    sf_model_defaults(&c, "cvt_13");
    c.num_stages = 4;
    CHECK(sf_model_param_count(&c) == 0, "cvt with 4 stages is refused");
    sf_model_defaults(&c, "cvt_13");
    c.depths[1] = 0;
    CHECK(sf_model_param_count(&c) == 0, "cvt with an empty stage is refused");
}

static void fill_images(sf_tensor *x, int B, int C, int S, uint64_t seed) {
    memset(x, 0, sizeof(*x));
    x->ndim = 4;
    x->shape[0] = B;
    x->shape[1] = C;
    x->shape[2] = S;
    x->shape[3] = S;
    x->numel = (size_t)B * C * S * S;
    x->data = malloc(x->numel * sizeof(float));
    sf_rng r;
    sf_rng_seed(&r, seed);
    for (size_t i = 0; i < x->numel; i++) x->data[i] = sf_rng_normal(&r);
}

static int all_finite(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return 0;
    return 1;
}

/* Parameters whose gradient is zero by construction: in CvT only the cls token of the last block
 * reaches the head, and it enters that block's attention unconvolved, so the block's query
 * convolution and BatchNorm (which only make the patch tokens' queries) get nothing, as in the
 * official model, unless SimA's l1/l2 normalization over the query tokens ties the cls query to
 * the others. */
static int grad_dead_by_design(const sf_model_cfg *c, const char *name) {
    if (c->family != SF_FAMILY_CVT) return 0;
    const int total = c->depths[0] + c->depths[1] + c->depths[2];
    if (block_attn_of(c, total - 1) == SF_ATTN_SIMA && c->attn_norm != SF_NORM_NONE) return 0;
    char p[96];
    snprintf(p, sizeof p, "stage2.blocks.%d.attn.conv_proj_q.", c->depths[2] - 1);
    return !strncmp(name, p, strlen(p));
}

/* A model of config c with its parameters allocated and initialized from seed; NULL if the
 * config does not build. */
static sf_model *model_ready(const sf_model_cfg *c, sf_params *ps, uint64_t seed) {
    sf_params_init(ps);
    sf_model *m = sf_model_build(c, ps);
    if (!m) return NULL;
    sf_params_alloc(ps);
    sf_rng r;
    sf_rng_seed(&r, seed);
    sf_model_init(m, ps, &r);
    return m;
}

static void test_forward_backward(const char *label, sf_model_cfg c) {
    sf_params ps;
    sf_model *m = model_ready(&c, &ps, 7);
    CHECK(m != NULL, "%s builds", label);
    if (!m) return;
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.training = 1;
    const int B = 2;
    sf_tensor x;
    fill_images(&x, B, c.in_chans, c.img_size, 11);
    sf_tensor *logits = sf_model_forward(&g, m, &x);
    CHECK(logits->ndim == 2 && logits->shape[0] == B && logits->shape[1] == c.num_classes, "%s logits shape", label);
    CHECK(all_finite(logits->data, logits->numel), "%s logits finite", label);
    int labels[2] = {1, 3};
    sf_tensor *loss = sf_cross_entropy(&g, logits, labels, NULL, 0.0f);
    sf_backward(&g, loss);
    const float loss_value = loss->data[0]; /* the arena is reset below */
    int zero = 0, nan = 0;
    for (int i = 0; i < ps.count; i++) {
        const sf_param *p = &ps.list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        double s = 0;
        for (size_t j = 0; j < p->t->numel; j++) s += fabs(p->t->grad[j]);
        if (grad_dead_by_design(&c, p->t->name)) {
            CHECK(s == 0, "%s: %s gradient %g, zero by design", label, p->t->name, s);
        } else if (!isfinite(s)) {
            nan++;
            fprintf(stderr, "  %s: %s gradient not finite\n", label, p->t->name);
        } else if (s == 0) {
            zero++;
            fprintf(stderr, "  %s: %s gradient is zero\n", label, p->t->name);
        }
    }
    CHECK(zero == 0 && nan == 0, "%s: %d zero and %d non-finite parameter gradients", label, zero, nan);
    /* BatchNorm statistics moved in training mode */
    for (int i = 0; i < ps.count; i++)
        if (strstr(ps.list[i].t->name, "num_batches_tracked")) {
            CHECK(ps.list[i].t->data[0] == 1.0f, "%s: %s = %g after one step", label, ps.list[i].t->name,
                  ps.list[i].t->data[0]);
            break;
        }
    /* eval mode, no tape: each block's intermediates in the scratch arena, its input given back
     * (sf_scope_begin/end).
     * The same logits bit for bit as an eval-mode forward that keeps every tensor (with the
     * tape on the scopes do nothing), in fewer arena bytes. */
    sf_ctx_reset(&g);
    g.training = 0;
    sf_tensor *kept = sf_model_forward(&g, m, &x);
    float *ref = malloc(kept->numel * sizeof(float));
    memcpy(ref, kept->data, kept->numel * sizeof(float));
    const double kept_peak = (double)sf_ctx_arena_peak(&g);
    sf_ctx g2;
    sf_ctx_init(&g2, 0);
    g2.training = 0;
    g2.grad_enabled = 0;
    sf_tensor *e = sf_model_forward(&g2, m, &x);
    CHECK(all_finite(e->data, e->numel), "%s eval logits finite", label);
    CHECK(!memcmp(e->data, ref, e->numel * sizeof(float)), "%s eval logits: scoped forward = kept forward, bit for bit",
          label);
    const double scoped_peak = (double)sf_ctx_arena_peak(&g2);
    CHECK(scoped_peak < 0.8 * kept_peak, "%s eval arena peak %.0f KiB, below 0.8 of keeping every tensor (%.0f KiB)",
          label, scoped_peak / 1024, kept_peak / 1024);
    CHECK(g2.scope_depth == 0 && g2.arena != g2.scratch, "%s: every scope closed", label);
    free(ref);
    sf_ctx_free(&g2);
    printf("  fwd+bwd %-28s loss %.4f  %d views  eval arena %.2f of keeping every tensor\n", label, loss_value,
           ps.count, scoped_peak / kept_peak);
    free(x.data);
    sf_ctx_free(&g);
    sf_model_free(m);
    sf_params_free(&ps);
}

/* One training step of config c in precision p (bf16 products on kernels k): the activation
 * arena's peak bytes, the loss, and a hash of every gradient's bits. The step must train:
 * every gradient finite and nonzero. */
static double step_peak(const char *label, sf_model_cfg c, sf_precision p, sf_bf16_products k, double *loss_out,
                        uint64_t *grad_hash) {
    sf_precision_set(p);
    sf_bf16_products_set(k);
    sf_params ps;
    sf_model *m = model_ready(&c, &ps, 7);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.training = 1;
    g.grad_enabled = 1;
    sf_tensor x;
    fill_images(&x, 2, c.in_chans, c.img_size, 11);
    sf_tensor *logits = sf_model_forward(&g, m, &x);
    sf_tensor *loss = sf_cross_entropy(&g, logits, (int[]){1, 3}, NULL, 0.0f);
    sf_backward(&g, loss);
    *loss_out = loss->data[0];
    int bad = 0;
    *grad_hash = 1469598103934665603ull; /* FNV-1a over the bytes of every gradient */
    for (int i = 0; i < ps.count; i++) {
        const sf_param *q = &ps.list[i];
        if (!(q->flags & SF_PARAM_TRAINABLE)) continue;
        for (size_t j = 0; j < q->t->numel * sizeof(float); j++)
            *grad_hash = (*grad_hash ^ ((const unsigned char *)q->t->grad)[j]) * 1099511628211ull;
        if (grad_dead_by_design(&c, q->t->name)) continue;
        double sum = 0;
        for (size_t j = 0; j < q->t->numel; j++) sum += fabs(q->t->grad[j]);
        bad += !(isfinite(sum) && sum > 0);
    }
    CHECK(bad == 0, "%s in %s: %d parameter gradients zero or not finite", label, sf_precision_name(p), bad);
    const double peak = (double)sf_ctx_arena_peak(&g);
    free(x.data);
    sf_ctx_free(&g);
    sf_model_free(m);
    sf_params_free(&ps);
    sf_precision_set(SF_PREC_FP32);
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    return peak;
}

/* bf16 keeps the handed-over inputs of linear layers (LayerNorm, GELU and head-merge outputs)
 * as bf16 copies only (sf_linear_last_use), so a bf16 training step holds fewer activation
 * bytes than fp32. Arena bytes are counted, not timed: the same on every machine. */
static void test_bf16_activation_memory(const char *label, sf_model_cfg c) {
    double loss32, loss16, loss16k;
    uint64_t hash32, hash16, hash16k;
    const double fp32 = step_peak(label, c, SF_PREC_FP32, SF_BF16_PRODUCTS_ONEDNN, &loss32, &hash32);
    const double bf16 = step_peak(label, c, SF_PREC_BF16_EMULATED, SF_BF16_PRODUCTS_ONEDNN, &loss16, &hash16);
    /* bf16 on fp32 kernels (train.bf16_products=fp32): the emulation's arithmetic and memory,
     * bit for bit, on any machine */
    const double bf16k = step_peak(label, c, SF_PREC_BF16, SF_BF16_PRODUCTS_FP32, &loss16k, &hash16k);
    CHECK(loss16k == loss16 && hash16k == hash16 && bf16k == bf16,
          "%s: bf16 on fp32 kernels = bf16_emulated (loss, every gradient's bits, arena peak)", label);
    CHECK(hash16 != hash32, "%s: bf16 gradients differ from fp32's (rounding in effect)", label);
    CHECK(bf16 < fp32, "%s: bf16 step's activation peak %.0f KiB below fp32's %.0f KiB", label, bf16 / 1024, fp32 / 1024);
    CHECK(fabs(loss16 - loss32) <= 0.05 * fabs(loss32), "%s: bf16 loss %.4f near fp32 %.4f", label, loss16, loss32);
    printf("  bf16 step %-24s activation peak %.0f -> %.0f KiB (%.2f of fp32)\n", label, fp32 / 1024, bf16 / 1024,
           bf16 / fp32);
}

/* Eval-time order switch: same logits either way; drop path on but eval. And the SimA
 * token-norm record of `sfvit viz`: Q-hat's on the query grid, K-hat's on the key grid
 * (key_stride 2: CvT's stride-2 keys, ceil(h/2) x ceil(w/2)), positive, the same in either
 * order, and made anew by each forward (another image, other norms). */
static void test_order_switch(const char *label, sf_model_cfg c, int key_stride) {
    sf_params ps;
    c.drop_path_rate = 0.1f;
    sf_model *m = model_ready(&c, &ps, 3);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.training = 0;
    g.grad_enabled = 0;
    sf_tensor x;
    fill_images(&x, 2, c.in_chans, c.img_size, 5);
    sf_model_set_sima_order(m, SF_SIMA_QK_FIRST);
    sf_tensor *a = sf_model_forward(&g, m, &x);
    float qn[64], kn[64], qn2[64], kn2[64];
    int qg[2] = {0, 0}, kg[2] = {0, 0};
    sf_model_sima_token_norms(m, NULL, NULL, qg, kg);
    const int nq = qg[0] * qg[1], nk = kg[0] * kg[1];
    CHECK(nq > 0 && nq <= 64, "%s grid %dx%d", label, qg[0], qg[1]);
    CHECK(kg[0] == (qg[0] + key_stride - 1) / key_stride && kg[1] == (qg[1] + key_stride - 1) / key_stride,
          "%s key grid %dx%d for the query grid %dx%d (key stride %d)", label, kg[0], kg[1], qg[0], qg[1], key_stride);
    if (nq <= 0 || nq > 64) return;
    CHECK(sf_model_sima_token_norms(m, qn, kn, NULL, NULL) == 0, "%s token norms recorded", label);
    int pos = 1;
    for (int i = 0; i < nq; i++) pos &= qn[i] > 0 && isfinite(qn[i]);
    for (int i = 0; i < nk; i++) pos &= kn[i] > 0 && isfinite(kn[i]);
    CHECK(pos, "%s token norms positive", label);
    sf_model_set_sima_order(m, SF_SIMA_KV_FIRST);
    sf_tensor *b = sf_model_forward(&g, m, &x);
    allclose(label, b->data, a->data, a->numel, 0.0f, 1e-4f);
    sf_model_sima_token_norms(m, qn2, kn2, NULL, NULL);
    allclose("token norms q", qn2, qn, (size_t)nq, 1e-6f, 0.0f);
    allclose("token norms k", kn2, kn, (size_t)nk, 1e-6f, 0.0f);
    /* image 0 replaced: its norms are recorded again */
    for (size_t i = 0; i < x.numel / 2; i++) x.data[i] = -2.0f * x.data[i] + 0.5f;
    sf_model_forward(&g, m, &x);
    sf_model_sima_token_norms(m, qn2, kn2, NULL, NULL);
    int moved_q = 0, moved_k = 0;
    for (int i = 0; i < nq; i++) moved_q += qn2[i] != qn[i];
    for (int i = 0; i < nk; i++) moved_k += kn2[i] != kn[i];
    CHECK(moved_q > 0 && moved_k > 0, "%s: another image, other token norms (%d of %d q, %d of %d k)", label, moved_q,
          nq, moved_k, nk);
    free(x.data);
    sf_ctx_free(&g);
    sf_model_free(m);
    sf_params_free(&ps);
}

/* Whole-model gradient check: a few parameters of a tiny model are the probed inputs. */
typedef struct gc_model {
    sf_model *m;
    sf_tensor *x;
} gc_model;

static sf_tensor *gc_model_fwd(sf_ctx *g, sf_tensor **in, void *user) {
    (void)in;
    gc_model *u = user;
    return sf_model_forward(g, u->m, u->x);
}

/* Directional checks (tests/gradcheck.h): weights scaled ×10 so every path carries signal.
 * Tolerance 0.1 of |g| for ViT and XCiT: correct backwards gave <= 0.057 over 16 sets of
 * random directions (0.0072 with the fixed one), broken ones >= 0.2 (docs/testing.md). */
static const char *only_model = NULL; /* `test_models gradcheck NAME` */

static void test_model_gradcheck(const char *label, sf_model_cfg c, const char *const *names, int n, double tol,
                                 int training) {
    if (only_model && !strstr(label, only_model)) return;
    sf_params ps;
    sf_model *m = model_ready(&c, &ps, 9);
    /* larger weights than the init so every path carries signal */
    for (int i = 0; i < ps.count; i++)
        if (ps.list[i].init == SF_INIT_TRUNC_NORMAL)
            for (size_t j = 0; j < ps.list[i].t->numel; j++) ps.list[i].t->data[j] *= 10.0f;
    sf_tensor x;
    fill_images(&x, 2, c.in_chans, c.img_size, 21);
    sf_tensor *in[8];
    float *keep[8];
    for (int i = 0; i < n; i++) {
        sf_param *p = sf_params_find(&ps, names[i]);
        SF_ASSERT(p, "%s", names[i]);
        in[i] = p->t;
        keep[i] = p->t->grad;
        p->t->grad = NULL;  // gradcheck owns the probed tensors' gradient buffers
    }
    gc_model u = {m, &x};
    gradcheck_dir(label, gc_model_fwd, &u, in, n, (gc_dir_opts){.tol = tol, .training = training});
    for (int i = 0; i < n; i++) {
        free(in[i]->grad);
        in[i]->grad = keep[i];
    }
    free(x.data);
    sf_model_free(m);
    sf_params_free(&ps);
}

/* ---- pos_embed resize (bicubic, align_corners=false) ---- */
static void test_interpolate(void) {
    const int C = 2, S = 4, T = 6;
    float src[(1 + 16) * 2], dst[(1 + 36) * 2], same[(1 + 16) * 2];
    for (int i = 0; i < (1 + 16) * C; i++) src[i] = (float)((i * 7919) % 23) / 7.0f - 1.0f;
    CHECK(sf_vit_interpolate_pos_embed(src, S, same, S, C) == 0, "same grid");
    allclose("interp identity", same, src, (size_t)(1 + 16) * C, 0, 1e-6f);
    CHECK(sf_vit_interpolate_pos_embed(src, S, dst, T, C) == 0, "4 -> 6");
    CHECK(dst[0] == src[0] && dst[1] == src[1], "cls row kept");
    /* F.interpolate(x, size=(6,6), mode='bicubic', align_corners=False) of channel 0 of this
     * grid (x[y][x] = src[2 + 2*(4y+x)]), computed with PyTorch 1.13: first row and a
     * middle entry. */
    static const float torch_row0[6] = {1.2975767f, 0.1615049f, -0.1908435f, 1.656618f, 1.3042692f, 0.1681982f};
    static const float torch_22 = 0.9528741f;
    float got_row0[6];
    for (int j = 0; j < 6; j++) got_row0[j] = dst[C + (0 * T + j) * C];
    allclose("bicubic row 0 vs torch", got_row0, torch_row0, 6, 0, 2e-5f);
    float got22 = dst[C + (2 * T + 2) * C];
    allclose("bicubic (2,2) vs torch", &got22, &torch_22, 1, 0, 2e-5f);
    /* a constant field stays constant (the weights of every output sum to 1) */
    for (int i = C; i < (1 + 16) * C; i++) src[i] = 0.25f;
    sf_vit_interpolate_pos_embed(src, S, dst, T, C);
    float want[72];
    for (int i = 0; i < 72; i++) want[i] = 0.25f;
    allclose("bicubic constant", dst + C, want, (size_t)36 * C, 0, 1e-6f);
}

/* Whole-model gradient checks of a tiny model of each family; `test_models gradcheck [NAME]`
 * runs only these, or only those whose label contains NAME (tests/test_teeth.sh breaks
 * backwards on purpose and needs them to fail). */
static void test_model_gradchecks(void) {
    {
        static const char *const names[] = {"blocks.0.attn.qkv.weight", "patch_embed.proj.weight",
                                            "blocks.1.mlp.fc1.bias", "pos_embed", "cls_token"};
        test_model_gradcheck("model vit sima l1", tiny_vit(SF_ATTN_SIMA, SF_NORM_L1), names, 5, 0.1, 0);
        test_model_gradcheck("model vit msa", tiny_vit(SF_ATTN_MSA, SF_NORM_L1), names, 5, 0.1, 0);
    }
    {
        static const char *const names[] = {"blocks.1.attn.qkv.weight", "cls_attn_blocks.0.attn.qkv.weight",
                                            "blocks.0.local_mp.conv1.weight", "cls_token",
                                            "pos_embeder.token_projection.weight"};
        test_model_gradcheck("model xcit sima l1", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L1, 8), names, 5, 0.1, 0);
        test_model_gradcheck("model xcit sima l2", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L2, 8), names, 5, 0.1, 0);
        test_model_gradcheck("model xcit xca", tiny_xcit(SF_ATTN_XCA, SF_NORM_L1, 8), names, 5, 0.1, 0);
    }
    {
        static const char *const names[] = {"block1.0.att.mha.W_q.weight", "block2.0.att.mha.attn.Qlandmark_op.weight",
                                            "block3.0.att.mha.attn.conv.weight", "pos_embed2",
                                            "block4.0.attn.kv.weight"};
        /* SOFT's backward is the gradient of the exact inverse of the landmark kernel (-Y^T G Y^T,
         * equal to PyTorch's float64 one in tests/golden), the forward a float32 Newton–Raphson
         * result: along some directions of the landmark weights the two differ by up to 0.13 of
         * |g| (16 direction sets; unchanged with 40 or 80 NR steps), so 0.25 here; the mildest
         * break of an op SOFT uses gives 0.76. */
        test_model_gradcheck("model soft", tiny_soft(SF_NORM_NONE), names, 5, 0.25, 0);
        test_model_gradcheck("model soft++", tiny_soft(SF_NORM_SYMMETRIC), names, 5, 0.25, 0);
    }
    {
        /* fixed landmarks: the pooling product instead of the landmark conv (same tolerance) */
        static const char *const names[] = {"block1.0.att.mha.W_q.weight", "block2.0.att.mha.attn.Qnorm_act.0.weight",
                                            "block3.0.att.mha.attn.conv.weight", "pos_embed2",
                                            "block3.0.att.mha.W_v.weight"};
        test_model_gradcheck("model soft fixed", tiny_soft_fixed(SF_NORM_NONE), names, 5, 0.25, 0);
    }
    {
        static const char *const names[] = {"blocks.0.attn.q.weight", "blocks.1.attn.v.weight",
                                            "blocks.0.attn.Qnorm_act.0.weight", "blocks.1.attn.Qnorm_act.0.bias",
                                            "blocks.1.attn.q.bias", "pos_embed", "cls_token"};
        test_model_gradcheck("model vit soft", tiny_vit_soft(SF_NORM_NONE), names, 7, 0.25, 0);
        test_model_gradcheck("model vit soft++", tiny_vit_soft(SF_NORM_SYMMETRIC), names, 7, 0.25, 0);
    }
    {
        /* In training mode, so BatchNorm normalizes with the batch statistics (its full
         * backward); the probes cover the key/value conv (stride 2), the query BatchNorm, the
         * last stage's projections (after the cls concat), the embedding conv and the cls token. */
        static const char *const names[] = {"stage0.blocks.0.attn.conv_proj_k.conv.weight",
                                            "stage1.blocks.0.attn.conv_proj_q.bn.weight",
                                            "stage2.blocks.1.attn.proj_q.weight", "stage1.patch_embed.proj.weight",
                                            "stage2.cls_token"};
        test_model_gradcheck("model cvt msa", tiny_cvt(SF_ATTN_MSA, SF_NORM_L1, SF_ACT_QUICK_GELU), names, 5, 0.1, 1);
        test_model_gradcheck("model cvt sima l1", tiny_cvt(SF_ATTN_SIMA, SF_NORM_L1, SF_ACT_QUICK_GELU), names, 5, 0.1, 1);
    }
}

/* The lists of model.h and their tables: every name is there, every attention kind is taken
 * by some family (and then counted by `sfvit info` with params and MACs), refused with a
 * message by the others, and every family has a named preset. A kind or a family added to a
 * list without its entry fails here or does not link. */
static void test_tables(void) {
    CHECK(sf_attn_names[SF_ATTN_COUNT] == NULL && sf_family_names[SF_FAMILY_COUNT] == NULL &&
              sf_attn_norm_names[SF_NORM_COUNT] == NULL && sf_sima_order_names[SF_SIMA_COUNT] == NULL,
          "name lists end with the enum");
    for (int f = 0; f < SF_FAMILY_COUNT; f++) {
        sf_model_cfg c;
        int preset = -1;
        for (int i = 0; sf_model_names[i] && preset < 0; i++)
            if (sf_model_defaults(&c, sf_model_names[i]) == 0 && c.family == (sf_family)f) preset = i;
        CHECK(preset >= 0, "family %s has a named preset", sf_family_names[f]);
        if (preset < 0) continue;
        for (int k = 0; k < SF_ATTN_COUNT; k++) {
            sf_model_defaults(&c, sf_model_names[preset]);
            c.attn = (sf_attn_kind)k;
            c.attn_norm = k == SF_ATTN_SOFT ? SF_NORM_NONE : SF_NORM_L1;
            c.soft_landmarks = k == SF_ATTN_SOFT ? SF_LANDMARKS_FIXED : c.soft_landmarks;
            int ok = sf_model_check(&c, NULL) == 0;
            printf("  %-5s x %-5s %s\n", sf_family_names[f], sf_attn_names[k], ok ? "taken" : "refused");
            if (ok)
                CHECK(sf_model_param_count(&c) > 0 && sf_model_macs(&c) > 0, "%s with %s: info counts it",
                      sf_family_names[f], sf_attn_names[k]);
        }
    }
    for (int k = 0; k < SF_ATTN_COUNT; k++) {
        int takers = 0;
        for (int f = 0; f < SF_FAMILY_COUNT; f++) {
            sf_model_cfg c;
            for (int i = 0; sf_model_names[i]; i++)
                if (sf_model_defaults(&c, sf_model_names[i]) == 0 && c.family == (sf_family)f) break;
            c.attn = (sf_attn_kind)k;
            c.attn_norm = k == SF_ATTN_SOFT ? SF_NORM_NONE : SF_NORM_L1;
            c.soft_landmarks = k == SF_ATTN_SOFT ? SF_LANDMARKS_FIXED : c.soft_landmarks;
            takers += sf_model_check(&c, NULL) == 0;
        }
        CHECK(takers > 0, "attention kind %s is taken by some family", sf_attn_names[k]);
    }
}

/* Fixed landmarks: the pooling matrix against PyTorch's adaptive_avg_pool2d bins, the
 * parameters of both layouts, the linear MAC growth and the config errors. */
static void test_soft_fixed(void) {
    /* 5 -> 3: bins [0,2), [1,4), [3,5) (floor(i·5/3), ceil((i+1)·5/3)) per side; one cls column */
    float P[9 * 26];
    mdl_soft_pool_matrix(P, 5, 5, 3, 3, 1);
    CHECK(P[0] == 0 && P[4 * 26 + 0] == 0, "pooling: the cls column is 0");
    CHECK(fabsf(P[0 * 26 + 1] - 0.25f) < 1e-7f && P[0 * 26 + 1 + 2] == 0, "pooling bin (0,0) = rows/cols 0..1");
    CHECK(fabsf(P[4 * 26 + 1 + 1 * 5 + 1] - 1.0f / 9) < 1e-7f && fabsf(P[4 * 26 + 1 + 3 * 5 + 3] - 1.0f / 9) < 1e-7f &&
              P[4 * 26 + 1 + 4 * 5 + 4] == 0,
          "pooling bin (1,1) = rows/cols 1..3");
    for (int i = 0; i < 9; i++) {
        double s = 0;
        for (int j = 0; j < 26; j++) s += P[i * 26 + j];
        CHECK(fabs(s - 1) < 1e-6, "pooling row %d sums to 1 (%g)", i, s);
    }

    /* parameters: no landmark conv with fixed; the ViT block's q, v, LN(D), proj and no qkv */
    sf_params ps;
    sf_params_init(&ps);
    sf_model_cfg c = tiny_soft_fixed(SF_NORM_NONE);
    sf_model *m = sf_model_build(&c, &ps);
    CHECK(m && !sf_params_find(&ps, "block1.0.att.mha.attn.Qlandmark_op.weight") &&
              sf_params_find(&ps, "block1.0.att.mha.attn.Qnorm_act.0.weight"),
          "soft fixed: no Qlandmark_op, Qnorm_act kept");
    sf_model_free(m);
    sf_params_free(&ps);
    sf_params_init(&ps);
    c = tiny_vit_soft(SF_NORM_SYMMETRIC);
    m = sf_model_build(&c, &ps);
    expect_param(&ps, "blocks.1.attn.q.weight", 2, (int[]){32, 32}, TR | DEC | OFF);
    expect_param(&ps, "blocks.1.attn.v.bias", 1, (int[]){32}, TR);
    expect_param(&ps, "blocks.1.attn.Qnorm_act.0.weight", 1, (int[]){16}, TR);
    expect_param(&ps, "blocks.1.attn.proj.weight", 2, (int[]){32, 32}, TR | DEC | OFF);
    CHECK(!sf_params_find(&ps, "blocks.0.attn.qkv.weight"), "vit soft: no qkv (K = Q)");
    sf_model_free(m);
    sf_params_free(&ps);

    /* MACs: with m fixed, the soft ViT's are affine in the token count N (equal slopes over
     * 112 -> 224 -> 448 px, N = 50, 197, 785); MSA's slope grows with N (the N²C term). */
    double soft[3], msa[3], n[3];
    for (int i = 0; i < 3; i++) {
        sf_model_cfg v;
        sf_model_defaults(&v, "deit_tiny");
        v.img_size = 112 << i;
        n[i] = (v.img_size / 16) * (v.img_size / 16) + 1;
        msa[i] = sf_model_macs(&v);
        v.attn = SF_ATTN_SOFT;
        v.attn_norm = SF_NORM_NONE;
        v.soft_landmarks = SF_LANDMARKS_FIXED;
        v.num_landmarks = 49;
        soft[i] = sf_model_macs(&v);
    }
    const double s1 = (soft[1] - soft[0]) / (n[1] - n[0]), s2 = (soft[2] - soft[1]) / (n[2] - n[1]);
    const double m1 = (msa[1] - msa[0]) / (n[1] - n[0]), m2 = (msa[2] - msa[1]) / (n[2] - n[1]);
    printf("  MACs/N slopes: soft %.0f, %.0f   msa %.0f, %.0f\n", s1, s2, m1, m2);
    CHECK(s1 > 0 && fabs(s2 - s1) <= 1e-9 * s1, "soft fixed MACs linear in N: slopes %g, %g", s1, s2);
    CHECK(m2 > 1.5 * m1, "msa MACs superlinear in N: slopes %g, %g", m1, m2);
    CHECK(soft[2] / soft[1] < 4.0 && msa[2] / msa[1] > 5.0, "448 vs 224 px: soft x%.3f, msa x%.3f",
          soft[2] / soft[1], msa[2] / msa[1]);

    /* config errors, each naming its key (stderr captured through a file of our own) */
    snprintf(errpath, sizeof errpath, "/tmp/sfvit-test-models-%d.err", (int)getpid());
    static const struct { int fixed, m; sf_family fam; const char *key; } bad[] = {
        {1, 15, SF_FAMILY_VIT, "model.num_landmarks"},
        {1, 0, SF_FAMILY_SOFT, "model.num_landmarks"},
        {1, -4, SF_FAMILY_VIT, "model.num_landmarks"},
        {0, 49, SF_FAMILY_VIT, "model.soft_landmarks 'stride'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sf_model_cfg b = bad[i].fam == SF_FAMILY_VIT ? tiny_vit_soft(SF_NORM_NONE) : tiny_soft_fixed(SF_NORM_NONE);
        b.soft_landmarks = bad[i].fixed ? SF_LANDMARKS_FIXED : SF_LANDMARKS_STRIDE;
        b.num_landmarks = bad[i].m;
        int saved = capture_begin();
        int rc = sf_model_check(&b, "x.yaml: ");
        capture_end(saved);
        printf("  %s", errbuf);
        CHECK(rc == -1 && strstr(errbuf, bad[i].key) && strstr(errbuf, "x.yaml: "), "bad %zu: message names %s: %s",
              i, bad[i].key, errbuf);
    }
    unlink(errpath);
    sf_model_cfg ok = tiny_soft(SF_NORM_NONE);
    CHECK(sf_model_check(&ok, NULL) == 0, "the pyramid takes stride landmarks");
}

static double status_mib(const char *key) { return sf_proc_value("/proc/self/status", key) / 1048576.0; }

/* The memory probe (train/memory.c) holds no more than its own steps: with every parameter,
 * gradient and moment resident, the process's peak during the probe rises above its resident
 * set by about the probe's largest arena, not by a copy of the parameters on top (DeiT-S's
 * 84 MiB made the probe, not the run, the process's peak). DeiT-S on 32-pixel images (4
 * tokens) has many parameters and few activations, so a copy would dwarf the rest. */
static void test_probe_footprint(void) {
    /* meson test sets MALLOC_PERTURB_, which fills every allocation and so makes all of an
     * arena block resident (64 MiB here), pages the probe itself never writes: off for this
     * check, back after it. */
    const char *perturb = getenv("MALLOC_PERTURB_");
    mallopt(M_PERTURB, 0);
    sf_model_cfg c;
    sf_model_defaults(&c, "deit_small");
    c.img_size = 32;
    sf_params ps;
    sf_model *m = model_ready(&c, &ps, 5);
    const size_t bytes = ps.total * sizeof(float);
    memset(ps.grad, 0, bytes), memset(ps.m, 0, bytes), memset(ps.v, 0, bytes); /* resident, as in a run */
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5": VmHWM from the resident set now */
    const int reset = f && fputs("5", f) >= 0 && fclose(f) == 0;
    const double before = status_mib("VmRSS");
    sf_memory_need step = {0};
    sf_memory_probe(m, &ps, &c, 8, &step, NULL);
    const double grew = status_mib("VmHWM") - before, arena = sf_memory_at(&step, 8) / 1048576.0,
                 params = (double)bytes / 1048576.0;
    CHECK(reset && grew < arena + params / 2,
          "memory probe: the process's peak rose %.1f MiB over its %.1f MiB (the probe's arena at 8 images %.1f MiB, "
          "parameters %.1f MiB; VmHWM reset %s)",
          grew, before, arena, params, reset ? "done" : "FAILED");
    printf("  memory probe of deit_small at 32 px: peak +%.1f MiB (arena at 8 images %.1f, parameters %.1f)\n", grew,
           arena, params);
    sf_model_free(m);
    sf_params_free(&ps);
    if (perturb) mallopt(M_PERTURB, atoi(perturb));
}

int main(int argc, char **argv) {
    sf_threads_init(0);
    if (argc > 1 && !strcmp(argv[1], "gradcheck")) {
        only_model = argc > 2 ? argv[2] : NULL;
        test_model_gradchecks();
        return test_summary("test_models");
    }
    test_figures();
    test_sima_variants();
    test_custom_vit();
    test_parts();
    test_names();
    test_tables();
    test_interpolate();
    test_probe_footprint();

    test_forward_backward("vit msa", tiny_vit(SF_ATTN_MSA, SF_NORM_L1));
    test_forward_backward("vit sima l1", tiny_vit(SF_ATTN_SIMA, SF_NORM_L1));
    test_forward_backward("vit sima l2", tiny_vit(SF_ATTN_SIMA, SF_NORM_L2));
    test_forward_backward("vit sima none", tiny_vit(SF_ATTN_SIMA, SF_NORM_NONE));
    {
        sf_model_cfg c = tiny_vit(SF_ATTN_SIMA, SF_NORM_L1);
        c.act = SF_ACT_RELU;
        c.in_chans = 1;
        c.n_block_attn = 2;
        c.block_attn[0] = SF_ATTN_MSA;
        c.block_attn[1] = SF_ATTN_SIMA;
        test_forward_backward("vit msa+sima relu gray", c);
    }
    test_forward_backward("xcit xca p16", tiny_xcit(SF_ATTN_XCA, SF_NORM_L1, 16));
    test_forward_backward("xcit xca p8", tiny_xcit(SF_ATTN_XCA, SF_NORM_L1, 8));
    test_forward_backward("xcit sima l1 p8", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L1, 8));
    test_forward_backward("xcit sima l2 p16", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L2, 16));
    {
        sf_model_cfg c = tiny_xcit(SF_ATTN_SIMA, SF_NORM_L1, 8);
        c.lpi = 0;
        test_forward_backward("xcit sima lpi off", c);
    }
    test_forward_backward("soft", tiny_soft(SF_NORM_NONE));
    test_forward_backward("soft++ symmetric", tiny_soft(SF_NORM_SYMMETRIC));
    test_forward_backward("soft fixed", tiny_soft_fixed(SF_NORM_NONE));
    test_forward_backward("vit soft", tiny_vit_soft(SF_NORM_NONE));
    {
        sf_model_cfg c = tiny_vit_soft(SF_NORM_SYMMETRIC);
        c.n_block_attn = 2;
        c.block_attn[0] = SF_ATTN_SOFT;
        c.block_attn[1] = SF_ATTN_MSA;
        c.global_pool = SF_POOL_AVG;
        test_forward_backward("vit soft++ + msa avg", c);
    }
    test_soft_fixed();
    test_bf16_activation_memory("vit sima l1", tiny_vit(SF_ATTN_SIMA, SF_NORM_L1));
    {
        sf_model_cfg c = tiny_vit(SF_ATTN_MSA, SF_NORM_L1);
        c.drop_rate = 0.1f; /* the MLP's dropout copy is freed as well */
        c.act = SF_ACT_RELU;
        test_bf16_activation_memory("vit msa relu dropout", c);
    }
    test_bf16_activation_memory("xcit sima p8", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L1, 8));
    test_bf16_activation_memory("soft", tiny_soft(SF_NORM_NONE));
    test_bf16_activation_memory("vit soft", tiny_vit_soft(SF_NORM_NONE));
    test_bf16_activation_memory("cvt sima", tiny_cvt(SF_ATTN_SIMA, SF_NORM_L1, SF_ACT_QUICK_GELU));
    test_cvt_info();
    test_forward_backward("cvt msa quick_gelu", tiny_cvt(SF_ATTN_MSA, SF_NORM_L1, SF_ACT_QUICK_GELU));
    test_forward_backward("cvt sima l1 quick_gelu", tiny_cvt(SF_ATTN_SIMA, SF_NORM_L1, SF_ACT_QUICK_GELU));
    test_forward_backward("cvt sima l2 gelu", tiny_cvt(SF_ATTN_SIMA, SF_NORM_L2, SF_ACT_GELU));
    {
        sf_model_cfg c = tiny_cvt(SF_ATTN_SIMA, SF_NORM_NONE, SF_ACT_RELU);
        c.in_chans = 1;
        c.img_size = 28;  // Fashion-MNIST: grids 7, 4, 2
        test_forward_backward("cvt sima none relu gray 28", c);
    }

    test_order_switch("order switch vit sima", tiny_vit(SF_ATTN_SIMA, SF_NORM_L1), 1);
    test_order_switch("order switch xcit sima", tiny_xcit(SF_ATTN_SIMA, SF_NORM_L1, 8), 1);
    {
        sf_model_cfg c = tiny_cvt(SF_ATTN_SIMA, SF_NORM_L1, SF_ACT_QUICK_GELU);
        c.depth = 13; /* cvt_13's total, as a config that sets model.depths leaves it: the blocks are 4 */
        test_order_switch("order switch cvt sima", c, 2);
    }

    test_model_gradchecks();
    return test_summary("test_models");
}
