/* test_ops_attention.c — the attention cores of src/ops/attention.c.
 *
 * Gradient checks (central differences) for l1/l2 normalization across tokens, the SimA
 * product in both orders, softmax attention and XCA, over shapes with N < D and N > D, odd
 * sizes, one and several heads, batch 1 and 2, one query row (class attention). Oracles
 * beyond the gradient checks: naive double-precision loop implementations of every forward,
 * the order-free closed forms of the SimA gradients, the two SimA orders against each other,
 * softmax rows, the eps branch of the normalizations, and the XCA temperature gradient
 * against a double-precision finite difference.
 *
 * Dimension legend: B batch, H heads, N tokens, Nq query tokens, D head dim.
 */
#include "gradcheck.h"

#define EPS_SIMA 1e-12f

/* ---------------------------------- helpers ---------------------------------- */

static sf_rng rng;

static sf_tensor *leaf4(int B, int H, int N, int D, int rg) {
    return gc_leaf(4, (int[]){B, H, N, D}, rg);
}

/* Normal values pushed away from 0 so a +-h probe never crosses the |x| kink. */
static void fill_away_from_zero(sf_tensor *t, float lo) {
    for (size_t i = 0; i < t->numel; i++) {
        float u = sf_rng_normal(&rng);
        t->data[i] = u >= 0 ? lo + u : -lo + u;
    }
}

static void leaf_zero_grad(sf_tensor *t) {
    if (!t->requires_grad) return;
    free(t->grad);
    t->grad = calloc(t->numel, sizeof(float));
}

/* max |a - b| / max |b| (the reference metric). */
static double rel_err(const float *a, const float *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md) md = d;
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return md / (mb > 1e-30 ? mb : 1e-30);
}

static double rel_err_d(const float *a, const double *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / (mb > 1e-30 ? mb : 1e-30);
}

static float *random_seed(size_t n) {
    float *r = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) r[i] = 2.0f * sf_rng_uniform(&rng) - 1.0f;
    return r;
}

/* Naive column normalization of (L, N, D) in double: y = x / max(norm_p, eps). */
static void naive_colnorm(double *y, const float *x, int L, int N, int D, int p, double eps) {
    for (int l = 0; l < L; l++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int n = 0; n < N; n++) {
                double v = x[((size_t)l * N + n) * D + j];
                s += p == 1 ? fabs(v) : v * v;
            }
            if (p == 2) s = sqrt(s);
            double r = s > eps ? s : eps;
            for (int n = 0; n < N; n++) {
                size_t i = ((size_t)l * N + n) * D + j;
                y[i] = x[i] / r;
            }
        }
}

/* ------------------------------ l1 / l2 normalization ------------------------------ */

typedef struct norm_args {
    int p;
    float eps;
} norm_args;

static sf_tensor *build_norm(sf_ctx *g, sf_tensor **in, void *user) {
    norm_args *a = user;
    return a->p == 1 ? sf_l1norm_tokens(g, in[0], a->eps) : sf_l2norm_tokens(g, in[0], a->eps);
}

static void test_norm_gradchecks(void) {
    static const int shapes[][4] = {
        {1, 1, 13, 24}, {2, 3, 40, 8}, {1, 2, 7, 5}, {2, 1, 1, 6}, {1, 4, 197, 16},
    };
    for (int p = 1; p <= 2; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int *sh = shapes[s];
            sf_tensor *x = leaf4(sh[0], sh[1], sh[2], sh[3], 1);
            fill_away_from_zero(x, 0.1f);
            float eps = (p == 1 && s == 1) ? 1e-6f : EPS_SIMA;
            norm_args a = {p, eps};
            char name[96];
            snprintf(name, sizeof name, "l%dnorm_tokens (%d,%d,%d,%d) eps %g", p, sh[0], sh[1],
                     sh[2], sh[3], (double)eps);
            gradcheck(name, build_norm, &a, &x, 1, (gc_opts){.tol = 1e-2f});

            /* forward against the naive loop */
            sf_ctx g;
            sf_ctx_init(&g, 1 << 20);
            g.grad_enabled = 0;
            sf_tensor *y = build_norm(&g, &x, &a);
            double *yr = malloc(x->numel * sizeof(double));
            int L = sh[0] * sh[1];
            naive_colnorm(yr, x->data, L, sh[2], sh[3], p, eps);
            double e = rel_err_d(y->data, yr, x->numel);
            CHECK(e <= 1e-6, "%s forward vs naive rel err %.3g", name, e);
            /* each column has unit l_p norm (no column is below eps here) */
            double worst = 0;
            for (int l = 0; l < L; l++)
                for (int j = 0; j < sh[3]; j++) {
                    double nrm = 0;
                    for (int n = 0; n < sh[2]; n++) {
                        double v = y->data[((size_t)l * sh[2] + n) * sh[3] + j];
                        nrm += p == 1 ? fabs(v) : v * v;
                    }
                    if (p == 2) nrm = sqrt(nrm);
                    if (fabs(nrm - 1) > worst) worst = fabs(nrm - 1);
                }
            CHECK(worst <= 1e-5, "%s: column norm off by %.3g", name, worst);
            free(yr);
            sf_ctx_free(&g);
            gc_leaf_free(x);
        }
}

