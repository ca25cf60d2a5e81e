/* test_ops_conv_norm.c — conv2d (im2col and the direct depthwise kernel), avgpool2d, LayerNorm
 * and BatchNorm2d (train and eval): forwards against naive loops written here in double,
 * gradients by central differences, the two conv paths against each other, the im2col path in
 * bands of output rows against the whole-image columns (fp32 and bf16), and the BatchNorm
 * running-statistics update recomputed independently. */
#include "gradcheck.h"
#include "ops_internal.h"  // sf_conv2d_set_path, sf_conv2d_set_tile_floats
#include "sfvit/precision.h"

/* ---- naive references ---- */

/* The textbook 7-loop convolution, accumulated in double. */
static void conv_naive(float *y, const float *x, const float *w, const float *b, int B, int Cin,
                       int H, int W, int Cout, int kh, int kw, int s, int p, int groups) {
    const int Ho = (H + 2 * p - kh) / s + 1, Wo = (W + 2 * p - kw) / s + 1;
    const int Cg = Cin / groups, Og = Cout / groups;
    for (int n = 0; n < B; n++)
        for (int co = 0; co < Cout; co++)
            for (int oi = 0; oi < Ho; oi++)
                for (int oj = 0; oj < Wo; oj++) {
                    double acc = b ? b[co] : 0.0;
                    const int gr = co / Og;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int u = 0; u < kh; u++)
                            for (int v = 0; v < kw; v++) {
                                int ii = oi * s - p + u, jj = oj * s - p + v;
                                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                acc += (double)w[((co * Cg + ci) * kh + u) * kw + v] *
                                       x[((n * Cin + gr * Cg + ci) * H + ii) * W + jj];
                            }
                    y[((n * Cout + co) * Ho + oi) * Wo + oj] = (float)acc;
                }
}

/* ---- conv ---- */
typedef struct conv_case {
    const char *name;
    int B, Cin, H, W, Cout, k, stride, pad, groups, bias;
} conv_case;

typedef struct conv_args {
    int stride, pad, groups;
} conv_args;

static sf_tensor *build_conv(sf_ctx *g, sf_tensor **in, void *u) {
    conv_args *a = u;
    return sf_conv2d(g, in[0], in[1], in[2], a->stride, a->pad, a->groups);
}

/* Forward against the naive loop, then a gradient check, on the path currently selected. */
static void conv_check(const conv_case *cc, const char *path) {
    sf_rng r;
    sf_rng_seed(&r, 7 + (uint64_t)cc->k * 131 + (uint64_t)cc->groups);
    sf_tensor *x = gc_leaf(4, (int[]){cc->B, cc->Cin, cc->H, cc->W}, 1);
    sf_tensor *w = gc_leaf(4, (int[]){cc->Cout, cc->Cin / cc->groups, cc->k, cc->k}, 1);
    sf_tensor *b = cc->bias ? gc_leaf(1, (int[]){cc->Cout}, 1) : NULL;
    gc_fill_uniform(x, &r, -1.0f, 1.0f);
    gc_fill_normal(w, &r, 0.5f);
    if (b) gc_fill_normal(b, &r, 0.5f);
    conv_args a = {cc->stride, cc->pad, cc->groups};
    char name[160];

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_conv2d(&g, x, w, b, cc->stride, cc->pad, cc->groups);
    const int Ho = (cc->H + 2 * cc->pad - cc->k) / cc->stride + 1;
    const int Wo = (cc->W + 2 * cc->pad - cc->k) / cc->stride + 1;
    CHECK(y->shape[0] == cc->B && y->shape[1] == cc->Cout && y->shape[2] == Ho && y->shape[3] == Wo,
          "%s: output shape", cc->name);
    float *want = malloc(sizeof(float) * y->numel);
    conv_naive(want, x->data, w->data, b ? b->data : NULL, cc->B, cc->Cin, cc->H, cc->W, cc->Cout,
               cc->k, cc->k, cc->stride, cc->pad, cc->groups);
    snprintf(name, sizeof name, "conv %s [%s] forward vs 7-loop", cc->name, path);
    allclose(name, y->data, want, y->numel, 1e-4f, 1e-5f);
    free(want);
    sf_ctx_free(&g);

    sf_tensor *in[3] = {x, w, b};
    snprintf(name, sizeof name, "conv %s [%s]", cc->name, path);
    gradcheck(name, build_conv, &a, in, b ? 3 : 2, (gc_opts){.tol = 1e-2f});
    gc_leaf_free(x);
    gc_leaf_free(w);
    gc_leaf_free(b);
}

