/* block.c — the SimA paper's Table 3 in sfvit: one attention block (qkv projection, heads,
 * attention core, head merge, output projection), batch 1, forward only (no tape), for each
 * attention kind, at the two shapes of the table. bench/block_torch.py times the same blocks in
 * PyTorch; bench/compare prints both with the ratio to softmax attention.
 *
 * Kinds (x (1, N, C), C = H D; qkv = x Wqkv^T + b, split into (1, H, N, D) heads):
 *   softmax     O = softmax(D^-1/2 Q K^T) V                      (sf_msa)
 *   elu_linear  O = phi(Q) (phi(K)^T V), phi = elu + 1           (numerator of linear attention)
 *   sima        O = l1n(Q) l1n(K)^T V, order by sf_sima_resolve  (sf_l1norm_tokens, sf_sima)
 *   sima_qk     the same with (Q K^T) V forced
 *   xca         XCA with per-head temperature                     (sf_xca)
 *   soft        K = Q; landmarks L = 2-D average pool of Q over the token grid (M = 16);
 *               O = (S(Q, L) NR_20(S(L, L))) (S(Q, L)^T V)        (sf_gauss_kernel, sf_nr_pinv)
 * then y = merge(O) Wproj^T + b.
 *
 * Output: "kind<TAB>shape<TAB>ms" lines (median of the repetitions) and '#' comments.
 * Usage: block [reps]   (default 41 timed runs after 5 warm-up runs per kind and shape).
 * Threads: SFVIT_THREADS (default: every core).
 *
 * Deliberately not here: backward (Table 3 is inference time), LayerNorm and MLP.
 *
 * Dimension legend: N tokens, C channels, H heads, D head dim, M landmarks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/ops.h"

typedef struct block_w {
    sf_tensor *wqkv, *bqkv, *wproj, *bproj, *temp; // (3C, C) (3C) (C, C) (C) (H)
    int H;
} block_w;

static sf_tensor *leaf(int ndim, const int *shape, sf_rng *r, float std, float mean) {
    sf_tensor *t = calloc(1, sizeof(sf_tensor));
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    for (int i = 0; i < ndim; i++) t->numel *= (size_t)shape[i];
    t->data = sf_aligned_alloc(t->numel * sizeof(float));
    for (size_t i = 0; i < t->numel; i++) t->data[i] = mean + std * sf_rng_normal(r);
    return t;
}

static void leaf_free(sf_tensor *t) {
    free(t->data);
    free(t);
}

/* Landmarks: each head's Q as a (D, s, s) image, s x s = N, average-pooled to 4 x 4. */
static sf_tensor *landmarks(sf_ctx *g, sf_tensor *q) {
    int H = q->shape[1], N = q->shape[2], D = q->shape[3], s = (int)lround(sqrt((double)N));
    sf_tensor *t = sf_permute(g, sf_reshape(g, q, 3, (int[]){H, N, D}), (int[]){0, 2, 1}); // (H, D, N)
    sf_tensor *p = sf_avgpool2d(g, sf_reshape(g, t, 4, (int[]){H, D, s, s}), s / 4, s / 4); // (H, D, 4, 4)
    sf_tensor *l = sf_permute(g, sf_reshape(g, p, 3, (int[]){H, D, 16}), (int[]){0, 2, 1}); // (H, M, D)
    return sf_reshape(g, l, 4, (int[]){1, H, 16, D});
}

static sf_tensor *block_forward(sf_ctx *g, const block_w *w, sf_tensor *x, const char *kind) {
    sf_tensor *qkv = sf_linear(g, x, w->wqkv, w->bqkv); // (1, N, 3C)
    sf_tensor *q = sf_heads_split(g, qkv, 3, 0, w->H);  // (1, H, N, D)
    sf_tensor *k = sf_heads_split(g, qkv, 3, 1, w->H);
    sf_tensor *v = sf_heads_split(g, qkv, 3, 2, w->H);
    int D = q->shape[3];
    sf_tensor *o = NULL;
    if (!strcmp(kind, "softmax")) o = sf_msa(g, q, k, v, 1.0f / sqrtf((float)D));
    else if (!strcmp(kind, "elu_linear")) o = sf_matmul(g, sf_elu1(g, q), sf_matmul(g, sf_elu1(g, k), v, 1, 0), 0, 0);
    else if (!strcmp(kind, "sima") || !strcmp(kind, "sima_qk"))
        o = sf_sima(g, sf_l1norm_tokens(g, q, 1e-12f), sf_l1norm_tokens(g, k, 1e-12f), v,
                    kind[4] ? SF_SIMA_QK_FIRST : SF_SIMA_AUTO);
    else if (!strcmp(kind, "xca")) o = sf_xca(g, q, k, v, w->temp);
    else { /* soft */
        sf_tensor *qs = sf_scale(g, q, 1.0f / sqrtf(sqrtf((float)D)));
        sf_tensor *l = landmarks(g, qs);
        sf_tensor *k1 = sf_gauss_kernel(g, qs, l, 1.0f);             // (1, H, N, M)
        sf_tensor *z = sf_nr_pinv(g, sf_gauss_kernel(g, l, l, 1.0f), 20, SF_NR_MASTER); // (1, H, M, M)
        o = sf_matmul(g, sf_matmul(g, k1, z, 0, 0), sf_matmul(g, k1, v, 1, 0), 0, 0);
    }
    return sf_linear(g, sf_heads_merge(g, o), w->wproj, w->bproj); // (1, N, C)
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 41;
    if (reps < 1) reps = 1;
    int threads = sf_threads_init(0);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# sfvit threads %d, OPENBLAS_CORETYPE=%s\n", threads, ct ? ct : "(unset)");
    static const int shapes[2][3] = {{64, 256, 8}, {256, 64, 8}}; /* D, N, H */
    static const char *kinds[] = {"softmax", "elu_linear", "sima", "sima_qk", "xca", "soft"};
    sf_rng rng;
    sf_rng_seed(&rng, 11);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)64 << 20);
    g.grad_enabled = 0;
    g.training = 0;
    double *t = malloc((size_t)reps * sizeof(double));
    for (int s = 0; s < 2; s++) {
        int D = shapes[s][0], N = shapes[s][1], H = shapes[s][2], C = H * D;
        float ws = 1.0f / sqrtf((float)C);
        block_w w = {leaf(2, (int[]){3 * C, C}, &rng, ws, 0), leaf(1, (int[]){3 * C}, &rng, 0.02f, 0),
                     leaf(2, (int[]){C, C}, &rng, ws, 0), leaf(1, (int[]){C}, &rng, 0.02f, 0),
                     leaf(1, (int[]){H}, &rng, 0.1f, 1.0f), H};
        sf_tensor *x = leaf(3, (int[]){1, N, C}, &rng, 1.0f, 0);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            for (int r = -5; r < reps; r++) {
                double t0 = sf_now();
                block_forward(&g, &w, x, kinds[k]);
                sf_ctx_reset(&g);
                if (r >= 0) t[r] = (sf_now() - t0) * 1e3;
            }
            qsort(t, (size_t)reps, sizeof(double), cmp_double);
            printf("%s\tD=%d N=%d H=%d\t%.4f\n", kinds[k], D, N, H, t[reps / 2]);
            fflush(stdout);
        }
        leaf_free(w.wqkv);
        leaf_free(w.bqkv);
        leaf_free(w.wproj);
        leaf_free(w.bproj);
        leaf_free(w.temp);
        leaf_free(x);
    }
    free(t);
    sf_ctx_free(&g);
    return 0;
}
