/* test_ops_fast.c — the fast paths against their simple references:
 *   - sf_fast_expf / sf_fast_phif (ops_internal.h) against libm on dense grids;
 *   - GELU (erf and tanh forms) forward and backward against the libm formulas;
 *   - GELU and QuickGELU on bf16 input (sf_act_bf16_values / _grad, from tables):
 *     at every one of the 65536 bf16 values, the bits of the op's own forward and backward;
 *   - gradients written into new buffers (sf_grad_dst) against accumulation into zeros,
 *     for linear, gelu, layernorm, l1norm, sima (both orders) and heads_merge;
 *   - the one-pass heads_split backward (all parts gathered) against the per-part
 *     accumulation, including a part without gradient;
 *   - sum backward sharing the output gradient (a + b, a + a);
 *   - arena chunk reuse (sf_arena_release: exact size, else best fit; chunks released at
 *     the top of the block give their space back) and gradient release during backward.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "ops_internal.h"

static void test_fast_math(void) {
    double worst_exp = 0, worst_phi = 0, worst_e = 0;
    for (int i = -870000; i <= 880000; i++) {
        float x = (float)i * 1e-4f;
        double want = exp((double)x), got = sf_fast_expf(x);
        double rel = fabs(got - want) / want;
        if (rel > worst_exp) worst_exp = rel;
    }
    /* Phi over [-12, 12] against 0.5 erfc(-x / sqrt 2) in double (absolute error), and its
     * second output against exp of the same float argument -x^2/2 (relative, where that is a
     * normal float; the argument's own rounding is the caller's, as with libm's expf) */
    for (int i = -1200000; i <= 1200000; i++) {
        float x = (float)i * 1e-5f, e;
        double err = fabs((double)sf_fast_phif(x, &e) - 0.5 * erfc(-(double)x * M_SQRT1_2));
        if (err > worst_phi) worst_phi = err;
        double want = exp((double)(-0.5f * x * x));
        if (want > 1e-37 && fabs(e - want) / want > worst_e) worst_e = fabs(e - want) / want;
    }
    CHECK(worst_exp < 2.5e-7, "fast expf relative error %.3g", worst_exp);
    /* measured 2.75e-7 with fused multiply-adds (-O2/-O3 -march=native), 2.99e-7 without (-O0) */
    CHECK(worst_phi < 4e-7, "fast Phi absolute error %.3g", worst_phi);
    CHECK(worst_e < 2.5e-7, "Phi's exp(-x^2/2) relative error %.3g", worst_e);
    CHECK(sf_fast_expf(-200.0f) >= 0.0f && sf_fast_expf(-200.0f) < 1e-37f, "exp(-200) clamps to ~0");
    float e;
    CHECK(sf_fast_phif(30.0f, &e) == 1.0f && sf_fast_phif(-30.0f, &e) < 1e-37f, "Phi saturates at 0 and 1");
    /* NaN (diverged weights) flows through to the NaN stop, without undefined behaviour on
     * the way (UBSan checks the exponent arithmetic in the sanitizer pass). */
    CHECK(isnan(sf_fast_expf(NAN)) && isnan(sf_fast_phif(NAN, &e)), "NaN in, NaN out");
    CHECK(sf_fast_expf(INFINITY) > 1e38f && sf_fast_expf(-INFINITY) >= 0.0f, "infinities clamp");
    printf("fast expf max rel err %.3g, fast Phi max abs err %.3g\n", worst_exp, worst_phi);
}

static void fill(sf_tensor *t, sf_rng *r, float std) {
    for (size_t i = 0; i < t->numel; i++) t->data[i] = std * sf_rng_normal(r);
}