/* An all-zero channel takes the eps branch: y = 0 there and dx = g / eps exactly. */
static void test_norm_eps_branch(void) {
    const int B = 2, H = 2, N = 7, D = 5, zc = 3;
    for (int p = 1; p <= 2; p++)
        for (int e = 0; e < 2; e++) {
            float eps = e ? 1e-6f : 1e-12f;
            sf_tensor *x = leaf4(B, H, N, D, 1);
            fill_away_from_zero(x, 0.1f);
            for (int l = 0; l < B * H; l++)
                for (int n = 0; n < N; n++) x->data[((size_t)l * N + n) * D + zc] = 0.0f;
            leaf_zero_grad(x);
            sf_ctx g;
            sf_ctx_init(&g, 1 << 20);
            norm_args a = {p, eps};
            sf_tensor *y = build_norm(&g, &x, &a);
            float *R = random_seed(y->numel);
            sf_backward_seeded(&g, y, R);
            int zero_fwd = 1, bad_grad = 0;
            for (int l = 0; l < B * H; l++)
                for (int n = 0; n < N; n++) {
                    size_t i = ((size_t)l * N + n) * D + zc;
                    if (y->data[i] != 0.0f) zero_fwd = 0;
                    double want = (double)R[i] / (double)eps;
                    if (fabs(x->grad[i] - want) > 1e-6 * fabs(want)) bad_grad++;
                }
            CHECK(zero_fwd, "l%d eps %g: all-zero channel must normalize to 0", p, (double)eps);
            CHECK(bad_grad == 0, "l%d eps %g: %d entries of the zero channel differ from g/eps",
                  p, (double)eps, bad_grad);
            free(R);
            sf_ctx_free(&g);
            gc_leaf_free(x);
        }

    /* The eps branch by finite differences: with eps = 1 a channel whose norm stays below 1
     * is divided by the constant eps, other channels (norm ~ N) take the other branch. */
    for (int p = 1; p <= 2; p++) {
        sf_tensor *x = leaf4(1, 2, N, D, 1);
        fill_away_from_zero(x, 0.3f);
        for (int l = 0; l < 2; l++)
            for (int n = 0; n < N; n++)
                x->data[((size_t)l * N + n) * D + 1] = (n % 2 ? 0.01f : -0.008f) * (float)(n + 1);
        norm_args a = {p, 1.0f};
        gradcheck(p == 1 ? "l1norm_tokens eps branch (eps 1, small channel)"
                         : "l2norm_tokens eps branch (eps 1, small channel)",
                  build_norm, &a, &x, 1, (gc_opts){.max_probe = -1});
        gc_leaf_free(x);
    }
}

/* ------------------- head split and token norm in one op (SimA's q̂, k̂) ------------------- */

typedef struct split_norm_args {
    int H, p, part, fused, all; /* all: q, k normalized and v split from one qkv, weighted */
    float eps;
} split_norm_args;

/* The qkv input passes through a scale first when `all` is set: an intermediate tensor has no
 * gradient yet when the splits run backward, so the three write it together (the gather,
 * shape.c); a leaf (the gradcheck's, whose gradient exists) takes the accumulating path. */
static sf_tensor *build_split_norm(sf_ctx *g, sf_tensor **in, void *user) {
    const split_norm_args *a = user;
    sf_tensor *x = a->all ? sf_scale(g, in[0], 1.5f) : in[0];
    if (!a->all) {
        if (a->fused) return sf_heads_split_norm(g, x, 3, a->part, a->H, a->p, a->eps);
        sf_tensor *h = sf_heads_split(g, x, 3, a->part, a->H);
        return a->p == 1 ? sf_l1norm_tokens(g, h, a->eps) : sf_l2norm_tokens(g, h, a->eps);
    }
    sf_tensor *q, *k;
    if (a->fused) {
        q = sf_heads_split_norm(g, x, 3, 0, a->H, a->p, a->eps);
        k = sf_heads_split_norm(g, x, 3, 1, a->H, a->p, a->eps);
    } else {
        q = sf_heads_split(g, x, 3, 0, a->H);
        k = sf_heads_split(g, x, 3, 1, a->H);
        q = a->p == 1 ? sf_l1norm_tokens(g, q, a->eps) : sf_l2norm_tokens(g, q, a->eps);
        k = a->p == 1 ? sf_l1norm_tokens(g, k, a->eps) : sf_l2norm_tokens(g, k, a->eps);
    }
    sf_tensor *v = sf_heads_split(g, x, 3, 2, a->H);
    return sf_add(g, q, sf_add(g, sf_scale(g, k, 2.0f), sf_scale(g, v, -0.5f)));
}

/* Output and input gradient of the fused op and of heads_split + l{1,2}norm_tokens, for a
 * seeded upstream gradient: the same bits. x's channel 1 of the k part is all zero in image
 * 0 (the eps branch). */
