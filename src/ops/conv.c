/* conv.c — 2-D convolution (im2col + one GEMM per batch element and group, col2im in the
 * backward) and average pooling. Derivations: docs/math/soft_conv_norm.md#convolution.
 *
 * Direct kernels handle the depthwise case (groups == C_in == C_out: LPI's 3×3, SOFT's V-conv,
 * CvT's projections), where im2col would feed GEMMs with one output row: per channel plane
 * (each channel's padded planes stacked and split into the stride's phases, dw_span_*), or
 * with the channels innermost (dwl_*), chosen by shape
 * (conv_kernel_of). The im2col path stays the reference and the tests compare all three
 * (sf_conv2d_set_path).
 *
 * Deliberately not here: dilation, asymmetric stride/padding, padding modes other than zeros,
 * padded or ceil-mode pooling (no model needs them).
 *
 * Dimension legend: B batch, C channels (Cin, Cout; Cg = Cin/groups, Og = Cout/groups per
 * group), H W input height/width, Ho Wo output height/width, kh kw kernel size.
 */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>

/* The setting (SF_CONV_AUTO or a forced kernel). A node records the kernel its forward used
 * (an sf_conv_path other than AUTO), and the backward takes the same. */
static sf_conv_path conv_path = SF_CONV_AUTO;

void sf_conv2d_set_path(sf_conv_path p) { conv_path = p; }

/* Geometry shared by forward and backward (derived from the shapes plus iarg). */
typedef struct conv_geom {
    int B, Cin, H, W, Cout, kh, kw, stride, pad, groups, Cg, Og, Ho, Wo;
} conv_geom;

static conv_geom conv_geom_of(const sf_tensor *x, const sf_tensor *w, int stride, int pad,
                              int groups) {
    conv_geom c = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2],
                   w->shape[3], stride, pad, groups, 0, 0, 0, 0};
    c.Cg = c.Cin / groups;
    c.Og = c.Cout / groups;
    c.Ho = (c.H + 2 * pad - c.kh) / stride + 1;
    c.Wo = (c.W + 2 * pad - c.kw) / stride + 1;
    return c;
}

/* Output columns oj in [*lo, *hi) read input column oj*s − p + k inside [0, W). */
static void valid_range(int k, int s, int p, int W, int Wo, int *lo, int *hi) {
    int a = p - k;                                  // need oj*s >= a
    int l0 = a <= 0 ? 0 : (a + s - 1) / s;
    int b = W - 1 + p - k;                          // need oj*s <= b
    int h0 = b < 0 ? 0 : b / s + 1;
    *lo = l0;
    *hi = h0 < Wo ? h0 : Wo;
    if (*hi < *lo) *hi = *lo;
}

/* Unit-stride row kernels (direct path and col2im). `omp simd` asks for vectorization that the -O2
 * cost model would otherwise decline for an unknown trip count. */
static inline void row_axpy(float *restrict d, const float *restrict s, float a, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) d[i] += a * s[i];
}

static inline float row_dot(const float *restrict a, const float *restrict b, int n) {
    float acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static inline void row_to_bf16(uint16_t *restrict d, const float *restrict s, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) d[i] = sf_to_bf16(s[i]);
}

/* Below this many floats copied, im2col and col2im stay on one thread. */
#define CONV_OMP_MIN 65536

static inline float row_sum(const float *restrict a, int n) {
    float acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < n; i++) acc += a[i];
    return acc;
}

/* cols (C·kh·kw, Ho·Wo) from x (C, H, W): row (c, ki, kj) holds the input pixel each output
 * position sees through kernel tap (ki, kj); zero where the tap falls in the padding. Rows are
 * independent, so they are shared out: the copy is as large as the GEMM's B operand (a 3×3
 * stem conv at 112² copies 9 floats per input float, about as long as its GEMM).
 * In bf16 precision the columns are written as bf16 (cols16 instead of cols), the operand the
 * product reads: rounded once here instead of written in fp32 and rounded by the product, half
 * the bytes written and no second pass (XCiT's 48 -> 96 stem conv: 43 MB of fp32 columns a
 * step, each pass). */
static void im2col(float *cols, uint16_t *cols16, const float *x, const uint16_t *x16, int C, const conv_geom *c,
                   int r0, int nr) {
    const int rows = C * c->kh * c->kw, T = nr * c->Wo; /* output rows r0 .. r0 + nr: T columns */
    const size_t el = cols16 ? sizeof *cols16 : sizeof *cols;
#pragma omp parallel for if ((size_t)rows * T > CONV_OMP_MIN)
    for (int r = 0; r < rows; r++) {
        const int ch = r / (c->kh * c->kw), ki = (r / c->kw) % c->kh, kj = r % c->kw;
        const size_t plane = (size_t)ch * c->H * c->W;
        const float *src = x ? x + plane : NULL;
        const uint16_t *src16 = x16 ? x16 + plane : NULL; /* x kept in bf16 alone (cols16 then) */
        int lo, hi;
        valid_range(kj, c->stride, c->pad, c->W, c->Wo, &lo, &hi);
        for (int oi = r0; oi < r0 + nr; oi++) {
            const size_t at = (size_t)r * T + (size_t)(oi - r0) * c->Wo; /* this output row's columns */
            float *d = cols ? cols + at : NULL;
            uint16_t *d16 = cols16 ? cols16 + at : NULL;
            const int ii = oi * c->stride - c->pad + ki;
            if (ii < 0 || ii >= c->H) {
                memset(d ? (void *)d : (void *)d16, 0, (size_t)c->Wo * el); /* bf16 zero is all bits 0 */
                continue;
            }
            const float *s = src ? src + (size_t)ii * c->W : NULL;
            const uint16_t *s16 = src16 ? src16 + (size_t)ii * c->W : NULL;
            const int off = kj - c->pad; /* column oj reads s[oj·stride + off] */
            memset(d ? (void *)d : (void *)d16, 0, (size_t)lo * el);
            if (s16 && c->stride == 1)
                memcpy(d16 + lo, s16 + lo + off, (size_t)(hi - lo) * sizeof *d16);
            else if (s16)
                for (int oj = lo; oj < hi; oj++) d16[oj] = s16[oj * c->stride + off];
            else if (d16 && c->stride == 1)
                row_to_bf16(d16 + lo, s + lo + off, hi - lo);
            else if (d16)
                for (int oj = lo; oj < hi; oj++) d16[oj] = sf_to_bf16(s[oj * c->stride + off]);
            else if (c->stride == 1)
                memcpy(d + lo, s + lo + off, (size_t)(hi - lo) * sizeof(float));
            else
                for (int oj = lo; oj < hi; oj++) d[oj] = s[oj * c->stride + off];
            memset(d ? (void *)(d + hi) : (void *)(d16 + hi), 0, (size_t)(c->Wo - hi) * el);
        }
    }
}

/* dx (C, H, W) += col2im(dcols): the adjoint of im2col over output rows r0 .. r0 + nr, a
 * scatter-add (overlapping taps of a channel add onto the same pixel). */
