/* matmul.c — linear layers and batched matrix products, every product through sf_gemm_prec
 * (fp32 or bf16 operands by train.precision, src/ops/bf16.c; the bias sum stays fp32).
 *
 * sf_linear flattens every leading dim of x into rows: y = x W^T + b. sf_matmul loops over
 * equal leading (batch) dims; transposes are absorbed by gemm flags, never materialized.
 * Derivations: docs/math/basic.md#linear and docs/math/basic.md#matmul.
 *
 * Deliberately not here: broadcasting of leading dims in sf_matmul (both operands carry the
 * same batch dims), fused activations, weights stored transposed.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks.
 * Generic matrix sizes: rows R, in features I, out features O; products (M x K)(K x N).
 */
#include "ops_internal.h"

#include <string.h>

/* ---- linear ---- */

/* x_last_use: the caller hands x over, nothing reads it after this call (forward or
 * backward of any other op). Then x's fp32 data is given back to the arena here; where the
 * backward still needs x (for dW, in bf16) the node keeps its bf16 copy, which is exactly the
 * operand the products read: the same numbers, half the memory, one conversion instead of
 * two. In fp32 the dW product needs x itself, so it is kept. An x made by a *_to_linear op
 * in bf16 arrives as that bf16 copy alone (x->data16), which then serves the same way.
 * y16 (bf16 precision, with a bias): y is written in bf16 alone where the product can write
 * it so (oneDNN's bf16 kernels, sf_gemm_prec_writes_bf16); elsewhere in fp32, for the caller
 * to round. */
static sf_tensor *linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int x_last_use, int y16) {
    char sx[64], sw[64];
    SF_ASSERT(w->ndim == 2, "linear weight %s must be (out, in), got %s", w->name ? w->name : "",
              sf_shape_str(w, sw, sizeof sw));
    int O = w->shape[0], I = w->shape[1];
    SF_ASSERT(x->shape[x->ndim - 1] == I, "linear: x %s does not end in in=%d (weight %s %s)",
              sf_shape_str(x, sx, sizeof sx), I, w->name ? w->name : "",
              sf_shape_str(w, sw, sizeof sw));
    SF_ASSERT(!b || (int)b->numel == O, "linear: bias has %zu entries, expected %d", b->numel, O);
    SF_ASSERT(x->data || x->data16, "linear: x %s has no data (released: handed over to an earlier op)",
              sf_shape_str(x, sx, sizeof sx));
    int R = (int)(x->numel / (size_t)I);

    int shape[SF_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = O;
    const int bf16 = sf_precision_get() != SF_PREC_FP32;
    const int write16 = y16 && b && bf16 && sf_gemm_prec_writes_bf16();
    sf_tensor *y = write16 ? sf_tensor_new_bf16(g, x->ndim, shape) : sf_tensor_new(g, x->ndim, shape); // (R, O)

    sf_tensor *in[3] = {x, w, b};
    int n_in = b ? 3 : 2;
    const int record = sf_needs_grad(g, in, n_in);
    SF_ASSERT(!x->data16 || (x_last_use && bf16), "linear: x %s holds bf16 values only, for a handed-over x in bf16",
              sf_shape_str(x, sx, sizeof sx));
    /* x's bf16 copy: the operand of this product and, when x is handed over in bf16, of the
     * dW product; made here unless x came in bf16 alone */
    const int keep16 = x_last_use && bf16 && record && w->requires_grad;
    uint16_t *x16 = x->data16;
    if (!x16 && keep16) {
        x16 = sf_arena_alloc(g->arena, x->numel * sizeof *x16);
        sf_bf16_convert(x->data, x16, x->numel);
    }

    sf_gemm_prec_weight(0, 1, R, O, I, 1.0f, x->data, x16, w, b ? b->data : NULL, 0.0f, write16 ? NULL : y->data,
                        write16 ? y->data16 : NULL);

    if (record) {
        sf_node *node = sf_tape_push(g, SF_OP_LINEAR, y, in, n_in);
        node->iarg[0] = R;
        node->iarg[1] = I;
        node->iarg[2] = O;
        node->saved = keep16 ? x16 : NULL;
        /* x an activation's output made for this layer alone: its gradient is this layer's in
         * bf16 (ops_internal.h, sf_act_grad_widen) */
        sf_node *act = g->tape_len >= 2 ? &g->tape[g->tape_len - 2] : NULL;
        if (bf16 && x_last_use && x->data16 && act && act->out == x &&
            (act->op == SF_OP_GELU || act->op == SF_OP_QUICK_GELU || act->op == SF_OP_RELU))
            node->iarg[3] = act->iarg[1] = 1;
    }
    /* Handed over and not needed in fp32 by the backward: dW reads x16 or nothing. A kept
     * data16 now belongs to the node (its backward gives it back). */
    if (keep16 && x->data16) x->data16 = NULL;
    if (x_last_use && (keep16 || !record || !w->requires_grad)) sf_tensor_release_data(g, x);
    return y;
}

sf_tensor *sf_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b) { return linear(g, x, w, b, 0, 0); }

