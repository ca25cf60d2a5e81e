/* test_ops_basic.c — the basic op families: matmul.c, elementwise.c, shape.c, softmax.c,
 * loss.c.
 *
 * For every op: a gradient check (gradcheck.h) on odd shapes, including 1-sized dims, and a
 * forward check against a plain loop written here (in double where it matters). Also: the
 * backward accumulates (+=) into gradients that already hold values, dropout / drop path
 * masks and scaling, identity in eval mode, label smoothing == its soft-target form, and an
 * out-of-range label stops with its value.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, K classes.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradcheck.h"

static sf_rng data_rng;

static sf_tensor *leaf(int ndim, const int *shape, int requires_grad) {
    sf_tensor *t = gc_leaf(ndim, shape, requires_grad);
    gc_fill_uniform(t, &data_rng, -1.0f, 1.0f);
    return t;
}
#define LEAF(rg, ...) leaf((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}, rg)

/* Zeroed gradient buffer owned by the leaf (freed by gc_leaf_free). */
static void leaf_grad(sf_tensor *t, float fill) {
    free(t->grad);
    t->grad = malloc(t->numel * sizeof(float));
    for (size_t i = 0; i < t->numel; i++) t->grad[i] = fill;
}

static void free_all(sf_tensor **t, int n) {
    for (int i = 0; i < n; i++) gc_leaf_free(t[i]);
}

/* ------------------------------------------------------------------ linear, matmul */

static sf_tensor *build_linear(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_linear(g, in[0], in[1], in[2]);
}

static sf_tensor *build_linear_nobias(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_linear(g, in[0], in[1], NULL);
}

/* y (R, O) = x (R, I) W^T + b by the triple loop, in double. */
static void naive_linear(float *y, const float *x, const float *w, const float *b, int R, int I, int O) {
    for (int r = 0; r < R; r++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < I; i++) s += (double)x[r * I + i] * w[o * I + i];
            y[r * O + o] = (float)s;
        }
}

static void test_linear(void) {
    /* x (B, N, C) = (3, 7, 5) -> out 4 */
    sf_tensor *in[3] = {LEAF(1, 3, 7, 5), LEAF(1, 4, 5), LEAF(1, 4)};
    gradcheck("linear (3,7,5) x (4,5) + b", build_linear, NULL, in, 3, (gc_opts){0});

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_linear(&g, in[0], in[1], in[2]);
    CHECK(y->ndim == 3 && y->shape[0] == 3 && y->shape[1] == 7 && y->shape[2] == 4, "linear shape");
    float ref[3 * 7 * 4];
    naive_linear(ref, in[0]->data, in[1]->data, in[2]->data, 21, 5, 4);
    allclose("linear vs triple loop", y->data, ref, 21 * 4, 1e-5f, 1e-6f);
    sf_ctx_free(&g);
    free_all(in, 3);

    /* 1-sized dims, no bias: x (1, 1, 3) -> out 1 */
    sf_tensor *in2[2] = {LEAF(1, 1, 1, 3), LEAF(1, 1, 3)};
    gradcheck("linear (1,1,3) x (1,3), no bias", build_linear_nobias, NULL, in2, 2, (gc_opts){0});
    sf_ctx_init(&g, 1 << 20);
    y = sf_linear(&g, in2[0], in2[1], NULL);
    naive_linear(ref, in2[0]->data, in2[1]->data, NULL, 1, 3, 1);
    allclose("linear no bias vs loop", y->data, ref, 1, 1e-5f, 1e-6f);
    sf_ctx_free(&g);
    free_all(in2, 2);

    /* Bigger: crosses the OpenMP threshold of the bias copy and db. */
    sf_tensor *in3[3] = {LEAF(1, 2, 300, 33), LEAF(1, 129, 33), LEAF(1, 129)};
    gradcheck("linear (2,300,33) x (129,33) + b", build_linear, NULL, in3, 3, (gc_opts){0});
    sf_ctx_init(&g, 1 << 20);
    y = sf_linear(&g, in3[0], in3[1], in3[2]);
    float *ref3 = malloc(600 * 129 * sizeof(float));
    naive_linear(ref3, in3[0]->data, in3[1]->data, in3[2]->data, 600, 33, 129);
    allclose("linear large vs triple loop", y->data, ref3, 600 * 129, 1e-4f, 1e-5f);
    free(ref3);
    sf_ctx_free(&g);
    free_all(in3, 3);
}

/* A linear layer into its activation as one op (sf_linear_act_to_linear): its gradient (the
 * activation's backward running the layer's), and the values of the two ops apart, bit for
 * bit. x goes through a copy so that the op's handed-over input is an activation, as in a
 * model. user: the activation's op. */
static sf_tensor *build_linear_act(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_linear_act_to_linear(g, sf_scale(g, in[0], 1.0f), in[1], in[2], *(const sf_op *)u);
}
static sf_tensor *build_linear_act_nobias(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_linear_act_to_linear(g, sf_scale(g, in[0], 1.0f), in[1], NULL, *(const sf_op *)u);
}

static void test_linear_act(void) {
    const sf_op acts[] = {SF_OP_GELU, SF_OP_QUICK_GELU, SF_OP_RELU};
    for (int a = 0; a < 3; a++) {
        sf_op act = acts[a];
        const char *an = sf_op_name(act);
        char name[96];
        sf_tensor *in[3] = {LEAF(1, 3, 7, 5), LEAF(1, 4, 5), LEAF(1, 4)};
        snprintf(name, sizeof name, "linear + %s (3,7,5) x (4,5) + b", an);
        gradcheck(name, build_linear_act, &act, in, 3, (gc_opts){0});
        snprintf(name, sizeof name, "linear + %s (3,7,5) x (4,5), no bias", an);
        gradcheck(name, build_linear_act_nobias, &act, in, 2, (gc_opts){0});
        free_all(in, 3);
        /* more rows than one block of the bias sum, over the OpenMP threshold; not ReLU, whose
         * 77 k outputs put some within a finite-difference step of its kink (its backward's
         * bits against sf_relu's: tests/test_bf16.c) */
        sf_tensor *big[3] = {LEAF(1, 2, 300, 33), LEAF(1, 129, 33), LEAF(1, 129)};
        snprintf(name, sizeof name, "linear + %s (2,300,33) x (129,33) + b", an);
        if (act != SF_OP_RELU) gradcheck(name, build_linear_act, &act, big, 3, (gc_opts){0});
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *fused = sf_linear_act_to_linear(&g, sf_scale(&g, big[0], 1.0f), big[1], big[2], act);
        sf_tensor *h = sf_linear(&g, big[0], big[1], big[2]);
        sf_tensor *apart = act == SF_OP_GELU ? sf_gelu(&g, h) : act == SF_OP_QUICK_GELU ? sf_quick_gelu(&g, h) : sf_relu(&g, h);
        CHECK(!memcmp(fused->data, apart->data, apart->numel * sizeof(float)), "linear + %s forward: %s(linear) bit for bit",
              an, an);
        sf_ctx_free(&g);
        free_all(big, 3);
    }
}