static void col2im_add(float *dx, const float *dcols, int C, const conv_geom *c, int r0, int nr) {
    const int T = nr * c->Wo;
    /* A channel's taps only touch its own plane: one thread per channel. */
#pragma omp parallel for if ((size_t)C * c->kh * c->kw * T > CONV_OMP_MIN)
    for (int ch = 0; ch < C; ch++) {
        float *dst = dx + (size_t)ch * c->H * c->W;
        for (int ki = 0; ki < c->kh; ki++)
            for (int kj = 0; kj < c->kw; kj++) {
                const float *src = dcols + ((size_t)(ch * c->kh + ki) * c->kw + kj) * T;
                int lo, hi;
                valid_range(kj, c->stride, c->pad, c->W, c->Wo, &lo, &hi);
                for (int oi = r0; oi < r0 + nr; oi++) {
                    const int ii = oi * c->stride - c->pad + ki;
                    if (ii < 0 || ii >= c->H) continue;
                    float *d = dst + (size_t)ii * c->W;
                    const float *s = src + (size_t)(oi - r0) * c->Wo;
                    const int off = kj - c->pad;
                    if (c->stride == 1)
                        row_axpy(d + lo + off, s + lo, 1.0f, hi - lo);
                    else
                        for (int oj = lo; oj < hi; oj++) d[oj * c->stride + off] += s[oj];
                }
            }
    }
}

static int conv_is_pointwise(const conv_geom *c) {
    return c->kh == 1 && c->kw == 1 && c->stride == 1 && c->pad == 0;
}

/* Depthwise convolution in "padded-width" coordinates, one work item (a channel and a chunk of
 * n images of the batch) at a time, for any stride s. Each of the item's n planes is
 * zero-padded to (Hp, Wp) = (H + 2p, W + 2p) and split into its s² phases: phase (a, b) holds
 * the padded pixels (r·s + a, q·s + b) at (r, q) of an (Hq, Wq) = (⌈Hp/s⌉, ⌈Wp/s⌉) grid (s = 1:
 * the padded plane itself). Phase-major, each phase stacks the n images' grids into one
 * (n·Hq, Wq) image. Output pixel (j, oi, oj) of the chunk sits at o = (j·Hq + oi)·Wq + oj, and
 * tap (ki, kj) reads phase (ki mod s, kj mod s) at o + ⌊ki/s⌋·Wq + ⌊kj/s⌋, which stays inside
 * plane j's grid. So every tap is one unit-stride multiply-add over the contiguous run
 * o ∈ [0, L), L = ((n − 1)·Hq + Ho − 1)·Wq + Wo (entries outside the output pixels are scratch),
 * instead of one short row, or for s > 1 one strided row, at a time: whatever the grid (LPI
 * runs on 4×4 to 28×28, SOFT's V-conv on 14² to 56², CvT's stride-2 k/v on 56² and 28²).
 * Chunks hold about DW_SPAN_FLOATS floats, so a stack stays in cache and a channel's batch
 * (SOFT's V-conv has 1 channel of B·D images in its first stage) is still shared out over the
 * threads. */
#define DW_SPAN_FLOATS 16384
#define DW_MAX_TAPS 128 /* kernels up to 11×11 (SOFT's largest V-conv is 9×9) */

typedef struct dw_span {
    int s, Hq, Wq;     /* stride, a phase's grid */
    int chunk, chunks; /* images per item, items per channel */
    size_t plane;      /* Hq·Wq */
} dw_span;

static dw_span dw_span_of(const conv_geom *c) {
    const int s = c->stride;
    dw_span d = {s, (c->H + 2 * c->pad + s - 1) / s, (c->W + 2 * c->pad + s - 1) / s, 0, 0, 0};
    d.plane = (size_t)d.Hq * d.Wq;
    size_t n = DW_SPAN_FLOATS / ((size_t)s * s * d.plane);
    d.chunk = n < 1 ? 1 : n > (size_t)c->B ? c->B : (int)n;
    d.chunks = (c->B + d.chunk - 1) / d.chunk;
    return d;
}

/* The floats of a chunk of n images' phases (and of each of its scratch stacks). */
static size_t dw_stacked(const dw_span *d, int n) {
    return (size_t)d->s * d->s * n * d->plane;
}

/* The run length for a chunk of n images. */
static size_t dw_run(const conv_geom *c, const dw_span *d, int n) {
    return (size_t)(n - 1) * d->plane + (size_t)(c->Ho - 1) * d->Wq + c->Wo;
}

/* Tap (ki, kj)'s offset from an output's position o into the phase stack of n images. */
static inline size_t dw_tap_at(const dw_span *d, int n, int ki, int kj) {
    const int phase = (ki % d->s) * d->s + kj % d->s;
    return (size_t)phase * n * d->plane + (size_t)(ki / d->s) * d->Wq + kj / d->s;
}

/* The part of phase (a, b)'s grid that holds input pixels: rows [*r0, *r1) and columns
 * [*q0, *q1); grid pixel (r, q) is input pixel (r·s + a − pad, q·s + b − pad). */
static void dw_phase_part(const conv_geom *c, const dw_span *d, int a, int b, int *r0, int *r1,
                          int *q0, int *q1) {
    valid_range(a, d->s, c->pad, c->H, d->Hq, r0, r1);
    valid_range(b, d->s, c->pad, c->W, d->Wq, q0, q1);
}

/* Between an image plane (H, W) and its phases, image j of a chunk of n in the phase stack
 * xp: the plane `from` copied into its phases (the border stays as it was), or the phases
 * added onto the plane `onto` (the adjoint's way back); the other one is NULL. */
static void dw_phases_move(float *restrict xp, const float *restrict from, float *restrict onto, int j,
                           int n, const conv_geom *c, const dw_span *d) {
    const int s = d->s;
    for (int a = 0; a < s; a++)
        for (int b = 0; b < s; b++) {
            int r0, r1, q0, q1;
            dw_phase_part(c, d, a, b, &r0, &r1, &q0, &q1);
            float *grid = xp + ((size_t)(a * s + b) * n + j) * d->plane;
            const int off = b - c->pad; /* grid column q is input column q·s + off */
            for (int r = r0; r < r1; r++) {
                float *restrict g = grid + (size_t)r * d->Wq;
                const size_t row = (size_t)(r * s + a - c->pad) * c->W;
                if (onto && s == 1)
                    row_axpy(onto + row + q0 + off, g + q0, 1.0f, q1 - q0);
                else if (onto)
                    for (int q = q0; q < q1; q++) onto[row + q * s + off] += g[q];
                else if (s == 1)
                    memcpy(g + q0, from + row + q0 + off, (size_t)(q1 - q0) * sizeof(float));
                else
                    for (int q = q0; q < q1; q++) g[q] = from[row + q * s + off];
            }
        }
}

/* xp = the phases of images b0..b0+n of channel ch of x (B, C, H, W), zero border of width pad. */
static void dw_stack(float *restrict xp, const float *restrict x, int ch, int b0, int n,
                     const conv_geom *c, const dw_span *d) {
    memset(xp, 0, dw_stacked(d, n) * sizeof(float));
    for (int j = 0; j < n; j++)
        dw_phases_move(xp, x + ((size_t)(b0 + j) * c->Cin + ch) * c->H * c->W, NULL, j, n, c, d);
}

/* y[o] = Σ_t w[t]·x[o + off[t]] for o in [0, L), the taps summed in the order given. The
 * outputs are taken DW_TAP_BLOCK at a time and every tap is added to the block while it sits
 * in registers: one load per multiply-add, where a pass per tap over the whole run (an axpy)
 * loads and stores the run once per tap, from L2 for SOFT's 9×9 V-conv. Each output sums its
 * taps in the same order either way, so the bits do not change. */