sf_tensor *sf_linear_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b) {
    return linear(g, x, w, b, 1, 0);
}

/* db += colsum(G), G (R, O), in one order whatever the thread count: the rows in blocks of
 * COLSUM_ROWS, each block summed row by row into its own partial, the partials added in
 * block order. With G16 the same pass writes G in bf16 for the products: one read of G
 * instead of two (the sum was a matrix-vector product of its own, 0.4-0.5 ms a layer for
 * DeiT-S's qkv and fc1 on 2 threads). fp32 and bf16 runs take the same sums, so db is the
 * same in both. */
#define COLSUM_ROWS 64

/* db += the partials (blocks, O) in block order, and the partials go back to the arena. */
static void colsum_finish(sf_ctx *g, float *db, float *partial, int blocks, int O) {
    for (int k = 0; k < blocks; k++) {
        const float *p = partial + (size_t)k * O;
#pragma omp simd
        for (int o = 0; o < O; o++) db[o] += p[o];
    }
    sf_arena_release(g->arena, partial, (size_t)blocks * O * sizeof(float));
}

static void colsum_convert(sf_ctx *g, float *db, const float *G, uint16_t *G16, int R, int O) {
    const int blocks = (R + COLSUM_ROWS - 1) / COLSUM_ROWS;
    const size_t bytes = (size_t)blocks * O * sizeof(float);
    float *partial = sf_arena_alloc(g->arena, bytes); // (blocks, O)
#pragma omp parallel for schedule(static) if ((size_t)R * O >= 65536 && !omp_in_parallel())
    for (int k = 0; k < blocks; k++) {
        float *p = partial + (size_t)k * O;
        const int r1 = (k + 1) * COLSUM_ROWS < R ? (k + 1) * COLSUM_ROWS : R;
        memset(p, 0, (size_t)O * sizeof(float));
        for (int r = k * COLSUM_ROWS; r < r1; r++) {
            const float *row = G + (size_t)r * O;
#pragma omp simd
            for (int o = 0; o < O; o++) p[o] += row[o];
            if (G16) sf_bf16_convert(row, G16 + (size_t)r * O, (size_t)O);
        }
    }
    colsum_finish(g, db, partial, blocks, O);
}

/* Forward was y = x W^T + b (x (R, I), W (O, I), b (O)), so with G = dL/dy (R, O):
 * dx = G W, dW = G^T x, db = colsum(G). Saved: x's bf16 copy when x was handed over in bf16
 * (then x->data is gone); otherwise nothing, x and W are the inputs. */

/* Teeth: the broken variant drops the dx term, so the check on x must fail. */
static int linear_wants_dx(const sf_node *node) { return node->in[0]->requires_grad && !sf_break_backward("linear"); }

/* G feeds both products: in bf16 it is converted once for the two (G16), where both run. */
static int linear_wants_g16(const sf_node *node) {
    return linear_wants_dx(node) && node->in[1]->requires_grad && sf_precision_get() != SF_PREC_FP32;
}

/* dx = G W and dW += G^T x, from G or its bf16 copy G16; gives back x's saved bf16 copy. */
static void linear_products(sf_ctx *g, sf_node *node, const float *G, const uint16_t *G16) {
    sf_tensor *x = node->in[0], *w = node->in[1];
    const int R = node->iarg[0], I = node->iarg[1], O = node->iarg[2];
    const uint16_t *x16 = node->saved;
    if (linear_wants_dx(node) && node->iarg[3] && !x->grad && sf_gemm_prec_writes_bf16()) {
        /* x an activation's output for this layer alone (linear): dx in bf16 alone, for the
         * activation's backward to read */
        SF_ASSERT(!x->grad16, "linear: an activation's gradient in bf16 written twice");
        x->grad16 = sf_arena_alloc(g->arena, x->numel * sizeof *x->grad16);
        sf_gemm_prec_weight(0, 0, R, I, O, 1.0f, G, G16, w, NULL, 0.0f, NULL, x->grad16); // (R, I)
    } else if (linear_wants_dx(node)) {
        int acc; /* a new dx is written (beta 0): no zero fill, no read */
        float *dx = sf_grad_dst(g, x, &acc);
        sf_gemm_prec_weight(0, 0, R, I, O, 1.0f, G, G16, w, NULL, acc ? 1.0f : 0.0f, dx, NULL); // (R, I)
    }
    if (w->requires_grad) {
        sf_gemm_prec_w(1, 0, O, I, R, 1.0f, G, G16, x->data, x16, 1.0f, sf_grad(g, w)); // (O, I)
        if (x16) sf_arena_release(g->arena, (void *)x16, x->numel * sizeof *x16);
    }
}

