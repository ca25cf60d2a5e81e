/* ops.c — forward + backward time of the attention ops at transformer shapes.
 *
 * For each shape (B, H, N, D) and each attention variant, builds the op graph from leaf
 * q, k, v (and landmarks / temperature), runs the backward seeded with a fixed upstream
 * gradient, resets the context, and reports the median wall time of the repetitions in
 * milliseconds. bench/ops_torch.py times the same compositions in PyTorch; bench/ops.sh runs
 * both and prints the comparison table.
 *
 * Variants (per head; the compositions are the ones the models use):
 *   msa        O = softmax(D^-1/2 Q K^T) V                              (sf_msa)
 *   sima       O = l1n(Q) l1n(K)^T V, order chosen by sf_sima_resolve  (sf_l1norm_tokens, sf_sima)
 *   sima_qk    the same with (Q K^T) V forced
 *   xca        XCA with per-head temperature                           (sf_xca)
 *   soft       K1 = S(Q, L), K2 = S(L, L), Z = NR_20(K2) (master init), O = (K1 Z)(K1^T V)
 *              with M landmarks given as a leaf (sf_gauss_kernel, sf_nr_pinv, sf_matmul)
 *   elu_linear O = phi(Q) (phi(K)^T V), phi = elu + 1 (numerator of linear attention)
 *
 * Output: one line per measurement, "op<TAB>shape<TAB>ms", and comment lines starting with
 * '#'. Threads: SFVIT_THREADS (default: every core), one setting for OpenMP and OpenBLAS.
 * Usage: ops [reps] [filter] [precision]   (default 9 timed repetitions after 2 warm-up runs;
 * filter: run only the variants whose name contains it, "" for all; precision: fp32 (the
 * default), bf16 (where oneDNN has native bf16) or bf16_emulated, as train.precision).
 *
 * Deliberately not here: projections, MLPs, the landmark convolution (the op costs only).
 *
 * Dimension legend: B batch, N tokens, H heads, D head dim, M landmarks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/ops.h"
#include "sfvit/precision.h"

char *openblas_get_corename(void);
char *openblas_get_config(void);

typedef struct bench_shape {
    int B, H, N, D;
} bench_shape;

typedef struct bench_leaves {
    sf_tensor *q, *k, *v; // (B, H, N, D) each
    sf_tensor *l;         // (B, H, M, D) landmarks
    sf_tensor *temp;      // (H)
    float *g_out;         // (B, H, N, D) upstream gradient
} bench_leaves;

typedef sf_tensor *(*bench_fn)(sf_ctx *g, bench_leaves *x);

static sf_tensor *run_msa(sf_ctx *g, bench_leaves *x) {
    return sf_msa(g, x->q, x->k, x->v, 1.0f / sqrtf((float)x->q->shape[3]));
}
static sf_tensor *run_sima(sf_ctx *g, bench_leaves *x) {
    return sf_sima(g, sf_l1norm_tokens(g, x->q, 1e-12f), sf_l1norm_tokens(g, x->k, 1e-12f), x->v, SF_SIMA_AUTO);
}
static sf_tensor *run_sima_qk(sf_ctx *g, bench_leaves *x) {
    return sf_sima(g, sf_l1norm_tokens(g, x->q, 1e-12f), sf_l1norm_tokens(g, x->k, 1e-12f), x->v,
                   SF_SIMA_QK_FIRST);
}
static sf_tensor *run_xca(sf_ctx *g, bench_leaves *x) { return sf_xca(g, x->q, x->k, x->v, x->temp); }
static sf_tensor *run_soft(sf_ctx *g, bench_leaves *x) {
    sf_tensor *k1 = sf_gauss_kernel(g, x->q, x->l, 1.0f);       // (B, H, N, M)
    sf_tensor *k2 = sf_gauss_kernel(g, x->l, x->l, 1.0f);       // (B, H, M, M)
    sf_tensor *z = sf_nr_pinv(g, k2, 20, SF_NR_MASTER);         // (B, H, M, M)
    sf_tensor *t = sf_matmul(g, k1, x->v, 1, 0);                // (B, H, M, D)
    sf_tensor *r = sf_matmul(g, k1, z, 0, 0);                   // (B, H, N, M)
    return sf_matmul(g, r, t, 0, 0);                            // (B, H, N, D)
}
static sf_tensor *run_elu_linear(sf_ctx *g, bench_leaves *x) {
    sf_tensor *kv = sf_matmul(g, sf_elu1(g, x->k), x->v, 1, 0); // (B, H, D, D)
    return sf_matmul(g, sf_elu1(g, x->q), kv, 0, 0);            // (B, H, N, D)
}

static const struct {
    const char *name;
    bench_fn fn;
} variants[] = {
    {"msa", run_msa}, {"sima", run_sima}, {"sima_qk", run_sima_qk},
    {"xca", run_xca}, {"soft", run_soft}, {"elu_linear", run_elu_linear},
};

static sf_tensor *leaf(int d0, int d1, int d2, int d3, sf_rng *r, float std) {
    sf_tensor *t = calloc(1, sizeof(sf_tensor));
    int shape[4] = {d0, d1, d2, d3};
    t->ndim = d3 ? 4 : 1;
    t->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = 1;
    for (int i = 0; i < t->ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->data = sf_aligned_alloc(t->numel * sizeof(float));
    for (size_t i = 0; i < t->numel; i++) t->data[i] = std * sf_rng_normal(r);
    t->requires_grad = 1;
    return t;
}

static void leaf_free(sf_tensor *t) {
    free(t->data);
    free(t);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms of forward + backward (+ context reset, which is what a training step pays). */
