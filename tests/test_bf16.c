/* test_bf16.c — bf16 numbers and the products that follow train.precision.
 *
 * 1. fp32 -> bf16 rounding against an independent reference (written with double
 *    arithmetic, not bit tricks): round to nearest, ties to even, on hand-picked cases (ties,
 *    NaN with payload only in the dropped bits, ±Inf, overflow into Inf, denormals, -0) and on
 *    a million random bit patterns.
 * 2. Each product op in bf16_emulated against its fp32 twin: linear forward and both backward
 *    products, matmul with every transpose pair, im2col convolution forward and backward.
 *    Tolerance, derived: a bf16 operand is x(1+d) with |d| <= u = 2^-8 (8-bit significand),
 *    so each product term is off by at most (2u + u^2)|a||b| and a result element by
 *      |c_bf16 - c_fp32| <= (2u + u^2 + 2K 2^-24) sum_k |a_k||b_k|
 *    (the last term: fp32 summation error of both results, K terms). The bound tensor
 *    sum |a||b| is the same op in fp32 on |inputs| (and backward seeded with |seed|): these
 *    ops are bilinear with non-negative structure. Also required: the result differs from
 *    fp32 (the rounding is in effect), and equals bit for bit the fp32 op on inputs and seed
 *    rounded to bf16 beforehand (the emulation is exact products of bf16 operands; the bias
 *    gradient stays fp32). bf16 with its products on fp32 kernels (train.bf16_products=fp32)
 *    must give the emulation's bits: no oneDNN kernel runs, so this holds on every machine.
 *    Products too large for one widened buffer, computed in blocks of C's rows or of K: within
 *    the bound of reordered fp32 sums of one fp32 product.
 * 3. Weights converted once per step (sf_bf16_weights_refresh) give the same bits as
 *    converting per product, and fp32 products are untouched by a refresh.
 * 4. A linear whose input is handed over (sf_linear_last_use) gives the bits of sf_linear in
 *    every precision, and frees the input's fp32 data where the backward does not need it:
 *    always in bf16 (its bf16 copy is kept, half the bytes), in fp32 only without a dW.
 * 5. The *_to_linear ops: the plain op's bits, the output in bf16 alone; in bf16 training an
 *    activation's (GELU, QuickGELU, ReLU) x gradient is the plain op's on its output gradient
 *    rounded to bf16 (the next linear layer's input gradient, as autocast makes it), and not
 *    the plain op's on the fp32 one.
 * 6. train.bf16_products=auto's rule on measured rates.
 * 7. SimA's bf16 copies of q, k and v (made in the forward for the backward): sf_sima_last_use
 *    gives sf_sima's output and gradients bit for bit in every precision and both orders, and
 *    keeps q, k, v in bf16 alone exactly where its backward reads only the copies (bf16,
 *    training); a token normalization handed over so reads q̂'s copy in its backward (its dx
 *    is the formula on the rounded q̂, told apart from the formula on fp32 q̂).
 * 8. fc1 and its activation (GELU, QuickGELU, ReLU) as one op (sf_linear_act_to_linear, whose
 *    backward sums and rounds fc1's output gradient in one pass): the two ops' output and
 *    gradients bit for bit, with and without bias, trained or frozen weight, in every
 *    precision; in bf16 the fused op keeps fc1's output in bf16 alone, so the two ops are
 *    compared with that output rounded before the activation reads it (its forward and its
 *    backward), and it fails if either reads fp32.
 * 9. sfvit bench --no-products (sf_products_skip): a skipped product leaves exactly beta C,
 *    for outputs filled by the calling thread (small, or inside a parallel region) and over
 *    the team (large), on fp32 products and bf16 ones on fp32 kernels.
 * 10. XCiT's layer scale on a handed-over branch (sf_mul_broadcast_last_use): the plain op's
 *    output and dx bit for bit; dγ from x kept in bf16 alone when training in bf16 (the plain
 *    op's dγ on rounded x, not on fp32 x), from fp32 x in fp32; x released without gradients.
 * 11. A convolution with its input handed over (sf_conv2d_last_use): the plain op's output and
 *    gradients bit for bit (im2col 3x3, strided with groups, pointwise, and depthwise), x kept
 *    in bf16 alone where training in bf16 on the im2col path, released with a frozen weight.
 */
#include "gradcheck.h"
#include "sfvit/precision.h"
#include "sfvit/train.h"

#include <float.h>
#include <string.h>

/* ---- 1. conversion ---- */

/* Nearest bf16 value of x by double arithmetic: the bf16 grid spacing at |x| is 2^(e-7)
 * for normal x (2^-133 below 2^-126), ties to the even significand. */
static float ref_round(float x) {
    if (isnan(x) || isinf(x)) return x;
    double a = fabs((double)x);
    if (a == 0) return x;
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    int exp2 = e - 1 < -126 ? -126 : e - 1;
    double ulp = ldexp(1.0, exp2 - 7);
    double q = a / ulp, fl = floor(q), r;
    if (q - fl > 0.5) r = fl + 1;
    else if (q - fl < 0.5) r = fl;
    else r = fmod(fl, 2.0) == 0 ? fl : fl + 1;
    double v = r * ulp;
    if (v >= ldexp(1.0, 128)) v = INFINITY; /* past the largest bf16 (and fp32) */
    return (float)(x < 0 ? -v : v);
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t to_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void check_round(float x, const char *what) {
    float got = sf_bf16_round(x), want = ref_round(x);
    if (isnan(x)) {
        CHECK(isnan(got) && signbit(got) == signbit(x), "%s: NaN 0x%08x -> 0x%08x, not a NaN of that sign", what,
              to_bits(x), to_bits(got));
        return;
    }
    CHECK(to_bits(got) == to_bits(want), "%s: %.9g (0x%08x) -> 0x%08x, want 0x%08x", what, (double)x, to_bits(x),
          to_bits(got), to_bits(want));
}

static void test_conversion(void) {
    check_round(1.0f, "one");
    CHECK(sf_bf16_round(1.0f + 0x1p-8f) == 1.0f, "tie 1 + 2^-8 rounds to even 1");
    CHECK(sf_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f, "tie 1 + 3*2^-8 rounds to even 1 + 2^-6");
    CHECK(sf_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "just above a tie rounds up");
    CHECK(sf_bf16_round(-(1.0f + 0x1p-8f)) == -1.0f, "negative tie rounds to even");
    CHECK(isinf(sf_bf16_round(INFINITY)) && sf_bf16_round(INFINITY) > 0, "+Inf stays +Inf");
    CHECK(isinf(sf_bf16_round(-INFINITY)) && sf_bf16_round(-INFINITY) < 0, "-Inf stays -Inf");
    CHECK(isinf(sf_bf16_round(FLT_MAX)), "FLT_MAX rounds up to Inf");
    CHECK(sf_bf16_round(0x1.fep127f) == 0x1.fep127f, "largest bf16 stays");
    /* a NaN whose payload is only in the dropped bits must not become Inf */
    float nan_low = from_bits(0x7f800001u), nan_neg = from_bits(0xff800001u);
    CHECK(isnan(sf_bf16_round(nan_low)), "NaN 0x7f800001 stays NaN (got 0x%08x)", to_bits(sf_bf16_round(nan_low)));
    CHECK(isnan(sf_bf16_round(nan_neg)) && signbit(sf_bf16_round(nan_neg)), "NaN 0xff800001 stays a negative NaN");
    check_round(NAN, "quiet NaN");
    CHECK(to_bits(sf_bf16_round(-0.0f)) == 0x80000000u, "-0 stays -0");
    CHECK(sf_bf16_round(0x1p-149f) == 0.0f, "smallest denormal 2^-149 rounds to 0");
    CHECK(sf_bf16_round(0x1p-133f) == 0x1p-133f, "smallest bf16 denormal 2^-133 stays");
    CHECK(sf_bf16_round(0x1p-134f) == 0.0f, "2^-134 (a tie) rounds to even 0");
    CHECK(sf_bf16_round(0x1.8p-133f) == 0x1p-132f, "1.5 * 2^-133 (a tie) rounds to even 2^-132");
    CHECK(sf_bf16_round(0x1.fffffep-127f) == 0x1p-126f, "largest denormal rounds up to the smallest normal");
    CHECK(sf_f32_from_bf16(0x3f80) == 1.0f && sf_bf16_from_f32(1.0f) == 0x3f80, "1.0 is 0x3f80");
    for (float x = -3; x <= 3; x += 0.001f) check_round(x, "range");
    sf_rng r;
    sf_rng_seed(&r, 7);
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        float x = from_bits((uint32_t)sf_rng_u64(&r));
        float got = sf_bf16_round(x), want = ref_round(x);
        if (isnan(x) ? !isnan(got) : to_bits(got) != to_bits(want)) {
            if (bad++ < 5) printf("  random 0x%08x -> 0x%08x, want 0x%08x\n", to_bits(x), to_bits(got), to_bits(want));
        }
    }
    CHECK(bad == 0, "%d of 1e6 random bit patterns rounded wrongly", bad);
    uint16_t h[3];
    sf_bf16_convert((const float[]){1.0f, -2.0f, 0.5f}, h, 3);
    CHECK(h[0] == 0x3f80 && h[1] == 0xc000 && h[2] == 0x3f00, "convert of an array");
}

