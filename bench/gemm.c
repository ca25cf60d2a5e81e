/* gemm.c — fp32 products through OpenBLAS (sf_gemm, split over the OpenMP team) and through
 * oneDNN's f32 matmul, per shape class of the project's models, and the bf16 product ceiling
 * where oneDNN has native bf16. Also the cost of creating a oneDNN primitive (paid once per
 * shape: the per-thread cache in src/ops/gemm_dnnl.c) against running it.
 *
 *   SFVIT_THREADS=2 build/bench/gemm [ROUNDS]
 *
 * Prints one row per shape: GFLOP/s of each backend (median of ROUNDS, default 7) and the
 * ratio; the last column says which `SFVIT_GEMM=auto` would take (oneDNN only when it wins by
 * more than 10 % everywhere in the class). Where oneDNN has native bf16, then the bf16 ceiling
 * and small bf16 products on oneDNN's kernels against fp32 kernels, alone and one per thread:
 * where SFVIT_BF16_SMALL_MACS's thresholds come from (src/ops/bf16.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "sfvit/core.h"
#include "sfvit/ops.h"
#include "sfvit/precision.h"

typedef struct {
    const char *cls;
    int ta, tb, M, N, K;
} shape;

/* (M x K) (K x N) as the ops call them: forward y = x W^T (0,1), dx = G W (0,0), dW = G^T x (1,0). */
static const shape shapes[] = {
    {"DeiT-S linear (B=8, N=197, C=384)", 0, 1, 1576, 1152, 384},
    {"DeiT-S linear (B=8, N=197, C=384)", 0, 1, 1576, 384, 384},
    {"DeiT-S linear (B=8, N=197, C=384)", 0, 1, 1576, 1536, 384},
    {"DeiT-S linear (B=8, N=197, C=384)", 0, 1, 1576, 384, 1536},
    {"DeiT-S linear (B=8, N=197, C=384)", 0, 0, 1576, 384, 1536},
    {"DeiT-S linear (B=8, N=197, C=384)", 1, 0, 384, 1536, 1576},
    {"DeiT-S attention (N=197, D=64)", 0, 1, 197, 197, 64},
    {"DeiT-S attention (N=197, D=64)", 0, 0, 197, 64, 197},
    {"DeiT-S attention (N=197, D=64)", 1, 0, 64, 64, 197},
    {"fmnist linear (B=32, N=16, C=96)", 0, 1, 512, 288, 96},
    {"fmnist linear (B=32, N=16, C=96)", 0, 1, 512, 192, 96},
    {"fmnist linear (B=32, N=16, C=96)", 0, 0, 512, 96, 192},
    {"fmnist linear (B=32, N=16, C=96)", 1, 0, 96, 192, 512},
    {"fmnist conv im2col (8x8, 48->96)", 0, 0, 96, 64, 432},
    {"SOFT-Tiny stage 1 (B=8, 56x56, C=64)", 0, 1, 25088, 512, 64},
    {"SOFT-Tiny stage 1 (B=8, 56x56, C=64)", 0, 1, 25088, 64, 512},
    {"SOFT-Tiny Gaussian/landmarks (n=3136, M=49)", 0, 1, 3136, 49, 64},
    {"SOFT-Tiny Gaussian/landmarks (n=3136, M=49)", 0, 0, 3136, 64, 49},
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef int (*product_fn)(const shape *s, const void *a, const void *b, float *c);

static int run_openblas(const shape *s, const void *a, const void *b, float *c) {
    sf_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, b, 0.0f, c);
    return 0;
}
static int run_onednn(const shape *s, const void *a, const void *b, float *c) {
    return sf_dnnl_gemm_f32(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, b, 0.0f, c);
}
static int run_bf16(const shape *s, const void *a, const void *b, float *c) {
    return sf_dnnl_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, b, 0.0f, c);
}

/* Median GFLOP/s over rounds (after one untimed call), or -1 when the backend cannot. */
static double rate(product_fn f, const shape *s, const void *a, const void *b, float *c, int rounds) {
    if (f(s, a, b, c) != 0) return -1;
    double *t = sf_calloc((size_t)rounds, sizeof *t);
    for (int r = 0; r < rounds; r++) {
        /* small products: repeat so that a round lasts about a millisecond or more */
        int reps = (int)(2e6 / ((double)s->M * s->N * s->K)) + 1;
        double t0 = sf_now();
        for (int i = 0; i < reps; i++) f(s, a, b, c);
        t[r] = (sf_now() - t0) / reps;
    }
    qsort(t, (size_t)rounds, sizeof *t, cmp_double);
    double med = t[rounds / 2];
    free(t);
    return 2.0 * s->M * s->N * s->K / med * 1e-9;
}

