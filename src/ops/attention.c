/* attention.c — the attention cores with hand-derived backward passes:
 *   - l1 / l2 normalization of each channel across tokens (SimA's Q̂, K̂; XCA's q̂, k̂), also
 *     fused with the head split of the qkv projection (heads_split_norm, what SimA blocks use),
 *   - the SimA product O = Q K^T V, in either multiplication order,
 *   - softmax attention (MSA, class attention, SOFT stage 4),
 *   - XCA, cross-covariance attention, fused (l2 norms, D x D softmax, V P^T).
 * Every matrix product goes through sf_gemm, one (b, h) slice at a time; OpenMP spreads the
 * slices over threads (see attn_par_begin) and threads the non-GEMM loops.
 *
 * Deliberately not here: the q/k/v projections, the plain head split and merge, the output
 * projection (matmul.c, shape.c); attention dropout and masks (no model here uses them); a
 * scale or softmax inside sf_sima (SimA has neither; its normalization is a separate op).
 *
 * Derivations: docs/math/attention.md; comments cite its sections as attention.md#<anchor>.
 *
 * Dimension legend: B batch, H heads, N tokens (keys and values), Nq query tokens (N, or 1
 * for class attention), D head dim. Leading dims are flattened: L = B*H slices, each a
 * contiguous (N, D) matrix.
 */
#include "ops_internal.h"

#include <cblas.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many floats of work an OpenMP region costs more than it saves. */
#define ATTN_OMP_MIN 32768

/* Slice parallelism. The per-(b, h) products are small (197 x 64 x 64 for DeiT-S) and
 * OpenBLAS's own threads gain nothing there. Measured on 2 cores, l1n + SimA kv-first
 * forward over (16, 6, 197, 64): 11.1 ms with OpenBLAS threading each product, 11.7 ms on
 * one thread, 5.7 ms with whole slices per OpenMP thread. So when there are at least as
 * many slices as threads, each OpenMP thread takes whole slices and OpenBLAS runs
 * single-threaded for the duration; with fewer slices (one big head) the loop stays serial
 * and OpenBLAS threads each product. */
typedef struct attn_par {
    int on;        /* slices spread over OpenMP threads */
    int nthr;      /* scratch slots needed (threads that may run a slice) */
    int blas_prev; /* OpenBLAS thread count to restore */
} attn_par;

static attn_par attn_par_begin(int L) {
    attn_par p = {0, 1, 0};
#ifdef _OPENMP
    int t = omp_get_max_threads();
    if (t > 1 && L >= t && !omp_in_parallel()) {
        p.on = 1;
        p.nthr = t;
        p.blas_prev = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
#else
    (void)L;
#endif
    return p;
}

static void attn_par_end(attn_par p) {
    if (p.on) openblas_set_num_threads(p.blas_prev);
}

static float *attn_alloc(sf_ctx *g, size_t floats) {
    return sf_arena_alloc(g->arena, floats * sizeof(float));
}

/* Scratch goes back to the arena when the op is done with it: left in use it would count
 * toward the step's peak until the step ends. */
static void attn_free(sf_ctx *g, void *p, size_t floats) {
    sf_arena_release(g->arena, p, floats * sizeof(float));
}

/* Accumulate an op's gradient straight into the input's buffer (beta = 1 in sf_gemm), or
 * NULL when the input does not require grad. */
static float *attn_grad_or_null(sf_ctx *g, sf_tensor *t) {
    return t->requires_grad ? sf_grad(g, t) : NULL;
}

/* ======================= column normalization across tokens ======================= */

/* One (N, D) slice: s_j = sum_n |x_nj| (p = 1) or sqrt(sum_n x_nj^2) (p = 2);
 * y = x / max(s_j, eps). s keeps the unclamped norm so backward can tell the branches
 * apart (attention.md#l1). x's rows are ldx floats apart (D for a contiguous slice; a head
 * inside a fused qkv row for heads_split_norm); y is contiguous. */
static void colnorm_forward(float *y, float *s, const float *x, size_t ldx, int N, int D, int p, float eps) {
    for (int j = 0; j < D; j++) s[j] = 0.0f;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * ldx;
        if (p == 1) {
#pragma omp simd
            for (int j = 0; j < D; j++) s[j] += fabsf(xr[j]);
        } else {
#pragma omp simd
            for (int j = 0; j < D; j++) s[j] += xr[j] * xr[j];
        }
    }
    if (p == 2)
        for (int j = 0; j < D; j++) s[j] = sqrtf(s[j]);
    /* A true division, not a product with the reciprocal: with one token y = x / |x| must be
     * exactly ±1, or the (zero) gradient of that case picks up rounding noise. */
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * ldx;
        float *yr = y + (size_t)n * D;
#pragma omp simd
        for (int j = 0; j < D; j++) yr[j] = xr[j] / (s[j] > eps ? s[j] : eps); // max(s, eps)
    }
}

/* The saved output y of one slice: fp32 values, or (y32 NULL) the bf16 copy that remains
 * once a consumer that reads only bf16 took y over (sf_tensor_keep_bf16: SimA in bf16
 * precision). The backward then reads y as rounded, as autocast's saved bf16 output is. */
typedef struct colnorm_y {
    const float *y32;
    const uint16_t *y16;
} colnorm_y;

/* Row n of y (D values) as fp32: in place, or widened into row (D floats). */
static inline const float *colnorm_y_row(colnorm_y y, int n, int D, float *row) {
    if (y.y32) return y.y32 + (size_t)n * D;
    const uint16_t *r16 = y.y16 + (size_t)n * D;
#pragma omp simd
    for (int j = 0; j < D; j++) row[j] = sf_from_bf16(r16[j]);
    return row;
}