#define DW_TAP_BLOCK 64

/* Eight floats, the accumulators' unit: written with GCC's vector extension so that each tap
 * is one multiply-add per eight outputs whatever the target (a plain loop over the taps
 * around a loop over the block is vectorized by GCC 12 over pairs of taps, reading the
 * second of each pair with gathers: 4x slower). */
typedef float dw_vec __attribute__((vector_size(32)));

static void dw_taps(float *restrict y, const float *restrict x, const float *restrict w,
                    const size_t *restrict off, int taps, size_t L) {
    enum { VECS = DW_TAP_BLOCK / 8 };
    size_t o = 0;
    for (; o + DW_TAP_BLOCK <= L; o += DW_TAP_BLOCK) {
        dw_vec acc[VECS] = {{0}};
        for (int t = 0; t < taps; t++) {
            const float *s = x + o + off[t];
            const dw_vec wv = (dw_vec){0} + w[t];
            for (int k = 0; k < VECS; k++) {
                dw_vec v;
                memcpy(&v, s + 8 * k, sizeof v);
                acc[k] += wv * v;
            }
        }
        memcpy(y + o, acc, sizeof acc);
    }
    /* the last outputs tap by tap, as above (a loop over the taps inside would be a
     * reduction, vectorized with separate multiplies and adds: other bits) */
    const int n = (int)(L - o);
    memset(y + o, 0, (size_t)n * sizeof(float));
    for (int t = 0; t < taps; t++) row_axpy(y + o, x + o + off[t], w[t], n);
}

/* Images b0..b0+n of channel ch of y (B, C, Ho, Wo) = Σ_taps w[ki, kj]·xp shifted, the taps in
 * row-major order (as im2col's product sums them); yw is scratch. */
static void dw_span_forward(float *restrict y, float *restrict yw, const float *restrict xp,
                            const float *restrict w, int ch, int b0, int n, const conv_geom *c,
                            const dw_span *d) {
    size_t off[DW_MAX_TAPS];
    for (int ki = 0; ki < c->kh; ki++)
        for (int kj = 0; kj < c->kw; kj++) off[ki * c->kw + kj] = dw_tap_at(d, n, ki, kj);
    dw_taps(yw, xp, w, off, c->kh * c->kw, dw_run(c, d, n));
    for (int j = 0; j < n; j++) {
        float *dst = y + ((size_t)(b0 + j) * c->Cout + ch) * c->Ho * c->Wo;
        const float *src = yw + j * d->plane;
        for (int oi = 0; oi < c->Ho; oi++)
            for (int oj = 0; oj < c->Wo; oj++) dst[(size_t)oi * c->Wo + oj] = src[(size_t)oi * d->Wq + oj];
    }
}

/* <a, b> over n floats in DW_DOT_LANES partial sums, added at the end: with a single vector
 * of them (row_dot) each multiply-add waits on the one before (measured on Zen 2: dw of SOFT's
 * first V-conv 1.6x faster with 32). */
#define DW_DOT_LANES 32

static float dw_dot(const float *restrict a, const float *restrict b, size_t n) {
    enum { LANES = DW_DOT_LANES };
    float part[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
#pragma omp simd
        for (int j = 0; j < LANES; j++) part[j] += a[i + j] * b[i + j];
    }
    float acc = row_dot(a + i, b + i, (int)(n - i));
    for (int j = 0; j < LANES; j++) acc += part[j];
    return acc;
}

/* The zeros in front of gw that the adjoint's gather reads: the largest shift within a phase. */
static size_t dw_margin(const conv_geom *c, const dw_span *d) {
    return (size_t)((c->kh - 1) / d->s) * d->Wq + (c->kw - 1) / d->s;
}

/* The adjoint for one item. gw holds G's images b0..b0+n of channel ch on the (Hq, Wq) grids,
 * zero everywhere else, including dw_margin floats in front of it (gw_m is their start) and up
 * to the end of the stack, so scratch positions drop out of the sums:
 * dw[tap] += <gw, phase shifted> over the run from dw_from (0; the last plane's start when
 * testing a broken backward), and each phase of dx gathers its own taps (in row-major order),
 * dx_phase[q] += Σ w[ki, kj]·gw[q − ⌊ki/s⌋·Wq − ⌊kj/s⌋], into the phase stack dxp, which is
 * then added to dx at its pixels. */
static void dw_span_backward(float *restrict dx, float *restrict dw, float *restrict dxp,
                             float *restrict gw_m, const float *restrict xp, const float *restrict G,
                             const float *restrict w, int ch, int b0, int n, size_t dw_from,
                             const conv_geom *c, const dw_span *d) {
    const size_t L = dw_run(c, d, n), margin = dw_margin(c, d), grids = (size_t)n * d->plane;
    float *restrict gw = gw_m + margin;
    memset(gw_m, 0, (margin + grids) * sizeof(float));
    for (int j = 0; j < n; j++) {
        const float *src = G + ((size_t)(b0 + j) * c->Cout + ch) * c->Ho * c->Wo;
        float *dst = gw + j * d->plane;
        for (int oi = 0; oi < c->Ho; oi++)
            for (int oj = 0; oj < c->Wo; oj++) dst[(size_t)oi * d->Wq + oj] = src[(size_t)oi * c->Wo + oj];
    }
    if (dw)
        for (int ki = 0; ki < c->kh; ki++)
            for (int kj = 0; kj < c->kw; kj++)
                dw[ki * c->kw + kj] += dw_dot(gw + dw_from, xp + dw_tap_at(d, n, ki, kj) + dw_from, L - dw_from);
    if (dx) {
        for (int a = 0; a < d->s; a++)
            for (int b = 0; b < d->s; b++) {
                float wv[DW_MAX_TAPS];
                size_t off[DW_MAX_TAPS];
                int taps = 0;
                for (int ki = a; ki < c->kh; ki += d->s)
                    for (int kj = b; kj < c->kw; kj += d->s, taps++) {
                        wv[taps] = w[ki * c->kw + kj];
                        off[taps] = margin - (size_t)(ki / d->s) * d->Wq - kj / d->s;
                    }
                dw_taps(dxp + (size_t)(a * d->s + b) * grids, gw_m, wv, off, taps, grids);
            }
        for (int j = 0; j < n; j++)
            dw_phases_move(dxp, NULL, dx + ((size_t)(b0 + j) * c->Cin + ch) * c->H * c->W, j, n, c, d);
    }
}

/* Depthwise convolution with the channels innermost ("channels-last"), for any stride and
 * padding: x and G are transposed to (B, H, W, C), and every (pixel, tap) pair is one
 * multiply-add over the C channels, contiguous and aligned with the (kh, kw, C) transposed
 * weights. Taps in the padding are skipped, not computed on zeros. The per-channel planes
 * above vectorize along a padded row or a stack of them and pay for the padding and the
 * stacking; with many channels on a small grid (LPI: 96–384 channels on 4×4 to 28×28; CvT's
 * projections) the channels are the long, regular dimension. */

/* y (n, m) (+)= x (m, n) transposed, 8 x 8 blocks at a time through a local block, so that
 * both sides move whole rows of 8 (a plain loop strides one side by a whole row per element,
 * and -O3 turns it into gathers). Measured on Zen 3 at -O2 and -O3 alike: 11–15 GB/s on the
 * depthwise convs' shapes (64–384 channels, 16–3136 pixels), against 4.5–23 for a plain loop
 * depending on the shape, the loop order and the flags. */
