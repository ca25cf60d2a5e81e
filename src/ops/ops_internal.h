/* ops_internal.h — backward functions referenced by the op table, and small helpers
 * shared by op files. Not a public header. */
#ifndef SFVIT_OPS_INTERNAL_H
#define SFVIT_OPS_INTERNAL_H

#include "sfvit/ops.h"
#include "engine_internal.h"
#include "sfvit/precision.h"

#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

_Static_assert(SF_OP_COUNT <= SF_MAX_OPS, "raise SF_MAX_OPS in src/engine_internal.h");

typedef struct sf_op_info {
    const char *name;
    sf_backward_fn backward;
} sf_op_info;

/* The op table (src/ops/table.c), indexed by sf_op. */
extern const sf_op_info sf_op_table[SF_OP_COUNT];
/* Records a node of op on the tape with the table's backward (sf_tape_record). */
sf_node *sf_tape_push(sf_ctx *g, sf_op op, sf_tensor *out, sf_tensor *const *in, int n_in);


/* Per-thread scratch inside an OpenMP region: sf_thread_slots() slots are enough for any
 * team started from serial code, sf_thread_slot() is the calling thread's (0 outside). */
static inline int sf_thread_slots(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int sf_thread_slot(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Every op's backward, declared from the op list (ops.h). */
#define SF_DECL_BACKWARD(ID, name) void sf_##name##_backward(sf_ctx *g, sf_node *node);
SF_OPS(SF_DECL_BACKWARD)
#undef SF_DECL_BACKWARD

/* Teeth for gradient checks: SFVIT_BREAK_BACKWARD=<op name> makes that op's backward
 * deliberately wrong (ops that support it check sf_break_backward("name")), so a user
 * can watch its gradient check fail. */
int sf_break_backward(const char *op_name);

/* conv.c: which kernel runs depthwise convs (groups == C_in == C_out). AUTO (default) picks a
 * direct kernel by shape; the others force one: IM2COL the reference path, PLANES the
 * per-channel planes, CHANNELS_LAST the channels-innermost kernel. The tests compare them.
 * Process-wide setting. */
typedef enum { SF_CONV_AUTO, SF_CONV_IM2COL, SF_CONV_PLANES, SF_CONV_CHANNELS_LAST } sf_conv_path;
void sf_conv2d_set_path(sf_conv_path p);
/* A 0/1 switch from the environment: 1 for "1" or unset (the default on), 0 for "0", -1 for
 * anything else (SFVIT_PACK_WEIGHTS, SFVIT_CONV_BANDS). */
static inline int sf_parse_switch(const char *s) {
    if (!s || !*s || !strcmp(s, "1")) return 1;
    return !strcmp(s, "0") ? 0 : -1;
}

/* Bands of output rows in the im2col path (src/ops/conv.c, conv_band_rows): 0, the default
 * rule (an image's columns above 3·2^18 floats, with K >= 4 Og, go in bands of about 2^18
 * floats and 512 output positions or more); n > 0 puts every conv with more than n floats of
 * columns in bands of about n, whatever its K and band length (tests run the banded code on
 * small shapes; build/bench/conv forces it). */
void sf_conv2d_set_tile_floats(size_t floats);
/* The kernel sf_conv2d runs for these operands under the current setting (bench/conv). */
sf_conv_path sf_conv2d_path_of(const sf_tensor *x, const sf_tensor *w, int stride, int pad,
                               int groups);
/* Output rows per band the im2col path takes for these operands (Ho: the columns whole). */
int sf_conv2d_band_rows_of(const sf_tensor *x, const sf_tensor *w, int stride, int pad, int groups);

/* ---- bf16 outputs for the next linear layer (src/ops/bf16.c) ---- */

/* The output tensor of a *_to_linear op: in bf16 precision its values live in data16 alone
 * (data NULL), which is all sf_linear_last_use reads of it; in fp32 a plain tensor. */
sf_tensor *sf_tensor_for_linear(sf_ctx *g, int ndim, const int *shape);

/* ---- vectorizable float math for the element-wise kernels ----
 * Plain arithmetic (no libm calls, no branches after if-conversion), so loops that call these
 * under `#pragma omp simd` become AVX/AVX-512 code. libm (expf, and erfc in double) stays the
 * reference: tests/test_ops_fast.c checks the error bounds below on dense grids. */

/* exp(x): x = n ln2 + r (Cody–Waite split of ln 2, |r| <= ln2/2), exp(r) by its degree-7
 * Taylor polynomial (truncation < 3e-9), 2^n assembled in the exponent bits. Relative error
 * < 2e-7 on [-87, 88]; arguments are clamped to that range (no infinities, no denormals). */
static inline __attribute__((always_inline)) float sf_fast_expf(float x0) {
    /* NaN is clamped too (to -87), so the exponent below is always a small integer (a NaN
     * cast to int is undefined), and restored at the end: NaN in, NaN out, for the NaN stop. */
    float x = x0 > -87.0f ? (x0 < 88.0f ? x0 : 88.0f) : -87.0f;
    /* round to nearest by the 1.5 * 2^23 trick: exact for |v| < 2^22 */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { int32_t i; float f; } s;
    s.i = ((int32_t)n + 127) << 23;
    return x0 == x0 ? p * s.f : x0;
}

/* The standard normal CDF Phi(x) = P(Z <= x), absolute error < 4e-7 (measured 2.75e-7 where
 * the compiler fuses multiply-adds, 2.99e-7 where it does not, as at -O0), and
 * *e = exp(-x^2/2), which GELU's backward needs too: one exponential for both. By Abramowitz
 * & Stegun 7.1.26 in its erfc form, erfc(z) = t P(t) exp(-z^2) with t = 1 / (1 + 0.3275911 z),
 * z = |x| / sqrt 2: Phi = erfc/2 for x < 0 (no cancellation in the left tail), 1 - erfc/2
 * otherwise. One formula, no branch to select between: it vectorizes, and costs half of an
 * erf built from two approximations. NaN in, NaN out. */
static inline __attribute__((always_inline)) float sf_fast_phif(float x, float *e) {
    const float ax = x < 0.0f ? -x : x;
    const float t = 1.0f / (1.0f + 0.3275911f * 0.70710678118654752440f * ax);
    const float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
                     0.254829592f) * t;
    *e = sf_fast_expf(-0.5f * x * x);
    const float half_erfc = 0.5f * p * *e;
    return x < 0.0f ? half_erfc : 1.0f - half_erfc;
}

/* GELU's slope dy/dx = Phi(x) + x phi(x) (docs/math/basic.md#gelu), with phi's exponential
 * the one sf_fast_phif computes for Phi; keep_pdf 0 drops the x phi(x) term (the
 * breaking-a-backward variant). One expression for sf_gelu_backward and the fused
 * linear + GELU backward, so both give the same bits. */
static inline __attribute__((always_inline)) float sf_gelu_slope(float x, float keep_pdf) {
    float e;
    const float cdf = sf_fast_phif(x, &e);
    return cdf + keep_pdf * x * 0.39894228040143267794f * e; /* 1/sqrt(2 pi) */
}

/* QuickGELU, y = x s with s = sigmoid(k x), k = 1.702 (CvT's act_layer): its slope
 * dy/dx = s + k x s (1 − s) (docs/math/basic.md#quick-gelu); keep_slope 0 drops the
 * k x s (1 − s) term (the breaking-a-backward variant). Shared as sf_gelu_slope is. */
#define SF_QUICK_GELU_K 1.702f
static inline __attribute__((always_inline)) float sf_quick_gelu_slope(float x, float keep_slope) {
    const float s = 1.0f / (1.0f + sf_fast_expf(-SF_QUICK_GELU_K * x));
    return s + keep_slope * SF_QUICK_GELU_K * x * s * (1.0f - s);
}

/* ReLU's gradient G [x > 0]: a select, so it is exactly G or +0 (0 at x = 0, as torch). */
static inline __attribute__((always_inline)) float sf_relu_grad(float x, float G) { return x > 0.0f ? G : 0.0f; }

/* In bf16 the gradient of an activation's output made for the next linear layer alone (GELU,
 * QuickGELU, ReLU in bf16 alone, handed over to it) is that layer's input-gradient product
 * rounded to bf16, as autocast's bf16 linear layer gives it: written in bf16 (grad16) where the
 * product can (oneDNN's bf16 kernels), else in fp32 and rounded where the activation's backward
 * reads it; the same numbers either way. The linear layer marks the activation's node so (its
 * iarg[1] = 1). widen: n values of that gradient into dst in fp32, from grad16 or, when NULL,
 * grad rounded. */
void sf_act_grad_widen(float *restrict dst, const float *restrict grad, const uint16_t *restrict grad16, size_t n);

/* A linear layer whose output only its activation reads (sf_linear_act_to_linear): the
 * activation's node act (GELU, QuickGELU or ReLU) runs the backward of both, lin's (matmul.c). */
void sf_linear_act_backward(sf_ctx *g, sf_node *act, sf_node *lin);
/* GELU and QuickGELU on n bf16 inputs x, from tables of their values and slopes at every
 * bf16 value: the bits of the plain ops (elementwise.c). tabled: 1 if op's activation of
 * numel values uses them (GELU, QuickGELU; large enough). values: y = f(x) from the table;
 * grad: row = Ga ⊙ f'(x), from the table where tabled, else computed by the loop the table
 * was filled with (always so for keep, as sf_gelu_slope's, other than 1: the broken variant);
 * ReLU's grad too (never tabled: its slope is a comparison). */
int sf_act_bf16_tabled(sf_op op, size_t numel);
void sf_act_bf16_values(sf_op op, float *restrict y, const uint16_t *restrict x, size_t n);
void sf_act_bf16_grad(sf_op op, float *restrict row, const float *restrict Ga, const uint16_t *restrict x, size_t n,
                      float keep, int tabled);
/* The same from the tables (tabled, keep 1) with Ga in bf16: Ga widened in the same loop. */
void sf_act_bf16_grad_bf16(sf_op op, float *restrict row, const uint16_t *restrict Ga16, const uint16_t *restrict x,
                           size_t n);
/* The activation (SF_OP_GELU, SF_OP_QUICK_GELU, SF_OP_RELU) of an MLP's fc1 output h in bf16
 * precision (sf_linear_act_to_linear): h in bf16 alone (written so by oneDNN's kernels) or in
 * fp32 (fp32 kernels: rounded here, in the same pass, and its fp32 data given back); the
 * activation reads the rounded h, its output is bf16 alone. */
sf_tensor *sf_act_bf16_input(sf_ctx *g, sf_tensor *h, sf_op op);
/* The plain activation op's output for a linear layer (sf_gelu_to_linear, ...), by op. */
sf_tensor *sf_act_to_linear(sf_ctx *g, sf_tensor *x, sf_op op);

/* heads_split and heads_split_norm: the splits of one x recorded together write x's whole
 * gradient in one pass (sf_heads_split_gather, shape.c; 0 when that does not apply: x already
 * has a gradient). sf_heads_split_norm_slice_backward (attention.c): the gradient of slice
 * (b, h) of a heads_split_norm node written (acc 0) or added (acc 1) at its place in x's
 * gradient dx; scratch holds COLNORM_SCRATCH(D) floats. */
#define COLNORM_SCRATCH(D) ((size_t)3 * (size_t)(D)) /* a, b and a row of y widened from bf16 */
int sf_heads_split_gather(sf_ctx *g, sf_node *node);
void sf_heads_split_norm_slice_backward(const sf_node *node, int b, int h, float *dx, float *scratch, int acc);

#endif
