/* epilogue.c — does a linear layer's bias and GELU pay as oneDNN post-ops?
 *
 * An MLP's first layer, h = GELU(x W^T + b), three ways, in milliseconds per call:
 *   sfvit      sf_linear (the bias seeds the output, the product accumulates onto it) and then
 *              sf_gelu, a second pass over h: what training and evaluation run today;
 *   oneDNN     one oneDNN matmul with the bias, then the same sf_gelu pass;
 *   fused      one oneDNN matmul with the bias and GELU (erf) as post-ops: h is written once.
 * And the GELU pass alone, so its share of the layer is visible. With bf16 operands (where
 * oneDNN has native bf16) the oneDNN and fused columns are repeated: once the product is 2-8x
 * faster, the pass over h is a larger share of the layer.
 *
 * Training cannot take the fused form as it is: GELU's backward reads its input x W^T + b,
 * which the post-op never writes. So the question this answers is for inference (eval,
 * predict) and for the bias; docs/precision.md has the numbers.
 *
 *   SFVIT_THREADS=2 build/bench/epilogue [ROUNDS]
 *
 * Each row also prints the largest difference between the fused and the sfvit output, so a
 * wrong post-op setup shows as a number, not as a fast row. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/ops.h"
#include "sfvit/precision.h"

#ifdef SFVIT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

typedef struct {
    const char *name;
    int R, I, O; /* rows (batch x tokens), in and out features */
} layer;

static const layer layers[] = {
    {"DeiT-S fc1, batch 8 (training batch)", 1576, 384, 1536},
    {"DeiT-S fc1, batch 1 (inference)", 197, 384, 1536},
    {"Fashion-MNIST model fc1, batch 32", 512, 96, 192},
    {"study ViT fc1, batch 32 (N = 50)", 1600, 64, 128},
};

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
} dnnl_env;

/* y (R, O) = act(x (R, I) W^T + b): W stored (O, I) row-major as the models keep it. */
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t x, w, b, y;
} fused_linear;

static int fused_create(const dnnl_env *env, const layer *l, dnnl_data_type_t dt, int gelu, fused_linear *f) {
    dnnl_memory_desc_t xd, wd, bd, yd;
    dnnl_dims_t xdims = {l->R, l->I}, wdims = {l->I, l->O}, bdims = {1, l->O}, ydims = {l->R, l->O};
    dnnl_dims_t xs = {l->I, 1}, ws = {1, l->I}, bs = {l->O, 1}, ys = {l->O, 1};
    if (dnnl_memory_desc_init_by_strides(&xd, 2, xdims, dt, xs) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&wd, 2, wdims, dt, ws) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_f32, bs) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&yd, 2, ydims, dnnl_f32, ys) != dnnl_success)
        return -1;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &xd, &wd, &bd, &yd) != dnnl_success) return -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && gelu)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, env->engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&f->prim, pd) == dnnl_success;
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (!ok) return -1;
    return dnnl_memory_create(&f->x, &xd, env->engine, DNNL_MEMORY_NONE) == dnnl_success &&
                   dnnl_memory_create(&f->w, &wd, env->engine, DNNL_MEMORY_NONE) == dnnl_success &&
                   dnnl_memory_create(&f->b, &bd, env->engine, DNNL_MEMORY_NONE) == dnnl_success &&
                   dnnl_memory_create(&f->y, &yd, env->engine, DNNL_MEMORY_NONE) == dnnl_success
               ? 0
               : -1;
}

static void fused_run(const dnnl_env *env, fused_linear *f, const void *x, const void *w, const float *b, float *y) {
    dnnl_memory_set_data_handle(f->x, (void *)x);
    dnnl_memory_set_data_handle(f->w, (void *)w);
    dnnl_memory_set_data_handle(f->b, (void *)b);
    dnnl_memory_set_data_handle(f->y, y);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, f->x}, {DNNL_ARG_WEIGHTS, f->w}, {DNNL_ARG_BIAS, f->b}, {DNNL_ARG_DST, f->y}};
    if (dnnl_primitive_execute(f->prim, env->stream, 4, args) != dnnl_success || dnnl_stream_wait(env->stream) != dnnl_success) {
        fprintf(stderr, "epilogue: oneDNN matmul failed\n");
        exit(1);
    }
}