static void transpose(float *restrict y, const float *restrict x, int m, int n, int add) {
    for (int i0 = 0; i0 < m; i0 += 8)
        for (int j0 = 0; j0 < n; j0 += 8) {
            if (i0 + 8 <= m && j0 + 8 <= n) {
                float t[8][8];
                for (int i = 0; i < 8; i++)
                    for (int j = 0; j < 8; j++) t[j][i] = x[(size_t)(i0 + i) * n + j0 + j];
                for (int j = 0; j < 8; j++) {
                    float *yr = y + (size_t)(j0 + j) * m + i0;
                    if (add)
                        for (int i = 0; i < 8; i++) yr[i] += t[j][i];
                    else
                        for (int i = 0; i < 8; i++) yr[i] = t[j][i];
                }
                continue;
            }
            const int i1 = i0 + 8 < m ? i0 + 8 : m, j1 = j0 + 8 < n ? j0 + 8 : n;
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1; j++) {
                    float *yv = y + (size_t)j * m + i;
                    *yv = add ? *yv + x[(size_t)i * n + j] : x[(size_t)i * n + j];
                }
        }
}

/* y (B, P, C) = x (B, C, P), image by image; P pixels per plane. */
static void to_channels_last(float *restrict y, const float *restrict x, int B, int C, int P) {
#pragma omp parallel for if ((size_t)B * C * P > CONV_OMP_MIN && !omp_in_parallel())
    for (int b = 0; b < B; b++) transpose(y + (size_t)b * C * P, x + (size_t)b * C * P, C, P, 0);
}

/* y (B, C, P) (+)= x (B, P, C); add: accumulate into y. */
static void from_channels_last(float *restrict y, const float *restrict x, int B, int C, int P,
                               int add) {
#pragma omp parallel for if ((size_t)B * C * P > CONV_OMP_MIN && !omp_in_parallel())
    for (int b = 0; b < B; b++) transpose(y + (size_t)b * C * P, x + (size_t)b * C * P, P, C, add);
}

static inline void chan_axpy(float *restrict d, const float *restrict s, const float *restrict w,
                             int C) {
#pragma omp simd
    for (int ch = 0; ch < C; ch++) d[ch] += w[ch] * s[ch];
}

/* Input row (or column) of output index o through tap k, or -1 in the padding. */
static inline int dw_tap_in(int o, int k, int s, int p, int n) {
    const int i = o * s - p + k;
    return i >= 0 && i < n ? i : -1;
}

/* Output index that reads input index i through tap k, or -1 (between strides or outside). */
static inline int dw_tap_out(int i, int k, int s, int p, int n_out) {
    const int t = i + p - k;
    if (t < 0 || t % s) return -1;
    return t / s < n_out ? t / s : -1;
}

/* Every (output pixel, tap) pair of output row oi of image b that reads inside the image, as
 * one multiply-add over the channels with the input pixel it reads, xt[b, ii, jj, :]. The
 * forward and dW visit the same pairs; they differ in what the destination is indexed by:
 *   forward  y_row[oj, :] += w[tap, :] ⊙ x      (dst = y's row, by = wt)
 *   dW       dw[tap, :]   += G[b, oi, oj, :] ⊙ x (dst = the row's dW sum, by = G's row)  */
static void dwl_row(float *restrict dst, const float *restrict by, int dst_by_tap,
                    const float *restrict xt, int b, int oi, const conv_geom *c) {
    const int C = c->Cin;
    for (int ki = 0; ki < c->kh; ki++) {
        const int ii = dw_tap_in(oi, ki, c->stride, c->pad, c->H);
        if (ii < 0) continue;
        const float *xr = xt + ((size_t)b * c->H + ii) * c->W * C;
        for (int oj = 0; oj < c->Wo; oj++)
            for (int kj = 0; kj < c->kw; kj++) {
                const int jj = dw_tap_in(oj, kj, c->stride, c->pad, c->W);
                if (jj < 0) continue;
                const size_t tap = (size_t)(ki * c->kw + kj) * C, pix = (size_t)oj * C;
                if (dst_by_tap)
                    chan_axpy(dst + tap, xr + (size_t)jj * C, by + pix, C);
                else
                    chan_axpy(dst + pix, xr + (size_t)jj * C, by + tap, C);
            }
    }
}

/* yt (B, Ho, Wo, C) = Σ_taps wt[tap] ⊙ xt shifted; one output row per item. */
static void dwl_forward(float *restrict yt, const float *restrict xt, const float *restrict wt,
                        const conv_geom *c) {
    const int C = c->Cin;
#pragma omp parallel for schedule(static) if ((size_t)c->B * c->Ho * c->Wo * C * c->kh * c->kw > 32768)
    for (int row = 0; row < c->B * c->Ho; row++) {
        float *yr = yt + (size_t)row * c->Wo * C;
        memset(yr, 0, (size_t)c->Wo * C * sizeof(float));
        dwl_row(yr, wt, 0, xt, row / c->Ho, row % c->Ho, c);
    }
}

/* The adjoint: dxt (B, H, W, C) = Σ_taps wt[tap] ⊙ Gt at the output pixel that read it
 * (gathered per input pixel, so rows are independent), and dw_sum[tap] (kh·kw, C) +=
 * Σ_pixels Gt ⊙ xt shifted from image b_from on (0; the last image when testing a broken
 * backward). A thread sums each output row in float into dw_row and adds the row to its own
 * double total in dw_sum: one float sum over a whole grid would lose digits (a 56×56 grid of
 * 8 images is 25 k terms per weight). dw_row holds kh·kw·C floats, dw_sum kh·kw·C doubles,
 * per thread slot. */
static void dwl_backward(float *restrict dxt, float *restrict dw_row, double *restrict dw_sum,
                         const float *restrict gt, const float *restrict xt,
                         const float *restrict wt, int b_from, const conv_geom *c) {
    const int C = c->Cin, k2 = c->kh * c->kw;
#pragma omp parallel if ((size_t)c->B * c->H * c->W * C * k2 > 32768)
    {
        if (dxt) {
#pragma omp for schedule(static)
            for (int row = 0; row < c->B * c->H; row++) {
                const int b = row / c->H, ii = row % c->H;
                float *dr = dxt + (size_t)row * c->W * C;
                memset(dr, 0, (size_t)c->W * C * sizeof(float));
                for (int ki = 0; ki < c->kh; ki++) {
                    const int oi = dw_tap_out(ii, ki, c->stride, c->pad, c->Ho);
                    if (oi < 0) continue;
                    const float *gr = gt + ((size_t)b * c->Ho + oi) * c->Wo * C;
                    for (int jj = 0; jj < c->W; jj++)
                        for (int kj = 0; kj < c->kw; kj++) {
                            const int oj = dw_tap_out(jj, kj, c->stride, c->pad, c->Wo);
                            if (oj >= 0)
                                chan_axpy(dr + (size_t)jj * C, gr + (size_t)oj * C,
                                          wt + (size_t)(ki * c->kw + kj) * C, C);
                        }
                }
            }
        }
        if (dw_sum) {
            const size_t n = (size_t)k2 * C;
            float *part = dw_row + (size_t)sf_thread_slot() * n;
            double *sum = dw_sum + (size_t)sf_thread_slot() * n;
#pragma omp for schedule(static)
            for (int row = b_from * c->Ho; row < c->B * c->Ho; row++) {
                memset(part, 0, n * sizeof(float));
                dwl_row(part, gt + (size_t)row * c->Wo * C, 1, xt, row / c->Ho, row % c->Ho, c);
#pragma omp simd
                for (size_t i = 0; i < n; i++) sum[i] += part[i];
            }
        }
    }
}

