/* shape.c — ops that move data without arithmetic: reshape (shares the data), general
 * permute (materialized), the multi-head split/merge of attention, token slicing and
 * concatenation (cls token), and the mean over tokens (final pooling).
 *
 * Every backward is the adjoint of a copy: it scatters the output gradient back to where
 * each element came from, accumulating (+=). Derivations: docs/math/basic.md#shape-ops.
 *
 * Deliberately not here: strided views (docs/architecture.md: tensors are contiguous; a view that is
 * not contiguous is materialized by sf_permute), more than 4 dims, inferred (-1) dims.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks;
 * P parts of a fused projection (3 for qkv).
 */
#include "ops_internal.h"

#include <string.h>

/* Below this many elements a parallel region costs more than it saves. */
#define SH_OMP_MIN 32768

/* ---- reshape ---- */

sf_tensor *sf_reshape(sf_ctx *g, sf_tensor *x, int ndim, const int *shape) {
    char sx[64];
    SF_ASSERT(ndim >= 1 && ndim <= SF_MAX_DIMS, "reshape: ndim %d", ndim);
    sf_tensor *y = sf_arena_alloc(g->arena, sizeof(sf_tensor));
    memset(y, 0, sizeof(*y));
    y->ndim = ndim;
    y->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) y->shape[i] = 1;
    for (int i = 0; i < ndim; i++) {
        SF_ASSERT(shape[i] > 0, "reshape: dim %d is %d", i, shape[i]);
        y->shape[i] = shape[i];
        y->numel *= (size_t)shape[i];
    }
    SF_ASSERT(y->numel == x->numel, "reshape: x %s has %zu elements, the new shape %zu",
              sf_shape_str(x, sx, sizeof sx), x->numel, y->numel);
    /* Same memory: contiguous row-major data reads the same under any shape. The gradient
     * is separate (y->grad is its own buffer), so backward copies it over. */
    y->data = x->data;
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_RESHAPE, y, &x, 1);
    return y;
}

/* y = x (reinterpreted): dx += dy elementwise. A dx that does not exist yet takes dy's
 * buffer itself: nothing reads y's gradient after this backward (see sf_add_backward). */
void sf_reshape_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0];
    float *G = node->out->grad;
    if (!x->grad) {
        x->grad = G;
        return;
    }
    float *dx = sf_grad(g, x);
    size_t n = node->out->numel;
#pragma omp parallel for simd if (parallel : n > SH_OMP_MIN)
    for (size_t i = 0; i < n; i++) dx[i] += G[i];
}

/* ---- permute ---- */

/* Pads a permutation of nd <= 4 dims to 4 dims with leading identity dims, and gives x's
 * padded shape and strides (in elements). */
static void permute_pad(const sf_tensor *x, const int *perm, int *shape4, size_t *stride4,
                        int *perm4) {
    int off = SF_MAX_DIMS - x->ndim;
    for (int i = 0; i < SF_MAX_DIMS; i++) {
        shape4[i] = i < off ? 1 : x->shape[i - off];
        perm4[i] = i < off ? i : off + perm[i - off];
    }
    stride4[SF_MAX_DIMS - 1] = 1;
    for (int i = SF_MAX_DIMS - 2; i >= 0; i--) stride4[i] = stride4[i + 1] * (size_t)shape4[i + 1];
}

/* Walks the output in order; output element (i0, i1, i2, i3) is x's element at
 * sum_k i_k * stride4[perm4[k]]. forward: out[o] = x[off]; backward: dx[off] += dout[o].
 * The map is a bijection, so parallel outer iterations never write the same element. */
/* The index walk of a permutation: gather x into y (forward), or scatter y back into x,
 * adding (backward into an existing gradient) or writing (into a new one). */
typedef enum { PERMUTE_GATHER, PERMUTE_SCATTER_ADD, PERMUTE_SCATTER } permute_mode;

