/* gemm.c — the single entry to cblas_sgemm for row-major contiguous operands, and the way
 * products use the cores.
 *
 * Threading: one pool for everything. OpenBLAS runs single-threaded (sf_threads_init) and a
 * product large enough to share splits the rows of C (or its columns when C has few rows)
 * over the OpenMP team, one cblas_sgemm per thread on its block. OpenBLAS's own pthread pool
 * would otherwise spin after each product (up to ~2^28 cycles by default) on the cores where
 * the OpenMP team runs the element-wise kernels in between, and two pools of busy threads on
 * two cores cost more than the split (each thread packs the shared operand once: ~1/M of the
 * product). SFVIT_GEMM=openblas restores OpenBLAS's threading for comparison.
 *
 * Backends (SFVIT_GEMM): auto (the default) and openblas use OpenBLAS as above; onednn sends
 * every fp32 product to oneDNN's f32 matmul (src/ops/gemm_dnnl.c). auto keeps OpenBLAS for
 * every shape: on AVX2 oneDNN's f32 matmul wins small products in a loop but loses whole
 * training steps (docs/precision.md, "oneDNN and SFVIT_GEMM"). Products that follow
 * train.precision go through sf_gemm_prec (src/ops/bf16.c) and end here in fp32 or in oneDNN
 * in bf16.
 *
 * Deliberately not here: our own GEMM kernels (OpenBLAS's are faster), batching of small
 * per-head products (attention.c spreads those over threads itself).
 */
#include "ops_internal.h"
#include "sfvit/precision.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many multiply-adds one thread is faster than waking the team. */
#define GEMM_SPLIT_MIN_MACS (1 << 20)

static void gemm_one(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

sf_gemm_backend sf_gemm_backend_get(void) {
    static int backend = -1;
    if (backend < 0) {
        const char *e = getenv("SFVIT_GEMM");
        if (!e || !*e || !strcmp(e, "auto")) backend = SF_GEMM_AUTO;
        else if (!strcmp(e, "openblas")) backend = SF_GEMM_OPENBLAS;
        else if (!strcmp(e, "onednn")) backend = SF_GEMM_ONEDNN;
        else {
            sf_warn("SFVIT_GEMM=%s is not one of auto, openblas, onednn: using auto", e);
            backend = SF_GEMM_AUTO;
        }
        if (backend == SF_GEMM_ONEDNN && !sf_dnnl_available()) {
            sf_warn("SFVIT_GEMM=onednn: sfvit was built without oneDNN; using OpenBLAS");
            backend = SF_GEMM_AUTO;
        }
    }
    return (sf_gemm_backend)backend;
}

const char *sf_gemm_backend_name(sf_gemm_backend b) {
    return b == SF_GEMM_ONEDNN ? "onednn" : b == SF_GEMM_OPENBLAS ? "openblas" : "auto";
}

void sf_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
             const float *B, float beta, float *C) {
    if (sf_gemm_backend_get() == SF_GEMM_ONEDNN &&
        sf_dnnl_gemm_f32(trans_a, trans_b, M, N, K, alpha, A, B, beta, C) == 0)
        return;
    int lda = trans_a ? M : K;
    int ldb = trans_b ? K : N;
#ifdef _OPENMP
    int t = omp_get_max_threads();
    if (t > 1 && sf_gemm_split_enabled() && !omp_in_parallel() &&
        (double)M * N * K >= GEMM_SPLIT_MIN_MACS && (M >= 32 * t || N >= 64 * t)) {
        /* Each thread packs the whole operand that is not split: splitting the rows of C
         * shares op(B) (K x N), splitting its columns shares op(A) (M x K). Split the longer
         * side of C, so the shared operand is the smaller one (rows in blocks of 16, columns
         * in blocks of 64). */
        const int by_rows = M >= 32 * t && (M >= N || N < 64 * t);
        const int ext = by_rows ? M : N, unit = by_rows ? 16 : 64;
#pragma omp parallel num_threads(t)
        {
            int i = omp_get_thread_num(), n = omp_get_num_threads();
            int blocks = (ext + unit - 1) / unit;
            int b0 = (int)((long)blocks * i / n), b1 = (int)((long)blocks * (i + 1) / n);
            int lo = b0 * unit, hi = b1 * unit < ext ? b1 * unit : ext;
            if (hi > lo) {
                if (by_rows) /* op(A) rows lo..hi: A (M, K) rows, or A (K, M) columns */
                    gemm_one(trans_a, trans_b, hi - lo, N, K, alpha,
                             trans_a ? A + lo : A + (size_t)lo * K, lda, B, ldb, beta,
                             C + (size_t)lo * N, N);
                else /* op(B) columns lo..hi: B (K, N) columns, or B (N, K) rows */
                    gemm_one(trans_a, trans_b, M, hi - lo, K, alpha, A, lda,
                             trans_b ? B + (size_t)lo * K : B + lo, ldb, beta, C + lo, N);
            }
        }
        return;
    }
#endif
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}
