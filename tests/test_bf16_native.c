/* test_bf16_native.c — oneDNN's native bf16 products (AVX512_BF16, AMX_BF16) against the
 * emulation (operands rounded to bf16, OpenBLAS fp32): the products of bf16 numbers are exact
 * in fp32 on both sides, so they differ only in summation order: |difference| <=
 * 2K 2^-24 sum|a||b| of the rounded operands (+ a few roundings of alpha and beta). Through
 * sf_gemm_prec in each precision, as the ops call it; none of them on oneDNN's reference
 * kernel (sf_dnnl_kernels: a bf16 product oneDNN cannot run natively in some layout would
 * be exact there but many times slower). The linear layer's form, C = op(A) op(B) + bias
 * (sf_gemm_prec_bias_w: oneDNN's bias epilogue natively, seeded rows and beta 1 in the
 * emulation), the same way, and a bias product of a shape first run without one gets its own
 * primitive (the bias is added). Its bf16 output (sf_gemm_prec_bias_w16, an MLP's fc1 in bf16)
 * is the emulation's sum rounded once, within the same bound plus half a bf16 step. With
 * its weight packed from fp32 for each product (the default), a linear layer's products give
 * the bits of those reading the weight's bf16 copy (SFVIT_PACK_WEIGHTS=0), without the copy,
 * and follow the weight as it changes. An MLP whose fc2 writes its input gradient in bf16 alone
 * for the GELU's backward gives the emulation's output and gradients (relative L2 distance).
 * Skipped (exit 77) with the reason where oneDNN has no native
 * bf16 (AVX2-only CPUs such as Zen 3, AVX-512 without BF16, no oneDNN). */
#include "test_gemm_dnnl_common.h"

#include <omp.h>

static int in_precision(sf_precision p, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                        const float *B, float beta, float *C) {
    sf_precision_set(p);
    sf_gemm_prec(ta, tb, M, N, K, alpha, A, B, beta, C);
    sf_precision_set(SF_PREC_FP32);
    return 0;
}
static int native(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                  float *C) {
    return in_precision(SF_PREC_BF16, ta, tb, M, N, K, alpha, A, B, beta, C);
}
static int emulated(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                    float *C) {
    return in_precision(SF_PREC_BF16_EMULATED, ta, tb, M, N, K, alpha, A, B, beta, C);
}

static void bias_product(sf_precision p, int ta, int tb, int M, int N, int K, const float *A, const float *B,
                         const float *bias, float *C) {
    sf_precision_set(p);
    sf_gemm_prec_bias_w(ta, tb, M, N, K, A, NULL, B, NULL, bias, C);
    sf_precision_set(SF_PREC_FP32);
}

