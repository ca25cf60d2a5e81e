/* bf16.c — bf16 numbers, weights converted once per step, and the products that follow
 * train.precision (sf_gemm_prec).
 *
 * bf16 is the upper half of an fp32 (sign, 8-bit exponent, 7 stored mantissa bits), so
 * converting is rounding away the lower 16 bits. A product of two bf16 numbers has at most
 * 16 significant bits and is exact in fp32: the emulation (bf16_emulated) rounds the operands
 * and lets OpenBLAS multiply in fp32, which differs from a native bf16 kernel with fp32
 * accumulation (oneDNN on AVX512_BF16/AMX) only in the order of the sums.
 */
#include "ops_internal.h"
#include "sfvit/precision.h"

#include <stdlib.h>
#include <malloc.h>
#include <string.h>

/* ---- numbers ---- */

static inline uint16_t to_bf16(float x) { return sf_to_bf16(x); }

static inline float from_bf16(uint16_t h) { return sf_from_bf16(h); }

uint16_t sf_bf16_from_f32(float x) { return to_bf16(x); }
float sf_f32_from_bf16(uint16_t h) { return from_bf16(h); }
float sf_bf16_round(float x) { return from_bf16(to_bf16(x)); }

/* The conversions: one vector loop each over a span, run on the calling thread for small n
 * or inside a parallel region (an attention slice's product), else split over the team. Not
 * one `parallel for simd if (...)`: without the `parallel :` modifier the condition governs
 * the simd part too and a false one leaves the loop scalar (5x slower), and even with it a
 * serialized region inside a parallel one costs as much as converting a head's slice. */
#define BF16_OMP_MIN ((size_t)1 << 16)

typedef void (*span_fn)(const void *x, void *y, size_t n);

static void over_team(span_fn f, const void *x, size_t x_size, void *y, size_t y_size, size_t n) {
    if (n < BF16_OMP_MIN || omp_in_parallel()) {
        f(x, y, n);
        return;
    }
#pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t lo = n * t / T, hi = n * (t + 1) / T;
        f((const char *)x + lo * x_size, (char *)y + lo * y_size, hi - lo);
    }
}

static void convert_span(const void *x, void *y, size_t n) {
    const float *restrict xs = x;
    uint16_t *restrict ys = y;
#pragma omp simd
    for (size_t i = 0; i < n; i++) ys[i] = to_bf16(xs[i]);
}

static void round_span(const void *x, void *y, size_t n) {
    const float *restrict xs = x;
    float *restrict ys = y;
#pragma omp simd
    for (size_t i = 0; i < n; i++) ys[i] = from_bf16(to_bf16(xs[i]));
}

static void widen_span(const void *x, void *y, size_t n) {
    const uint16_t *restrict xs = x;
    float *restrict ys = y;
#pragma omp simd
    for (size_t i = 0; i < n; i++) ys[i] = from_bf16(xs[i]);
}

void sf_bf16_convert(const float *x, uint16_t *y, size_t n) {
    over_team(convert_span, x, sizeof *x, y, sizeof *y, n);
}

void sf_bf16_round_into(const float *x, float *y, size_t n) {
    over_team(round_span, x, sizeof *x, y, sizeof *y, n);
}

void sf_bf16_widen(const uint16_t *x, float *y, size_t n) { over_team(widen_span, x, sizeof *x, y, sizeof *y, n); }

/* ---- precision ---- */

static sf_precision precision = SF_PREC_FP32;
static sf_bf16_products bf16_products = SF_BF16_PRODUCTS_ONEDNN;
static const char *const names[] = {"fp32", "bf16", "bf16_emulated"};
static const char *const products_names[] = {"onednn", "fp32"};

/* The name of value i in a list of n names, and the value of a name (-1 if none). */
static const char *name_of(const char *const *list, int n, int i) { return i >= 0 && i < n ? list[i] : "?"; }

static int value_of(const char *const *list, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, list[i])) return i;
    return -1;
}