void sf_linear_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *b = node->n_in > 2 ? node->in[2] : NULL;
    const int R = node->iarg[0], O = node->iarg[2];
    const float *G = node->out->grad; // (R, O)
    /* G16 is made in the pass that sums G for db where there is a bias */
    const size_t nG = (size_t)R * O;
    uint16_t *G16 = linear_wants_g16(node) ? sf_arena_alloc(g->arena, nG * sizeof *G16) : NULL;
    if (b && b->requires_grad)
        colsum_convert(g, sf_grad(g, b), G, G16, R, O);
    else if (G16)
        sf_bf16_convert(G, G16, nG);
    linear_products(g, node, G, G16);
    if (G16) sf_arena_release(g->arena, G16, nG * sizeof *G16);
}

/* ---- a linear layer into a GELU into the next linear layer (an MLP's fc1 and activation) ---- */

/* In bf16 the layer's output h is kept in bf16 alone, as the GELU's input and the input its
 * backward reads (what autocast does with a linear layer's output): half the memory of
 * the widest activation of a ViT block (B N 4C), and half the bytes read by the GELU's two
 * passes. oneDNN's bf16 kernels write h so; on fp32 kernels the GELU's pass rounds it. */
sf_tensor *sf_linear_act_to_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, sf_op act) {
    const int bf16 = sf_precision_get() != SF_PREC_FP32;
    sf_tensor *h = linear(g, x, w, b, 1, bf16);
    const int lin = g->tape_len - 1; /* the linear layer's node, if it recorded one */
    const int lin_recorded = lin >= 0 && g->tape[lin].out == h;
    sf_tensor *a = bf16 ? sf_act_bf16_input(g, h, act) : sf_act_to_linear(g, h, act);
    /* h is read by nothing but the activation: its backward runs the linear layer's too */
    if (lin_recorded && g->tape_len > 0 && g->tape[g->tape_len - 1].out == a) g->tape[g->tape_len - 1].iarg[0] = lin + 1;
    return a;
}

/* One row of G = dL/dh: Ga ⊙ f'(h) for the activation op, with the expression of the
 * activation's own backward (its bits). h's row is in fp32 (hv) or in bf16 alone (h16, whose
 * slopes are elementwise.c's, from GELU's and QuickGELU's tables where tabled). */
static void act_grad_row(float *row, const float *Ga, const float *hv, const uint16_t *h16, int O, sf_op op,
                         float keep, int tabled) {
    if (h16) {
        sf_act_bf16_grad(op, row, Ga, h16, (size_t)O, keep, tabled);
        return;
    }
    switch (op) {
    case SF_OP_GELU:
#pragma omp simd
        for (int o = 0; o < O; o++) row[o] = Ga[o] * sf_gelu_slope(hv[o], keep);
        return;
    case SF_OP_QUICK_GELU:
#pragma omp simd
        for (int o = 0; o < O; o++) row[o] = Ga[o] * sf_quick_gelu_slope(hv[o], keep);
        return;
    case SF_OP_RELU:
#pragma omp simd
        for (int o = 0; o < O; o++) row[o] = sf_relu_grad(hv[o], Ga[o]);
        return;
    default: break;
    }
    SF_ASSERT(0, "linear_act: %s", sf_op_name(op));
}

/* The activation's backward (act: a = f(h), f GELU, QuickGELU or ReLU) and then the linear
 * layer's (lin: h = x W^T + b) in one pass over a's gradient: each block of COLSUM_ROWS rows
 * of G = dL/dh is computed, summed for db and, in bf16, rounded for the two products while in
 * cache. G in fp32 is written only where a product reads it (fp32, or bf16 without the two
 * products); in bf16 its fp32 write and the read of colsum_convert are gone. The same values
 * as the activation's backward, summed in the same blocks in the same order: the activation's
 * then sf_linear's bits. */
