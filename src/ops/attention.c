/* attention.c — placeholder until implemented. */
#include "ops_internal.h"

sf_tensor *sf_l1norm_tokens(sf_ctx *g, sf_tensor *x, float eps) {
    (void)g; (void)x; (void)eps;
    SF_ASSERT(0, "sf_l1norm_tokens not implemented");
}

sf_tensor *sf_l2norm_tokens(sf_ctx *g, sf_tensor *x, float eps) {
    (void)g; (void)x; (void)eps;
    SF_ASSERT(0, "sf_l2norm_tokens not implemented");
}

sf_tensor *sf_sima(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order) {
    (void)g; (void)q; (void)k; (void)v; (void)order;
    SF_ASSERT(0, "sf_sima not implemented");
}

sf_sima_order sf_sima_resolve(sf_sima_order order, int N, int D) {
    (void)order; (void)N; (void)D;
    SF_ASSERT(0, "sf_sima_resolve not implemented");
}

sf_tensor *sf_msa(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, float scale) {
    (void)g; (void)q; (void)k; (void)v; (void)scale;
    SF_ASSERT(0, "sf_msa not implemented");
}

sf_tensor *sf_xca(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_tensor *temperature) {
    (void)g; (void)q; (void)k; (void)v; (void)temperature;
    SF_ASSERT(0, "sf_xca not implemented");
}

void sf_l1norm_tokens_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_l2norm_tokens_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_sima_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_msa_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
void sf_xca_backward(sf_ctx *g, sf_node *node) { (void)g; (void)node; SF_ASSERT(0); }