typedef struct {
    int ta, tb;
} mm_args;

static sf_tensor *build_matmul(sf_ctx *g, sf_tensor **in, void *u) {
    mm_args *a = u;
    return sf_matmul(g, in[0], in[1], a->ta, a->tb);
}

/* The Gram matrix x x^T uses one tensor as both operands: both gradients land in dx. */
static sf_tensor *build_gram(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_matmul(g, in[0], in[0], 0, 1);
}

static void test_matmul(void) {
    const int batch0 = 2, batch1 = 3, M = 3, K = 5, N = 4;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            sf_tensor *in[2] = {ta ? LEAF(1, batch0, batch1, K, M) : LEAF(1, batch0, batch1, M, K),
                                tb ? LEAF(1, batch0, batch1, N, K) : LEAF(1, batch0, batch1, K, N)};
            mm_args args = {ta, tb};
            char name[64];
            snprintf(name, sizeof name, "matmul (2,3,.,.) ta=%d tb=%d", ta, tb);
            gradcheck(name, build_matmul, &args, in, 2, (gc_opts){0});

            sf_ctx g;
            sf_ctx_init(&g, 1 << 20);
            sf_tensor *c = sf_matmul(&g, in[0], in[1], ta, tb);
            CHECK(c->ndim == 4 && c->shape[2] == M && c->shape[3] == N, "matmul shape");
            float ref[2 * 3 * 3 * 4];
            for (int bt = 0; bt < batch0 * batch1; bt++)
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) {
                            float av = ta ? in[0]->data[bt * K * M + k * M + i] : in[0]->data[bt * M * K + i * K + k];
                            float bv = tb ? in[1]->data[bt * N * K + j * K + k] : in[1]->data[bt * K * N + k * N + j];
                            s += (double)av * bv;
                        }
                        ref[bt * M * N + i * N + j] = (float)s;
                    }
            snprintf(name, sizeof name, "matmul ta=%d tb=%d vs loops", ta, tb);
            allclose(name, c->data, ref, (size_t)batch0 * batch1 * M * N, 1e-5f, 1e-6f);
            sf_ctx_free(&g);
            free_all(in, 2);
        }
    /* plain 2-D, 1-sized dims */
    sf_tensor *in[2] = {LEAF(1, 1, 7), LEAF(1, 7, 1)};
    gradcheck("matmul (1,7)(7,1)", build_matmul, &(mm_args){0, 0}, in, 2, (gc_opts){0});
    free_all(in, 2);
    /* only one side requires grad */
    sf_tensor *in2[2] = {LEAF(0, 3, 4, 5), LEAF(1, 3, 5, 2)};
    gradcheck("matmul b only requires grad", build_matmul, &(mm_args){0, 0}, in2, 2, (gc_opts){0});
    free_all(in2, 2);
    sf_tensor *x = LEAF(1, 2, 5, 3);
    gradcheck("matmul x x^T (same tensor)", build_gram, NULL, &x, 1, (gc_opts){0});
    gc_leaf_free(x);
}

/* ------------------------------------------------------------------ elementwise */

static sf_tensor *build_add(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_add(g, in[0], in[1]);
}
static sf_tensor *build_add_self(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_add(g, in[0], in[0]);
}
static sf_tensor *build_add_bc(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_add_broadcast(g, in[0], in[1]);
}
static sf_tensor *build_mul_bc(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_mul_broadcast(g, in[0], in[1]);
}
static sf_tensor *build_scale(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_scale(g, in[0], *(float *)u);
}

typedef sf_tensor *(*unary_fn)(sf_ctx *, sf_tensor *);
static sf_tensor *build_unary(sf_ctx *g, sf_tensor **in, void *u) {
    return (*(unary_fn *)u)(g, in[0]);
}

static void test_add(void) {
    sf_tensor *in[2] = {LEAF(1, 3, 7, 5), LEAF(1, 3, 7, 5)};
    gradcheck("add (3,7,5)", build_add, NULL, in, 2, (gc_opts){0});
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_add(&g, in[0], in[1]);
    float ref[105];
    for (int i = 0; i < 105; i++) ref[i] = in[0]->data[i] + in[1]->data[i];
    allclose("add forward", y->data, ref, 105, 0, 0);
    sf_ctx_free(&g);
    gradcheck("add x + x", build_add_self, NULL, in, 1, (gc_opts){0});
    free_all(in, 2);
}

static void test_broadcast(void) {
    /* y shapes: bias (C), pos_embed (1, N, C), (N, C), and y the same shape as x. */
    const int ys[4][3] = {{5, 0, 0}, {1, 7, 5}, {7, 5, 0}, {3, 7, 5}};
    const int ynd[4] = {1, 3, 2, 3};
    for (int k = 0; k < 4; k++) {
        sf_tensor *in[2] = {LEAF(1, 3, 7, 5), leaf(ynd[k], ys[k], 1)};
        char name[64], ysh[32];
        sf_shape_str(in[1], ysh, sizeof ysh);
        snprintf(name, sizeof name, "add_broadcast (3,7,5) + %s", ysh);
        gradcheck(name, build_add_bc, NULL, in, 2, (gc_opts){0});
        snprintf(name, sizeof name, "mul_broadcast (3,7,5) * %s", ysh);
        gradcheck(name, build_mul_bc, NULL, in, 2, (gc_opts){0});

        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *a = sf_add_broadcast(&g, in[0], in[1]);
        sf_tensor *m = sf_mul_broadcast(&g, in[0], in[1]);
        float ra[105], rm[105];
        size_t Y = in[1]->numel;
        for (size_t i = 0; i < 105; i++) {
            ra[i] = in[0]->data[i] + in[1]->data[i % Y];
            rm[i] = in[0]->data[i] * in[1]->data[i % Y];
        }
        allclose("add_broadcast forward", a->data, ra, 105, 0, 0);
        allclose("mul_broadcast forward", m->data, rm, 105, 0, 0);
        sf_ctx_free(&g);
        free_all(in, 2);
    }
    /* 1-sized dims: x (1, 1, 3) with y (3) */
    sf_tensor *in[2] = {LEAF(1, 1, 1, 3), LEAF(1, 3)};
    gradcheck("add_broadcast (1,1,3) + (3)", build_add_bc, NULL, in, 2, (gc_opts){0});
    gradcheck("mul_broadcast (1,1,3) * (3)", build_mul_bc, NULL, in, 2, (gc_opts){0});
    free_all(in, 2);
    /* large enough for the parallel column sums */
    sf_tensor *in2[2] = {LEAF(1, 4, 197, 96), LEAF(1, 96)};
    gradcheck("add_broadcast (4,197,96) + (96)", build_add_bc, NULL, in2, 2, (gc_opts){0});
    gradcheck("mul_broadcast (4,197,96) * (96)", build_mul_bc, NULL, in2, 2, (gc_opts){0});
    free_all(in2, 2);
}