/* The im2col path shares the images out over the threads: one image per thread at a time, each
 * with its own column buffers and its own dW sum. Measured on 2 threads against splitting each
 * image's products: faster for every convolution of the models (SOFT's 3×3 stem and
 * downsampling convs 1.3–2.6×, its 8×8 landmark conv 3.5×, the Fashion-MNIST stem 2×), since
 * small-K, few-row products split poorly. Only with one image, or when the per-thread buffers
 * would pass CONV_IMAGE_PAR_BYTES (many threads, large images), it threads inside each product
 * (sf_gemm) instead. */
#define CONV_IMAGE_PAR_BYTES ((size_t)256 << 20)

/* An image's columns (K, Ho·Wo) of more than CONV_BAND_MIN_FLOATS are built and multiplied a
 * band of output rows at a time, about CONV_TILE_FLOATS of columns each, so that they are
 * written and read back in cache rather than through memory: SOFT's 32 -> 32 stem conv at 112²
 * has 14.5 MB of columns an image, written by im2col and read by the product in the forward,
 * and again in the backward with as much of dcols. A band's products write a (Og, band) block
 * (copied into the output) and read G's band (copied out of it), so no backend needs a leading
 * dimension. Smaller column sets stay whole, and so do their bits (the Fashion-MNIST models'
 * convolutions among them). Measured on Zen 2 (build/bench/conv, docs/performance.md): bands
 * lose where they leave short products (XCiT's 192 -> 384 stem conv on 28², 140 columns a band)
 * or where K < 4 Og, when the band's output and G copies move more than a quarter of what the
 * columns do (SOFT's 3 -> 32 stem conv, K = 27). */
#define CONV_TILE_FLOATS ((size_t)1 << 18)
#define CONV_BAND_MIN_FLOATS (3 * CONV_TILE_FLOATS)
#define CONV_BAND_MIN_COLS 512
static size_t conv_tile_floats; /* set by sf_conv2d_set_tile_floats; 0: the rule below */
static int conv_bands = -1;     /* SFVIT_CONV_BANDS, read at first use */

void sf_conv2d_set_tile_floats(size_t floats) { conv_tile_floats = floats; }

void sf_conv2d_bands_set(int on) { conv_bands = on; }

int sf_conv2d_bands_parse(const char *s) { return sf_parse_switch(s); }

int sf_conv2d_bands_get(void) {
    if (conv_bands < 0) {
        const int on = sf_conv2d_bands_parse(getenv("SFVIT_CONV_BANDS"));
        if (on < 0) sf_warn("SFVIT_CONV_BANDS=%s is neither 0 nor 1: large columns go in bands", getenv("SFVIT_CONV_BANDS"));
        conv_bands = on != 0;
    }
    return conv_bands;
}

/* Output rows per band of the im2col path: Ho when the columns stay whole. */
static int conv_band_rows(const conv_geom *c, int K) {
    const size_t cols = (size_t)K * c->Ho * c->Wo;
    if (conv_is_pointwise(c)) return c->Ho;
    if (conv_tile_floats) { /* forced: every column set above the size, in bands of about it */
        const size_t rows = conv_tile_floats / ((size_t)K * c->Wo);
        return cols <= conv_tile_floats ? c->Ho : rows < 1 ? 1 : (int)rows;
    }
    if (!sf_conv2d_bands_get() || cols <= CONV_BAND_MIN_FLOATS || K < 4 * c->Og) return c->Ho;
    size_t rows = CONV_TILE_FLOATS / ((size_t)K * c->Wo);
    const size_t min_rows = (CONV_BAND_MIN_COLS + c->Wo - 1) / c->Wo;
    if (rows < min_rows) rows = min_rows;
    return rows >= (size_t)c->Ho ? c->Ho : (int)rows;
}

static int conv_image_parallel(const conv_geom *c, int K) {
    const size_t per_thread = (size_t)2 * K * conv_band_rows(c, K) * c->Wo * sizeof(float);  // cols, dcols
    return c->B > 1 && (size_t)sf_thread_slots() * per_thread <= CONV_IMAGE_PAR_BYTES;
}

static sf_conv_path conv_kernel_of(const conv_geom *c) {
    const int depthwise = c->groups == c->Cin && c->groups == c->Cout;
    if (!depthwise || c->kh * c->kw > DW_MAX_TAPS || conv_path == SF_CONV_IM2COL) return SF_CONV_IM2COL;
    if (conv_path != SF_CONV_AUTO) return conv_path; /* a forced direct kernel */
    /* Measured on Zen 3, 2 threads (build/bench/conv; docs/performance.md, "Depthwise
     * convolution with the channels innermost"; again on Zen 5 with the planes' phases): the
     * channels win on small output grids (4×4 padded to 6×6 is 2.25× the work for the planes;
     * CvT's stride-2 14×14 → 7×7); on larger grids, stride 1 or 2, the transposes cost as much
     * as they save or more, and with few channels there is no vector to fill. */
    const int channels_win = c->Cin >= 8 && c->Ho * c->Wo <= 64;
    return channels_win ? SF_CONV_CHANNELS_LAST : SF_CONV_PLANES;
}

sf_conv_path sf_conv2d_path_of(const sf_tensor *x, const sf_tensor *w, int stride, int pad,
                               int groups) {
    const conv_geom c = conv_geom_of(x, w, stride, pad, groups);
    return conv_kernel_of(&c);
}

int sf_conv2d_band_rows_of(const sf_tensor *x, const sf_tensor *w, int stride, int pad, int groups) {
    const conv_geom c = conv_geom_of(x, w, stride, pad, groups);
    return conv_band_rows(&c, c.Cg * c.kh * c.kw);
}

