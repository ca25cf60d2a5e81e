/* gemm.c — the single entry to cblas_sgemm for row-major contiguous operands. */
#include "ops_internal.h"

#include <cblas.h>

void sf_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
             const float *B, float beta, float *C) {
    int lda = trans_a ? M : K;
    int ldb = trans_b ? K : N;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}