static void test_scale_and_activations(void) {
    sf_tensor *x = LEAF(1, 3, 7, 5);
    float s = -1.7f;
    gradcheck("scale -1.7", build_scale, &s, &x, 1, (gc_opts){0});
    gc_fill_uniform(x, &data_rng, -3.0f, 3.0f);

    struct {
        const char *name;
        unary_fn fn;
        int kink; /* non-differentiable at 0: keep samples away from it */
    } acts[] = {{"gelu", sf_gelu, 0},
                {"gelu_tanh", sf_gelu_tanh, 0},
                {"relu", sf_relu, 1},
                {"elu1", sf_elu1, 0},
                {"quick_gelu", sf_quick_gelu, 0}};
    for (int k = 0; k < 5; k++) {
        if (acts[k].kink)
            for (size_t i = 0; i < x->numel; i++)
                if (fabsf(x->data[i]) < 0.05f) x->data[i] = x->data[i] < 0 ? x->data[i] - 0.05f : x->data[i] + 0.05f;
        char name[64];
        snprintf(name, sizeof name, "%s (3,7,5) in [-3,3]", acts[k].name);
        gradcheck(name, build_unary, &acts[k].fn, &x, 1, (gc_opts){0});
    }

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y[5];
    for (int k = 0; k < 5; k++) y[k] = acts[k].fn(&g, x);
    float rg[105], rt[105], rr[105], re[105], rq[105];
    for (int i = 0; i < 105; i++) {
        double v = x->data[i];
        rg[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
        rt[i] = (float)(0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
        rr[i] = (float)(v > 0 ? v : 0.0);
        re[i] = (float)(v > 0 ? v + 1.0 : exp(v)); /* elu(v) + 1 with elu(v) = exp(v) - 1 */
        rq[i] = (float)(v / (1.0 + exp(-1.702 * v)));   /* x sigmoid(1.702 x) */
    }
    allclose("gelu forward", y[0]->data, rg, 105, 1e-5f, 1e-6f);
    allclose("gelu_tanh forward", y[1]->data, rt, 105, 1e-5f, 1e-6f);
    allclose("relu forward", y[2]->data, rr, 105, 0, 0);
    allclose("elu1 forward", y[3]->data, re, 105, 1e-5f, 1e-6f);
    allclose("quick_gelu forward", y[4]->data, rq, 105, 1e-5f, 1e-6f);
    /* QuickGELU is GELU's sigmoid approximation: within 0.021 of it on [-3, 3] (max at |x| ≈ 2.4) */
    allclose("quick_gelu ~ gelu", y[4]->data, rg, 105, 0, 2.1e-2f);
    /* gelu and its tanh approximation agree to ~1e-3 (a sanity check of the constants). */
    allclose("gelu ~ gelu_tanh", y[1]->data, rg, 105, 0, 2e-3f);
    sf_ctx_free(&g);
    gc_leaf_free(x);
}

typedef struct {
    float p;
} drop_args;
static sf_tensor *build_dropout(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_dropout(g, in[0], ((drop_args *)u)->p);
}
static sf_tensor *build_drop_path(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_drop_path(g, in[0], ((drop_args *)u)->p);
}

static void test_dropout(void) {
    sf_tensor *x = LEAF(1, 3, 7, 5);
    gradcheck("dropout p=0.3 (training)", build_dropout, &(drop_args){0.3f}, &x, 1, (gc_opts){.training = 1});
    sf_tensor *xp = LEAF(1, 6, 7, 5);
    gradcheck("drop_path p=0.5 (training)", build_drop_path, &(drop_args){0.5f}, &xp, 1, (gc_opts){.training = 1});
    gc_leaf_free(xp);
    gc_leaf_free(x);

    /* Dropout statistics and scaling on 200000 elements (none of them 0). */
    const int n = 200000;
    sf_tensor *big = gc_leaf(1, (int[]){n}, 0);
    gc_fill_uniform(big, &data_rng, 0.5f, 1.5f);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    float p = 0.3f;
    sf_tensor *y = sf_dropout(&g, big, p);
    int zeros = 0, bad_scale = 0;
    for (int i = 0; i < n; i++) {
        if (y->data[i] == 0.0f)
            zeros++;
        else if (fabsf(y->data[i] - big->data[i] / (1.0f - p)) > 1e-6f)
            bad_scale++;
    }
    double frac = (double)zeros / n; /* std of the fraction ~ 0.001 */
    CHECK(fabs(frac - p) < 0.006, "dropout dropped fraction %.4f, expected %.2f", frac, p);
    CHECK(bad_scale == 0, "dropout: %d kept elements not scaled by 1/(1-p)", bad_scale);
    /* Two calls draw different masks (the RNG advances). */
    sf_tensor *y2 = sf_dropout(&g, big, p);
    int differ = 0;
    for (int i = 0; i < n; i++) differ += (y->data[i] == 0.0f) != (y2->data[i] == 0.0f);
    CHECK(differ > n / 10, "dropout: two calls drew nearly the same mask (%d differences)", differ);
    /* Identity in eval mode, and for p = 0 in training. */
    g.training = 0;
    y = sf_dropout(&g, big, p);
    allclose("dropout eval identity", y->data, big->data, n, 0, 0);
    g.training = 1;
    y = sf_dropout(&g, big, 0.0f);
    allclose("dropout p=0 identity", y->data, big->data, n, 0, 0);
    sf_ctx_free(&g);
    gc_leaf_free(big);

    /* Drop path: whole samples are zeroed or scaled by 1/(1-p). */
    const int B = 2000, S = 35;
    sf_tensor *xs = gc_leaf(3, (int[]){B, 7, 5}, 0);
    gc_fill_uniform(xs, &data_rng, 0.5f, 1.5f);
    sf_ctx_init(&g, 1 << 20);
    p = 0.25f;
    y = sf_drop_path(&g, xs, p);
    int dropped = 0, mixed = 0, bad = 0;
    for (int b = 0; b < B; b++) {
        int z = 0;
        for (int i = 0; i < S; i++) {
            float v = y->data[b * S + i];
            if (v == 0.0f)
                z++;
            else if (fabsf(v - xs->data[b * S + i] / (1.0f - p)) > 1e-6f)
                bad++;
        }
        if (z == S) dropped++;
        else if (z != 0) mixed++;
    }
    frac = (double)dropped / B; /* std ~ 0.01 */
    CHECK(mixed == 0, "drop_path: %d samples partly zeroed", mixed);
    CHECK(bad == 0, "drop_path: %d kept elements not scaled by 1/(1-p)", bad);
    CHECK(fabs(frac - p) < 0.05, "drop_path dropped fraction %.3f, expected %.2f", frac, p);
    g.training = 0;
    y = sf_drop_path(&g, xs, p);
    allclose("drop_path eval identity", y->data, xs->data, xs->numel, 0, 0);
    g.training = 1;
    y = sf_drop_path(&g, xs, 0.0f);
    allclose("drop_path p=0 identity", y->data, xs->data, xs->numel, 0, 0);
    sf_ctx_free(&g);
    gc_leaf_free(xs);
}

/* ------------------------------------------------------------------ shape ops */

typedef struct {
    int ndim, shape[4];
} reshape_args;
static sf_tensor *build_reshape(sf_ctx *g, sf_tensor **in, void *u) {
    reshape_args *a = u;
    return sf_reshape(g, in[0], a->ndim, a->shape);
}
/* x used twice through two reshapes, then added: dx must collect both (= 2 G). */
static sf_tensor *build_reshape_twice(sf_ctx *g, sf_tensor **in, void *u) {
    reshape_args *a = u;
    sf_tensor *r1 = sf_reshape(g, in[0], a->ndim, a->shape);
    sf_tensor *r2 = sf_reshape(g, in[0], a->ndim, a->shape);
    return sf_add(g, r1, sf_scale(g, r2, 3.0f));
}

/* ---- residual: x + drop_path(y) in one op ---- */

static sf_tensor *build_residual(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_residual(g, in[0], in[1], ((drop_args *)u)->p);
}
static sf_tensor *build_add_drop_path(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_add(g, in[0], sf_drop_path(g, in[1], ((drop_args *)u)->p));
}

/* The fused op against the two ops it replaces, on an intermediate branch (y = 2 y0, so y has
 * no gradient until the residual's backward) with the same random draws: the same samples
 * dropped, the output within a rounding (the fused sum may fuse its multiply-add), the same
 * gradient bits for both inputs. */
static void residual_vs_composition(float p, int training) {
    const int B = 6;
    sf_tensor *in[2] = {LEAF(1, B, 5, 7), LEAF(1, B, 5, 7)};
    float *out[2], *dx[2], *dy[2];
    const size_t n = in[0]->numel;
    float *R = malloc(n * sizeof(float)); /* the upstream gradient, the same for both */
    for (size_t i = 0; i < n; i++) R[i] = sf_rng_normal(&data_rng);
    for (int fused = 0; fused < 2; fused++) {
        sf_ctx g;
        sf_ctx_init(&g, (size_t)8 << 20);
        g.training = training;
        sf_rng_seed(&g.rng, 99);
        for (int k = 0; k < 2; k++) leaf_grad(in[k], 0.0f);
        sf_tensor *y = sf_scale(&g, in[1], 2.0f);
        sf_tensor *ins[2] = {in[0], y};
        sf_tensor *o = fused ? build_residual(&g, ins, &(drop_args){p}) : build_add_drop_path(&g, ins, &(drop_args){p});
        out[fused] = malloc(n * sizeof(float));
        memcpy(out[fused], o->data, n * sizeof(float));
        sf_backward_seeded(&g, o, R);
        dx[fused] = malloc(n * sizeof(float));
        dy[fused] = malloc(n * sizeof(float));
        memcpy(dx[fused], in[0]->grad, n * sizeof(float));
        memcpy(dy[fused], in[1]->grad, n * sizeof(float));
        sf_ctx_free(&g);
    }
    free(R);
    char what[96];
    snprintf(what, sizeof what, "residual p=%.1f %s: output as add + drop_path", (double)p, training ? "training" : "eval");
    allclose(what, out[1], out[0], n, 1e-6f, 1e-7f);
    int dropped = 0;
    for (int b = 0; b < B; b++) dropped += out[1][(size_t)b * n / B] == in[0]->data[(size_t)b * n / B];
    CHECK(!training || p == 0 || (dropped > 0 && dropped < B), "residual p=%.1f: %d of %d samples dropped", (double)p,
          dropped, B);
    CHECK(!memcmp(dx[0], dx[1], n * sizeof(float)) && !memcmp(dy[0], dy[1], n * sizeof(float)),
          "residual p=%.1f %s: gradients differ from add + drop_path", (double)p, training ? "training" : "eval");
    for (int k = 0; k < 2; k++) free(out[k]), free(dx[k]), free(dy[k]);
    gc_leaf_free(in[0]);
    gc_leaf_free(in[1]);
}

static void test_residual(void) {
    sf_tensor *in[2] = {LEAF(1, 6, 7, 5), LEAF(1, 6, 7, 5)};
    gradcheck("residual p=0.5 (training)", build_residual, &(drop_args){0.5f}, in, 2, (gc_opts){.training = 1});
    gradcheck("residual p=0 (training)", build_residual, &(drop_args){0.0f}, in, 2, (gc_opts){.training = 1});
    gc_leaf_free(in[0]);
    gc_leaf_free(in[1]);
    residual_vs_composition(0.5f, 1);
    residual_vs_composition(0.0f, 1);
    residual_vs_composition(0.5f, 0);
}

static void test_reshape(void) {
    sf_tensor *x = LEAF(1, 3, 7, 5);
    reshape_args a = {2, {21, 5}};
    gradcheck("reshape (3,7,5)->(21,5)", build_reshape, &a, &x, 1, (gc_opts){0});
    reshape_args a2 = {4, {5, 1, 7, 3}};
    gradcheck("reshape twice, added (x + 3x)", build_reshape_twice, &a2, &x, 1, (gc_opts){0});

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_reshape(&g, x, 2, (int[]){7, 15});
    CHECK(y->data == x->data, "reshape shares x's data");
    CHECK(y->ndim == 2 && y->shape[0] == 7 && y->shape[1] == 15 && y->numel == 105, "reshape shape");

    /* Accumulation: a gradient already in x is added to, not overwritten. */
    leaf_grad(x, 0.25f);
    float seed[105];
    for (int i = 0; i < 105; i++) seed[i] = (float)i * 0.01f;
    sf_backward_seeded(&g, y, seed);
    float want[105];
    for (int i = 0; i < 105; i++) want[i] = 0.25f + seed[i];
    allclose("reshape backward accumulates", x->grad, want, 105, 1e-6f, 0);
    sf_ctx_free(&g);
    gc_leaf_free(x);
}

/* Every backward that writes a new gradient (sf_grad_dst) must also add into one that exists:
 * x feeds the op twice, y = op(x) + 3 op(x), so the first backward writes dx and the second
 * adds to it; a second write instead of an add gives dx = 3 op'(x) G instead of 4. */
typedef struct {
    const char *name;
    sf_tensor *(*op)(sf_ctx *, sf_tensor *);
} unary_op;
static sf_tensor *op_scale2(sf_ctx *g, sf_tensor *x) { return sf_scale(g, x, 2.0f); }
static sf_tensor *op_permute(sf_ctx *g, sf_tensor *x) { return sf_permute(g, x, (int[]){2, 0, 1}); }
static sf_tensor *build_unary_twice(sf_ctx *g, sf_tensor **in, void *u) {
    const unary_op *o = u;
    return sf_add(g, o->op(g, in[0]), sf_scale(g, o->op(g, in[0]), 3.0f));
}

static void test_write_or_accumulate(void) {
    static const unary_op ops[] = {{"scale", op_scale2}, {"relu", sf_relu},         {"elu1", sf_elu1},
                                   {"gelu", sf_gelu},    {"gelu_tanh", sf_gelu_tanh}, {"permute", op_permute},
                                   {"quick_gelu", sf_quick_gelu}};
    sf_tensor *x = LEAF(1, 3, 5, 4);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s used twice: op(x) + 3 op(x)", ops[i].name);
        gradcheck(name, build_unary_twice, (void *)&ops[i], &x, 1, (gc_opts){0});
    }
    gc_leaf_free(x);
}

typedef struct {
    int perm[4];
} perm_args;
static sf_tensor *build_permute(sf_ctx *g, sf_tensor **in, void *u) {
    return sf_permute(g, in[0], ((perm_args *)u)->perm);
}

static void test_permute(void) {
    struct {
        int ndim, shape[4], perm[4];
    } cases[] = {
        {4, {2, 3, 4, 5}, {0, 2, 1, 3}}, {4, {2, 3, 4, 5}, {3, 1, 0, 2}}, {4, {3, 1, 7, 2}, {2, 3, 1, 0}},
        {3, {3, 7, 5}, {2, 0, 1}},       {3, {3, 7, 5}, {0, 2, 1}},       {2, {7, 5}, {1, 0}},
        {1, {6}, {0}},                   {4, {2, 70, 3, 40}, {0, 2, 1, 3}}, /* large: parallel path */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sf_tensor *x = leaf(cases[c].ndim, cases[c].shape, 1);
        perm_args pa;
        memcpy(pa.perm, cases[c].perm, sizeof pa.perm);
        char name[80], sx[32];
        snprintf(name, sizeof name, "permute %s by (%d,%d,%d,%d)[:%d]", sf_shape_str(x, sx, sizeof sx),
                 pa.perm[0], pa.perm[1], pa.perm[2], pa.perm[3], cases[c].ndim);
        gradcheck(name, build_permute, &pa, &x, 1, (gc_opts){0});

        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *y = sf_permute(&g, x, pa.perm);
        int shape_ok = y->ndim == cases[c].ndim;
        for (int k = 0; k < cases[c].ndim; k++) shape_ok &= y->shape[k] == x->shape[pa.perm[k]];
        CHECK(shape_ok, "permute case %zu: output shape", c);
        /* Index math: out[i] with multi-index (i_0..i_{d-1}) is x at index j with
         * j[perm[k]] = i_k. */
        int nd = cases[c].ndim, bad = 0;
        for (size_t o = 0; o < y->numel; o++) {
            int idx[4];
            size_t rest = o;
            for (int k = nd - 1; k >= 0; k--) {
                idx[k] = (int)(rest % (size_t)y->shape[k]);
                rest /= (size_t)y->shape[k];
            }
            int j[4];
            for (int k = 0; k < nd; k++) j[pa.perm[k]] = idx[k];
            size_t off = 0;
            for (int k = 0; k < nd; k++) off = off * (size_t)x->shape[k] + (size_t)j[k];
            bad += y->data[o] != x->data[off];
        }
        CHECK(bad == 0, "permute case %zu: %d elements misplaced", c, bad);
        sf_ctx_free(&g);
        gc_leaf_free(x);
    }
}

typedef struct {
    int parts, part, H;
} split_args;
static sf_tensor *build_split(sf_ctx *g, sf_tensor **in, void *u) {
    split_args *a = u;
    return sf_heads_split(g, in[0], a->parts, a->part, a->H);
}
/* All three parts of a qkv tensor, weighted differently, so every element of dx is hit. */
static sf_tensor *build_split_all(sf_ctx *g, sf_tensor **in, void *u) {
    int H = *(int *)u;
    sf_tensor *q = sf_heads_split(g, in[0], 3, 0, H), *k = sf_heads_split(g, in[0], 3, 1, H),
              *v = sf_heads_split(g, in[0], 3, 2, H);
    return sf_add(g, q, sf_add(g, sf_scale(g, k, 2.0f), sf_scale(g, v, -0.5f)));
}
static sf_tensor *build_merge(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_heads_merge(g, in[0]);
}

static void test_heads(void) {
    const int B = 3, N = 7, H = 2, D = 3;
    sf_tensor *x = LEAF(1, B, N, 3 * H * D);
    split_args sa = {3, 1, H};
    gradcheck("heads_split (3,7,18) part 1 of 3, H=2", build_split, &sa, &x, 1, (gc_opts){0});
    int Hh = H;
    gradcheck("heads_split q,k,v together", build_split_all, &Hh, &x, 1, (gc_opts){0});

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    for (int part = 0; part < 3; part++) {
        sf_tensor *y = sf_heads_split(&g, x, 3, part, H);
        CHECK(y->ndim == 4 && y->shape[0] == B && y->shape[1] == H && y->shape[2] == N && y->shape[3] == D,
              "heads_split shape");
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int n = 0; n < N; n++)
                    for (int d = 0; d < D; d++)
                        bad += y->data[((b * H + h) * N + n) * D + d] !=
                               x->data[(b * N + n) * (3 * H * D) + part * H * D + h * D + d];
        CHECK(bad == 0, "heads_split part %d: %d elements misplaced", part, bad);
    }
    sf_ctx_free(&g);
    gc_leaf_free(x);

    sf_tensor *hx = LEAF(1, B, H, N, D);
    gradcheck("heads_merge (3,2,7,3)", build_merge, NULL, &hx, 1, (gc_opts){0});
    sf_tensor *h1 = LEAF(1, 1, 1, 1, 4);
    gradcheck("heads_merge (1,1,1,4)", build_merge, NULL, &h1, 1, (gc_opts){0});
    gc_leaf_free(h1);
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_heads_merge(&g, hx);
    CHECK(y->ndim == 3 && y->shape[0] == B && y->shape[1] == N && y->shape[2] == H * D, "heads_merge shape");
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++)
                for (int d = 0; d < D; d++)
                    bad += y->data[(b * N + n) * H * D + h * D + d] != hx->data[((b * H + h) * N + n) * D + d];
    CHECK(bad == 0, "heads_merge: %d elements misplaced", bad);
    /* merge(split(x, parts=1)) is x. */
    sf_tensor *back = sf_heads_split(&g, y, 1, 0, H);
    allclose("heads_split(heads_merge(x)) == x", back->data, hx->data, hx->numel, 0, 0);
    sf_ctx_free(&g);
    gc_leaf_free(hx);
}