static void test_gelu_reference(void) {
    enum { n = 4099 };
    sf_rng r;
    sf_rng_seed(&r, 3);
    sf_tensor *x = gc_leaf(1, (int[]){n}, 1);
    fill(x, &r, 3.0f);
    x->data[0] = 0.0f;
    x->data[1] = -9.0f;
    x->data[2] = 9.0f;
    float *G = malloc(n * sizeof(float)), *wy = malloc(n * sizeof(float)), *wd = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        G[i] = sf_rng_normal(&r);
        double v = x->data[i], cdf = 0.5 * (1.0 + erff((float)(v * M_SQRT1_2)));
        wy[i] = (float)(v * cdf);
        wd[i] = (float)(G[i] * (cdf + v * expf((float)(-0.5 * v * v)) / sqrt(2.0 * M_PI)));
    }
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_gelu(&g, x);
    allclose("gelu forward vs libm erff", y->data, wy, n, 1e-6f, 3e-7f);
    sf_backward_seeded(&g, y, G); /* x->grad is NULL: the new-buffer path */
    allclose("gelu backward vs libm", x->grad, wd, n, 2e-6f, 5e-7f);
    sf_ctx_free(&g);
    x->grad = NULL;
    /* gelu_tanh (SOFT's MLP) against libm's tanhf */
    for (int i = 0; i < n; i++) {
        double v = x->data[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        double t = tanhf((float)u), du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);
        wy[i] = (float)(0.5 * v * (1.0 + t));
        wd[i] = (float)(G[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du));
    }
    sf_ctx_init(&g, 1 << 20);
    y = sf_gelu_tanh(&g, x);
    allclose("gelu_tanh forward vs libm tanhf", y->data, wy, n, 1e-6f, 5e-7f);
    sf_backward_seeded(&g, y, G);
    /* 1 - t^2 is multiplied by x du/dx (up to ~50 at |x| = 9): a tanh error of 1e-7 (libm's
     * own is ~6e-8) becomes a few 1e-6 there. */
    allclose("gelu_tanh backward vs libm", x->grad, wd, n, 2e-6f, 1e-5f);
    sf_ctx_free(&g);
    x->grad = NULL;
    gc_leaf_free(x);
    free(G);
    free(wy);
    free(wd);
}

/* The tables an MLP's activation reads in bf16 (sf_act_bf16_values / _grad) replace the
 * computed value and slope only if they give the same bits: every one of the 65536 bf16
 * values (infinities and NaNs included), against the plain op in fp32 (its backward seeded
 * with random G); one wrong entry fails here. The broken variant's slope (keep 0) is
 * computed, not read from the table. */
static void test_act_bf16_tables(void) {
    enum { n = 65536, chunk = 64 };
    sf_rng r;
    sf_rng_seed(&r, 5);
    uint16_t *bits = malloc(n * sizeof *bits);
    float *G = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *d = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) bits[i] = (uint16_t)i, G[i] = sf_rng_normal(&r);
    for (int k = 0; k < 2; k++) {
        const sf_op op = k ? SF_OP_QUICK_GELU : SF_OP_GELU;
        sf_tensor *x = gc_leaf(1, (int[]){n}, 1);
        for (int i = 0; i < n; i++) x->data[i] = sf_from_bf16(bits[i]);
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *plain = k ? sf_quick_gelu(&g, x) : sf_gelu(&g, x);
        sf_backward_seeded(&g, plain, G);
        for (int c = 0; c < n; c += chunk) {
            sf_act_bf16_values(op, y + c, bits + c, chunk);
            sf_act_bf16_grad(op, d + c, G + c, bits + c, chunk, 1.0f, 1);
        }
        int value_diff = 0, slope_diff = 0;
        for (int i = 0; i < n; i++) {
            value_diff += memcmp(&y[i], &plain->data[i], sizeof(float)) != 0;
            slope_diff += memcmp(&d[i], &x->grad[i], sizeof(float)) != 0;
        }
        CHECK(value_diff == 0 && slope_diff == 0, "%s on bf16 input: %d values and %d gradients of 65536 differ from the op's bits",
              sf_op_name(op), value_diff, slope_diff);
        /* the computed slope (an activation too small for the tables): the same bits */
        float *dc = malloc(n * sizeof(float));
        sf_act_bf16_grad(op, dc, G, bits, n, 1.0f, 0);
        CHECK(!memcmp(dc, x->grad, n * sizeof(float)), "%s on bf16 input, computed: the op's gradient bits", sf_op_name(op));
        free(dc);
        float dbroken[chunk];
        sf_act_bf16_grad(op, dbroken, G + 0x3f80, bits + 0x3f80, chunk, 0.0f, 1);
        CHECK(memcmp(dbroken, d + 0x3f80, sizeof dbroken) != 0, "%s: the broken slope (keep 0) is computed, not the table's",
              sf_op_name(op));
        sf_ctx_free(&g);
        x->grad = NULL;
        gc_leaf_free(x);
    }
    CHECK(!sf_act_bf16_tabled(SF_OP_RELU, (size_t)1 << 24), "relu has no table (a select is cheaper than a load)");
    CHECK(sf_act_bf16_tabled(SF_OP_GELU, (size_t)1 << 24) && !sf_act_bf16_tabled(SF_OP_GELU, 200000),
          "gelu's tables serve large activations (DeiT-S's MLP) and not small ones (the Fashion-MNIST model's)");
    free(bits), free(G), free(y), free(d);
}

