/* linear.c — DeiT-S's four linear layers at batch 8 (1576 rows), forward and backward (dx, dW,
 * db) with the tape recording as in training, in fp32, in bf16 on fp32 kernels
 * (train.bf16_products=fp32: runs everywhere) and, where oneDNN has native bf16, in bf16 on its
 * kernels. Run on two builds to see what a change to the linear layer does:
 *
 *   SFVIT_THREADS=2 build/bench/linear [CALLS]
 *
 * Prints the median and the smallest time of CALLS calls (default 41, after 3 warm-up calls)
 * per layer and precision, in ms. */
#include <stdio.h>
#include <stdlib.h>

#include "sfvit/core.h"
#include "sfvit/ops.h"
#include "sfvit/precision.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median and minimum of n times, sorted in place */
static void summary(double *t, int n, double *med, double *min) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *med = t[n / 2];
    *min = t[0];
}

int main(int argc, char **argv) {
    const int calls = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 41;
    const int threads = sf_threads_init(0);
    const char *why = NULL;
    const int native = sf_dnnl_bf16_native(&why);
    printf("threads %d, %d calls; ms per call (median / smallest)%s\n", threads, calls,
           native ? "" : "; bf16 on oneDNN's kernels left out: no native bf16 here");
    const struct {
        const char *name;
        int O, I;
    } layers[] = {{"qkv", 1152, 384}, {"proj", 384, 384}, {"fc1", 1536, 384}, {"fc2", 384, 1536}};
    const int R = 1576;
    sf_rng r;
    sf_rng_seed(&r, 1);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)256 << 20);
    g.grad_enabled = 1;
    double *tf = sf_calloc((size_t)calls, sizeof *tf), *tb = sf_calloc((size_t)calls, sizeof *tb);
    printf("prec: fp32; bf16f = bf16 on fp32 kernels (train.bf16_products=fp32); bf16 = on oneDNN's bf16 kernels\n");
    printf("%-6s %-6s %12s %20s %20s\n", "layer", "prec", "R x I -> O", "forward", "backward");
    /* fp32; bf16 on fp32 kernels; bf16 on oneDNN's */
    static const char *const label[] = {"fp32", "bf16f", "bf16"};
    for (int prec = 0; prec < (native ? 3 : 2); prec++) {
        sf_precision_set(prec ? SF_PREC_BF16 : SF_PREC_FP32);
        sf_bf16_products_set(prec == 1 ? SF_BF16_PRODUCTS_FP32 : SF_BF16_PRODUCTS_ONEDNN);
        for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
            const int O = layers[l].O, I = layers[l].I;
            sf_ctx keep; /* the inputs, never reset */
            sf_ctx_init(&keep, 0);
            sf_tensor *in[3] = {sf_tensor_new(&keep, 2, (int[]){R, I}), sf_tensor_new(&keep, 2, (int[]){O, I}),
                                sf_tensor_new(&keep, 1, (int[]){O})};
            for (int k = 0; k < 3; k++) {
                for (size_t i = 0; i < in[k]->numel; i++) in[k]->data[i] = 0.1f * sf_rng_normal(&r);
                in[k]->requires_grad = 1;
            }
            float *seed = sf_aligned_alloc((size_t)R * O * sizeof *seed);
            for (size_t i = 0; i < (size_t)R * O; i++) seed[i] = sf_rng_normal(&r);
            sf_bf16_weights_refresh(in, 3);
            for (int c = -3; c < calls; c++) {
                for (int k = 0; k < 3; k++) in[k]->grad = NULL; /* gradients live in the arena */
                const double t0 = sf_now();
                sf_tensor *y = sf_linear(&g, in[0], in[1], in[2]);
                const double t1 = sf_now();
                sf_backward_seeded(&g, y, seed);
                const double t2 = sf_now();
                sf_ctx_reset(&g);
                if (c >= 0) tf[c] = (t1 - t0) * 1e3, tb[c] = (t2 - t1) * 1e3;
            }
            double fm, fn, bm, bn;
            summary(tf, calls, &fm, &fn);
            summary(tb, calls, &bm, &bn);
            char dims[32];
            snprintf(dims, sizeof dims, "%dx%d->%d", R, I, O);
            printf("%-6s %-6s %12s %9.3f / %7.3f %9.3f / %7.3f\n", layers[l].name, label[prec], dims, fm, fn, bm, bn);
            free(seed);
            sf_ctx_free(&keep);
        }
    }
    sf_precision_set(SF_PREC_FP32);
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    free(tf);
    free(tb);
    sf_ctx_free(&g);
    return 0;
}
