/* softmax.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_softmax(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_softmax not implemented");
}

void sf_softmax_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