static void test_bias(void) {
    static const int dims[][3] = {{64, 48, 40}, {197, 64, 197}, {33, 17, 129}, {1, 96, 32}};
    sf_rng r;
    sf_rng_seed(&r, 5);
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = dims[d][0] + ta + 2 * tb, N = dims[d][1], K = dims[d][2]; /* a new shape each */
                const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
                float *A = malloc(na * 4), *B = malloc(nb * 4), *Aa = malloc(na * 4), *Ba = malloc(nb * 4);
                float *bias = malloc((size_t)N * 4), *C0 = malloc(nc * 4), *C1 = malloc(nc * 4), *C2 = malloc(nc * 4);
                float *Cb = malloc(nc * 4);
                uint16_t *C16 = malloc(nc * 2);
                for (size_t i = 0; i < na; i++) A[i] = sf_rng_normal(&r), Aa[i] = fabsf(A[i]);
                for (size_t i = 0; i < nb; i++) B[i] = sf_rng_normal(&r), Ba[i] = fabsf(B[i]);
                for (int j = 0; j < N; j++) bias[j] = 4.0f + sf_rng_normal(&r); /* away from 0: a missing bias shows */
                for (size_t i = 0; i < nc; i++) Cb[i] = fabsf(bias[i % (size_t)N]);
                sf_gemm(ta, tb, M, N, K, 1.0f, Aa, Ba, 1.0f, Cb);
                /* the shape without a bias first: its primitive must not serve the bias product */
                sf_precision_set(SF_PREC_BF16);
                sf_gemm_prec_w(ta, tb, M, N, K, 1.0f, A, NULL, B, NULL, 0.0f, C0);
                sf_precision_set(SF_PREC_FP32);
                bias_product(SF_PREC_BF16, ta, tb, M, N, K, A, B, bias, C1);
                bias_product(SF_PREC_BF16_EMULATED, ta, tb, M, N, K, A, B, bias, C2);
                sf_precision_set(SF_PREC_BF16);
                sf_gemm_prec_bias_w16(ta, tb, M, N, K, A, NULL, B, NULL, bias, C16);
                sf_precision_set(SF_PREC_FP32);
                const double tol = 2.1 * 0x1p-24 * K + 8 * 0x1p-24;
                long bad = 0, biased = 0, bad16 = 0;
                for (size_t i = 0; i < nc; i++) {
                    bad += !(fabs((double)C1[i] - C2[i]) <= tol * Cb[i] + 1e-30);
                    const double near = tol * Cb[i]; /* C16 rounds a sum within `near` of C2 */
                    bad16 += !(fabs((double)sf_from_bf16(C16[i]) - C2[i]) <= near + 0x1p-8 * (fabs(C2[i]) + near) + 1e-30);
                    biased += fabs((double)C1[i] - C0[i] - bias[i % (size_t)N]) <= tol * Cb[i] + 1e-30;
                }
                CHECK(bad == 0, "bias product %dx%dx%d ta=%d tb=%d: %ld of %zu outside %.3g of the emulation", M, N, K,
                      ta, tb, bad, nc, tol);
                CHECK(biased == (long)nc, "bias product %dx%dx%d ta=%d tb=%d: the bias added to %ld of %zu elements",
                      M, N, K, ta, tb, biased, nc);
                CHECK(bad16 == 0, "bias product in bf16 %dx%dx%d ta=%d tb=%d: %ld of %zu not the emulation's rounded",
                      M, N, K, ta, tb, bad16, nc);
                free(A), free(B), free(Aa), free(Ba), free(bias), free(C0), free(C1), free(C2), free(Cb), free(C16);
            }
}

/* ---- weights packed in the kernels' layout (SFVIT_PACK_WEIGHTS, default 1) ---- */

typedef struct {
    float *y, *dx, *dw, *db;
} linear_run;

static float *copy_floats(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* y = x W^T + b over R rows and its backward from seed (R x O): as training runs a layer */
static linear_run run_linear(sf_tensor *x, sf_tensor *w, sf_tensor *b, int R, const float *seed) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    sf_tensor *leaves[3] = {x, w, b};
    for (int i = 0; i < 3; i++) leaves[i]->grad = NULL;
    sf_tensor *xr = sf_slice_tokens(&g, sf_reshape(&g, x, 3, (int[]){1, x->shape[0], x->shape[1]}), 0, R);
    sf_tensor *y = sf_linear(&g, xr, w, b);
    sf_backward_seeded(&g, y, seed);
    linear_run r = {copy_floats(y->data, y->numel), copy_floats(x->grad, x->numel), copy_floats(w->grad, w->numel),
                    copy_floats(b->grad, b->numel)};
    sf_ctx_free(&g);
    return r;
}