/* Slice l (N D values) of a tensor's saved values. */
static colnorm_y colnorm_y_slice(const sf_tensor *y, size_t l, int N, int D) {
    const size_t off = l * (size_t)N * D;
    return y->data ? (colnorm_y){.y32 = y->data + off} : (colnorm_y){.y16 = y->data16 + off};
}

/* in the forward pass this was: y_nj = x_nj / max(s_j, eps), so now we have
 * (attention.md#l1, #l2), with c_j = sum_m g_mj y_mj:
 *   s_j > eps:  dx_nj += (g_nj - sign(y_nj) c_j) / s_j   (p = 1; sign(0) = 0)
 *               dx_nj += (g_nj - y_nj c_j) / s_j         (p = 2)
 *   s_j <= eps: dx_nj += g_nj / eps                      (the clamp is a constant)
 * sign(y) = sign(x) because the divisor is positive. Both branches are one update,
 * dx_nj += a_j (g_nj - dir_nj b_j) with a_j = 1 / max(s_j, eps) and b_j = c_j or 0, so
 * the inner loop has no branch (colnorm_grad_row). `drop_norm_term` zeroes
 * b on purpose (SFVIT_BREAK_BACKWARD) so the gradient check can be seen to fail. This part
 * computes a and b (D floats each) of one slice. */
static void colnorm_coeffs(float *a, float *b, const float *dy, colnorm_y y, float *row, const float *s, int N, int D,
                           float eps, int drop_norm_term) {
    for (int j = 0; j < D; j++) b[j] = 0.0f;
    for (int n = 0; n < N; n++) {
        const float *gr = dy + (size_t)n * D, *yr = colnorm_y_row(y, n, D, row);
#pragma omp simd
        for (int j = 0; j < D; j++) b[j] += gr[j] * yr[j]; // c_j
    }
    for (int j = 0; j < D; j++) {
        a[j] = 1.0f / fmaxf(s[j], eps);
        if (s[j] <= eps || drop_norm_term) b[j] = 0.0f;
    }
}

/* One row: dx_j (+)= a_j (g_j - dir_j b_j), dir = sign(y) for l1 (sign(0) = 0), y for l2. */
static inline void colnorm_grad_row(float *dr, const float *gr, const float *yr, const float *a, const float *b,
                                    int D, int p, int acc) {
    if (p == 1) {
#pragma omp simd
        for (int j = 0; j < D; j++) {
            float dir = (float)(yr[j] > 0.0f) - (float)(yr[j] < 0.0f);
            float v = a[j] * (gr[j] - dir * b[j]);
            dr[j] = acc ? dr[j] + v : v;
        }
    } else {
#pragma omp simd
        for (int j = 0; j < D; j++) {
            float v = a[j] * (gr[j] - yr[j] * b[j]);
            dr[j] = acc ? dr[j] + v : v;
        }
    }
}

/* The whole backward of one slice into dx, whose rows are ldx floats apart; scratch holds
 * COLNORM_SCRATCH(D) floats. */
static void colnorm_backward(float *dx, size_t ldx, float *scratch, const float *dy, colnorm_y y, const float *s,
                             int N, int D, int p, float eps, int drop_norm_term, int acc) {
    float *a = scratch, *b = scratch + D, *row = scratch + 2 * D; // (D) each
    colnorm_coeffs(a, b, dy, y, row, s, N, D, eps, drop_norm_term);
    for (int n = 0; n < N; n++)
        colnorm_grad_row(dx + (size_t)n * ldx, dy + (size_t)n * D, colnorm_y_row(y, n, D, row), a, b, D, p, acc);
}

typedef struct colnorm_saved {
    float *norm; // (L, D) s_j before the eps clamp
} colnorm_saved;

static sf_tensor *colnorm_op(sf_ctx *g, sf_tensor *x, float eps, int p, sf_op op) {
    SF_ASSERT(x->ndim >= 2, "%s needs (..., N, D), got %d dims", sf_op_table[op].name, x->ndim);
    SF_ASSERT(eps > 0.0f, "%s: eps must be positive", sf_op_table[op].name);
    int N = x->shape[x->ndim - 2], D = x->shape[x->ndim - 1];
    int L = (int)(x->numel / ((size_t)N * D));
    sf_tensor *y = sf_tensor_like(g, x);
    float *s = attn_alloc(g, (size_t)L * D); // (L, D)
#pragma omp parallel for if (x->numel >= ATTN_OMP_MIN && L > 1)
    for (int l = 0; l < L; l++) {
        size_t off = (size_t)l * N * D;
        colnorm_forward(y->data + off, s + (size_t)l * D, x->data + off, (size_t)D, N, D, p, eps);
    }
    if (sf_needs_grad(g, &x, 1)) {
        sf_node *node = sf_tape_push(g, op, y, &x, 1);
        colnorm_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->norm = s;
        node->saved = sv;
        node->farg[0] = eps;
        node->iarg[0] = p;
    }
    return y;
}

