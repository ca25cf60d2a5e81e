/* bench.c — `sfvit bench CONFIG [key=value ...] [--steps N]`: random data at the config's
 * batch size and resolution; warm-up, then timed training steps as the trainer runs them
 * (forward, backward, then the update: the finite-gradient check, AdamW and zeroing the
 * gradients for the next step) and timed inference batches. Prints per-phase times, GFLOP/s
 * and the fraction of an sgemm peak measured here on the model's largest product, then the
 * two lines `train_img_per_s X` and `infer_img_per_s Y` that bench/compare reads, and the process's
 * peak resident set after the training steps (`train_peak_rss_mib`, from /proc/self/status
 * VmHWM, read before any inference batch) next to the resident set before the model was built
 * (`base_rss_mib`), the work per image (`train_gflop_per_img`, `infer_gflop_per_img`) and the
 * measured sgemm rate (`sgemm_peak_gflops`). `--no-infer` skips the inference batches.
 * `--no-products` times the steps with every product kernel skipped (sf_products_skip): what
 * the rest of a step costs, the floor that faster product kernels (AMX) approach, and what
 * the step's products would add at the sgemm and bf16 rates measured here.
 * `--alternate KEY=VALUE` times the configured run against one setting changed, step by step
 * in this process (cli/bench_alternate.c); `--token-sweep` is the scaling sweep over token
 * counts (cli/sweep.c). */
#include <stdlib.h>
#include <string.h>

#include "sfvit/optim.h"
#include "cli.h"
#include "sfvit/precision.h"