static int same_floats(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

static int same_run(linear_run a, linear_run b, size_t ny, size_t nx, size_t nw, size_t nb) {
    return same_floats(a.y, b.y, ny) && same_floats(a.dx, b.dx, nx) && same_floats(a.dw, b.dw, nw) &&
           same_floats(a.db, b.db, nb);
}

static void free_run(linear_run r) {
    free(r.y), free(r.dx), free(r.dw), free(r.db);
}

/* A linear layer's products with the weight packed from fp32 for each product of 1024 rows or
 * more (the default): the bits of the products reading its bf16 copy (the same kernel reads the
 * same numbers), one packing per product, no bf16 copy of the weight made, and the weight's
 * current values read whenever it changes, with nothing told. Fewer rows read the copy. */
static void test_packed_weights(int I, int O) {
    enum { R = 1100 };
    sf_rng r;
    sf_rng_seed(&r, 9);
    sf_ctx keep;
    sf_ctx_init(&keep, 0);
    sf_tensor *x = sf_tensor_new(&keep, 2, (int[]){R, I}), *w = sf_tensor_new(&keep, 2, (int[]){O, I});
    sf_tensor *b = sf_tensor_new(&keep, 1, (int[]){O});
    sf_tensor *params[3] = {x, w, b};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < params[k]->numel; i++) params[k]->data[i] = sf_rng_normal(&r);
        params[k]->requires_grad = 1;
    }
    float *seed = malloc((size_t)R * O * sizeof *seed);
    for (size_t i = 0; i < (size_t)R * O; i++) seed[i] = sf_rng_normal(&r);
    const size_t ny = (size_t)R * O;
    sf_precision_set(SF_PREC_BF16);
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);

    sf_bf16_weights_refresh(params, 3);
    sf_bf16_pack_weights_set(0);
    long before = sf_dnnl_weights_packed();
    linear_run plain = run_linear(x, w, b, R, seed);
    CHECK(sf_dnnl_weights_packed() == before, "packing off: %ld weights packed", sf_dnnl_weights_packed() - before);
    CHECK(sf_bf16_weight_slot(w) != NULL, "packing off: the products made no bf16 copy of the weight");

    sf_bf16_weights_clear();
    sf_bf16_weights_refresh(params, 3);
    sf_bf16_pack_weights_set(1);
    for (int round = 0; round < 2; round++) {
        before = sf_dnnl_weights_packed();
        linear_run packed = run_linear(x, w, b, R, seed);
        CHECK(sf_dnnl_weights_packed() - before == 2, "%dx%d round %d: forward and dx: %ld weights packed, expected 2",
              O, I, round, sf_dnnl_weights_packed() - before);
        CHECK(same_run(packed, plain, ny, x->numel, w->numel, O),
              "%dx%d round %d: packed weights: not the bits of the products on the bf16 copy", O, I, round);
        free_run(packed);
    }
    CHECK(sf_bf16_weight_slot(w) == NULL && sf_bf16_weight_registered(w),
          "packing: a bf16 copy of the weight was made (or the weight is not registered)");
    /* fewer rows: another primitive, another packing, the same bits; below 1024 rows none, the
     * products read the weight's copy */
    for (int rows = 1024; rows > 0; rows -= 1024 - 197) {
        sf_bf16_pack_weights_set(0);
        linear_run plain_short = run_linear(x, w, b, rows, seed);
        sf_bf16_pack_weights_set(1);
        sf_bf16_weights_clear();
        sf_bf16_weights_refresh(params, 3);
        before = sf_dnnl_weights_packed();
        linear_run packed_short = run_linear(x, w, b, rows, seed);
        const long expected = rows >= 1024 ? 2 : 0;
        CHECK(sf_dnnl_weights_packed() - before == expected, "%d rows: %ld weights packed, expected %ld", rows,
              sf_dnnl_weights_packed() - before, expected);
        CHECK((sf_bf16_weight_slot(w) != NULL) == (expected == 0), "%d rows: a bf16 copy of the weight %s", rows,
              expected ? "was made" : "was not made");
        CHECK(same_run(packed_short, plain_short, (size_t)rows * O, x->numel, w->numel, O),
              "packed weights, %d rows: not the plain products' bits", rows);
        free_run(plain_short), free_run(packed_short);
    }

    /* every form of the product (bias into fp32 or bf16, none with beta 0 or 1, W or W^T) */
    float *C0 = malloc(ny * sizeof *C0), *C1 = malloc(ny * sizeof *C1), *dx0 = malloc(x->numel * sizeof *dx0),
          *dx1 = malloc(x->numel * sizeof *dx1);
    uint16_t *h0 = malloc(ny * sizeof *h0), *h1 = malloc(ny * sizeof *h1);
    for (int packing = 0; packing < 2; packing++) {
        sf_bf16_pack_weights_set(packing);
        float *C = packing ? C1 : C0, *dx = packing ? dx1 : dx0;
        uint16_t *h = packing ? h1 : h0;
        sf_gemm_prec_weight(0, 1, R, O, I, 1.0f, x->data, NULL, w, b->data, 0.0f, NULL, h);
        sf_gemm_prec_weight(0, 1, R, O, I, 0.5f, x->data, NULL, w, NULL, 0.0f, C, NULL);
        for (size_t i = 0; i < x->numel; i++) dx[i] = 0.25f * (float)(i % 7);
        sf_gemm_prec_weight(0, 0, R, I, O, 1.0f, seed, NULL, w, NULL, 1.0f, dx, NULL);
    }
    CHECK(!memcmp(h0, h1, ny * sizeof *h0), "packed weight, bias product written in bf16: not the plain bits");
    CHECK(same_floats(C0, C1, ny), "packed weight, alpha 0.5 without a bias: not the plain bits");
    CHECK(same_floats(dx0, dx1, x->numel), "packed weight, W added to C (beta 1): not the plain bits");
    free(C0), free(C1), free(dx0), free(dx1), free(h0), free(h1);

    /* new weights, nothing told: the packed products read them (the plain ones need a refresh) */
    for (size_t i = 0; i < w->numel; i++) w->data[i] = -0.5f * w->data[i] + 0.01f * (float)(i % 5);
    linear_run packed = run_linear(x, w, b, R, seed);
    sf_bf16_pack_weights_set(0);
    sf_bf16_weights_refresh(params, 3);
    linear_run now = run_linear(x, w, b, R, seed);
    CHECK(!same_floats(now.y, plain.y, ny), "the new weights give the old output");
    CHECK(same_run(packed, now, ny, x->numel, w->numel, O), "new weights: packed products read the old weights");
    free_run(now), free_run(packed), free_run(plain);
    sf_bf16_pack_weights_set(1);
    sf_bf16_weights_clear();
    sf_precision_set(SF_PREC_FP32);
    free(seed);
    sf_ctx_free(&keep);
}