/* last_use: x is handed over (sf_conv2d_last_use). */
static sf_tensor *conv2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad, int groups,
                         int last_use) {
    char bx[64], bw[64];
    SF_ASSERT(x->ndim == 4 && w->ndim == 4 && groups >= 1 && stride >= 1 && pad >= 0 &&
                  x->shape[1] % groups == 0 && w->shape[0] % groups == 0 &&
                  w->shape[1] * groups == x->shape[1],
              "conv2d: x %s, w %s, groups %d, stride %d, pad %d do not fit",
              sf_shape_str(x, bx, sizeof bx), sf_shape_str(w, bw, sizeof bw), groups, stride, pad);
    SF_ASSERT(!b || (b->numel == (size_t)w->shape[0]), "conv2d: bias must have Cout elements");
    const conv_geom c = conv_geom_of(x, w, stride, pad, groups);
    SF_ASSERT(c.Ho >= 1 && c.Wo >= 1, "conv2d: kernel larger than the padded input %s",
              sf_shape_str(x, bx, sizeof bx));
    const int HoWo = c.Ho * c.Wo, K = c.Cg * c.kh * c.kw;
    const sf_conv_path kernel = conv_kernel_of(&c);
    sf_tensor *out = sf_tensor_new4(g, c.B, c.Cout, c.Ho, c.Wo);  // (B, Cout, Ho, Wo)
    sf_tensor *ins[3] = {x, w, b};
    uint16_t *x16 = NULL; /* x's bf16 copy, when it is kept alone (im2col path) */

    if (kernel == SF_CONV_CHANNELS_LAST) {
        const int C = c.Cin, k2 = c.kh * c.kw;
        const size_t nx = (size_t)c.B * c.H * c.W * C, ny = (size_t)c.B * HoWo * C;
        float *xt = sf_arena_alloc(g->arena, nx * sizeof(float));      // (B, H, W, C)
        float *yt = sf_arena_alloc(g->arena, ny * sizeof(float));      // (B, Ho, Wo, C)
        float *wt = sf_arena_alloc(g->arena, (size_t)k2 * C * sizeof(float));  // (kh·kw, C)
        to_channels_last(xt, x->data, c.B, C, c.H * c.W);
        transpose(wt, w->data, C, k2, 0); /* (C, kh·kw) → (kh·kw, C) */
        dwl_forward(yt, xt, wt, &c);
        from_channels_last(out->data, yt, c.B, C, HoWo, 0);
        sf_arena_release(g->arena, wt, (size_t)k2 * C * sizeof(float));
        sf_arena_release(g->arena, yt, ny * sizeof(float));
        sf_arena_release(g->arena, xt, nx * sizeof(float));
    } else if (kernel == SF_CONV_PLANES) {
        const dw_span d = dw_span_of(&c);
        const size_t stack = dw_stacked(&d, d.chunk);  // xp, the chunk's phases; yw fits in the same size
        float *scratch = sf_arena_alloc(g->arena, (size_t)sf_thread_slots() * 2 * stack * sizeof(float));
#pragma omp parallel if ((size_t)c.B * c.Cout * HoWo * c.kh * c.kw > 32768)
        {
            float *xp = scratch + (size_t)sf_thread_slot() * 2 * stack, *yw = xp + stack;
#pragma omp for schedule(static)
            for (int item = 0; item < c.Cout * d.chunks; item++) {
                const int ch = item / d.chunks, b0 = (item % d.chunks) * d.chunk;
                const int n = c.B - b0 < d.chunk ? c.B - b0 : d.chunk;
                dw_stack(xp, x->data, ch, b0, n, &c, &d);
                dw_span_forward(out->data, yw, xp, w->data + (size_t)ch * c.kh * c.kw, ch, b0, n, &c, &d);
            }
        }
        sf_arena_release(g->arena, scratch, (size_t)sf_thread_slots() * 2 * stack * sizeof(float));
    } else {
        /* Column buffers (fp32, or bf16 in bf16 precision), reused for every (b, group): arena
         * scratch, one per thread when the images are shared out. */
        const int image_par = conv_image_parallel(&c, K), bf16 = sf_precision_get() != SF_PREC_FP32;
        const uint16_t *w16 = sf_bf16_weight(w); /* bf16 copy of this step, or NULL */
        /* x handed over for a trained weight's dW: rounded once, here, and both passes' columns
         * copied from the copy (the same bits as rounding in im2col); it becomes x's values below. */
        if (last_use && bf16 && w->requires_grad && sf_needs_grad(g, ins, 3)) {
            x16 = sf_arena_alloc(g->arena, x->numel * sizeof *x16);
            sf_bf16_convert(x->data, x16, x->numel);
        }
        const int band = conv_band_rows(&c, K), banded = band < c.Ho, slots = image_par ? sf_thread_slots() : 1;
        const size_t per_slot = conv_is_pointwise(&c) ? 0 : (size_t)K * band * c.Wo;  // (K, band·Wo)
        const size_t cols_bytes = slots * per_slot * (bf16 ? sizeof(uint16_t) : sizeof(float));
        const size_t yband_bytes = banded ? slots * (size_t)c.Og * band * c.Wo * sizeof(float) : 0;
        void *cols = per_slot ? sf_arena_alloc(g->arena, cols_bytes) : NULL;
        float *ybands = banded ? sf_arena_alloc(g->arena, yband_bytes) : NULL; // (Og, band·Wo) per slot
#pragma omp parallel for if (image_par)
        for (int bi = 0; bi < c.B; bi++) {
            const int slot = image_par ? sf_thread_slot() : 0;
            const size_t at = (size_t)slot * per_slot;
            float *cb = cols && !bf16 ? (float *)cols + at : NULL;
            uint16_t *cb16 = cols && bf16 ? (uint16_t *)cols + at : NULL;
            float *yband = banded ? ybands + (size_t)slot * c.Og * band * c.Wo : NULL;
            for (int gr = 0; gr < groups; gr++) {
                const size_t xoff = ((size_t)bi * c.Cin + (size_t)gr * c.Cg) * c.H * c.W;
                const float *xg = x16 ? NULL : x->data + xoff;
                const uint16_t *xg16 = x16 ? x16 + xoff : NULL;
                const size_t woff = (size_t)gr * c.Og * K;
                float *yg = out->data + ((size_t)bi * c.Cout + (size_t)gr * c.Og) * HoWo;  // (Og, HoWo)
                for (int r0 = 0; r0 < c.Ho; r0 += band) {
                    const int nr = c.Ho - r0 < band ? c.Ho - r0 : band, T = nr * c.Wo;
                    if (cols) im2col(cb, cb16, xg, xg16, c.Cg, &c, r0, nr);
                    sf_gemm_prec_w(0, 0, c.Og, T, K, 1.0f, w->data + woff, w16 ? w16 + woff : NULL,
                                   cols ? cb : xg, cols ? cb16 : xg16, 0.0f, banded ? yband : yg);
                    for (int o = 0; banded && o < c.Og; o++)
                        memcpy(yg + (size_t)o * HoWo + (size_t)r0 * c.Wo, yband + (size_t)o * T, (size_t)T * sizeof(float));
                }
            }
        }
        if (ybands) sf_arena_release(g->arena, ybands, yband_bytes);
        if (cols) sf_arena_release(g->arena, cols, cols_bytes);
    }
    if (b) {
#pragma omp parallel for if (out->numel > 32768)
        for (int p = 0; p < c.B * c.Cout; p++) {
            float *y = out->data + (size_t)p * HoWo;
            const float bv = b->data[p % c.Cout];
            for (int i = 0; i < HoWo; i++) y[i] += bv;
        }
    }

    if (sf_needs_grad(g, ins, 3)) {
        sf_node *node = sf_tape_push(g, SF_OP_CONV2D, out, ins, b ? 3 : 2);
        node->iarg[0] = stride;
        node->iarg[1] = pad;
        node->iarg[2] = groups;
        node->iarg[3] = (int)kernel;  // the backward takes the same path as the forward
        /* The backward reads x only for dW, through im2col's columns, which are bf16 in bf16
         * precision: a bf16 copy of x gives the same columns. */
        if (last_use && kernel == SF_CONV_IM2COL) {
            if (!w->requires_grad)
                sf_tensor_release_data(g, x);
            else if (x16)
                sf_tensor_keep_bf16(g, x, x16);
        }
    }
    return out;
}

sf_tensor *sf_conv2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad, int groups) {
    return conv2d(g, x, w, b, stride, pad, groups, 0);
}