static void split_norm_bits(const char *what, split_norm_args a, int B, int N, int D) {
    sf_tensor *x = gc_leaf(3, (int[]){B, N, 3 * a.H * D}, 1);
    fill_away_from_zero(x, 0.1f);
    for (int n = 0; n < N; n++) x->data[(size_t)n * 3 * a.H * D + a.H * D + 1] = 0.0f;
    float *out[2], *grad[2];
    size_t n_out = 0;
    for (int f = 0; f < 2; f++) {
        a.fused = f;
        sf_ctx g;
        sf_ctx_init(&g, (size_t)8 << 20);
        leaf_zero_grad(x);
        sf_tensor *y = build_split_norm(&g, &x, &a);
        n_out = y->numel;
        float *R = malloc(y->numel * sizeof(float));
        sf_rng r;
        sf_rng_seed(&r, 77);
        for (size_t i = 0; i < y->numel; i++) R[i] = sf_rng_normal(&r);
        out[f] = malloc(y->numel * sizeof(float));
        memcpy(out[f], y->data, y->numel * sizeof(float));
        sf_backward_seeded(&g, y, R);
        grad[f] = malloc(x->numel * sizeof(float));
        memcpy(grad[f], x->grad, x->numel * sizeof(float));
        free(R);
        sf_ctx_free(&g);
    }
    CHECK(!memcmp(out[0], out[1], n_out * sizeof(float)), "%s: forward bits differ from split + norm", what);
    CHECK(!memcmp(grad[0], grad[1], x->numel * sizeof(float)), "%s: gradient bits differ from split + norm", what);
    for (int f = 0; f < 2; f++) free(out[f]), free(grad[f]);
    gc_leaf_free(x);
}

static void test_heads_split_norm(void) {
    char name[128];
    for (int p = 1; p <= 2; p++) {
        /* one part on a leaf (accumulates into its gradient); q, k and v of an intermediate
         * (the gather writes them together); DeiT-like 197 x 64 slices */
        for (int part = 0; part < 2; part++) {
            sf_tensor *x = gc_leaf(3, (int[]){2, 9, 3 * 2 * 5}, 1);
            fill_away_from_zero(x, 0.1f);
            split_norm_args a = {.H = 2, .p = p, .part = part, .fused = 1, .eps = EPS_SIMA};
            snprintf(name, sizeof name, "heads_split_norm %s part %d of 3 (2,9,30)", p == 1 ? "l1norm" : "l2norm", part);
            gradcheck(name, build_split_norm, &a, &x, 1, (gc_opts){0});
            gc_leaf_free(x);
        }
        sf_tensor *x = gc_leaf(3, (int[]){2, 9, 3 * 2 * 5}, 1);
        fill_away_from_zero(x, 0.1f);
        split_norm_args all = {.H = 2, .p = p, .fused = 1, .all = 1, .eps = EPS_SIMA};
        snprintf(name, sizeof name, "heads_split_norm %s q, k with split v (gather)", p == 1 ? "l1norm" : "l2norm");
        gradcheck(name, build_split_norm, &all, &x, 1, (gc_opts){0});
        gc_leaf_free(x);
        /* the eps branch: eps 1 and a channel whose norm stays below it */
        x = gc_leaf(3, (int[]){1, 7, 3 * 2 * 4}, 1);
        fill_away_from_zero(x, 0.3f);
        for (int n = 0; n < 7; n++) x->data[(size_t)n * 24 + 8 + 1] = (n % 2 ? 0.01f : -0.008f) * (float)(n + 1);
        split_norm_args eb = {.H = 2, .p = p, .fused = 1, .all = 1, .eps = 1.0f};
        snprintf(name, sizeof name, "heads_split_norm %s eps branch (gather)", p == 1 ? "l1norm" : "l2norm");
        gradcheck(name, build_split_norm, &eb, &x, 1, (gc_opts){.max_probe = -1});
        gc_leaf_free(x);

        split_norm_args one = {.H = 3, .p = p, .part = 1, .eps = 1e-6f};
        snprintf(name, sizeof name, "heads_split_norm l%d part 1, accumulating", p);
        split_norm_bits(name, one, 2, 11, 4);
        split_norm_args both = {.H = 6, .p = p, .all = 1, .eps = EPS_SIMA};
        snprintf(name, sizeof name, "heads_split_norm l%d q, k, v, gather, (2, 197, 3 x 384)", p);
        split_norm_bits(name, both, 2, 197, 64);
    }
}

/* ---------------------------------- SimA product ---------------------------------- */

typedef struct attn_case {
    int B, H, Nq, N, D;
} attn_case;

static const attn_case attn_cases[] = {
    {1, 1, 13, 13, 24}, /* N < D */
    {2, 3, 40, 40, 8},  /* N > D, several heads, batch 2 */
    {1, 2, 7, 7, 5},    /* odd sizes */
    {2, 2, 1, 13, 24},  /* one query row (class attention), N < D */
    {1, 3, 1, 40, 8},   /* one query row, N > D */
};
#define N_ATTN_CASES ((int)(sizeof attn_cases / sizeof attn_cases[0]))

static sf_tensor *build_sima(sf_ctx *g, sf_tensor **in, void *user) {
    return sf_sima(g, in[0], in[1], in[2], *(sf_sima_order *)user);
}

