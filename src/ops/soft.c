/* soft.c — the SOFT attention pieces: the Gaussian kernel, the Newton–Raphson (Newton–Schulz)
 * pseudo-inverse and the SOFT++ symmetric normalization, each with a hand-written backward.
 * Derivations: docs/math/soft_conv_norm.md.
 *
 * Deliberately not here: the attention core that chains these (K1 Z K1ᵀ V + Vconv V) lives in
 * the model code as a composition of ops; the NeurIPS-code "whole batch" alpha with the 1.01
 * halving test is not offered (the reference recommends the master-code variant, section 3.8);
 * no backward through the iterations (the explicit −YᵀGYᵀ replaces it).
 *
 * Dimension legend: B batch, H heads, n tokens, D head dim, M landmarks. "bh" indexes the
 * flattened leading dims (B·H matrices).
 */
#include "ops_internal.h"

#include <math.h>
#include <string.h>

/* Leading dims of x (all but the last two), flattened. */
static int lead_count(const sf_tensor *x) {
    int n = 1;
    for (int i = 0; i < x->ndim - 2; i++) n *= x->shape[i];
    return n;
}

static int same_lead(const sf_tensor *a, const sf_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim - 2; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* ---- Gaussian kernel ( docs/math/soft_conv_norm.md#gaussian-kernel) ---- */

sf_tensor *sf_gauss_kernel(sf_ctx *g, sf_tensor *q, sf_tensor *l, float c) {
    char bq[64], bl[64];
    SF_ASSERT(q->ndim >= 2 && same_lead(q, l) && q->shape[q->ndim - 1] == l->shape[l->ndim - 1],
              "gauss_kernel: q %s and l %s must be (..., n, D) and (..., M, D)",
              sf_shape_str(q, bq, sizeof bq), sf_shape_str(l, bl, sizeof bl));
    SF_ASSERT(c > 0, "gauss_kernel: c = %g must be positive", c);
    const int nd = q->ndim, n = q->shape[nd - 2], D = q->shape[nd - 1], M = l->shape[nd - 2];
    const int nb = lead_count(q);
    int shape[SF_MAX_DIMS];
    memcpy(shape, q->shape, sizeof shape);
    shape[nd - 1] = M;
    sf_tensor *out = sf_tensor_new(g, nd, shape);  // (B, H, n, M)
    float *qn = sf_arena_alloc(g->arena, (size_t)nb * n * sizeof(float));  // (B, H, n) ‖q_i‖²
    float *ln = sf_arena_alloc(g->arena, (size_t)nb * M * sizeof(float));  // (B, H, M) ‖l_j‖²

#pragma omp parallel for if ((size_t)nb * (n + M) * D > 32768)
    for (int r = 0; r < nb * (n + M); r++) {
        const float *v = r < nb * n ? q->data + (size_t)r * D : l->data + (size_t)(r - nb * n) * D;
        float s = 0;
        for (int d = 0; d < D; d++) s += v[d] * v[d];
        if (r < nb * n) qn[r] = s;
        else ln[r - nb * n] = s;
    }
    /* One GEMM per (b, h) gives every q_i·l_j; the distance is then ‖q‖² + ‖l‖² − 2q·l, the
     * official form (not clamped at 0, so a diagonal of K2 may exceed 1 by rounding). */
    for (int bh = 0; bh < nb; bh++)
        sf_gemm(0, 1, n, M, D, 1.0f, q->data + (size_t)bh * n * D, l->data + (size_t)bh * M * D,
                0.0f, out->data + (size_t)bh * n * M);
    const float inv2c = 1.0f / (2.0f * c);
#pragma omp parallel for if ((size_t)nb * n * M > 32768)
    for (int r = 0; r < nb * n; r++) {
        float *s = out->data + (size_t)r * M;
        const float *lnb = ln + (size_t)(r / n) * M;
        const float qr = qn[r];
#pragma omp simd
        for (int j = 0; j < M; j++) s[j] = sf_fast_expf(-(qr + lnb[j] - 2.0f * s[j]) * inv2c);
    }
    sf_arena_release(g->arena, ln, (size_t)nb * M * sizeof(float));
    sf_arena_release(g->arena, qn, (size_t)nb * n * sizeof(float));

    sf_tensor *ins[2] = {q, l};
    if (sf_needs_grad(g, ins, 2)) {
        sf_node *node = sf_tape_push(g, SF_OP_GAUSS_KERNEL, out, ins, 2);
        node->farg[0] = c;  // backward reads S from out->data, q and l from the inputs
    }
    return out;
}

/* In the forward pass this was: S_ij = exp(−(‖q_i‖² + ‖l_j‖² − 2 q_i·l_j) / (2c)).
 * With W = G ⊙ S: dQ = (W·L − diag(rowsum W)·Q)/c, dL = (Wᵀ·Q − diag(colsum W)·L)/c.
 * For K2 (l == q) both land in the same gradient buffer, which is the sum the reference gives. */
void sf_gauss_kernel_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *q = node->in[0], *l = node->in[1], *out = node->out;
    const int nd = q->ndim, n = q->shape[nd - 2], D = q->shape[nd - 1], M = l->shape[nd - 2];
    const int nb = lead_count(q);
    const float inv_c = 1.0f / node->farg[0];
    const int broken = sf_break_backward("gauss_kernel");
    float *dq = q->requires_grad ? sf_grad(g, q) : NULL;  // (B, H, n, D)
    float *dl = l->requires_grad ? sf_grad(g, l) : NULL;  // (B, H, M, D)
    /* Per-thread scratch: W (n, M) = G ⊙ S, rs (n) its row sums, cs (M) its column sums; and
     * ones (max(n, M)) for the sums as GEMMs, shared. Each (b, h) writes only its own slices
     * of dq and dl, so they are shared out over the threads (their products run
     * single-threaded inside the region). */
    const size_t per_thread = (size_t)n * M + n + M, nmax = n > M ? n : M;
    const size_t scratch_bytes = ((size_t)sf_thread_slots() * per_thread + nmax) * sizeof(float);
    float *scratch = sf_arena_alloc(g->arena, scratch_bytes);
    float *ones = scratch + (size_t)sf_thread_slots() * per_thread;
    for (size_t i = 0; i < nmax; i++) ones[i] = 1.0f;

#pragma omp parallel for if (nb > 1 && (size_t)nb * n * M * D > (1u << 20))
    for (int bh = 0; bh < nb; bh++) {
        float *W = scratch + (size_t)sf_thread_slot() * per_thread, *rs = W + (size_t)n * M, *cs = rs + n;
        const float *S = out->data + (size_t)bh * n * M, *G = out->grad + (size_t)bh * n * M;
        const float *Q = q->data + (size_t)bh * n * D, *L = l->data + (size_t)bh * M * D;
        for (size_t i = 0; i < (size_t)n * M; i++) W[i] = G[i] * S[i];
        if (dq) {
            float *dQ = dq + (size_t)bh * n * D;
            sf_gemm(0, 0, n, 1, M, 1.0f, W, ones, 0.0f, rs);  // rowsum W: (n)
            sf_gemm(0, 0, n, D, M, inv_c, W, L, 1.0f, dQ);
            /* teeth: dropping the diagonal term is the classic slip in this derivation */
            if (!broken)
                for (int i = 0; i < n; i++)
                    for (int d = 0; d < D; d++) dQ[(size_t)i * D + d] -= rs[i] * inv_c * Q[(size_t)i * D + d];
        }
        if (dl) {
            float *dL = dl + (size_t)bh * M * D;
            sf_gemm(1, 0, M, 1, n, 1.0f, W, ones, 0.0f, cs);  // colsum W: (M)
            sf_gemm(1, 0, M, D, n, inv_c, W, Q, 1.0f, dL);
            for (int j = 0; j < M; j++)
                for (int d = 0; d < D; d++) dL[(size_t)j * D + d] -= cs[j] * inv_c * L[(size_t)j * D + d];
        }
    }
    sf_arena_release(g->arena, scratch, scratch_bytes);
}

/* ---- Newton–Raphson pseudo-inverse (docs/math/soft_conv_norm.md#newton-schulz) ---- */

/* Worst relative residual of the last forward NR call. A plain static: per process, and not
 * thread-safe (two contexts running NR at once in different threads overwrite each other). */
static float nr_residual_last = 0.0f;

float sf_nr_last_residual(void) { return nr_residual_last; }

/* Scratch for one (M, M) matrix at a time. */
typedef struct nr_scratch {
    float *P;  // (M, M) the matrix iterated with: A + 0.01 I (master) or A (paper)
    float *V;  // (M, M) the other iterate buffer
    float *T;  // (M, M) products
} nr_scratch;

/* Bytes of scratch for `slots` threads, 3 (M, M) buffers each; nr_scratch_of picks one slot. */
static size_t nr_scratch_bytes(int M, int slots) { return (size_t)slots * 3 * M * M * sizeof(float); }

static nr_scratch nr_scratch_of(float *base, int M, int slot) {
    float *p = base + (size_t)slot * 3 * M * M;
    return (nr_scratch){p, p + (size_t)M * M, p + (size_t)2 * M * M};
}

/* ‖X‖₁ = max column abs sum. */
static float norm1(const float *X, int M) {
    float best = 0;
    for (int j = 0; j < M; j++) {
        float s = 0;
        for (int i = 0; i < M; i++) s += fabsf(X[(size_t)i * M + j]);
        if (s > best) best = s;
    }
    return best;
}

/* A matrix with no usable scale (NaN/Inf entries, or all zero after an underflow of the
 * kernel): Y is NaN, so the NaN reaches the loss and the trainer's NaN stop names the step,
 * instead of an assertion ending the process. Returns the NaN residual. */
static float nr_nan(float *Y, size_t MM) {
    for (size_t i = 0; i < MM; i++) Y[i] = NAN;
    return NAN;
}

/* Y = NR_iters(A) for one (M, M) matrix; returns ‖P Y P − P‖_F / ‖P‖_F. */
static float nr_one(float *Y, const float *A, int M, int iters, sf_nr_init init, nr_scratch s) {
    const size_t MM = (size_t)M * M;
    float alpha;
    memcpy(s.P, A, MM * sizeof(float));
    if (init == SF_NR_MASTER) {
        /* SOFT/kernel/inverse.py: alpha from the row sums of A (not P), 0.9 for strictness. */
        float rmax = -INFINITY;
        for (int i = 0; i < M; i++) {
            float r = 0;
            for (int j = 0; j < M; j++) r += A[(size_t)i * M + j];
            if (r > rmax) rmax = r;
        }
        if (!(rmax > 0) || !isfinite(rmax)) return nr_nan(Y, MM);
        alpha = 0.9f * 2.0f / (rmax * rmax);
        for (int i = 0; i < M; i++) s.P[(size_t)i * M + i] += 0.01f;
    } else {
        /* Paper text: smallest n >= 0 with ‖I − alpha A²‖₁ <= 1, alpha = 2·0.5ⁿ/‖A‖₁². For small
         * alpha the test reduces to column diagonal dominance of A², independent of alpha, so
         * for a kernel matrix that is not diagonally dominant it never passes: halvings stop at
         * 10, the published code's cap. That is why this variant needs more
         * iterations than the master one. */
        float n1 = norm1(A, M);
        if (!(n1 > 0) || !isfinite(n1)) return nr_nan(Y, MM);
        alpha = 2.0f / (n1 * n1);
        sf_gemm(0, 0, M, M, M, 1.0f, A, A, 0.0f, s.T);  // A²
        for (int halvings = 0; halvings < 10; halvings++) {
            float worst = 0;
            for (int j = 0; j < M; j++) {
                float col = 0;
                for (int i = 0; i < M; i++)
                    col += fabsf((i == j ? 1.0f : 0.0f) - alpha * s.T[(size_t)i * M + j]);
                if (col > worst) worst = col;
            }
            if (worst <= 1.0f) break;
            alpha *= 0.5f;
        }
    }
    /* V₀ = alpha P; V_{k+1} = 2V_k − V_k (P V_k): two GEMMs per iteration, ping-ponging
     * between Y and s.V so the last iterate ends in Y without a copy when iters is even. */
    float *cur = Y, *nxt = s.V;
    for (size_t i = 0; i < MM; i++) cur[i] = alpha * s.P[i];
    for (int k = 0; k < iters; k++) {
        sf_gemm(0, 0, M, M, M, 1.0f, s.P, cur, 0.0f, s.T);
        for (size_t i = 0; i < MM; i++) nxt[i] = 2.0f * cur[i];
        sf_gemm(0, 0, M, M, M, -1.0f, cur, s.T, 1.0f, nxt);
        float *t = cur; cur = nxt; nxt = t;
    }
    if (cur != Y) memcpy(Y, cur, MM * sizeof(float));
    /* residual: s.V is free now (it holds an old iterate or nothing) */
    sf_gemm(0, 0, M, M, M, 1.0f, s.P, Y, 0.0f, s.T);
    sf_gemm(0, 0, M, M, M, 1.0f, s.T, s.P, 0.0f, s.V);
    double num = 0, den = 0;
    for (size_t i = 0; i < MM; i++) {
        double d = (double)s.V[i] - s.P[i];
        num += d * d;
        den += (double)s.P[i] * s.P[i];
    }
    return den > 0 ? (float)sqrt(num / den) : NAN; /* NaN entries make den NaN: report them */
}

/* Whether residual r replaces the worst so far: a NaN wins and stays, so the log shows it. */
static int nr_worse(float r, float worst) { return !isnan(worst) && (isnan(r) || r > worst); }

/* Y = NR(A) for every matrix of a (count, M, M) buffer; records the worst residual. */
static void nr_all(sf_ctx *g, float *Y, const float *A, int count, int M, int iters,
                   sf_nr_init init) {
    SF_ASSERT(iters >= 0, "nr_pinv: iters %d", iters);
    SF_ASSERT(init == SF_NR_MASTER || init == SF_NR_PAPER, "nr_pinv: init %d", (int)init);
    /* One matrix per thread at a time: each iteration's products (M = 49: 118 k multiply-adds)
     * are far too small to split, so the matrices are shared out instead. */
    float *scratch = sf_arena_alloc(g->arena, nr_scratch_bytes(M, sf_thread_slots()));
    float worst = 0;
#pragma omp parallel if (count > 1 && (size_t)count * M * M * M * iters > (1u << 20))
    {
        nr_scratch s = nr_scratch_of(scratch, M, sf_thread_slot());
        float mine = 0;
#pragma omp for
        for (int b = 0; b < count; b++) {
            float r = nr_one(Y + (size_t)b * M * M, A + (size_t)b * M * M, M, iters, init, s);
            if (nr_worse(r, mine)) mine = r;
        }
#pragma omp critical(nr_worst)
        if (nr_worse(mine, worst)) worst = mine;
    }
    nr_residual_last = worst;
    sf_arena_release(g->arena, scratch, nr_scratch_bytes(M, sf_thread_slots()));
}

sf_tensor *sf_nr_pinv(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init) {
    char ba[64];
    const int nd = a->ndim;
    SF_ASSERT(nd >= 2 && a->shape[nd - 1] == a->shape[nd - 2],
              "nr_pinv: a %s must be (..., M, M)", sf_shape_str(a, ba, sizeof ba));
    const int M = a->shape[nd - 1], count = lead_count(a);
    sf_tensor *out = sf_tensor_like(g, a);  // (B, H, M, M)
    nr_all(g, out->data, a->data, count, M, iters, init);
    if (sf_needs_grad(g, &a, 1)) sf_tape_push(g, SF_OP_NR_PINV, out, &a, 1);  // Y is out->data
    return out;
}

/* dL/dA = −Yᵀ·G·Yᵀ for one matrix, accumulated into dA; T is (M, M) scratch. */
static void inv_backward(float *dA, const float *Y, const float *G, float *T, int M, int broken) {
    sf_gemm(0, 1, M, M, M, 1.0f, G, Y, 0.0f, T);                    // G Yᵀ
    sf_gemm(1, 0, M, M, M, broken ? 1.0f : -1.0f, Y, T, 1.0f, dA);  // −Yᵀ (G Yᵀ)
}

/* In the forward pass this was: Y = NR_T(P) ≈ P⁻¹ with P = A + 0.01 I (or A).
 * Treating Y as the exact inverse: dY = −Y dP Y, so dL/dA = dL/dP = −Yᵀ G Yᵀ. No
 * backward through the iterations: the formula is only as good as Y (see the residual). */
void sf_nr_pinv_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *a = node->in[0], *out = node->out;
    if (!a->requires_grad) return;
    const int M = a->shape[a->ndim - 1], count = lead_count(a);
    const size_t MM = (size_t)M * M;
    const int broken = sf_break_backward("nr_pinv");  // teeth: the sign is dropped
    float *da = sf_grad(g, a);  // (B, H, M, M)
    float *T = sf_arena_alloc(g->arena, (size_t)sf_thread_slots() * MM * sizeof(float));  // (M, M) per thread
#pragma omp parallel for if (count > 1 && (size_t)count * MM * M > (1u << 17))
    for (int b = 0; b < count; b++)
        inv_backward(da + b * MM, out->data + b * MM, out->grad + b * MM, T + (size_t)sf_thread_slot() * MM, M,
                     broken);
    sf_arena_release(g->arena, T, (size_t)sf_thread_slots() * MM * sizeof(float));
}

