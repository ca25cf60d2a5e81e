/* bench_alternate.c — `sfvit bench CONFIG [key=value ...] --alternate KEY=VALUE`: the run as
 * configured (A) and the same run with one setting changed (B), timed step by step in one
 * process, on the same model, weights and batch. Two runs of a command on a shared or
 * virtual machine differ by more than most changes worth measuring (±8 % between processes
 * on the 2-vCPU guests of docs/performance.md); steps a second apart in one process see the
 * same machine. Timed steps come in pairs AB, BA, AB, ... (each setting as often first as
 * second, so a drift in the machine's speed weighs on both alike), and after each switch one
 * untimed step lets the new setting settle (the weights' bf16 copies it reads are made then,
 * as a steady run has them from its last update). The verdict is the median of the pairs'
 * ratios B / A with its distribution-free 95 % interval (order statistics of the binomial
 * sign test), so no assumption about the spread of step times enters it.
 *
 * The settings that can change between steps of one model: train.precision (fp32 | bf16 |
 * bf16_emulated), train.bf16_products (onednn | fp32), model.sima_order (qk_first | kv_first |
 * auto), SFVIT_PACK_WEIGHTS (0 | 1) and SFVIT_BF16_SMALL_MACS (N), these two on oneDNN's
 * bf16 kernels only, SFVIT_GEMM (auto | onednn: the fp32 products' backend; openblas sets
 * OpenBLAS's own threads at start-up and cannot switch) and SFVIT_CONV_BANDS (0 | 1: large
 * im2col columns in bands of output rows). Each setting runs in its own
 * activation arena, so each arena's peak is that setting's; the process's peak RSS holds both
 * and is not printed. How many products each setting ran on oneDNN is printed with them. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sfvit/precision.h"

/* Everything a setting can change between two steps. */
typedef struct {
    sf_precision precision;
    sf_bf16_products products;
    sf_sima_order sima_order;
    int pack_weights;
    long small_macs;
    sf_gemm_backend gemm;
    int conv_bands;
} knobs;

static const char *const alternate_keys = "train.precision, train.bf16_products, model.sima_order, SFVIT_PACK_WEIGHTS, "
                                          "SFVIT_BF16_SMALL_MACS, SFVIT_GEMM, SFVIT_CONV_BANDS";

static knobs knobs_now(const sf_config *cfg) {
    return (knobs){sf_precision_get(), sf_bf16_products_get(), cfg->model.sima_order, sf_bf16_pack_weights_get(),
                   sf_bf16_small_macs_get(), sf_gemm_backend_get(), sf_conv2d_bands_get()};
}

/* Takes setting k for the steps that follow. The weights' bf16 copies of the other setting
 * are dropped: the next step makes the ones this setting reads. */
static void knobs_apply(const knobs *k, sf_model *m) {
    sf_precision_set(k->precision);
    sf_bf16_products_set(k->products);
    sf_bf16_pack_weights_set(k->pack_weights);
    sf_bf16_small_macs_set(k->small_macs);
    if (k->gemm != sf_gemm_backend_get()) sf_gemm_backend_set(k->gemm);
    sf_conv2d_bands_set(k->conv_bands);
    sf_model_set_sima_order(m, k->sima_order);
    sf_bf16_weights_clear();
}

/* The value of KEY in setting k, as a config or the environment writes it. */
static void knob_value(const char *key, const knobs *k, char *buf, size_t n) {
    if (!strcmp(key, "train.precision")) snprintf(buf, n, "%s", sf_precision_name(k->precision));
    else if (!strcmp(key, "train.bf16_products")) snprintf(buf, n, "%s", sf_bf16_products_name(k->products));
    else if (!strcmp(key, "model.sima_order")) snprintf(buf, n, "%s", sf_sima_order_names[k->sima_order]);
    else if (!strcmp(key, "SFVIT_PACK_WEIGHTS")) snprintf(buf, n, "%d", k->pack_weights);
    else if (!strcmp(key, "SFVIT_GEMM")) snprintf(buf, n, "%s", sf_gemm_backend_name(k->gemm));
    else if (!strcmp(key, "SFVIT_CONV_BANDS")) snprintf(buf, n, "%d", k->conv_bands);
    else snprintf(buf, n, "%ld", k->small_macs);
}