static void permute_walk(float *xbuf, float *obuf, const int *shape4, const size_t *stride4,
                         const int *perm4, permute_mode mode) {
    int o0 = shape4[perm4[0]], o1 = shape4[perm4[1]], o2 = shape4[perm4[2]], o3 = shape4[perm4[3]];
    size_t s0 = stride4[perm4[0]], s1 = stride4[perm4[1]], s2 = stride4[perm4[2]],
           s3 = stride4[perm4[3]];
#pragma omp parallel for collapse(2) if ((size_t)o0 * o1 * o2 * o3 > SH_OMP_MIN)
    for (int i0 = 0; i0 < o0; i0++)
        for (int i1 = 0; i1 < o1; i1++) {
            float *o = obuf + ((size_t)i0 * o1 + i1) * o2 * o3;
            size_t base = i0 * s0 + i1 * s1;
            for (int i2 = 0; i2 < o2; i2++, o += o3) {
                float *xr = xbuf + base + i2 * s2;
                if (mode == PERMUTE_SCATTER_ADD)
                    for (int i3 = 0; i3 < o3; i3++) xr[i3 * s3] += o[i3];
                else if (mode == PERMUTE_SCATTER)
                    for (int i3 = 0; i3 < o3; i3++) xr[i3 * s3] = o[i3];
                else
                    for (int i3 = 0; i3 < o3; i3++) o[i3] = xr[i3 * s3];
            }
        }
}

sf_tensor *sf_permute(sf_ctx *g, sf_tensor *x, const int *perm) {
    int seen = 0, shape[SF_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        SF_ASSERT(perm[i] >= 0 && perm[i] < x->ndim && !(seen & (1 << perm[i])),
                  "permute: perm is not a permutation of %d dims (entry %d is %d)", x->ndim, i,
                  perm[i]);
        seen |= 1 << perm[i];
        shape[i] = x->shape[perm[i]];
    }
    sf_tensor *y = sf_tensor_new(g, x->ndim, shape);
    int shape4[SF_MAX_DIMS], perm4[SF_MAX_DIMS];
    size_t stride4[SF_MAX_DIMS];
    permute_pad(x, perm, shape4, stride4, perm4);
    permute_walk(x->data, y->data, shape4, stride4, perm4, PERMUTE_GATHER);
    if (sf_needs_grad(g, &x, 1)) {
        sf_node *node = sf_tape_push(g, SF_OP_PERMUTE, y, &x, 1);
        for (int i = 0; i < x->ndim; i++) node->iarg[i] = perm[i];
    }
    return y;
}

/* y[i] = x[perm(i)]: dx[perm(i)] += dy[i], the same index walk run as a scatter. */
void sf_permute_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0];
    int shape4[SF_MAX_DIMS], perm4[SF_MAX_DIMS];
    size_t stride4[SF_MAX_DIMS];
    permute_pad(x, node->iarg, shape4, stride4, perm4);
    int acc; /* a permutation writes every element of a new dx */
    float *dx = sf_grad_dst(g, x, &acc);
    permute_walk(dx, node->out->grad, shape4, stride4, perm4, acc ? PERMUTE_SCATTER_ADD : PERMUTE_SCATTER);
}

/* ---- multi-head split / merge ---- */

/* One (b, h) block: rows n of the (N, D) head slice sit at x[b, n, col0 + ...] with row
 * stride ldx in x. copy: head[n, d] = x[...]; backward: dx[...] += dhead[n, d]. */
static void heads_block(float *xb, float *hb, int N, int D, size_t ldx, int to_x, int acc) {
    for (int n = 0; n < N; n++) {
        float *xr = xb + (size_t)n * ldx, *hr = hb + (size_t)n * D;
        if (!to_x)
            memcpy(hr, xr, (size_t)D * sizeof(float));
        else if (acc)
            for (int d = 0; d < D; d++) xr[d] += hr[d];
        else
            memcpy(xr, hr, (size_t)D * sizeof(float));
    }
}