double cli_proc_status_mib(const char *field) {
    const double bytes = sf_proc_value("/proc/self/status", field);
    return bytes > 0 ? bytes / 1048576.0 : 0.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int cli_bench_step(sf_ctx *g, const sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels,
                   long step, int copies_current, double t[3]) {
    g->training = 1;
    g->grad_enabled = 1;
    double t0 = sf_now();
    if (!copies_current) sf_precision_weights_refresh(ps);
    sf_tensor *logits = sf_model_forward(g, m, x);
    sf_tensor *loss = sf_cross_entropy(g, logits, labels, NULL, cfg->aug.smoothing);
    double t1 = sf_now();
    sf_backward(g, loss);
    double t2 = sf_now();
    /* the trainer's update: it stops on a NaN/Inf gradient and steps; the step leaves the
     * gradients zero for the next one */
    if (sf_grad_first_nonfinite(ps)) sf_warn("bench: a gradient is not finite at step %ld", step);
    copies_current = sf_precision_adamw_step(ps, &cfg->optim, 1e-6f, step);
    double t3 = sf_now();
    sf_ctx_reset(g);
    t[0] = t1 - t0, t[1] = t2 - t1, t[2] = t3 - t2;
    return copies_current;
}

/* What one bench run measured (medians over the timed steps, seconds). */
typedef struct bench_result {
    double forward, backward, optimizer, inference;
    size_t arena_peak;  /* bytes of activations at a training step's peak */
    double arena_estimate; /* the same as estimated before the first step (train/memory.c) */
    double train_rss;   /* MiB, process peak after the training steps */
    long prims_warmup, prims_total, dnnl_runs; /* oneDNN primitives created, products run */
    long packed; /* of those products, the ones that packed their weight from fp32 */
    /* oneDNN's kernels at the first timed step and after the last */
    sf_dnnl_kernel kernels_before[SF_DNNL_MAX_KERNELS], kernels_after[SF_DNNL_MAX_KERNELS];
    int n_kernels_before, n_kernels_after;
    long small_runs, small_macs; /* bf16 products too small for oneDNN, on fp32 kernels (timed steps) */
} bench_result;

/* Timed training steps then inference batches of model m on the random batch (x, labels). */
static void bench_run(const sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels, int warmup,
                      int steps, int infer, bench_result *r) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    double *tf = sf_calloc((size_t)steps, sizeof(double)), *tb = sf_calloc((size_t)steps, sizeof(double));
    double *to = sf_calloc((size_t)steps, sizeof(double)), *ti = sf_calloc((size_t)steps, sizeof(double));
    sf_params_zero_grad(ps);
    long prims_before, runs_before; /* the memory probe's, not counted */
    sf_dnnl_stats(&prims_before, &runs_before);
    const long packed_before = sf_dnnl_weights_packed();
    int copies_current = 0; /* bf16: the last update wrote the weights' copies, as in the trainer */
    for (int s = -warmup; s < steps; s++) {
        if (s == 0) {
            sf_dnnl_stats(&r->prims_warmup, NULL);
            r->n_kernels_before = sf_dnnl_kernels(r->kernels_before, SF_DNNL_MAX_KERNELS);
            sf_bf16_small_stats(&r->small_runs, &r->small_macs);
            sf_profile_reset();
        }
        sf_profile_mark();
        double t[3];
        copies_current = cli_bench_step(&g, cfg, m, ps, x, labels, s + warmup + 1, copies_current, t);
        if (s >= 0) tf[s] = t[0], tb[s] = t[1], to[s] = t[2];
    }
    r->arena_peak = sf_ctx_arena_peak(&g);
    r->train_rss = cli_proc_status_mib("VmHWM");
    sf_dnnl_stats(&r->prims_total, &r->dnnl_runs);
    r->n_kernels_after = sf_dnnl_kernels(r->kernels_after, SF_DNNL_MAX_KERNELS);
    long small_runs, small_macs;
    sf_bf16_small_stats(&small_runs, &small_macs);
    r->small_runs = small_runs - r->small_runs, r->small_macs = small_macs - r->small_macs;
    r->prims_warmup -= prims_before;
    r->prims_total -= prims_before;
    r->dnnl_runs -= runs_before;
    r->packed = sf_dnnl_weights_packed() - packed_before;
    sf_precision_weights_refresh(ps); /* bf16: once for every batch, as sfvit eval does */
    for (int s = -warmup; s < steps && infer; s++) {
        g.training = 0;
        g.grad_enabled = 0;
        double t0 = sf_now();
        sf_model_forward(&g, m, x);
        double t1 = sf_now();
        sf_ctx_reset(&g);
        if (s >= 0) ti[s] = t1 - t0;
    }
    sf_bf16_weights_clear();
    r->forward = cli_median(tf, steps);
    r->backward = cli_median(tb, steps);
    r->optimizer = cli_median(to, steps);
    r->inference = cli_median(ti, steps);
    free(tf);
    free(tb);
    free(to);
    free(ti);
    sf_ctx_free(&g);
}

/* The oneDNN kernels the timed training steps ran: products and share of oneDNN's multiply-adds
 * on each, and a warning when any of them is a slow (reference) kernel. */
static void bench_report_kernels(const bench_result *r) {
    long total = 0, bf16_total = 0;
    long runs[SF_DNNL_MAX_KERNELS], macs[SF_DNNL_MAX_KERNELS];
    for (int i = 0; i < r->n_kernels_after; i++) {
        const sf_dnnl_kernel *k = &r->kernels_after[i];
        runs[i] = k->runs, macs[i] = k->macs;
        for (int j = 0; j < r->n_kernels_before; j++)
            if (r->kernels_before[j].bf16 == k->bf16 && !strcmp(r->kernels_before[j].impl, k->impl))
                runs[i] -= r->kernels_before[j].runs, macs[i] -= r->kernels_before[j].macs;
        total += macs[i];
        if (k->bf16) bf16_total += macs[i];
    }
    if (r->small_runs > 0)
        printf("  bf16 products too small for oneDNN, on fp32 kernels (SFVIT_BF16_SMALL_MACS=%ld): %ld in the timed "
               "steps, %.1f%% of the bf16 products' MACs\n",
               sf_bf16_small_macs_get(), r->small_runs,
               100.0 * (double)r->small_macs / (double)(bf16_total + r->small_macs));
    if (total <= 0) return;
    printf("  oneDNN kernels in the timed steps:");
    long slow = 0;
    const char *sep = " ";
    for (int i = 0; i < r->n_kernels_after; i++) {
        if (runs[i] <= 0) continue;
        const sf_dnnl_kernel *k = &r->kernels_after[i];
        printf("%s%s %s %ld products (%.1f%% of the MACs)%s", sep, k->impl, k->bf16 ? "bf16" : "f32", runs[i],
               100.0 * (double)macs[i] / (double)total, k->slow ? " SLOW" : "");
        if (k->slow) slow += runs[i];
        sep = "; ";
    }
    printf("\n");
    if (slow)
        printf("  warning: %ld products ran on oneDNN's reference kernel (SLOW above): the step time is not what "
               "this CPU can do\n",
               slow);
}