static void fused_free(fused_linear *f) {
    dnnl_primitive_destroy(f->prim);
    dnnl_memory_destroy(f->x);
    dnnl_memory_destroy(f->w);
    dnnl_memory_destroy(f->b);
    dnnl_memory_destroy(f->y);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What one timed call runs. */
typedef enum { RUN_SFVIT, RUN_GELU, RUN_DNNL_THEN_GELU, RUN_FUSED } run_kind;

typedef struct {
    const dnnl_env *env;
    sf_ctx *g;
    sf_tensor *x, *w, *b; /* fp32, the sfvit path's */
    const void *x_op, *w_op; /* the oneDNN operands: fp32 or bf16 copies */
    fused_linear *plain, *fused;
    float *y;           /* (R, O) output of the oneDNN runs */
    sf_tensor *y_view;  /* y as a tensor, for the GELU pass after the oneDNN product */
} bench_case;

static void run_once(bench_case *c, run_kind k) {
    switch (k) {
    case RUN_SFVIT: sf_gelu(c->g, sf_linear(c->g, c->x, c->w, c->b)); break;
    case RUN_GELU: sf_gelu(c->g, c->y_view); break;
    case RUN_DNNL_THEN_GELU:
        fused_run(c->env, c->plain, c->x_op, c->w_op, c->b->data, c->y);
        sf_gelu(c->g, c->y_view);
        break;
    case RUN_FUSED: fused_run(c->env, c->fused, c->x_op, c->w_op, c->b->data, c->y); break;
    }
    sf_ctx_reset(c->g);
}

/* Median ms per call over rounds, after one untimed call; a round lasts a few ms at least. */
static double time_ms(bench_case *c, run_kind k, int rounds, const layer *l) {
    run_once(c, k);
    int reps = (int)(4e6 / ((double)l->R * l->I * l->O)) + 1;
    double *t = sf_calloc((size_t)rounds, sizeof *t);
    for (int r = 0; r < rounds; r++) {
        double t0 = sf_now();
        for (int i = 0; i < reps; i++) run_once(c, k);
        t[r] = (sf_now() - t0) / reps * 1e3;
    }
    qsort(t, (size_t)rounds, sizeof *t, cmp_double);
    double med = t[rounds / 2];
    free(t);
    return med;
}

static sf_tensor *filled(int d0, int d1, sf_rng *rng, float std) {
    sf_tensor *t = sf_calloc(1, sizeof *t);
    t->ndim = 2;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->numel = (size_t)d0 * d1;
    t->data = sf_aligned_alloc(t->numel * sizeof(float));
    for (size_t i = 0; i < t->numel; i++) t->data[i] = std * sf_rng_normal(rng);
    return t;
}

static void tensor_free(sf_tensor *t) {
    free(t->data);
    free(t);
}

/* Largest |fused - sfvit| over the layer's output, relative to the largest |sfvit|. */
static double fused_error(bench_case *c, const layer *l) {
    sf_tensor *ref = sf_gelu(c->g, sf_linear(c->g, c->x, c->w, c->b));
    fused_run(c->env, c->fused, c->x_op, c->w_op, c->b->data, c->y);
    double err = 0, top = 0;
    for (size_t i = 0; i < (size_t)l->R * l->O; i++) {
        err = fmax(err, fabs((double)c->y[i] - ref->data[i]));
        top = fmax(top, fabs((double)ref->data[i]));
    }
    sf_ctx_reset(c->g);
    return top > 0 ? err / top : err;
}

/* One layer in one operand type: the oneDNN and fused columns (and, in f32, sfvit's). */
static int bench_layer(const dnnl_env *env, const layer *l, dnnl_data_type_t dt, int rounds, sf_rng *rng) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 0;
    bench_case c = {env, &g, filled(l->R, l->I, rng, 1.0f), filled(l->O, l->I, rng, 1.0f / sqrtf((float)l->I)),
                    filled(1, l->O, rng, 0.1f), NULL, NULL, NULL, NULL, NULL, NULL};
    c.b->ndim = 1;
    c.b->shape[0] = l->O;
    c.b->shape[1] = 1;
    uint16_t *x16 = NULL, *w16 = NULL;
    if (dt == dnnl_bf16) {
        x16 = sf_aligned_alloc(c.x->numel * sizeof *x16);
        w16 = sf_aligned_alloc(c.w->numel * sizeof *w16);
        sf_bf16_convert(c.x->data, x16, c.x->numel);
        sf_bf16_convert(c.w->data, w16, c.w->numel);
        c.x_op = x16, c.w_op = w16;
    } else {
        c.x_op = c.x->data, c.w_op = c.w->data;
    }
    sf_tensor *y = filled(l->R, l->O, rng, 1.0f);
    c.y = y->data;
    c.y_view = y;
    fused_linear plain, fused;
    if (fused_create(env, l, dt, 0, &plain) != 0 || fused_create(env, l, dt, 1, &fused) != 0) {
        printf("%-38s %-4s oneDNN cannot build this matmul\n", l->name, dt == dnnl_bf16 ? "bf16" : "f32");
        sf_ctx_free(&g);
        return -1;
    }
    c.plain = &plain, c.fused = &fused;
    const double err = fused_error(&c, l);
    const double t_gelu = time_ms(&c, RUN_GELU, rounds, l);
    const double t_dnnl = time_ms(&c, RUN_DNNL_THEN_GELU, rounds, l);
    const double t_fused = time_ms(&c, RUN_FUSED, rounds, l);
    char sfvit_col[32] = "–";
    if (dt == dnnl_f32) snprintf(sfvit_col, sizeof sfvit_col, "%.3f", time_ms(&c, RUN_SFVIT, rounds, l));
    printf("%-38s %-4s %10s %10.3f %14.3f %10.3f %8.2f %10.1e\n", l->name, dt == dnnl_bf16 ? "bf16" : "f32", sfvit_col,
           t_gelu, t_dnnl, t_fused, t_dnnl / t_fused, err);
    fused_free(&plain);
    fused_free(&fused);
    free(x16);
    free(w16);
    tensor_free(c.x);
    tensor_free(c.w);
    tensor_free(c.b);
    tensor_free(y);
    sf_ctx_free(&g);
    return 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1) rounds = 7;
    int threads = sf_threads_init(0);
    char desc[256];
    sf_dnnl_describe(desc, sizeof desc);
    printf("threads %d; %s\n", threads, desc);
    dnnl_env env;
    if (dnnl_engine_create(&env.engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&env.stream, env.engine, dnnl_stream_default_flags) != dnnl_success) {
        printf("oneDNN: no CPU engine\n");
        return 1;
    }
    const char *why = NULL;
    const int bf16 = sf_dnnl_bf16_native(&why);
    printf("ms per call (median of %d rounds). sfvit: sf_linear + sf_gelu; GELU pass: sf_gelu alone; "
           "oneDNN + GELU: matmul with bias, then sf_gelu; fused: bias and GELU as post-ops; "
           "gain = (oneDNN + GELU) / fused; error: largest |fused - sfvit| / largest |sfvit|\n",
           rounds);
    printf("%-38s %-4s %10s %10s %14s %10s %8s %10s\n", "layer (R x I -> O)", "ops", "sfvit", "GELU pass", "oneDNN + GELU",
           "fused", "gain", "error");
    sf_rng rng;
    sf_rng_seed(&rng, 11);
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        bench_layer(&env, &layers[i], dnnl_f32, rounds, &rng);
        if (bf16) bench_layer(&env, &layers[i], dnnl_bf16, rounds, &rng);
    }
    if (!bf16) printf("bf16 rows: none (%s)\n", why);
    dnnl_stream_destroy(env.stream);
    dnnl_engine_destroy(env.engine);
    return 0;
}

#else

int main(void) {
    printf("built without oneDNN: nothing to compare\n");
    return 0;
}

#endif
