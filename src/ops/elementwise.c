/* elementwise.c — pointwise ops: sums, broadcast sum/product over leading dims, scaling,
 * activations (GELU exact and tanh, QuickGELU, ReLU, elu+1) and the two stochastic regularizers
 * (element dropout, per-sample drop path).
 *
 * Broadcast rule (add_broadcast, mul_broadcast): y matches x's trailing dims after its own
 * leading 1s are dropped, e.g. bias (C) or pos_embed (1, N, C) on x (B, N, C); x is then
 * (R, Y) with Y = numel(y) and y is repeated over the R rows.
 * Dropout and drop path draw their masks from g->rng, serially, so a run is reproducible
 * for a given seed whatever the thread count; they return x itself (no copy, no node) when
 * inactive (eval mode or p == 0).
 * Derivations: docs/math/basic.md (sections add, broadcast, scale, gelu, gelu-tanh, quick-gelu, relu,
 * elu1, dropout, drop-path).
 *
 * The residual connection x + DropPath(y) is one op (sf_residual): one pass each way.
 *
 * Deliberately not here: general numpy broadcasting, in-place variants, fused
 * bias+activation kernels.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks.
 */
#include "ops_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* Below this many elements a parallel region costs more than it saves. */
#define EW_OMP_MIN 32768

/* ---- add ---- */

sf_tensor *sf_add(sf_ctx *g, sf_tensor *a, sf_tensor *b) {
    char sa[64], sb[64];
    SF_ASSERT(sf_same_shape(a, b), "add: shapes %s and %s differ", sf_shape_str(a, sa, sizeof sa),
              sf_shape_str(b, sb, sizeof sb));
    sf_tensor *y = sf_tensor_like(g, a);
    size_t n = a->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) y->data[i] = a->data[i] + b->data[i];
    sf_tensor *in[2] = {a, b};
    if (sf_needs_grad(g, in, 2)) sf_tape_push(g, SF_OP_ADD, y, in, 2);
    return y;
}

/* y = a + b: da += G, db += G (a == b is fine: both land in the same buffer).
 * An input without a gradient yet takes G's buffer itself (no copy): nothing reads y's
 * gradient after this backward (y's consumers ran before, in reverse tape order), so later
 * accumulations into the input may reuse that memory. Only one input may share it; the
 * other gets a copy. This is what makes a residual connection's backward free. */
void sf_add_backward(sf_ctx *g, sf_node *node) {
    float *G = node->out->grad;
    size_t n = node->out->numel;
    int shared = 0;
    for (int k = 0; k < 2; k++) {
        sf_tensor *t = node->in[k];
        if (!t->requires_grad) continue;
        if (!t->grad && !shared) {
            t->grad = G;
            shared = 1;
            continue;
        }
        int acc;
        float *d = sf_grad_dst(g, t, &acc);
        if (!acc) {
            memcpy(d, G, n * sizeof(float));
            continue;
        }
#pragma omp parallel for simd if (parallel : n > EW_OMP_MIN)
        for (size_t i = 0; i < n; i++) d[i] += G[i];
    }
}

/* ---- broadcast over leading dims ---- */

/* Checks the broadcast rule and returns the number of rows R that y is repeated over. */
static size_t broadcast_rows(const char *op, const sf_tensor *x, const sf_tensor *y) {
    char sx[64], sy[64];
    int lead = 0; /* y's leading 1s */
    while (lead < y->ndim - 1 && y->shape[lead] == 1) lead++;
    int k = y->ndim - lead; /* y's remaining dims must be x's last k dims */
    int ok = k <= x->ndim;
    for (int i = 0; ok && i < k; i++) ok = y->shape[lead + i] == x->shape[x->ndim - k + i];
    SF_ASSERT(ok && x->numel % y->numel == 0, "%s: y %s does not match the trailing dims of x %s",
              op, sf_shape_str(y, sy, sizeof sy), sf_shape_str(x, sx, sizeof sx));
    return x->numel / y->numel;
}

/* dst[j] += sum_r src[r*Y + j] * (w ? w[r*Y + j] : 1): the reduction over the repeated
 * rows. Threads own disjoint blocks of 64 columns and walk the rows reading each block's
 * contiguous slice once (a column-at-a-time walk would reread every cache line 16 times);
 * disjoint blocks mean no atomics. */