/* ---- small bf16 products: oneDNN's bf16 kernels against fp32 kernels on the bf16 values ----
 * (sf_gemm_prec_w in bf16 precision, operands rounded from fp32 as an op's are) for the
 * products below and around SFVIT_BF16_SMALL_MACS: alone on the team, and one per thread
 * inside a parallel region, as the attention ops run a head's products. */
static const shape small_shapes[] = {
    {"fmnist class attention, a head (n=17, d=32)", 0, 1, 1, 17, 32},
    {"fmnist class attention, a head (n=17, d=32)", 1, 0, 17, 32, 1},
    {"fmnist SimA, a head (N=16, d=32)", 0, 1, 16, 16, 32},
    {"fmnist SimA, a head (N=16, d=32)", 0, 0, 16, 32, 16},
    {"fmnist SimA, a head (N=16, d=32)", 1, 0, 16, 32, 16},
    {"fmnist patch conv 1 (1->24, 16x16), an image", 0, 0, 24, 256, 9},
    {"fmnist patch conv 1 (1->24, 16x16), an image", 0, 1, 24, 9, 256},
    {"fmnist class-token linear (B=8, C=96)", 0, 1, 8, 96, 96},
    {"around the threshold in a parallel region", 0, 1, 96, 64, 16},
    {"fmnist class-token linear (B=16, C=96)", 0, 1, 16, 96, 96},
    {"fmnist class-token linear (B=32, C=96)", 0, 1, 32, 96, 96},
    {"fmnist patch conv 2 (24->48, 8x8), an image", 0, 0, 48, 64, 216},
    {"fmnist patch conv 2 (24->48, 8x8), an image", 0, 1, 48, 216, 64},
    {"fmnist patch conv 2 (24->48, 8x8), an image", 1, 0, 216, 64, 48},
    {"fmnist patch conv 3 (48->96, 4x4), an image", 0, 0, 96, 16, 432},
    {"fmnist patch conv 3 (48->96, 4x4), an image", 1, 0, 432, 16, 96},
    {"fmnist linear (B=4, C=96)", 0, 1, 64, 96, 96},
    {"fmnist linear (B=8, C=96)", 0, 1, 128, 96, 96},
    {"fmnist linear (B=8, C=96)", 0, 1, 128, 288, 96},
    {"DeiT-S attention, a head (N=197, D=64)", 0, 1, 197, 197, 64},
    {"fmnist linear (B=32, C=96)", 0, 1, 512, 96, 96},
};

static void bf16_product(const shape *s, const float *a, const float *b, float *c) {
    sf_gemm_prec_w(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, NULL, b, NULL, 0.0f, c);
}

/* Microseconds a product on kernels k, median of rounds: alone, or one per thread at once
 * (per_thread). The kernels are chosen once, before any thread runs a product. */
static double small_us(sf_bf16_products k, const shape *s, const float *a, const float *b, float *c, int rounds,
                       int per_thread) {
    sf_bf16_products_set(k);
    const size_t nc = (size_t)s->M * s->N;
    const int reps = (int)(4e6 / ((double)s->M * s->N * s->K)) + 20;
    double *t = sf_calloc((size_t)rounds, sizeof *t);
    for (int r = -1; r < rounds; r++) { /* round -1: warm-up (primitives created) */
        double t0 = sf_now();
        if (per_thread) {
#pragma omp parallel
            {
                float *cc = c + (size_t)omp_get_thread_num() * nc;
                for (int i = 0; i < reps; i++) bf16_product(s, a, b, cc);
            }
        } else {
            for (int i = 0; i < reps; i++) bf16_product(s, a, b, c);
        }
        if (r >= 0) t[r] = (sf_now() - t0) / reps * 1e6;
    }
    qsort(t, (size_t)rounds, sizeof *t, cmp_double);
    const double med = t[rounds / 2];
    free(t);
    return med;
}

