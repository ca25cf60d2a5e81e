/* test_gemm_onednn.c — oneDNN's f32 matmul (SFVIT_GEMM=onednn) against OpenBLAS for every
 * transpose pair, alpha and beta: both sum the same exact fp32 products in different orders,
 * so |difference| <= 2K 2^-24 sum|a||b| (+ a few roundings of alpha and beta). And the
 * primitive cache: a second round of the same products creates no primitive.
 * Skipped (exit 77) in a build without oneDNN. */
#include "test_gemm_dnnl_common.h"

static int openblas(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                    float *C) {
    sf_gemm(ta, tb, M, N, K, alpha, A, B, beta, C); /* SFVIT_GEMM is unset in the suite: OpenBLAS */
    return 0;
}

int main(void) {
    if (!sf_dnnl_available()) {
        printf("SKIP: sfvit was built without oneDNN (-Ddnnl=disabled or libdnnl-dev missing)\n");
        return 77;
    }
    sf_threads_init(0);
    compare_products("oneDNN f32 vs OpenBLAS", sf_dnnl_gemm_f32, openblas, 2 * 0x1p-24, 8 * 0x1p-24);
    long created1, created2, run1, run2;
    sf_dnnl_stats(&created1, &run1);
    compare_products("oneDNN f32 vs OpenBLAS (again)", sf_dnnl_gemm_f32, openblas, 2 * 0x1p-24, 8 * 0x1p-24);
    sf_dnnl_stats(&created2, &run2);
    CHECK(created1 > 0 && created2 == created1, "second round created %ld primitives (first %ld)", created2 - created1,
          created1);
    CHECK(run2 - run1 == run1, "second round ran %ld products, first %ld", run2 - run1, run1);
    return test_summary("gemm_onednn");
}