#define COLSUM_BLOCK 64
static void colsum_acc(float *dst, const float *src, const float *w, const uint16_t *w16, size_t R, size_t Y) {
    size_t nblk = (Y + COLSUM_BLOCK - 1) / COLSUM_BLOCK;
#pragma omp parallel for if (R * Y > EW_OMP_MIN && nblk > 1)
    for (size_t blk = 0; blk < nblk; blk++) {
        size_t j0 = blk * COLSUM_BLOCK, nj = Y - j0 < COLSUM_BLOCK ? Y - j0 : COLSUM_BLOCK;
        float acc[COLSUM_BLOCK] = {0};
        for (size_t r = 0; r < R; r++) {
            const float *sr = src + r * Y + j0;
            if (w) {
                const float *wr = w + r * Y + j0;
                for (size_t j = 0; j < nj; j++) acc[j] += sr[j] * wr[j];
            } else if (w16) { /* the weights kept in bf16 alone */
                const uint16_t *wr = w16 + r * Y + j0;
                for (size_t j = 0; j < nj; j++) acc[j] += sr[j] * sf_from_bf16(wr[j]);
            } else {
                for (size_t j = 0; j < nj; j++) acc[j] += sr[j];
            }
        }
        for (size_t j = 0; j < nj; j++) dst[j0 + j] += acc[j];
    }
}

sf_tensor *sf_add_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y) {
    size_t R = broadcast_rows("add_broadcast", x, y), Y = y->numel;
    sf_tensor *out = sf_tensor_like(g, x); // (R, Y)
#pragma omp parallel for if (R * Y > EW_OMP_MIN)
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < Y; j++) out->data[r * Y + j] = x->data[r * Y + j] + y->data[j];
    sf_tensor *in[2] = {x, y};
    if (sf_needs_grad(g, in, 2)) sf_tape_push(g, SF_OP_ADD_BROADCAST, out, in, 2);
    return out;
}

/* out[r, j] = x[r, j] + y[j]: dx += G; dy[j] += sum_r G[r, j]. */
void sf_add_broadcast_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->in[1];
    const float *G = node->out->grad; // (R, Y)
    size_t Y = y->numel, R = x->numel / Y;
    if (y->requires_grad) colsum_acc(sf_grad(g, y), G, NULL, NULL, R, Y);
    if (x->requires_grad) {
        int acc;
        float *dx = sf_grad_dst(g, x, &acc);
        if (!acc) {
            memcpy(dx, G, R * Y * sizeof(float));
            return;
        }
#pragma omp parallel for simd if (parallel : R * Y > EW_OMP_MIN)
        for (size_t i = 0; i < R * Y; i++) dx[i] += G[i];
    }
}

/* last_use: x is handed over. Its backward reads x only for dy, so x is released where no
 * dy is computed, and in bf16 precision kept as a bf16 copy (written in the same pass) for dy. */
static sf_tensor *mul_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y, int last_use) {
    size_t R = broadcast_rows("mul_broadcast", x, y), Y = y->numel;
    sf_tensor *out = sf_tensor_like(g, x); // (R, Y)
    sf_tensor *in[2] = {x, y};
    const int rec = sf_needs_grad(g, in, 2), x_for_dy = rec && y->requires_grad;
    uint16_t *x16 = last_use && x_for_dy && sf_precision_get() != SF_PREC_FP32
                        ? sf_arena_alloc(g->arena, x->numel * sizeof *x16)
                        : NULL;
#pragma omp parallel for if (R * Y > EW_OMP_MIN)
    for (size_t r = 0; r < R; r++) {
        const float *xr = x->data + r * Y;
        for (size_t j = 0; j < Y; j++) out->data[r * Y + j] = xr[j] * y->data[j];
        if (x16) sf_bf16_convert(xr, x16 + r * Y, Y);
    }
    if (rec) sf_tape_push(g, SF_OP_MUL_BROADCAST, out, in, 2);
    if (x16)
        sf_tensor_keep_bf16(g, x, x16);
    else if (last_use && !x_for_dy)
        sf_tensor_release_data(g, x);
    return out;
}

sf_tensor *sf_mul_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y) { return mul_broadcast(g, x, y, 0); }
sf_tensor *sf_mul_broadcast_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *y) { return mul_broadcast(g, x, y, 1); }

/* out[r, j] = x[r, j] * y[j]: dx[r, j] += G[r, j] y[j]; dy[j] += sum_r G[r, j] x[r, j]. */
void sf_mul_broadcast_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->in[1];
    const float *G = node->out->grad; // (R, Y)
    size_t Y = y->numel, R = x->numel / Y;
    if (x->requires_grad) {
        float *dx = sf_grad(g, x);
#pragma omp parallel for if (R * Y > EW_OMP_MIN)
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < Y; j++) dx[r * Y + j] += G[r * Y + j] * y->data[j];
    }
    if (y->requires_grad) colsum_acc(sf_grad(g, y), G, x->data, x->data16, R, Y);
}

