/* precision.h — the precision of the matrix products (train.precision) and the backends
 * that compute them (SFVIT_GEMM). Implementation: src/ops/gemm.c, src/ops/bf16.c,
 * src/ops/gemm_dnnl.c; which op runs in which precision: docs/precision.md.
 *
 * Only the products of linear layers, attention matmuls (sf_matmul and the attention ops)
 * and im2col convolutions follow the precision (sf_gemm_prec). Everything else, and sf_gemm
 * itself, stays fp32: master weights, gradients, AdamW, norms, the SOFT Gaussian kernel and
 * Newton-Raphson pseudo-inverse. */
#ifndef SFVIT_PRECISION_H
#define SFVIT_PRECISION_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    SF_PREC_FP32 = 0,      /* every product fp32 */
    SF_PREC_BF16,          /* bf16 operands, fp32 accumulation: oneDNN's native kernels, or
                              fp32 kernels where faster (sf_bf16_products) */
    SF_PREC_BF16_EMULATED, /* operands rounded to bf16 (nearest even), products by OpenBLAS
                              in fp32: exact products, a reference that runs everywhere */
} sf_precision;

/* "fp32", "bf16", "bf16_emulated"; parse returns -1 for anything else. */
const char *sf_precision_name(sf_precision p);
int sf_precision_parse(const char *s);

/* Process-wide; set once before a run (train/eval/bench/dump set it from the config). */
void sf_precision_set(sf_precision p);
sf_precision sf_precision_get(void);

/* How bf16 products are computed (train.bf16_products): oneDNN's bf16 kernels, or fp32
 * kernels on the bf16 values (the operands widened to fp32; the same exact products, another
 * summation order), which is faster where the CPU's bf16 dot product runs no faster than its
 * fp32 FMA (an Intel Xeon without AMX). Storage and everything else are bf16's either way;
 * train/precision.c chooses by measuring both. */
typedef enum { SF_BF16_PRODUCTS_ONEDNN = 0, SF_BF16_PRODUCTS_FP32 } sf_bf16_products;
const char *sf_bf16_products_name(sf_bf16_products k); /* "onednn", "fp32" */
int sf_bf16_products_parse(const char *s);             /* -1 for anything else */
void sf_bf16_products_set(sf_bf16_products k);
sf_bf16_products sf_bf16_products_get(void);

/* A product that follows the precision: C = alpha op(A) op(B) + beta C, row-major,
 * contiguous (as sf_gemm). A16/B16, when not NULL, are A and B already in bf16 (weights
 * converted once per step, sf_bf16_weights_refresh); they are used in the bf16 modes only. */
void sf_gemm_prec(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  const float *B, float beta, float *C);
void sf_gemm_prec_w(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    const uint16_t *A16, const float *B, const uint16_t *B16, float beta, float *C);
/* C = op(A) op(B) + bias, bias (N) added to every row (a linear layer's y = x W^T + b). On
 * oneDNN's bf16 kernels the bias is the product's epilogue and C is written once; elsewhere the
 * rows are seeded with the bias and the product added to them (beta 1). Either way each
 * element is the product's sum plus the bias, rounded once. */
void sf_gemm_prec_bias_w(int trans_a, int trans_b, int M, int N, int K, const float *A, const uint16_t *A16,
                         const float *B, const uint16_t *B16, const float *bias, float *C);
/* 1 on oneDNN's bf16 kernels, which can write a product in bf16: then sf_gemm_prec_bias_w16
 * gives C16 = op(A) op(B) + bias, each element rounded once in the product's epilogue. On fp32
 * kernels (0) the caller runs sf_gemm_prec_bias_w and rounds C itself: the same numbers. */
int sf_gemm_prec_writes_bf16(void);
void sf_gemm_prec_bias_w16(int trans_a, int trans_b, int M, int N, int K, const float *A, const uint16_t *A16,
                           const float *B, const uint16_t *B16, const float *bias, uint16_t *C16);
/* A product whose B is a weight w (a linear layer's: op(B) is W^T forward, W for the input
 * gradient): C = alpha op(A) op(w) + beta C, or with a bias (alpha 1, beta 0) the product plus
 * bias into C or, where sf_gemm_prec_writes_bf16, into C16 in bf16. On oneDNN's bf16 kernels
 * a product of 1024 rows (M) or more packs w from fp32 into the kernel's layout for itself
 * (SFVIT_PACK_WEIGHTS=0: never); the others, and every product elsewhere, are the products
 * above with w's bf16 copy (made on first use: none for a weight that is always packed). */
struct sf_tensor;
void sf_gemm_prec_weight(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                         const uint16_t *A16, const struct sf_tensor *w, const float *bias, float beta, float *C,
                         uint16_t *C16);

/* sfvit bench --no-products: while on, the kernels of every product above (fp32, oneDNN's
 * bf16, fp32 kernels on bf16 values) are skipped, leaving C = beta C, and all the work around
 * them (rounding and widening operands, copies, packing a weight) still runs. The values computed are then
 * meaningless; the time is that of a step whose products took none. sf_gemm itself (SOFT's
 * fp32 kernel and pseudo-inverse products) is not affected. */