static void colnorm_op_backward(sf_ctx *g, sf_node *node, int drop_norm_term) {
    sf_tensor *x = node->in[0], *y = node->out;
    if (!x->requires_grad) return;
    const colnorm_saved *sv = node->saved;
    int N = x->shape[x->ndim - 2], D = x->shape[x->ndim - 1];
    int L = (int)(x->numel / ((size_t)N * D));
    int p = node->iarg[0];
    float eps = node->farg[0];
    int acc; /* a new dx is written (every element), not accumulated */
    float *dx = sf_grad_dst(g, x, &acc);
    const size_t per = COLNORM_SCRATCH(D);
    float *c = attn_alloc(g, (size_t)L * per); // backward scratch per slice
#pragma omp parallel for if (x->numel >= ATTN_OMP_MIN && L > 1)
    for (int l = 0; l < L; l++) {
        size_t off = (size_t)l * N * D;
        colnorm_backward(dx + off, (size_t)D, c + (size_t)l * per, y->grad + off, colnorm_y_slice(y, (size_t)l, N, D),
                         sv->norm + (size_t)l * D, N, D, p, eps, drop_norm_term, acc);
    }
    attn_free(g, c, (size_t)L * per);
}

sf_tensor *sf_l1norm_tokens(sf_ctx *g, sf_tensor *x, float eps) {
    return colnorm_op(g, x, eps, 1, SF_OP_L1NORM_TOKENS);
}

/* attention.md#l1 */
void sf_l1norm_tokens_backward(sf_ctx *g, sf_node *node) {
    colnorm_op_backward(g, node, sf_break_backward("l1norm_tokens"));
}

sf_tensor *sf_l2norm_tokens(sf_ctx *g, sf_tensor *x, float eps) {
    return colnorm_op(g, x, eps, 2, SF_OP_L2NORM_TOKENS);
}

/* attention.md#l2 */
void sf_l2norm_tokens_backward(sf_ctx *g, sf_node *node) {
    colnorm_op_backward(g, node, sf_break_backward("l2norm_tokens"));
}

/* ========== head split and token normalization in one pass (SimA's q̂, k̂) ========== */

/* y = the l1 (p = 1) or l2 (p = 2) normalization over tokens of part `part` of x (B, N,
 * parts·H·D) split into heads (B, H, N, D): the bits of sf_l{1,2}norm_tokens(sf_heads_split(x,
 * parts, part, H), eps), without writing the unnormalized heads and reading them back. Each
 * (b, h) slice is read in place from x's rows (stride parts·H·D) for its norms, then again
 * (from cache: 197 × 64 floats for DeiT-S) for the division. The gradient goes straight into
 * x's rows as well: with the other splits of x through the gather (shape.c), else here. */
sf_tensor *sf_heads_split_norm(sf_ctx *g, sf_tensor *x, int parts, int part, int H, int p, float eps) {
    char sx[64];
    SF_ASSERT(x->ndim == 3 && parts >= 1 && part >= 0 && part < parts && H >= 1 &&
                  x->shape[2] % (parts * H) == 0,
              "heads_split_norm: x %s cannot split into %d parts of %d heads (part %d)",
              sf_shape_str(x, sx, sizeof sx), parts, H, part);
    SF_ASSERT((p == 1 || p == 2) && eps > 0.0f, "heads_split_norm: p = %d (1 or 2), eps = %g (> 0)", p, (double)eps);
    const int B = x->shape[0], N = x->shape[1], D = x->shape[2] / (parts * H);
    const size_t W = (size_t)x->shape[2]; /* parts·H·D, laid out [parts][H][D] */
    sf_tensor *y = sf_tensor_new4(g, B, H, N, D); // (B, H, N, D)
    float *s = attn_alloc(g, (size_t)B * H * D); // (B, H, D)
#pragma omp parallel for collapse(2) if (y->numel >= ATTN_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t l = (size_t)b * H + h;
            colnorm_forward(y->data + l * N * D, s + l * D, x->data + (size_t)b * N * W + ((size_t)part * H + h) * D,
                            W, N, D, p, eps);
        }
    if (sf_needs_grad(g, &x, 1)) {
        sf_node *node = sf_tape_push(g, SF_OP_HEADS_SPLIT_NORM, y, &x, 1);
        colnorm_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->norm = s;
        node->saved = sv;
        node->iarg[0] = parts; /* iarg[0..2] as heads_split's, for the gather */
        node->iarg[1] = part;
        node->iarg[3] = p;
        node->farg[0] = eps;
    }
    return y;
}

/* Teeth: the same switches as the unfused norms break this one's norm term. */
static int split_norm_broken(const sf_node *node) {
    return sf_break_backward(node->iarg[3] == 1 ? "l1norm_tokens" : "l2norm_tokens");
}

void sf_heads_split_norm_slice_backward(const sf_node *node, int b, int h, float *dx, float *scratch, int acc) {
    const sf_tensor *x = node->in[0], *y = node->out;
    const colnorm_saved *sv = node->saved;
    const int H = y->shape[1], N = y->shape[2], D = y->shape[3], part = node->iarg[1];
    const size_t W = (size_t)x->shape[2], l = (size_t)b * H + h;
    colnorm_backward(dx + (size_t)b * N * W + ((size_t)part * H + h) * D, W, scratch, y->grad + l * N * D,
                     colnorm_y_slice(y, l, N, D), sv->norm + l * D, N, D, node->iarg[3], node->farg[0],
                     split_norm_broken(node), acc);
}

/* attention.md#l1, #l2, into x's rows (the split's backward is a placement) */
void sf_heads_split_norm_backward(sf_ctx *g, sf_node *node) {
    if (node->iarg[2]) return; /* already written by a sibling's gather */
    if (sf_heads_split_gather(g, node)) return;
    const sf_tensor *y = node->out;
    const int B = y->shape[0], H = y->shape[1], D = y->shape[3];
    float *dx = sf_grad(g, node->in[0]); /* exists already (else the gather wrote it): accumulate */
    const size_t per = COLNORM_SCRATCH(D);
    float *c = attn_alloc(g, (size_t)sf_thread_slots() * per); // scratch per thread
#pragma omp parallel for collapse(2) if (y->numel >= ATTN_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            sf_heads_split_norm_slice_backward(node, b, h, dx, c + (size_t)sf_thread_slot() * per, 1);
    attn_free(g, c, (size_t)sf_thread_slots() * per);
}