/* ---- SOFT++ symmetric normalization ( docs/math/soft_conv_norm.md#soft-symnorm) ---- */

typedef struct symnorm_saved {
    float *Y;  // (B, H, M, M) NR(A)
    float *u;  // (B, H, M) (A·1)^−½
} symnorm_saved;

sf_tensor *sf_soft_symnorm(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init) {
    char ba[64];
    const int nd = a->ndim;
    SF_ASSERT(nd >= 2 && a->shape[nd - 1] == a->shape[nd - 2],
              "soft_symnorm: a %s must be (..., M, M)", sf_shape_str(a, ba, sizeof ba));
    const int M = a->shape[nd - 1], count = lead_count(a);
    const size_t MM = (size_t)M * M;
    sf_tensor *out = sf_tensor_like(g, a);  // (B, H, M, M)
    float *Y = sf_arena_alloc(g->arena, count * MM * sizeof(float));        // (B, H, M, M)
    float *u = sf_arena_alloc(g->arena, (size_t)count * M * sizeof(float));  // (B, H, M)
    nr_all(g, Y, a->data, count, M, iters, init);
    /* d = A·1 from A itself (without the +0.01 I of the master NR), as the SOFT++ paper. */
    for (int r = 0; r < count * M; r++) {
        const float *row = a->data + (size_t)r * M;
        float d = 0;
        for (int j = 0; j < M; j++) d += row[j];
        /* a degree that is not positive (NaN input, or an all-zero row) gives NaN rows, which
         * the trainer's NaN stop reports, rather than an assertion */
        u[r] = d > 0 ? 1.0f / sqrtf(d) : NAN;
    }
#pragma omp parallel for if (count * MM > 32768)
    for (int r = 0; r < count * M; r++) {
        const float *ub = u + (size_t)(r / M) * M;
        for (int j = 0; j < M; j++)
            out->data[(size_t)r * M + j] = u[r] * Y[(size_t)r * M + j] * ub[j];
    }
    if (sf_needs_grad(g, &a, 1)) {
        sf_node *node = sf_tape_push(g, SF_OP_SOFT_SYMNORM, out, &a, 1);
        symnorm_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->Y = Y;
        sv->u = u;
        node->saved = sv;
    }
    return out;
}

