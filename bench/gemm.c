/* gemm.c — fp32 products through OpenBLAS (sf_gemm, split over the OpenMP team) and through
 * oneDNN's f32 matmul, per shape class of the project's models, and the bf16 product ceiling
 * where oneDNN has native bf16. Also the cost of creating a oneDNN primitive (paid once per
 * shape: the per-thread cache in src/ops/gemm_dnnl.c) against running it.
 *
 *   SFVIT_THREADS=2 build/bench/gemm [ROUNDS]
 *
 * Prints one row per shape: GFLOP/s of each backend (median of ROUNDS, default 7) and the
 * ratio; the last column says which `SFVIT_GEMM=auto` would take (oneDNN only when it wins by
 * more than 10 % everywhere in the class). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    } else {
        printf("bf16 product ceiling: no native bf16 (%s)\n", why);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