sf_tensor *sf_conv2d_last_use(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, int stride, int pad, int groups) {
    return conv2d(g, x, w, b, stride, pad, groups, 1);
}

/* In the forward pass this was: Y_bg = W_g · cols(x_bg) + b.
 * So: dW_g += G_bg · cols(x_bg)ᵀ; dcols = W_gᵀ · G_bg, dx_bg += col2im(dcols); db += Σ G.
 * The columns are rebuilt here instead of saved: one batch element's worth of scratch instead of
 * the whole batch's. */
void sf_conv2d_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *w = node->in[1], *b = node->n_in > 2 ? node->in[2] : NULL;
    const conv_geom c = conv_geom_of(x, w, node->iarg[0], node->iarg[1], node->iarg[2]);
    const sf_conv_path kernel = (sf_conv_path)node->iarg[3];
    const int HoWo = c.Ho * c.Wo, K = c.Cg * c.kh * c.kw;
    const float *G = node->out->grad;  // (B, Cout, Ho, Wo)
    /* teeth: dW from the last batch element only (a lost accumulation over the batch) */
    const int broken = sf_break_backward("conv2d");
    float *dx = x->requires_grad ? sf_grad(g, x) : NULL;  // (B, Cin, H, W)
    float *dw = w->requires_grad ? sf_grad(g, w) : NULL;  // (Cout, Cg, kh, kw)

    if (b && b->requires_grad) {
        float *db = sf_grad(g, b);
#pragma omp parallel for if ((size_t)c.B * c.Cout * HoWo > CONV_OMP_MIN)
        for (int co = 0; co < c.Cout; co++)
            for (int bi = 0; bi < c.B; bi++)
                db[co] += row_sum(G + ((size_t)bi * c.Cout + co) * HoWo, HoWo);
    }

    if (kernel == SF_CONV_CHANNELS_LAST) {
        const int C = c.Cin, k2 = c.kh * c.kw, slots = sf_thread_slots();
        const size_t nx = (size_t)c.B * c.H * c.W * C, ng = (size_t)c.B * HoWo * C, nw = (size_t)k2 * C;
        float *xt = dw ? sf_arena_alloc(g->arena, nx * sizeof(float)) : NULL;    // (B, H, W, C)
        float *dxt = dx ? sf_arena_alloc(g->arena, nx * sizeof(float)) : NULL;   // (B, H, W, C)
        float *gt = sf_arena_alloc(g->arena, ng * sizeof(float));                 // (B, Ho, Wo, C)
        float *wt = sf_arena_alloc(g->arena, nw * sizeof(float));                 // (kh·kw, C)
        float *dw_row = dw ? sf_arena_alloc(g->arena, slots * nw * sizeof(float)) : NULL;
        double *dw_sum = dw ? sf_arena_calloc(g->arena, slots * nw * sizeof(double)) : NULL;
        if (xt) to_channels_last(xt, x->data, c.B, C, c.H * c.W);
        to_channels_last(gt, G, c.B, C, HoWo);
        transpose(wt, w->data, C, k2, 0); /* (C, kh·kw) → (kh·kw, C) */
        dwl_backward(dxt, dw_row, dw_sum, gt, xt, wt, broken ? c.B - 1 : 0, &c);
        if (dx) from_channels_last(dx, dxt, c.B, C, c.H * c.W, 1);
        if (dw)
            for (int ch = 0; ch < C; ch++)
                for (int tap = 0; tap < k2; tap++) {
                    double acc = 0;
                    for (int t = 0; t < slots; t++) acc += dw_sum[(size_t)t * nw + (size_t)tap * C + ch];
                    dw[(size_t)ch * k2 + tap] += (float)acc;
                }
        if (dw) {
            sf_arena_release(g->arena, dw_sum, slots * nw * sizeof(double));
            sf_arena_release(g->arena, dw_row, slots * nw * sizeof(float));
        }
        sf_arena_release(g->arena, wt, nw * sizeof(float));
        sf_arena_release(g->arena, gt, ng * sizeof(float));
        if (dxt) sf_arena_release(g->arena, dxt, nx * sizeof(float));
        if (xt) sf_arena_release(g->arena, xt, nx * sizeof(float));
        return;
    }
    if (kernel == SF_CONV_PLANES) {
        /* Items as in the forward. An item owns its dx planes; its dw sums go to its thread's
         * own (Cout, k2) copy, added up after the loop (the broken variant keeps only the
         * last image's). */
        const dw_span d = dw_span_of(&c);
        const int k2 = c.kh * c.kw, slots = sf_thread_slots();
        const size_t stack = dw_stacked(&d, d.chunk);  // xp, dxp: the chunk's phases; gw after its margin
        const size_t per_slot = 3 * stack + dw_margin(&c, &d);
        const size_t scratch_bytes = (size_t)slots * per_slot * sizeof(float);
        const size_t part_bytes = (size_t)slots * c.Cout * k2 * sizeof(float);
        float *scratch = sf_arena_alloc(g->arena, scratch_bytes);
        float *dw_part = dw ? sf_arena_calloc(g->arena, part_bytes) : NULL;
#pragma omp parallel if ((size_t)c.B * c.Cout * HoWo * k2 > 32768)
        {
            const int slot = sf_thread_slot();
            float *xp = scratch + (size_t)slot * per_slot, *dxp = xp + stack, *gw_m = dxp + stack;
#pragma omp for schedule(static)
            for (int item = 0; item < c.Cout * d.chunks; item++) {
                const int ch = item / d.chunks, b0 = (item % d.chunks) * d.chunk;
                const int n = c.B - b0 < d.chunk ? c.B - b0 : d.chunk;
                const int has_last = b0 + n == c.B;
                float *dwi = dw && (!broken || has_last) ? dw_part + ((size_t)slot * c.Cout + ch) * k2 : NULL;
                if (!dx && !dwi) continue;
                if (dwi) dw_stack(xp, x->data, ch, b0, n, &c, &d);
                dw_span_backward(dx, dwi, dxp, gw_m, xp, G, w->data + (size_t)ch * k2, ch, b0, n,
                                 broken ? (size_t)(n - 1) * d.plane : 0, &c, &d);
            }
        }
        if (dw) {
            for (int t = 0; t < slots; t++)
                for (int i = 0; i < c.Cout * k2; i++) dw[i] += dw_part[(size_t)t * c.Cout * k2 + i];
            sf_arena_release(g->arena, dw_part, part_bytes);
        }
        sf_arena_release(g->arena, scratch, scratch_bytes);
        return;
    }
    const int pointwise = conv_is_pointwise(&c), image_par = conv_image_parallel(&c, K);
    const int slots = image_par ? sf_thread_slots() : 1, bf16 = sf_precision_get() != SF_PREC_FP32;
    const int band = conv_band_rows(&c, K), banded = band < c.Ho; /* output rows at a time */
    const size_t nb = (size_t)band * c.Wo; /* columns of a band */
    /* Per slot: dcols (K, nb) in fp32, the columns (K, nb) in fp32 or, in bf16, as the bf16
     * operand (im2col), in bf16 G's band (Og, nb) rounded once for its two products, and when
     * banded G's band in fp32 (copied out of G's rows). */
    const size_t n_cols = pointwise ? 0 : (size_t)K * nb, n_g16 = bf16 && dw && dx ? (size_t)c.Og * nb : 0;
    const size_t cols_at = n_cols * sizeof(float), g16_at = cols_at + n_cols * (bf16 ? sizeof(uint16_t) : sizeof(float));
    const size_t gband_at = (g16_at + n_g16 * sizeof(uint16_t) + 63) & ~(size_t)63;
    const size_t n_gband = banded ? (size_t)c.Og * nb : 0;
    const size_t per_slot = (gband_at + n_gband * sizeof(float) + 63) & ~(size_t)63; /* bytes, whole cache lines */
    const size_t scratch_bytes = (size_t)slots * per_slot;
    char *scratch = per_slot ? sf_arena_alloc(g->arena, scratch_bytes) : NULL;
    /* Shared out over images, each thread sums its dW in its own copy, added after the loop. */
    const size_t wsize = (size_t)c.Cout * K;
    const uint16_t *w16 = sf_bf16_weight(w); /* bf16 copy of this step, or NULL */
    const size_t part_bytes = (size_t)slots * wsize * sizeof(float);
    float *dw_part = dw && image_par ? sf_arena_calloc(g->arena, part_bytes) : NULL;