/* The SimA head as the models use it: l1n(q), l1n(k), then the product. */
static sf_tensor *build_sima_head(sf_ctx *g, sf_tensor **in, void *user) {
    sf_tensor *qn = sf_l1norm_tokens(g, in[0], EPS_SIMA);
    sf_tensor *kn = sf_l1norm_tokens(g, in[1], EPS_SIMA);
    return sf_sima(g, qn, kn, in[2], *(sf_sima_order *)user);
}

static const char *order_name(sf_sima_order o) {
    return o == SF_SIMA_QK_FIRST ? "qk-first" : o == SF_SIMA_KV_FIRST ? "kv-first" : "auto";
}

static void make_qkv(const attn_case *c, sf_tensor **in, float std) {
    in[0] = leaf4(c->B, c->H, c->Nq, c->D, 1);
    in[1] = leaf4(c->B, c->H, c->N, c->D, 1);
    in[2] = leaf4(c->B, c->H, c->N, c->D, 1);
    for (int i = 0; i < 3; i++) gc_fill_normal(in[i], &rng, std);
}

static void free_n(sf_tensor **in, int n) {
    for (int i = 0; i < n; i++) gc_leaf_free(in[i]);
}

static void test_sima_gradchecks(void) {
    const sf_sima_order orders[] = {SF_SIMA_QK_FIRST, SF_SIMA_KV_FIRST, SF_SIMA_AUTO};
    for (int ci = 0; ci < N_ATTN_CASES; ci++) {
        const attn_case *c = &attn_cases[ci];
        for (int oi = 0; oi < 3; oi++) {
            sf_sima_order o = orders[oi];
            sf_tensor *in[3];
            make_qkv(c, in, 0.5f);
            char name[96];
            snprintf(name, sizeof name, "sima %s B%d H%d Nq%d N%d D%d", order_name(o), c->B, c->H,
                     c->Nq, c->N, c->D);
            gradcheck(name, build_sima, &o, in, 3, (gc_opts){0});
            free_n(in, 3);

            /* the composed head: l1-normalized q and k (values away from 0: |x| kink).
             * With one query row each q column normalizes to +-1, so dq must be exactly 0. */
            make_qkv(c, in, 0.5f);
            fill_away_from_zero(in[0], 0.1f);
            fill_away_from_zero(in[1], 0.1f);
            snprintf(name, sizeof name, "l1n+sima %s B%d H%d Nq%d N%d D%d", order_name(o), c->B,
                     c->H, c->Nq, c->N, c->D);
            gradcheck(name, build_sima_head, &o, in, 3, (gc_opts){0});
            free_n(in, 3);
        }
    }
    /* only some inputs require grad */
    const attn_case *c = &attn_cases[1];
    for (int oi = 0; oi < 2; oi++) {
        sf_sima_order o = orders[oi];
        for (int skip = 0; skip < 3; skip++) {
            sf_tensor *in[3];
            make_qkv(c, in, 0.5f);
            in[skip]->requires_grad = 0;
            char name[96];
            snprintf(name, sizeof name, "sima %s, input %d without grad", order_name(o), skip);
            gradcheck(name, build_sima, &o, in, 3, (gc_opts){0});
            free_n(in, 3);
        }
    }
}

/* Forward + seeded backward of one op; copies out the output and every input gradient. */
typedef sf_tensor *(*op3_fn)(sf_ctx *g, sf_tensor **in, void *user);

static void run_op(op3_fn f, void *user, sf_tensor **in, int n_in, const float *R, float *out,
                   float **grads) {
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    for (int i = 0; i < n_in; i++) leaf_zero_grad(in[i]);
    sf_tensor *o = f(&g, in, user);
    memcpy(out, o->data, o->numel * sizeof(float));
    sf_backward_seeded(&g, o, R);
    for (int i = 0; i < n_in; i++) memcpy(grads[i], in[i]->grad, in[i]->numel * sizeof(float));
    sf_ctx_free(&g);
}

/* Both orders give the same output and gradients, and they match the naive loops:
 * O = Q K^T V and the order-free closed forms dQ = G V^T K, dK = V G^T Q, dV = K Q^T G. */
