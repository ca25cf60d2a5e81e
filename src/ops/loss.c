/* loss.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_cross_entropy(sf_ctx *g, sf_tensor *logits, const int *labels, const float *soft_targets, float smoothing) {
    (void)g; (void)logits; (void)labels; (void)soft_targets; (void)smoothing;
    SF_ASSERT(0, "sf_cross_entropy not implemented");
}

void sf_cross_entropy_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
