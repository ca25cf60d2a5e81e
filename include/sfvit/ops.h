/* ops.h — every differentiable op. Each returns a new arena tensor and, when grad mode
 * is on and an input requires grad, records a tape node whose backward is written by hand
 * next to the forward in src/ops/<family>.c. Derivations: docs/math.md.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks,
 * K classes. Attention tensors are (B, H, N, D) contiguous.
 */
#ifndef SFVIT_OPS_H
#define SFVIT_OPS_H

#include "sfvit/tensor.h"

/* ---- the one list of ops ----
 * X(ID, name): the enum value SF_OP_<ID>, the op's name (SFVIT_BREAK_BACKWARD, profiles,
 * golden files) and its backward sf_<name>_backward. The enum, the op table
 * (src/ops/table.c), the backward declarations (src/ops/ops_internal.h) and the golden
 * tests' runners and coverage check (tests/test_golden_ops.c) are all generated from it:
 * adding an op is one line here, its forward and backward in src/ops/<family>.c, and its
 * golden runner and cases. */
#define SF_OPS(X)                                                                                            \
    /* matmul.c */                                                                                           \
    X(LINEAR, linear) X(MATMUL, matmul)                                                                      \
    /* elementwise.c */                                                                                      \
    X(ADD, add) X(ADD_BROADCAST, add_broadcast) X(MUL_BROADCAST, mul_broadcast) X(SCALE, scale)              \
    X(GELU, gelu) X(GELU_TANH, gelu_tanh) X(QUICK_GELU, quick_gelu) X(RELU, relu) X(ELU1, elu1) X(DROPOUT, dropout)                    \
    X(DROP_PATH, drop_path) X(RESIDUAL, residual)                                                            \
    /* shape.c */                                                                                            \
    X(RESHAPE, reshape) X(PERMUTE, permute) X(HEADS_SPLIT, heads_split) X(HEADS_MERGE, heads_merge)          \
    X(SLICE_TOKENS, slice_tokens) X(CONCAT_TOKENS, concat_tokens) X(MEAN_TOKENS, mean_tokens)                \
    /* softmax.c */                                                                                          \
    X(SOFTMAX, softmax)                                                                                      \
    /* norm.c */                                                                                             \
    X(LAYERNORM, layernorm) X(BATCHNORM2D, batchnorm2d)                                                      \
    /* attention.c */                                                                                        \
    X(L1NORM_TOKENS, l1norm_tokens) X(L2NORM_TOKENS, l2norm_tokens) X(SIMA, sima) X(MSA, msa) X(XCA, xca)    \
    X(HEADS_SPLIT_NORM, heads_split_norm)                                                                    \
    /* soft.c */                                                                                             \
    X(GAUSS_KERNEL, gauss_kernel) X(NR_PINV, nr_pinv) X(SOFT_SYMNORM, soft_symnorm)                          \
    /* conv.c */                                                                                             \
    X(CONV2D, conv2d) X(AVGPOOL2D, avgpool2d)                                                                \
    /* loss.c */                                                                                             \
    X(CROSS_ENTROPY, cross_entropy)

typedef enum sf_op {
    SF_OP_NONE = 0,
#define SF_OP_ENUM(ID, name) SF_OP_##ID,
    SF_OPS(SF_OP_ENUM)
#undef SF_OP_ENUM
    SF_OP_COUNT
} sf_op;
/* The name of op number op ("?" outside the list), e.g. for sf_profile_report. The op
 * table (backward functions) and tape recording are the layer's own (ops_internal.h). */
const char *sf_op_name(int op);

/* Row-major sgemm on raw pointers: C = alpha * op(A) op(B) + beta * C, with op(A) (M x K),
 * op(B) (K x N), C (M x N), contiguous (lda/ldb/ldc derived); large products split over the
 * OpenMP team (src/ops/gemm.c). */
void sf_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
             const float *B, float beta, float *C);

/* ---- matmul.c (cblas_sgemm) ---- */
/* y = x W^T + b; x (..., in), w (out, in), b (out) or NULL -> (..., out). */
sf_tensor *sf_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b);
/* sf_linear for an x that nothing reads afterwards (no later op, no other backward): x's
 * fp32 data is released; in bf16 the backward keeps only x's bf16 copy, the operand its dW
 * product reads anyway (same numbers, half the memory); in fp32 training x itself is kept. */