typedef struct {
    int start, len;
} slice_args;
static sf_tensor *build_slice(sf_ctx *g, sf_tensor **in, void *u) {
    slice_args *a = u;
    return sf_slice_tokens(g, in[0], a->start, a->len);
}
static sf_tensor *build_concat(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_concat_tokens(g, in[0], in[1]);
}
/* CvT's cls handling: the cls token split off, the grid tokens transformed, the cls token
 * concatenated back in front (the two slices overlap nothing and cover every token). */
static sf_tensor *build_cls_split_concat(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    const int N = in[0]->shape[1];
    sf_tensor *cls = sf_slice_tokens(g, in[0], 0, 1), *grid = sf_slice_tokens(g, in[0], 1, N - 1);
    return sf_concat_tokens(g, sf_scale(g, cls, -0.5f), sf_gelu(g, grid));
}
static sf_tensor *build_mean_tokens(sf_ctx *g, sf_tensor **in, void *u) {
    (void)u;
    return sf_mean_tokens(g, in[0]);
}

static void test_tokens(void) {
    sf_tensor *x = LEAF(1, 3, 7, 5);
    slice_args cases[] = {{2, 4}, {0, 1}, {6, 1}, {0, 7}};
    for (int c = 0; c < 4; c++) {
        char name[64];
        snprintf(name, sizeof name, "slice_tokens [%d,%d) of (3,7,5)", cases[c].start, cases[c].start + cases[c].len);
        gradcheck(name, build_slice, &cases[c], &x, 1, (gc_opts){0});
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *y = sf_slice_tokens(&g, x, cases[c].start, cases[c].len);
        int bad = 0;
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < cases[c].len; t++)
                for (int k = 0; k < 5; k++)
                    bad += y->data[(b * cases[c].len + t) * 5 + k] != x->data[(b * 7 + cases[c].start + t) * 5 + k];
        CHECK(bad == 0 && y->shape[1] == cases[c].len, "slice_tokens case %d: %d misplaced", c, bad);
        sf_ctx_free(&g);
    }

    gradcheck("slice_tokens + concat_tokens: cls split off and put back (3,7,5)", build_cls_split_concat, NULL,
              &x, 1, (gc_opts){0});
    gradcheck("mean_tokens (3,7,5)", build_mean_tokens, NULL, &x, 1, (gc_opts){0});
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *m = sf_mean_tokens(&g, x);
    float ref[15];
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 5; k++) {
            double s = 0;
            for (int n = 0; n < 7; n++) s += x->data[(b * 7 + n) * 5 + k];
            ref[b * 5 + k] = (float)(s / 7);
        }
    CHECK(m->ndim == 2 && m->shape[0] == 3 && m->shape[1] == 5, "mean_tokens shape");
    allclose("mean_tokens forward", m->data, ref, 15, 1e-6f, 1e-7f);
    sf_ctx_free(&g);
    gc_leaf_free(x);

    /* concat: cls (1,1,C) with (B,N,C); both batched; broadcast on the second side. */
    struct {
        int a[3], b[3];
    } cc[] = {{{1, 1, 5}, {3, 7, 5}}, {{3, 2, 5}, {3, 7, 5}}, {{3, 7, 5}, {1, 2, 5}}, {{1, 1, 4}, {1, 3, 4}}};
    for (int c = 0; c < 4; c++) {
        sf_tensor *in[2] = {leaf(3, cc[c].a, 1), leaf(3, cc[c].b, 1)};
        char name[80], s1[32], s2[32];
        snprintf(name, sizeof name, "concat_tokens %s ++ %s", sf_shape_str(in[0], s1, sizeof s1),
                 sf_shape_str(in[1], s2, sizeof s2));
        gradcheck(name, build_concat, NULL, in, 2, (gc_opts){0});

        sf_ctx_init(&g, 1 << 20);
        sf_tensor *y = sf_concat_tokens(&g, in[0], in[1]);
        int B = cc[c].a[0] > cc[c].b[0] ? cc[c].a[0] : cc[c].b[0];
        int Na = cc[c].a[1], Nb = cc[c].b[1], C = cc[c].a[2], bad = 0;
        CHECK(y->shape[0] == B && y->shape[1] == Na + Nb && y->shape[2] == C, "concat shape");
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Na + Nb; t++)
                for (int k = 0; k < C; k++) {
                    float want = t < Na ? in[0]->data[((cc[c].a[0] == 1 ? 0 : b) * Na + t) * C + k]
                                        : in[1]->data[((cc[c].b[0] == 1 ? 0 : b) * Nb + t - Na) * C + k];
                    bad += y->data[(b * (Na + Nb) + t) * C + k] != want;
                }
        CHECK(bad == 0, "concat_tokens case %d: %d misplaced", c, bad);

        /* The broadcast side's gradient is the batch sum, added to what was there. */
        if (c == 0) {
            leaf_grad(in[0], 1.0f);
            leaf_grad(in[1], 0.0f);
            float *seed = malloc(y->numel * sizeof(float));
            for (size_t i = 0; i < y->numel; i++) seed[i] = sf_rng_uniform(&data_rng);
            sf_backward_seeded(&g, y, seed);
            float want[5];
            for (int k = 0; k < 5; k++) {
                double s = 1.0;
                for (int b = 0; b < 3; b++) s += seed[(b * 8 + 0) * 5 + k];
                want[k] = (float)s;
            }
            allclose("concat cls grad = 1 + batch sum", in[0]->grad, want, 5, 1e-6f, 1e-6f);
            free(seed);
        }
        sf_ctx_free(&g);
        free_all(in, 2);
    }
}