#define COUNT(list) ((int)(sizeof list / sizeof *list))

const char *sf_precision_name(sf_precision p) { return name_of(names, COUNT(names), (int)p); }
int sf_precision_parse(const char *s) { return value_of(names, COUNT(names), s); }

void sf_precision_set(sf_precision p) {
    if (p != precision) sf_bf16_weights_clear();
    precision = p;
}

sf_precision sf_precision_get(void) { return precision; }

const char *sf_bf16_products_name(sf_bf16_products k) {
    return name_of(products_names, COUNT(products_names), (int)k);
}
int sf_bf16_products_parse(const char *s) { return value_of(products_names, COUNT(products_names), s); }

void sf_bf16_products_set(sf_bf16_products k) {
    if (k != bf16_products) sf_bf16_weights_clear();
    bf16_products = k;
}
sf_bf16_products sf_bf16_products_get(void) { return bf16_products; }

sf_tensor *sf_tensor_for_linear(sf_ctx *g, int ndim, const int *shape) {
    return precision == SF_PREC_FP32 ? sf_tensor_new(g, ndim, shape) : sf_tensor_new_bf16(g, ndim, shape);
}

/* ---- weights in bf16, once per step ---- */

/* Each 2-d (or larger) parameter is registered by the refresh; its bf16 copy is made when a
 * product first asks for it (sf_bf16_weight) and from then on rewritten by every refresh and
 * every update (sf_adamw_step_copies). A weight no product asks for gets none: on oneDNN's
 * bf16 kernels a linear layer's large products pack their weight from fp32
 * (sf_gemm_prec_weight), so of a ViT only the convolutions', the classifier's and the
 * class-attention queries' weights are copied. */
typedef struct {
    const sf_tensor *w;
    uint16_t *h;
    size_t cap;
    int live; /* h holds w's current values */
} shadow;
static shadow *shadows;
static int n_shadows, cap_shadows;

void sf_bf16_weights_clear(void) {
    const int had = n_shadows > 0;
    for (int i = 0; i < n_shadows; i++) free(shadows[i].h);
    free(shadows);
    shadows = NULL;
    n_shadows = cap_shadows = 0;
#ifdef __GLIBC__
    /* Freed copies stay in glibc's heap (its mmap threshold rises with the first large free):
     * the memory probe's, for DeiT-S 35 MiB of the run's peak, are returned. */
    if (had) malloc_trim(0);
#endif
}

/* bf16 products on fp32 kernels keep no copies: each product rounds its weight from fp32
 * into the buffer it widens into anyway, the same bits as widening a copy, without a second
 * set of weights (42 MiB for DeiT-S) or the conversion pass of every step. */
static int weights_copied(void) {
    return precision == SF_PREC_BF16_EMULATED || (precision == SF_PREC_BF16 && bf16_products == SF_BF16_PRODUCTS_ONEDNN);
}

void sf_bf16_weights_refresh(sf_tensor *const *params, int n) {
    if (!weights_copied()) {
        sf_bf16_weights_clear();
        return;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        const sf_tensor *w = params[i];
        if (!w || w->ndim < 2) continue; /* biases and norm parameters are not product operands */
        if (k == cap_shadows) {
            int cap = cap_shadows ? 2 * cap_shadows : 64;
            shadows = realloc(shadows, (size_t)cap * sizeof *shadows);
            SF_ASSERT(shadows, "out of memory for bf16 weights");
            memset(shadows + cap_shadows, 0, (size_t)(cap - cap_shadows) * sizeof *shadows);
            cap_shadows = cap;
        }
        shadow *s = &shadows[k++];
        s->live = s->live && s->w == w; /* a copy asked for before is kept up to date */
        s->w = w;
        if (s->live) sf_bf16_convert(w->data, s->h, w->numel);
    }
    for (int i = k; i < n_shadows; i++) shadows[i].w = NULL, shadows[i].live = 0;
    n_shadows = k > n_shadows ? k : n_shadows;
}

