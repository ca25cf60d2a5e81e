/* soft.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_gauss_kernel(sf_ctx *g, sf_tensor *q, sf_tensor *l, float c) {
    (void)g; (void)q; (void)l; (void)c;
    SF_ASSERT(0, "sf_gauss_kernel not implemented");
}

sf_tensor *sf_nr_pinv(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init) {
    (void)g; (void)a; (void)iters; (void)init;
    SF_ASSERT(0, "sf_nr_pinv not implemented");
}

sf_tensor *sf_soft_symnorm(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init) {
    (void)g; (void)a; (void)iters; (void)init;
    SF_ASSERT(0, "sf_soft_symnorm not implemented");
}

float sf_nr_last_residual(void) {
        return 0.0f;
}

void sf_gauss_kernel_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_nr_pinv_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_soft_symnorm_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