/* ---- scale ---- */

sf_tensor *sf_scale(sf_ctx *g, sf_tensor *x, float s) {
    sf_tensor *y = sf_tensor_like(g, x);
    size_t n = x->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) y->data[i] = s * x->data[i];
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_SCALE, y, &x, 1)->farg[0] = s;
    return y;
}

/* y = s x: dx += s G. */
void sf_scale_backward(sf_ctx *g, sf_node *node) {
    float s = node->farg[0];
    int acc; /* a new dx is written, never read */
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    const float *G = node->out->grad;
    size_t n = node->out->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + s * G[i];
}

/* ---- activations: the forward saves nothing, x is the input and stays alive ---- */

/* An activation's forward, y = f(x) over blocks of AW_BLOCK elements (f: one vector loop).
 * to_linear: y goes only into sf_linear_last_use, so in bf16 precision it is written as bf16
 * alone (sf_tensor_for_linear), each block rounded from a stack buffer while in cache: the
 * fp32 y is neither written nor read back to be converted. Every backward reads x, not y. */
#define AW_BLOCK 1024

typedef void (*act_block_fn)(float *restrict y, const float *restrict x, size_t n);

static sf_tensor *activation(sf_ctx *g, sf_tensor *x, sf_op op, act_block_fn f, int to_linear) {
    sf_tensor *y = to_linear ? sf_tensor_for_linear(g, x->ndim, x->shape) : sf_tensor_like(g, x);
    const size_t n = x->numel, blocks = (n + AW_BLOCK - 1) / AW_BLOCK;
    const float *xd = x->data;
#pragma omp parallel for schedule(static) if (n > EW_OMP_MIN / 8)
    for (size_t k = 0; k < blocks; k++) {
        const size_t lo = k * AW_BLOCK, m = n - lo < AW_BLOCK ? n - lo : AW_BLOCK;
        if (y->data) {
            f(y->data + lo, xd + lo, m);
        } else {
            float block[AW_BLOCK];
            f(block, xd + lo, m);
            sf_bf16_convert(block, y->data16 + lo, m);
        }
    }
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, op, y, &x, 1);
    return y;
}

#define SQRT_2_PI 0.79788456080286535588f /* sqrt(2/pi) */
#define GELU_TANH_A 0.044715f

/* y = x Phi(x), with sf_fast_phif (|error| < 4e-7) instead of libm's scalar erff: the loop
 * vectorizes. */
static inline __attribute__((always_inline)) float gelu_value(float x) {
    float e;
    return x * sf_fast_phif(x, &e);
}

/* An activation's two block functions from its value: on fp32 x, and on bf16 x widened in
 * the same loop (an MLP's fc1 output in bf16, sf_act_bf16_input): the same expression, so
 * the same bits as widening first. */
#define ACT_BLOCKS(name)                                                                       \
    static void name##_block(float *restrict y, const float *restrict x, size_t n) {          \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = name##_value(x[i]);        \
    }                                                                                          \
    static void name##_block_bf16_in(float *restrict y, const uint16_t *restrict x, size_t n) { \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = name##_value(sf_from_bf16(x[i])); \
    }
ACT_BLOCKS(gelu)

sf_tensor *sf_gelu(sf_ctx *g, sf_tensor *x) { return activation(g, x, SF_OP_GELU, gelu_block, 0); }

sf_tensor *sf_gelu_to_linear(sf_ctx *g, sf_tensor *x) { return activation(g, x, SF_OP_GELU, gelu_block, 1); }

/* An activation's output gradient as its plain backward reads it: fp32, read in place, or, where
 * the output went into the next linear layer in bf16 (node->iarg[1], set by that layer), that
 * layer's gradient in bf16: its grad16, or its fp32 grad rounded here, widened into *tmp (arena;
 * the caller gives it back). The fused backward (matmul.c) does the same row by row. */
static const float *act_out_grad(sf_ctx *g, const sf_node *node, float **tmp) {
    const sf_tensor *y = node->out;
    *tmp = NULL;
    if (!node->iarg[1]) return y->grad;
    float *G = sf_arena_alloc(g->arena, y->numel * sizeof *G);
    sf_act_grad_widen(G, y->grad, y->grad16, y->numel);
    return *tmp = G;
}

/* Over the team for a whole tensor, on the calling thread for a row inside a parallel region
 * (the conversions' rule, bf16.c: no serialized region per row). */
