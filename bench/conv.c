/* conv.c — the depthwise convolution kernels side by side on the models' shapes: per channel
 * plane, channels innermost, and im2col (the reference), forward and backward in
 * milliseconds, and the kernel conv2d picks by itself (sf_conv2d_set_path, src/ops/conv.c);
 * then the models' dense (im2col) convolutions with their columns whole and in bands of
 * output rows (sf_conv2d_set_tile_floats), and which conv2d takes.
 *
 *   SFVIT_THREADS=2 build/bench/conv [ROUNDS] [FILTER] [PRECISION]
 *
 * PRECISION: fp32 (the default), bf16 (where oneDNN has native bf16) or bf16_emulated: the
 * convolutions in that train.precision, their weights' bf16 copies made as in training.
 * Each round times every kernel on a shape one after the other (the median of 15 calls after
 * 5 warm-up calls), so a machine whose speed drifts moves all kernels of a round alike; the
 * table shows the median over ROUNDS (default 3). FILTER keeps the shapes whose name contains
 * it ("all": every shape, to give a PRECISION). docs/performance.md has the numbers that set
 * conv2d's choices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h" /* sf_conv2d_set_path, sf_conv2d_set_tile_floats */
#include "sfvit/precision.h"

typedef struct dw_shape {
    const char *name;
    int B, C, H, stride, k; /* square grid H x H, k x k kernel, padding k / 2 */
} dw_shape;

static const dw_shape shapes[] = {
    {"Fashion-MNIST LPI", 32, 96, 4, 1, 3},    {"XCiT-S12 LPI", 8, 384, 14, 1, 3},
    {"CvT-13 q, stage 1", 8, 64, 56, 1, 3},    {"CvT-13 k/v, stage 1", 8, 64, 56, 2, 3},
    {"CvT-13 q, stage 2", 8, 192, 28, 1, 3},   {"CvT-13 k/v, stage 2", 8, 192, 28, 2, 3},
    {"CvT-13 q, stage 3", 8, 384, 14, 1, 3},   {"CvT-13 k/v, stage 3", 8, 384, 14, 2, 3},
    /* SOFT-Tiny's V-conv, batch 8: B·D = 256 images of H heads, one k x k kernel per head */
    {"SOFT-Tiny V, stage 1", 256, 2, 56, 1, 9}, {"SOFT-Tiny V, stage 2", 256, 4, 28, 1, 5},
    {"SOFT-Tiny V, stage 3", 256, 10, 14, 1, 3},
    {"one channel, 64 images", 64, 1, 28, 1, 3},
};

/* The models' im2col convolutions at batch 8; the first of each model reads the image (no dx). */
typedef struct dense_shape {
    const char *name;
    int Cin, H, Cout, k, stride, pad;
} dense_shape;

static const dense_shape dense[] = {
    {"SOFT-Tiny stem 1", 3, 224, 32, 3, 2, 1},   {"SOFT-Tiny stem 2", 32, 112, 32, 3, 1, 1},
    {"SOFT-Tiny stem 3", 32, 112, 64, 3, 2, 1},  {"SOFT-Tiny down 2", 64, 56, 128, 3, 2, 1},
    {"XCiT-S12 stem 1", 3, 224, 48, 3, 2, 1},    {"XCiT-S12 stem 2", 48, 112, 96, 3, 2, 1},
    {"XCiT-S12 stem 3", 96, 56, 192, 3, 2, 1},   {"XCiT-S12 stem 4", 192, 28, 384, 3, 2, 1},
    {"CvT-13 embed 1", 3, 224, 64, 7, 4, 2},     {"CvT-13 embed 2", 64, 56, 192, 3, 2, 1},
};

static const sf_conv_path kernels[] = {SF_CONV_PLANES, SF_CONV_CHANNELS_LAST, SF_CONV_IM2COL};
static const char *const kernel_names[] = {"planes", "channels", "im2col"};
#define N_KERNELS 3
#define CALLS 15

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "forward + backward" ms of kernel k: the medians over its rounds (f, bw: [kernel][round],
 * sorted here). */