/* ---- products too small for oneDNN (SFVIT_BF16_SMALL_MACS) ----
 * Below the threshold a bf16 product runs on fp32 kernels on its bf16 values: the emulation's
 * bits, and no product run on oneDNN's bf16 kernels; at or above it, on them. The threshold is
 * SFVIT_BF16_SMALL_MACS for a product that oneDNN would split over a team, and the smaller of
 * it and 65536 for one it would run on the calling thread: inside a parallel region, or with
 * one thread. Plain and with a bias. */
static long onednn_bf16_runs(void) {
    /* bf16 kernels only: where OpenBLAS does not know the CPU, the fp32 kernels a small
     * product falls back to are oneDNN's f32 matmul (SFVIT_GEMM=auto) */
    sf_dnnl_kernel k[SF_DNNL_MAX_KERNELS];
    const int nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    long runs = 0;
    for (int i = 0; i < nk; i++)
        if (k[i].bf16) runs += k[i].runs;
    return runs;
}

typedef enum { ON_TEAM, IN_REGION, ON_ONE_THREAD } product_place;
static const char *const place_names[] = {"alone on a team of two", "one per thread in a region of two",
                                          "alone on one thread"};

/* C (one M x N block per thread of the region) = the product in precision p, where said. */
static void product_at(sf_precision p, int M, int N, int K, const float *A, const float *B, const float *b,
                       product_place where, float *C) {
    omp_set_num_threads(where == ON_ONE_THREAD ? 1 : 2);
    sf_precision_set(p);
#pragma omp parallel if (where == IN_REGION)
    {
        float *c = C + (size_t)omp_get_thread_num() * M * N;
        if (b)
            sf_gemm_prec_bias_w(0, 1, M, N, K, A, NULL, B, NULL, b, c);
        else
            sf_gemm_prec_w(0, 1, M, N, K, 1.0f, A, NULL, B, NULL, 0.0f, c);
    }
    sf_precision_set(SF_PREC_FP32);
}

/* Runs M x N x K (ta 0, tb 1, as a linear layer's) in bf16 where said; 1 when oneDNN ran it,
 * and checks the fp32 kernels' runs against the emulation run the same way. */
static int small_product_on_onednn(int M, int N, int K, int bias, product_place where) {
    sf_rng r;
    sf_rng_seed(&r, 11);
    const size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *b = malloc((size_t)N * 4);
    float *C = malloc(2 * nc * 4), *E = malloc(2 * nc * 4);
    for (size_t i = 0; i < na; i++) A[i] = sf_rng_normal(&r);
    for (size_t i = 0; i < nb; i++) B[i] = sf_rng_normal(&r);
    for (int j = 0; j < N; j++) b[j] = sf_rng_normal(&r);
    const int threads_were = omp_get_max_threads();
    product_at(SF_PREC_BF16_EMULATED, M, N, K, A, B, bias ? b : NULL, where, E);
    const long before = onednn_bf16_runs();
    product_at(SF_PREC_BF16, M, N, K, A, B, bias ? b : NULL, where, C);
    const long ran = onednn_bf16_runs() - before;
    omp_set_num_threads(threads_were);
    const int calls = where == IN_REGION ? 2 : 1;
    CHECK(ran == 0 || ran == calls, "%dx%dx%d %s: %ld of %d products on oneDNN", M, N, K, place_names[where], ran,
          calls);
    if (ran == 0)
        for (int t = 0; t < calls; t++)
            CHECK(!memcmp(C + (size_t)t * nc, E + (size_t)t * nc, nc * 4),
                  "%dx%dx%d %s on fp32 kernels: not the emulation's bits", M, N, K, place_names[where]);
    free(A), free(B), free(b), free(C), free(E);
    return ran > 0;
}