sf_tensor *sf_heads_split(sf_ctx *g, sf_tensor *x, int parts, int part, int H) {
    char sx[64];
    SF_ASSERT(x->ndim == 3 && parts >= 1 && part >= 0 && part < parts && H >= 1 &&
                  x->shape[2] % (parts * H) == 0,
              "heads_split: x %s cannot split into %d parts of %d heads (part %d)",
              sf_shape_str(x, sx, sizeof sx), parts, H, part);
    int B = x->shape[0], N = x->shape[1], D = x->shape[2] / (parts * H);
    size_t W = (size_t)x->shape[2]; /* P*H*D, laid out [P][H][D] */
    sf_tensor *y = sf_tensor_new4(g, B, H, N, D); // (B, H, N, D)
#pragma omp parallel for collapse(2) if (y->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            heads_block(x->data + (size_t)b * N * W + ((size_t)part * H + h) * D,
                        y->data + ((size_t)b * H + h) * N * D, N, D, W, 0, 0);
    if (sf_needs_grad(g, &x, 1)) {
        sf_node *node = sf_tape_push(g, SF_OP_HEADS_SPLIT, y, &x, 1);
        node->iarg[0] = parts;
        node->iarg[1] = part;
    }
    return y;
}

/* Fast path of the split backward when dx does not exist yet: the splits of one x are
 * recorded one after the other (q, k, v), so every consumer of their outputs comes later on
 * the tape and all their gradients are final when the last of them runs its backward. That
 * node then writes the whole dx in one pass, slice by slice: each (b, part, h) block from
 * its split's gradient (for a heads_split_norm, the normalization's gradient, computed on the
 * way), zeros where a part has no split or no gradient, and marks the sibling nodes done
 * (iarg[2]). This replaces a zero fill and one read-modify-write pass per part, and for the
 * normalized parts the write and reread of their unnormalized gradient. Returns 0 if not
 * applicable. */
int sf_heads_split_gather(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0];
    int parts = node->iarg[0];
    if (x->grad || parts > 8) return 0;
    const sf_node *src[8] = {0}; /* the split of each part, NULL: none */
    int idx = (int)(node - g->tape);
    for (int j = idx; j >= 0; j--) {
        sf_node *s = &g->tape[j];
        if ((s->op != SF_OP_HEADS_SPLIT && s->op != SF_OP_HEADS_SPLIT_NORM) || s->in[0] != x || s->iarg[0] != parts)
            break;
        src[s->iarg[1]] = s;
        s->iarg[2] = 1;
    }
    sf_tensor *y = node->out;
    int B = y->shape[0], H = y->shape[1], N = y->shape[2], D = y->shape[3];
    size_t W = (size_t)x->shape[2];
    float *dx = sf_arena_alloc(g->arena, x->numel * sizeof(float)); // (B, N, P*H*D)
    const size_t per = COLNORM_SCRATCH(D);
    float *scratch = sf_arena_alloc(g->arena, (size_t)sf_thread_slots() * per * sizeof(float));
    x->grad = dx;
#pragma omp parallel for collapse(3) if (x->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int p = 0; p < parts; p++)
            for (int h = 0; h < H; h++) {
                const sf_node *s = src[p];
                const float *dy = s ? s->out->grad : NULL;
                if (dy && s->op == SF_OP_HEADS_SPLIT_NORM) {
                    sf_heads_split_norm_slice_backward(s, b, h, dx, scratch + (size_t)sf_thread_slot() * per, 0);
                    continue;
                }
                float *d = dx + (size_t)b * N * W + ((size_t)p * H + h) * D;
                const float *gs = dy ? dy + ((size_t)b * H + h) * N * D : NULL;
                for (int n = 0; n < N; n++) {
                    if (gs)
                        memcpy(d + (size_t)n * W, gs + (size_t)n * D, (size_t)D * sizeof(float));
                    else
                        memset(d + (size_t)n * W, 0, (size_t)D * sizeof(float));
                }
            }
    return 1;
}

/* y[b, h, n, d] = x[b, n, (part*H + h)*D + d]: dx at that place += dy (the other parts of
 * x's last dim are untouched; their own split nodes fill them). */
void sf_heads_split_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->out;
    if (node->iarg[2]) return; /* already written by a sibling's gather */
    if (sf_heads_split_gather(g, node)) return;
    int part = node->iarg[1];
    int B = y->shape[0], H = y->shape[1], N = y->shape[2], D = y->shape[3];
    size_t W = (size_t)x->shape[2];
    float *dx = sf_grad(g, x);
#pragma omp parallel for collapse(2) if (y->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            heads_block(dx + (size_t)b * N * W + ((size_t)part * H + h) * D,
                        y->grad + ((size_t)b * H + h) * N * D, N, D, W, 1, 1);
}