/* ============================ shared shape checks ============================ */

typedef struct attn_dims {
    int L, Nq, N, D;
} attn_dims;

/* q (..., Nq, D), k and v (..., N, D) with equal leading dims. */
static attn_dims attn_check(const sf_tensor *q, const sf_tensor *k, const sf_tensor *v,
                            const char *op) {
    char bq[64], bk[64], bv[64];
    SF_ASSERT(q->ndim >= 2 && q->ndim == k->ndim && sf_same_shape(k, v), "%s: q %s k %s v %s", op,
              sf_shape_str(q, bq, sizeof bq), sf_shape_str(k, bk, sizeof bk),
              sf_shape_str(v, bv, sizeof bv));
    int nd = q->ndim;
    for (int i = 0; i < nd - 2; i++)
        SF_ASSERT(q->shape[i] == k->shape[i], "%s: q %s and k %s differ in dim %d", op,
                  sf_shape_str(q, bq, sizeof bq), sf_shape_str(k, bk, sizeof bk), i);
    SF_ASSERT(q->shape[nd - 1] == k->shape[nd - 1], "%s: q %s and k %s differ in head dim", op,
              sf_shape_str(q, bq, sizeof bq), sf_shape_str(k, bk, sizeof bk));
    attn_dims d;
    d.Nq = q->shape[nd - 2];
    d.N = k->shape[nd - 2];
    d.D = k->shape[nd - 1];
    d.L = (int)(k->numel / ((size_t)d.N * d.D));
    return d;
}

/* In place over rows (R, C): subtract the row max, exponentiate, normalize. */
static void softmax_rows(float *z, int R, int C) {
#pragma omp parallel for if ((size_t)R * C >= ATTN_OMP_MIN)
    for (int r = 0; r < R; r++) {
        float *zr = z + (size_t)r * C;
        float mx = zr[0];
#pragma omp simd reduction(max : mx)
        for (int j = 1; j < C; j++) mx = zr[j] > mx ? zr[j] : mx;
        float sum = 0.0f;
        /* sf_fast_expf (relative error < 2e-7) vectorizes; libm's expf does not. */
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < C; j++) {
            zr[j] = sf_fast_expf(zr[j] - mx);
            sum += zr[j];
        }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int j = 0; j < C; j++) zr[j] *= inv;
    }
}

/* in the forward pass this was: P = row-softmax(Z), so now we have (attention.md#msa)
 * dZ = P ⊙ (dP - rowsum(dP ⊙ P) 1^T); overwrites dP (R, C) with dZ. */
static void softmax_rows_backward(float *dp, const float *p, int R, int C) {
#pragma omp parallel for if ((size_t)R * C >= ATTN_OMP_MIN)
    for (int r = 0; r < R; r++) {
        float *dr = dp + (size_t)r * C;
        const float *pr = p + (size_t)r * C;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < C; j++) dot += dr[j] * pr[j];
#pragma omp simd
        for (int j = 0; j < C; j++) dr[j] = pr[j] * (dr[j] - dot);
    }
}

/* ================================ SimA product ================================ */

sf_sima_order sf_sima_resolve(sf_sima_order order, int N, int D) {
    if (order != SF_SIMA_AUTO) return order;
    /* The official rule (sima.py, paper Alg. 1): the N x N product when N < D. */
    return N < D ? SF_SIMA_QK_FIRST : SF_SIMA_KV_FIRST;
}

/* Naive reference for one slice, O = (Q K^T) V in plain loops (double accumulation):
 * kept next to the GEMM kernel for reading and debugging; tests carry their own copy. */
static void sima_slice_naive(float *o, const float *q, const float *k, const float *v, int Nq,
                             int N, int D) __attribute__((unused));
static void sima_slice_naive(float *o, const float *q, const float *k, const float *v, int Nq,
                             int N, int D) {
    for (int i = 0; i < Nq; i++)
        for (int e = 0; e < D; e++) {
            double acc = 0.0;
            for (int n = 0; n < N; n++) {
                double qk = 0.0;
                for (int j = 0; j < D; j++) qk += (double)q[i * D + j] * k[n * D + j];
                acc += qk * v[n * D + e];
            }
            o[i * D + e] = (float)acc;
        }
}

/* Saved: the intermediate of the forward order, so backward reuses it; with bf16 products,
 * q, k and v in bf16 as well. Each operand of a slice's products is then rounded once (the
 * forward rounds q, k and v for its own products and keeps them), not once per product that
 * reads it: the backward's products would round each again, and its output gradient and dS
 * or dU twice. For DeiT-S that was most of the work of sima besides its products, which on
 * AMX are the smaller part (docs/precision.md). */
typedef struct sima_saved {
    float *mid;                  // (L, Nq, N) S = Q K^T (qk-first) or (L, D, D) U = K^T V (kv-first)
    uint16_t *q16, *k16, *v16;   // (L, Nq, D), (L, N, D), (L, N, D) in bf16, or NULL (fp32)
} sima_saved;

/* The bf16 copy of an operand's slice, or NULL (fp32 precision: the products read fp32). */
static const uint16_t *slice16(const uint16_t *all, int l, size_t per) { return all ? all + (size_t)l * per : NULL; }

/* y (n) = x rounded to bf16 in a per-thread scratch of the backward: an operand that two of
 * its products read. NULL in fp32 precision. */