void sf_act_grad_widen(float *restrict dst, const float *restrict grad, const uint16_t *restrict grad16, size_t n) {
    if (grad16)
        sf_bf16_widen(grad16, dst, n);
    else
        sf_bf16_round_into(grad, dst, n);
}

/* Forward was y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, so
 * dy/dx = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi) (docs/math/basic.md#gelu). */
void sf_gelu_backward(sf_ctx *g, sf_node *node) {
    /* x made by a linear layer for this GELU alone (sf_linear_act_to_linear): both backwards
     * in one pass, in matmul.c */
    if (node->iarg[0]) {
        sf_linear_act_backward(g, node, &g->tape[node->iarg[0] - 1]);
        return;
    }
    float *G_tmp;
    const float *x = node->in[0]->data, *G = act_out_grad(g, node, &G_tmp);
    SF_ASSERT(x, "gelu backward: its input in bf16 alone belongs to the fused linear + GELU backward");
    int acc;
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
    /* Teeth: the broken variant drops the x phi(x) term. */
    float keep_pdf = sf_break_backward("gelu") ? 0.0f : 1.0f;
#pragma omp parallel for simd if (parallel : n > EW_OMP_MIN / 8)
    for (size_t i = 0; i < n; i++) {
        float d = G[i] * sf_gelu_slope(x[i], keep_pdf);
        dx[i] = acc ? dx[i] + d : d; /* a new dx is written, never read */
    }
    if (G_tmp) sf_arena_release(g->arena, G_tmp, n * sizeof *G_tmp);
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1) with sf_fast_expf: vectorizes, absolute error < 3e-7
 * (libm's tanhf is the reference in tests/test_ops_fast.c); saturates to ±1 cleanly. */
static inline __attribute__((always_inline)) float ew_tanhf(float u) {
    return 1.0f - 2.0f / (sf_fast_expf(2.0f * u) + 1.0f);
}

static void gelu_tanh_block(float *restrict y, const float *restrict x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float t = ew_tanhf(SQRT_2_PI * (v + GELU_TANH_A * v * v * v));
        y[i] = 0.5f * v * (1.0f + t);
    }
}

sf_tensor *sf_gelu_tanh(sf_ctx *g, sf_tensor *x) {
    return activation(g, x, SF_OP_GELU_TANH, gelu_tanh_block, 0);
}
sf_tensor *sf_gelu_tanh_to_linear(sf_ctx *g, sf_tensor *x) {
    return activation(g, x, SF_OP_GELU_TANH, gelu_tanh_block, 1);
}

/* Forward was y = x (1 + t) / 2, t = tanh(u), u = sqrt(2/pi)(x + a x^3), so
 * dy/dx = (1 + t)/2 + x (1 - t^2) sqrt(2/pi)(1 + 3 a x^2) / 2 (docs/math/basic.md#gelu-tanh). */
void sf_gelu_tanh_backward(sf_ctx *g, sf_node *node) {
    const float *x = node->in[0]->data, *G = node->out->grad;
    int acc;
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
#pragma omp parallel for simd if (parallel : n > EW_OMP_MIN / 8)
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float t = ew_tanhf(SQRT_2_PI * (v + GELU_TANH_A * v * v * v));
        float du = SQRT_2_PI * (1.0f + 3.0f * GELU_TANH_A * v * v);
        float d = G[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
        dx[i] = acc ? dx[i] + d : d; /* a new dx is written, never read */
    }
}

/* QuickGELU: x·sigmoid(1.702 x) approximates x·Φ(x) (CvT's act_layer). */
static inline __attribute__((always_inline)) float quick_gelu_value(float x) {
    return x / (1.0f + sf_fast_expf(-SF_QUICK_GELU_K * x));
}
ACT_BLOCKS(quick_gelu)

sf_tensor *sf_quick_gelu(sf_ctx *g, sf_tensor *x) {
    return activation(g, x, SF_OP_QUICK_GELU, quick_gelu_block, 0);
}
sf_tensor *sf_quick_gelu_to_linear(sf_ctx *g, sf_tensor *x) {
    return activation(g, x, SF_OP_QUICK_GELU, quick_gelu_block, 1);
}

/* Forward was y = x s, s = sigmoid(k x), k = 1.702, so with ds/dx = k s (1 − s):
 * dy/dx = s + k x s (1 − s) (docs/math/basic.md#quick-gelu, sf_quick_gelu_slope). */