void sf_products_skip(int on);

/* ---- bf16 numbers (src/ops/bf16.c) ---- */
/* fp32 -> bf16 with round-to-nearest-even; NaN stays NaN (quiet, sign kept), ±Inf stays
 * ±Inf, overflow past the largest bf16 rounds to Inf, denormals round like any number. */
uint16_t sf_bf16_from_f32(float x);
float sf_f32_from_bf16(uint16_t h);
/* x rounded to the nearest bf16 value, as fp32. */
float sf_bf16_round(float x);
void sf_bf16_convert(const float *x, uint16_t *y, size_t n);
void sf_bf16_round_into(const float *x, float *y, size_t n);
void sf_bf16_widen(const uint16_t *x, float *y, size_t n); /* bf16 -> fp32, exact */

/* Weights in bf16, converted once per step. Refresh registers every 2-d (or larger) tensor of
 * the list and converts the copies made so far (older registrations are dropped);
 * sf_bf16_weight returns w's copy, made on its first request, or NULL for a tensor not
 * registered. Call refresh after each optimizer step that did not write the copies (or before
 * each forward) while the precision is not fp32; clear drops all copies (weights are then
 * converted per product, with the same numbers). bf16 on fp32 kernels keeps no copies (refresh
 * drops them): each product rounds its weight from fp32 into the buffer it widens into anyway.
 * Changing the precision or the kernels drops them too. */
void sf_bf16_weights_refresh(struct sf_tensor *const *params, int n);
/* The copy of w for the optimizer to write as it updates w (sf_adamw_step_copies); NULL when
 * w has none (yet: a copy made later is made from the updated w). */
uint16_t *sf_bf16_weight_slot(const struct sf_tensor *w);
/* 1 when the last refresh registered w: then its copy, if any, is current after the optimizer
 * wrote every slot, and no refresh is needed. */
int sf_bf16_weight_registered(const struct sf_tensor *w);
const uint16_t *sf_bf16_weight(const struct sf_tensor *w);
void sf_bf16_weights_clear(void);

/* ---- backends (SFVIT_GEMM=auto|openblas|onednn) ---- */
typedef enum { SF_GEMM_AUTO = 0, SF_GEMM_OPENBLAS, SF_GEMM_ONEDNN } sf_gemm_backend;
sf_gemm_backend sf_gemm_backend_get(void);
const char *sf_gemm_backend_name(sf_gemm_backend b);
/* 1 when sf_gemm's fp32 products go to oneDNN (SFVIT_GEMM=onednn, or auto's choice). */
int sf_gemm_fp32_on_onednn(void);
/* The same for backend b (auto: what auto takes on this CPU). */
int sf_gemm_backend_uses_onednn(sf_gemm_backend b);
/* Switches between auto and onednn between two steps, no product running (sfvit bench
 * --alternate). openblas is not switchable: OpenBLAS's own threads are set at start-up. */
void sf_gemm_backend_set(sf_gemm_backend b);
/* What computes fp32 products, one phrase: the backend, OpenBLAS's kernel set, and why auto
 * chose oneDNN when it did (OpenBLAS without a kernel set for this CPU). */
void sf_gemm_describe(char *buf, size_t size);
/* GFLOP/s of one (M x K) (K x N)^T product, median of 7 after a warm-up: fp32 through sf_gemm
 * (the backend and threading in effect) or bf16 operands through oneDNN (0 where it has no
 * bf16 kernel). sfvit bench's ceilings and the start of a bf16 run measure with it. */
double sf_gemm_rate(int bf16, int M, int N, int K);
/* The same product's rate on one core: one thread, timed by its CPU time, so that another
 * process sharing the cores slows neither rate (the bf16 products' kernel choice, auto). */
double sf_gemm_core_rate(int bf16, int M, int N, int K);
/* The OPENBLAS_CORETYPE a CPU with these features should use when OpenBLAS runs the kernel
 * set core on it and that set is older than AVX2 (auto then prefers oneDNN), else NULL. */
const char *sf_openblas_core_fallback(const char *core, int cpu_avx2, int cpu_avx512, int cpu_bf16, int cpu_amd);

/* oneDNN (src/ops/gemm_dnnl.c). sf_dnnl_available: built with oneDNN (-Ddnnl). */
int sf_dnnl_available(void);
/* 1 when oneDNN has native bf16 kernels here (AVX512_BF16 or AMX_BF16; not AVX-512
 * emulation, not AVX2). Otherwise 0 and *why (if not NULL) names what is missing. */
int sf_dnnl_bf16_native(const char **why);
/* One line naming oneDNN's version, ISA and the kernels of f32 and bf16 matmul here. */
void sf_dnnl_describe(char *buf, size_t size);
/* Products through oneDNN's matmul: 0 on success, -1 when oneDNN cannot (no build, no
 * kernel); the caller then falls back. f32: A, B fp32; bf16: A16, B16 bf16; C always fp32. */