static const uint16_t *round_once(uint16_t *scratch, const float *x, size_t n) {
    if (!scratch) return NULL;
    sf_bf16_convert(x, scratch, n);
    return scratch;
}

/* handed: the inputs handed over (SF_SIMA_HAND_*). Once the bf16 copies for the backward are
 * made, a handed-over input's fp32 data is released and the copy stays as its values, so q̂,
 * k̂ and v cost 2 bytes a value in the arena, not 6 (DeiT-S SimA b8: 14 MiB a block with v
 * alone handed over, 7 with all three). */
static sf_tensor *sima(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order, unsigned handed) {
    attn_dims d = attn_check(q, k, v, "sima");
    int L = d.L, Nq = d.Nq, N = d.N, D = d.D;
    order = sf_sima_resolve(order, N, D);
    sf_tensor *in[3] = {q, k, v};
    int rec = sf_needs_grad(g, in, 3);
    size_t per = order == SF_SIMA_QK_FIRST ? (size_t)Nq * N : (size_t)D * D;
    const size_t nq = (size_t)Nq * D, nk = (size_t)N * D;
    attn_par par = attn_par_begin(L);
    // (L, Nq, N) or (L, D, D) when recording, else one slice per thread
    float *mid = attn_alloc(g, (size_t)(rec ? L : par.nthr) * per);
    /* bf16 copies for the backward, when there is one */
    const int keep16 = rec && sf_precision_get() != SF_PREC_FP32;
    uint16_t *q16 = keep16 ? sf_arena_alloc(g->arena, (size_t)L * nq * sizeof *q16) : NULL;
    uint16_t *k16 = keep16 ? sf_arena_alloc(g->arena, (size_t)L * nk * sizeof *k16) : NULL;
    uint16_t *v16 = keep16 ? sf_arena_alloc(g->arena, (size_t)L * nk * sizeof *v16) : NULL;
    sf_tensor *o = sf_tensor_like(g, q); // (L, Nq, D)
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        const float *ql = q->data + (size_t)l * nq; // (Nq, D)
        const float *kl = k->data + (size_t)l * nk;  // (N, D)
        const float *vl = v->data + (size_t)l * nk;  // (N, D)
        float *ol = o->data + (size_t)l * nq;       // (Nq, D)
        float *m = mid + (size_t)(rec ? l : sf_thread_slot()) * per;
        if (keep16) {
            sf_bf16_convert(ql, q16 + (size_t)l * nq, nq);
            sf_bf16_convert(kl, k16 + (size_t)l * nk, nk);
            sf_bf16_convert(vl, v16 + (size_t)l * nk, nk);
        }
        const uint16_t *q16l = slice16(q16, l, nq), *k16l = slice16(k16, l, nk), *v16l = slice16(v16, l, nk);
        if (order == SF_SIMA_QK_FIRST) {
            sf_gemm_prec_w(0, 1, Nq, N, D, 1.0f, ql, q16l, kl, k16l, 0.0f, m); // S = Q K^T   (Nq, N)
            sf_gemm_prec_w(0, 0, Nq, D, N, 1.0f, m, NULL, vl, v16l, 0.0f, ol); // O = S V     (Nq, D)
        } else {
            sf_gemm_prec_w(1, 0, D, D, N, 1.0f, kl, k16l, vl, v16l, 0.0f, m);  // U = K^T V   (D, D)
            sf_gemm_prec_w(0, 0, Nq, D, D, 1.0f, ql, q16l, m, NULL, 0.0f, ol); // O = Q U     (Nq, D)
        }
    }
    attn_par_end(par);
    if (rec) {
        sf_node *node = sf_tape_push(g, SF_OP_SIMA, o, in, 3);
        sima_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        *sv = (sima_saved){.mid = mid, .q16 = q16, .k16 = k16, .v16 = v16};
        node->saved = sv;
        node->iarg[0] = (int)order;
    } else {
        attn_free(g, mid, (size_t)par.nthr * per);
    }
    if (keep16 && q != k && k != v && q != v) { /* each copy is of one tensor */
        if (handed & SF_SIMA_HAND_Q) sf_tensor_keep_bf16(g, q, q16);
        if (handed & SF_SIMA_HAND_K) sf_tensor_keep_bf16(g, k, k16);
        if (handed & SF_SIMA_HAND_V) sf_tensor_keep_bf16(g, v, v16);
    }
    return o;
}

sf_tensor *sf_sima(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order) {
    return sima(g, q, k, v, order, 0);
}

sf_tensor *sf_sima_last_use(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order,
                            unsigned handed) {
    return sima(g, q, k, v, order, handed);
}

/* The backward follows the forward's order, reusing its saved S or U (attention.md#sima).
 * qk-first, forward: S = Q K^T; O = S V. So:
 *   dV += S^T G;  dS = G V^T;  dQ += dS K;  dK += dS^T Q          (4 Nq N D MACs)
 * kv-first, forward: U = K^T V; O = Q U. So:
 *   dQ += G U^T;  dU = Q^T G;  dK += V dU^T;  dV += K dU         (4 N D^2 MACs for Nq = N) */