void sf_linear_act_backward(sf_ctx *g, sf_node *act, sf_node *lin) {
    sf_tensor *h = act->in[0], *b = lin->n_in > 2 ? lin->in[2] : NULL;
    SF_ASSERT(lin->out == h && !h->grad, "linear_act: the activation's input is not its linear layer's output alone");
    const int R = lin->iarg[0], O = lin->iarg[2];
    const size_t nG = (size_t)R * O;
    const float *Ga = act->out->grad, *hv = h->data;
    const uint16_t *Ga16 = act->out->grad16; /* a's gradient in bf16 alone, or Ga */
    const int ga_bf16 = act->iarg[1];        /* a's gradient in bf16: Ga16, or Ga rounded here */
    const uint16_t *h16 = h->data16; /* h in bf16 alone (sf_act_bf16_input), or hv */
    const sf_op op = (sf_op)act->op;
    /* teeth, as the activation's own backward: GELU's x phi(x) term, QuickGELU's k x s (1 - s) */
    const float keep = sf_break_backward(op == SF_OP_GELU ? "gelu" : op == SF_OP_QUICK_GELU ? "quick_gelu" : "") ? 0.0f : 1.0f;
    const int tabled = sf_act_bf16_tabled(op, nG);
    uint16_t *G16 = linear_wants_g16(lin) ? sf_arena_alloc(g->arena, nG * sizeof *G16) : NULL;
    float *G = G16 ? NULL : sf_arena_alloc(g->arena, nG * sizeof *G); // (R, O), fp32 only where read
    float *db = b && b->requires_grad ? sf_grad(g, b) : NULL;
    const int blocks = (R + COLSUM_ROWS - 1) / COLSUM_ROWS;
    float *partial = db ? sf_arena_alloc(g->arena, (size_t)blocks * O * sizeof(float)) : NULL; // (blocks, O)
    const size_t row_bytes = G ? 0 : (size_t)sf_thread_slots() * O * sizeof(float);
    float *rows = G ? NULL : sf_arena_alloc(g->arena, row_bytes); // (threads, O): a row before rounding
    /* a and h both in bf16, slopes from the tables: one loop reads both; else a row of Ga widened */
    const int one_loop = Ga16 && h16 && tabled && keep == 1.0f && op != SF_OP_RELU;
    const size_t ga_bytes = ga_bf16 && !one_loop ? (size_t)sf_thread_slots() * O * sizeof(float) : 0;
    float *ga_rows = ga_bytes ? sf_arena_alloc(g->arena, ga_bytes) : NULL; // (threads, O)
#pragma omp parallel for schedule(static) if (nG >= 65536 && !omp_in_parallel())
    for (int k = 0; k < blocks; k++) {
        float *p = partial ? partial + (size_t)k * O : NULL;
        const int r1 = (k + 1) * COLSUM_ROWS < R ? (k + 1) * COLSUM_ROWS : R;
        if (p) memset(p, 0, (size_t)O * sizeof(float));
        for (int r = k * COLSUM_ROWS; r < r1; r++) {
            const size_t at = (size_t)r * O;
            float *row = G ? G + at : rows + (size_t)sf_thread_slot() * O;
            const float *ga = Ga ? Ga + at : NULL;
            if (one_loop) {
                sf_act_bf16_grad_bf16(op, row, Ga16 + at, h16 + at, (size_t)O);
            } else if (ga_bf16) {
                float *wide = ga_rows + (size_t)sf_thread_slot() * O;
                sf_act_grad_widen(wide, ga, Ga16 ? Ga16 + at : NULL, (size_t)O);
                act_grad_row(row, wide, h16 ? NULL : hv + at, h16 ? h16 + at : NULL, O, op, keep, tabled);
            } else {
                act_grad_row(row, ga, h16 ? NULL : hv + at, h16 ? h16 + at : NULL, O, op, keep, tabled);
            }
            if (p) {
#pragma omp simd
                for (int o = 0; o < O; o++) p[o] += row[o];
            }
            if (G16) sf_bf16_convert(row, G16 + at, (size_t)O);
        }
    }
    if (rows) sf_arena_release(g->arena, rows, row_bytes);
    if (ga_rows) sf_arena_release(g->arena, ga_rows, ga_bytes);
    if (db) colsum_finish(g, db, partial, blocks, O);
    linear_products(g, lin, G, G16);
    if (G16) sf_arena_release(g->arena, G16, nG * sizeof *G16);
    if (G) sf_arena_release(g->arena, G, nG * sizeof *G);
}

/* ---- matmul ---- */