static void test_sima_oracles(void) {
    for (int ci = 0; ci < N_ATTN_CASES; ci++) {
        const attn_case *c = &attn_cases[ci];
        int L = c->B * c->H, Nq = c->Nq, N = c->N, D = c->D;
        sf_tensor *in[3];
        make_qkv(c, in, 1.0f);
        size_t nq = in[0]->numel, nk = in[1]->numel;
        float *R = random_seed(nq);
        float *out[2], *gr[2][3];
        sf_sima_order orders[2] = {SF_SIMA_QK_FIRST, SF_SIMA_KV_FIRST};
        for (int oi = 0; oi < 2; oi++) {
            out[oi] = malloc(nq * sizeof(float));
            gr[oi][0] = malloc(nq * sizeof(float));
            gr[oi][1] = malloc(nk * sizeof(float));
            gr[oi][2] = malloc(nk * sizeof(float));
            run_op(build_sima, &orders[oi], in, 3, R, out[oi], gr[oi]);
        }
        char what[64];
        snprintf(what, sizeof what, "B%d H%d Nq%d N%d D%d", c->B, c->H, Nq, N, D);
        double e = rel_err(out[1], out[0], nq);
        CHECK(e <= 1e-4, "sima %s: kv-first output vs qk-first rel err %.3g", what, e);
        for (int i = 0; i < 3; i++) {
            e = rel_err(gr[1][i], gr[0][i], in[i]->numel);
            CHECK(e <= 1e-4, "sima %s: kv-first d%c vs qk-first rel err %.3g", what, "qkv"[i], e);
        }

        /* naive double loops */
        double *o_ref = calloc(nq, sizeof(double));
        double *dq_ref = calloc(nq, sizeof(double));
        double *dk_ref = calloc(nk, sizeof(double));
        double *dv_ref = calloc(nk, sizeof(double));
        double *s = malloc((size_t)Nq * N * sizeof(double));  // (Nq, N) Q K^T
        double *gv = malloc((size_t)Nq * N * sizeof(double)); // (Nq, N) G V^T
        for (int l = 0; l < L; l++) {
            const float *q = in[0]->data + (size_t)l * Nq * D, *k = in[1]->data + (size_t)l * N * D;
            const float *v = in[2]->data + (size_t)l * N * D, *G = R + (size_t)l * Nq * D;
            for (int i = 0; i < Nq; i++)
                for (int n = 0; n < N; n++) {
                    double a = 0, b = 0;
                    for (int j = 0; j < D; j++) {
                        a += (double)q[i * D + j] * k[n * D + j];
                        b += (double)G[i * D + j] * v[n * D + j];
                    }
                    s[i * N + n] = a;
                    gv[i * N + n] = b;
                }
            for (int i = 0; i < Nq; i++)
                for (int j = 0; j < D; j++)
                    for (int n = 0; n < N; n++) {
                        o_ref[((size_t)l * Nq + i) * D + j] += s[i * N + n] * v[n * D + j];
                        dq_ref[((size_t)l * Nq + i) * D + j] += gv[i * N + n] * k[n * D + j];
                        dk_ref[((size_t)l * N + n) * D + j] += gv[i * N + n] * q[i * D + j];
                        dv_ref[((size_t)l * N + n) * D + j] += s[i * N + n] * G[i * D + j];
                    }
        }
        for (int oi = 0; oi < 2; oi++) {
            e = rel_err_d(out[oi], o_ref, nq);
            CHECK(e <= 1e-5, "sima %s %s: output vs naive loops rel err %.3g", order_name(orders[oi]),
                  what, e);
            double *refs[3] = {dq_ref, dk_ref, dv_ref};
            for (int i = 0; i < 3; i++) {
                e = rel_err_d(gr[oi][i], refs[i], in[i]->numel);
                CHECK(e <= 1e-5, "sima %s %s: d%c vs closed form rel err %.3g",
                      order_name(orders[oi]), what, "qkv"[i], e);
            }
        }
        printf("  sima %-22s orders agree; naive loops and closed forms match\n", what);
        free(o_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(s), free(gv), free(R);
        for (int oi = 0; oi < 2; oi++) {
            free(out[oi]);
            for (int i = 0; i < 3; i++) free(gr[oi][i]);
        }
        free_n(in, 3);
    }

    /* The SimA head l1n -> sima against the unfused naive composition in double. */
    const attn_case *c = &attn_cases[1];
    int L = c->B * c->H, N = c->N, D = c->D;
    sf_tensor *in[3];
    make_qkv(c, in, 1.0f);
    double *qn = malloc(in[0]->numel * sizeof(double)), *kn = malloc(in[1]->numel * sizeof(double));
    naive_colnorm(qn, in[0]->data, L, N, D, 1, EPS_SIMA);
    naive_colnorm(kn, in[1]->data, L, N, D, 1, EPS_SIMA);
    double *o_ref = calloc(in[0]->numel, sizeof(double));
    for (int l = 0; l < L; l++)
        for (int i = 0; i < N; i++)
            for (int n = 0; n < N; n++) {
                double a = 0;
                for (int j = 0; j < D; j++) a += qn[((size_t)l * N + i) * D + j] * kn[((size_t)l * N + n) * D + j];
                for (int j = 0; j < D; j++)
                    o_ref[((size_t)l * N + i) * D + j] += a * in[2]->data[((size_t)l * N + n) * D + j];
            }
    for (int oi = 0; oi < 3; oi++) {
        sf_sima_order o = (sf_sima_order)oi;
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *out = build_sima_head(&g, in, &o);
        double e = rel_err_d(out->data, o_ref, out->numel);
        CHECK(e <= 1e-5, "l1n+sima %s vs naive composition rel err %.3g", order_name(o), e);
        sf_ctx_free(&g);
    }
    free(qn), free(kn), free(o_ref);
    free_n(in, 3);
}

static void test_sima_resolve(void) {
    CHECK(sf_sima_resolve(SF_SIMA_AUTO, 197, 64) == SF_SIMA_KV_FIRST, "DeiT-S N=197 D=64");
    CHECK(sf_sima_resolve(SF_SIMA_AUTO, 196, 48) == SF_SIMA_KV_FIRST, "XCiT-S12/16");
    CHECK(sf_sima_resolve(SF_SIMA_AUTO, 197, 384) == SF_SIMA_QK_FIRST, "DeiT-S single head");
    CHECK(sf_sima_resolve(SF_SIMA_AUTO, 64, 64) == SF_SIMA_KV_FIRST, "N == D is kv-first");
    CHECK(sf_sima_resolve(SF_SIMA_QK_FIRST, 1000, 8) == SF_SIMA_QK_FIRST, "explicit kept");
    CHECK(sf_sima_resolve(SF_SIMA_KV_FIRST, 2, 80) == SF_SIMA_KV_FIRST, "explicit kept");
}

/* -------------------------------- softmax attention -------------------------------- */

static sf_tensor *build_msa(sf_ctx *g, sf_tensor **in, void *user) {
    return sf_msa(g, in[0], in[1], in[2], *(float *)user);
}

static void naive_msa(double *o, double *p_out, const float *q, const float *k, const float *v,
                      int L, int Nq, int N, int D, double scale) {
    double *z = malloc((size_t)N * sizeof(double));
    for (int l = 0; l < L; l++)
        for (int i = 0; i < Nq; i++) {
            const float *qi = q + ((size_t)l * Nq + i) * D;
            double mx = -INFINITY, sum = 0;
            for (int n = 0; n < N; n++) {
                double a = 0;
                for (int j = 0; j < D; j++) a += (double)qi[j] * k[((size_t)l * N + n) * D + j];
                z[n] = scale * a;
                if (z[n] > mx) mx = z[n];
            }
            for (int n = 0; n < N; n++) sum += (z[n] = exp(z[n] - mx));
            for (int j = 0; j < D; j++) {
                double acc = 0;
                for (int n = 0; n < N; n++) acc += z[n] / sum * v[((size_t)l * N + n) * D + j];
                o[((size_t)l * Nq + i) * D + j] = acc;
            }
            if (p_out)
                for (int n = 0; n < N; n++) p_out[((size_t)l * Nq + i) * N + n] = z[n] / sum;
        }
    free(z);
}

static void test_msa(void) {
    for (int ci = 0; ci < N_ATTN_CASES; ci++) {
        const attn_case *c = &attn_cases[ci];
        float scale = 1.0f / sqrtf((float)c->D);
        sf_tensor *in[3];
        make_qkv(c, in, 1.0f);
        char name[96];
        snprintf(name, sizeof name, "msa B%d H%d Nq%d N%d D%d", c->B, c->H, c->Nq, c->N, c->D);
        gradcheck(name, build_msa, &scale, in, 3, (gc_opts){0});

        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        g.grad_enabled = 0;
        sf_tensor *o = build_msa(&g, in, &scale);
        double *ref = malloc(o->numel * sizeof(double));
        naive_msa(ref, NULL, in[0]->data, in[1]->data, in[2]->data, c->B * c->H, c->Nq, c->N, c->D,
                  scale);
        double e = rel_err_d(o->data, ref, o->numel);
        CHECK(e <= 1e-5, "%s: forward vs naive rel err %.3g", name, e);
        free(ref);
        sf_ctx_free(&g);
        free_n(in, 3);
    }
    /* one input without grad */
    {
        const attn_case *c = &attn_cases[2];
        float scale = 0.7f;
        for (int skip = 0; skip < 3; skip++) {
            sf_tensor *in[3];
            make_qkv(c, in, 1.0f);
            in[skip]->requires_grad = 0;
            char name[64];
            snprintf(name, sizeof name, "msa, input %d without grad", skip);
            gradcheck(name, build_msa, &scale, in, 3, (gc_opts){0});
            free_n(in, 3);
        }
    }
    /* Rows: with V = [I_N | 0] the output is P itself, so each row is a probability vector
     * equal to the naive softmax; large logits must not overflow (max subtraction). */
    const int B = 2, H = 2, N = 7, D = 9;
    for (int big = 0; big < 2; big++) {
        sf_tensor *in[3];
        attn_case c = {B, H, N, N, D};
        make_qkv(&c, in, big ? 30.0f : 1.0f);
        memset(in[2]->data, 0, in[2]->numel * sizeof(float));
        for (int l = 0; l < B * H; l++)
            for (int n = 0; n < N; n++) in[2]->data[((size_t)l * N + n) * D + n] = 1.0f;
        float scale = 1.0f / 3.0f;
        sf_ctx g;
        sf_ctx_init(&g, 1 << 20);
        sf_tensor *o = build_msa(&g, in, &scale);
        double *p = malloc((size_t)B * H * N * N * sizeof(double));
        double *ref = malloc(o->numel * sizeof(double));
        naive_msa(ref, p, in[0]->data, in[1]->data, in[2]->data, B * H, N, N, D, scale);
        double worst_sum = 0, worst_p = 0;
        int finite = 1, tail_zero = 1;
        for (int l = 0; l < B * H; l++)
            for (int i = 0; i < N; i++) {
                const float *row = o->data + ((size_t)l * N + i) * D;
                double sum = 0;
                for (int n = 0; n < N; n++) {
                    if (!isfinite(row[n]) || row[n] < 0) finite = 0;
                    sum += row[n];
                    double d = fabs(row[n] - p[((size_t)l * N + i) * N + n]);
                    if (d > worst_p) worst_p = d;
                }
                for (int j = N; j < D; j++)
                    if (row[j] != 0.0f) tail_zero = 0;
                if (fabs(sum - 1) > worst_sum) worst_sum = fabs(sum - 1);
            }
        CHECK(finite, "msa rows (logit std %s): non-finite or negative probability",
              big ? "large" : "1");
        CHECK(tail_zero, "msa rows: columns past N must stay 0");
        CHECK(worst_sum <= 1e-5, "msa rows: row sum off by %.3g", worst_sum);
        CHECK(worst_p <= 1e-5, "msa rows: probability off by %.3g vs naive softmax", worst_p);
        printf("  msa rows (%s logits): sums within %.1e of 1, P within %.1e of naive\n",
               big ? "large" : "unit", worst_sum, worst_p);
        free(p), free(ref);
        sf_ctx_free(&g);
        free_n(in, 3);
    }
}

/* ------------------------------------- XCA ------------------------------------- */

/* Naive XCA in double: q̂, k̂ = l2n over tokens; A = tau_h q̂^T k̂; P = softmax rows;
 * O_{n,i} = sum_j P_ij V_nj. */
static void naive_xca(double *o, const float *q, const float *k, const float *v, const double *tau,
                      int B, int H, int N, int D) {
    int L = B * H;
    size_t nd = (size_t)L * N * D;
    double *qn = malloc(nd * sizeof(double)), *kn = malloc(nd * sizeof(double));
    naive_colnorm(qn, q, L, N, D, 2, 1e-12);
    naive_colnorm(kn, k, L, N, D, 2, 1e-12);
    double *p = malloc((size_t)D * D * sizeof(double));
    for (int l = 0; l < L; l++) {
        double t = tau[l % H];
        for (int i = 0; i < D; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < D; j++) {
                double a = 0;
                for (int n = 0; n < N; n++)
                    a += qn[((size_t)l * N + n) * D + i] * kn[((size_t)l * N + n) * D + j];
                p[i * D + j] = t * a;
                if (p[i * D + j] > mx) mx = p[i * D + j];
            }
            for (int j = 0; j < D; j++) sum += (p[i * D + j] = exp(p[i * D + j] - mx));
            for (int j = 0; j < D; j++) p[i * D + j] /= sum;
        }
        for (int n = 0; n < N; n++)
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int j = 0; j < D; j++) acc += p[i * D + j] * v[((size_t)l * N + n) * D + j];
                o[((size_t)l * N + n) * D + i] = acc;
            }
    }
    free(qn), free(kn), free(p);
}