static int on_onednn_bf16(const knobs *k) {
    return k->precision == SF_PREC_BF16 && k->products == SF_BF16_PRODUCTS_ONEDNN;
}

/* B: A with spec's KEY=VALUE. A setting the run cannot take, or one that changes nothing, is
 * an error naming it (2: usage, 1: the machine or the model cannot run it). */
static int knobs_parse(const char *spec, const sf_config *cfg, sf_model *m, const knobs *a, knobs *b, char *key,
                       size_t key_size) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || (size_t)(eq - spec) >= key_size)
        return cli_usage_error("bench", "--alternate takes KEY=VALUE, got '%s' (KEY: %s)", spec, alternate_keys);
    memcpy(key, spec, (size_t)(eq - spec));
    key[eq - spec] = 0;
    const char *value = eq + 1;
    *b = *a;
    if (!strcmp(key, "train.precision") || !strcmp(key, "train.bf16_products")) {
        if (!strcmp(key, "train.bf16_products") && a->precision != SF_PREC_BF16)
            return cli_usage_error("bench", "--alternate %s: the products' kernels of a bf16 run; this run is %s",
                                   spec, sf_precision_name(a->precision));
        sf_config with = *cfg;
        if (sf_config_set(&with, key, value, "--alternate") != 0) return 2;
        printf("B, %s:\n", spec);
        if (sf_precision_setup(&with, 1) != 0) return 1; /* B's own start lines, or why it cannot run here */
        b->precision = sf_precision_get();
        b->products = sf_bf16_products_get();
    } else if (!strcmp(key, "model.sima_order")) {
        sf_config with = *cfg;
        if (sf_config_set(&with, key, value, "--alternate") != 0) return 2;
        if (sf_model_sima_token_norms(m, NULL, NULL, NULL, NULL) != 0)
            return cli_usage_error("bench", "--alternate %s: this model has no SimA block", spec);
        b->sima_order = with.model.sima_order;
    } else if (!strcmp(key, "SFVIT_PACK_WEIGHTS") || !strcmp(key, "SFVIT_BF16_SMALL_MACS")) {
        const int pack = !strcmp(key, "SFVIT_PACK_WEIGHTS");
        const long v = pack ? sf_bf16_pack_weights_parse(value) : sf_bf16_small_macs_parse(value);
        if (v < 0)
            return cli_usage_error("bench", "--alternate %s: %s", spec,
                                   pack ? "SFVIT_PACK_WEIGHTS takes 0 or 1"
                                        : "SFVIT_BF16_SMALL_MACS takes a non-negative integer");
        if (!on_onednn_bf16(a))
            return cli_usage_error("bench", "--alternate %s: %s applies to bf16 products on oneDNN's kernels; this "
                                   "run's products are %s",
                                   spec, key,
                                   a->precision == SF_PREC_BF16 ? "on fp32 kernels (train.bf16_products=fp32)"
                                                                : sf_precision_name(a->precision));
        if (pack) b->pack_weights = (int)v;
        else b->small_macs = v;
    } else if (!strcmp(key, "SFVIT_GEMM")) {
        if (strcmp(value, "auto") && strcmp(value, "onednn"))
            return cli_usage_error("bench", "--alternate %s: SFVIT_GEMM takes auto or onednn here (openblas sets "
                                   "OpenBLAS's own threads when the process starts: compare it in two runs)",
                                   spec);
        if (a->gemm == SF_GEMM_OPENBLAS)
            return cli_usage_error("bench", "--alternate %s: this run has SFVIT_GEMM=openblas, whose threads are "
                                   "set when the process starts; compare it in two runs", spec);
        if (!sf_dnnl_available())
            return sf_error("bench: --alternate %s: sfvit was built without oneDNN", spec), 1;
        b->gemm = !strcmp(value, "onednn") ? SF_GEMM_ONEDNN : SF_GEMM_AUTO;
        if (sf_gemm_backend_uses_onednn(a->gemm) == sf_gemm_backend_uses_onednn(b->gemm))
            return cli_usage_error("bench", "--alternate %s: this run's fp32 products already go where %s sends "
                                   "them (nothing to compare)", spec, value);
    } else if (!strcmp(key, "SFVIT_CONV_BANDS")) {
        const int on = sf_conv2d_bands_parse(value);
        if (on < 0) return cli_usage_error("bench", "--alternate %s: SFVIT_CONV_BANDS takes 0 or 1", spec);
        b->conv_bands = on;
    } else {
        return cli_usage_error("bench", "--alternate: '%s' cannot change between steps (KEY: %s)", key,
                               alternate_keys);
    }
    if (!memcmp(a, b, sizeof *a))
        return cli_usage_error("bench", "--alternate %s: that is the run as configured (nothing to compare)", spec);
    return 0;
}

