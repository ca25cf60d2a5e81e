/* test_optim.c — the per-step passes over every parameter (src/optim.c, sf_params_zero_grad):
 *
 * 1. AdamW against torch.optim.AdamW's update written out in double (decoupled decay on
 *    decaying views only, bias corrections, frozen views untouched), over several steps of a
 *    store with views large enough to run on the OpenMP team and small ones that do not;
 *    every gradient zero after each update (the next step accumulates from it).
 * 2. The global gradient norm against a double sum, and bit for bit the same on 1 and on
 *    2 threads (fixed chunks added in order); frozen views do not count.
 * 3. The finite check names the first view holding a NaN, +Inf or -Inf wherever it sits
 *    (first, middle or last element, inside a large view), accepts -0, denormals and
 *    FLT_MAX, and ignores frozen views.
 * 4. Gradient scaling and zeroing reach every element.
 * 5. AdamW writing bf16 copies (sf_adamw_step_copies): the same weights and moments, bit for
 *    bit, as sf_adamw_step, and each copy the updated weight rounded to bf16 (a copy of a
 *    frozen view, or a view without one, untouched).
 */
#include "gradcheck.h"
#include "sfvit/optim.h"
#include "sfvit/precision.h"

#include <float.h>
#include <omp.h>

/* big (decays, 300k floats: over the threading threshold), bias (no decay), frozen (not
 * trainable), small (decays, 7 floats) */
static void build(sf_params *ps) {
    sf_params_init(ps);
    sf_param_add(ps, "big", 2, (int[]){600, 500}, SF_PARAM_TRAINABLE | SF_PARAM_DECAY | SF_PARAM_DECAY_OFFICIAL,
                 SF_INIT_ZEROS, 0);
    sf_param_add(ps, "bias", 1, (int[]){500}, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "frozen", 1, (int[]){1000}, 0, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "small", 1, (int[]){7}, SF_PARAM_TRAINABLE | SF_PARAM_DECAY | SF_PARAM_DECAY_OFFICIAL,
                 SF_INIT_ZEROS, 0);
    sf_params_alloc(ps);
}

static void fill_grads(sf_params *ps, sf_rng *r) {
    for (size_t j = 0; j < ps->total; j++) ps->grad[j] = 0.01f * sf_rng_normal(r);
}

/* Entries of x (ps->total, a gradient) inside a view that are not zero (fill_grads also
 * fills the gaps between views, which no step reads or writes). */
static long views_nonzero(const sf_params *ps, const float *x) {
    long n = 0;
    for (int i = 0; i < ps->count; i++)
        for (size_t k = ps->list[i].offset; k < ps->list[i].offset + ps->list[i].t->numel; k++) n += x[k] != 0.0f;
    return n;
}