/* to_linear: see sf_heads_merge_to_linear (ops.h); each head's rows are rounded as they are
 * placed. The backward reads no data. */
static sf_tensor *heads_merge(sf_ctx *g, sf_tensor *x, int to_linear) {
    char sx[64];
    SF_ASSERT(x->ndim == 4, "heads_merge: x %s is not (B, H, N, D)", sf_shape_str(x, sx, sizeof sx));
    int B = x->shape[0], H = x->shape[1], N = x->shape[2], D = x->shape[3];
    size_t W = (size_t)H * D;
    const int shape[3] = {B, N, H * D};
    sf_tensor *y = to_linear ? sf_tensor_for_linear(g, 3, shape) : sf_tensor_new(g, 3, shape); // (B, N, H*D)
#pragma omp parallel for collapse(2) if (y->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *xh = x->data + ((size_t)b * H + h) * N * D;
            const size_t at = (size_t)b * N * W + (size_t)h * D;
            if (y->data) {
                heads_block(y->data + at, (float *)xh, N, D, W, 1, 0);
                continue;
            }
            for (int n = 0; n < N; n++) sf_bf16_convert(xh + (size_t)n * D, y->data16 + at + (size_t)n * W, (size_t)D);
        }
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_HEADS_MERGE, y, &x, 1);
    return y;
}

sf_tensor *sf_heads_merge(sf_ctx *g, sf_tensor *x) { return heads_merge(g, x, 0); }
sf_tensor *sf_heads_merge_to_linear(sf_ctx *g, sf_tensor *x) { return heads_merge(g, x, 1); }

/* y[b, n, h*D + d] = x[b, h, n, d]: dx[b, h, n, d] += dy[b, n, h*D + d]. */
void sf_heads_merge_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->out;
    int B = x->shape[0], H = x->shape[1], N = x->shape[2], D = x->shape[3];
    size_t W = (size_t)H * D;
    int acc; /* every element of dx is written: a new dx is copied into, not accumulated */
    float *dx = sf_grad_dst(g, x, &acc);
#pragma omp parallel for collapse(2) if (y->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *gr = y->grad + (size_t)b * N * W + (size_t)h * D;
            float *xr = dx + ((size_t)b * H + h) * N * D;
            for (int n = 0; n < N; n++) {
                if (!acc) {
                    memcpy(xr + (size_t)n * D, gr + (size_t)n * W, (size_t)D * sizeof(float));
                    continue;
                }
                for (int d = 0; d < D; d++) xr[(size_t)n * D + d] += gr[(size_t)n * W + d];
            }
        }
}

/* ---- tokens: slice, concat, mean ---- */

sf_tensor *sf_slice_tokens(sf_ctx *g, sf_tensor *x, int start, int len) {
    char sx[64];
    SF_ASSERT(x->ndim == 3 && start >= 0 && len >= 1 && start + len <= x->shape[1],
              "slice_tokens: tokens [%d, %d) out of x %s", start, start + len,
              sf_shape_str(x, sx, sizeof sx));
    int B = x->shape[0], N = x->shape[1], C = x->shape[2];
    sf_tensor *y = sf_tensor_new3(g, B, len, C); // (B, len, C)
    for (int b = 0; b < B; b++)
        memcpy(y->data + (size_t)b * len * C, x->data + ((size_t)b * N + start) * C,
               (size_t)len * C * sizeof(float));
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_SLICE_TOKENS, y, &x, 1)->iarg[0] = start;
    return y;
}

/* y[b, t] = x[b, start + t]: dx[b, start + t] += dy[b, t]; other tokens get nothing. */
void sf_slice_tokens_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->out;
    /* teeth: the broken variant forgets the offset (every slice's gradient lands at token 0) */
    int start = sf_break_backward("slice_tokens") ? 0 : node->iarg[0];
    int B = y->shape[0], len = y->shape[1], C = y->shape[2];
    int N = x->shape[1];
    float *dx = sf_grad(g, x);
    size_t row = (size_t)len * C;
#pragma omp parallel for if (y->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++) {
        float *d = dx + ((size_t)b * N + start) * C;
        const float *gr = y->grad + (size_t)b * row;
        for (size_t i = 0; i < row; i++) d[i] += gr[i];
    }
}