void sf_sima_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *q = node->in[0], *k = node->in[1], *v = node->in[2], *o = node->out;
    attn_dims d = attn_check(q, k, v, "sima");
    int L = d.L, Nq = d.Nq, N = d.N, D = d.D;
    sf_sima_order order = (sf_sima_order)node->iarg[0];
    const sima_saved *sv = node->saved;
    /* teeth: "sima" breaks both orders, "sima_qk_first" / "sima_kv_first" one of them */
    int broken = sf_break_backward("sima") ||
                 sf_break_backward(order == SF_SIMA_QK_FIRST ? "sima_qk_first" : "sima_kv_first");
    /* Each of dQ, dK, dV is written by one product per slice: new buffers take beta 0. The
     * broken variant skips dK, and inputs that are the same tensor share one buffer, so those
     * cases take zeroed buffers and accumulate. */
    int aq = 1, ak = 1, av = 1, plain = broken || q == k || k == v || q == v;
    float *dq = !q->requires_grad ? NULL : plain ? sf_grad(g, q) : sf_grad_dst(g, q, &aq);
    float *dk = !k->requires_grad ? NULL : plain ? sf_grad(g, k) : sf_grad_dst(g, k, &ak);
    float *dv = !v->requires_grad ? NULL : plain ? sf_grad(g, v) : sf_grad_dst(g, v, &av);
    const float bq = aq ? 1.0f : 0.0f, bk = ak ? 1.0f : 0.0f, bv = av ? 1.0f : 0.0f;
    size_t per = order == SF_SIMA_QK_FIRST ? (size_t)Nq * N : (size_t)D * D;
    const size_t nq = (size_t)Nq * D, nk = (size_t)N * D;
    attn_par par = attn_par_begin(L);
    float *dmid_all = attn_alloc(g, (size_t)par.nthr * per); // per thread: (Nq, N) dS or (D, D) dU
    /* per thread, in bf16: G's slice and dS or dU, each read by two products */
    const size_t per16 = nq + per;
    uint16_t *r16_all = sv->q16 ? sf_arena_alloc(g->arena, (size_t)par.nthr * per16 * sizeof *r16_all) : NULL;
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        float *dmid = dmid_all + (size_t)sf_thread_slot() * per;
        uint16_t *g16 = r16_all ? r16_all + (size_t)sf_thread_slot() * per16 : NULL, *dmid16 = g16 ? g16 + nq : NULL;
        /* NULL: handed over, the bf16 copy serves */
        const float *ql = q->data ? q->data + (size_t)l * nq : NULL, *kl = k->data ? k->data + (size_t)l * nk : NULL;
        const float *vl = v->data ? v->data + (size_t)l * nk : NULL;
        const uint16_t *q16l = slice16(sv->q16, l, nq), *k16l = slice16(sv->k16, l, nk), *v16l = slice16(sv->v16, l, nk);
        const float *gl = o->grad + (size_t)l * nq; // (Nq, D)
        const uint16_t *gl16 = round_once(g16, gl, nq);
        const float *m = sv->mid + (size_t)l * per;
        float *dql = dq ? dq + (size_t)l * nq : NULL, *dkl = dk ? dk + (size_t)l * nk : NULL;
        float *dvl = dv ? dv + (size_t)l * nk : NULL;
        if (order == SF_SIMA_QK_FIRST) {
            if (dvl) sf_gemm_prec_w(1, 0, N, D, Nq, 1.0f, m, NULL, gl, gl16, bv, dvl); // dV += S^T G
            if (dql || dkl) {
                sf_gemm_prec_w(0, 1, Nq, N, D, 1.0f, gl, gl16, vl, v16l, 0.0f, dmid); // dS = G V^T
                const uint16_t *ds16 = round_once(dmid16, dmid, per);
                if (dql) sf_gemm_prec_w(0, 0, Nq, D, N, 1.0f, dmid, ds16, kl, k16l, bq, dql); // dQ += dS K
                if (dkl && !broken)
                    sf_gemm_prec_w(1, 0, N, D, Nq, 1.0f, dmid, ds16, ql, q16l, bk, dkl); // dK += dS^T Q
            }
        } else {
            if (dql) sf_gemm_prec_w(0, 1, Nq, D, D, 1.0f, gl, gl16, m, NULL, bq, dql); // dQ += G U^T
            if (dkl || dvl) {
                sf_gemm_prec_w(1, 0, D, D, Nq, 1.0f, ql, q16l, gl, gl16, 0.0f, dmid); // dU = Q^T G
                const uint16_t *du16 = round_once(dmid16, dmid, per);
                if (dkl && !broken)
                    sf_gemm_prec_w(0, 1, N, D, D, 1.0f, vl, v16l, dmid, du16, bk, dkl); // dK += V dU^T
                if (dvl) sf_gemm_prec_w(0, 0, N, D, D, 1.0f, kl, k16l, dmid, du16, bv, dvl); // dV += K dU
            }
        }
    }
    attn_par_end(par);
    if (r16_all) sf_arena_release(g->arena, r16_all, (size_t)par.nthr * per16 * sizeof *r16_all);
    attn_free(g, dmid_all, (size_t)par.nthr * per);
}

/* ============================== softmax attention ============================== */

typedef struct msa_saved {
    float *p; // (L, Nq, N) attention probabilities
} msa_saved;

sf_tensor *sf_msa(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, float scale) {
    attn_dims d = attn_check(q, k, v, "msa");
    int L = d.L, Nq = d.Nq, N = d.N, D = d.D;
    sf_tensor *in[3] = {q, k, v};
    int rec = sf_needs_grad(g, in, 3);
    size_t per = (size_t)Nq * N;
    attn_par par = attn_par_begin(L);
    float *p = attn_alloc(g, (size_t)(rec ? L : par.nthr) * per); // (L, Nq, N) or one per thread
    sf_tensor *o = sf_tensor_like(g, q);                           // (L, Nq, D)
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        const float *ql = q->data + (size_t)l * Nq * D, *kl = k->data + (size_t)l * N * D;
        const float *vl = v->data + (size_t)l * N * D;
        float *pl = p + (size_t)(rec ? l : sf_thread_slot()) * per;
        sf_gemm_prec(0, 1, Nq, N, D, scale, ql, kl, 0.0f, pl);                    // Z = s Q K^T
        softmax_rows(pl, Nq, N);                                              // P = softmax(Z)
        sf_gemm_prec(0, 0, Nq, D, N, 1.0f, pl, vl, 0.0f, o->data + (size_t)l * Nq * D); // O = P V
    }
    attn_par_end(par);
    if (rec) {
        sf_node *node = sf_tape_push(g, SF_OP_MSA, o, in, 3);
        msa_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->p = p;
        node->saved = sv;
        node->farg[0] = scale;
    } else {
        attn_free(g, p, (size_t)par.nthr * per);
    }
    return o;
}