#pragma omp parallel for if (image_par)
    for (int bi = 0; bi < c.B; bi++) {
        const int slot = image_par ? sf_thread_slot() : 0;
        char *mine = scratch ? scratch + (size_t)slot * per_slot : NULL;
        float *dcols = n_cols ? (float *)mine : NULL;
        float *cols = n_cols && !bf16 ? (float *)(mine + cols_at) : NULL;
        uint16_t *cols16 = n_cols && bf16 ? (uint16_t *)(mine + cols_at) : NULL;
        uint16_t *g16 = n_g16 ? (uint16_t *)(mine + g16_at) : NULL;
        float *gband = n_gband ? (float *)(mine + gband_at) : NULL;
        float *dwt = dw_part ? dw_part + (size_t)slot * wsize : dw;
        for (int gr = 0; gr < c.groups; gr++) {
            const size_t xoff = ((size_t)bi * c.Cin + (size_t)gr * c.Cg) * c.H * c.W;
            const float *Gbg = G + ((size_t)bi * c.Cout + (size_t)gr * c.Og) * HoWo;  // (Og, HoWo)
            const float *Wg = w->data + (size_t)gr * c.Og * K;                         // (Og, K)
            const uint16_t *Wg16 = w16 ? w16 + (size_t)gr * c.Og * K : NULL;
            /* x in fp32, or kept in bf16 alone (sf_conv2d_last_use), or released (no dW) */
            const float *xg = x->data ? x->data + xoff : NULL;
            const uint16_t *xg16 = !x->data && x->data16 ? x->data16 + xoff : NULL;
            for (int r0 = 0; r0 < c.Ho; r0 += band) {
                const int nr = c.Ho - r0 < band ? c.Ho - r0 : band, T = nr * c.Wo;
                for (int o = 0; banded && o < c.Og; o++)
                    memcpy(gband + (size_t)o * T, Gbg + (size_t)o * HoWo + (size_t)r0 * c.Wo, (size_t)T * sizeof(float));
                const float *Gt = banded ? gband : Gbg;  // (Og, T)
                if (g16) sf_bf16_convert(Gt, g16, (size_t)c.Og * T);
                if (dw && !(broken && bi != c.B - 1)) {
                    if (!pointwise) im2col(cols, cols16, xg, xg16, c.Cg, &c, r0, nr);
                    sf_gemm_prec_w(0, 1, c.Og, K, T, 1.0f, Gt, g16, pointwise ? xg : cols, pointwise ? xg16 : cols16,
                                   1.0f, dwt + (size_t)gr * c.Og * K);
                }
                if (dx) {
                    if (pointwise) {
                        sf_gemm_prec_w(1, 0, K, T, c.Og, 1.0f, Wg, Wg16, Gt, g16, 1.0f, dx + xoff);
                    } else {
                        sf_gemm_prec_w(1, 0, K, T, c.Og, 1.0f, Wg, Wg16, Gt, g16, 0.0f, dcols);
                        col2im_add(dx + xoff, dcols, c.Cg, &c, r0, nr);
                    }
                }
            }
        }
    }
    if (dw_part) {
        for (int t = 0; t < slots; t++)
            for (size_t i = 0; i < wsize; i++) dw[i] += dw_part[(size_t)t * wsize + i];
        sf_arena_release(g->arena, dw_part, part_bytes);
    }
    if (scratch) sf_arena_release(g->arena, scratch, scratch_bytes);
}

/* ---- average pooling (docs/math/soft_conv_norm.md#average-pooling) ---- */

sf_tensor *sf_avgpool2d(sf_ctx *g, sf_tensor *x, int k, int stride) {
    char bx[64];
    SF_ASSERT(x->ndim == 4 && k >= 1 && stride >= 1 && x->shape[2] >= k && x->shape[3] >= k,
              "avgpool2d: x %s, k %d, stride %d", sf_shape_str(x, bx, sizeof bx), k, stride);
    const int H = x->shape[2], W = x->shape[3];
    const int Ho = (H - k) / stride + 1, Wo = (W - k) / stride + 1;
    const int planes = x->shape[0] * x->shape[1];
    sf_tensor *out = sf_tensor_new4(g, x->shape[0], x->shape[1], Ho, Wo);  // (B, C, Ho, Wo)
    const float inv = 1.0f / (float)(k * k);
#pragma omp parallel for if (x->numel > 32768)
    for (int p = 0; p < planes; p++) {
        const float *xp = x->data + (size_t)p * H * W;
        float *y = out->data + (size_t)p * Ho * Wo;
        for (int oi = 0; oi < Ho; oi++)
            for (int oj = 0; oj < Wo; oj++) {
                float s = 0;
                for (int u = 0; u < k; u++)
                    for (int v = 0; v < k; v++) s += xp[(size_t)(oi * stride + u) * W + oj * stride + v];
                y[oi * Wo + oj] = s * inv;
            }
    }
    if (sf_needs_grad(g, &x, 1)) {
        sf_node *node = sf_tape_push(g, SF_OP_AVGPOOL2D, out, &x, 1);
        node->iarg[0] = k;
        node->iarg[1] = stride;
    }
    return out;
}

/* In the forward pass this was: y[oi, oj] = mean of the k×k window at (oi·s, oj·s).
 * So every pixel of that window receives G[oi, oj]/k²; overlapping windows add. */
void sf_avgpool2d_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0];
    if (!x->requires_grad) return;
    const int k = node->iarg[0], stride = node->iarg[1];
    const int H = x->shape[2], W = x->shape[3], Ho = node->out->shape[2], Wo = node->out->shape[3];
    const int planes = x->shape[0] * x->shape[1];
    const float inv = 1.0f / (float)(k * k);
    float *dx = sf_grad(g, x);  // (B, C, H, W)
#pragma omp parallel for if (x->numel > 32768)
    for (int p = 0; p < planes; p++) {
        const float *gp = node->out->grad + (size_t)p * Ho * Wo;
        float *d = dx + (size_t)p * H * W;
        for (int oi = 0; oi < Ho; oi++)
            for (int oj = 0; oj < Wo; oj++) {
                const float gv = gp[oi * Wo + oj] * inv;
                for (int u = 0; u < k; u++)
                    for (int v = 0; v < k; v++) d[(size_t)(oi * stride + u) * W + oj * stride + v] += gv;
            }
    }
}