/* ------------------------------------------------------------------ softmax */

static void test_softmax(void) {
    unary_fn fn = sf_softmax;
    sf_tensor *x = LEAF(1, 3, 7, 5);
    for (size_t i = 0; i < x->numel; i++) x->data[i] *= 3.0f;
    gradcheck("softmax (3,7,5)", build_unary, &fn, &x, 1, (gc_opts){0});
    sf_tensor *x1 = LEAF(1, 4, 1);
    gradcheck("softmax (4,1)", build_unary, &fn, &x1, 1, (gc_opts){0});
    gc_leaf_free(x1);
    sf_tensor *xl = LEAF(1, 2, 60, 197);
    gradcheck("softmax (2,60,197)", build_unary, &fn, &xl, 1, (gc_opts){0});

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *y = sf_softmax(&g, x);
    float ref[105];
    double worst_sum = 0;
    for (int r = 0; r < 21; r++) {
        double m = -1e30, s = 0, ys = 0;
        for (int j = 0; j < 5; j++) m = fmax(m, x->data[r * 5 + j]);
        for (int j = 0; j < 5; j++) s += exp(x->data[r * 5 + j] - m);
        for (int j = 0; j < 5; j++) {
            ref[r * 5 + j] = (float)(exp(x->data[r * 5 + j] - m) / s);
            ys += y->data[r * 5 + j];
        }
        worst_sum = fmax(worst_sum, fabs(ys - 1.0));
    }
    CHECK(worst_sum < 1e-6, "softmax rows sum to 1 (worst |sum - 1| = %.3g)", worst_sum);
    allclose("softmax vs double", y->data, ref, 105, 1e-5f, 1e-7f);
    /* Large logits: the max subtraction keeps exp finite. */
    for (size_t i = 0; i < x->numel; i++) x->data[i] = 1000.0f + (float)(i % 5);
    y = sf_softmax(&g, x);
    int finite = 1;
    for (size_t i = 0; i < y->numel; i++) finite &= isfinite(y->data[i]);
    double want0 = 1.0 / (1 + exp(1) + exp(2) + exp(3) + exp(4));
    CHECK(finite && fabs(y->data[0] - want0) < 1e-6, "softmax of logits near 1000: %g, want %g", y->data[0], want0);
    sf_ctx_free(&g);
    gc_leaf_free(xl);
    gc_leaf_free(x);
}

