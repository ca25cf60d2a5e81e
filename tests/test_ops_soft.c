/* test_ops_soft.c — the Gaussian kernel (K1 and the symmetric K2), the Newton–Raphson
 * pseudo-inverse (master and paper initializations) and the SOFT++ symmetric normalization:
 * forwards against direct double-precision formulas (an explicit Gauss–Jordan inverse for the
 * NR ops), gradients by finite differences of the ops themselves and, for the NR ops, against
 * finite differences of the explicit-inverse formula in double. */
#include "gradcheck.h"

/* ---- independent double-precision references ---- */

/* Y = X⁻¹ (M × M) by Gauss–Jordan with partial pivoting. */
static void inv_d(const double *X, double *Y, int M) {
    double *a = malloc(sizeof(double) * (size_t)M * 2 * M);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < 2 * M; j++) a[i * 2 * M + j] = j < M ? X[i * M + j] : (j - M == i);
    for (int c = 0; c < M; c++) {
        int p = c;
        for (int r = c + 1; r < M; r++)
            if (fabs(a[r * 2 * M + c]) > fabs(a[p * 2 * M + c])) p = r;
        for (int j = 0; j < 2 * M; j++) {
            double t = a[c * 2 * M + j];
            a[c * 2 * M + j] = a[p * 2 * M + j];
            a[p * 2 * M + j] = t;
        }
        double d = a[c * 2 * M + c];
        for (int j = 0; j < 2 * M; j++) a[c * 2 * M + j] /= d;
        for (int r = 0; r < M; r++) {
            if (r == c) continue;
            double f = a[r * 2 * M + c];
            for (int j = 0; j < 2 * M; j++) a[r * 2 * M + j] -= f * a[c * 2 * M + j];
        }
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) Y[i * M + j] = a[i * 2 * M + M + j];
    free(a);
}

/* The explicit targets: mode 0 = (A + 0.01 I)⁻¹ (master), 1 = A⁻¹ (paper),
 * 2 = SOFT++ diag(u)(A + 0.01 I)⁻¹diag(u), u = (A·1)^−½. */
static void target_d(const double *A, double *Z, int M, int mode) {
    double *P = malloc(sizeof(double) * M * M);
    for (int i = 0; i < M * M; i++) P[i] = A[i];
    if (mode != 1)
        for (int i = 0; i < M; i++) P[i * M + i] += 0.01;
    inv_d(P, Z, M);
    if (mode == 2)
        for (int i = 0; i < M; i++) {
            double di = 0;
            for (int j = 0; j < M; j++) di += A[i * M + j];
            for (int j = 0; j < M; j++) {
                double dj = 0;
                for (int k = 0; k < M; k++) dj += A[j * M + k];
                Z[i * M + j] /= sqrt(di * dj);
            }
        }
    free(P);
}

/* (count, M, M) kernel matrices of `count` sets of M landmarks in D dims, std `spread`:
 * A_ij = exp(−‖l_i − l_j‖²/2), computed directly. */
static void kernel_matrices(float *A, int count, int M, int D, float spread, sf_rng *r) {
    float *l = malloc(sizeof(float) * (size_t)count * M * D);
    for (int i = 0; i < count * M * D; i++) l[i] = spread * sf_rng_normal(r);
    for (int b = 0; b < count; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) {
                double d2 = 0;
                for (int k = 0; k < D; k++) {
                    double t = l[(b * M + i) * D + k] - l[(b * M + j) * D + k];
                    d2 += t * t;
                }
                A[(b * M + i) * M + j] = (float)exp(-d2 / 2);
            }
    free(l);
}

/* ---- builders ---- */
typedef struct soft_args {
    float c;
    int iters;
    sf_nr_init init;
} soft_args;

static sf_tensor *build_k1(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_gauss_kernel(g, in[0], in[1], ((soft_args *)u)->c);
}
static sf_tensor *build_k2(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_gauss_kernel(g, in[0], in[0], ((soft_args *)u)->c);
}
static sf_tensor *build_nr(sf_ctx *g, sf_tensor **in, void *u) {
    soft_args *a = u;
    return sf_nr_pinv(g, in[0], a->iters, a->init);
}
static sf_tensor *build_symnorm(sf_ctx *g, sf_tensor **in, void *u) {
    soft_args *a = u;
    return sf_soft_symnorm(g, in[0], a->iters, a->init);
}
/* landmarks -> K2 -> NR or SOFT++: the chain the SOFT core uses, keeping A symmetric */
static sf_tensor *build_l_nr(sf_ctx *g, sf_tensor **in, void *u) {
    soft_args *a = u;
    return sf_nr_pinv(g, sf_gauss_kernel(g, in[0], in[0], a->c), a->iters, a->init);
}
static sf_tensor *build_l_symnorm(sf_ctx *g, sf_tensor **in, void *u) {
    soft_args *a = u;
    return sf_soft_symnorm(g, sf_gauss_kernel(g, in[0], in[0], a->c), a->iters, a->init);
}