sf_tensor *sf_linear_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b);
/* The *_to_linear ops (sf_gelu_to_linear, sf_heads_merge_to_linear, ...) are the plain op
 * for an output that goes only into sf_linear_last_use: in bf16 precision they write that
 * output as bf16 alone (y->data16, y->data NULL), the operand the linear layer's products
 * read, instead of fp32 values the layer would read back to convert (the same numbers, a
 * third of the memory traffic); in fp32 they are the plain op. */
/* sf_gelu_to_linear(sf_linear_last_use(x, w, b)) (act SF_OP_GELU; or SF_OP_QUICK_GELU,
 * SF_OP_RELU) for a linear layer whose output only that activation reads (an MLP's fc1): the
 * same values in fp32; in bf16 the layer's output is stored in bf16 alone (rounded once, as
 * autocast stores it), and the activation and its backward read it so. The activation's
 * backward runs the layer's too, in one pass that sums the layer's output gradient for db
 * and, in bf16, rounds it for the two products without writing it in fp32. */
sf_tensor *sf_linear_act_to_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, sf_op act);
/* Batched product over equal leading dims: a (..., M, K) (or (..., K, M) if trans_a),
 * b (..., K, N) (or (..., N, K) if trans_b) -> (..., M, N). */
sf_tensor *sf_matmul(sf_ctx *g, sf_tensor *a, sf_tensor *b, int trans_a, int trans_b);

/* ---- elementwise.c ---- */
sf_tensor *sf_add(sf_ctx *g, sf_tensor *a, sf_tensor *b);            /* same shape */
/* x + y where y matches x's trailing dims (bias (C) on (B,N,C); pos_embed (1,N,C)). */
sf_tensor *sf_add_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y);
/* x * y, y broadcast over x's leading dims as above (layer scale gamma (C)). */
sf_tensor *sf_mul_broadcast(sf_ctx *g, sf_tensor *x, sf_tensor *y);
/* The same for an x that nothing reads afterwards (a branch into XCiT's layer scale): the
 * output from fp32 x as above; x's values are then needed only for y's gradient, so x is
 * released where that is not computed, and in bf16 precision kept as a bf16 copy alone
 * (sf_tensor_keep_bf16), which y's gradient reads, as autocast's saved bf16 x. */
