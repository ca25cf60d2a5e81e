/* elementwise.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_add(sf_ctx *g, sf_tensor *a, sf_tensor *b) {
    (void)g; (void)a; (void)b;
    SF_ASSERT(0, "sf_add not implemented");
}

sf_tensor *sf_add_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y) {
    (void)g; (void)x; (void)y;
    SF_ASSERT(0, "sf_add_broadcast not implemented");
}

sf_tensor *sf_mul_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y) {
    (void)g; (void)x; (void)y;
    SF_ASSERT(0, "sf_mul_broadcast not implemented");
}

sf_tensor *sf_scale(sf_ctx *g, sf_tensor *x, float s) {
    (void)g; (void)x; (void)s;
    SF_ASSERT(0, "sf_scale not implemented");
}

sf_tensor *sf_gelu(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_gelu not implemented");
}

sf_tensor *sf_gelu_tanh(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_gelu_tanh not implemented");
}

sf_tensor *sf_relu(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_relu not implemented");
}

sf_tensor *sf_elu1(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_elu1 not implemented");
}

sf_tensor *sf_dropout(sf_ctx *g, sf_tensor *x, float p) {
    (void)g; (void)x; (void)p;
    SF_ASSERT(0, "sf_dropout not implemented");
}

sf_tensor *sf_drop_path(sf_ctx *g, sf_tensor *x, float p) {
    (void)g; (void)x; (void)p;
    SF_ASSERT(0, "sf_drop_path not implemented");
}

void sf_add_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_add_broadcast_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_mul_broadcast_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_scale_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_gelu_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_gelu_tanh_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_relu_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_elu1_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_dropout_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_drop_path_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