/* ---- 2. product ops ---- */

typedef struct {
    const char *name;
    sf_tensor *(*build)(sf_ctx *g, sf_tensor **in, const int *arg);
    int n_in;
    int shapes[3][4], ndims[3];
    int arg[4];
    int K; /* longest inner dimension of its products (forward and backward) */
} op_case;

static sf_tensor *build_linear(sf_ctx *g, sf_tensor **in, const int *arg) {
    (void)arg;
    return sf_linear(g, in[0], in[1], in[2]);
}
/* x * 1 first: the handed-over input must be arena memory, as a model's activations are */
static sf_tensor *build_linear_last_use(sf_ctx *g, sf_tensor **in, const int *arg) {
    (void)arg;
    return sf_linear_last_use(g, sf_scale(g, in[0], 1.0f), in[1], in[2]);
}
static sf_tensor *build_matmul(sf_ctx *g, sf_tensor **in, const int *arg) {
    return sf_matmul(g, in[0], in[1], arg[0], arg[1]);
}
static sf_tensor *build_conv(sf_ctx *g, sf_tensor **in, const int *arg) {
    return sf_conv2d(g, in[0], in[1], in[2], arg[0], arg[1], arg[2]);
}

typedef struct {
    float *out, *grad[3];
    size_t n_out;
} op_result;

/* Forward and backward seeded with R, in the current precision. abs_inputs: on |inputs|. */
static op_result run_op(const op_case *c, sf_tensor **in, const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    for (int i = 0; i < c->n_in; i++) {
        free(in[i]->grad);
        in[i]->grad = calloc(in[i]->numel, sizeof(float));
    }
    sf_tensor *out = c->build(&g, in, c->arg);
    op_result res = {.n_out = out->numel};
    res.out = malloc(out->numel * sizeof(float));
    memcpy(res.out, out->data, out->numel * sizeof(float));
    sf_backward_seeded(&g, out, R);
    for (int i = 0; i < c->n_in; i++) {
        res.grad[i] = malloc(in[i]->numel * sizeof(float));
        memcpy(res.grad[i], in[i]->grad, in[i]->numel * sizeof(float));
    }
    sf_ctx_free(&g);
    return res;
}

static void free_result(op_result *r, int n) {
    free(r->out);
    for (int i = 0; i < n; i++) free(r->grad[i]);
}

/* |got - want| <= tol * bound + tiny, elementwise; returns the number of violations. */
static long over_bound(const float *got, const float *want, const float *bound, size_t n, double tol) {
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * bound[i] + 1e-30)) bad++;
    }
    return bad;
}

static void test_op(const op_case *c) {
    sf_rng r;
    sf_rng_seed(&r, 11);
    sf_tensor *in[3] = {0}, *in_abs[3] = {0}, *in_rnd[3] = {0}; /* absent inputs stay NULL */
    for (int i = 0; i < c->n_in; i++) {
        in[i] = gc_leaf(c->ndims[i], c->shapes[i], 1);
        in_abs[i] = gc_leaf(c->ndims[i], c->shapes[i], 1);
        in_rnd[i] = gc_leaf(c->ndims[i], c->shapes[i], 1);
        gc_fill_normal(in[i], &r, 1.0f);
        for (size_t k = 0; k < in[i]->numel; k++) {
            in_abs[i]->data[k] = fabsf(in[i]->data[k]);
            in_rnd[i]->data[k] = sf_bf16_round(in[i]->data[k]);
        }
    }
    /* output size: one fp32 run */
    sf_precision_set(SF_PREC_FP32);
    float *R0 = NULL;
    size_t n_out;
    {
        sf_ctx g;
        sf_ctx_init(&g, 0);
        n_out = c->build(&g, in, c->arg)->numel;
        sf_ctx_free(&g);
    }
    R0 = malloc(n_out * sizeof(float));
    float *Rabs = malloc(n_out * sizeof(float)), *Rrnd = malloc(n_out * sizeof(float));
    for (size_t k = 0; k < n_out; k++) {
        R0[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        Rabs[k] = fabsf(R0[k]);
        Rrnd[k] = sf_bf16_round(R0[k]);
    }
    op_result f32 = run_op(c, in, R0), bound = run_op(c, in_abs, Rabs), f32r = run_op(c, in_rnd, Rrnd);
    sf_precision_set(SF_PREC_BF16_EMULATED);
    op_result b16 = run_op(c, in, R0);
    /* bf16 on fp32 kernels (train.bf16_products=fp32) is the emulation's arithmetic: the same
     * bits, on any machine (no oneDNN kernel runs) */
    sf_precision_set(SF_PREC_BF16);
    sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
    op_result b16_fp32k = run_op(c, in, R0);
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    sf_precision_set(SF_PREC_FP32);
    CHECK(memcmp(b16_fp32k.out, b16.out, n_out * sizeof(float)) == 0,
          "%s forward: bf16 on fp32 kernels not bit-identical to bf16_emulated", c->name);
    for (int i = 0; i < c->n_in; i++)
        CHECK(memcmp(b16_fp32k.grad[i], b16.grad[i], in[i]->numel * sizeof(float)) == 0,
              "%s grad %d: bf16 on fp32 kernels not bit-identical to bf16_emulated", c->name, i);
    free_result(&b16_fp32k, c->n_in);

    const double u = 0x1p-8, tol = 2 * u + u * u + 2.0 * c->K * 0x1p-24;
    long bad = over_bound(b16.out, f32.out, bound.out, n_out, tol);
    CHECK(bad == 0, "%s forward: %ld of %zu elements outside (2u+u^2+2K 2^-24) sum|a||b|", c->name, bad, n_out);
    CHECK(memcmp(b16.out, f32.out, n_out * sizeof(float)) != 0, "%s forward: identical to fp32 (no rounding?)", c->name);
    /* a bias (a 1-d third input) is added in fp32 after the product: equal only without it */
    int has_bias = c->n_in == 3;
    if (!has_bias)
        CHECK(memcmp(b16.out, f32r.out, n_out * sizeof(float)) == 0,
              "%s forward: not bit-identical to fp32 on bf16-rounded inputs", c->name);
    for (int i = 0; i < c->n_in; i++) {
        size_t n = in[i]->numel;
        bad = over_bound(b16.grad[i], f32.grad[i], bound.grad[i], n, tol);
        CHECK(bad == 0, "%s grad %d: %ld of %zu elements outside the bound", c->name, i, bad, n);
        if (i == 2) { /* bias gradient: a column sum of G, in fp32 */
            CHECK(memcmp(b16.grad[i], f32.grad[i], n * sizeof(float)) == 0, "%s bias grad is not fp32", c->name);
        } else {
            CHECK(memcmp(b16.grad[i], f32r.grad[i], n * sizeof(float)) == 0,
                  "%s grad %d: not bit-identical to fp32 on bf16-rounded inputs and seed", c->name, i);
            CHECK(memcmp(b16.grad[i], f32.grad[i], n * sizeof(float)) != 0, "%s grad %d: identical to fp32", c->name, i);
        }
    }
    printf("  %s: forward and %d gradients within tol %.3g of fp32, exact on rounded inputs, bf16 on fp32 kernels = "
           "emulated\n",
           c->name, c->n_in, tol);
    free_result(&f32, c->n_in);
    free_result(&bound, c->n_in);
    free_result(&f32r, c->n_in);
    free_result(&b16, c->n_in);
    free(R0);
    free(Rabs);
    free(Rrnd);
    for (int i = 0; i < c->n_in; i++) {
        gc_leaf_free(in[i]);
        gc_leaf_free(in_abs[i]);
        gc_leaf_free(in_rnd[i]);
    }
}

/* Products too large for one widened buffer run in blocks (src/ops/bf16.c): of op(A)'s rows
 * when op(A) is the larger operand, else of K (each block's sum added to C). Against one fp32
 * product on the rounded operands: within the fp32 bound of reordered sums (blocks of rows
 * leave each sum whole, but OpenBLAS's AVX2 kernels sum the rows of a block's edge in another
 * order than those inside a block: the bits move with the block boundaries). Every transpose
 * pair, alpha and beta, operands given in fp32 or as bf16 copies, in bf16_emulated and in bf16
 * on fp32 kernels (the same bits). */
static void test_blocked_products(void) {
    enum { BIG = 2200, WIDE = 1024, SMALL = 48 }; /* BIG x WIDE floats: past the 2^21 of one buffer */
    const struct {
        const char *what;
        int M, N, K;
    } shapes[] = {{"op(A) the larger: blocks of rows", BIG, SMALL, WIDE}, {"op(B) the larger: blocks of K", SMALL, WIDE, BIG}};
    sf_rng r;
    sf_rng_seed(&r, 21);
    for (int sh = 0; sh < 2; sh++) {
        const int M = shapes[sh].M, N = shapes[sh].N, K = shapes[sh].K;
        const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
        float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *Ar = malloc(na * sizeof *Ar),
              *Br = malloc(nb * sizeof *Br), *C0 = malloc(nc * sizeof *C0), *want = malloc(nc * sizeof *want),
              *bound = malloc(nc * sizeof *bound), *got = malloc(nc * sizeof *got), *got2 = malloc(nc * sizeof *got2),
              *Aabs = malloc(na * sizeof *Aabs), *Babs = malloc(nb * sizeof *Babs);
        uint16_t *A16 = malloc(na * sizeof *A16), *B16 = malloc(nb * sizeof *B16);
        for (size_t i = 0; i < na; i++) A[i] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        for (size_t i = 0; i < nb; i++) B[i] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        for (size_t i = 0; i < nc; i++) C0[i] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        sf_bf16_round_into(A, Ar, na);
        sf_bf16_round_into(B, Br, nb);
        sf_bf16_convert(A, A16, na);
        sf_bf16_convert(B, B16, nb);
        for (size_t i = 0; i < na; i++) Aabs[i] = fabsf(Ar[i]);
        for (size_t i = 0; i < nb; i++) Babs[i] = fabsf(Br[i]);
        long bad = 0, differ = 0;
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1; /* the same numbers, read as stored transposed or not */
            const float alpha = t == 3 ? 0.5f : 1.0f, beta = t >= 2 ? 0.75f : 0.0f;
            memcpy(want, C0, nc * sizeof *want);
            sf_precision_set(SF_PREC_FP32);
            sf_gemm(ta, tb, M, N, K, alpha, Ar, Br, beta, want);
            memset(bound, 0, nc * sizeof *bound);
            sf_gemm(ta, tb, M, N, K, fabsf(alpha), Aabs, Babs, 0.0f, bound);
            for (int given = 0; given < 2; given++) {
                sf_precision_set(SF_PREC_BF16_EMULATED);
                memcpy(got, C0, nc * sizeof *got);
                sf_gemm_prec_w(ta, tb, M, N, K, alpha, A, given ? A16 : NULL, B, given ? B16 : NULL, beta, got);
                sf_precision_set(SF_PREC_BF16);
                sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
                memcpy(got2, C0, nc * sizeof *got2);
                sf_gemm_prec_w(ta, tb, M, N, K, alpha, A, given ? A16 : NULL, B, given ? B16 : NULL, beta, got2);
                sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
                differ += memcmp(got, got2, nc * sizeof *got) != 0;
                /* reordered fp32 sums of K terms, and beta C rounded once more per block of K */
                for (size_t i = 0; i < nc; i++)
                    bad += fabsf(got[i] - want[i]) > 2.0f * K * 0x1p-24f * (bound[i] + fabsf(beta * C0[i])) + FLT_MIN;
            }
        }
        sf_precision_set(SF_PREC_FP32);
        CHECK(bad == 0, "%s: %ld elements outside the bound of reordered sums", shapes[sh].what, bad);
        CHECK(differ == 0, "%s: bf16 on fp32 kernels differs from bf16_emulated in %ld of 8", shapes[sh].what, differ);
        printf("  %s (%d x %d x %d): every transpose pair, alpha, beta, fp32 or bf16 operands\n", shapes[sh].what, M, N,
               K);
        free(A), free(B), free(Ar), free(Br), free(C0), free(want), free(bound), free(got), free(got2), free(Aabs),
            free(Babs), free(A16), free(B16);
    }
}