/* in the forward pass this was: Z = s Q K^T; P = softmax(Z); O = P V, so now we have
 * (attention.md#msa): dV += P^T G; dP = G V^T; dZ = P ⊙ (dP - rowsum(dP ⊙ P));
 * dQ += s dZ K; dK += s dZ^T Q. */
void sf_msa_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *q = node->in[0], *k = node->in[1], *v = node->in[2], *o = node->out;
    attn_dims d = attn_check(q, k, v, "msa");
    int L = d.L, Nq = d.Nq, N = d.N, D = d.D;
    float scale = node->farg[0];
    const msa_saved *sv = node->saved;
    float *dq = attn_grad_or_null(g, q), *dk = attn_grad_or_null(g, k);
    float *dv = attn_grad_or_null(g, v);
    int broken = sf_break_backward("msa");
    size_t per = (size_t)Nq * N;
    attn_par par = attn_par_begin(L);
    float *dz_all = attn_alloc(g, (size_t)par.nthr * per); // per thread: (Nq, N) dP, then dZ
    /* per thread, in bf16: G's slice and dZ, each read by two products (rounded once, as in
     * sima's backward) */
    const size_t nq = (size_t)Nq * D, per16 = nq + per;
    uint16_t *r16_all =
        sf_precision_get() != SF_PREC_FP32 ? sf_arena_alloc(g->arena, (size_t)par.nthr * per16 * sizeof *r16_all) : NULL;
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        float *dz = dz_all + (size_t)sf_thread_slot() * per;
        uint16_t *g16 = r16_all ? r16_all + (size_t)sf_thread_slot() * per16 : NULL, *dz_scratch = g16 ? g16 + nq : NULL;
        const float *ql = q->data + (size_t)l * nq, *kl = k->data + (size_t)l * N * D;
        const float *vl = v->data + (size_t)l * N * D;
        const float *gl = o->grad + (size_t)l * nq;
        const float *pl = sv->p + (size_t)l * per;
        const uint16_t *gl16 = round_once(dv && (dq || dk) ? g16 : NULL, gl, nq);
        if (dv) sf_gemm_prec_w(1, 0, N, D, Nq, 1.0f, pl, NULL, gl, gl16, 1.0f, dv + (size_t)l * N * D); // dV += P^T G
        if (!dq && !dk) continue;
        sf_gemm_prec_w(0, 1, Nq, N, D, 1.0f, gl, gl16, vl, NULL, 0.0f, dz); // dP = G V^T
        if (!broken) softmax_rows_backward(dz, pl, Nq, N); // dZ (the teeth skip the Jacobian)
        const uint16_t *dz16 = round_once(dq && dk ? dz_scratch : NULL, dz, per);
        if (dq) sf_gemm_prec_w(0, 0, Nq, D, N, scale, dz, dz16, kl, NULL, 1.0f, dq + (size_t)l * nq); // dQ += s dZ K
        if (dk) sf_gemm_prec_w(1, 0, N, D, Nq, scale, dz, dz16, ql, NULL, 1.0f, dk + (size_t)l * N * D); // dK += s dZ^T Q
    }
    attn_par_end(par);
    if (r16_all) sf_arena_release(g->arena, r16_all, (size_t)par.nthr * per16 * sizeof *r16_all);
    attn_free(g, dz_all, (size_t)par.nthr * per);
}

/* ============================ XCA (channel attention) ============================ */

#define XCA_EPS 1e-12f /* F.normalize default, as xcit.py */

typedef struct xca_saved {
    float *qn, *kn; // (L, N, D) q̂, k̂: l2-normalized over tokens
    float *sq, *sk; // (L, D) column norms before the eps clamp
    float *cm;      // (L, D, D) Cm = q̂^T k̂
    float *p;       // (L, D, D) P = softmax(tau_h Cm)
} xca_saved;