static shadow *shadow_of(const sf_tensor *w) {
    if (precision == SF_PREC_FP32) return NULL;
    for (int i = 0; i < n_shadows; i++)
        if (shadows[i].w == w) return &shadows[i];
    return NULL;
}

int sf_bf16_weight_registered(const sf_tensor *w) { return shadow_of(w) != NULL; }

uint16_t *sf_bf16_weight_slot(const sf_tensor *w) {
    shadow *s = shadow_of(w);
    return s && s->live ? s->h : NULL;
}

/* Made here on the first request (from the ops' serial code; inside a parallel region the
 * product rounds the weight itself, the same numbers). */
const uint16_t *sf_bf16_weight(const sf_tensor *w) {
    shadow *s = shadow_of(w);
    if (!s) return NULL;
    if (!s->live) {
        if (omp_in_parallel()) return NULL;
        if (s->cap < w->numel) {
            free(s->h);
            s->h = sf_malloc(w->numel * sizeof *s->h);
            s->cap = w->numel;
        }
        sf_bf16_convert(w->data, s->h, w->numel);
        s->live = 1;
    }
    return s->h;
}

/* ---- products ---- */

/* Per-thread scratch for converted operands (products run inside OpenMP regions too). */
typedef struct {
    void *p;
    size_t size;
} scratch;
static __thread scratch tmp[2];

static void *scratch_get(int i, size_t bytes) {
    if (tmp[i].size < bytes) {
        free(tmp[i].p);
        tmp[i].p = sf_malloc(bytes);
        tmp[i].size = bytes;
    }
    return tmp[i].p;
}

/* ---- fp32 kernels on bf16 values (bf16_emulated, and bf16 with train.bf16_products=fp32) ----
 * Each operand is widened from its bf16 copy, or rounded from fp32, into a per-thread buffer.
 * A product whose larger operand exceeds WIDE_MAX floats runs in blocks so that the buffers
 * hold a block, not the operand: a whole one is as large as an activation (SOFT-Tiny's first
 * stage: 25088 x 512, 51 MB in fp32), held next to every activation of the step. Blocks of
 * op(A)'s rows (C's rows: the sums are untouched) when op(A) is the larger, else of the
 * summed dimension K, accumulated into C in order (one more rounding per block). */
#define WIDE_MAX ((size_t)1 << 21)

/* Rows r0..r0+nr, columns c0..c0+nc of X (row-major, ld columns), from its bf16 copy X16 or
 * rounded from X, into y (nr x nc, contiguous). */
static void bf16_block(const float *X, const uint16_t *X16, int ld, int r0, int nr, int c0, int nc, float *y) {
    const size_t from = (size_t)r0 * ld + c0;
    if (nc == ld) { /* whole rows: one span */
        if (X16)
            sf_bf16_widen(X16 + from, y, (size_t)nr * nc);
        else
            sf_bf16_round_into(X + from, y, (size_t)nr * nc);
        return;
    }
#pragma omp parallel for if (!omp_in_parallel() && (size_t)nr * nc >= BF16_OMP_MIN)
    for (int r = 0; r < nr; r++) {
        if (X16)
            widen_span(X16 + from + (size_t)r * ld, y + (size_t)r * nc, (size_t)nc);
        else
            round_span(X + from + (size_t)r * ld, y + (size_t)r * nc, (size_t)nc);
    }
}

static float *buffer(int i, size_t floats) { return scratch_get(i, floats * sizeof(float)); }

/* sfvit bench --no-products: the product kernels (fp32 and oneDNN's bf16) leave C = beta C,
 * and everything sfvit does around them (rounding, widening, copies) still runs: the time
 * of a step whose products took none, which faster kernels approach. */
static int kernels_skipped;

void sf_products_skip(int on) { kernels_skipped = on; }

/* C = beta C over elements lo..lo+m (bytes: the size of one element of C, 2 for a bf16
 * output, which beta 0 only writes). */