static void bench_report(const sf_config *cfg, const bench_result *r, int threads, int infer, int no_products,
                         size_t param_floats, double base_rss) {
    const sf_model_cfg *mc = &cfg->model;
    const int B = cfg->train.batch_size, C = mc->in_chans, S = mc->img_size;
    const double train = r->forward + r->backward + r->optimizer, inf = r->inference;
    const double macs = sf_model_macs(mc); /* per image, forward */
    /* Training ≈ 3 forward passes of products (forward, and two products per weight in backward). */
    const double train_gflops = 3.0 * 2.0 * macs * B / train * 1e-9, infer_gflops = 2.0 * macs * B / inf * 1e-9;
    int rows, hidden, width; /* the model's largest product */
    sf_model_largest_product(mc, B, &rows, &hidden, &width);
    double peak = sf_gemm_rate(0, rows, hidden, width);
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("sfvit bench: %s  batch %d  %dx%dx%d  threads %d  OPENBLAS_CORETYPE=%s%s\n",
           mc->name[0] ? mc->name : "vit", B, C, S, S, threads, core ? core : "(unset)",
           no_products ? "  (--no-products: every product kernel skipped)" : "");
    printf("  %-22s %10s\n", "phase", "ms (median)");
    printf("  %-22s %10.1f\n", "forward", r->forward * 1e3);
    printf("  %-22s %10.1f\n", "backward", r->backward * 1e3);
    printf("  %-22s %10.1f\n", "update", r->optimizer * 1e3);
    printf("  %-22s %10.1f\n", "train step", train * 1e3);
    printf("  %-22s %10.1f\n", "inference batch", inf * 1e3);
    /* bf16 products: the rate of the largest product with bf16 operands, where native. */
    const char *why = NULL;
    double bf16_peak = sf_dnnl_bf16_native(&why) ? sf_gemm_rate(1, rows, hidden, width) : 0.0;
    if (no_products) {
        /* The step's products at a rate R would add their work / R to the step timed here. */
        const double work = 3.0 * 2.0 * macs * B * 1e-9; /* GFLOP */
        printf("  without its product kernels; the products (%.1f GFLOP a training step) would add %.0f ms at the "
               "sgemm peak below",
               work, work / peak * 1e3);
        if (bf16_peak > 0) printf(", %.0f ms at the bf16 ceiling", work / bf16_peak * 1e3);
        printf("\n");
    } else {
        printf("  forward MACs/image %.3f G; train %.1f GFLOP/s, inference %.1f GFLOP/s\n", macs * 1e-9, train_gflops,
               infer ? infer_gflops : 0.0);
    }
    printf("  sgemm peak on the largest product (%d x %d x %d): %.1f GFLOP/s", rows, hidden, width, peak);
    if (!no_products)
        printf(" -> train at %.0f%%, inference at %.0f%%", 100 * train_gflops / peak,
               infer ? 100 * infer_gflops / peak : 0.0);
    printf("\n");
    printf("  activation arena peak %.1f MiB (estimated before the first step: %.1f MiB), parameters %.1f MiB (x4 "
           "with grads and moments)\n",
           r->arena_peak / 1048576.0, r->arena_estimate / 1048576.0, param_floats * 4.0 / 1048576.0);
    if (r->dnnl_runs > 0 || r->packed > 0) /* --no-products still packs (the work around a product) */
        printf("  oneDNN: %ld primitives created in the warm-up steps, %ld more in the timed steps (%ld products run, "
               "%ld of them on a weight packed from fp32)\n",
               r->prims_warmup, r->prims_total - r->prims_warmup, r->dnnl_runs, r->packed);
    bench_report_kernels(r);
    if (bf16_peak > 0)
        printf("  bf16 product ceiling (%d x %d x %d, oneDNN): %.1f GFLOP/s%s\n", rows, hidden, width, bf16_peak,
               sf_precision_get() == SF_PREC_BF16 && sf_bf16_products_get() == SF_BF16_PRODUCTS_FP32
                   ? " (not this run's: its bf16 products ran on fp32 kernels, whose ceiling is the sgemm peak above)"
                   : "");
    else
        printf("  bf16 product ceiling: no native bf16 (%s)\n", why);
    sf_profile_report(stdout, sf_op_name);
    printf("train_img_per_s %.2f\n", B / train);
    printf("infer_img_per_s %.2f\n", infer ? B / inf : 0.0);
    printf("train_peak_rss_mib %.1f\n", r->train_rss);
    /* For bench/compare's ceiling: the work per image as counted above, and the sgemm rate. */
    printf("train_gflop_per_img %.3f\n", 3.0 * 2.0 * macs * 1e-9);
    printf("infer_gflop_per_img %.3f\n", 2.0 * macs * 1e-9);
    printf("sgemm_peak_gflops %.1f\n", peak);
    printf("bf16_peak_gflops %.1f\n", bf16_peak);
    printf("precision %s\n", sf_precision_name(sf_precision_get()));
    printf("base_rss_mib %.1f\n", base_rss);
}