/* ---- Gaussian kernel ---- */
static void test_gauss_kernel(void) {
    sf_rng r;
    sf_rng_seed(&r, 11);
    const int B = 2, H = 2, n = 7, M = 4, D = 5;
    sf_tensor *q = gc_leaf(4, (int[]){B, H, n, D}, 1), *l = gc_leaf(4, (int[]){B, H, M, D}, 1);
    gc_fill_uniform(q, &r, -1.0f, 1.0f);
    gc_fill_normal(l, &r, 0.6f);
    soft_args a = {sqrtf((float)D), 0, SF_NR_MASTER};

    /* forward against exp(−‖q_i − l_j‖²/(2c)) with the difference taken directly */
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *S = sf_gauss_kernel(&g, q, l, a.c);
    CHECK(S->ndim == 4 && S->shape[2] == n && S->shape[3] == M, "K1 shape");
    float *want = malloc(sizeof(float) * S->numel);
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < M; j++) {
                double d2 = 0;
                for (int k = 0; k < D; k++) {
                    double t = q->data[(bh * n + i) * D + k] - l->data[(bh * M + j) * D + k];
                    d2 += t * t;
                }
                want[(bh * n + i) * M + j] = (float)exp(-d2 / (2 * a.c));
            }
    allclose("gauss K1 forward", S->data, want, S->numel, 1e-5f, 1e-6f);
    sf_ctx_reset(&g);
    sf_tensor *S2 = sf_gauss_kernel(&g, l, l, a.c);
    int diag_ok = 1, sym_ok = 1;
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) {
                float v = S2->data[(bh * M + i) * M + j], vt = S2->data[(bh * M + j) * M + i];
                if (i == j && fabsf(v - 1.0f) > 1e-5f) diag_ok = 0;
                if (fabsf(v - vt) > 1e-6f) sym_ok = 0;
            }
    CHECK(diag_ok && sym_ok, "K2 must be symmetric with a unit diagonal (diag %d sym %d)", diag_ok, sym_ok);
    sf_ctx_free(&g);
    free(want);

    sf_tensor *in[2] = {q, l};
    gradcheck("gauss_kernel K1 (c = sqrt D)", build_k1, &a, in, 2, (gc_opts){.tol = 1e-2f});
    soft_args a1 = {1.0f, 0, SF_NR_MASTER};  // the official form: c = 1
    gradcheck("gauss_kernel K1 (c = 1)", build_k1, &a1, in, 2, (gc_opts){.tol = 1e-2f});
    /* only q requires grad: the l branch must be skipped, q's must still be right */
    l->requires_grad = 0;
    gradcheck("gauss_kernel K1, l without grad", build_k1, &a, in, 2, (gc_opts){.tol = 1e-2f});
    l->requires_grad = 1;
    /* K2: l == q, both contributions into one gradient */
    sf_tensor *in2[1] = {l};
    gradcheck("gauss_kernel K2 (l == q)", build_k2, &a, in2, 1, (gc_opts){.tol = 1e-2f});
    gc_leaf_free(q);
    gc_leaf_free(l);
}

/* ---- Newton–Raphson pseudo-inverse and SOFT++ ---- */

/* max |Y·P − I| over the matrices, P = A (+ 0.01 I) */
static double inverse_defect(const float *Y, const float *A, int count, int M, float shift) {
    double worst = 0;
    for (int b = 0; b < count; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) {
                double s = 0;
                for (int k = 0; k < M; k++)
                    s += (double)Y[(b * M + i) * M + k] *
                         ((double)A[(b * M + k) * M + j] + (k == j ? shift : 0.0));
                double e = fabs(s - (i == j));
                if (e > worst) worst = e;
            }
    return worst;
}

/* Forward vs the explicit target, and the op's backward (seeded with R) vs central differences
 * in double of the explicit target: an oracle that shares no code with the op. */
