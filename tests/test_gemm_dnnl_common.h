/* test_gemm_dnnl_common.h — shared by test_gemm_onednn.c and test_bf16_native.c: products of
 * every transpose pair, alpha and beta, compared with a reference within a bound
 * tol * sum_k |a_ik||b_kj| per element (the bound from OpenBLAS on |A|, |B|). */
#include "gradcheck.h"
#include "sfvit/precision.h"

#include <string.h>

typedef int (*product_fn)(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B,
                          float beta, float *C);

/* Runs got and want on the same random operands (C starting from the same values) and
 * checks |got - want| <= tol(K) * (|alpha| |A||B| + |beta| |C0|) elementwise. */
static void compare_products(const char *what, product_fn got, product_fn want, double tol_per_k, double tol0) {
    static const int dims[][3] = {{64, 48, 40}, {197, 64, 197}, {33, 17, 129}, {1, 96, 32}};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.125f, 1.0f}, {-1.0f, 1.0f}};
    sf_rng r;
    sf_rng_seed(&r, 3);
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (size_t s = 0; s < sizeof ab / sizeof *ab; s++) {
                    const int M = dims[d][0], N = dims[d][1], K = dims[d][2];
                    const float alpha = ab[s][0], beta = ab[s][1];
                    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
                    float *A = malloc(na * 4), *B = malloc(nb * 4), *Aa = malloc(na * 4), *Ba = malloc(nb * 4);
                    float *C0 = malloc(nc * 4), *C1 = malloc(nc * 4), *C2 = malloc(nc * 4), *Cb = malloc(nc * 4);
                    for (size_t i = 0; i < na; i++) A[i] = sf_rng_normal(&r), Aa[i] = fabsf(A[i]);
                    for (size_t i = 0; i < nb; i++) B[i] = sf_rng_normal(&r), Ba[i] = fabsf(B[i]);
                    for (size_t i = 0; i < nc; i++) C0[i] = sf_rng_normal(&r);
                    memcpy(C1, C0, nc * 4);
                    memcpy(C2, C0, nc * 4);
                    for (size_t i = 0; i < nc; i++) Cb[i] = fabsf(beta) * fabsf(C0[i]);
                    sf_gemm(ta, tb, M, N, K, fabsf(alpha), Aa, Ba, 1.0f, Cb);
                    int rc = got(ta, tb, M, N, K, alpha, A, B, beta, C1);
                    want(ta, tb, M, N, K, alpha, A, B, beta, C2);
                    long bad = 0;
                    const double tol = tol_per_k * K + tol0;
                    for (size_t i = 0; i < nc; i++)
                        if (!(fabs((double)C1[i] - C2[i]) <= tol * Cb[i] + 1e-30)) bad++;
                    CHECK(rc == 0 && bad == 0, "%s %dx%dx%d ta=%d tb=%d alpha=%g beta=%g: rc %d, %ld of %zu outside %.3g",
                          what, M, N, K, ta, tb, (double)alpha, (double)beta, rc, bad, nc, tol);
                    free(A), free(B), free(Aa), free(Ba), free(C0), free(C1), free(C2), free(Cb);
                }
}