void sf_quick_gelu_backward(sf_ctx *g, sf_node *node) {
    if (node->iarg[0]) { /* x made by a linear layer for this activation alone */
        sf_linear_act_backward(g, node, &g->tape[node->iarg[0] - 1]);
        return;
    }
    float *G_tmp;
    const float *x = node->in[0]->data, *G = act_out_grad(g, node, &G_tmp);
    SF_ASSERT(x, "quick_gelu backward: its input in bf16 alone belongs to the fused linear backward");
    int acc;
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
    /* Teeth: the broken variant drops the k x s (1 − s) term. */
    const float keep_slope = sf_break_backward("quick_gelu") ? 0.0f : 1.0f;
#pragma omp parallel for simd if (parallel : n > EW_OMP_MIN / 8)
    for (size_t i = 0; i < n; i++) {
        float d = G[i] * sf_quick_gelu_slope(x[i], keep_slope);
        dx[i] = acc ? dx[i] + d : d; /* a new dx is written, never read */
    }
    if (G_tmp) sf_arena_release(g->arena, G_tmp, n * sizeof *G_tmp);
}

static inline __attribute__((always_inline)) float relu_value(float x) { return x > 0.0f ? x : 0.0f; }
ACT_BLOCKS(relu)

sf_tensor *sf_relu(sf_ctx *g, sf_tensor *x) { return activation(g, x, SF_OP_RELU, relu_block, 0); }
sf_tensor *sf_relu_to_linear(sf_ctx *g, sf_tensor *x) { return activation(g, x, SF_OP_RELU, relu_block, 1); }

/* y = max(x, 0): dx += G [x > 0] (0 at x = 0, as torch). */
void sf_relu_backward(sf_ctx *g, sf_node *node) {
    if (node->iarg[0]) { /* x made by a linear layer for this activation alone */
        sf_linear_act_backward(g, node, &g->tape[node->iarg[0] - 1]);
        return;
    }
    float *G_tmp;
    const float *x = node->in[0]->data, *G = act_out_grad(g, node, &G_tmp);
    SF_ASSERT(x, "relu backward: its input in bf16 alone belongs to the fused linear backward");
    int acc; /* a new dx is written, never read */
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + sf_relu_grad(x[i], G[i]);
    if (G_tmp) sf_arena_release(g->arena, G_tmp, n * sizeof *G_tmp);
}

/* ---- an MLP's activation of fc1's output (sf_linear_act_to_linear) ---- */

typedef void (*act_block_bf16_fn)(float *restrict y, const uint16_t *restrict x, size_t n);

/* GELU's and QuickGELU's value and slope at a bf16 x are read from tables of all 65536 bf16
 * values, indexed by x's bits: a load in place of an exponential and a division (the
 * activation's two passes over an MLP's widest tensor). Each entry is the output of the very
 * loop it replaces, run once over every bit pattern (on first use): the same bits. 256 KiB a
 * table, 512 KiB an activation's pair; the entries a model's values touch (|x| from about
 * 2^-10 to 2^4: a few thousand) stay in cache. ReLU's select costs less than a load: no table. */
#define BF16_VALUES 65536

typedef struct {
    pthread_once_t once;
    float value[BF16_VALUES], slope[BF16_VALUES];
} act_tables;

/* The slope loop of the fused backward (matmul.c's act_grad_row): keep is read at run time
 * there, and here, so that NaNs' payloads come out the same too. */
#define ACT_TABLES(name, SLOPE)                                                                 \
    static act_tables name##_tables = {.once = PTHREAD_ONCE_INIT};                              \
    static void name##_slopes(float *restrict row, const float *restrict Ga, const uint16_t *restrict x, \
                              size_t n, float keep) {                                           \
        _Pragma("omp simd") for (size_t o = 0; o < n; o++) {                                    \
            const float v = sf_from_bf16(x[o]);                                                 \
            row[o] = Ga[o] * (SLOPE);                                                           \
        }                                                                                       \
    }                                                                                           \
    static void name##_tables_fill(void) {                                                      \
        const volatile float one = 1.0f;                                                        \
        for (uint32_t lo = 0; lo < BF16_VALUES; lo += 128) {                                    \
            uint16_t bits[128];                                                                 \
            float ones[128];                                                                    \
            for (uint32_t i = 0; i < 128; i++) bits[i] = (uint16_t)(lo + i), ones[i] = 1.0f;    \
            name##_block_bf16_in(name##_tables.value + lo, bits, 128);                           \
            name##_slopes(name##_tables.slope + lo, ones, bits, 128, one);                       \
        }                                                                                       \
    }
ACT_TABLES(gelu, sf_gelu_slope(v, keep))
ACT_TABLES(quick_gelu, sf_quick_gelu_slope(v, keep))
#undef ACT_TABLES