static double time_variant(sf_ctx *g, bench_fn fn, bench_leaves *x, int reps) {
    double *t = malloc((size_t)reps * sizeof(double));
    for (int r = -2; r < reps; r++) {
        double t0 = sf_now();
        /* Leaf gradients live in the arena: forget them with the context. */
        x->q->grad = x->k->grad = x->v->grad = x->l->grad = x->temp->grad = NULL;
        sf_tensor *out = fn(g, x);
        sf_backward_seeded(g, out, x->g_out);
        sf_ctx_reset(g);
        double dt = sf_now() - t0;
        if (r >= 0) t[r] = dt * 1e3;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    free(t);
    return med;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    const char *filter = argc > 2 && argv[2][0] ? argv[2] : NULL;
    const int prec = argc > 3 ? sf_precision_parse(argv[3]) : SF_PREC_FP32;
    if (reps < 1) reps = 1;
    const char *why = NULL;
    if (prec < 0 || (prec == SF_PREC_BF16 && !sf_dnnl_bf16_native(&why))) {
        fprintf(stderr, "ops: precision %s: %s\n", argv[3], prec < 0 ? "not fp32, bf16 or bf16_emulated" : why);
        return 2;
    }
    int threads = sf_threads_init(0);
    sf_precision_set((sf_precision)prec);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# sfvit threads %d, precision %s, OPENBLAS_CORETYPE=%s, OpenBLAS core %s (%s)\n", threads,
           sf_precision_name((sf_precision)prec), ct ? ct : "(unset)", openblas_get_corename(), openblas_get_config());
    const bench_shape shapes[] = {
        {8, 6, 197, 64}, {1, 8, 256, 64}, {8, 8, 256, 64}, {1, 8, 64, 256}, {8, 8, 64, 256},
    };
    sf_rng rng;
    sf_rng_seed(&rng, 7);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)64 << 20);
    g.grad_enabled = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        bench_shape sh = shapes[s];
        int M = sh.N >= 196 ? 49 : 16; /* SOFT: 7x7 landmarks; 4x4 on short sequences */
        bench_leaves x;
        /* q pre-scaled by D^-1/4 as in SOFT, so the Gaussian kernels are not all 0 or 1. */
        float qs = 1.0f / sqrtf(sqrtf((float)sh.D));
        x.q = leaf(sh.B, sh.H, sh.N, sh.D, &rng, qs);
        x.k = leaf(sh.B, sh.H, sh.N, sh.D, &rng, qs);
        x.v = leaf(sh.B, sh.H, sh.N, sh.D, &rng, 1.0f);
        x.l = leaf(sh.B, sh.H, M, sh.D, &rng, qs);
        x.temp = leaf(sh.H, 0, 0, 0, &rng, 0.1f);
        for (int h = 0; h < sh.H; h++) x.temp->data[h] += 1.0f;
        x.g_out = malloc(x.q->numel * sizeof(float));
        for (size_t i = 0; i < x.q->numel; i++) x.g_out[i] = sf_rng_normal(&rng);
        char label[64];
        snprintf(label, sizeof label, "B%d H%d N%d D%d", sh.B, sh.H, sh.N, sh.D);
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            if (filter && !strstr(variants[v].name, filter)) continue;
            double ms = time_variant(&g, variants[v].fn, &x, reps);
            if (strcmp(variants[v].name, "soft") == 0)
                printf("soft(M=%d)\t%s\t%.3f\n", M, label, ms);
            else
                printf("%s\t%s\t%.3f\n", variants[v].name, label, ms);
            fflush(stdout);
        }
        leaf_free(x.q);
        leaf_free(x.k);
        leaf_free(x.v);
        leaf_free(x.l);
        leaf_free(x.temp);
        free(x.g_out);
    }
    printf("# arena peak %.1f MiB\n", (double)sf_ctx_arena_peak(&g) / (1 << 20));
    sf_ctx_free(&g);
    return 0;
}