static void test_adamw(void) {
    sf_params ps;
    build(&ps);
    sf_rng r;
    sf_rng_seed(&r, 3);
    const size_t n = ps.total;
    double *w = malloc(n * sizeof *w), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
    for (size_t j = 0; j < n; j++) w[j] = ps.data[j] = sf_rng_normal(&r);
    const sf_optim_cfg o = {.lr = 1e-3f, .weight_decay = 0.05f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                            .decay_mask = "sfvit"};
    double worst = 0;
    int frozen_moved = 0;
    long grads_left = 0; /* gradients not zero after an update */
    float *grad = malloc(n * sizeof *grad);
    for (long t = 1; t <= 5; t++) {
        fill_grads(&ps, &r);
        memcpy(grad, ps.grad, n * sizeof *grad); /* the update zeroes ps.grad */
        const float lr = o.lr * (float)t; /* a schedule: the lr changes every step */
        sf_adamw_step(&ps, &o, lr, t);
        grads_left += views_nonzero(&ps, ps.grad);
        const double bc1 = 1 - pow(o.beta1, (double)t), bc2 = 1 - pow(o.beta2, (double)t);
        for (int i = 0; i < ps.count; i++) {
            const sf_param *p = &ps.list[i];
            for (size_t k = p->offset; k < p->offset + p->t->numel; k++) {
                if (!(p->flags & SF_PARAM_TRAINABLE)) {
                    frozen_moved += ps.data[k] != (float)w[k];
                    continue;
                }
                const double g = grad[k];
                if (p->flags & SF_PARAM_DECAY) w[k] *= 1 - (double)lr * o.weight_decay;
                m[k] = o.beta1 * m[k] + (1 - o.beta1) * g;
                v[k] = o.beta2 * v[k] + (1 - o.beta2) * g * g;
                w[k] -= lr * (m[k] / bc1) / (sqrt(v[k] / bc2) + o.eps);
                /* relative to the step size: a wrong term moves w by ~lr */
                const double err = fabs(ps.data[k] - w[k]) / lr;
                if (err > worst) worst = err;
                w[k] = ps.data[k]; /* follow the float trajectory: errors do not accumulate */
            }
        }
    }
    CHECK(worst < 1e-3, "AdamW within 1e-3 of a step of the double reference (worst %.3g)", worst);
    CHECK(frozen_moved == 0, "frozen view untouched (%d moved)", frozen_moved);
    CHECK(grads_left == 0, "AdamW leaves every gradient zero, frozen views' too (%ld not)", grads_left);
    printf("  AdamW, 5 steps: worst error %.2g of a step\n", worst);
    free(grad);
    free(w);
    free(m);
    free(v);
    sf_params_free(&ps);
}

static void test_norm(void) {
    sf_params ps;
    build(&ps);
    sf_rng r;
    sf_rng_seed(&r, 4);
    fill_grads(&ps, &r);
    ps.grad[sf_params_find(&ps, "frozen")->offset] = 1e6f; /* must not count */
    double want = 0;
    for (int i = 0; i < ps.count; i++) {
        const sf_param *p = &ps.list[i];
        if (p->flags & SF_PARAM_TRAINABLE)
            for (size_t k = p->offset; k < p->offset + p->t->numel; k++) want += (double)ps.grad[k] * ps.grad[k];
    }
    want = sqrt(want);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const double one = sf_grad_norm(&ps);
    omp_set_num_threads(2);
    const double two = sf_grad_norm(&ps);
    omp_set_num_threads(threads);
    CHECK(fabs(two - want) <= 1e-12 * want, "norm %.17g against the double sum %.17g", two, want);
    CHECK(memcmp(&one, &two, sizeof one) == 0, "norm on 1 and 2 threads bit for bit (%.17g, %.17g)", one, two);
    sf_params_free(&ps);
}