static void check_against_explicit(const char *name, sf_tensor *A, int count, int M, int mode,
                                   soft_args *a) {
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_rng r;
    sf_rng_seed(&r, 99);
    const int MM = M * M;
    sf_tensor *Y = mode == 2 ? sf_soft_symnorm(&g, A, a->iters, a->init) : sf_nr_pinv(&g, A, a->iters, a->init);
    float *R = malloc(sizeof(float) * Y->numel), *want = malloc(sizeof(float) * Y->numel);
    for (size_t i = 0; i < Y->numel; i++) R[i] = 2 * sf_rng_uniform(&r) - 1;
    double *Ad = malloc(sizeof(double) * MM), *Zd = malloc(sizeof(double) * MM);
    for (int b = 0; b < count; b++) {
        for (int i = 0; i < MM; i++) Ad[i] = A->data[b * MM + i];
        target_d(Ad, Zd, M, mode);
        for (int i = 0; i < MM; i++) want[b * MM + i] = (float)Zd[i];
    }
    char what[128];
    snprintf(what, sizeof what, "%s forward vs explicit inverse", name);
    allclose(what, Y->data, want, Y->numel, 1e-4f, 1e-5f);

    free(A->grad);
    A->grad = calloc(A->numel, sizeof(float));
    sf_backward_seeded(&g, Y, R);
    const double h = 1e-6;
    for (int b = 0; b < count; b++)
        for (int e = 0; e < MM; e++) {
            double lp = 0, lm = 0;
            for (int s = 0; s < 2; s++) {
                for (int i = 0; i < MM; i++) Ad[i] = A->data[b * MM + i];
                Ad[e] += s ? -h : h;
                target_d(Ad, Zd, M, mode);
                double L = 0;
                for (int i = 0; i < MM; i++) L += Zd[i] * R[b * MM + i];
                if (s) lm = L;
                else lp = L;
            }
            want[b * MM + e] = (float)((lp - lm) / (2 * h));
        }
    snprintf(what, sizeof what, "%s backward vs explicit-inverse differences", name);
    double maxg = 0;
    for (size_t i = 0; i < A->numel; i++) maxg = fmax(maxg, fabs(want[i]));
    allclose(what, A->grad, want, A->numel, 1e-3f, (float)(1e-4 * maxg));
    free(R);
    free(want);
    free(Ad);
    free(Zd);
    sf_ctx_free(&g);
}

static void test_nr_pinv(void) {
    sf_rng r;
    sf_rng_seed(&r, 21);
    const int count = 3, M = 6, D = 8;
    sf_tensor *A = gc_leaf(3, (int[]){count, M, M}, 1);
    /* landmark spread 0.45 in 8 dims: off-diagonal kernel values up to ~0.5, cond(A) ~ 5 */
    kernel_matrices(A->data, count, M, D, 0.45f, &r);

    /* The paper initialization halves alpha 10 times for these matrices (their A² is not
     * diagonally dominant), so it needs more iterations than the master one. */
    soft_args master = {1.0f, 20, SF_NR_MASTER}, paper = {1.0f, 30, SF_NR_PAPER};
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *Y = sf_nr_pinv(&g, A, 20, SF_NR_MASTER);
    double defect = inverse_defect(Y->data, A->data, count, M, 0.01f);
    CHECK(defect < 1e-4, "master NR: max |Y (A + 0.01 I) - I| = %.3g", defect);
    float res = sf_nr_last_residual();
    CHECK(res < 1e-5f, "master NR residual %.3g for a well-conditioned A", res);
    printf("  nr_pinv master, cond ~5: max|Y P - I| %.2e, residual %.2e\n", defect, res);
    sf_ctx_reset(&g);
    sf_nr_pinv(&g, A, 20, SF_NR_PAPER);
    float res20 = sf_nr_last_residual();
    CHECK(res20 > 10 * res, "paper NR at 20 iterations (%.3g) should trail master (%.3g)", res20, res);
    Y = sf_nr_pinv(&g, A, paper.iters, SF_NR_PAPER);
    defect = inverse_defect(Y->data, A->data, count, M, 0.0f);
    CHECK(defect < 1e-4, "paper NR: max |Y A - I| = %.3g", defect);
    res = sf_nr_last_residual();
    CHECK(res < 1e-5f, "paper NR residual %.3g for a well-conditioned A", res);
    printf("  nr_pinv paper,  cond ~5: residual %.2e at 20 it; at %d it max|Y A - I| %.2e, residual %.2e\n",
           res20, paper.iters, defect, res);
    sf_ctx_free(&g);

    check_against_explicit("nr_pinv master", A, count, M, 0, &master);
    check_against_explicit("nr_pinv paper", A, count, M, 1, &paper);
    sf_tensor *in[1] = {A};
    gradcheck("nr_pinv master (A leaf, 20 it)", build_nr, &master, in, 1, (gc_opts){.tol = 1e-2f});
    gradcheck("nr_pinv paper (A leaf, 30 it)", build_nr, &paper, in, 1, (gc_opts){.tol = 1e-2f});

    /* landmarks -> K2 -> NR: the symmetric chain as the SOFT core uses it */
    sf_tensor *l = gc_leaf(3, (int[]){2, M, D}, 1);
    gc_fill_normal(l, &r, 0.45f);
    sf_tensor *inl[1] = {l};
    gradcheck("landmarks -> K2 -> nr_pinv master", build_l_nr, &master, inl, 1, (gc_opts){.tol = 1e-2f});
    gc_leaf_free(l);
    gc_leaf_free(A);
}