static const act_tables *tables_of(sf_op op) {
    switch (op) {
    case SF_OP_GELU: pthread_once(&gelu_tables.once, gelu_tables_fill); return &gelu_tables;
    case SF_OP_QUICK_GELU: pthread_once(&quick_gelu_tables.once, quick_gelu_tables_fill); return &quick_gelu_tables;
    default: return NULL;
    }
}

/* Below a million values (the Fashion-MNIST model's MLPs: 0.2 M) the activation computes:
 * there the tables' 512 KiB would be more than bf16 saves of the step's peak memory (47.9
 * against 48.2 MiB in fp32), for tenths of a millisecond. DeiT-S's, XCiT-S12's and CvT-13's
 * MLPs have 2.4-6.4 M values. */
#define TABLE_MIN_VALUES ((size_t)1 << 20)

int sf_act_bf16_tabled(sf_op op, size_t numel) {
    return (op == SF_OP_GELU || op == SF_OP_QUICK_GELU) && numel >= TABLE_MIN_VALUES;
}

void sf_act_bf16_values(sf_op op, float *restrict y, const uint16_t *restrict x, size_t n) {
    const act_tables *t = tables_of(op);
    SF_ASSERT(t, "%s has no bf16 tables", sf_op_name(op));
    const float *value = t->value;
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = value[x[i]];
}

void sf_act_bf16_grad(sf_op op, float *restrict row, const float *restrict Ga, const uint16_t *restrict x, size_t n,
                      float keep, int tabled) {
    SF_ASSERT(op == SF_OP_GELU || op == SF_OP_QUICK_GELU || op == SF_OP_RELU, "%s has no bf16 slope loop", sf_op_name(op));
    if (op == SF_OP_RELU) { /* a comparison: no table to gain from */
#pragma omp simd
        for (size_t o = 0; o < n; o++) row[o] = sf_relu_grad(sf_from_bf16(x[o]), Ga[o]);
        return;
    }
    if (!tabled || keep != 1.0f) { /* small, or the broken variant: the loop the table holds */
        (op == SF_OP_GELU ? gelu_slopes : quick_gelu_slopes)(row, Ga, x, n, keep);
        return;
    }
    const float *slope = tables_of(op)->slope;
#pragma omp simd
    for (size_t o = 0; o < n; o++) row[o] = Ga[o] * slope[x[o]];
}

void sf_act_bf16_grad_bf16(sf_op op, float *restrict row, const uint16_t *restrict Ga16, const uint16_t *restrict x,
                           size_t n) {
    SF_ASSERT(op == SF_OP_GELU || op == SF_OP_QUICK_GELU, "%s has no slope table", sf_op_name(op));
    const float *slope = tables_of(op)->slope;
#pragma omp simd
    for (size_t o = 0; o < n; o++) row[o] = sf_from_bf16(Ga16[o]) * slope[x[o]];
}

/* The block functions of an activation a linear layer feeds as one op: on fp32 input (f) and
 * on bf16 input (f16). */
static void mlp_act_blocks(sf_op op, act_block_fn *f, act_block_bf16_fn *f16) {
    switch (op) {
    case SF_OP_GELU: *f = gelu_block, *f16 = gelu_block_bf16_in; return;
    case SF_OP_QUICK_GELU: *f = quick_gelu_block, *f16 = quick_gelu_block_bf16_in; return;
    case SF_OP_RELU: *f = relu_block, *f16 = relu_block_bf16_in; return;
    default: break;
    }
    SF_ASSERT(0, "%s is not an activation a linear layer feeds as one op", sf_op_name(op));
}

sf_tensor *sf_act_to_linear(sf_ctx *g, sf_tensor *x, sf_op op) {
    act_block_fn f;
    act_block_bf16_fn f16;
    mlp_act_blocks(op, &f, &f16);
    return activation(g, x, op, f, 1);
}

/* h in fp32 is rounded to bf16 block by block in the activation's pass, and its fp32 data
 * given back: the activation, here and in the backward, reads the rounded values, as where
 * oneDNN's kernels wrote h in bf16. */