/* Runs build() twice with every leaf gradient first NULL (new buffers, written) and then
 * preset to `base` (accumulated): the second result must be base + the first. */
typedef sf_tensor *(*build_fn)(sf_ctx *g, sf_tensor **in);

static void check_write_vs_accumulate(const char *name, build_fn build, sf_tensor **in, int n_in) {
    sf_rng r;
    sf_rng_seed(&r, 17);
    float *first[8], *base[8];
    for (int pass = 0; pass < 2; pass++) {
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        for (int i = 0; i < n_in; i++) {
            if (pass == 0) {
                in[i]->grad = NULL;
                continue;
            }
            base[i] = malloc(in[i]->numel * sizeof(float));
            in[i]->grad = malloc(in[i]->numel * sizeof(float));
            for (size_t j = 0; j < in[i]->numel; j++) base[i][j] = in[i]->grad[j] = sf_rng_normal(&r);
        }
        sf_tensor *out = build(&g, in);
        float *seed = malloc(out->numel * sizeof(float));
        sf_rng s2;
        sf_rng_seed(&s2, 99);
        for (size_t j = 0; j < out->numel; j++) seed[j] = sf_rng_normal(&s2);
        sf_backward_seeded(&g, out, seed);
        free(seed);
        for (int i = 0; i < n_in; i++) {
            if (pass == 0) {
                first[i] = malloc(in[i]->numel * sizeof(float));
                memcpy(first[i], in[i]->grad, in[i]->numel * sizeof(float)); /* arena memory */
                in[i]->grad = NULL;
                continue;
            }
            for (size_t j = 0; j < in[i]->numel; j++) base[i][j] += first[i][j];
            char what[96];
            snprintf(what, sizeof what, "%s: input %d accumulated = preset + written", name, i);
            allclose(what, in[i]->grad, base[i], in[i]->numel, 1e-5f, 1e-5f);
            free(in[i]->grad);
            in[i]->grad = NULL;
            free(base[i]);
            free(first[i]);
        }
        sf_ctx_free(&g);
    }
}

static sf_tensor *b_linear(sf_ctx *g, sf_tensor **in) { return sf_linear(g, in[0], in[1], in[2]); }
static sf_tensor *b_gelu(sf_ctx *g, sf_tensor **in) { return sf_gelu(g, in[0]); }
static sf_tensor *b_layernorm(sf_ctx *g, sf_tensor **in) { return sf_layernorm(g, in[0], in[1], in[2], 1e-6f); }
static sf_tensor *b_l1norm(sf_ctx *g, sf_tensor **in) { return sf_l1norm_tokens(g, in[0], 1e-12f); }
static sf_tensor *b_sima_qk(sf_ctx *g, sf_tensor **in) { return sf_sima(g, in[0], in[1], in[2], SF_SIMA_QK_FIRST); }
static sf_tensor *b_sima_kv(sf_ctx *g, sf_tensor **in) { return sf_sima(g, in[0], in[1], in[2], SF_SIMA_KV_FIRST); }
static sf_tensor *b_merge(sf_ctx *g, sf_tensor **in) { return sf_heads_merge(g, in[0]); }
static sf_tensor *b_matmul(sf_ctx *g, sf_tensor **in) { return sf_matmul(g, in[0], in[1], 1, 0); }

