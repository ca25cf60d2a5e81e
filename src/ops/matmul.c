/* matmul.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b) {
    (void)g; (void)x; (void)w; (void)b;
    SF_ASSERT(0, "sf_linear not implemented");
}

sf_tensor *sf_matmul(sf_ctx *g, sf_tensor *a, sf_tensor *b, int trans_a, int trans_b) {
    (void)g; (void)a; (void)b; (void)trans_a; (void)trans_b;
    SF_ASSERT(0, "sf_matmul not implemented");
}

void sf_linear_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_matmul_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