static void skip_span(void *C, size_t lo, size_t m, float beta, size_t bytes) {
    if (beta == 0.0f) {
        memset((char *)C + lo * bytes, 0, m * bytes);
    } else {
        float *c = (float *)C + lo;
        for (size_t i = 0; i < m; i++) c[i] *= beta;
    }
}

/* Shared out over the team as a kernel writes its C: done by one thread, the fill of the large
 * outputs (DeiT-S's qkv rows: 7 MiB) was counted as work around the products that no real
 * step does. Inside a parallel region (the attention ops' per-head products) the calling
 * thread fills it, without opening a region of one. */
static void skip_kernel_bytes(int M, int N, float beta, void *C, size_t bytes) {
    const size_t n = (size_t)M * N, span = (size_t)1 << 14; /* elements a chunk */
    if (beta == 1.0f) return;
    if (n < BF16_OMP_MIN || omp_in_parallel()) {
        skip_span(C, 0, n, beta, bytes);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t lo = 0; lo < n; lo += span) skip_span(C, lo, n - lo < span ? n - lo : span, beta, bytes);
}

static void skip_kernel(int M, int N, float beta, float *C) { skip_kernel_bytes(M, N, beta, C, sizeof *C); }

/* A skipped product's output: C16 (bf16, written with beta 0) or C. */
static void skip_output(int M, int N, float beta, float *C, uint16_t *C16) {
    if (C16)
        skip_kernel_bytes(M, N, 0.0f, C16, sizeof *C16);
    else
        skip_kernel(M, N, beta, C);
}