static void test_finite(void) {
    sf_params ps;
    build(&ps);
    const size_t big = sf_params_find(&ps, "big")->offset, bias = sf_params_find(&ps, "bias")->offset;
    const size_t small = sf_params_find(&ps, "small")->offset, nbig = 600 * 500;
    sf_params_zero_grad(&ps);
    ps.grad[big] = -0.0f;
    ps.grad[big + 1] = FLT_MAX;
    ps.grad[big + 2] = -FLT_MAX;
    ps.grad[big + 3] = 1e-45f; /* denormal */
    ps.grad[sf_params_find(&ps, "frozen")->offset + 5] = NAN; /* not a trainable view */
    CHECK(sf_grad_first_nonfinite(&ps) == NULL, "-0, ±FLT_MAX, a denormal: finite; a frozen view's NaN ignored");
    const struct {
        size_t at;
        float value;
        const char *view;
    } cases[] = {
        {big, NAN, "big"},           {big + nbig / 2, INFINITY, "big"}, {big + nbig - 1, -INFINITY, "big"},
        {bias + 499, NAN, "bias"},   {small + 6, INFINITY, "small"},    {small, -NAN, "small"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const float keep = ps.grad[cases[c].at];
        ps.grad[cases[c].at] = cases[c].value;
        const char *got = sf_grad_first_nonfinite(&ps);
        CHECK(got && !strcmp(got, cases[c].view), "%g at element %zu: named %s (want %s)", (double)cases[c].value,
              cases[c].at, got ? got : "nothing", cases[c].view);
        ps.grad[cases[c].at] = keep;
    }
    ps.grad[small] = NAN;
    ps.grad[big + 7] = INFINITY;
    const char *first = sf_grad_first_nonfinite(&ps);
    CHECK(first && !strcmp(first, "big"), "two bad views: the first registered is named (%s)", first ? first : "none");
    sf_params_free(&ps);
}

static void test_scale_zero(void) {
    sf_params ps;
    build(&ps);
    sf_rng r;
    sf_rng_seed(&r, 6);
    fill_grads(&ps, &r);
    float *before = malloc(ps.total * sizeof *before);
    memcpy(before, ps.grad, ps.total * sizeof *before);
    sf_grad_scale(&ps, 0.5f);
    long wrong = 0;
    for (int i = 0; i < ps.count; i++) {
        const sf_param *p = &ps.list[i];
        const float s = p->flags & SF_PARAM_TRAINABLE ? 0.5f : 1.0f;
        for (size_t k = p->offset; k < p->offset + p->t->numel; k++) wrong += ps.grad[k] != before[k] * s;
    }
    CHECK(wrong == 0, "scale: every trainable gradient halved, frozen ones kept (%ld wrong)", wrong);
    sf_params_zero_grad(&ps);
    long nonzero = 0;
    for (size_t k = 0; k < ps.total; k++) nonzero += ps.grad[k] != 0.0f;
    CHECK(nonzero == 0, "zero_grad: %ld of %zu entries left", nonzero, ps.total);
    free(before);
    sf_params_free(&ps);
}

static void test_adamw_copies(void) {
    sf_params a, b;
    build(&a);
    build(&b);
    sf_rng r;
    sf_rng_seed(&r, 8);
    for (size_t j = 0; j < a.total; j++) a.data[j] = b.data[j] = sf_rng_normal(&r);
    /* copies for big (trainable), frozen and small; none for bias */
    uint16_t *copies[4] = {0}, *slots = malloc(a.total * sizeof *slots);
    for (size_t j = 0; j < a.total; j++) slots[j] = 0xabcd;
    long grads_left = 0;
    for (int i = 0; i < a.count; i++)
        if (strcmp(a.list[i].t->name, "bias") != 0) copies[i] = slots + a.list[i].offset;
    const sf_optim_cfg o = {.lr = 1e-3f, .weight_decay = 0.05f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                            .decay_mask = "sfvit"};
    for (long t = 1; t <= 3; t++) {
        fill_grads(&a, &r);
        memcpy(b.grad, a.grad, a.total * sizeof *a.grad);
        sf_adamw_step(&a, &o, o.lr, t);
        sf_adamw_step_copies(&b, &o, o.lr, t, copies);
        grads_left += views_nonzero(&b, b.grad);
    }
    CHECK(!memcmp(a.data, b.data, a.total * 4) && !memcmp(a.m, b.m, a.total * 4) && !memcmp(a.v, b.v, a.total * 4),
          "AdamW with copies: weights and moments bit for bit those of sf_adamw_step");
    long wrong = 0, touched = 0;
    for (int i = 0; i < b.count; i++) {
        const sf_param *p = &b.list[i];
        const int written = copies[i] && (p->flags & SF_PARAM_TRAINABLE);
        for (size_t k = p->offset; k < p->offset + p->t->numel; k++) {
            if (written) wrong += slots[k] != sf_bf16_from_f32(b.data[k]);
            else touched += slots[k] != 0xabcd;
        }
    }
    CHECK(wrong == 0, "AdamW with copies: every copy is its updated weight in bf16 (%ld wrong)", wrong);
    CHECK(touched == 0, "AdamW with copies: frozen views and views without a copy untouched (%ld written)", touched);
    CHECK(grads_left == 0, "AdamW with copies leaves every gradient zero (%ld not)", grads_left);
    free(slots);
    sf_params_free(&a);
    sf_params_free(&b);
}

int main(void) {
    sf_threads_init(0);
    test_adamw();
    test_norm();
    test_finite();
    test_scale_zero();
    test_adamw_copies();
    return test_summary("optim");
}