/* The direct depthwise kernels (per plane, channels innermost) against the im2col reference:
 * outputs and every gradient. */
static const sf_conv_path conv_paths[] = {SF_CONV_IM2COL, SF_CONV_PLANES, SF_CONV_CHANNELS_LAST};
static const char *const conv_path_names[] = {"im2col", "planes", "channels-last"};

/* A case's output grid. */
static int conv_ho(const conv_case *cc) { return (cc->H + 2 * cc->pad - cc->k) / cc->stride + 1; }
static int conv_wo(const conv_case *cc) { return (cc->W + 2 * cc->pad - cc->k) / cc->stride + 1; }

/* A case's inputs x, w and (with a bias) b, filled from rng seed `seed`, and an output
 * gradient in [-1, 1) (malloc'd, returned). */
static float *conv_inputs(const conv_case *cc, uint64_t seed, sf_tensor **in) {
    sf_rng r;
    sf_rng_seed(&r, seed);
    in[0] = gc_leaf(4, (int[]){cc->B, cc->Cin, cc->H, cc->W}, 1);
    in[1] = gc_leaf(4, (int[]){cc->Cout, cc->Cin / cc->groups, cc->k, cc->k}, 1);
    in[2] = cc->bias ? gc_leaf(1, (int[]){cc->Cout}, 1) : NULL;
    gc_fill_uniform(in[0], &r, -1.0f, 1.0f);
    gc_fill_normal(in[1], &r, 0.5f);
    if (in[2]) gc_fill_normal(in[2], &r, 0.5f);
    const size_t ny = (size_t)cc->B * cc->Cout * conv_ho(cc) * conv_wo(cc);
    float *G = malloc(ny * sizeof(float));
    for (size_t i = 0; i < ny; i++) G[i] = 2 * sf_rng_uniform(&r) - 1;
    return G;
}

/* res[k] (y, dx, dw, db) of run against want, as two summation orders of the same products:
 * an entry that cancels (dw of a 9x9 kernel sums 15680 terms to 0.34 where its neighbours
 * reach tens) differs by the rounding of the partial sums, about eps sqrt(n) max|entry|, not
 * by a fraction of itself. So the absolute part follows the largest entry. */
static void conv_results_agree(const char *what_vs, const conv_case *cc, sf_tensor *const *in, float *const *got,
                               float *const *want, float rel, float abs_min, float abs_of_largest) {
    const size_t n[4] = {(size_t)cc->B * cc->Cout * conv_ho(cc) * conv_wo(cc), in[0]->numel, in[1]->numel, in[2] ? in[2]->numel : 0};
    const char *what[4] = {"y", "dx", "dw", "db"};
    for (int k = 0; k < 4; k++) {
        if (!n[k]) continue;
        char name[240];
        snprintf(name, sizeof name, "conv %s %s %s", cc->name, what_vs, what[k]);
        float largest = 0;
        for (size_t j = 0; j < n[k]; j++) largest = fmaxf(largest, fabsf(want[k][j]));
        allclose(name, got[k], want[k], n[k], rel, fmaxf(abs_min, abs_of_largest * largest));
    }
}