sf_tensor *sf_mul_broadcast_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *y);
sf_tensor *sf_scale(sf_ctx *g, sf_tensor *x, float s);
sf_tensor *sf_gelu(sf_ctx *g, sf_tensor *x);       /* exact (erf) */
sf_tensor *sf_gelu_tanh(sf_ctx *g, sf_tensor *x);  /* tanh approximation (SOFT MLP) */
sf_tensor *sf_gelu_to_linear(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_gelu_tanh_to_linear(sf_ctx *g, sf_tensor *x);
/* QuickGELU x·sigmoid(1.702 x) (CLIP / CvT's MLP activation). */
sf_tensor *sf_quick_gelu(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_relu(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_quick_gelu_to_linear(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_relu_to_linear(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_elu1(sf_ctx *g, sf_tensor *x);       /* elu(x) + 1 (linear attention baseline) */
/* Element dropout with probability p (identity unless g->training). */
sf_tensor *sf_dropout(sf_ctx *g, sf_tensor *x, float p);
/* Per-sample drop path along dim 0 (identity unless g->training). */
sf_tensor *sf_drop_path(sf_ctx *g, sf_tensor *x, float p);
/* x + sf_drop_path(y, p) in one pass, the same numbers and random draws; y is a block's
 * branch output handed over (nothing else reads it or its gradient). */
sf_tensor *sf_residual(sf_ctx *g, sf_tensor *x, sf_tensor *y, float p);

/* ---- shape.c ---- */
/* Same data, new shape (numel equal). */
sf_tensor *sf_reshape(sf_ctx *g, sf_tensor *x, int ndim, const int *shape);
/* out.shape[i] = x.shape[perm[i]]; ndim = x->ndim. Materializes a contiguous copy. */
sf_tensor *sf_permute(sf_ctx *g, sf_tensor *x, const int *perm);
/* x (B, N, parts*H*D) -> chunk `part` as (B, H, N, D) (qkv layout [parts][H][D]). */
sf_tensor *sf_heads_split(sf_ctx *g, sf_tensor *x, int parts, int part, int H);
/* x (B, H, N, D) -> (B, N, H*D). */
sf_tensor *sf_heads_merge(sf_ctx *g, sf_tensor *x);
sf_tensor *sf_heads_merge_to_linear(sf_ctx *g, sf_tensor *x);
/* x (B, N, C) -> tokens [start, start+len) as (B, len, C). */
sf_tensor *sf_slice_tokens(sf_ctx *g, sf_tensor *x, int start, int len);
/* a (Ba, Na, C), b (Bb, Nb, C) -> (B, Na+Nb, C); a batch of 1 is broadcast (cls token). */
sf_tensor *sf_concat_tokens(sf_ctx *g, sf_tensor *a, sf_tensor *b);
/* x (B, N, C) -> (B, C). */
sf_tensor *sf_mean_tokens(sf_ctx *g, sf_tensor *x);

/* ---- softmax.c ---- */
sf_tensor *sf_softmax(sf_ctx *g, sf_tensor *x);    /* over the last dim */

/* ---- norm.c ---- */
/* Over the last dim C; w, b (C). */
sf_tensor *sf_layernorm(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps);
/* sf_layernorm for an output that goes only into sf_linear_last_use (the *_to_linear ops). */
sf_tensor *sf_layernorm_to_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps);
/* x (B, C, H, W). Training (g->training): batch statistics, running stats updated
 * (momentum, unbiased running variance), num_batches (a 1-element tensor) += 1.
 * Eval: running statistics. */
sf_tensor *sf_batchnorm2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b,
                          sf_tensor *running_mean, sf_tensor *running_var,
                          sf_tensor *num_batches, float eps, float momentum);

/* ---- attention.c ---- */
/* x (..., N, D): each channel (column) divided by its l1 / l2 norm over the N tokens,
 * clamped below by eps (torch F.normalize(x, p, dim=-2, eps)). */
sf_tensor *sf_l1norm_tokens(sf_ctx *g, sf_tensor *x, float eps);
sf_tensor *sf_l2norm_tokens(sf_ctx *g, sf_tensor *x, float eps);
/* sf_l1norm_tokens (p = 1) or sf_l2norm_tokens (p = 2) of sf_heads_split(x, parts, part, H),
 * the same bits in one pass: SimA's q̂ and k̂ straight from the fused qkv (B, N, parts·H·D). */
sf_tensor *sf_heads_split_norm(sf_ctx *g, sf_tensor *x, int parts, int part, int H, int p, float eps);

/* The SimA product orders; AUTO: (QK^T)V when N < D, else Q(K^T V) — the official rule.
 * The enum and sf_sima_order_names (config values, `sfvit info`) follow from this list. */
#define SF_SIMA_ORDERS(X) X(AUTO, auto) X(QK_FIRST, qk_first) X(KV_FIRST, kv_first)
typedef enum sf_sima_order {
#define SF_X(ID, name) SF_SIMA_##ID,
    SF_SIMA_ORDERS(SF_X)
#undef SF_X
    SF_SIMA_COUNT
} sf_sima_order;
extern const char *const sf_sima_order_names[SF_SIMA_COUNT + 1]; /* NULL-terminated */
/* O = Q K^T V per (b, h); q (B, H, Nq, D), k and v (B, H, N, D) -> (B, H, Nq, D)
 * (Nq = 1 for class attention; normalization is a separate op). AUTO resolves with N. */
sf_tensor *sf_sima(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order);
/* The same, with the inputs in `handed` (SF_SIMA_HAND_Q | _K | _V) handed over: nothing but
 * the backward of the op that made them reads them after this call, and none is a view
 * (sf_reshape) of another tensor. In bf16 precision, while recording, SimA keeps bf16 copies
 * for its backward; a handed-over input's fp32 data is then released and the copy becomes its
 * values (sf_tensor_keep_bf16), which the token normalization's backward reads for q̂, k̂. */
enum { SF_SIMA_HAND_Q = 1, SF_SIMA_HAND_K = 2, SF_SIMA_HAND_V = 4 };
sf_tensor *sf_sima_last_use(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_sima_order order,
                            unsigned handed);
/* Resolves AUTO for given N and D. */
sf_sima_order sf_sima_resolve(sf_sima_order order, int N, int D);
/* O = softmax(scale * Q K^T) V per (b, h); q (B, H, Nq, D), k and v (B, H, N, D). */
sf_tensor *sf_msa(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, float scale);
/* XCA: q, k l2-normalized over tokens (eps 1e-12), A = tau_h * q^T k (D x D), softmax over
 * the last dim, O = V P^T; temperature (H) or shaped (H,1,1). */
sf_tensor *sf_xca(sf_ctx *g, sf_tensor *q, sf_tensor *k, sf_tensor *v, sf_tensor *temperature);

/* ---- soft.c ---- */
/* S_ij = exp(-||q_i - l_j||^2 / (2c)); q (B, H, n, D), l (B, H, M, D) -> (B, H, n, M).
 * If l == q (same tensor) the symmetric case (K2) is handled. */
sf_tensor *sf_gauss_kernel(sf_ctx *g, sf_tensor *q, sf_tensor *l, float c);

/* Newton–Raphson initializations. MASTER, the SOFT master code: P = A + 0.01 I,
 * alpha = 0.9 * 2 / (max row sum)^2; PAPER: alpha = 2 beta^n / ||A||_1^2 with halvings until
 * ||I - alpha A^2||_1 <= 1. */
#define SF_NR_INITS(X) X(MASTER, master) X(PAPER, paper)
typedef enum sf_nr_init {
#define SF_X(ID, name) SF_NR_##ID,
    SF_NR_INITS(SF_X)
#undef SF_X
    SF_NR_COUNT
} sf_nr_init;
extern const char *const sf_nr_init_names[SF_NR_COUNT + 1]; /* NULL-terminated */
/* Newton–Raphson (Newton–Schulz) pseudo-inverse of each (M, M) matrix of a (..., M, M);
 * `iters` iterations forward, explicit -Y^T G Y^T backward. */
sf_tensor *sf_nr_pinv(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init);
/* SOFT++: Z = D^-1/2 NR(A) D^-1/2 with D = diag(A 1). */
sf_tensor *sf_soft_symnorm(sf_ctx *g, sf_tensor *a, int iters, sf_nr_init init);
/* Relative residual ||P Y P - P||_F / ||P||_F of the last forward NR call (nr_pinv or
 * soft_symnorm; worst matrix of the batch), P = A + 0.01 I for SF_NR_MASTER and P = A for
 * SF_NR_PAPER, so training can log when the iterations were not enough. Small (<= ~1e-6 in
 * float32) for a well-conditioned A; grows when cond(A) is too large for `iters`.
 * Per process, not thread-safe: a plain static overwritten by every forward call. */
float sf_nr_last_residual(void);

/* ---- conv.c (im2col + sgemm) ---- */
/* x (B, Cin, H, W), w (Cout, Cin/groups, kh, kw), b (Cout) or NULL. */
sf_tensor *sf_conv2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad,
                     int groups);
/* The same for an x that nothing reads afterwards (the input of a patch embedding's next
 * convolution): on the im2col path, whose backward reads x only for dW, x is released where
 * no dW is computed, and in bf16 precision kept as a bf16 copy alone (sf_tensor_keep_bf16),
 * from which the backward's bf16 columns are the same. In fp32 training, and on the depthwise
 * paths (their dW reads fp32 x), x is kept. */
sf_tensor *sf_conv2d_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad,
                              int groups);
/* Bands of output rows for large im2col column sets (docs/math/soft_conv_norm.md): on (1, the
 * default) or off (0, every image's columns whole), from SFVIT_CONV_BANDS at first use unless
 * set. parse: 1 for "1" or unset, 0 for "0", -1 otherwise. */
void sf_conv2d_bands_set(int on);
int sf_conv2d_bands_get(void);
int sf_conv2d_bands_parse(const char *s);
/* x (B, C, H, W), k x k window, stride s, no padding. */
sf_tensor *sf_avgpool2d(sf_ctx *g, sf_tensor *x, int k, int stride);

/* ---- loss.c ---- */
/* Mean cross-entropy over the batch -> (1). logits (B, K). Either labels (B) with label
 * smoothing eps, or soft_targets (B*K) (rows summing to 1; labels ignored). */
sf_tensor *sf_cross_entropy(sf_ctx *g, sf_tensor *logits, const int *labels,
                            const float *soft_targets, float smoothing);

#endif