static void test_small_products(void) {
    sf_bf16_small_macs_set(1000000); /* the default */
    for (int bias = 0; bias < 2; bias++) {
        const char *what = bias ? "bias product" : "product";
        CHECK(!small_product_on_onednn(64, 96, 96, bias, ON_TEAM), "%s of 589824 on a team on oneDNN", what);
        CHECK(small_product_on_onednn(128, 96, 96, bias, ON_TEAM), "%s of 1179648 on a team not on oneDNN", what);
        CHECK(!small_product_on_onednn(8, 64, 96, bias, IN_REGION), "%s of 49152 in a region on oneDNN", what);
        CHECK(small_product_on_onednn(8, 96, 96, bias, IN_REGION), "%s of 73728 in a region not on oneDNN", what);
        CHECK(small_product_on_onednn(64, 96, 96, bias, IN_REGION), "%s of 589824 in a region not on oneDNN", what);
        CHECK(!small_product_on_onednn(8, 64, 96, bias, ON_ONE_THREAD), "%s of 49152 on one thread on oneDNN", what);
        CHECK(small_product_on_onednn(64, 96, 96, bias, ON_ONE_THREAD), "%s of 589824 on one thread not on oneDNN",
              what);
    }
    sf_bf16_small_macs_set(40000); /* lower than 65536: the calling thread's threshold follows it */
    CHECK(small_product_on_onednn(8, 64, 96, 0, IN_REGION), "49152 in a region under a threshold of 40000");
    sf_bf16_small_macs_set(2000000);
    CHECK(!small_product_on_onednn(128, 96, 96, 0, ON_TEAM), "1179648 on a team under a threshold of 2000000");
    sf_bf16_small_macs_set(0);
    CHECK(small_product_on_onednn(1, 17, 32, 0, ON_TEAM), "threshold 0: a 1x17x32 product not on oneDNN");
    CHECK(small_product_on_onednn(1, 17, 32, 1, IN_REGION), "threshold 0: in a region, not on oneDNN");
    CHECK(sf_bf16_small_macs_parse(NULL) == 1000000 && sf_bf16_small_macs_parse("0") == 0 &&
              sf_bf16_small_macs_parse("250000") == 250000 && sf_bf16_small_macs_parse("-1") == -1 &&
              sf_bf16_small_macs_parse("1e6") == -1 && sf_bf16_small_macs_parse("many") == -1,
          "SFVIT_BF16_SMALL_MACS values parsed wrong");
}

/* ---- an MLP, fc2's input gradient in bf16 ---- */

/* fc1 + its activation as one op, then fc2 (an MLP without dropout, as the models run it), forward and
 * backward from seed; y and the gradients of x, W1, b1, W2, b2 copied out. */
enum { MLP_LEAVES = 5 };
static void run_mlp(sf_tensor *const *leaves, sf_op act, const float *seed, float **out) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    for (int i = 0; i < MLP_LEAVES; i++) free(leaves[i]->grad), leaves[i]->grad = calloc(leaves[i]->numel, sizeof(float));
    sf_tensor *a = sf_linear_act_to_linear(&g, sf_scale(&g, leaves[0], 1.0f), leaves[1], leaves[2], act);
    sf_tensor *y = sf_linear_last_use(&g, a, leaves[3], leaves[4]);
    out[0] = copy_floats(y->data, y->numel);
    sf_backward_seeded(&g, y, seed);
    for (int i = 0; i < MLP_LEAVES; i++) out[1 + i] = copy_floats(leaves[i]->grad, leaves[i]->numel);
    sf_ctx_free(&g);
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(d / (s + 1e-300));
}