static void run_conv_once(const conv_case *cc, sf_tensor *const *in, const float *seed, float **res) {
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    for (int i = 0; i < 3; i++)
        if (in[i]) {
            free(in[i]->grad);
            in[i]->grad = calloc(in[i]->numel, sizeof(float));
        }
    sf_tensor *y = sf_conv2d(&g, in[0], in[1], in[2], cc->stride, cc->pad, cc->groups);
    sf_backward_seeded(&g, y, seed);
    res[0] = malloc(y->numel * sizeof(float));
    memcpy(res[0], y->data, y->numel * sizeof(float));
    for (int i = 0; i < 3; i++)
        if (in[i]) {
            res[i + 1] = malloc(in[i]->numel * sizeof(float));
            memcpy(res[i + 1], in[i]->grad, in[i]->numel * sizeof(float));
        }
    sf_ctx_free(&g);
}

static void conv_paths_agree(const conv_case *cc) {
    sf_tensor *in[3];
    float *seed = conv_inputs(cc, 77, in);
    float *res[3][4] = {{0}};  // [path][y, dx, dw, db]
    for (int path = 0; path < 3; path++) {
        sf_conv2d_set_path(conv_paths[path]);
        run_conv_once(cc, in, seed, res[path]);
        if (path > 0) {
            char vs[64];
            snprintf(vs, sizeof vs, "%s vs im2col", conv_path_names[path]);
            conv_results_agree(vs, cc, in, res[path], res[0], 1e-4f, 1e-5f, 4e-5f);
        }
    }
    sf_conv2d_set_path(SF_CONV_AUTO);
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 4; i++) free(res[p][i]);
    free(seed);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

