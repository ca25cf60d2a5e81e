/* shape.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_reshape(sf_ctx *g, sf_tensor *x, int ndim, const int *shape) {
    (void)g; (void)x; (void)ndim; (void)shape;
    SF_ASSERT(0, "sf_reshape not implemented");
}

sf_tensor *sf_permute(sf_ctx *g, sf_tensor *x, const int *perm) {
    (void)g; (void)x; (void)perm;
    SF_ASSERT(0, "sf_permute not implemented");
}

sf_tensor *sf_heads_split(sf_ctx *g, sf_tensor *x, int parts, int part, int H) {
    (void)g; (void)x; (void)parts; (void)part; (void)H;
    SF_ASSERT(0, "sf_heads_split not implemented");
}

sf_tensor *sf_heads_merge(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_heads_merge not implemented");
}

sf_tensor *sf_slice_tokens(sf_ctx *g, sf_tensor *x, int start, int len) {
    (void)g; (void)x; (void)start; (void)len;
    SF_ASSERT(0, "sf_slice_tokens not implemented");
}

sf_tensor *sf_concat_tokens(sf_ctx *g, sf_tensor *a, sf_tensor *b) {
    (void)g; (void)a; (void)b;
    SF_ASSERT(0, "sf_concat_tokens not implemented");
}

sf_tensor *sf_mean_tokens(sf_ctx *g, sf_tensor *x) {
    (void)g; (void)x;
    SF_ASSERT(0, "sf_mean_tokens not implemented");
}

void sf_reshape_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_permute_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_heads_split_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_heads_merge_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_slice_tokens_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_concat_tokens_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_mean_tokens_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