static sf_tensor *build_xca(sf_ctx *g, sf_tensor **in, void *user) {
    (void)user;
    return sf_xca(g, in[0], in[1], in[2], in[3]);
}

static void make_xca(const attn_case *c, sf_tensor **in, int shaped) {
    make_qkv(c, in, 1.0f);
    in[3] = shaped ? gc_leaf(3, (int[]){c->H, 1, 1}, 1) : gc_leaf(1, (int[]){c->H}, 1);
    gc_fill_uniform(in[3], &rng, 0.5f, 2.5f);
}

static void test_xca(void) {
    for (int ci = 0; ci < N_ATTN_CASES; ci++) {
        const attn_case *c = &attn_cases[ci];
        if (c->Nq != c->N) continue; /* XCA has no class-attention form */
        for (int shaped = 0; shaped < 2; shaped++) {
            sf_tensor *in[4];
            make_xca(c, in, shaped);
            char name[96];
            snprintf(name, sizeof name, "xca B%d H%d N%d D%d tau %s", c->B, c->H, c->N, c->D,
                     shaped ? "(H,1,1)" : "(H)");
            /* larger step: the l2-normalized q, k get small gradients, so float rounding
             * of the forward dominates the difference quotient at h = 1e-3 */
            gradcheck(name, build_xca, NULL, in, 4, (gc_opts){.h = 1e-2f});

            sf_ctx g;
            sf_ctx_init(&g, 1 << 20);
            g.grad_enabled = 0;
            sf_tensor *o = build_xca(&g, in, NULL);
            double *ref = malloc(o->numel * sizeof(double));
            double tau[16];
            for (int h = 0; h < c->H; h++) tau[h] = in[3]->data[h];
            naive_xca(ref, in[0]->data, in[1]->data, in[2]->data, tau, c->B, c->H, c->N, c->D);
            double e = rel_err_d(o->data, ref, o->numel);
            CHECK(e <= 1e-5, "%s: forward vs naive rel err %.3g", name, e);
            free(ref);
            sf_ctx_free(&g);
            free_n(in, 4);
        }
    }
    /* Temperature gradient against a double-precision central difference of the naive
     * forward (summed over the batch, per head). */
    {
        const attn_case *c = &attn_cases[1]; /* B 2, H 3 */
        sf_tensor *in[4];
        make_xca(c, in, 0);
        size_t n = in[0]->numel;
        float *R = random_seed(n);
        float *out = malloc(n * sizeof(float));
        float *grads[4];
        for (int i = 0; i < 4; i++) grads[i] = malloc(in[i]->numel * sizeof(float));
        run_op(build_xca, NULL, in, 4, R, out, grads);
        double tau[16], fd[16], *o = malloc(n * sizeof(double));
        for (int h = 0; h < c->H; h++) tau[h] = in[3]->data[h];
        for (int h = 0; h < c->H; h++) {
            double keep = tau[h], hstep = 1e-5, lp = 0, lm = 0;
            tau[h] = keep + hstep;
            naive_xca(o, in[0]->data, in[1]->data, in[2]->data, tau, c->B, c->H, c->N, c->D);
            for (size_t i = 0; i < n; i++) lp += o[i] * R[i];
            tau[h] = keep - hstep;
            naive_xca(o, in[0]->data, in[1]->data, in[2]->data, tau, c->B, c->H, c->N, c->D);
            for (size_t i = 0; i < n; i++) lm += o[i] * R[i];
            tau[h] = keep;
            fd[h] = (lp - lm) / (2 * hstep);
        }
        double e = rel_err_d(grads[3], fd, (size_t)c->H);
        CHECK(e <= 1e-4, "xca dtau vs double finite difference rel err %.3g", e);
        printf("  xca dtau vs double-precision finite difference: rel err %.2e\n", e);
        /* q, k, v the same way (every element): the float gradcheck above is limited by
         * float rounding of the forward, this one is not. */
        for (int t = 0; t < 3; t++) {
            double *fdx = malloc(in[t]->numel * sizeof(double));
            for (size_t j = 0; j < in[t]->numel; j++) {
                float keep = in[t]->data[j];
                double lp = 0, lm = 0, hstep = 1e-3;
                in[t]->data[j] = keep + (float)hstep;
                double hp = (double)in[t]->data[j] - keep; /* the step float could represent */
                naive_xca(o, in[0]->data, in[1]->data, in[2]->data, tau, c->B, c->H, c->N, c->D);
                for (size_t i = 0; i < n; i++) lp += o[i] * R[i];
                in[t]->data[j] = keep - (float)hstep;
                double hm = keep - (double)in[t]->data[j];
                naive_xca(o, in[0]->data, in[1]->data, in[2]->data, tau, c->B, c->H, c->N, c->D);
                for (size_t i = 0; i < n; i++) lm += o[i] * R[i];
                in[t]->data[j] = keep;
                fdx[j] = (lp - lm) / (hp + hm);
            }
            e = rel_err_d(grads[t], fdx, in[t]->numel);
            CHECK(e <= 1e-4, "xca d%c vs double finite difference rel err %.3g", "qkv"[t], e);
            printf("  xca d%c vs double-precision finite difference: rel err %.2e\n", "qkv"[t], e);
            free(fdx);
        }
        free(R), free(out), free(o);
        for (int i = 0; i < 4; i++) free(grads[i]);
        free_n(in, 4);
    }
    /* temperature alone, and q alone, requiring grad */
    for (int which = 0; which < 2; which++) {
        sf_tensor *in[4];
        make_xca(&attn_cases[2], in, 0);
        for (int i = 0; i < 4; i++) in[i]->requires_grad = which ? i == 0 : i == 3;
        gradcheck(which ? "xca, only q requires grad" : "xca, only temperature requires grad",
                  build_xca, NULL, in, 4, (gc_opts){0});
        free_n(in, 4);
    }
}

