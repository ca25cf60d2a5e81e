/* ops_internal.h — backward functions referenced by the op table, and small helpers
 * shared by op files. Not a public header. */
#ifndef SFVIT_OPS_INTERNAL_H
#define SFVIT_OPS_INTERNAL_H

#include "sfvit/ops.h"

#define SF_DECL_BACKWARD(name) void sf_##name##_backward(sf_ctx *g, sf_node *node)
SF_DECL_BACKWARD(linear);
SF_DECL_BACKWARD(matmul);
SF_DECL_BACKWARD(add);
SF_DECL_BACKWARD(add_broadcast);
SF_DECL_BACKWARD(mul_broadcast);
SF_DECL_BACKWARD(scale);
SF_DECL_BACKWARD(gelu);
SF_DECL_BACKWARD(gelu_tanh);
SF_DECL_BACKWARD(relu);
SF_DECL_BACKWARD(elu1);
SF_DECL_BACKWARD(dropout);
SF_DECL_BACKWARD(drop_path);
SF_DECL_BACKWARD(reshape);
SF_DECL_BACKWARD(permute);
SF_DECL_BACKWARD(heads_split);
SF_DECL_BACKWARD(heads_merge);
SF_DECL_BACKWARD(slice_tokens);
SF_DECL_BACKWARD(concat_tokens);
SF_DECL_BACKWARD(mean_tokens);
SF_DECL_BACKWARD(softmax);
SF_DECL_BACKWARD(layernorm);
SF_DECL_BACKWARD(batchnorm2d);
SF_DECL_BACKWARD(l1norm_tokens);
SF_DECL_BACKWARD(l2norm_tokens);
SF_DECL_BACKWARD(sima);
SF_DECL_BACKWARD(msa);
SF_DECL_BACKWARD(xca);
SF_DECL_BACKWARD(gauss_kernel);
SF_DECL_BACKWARD(nr_pinv);
SF_DECL_BACKWARD(soft_symnorm);
SF_DECL_BACKWARD(conv2d);
SF_DECL_BACKWARD(avgpool2d);
SF_DECL_BACKWARD(cross_entropy);

/* Row-major sgemm on raw pointers: C = alpha * op(A) op(B) + beta * C, with
 * op(A) (M x K), op(B) (K x N), C (M x N), contiguous (lda/ldb/ldc derived). */
void sf_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
             const float *B, float beta, float *C);

/* Teeth for gradient checks: SFVIT_BREAK_BACKWARD=<op name> makes that op's backward
 * deliberately wrong (ops that support it check sf_break_backward("name")), so a user
 * can watch its gradient check fail. */
int sf_break_backward(const char *op_name);

/* conv.c: 1 (default) sends depthwise convs (groups == C_in == C_out) to the direct kernel,
 * 0 forces the im2col reference path; the tests compare the two. Process-wide setting. */
void sf_conv2d_set_direct(int enabled);

#endif