sf_tensor *sf_concat_tokens(sf_ctx *g, sf_tensor *a, sf_tensor *b) {
    char sa[64], sb[64];
    int B = a->shape[0] > b->shape[0] ? a->shape[0] : b->shape[0];
    SF_ASSERT(a->ndim == 3 && b->ndim == 3 && a->shape[2] == b->shape[2] &&
                  (a->shape[0] == B || a->shape[0] == 1) && (b->shape[0] == B || b->shape[0] == 1),
              "concat_tokens: a %s and b %s do not concatenate along tokens",
              sf_shape_str(a, sa, sizeof sa), sf_shape_str(b, sb, sizeof sb));
    int Na = a->shape[1], Nb = b->shape[1], C = a->shape[2];
    size_t ra = (size_t)Na * C, rb = (size_t)Nb * C; /* per-sample sizes */
    sf_tensor *y = sf_tensor_new3(g, B, Na + Nb, C); // (B, Na+Nb, C)
    for (int i = 0; i < B; i++) {
        /* A batch of 1 (cls token) is read again for every sample. */
        memcpy(y->data + i * (ra + rb), a->data + (a->shape[0] == 1 ? 0 : i * ra), ra * sizeof(float));
        memcpy(y->data + i * (ra + rb) + ra, b->data + (b->shape[0] == 1 ? 0 : i * rb),
               rb * sizeof(float));
    }
    sf_tensor *in[2] = {a, b};
    if (sf_needs_grad(g, in, 2)) sf_tape_push(g, SF_OP_CONCAT_TOKENS, y, in, 2);
    return y;
}

/* y[i] = [a[i or 0]; b[i or 0]]: each side gets its rows of dy back; a broadcast side
 * (batch 1) gets the sum over the batch. */
void sf_concat_tokens_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *y = node->out;
    int B = y->shape[0];
    size_t total = (size_t)y->shape[1] * y->shape[2], offset = 0;
    /* teeth: the broken variant reads both sides' gradients from token 0 */
    const int broken = sf_break_backward("concat_tokens");
    for (int k = 0; k < 2; k++) {
        sf_tensor *t = node->in[k];
        size_t r = (size_t)t->shape[1] * t->shape[2];
        if (t->requires_grad) {
            float *d = sf_grad(g, t);
            int bcast = t->shape[0] == 1 && B > 1;
            for (int i = 0; i < B; i++) {
                float *di = d + (bcast ? 0 : i * r);
                const float *gi = y->grad + i * total + offset;
                for (size_t j = 0; j < r; j++) di[j] += gi[j];
            }
        }
        if (!broken) offset += r;
    }
}

sf_tensor *sf_mean_tokens(sf_ctx *g, sf_tensor *x) {
    char sx[64];
    SF_ASSERT(x->ndim == 3, "mean_tokens: x %s is not (B, N, C)", sf_shape_str(x, sx, sizeof sx));
    int B = x->shape[0], N = x->shape[1], C = x->shape[2];
    sf_tensor *y = sf_tensor_new2(g, B, C); // (B, C)
    float inv = 1.0f / (float)N;
#pragma omp parallel for if (x->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++) {
        float *yr = y->data + (size_t)b * C;
        for (int c = 0; c < C; c++) yr[c] = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *xr = x->data + ((size_t)b * N + n) * C;
            for (int c = 0; c < C; c++) yr[c] += xr[c];
        }
        for (int c = 0; c < C; c++) yr[c] *= inv;
    }
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_MEAN_TOKENS, y, &x, 1);
    return y;
}

/* y[b, c] = (1/N) sum_n x[b, n, c]: dx[b, n, c] += dy[b, c] / N for every n. */
void sf_mean_tokens_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0];
    int B = x->shape[0], N = x->shape[1], C = x->shape[2];
    float inv = 1.0f / (float)N, *dx = sf_grad(g, x);
    const float *G = node->out->grad; // (B, C)
#pragma omp parallel for collapse(2) if (x->numel > SH_OMP_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            float *d = dx + ((size_t)b * N + n) * C;
            const float *gr = G + (size_t)b * C;
            for (int c = 0; c < C; c++) d[c] += gr[c] * inv;
        }
}