/* A training step of B images against what this process may use (train/memory.c): an error
 * naming train.batch_size before any step, instead of the kernel's out-of-memory kill. */
static int bench_check_memory(sf_model *m, sf_params *ps, const sf_model_cfg *mc, int B, double *arena_estimate) {
    const char *source = NULL;
    const double avail = sf_memory_available(&source);
    if (avail == -2.0) return -1;
    sf_memory_need step = {0};
    sf_memory_probe(m, ps, mc, B, &step, NULL); /* also where nothing is checked: the report shows it */
    *arena_estimate = sf_memory_at(&step, B);
    const double image = (double)mc->in_chans * mc->img_size * mc->img_size * sizeof(float);
    /* held now, the gradients and moments, the random batch */
    const sf_memory_need run = {sf_memory_held() + 3.0 * ps->total * sizeof(float) + step.fixed,
                                step.per_image + image};
    const double need = sf_memory_at(&run, B);
    if (avail < 0 || need <= avail) return 0;
    char s1[32], s2[32];
    sf_error("train.batch_size=%d: a training step on %d images needs about %s (%.2f MiB per image), and this "
             "process may use %s (%s)",
             B, B, sf_memory_str(need, s1), run.per_image / 1048576.0, sf_memory_str(avail, s2), source);
    const int fit = sf_memory_fit(&run, avail);
    if (fit > 0)
        sf_hint("train.batch_size=%d fits (sfvit bench times one batch of train.batch_size images; bench/compare "
                "uses 8)", fit);
    else
        sf_hint("not even one image fits: a smaller model or model.img_size");
    return -1;
}