sf_tensor *sf_act_bf16_input(sf_ctx *g, sf_tensor *h, sf_op op) {
    SF_ASSERT(sf_precision_get() != SF_PREC_FP32 && (h->data || h->data16), "act_bf16_input: bf16 precision only");
    act_block_fn f;
    act_block_bf16_fn f16;
    mlp_act_blocks(op, &f, &f16);
    const int tabled = sf_act_bf16_tabled(op, h->numel);
    sf_tensor *y = sf_tensor_for_linear(g, h->ndim, h->shape);
    const size_t n = h->numel, blocks = (n + AW_BLOCK - 1) / AW_BLOCK;
    const float *hf = h->data;
    uint16_t *h16 = hf ? sf_arena_alloc(g->arena, n * sizeof *h16) : h->data16;
#pragma omp parallel for schedule(static) if (n > EW_OMP_MIN / 8)
    for (size_t k = 0; k < blocks; k++) {
        const size_t lo = k * AW_BLOCK, m = n - lo < AW_BLOCK ? n - lo : AW_BLOCK;
        if (hf) sf_bf16_convert(hf + lo, h16 + lo, m);
        float block[AW_BLOCK];
        if (tabled)
            sf_act_bf16_values(op, block, h16 + lo, m);
        else
            f16(block, h16 + lo, m);
        sf_bf16_convert(block, y->data16 + lo, m);
    }
    if (hf) sf_tensor_keep_bf16(g, h, h16);
    if (sf_needs_grad(g, &h, 1))
        sf_tape_push(g, op, y, &h, 1);
    else
        sf_tensor_release_data(g, h); /* nothing reads h after this pass */
    return y;
}

sf_tensor *sf_elu1(sf_ctx *g, sf_tensor *x) {
    sf_tensor *y = sf_tensor_like(g, x);
    size_t n = x->numel;
#pragma omp parallel for if (n > EW_OMP_MIN / 8)
    for (size_t i = 0; i < n; i++) {
        float v = x->data[i];
        /* elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise: positive, as linear attention needs. */
        y->data[i] = v > 0.0f ? v + 1.0f : expf(v);
    }
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_ELU1, y, &x, 1);
    return y;
}

/* y = x + 1 (x > 0), exp(x) (x <= 0): dx += G (x > 0), G y (x <= 0), y = exp(x) there. */
void sf_elu1_backward(sf_ctx *g, sf_node *node) {
    const float *x = node->in[0]->data, *y = node->out->data, *G = node->out->grad;
    int acc; /* a new dx is written, never read */
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + (x[i] > 0.0f ? G[i] : G[i] * y[i]);
}

/* ---- dropout and drop path ---- */

/* 1/(1-p), or 0 when everything is dropped (p = 1), so no division by zero. */
static float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

sf_tensor *sf_dropout(sf_ctx *g, sf_tensor *x, float p) {
    SF_ASSERT(p >= 0.0f && p <= 1.0f, "dropout: p = %g outside [0, 1]", (double)p);
    if (!g->training || p == 0.0f) return x;
    sf_tensor *y = sf_tensor_like(g, x);
    size_t n = x->numel;
    float scale = keep_scale(p);
    int record = sf_needs_grad(g, &x, 1);
    uint8_t *mask = record ? sf_arena_alloc(g->arena, n) : NULL; // (numel) 1 = kept
    /* Serial on purpose: one RNG stream, the same mask for any thread count. */
    for (size_t i = 0; i < n; i++) {
        int keep = sf_rng_uniform(&g->rng) >= p;
        if (mask) mask[i] = (uint8_t)keep;
        y->data[i] = keep ? x->data[i] * scale : 0.0f;
    }
    if (record) {
        sf_node *node = sf_tape_push(g, SF_OP_DROPOUT, y, &x, 1);
        node->saved = mask;
        node->farg[0] = scale;
    }
    return y;
}

/* y = x m / (1 - p): dx += G m / (1 - p), with the forward's mask m. */
void sf_dropout_backward(sf_ctx *g, sf_node *node) {
    const uint8_t *mask = node->saved;
    const float *G = node->out->grad;
    float scale = node->farg[0];
    int acc; /* a new dx is written, never read */
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    size_t n = node->out->numel;
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + (mask[i] ? G[i] * scale : 0.0f);
}

/* The per-sample factors m_b / (1 - p) of a drop path, B draws from g->rng in sample order
 * (sf_drop_path and sf_residual draw alike). m_b = 1 when u_b >= p, i.e. timm's
 * floor(1 - p + u_b). */
static float *drop_path_scales(sf_ctx *g, int B, float p) {
    float *f = sf_arena_alloc(g->arena, (size_t)B * sizeof(float)); // (B)
    for (int b = 0; b < B; b++) f[b] = sf_rng_uniform(&g->rng) >= p ? keep_scale(p) : 0.0f;
    return f;
}

