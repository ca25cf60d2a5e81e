/* sweep.c — `sfvit bench --token-sweep`: how the time and memory of one block grow with its
 * token count N, per attention kind, next to the analytic MACs of `sfvit info`.
 *
 * For each kind of the table below and each N of a geometric series (two points per octave),
 * a one-block model whose token count is N is built and timed at batch 1: the inference
 * forward (no gradients) and one training step (forward, cross-entropy, backward and the
 * AdamW update), each after warm-up, the median over at least --steps repetitions and
 * --min-time seconds. Memory per phase is the process's peak resident set (VmHWM, as
 * `sfvit bench` and bench/compare read it), reset before each phase through
 * /proc/self/clear_refs, and the activation arena's peak. A point whose estimated memory is
 * over --mem-cap is written as skipped with the estimate, not run. The CSV (one row per
 * kind x N x phase) is what `sfvit plot SWEEP.csv` draws (cli/plot_scaling.c); stdout gets
 * the fitted log-log slopes.
 *
 * Layouts: a ViT with patch size 1 on a one-channel s x s image (N = s² + 1 with the cls
 * token), and for XCA a one-block XCiT with patch size 8 (its conv patch embedding) on an
 * 8s x 8s image and no class-attention layer (N = s² patch tokens). embed_dim = heads x D_h.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/optim.h"
#include "cli.h"
#include "sfvit/precision.h"

/* ---- the kinds: one row each, its layout and the config keys that make it ---- */

typedef enum sweep_layout { LAYOUT_VIT, LAYOUT_XCIT } sweep_layout;

typedef struct sweep_kind {
    const char *name;       /* CSV, legend and --kinds */
    sweep_layout layout;
    const char *settings;   /* key=value ..., set after the layout's keys */
} sweep_kind;

static const sweep_kind SWEEP_KINDS[] = {
    {"msa", LAYOUT_VIT, "model.attn=msa"},
    {"sima_qk_first", LAYOUT_VIT, "model.attn=sima model.sima_order=qk_first"},
    {"sima_kv_first", LAYOUT_VIT, "model.attn=sima model.sima_order=kv_first"},
    {"sima_auto", LAYOUT_VIT, "model.attn=sima model.sima_order=auto"},
    {"xca", LAYOUT_XCIT, "model.attn=xca"},
    /* SOFT in the ViT layout with m = 49 landmarks at every N: its linear regime */
    {"soft", LAYOUT_VIT, "model.attn=soft model.attn_norm=none model.soft_landmarks=fixed model.num_landmarks=49"},
};
enum { N_SWEEP_KINDS = sizeof SWEEP_KINDS / sizeof SWEEP_KINDS[0], MAX_POINTS = 64 };

/* ---- least squares in log-log ---- */

double sweep_loglog_slope(const double *x, const double *y, int n) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0) || !(y[i] > 0)) continue;
        double lx = log(x[i]), ly = log(y[i]);
        sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
        m++;
    }
    double den = m * sxx - sx * sx;
    return m >= 2 && den > 1e-12 ? (m * sxy - sx * sy) / den : NAN;
}

/* ---- memory ---- */


/* Resets VmHWM to the current resident set (Linux >= 4.0); 0 on success. */
static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Bytes a point needs beyond the process before it, estimated high on purpose: weights (and
 * for training their gradients and AdamW moments), ~16 live (N x C) activations and two of
 * the MLP's width per token (twice for training: their gradients), the N x N maps of every
 * head where the mixing builds them (scores and probabilities, and their gradients), and
 * XCiT's conv patch embedding and its im2col buffers. */