int sf_cmd_bench(int argc, char **argv) {
    cli_args args;
    if (cli_parse("bench", argc, argv, &args)) return 2;
    if (cli_get(&args, "bench", "--token-sweep") && cli_get(&args, "bench", "--alternate")) {
        cli_args_free(&args);
        return cli_usage_error("bench", "--alternate times the training steps of a config, not --token-sweep");
    }
    if (cli_get(&args, "bench", "--token-sweep")) return cli_bench_token_sweep(&args);
    for (const char *const *f = (const char *const[]){"-o", "--kinds", "--tokens", "--dh", "--heads", "--mem-cap", "--min-time", NULL}; *f; f++)
        if (cli_get(&args, "bench", *f)) {
            cli_args_free(&args);
            return cli_usage_error("bench", "%s belongs to --token-sweep", *f);
        }
    const char *config_path = args.n_pos ? args.pos[0] : NULL, *s_steps = cli_get(&args, "bench", "--steps"),
               *s_warmup = cli_get(&args, "bench", "--warmup");
    char **overrides = args.over;
    const int n_over = args.n_over, steps = s_steps ? atoi(s_steps) : 5, warmup = s_warmup ? atoi(s_warmup) : 2,
              infer = !cli_get(&args, "bench", "--no-infer"), no_products = cli_get(&args, "bench", "--no-products") != NULL;
    const char *alternate = cli_get(&args, "bench", "--alternate");
    cli_args_free(&args); /* the values stay: they are argv's own strings */
    if (!config_path || steps < 1) {
        sf_error("bench: usage: sfvit bench CONFIG.yaml [key=value ...] [--steps N] [--warmup N] [--no-infer] [--no-products] "
                 "[--alternate KEY=VALUE]"
                 "  |  sfvit bench --token-sweep [-o sweep.csv] [...]");
        return 2;
    }
    sf_config cfg;
    if (sf_config_load(&cfg, config_path, n_over, overrides) != 0 || sf_config_validate(&cfg) != 0) return 1;
    const int threads = sf_threads_init(cfg.train.threads);
    if (alternate) printf("A, as configured:\n");
    if (sf_precision_setup(&cfg, 1) != 0) return 1;
    const double base_rss = cli_proc_status_mib("VmRSS");
    const sf_model_cfg *mc = &cfg.model;
    const int B = cfg.train.batch_size;

    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = sf_model_build(mc, &ps);
    if (!m) return 1;
    sf_params_alloc(&ps);
    sf_rng rng;
    sf_rng_seed(&rng, cfg.train.seed + 17);
    sf_model_init(m, &ps, &rng);
    double arena_estimate = 0;
    if (bench_check_memory(m, &ps, mc, B, &arena_estimate) != 0) {
        sf_model_free(m);
        sf_params_free(&ps);
        return 1;
    }
    /* one random batch, reused by every step */
    sf_tensor x = {.ndim = 4, .shape = {B, mc->in_chans, mc->img_size, mc->img_size}};
    x.numel = (size_t)B * mc->in_chans * mc->img_size * mc->img_size;
    x.data = sf_aligned_alloc(x.numel * sizeof(float));
    for (size_t i = 0; i < x.numel; i++) x.data[i] = sf_rng_normal(&rng);
    int *labels = sf_malloc((size_t)B * sizeof(int));
    for (int i = 0; i < B; i++) labels[i] = (int)sf_rng_below(&rng, (uint32_t)mc->num_classes);

    int rc = 0;
    sf_products_skip(no_products);
    if (alternate) {
        rc = cli_bench_alternate(&cfg, m, &ps, &x, labels, warmup, steps, alternate, threads);
        sf_products_skip(0);
    } else {
        bench_result r;
        bench_run(&cfg, m, &ps, &x, labels, warmup, steps, infer, &r);
        sf_products_skip(0);
        r.arena_estimate = arena_estimate;
        bench_report(&cfg, &r, threads, infer, no_products, ps.total, base_rss);
    }
    free(x.data);
    free(labels);
    sf_model_free(m);
    sf_params_free(&ps);
    return rc;
}