/* The Gaussian kernel's backward shares the (b, h) slices out over the threads when there
 * is enough work: 8 slices of 400 queries × 16 landmarks × 32 dims must each give exactly what
 * the slice gives alone. Alone means threaded as the op threads a slice: the forward's product
 * on the team, the backward's on one thread (inside the region, each slice's products run on
 * its thread). A product on the whole team may differ from it in the last bits (oneDNN's f32
 * matmul on AVX2 does, where SFVIT_GEMM sends fp32 products to it). */
static void test_gauss_batch_equals_single(void) {
    sf_rng r;
    sf_rng_seed(&r, 43);
    const int nb = 8, n = 400, M = 16, D = 32;
    sf_tensor *q = gc_leaf(3, (int[]){nb, n, D}, 1), *l = gc_leaf(3, (int[]){nb, M, D}, 1);
    gc_fill_normal(q, &r, 0.3f);
    gc_fill_normal(l, &r, 0.3f);
    float *R = malloc(sizeof(float) * nb * n * M);
    for (int i = 0; i < nb * n * M; i++) R[i] = 2 * sf_rng_uniform(&r) - 1;
    sf_ctx g;
    sf_ctx_init(&g, 1 << 22);
    q->grad = calloc(q->numel, sizeof(float));
    l->grad = calloc(l->numel, sizeof(float));
    sf_tensor *S = sf_gauss_kernel(&g, q, l, 1.0f);
    sf_backward_seeded(&g, S, R);
    sf_tensor *q1 = gc_leaf(3, (int[]){1, n, D}, 1), *l1 = gc_leaf(3, (int[]){1, M, D}, 1);
    int same_s = 1, same_dq = 1, same_dl = 1;
    for (int b = 0; b < nb; b++) {
        sf_ctx g1;
        sf_ctx_init(&g1, 1 << 20);
        memcpy(q1->data, q->data + (size_t)b * n * D, sizeof(float) * n * D);
        memcpy(l1->data, l->data + (size_t)b * M * D, sizeof(float) * M * D);
        free(q1->grad);
        free(l1->grad);
        q1->grad = calloc(q1->numel, sizeof(float));
        l1->grad = calloc(l1->numel, sizeof(float));
        sf_tensor *S1 = sf_gauss_kernel(&g1, q1, l1, 1.0f);
        sf_threads_init(1);
        sf_backward_seeded(&g1, S1, R + (size_t)b * n * M);
        sf_threads_init(0); /* the team main set */
        same_s &= !memcmp(S1->data, S->data + (size_t)b * n * M, sizeof(float) * n * M);
        same_dq &= !memcmp(q1->grad, q->grad + (size_t)b * n * D, sizeof(float) * n * D);
        same_dl &= !memcmp(l1->grad, l->grad + (size_t)b * M * D, sizeof(float) * M * D);
        sf_ctx_free(&g1);
    }
    CHECK(same_s, "gauss_kernel of 8 slices: each equals its single-slice call bit for bit");
    CHECK(same_dq && same_dl, "gauss_kernel backward of 8 slices: dq %s, dl %s its single-slice call",
          same_dq ? "equals" : "differs from", same_dl ? "equals" : "differs from");
    free(R);
    gc_leaf_free(q);
    gc_leaf_free(l);
    gc_leaf_free(q1);
    gc_leaf_free(l1);
    sf_ctx_free(&g);
}