static void test_conv(void) {
    static const conv_case cases[] = {
        /* name, B, Cin, H, W, Cout, k, stride, pad, groups, bias */
        {"3x3 s2 p1 (stem), odd sizes", 2, 3, 7, 9, 4, 3, 2, 1, 1, 1},
        {"16x16 s16 p0 (patch embed)", 2, 3, 33, 35, 5, 16, 16, 0, 1, 1},
        {"8x8 s8 p0 (landmarks r x r), no bias", 2, 4, 17, 16, 4, 8, 8, 0, 1, 0},
        {"3x3 s3 p0 (landmarks r = 3)", 2, 4, 9, 10, 4, 3, 3, 0, 1, 0},
        {"1x1 (pointwise)", 2, 5, 4, 3, 3, 1, 1, 0, 1, 1},
        {"1x1 s2", 2, 5, 5, 7, 3, 1, 2, 0, 1, 1},
        {"3x3 s2 p1 groups 2 (not depthwise)", 2, 4, 6, 5, 6, 3, 2, 1, 2, 1},
        /* the cases above share images out over threads; one image threads inside its
         * products instead (1.5 M multiply-adds: large enough for sf_gemm to split) */
        {"3x3 s1 p1 16->32 on 18x18, one image (threads inside each product)", 1, 16, 18, 18, 32, 3, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_check(&cases[i], "im2col");

    static const conv_case dw[] = {
        {"depthwise 3x3 s1 p1 (LPI)", 2, 4, 7, 6, 4, 3, 1, 1, 4, 1},
        {"V-conv 5x5 p2 groups=H (C_in=C_out=H)", 3, 2, 7, 7, 2, 5, 1, 2, 2, 0},
        {"V-conv 9x9 p4 groups=H, odd grid", 2, 3, 7, 5, 3, 9, 1, 4, 3, 0},
        {"depthwise 3x3 s2 p1, odd sizes", 2, 3, 9, 8, 3, 3, 2, 1, 3, 1},
        {"depthwise 3x3 s1 p0", 2, 3, 6, 7, 3, 3, 1, 0, 3, 1},
        {"depthwise 3x3 s1 p1 on a 1x1 grid", 2, 5, 1, 1, 5, 3, 1, 1, 5, 1},
        {"depthwise 3x3 s1 p1 on a 2x3 grid", 3, 4, 2, 3, 4, 3, 1, 1, 4, 0},
        /* CvT's key/value projection: stride 2, no bias, on odd and tiny token grids */
        {"depthwise 3x3 s2 p1 no bias, 7x7 grid (CvT k/v)", 2, 6, 7, 7, 6, 3, 2, 1, 6, 0},
        {"depthwise 3x3 s2 p1 no bias, 2x2 grid -> 1x1", 3, 4, 2, 2, 4, 3, 2, 1, 4, 0},
        /* enough channels for the channels-innermost kernel to be chosen (and a vector tail) */
        {"depthwise 3x3 s1 p1, 11 channels on 4x4 (LPI on a small grid)", 2, 11, 4, 4, 11, 3, 1, 1, 11, 1},
        {"depthwise 3x3 s2 p1, 12 channels on 9x7", 2, 12, 9, 7, 12, 3, 2, 1, 12, 0},
        /* the planes' phases: several taps a phase, a phase with none, stride 3 */
        {"depthwise 5x5 s2 p2, odd grid", 2, 3, 9, 7, 3, 5, 2, 2, 3, 1},
        {"depthwise 1x1 s2 p0 (three phases without taps)", 2, 3, 5, 6, 3, 1, 2, 0, 3, 1},
        {"depthwise 2x2 s2 p0, even kernel", 2, 3, 6, 7, 3, 2, 2, 0, 3, 0},
        {"depthwise 3x3 s3 p1", 2, 3, 10, 8, 3, 3, 3, 1, 3, 1},
    };
    for (size_t i = 0; i < sizeof dw / sizeof dw[0]; i++) {
        for (int path = 0; path < 3; path++) {
            sf_conv2d_set_path(conv_paths[path]);
            conv_check(&dw[i], conv_path_names[path]);
        }
        sf_conv2d_set_path(SF_CONV_AUTO);
        conv_paths_agree(&dw[i]);
    }
    /* Grids large enough that a channel's batch is split into work items (3 + 2 and 4 + 1
     * images), the first with one channel as SOFT's first V-conv: against im2col only (a
     * gradient check at this size would take minutes). */
    static const conv_case big[] = {
        {"depthwise 3x3 s1 p1 68x68, batch items 3 + 2", 5, 2, 68, 68, 2, 3, 1, 1, 2, 1},
        {"V-conv 9x9 p4 56x56 one channel, batch items 4 + 1", 5, 1, 56, 56, 1, 9, 1, 4, 1, 0},
        {"depthwise 3x3 s2 p1 40 channels on 28x28 (CvT k/v)", 3, 40, 28, 28, 40, 3, 2, 1, 40, 0},
        {"depthwise 3x3 s2 p1 56x56, batch items 4 + 1 (CvT k/v, stage 1)", 5, 3, 56, 56, 3, 3, 2, 1, 3, 0},
        {"depthwise 3x3 s1 p1 96 channels on 4x4, batch 32 (Fashion-MNIST LPI)", 32, 96, 4, 4, 96, 3, 1, 1, 96, 1},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) conv_paths_agree(&big[i]);
}

/* The im2col path a band of output rows at a time (sf_conv2d_set_tile_floats set low, so that
 * small shapes are banded: 2 rows a band, the last band short where Ho is odd): forward
 * against the naive loop and gradients by finite differences, then the output and every
 * gradient against the whole-image columns, in fp32 and in bf16 (emulated: the same rounded
 * operands either way, the sums in another order). Each case has K >= 4 Og, as banding asks. */
static void test_conv_bands(void) {
    static const conv_case cases[] = {
        /* name, B, Cin, H, W, Cout, k, stride, pad, groups, bias */
        {"3x3 s1 p1 8->4, 7x9 (bands of 2 rows, the last 1)", 2, 8, 7, 9, 4, 3, 1, 1, 1, 1},
        {"3x3 s2 p1 6->3, 9x8", 2, 6, 9, 8, 3, 3, 2, 1, 1, 0},
        {"3x3 s1 p1 groups 2, 8->4, 6x5", 2, 8, 6, 5, 4, 3, 1, 1, 2, 1},
        {"3x3 s1 p1 8->4, one image (threads inside each product)", 1, 8, 10, 6, 4, 3, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *cc = &cases[i];
        const int K = cc->Cin / cc->groups * cc->k * cc->k, Wo = conv_wo(cc);
        sf_conv2d_set_tile_floats((size_t)K * Wo * 2);
        conv_check(cc, "im2col in bands");
        sf_tensor *in[3];
        float *seed = conv_inputs(cc, 91, in);
        const sf_precision precs[2] = {SF_PREC_FP32, SF_PREC_BF16_EMULATED};
        for (int pi = 0; pi < 2; pi++) {
            sf_precision_set(precs[pi]);
            float *banded[4] = {0}, *whole[4] = {0};
            sf_conv2d_set_tile_floats((size_t)K * Wo * 2);
            run_conv_once(cc, in, seed, banded);
            sf_conv2d_set_tile_floats(0);
            run_conv_once(cc, in, seed, whole);
            char vs[64];
            snprintf(vs, sizeof vs, "%s: banded vs whole", sf_precision_name(precs[pi]));
            conv_results_agree(vs, cc, in, banded, whole, 1e-5f, 1e-6f, 4e-6f);
            for (int k = 0; k < 4; k++) free(banded[k]), free(whole[k]);
        }
        sf_precision_set(SF_PREC_FP32);
        free(seed);
        for (int k = 0; k < 3; k++) gc_leaf_free(in[k]);
    }
    sf_conv2d_set_tile_floats(0);
}

/* The automatic choice between the depthwise kernels (docs/performance.md has the timings
 * behind it): channels innermost on a grid of at most 64 outputs, given 8 channels or more;
 * the per-channel planes otherwise; im2col for what is not depthwise. */
static void test_conv_path_choice(void) {
    static const struct {
        int B, C, H, stride, groups;
        sf_conv_path want;
        const char *what;
    } cases[] = {
        {32, 96, 4, 1, 96, SF_CONV_CHANNELS_LAST, "Fashion-MNIST LPI, 4x4"},
        {8, 384, 14, 2, 384, SF_CONV_CHANNELS_LAST, "CvT k/v, stride 2 to 7x7"},
        {8, 192, 28, 2, 192, SF_CONV_PLANES, "CvT k/v, stride 2 to 14x14"},
        {8, 384, 14, 1, 384, SF_CONV_PLANES, "XCiT-S12 LPI, 14x14 stride 1"},
        {8, 64, 8, 1, 64, SF_CONV_CHANNELS_LAST, "8x8 stride 1 (64 outputs)"},
        {8, 64, 9, 1, 64, SF_CONV_PLANES, "9x9 stride 1 (81 outputs)"},
        {64, 4, 4, 1, 4, SF_CONV_PLANES, "4 channels on 4x4"},
        {2, 96, 4, 1, 1, SF_CONV_IM2COL, "not depthwise"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sf_tensor *x = gc_leaf(4, (int[]){cases[i].B, cases[i].C, cases[i].H, cases[i].H}, 0);
        sf_tensor *w = gc_leaf(4, (int[]){cases[i].C, cases[i].C / cases[i].groups, 3, 3}, 0);
        sf_conv2d_set_path(SF_CONV_AUTO);
        const sf_conv_path got = sf_conv2d_path_of(x, w, cases[i].stride, 1, cases[i].groups);
        CHECK(got == cases[i].want, "conv kernel choice, %s: got %d, want %d", cases[i].what, (int)got,
              (int)cases[i].want);
        sf_conv2d_set_path(SF_CONV_PLANES);
        CHECK(sf_conv2d_path_of(x, w, cases[i].stride, 1, cases[i].groups) ==
                  (cases[i].groups == cases[i].C ? SF_CONV_PLANES : SF_CONV_IM2COL),
              "conv kernel forced, %s", cases[i].what);
        sf_conv2d_set_path(SF_CONV_AUTO);
        gc_leaf_free(x);
        gc_leaf_free(w);
    }
}

/* ---- avgpool ---- */
typedef struct pool_args {
    int k, stride;
} pool_args;

static sf_tensor *build_pool(sf_ctx *g, sf_tensor **in, void *u) {
    pool_args *a = u;
    return sf_avgpool2d(g, in[0], a->k, a->stride);
}

static void test_avgpool(void) {
    static const int cfg[][6] = {/* B C H W k s */ {2, 3, 6, 8, 2, 2}, {2, 2, 7, 9, 3, 2}, {1, 3, 5, 5, 5, 1}};
    sf_rng r;
    sf_rng_seed(&r, 3);
    for (int t = 0; t < 3; t++) {
        const int *c = cfg[t];
        sf_tensor *x = gc_leaf(4, (int[]){c[0], c[1], c[2], c[3]}, 1);
        gc_fill_uniform(x, &r, -1.0f, 1.0f);
        pool_args a = {c[4], c[5]};
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *y = sf_avgpool2d(&g, x, a.k, a.stride);
        const int Ho = (c[2] - a.k) / a.stride + 1, Wo = (c[3] - a.k) / a.stride + 1;
        CHECK(y->shape[2] == Ho && y->shape[3] == Wo, "avgpool shape");
        float *want = malloc(sizeof(float) * y->numel);
        for (int p = 0; p < c[0] * c[1]; p++)
            for (int oi = 0; oi < Ho; oi++)
                for (int oj = 0; oj < Wo; oj++) {
                    double s = 0;
                    for (int u = 0; u < a.k; u++)
                        for (int v = 0; v < a.k; v++)
                            s += x->data[(p * c[2] + oi * a.stride + u) * c[3] + oj * a.stride + v];
                    want[(p * Ho + oi) * Wo + oj] = (float)(s / (a.k * a.k));
                }
        char name[96];
        snprintf(name, sizeof name, "avgpool k%d s%d forward", a.k, a.stride);
        allclose(name, y->data, want, y->numel, 1e-5f, 1e-6f);
        free(want);
        sf_ctx_free(&g);
        sf_tensor *in[1] = {x};
        snprintf(name, sizeof name, "avgpool k%d s%d (%dx%d)", a.k, a.stride, c[2], c[3]);
        gradcheck(name, build_pool, &a, in, 1, (gc_opts){.tol = 1e-2f});
        gc_leaf_free(x);
    }
}

/* ---- LayerNorm ---- */
static sf_tensor *build_ln(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_layernorm(g, in[0], in[1], in[2], *(float *)u);
}

static void test_layernorm(void) {
    sf_rng r;
    sf_rng_seed(&r, 13);
    const int B = 3, N = 5, C = 12;
    sf_tensor *x = gc_leaf(3, (int[]){B, N, C}, 1), *w = gc_leaf(1, (int[]){C}, 1),
              *b = gc_leaf(1, (int[]){C}, 1);
    gc_fill_normal(x, &r, 1.0f);
    for (size_t i = 0; i < x->numel; i++) x->data[i] += 3.0f;  // a mean far from 0
    gc_fill_uniform(w, &r, 0.5f, 1.5f);
    gc_fill_normal(b, &r, 0.3f);
    float eps = 1e-5f;
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_layernorm(&g, x, w, b, eps);
    float *want = malloc(sizeof(float) * x->numel);
    for (int row = 0; row < B * N; row++) {
        const float *xr = x->data + row * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += xr[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= C;
        for (int i = 0; i < C; i++)
            want[row * C + i] = (float)((xr[i] - m) / sqrt(v + eps) * w->data[i] + b->data[i]);
    }
    allclose("layernorm forward", y->data, want, x->numel, 1e-4f, 1e-5f);
    free(want);
    sf_ctx_free(&g);
    sf_tensor *in[3] = {x, w, b};
    gradcheck("layernorm x, weight, bias", build_ln, &eps, in, 3, (gc_opts){.tol = 1e-2f});
    /* no affine parameters */
    sf_tensor *in2[3] = {x, NULL, NULL};
    gradcheck("layernorm without weight/bias", build_ln, &eps, in2, 1, (gc_opts){.tol = 1e-2f});
    /* a wide row (more than one thread's worth) for the per-thread dγ/dβ partial sums */
    sf_tensor *xw = gc_leaf(2, (int[]){700, 64}, 1), *ww = gc_leaf(1, (int[]){64}, 1),
              *bw = gc_leaf(1, (int[]){64}, 1);
    gc_fill_normal(xw, &r, 1.0f);
    gc_fill_uniform(ww, &r, 0.5f, 1.5f);
    gc_fill_normal(bw, &r, 0.3f);
    sf_tensor *in3[3] = {xw, ww, bw};
    gradcheck("layernorm (700, 64), parallel rows", build_ln, &eps, in3, 3,
              (gc_opts){.tol = 1e-2f, .max_probe = 60});
    gc_leaf_free(xw);
    gc_leaf_free(ww);
    gc_leaf_free(bw);
    gc_leaf_free(x);
    gc_leaf_free(w);
    gc_leaf_free(b);
}

/* ---- BatchNorm2d ---- */
typedef struct bn_args {
    sf_tensor *rm, *rv, *nb;
    float eps, momentum;
} bn_args;

static sf_tensor *build_bn(sf_ctx *g, sf_tensor **in, void *u) {
    bn_args *a = u;
    return sf_batchnorm2d(g, in[0], in[1], in[2], a->rm, a->rv, a->nb, a->eps, a->momentum);
}

/* x feeds the op twice, so the second backward adds to the dx the first one wrote. */
static sf_tensor *build_bn_twice(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_add(g, build_bn(g, in, u), sf_scale(g, build_bn(g, in, u), 3.0f));
}

static void test_batchnorm(void) {
    sf_rng r;
    sf_rng_seed(&r, 17);
    const int B = 3, C = 4, H = 5, W = 3, M = B * H * W;
    sf_tensor *x = gc_leaf(4, (int[]){B, C, H, W}, 1), *w = gc_leaf(1, (int[]){C}, 1),
              *b = gc_leaf(1, (int[]){C}, 1);
    sf_tensor *rm = gc_leaf(1, (int[]){C}, 0), *rv = gc_leaf(1, (int[]){C}, 0),
              *nb = gc_leaf(1, (int[]){1}, 0);
    gc_fill_normal(x, &r, 1.5f);
    for (size_t i = 0; i < x->numel; i++) x->data[i] += 0.7f;
    gc_fill_uniform(w, &r, 0.5f, 1.5f);
    gc_fill_normal(b, &r, 0.3f);
    gc_fill_normal(rm, &r, 0.5f);
    gc_fill_uniform(rv, &r, 0.5f, 2.0f);
    nb->data[0] = 3;
    bn_args a = {rm, rv, nb, 1e-5f, 0.1f};

    /* training forward and the running-statistics update, recomputed here */
    float rm0[4], rv0[4];
    memcpy(rm0, rm->data, sizeof rm0);
    memcpy(rv0, rv->data, sizeof rv0);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    g.training = 1;
    sf_tensor *y = sf_batchnorm2d(&g, x, w, b, rm, rv, nb, a.eps, a.momentum);
    float *want = malloc(sizeof(float) * x->numel);
    float rm_want[4], rv_want[4];
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int n = 0; n < B; n++)
            for (int i = 0; i < H * W; i++) m += x->data[(n * C + c) * H * W + i];
        m /= M;
        for (int n = 0; n < B; n++)
            for (int i = 0; i < H * W; i++) {
                double d = x->data[(n * C + c) * H * W + i] - m;
                v += d * d;
            }
        double var_biased = v / M, var_unbiased = v / (M - 1);
        for (int n = 0; n < B; n++)
            for (int i = 0; i < H * W; i++) {
                int k = (n * C + c) * H * W + i;
                want[k] = (float)((x->data[k] - m) / sqrt(var_biased + a.eps) * w->data[c] + b->data[c]);
            }
        rm_want[c] = (float)(0.9 * rm0[c] + 0.1 * m);
        rv_want[c] = (float)(0.9 * rv0[c] + 0.1 * var_unbiased);
    }
    allclose("batchnorm train forward", y->data, want, x->numel, 1e-4f, 1e-5f);
    allclose("batchnorm running_mean update", rm->data, rm_want, C, 1e-5f, 1e-6f);
    allclose("batchnorm running_var update (unbiased)", rv->data, rv_want, C, 1e-5f, 1e-6f);
    CHECK(nb->data[0] == 4.0f, "num_batches_tracked %g, want 4", nb->data[0]);
    sf_ctx_reset(&g);

    /* eval forward uses the running statistics and leaves them alone */
    g.training = 0;
    memcpy(rm0, rm->data, sizeof rm0);
    memcpy(rv0, rv->data, sizeof rv0);
    y = sf_batchnorm2d(&g, x, w, b, rm, rv, nb, a.eps, a.momentum);
    for (int c = 0; c < C; c++)
        for (int n = 0; n < B; n++)
            for (int i = 0; i < H * W; i++) {
                int k = (n * C + c) * H * W + i;
                want[k] = (float)((x->data[k] - rm0[c]) / sqrt((double)rv0[c] + a.eps) * w->data[c] + b->data[c]);
            }
    allclose("batchnorm eval forward", y->data, want, x->numel, 1e-4f, 1e-5f);
    CHECK(memcmp(rm0, rm->data, sizeof rm0) == 0 && memcmp(rv0, rv->data, sizeof rv0) == 0 &&
              nb->data[0] == 4.0f,
          "eval must not touch the running statistics");
    free(want);
    sf_ctx_free(&g);

    sf_tensor *in[3] = {x, w, b};
    gradcheck("batchnorm2d train (batch statistics)", build_bn, &a, in, 3,
              (gc_opts){.tol = 1e-2f, .training = 1});
    gradcheck("batchnorm2d eval (running statistics)", build_bn, &a, in, 3,
              (gc_opts){.tol = 1e-2f, .training = 0});
    sf_tensor *in2[3] = {x, NULL, NULL};
    gradcheck("batchnorm2d train, no affine", build_bn, &a, in2, 1, (gc_opts){.tol = 1e-2f, .training = 1});
    gradcheck("batchnorm2d train, x used twice: bn(x) + 3 bn(x)", build_bn_twice, &a, in, 3,
              (gc_opts){.tol = 1e-2f, .training = 1});
    gradcheck("batchnorm2d eval, x used twice", build_bn_twice, &a, in, 3, (gc_opts){.tol = 1e-2f, .training = 0});
    /* channels > threads and planes large enough for the parallel loops */
    sf_tensor *xb = gc_leaf(4, (int[]){4, 8, 16, 16}, 1), *wb = gc_leaf(1, (int[]){8}, 1),
              *bb = gc_leaf(1, (int[]){8}, 1);
    sf_tensor *rmb = gc_leaf(1, (int[]){8}, 0), *rvb = gc_leaf(1, (int[]){8}, 0);
    for (int c = 0; c < 8; c++) rvb->data[c] = 1.0f;
    gc_fill_normal(xb, &r, 1.0f);
    gc_fill_uniform(wb, &r, 0.5f, 1.5f);
    gc_fill_normal(bb, &r, 0.3f);
    bn_args ab = {rmb, rvb, NULL, 1e-5f, 0.1f};
    sf_tensor *in3[3] = {xb, wb, bb};
    gradcheck("batchnorm2d train (4, 8, 16, 16)", build_bn, &ab, in3, 3,
              (gc_opts){.tol = 1e-2f, .training = 1, .max_probe = 60});
    gc_leaf_free(xb);
    gc_leaf_free(wb);
    gc_leaf_free(bb);
    gc_leaf_free(rmb);
    gc_leaf_free(rvb);
    gc_leaf_free(x);
    gc_leaf_free(w);
    gc_leaf_free(b);
    gc_leaf_free(rm);
    gc_leaf_free(rv);
    gc_leaf_free(nb);
}

int main(void) {
    sf_threads_init(0);
    test_conv();
    test_conv_bands();
    test_conv_path_choice();
    test_avgpool();
    test_layernorm();
    test_batchnorm();
    return test_summary("test_ops_conv_norm");
}
