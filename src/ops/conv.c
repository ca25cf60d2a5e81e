/* conv.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_conv2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad, int groups) {
    (void)g; (void)x; (void)w; (void)b; (void)stride; (void)pad; (void)groups;
    SF_ASSERT(0, "sf_conv2d not implemented");
}

sf_tensor *sf_avgpool2d(sf_ctx *g, sf_tensor *x, int k, int stride) {
    (void)g; (void)x; (void)k; (void)stride;
    SF_ASSERT(0, "sf_avgpool2d not implemented");
}

void sf_conv2d_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_avgpool2d_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