/* On oneDNN's kernels fc2 writes its input gradient (the activation output's) in bf16 alone
 * for the activation's backward; the emulation makes it in fp32 and rounds it where the
 * activation reads it. The same numbers up to summation order, but a value summed in another
 * order now and then lands across a bf16 rounding boundary, so each output is compared by its
 * relative L2 distance: within 2e-5 (1e-6 on Zen 5; that gradient left unrounded on one side
 * puts fc1's gradients at 3e-3). GELU, QuickGELU (from their slope tables at 1100 rows) and
 * ReLU; 1100 rows (the weights packed) and 140 (their copies read). */
static void test_mlp_grad_bf16(void) {
    enum { C = 96, Hd = 1024, O = 96 };
    static const char *names[1 + MLP_LEAVES] = {"y", "dx", "dW1", "db1", "dW2", "db2"};
    sf_rng r;
    sf_rng_seed(&r, 13);
    for (int R = 1100; R > 0; R -= 960) {
        sf_tensor *leaves[MLP_LEAVES] = {gc_leaf(2, (int[]){R, C}, 1), gc_leaf(2, (int[]){Hd, C}, 1),
                                         gc_leaf(1, (int[]){Hd}, 1), gc_leaf(2, (int[]){O, Hd}, 1),
                                         gc_leaf(1, (int[]){O}, 1)};
        for (int i = 0; i < MLP_LEAVES; i++) gc_fill_normal(leaves[i], &r, i == 1 || i == 3 ? 0.1f : 1.0f);
        float *seed = malloc((size_t)R * O * sizeof *seed);
        for (size_t i = 0; i < (size_t)R * O; i++) seed[i] = sf_rng_normal(&r);
        const size_t n[1 + MLP_LEAVES] = {(size_t)R * O, leaves[0]->numel, leaves[1]->numel, leaves[2]->numel,
                                          leaves[3]->numel, leaves[4]->numel};
        for (int a = 0; a < 3; a++) {
            const sf_op act = (const sf_op[]){SF_OP_GELU, SF_OP_QUICK_GELU, SF_OP_RELU}[a];
            float *native_out[1 + MLP_LEAVES], *emulated_out[1 + MLP_LEAVES];
            sf_precision_set(SF_PREC_BF16);
            sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
            CHECK(sf_gemm_prec_writes_bf16(), "oneDNN's bf16 kernels: products not written in bf16");
            run_mlp(leaves, act, seed, native_out);
            sf_precision_set(SF_PREC_BF16_EMULATED);
            run_mlp(leaves, act, seed, emulated_out);
            sf_precision_set(SF_PREC_FP32);
            for (int k = 0; k <= MLP_LEAVES; k++) {
                const double d = rel_l2(native_out[k], emulated_out[k], n[k]);
                CHECK(d <= 2e-5, "MLP (%s), %d rows: %s on oneDNN's kernels %.3g (relative L2) from the emulation's",
                      sf_op_name(act), R, names[k], d);
                free(native_out[k]), free(emulated_out[k]);
            }
        }
        for (int i = 0; i < MLP_LEAVES; i++) gc_leaf_free(leaves[i]);
        free(seed);
    }
    printf("  an MLP (GELU, QuickGELU, ReLU) with fc2's input gradient in bf16 on oneDNN's kernels: the emulation's gradients\n");
}

int main(void) {
    const char *why = NULL;
    if (!sf_dnnl_bf16_native(&why)) {
        printf("SKIP: no native bf16 products here: %s\n", why);
        return 77;
    }
    sf_threads_init(0);
    test_small_products();
    sf_bf16_small_macs_set(0); /* the cases below are small: every one of them on oneDNN */
    /* the bound uses |A||B| of the unrounded operands: rounding changes them by at most 2u */
    compare_products("oneDNN bf16 vs emulation", native, emulated, 2.1 * 0x1p-24, 8 * 0x1p-24);
    test_bias();
    test_packed_weights(96, 144);
    test_packed_weights(96, 96); /* square: W and W^T packed alike, but not the same numbers */
    test_mlp_grad_bf16();
    sf_dnnl_kernel k[SF_DNNL_MAX_KERNELS];
    const int nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    for (int i = 0; i < nk; i++)
        CHECK(!k[i].slow, "kernel %s (%s): %ld products on a slow kernel", k[i].impl, k[i].bf16 ? "bf16" : "f32",
              k[i].runs);
    CHECK(onednn_bf16_runs() > 0, "no bf16 product counted in the kernel table");
    return test_summary("bf16_native");
}