sf_tensor *sf_matmul(sf_ctx *g, sf_tensor *a, sf_tensor *b, int trans_a, int trans_b) {
    char sa[64], sb[64];
    SF_ASSERT(a->ndim >= 2 && a->ndim == b->ndim, "matmul: a %s and b %s need equal ndim >= 2",
              sf_shape_str(a, sa, sizeof sa), sf_shape_str(b, sb, sizeof sb));
    int nd = a->ndim;
    int batch = 1;
    for (int i = 0; i < nd - 2; i++) {
        SF_ASSERT(a->shape[i] == b->shape[i], "matmul: batch dims of a %s and b %s differ",
                  sf_shape_str(a, sa, sizeof sa), sf_shape_str(b, sb, sizeof sb));
        batch *= a->shape[i];
    }
    int M = trans_a ? a->shape[nd - 1] : a->shape[nd - 2];
    int K = trans_a ? a->shape[nd - 2] : a->shape[nd - 1];
    int Kb = trans_b ? b->shape[nd - 1] : b->shape[nd - 2];
    int N = trans_b ? b->shape[nd - 2] : b->shape[nd - 1];
    SF_ASSERT(K == Kb, "matmul: inner dims differ: a %s%s, b %s%s", sf_shape_str(a, sa, sizeof sa),
              trans_a ? "^T" : "", sf_shape_str(b, sb, sizeof sb), trans_b ? "^T" : "");

    int shape[SF_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[nd - 2] = M;
    shape[nd - 1] = N;
    sf_tensor *c = sf_tensor_new(g, nd, shape); // (..., M, N)
    size_t sa_ = (size_t)M * K, sb_ = (size_t)K * N, sc_ = (size_t)M * N;
    /* Batch loop stays serial: OpenBLAS threads each product itself. */
    for (int i = 0; i < batch; i++)
        sf_gemm_prec(trans_a, trans_b, M, N, K, 1.0f, a->data + i * sa_, b->data + i * sb_, 0.0f,
                c->data + i * sc_);

    sf_tensor *in[2] = {a, b};
    if (sf_needs_grad(g, in, 2)) {
        sf_node *node = sf_tape_push(g, SF_OP_MATMUL, c, in, 2);
        node->iarg[0] = batch;
        node->iarg[1] = M;
        node->iarg[2] = N;
        node->iarg[3] = K;
        node->iarg[4] = trans_a;
        node->iarg[5] = trans_b;
    }
    return c;
}

/* Forward was C = op(A) op(B), G = dL/dC (M, N). Then d op(A) = G op(B)^T and
 * d op(B) = op(A)^T G; a transposed operand takes the transpose of its product:
 *   A stored (M, K): dA = G op(B)^T           A stored (K, M): dA = op(B) G^T
 *   B stored (K, N): dB = op(A)^T G           B stored (N, K): dB = G^T op(A)
 * and op(X)^T against stored X is just the opposite gemm flag. */
void sf_matmul_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *a = node->in[0], *b = node->in[1];
    int batch = node->iarg[0], M = node->iarg[1], N = node->iarg[2], K = node->iarg[3];
    int ta = node->iarg[4], tb = node->iarg[5];
    size_t sa_ = (size_t)M * K, sb_ = (size_t)K * N, sc_ = (size_t)M * N;
    const float *G = node->out->grad; // (batch, M, N)
    /* Every slice of da and db is written by one product: new buffers take beta 0. */
    int acc_a = 1, acc_b = 1;
    float *da = a->requires_grad ? sf_grad_dst(g, a, &acc_a) : NULL;
    float *db = b->requires_grad ? (b == a ? da : sf_grad_dst(g, b, &acc_b)) : NULL;
    if (b == a) acc_b = 1; /* a @ a: the second product adds to the first */
    const float beta_a = acc_a ? 1.0f : 0.0f, beta_b = acc_b ? 1.0f : 0.0f;
    for (int i = 0; i < batch; i++) {
        const float *Ai = a->data + i * sa_, *Bi = b->data + i * sb_, *Gi = G + i * sc_;
        if (da) {
            if (!ta) /* (M, K) = G (M, N) . op(B)^T (N, K) */
                sf_gemm_prec(0, !tb, M, K, N, 1.0f, Gi, Bi, beta_a, da + i * sa_);
            else /* (K, M) = op(B) (K, N) . G^T (N, M) */
                sf_gemm_prec(tb, 1, K, M, N, 1.0f, Bi, Gi, beta_a, da + i * sa_);
        }
        if (db) {
            if (!tb) /* (K, N) = op(A)^T (K, M) . G (M, N) */
                sf_gemm_prec(!ta, 0, K, N, M, 1.0f, Ai, Gi, beta_b, db + i * sb_);
            else /* (N, K) = G^T (N, M) . op(A) (M, K) */
                sf_gemm_prec(1, ta, N, K, M, 1.0f, Gi, Ai, beta_b, db + i * sb_);
        }
    }
}