/* ------------------------------- grad mode off ------------------------------- */

static void test_no_tape_without_grad(void) {
    attn_case c = {2, 2, 7, 7, 5};
    sf_tensor *in[4];
    make_xca(&c, in, 0);
    sf_ctx g;
    sf_ctx_init(&g, 1 << 20);
    g.grad_enabled = 0;
    sf_tensor *outs[6];
    outs[0] = sf_l1norm_tokens(&g, in[0], EPS_SIMA);
    outs[1] = sf_l2norm_tokens(&g, in[0], EPS_SIMA);
    outs[2] = sf_sima(&g, in[0], in[1], in[2], SF_SIMA_QK_FIRST);
    outs[3] = sf_sima(&g, in[0], in[1], in[2], SF_SIMA_KV_FIRST);
    outs[4] = sf_msa(&g, in[0], in[1], in[2], 0.5f);
    outs[5] = sf_xca(&g, in[0], in[1], in[2], in[3]);
    int any = 0;
    for (int i = 0; i < 6; i++) any |= outs[i]->requires_grad;
    CHECK(g.tape_len == 0 && !any, "grad mode off recorded %d nodes", g.tape_len);
    /* and with grad on but no input requiring grad, nothing is recorded either */
    g.grad_enabled = 1;
    for (int i = 0; i < 4; i++) in[i]->requires_grad = 0;
    sf_sima(&g, in[0], in[1], in[2], SF_SIMA_AUTO);
    sf_xca(&g, in[0], in[1], in[2], in[3]);
    CHECK(g.tape_len == 0, "no input requires grad but %d nodes recorded", g.tape_len);
    sf_ctx_free(&g);
    free_n(in, 4);
}

int main(void) {
    sf_threads_init(0);
    sf_rng_seed(&rng, 20240611);
    test_norm_gradchecks();
    test_norm_eps_branch();
    test_heads_split_norm();
    test_sima_gradchecks();
    test_sima_oracles();
    test_sima_resolve();
    test_msa();
    test_xca();
    test_no_tape_without_grad();
    return test_summary("ops_attention");
}
