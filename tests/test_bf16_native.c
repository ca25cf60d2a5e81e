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
 * is the emulation's sum rounded once, within the same bound plus half a bf16 step. Skipped (exit 77) with the reason where oneDNN has no native
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