sf_tensor *sf_drop_path(sf_ctx *g, sf_tensor *x, float p) {
    SF_ASSERT(p >= 0.0f && p <= 1.0f, "drop_path: p = %g outside [0, 1]", (double)p);
    if (!g->training || p == 0.0f) return x;
    int B = x->shape[0];
    size_t S = x->numel / (size_t)B; /* elements per sample */
    sf_tensor *y = sf_tensor_like(g, x); // (B, S)
    int record = sf_needs_grad(g, &x, 1);
    float *f = drop_path_scales(g, B, p); // (B) m_b / (1-p)
#pragma omp parallel for if (x->numel > EW_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < S; i++) y->data[b * S + i] = x->data[b * S + i] * f[b];
    if (record) sf_tape_push(g, SF_OP_DROP_PATH, y, &x, 1)->saved = f;
    return y;
}

/* y_b = x_b m_b / (1 - p): dx_b += G_b m_b / (1 - p) (docs/math/basic.md#drop-path). */
void sf_drop_path_backward(sf_ctx *g, sf_node *node) {
    const float *f = node->saved, *G = node->out->grad;
    int acc; /* a new dx is written, never read */
    float *dx = sf_grad_dst(g, node->in[0], &acc);
    int B = node->out->shape[0];
    size_t S = node->out->numel / (size_t)B;
#pragma omp parallel for if (node->out->numel > EW_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < S; i++) dx[b * S + i] = (acc ? dx[b * S + i] : 0.0f) + G[b * S + i] * f[b];
}

/* ---- residual connection ---- */

sf_tensor *sf_residual(sf_ctx *g, sf_tensor *x, sf_tensor *y, float p) {
    char sx[64], sy[64];
    SF_ASSERT(sf_same_shape(x, y) && x != y, "residual: x %s and branch y %s must be distinct tensors of one shape",
              sf_shape_str(x, sx, sizeof sx), sf_shape_str(y, sy, sizeof sy));
    SF_ASSERT(p >= 0.0f && p <= 1.0f, "residual: drop path p = %g outside [0, 1]", (double)p);
    const int B = x->shape[0];
    const size_t S = x->numel / (size_t)B; /* elements per sample */
    sf_tensor *out = sf_tensor_like(g, x); // (B, S)
    float *f = g->training && p > 0.0f ? drop_path_scales(g, B, p) : NULL; // (B) m_b / (1 - p)
#pragma omp parallel for if (x->numel > EW_OMP_MIN)
    for (int b = 0; b < B; b++) {
        const float *xb = x->data + (size_t)b * S, *yb = y->data + (size_t)b * S;
        float *ob = out->data + (size_t)b * S;
        if (f) {
            const float fb = f[b];
            for (size_t i = 0; i < S; i++) ob[i] = xb[i] + yb[i] * fb;
        } else {
            for (size_t i = 0; i < S; i++) ob[i] = xb[i] + yb[i];
        }
    }
    sf_tensor *in[2] = {x, y};
    if (sf_needs_grad(g, in, 2)) sf_tape_push(g, SF_OP_RESIDUAL, out, in, 2)->saved = f;
    return out;
}

/* Forward was out_b = x_b + y_b s_b (s_b = m_b / (1 - p), 1 without drop path), so with
 * G = dL/dout: dx = G, dy_b = G_b s_b (docs/math/basic.md#residual). As in sf_add, x takes
 * G's buffer itself when it has no gradient yet; dy is one pass (sf_add's copy of G and drop
 * path's scaling of it were two). */
void sf_residual_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->in[1];
    float *G = node->out->grad;
    const float *f = node->saved;
    const int B = node->out->shape[0];
    const size_t n = node->out->numel, S = n / (size_t)B;
    if (x->requires_grad) {
        if (!x->grad) {
            x->grad = G;
        } else {
#pragma omp parallel for simd if (parallel : n > EW_OMP_MIN)
            for (size_t i = 0; i < n; i++) x->grad[i] += G[i];
        }
    }
    if (!y->requires_grad) return;
    if (!y->grad && !(x->requires_grad && x->grad == G) && !f) {
        y->grad = G; /* x did not take it */
        return;
    }
    int acc;
    float *dy = sf_grad_dst(g, y, &acc); /* a new dy is written, not read */
#pragma omp parallel for if (n > EW_OMP_MIN)
    for (int b = 0; b < B; b++) {
        const float s = f ? f[b] : 1.0f;
        const float *Gb = G + (size_t)b * S;
        float *db = dy + (size_t)b * S;
        for (size_t i = 0; i < S; i++) db[i] = (acc ? db[i] : 0.0f) + Gb[i] * s;
    }
}