static void median_cell(char *cell, size_t n, double *f, double *bw, int k, int rounds) {
    qsort(f + k * rounds, (size_t)rounds, sizeof *f, cmp_double);
    qsort(bw + k * rounds, (size_t)rounds, sizeof *bw, cmp_double);
    snprintf(cell, n, "%.2f + %.2f", f[k * rounds + rounds / 2], bw[k * rounds + rounds / 2]);
}

static sf_tensor *leaf(int ndim, const int *shape, sf_rng *r) {
    sf_tensor *t = sf_calloc(1, sizeof *t);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++) t->numel *= (size_t)shape[i];
    t->data = sf_aligned_alloc(t->numel * sizeof(float));
    for (size_t i = 0; i < t->numel; i++) t->data[i] = 0.1f * sf_rng_normal(r);
    t->requires_grad = 1;
    return t;
}

static void leaves_free(sf_tensor *x, sf_tensor *w, sf_tensor *b) {
    sf_tensor *t[3] = {x, w, b};
    for (int i = 0; i < 3; i++) {
        free(t[i]->data);
        free(t[i]);
    }
}

/* Median forward and backward ms of CALLS calls of one kernel (after 5 warm-up calls). */
static void time_kernel(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, const float *seed,
                        int stride, int pad, int groups, double *fwd, double *bwd) {
    double tf[CALLS], tb[CALLS];
    for (int i = -5; i < CALLS; i++) {
        x->grad = w->grad = b->grad = NULL; /* gradients live in the arena */
        double t0 = sf_now();
        sf_tensor *y = sf_conv2d(g, x, w, b, stride, pad, groups);
        double t1 = sf_now();
        sf_backward_seeded(g, y, seed);
        double t2 = sf_now();
        sf_ctx_reset(g);
        if (i >= 0) tf[i] = (t1 - t0) * 1e3, tb[i] = (t2 - t1) * 1e3;
    }
    qsort(tf, CALLS, sizeof *tf, cmp_double);
    qsort(tb, CALLS, sizeof *tb, cmp_double);
    *fwd = tf[CALLS / 2];
    *bwd = tb[CALLS / 2];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    const char *filter = argc > 2 && strcmp(argv[2], "all") ? argv[2] : NULL;
    const int prec = sf_precision_parse(argc > 3 ? argv[3] : "fp32");
    if (rounds < 1) rounds = 3;
    if (prec < 0) {
        fprintf(stderr, "conv: precision %s is not fp32, bf16 or bf16_emulated\n", argv[3]);
        return 2;
    }
    const char *why = NULL;
    if (prec == SF_PREC_BF16 && !sf_dnnl_bf16_native(&why)) {
        fprintf(stderr, "conv: no native bf16 here (%s); bf16_emulated runs anywhere\n", why ? why : "");
        return 2;
    }
    sf_precision_set((sf_precision)prec);
    int threads = sf_threads_init(0);
    printf("threads %d, rounds %d, precision %s; forward + backward ms, the median over rounds of the median of %d "
           "calls\n", threads, rounds, sf_precision_name((sf_precision)prec), CALLS);
    printf("%-24s %-24s %16s %16s %16s  %s\n", "shape", "(B, C, grid, s, k)", kernel_names[0],
           kernel_names[1], kernel_names[2], "conv2d picks");
    sf_rng r;
    sf_rng_seed(&r, 1);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)64 << 20);
    g.grad_enabled = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const dw_shape *sh = &shapes[s];
        if (filter && !strstr(sh->name, filter)) continue;
        sf_tensor *x = leaf(4, (int[]){sh->B, sh->C, sh->H, sh->H}, &r);
        sf_tensor *w = leaf(4, (int[]){sh->C, 1, sh->k, sh->k}, &r);
        sf_tensor *b = leaf(1, (int[]){sh->C}, &r);
        sf_bf16_weights_refresh(&w, 1); /* bf16: the weight's copy, as a training step has it */
        const int pad = sh->k / 2, Ho = (sh->H + 2 * pad - sh->k) / sh->stride + 1;
        const size_t ny = (size_t)sh->B * sh->C * Ho * Ho;
        float *seed = sf_aligned_alloc(ny * sizeof(float));
        for (size_t i = 0; i < ny; i++) seed[i] = sf_rng_normal(&r);
        double *f = sf_calloc((size_t)N_KERNELS * rounds, sizeof *f);
        double *bw = sf_calloc((size_t)N_KERNELS * rounds, sizeof *bw);
        for (int rd = 0; rd < rounds; rd++)
            for (int k = 0; k < N_KERNELS; k++) {
                sf_conv2d_set_path(kernels[k]);
                time_kernel(&g, x, w, b, seed, sh->stride, pad, sh->C, &f[k * rounds + rd], &bw[k * rounds + rd]);
            }
        sf_conv2d_set_path(SF_CONV_AUTO);
        const sf_conv_path picked = sf_conv2d_path_of(x, w, sh->stride, pad, sh->C);
        char geo[48], cell[N_KERNELS][40];
        snprintf(geo, sizeof geo, "(%d, %d, %dx%d, %d, %dx%d)", sh->B, sh->C, sh->H, sh->H, sh->stride, sh->k, sh->k);
        for (int k = 0; k < N_KERNELS; k++) median_cell(cell[k], sizeof cell[k], f, bw, k, rounds);
        const char *pick = picked == SF_CONV_PLANES           ? "planes"
                           : picked == SF_CONV_CHANNELS_LAST ? "channels"
                                                             : "im2col";
        printf("%-24s %-24s %16s %16s %16s  %s\n", sh->name, geo, cell[0], cell[1], cell[2], pick);
        fflush(stdout);
        free(f);
        free(bw);
        free(seed);
        leaves_free(x, w, b);
    }

    printf("\n%-24s %-24s %16s %16s  %s\n", "im2col conv, batch 8", "(Cin->Cout, grid, s, k)", "columns whole",
           "in bands", "conv2d takes");
    for (size_t s = 0; s < sizeof dense / sizeof *dense; s++) {
        const dense_shape *sh = &dense[s];
        if (filter && !strstr(sh->name, filter)) continue;
        const int B = 8, Ho = (sh->H + 2 * sh->pad - sh->k) / sh->stride + 1;
        sf_tensor *x = leaf(4, (int[]){B, sh->Cin, sh->H, sh->H}, &r);
        sf_tensor *w = leaf(4, (int[]){sh->Cout, sh->Cin, sh->k, sh->k}, &r);
        sf_tensor *b = leaf(1, (int[]){sh->Cout}, &r);
        sf_bf16_weights_refresh(&w, 1);
        x->requires_grad = sh->Cin != 3; /* the image */
        const size_t ny = (size_t)B * sh->Cout * Ho * Ho;
        float *seed = sf_aligned_alloc(ny * sizeof(float));
        for (size_t i = 0; i < ny; i++) seed[i] = sf_rng_normal(&r);
        double *f = sf_calloc((size_t)2 * rounds, sizeof *f), *bw = sf_calloc((size_t)2 * rounds, sizeof *bw);
        for (int rd = 0; rd < rounds; rd++)
            for (int k = 0; k < 2; k++) {
                /* whole: no column set above the size; in bands: bands of the default size
                 * (2^18 floats of columns) for every conv, also those the rule keeps whole */
                sf_conv2d_set_tile_floats(k == 0 ? SIZE_MAX : (size_t)1 << 18);
                time_kernel(&g, x, w, b, seed, sh->stride, sh->pad, 1, &f[k * rounds + rd], &bw[k * rounds + rd]);
            }
        sf_conv2d_set_tile_floats(0);
        const int band = sf_conv2d_band_rows_of(x, w, sh->stride, sh->pad, 1);
        char geo[48], cell[2][40], takes[48];
        snprintf(geo, sizeof geo, "(%d->%d, %dx%d, %d, %dx%d)", sh->Cin, sh->Cout, sh->H, sh->H, sh->stride, sh->k, sh->k);
        for (int k = 0; k < 2; k++) median_cell(cell[k], sizeof cell[k], f, bw, k, rounds);
        if (band < Ho)
            snprintf(takes, sizeof takes, "bands of %d rows", band);
        else
            snprintf(takes, sizeof takes, "whole");
        printf("%-24s %-24s %16s %16s  %s\n", sh->name, geo, cell[0], cell[1], takes);
        fflush(stdout);
        free(f);
        free(bw);
        free(seed);
        leaves_free(x, w, b);
    }
    sf_ctx_free(&g);
    sf_bf16_weights_clear();
    return 0;
}