static void test_write_paths(void) {
    sf_rng r;
    sf_rng_seed(&r, 5);
    sf_tensor *x = gc_leaf(3, (int[]){2, 7, 12}, 1), *w = gc_leaf(2, (int[]){5, 12}, 1),
              *b = gc_leaf(1, (int[]){5}, 1), *lw = gc_leaf(1, (int[]){12}, 1), *lb = gc_leaf(1, (int[]){12}, 1);
    fill(x, &r, 1.0f);
    fill(w, &r, 0.3f);
    fill(b, &r, 0.1f);
    fill(lw, &r, 1.0f);
    fill(lb, &r, 0.1f);
    check_write_vs_accumulate("linear", b_linear, (sf_tensor *[]){x, w, b}, 3);
    check_write_vs_accumulate("gelu", b_gelu, (sf_tensor *[]){x}, 1);
    check_write_vs_accumulate("layernorm", b_layernorm, (sf_tensor *[]){x, lw, lb}, 3);
    sf_tensor *q = gc_leaf(4, (int[]){2, 3, 9, 6}, 1), *k = gc_leaf(4, (int[]){2, 3, 9, 6}, 1),
              *v = gc_leaf(4, (int[]){2, 3, 9, 6}, 1);
    fill(q, &r, 1.0f);
    fill(k, &r, 1.0f);
    fill(v, &r, 1.0f);
    check_write_vs_accumulate("l1norm_tokens", b_l1norm, (sf_tensor *[]){q}, 1);
    check_write_vs_accumulate("sima qk-first", b_sima_qk, (sf_tensor *[]){q, k, v}, 3);
    check_write_vs_accumulate("sima kv-first", b_sima_kv, (sf_tensor *[]){q, k, v}, 3);
    check_write_vs_accumulate("heads_merge", b_merge, (sf_tensor *[]){q}, 1);
    check_write_vs_accumulate("matmul", b_matmul, (sf_tensor *[]){q, v}, 2);
    sf_tensor *all[] = {x, w, b, lw, lb, q, k, v};
    for (int i = 0; i < 8; i++) gc_leaf_free(all[i]);
}

/* heads_split: one-pass gather (x->grad NULL) against per-part accumulation (x->grad zeroed),
 * with all three parts used, and with the middle part unused (its gradient must be 0). */
static void test_heads_split_gather(void) {
    enum { B = 2, N = 5, H = 3, D = 4, W = 3 * H * D };
    sf_rng r;
    sf_rng_seed(&r, 8);
    sf_tensor *x = gc_leaf(3, (int[]){B, N, W}, 1);
    fill(x, &r, 1.0f);
    for (int use_k = 0; use_k < 2; use_k++) {
        float got[2][B * N * W];
        for (int path = 0; path < 2; path++) {
            sf_ctx g;
            sf_ctx_init(&g, 1 << 20);
            x->grad = path ? calloc(x->numel, sizeof(float)) : NULL;
            sf_tensor *q = sf_heads_split(&g, x, 3, 0, H), *k = sf_heads_split(&g, x, 3, 1, H),
                      *v = sf_heads_split(&g, x, 3, 2, H);
            /* out = q * 2 + v (+ k * 3): distinct, known gradients per part */
            sf_tensor *out = sf_add(&g, sf_scale(&g, q, 2.0f), v);
            if (use_k) out = sf_add(&g, out, sf_scale(&g, k, 3.0f));
            float ones[B * H * N * D];
            for (int i = 0; i < B * H * N * D; i++) ones[i] = 1.0f;
            sf_backward_seeded(&g, out, ones);
            memcpy(got[path], x->grad, sizeof got[path]);
            if (path) free(x->grad);
            x->grad = NULL;
            sf_ctx_free(&g);
        }
        allclose(use_k ? "heads_split gather == accumulate (q, k, v)" : "heads_split gather == accumulate (q, v)",
                 got[0], got[1], B * N * W, 0.0f, 0.0f);
        int ok = 1;
        for (int i = 0; i < B * N * W; i++) {
            int part = (i % W) / (H * D);
            float want = part == 0 ? 2.0f : part == 1 ? (use_k ? 3.0f : 0.0f) : 1.0f;
            if (got[0][i] != want) ok = 0;
        }
        CHECK(ok, "heads_split gradient per part is 2, %s, 1", use_k ? "3" : "0");
    }
    gc_leaf_free(x);
}