/* ------------------------------------------------------------------ cross-entropy */

typedef struct {
    const int *labels;
    const float *soft;
    float eps;
} ce_args;
static sf_tensor *build_ce(sf_ctx *g, sf_tensor **in, void *u) {
    ce_args *a = u;
    return sf_cross_entropy(g, in[0], a->labels, a->soft, a->eps);
}

/* -(1/B) sum_b sum_k t_bk log softmax(z_b)_k, in double, t from labels + eps or soft. */
static double hand_ce(const float *z, int B, int K, const int *labels, const float *soft, double eps) {
    double total = 0;
    for (int b = 0; b < B; b++) {
        double m = -1e300, s = 0;
        for (int k = 0; k < K; k++) m = fmax(m, z[b * K + k]);
        for (int k = 0; k < K; k++) s += exp(z[b * K + k] - m);
        for (int k = 0; k < K; k++) {
            double t = soft ? soft[b * K + k] : (k == labels[b] ? 1 - eps : 0) + eps / K;
            total -= t * (z[b * K + k] - m - log(s));
        }
    }
    return total / B;
}

static void test_cross_entropy(void) {
    enum { B = 3, K = 5 };
    const int labels[B] = {4, 0, 2};
    float soft[B * K];
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += soft[b * K + k] = 0.1f + sf_rng_uniform(&data_rng);
        for (int k = 0; k < K; k++) soft[b * K + k] = (float)(soft[b * K + k] / s);
    }
    sf_tensor *z = LEAF(1, B, K);
    gc_fill_normal(z, &data_rng, 2.0f);
    ce_args hard = {labels, NULL, 0.0f}, smooth = {labels, NULL, 0.1f}, st = {NULL, soft, 0.0f};
    gradcheck("cross_entropy hard labels", build_ce, &hard, &z, 1, (gc_opts){0});
    gradcheck("cross_entropy smoothing 0.1", build_ce, &smooth, &z, 1, (gc_opts){0});
    gradcheck("cross_entropy soft targets", build_ce, &st, &z, 1, (gc_opts){0});
    sf_tensor *z1 = LEAF(1, 1, 1);
    gradcheck("cross_entropy (1,1)", build_ce, &(ce_args){(int[]){0}, NULL, 0.1f}, &z1, 1, (gc_opts){0});
    gc_leaf_free(z1);

    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    struct {
        const char *name;
        ce_args a;
    } fw[] = {{"hard", hard}, {"smoothing 0.1", smooth}, {"soft targets", st}};
    for (int c = 0; c < 3; c++) {
        sf_tensor *l = sf_cross_entropy(&g, z, fw[c].a.labels, fw[c].a.soft, fw[c].a.eps);
        double want = hand_ce(z->data, B, K, fw[c].a.labels, fw[c].a.soft, fw[c].a.eps);
        CHECK(l->numel == 1 && fabs(l->data[0] - want) < 1e-6 * fmax(1, fabs(want)),
              "cross_entropy %s: %.8g, hand %.8g", fw[c].name, l->data[0], want);
    }

    /* Label smoothing equals the soft-target form t = (1-eps) onehot + eps/K: loss and grads. */
    float eps = 0.1f, ts[B * K];
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) ts[b * K + k] = (k == labels[b] ? 1.0f - eps : 0.0f) + eps / K;
    float grads[2][B * K], losses[2];
    for (int form = 0; form < 2; form++) {
        sf_ctx_reset(&g);
        leaf_grad(z, 0.0f);
        sf_tensor *l = form == 0 ? sf_cross_entropy(&g, z, labels, NULL, eps) : sf_cross_entropy(&g, z, NULL, ts, 0.0f);
        sf_backward(&g, l);
        losses[form] = l->data[0];
        memcpy(grads[form], z->grad, sizeof grads[form]);
    }
    CHECK(fabsf(losses[0] - losses[1]) < 1e-6f, "smoothing %.8g vs soft form %.8g", losses[0], losses[1]);
    allclose("smoothing grad == soft-target grad", grads[0], grads[1], B * K, 1e-5f, 1e-7f);
    /* And the gradient is (p - t)/B, computed here in double. */
    float pt[B * K];
    for (int b = 0; b < B; b++) {
        double m = -1e300, s = 0;
        for (int k = 0; k < K; k++) m = fmax(m, z->data[b * K + k]);
        for (int k = 0; k < K; k++) s += exp(z->data[b * K + k] - m);
        for (int k = 0; k < K; k++) pt[b * K + k] = (float)((exp(z->data[b * K + k] - m) / s - ts[b * K + k]) / B);
    }
    allclose("cross_entropy grad == (p - t)/B", grads[0], pt, B * K, 1e-5f, 1e-7f);

    /* Upstream gradient: L2 = 2.5 * CE gives 2.5 times the gradient. */
    sf_ctx_reset(&g);
    leaf_grad(z, 0.0f);
    sf_backward(&g, sf_scale(&g, sf_cross_entropy(&g, z, labels, NULL, eps), 2.5f));
    for (int i = 0; i < B * K; i++) pt[i] = 2.5f * grads[0][i];
    allclose("cross_entropy scales with the upstream gradient", z->grad, pt, B * K, 1e-5f, 1e-7f);

    /* Large logits stay finite (log-softmax is computed stably). */
    sf_ctx_reset(&g);
    float zbig[B * K];
    for (int i = 0; i < B * K; i++) zbig[i] = 500.0f * z->data[i];
    memcpy(z->data, zbig, sizeof zbig);
    sf_tensor *l = sf_cross_entropy(&g, z, labels, NULL, 0.0f);
    double want = hand_ce(z->data, B, K, labels, NULL, 0.0);
    CHECK(isfinite(l->data[0]) && fabs(l->data[0] - want) < 1e-4 * fmax(1, fabs(want)),
          "cross_entropy with logits ~500: %.8g, hand %.8g", l->data[0], want);
    sf_ctx_free(&g);
    gc_leaf_free(z);
}

