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
 * weights packed in the kernels' layout (SFVIT_PACK_WEIGHTS=1), a linear layer's products give
 * the plain ones' bits, packed once per layout and change of the weights, never stale.
 * Skipped (exit 77) with the reason where oneDNN has no native
 * bf16 (AVX2-only CPUs such as Zen 3, AVX-512 without BF16, no oneDNN). */
#include "test_gemm_dnnl_common.h"

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

/* ---- weights packed in the kernels' layout (SFVIT_PACK_WEIGHTS=1) ---- */

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

/* A linear layer's products with the weight packed: the bits of the plain products (the same
 * kernel reads the same numbers), packed once per change of the weights and never read
 * stale: after a refresh, and after the optimizer writes the copies and says so. */
static void test_packed_weights(int I, int O) {
    enum { R = 197 };
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
    sf_bf16_pack_weights_set(1);
    before = sf_dnnl_weights_packed();
    linear_run packed = run_linear(x, w, b, R, seed);
    const long first = sf_dnnl_weights_packed() - before;
    CHECK(first == 2, "%dx%d: a layer's forward and dx products: %ld weights packed, expected 2 (one per layout)", O, I,
          first);
    CHECK(same_run(packed, plain, ny, x->numel, w->numel, O), "%dx%d: packed weights: not the plain products' bits", O,
          I);
    free_run(packed);
    packed = run_linear(x, w, b, R, seed);
    CHECK(sf_dnnl_weights_packed() - before == first, "the same weights packed again: %ld packings",
          sf_dnnl_weights_packed() - before);
    CHECK(same_run(packed, plain, ny, x->numel, w->numel, O), "packed weights reused: not the plain products' bits");
    free_run(packed);
    /* fewer rows (another primitive) read the same packed copy where its layout is the same */
    sf_bf16_pack_weights_set(0);
    linear_run plain_short = run_linear(x, w, b, R - 100, seed);
    sf_bf16_pack_weights_set(1);
    linear_run packed_short = run_linear(x, w, b, R - 100, seed);
    CHECK(same_run(packed_short, plain_short, (size_t)(R - 100) * O, x->numel, w->numel, O),
          "packed weights, fewer rows: not the plain products' bits");
    free_run(plain_short), free_run(packed_short);

    /* new weights through a refresh, then through the optimizer's copies: never the old packing */
    for (int route = 0; route < 2; route++) {
        for (size_t i = 0; i < w->numel; i++) w->data[i] = -0.5f * w->data[i] + 0.01f * (float)(i % 5);
        if (route == 0) {
            sf_bf16_weights_refresh(params, 3);
        } else {
            uint16_t *copy = sf_bf16_weight_slot(w);
            CHECK(copy != NULL, "no bf16 copy of the weight to write");
            if (!copy) break;
            sf_bf16_convert(w->data, copy, w->numel);
            sf_dnnl_weights_changed();
        }
        sf_bf16_pack_weights_set(0);
        linear_run now = run_linear(x, w, b, R, seed);
        sf_bf16_pack_weights_set(1);
        before = sf_dnnl_weights_packed();
        packed = run_linear(x, w, b, R, seed);
        CHECK(sf_dnnl_weights_packed() - before == 2, "%s: %ld weights packed, expected 2",
              route ? "optimizer's copies" : "refresh", sf_dnnl_weights_packed() - before);
        CHECK(!same_floats(now.y, plain.y, ny), "%s: the new weights give the old output", route ? "optimizer" : "refresh");
        CHECK(same_run(packed, now, ny, x->numel, w->numel, O), "%s: packed products read the old weights",
              route ? "optimizer's copies" : "refresh");
        free_run(now), free_run(packed);
    }
    free_run(plain);
    sf_bf16_pack_weights_set(0);
    sf_bf16_weights_clear();
    sf_precision_set(SF_PREC_FP32);
    free(seed);
    sf_ctx_free(&keep);
}

int main(void) {
    const char *why = NULL;
    if (!sf_dnnl_bf16_native(&why)) {
        printf("SKIP: no native bf16 products here: %s\n", why);
        return 77;
    }
    sf_threads_init(0);
    /* the bound uses |A||B| of the unrounded operands: rounding changes them by at most 2u */
    compare_products("oneDNN bf16 vs emulation", native, emulated, 2.1 * 0x1p-24, 8 * 0x1p-24);
    test_bias();
    test_packed_weights(96, 144);
    test_packed_weights(96, 96); /* square: W and W^T packed alike, but not the same numbers */
    sf_dnnl_kernel k[SF_DNNL_MAX_KERNELS];
    const int nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    long bf16_runs = 0;
    for (int i = 0; i < nk; i++) {
        if (k[i].bf16) bf16_runs += k[i].runs;
        CHECK(!k[i].slow, "kernel %s (%s): %ld products on a slow kernel", k[i].impl, k[i].bf16 ? "bf16" : "f32",
              k[i].runs);
    }
    CHECK(bf16_runs > 0, "no bf16 product counted in the kernel table");
    return test_summary("bf16_native");
}