int sf_dnnl_gemm_f32(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                     const float *B, float beta, float *C);
int sf_dnnl_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                      const uint16_t *B16, float beta, float *C);
/* C = op(A16) op(B16) + bias, bias (N) added to every row in the product's epilogue. */
int sf_dnnl_gemm_bf16_bias(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                           const float *bias, float *C);
/* The same, C16 written in bf16: each element the fp32 sum plus the bias, rounded once. */
int sf_dnnl_gemm_bf16_bias_to_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                                   const float *bias, uint16_t *C16);
/* A product whose B is a weight W in fp32: W is packed (rounded to bf16, in the layout the
 * kernel reads: oneDNN's blocked layout) into a buffer of the calling thread, then read by the
 * product, instead of the product copying a bf16 copy of W into that layout itself. One pass
 * over W per product; the buffer is reused by the next. bias: NULL or (N); C16: NULL (C fp32,
 * beta C added) or C written in bf16 (beta 0). The rounding is round-to-nearest-even as
 * sf_bf16_convert's, except that fp32 values below bf16's normal range pack as zero (the
 * instruction flushes them). */
int sf_dnnl_gemm_bf16_weight(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                             const float *W, const float *bias, float beta, float *C, uint16_t *C16);
/* sfvit bench --no-products: the packing sf_dnnl_gemm_bf16_weight would do for that product
 * (bias: 0/1, c16: a bf16 output), without the product. */
int sf_dnnl_pack_weight_only(int ta, int tb, int M, int N, int K, float alpha, const float *W, int bias, float beta,
                             int c16);
/* Weights packed so far (all threads): one per product that packed its weight. */
long sf_dnnl_weights_packed(void);
/* Whether a weight's products on oneDNN's bf16 kernels pack it from fp32 (sf_gemm_prec_weight):
 * SFVIT_PACK_WEIGHTS, 1 or unset (the default) yes, 0 no (they read its bf16 copy); set
 * overrides the environment. parse: 1, 0, or -1 for any other value (the command refuses it;
 * a program linking the library gets a warning and 1). */
void sf_bf16_pack_weights_set(int on);
int sf_bf16_pack_weights_get(void);
int sf_bf16_pack_weights_parse(const char *s);
/* On oneDNN's bf16 kernels, a product (sf_gemm_prec_w, sf_gemm_prec_bias_w) of fewer
 * multiply-adds (M N K) than this (inside a parallel region or on one thread, where oneDNN
 * would not split it over a team: than the smaller of it and 65536) runs on fp32 kernels on
 * its bf16 values: the same exact products, summed in another order.
 * SFVIT_BF16_SMALL_MACS, unset the default (1000000), 0 every product on oneDNN; set overrides
 * the environment. parse: the count, or -1 for anything that is not a non-negative integer
 * (the command refuses it). */
#define SF_BF16_SMALL_MACS_PER_THREAD 65536L
void sf_bf16_small_macs_set(long macs);
long sf_bf16_small_macs_get(void);
long sf_bf16_small_macs_parse(const char *s);
/* Products run so far on fp32 kernels for being too small for oneDNN (all threads), and their
 * multiply-adds. */
void sf_bf16_small_stats(long *products, long *macs);
/* Primitives created so far and products run (all threads): the cache works when created
 * stops growing after the first step. */
void sf_dnnl_stats(long *created, long *executed);
/* Drops every cached primitive (after shapes that will not recur, such as the probes', so they
 * neither crowd a run's out of the cache nor stay in its memory): the calling thread's at once,
 * with its scratchpad and oneDNN's own primitive cache; every other thread's at its next
 * product. */
void sf_dnnl_cache_reset(void);
/* For a run that will not call oneDNN again (its products all on OpenBLAS): gives back the
 * pages of oneDNN's code that the kernels line and the kernels probe paged in (about 1 MiB,
 * held for the whole run otherwise). Code is never written, so nothing is lost: if oneDNN
 * runs again, the kernel reads its pages from the library file again. Returns the bytes of
 * code advised (0 without oneDNN or where not supported). */
size_t sf_dnnl_release_code(void);
/* The kernels oneDNN picked for sfvit's products so far, one row per implementation name
 * (dnnl_query_impl_info_str, e.g. "brg:avx512_core_amx", "gemm:jit", "ref:any") and data
 * type: primitives created on it, products run and their multiply-adds (all threads). slow:
 * the name matches the slow pattern ("ref" unless set otherwise: oneDNN's reference kernel,
 * taken when no optimized one supports the product); the first primitive on a slow kernel
 * prints a warning naming its product. sf_dnnl_kernels copies up to max rows and returns how
 * many; sf_dnnl_set_slow_pattern changes the pattern (the tests use it to see the warning
 * where oneDNN has no reference-kernel product to show). */
#define SF_DNNL_MAX_KERNELS 32 /* rows of the table; a model uses two or three */
typedef struct sf_dnnl_kernel {
    char impl[48];
    int bf16, slow;
    long prims, runs, macs;
} sf_dnnl_kernel;
int sf_dnnl_kernels(sf_dnnl_kernel *out, int max);
void sf_dnnl_set_slow_pattern(const char *pattern);

#endif