/* An out-of-range label stops the program (SF_ASSERT) and names the value. Runs in a child
 * process, before any OpenMP region exists in the parent. */
static void test_cross_entropy_bad_label(void) {
    int fd[2];
    if (pipe(fd) != 0) {
        CHECK(0, "pipe failed");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        sf_ctx g;
        sf_ctx_init(&g, 1 << 16);
        g.grad_enabled = 0;
        sf_tensor *z = gc_leaf(2, (int[]){2, 5}, 0);
        sf_cross_entropy(&g, z, (int[]){1, 7}, NULL, 0.0f);
        _exit(0); /* not reached when the label is rejected */
    }
    close(fd[1]);
    char buf[1024] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)r;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "bad label: child was not aborted (status %d)", status);
    CHECK(strstr(buf, "label 7") != NULL, "bad label message names the value: \"%s\"", buf);
}

/* ------------------------------------------------------------------ tape discipline */

/* With grad mode off, or with no input requiring grad, no op records a node. */
static void test_no_grad_records_nothing(void) {
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    sf_tensor *x = LEAF(1, 2, 3, 4), *w = LEAF(1, 4, 4), *c = LEAF(0, 1, 1, 4);
    for (int pass = 0; pass < 2; pass++) {
        g.grad_enabled = pass == 0 ? 0 : 1;
        if (pass == 1) x->requires_grad = w->requires_grad = 0;
        sf_tensor *h = sf_linear(&g, x, w, NULL);
        h = sf_gelu(&g, sf_add_broadcast(&g, h, c));
        h = sf_dropout(&g, h, 0.2f);
        h = sf_drop_path(&g, h, 0.2f);
        h = sf_concat_tokens(&g, c, h);
        h = sf_softmax(&g, sf_heads_merge(&g, sf_heads_split(&g, h, 1, 0, 2)));
        h = sf_mean_tokens(&g, sf_permute(&g, sf_reshape(&g, h, 3, (int[]){2, 4, 4}), (int[]){0, 2, 1}));
        sf_tensor *l = sf_cross_entropy(&g, h, (int[]){1, 3}, NULL, 0.1f);
        CHECK(g.tape_len == 0 && !l->requires_grad, "pass %d: %d nodes recorded without grad", pass, g.tape_len);
    }
    sf_ctx_free(&g);
    gc_leaf_free(x);
    gc_leaf_free(w);
    gc_leaf_free(c);
}

int main(void) {
    sf_rng_seed(&data_rng, 20240611);
    test_cross_entropy_bad_label();
    test_linear();
    test_linear_act();
    test_matmul();
    test_add();
    test_broadcast();
    test_scale_and_activations();
    test_dropout();
    test_residual();
    test_reshape();
    test_permute();
    test_write_or_accumulate();
    test_heads();
    test_tokens();
    test_softmax();
    test_cross_entropy();
    test_no_grad_records_nothing();
    return test_summary("test_ops_basic");
}