/* Many matrices are shared out over the threads (forward and backward): the batch must give
 * exactly what each matrix gives alone, and the residual must be the worst one's, wherever it
 * sits in the batch. 8 matrices of 32 × 32 (large enough to go parallel), the sixth crowded. */
static void test_nr_batch_equals_single(void) {
    sf_rng r;
    sf_rng_seed(&r, 41);
    const int count = 8, M = 32, D = 8, MM = M * M;
    sf_tensor *A = gc_leaf(3, (int[]){count, M, M}, 1);
    kernel_matrices(A->data, count, M, D, 0.45f, &r);
    kernel_matrices(A->data + 5 * MM, 1, M, D, 0.05f, &r);
    float *R = malloc(sizeof(float) * A->numel);
    for (size_t i = 0; i < A->numel; i++) R[i] = 2 * sf_rng_uniform(&r) - 1;
    sf_ctx g;
    sf_ctx_init(&g, 1 << 22);
    sf_tensor *Y = sf_nr_pinv(&g, A, 20, SF_NR_MASTER);
    const float batch_residual = sf_nr_last_residual();
    free(A->grad);
    A->grad = calloc(A->numel, sizeof(float));
    sf_backward_seeded(&g, Y, R);

    float worst = 0;
    int same_y = 1, same_dA = 1;
    sf_tensor *A1 = gc_leaf(3, (int[]){1, M, M}, 1);
    for (int b = 0; b < count; b++) {
        sf_ctx g1;
        sf_ctx_init(&g1, 1 << 20);
        memcpy(A1->data, A->data + b * MM, sizeof(float) * MM);
        sf_tensor *Y1 = sf_nr_pinv(&g1, A1, 20, SF_NR_MASTER);
        float res = sf_nr_last_residual();
        if (res > worst) worst = res;
        free(A1->grad);
        A1->grad = calloc(A1->numel, sizeof(float));
        sf_backward_seeded(&g1, Y1, R + b * MM);
        same_y &= !memcmp(Y1->data, Y->data + b * MM, sizeof(float) * MM);
        same_dA &= !memcmp(A1->grad, A->grad + b * MM, sizeof(float) * MM);
        sf_ctx_free(&g1);
    }
    CHECK(same_y, "nr_pinv of 8 matrices: each Y equals its own single-matrix call bit for bit");
    CHECK(same_dA, "nr_pinv backward of 8 matrices: each dA equals its own single-matrix call bit for bit");
    CHECK(batch_residual == worst && worst > 1e-4f, "batch residual %.3g is the worst single one %.3g (crowded matrix 6)",
          batch_residual, worst);
    free(R);
    gc_leaf_free(A1);
    gc_leaf_free(A);
    sf_ctx_free(&g);
}

/* The residual tells a converged inverse from one that needed more iterations: A ≈ I gives a
 * float32-rounding residual; landmarks crowded together make A nearly rank one, cond(A + 0.01 I)
 * in the thousands, and 20 iterations leave a residual orders of magnitude larger. */
static void test_nr_residual(void) {
    sf_rng r;
    sf_rng_seed(&r, 31);
    const int M = 16, D = 8;
    sf_tensor *A = gc_leaf(3, (int[]){2, M, M}, 0);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    kernel_matrices(A->data, 2, M, D, 2.0f, &r);  // far apart: A ≈ I
    sf_nr_pinv(&g, A, 20, SF_NR_MASTER);
    float well = sf_nr_last_residual();
    kernel_matrices(A->data, 2, M, D, 0.05f, &r);  // crowded: A ≈ 1 1ᵀ
    sf_nr_pinv(&g, A, 20, SF_NR_MASTER);
    float ill = sf_nr_last_residual();
    sf_nr_pinv(&g, A, 60, SF_NR_MASTER);
    float ill_more = sf_nr_last_residual();
    printf("  nr residual: A ~ I %.2e; crowded landmarks %.2e (20 it), %.2e (60 it)\n", well, ill,
           ill_more);
    CHECK(well < 1e-6f, "residual for A ~ I: %.3g", well);
    CHECK(ill > 1e-4f && ill > 100 * well, "residual for an ill-conditioned A: %.3g", ill);
    /* A diverging matrix early in the batch (an infinite entry: the iteration turns it into
     * NaN) must stay visible in the residual, whatever follows it. */
    kernel_matrices(A->data, 2, M, D, 2.0f, &r);
    A->data[0] = INFINITY;
    sf_nr_pinv(&g, A, 20, SF_NR_MASTER);
    CHECK(isnan(sf_nr_last_residual()), "a diverging matrix first in the batch gives a NaN residual (got %.3g)",
          sf_nr_last_residual());
    CHECK(ill_more < 1e-4f && ill_more < ill / 10, "more iterations must shrink it: %.3g", ill_more);
    sf_ctx_free(&g);
    gc_leaf_free(A);
}