static void test_add_shared_and_arena(void) {
    sf_rng r;
    sf_rng_seed(&r, 9);
    sf_tensor *a = gc_leaf(1, (int[]){100}, 1), *b = gc_leaf(1, (int[]){100}, 1);
    fill(a, &r, 1.0f);
    fill(b, &r, 1.0f);
    float seed[100], twice[100];
    for (int i = 0; i < 100; i++) {
        seed[i] = sf_rng_normal(&r);
        twice[i] = 2.0f * seed[i];
    }
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_backward_seeded(&g, sf_add(&g, a, a), seed);
    allclose("a + a: da = 2 G", a->grad, twice, 100, 0.0f, 0.0f);
    a->grad = NULL;
    sf_ctx_reset(&g);
    sf_tensor *y = sf_add(&g, a, b);
    sf_backward_seeded(&g, sf_scale(&g, y, 1.0f), seed);
    allclose("a + b: da = G", a->grad, seed, 100, 0.0f, 0.0f);
    allclose("a + b: db = G", b->grad, seed, 100, 0.0f, 0.0f);
    CHECK(a->grad != b->grad, "only one input shares the output gradient");
    a->grad = b->grad = NULL;

    /* arena: a released chunk is reused by the next allocation of the same size */
    sf_ctx_reset(&g);
    size_t before = sf_ctx_arena_in_use(&g);
    void *p = sf_arena_alloc(g.arena, 1000);
    sf_arena_release(g.arena, p, 1000);
    CHECK(sf_ctx_arena_in_use(&g) == before, "release gives the bytes back (%zu vs %zu)", sf_ctx_arena_in_use(&g), before);
    void *q = sf_arena_alloc(g.arena, 1000);
    CHECK(q == p, "same-size allocation reuses the released chunk");
    void *s = sf_arena_alloc(g.arena, 5000);
    CHECK(s != p, "a different size does not");

    /* best fit: the smallest released chunk that holds a request, its rest released again */
    sf_ctx_reset(&g);
    char *big = sf_arena_alloc(g.arena, 8192), *fence1 = sf_arena_alloc(g.arena, 64);
    char *mid = sf_arena_alloc(g.arena, 4096), *fence2 = sf_arena_alloc(g.arena, 64);
    sf_arena_release(g.arena, big, 8192);
    sf_arena_release(g.arena, mid, 4096);
    char *small = sf_arena_alloc(g.arena, 1000);
    CHECK(small == mid, "a smaller request takes the smallest released chunk that fits");
    char *rest = sf_arena_alloc(g.arena, 3072);
    CHECK(rest == mid + 1024, "... and the rest of that chunk serves the next");
    char *whole = sf_arena_alloc(g.arena, 8192);
    CHECK(whole == big, "an exact fit is taken whole");
    CHECK(sf_ctx_arena_in_use(&g) == 8192 + 64 + 1024 + 3072 + 64, "in use: what is held (%zu)",
          sf_ctx_arena_in_use(&g));

    /* chunks released at the top of the block give their space back to any size */
    sf_ctx_reset(&g);
    char *x1 = sf_arena_alloc(g.arena, 4096), *x2 = sf_arena_alloc(g.arena, 2048);
    sf_arena_release(g.arena, x1, 4096); /* below x2: kept for reuse */
    sf_arena_release(g.arena, x2, 2048); /* the top: x2's space, then x1's, is free again */
    char *x3 = sf_arena_alloc(g.arena, 6000);
    CHECK(x3 == x1, "released chunks at the top make room for a larger request (%td bytes off)", x3 - x1);
    (void)fence1, (void)fence2;
    sf_ctx_free(&g);
    gc_leaf_free(a);
    gc_leaf_free(b);
}

/* Backward hands dead gradients back: a deep chain of same-shaped ops needs about as much
 * arena memory in backward as a couple of gradients, not one per node. */
static void test_backward_releases(void) {
    enum { n = 1 << 16 };
    sf_tensor *x = gc_leaf(1, (int[]){n}, 1);
    for (int i = 0; i < n; i++) x->data[i] = 0.01f * (float)(i % 100);
    sf_ctx g;
    sf_ctx_init(&g, 8 << 20);
    sf_tensor *t = x;
    for (int i = 0; i < 20; i++) t = sf_gelu(&g, t);
    size_t fwd = sf_ctx_arena_peak(&g);
    float *seed = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) seed[i] = 1.0f;
    sf_backward_seeded(&g, t, seed);
    size_t grow = sf_ctx_arena_peak(&g) - fwd;
    CHECK(grow <= 3 * (size_t)n * sizeof(float), "backward grew the arena by %zu bytes (3 gradients: %zu)", grow,
          3 * (size_t)n * sizeof(float));
    x->grad = NULL;
    free(seed);
    sf_ctx_free(&g);
    gc_leaf_free(x);
}

int main(void) {
    sf_threads_init(0);
    test_fast_math();
    test_gelu_reference();
    test_act_bf16_tables();
    test_write_paths();
    test_heads_split_gather();
    test_add_shared_and_arena();
    test_backward_releases();
    return test_summary("ops_fast");
}
