/* gradcheck.h — shared test harness: gradient checks by central finite differences and
 * small assertion helpers. Header-only; each test program includes it once.
 *
 * A check builds an op graph from leaf inputs, projects the output onto a fixed random
 * tensor R (L = sum(out * R), accumulated in double), and compares every input's analytic
 * gradient from the tape with (L(x+h) - L(x-h)) / 2h. The error is the reference metric:
 * max |analytic - numeric| / max |numeric| over an input. Randomness inside ops (dropout
 * masks) is replayed by restoring the context's RNG before each forward.
 */
#ifndef SFVIT_TEST_GRADCHECK_H
#define SFVIT_TEST_GRADCHECK_H

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/ops.h"

static __attribute__((unused)) int tests_failed = 0, tests_passed = 0;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) {                                                                       \
            tests_passed++;                                                               \
        } else {                                                                          \
            tests_failed++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

/* Captures what one call prints on stderr into errbuf, through the file errpath (which the
 * test sets, e.g. inside its temporary folder), so tests can check error messages. */
static __attribute__((unused)) char errpath[300];
static __attribute__((unused)) char errbuf[65536];

static __attribute__((unused)) int capture_begin(void) {
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static __attribute__((unused)) void capture_end(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(errpath, "rb");
    size_t n = f ? fread(errbuf, 1, sizeof errbuf - 1, f) : 0;
    if (f) fclose(f);
    errbuf[n] = 0;
}

/* The closing line test runners read: "N passed, N failed". Returns the exit status. */
static __attribute__((unused)) int test_summary(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

/* A leaf tensor outside the arena (survives sf_ctx_reset). */
static __attribute__((unused)) sf_tensor *gc_leaf(int ndim, const int *shape, int requires_grad) {
    sf_tensor *t = calloc(1, sizeof(sf_tensor));
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->data = calloc(t->numel, sizeof(float));
    t->requires_grad = requires_grad;
    return t;
}

static __attribute__((unused)) void gc_leaf_free(sf_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

static __attribute__((unused)) void gc_fill_uniform(sf_tensor *t, sf_rng *r, float lo, float hi) {
    for (size_t i = 0; i < t->numel; i++) t->data[i] = lo + (hi - lo) * sf_rng_uniform(r);
}

static __attribute__((unused)) void gc_fill_normal(sf_tensor *t, sf_rng *r, float std) {
    for (size_t i = 0; i < t->numel; i++) t->data[i] = std * sf_rng_normal(r);
}

typedef sf_tensor *(*gc_build_fn)(sf_ctx *g, sf_tensor **in, void *user);

typedef struct gc_opts {
    float h;           /* finite-difference step (default 1e-3) */
    float tol;         /* max allowed relative error (default 1e-2) */
    int max_probe;     /* elements probed per input (0 = all; default 200, chosen at random) */
    int training;      /* ctx->training during the check */
} gc_opts;

static __attribute__((unused)) double gc_project(const sf_tensor *out, const float *R) {
    double s = 0;
    for (size_t i = 0; i < out->numel; i++) s += (double)out->data[i] * (double)R[i];
    return s;
}

/* The analytic side: builds the graph, draws the projection R (returned, caller frees),
 * fills each input's grad with d(sum out * R)/d(input), then leaves the context reset and
 * without a tape for the finite-difference forwards. */
static __attribute__((unused)) float *gc_analytic(sf_ctx *g, gc_build_fn build, void *user, sf_tensor **in, int n_in,
                                                  sf_rng *pick) {
    sf_tensor *out = build(g, in, user);
    float *R = malloc(out->numel * sizeof(float));
    for (size_t i = 0; i < out->numel; i++) R[i] = sf_rng_uniform(pick) * 2.0f - 1.0f;
    for (int i = 0; i < n_in; i++)
        if (in[i]->requires_grad) {
            free(in[i]->grad);
            in[i]->grad = calloc(in[i]->numel, sizeof(float));
        }
    sf_backward_seeded(g, out, R);
    sf_ctx_reset(g);
    g->grad_enabled = 0;
    return R;
}

/* Returns the worst relative error over the inputs that require grad (and prints it). */
static __attribute__((unused)) double gradcheck(const char *name, gc_build_fn build, void *user, sf_tensor **in, int n_in,
                        gc_opts o) {
    if (o.h == 0) o.h = 1e-3f;
    if (o.tol == 0) o.tol = 1e-2f;
    if (o.max_probe == 0) o.max_probe = 200;
    sf_ctx g;
    sf_ctx_init(&g, (size_t)8 << 20);
    g.training = o.training;
    sf_rng rng_saved = g.rng, pick;
    sf_rng_seed(&pick, 1234);

    float *R = gc_analytic(&g, build, user, in, n_in, &pick);

    double worst = 0;
    for (int i = 0; i < n_in; i++) {
        sf_tensor *x = in[i];
        if (!x->requires_grad) continue;
        double max_num = 0, max_diff = 0;
        int probes = (o.max_probe < 0 || (size_t)o.max_probe >= x->numel) ? (int)x->numel : o.max_probe;
        for (int p = 0; p < probes; p++) {
            size_t j = (probes == (int)x->numel) ? (size_t)p : sf_rng_below(&pick, (uint32_t)x->numel);
            float keep = x->data[j];
            x->data[j] = keep + o.h;
            g.rng = rng_saved;
            double lp = gc_project(build(&g, in, user), R);
            sf_ctx_reset(&g);
            x->data[j] = keep - o.h;
            g.rng = rng_saved;
            double lm = gc_project(build(&g, in, user), R);
            sf_ctx_reset(&g);
            x->data[j] = keep;
            double num = (lp - lm) / (2.0 * o.h);
            double diff = fabs(num - (double)x->grad[j]);
            if (fabs(num) > max_num) max_num = fabs(num);
            if (diff > max_diff) max_diff = diff;
        }
        double rel = max_diff / (max_num > 1e-6 ? max_num : 1e-6);
        if (rel > worst) worst = rel;
        CHECK(rel <= o.tol, "%s: input %d gradient rel err %.3g > tol %.3g", name, i, rel, o.tol);
    }
    printf("  gradcheck %-40s max rel err %.2e\n", name, worst);
    free(R);
    sf_ctx_free(&g);
    return worst;
}

/* ---- Directional gradient check, for whole models ----
 *
 * Element-wise finite differences through a deep float32 graph are noise-bound: one weight
 * moved by h changes L by about h·g_j, which sits close to the float32 rounding of L, so
 * the worst of a few probes depends on the compiler, the optimisation level and the BLAS
 * kernels (Zen 4 vs Zen 5, -O2 vs an ASan -O0 build). Moving the whole tensor along a random
 * direction v instead changes L by h·<g, v>, about sqrt(numel) times more signal for the
 * same rounding noise, and a wrong backward still shows: its error e adds <e, v> to the
 * analytic side, of size |e|·|v|/sqrt(numel), the same order as the error itself.
 *
 * For each input x and each of `n_dirs` directions v (entries N(0, 1)), central differences
 *     D(t) = (L(x + t v) - L(x - t v)) / 2t
 * are taken at t = 4s, 2s, s, s/2 with s = h_rel · max(rms(x), 0.02) (the step chosen per
 * tensor); each neighbouring pair gives a Richardson estimate (4 D(t/2) - D(t)) / 3, which
 * cancels the O(t^2) curvature term (GELU, LayerNorm), and the median of the three is kept:
 * the largest steps can straddle kinks of |q| in the l1 norms, the smallest is closest to
 * rounding noise, and the median discards either outlier. The error of one direction is
 * |<g, v> - D*| / |g|: |g| is the standard deviation of <g, v> over directions, so a
 * direction nearly orthogonal to g does not inflate the error.
 *
 * Tolerances are the caller's (tests/test_models.c, docs/testing.md): each model's worst
 * error over many direction sets, release and ASan builds and several BLAS kernels, against
 * the error every backward broken on purpose gives (tests/test_teeth.sh). */
typedef struct gc_dir_opts {
    int n_dirs;      /* random directions per input (default 2) */
    float h_rel;     /* step s, relative to the tensor's rms (default 2e-3) */
    double tol;      /* allowed error (default 0.1) */
    int training;    /* ctx->training during the check */
} gc_dir_opts;

static __attribute__((unused)) double gc_loss_at(sf_ctx *g, gc_build_fn build, void *user, sf_tensor **in,
                                                 sf_rng rng_saved, const float *R) {
    g->rng = rng_saved;
    double l = gc_project(build(g, in, user), R);
    sf_ctx_reset(g);
    return l;
}

/* Central differences of L along v at the steps 4t, 2t, t, t/2. */
static __attribute__((unused)) void gc_central_diffs(sf_ctx *g, gc_build_fn build, void *user, sf_tensor **in,
                                                     sf_tensor *x, const float *v, float t, sf_rng rng_saved,
                                                     const float *R, double d[4]) {
    float *keep = malloc(x->numel * sizeof(float));
    memcpy(keep, x->data, x->numel * sizeof(float));
    for (int k = 0; k < 4; k++) {
        float s = t * (float)(4 >> k) + (k == 3 ? t * 0.5f : 0.0f);
        for (size_t j = 0; j < x->numel; j++) x->data[j] = keep[j] + s * v[j];
        double lp = gc_loss_at(g, build, user, in, rng_saved, R);
        for (size_t j = 0; j < x->numel; j++) x->data[j] = keep[j] - s * v[j];
        double lm = gc_loss_at(g, build, user, in, rng_saved, R);
        d[k] = (lp - lm) / (2.0 * (double)s);
    }
    memcpy(x->data, keep, x->numel * sizeof(float));
    free(keep);
}

static __attribute__((unused)) double gc_median3(double a, double b, double c) {
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* Returns the worst error over the inputs that require grad (and prints it). */
static __attribute__((unused)) double gradcheck_dir(const char *name, gc_build_fn build, void *user, sf_tensor **in,
                                                    int n_in, gc_dir_opts o) {
    if (o.n_dirs == 0) o.n_dirs = 2;
    if (o.h_rel == 0) o.h_rel = 2e-3f;
    if (o.tol == 0) o.tol = 0.1;
    sf_ctx g;
    sf_ctx_init(&g, (size_t)8 << 20);
    g.training = o.training;
    sf_rng rng_saved = g.rng, pick;
    sf_rng_seed(&pick, 4321);

    float *R = gc_analytic(&g, build, user, in, n_in, &pick);

    double worst = 0;
    for (int i = 0; i < n_in; i++) {
        sf_tensor *x = in[i];
        if (!x->requires_grad) continue;
        double ss = 0;
        for (size_t j = 0; j < x->numel; j++) ss += (double)x->data[j] * x->data[j];
        double rms = sqrt(ss / (double)x->numel);
        float step = o.h_rel * (float)(rms > 0.02 ? rms : 0.02);
        float *v = malloc(x->numel * sizeof(float));
        double worst_x = 0;
        for (int k = 0; k < o.n_dirs; k++) {
            double analytic = 0, typical = 0;
            for (size_t j = 0; j < x->numel; j++) {
                v[j] = sf_rng_normal(&pick);
                analytic += (double)x->grad[j] * v[j];
                typical += (double)x->grad[j] * x->grad[j];
            }
            typical = sqrt(typical);
            double d[4], r[3];
            gc_central_diffs(&g, build, user, in, x, v, step, rng_saved, R, d);
            for (int m = 0; m < 3; m++) r[m] = (4.0 * d[m + 1] - d[m]) / 3.0; /* Richardson, steps 2^(1-m) s */
            double numeric = gc_median3(r[0], r[1], r[2]);
            double err = fabs(analytic - numeric) / (typical > 1e-12 ? typical : 1e-12);
            if (err > worst_x) worst_x = err;
        }
        free(v);
        if (worst_x > worst) worst = worst_x;
        CHECK(worst_x <= o.tol, "%s: input %d (%s) directional gradient error %.3g > tol %.3g", name, i,
              x->name ? x->name : "?", worst_x, o.tol);
    }
    printf("  gradcheck %-40s directional err %.2e\n", name, worst);
    free(R);
    sf_ctx_free(&g);
    return worst;
}

/* Compare two float arrays: |a-b| <= atol + rtol*|b|. Prints the first mismatches. */
static __attribute__((unused)) int allclose(const char *what, const float *a, const float *b, size_t n, float rtol, float atol) {
    int bad = 0;
    double maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxdiff) maxdiff = d;
        if (!(d <= atol + rtol * fabs((double)b[i]))) {
            if (bad < 5) fprintf(stderr, "  %s[%zu]: got %.7g want %.7g\n", what, i, a[i], b[i]);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: %d of %zu mismatched (max abs diff %.3g)", what, bad, n, maxdiff);
    return bad == 0;
}

#endif
