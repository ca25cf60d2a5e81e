/* loss.c — mean cross-entropy over the batch, with hard labels and label
 * smoothing, or with soft target rows (mixup / cutmix, smoothing already folded in).
 *
 * Both forms reduce to one: a target row t_b (hard labels: t = (1 - eps) onehot + eps/K),
 * loss = -(1/B) sum_b sum_k t_bk log p_bk, log p computed as z - logsumexp(z) with the
 * row maximum subtracted. The forward saves the per-logit gradient (p sum_k t - t) / B, so
 * the backward is one scaling by the upstream scalar. Derivation:
 * docs/math/basic.md#cross-entropy.
 *
 * Deliberately not here: class weights, ignore_index, reductions other than the mean, the
 * generation of soft targets (the data pipeline mixes labels).
 *
 * Dimension legend: B batch, K classes (also N tokens, C channels, H heads, D head dim,
 * M landmarks elsewhere).
 */
#include "ops_internal.h"

#include <math.h>

sf_tensor *sf_cross_entropy(sf_ctx *g, sf_tensor *logits, const int *labels,
                            const float *soft_targets, float smoothing) {
    char sz[64];
    SF_ASSERT(logits->ndim == 2, "cross_entropy: logits %s are not (B, K)",
              sf_shape_str(logits, sz, sizeof sz));
    SF_ASSERT(labels || soft_targets, "cross_entropy: neither labels nor soft targets given");
    SF_ASSERT(smoothing >= 0.0f && smoothing <= 1.0f, "cross_entropy: smoothing %g",
              (double)smoothing);
    int B = logits->shape[0], K = logits->shape[1];
    if (!soft_targets)
        for (int b = 0; b < B; b++)
            SF_ASSERT(labels[b] >= 0 && labels[b] < K,
                      "cross_entropy: label %d of sample %d outside [0, %d)", labels[b], b, K);

    int record = sf_needs_grad(g, &logits, 1);
    float *dz = record ? sf_arena_alloc(g->arena, (size_t)B * K * sizeof(float)) : NULL; // (B, K)
    double total = 0.0;
    float off = smoothing / (float)K, on = 1.0f - smoothing + off; /* smoothed one-hot */
#pragma omp parallel for reduction(+ : total) if ((size_t)B * K > 16384)
    for (int b = 0; b < B; b++) {
        const float *z = logits->data + (size_t)b * K;
        const float *t = soft_targets ? soft_targets + (size_t)b * K : NULL;
        float m = z[0];
        for (int k = 1; k < K; k++) m = z[k] > m ? z[k] : m;
        double s = 0.0;
        for (int k = 0; k < K; k++) s += exp((double)(z[k] - m));
        double lse = (double)m + log(s);
        double loss = 0.0, tsum = 0.0;
        for (int k = 0; k < K; k++) {
            double tk = t ? (double)t[k] : (k == labels[b] ? on : off);
            loss -= tk * ((double)z[k] - lse);
            tsum += tk;
        }
        total += loss;
        if (dz) {
            /* d/dz_k of -sum_j t_j (z_j - lse) = p_k sum_j t_j - t_k; then the 1/B of the mean. */
            float *d = dz + (size_t)b * K;
            for (int k = 0; k < K; k++) {
                double tk = t ? (double)t[k] : (k == labels[b] ? on : off);
                d[k] = (float)((exp((double)z[k] - lse) * tsum - tk) / B);
            }
        }
    }
    sf_tensor *y = sf_tensor_new1(g, 1); // (1)
    y->data[0] = (float)(total / B);
    if (record) sf_tape_push(g, SF_OP_CROSS_ENTROPY, y, &logits, 1)->saved = dz;
    return y;
}

/* L = mean CE: dz = G (p sum_k t - t) / B with the saved (p sum_k t - t) / B and the upstream
 * scalar G. */
void sf_cross_entropy_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *z = node->in[0];
    const float *saved = node->saved; // (B, K)
    float G = node->out->grad[0], *dz = sf_grad(g, z);
    /* Teeth: the broken variant forgets the 1/B of the mean (a factor B too large). */
    if (sf_break_backward("cross_entropy")) G *= (float)z->shape[0];
    size_t n = z->numel;
    for (size_t i = 0; i < n; i++) dz[i] += G * saved[i];
}