sf_tensor *sf_xca(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_tensor *temperature) {
    char bq[64], bt[64];
    attn_dims d = attn_check(q, k, v, "xca");
    SF_ASSERT(q->ndim == 4 && d.Nq == d.N, "xca: q %s must be (B, H, N, D) like k",
              sf_shape_str(q, bq, sizeof bq));
    int H = q->shape[1], L = d.L, N = d.N, D = d.D;
    SF_ASSERT((int)temperature->numel == H, "xca: temperature %s needs H = %d elements",
              sf_shape_str(temperature, bt, sizeof bt), H);
    sf_tensor *in[4] = {q, k, v, temperature};
    int rec = sf_needs_grad(g, in, 4);
    attn_par par = attn_par_begin(L);
    int S = rec ? L : par.nthr; // slices kept: all when recording, else one per thread
    xca_saved sv;
    sv.qn = attn_alloc(g, (size_t)S * N * D);
    sv.kn = attn_alloc(g, (size_t)S * N * D);
    sv.sq = attn_alloc(g, (size_t)S * D);
    sv.sk = attn_alloc(g, (size_t)S * D);
    sv.cm = attn_alloc(g, (size_t)S * D * D);
    sv.p = attn_alloc(g, (size_t)S * D * D);
    sf_tensor *o = sf_tensor_like(g, q); // (B, H, N, D)
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        int s = rec ? l : sf_thread_slot();
        size_t nd = (size_t)l * N * D, snd = (size_t)s * N * D, sdd = (size_t)s * D * D;
        float tau = temperature->data[l % H];
        float *qn = sv.qn + snd, *kn = sv.kn + snd, *cm = sv.cm + sdd, *p = sv.p + sdd;
        colnorm_forward(qn, sv.sq + (size_t)s * D, q->data + nd, (size_t)D, N, D, 2, XCA_EPS);
        colnorm_forward(kn, sv.sk + (size_t)s * D, k->data + nd, (size_t)D, N, D, 2, XCA_EPS);
        sf_gemm_prec(1, 0, D, D, N, 1.0f, qn, kn, 0.0f, cm); // Cm = q̂^T k̂      (D, D)
        for (int i = 0; i < D * D; i++) p[i] = tau * cm[i]; // A = tau Cm
        softmax_rows(p, D, D);                              // P = softmax(A) over key channels
        sf_gemm_prec(0, 1, N, D, D, 1.0f, v->data + nd, p, 0.0f, o->data + nd); // O = V P^T (N, D)
    }
    attn_par_end(par);
    if (rec) {
        sf_node *node = sf_tape_push(g, SF_OP_XCA, o, in, 4);
        xca_saved *keep = sf_arena_alloc(g->arena, sizeof(*keep));
        *keep = sv;
        node->saved = keep;
    }
    return o;
}

/* in the forward pass this was (attention.md#xca):
 *   q̂ = l2n(q); k̂ = l2n(k); Cm = q̂^T k̂; A = tau Cm; P = softmax(A); O = V P^T
 * so now we have:
 *   dV += G P; dP = G^T V; dA = P ⊙ (dP - rowsum(dP ⊙ P)); dtau_h += sum_ij dA_ij Cm_ij;
 *   dCm = tau dA; dq̂ = k̂ dCm^T; dk̂ = q̂ dCm; then the l2 backward (attention.md#l2). */
void sf_xca_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *q = node->in[0], *k = node->in[1], *v = node->in[2], *t = node->in[3];
    sf_tensor *o = node->out;
    attn_dims d = attn_check(q, k, v, "xca");
    int H = q->shape[1], L = d.L, N = d.N, D = d.D;
    const xca_saved *sv = node->saved;
    float *dq = attn_grad_or_null(g, q), *dk = attn_grad_or_null(g, k);
    float *dv = attn_grad_or_null(g, v), *dt = attn_grad_or_null(g, t);
    int broken = sf_break_backward("xca"); // teeth: dtau dropped, and the l2 norm's projection term in dk
    attn_par par = attn_par_begin(L);
    size_t per = (size_t)D * D + 2 * (size_t)N * D + COLNORM_SCRATCH(D);
    float *scratch = attn_alloc(g, (size_t)par.nthr * per);
    float *dtau = attn_alloc(g, (size_t)L); // (L) per-slice share of dtau, summed below
#pragma omp parallel for schedule(static) if (par.on)
    for (int l = 0; l < L; l++) {
        float *da = scratch + (size_t)sf_thread_slot() * per; // (D, D) dP, then dA in place
        float *dqn = da + (size_t)D * D;                 // (N, D) dq̂
        float *dkn = dqn + (size_t)N * D;                // (N, D) dk̂
        float *c = dkn + (size_t)N * D;                  // scratch of the l2 backward
        size_t nd = (size_t)l * N * D, dd = (size_t)l * D * D;
        int h = l % H;
        float tau = t->data[h];
        const float *gl = o->grad + nd, *p = sv->p + dd, *cm = sv->cm + dd;
        const float *qn = sv->qn + nd, *kn = sv->kn + nd;
        if (dv) sf_gemm_prec(0, 0, N, D, D, 1.0f, gl, p, 1.0f, dv + nd); // dV += G P
        if (!dq && !dk && !dt) continue;
        sf_gemm_prec(1, 0, D, D, N, 1.0f, gl, v->data + nd, 0.0f, da); // dP = G^T V
        softmax_rows_backward(da, p, D, D);                        // dA
        if (dt) {
            double acc = 0.0;
            for (int i = 0; i < D * D; i++) acc += (double)da[i] * cm[i];
            dtau[l] = (float)acc;
        }
        if (dq) {
            sf_gemm_prec(0, 1, N, D, D, tau, kn, da, 0.0f, dqn); // dq̂ = k̂ (tau dA)^T
            colnorm_backward(dq + nd, (size_t)D, c, dqn, (colnorm_y){.y32 = qn}, sv->sq + (size_t)l * D, N, D, 2, XCA_EPS, 0, 1);
        }
        if (dk) {
            sf_gemm_prec(0, 0, N, D, D, tau, qn, da, 0.0f, dkn); // dk̂ = q̂ (tau dA)
            colnorm_backward(dk + nd, (size_t)D, c, dkn, (colnorm_y){.y32 = kn}, sv->sk + (size_t)l * D, N, D, 2, XCA_EPS, broken, 1);
        }
    }
    attn_par_end(par);
    /* dtau_h sums over the batch; serial so threads never race on one head's entry. */
    if (dt && !broken)
        for (int l = 0; l < L; l++) dt[l % H] += dtau[l];
    attn_free(g, dtau, (size_t)L);
    attn_free(g, scratch, (size_t)par.nthr * per);
}
