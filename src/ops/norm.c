/* norm.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_layernorm(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps) {
    (void)g; (void)x; (void)w; (void)b; (void)eps;
    SF_ASSERT(0, "sf_layernorm not implemented");
}

sf_tensor *sf_batchnorm2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, sf_tensor *running_mean, sf_tensor *running_var, sf_tensor *num_batches, float eps, float momentum) {
    (void)g; (void)x; (void)w; (void)b; (void)running_mean; (void)running_var; (void)num_batches; (void)eps; (void)momentum;
    SF_ASSERT(0, "sf_batchnorm2d not implemented");
}

void sf_layernorm_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_batchnorm2d_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