static void small_bf16_products(int rounds, int threads) {
    printf("\nsmall bf16 products (bf16 precision, operands rounded from fp32), us a product: oneDNN's bf16 kernels "
           "against fp32 kernels on the bf16 values; alone on %d threads, and one per thread at once\n", threads);
    printf("%-46s %-5s %14s %9s %9s %7s %9s %9s %7s\n", "shape", "trans", "M x N x K", "oneDNN", "fp32", "ratio",
           "oneDNN/t", "fp32/t", "ratio");
    size_t most = 0;
    for (size_t i = 0; i < sizeof small_shapes / sizeof *small_shapes; i++) {
        const shape *s = &small_shapes[i];
        size_t n = (size_t)(s->M > s->K ? s->M : s->K) * (size_t)(s->N > s->K ? s->N : s->K);
        if (n > most) most = n;
    }
    float *a = sf_aligned_alloc(most * sizeof(float)), *b = sf_aligned_alloc(most * sizeof(float));
    float *c = sf_aligned_alloc(most * (size_t)threads * sizeof(float));
    for (size_t i = 0; i < most; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    const long small_was = sf_bf16_small_macs_get();
    const sf_bf16_products products_was = sf_bf16_products_get();
    sf_precision_set(SF_PREC_BF16);
    sf_bf16_small_macs_set(0); /* every product where bf16_products says */
    for (size_t i = 0; i < sizeof small_shapes / sizeof *small_shapes; i++) {
        const shape *s = &small_shapes[i];
        char mnk[40];
        snprintf(mnk, sizeof mnk, "%dx%dx%d", s->M, s->N, s->K);
        double us[4];
        for (int per_thread = 0; per_thread < 2; per_thread++) {
            us[2 * per_thread] = small_us(SF_BF16_PRODUCTS_ONEDNN, s, a, b, c, rounds, per_thread);
            us[2 * per_thread + 1] = small_us(SF_BF16_PRODUCTS_FP32, s, a, b, c, rounds, per_thread);
        }
        printf("%-46s %d,%d   %14s %9.2f %9.2f %7.2f %9.2f %9.2f %7.2f\n", s->cls, s->ta, s->tb, mnk, us[0], us[1],
               us[1] / us[0], us[2], us[3], us[3] / us[2]);
    }
    printf("(ratio: fp32 kernels' time over oneDNN's, below 1 where the fp32 kernels are faster; "
           "SFVIT_BF16_SMALL_MACS is %ld)\n", small_was);
    sf_bf16_small_macs_set(small_was);
    sf_bf16_products_set(products_was);
    sf_precision_set(SF_PREC_FP32);
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1) rounds = 7;
    int threads = sf_threads_init(0);
    char desc[256];
    sf_dnnl_describe(desc, sizeof desc);
    printf("threads %d; %s\n", threads, desc);
    if (!sf_dnnl_available()) {
        printf("built without oneDNN: nothing to compare\n");
        return 0;
    }
    printf("%-44s %-5s %18s %10s %10s %7s\n", "shape class", "trans", "M x N x K", "OpenBLAS", "oneDNN", "ratio");
    size_t most = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        size_t n = (size_t)shapes[i].M * shapes[i].K + (size_t)shapes[i].K * shapes[i].N + (size_t)shapes[i].M * shapes[i].N;
        if (n > most) most = n;
    }
    float *a = sf_aligned_alloc(most * sizeof(float)), *b = sf_aligned_alloc(most * sizeof(float));
    float *c = sf_aligned_alloc(most * sizeof(float));
    for (size_t i = 0; i < most; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        double ob = rate(run_openblas, s, a, b, c, rounds), dn = rate(run_onednn, s, a, b, c, rounds);
        char mnk[40];
        snprintf(mnk, sizeof mnk, "%dx%dx%d", s->M, s->N, s->K);
        printf("%-44s %d,%d   %18s %10.1f %10.1f %7.2f\n", s->cls, s->ta, s->tb, mnk, ob, dn, dn / ob);
    }
    /* Creation once against execution: a new shape, timed on its first call and after. */
    long created0, created1, created2;
    sf_dnnl_stats(&created0, NULL);
    shape fresh = {"", 0, 1, 1576, 1152, 383};
    double t0 = sf_now();
    run_onednn(&fresh, a, b, c);
    double first = sf_now() - t0;
    sf_dnnl_stats(&created1, NULL);
    t0 = sf_now();
    for (int i = 0; i < 10; i++) run_onednn(&fresh, a, b, c);
    double again = (sf_now() - t0) / 10;
    sf_dnnl_stats(&created2, NULL);
    printf("oneDNN primitive: first call (creation + run) %.2f ms, later calls %.2f ms; primitives created by "
           "the first call %ld, by the next 10 calls %ld\n",
           first * 1e3, again * 1e3, created1 - created0, created2 - created1);
    /* The bf16 product ceiling: the largest DeiT-S product with bf16 operands. */
    const char *why = NULL;
    if (sf_dnnl_bf16_native(&why)) {
        uint16_t *a16 = sf_aligned_alloc(most * sizeof *a16), *b16 = sf_aligned_alloc(most * sizeof *b16);
        sf_bf16_convert(a, a16, most);
        sf_bf16_convert(b, b16, most);
        printf("bf16 product ceiling (1576x1536x384, bf16 operands, fp32 output): %.1f GFLOP/s\n",
               rate(run_bf16, &shapes[2], a16, b16, c, rounds));
        free(a16);
        free(b16);
        small_bf16_products(rounds, threads);
    } else {
        printf("bf16 product ceiling: no native bf16 (%s)\n", why);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
