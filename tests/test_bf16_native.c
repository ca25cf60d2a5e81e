/* test_bf16_native.c — oneDNN's native bf16 products (AVX512_BF16, AMX_BF16) against the
 * emulation (operands rounded to bf16, OpenBLAS fp32): the products of bf16 numbers are exact
 * in fp32 on both sides, so they differ only in summation order: |difference| <=
 * 2K 2^-24 sum|a||b| of the rounded operands (+ a few roundings of alpha and beta). Through
 * sf_gemm_prec in each precision, as the ops call it; none of them on oneDNN's reference
 * kernel (sf_dnnl_kernels: a bf16 product oneDNN cannot run natively in some layout would
 * be exact there but many times slower). Skipped (exit 77) with the reason where
 * oneDNN has no native bf16 (AVX2-only CPUs such as Zen 3, AVX-512 without BF16, no oneDNN). */
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

int main(void) {
    const char *why = NULL;
    if (!sf_dnnl_bf16_native(&why)) {
        printf("SKIP: no native bf16 products here: %s\n", why);
        return 77;
    }
    sf_threads_init(0);
    /* the bound uses |A||B| of the unrounded operands: rounding changes them by at most 2u */
    compare_products("oneDNN bf16 vs emulation", native, emulated, 2.1 * 0x1p-24, 8 * 0x1p-24);
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