static void test_soft_symnorm(void) {
    sf_rng r;
    sf_rng_seed(&r, 41);
    const int count = 2, M = 5, D = 8;
    sf_tensor *A = gc_leaf(3, (int[]){count, M, M}, 1);
    kernel_matrices(A->data, count, M, D, 0.45f, &r);
    soft_args master = {1.0f, 20, SF_NR_MASTER};
    check_against_explicit("soft_symnorm", A, count, M, 2, &master);
    sf_tensor *in[1] = {A};
    gradcheck("soft_symnorm (A leaf, 20 it)", build_symnorm, &master, in, 1, (gc_opts){.tol = 1e-2f});
    sf_tensor *l = gc_leaf(4, (int[]){1, 2, M, D}, 1);
    gc_fill_normal(l, &r, 0.45f);
    sf_tensor *inl[1] = {l};
    gradcheck("landmarks -> K2 -> soft_symnorm", build_l_symnorm, &master, inl, 1, (gc_opts){.tol = 1e-2f});
    gc_leaf_free(l);
    gc_leaf_free(A);
}

/* NaN input (weights that diverged) flows through as NaN, for every init and for SOFT++'s
 * normalization, so the trainer's NaN stop sees it; an all-zero kernel matrix (every entry
 * underflowed) too. None of them may end the process. */
static void test_nan_input(void) {
    const int M = 6;
    sf_tensor *A = gc_leaf(3, (int[]){2, M, M}, 0);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    for (int c = 0; c < 4; c++) {
        sf_rng r;
        sf_rng_seed(&r, 61);
        kernel_matrices(A->data, 2, M, 4, 1.0f, &r);
        if (c < 2) A->data[M * M + 7] = NAN;  // second matrix
        else if (c == 2) memset(A->data + M * M, 0, sizeof(float) * M * M);
        else
            for (int i = M * M; i < 2 * M * M; i++) A->data[i] = NAN;
        for (int init = 0; init < 2; init++) {
            sf_nr_init ni = init ? SF_NR_PAPER : SF_NR_MASTER;
            sf_tensor *Y = c % 2 ? sf_soft_symnorm(&g, A, 10, ni) : sf_nr_pinv(&g, A, 10, ni);
            int first_finite = 1, second_nan = 1;
            for (int i = 0; i < M * M; i++) first_finite &= isfinite(Y->data[i]) != 0;
            for (int i = M * M; i < 2 * M * M; i++) second_nan &= isnan(Y->data[i]) != 0;
            const char *what = c == 0   ? "nr_pinv, NaN entry"
                               : c == 1 ? "soft_symnorm, NaN entry"
                               : c == 2 ? "nr_pinv, zero matrix"
                                        : "soft_symnorm, NaN matrix";
            CHECK(second_nan && first_finite, "%s (%s): NaN exactly where the input is bad", what,
                  init ? "paper" : "master");
            CHECK(isnan(sf_nr_last_residual()), "%s: NaN residual", what);
            sf_ctx_reset(&g);
        }
    }
    sf_ctx_free(&g);
    gc_leaf_free(A);
}

/* With grad mode off nothing is recorded. */
static void test_no_tape_without_grad(void) {
    sf_rng r;
    sf_rng_seed(&r, 51);
    sf_tensor *l = gc_leaf(3, (int[]){1, 4, 3}, 1);
    gc_fill_normal(l, &r, 0.5f);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    g.grad_enabled = 0;
    sf_tensor *K2 = sf_gauss_kernel(&g, l, l, 1.0f);
    sf_nr_pinv(&g, K2, 5, SF_NR_MASTER);
    sf_soft_symnorm(&g, K2, 5, SF_NR_MASTER);
    CHECK(g.tape_len == 0, "tape has %d nodes with grad mode off", g.tape_len);
    sf_ctx_free(&g);
    gc_leaf_free(l);
}

int main(void) {
    sf_threads_init(0);
    test_gauss_kernel();
    test_nr_pinv();
    test_nr_residual();
    test_nr_batch_equals_single();
    test_gauss_batch_equals_single();
    test_soft_symnorm();
    test_no_tape_without_grad();
    test_nan_input();
    return test_summary("test_ops_soft");
}
