/* softmax.c — row softmax over the last dim of any tensor.
 *
 * The forward subtracts each row's maximum before exp, so no logit overflows; the backward
 * needs only the output P, which the node already holds (nothing else is saved).
 * Derivation: docs/math/basic.md#softmax.
 *
 * Deliberately not here: masking, temperature (callers scale first), the fused softmax
 * inside attention (attention.c keeps its own so it can skip materializing P twice).
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks;
 * here rows R = numel / L with L the last dim.
 */
#include "ops_internal.h"

#include <math.h>

sf_tensor *sf_softmax(sf_ctx *g, sf_tensor *x) {
    int L = x->shape[x->ndim - 1];
    int R = (int)(x->numel / (size_t)L);
    sf_tensor *y = sf_tensor_like(g, x); // (R, L)
#pragma omp parallel for if ((size_t)R * L > 16384)
    for (int r = 0; r < R; r++) {
        const float *xr = x->data + (size_t)r * L;
        float *yr = y->data + (size_t)r * L;
        float m = xr[0];
        for (int j = 1; j < L; j++) m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int j = 0; j < L; j++) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        float inv = 1.0f / s;
        for (int j = 0; j < L; j++) yr[j] *= inv;
    }
    if (sf_needs_grad(g, &x, 1)) sf_tape_push(g, SF_OP_SOFTMAX, y, &x, 1);
    return y;
}

/* Forward was P = softmax(Z) per row, so with G = dL/dP:
 * dZ_j = P_j (G_j - sum_k G_k P_k) (docs/math/basic.md#softmax). */
void sf_softmax_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *y = node->out;
    int L = y->shape[y->ndim - 1];
    int R = (int)(y->numel / (size_t)L);
    float *dx = sf_grad(g, x);
    /* Teeth: the broken variant drops the rowsum(G . P) term. */
    float keep_dot = sf_break_backward("softmax") ? 0.0f : 1.0f;
#pragma omp parallel for if ((size_t)R * L > 16384)
    for (int r = 0; r < R; r++) {
        const float *P = y->data + (size_t)r * L, *G = y->grad + (size_t)r * L;
        float *d = dx + (size_t)r * L;
        float dot = 0.0f;
        for (int j = 0; j < L; j++) dot += G[j] * P[j];
        dot *= keep_dot;
        for (int j = 0; j < L; j++) d[j] += P[j] * (G[j] - dot);
    }
}