static void f32_kernel(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                       float *C) {
    if (kernels_skipped)
        skip_kernel(M, N, beta, C);
    else
        sf_gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

static void gemm_on_fp32_kernels(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                                 const uint16_t *A16, const float *B, const uint16_t *B16, float beta, float *C) {
    /* stored: A is (M x K), or (K x M) when ta; B is (K x N), or (N x K) when tb */
    const size_t na = (size_t)M * K, nb = (size_t)K * N;
    if (na <= WIDE_MAX && nb <= WIDE_MAX) {
        float *a = buffer(0, na), *b = buffer(1, nb);
        bf16_block(A, A16, ta ? M : K, 0, ta ? K : M, 0, ta ? M : K, a);
        bf16_block(B, B16, tb ? K : N, 0, tb ? N : K, 0, tb ? K : N, b);
        f32_kernel(ta, tb, M, N, K, alpha, a, b, beta, C);
        return;
    }
    if (na >= nb) { /* rows of op(A), and of C */
        float *b = buffer(1, nb);
        bf16_block(B, B16, tb ? K : N, 0, tb ? N : K, 0, tb ? K : N, b);
        const int rows = K >= (int)WIDE_MAX ? 1 : (int)(WIDE_MAX / (size_t)K);
        float *a = buffer(0, (size_t)rows * K);
        for (int r0 = 0; r0 < M; r0 += rows) {
            const int nr = M - r0 < rows ? M - r0 : rows;
            if (ta)
                bf16_block(A, A16, M, 0, K, r0, nr, a); /* columns r0.. of (K x M): (K x nr) */
            else
                bf16_block(A, A16, K, r0, nr, 0, K, a);
            f32_kernel(ta, tb, nr, N, K, alpha, a, b, beta, C + (size_t)r0 * N);
        }
        return;
    }
    const int wide = M > N ? M : N, depth = wide >= (int)WIDE_MAX ? 1 : (int)(WIDE_MAX / (size_t)wide);
    float *a = buffer(0, (size_t)M * depth), *b = buffer(1, (size_t)depth * N);
    for (int k0 = 0; k0 < K; k0 += depth) { /* C = beta C + alpha sum over blocks of K */
        const int nk = K - k0 < depth ? K - k0 : depth;
        if (ta)
            bf16_block(A, A16, M, k0, nk, 0, M, a); /* rows k0.. of (K x M) */
        else
            bf16_block(A, A16, K, 0, M, k0, nk, a);
        if (tb)
            bf16_block(B, B16, K, 0, N, k0, nk, b); /* columns k0.. of (N x K) */
        else
            bf16_block(B, B16, N, k0, nk, 0, N, b);
        f32_kernel(ta, tb, M, N, nk, alpha, a, b, k0 ? 1.0f : beta, C);
    }
}

static const uint16_t *native_operand(int i, const float *X, const uint16_t *X16, size_t n) {
    if (X16) return X16;
    uint16_t *y = scratch_get(i, n * sizeof *y);
    sf_bf16_convert(X, y, n);
    return y;
}

/* On oneDNN's bf16 kernels a linear layer's weight is packed from fp32 into the layout of the
 * kernel for each of its products of PACK_MIN_ROWS rows or more (the forward's W^T, the input
 * gradient's W), in one pass: faster than a product reading a bf16 copy, which the kernel then
 * copies into that layout itself, block by block (DeiT-S's linear products on Zen 5: 1.02-1.16x
 * with the packing counted), and no bf16 copy of those weights is kept (42 MiB for DeiT-S).
 * Below PACK_MIN_ROWS the packing's own pass costs more than it saves (the Fashion-MNIST
 * model's 512-row products: 0.74-0.98x), and the product reads the weight's copy.
 * SFVIT_PACK_WEIGHTS=0 reads copies always, to compare (docs/precision.md). */
#define PACK_MIN_ROWS 1024
static int pack_weights = -1;

void sf_bf16_pack_weights_set(int on) { pack_weights = on; }

int sf_bf16_pack_weights_parse(const char *s) { return sf_parse_switch(s); }

int sf_bf16_pack_weights_get(void) {
    if (pack_weights < 0) {
        const int on = sf_bf16_pack_weights_parse(getenv("SFVIT_PACK_WEIGHTS"));
        if (on < 0) sf_warn("SFVIT_PACK_WEIGHTS=%s is neither 0 nor 1: packing the weights", getenv("SFVIT_PACK_WEIGHTS"));
        pack_weights = on != 0;
    }
    return pack_weights;
}

/* Products on oneDNN's bf16 kernels: bf16 precision with train.bf16_products onednn. */
static int on_bf16_kernels(void) { return precision == SF_PREC_BF16 && bf16_products == SF_BF16_PRODUCTS_ONEDNN; }

/* A product of fewer multiply-adds (M N K) than this runs on fp32 kernels on its bf16 values
 * even there: the call into oneDNN costs more than such a product, and each of its shapes is a
 * primitive held for the run (its heap and JIT code: the Fashion-MNIST model's 57 primitives
 * hold 3.3 MiB). Measured per shape on Zen 5 by `build/bench/gemm` (docs/precision.md): a
 * product that oneDNN splits over a team of two is faster on fp32 kernels up to 590 k
 * multiply-adds (64 x 96 x 96: 0.61-0.69 of oneDNN's time), slower from 1.2 M (128 x 96 x 96:
 * 1.39-1.6); one that it runs on the calling thread alone (one per thread inside a parallel
 * region, a head's or an image's; or any product on one thread) it wins from about 74 k
 * (8 x 96 x 96: even; 96 x 64 x 16: 1.4-2.4x) and loses below (24 x 256 x 9: 0.54-0.9).
 * Few products of a 224-pixel model's are this small (class attention's, a head's); most of
 * the Fashion-MNIST model's are (per-head attention, per-image patch convolutions).
 * SFVIT_BF16_SMALL_MACS sets the first (the second is the smaller of the two; 0: every
 * product on oneDNN). */
#define SMALL_MACS_ALONE 1000000L
static long small_macs = -1;

long sf_bf16_small_macs_parse(const char *s) {
    if (!s || !*s) return SMALL_MACS_ALONE;
    char *end;
    const long v = strtol(s, &end, 10);
    return *end || v < 0 ? -1 : v;
}

void sf_bf16_small_macs_set(long macs) { small_macs = macs; }

long sf_bf16_small_macs_get(void) {
    if (small_macs < 0) {
        const char *e = getenv("SFVIT_BF16_SMALL_MACS");
        const long v = sf_bf16_small_macs_parse(e);
        if (v < 0) sf_warn("SFVIT_BF16_SMALL_MACS=%s is not a count: using %ld", e, SMALL_MACS_ALONE);
        small_macs = v < 0 ? SMALL_MACS_ALONE : v;
    }
    return small_macs;
}

static long small_runs, small_run_macs; /* products too small for oneDNN, run on fp32 kernels */

void sf_bf16_small_stats(long *products, long *macs) {
    if (products) *products = __atomic_load_n(&small_runs, __ATOMIC_RELAXED);
    if (macs) *macs = __atomic_load_n(&small_run_macs, __ATOMIC_RELAXED);
}

/* On oneDNN's bf16 kernels and large enough for them. oneDNN splits a product over the team
 * when there is one (called outside a parallel region, with more than one thread); otherwise
 * it runs it on the calling thread. */
static int on_bf16_kernels_for(int M, int N, int K) {
    if (!on_bf16_kernels()) return 0;
    long small = sf_bf16_small_macs_get();
    const int split = !omp_in_parallel() && omp_get_max_threads() > 1;
    if (!split && small > SF_BF16_SMALL_MACS_PER_THREAD) small = SF_BF16_SMALL_MACS_PER_THREAD;
    return (long)M * N * K >= small;
}

void sf_gemm_prec_w(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    const uint16_t *A16, const float *B, const uint16_t *B16, float beta, float *C) {
    size_t na = (size_t)M * K, nb = (size_t)K * N; /* transposed or not, contiguous */
    if (precision == SF_PREC_FP32) {
        f32_kernel(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
        return;
    }
    if (!on_bf16_kernels_for(M, N, K)) {
        if (on_bf16_kernels()) { /* too small for them: counted for sfvit bench */
            __atomic_add_fetch(&small_runs, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&small_run_macs, (long)M * N * K, __ATOMIC_RELAXED);
        }
        /* bf16 x bf16 is exact in fp32: fp32 kernels on the bf16 values give the same products */
        gemm_on_fp32_kernels(trans_a, trans_b, M, N, K, alpha, A, A16, B, B16, beta, C);
        return;
    }
    const uint16_t *a = native_operand(0, A, A16, na), *b = native_operand(1, B, B16, nb);
    if (kernels_skipped) {
        skip_kernel(M, N, beta, C);
        return;
    }
    /* The command checked sf_dnnl_bf16_native before choosing bf16. */
    const int rc = sf_dnnl_gemm_bf16(trans_a, trans_b, M, N, K, alpha, a, b, beta, C);
    SF_ASSERT(rc == 0, "oneDNN has no bf16 matmul here (%d x %d x %d)", M, N, K);
}

/* On fp32 kernels (OpenBLAS has no epilogue) the bias is a pass of its own: every row of C
 * seeded with it, shared out over the team like the product that follows (DeiT-S's qkv rows:
 * 167 -> 113 us on 2 threads), then the product added with beta 1. On oneDNN's bf16 kernels it
 * is their bias input, added as the product's rows are written: no seeding pass, and no read of
 * C by the product (DeiT-S b8: 21 MB written and read again per block). */
/* On oneDNN's bf16 kernels: C = op(A) op(B) + bias into C (fp32) or C16 (bf16, each element
 * rounded once), the bias in the product's epilogue. */
static void bias_on_bf16_kernels(int ta, int tb, int M, int N, int K, const float *A, const uint16_t *A16,
                                 const float *B, const uint16_t *B16, const float *bias, float *C, uint16_t *C16) {
    const uint16_t *a = native_operand(0, A, A16, (size_t)M * K), *b = native_operand(1, B, B16, (size_t)K * N);
    if (kernels_skipped) {
        skip_output(M, N, 0.0f, C, C16);
        return;
    }
    const int rc = C16 ? sf_dnnl_gemm_bf16_bias_to_bf16(ta, tb, M, N, K, a, b, bias, C16)
                       : sf_dnnl_gemm_bf16_bias(ta, tb, M, N, K, a, b, bias, C);
    SF_ASSERT(rc == 0, "oneDNN has no bf16 matmul with a bias and a %s output here (%d x %d x %d)",
              C16 ? "bf16" : "fp32", M, N, K);
}

void sf_gemm_prec_bias_w(int trans_a, int trans_b, int M, int N, int K, const float *A, const uint16_t *A16,
                         const float *B, const uint16_t *B16, const float *bias, float *C) {
    if (on_bf16_kernels_for(M, N, K)) {
        bias_on_bf16_kernels(trans_a, trans_b, M, N, K, A, A16, B, B16, bias, C, NULL);
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)M * N >= 65536 && !omp_in_parallel())
    for (int r = 0; r < M; r++) memcpy(C + (size_t)r * N, bias, (size_t)N * sizeof(float));
    sf_gemm_prec_w(trans_a, trans_b, M, N, K, 1.0f, A, A16, B, B16, 1.0f, C);
}

int sf_gemm_prec_writes_bf16(void) { return on_bf16_kernels(); }

void sf_gemm_prec_bias_w16(int trans_a, int trans_b, int M, int N, int K, const float *A, const uint16_t *A16,
                           const float *B, const uint16_t *B16, const float *bias, uint16_t *C16) {
    SF_ASSERT(on_bf16_kernels(), "a product written in bf16 needs oneDNN's bf16 kernels");
    bias_on_bf16_kernels(trans_a, trans_b, M, N, K, A, A16, B, B16, bias, NULL, C16);
}

/* B is the weight w: packed from fp32 on oneDNN's bf16 kernels (products of PACK_MIN_ROWS rows
 * or more), else the products above with its bf16 copy (made on first use; none on fp32
 * kernels). */
void sf_gemm_prec_weight(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                         const uint16_t *A16, const sf_tensor *w, const float *bias, float beta, float *C,
                         uint16_t *C16) {
    SF_ASSERT(!C16 || (beta == 0.0f && alpha == 1.0f), "a product written in bf16 is written whole (alpha 1, beta 0)");
    SF_ASSERT(!bias || (beta == 0.0f && alpha == 1.0f), "a product with a bias writes y = x W^T + b");
    if (!on_bf16_kernels() || !sf_bf16_pack_weights_get() || M < PACK_MIN_ROWS) {
        const uint16_t *w16 = sf_bf16_weight(w);
        if (C16)
            sf_gemm_prec_bias_w16(trans_a, trans_b, M, N, K, A, A16, w->data, w16, bias, C16);
        else if (bias)
            sf_gemm_prec_bias_w(trans_a, trans_b, M, N, K, A, A16, w->data, w16, bias, C);
        else
            sf_gemm_prec_w(trans_a, trans_b, M, N, K, alpha, A, A16, w->data, w16, beta, C);
        return;
    }
    const uint16_t *a = native_operand(0, A, A16, (size_t)M * K);
    if (kernels_skipped) { /* the packing is work around the product: it stays */
        SF_ASSERT(sf_dnnl_pack_weight_only(trans_a, trans_b, M, N, K, alpha, w->data, bias != NULL, beta, C16 != NULL) == 0,
                  "oneDNN cannot pack a weight here (%d x %d x %d)", M, N, K);
        skip_output(M, N, beta, C, C16);
        return;
    }
    const int rc = sf_dnnl_gemm_bf16_weight(trans_a, trans_b, M, N, K, alpha, a, w->data, bias, beta, C, C16);
    SF_ASSERT(rc == 0, "oneDNN has no bf16 matmul with a packed weight here (%d x %d x %d)", M, N, K);
}

void sf_gemm_prec(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  const float *B, float beta, float *C) {
    sf_gemm_prec_w(trans_a, trans_b, M, N, K, alpha, A, NULL, B, NULL, beta, C);
}