/* In the forward pass this was: Z_ij = u_i Y_ij u_j, Y = NR(A), u = (A·1)^−½.
 * With H = dL/dZ: dY = H ⊙ uuᵀ; du_i = Σ_j H_ij Y_ij u_j + Σ_j H_ji Y_ji u_j;
 * dd = −½ d^−³ᐟ² du = −½ u³ du; dA = −Yᵀ dY Yᵀ + dd·1ᵀ. */
void sf_soft_symnorm_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *a = node->in[0], *out = node->out;
    if (!a->requires_grad) return;
    const symnorm_saved *sv = node->saved;
    const int M = a->shape[a->ndim - 1], count = lead_count(a);
    const size_t MM = (size_t)M * M;
    const int broken = sf_break_backward("soft_symnorm");  // teeth: the degree term is dropped
    float *da = sf_grad(g, a);  // (B, H, M, M)
    float *dY = sf_arena_alloc(g->arena, (2 * MM + M) * sizeof(float));  // (M, M)
    float *T = dY + MM;                                                    // (M, M)
    float *du = T + MM;                                                    // (M)
    for (int b = 0; b < count; b++) {
        const float *Hb = out->grad + b * MM, *Y = sv->Y + b * MM, *u = sv->u + (size_t)b * M;
        float *dA = da + b * MM;
        for (int i = 0; i < M; i++) du[i] = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) {
                float hy = Hb[(size_t)i * M + j] * Y[(size_t)i * M + j];
                dY[(size_t)i * M + j] = Hb[(size_t)i * M + j] * u[i] * u[j];
                du[i] += hy * u[j];
                du[j] += hy * u[i];
            }
        inv_backward(dA, Y, dY, T, M, 0);
        if (broken) continue;
        for (int i = 0; i < M; i++) {
            float dd = -0.5f * u[i] * u[i] * u[i] * du[i];
            for (int j = 0; j < M; j++) dA[(size_t)i * M + j] += dd;
        }
    }
    sf_arena_release(g->arena, dY, (2 * MM + M) * sizeof(float));
}