static double estimate_bytes(const sf_model_cfg *mc, sweep_layout layout, int N, int train) {
    const double C = mc->embed_dim, H = mc->num_heads, D = C / H, hid = floor(C * mc->mlp_ratio);
    double floats = (double)sf_model_param_count(mc) * (train ? 4 : 1);
    double per_token = 16 * C + 2 * hid + (layout == LAYOUT_XCIT ? 80 * C + 64 * 4 : 0);
    floats += N * per_token * (train ? 2 : 1);
    const int quadratic = mc->attn == SF_ATTN_MSA ||
                          (mc->attn == SF_ATTN_SIMA && sf_sima_resolve(mc->sima_order, N, (int)D) == SF_SIMA_QK_FIRST);
    if (quadratic) floats += H * (double)N * N * (train ? 4 : 2);
    return floats * 4.0;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct sweep_opts {
    int warmup, min_reps;
    double min_time;        /* seconds of timed repetitions at least */
} sweep_opts;

typedef struct phase_result {
    double ms;              /* median */
    int reps;
    double peak_bytes;      /* VmHWM during the phase */
    double arena_bytes;     /* activation arena peak */
} phase_result;

/* One repetition of a phase: a training step or an inference forward. */
static void phase_once(sf_ctx *g, const sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels,
                       int train, long step) {
    g->training = train;
    g->grad_enabled = train;
    if (train) { /* from zero gradients: time_phase's zeroing, then each update's */
        sf_tensor *logits = sf_model_forward(g, m, x);
        sf_tensor *loss = sf_cross_entropy(g, logits, labels, NULL, cfg->aug.smoothing);
        sf_backward(g, loss);
        sf_adamw_step(ps, &cfg->optim, 1e-6f, step);
    } else {
        sf_model_forward(g, m, x);
    }
    sf_ctx_reset(g);
}

static void time_phase(const sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels, int train,
                       const sweep_opts *o, phase_result *r) {
    sf_ctx g;
    sf_ctx_init(&g, 0);
    sf_params_zero_grad(ps);
    long step = 0;
    for (int w = 0; w < o->warmup; w++) phase_once(&g, cfg, m, ps, x, labels, train, ++step);
    enum { MAX_REPS = 1000 };
    double *t = sf_malloc(MAX_REPS * sizeof(double)), spent = 0;
    int n = 0;
    while (n < MAX_REPS && (n < o->min_reps || spent < o->min_time)) {
        double t0 = sf_now();
        phase_once(&g, cfg, m, ps, x, labels, train, ++step);
        t[n] = sf_now() - t0;
        spent += t[n++];
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    r->ms = 1e3 * (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
    r->reps = n;
    r->arena_bytes = (double)sf_ctx_arena_peak(&g);
    r->peak_bytes = cli_proc_status_mib("VmHWM") * 1048576.0;
    free(t);
    sf_ctx_free(&g);
}

/* ---- configs ---- */

/* The config of kind k at side s (N = s² [+ 1]): defaults, the layout's keys, the kind's,
 * then the user's overrides. Returns 0 or -1 (the message names the key). */
static int kind_config(sf_config *cfg, const sweep_kind *k, int side, int dh, int heads, char **over, int n_over) {
    char settings[512], kv[64];
    sf_config_defaults(cfg);
    const int C = dh * heads;
    if (k->layout == LAYOUT_VIT)
        snprintf(settings, sizeof settings,
                 "model.name=vit model.patch_size=1 model.img_size=%d model.in_chans=1 model.depth=1 "
                 "model.mlp_ratio=1 model.drop_path_rate=0 model.num_classes=10",
                 side);
    else
        snprintf(settings, sizeof settings,
                 "model.name=xcit_tiny_12_p8 model.img_size=%d model.in_chans=1 model.depth=1 "
                 "model.cls_attn_layers=0 model.mlp_ratio=1 model.drop_path_rate=0 model.num_classes=10",
                 8 * side);
    snprintf(settings + strlen(settings), sizeof settings - strlen(settings),
             " model.embed_dim=%d model.num_heads=%d %s", C, heads, k->settings);
    for (char *tok = strtok(settings, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        if (sf_config_set(cfg, tok, eq + 1, "token sweep")) return -1;
    }
    for (int i = 0; i < n_over; i++) {
        const char *eq = strchr(over[i], '=');
        if ((size_t)(eq - over[i]) >= sizeof kv) return sf_error("bench: key too long in '%s'", over[i]);
        snprintf(kv, sizeof kv, "%.*s", (int)(eq - over[i]), over[i]);
        if (sf_config_set(cfg, kv, eq + 1, "command line")) return -1;
    }
    return sf_config_validate(cfg);
}

static int tokens_of(sweep_layout layout, int side) { return side * side + (layout == LAYOUT_VIT); }

/* ---- options ---- */

static int parse_int(const char *s, const char *opt, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || v < lo || v > hi)
        return cli_usage_error("bench", "%s '%s': expected an integer in %d..%d", opt, s ? s : "", lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_double(const char *s, const char *opt, double lo, double *out) {
    char *end;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || end == s || *end || !(v >= lo) || !isfinite(v))
        return cli_usage_error("bench", "%s '%s': expected a number >= %g", opt, s ? s : "", lo);
    *out = v;
    return 0;
}

/* "a,b,c" -> indices into SWEEP_KINDS; every kind when s is NULL. */
static int parse_kinds(const char *s, int *idx, int *n) {
    *n = 0;
    if (!s) {
        for (int i = 0; i < N_SWEEP_KINDS; i++) idx[(*n)++] = i;
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int i = 0;
        while (i < N_SWEEP_KINDS && strcmp(SWEEP_KINDS[i].name, tok)) i++;
        if (i == N_SWEEP_KINDS) {
            char known[256] = "";
            for (int j = 0; j < N_SWEEP_KINDS; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", SWEEP_KINDS[j].name);
            return cli_usage_error("bench", "--kinds: unknown kind '%s' (known: %s)", tok, known);
        }
        if (*n < N_SWEEP_KINDS) idx[(*n)++] = i;
    }
    if (*n == 0) return cli_usage_error("bench", "--kinds '%s' names no kind", s);
    return 0;
}

/* The sides s of the series: targets MIN·2^(i/2) up to MAX, s = round(√target), no repeats. */
static int token_sides(int lo, int hi, int *sides) {
    int n = 0;
    for (int i = 0; n < MAX_POINTS; i++) {
        double target = lo * pow(2.0, i / 2.0);
        if (target > hi * (1 + 1e-9)) break;
        int s = (int)lround(sqrt(target));
        if (s < 1) s = 1;
        if (n == 0 || s != sides[n - 1]) sides[n++] = s;
    }
    return n;
}

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (!v) continue;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = 0;
            for (char *c = v; *c; c++)
                if (*c == ',' || *c == '"') *c = ' ';  // a plain CSV field
            snprintf(out, n, "%s", v);
            break;
        }
    fclose(f);
}

/* ---- the sweep ---- */

typedef struct point {
    int kind, N;
    double macs;
    int skipped[2];         /* per phase: 0 infer, 1 train */
    phase_result r[2];
} point;

static const char *const PHASE_NAME[2] = {"infer", "train"};

/* Per kind and phase: the slopes of time over the upper half of the range and over all
 * points, and over the upper half those of the MACs, the peak resident set and the arena. */
static void print_slopes(const point *pts, int n_pts, const int *kinds, int n_kinds, double n_split) {
    printf("\nlog-log slopes (least squares of log y on log N; upper: N >= %.0f, the upper half of the range)\n",
           n_split);
    printf("  %-15s %-6s %6s %11s %9s %11s %11s %11s\n", "kind", "phase", "points", "time upper", "time all",
           "MACs upper", "peak upper", "arena upper");
    double x[MAX_POINTS], t[MAX_POINTS], xu[MAX_POINTS], tu[MAX_POINTS], mu[MAX_POINTS], pu[MAX_POINTS], au[MAX_POINTS];
    for (int ki = 0; ki < n_kinds; ki++)
        for (int ph = 0; ph < 2; ph++) {
            int n = 0, nu = 0;
            for (int i = 0; i < n_pts; i++) {
                const point *p = &pts[i];
                if (p->kind != kinds[ki] || p->skipped[ph]) continue;
                x[n] = p->N, t[n++] = p->r[ph].ms;
                if (p->N >= n_split)
                    xu[nu] = p->N, tu[nu] = p->r[ph].ms, mu[nu] = p->macs, pu[nu] = p->r[ph].peak_bytes,
                    au[nu++] = p->r[ph].arena_bytes;
            }
            const double slopes[5] = {sweep_loglog_slope(xu, tu, nu), sweep_loglog_slope(x, t, n),
                                      sweep_loglog_slope(xu, mu, nu), sweep_loglog_slope(xu, pu, nu),
                                      sweep_loglog_slope(xu, au, nu)};
            printf("  %-15s %-6s %6d", SWEEP_KINDS[kinds[ki]].name, PHASE_NAME[ph], n);
            for (int j = 0; j < 5; j++)
                if (isfinite(slopes[j])) printf(" %*.2f", j == 1 ? 9 : 11, slopes[j]);
                else printf(" %*s", j == 1 ? 9 : 11, "-");
            printf("\n");
        }
}

int cli_bench_token_sweep(cli_args *args) {
    const char *out = cli_get(args, "bench", "-o"), *s_kinds = cli_get(args, "bench", "--kinds"),
               *s_tokens = cli_get(args, "bench", "--tokens"), *s_dh = cli_get(args, "bench", "--dh"),
               *s_heads = cli_get(args, "bench", "--heads"), *s_cap = cli_get(args, "bench", "--mem-cap"),
               *s_steps = cli_get(args, "bench", "--steps"), *s_warmup = cli_get(args, "bench", "--warmup"),
               *s_min_time = cli_get(args, "bench", "--min-time");
    char **over = args->over;
    const int n_over = args->n_over, n_pos = args->n_pos, no_infer = cli_get(args, "bench", "--no-infer") != NULL,
              no_products = cli_get(args, "bench", "--no-products") != NULL;
    cli_args_free(args);
    if (n_pos) return cli_usage_error("bench", "--token-sweep takes no config: its models come from its kind table");
    if (no_infer) return cli_usage_error("bench", "--no-infer does not apply to --token-sweep");
    if (no_products) return cli_usage_error("bench", "--no-products does not apply to --token-sweep");
    int kinds[N_SWEEP_KINDS], n_kinds, lo = 64, hi = 8192, dh = 64, heads = 2;
    sweep_opts o = {.warmup = 1, .min_reps = 3, .min_time = 0.3};
    double cap_gib = 8;
    if (parse_kinds(s_kinds, kinds, &n_kinds)) return 2;
    if (s_tokens) {
        char *colon = strchr(s_tokens, ':'), *end1, *end2;
        long a = strtol(s_tokens, &end1, 10), b = colon ? strtol(colon + 1, &end2, 10) : 0;
        if (!colon || end1 != colon || colon[1] == 0 || *end2 || a < 1 || b < a || b > 1 << 20)
            return cli_usage_error("bench", "--tokens '%s': expected MIN:MAX with 1 <= MIN <= MAX <= %d", s_tokens,
                                   1 << 20);
        lo = (int)a, hi = (int)b;
    }
    if (s_dh && parse_int(s_dh, "--dh", 1, 4096, &dh)) return 2;
    if (s_heads && parse_int(s_heads, "--heads", 1, 256, &heads)) return 2;
    if (s_steps && parse_int(s_steps, "--steps", 1, 1000, &o.min_reps)) return 2;
    if (s_warmup && parse_int(s_warmup, "--warmup", 0, 1000, &o.warmup)) return 2;
    if (s_min_time && parse_double(s_min_time, "--min-time", 0, &o.min_time)) return 2;
    if (s_cap && parse_double(s_cap, "--mem-cap", 0, &cap_gib)) return 2;
    if (!out) out = "sweep.csv";

    int sides[MAX_POINTS];
    const int n_sides = token_sides(lo, hi, sides);
    /* Every kind's config is checked at the first and last side before anything is timed. */
    sf_config cfg;
    for (int ki = 0; ki < n_kinds; ki++)
        for (int e = 0; e < 2; e++)
            if (kind_config(&cfg, &SWEEP_KINDS[kinds[ki]], sides[e ? n_sides - 1 : 0], dh, heads, over, n_over)) {
                sf_hint("kind %s (%s)", SWEEP_KINDS[kinds[ki]].name, SWEEP_KINDS[kinds[ki]].settings);
                return 1;
            }
    const int threads = sf_threads_init(cfg.train.threads);
    if (sf_precision_setup(&cfg, 0) != 0) return 1;
    FILE *csv = fopen(out, "w");
    if (!csv) {
        sf_error("bench: cannot write %s: %s", out, strerror(errno));
        return 1;
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const int peak_resets = reset_peak_rss() == 0;
    printf("sfvit bench --token-sweep: N %d..%d, D_h %d, heads %d (embed_dim %d), mlp_ratio %g, batch 1\n", lo, hi,
           dh, heads, dh * heads, cfg.model.mlp_ratio);
    printf("machine: %s, threads %d, precision %s\n", cpu, threads, sf_precision_name(sf_precision_get()));
    printf("infer = forward without gradients; train = forward, cross-entropy, backward and AdamW; median of >= %d "
           "reps and >= %g s after %d warm-up\n",
           o.min_reps, o.min_time, o.warmup);
    printf("peak = process peak resident set (VmHWM)%s; arena = activation arena peak\n",
           peak_resets ? ", reset before each phase" : " (cannot be reset here: the peak so far)");
    fprintf(csv, "kind,N,phase,ms,peak_bytes,macs,status,reps,arena_bytes,est_bytes,reason,d_h,heads,threads,cpu\n");
    printf("  %-15s %6s %-6s %10s %5s %10s %10s %10s  %s\n", "kind", "N", "phase", "ms", "reps", "peak MiB",
           "arena MiB", "GMACs", "status");

    point *pts = sf_calloc((size_t)n_kinds * n_sides, sizeof(point));
    int n_pts = 0;
    const double cap = cap_gib * 1073741824.0;
    /* N outer, kinds inner: on a machine whose speed drifts, the kinds at one N are measured
     * close together in time, so their comparison suffers less than one kind's whole line. */
    int rc = 0;
    for (int si = 0; si < n_sides && rc == 0; si++) {
        for (int ki = 0; ki < n_kinds && rc == 0; ki++) {
            const sweep_kind *k = &SWEEP_KINDS[kinds[ki]];
            if (kind_config(&cfg, k, sides[si], dh, heads, over, n_over)) {
                rc = 1;
                break;
            }
            point *p = &pts[n_pts++];
            p->kind = kinds[ki];
            p->N = tokens_of(k->layout, sides[si]);
            p->macs = sf_model_macs(&cfg.model);
            const sf_model_cfg *mc = &cfg.model;
            double est[2];
            for (int ph = 0; ph < 2; ph++) {
                est[ph] = estimate_bytes(mc, k->layout, p->N, ph);
                p->skipped[ph] = est[ph] > cap;
            }
            sf_params ps;
            sf_params_init(&ps);
            sf_model *m = NULL;
            sf_tensor x = {.ndim = 4, .shape = {1, mc->in_chans, mc->img_size, mc->img_size}};
            int label = 0;
            if (!p->skipped[0] || !p->skipped[1]) {
                if (!(m = sf_model_build(mc, &ps))) {
                    sf_params_free(&ps);
                    rc = 1;
                    break;
                }
                sf_params_alloc(&ps);
                sf_rng rng;
                sf_rng_seed(&rng, cfg.train.seed + 17);
                sf_model_init(m, &ps, &rng);
                x.numel = (size_t)mc->in_chans * mc->img_size * mc->img_size;
                x.data = sf_aligned_alloc(x.numel * sizeof(float));
                for (size_t i = 0; i < x.numel; i++) x.data[i] = sf_rng_normal(&rng);
                label = (int)sf_rng_below(&rng, (uint32_t)mc->num_classes);
            }
            for (int ph = 0; ph < 2; ph++) {
                phase_result *r = &p->r[ph];
                if (p->skipped[ph]) {
                    printf("  %-15s %6d %-6s %10s %5s %10s %10s %10.3f  skipped: estimated %.2f GiB > --mem-cap %g GiB\n",
                           k->name, p->N, PHASE_NAME[ph], "-", "-", "-", "-", p->macs * 1e-9, est[ph] / 1073741824.0,
                           cap_gib);
                    fprintf(csv, "%s,%d,%s,,,%.0f,skipped,0,,%.0f,estimated %.2f GiB > --mem-cap %g GiB,%d,%d,%d,%s\n",
                            k->name, p->N, PHASE_NAME[ph], p->macs, est[ph], est[ph] / 1073741824.0, cap_gib, dh, heads,
                            threads, cpu);
                } else {
                    if (peak_resets) reset_peak_rss();
                    time_phase(&cfg, m, &ps, &x, &label, ph, &o, r);
                    printf("  %-15s %6d %-6s %10.3f %5d %10.1f %10.1f %10.3f  ok\n", k->name, p->N, PHASE_NAME[ph],
                           r->ms, r->reps, r->peak_bytes / 1048576.0, r->arena_bytes / 1048576.0, p->macs * 1e-9);
                    fprintf(csv, "%s,%d,%s,%.4f,%.0f,%.0f,ok,%d,%.0f,%.0f,,%d,%d,%d,%s\n", k->name, p->N,
                            PHASE_NAME[ph], r->ms, r->peak_bytes, p->macs, r->reps, r->arena_bytes, est[ph], dh, heads,
                            threads, cpu);
                }
                fflush(stdout);
                fflush(csv);
            }
            free(x.data);
            if (m) sf_model_free(m);
            sf_params_free(&ps);
        }
    }
    if (fclose(csv)) rc = sf_error("bench: writing %s: %s", out, strerror(errno));
    if (rc == 0) print_slopes(pts, n_pts, kinds, n_kinds, sqrt((double)lo * hi));
    if (rc == 0) printf("wrote %s (%d rows); draw it with: sfvit plot %s -o scaling.png\n", out, 2 * n_pts, out);
    free(pts);
    return rc ? 1 : 0;
}