/* ---- 3. weights once per step ---- */

static void test_weight_refresh(void) {
    const op_case c = {"linear", build_linear, 3, {{64, 96}, {80, 96}, {80}}, {2, 2, 1}, {0}, 96};
    sf_rng r;
    sf_rng_seed(&r, 5);
    sf_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = gc_leaf(c.ndims[i], c.shapes[i], 1);
        gc_fill_normal(in[i], &r, 1.0f);
    }
    float *R = malloc(64 * 80 * sizeof(float));
    for (int k = 0; k < 64 * 80; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    sf_precision_set(SF_PREC_BF16_EMULATED);
    op_result per_product = run_op(&c, in, R);
    sf_bf16_weights_refresh(in, 3);
    CHECK(sf_bf16_weight(in[1]) != NULL && sf_bf16_weight(in[2]) == NULL, "refresh keeps 2-d weights only");
    op_result per_step = run_op(&c, in, R);
    CHECK(memcmp(per_product.out, per_step.out, 64 * 80 * sizeof(float)) == 0, "refreshed weights: same forward bits");
    CHECK(memcmp(per_product.grad[0], per_step.grad[0], 64 * 96 * sizeof(float)) == 0, "refreshed weights: same dx bits");
    /* a stale copy would show: change the weight and refresh again */
    in[1]->data[0] += 1.0f;
    sf_bf16_weights_refresh(in, 3);
    CHECK(sf_f32_from_bf16(sf_bf16_weight(in[1])[0]) == sf_bf16_round(in[1]->data[0]), "refresh converts the new value");
    /* a copy is made when a product first asks for it (on oneDNN's kernels a linear layer's
     * products never do: they pack the weight from fp32), from the values of that moment */
    sf_bf16_weights_clear();
    sf_bf16_weights_refresh(in, 3);
    CHECK(sf_bf16_weight_registered(in[1]) && sf_bf16_weight_slot(in[1]) == NULL,
          "refresh registers a weight and makes no copy until one is asked for");
    in[1]->data[0] += 1.0f;
    const uint16_t *made = sf_bf16_weight(in[1]);
    CHECK(made && made == sf_bf16_weight_slot(in[1]) && sf_f32_from_bf16(made[0]) == sf_bf16_round(in[1]->data[0]),
          "a copy asked for after a change holds the new value, and is the optimizer's slot");
    /* bf16 on fp32 kernels rounds each weight into its product's buffer: no copies, and
     * none left over from oneDNN's kernels (stale after the next update) */
    sf_precision_set(SF_PREC_BF16);
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    sf_bf16_weights_refresh(in, 3);
    CHECK(sf_bf16_weight(in[1]) != NULL, "bf16 on oneDNN's kernels: a copy per weight");
    sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
    CHECK(sf_bf16_weight(in[1]) == NULL, "changing the kernels drops the copies");
    sf_bf16_weights_refresh(in, 3);
    CHECK(sf_bf16_weight(in[1]) == NULL, "bf16 on fp32 kernels: no copies of the weights");
    op_result rounded_per_product = run_op(&c, in, R);
    sf_precision_set(SF_PREC_BF16_EMULATED);
    sf_bf16_weights_refresh(in, 3);
    op_result from_copies = run_op(&c, in, R);
    CHECK(memcmp(rounded_per_product.out, from_copies.out, 64 * 80 * sizeof(float)) == 0 &&
              memcmp(rounded_per_product.grad[0], from_copies.grad[0], 64 * 96 * sizeof(float)) == 0,
          "weights rounded per product: the bits of the emulation's copies");
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    sf_precision_set(SF_PREC_FP32);
    CHECK(sf_bf16_weight(in[1]) == NULL, "fp32: no bf16 weights are used");
    free_result(&rounded_per_product, 3);
    free_result(&from_copies, 3);
    free_result(&per_product, 3);
    free_result(&per_step, 3);
    free(R);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

/* ---- 4. handed-over inputs ---- */

/* A run's leaves start from zero gradients (its backward adds into them); afterwards its
 * output and each leaf's gradient are copied out, for comparing two runs bit for bit. */
static void fresh_grads(sf_tensor *const *leaves, int n) {
    for (int i = 0; i < n; i++) {
        free(leaves[i]->grad);
        leaves[i]->grad = calloc(leaves[i]->numel, sizeof(float));
    }
}

static float *copy_floats(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

static void copy_grads(float **dst, sf_tensor *const *leaves, int n) {
    for (int i = 0; i < n; i++) dst[i] = copy_floats(leaves[i]->grad, leaves[i]->numel);
}

typedef struct {
    float *y, *dx, *dw, *db;
    int x_freed;           /* the linear's input has no data after the forward */
    size_t in_use_after;   /* arena bytes held after the forward */
} last_use_run;

static last_use_run run_linear(int last_use, int grad, sf_tensor *x, sf_tensor *w, sf_tensor *b, const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = grad;
    sf_tensor *leaves[3] = {x, w, b};
    fresh_grads(leaves, 3);
    sf_tensor *xa = sf_scale(&g, x, 1.0f);
    sf_tensor *y = last_use ? sf_linear_last_use(&g, xa, w, b) : sf_linear(&g, xa, w, b);
    last_use_run r = {.x_freed = xa->data == NULL, .in_use_after = sf_ctx_arena_in_use(&g)};
    r.y = copy_floats(y->data, y->numel);
    if (grad) sf_backward_seeded(&g, y, R);
    float *grads[3];
    copy_grads(grads, leaves, 3);
    r.dx = grads[0], r.dw = grads[1], r.db = grads[2];
    sf_ctx_free(&g);
    return r;
}

static void last_use_free(last_use_run *r) {
    free(r->y);
    free(r->dx);
    free(r->dw);
    free(r->db);
}

static void test_linear_last_use(void) {
    enum { R_ = 48, I = 96, O = 80 };
    sf_rng r;
    sf_rng_seed(&r, 9);
    sf_tensor *x = gc_leaf(2, (int[]){R_, I}, 1), *w = gc_leaf(2, (int[]){O, I}, 1), *b = gc_leaf(1, (int[]){O}, 1);
    gc_fill_normal(x, &r, 1.0f);
    gc_fill_normal(w, &r, 1.0f);
    gc_fill_normal(b, &r, 1.0f);
    float *R = malloc(R_ * O * sizeof(float));
    for (int k = 0; k < R_ * O; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    const sf_precision precs[] = {SF_PREC_FP32, SF_PREC_BF16_EMULATED};
    for (int p = 0; p < 2; p++) {
        sf_precision_set(precs[p]);
        const char *pn = sf_precision_name(precs[p]);
        for (int frozen = 0; frozen < 2; frozen++) {
            w->requires_grad = !frozen;
            last_use_run plain = run_linear(0, 1, x, w, b, R), handed = run_linear(1, 1, x, w, b, R);
            const char *wn = frozen ? "frozen weight" : "trained weight";
            CHECK(!memcmp(plain.y, handed.y, R_ * O * sizeof(float)) && !memcmp(plain.dx, handed.dx, R_ * I * sizeof(float)) &&
                      !memcmp(plain.dw, handed.dw, O * I * sizeof(float)) && !memcmp(plain.db, handed.db, O * sizeof(float)),
                  "%s, %s: handed-over x gives sf_linear's y, dx, dW, db bit for bit", pn, wn);
            CHECK(!plain.x_freed, "%s, %s: sf_linear keeps x", pn, wn);
            /* fp32 training keeps x for dW; bf16 keeps only its bf16 copy; no dW needs nothing */
            const int want_freed = precs[p] != SF_PREC_FP32 || frozen;
            CHECK(handed.x_freed == want_freed, "%s, %s: x's fp32 data %s", pn, wn, want_freed ? "freed" : "kept");
            if (want_freed)
                CHECK(handed.in_use_after < plain.in_use_after, "%s, %s: the forward holds fewer arena bytes (%zu vs %zu)",
                      pn, wn, handed.in_use_after, plain.in_use_after);
            last_use_free(&plain);
            last_use_free(&handed);
        }
        w->requires_grad = 1;
        last_use_run infer = run_linear(1, 0, x, w, b, R);
        CHECK(infer.x_freed, "%s, no gradients: x freed", pn);
        last_use_free(&infer);
    }
    sf_precision_set(SF_PREC_FP32);
    printf("  linear with a handed-over input: the bits of sf_linear, input freed where not needed\n");
    free(R);
    gc_leaf_free(x);
    gc_leaf_free(w);
    gc_leaf_free(b);
}

/* ---- 5. outputs made for the next linear layer (the *_to_linear ops) ---- */

typedef sf_tensor *(*to_linear_op)(sf_ctx *g, sf_tensor *x, int to_linear);

static sf_tensor *op_gelu(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_gelu_to_linear(g, x) : sf_gelu(g, x);
}
static sf_tensor *op_gelu_tanh(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_gelu_tanh_to_linear(g, x) : sf_gelu_tanh(g, x);
}
static sf_tensor *op_quick_gelu(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_quick_gelu_to_linear(g, x) : sf_quick_gelu(g, x);
}
static sf_tensor *op_relu(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_relu_to_linear(g, x) : sf_relu(g, x);
}
static sf_tensor *op_heads_merge(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_heads_merge_to_linear(g, x) : sf_heads_merge(g, x);
}
/* LayerNorm's own parameters, leaves whose gradients are compared as well */
static sf_tensor *ln_params[2];
static sf_tensor *op_layernorm(sf_ctx *g, sf_tensor *x, int t) {
    return t ? sf_layernorm_to_linear(g, x, ln_params[0], ln_params[1], 1e-6f)
             : sf_layernorm(g, x, ln_params[0], ln_params[1], 1e-6f);
}

typedef struct {
    float *y, *grad[5]; /* y; gradients of x, w, b (then LayerNorm's γ, β) */
    int bf16_alone;     /* the op's output held data16 and no data */
    int fp32_alone;     /* ... data and no data16 */
    size_t in_use;      /* arena bytes held after the forward */
} to_linear_run;

/* leaves: x, w, b, and for LayerNorm its γ, β (n 5, else 3) */
static to_linear_run run_to_linear(to_linear_op op, int to_linear, int grad, sf_tensor *const *leaves, int n,
                                   const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = grad;
    fresh_grads(leaves, n);
    sf_tensor *h = op(&g, leaves[0], to_linear);
    to_linear_run r = {.bf16_alone = h->data16 && !h->data, .fp32_alone = h->data && !h->data16};
    sf_tensor *y = sf_linear_last_use(&g, h, leaves[1], leaves[2]);
    r.in_use = sf_ctx_arena_in_use(&g);
    r.y = copy_floats(y->data, y->numel);
    if (grad) sf_backward_seeded(&g, y, R);
    copy_grads(r.grad, leaves, n);
    sf_ctx_free(&g);
    return r;
}

static void to_linear_free(to_linear_run *r) {
    free(r->y);
    for (int i = 0; i < 5; i++) free(r->grad[i]);
}

/* In bf16 an activation's output gradient from the next linear layer is that layer's input
 * gradient rounded to bf16 (as autocast's bf16 linear layer gives it). The reference for x's
 * gradient: the plain op's backward seeded with Ga rounded, Ga the linear layer's input
 * gradient (x's own through a scale by 1: the same product). leaves: x, w, b. */
static float *act_dx_rounded(to_linear_op op, sf_tensor *const *leaves, const float *R) {
    const size_t n = leaves[0]->numel;
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    fresh_grads(leaves, 3);
    sf_tensor *y = sf_linear_last_use(&g, sf_scale(&g, leaves[0], 1.0f), leaves[1], leaves[2]);
    sf_backward_seeded(&g, y, R);
    float *Ga = copy_floats(leaves[0]->grad, n);
    for (size_t i = 0; i < n; i++) Ga[i] = sf_bf16_round(Ga[i]);
    sf_ctx_free(&g);
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    fresh_grads(leaves, 3);
    sf_backward_seeded(&g, op(&g, leaves[0], 0), Ga);
    float *dx = copy_floats(leaves[0]->grad, n);
    sf_ctx_free(&g);
    free(Ga);
    return dx;
}

static void test_to_linear(void) {
    enum { B = 2, H = 3, N = 10, D = 8, C = H * D, O = 20 };
    /* layernorm at 600 channels too: its rows are rounded in blocks of 512 */
    const struct {
        const char *name;
        to_linear_op op;
        int merge; /* x is (B, H, N, D), not (B, N, C) */
        int C;
        int act; /* an activation whose output gradient comes in bf16 */
    } ops[] = {{"gelu", op_gelu, 0, C, 1},          {"gelu_tanh", op_gelu_tanh, 0, C, 0},
               {"quick_gelu", op_quick_gelu, 0, C, 1}, {"relu", op_relu, 0, C, 1},
               {"heads_merge", op_heads_merge, 1, C, 0}, {"layernorm", op_layernorm, 0, C, 0},
               {"layernorm", op_layernorm, 0, 600, 0}};
    sf_rng r;
    sf_rng_seed(&r, 11);
    float *R = malloc(B * N * O * sizeof(float));
    for (int k = 0; k < B * N * O; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    const sf_precision precs[] = {SF_PREC_FP32, SF_PREC_BF16_EMULATED};
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
        const int Co = ops[o].C, ln = ops[o].op == op_layernorm, n = ln ? 5 : 3;
        sf_tensor *x = ops[o].merge ? gc_leaf(4, (int[]){B, H, N, D}, 1) : gc_leaf(3, (int[]){B, N, Co}, 1);
        sf_tensor *leaves[5] = {x, gc_leaf(2, (int[]){O, Co}, 1), gc_leaf(1, (int[]){O}, 1),
                                ln ? gc_leaf(1, (int[]){Co}, 1) : NULL, ln ? gc_leaf(1, (int[]){Co}, 1) : NULL};
        for (int i = 0; i < n; i++) gc_fill_normal(leaves[i], &r, 1.0f);
        ln_params[0] = leaves[3], ln_params[1] = leaves[4];
        for (int p = 0; p < 2; p++) {
            sf_precision_set(precs[p]);
            const int bf16 = precs[p] != SF_PREC_FP32;
            const char *pn = sf_precision_name(precs[p]);
            for (int grad = 0; grad < 2; grad++) {
                to_linear_run plain = run_to_linear(ops[o].op, 0, grad, leaves, n, R);
                to_linear_run made = run_to_linear(ops[o].op, 1, grad, leaves, n, R);
                const char *gn = grad ? "training" : "no gradients";
                const int rounded = bf16 && grad && ops[o].act; /* x's gradient from Ga in bf16 */
                int same = !memcmp(plain.y, made.y, B * N * O * sizeof(float));
                for (int i = rounded; i < n; i++) same = same && !memcmp(plain.grad[i], made.grad[i], leaves[i]->numel * sizeof(float));
                CHECK(same, "%s_to_linear (C %d), %s, %s: the plain op's y and gradients%s bit for bit", ops[o].name, Co, pn, gn,
                      rounded ? " but x's" : "");
                if (rounded) {
                    const size_t nx = leaves[0]->numel;
                    float *want = act_dx_rounded(ops[o].op, leaves, R);
                    CHECK(!memcmp(want, made.grad[0], nx * sizeof(float)),
                          "%s_to_linear, %s: x's gradient is the plain op's on its output gradient rounded to bf16", ops[o].name, pn);
                    CHECK(memcmp(plain.grad[0], made.grad[0], nx * sizeof(float)),
                          "%s_to_linear, %s: x's gradient is not the plain op's on the fp32 output gradient", ops[o].name, pn);
                    free(want);
                }
                CHECK(plain.fp32_alone, "%s, %s, %s: the plain op's output is fp32", ops[o].name, pn, gn);
                CHECK(bf16 ? made.bf16_alone : made.fp32_alone, "%s_to_linear, %s, %s: output %s", ops[o].name, pn, gn,
                      bf16 ? "in bf16 alone" : "in fp32, as the plain op's");
                if (bf16)
                    CHECK(made.in_use <= plain.in_use, "%s_to_linear, %s, %s: holds no more arena bytes (%zu vs %zu)",
                          ops[o].name, pn, gn, made.in_use, plain.in_use);
                to_linear_free(&plain);
                to_linear_free(&made);
            }
        }
        for (int i = 0; i < n; i++) gc_leaf_free(leaves[i]);
        ln_params[0] = ln_params[1] = NULL;
    }
    sf_precision_set(SF_PREC_FP32);
    printf("  *_to_linear ops: bf16 output alone, the plain op's bits (an activation's on its output gradient in bf16)\n");
    free(R);
}

/* ---- 6. train.bf16_products=auto: fp32 kernels only with a clear lead ---- */

static void test_products_choice(void) {
    /* the Xeon without AMX (169 against 310 GFLOP/s), Zen 4 (bf16 ahead 2x), an AMX Xeon */
    CHECK(sf_bf16_products_choose(169, 310) == SF_BF16_PRODUCTS_FP32, "bf16 at half the fp32 rate: fp32 kernels");
    CHECK(sf_bf16_products_choose(600, 300) == SF_BF16_PRODUCTS_ONEDNN, "bf16 twice as fast: oneDNN's");
    CHECK(sf_bf16_products_choose(2500, 400) == SF_BF16_PRODUCTS_ONEDNN, "AMX: oneDNN's");
    /* within noise of each other: the native kernels, on every run alike */
    CHECK(sf_bf16_products_choose(300, 330) == SF_BF16_PRODUCTS_ONEDNN, "fp32 10%% ahead: still oneDNN's");
    CHECK(sf_bf16_products_choose(0, 0) == SF_BF16_PRODUCTS_ONEDNN, "nothing measured: oneDNN's");
}

/* ---- 7. SimA's bf16 operand copies ---- */

typedef struct {
    float *y, *grad[3]; /* o; gradients of q, k, v */
    int kept, untouched; /* q, k, v: each holds its bf16 copy alone / each keeps its fp32 data */
} sima_run;

static sima_run run_sima(int handed, int grad, sf_tensor *const *leaves, sf_sima_order order, const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = grad;
    fresh_grads(leaves, 3);
    sf_tensor *in[3]; /* activations, which can be handed over */
    for (int i = 0; i < 3; i++) in[i] = sf_scale(&g, leaves[i], 1.0f);
    const unsigned all = SF_SIMA_HAND_Q | SF_SIMA_HAND_K | SF_SIMA_HAND_V;
    sf_tensor *y = handed ? sf_sima_last_use(&g, in[0], in[1], in[2], order, all) : sf_sima(&g, in[0], in[1], in[2], order);
    sima_run r = {.kept = 1, .untouched = 1};
    for (int i = 0; i < 3; i++) {
        r.kept = r.kept && !in[i]->data && in[i]->data16;
        r.untouched = r.untouched && in[i]->data && !in[i]->data16;
    }
    r.y = copy_floats(y->data, y->numel);
    if (grad) sf_backward_seeded(&g, y, R);
    copy_grads(r.grad, leaves, 3);
    sf_ctx_free(&g);
    return r;
}

static void test_sima_copies(void) {
    enum { L = 6, N = 20, D = 8 };
    sf_rng r;
    sf_rng_seed(&r, 13);
    const struct {
        const char *name;
        int Nq;
        sf_sima_order order;
    } cases[] = {{"kv-first", N, SF_SIMA_KV_FIRST}, {"qk-first", N, SF_SIMA_QK_FIRST}, {"qk-first, one query", 1, SF_SIMA_QK_FIRST}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int Nq = cases[c].Nq;
        sf_tensor *leaves[3] = {gc_leaf(3, (int[]){L, Nq, D}, 1), gc_leaf(3, (int[]){L, N, D}, 1), gc_leaf(3, (int[]){L, N, D}, 1)};
        for (int i = 0; i < 3; i++) gc_fill_normal(leaves[i], &r, 1.0f);
        float *R = malloc((size_t)L * Nq * D * sizeof(float));
        for (int k = 0; k < L * Nq * D; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        for (int p = 0; p < 3; p++) { /* fp32, bf16_emulated, bf16 on fp32 kernels */
            sf_precision_set(p == 0 ? SF_PREC_FP32 : p == 1 ? SF_PREC_BF16_EMULATED : SF_PREC_BF16);
            sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
            const char *pn = p == 2 ? "bf16 on fp32 kernels" : sf_precision_name(sf_precision_get());
            for (int grad = 0; grad < 2; grad++) {
                sima_run plain = run_sima(0, grad, leaves, cases[c].order, R);
                sima_run handed = run_sima(1, grad, leaves, cases[c].order, R);
                const char *gn = grad ? "training" : "no gradients";
                int same = !memcmp(plain.y, handed.y, (size_t)L * Nq * D * sizeof(float));
                for (int i = 0; i < 3; i++)
                    same = same && !memcmp(plain.grad[i], handed.grad[i], leaves[i]->numel * sizeof(float));
                CHECK(same, "sima %s, %s, %s: q, k, v handed over give sf_sima's output and gradients bit for bit",
                      cases[c].name, pn, gn);
                const int want = p > 0 && grad;
                CHECK(plain.untouched && (want ? handed.kept : handed.untouched), "sima %s, %s, %s: q, k, v %s",
                      cases[c].name, pn, gn, want ? "hold their bf16 copies alone (the backward reads only those)" : "keep their fp32 data");
                free(plain.y), free(handed.y);
                for (int i = 0; i < 3; i++) free(plain.grad[i]), free(handed.grad[i]);
            }
        }
        sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
        sf_precision_set(SF_PREC_FP32);
        for (int i = 0; i < 3; i++) gc_leaf_free(leaves[i]);
        free(R);
    }
    printf("  sima with bf16 operand copies: the bits of sf_sima, q, k, v kept in bf16 alone where only the copies are read\n");
}

/* Largest |a - b| over n values. */
static double max_abs_diff(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* dx of y = x / max(s, eps) over tokens (attention.md#l1, #l2) in double, for gradient G
 * and the values y the backward reads (yv): (G - dir c) / max(s, eps), c_j = sum_n G_nj yv_nj,
 * dir = sign(yv) (l1) or yv (l2). x (B, N, H D) is split into heads (B, H, N, D). */
static void norm_grad_ref(double *dx, const float *x, const float *G, const float *yv, int B, int H, int N, int D, int p,
                          float eps) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < D; j++) {
                double s = 0, c = 0;
                for (int n = 0; n < N; n++) {
                    double v = x[((size_t)b * N + n) * H * D + (size_t)h * D + j];
                    s += p == 1 ? fabs(v) : v * v;
                }
                if (p == 2) s = sqrt(s);
                const size_t at = ((size_t)b * H + h) * N * D + j; /* (b, h, 0, j) */
                for (int n = 0; n < N; n++) c += (double)G[at + (size_t)n * D] * yv[at + (size_t)n * D];
                for (int n = 0; n < N; n++) {
                    const double y = yv[at + (size_t)n * D], dir = p == 1 ? (y > 0) - (y < 0) : y;
                    dx[((size_t)b * N + n) * H * D + (size_t)h * D + j] = (G[at + (size_t)n * D] - dir * c) / fmax(s, eps);
                }
            }
}

/* q̂ = the token normalization of x, handed over to SimA in bf16: SimA keeps q̂'s bf16 copy
 * alone, and the normalization's backward reads that copy. dx must match the formula on the
 * rounded q̂ (as autocast's saved bf16 output), and the check must be able to tell it from
 * the formula on fp32 q̂. With x split directly (the split writes x's gradient in one pass,
 * sf_heads_split_gather) and through a copy that already has a gradient (accumulated). */
static void test_norm_reads_copy(void) {
    enum { B = 2, H = 2, N = 20, D = 8 };
    const float eps = 1e-6f;
    sf_rng r;
    sf_rng_seed(&r, 29);
    sf_precision_set(SF_PREC_BF16_EMULATED);
    sf_tensor *x = gc_leaf(3, (int[]){B, N, H * D}, 1), *k = gc_leaf(4, (int[]){B, H, N, D}, 1);
    sf_tensor *v = gc_leaf(4, (int[]){B, H, N, D}, 1), *qhat = gc_leaf(4, (int[]){B, H, N, D}, 1);
    gc_fill_normal(x, &r, 1.0f), gc_fill_normal(k, &r, 1.0f), gc_fill_normal(v, &r, 1.0f);
    const size_t n = qhat->numel;
    float *R = malloc(n * sizeof(float)), *y16 = malloc(n * sizeof(float));
    double *want = malloc(x->numel * sizeof(double)), *want32 = malloc(x->numel * sizeof(double));
    for (size_t i = 0; i < n; i++) R[i] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    for (int p = 1; p <= 2; p++)
        for (int order = 0; order < 2; order++) {
            const sf_sima_order o = order ? SF_SIMA_KV_FIRST : SF_SIMA_QK_FIRST;
            /* q̂'s values, then G = dL/dq̂ from SimA alone on them (the same bf16 copy) */
            sf_ctx g;
            sf_ctx_init(&g, 0);
            memcpy(qhat->data, sf_heads_split_norm(&g, x, 1, 0, H, p, eps)->data, n * sizeof(float));
            sf_ctx_reset(&g);
            g.grad_enabled = 1;
            sf_tensor *leaves[3] = {qhat, k, v};
            fresh_grads(leaves, 3);
            sf_backward_seeded(&g, sf_sima(&g, qhat, k, v, o), R);
            sf_ctx_reset(&g);
            for (int via_gather = 0; via_gather < 2; via_gather++) {
                fresh_grads(&x, 1);
                sf_tensor *xs = via_gather ? sf_scale(&g, x, 1.0f) : x;
                sf_tensor *q = sf_heads_split_norm(&g, xs, 1, 0, H, p, eps);
                sf_tensor *out = sf_sima_last_use(&g, q, k, v, o, SF_SIMA_HAND_Q);
                CHECK(!q->data && q->data16, "l%d norm, %s: q̂ kept in bf16 alone", p, sf_sima_order_names[o]);
                if (q->data16)
                    for (size_t i = 0; i < n; i++) y16[i] = sf_from_bf16(q->data16[i]);
                sf_backward_seeded(&g, out, R);
                norm_grad_ref(want, x->data, qhat->grad, y16, B, H, N, D, p, eps);
                norm_grad_ref(want32, x->data, qhat->grad, qhat->data, B, H, N, D, p, eps);
                double scale = 0;
                for (size_t i = 0; i < x->numel; i++) scale = fmax(scale, fabs(want[i]));
                const double err = max_abs_diff(x->grad, want, x->numel), err32 = max_abs_diff(x->grad, want32, x->numel);
                const char *how = via_gather ? "split gather" : "accumulated";
                CHECK(err <= 1e-5 * scale, "l%d norm, %s, %s: dx is the formula on bf16 q̂ (max error %.3g of %.3g)", p,
                      sf_sima_order_names[o], how, err, scale);
                CHECK(err32 > 1e-4 * scale, "l%d norm, %s, %s: and not the formula on fp32 q̂ (%.3g), so the check can tell",
                      p, sf_sima_order_names[o], how, err32);
                sf_ctx_reset(&g);
            }
            sf_ctx_free(&g);
        }
    sf_precision_set(SF_PREC_FP32);
    gc_leaf_free(x), gc_leaf_free(k), gc_leaf_free(v), gc_leaf_free(qhat);
    free(R), free(y16), free(want), free(want32);
    printf("  token normalization handed to sima: its backward reads q̂'s bf16 copy\n");
}

/* ---- 8. fc1 + its activation as one op ---- */

enum { LG_LEAVES = 5 }; /* x, fc1's w and b, fc2's w and b */

typedef struct {
    float *y, *grad[LG_LEAVES];
    size_t in_use; /* arena bytes held after fc1 and its GELU */
} mlp_run;

/* The plain activation op for a linear layer, by op. */
static sf_tensor *act_to_linear(sf_ctx *g, sf_tensor *h, sf_op op) {
    return op == SF_OP_GELU ? sf_gelu_to_linear(g, h) : op == SF_OP_QUICK_GELU ? sf_quick_gelu_to_linear(g, h) : sf_relu_to_linear(g, h);
}

static mlp_run run_mlp(sf_op act, int fused, int bias, sf_tensor *const *leaves, const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 1;
    fresh_grads(leaves, LG_LEAVES);
    sf_tensor *x = sf_scale(&g, leaves[0], 1.0f), *b1 = bias ? leaves[2] : NULL;
    sf_tensor *a;
    if (fused) {
        a = sf_linear_act_to_linear(&g, x, leaves[1], b1, act);
    } else {
        sf_tensor *h = sf_linear_last_use(&g, x, leaves[1], b1);
        /* the fused op's h in bf16: rounded before the activation, whose backward then reads
         * it too (the linear layer's backward reads its input, never h) */
        if (sf_precision_get() != SF_PREC_FP32)
            for (size_t i = 0; i < h->numel; i++) h->data[i] = sf_bf16_round(h->data[i]);
        a = act_to_linear(&g, h, act);
    }
    const size_t in_use = sf_ctx_arena_in_use(&g);
    sf_tensor *y = sf_linear_last_use(&g, a, leaves[3], leaves[4]);
    mlp_run r = {.y = copy_floats(y->data, y->numel), .in_use = in_use};
    sf_backward_seeded(&g, y, R);
    copy_grads(r.grad, leaves, LG_LEAVES);
    sf_ctx_free(&g);
    return r;
}

/* large: fc1's output of 1 M values, where GELU and QuickGELU read their bf16 tables
 * (sf_act_bf16_values / _grad); the bf16 precisions and those two only. Else 140 rows (three
 * blocks of the bias sum), every case. */
static void test_linear_act(int large) {
    enum { C = 24, O = 24 };
    const int B = large ? 8 : 2, N = large ? 1024 : 70, Hd = large ? 128 : 96;
    sf_rng r;
    sf_rng_seed(&r, 17);
    sf_tensor *leaves[LG_LEAVES] = {gc_leaf(3, (int[]){B, N, C}, 1), gc_leaf(2, (int[]){Hd, C}, 1), gc_leaf(1, (int[]){Hd}, 1),
                                    gc_leaf(2, (int[]){O, Hd}, 1), gc_leaf(1, (int[]){O}, 1)};
    for (int i = 0; i < LG_LEAVES; i++) gc_fill_normal(leaves[i], &r, 1.0f);
    float *R = malloc(B * N * O * sizeof(float));
    for (int k = 0; k < B * N * O; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    for (int p = large; p < 3; p++) { /* fp32, bf16_emulated, bf16 on fp32 kernels */
        sf_precision_set(p == 0 ? SF_PREC_FP32 : p == 1 ? SF_PREC_BF16_EMULATED : SF_PREC_BF16);
        sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
        const char *pn = p == 2 ? "bf16 on fp32 kernels" : sf_precision_name(sf_precision_get());
        for (int v = 0; v < (large ? 8 : 12); v++) {
            const int bias = v & 1, frozen = (v >> 1) & 1;
            const sf_op act = (const sf_op[]){SF_OP_GELU, SF_OP_QUICK_GELU, SF_OP_RELU}[v >> 2];
            const char *an = sf_op_name(act);
            leaves[1]->requires_grad = !frozen;
            mlp_run apart = run_mlp(act, 0, bias, leaves, R), fused = run_mlp(act, 1, bias, leaves, R);
            int same = !memcmp(apart.y, fused.y, B * N * O * sizeof(float));
            for (int i = 0; i < LG_LEAVES; i++) same = same && !memcmp(apart.grad[i], fused.grad[i], leaves[i]->numel * sizeof(float));
            CHECK(same, "linear + %s (%d rows), %s, %s, %s fc1 weight: the two ops' output and gradients bit for bit", an,
                  B * N, pn, bias ? "bias" : "no bias", frozen ? "frozen" : "trained");
            /* fc1's output (B N Hd) kept in bf16 alone: 2 bytes an element less than in fp32 */
            const size_t saved = apart.in_use - fused.in_use, half = (size_t)B * N * Hd * 2;
            CHECK(p > 0 ? saved >= half && saved < 2 * half : saved == 0,
                  "linear + %s, %s: the arena holds %zd bytes less with the fused op (fc1's output in %s: %zu)", an, pn,
                  (ssize_t)saved, p > 0 ? "bf16 alone" : "fp32", p > 0 ? half : 0);
            free(apart.y), free(fused.y);
            for (int i = 0; i < LG_LEAVES; i++) free(apart.grad[i]), free(fused.grad[i]);
        }
        leaves[1]->requires_grad = 1;
    }
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    sf_precision_set(SF_PREC_FP32);
    for (int i = 0; i < LG_LEAVES; i++) gc_leaf_free(leaves[i]);
    free(R);
    if (large)
        printf("  fc1 + GELU, QuickGELU at 1 M values (the bf16 tables): the bits of the two ops\n");
    else
        printf("  fc1 + GELU, QuickGELU, ReLU as one op: the bits of the two ops (fc1's output rounded in bf16), kept in bf16 alone\n");
}

/* ---- 10. layer scale with its input handed over ---- */

typedef struct {
    float *out, *dx, *dy;
    int kept16, released; /* x after the forward: bf16 values alone / no values */
} scale_run;

static scale_run run_layer_scale(int last_use, int grad, int round_x, sf_tensor *const *leaves, const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = grad;
    fresh_grads(leaves, 2);
    sf_tensor *x = sf_scale(&g, leaves[0], 1.0f); /* an activation, which can be handed over */
    if (round_x)
        for (size_t i = 0; i < x->numel; i++) x->data[i] = sf_bf16_round(x->data[i]);
    sf_tensor *y = last_use ? sf_mul_broadcast_last_use(&g, x, leaves[1]) : sf_mul_broadcast(&g, x, leaves[1]);
    scale_run r = {.kept16 = !x->data && x->data16, .released = !x->data && !x->data16};
    r.out = copy_floats(y->data, y->numel);
    if (grad) sf_backward_seeded(&g, y, R);
    r.dx = copy_floats(leaves[0]->grad, leaves[0]->numel);
    r.dy = copy_floats(leaves[1]->grad, leaves[1]->numel);
    sf_ctx_free(&g);
    return r;
}

/* XCiT's layer scale on a handed-over branch (sf_mul_broadcast_last_use): the output and dx
 * of sf_mul_broadcast bit for bit; dγ reads x in bf16 alone where training in bf16 (the bits
 * of sf_mul_broadcast on x rounded, and not those on fp32 x), fp32 x in fp32 training, and x
 * is released where nothing reads it (no gradients). */
static void test_layer_scale(void) {
    enum { B = 3, N = 50, C = 40 };
    sf_rng r;
    sf_rng_seed(&r, 31);
    sf_tensor *leaves[2] = {gc_leaf(3, (int[]){B, N, C}, 1), gc_leaf(1, (int[]){C}, 1)};
    gc_fill_normal(leaves[0], &r, 1.0f), gc_fill_normal(leaves[1], &r, 0.1f);
    float *R = malloc(B * N * C * sizeof(float));
    for (int k = 0; k < B * N * C; k++) R[k] = 2.0f * sf_rng_uniform(&r) - 1.0f;
    for (int p = 0; p < 3; p++) { /* fp32, bf16_emulated, bf16 on fp32 kernels */
        sf_precision_set(p == 0 ? SF_PREC_FP32 : p == 1 ? SF_PREC_BF16_EMULATED : SF_PREC_BF16);
        sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
        const char *pn = p == 2 ? "bf16 on fp32 kernels" : sf_precision_name(sf_precision_get());
        for (int grad = 0; grad < 2; grad++) {
            scale_run plain = run_layer_scale(0, grad, 0, leaves, R), handed = run_layer_scale(1, grad, 0, leaves, R);
            scale_run rounded = run_layer_scale(0, grad, 1, leaves, R);
            const size_t nx = (size_t)B * N * C;
            CHECK(!memcmp(plain.out, handed.out, nx * sizeof(float)) && !memcmp(plain.dx, handed.dx, nx * sizeof(float)),
                  "layer scale, %s, %s: x handed over gives the output and dx of sf_mul_broadcast bit for bit", pn,
                  grad ? "training" : "no gradients");
            if (!grad) {
                CHECK(handed.released, "layer scale, %s, no gradients: x released", pn);
            } else if (p == 0) {
                CHECK(!handed.kept16 && !handed.released && !memcmp(plain.dy, handed.dy, C * sizeof(float)),
                      "layer scale, fp32, training: x kept in fp32, dγ of sf_mul_broadcast bit for bit");
            } else {
                CHECK(handed.kept16, "layer scale, %s, training: x kept in bf16 alone", pn);
                CHECK(!memcmp(rounded.dy, handed.dy, C * sizeof(float)) && memcmp(plain.dy, handed.dy, C * sizeof(float)),
                      "layer scale, %s, training: dγ is sf_mul_broadcast's on x rounded to bf16, not on fp32 x", pn);
            }
            scale_run *all[3] = {&plain, &handed, &rounded};
            for (int i = 0; i < 3; i++) free(all[i]->out), free(all[i]->dx), free(all[i]->dy);
        }
    }
    sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
    sf_precision_set(SF_PREC_FP32);
    gc_leaf_free(leaves[0]), gc_leaf_free(leaves[1]);
    free(R);
    printf("  layer scale with x handed over: sf_mul_broadcast's bits, dγ from x in bf16 alone\n");
}

/* ---- 11. a convolution with its input handed over ---- */

typedef struct {
    float *out, *grad[3];
    int kept16, kept32, released; /* x after the forward */
} conv_run;

static conv_run run_conv(int last_use, int grad, sf_tensor *const *leaves, int stride, int pad, int groups,
                         const float *R) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = grad;
    fresh_grads(leaves, 3);
    sf_tensor *x = sf_scale(&g, leaves[0], 1.0f); /* an activation, which can be handed over */
    sf_tensor *y = last_use ? sf_conv2d_last_use(&g, x, leaves[1], leaves[2], stride, pad, groups)
                            : sf_conv2d(&g, x, leaves[1], leaves[2], stride, pad, groups);
    conv_run r = {.kept16 = !x->data && x->data16, .kept32 = x->data && !x->data16, .released = !x->data && !x->data16};
    r.out = copy_floats(y->data, y->numel);
    if (grad) sf_backward_seeded(&g, y, R);
    copy_grads(r.grad, leaves, 3);
    sf_ctx_free(&g);
    return r;
}

/* sf_conv2d_last_use gives sf_conv2d's output and every gradient bit for bit (its backward's
 * bf16 columns built from x's bf16 copy are those built from x), keeps x in bf16 alone where
 * training in bf16 on the im2col path, in fp32 in fp32 training and on the depthwise path, and
 * releases it where no dW is computed (frozen weight). */
static void test_conv_last_use(void) {
    enum { B = 2, C = 4, H = 9, W = 9, O = 6 };
    const struct {
        const char *name;
        int k, stride, pad, groups, cout, im2col;
    } cases[] = {{"3x3", 3, 1, 1, 1, O, 1}, {"3x3 stride 2 groups 2", 3, 2, 1, 2, O, 1},
                 {"1x1 pointwise", 1, 1, 0, 1, O, 1}, {"3x3 depthwise", 3, 1, 1, C, C, 0}};
    sf_rng r;
    sf_rng_seed(&r, 37);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const int k = cases[ci].k, Co = cases[ci].cout, Ho = (H + 2 * cases[ci].pad - k) / cases[ci].stride + 1;
        sf_tensor *leaves[3] = {gc_leaf(4, (int[]){B, C, H, W}, 1), gc_leaf(4, (int[]){Co, C / cases[ci].groups, k, k}, 1),
                                gc_leaf(1, (int[]){Co}, 1)};
        for (int i = 0; i < 3; i++) gc_fill_normal(leaves[i], &r, 1.0f);
        const size_t ny = (size_t)B * Co * Ho * Ho;
        float *R = malloc(ny * sizeof(float));
        for (size_t i = 0; i < ny; i++) R[i] = 2.0f * sf_rng_uniform(&r) - 1.0f;
        for (int p = 0; p < 3; p++) { /* fp32, bf16_emulated, bf16 on fp32 kernels */
            sf_precision_set(p == 0 ? SF_PREC_FP32 : p == 1 ? SF_PREC_BF16_EMULATED : SF_PREC_BF16);
            sf_bf16_products_set(SF_BF16_PRODUCTS_FP32);
            const char *pn = p == 2 ? "bf16 on fp32 kernels" : sf_precision_name(sf_precision_get());
            for (int v = 0; v < 3; v++) { /* training, frozen weight, no gradients */
                const int grad = v < 2, frozen = v == 1;
                leaves[1]->requires_grad = !frozen;
                conv_run plain = run_conv(0, grad, leaves, cases[ci].stride, cases[ci].pad, cases[ci].groups, R);
                conv_run handed = run_conv(1, grad, leaves, cases[ci].stride, cases[ci].pad, cases[ci].groups, R);
                const char *vn = v == 0 ? "training" : v == 1 ? "frozen weight" : "no gradients";
                int same = !memcmp(plain.out, handed.out, ny * sizeof(float));
                for (int i = 0; i < 3; i++) same = same && !memcmp(plain.grad[i], handed.grad[i], leaves[i]->numel * sizeof(float));
                CHECK(same, "conv %s, %s, %s: x handed over gives sf_conv2d's output and gradients bit for bit", cases[ci].name,
                      pn, vn);
                /* what x holds after the forward */
                const int want16 = cases[ci].im2col && v == 0 && p > 0, want_released = cases[ci].im2col && v == 1;
                CHECK(want16 ? handed.kept16 : want_released ? handed.released : handed.kept32, "conv %s, %s, %s: x %s",
                      cases[ci].name, pn, vn, want16 ? "kept in bf16 alone" : want_released ? "released" : "kept in fp32");
                free(plain.out), free(handed.out);
                for (int i = 0; i < 3; i++) free(plain.grad[i]), free(handed.grad[i]);
            }
            leaves[1]->requires_grad = 1;
        }
        sf_bf16_products_set(SF_BF16_PRODUCTS_ONEDNN);
        sf_precision_set(SF_PREC_FP32);
        for (int i = 0; i < 3; i++) gc_leaf_free(leaves[i]);
        free(R);
    }
    printf("  convolution with x handed over: sf_conv2d's bits, x in bf16 alone on the im2col path\n");
}

/* ---- 9. products skipped ---- */

/* C (M x N) after one skipped product with this beta, from C = 1 + (i mod 7) and finite
 * random operands; 1 where C is beta times its start, element for element. */
static int skipped_product_leaves_beta_c(int M, int N, float beta) {
    const int K = 16;
    float *A = sf_malloc((size_t)M * K * sizeof *A), *B = sf_malloc((size_t)K * N * sizeof *B);
    float *C = sf_malloc((size_t)M * N * sizeof *C);
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = 0.25f;
    for (size_t i = 0; i < (size_t)K * N; i++) B[i] = 0.5f;
    for (size_t i = 0; i < (size_t)M * N; i++) C[i] = 1.0f + (float)(i % 7);
    sf_gemm_prec(0, 0, M, N, K, 1.0f, A, B, beta, C);
    int ok = 1;
    for (size_t i = 0; i < (size_t)M * N && ok; i++) ok = C[i] == beta * (1.0f + (float)(i % 7));
    free(A);
    free(B);
    free(C);
    return ok;
}

static void test_products_skipped(void) {
    const float betas[] = {0.0f, 0.5f, 1.0f};
    const struct {
        sf_precision prec;
        const char *name;
    } precs[] = {{SF_PREC_FP32, "fp32"}, {SF_PREC_BF16_EMULATED, "bf16_emulated"}};
    sf_products_skip(1);
    for (size_t p = 0; p < sizeof precs / sizeof *precs; p++) {
        sf_precision_set(precs[p].prec);
        for (size_t b = 0; b < sizeof betas / sizeof *betas; b++) {
            /* 40 x 30: one thread's fill; 600 x 500: shared out over the team */
            CHECK(skipped_product_leaves_beta_c(40, 30, betas[b]), "%s: skipped 40x30 product, beta %g: C != beta C",
                  precs[p].name, (double)betas[b]);
            CHECK(skipped_product_leaves_beta_c(600, 500, betas[b]), "%s: skipped 600x500 product, beta %g: C != beta C",
                  precs[p].name, (double)betas[b]);
            int bad = 0;
#pragma omp parallel reduction(+ : bad)
            bad += !skipped_product_leaves_beta_c(600, 500, betas[b]); /* each thread its own C */
            CHECK(bad == 0, "%s: skipped products inside a parallel region, beta %g: %d threads' C != beta C",
                  precs[p].name, (double)betas[b], bad);
        }
    }
    sf_products_skip(0);
    sf_precision_set(SF_PREC_FP32);
}

int main(void) {
    sf_threads_init(0);
    test_conversion();
    const op_case cases[] = {
        {"linear (64x96 . 80x96^T + b)", build_linear, 3, {{2, 32, 96}, {80, 96}, {80}}, {3, 2, 1}, {0}, 96},
        {"linear without bias", build_linear, 2, {{64, 96}, {80, 96}}, {2, 2}, {0}, 96},
        {"linear, x handed over (+b)", build_linear_last_use, 3, {{2, 32, 96}, {80, 96}, {80}}, {3, 2, 1}, {0}, 96},
        {"matmul A B", build_matmul, 2, {{3, 40, 24}, {3, 24, 56}}, {3, 3}, {0, 0}, 56},
        {"matmul A^T B", build_matmul, 2, {{3, 24, 40}, {3, 24, 56}}, {3, 3}, {1, 0}, 56},
        {"matmul A B^T", build_matmul, 2, {{3, 40, 24}, {3, 56, 24}}, {3, 3}, {0, 1}, 56},
        {"matmul A^T B^T", build_matmul, 2, {{3, 24, 40}, {3, 56, 24}}, {3, 3}, {1, 1}, 56},
        {"conv 3x3 im2col (+b)", build_conv, 3, {{2, 6, 12, 12}, {10, 6, 3, 3}, {10}}, {4, 4, 1}, {1, 1, 1}, 144},
        {"conv 3x3 stride 2 groups 2", build_conv, 2, {{2, 8, 11, 11}, {6, 4, 3, 3}}, {4, 4}, {2, 1, 2}, 36},
        {"conv 1x1 pointwise", build_conv, 2, {{2, 16, 7, 7}, {12, 16, 1, 1}}, {4, 4}, {1, 0, 1}, 49},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_op(&cases[i]);
    test_blocked_products();
    test_weight_refresh();
    test_linear_last_use();
    test_to_linear();
    test_products_choice();
    test_sima_copies();
    test_norm_reads_copy();
    test_linear_act(0);
    test_linear_act(1);
    test_products_skipped();
    test_layer_scale();
    test_conv_last_use();
    return test_summary("bf16");
}