/* The 95 % interval of a median from n paired observations: the k-th smallest and the k-th
 * largest, for the largest k with P(Binomial(n, 1/2) < k) <= 0.025; 0 when n is too small
 * (below 6 pairs no such k exists). */
static int median_interval_rank(int n) {
    double p = 1.0; /* 2^-n, in steps to stay representable */
    for (int i = 0; i < n; i++) p *= 0.5;
    double below = 0.0, term = p; /* term = C(n, j) 2^-n */
    int k = 0;
    for (int j = 0; j < n; j++) {
        below += term; /* P(X <= j) */
        if (below > 0.025) break;
        k = j + 1;
        term = term * (double)(n - j) / (double)(j + 1);
    }
    return k;
}

int cli_bench_alternate(sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels, int warmup,
                        int steps, const char *spec, int threads) {
    knobs set[2];
    char key[64];
    set[0] = knobs_now(cfg);
    int rc = knobs_parse(spec, cfg, m, &set[0], &set[1], key, sizeof key);
    if (rc) return rc;
    char value[2][32];
    for (int s = 0; s < 2; s++) knob_value(key, &set[s], value[s], sizeof value[s]);

    sf_ctx ctx[2];
    double *t[2][3]; /* per setting: forward, backward, update of each timed step */
    for (int s = 0; s < 2; s++) {
        sf_ctx_init(&ctx[s], 0);
        for (int p = 0; p < 3; p++) t[s][p] = sf_calloc((size_t)steps, sizeof(double));
    }
    sf_params_zero_grad(ps);
    int current = -1, copies = 0;
    long step = 0, dnnl_runs[2] = {0, 0}; /* products run on oneDNN in each setting's timed steps */
    double tt[3];
    /* warm-up: each setting's first steps (its primitives, its arena's blocks) */
    for (int w = 0; w < warmup; w++)
        for (int s = 0; s < 2; s++) {
            if (s != current) knobs_apply(&set[s], m), current = s, copies = 0;
            copies = cli_bench_step(&ctx[s], cfg, m, ps, x, labels, ++step, copies, tt);
        }
    for (int i = 0; i < steps; i++)
        for (int j = 0; j < 2; j++) {
            const int s = i % 2 ? 1 - j : j; /* AB, BA, AB, ... */
            if (s != current) {
                knobs_apply(&set[s], m), current = s, copies = 0;
                copies = cli_bench_step(&ctx[s], cfg, m, ps, x, labels, ++step, copies, tt); /* settles */
            }
            long runs_before, runs_after;
            sf_dnnl_stats(NULL, &runs_before);
            copies = cli_bench_step(&ctx[s], cfg, m, ps, x, labels, ++step, copies, tt);
            sf_dnnl_stats(NULL, &runs_after);
            dnnl_runs[s] += runs_after - runs_before;
            for (int p = 0; p < 3; p++) t[s][p][i] = tt[p];
        }
    char fp32_products[2][256];
    for (int s = 0; s < 2; s++) knobs_apply(&set[s], m), sf_gemm_describe(fp32_products[s], sizeof fp32_products[s]);
    knobs_apply(&set[0], m);

    double *ratio = sf_calloc((size_t)steps, sizeof(double)), step_ms[2], phase_ms[2][3];
    for (int i = 0; i < steps; i++)
        ratio[i] = (t[1][0][i] + t[1][1][i] + t[1][2][i]) / (t[0][0][i] + t[0][1][i] + t[0][2][i]);
    for (int s = 0; s < 2; s++) {
        double *total = sf_calloc((size_t)steps, sizeof(double));
        for (int i = 0; i < steps; i++) total[i] = t[s][0][i] + t[s][1][i] + t[s][2][i];
        step_ms[s] = 1e3 * cli_median(total, steps);
        free(total);
        for (int p = 0; p < 3; p++) phase_ms[s][p] = 1e3 * cli_median(t[s][p], steps);
    }
    const double mid = cli_median(ratio, steps); /* sorts ratio */
    const int k = median_interval_rank(steps);

    const sf_model_cfg *mc = &cfg->model;
    const int B = cfg->train.batch_size;
    printf("sfvit bench: %s  batch %d  %dx%dx%d  threads %d  --alternate %s\n", mc->name[0] ? mc->name : "vit", B,
           mc->in_chans, mc->img_size, mc->img_size, threads, spec);
    printf("  A: %s=%s (as configured), B: %s=%s; %d timed training steps each, in pairs AB, BA, AB, ..., one "
           "untimed step after each switch\n",
           key, value[0], key, value[1], steps);
    printf("  %-22s %10s %10s %8s\n", "phase", "A ms", "B ms", "B / A");
    static const char *const phase[] = {"forward", "backward", "update"};
    for (int p = 0; p < 3; p++)
        printf("  %-22s %10.1f %10.1f %8.3f\n", phase[p], phase_ms[0][p], phase_ms[1][p],
               phase_ms[1][p] / phase_ms[0][p]);
    printf("  %-22s %10.1f %10.1f %8.3f\n", "train step", step_ms[0], step_ms[1], step_ms[1] / step_ms[0]);
    const double arena[2] = {sf_ctx_arena_peak(&ctx[0]) / 1048576.0, sf_ctx_arena_peak(&ctx[1]) / 1048576.0};
    printf("  activation arena peak: A %.1f MiB, B %.1f MiB\n", arena[0], arena[1]);
    printf("  products run on oneDNN a step: A %ld, B %ld\n", dnnl_runs[0] / steps, dnnl_runs[1] / steps);
    if (!strcmp(key, "SFVIT_GEMM")) printf("  fp32 products: A %s; B %s\n", fp32_products[0], fp32_products[1]);
    printf("  train step B / A, paired over %d steps: median %.3f", steps, mid);
    if (k > 0) {
        const double lo = ratio[k - 1], hi = ratio[steps - k];
        printf(", 95 %% interval %.3f-%.3f: %s\n", lo, hi,
               hi < 1.0  ? "B is faster"
               : lo > 1.0 ? "B is slower"
                          : "no difference shown (the interval holds 1)");
        printf("alternate_ratio_lo %.4f\nalternate_ratio_hi %.4f\n", lo, hi);
    } else {
        printf("; no 95 %% interval from fewer than 6 pairs (--steps 6 or more)\n");
    }
    printf("alternate_ratio %.4f\n", mid);
    printf("alternate_a_train_ms %.2f\nalternate_b_train_ms %.2f\n", step_ms[0], step_ms[1]);
    printf("alternate_a_arena_mib %.1f\nalternate_b_arena_mib %.1f\n", arena[0], arena[1]);
    printf("alternate_a_onednn_products %ld\nalternate_b_onednn_products %ld\n", dnnl_runs[0] / steps,
           dnnl_runs[1] / steps);
    free(ratio);
    for (int s = 0; s < 2; s++) {
        for (int p = 0; p < 3; p++) free(t[s][p]);
        sf_ctx_free(&ctx[s]);
    }
    sf_bf16_weights_clear();
    return 0;
}
