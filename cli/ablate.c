/* ablate.c — `sfvit ablate`: a grid of config overrides, each variant trained with one or
 * more seeds, one run after another, with tables of the results.
 *
 *   sfvit ablate BASE.yaml[,BASE2.yaml ...] key=a,b[,c] [key=x,y ...] [key=value ...] [--seeds N]
 *
 * Each key with several comma-separated values (outside brackets) is an axis of the grid;
 * several base configs are an axis too (`config`, each named by its file). A cell is one
 * variant with one seed (train.seed + k, k < N). Cells run round by round — every variant
 * with the first seed, then every variant with the second — in command-line order, so an
 * interrupted study already holds one seed of every variant. Cell folders are
 * <train.out>/<train.name>/<variant>/seed<S>/. A finished cell (trained to the end, or
 * diverged) leaves result.json there and is never run again: re-running the same command
 * continues the study, and a cell that was interrupted resumes from its last.safetensors.
 * After every cell the tables are rewritten (temp file, fsync, rename): ablation.md and
 * ablation.csv (one row per variant: mean ± sample std over its finished seeds and the 95 %
 * Student-t interval of that mean) and runs.csv (one row per cell). A diverged cell shows NaN and the step of the NaN/Inf; it is left out
 * of its variant's mean and counted in its status.
 *
 * Deliberately not here: running cells in parallel (one run already uses every core).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sfvit/dist.h"
#include "cli.h"
#include "seeds.h"

#define MAX_AXES 8
#define MAX_VALUES 16
#define MAX_FIXED 64
#define MAX_SEEDS 1000

typedef struct axis {
    char key[128];
    char values[MAX_VALUES][256];
    int n;
} axis;

typedef enum cell_status { CELL_PENDING, CELL_OK, CELL_DIVERGED, CELL_ERROR } cell_status;

typedef struct cell {
    int variant;
    unsigned long long seed;
    cell_status status;
    long diverged_step;
    int epochs;
    double final_top1, best_top1;  // percent; NaN when there is none
    double img_s;                  // median train img/s of the run's log lines
    double seconds;                // sum of the epochs' times (training and evaluation)
    char dir[SF_PATH_MAX + 32];
} cell;

typedef struct variant {
    char name[512];
    sf_config cfg;                 // train.out = the ablation folder / name
    double params, macs, exps;     // per image, as `sfvit info` counts them
} variant;

typedef struct study {
    char base[SF_PATH_MAX];        // the base config(s) as given
    char dir[SF_PATH_MAX];         // <train.out>/<train.name>
    int seeds;
    variant *variants;
    int n_variants;
    cell *cells;                   // round by round: cells[k * n_variants + v]
    int n_cells;
} study;

/* ---- small helpers ---- */

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}


/* Writes with fill() to path.tmp, fsyncs and renames it over path. Under an MPI launcher
 * every rank runs the grid in step, and rank 0 alone writes the study's files. */
static int write_atomic(const char *path, void (*fill)(FILE *, const void *), const void *arg) {
    if (sf_dist_rank() != 0) return 0;
    return sf_write_stream_atomic(path, fill, arg);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the command line ---- */

static int split_values(const char *s, axis *a) {
    int depth = 0;
    char cur[256];
    size_t len = 0;
    a->n = 0;
    for (const char *p = s;; p++) {
        if (*p == '[') depth++;
        if (*p == ']') depth--;
        if ((*p == ',' && depth == 0) || *p == 0) {
            if (a->n >= MAX_VALUES) return -1;
            cur[len] = 0;
            snprintf(a->values[a->n++], sizeof a->values[0], "%s", cur);
            len = 0;
            if (*p == 0) break;
            continue;
        }
        if (len + 1 < sizeof cur) cur[len++] = *p;
    }
    return 0;
}

typedef struct ablate_args {
    axis configs;                  // the base config(s)
    axis axes[MAX_AXES];
    int n_axes;
    char *fixed[MAX_FIXED];        // key=value overrides of every variant
    int n_fixed;
    int seeds;
} ablate_args;

/* argv through the command's row (cli_parse): the base config(s), --seeds, key=value axes
 * (several values) and fixed overrides (one). Returns 0, or 2 after a message. */
static int parse_args(int argc, char **argv, ablate_args *a) {
    memset(a, 0, sizeof *a);
    a->seeds = 1;
    snprintf(a->configs.key, sizeof a->configs.key, "config");
    cli_args args;
    if (cli_parse("ablate", argc, argv, &args)) return 2;
    const char *base = args.n_pos ? args.pos[0] : NULL, *seeds = cli_get(&args, "ablate", "--seeds");
    cli_args_free(&args);
    if (seeds) {
        char *end;
        long n = strtol(seeds, &end, 10);
        if (*end || n < 1 || n > MAX_SEEDS)
            return sf_error("ablate: --seeds takes a number from 1 to %d, got '%s'", MAX_SEEDS, seeds), 2;
        a->seeds = (int)n;
    }
    if (base && split_values(base, &a->configs) != 0)
        return sf_error("ablate: at most %d base configs", MAX_VALUES), 2;
    for (int i = 0; i < args.n_over; i++) {
        const char *eq = strchr(args.over[i], '=');
        axis x;
        snprintf(x.key, sizeof x.key, "%.*s", (int)(eq - args.over[i]), args.over[i]);
        if (split_values(eq + 1, &x) != 0)
            return sf_error("ablate: too many values for %s (at most %d)", x.key, MAX_VALUES), 2;
        if (x.n > 1) {
            if (a->n_axes == MAX_AXES) return sf_error("ablate: at most %d axes", MAX_AXES), 2;
            a->axes[a->n_axes++] = x;
        } else {
            if (a->n_fixed == MAX_FIXED) return sf_error("ablate: at most %d fixed overrides", MAX_FIXED), 2;
            a->fixed[a->n_fixed++] = args.over[i];
        }
    }
    if (!base) return sf_error("ablate: no base config given"), 2;
    /* one config and no axis is a grid of one variant: meaningful only over several seeds */
    if (a->n_axes == 0 && a->configs.n < 2 && a->seeds < 2)
        return sf_error("ablate: no axis with several values (write key=a,b) and a single seed (--seeds N)"), 2;
    return 0;
}

/* "study_vit" for "configs/study_vit.yaml". */
static void config_stem(const char *path, char *out, size_t size) {
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    const char *dot = strrchr(name, '.');
    snprintf(out, size, "%.*s", (int)(dot && dot != name ? dot - name : (long)strlen(name)), name);
}

/* ---- the grid ---- */

/* Variant number v: the value index of each axis (the first axis varies slowest), its
 * config, overrides and name. */
static int variant_build(const ablate_args *a, const char *dir, int v, variant *out) {
    char buf[MAX_AXES][400];
    char *over[MAX_FIXED + MAX_AXES];
    int n = 0, rem = v, idx[MAX_AXES];
    for (int x = a->n_axes - 1; x >= 0; x--) {
        idx[x] = rem % a->axes[x].n;
        rem /= a->axes[x].n;
    }
    const int config_idx = rem;  // the config axis is the outermost
    const char *config = a->configs.values[config_idx];
    size_t used = 0;
    out->name[0] = 0;
    if (a->configs.n > 1 || a->n_axes == 0) {  // a lone config is still named: config=<stem>
        char stem[256];
        config_stem(config, stem, sizeof stem);
        used += (size_t)snprintf(out->name, sizeof out->name, "config=%s", stem);
    }
    for (int i = 0; i < a->n_fixed; i++) over[n++] = a->fixed[i];
    for (int x = 0; x < a->n_axes; x++) {
        snprintf(buf[x], sizeof buf[x], "%s=%s", a->axes[x].key, a->axes[x].values[idx[x]]);
        over[n++] = buf[x];
        const char *short_key = strrchr(a->axes[x].key, '.');
        short_key = short_key ? short_key + 1 : a->axes[x].key;
        used += (size_t)snprintf(out->name + used, sizeof out->name - used, "%s%s=%s", used ? "," : "", short_key,
                                 a->axes[x].values[idx[x]]);
        if (used >= sizeof out->name) return sf_error("ablate: variant name too long: %s...", out->name);
    }
    if (sf_config_load(&out->cfg, config, n, over) != 0 || sf_config_validate(&out->cfg) != 0)
        return sf_error("ablate: variant %s has an invalid config", out->name);
    if (strchr(out->name, '/')) return sf_error("ablate: variant %s would name a nested folder ('/')", out->name);
    if (snprintf(out->cfg.train.out, sizeof out->cfg.train.out, "%s/%s", dir, out->name) >=
        (int)sizeof out->cfg.train.out)
        return sf_error("ablate: run folder name too long for variant %s", out->name);
    out->params = (double)sf_model_param_count(&out->cfg.model);
    out->macs = sf_model_macs(&out->cfg.model);
    out->exps = sf_model_exp_count(&out->cfg.model);
    return 0;
}

/* Every variant's config is loaded and validated before any run starts. */
static int study_init(study *s, const ablate_args *a) {
    memset(s, 0, sizeof *s);
    sf_config first;
    if (sf_config_load(&first, a->configs.values[0], a->n_fixed, a->fixed) != 0) return -1;
    if (snprintf(s->dir, sizeof s->dir, "%s/%s", first.train.out, first.train.name) >= (int)sizeof s->dir)
        return sf_error("ablate: folder name too long: %s/%s", first.train.out, first.train.name);
    size_t used = 0;
    for (int i = 0; i < a->configs.n && used < sizeof s->base; i++)
        used += (size_t)snprintf(s->base + used, sizeof s->base - used, "%s%s", i ? ", " : "", a->configs.values[i]);
    s->seeds = a->seeds;
    s->n_variants = a->configs.n;
    for (int x = 0; x < a->n_axes; x++) s->n_variants *= a->axes[x].n;
    s->variants = sf_calloc((size_t)s->n_variants, sizeof(variant));
    for (int v = 0; v < s->n_variants; v++)
        if (variant_build(a, s->dir, v, &s->variants[v]) != 0) return -1;
    s->n_cells = s->n_variants * s->seeds;
    s->cells = sf_calloc((size_t)s->n_cells, sizeof(cell));
    for (int i = 0; i < s->n_cells; i++) {
        cell *c = &s->cells[i];
        c->variant = i % s->n_variants;
        c->seed = s->variants[c->variant].cfg.train.seed + (unsigned long long)(i / s->n_variants);
        c->status = CELL_PENDING;
        c->diverged_step = -1;
        c->final_top1 = c->best_top1 = c->img_s = NAN;
        snprintf(c->dir, sizeof c->dir, "%s/seed%llu", s->variants[c->variant].cfg.train.out, c->seed);
    }
    return 0;
}

static void study_free(study *s) {
    free(s->variants);
    free(s->cells);
}

/* The config a cell trains with: its variant's, with the cell's seed and folder name. */
static sf_config cell_config(const study *s, const cell *c) {
    sf_config cfg = s->variants[c->variant].cfg;
    cfg.train.seed = c->seed;
    snprintf(cfg.train.name, sizeof cfg.train.name, "seed%llu", c->seed);
    return cfg;
}

/* ---- one cell's results: metrics.csv, log.jsonl, result.json ---- */

/* Epochs evaluated, last and best val top-1, summed epoch seconds from metrics.csv. */
static void cell_read_metrics(cell *c) {
    char path[SF_PATH_MAX + 64], line[512];
    snprintf(path, sizeof path, "%s/metrics.csv", c->dir);
    c->epochs = 0;
    c->final_top1 = c->best_top1 = NAN;
    c->seconds = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        int epoch;
        double train_loss, val_loss, top1, top5, lr, secs;
        if (sscanf(line, "%d,%lf,%lf,%lf,%lf,%lf,%lf", &epoch, &train_loss, &val_loss, &top1, &top5, &lr, &secs) != 7)
            continue;  // the header
        c->epochs = epoch;
        c->final_top1 = top1;
        if (!(top1 <= c->best_top1)) c->best_top1 = top1;  // NaN start
        c->seconds += secs;
    }
    fclose(f);
}

/* Median of the img_per_s of the run's step log lines (robust to the first, warm-up window). */
static double cell_read_img_s(const cell *c) {
    char path[SF_PATH_MAX + 64], line[1024];
    snprintf(path, sizeof path, "%s/log.jsonl", c->dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    int n = 0, cap = 64;
    double *v = sf_malloc((size_t)cap * sizeof *v);
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "img_per_s");
        if (cJSON_IsNumber(r)) {
            if (n == cap) v = sf_realloc(v, (size_t)(cap *= 2) * sizeof *v);
            v[n++] = r->valuedouble;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double med = n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return med;
}

static void add_number(cJSON *o, const char *key, double x) {
    if (isfinite(x)) cJSON_AddNumberToObject(o, key, x);
    else cJSON_AddNullToObject(o, key);
}

static void fill_result(FILE *f, const void *arg) {
    const cell *c = arg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", c->status == CELL_OK ? "ok" : "diverged");
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddNumberToObject(o, "diverged_step", (double)c->diverged_step);
    cJSON_AddNumberToObject(o, "epochs", c->epochs);
    add_number(o, "final_top1", c->final_top1);
    add_number(o, "best_top1", c->best_top1);
    add_number(o, "train_img_per_s", c->img_s);
    add_number(o, "seconds", c->seconds);
    char *text = cJSON_Print(o);
    fprintf(f, "%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static double json_number(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}

/* A finished cell's result.json (0), or -1 when the cell has not finished. */
static int cell_read_result(cell *c) {
    char path[SF_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/result.json", c->dir);
    char *text = sf_read_text_file(path);
    if (!text) return -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
    int ok = cJSON_IsString(st) && (!strcmp(st->valuestring, "ok") || !strcmp(st->valuestring, "diverged"));
    if (ok) {
        c->status = !strcmp(st->valuestring, "ok") ? CELL_OK : CELL_DIVERGED;
        c->diverged_step = (long)json_number(o, "diverged_step");
        c->epochs = (int)json_number(o, "epochs");
        c->final_top1 = json_number(o, "final_top1");
        c->best_top1 = json_number(o, "best_top1");
        c->img_s = json_number(o, "train_img_per_s");
        c->seconds = json_number(o, "seconds");
    } else {
        sf_warn("%s is not a result of sfvit ablate; the cell runs again", path);
    }
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

/* The config's resolved YAML as a string (free it), or NULL. */
static char *config_text(const sf_config *cfg) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    sf_config_yaml(cfg, f);
    fclose(f);
    return text;
}

/* A cell folder that already holds a run must hold a run of this cell's config: a study
 * re-run with other settings would otherwise mix two studies in one table. The settings are
 * compared, not the file's text: a run written before a key existed holds that key's default,
 * which is what it trained with. */
static int cell_check_config(const cell *c, const sf_config *cfg) {
    char have_path[SF_PATH_MAX + 64];
    snprintf(have_path, sizeof have_path, "%s/config.yaml", c->dir);
    if (!file_exists(have_path)) return 0;
    sf_config have;
    if (sf_config_load(&have, have_path, 0, NULL) != 0) {
        sf_hint("%s holds a run this build cannot read; another train.name starts a new study", c->dir);
        return -1;
    }
    char *a = config_text(&have), *b = config_text(cfg);
    const int same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    if (same) return 0;
    if (!a || !b) {
        sf_error("ablate: out of memory comparing %s with this study's cell", have_path);
        return -1;
    }
    sf_error("ablate: %s holds a run of another config than this study's cell", c->dir);
    sf_hint("same command as before to continue that study, or another train.name for a new one");
    return -1;
}

enum { RUN_DONE = 0, RUN_ERROR = 1, RUN_INTERRUPTED = 2 };

/* Trains one cell (resuming its last.safetensors if an earlier process left one). */
static int cell_run(const study *s, cell *c) {
    sf_config cfg = cell_config(s, c);
    char last[SF_PATH_MAX + 64], path[SF_PATH_MAX + 64];
    snprintf(last, sizeof last, "%s/last.safetensors", c->dir);
    const int resume = file_exists(last);
    if (!resume) {  // a fresh start: no log lines of an earlier, checkpoint-less attempt
        snprintf(path, sizeof path, "%s/log.jsonl", c->dir);
        remove(path);
    }
    sf_train_result r;
    int st = sf_train(&cfg, resume ? c->dir : NULL, &r);
    cell_read_metrics(c);
    c->img_s = cell_read_img_s(c);
    const int complete = c->epochs >= cfg.train.epochs || cfg.train.max_steps > 0;
    if (st == SF_TRAIN_DIVERGED) {
        c->status = CELL_DIVERGED;
        c->diverged_step = r.diverged_step;
        c->final_top1 = NAN;
    } else if (st == SF_TRAIN_OK && complete) {
        c->status = CELL_OK;
    } else if (st == SF_TRAIN_OK) {
        return RUN_INTERRUPTED;  // stopped by a signal: its checkpoint is written
    } else {
        c->status = CELL_ERROR;
        return RUN_ERROR;
    }
    snprintf(path, sizeof path, "%s/result.json", c->dir);
    return write_atomic(path, fill_result, c) == 0 ? RUN_DONE : RUN_ERROR;
}

/* ---- tables ---- */

typedef struct variant_summary {
    int done, ok, diverged, errors;
    seed_stats final, best;        // over the ok seeds: mean, std, 95 % interval of the mean
    double img_s;
    char status[256];
} variant_summary;

static void summarize(const study *s, int v, variant_summary *out) {
    double fin[MAX_SEEDS], best[MAX_SEEDS], img[MAX_SEEDS];
    int n_img = 0;
    memset(out, 0, sizeof *out);
    char steps[200] = "";
    size_t used = 0;
    for (int k = 0; k < s->seeds; k++) {
        const cell *c = &s->cells[k * s->n_variants + v];
        if (c->status == CELL_PENDING) continue;
        if (c->status == CELL_ERROR) {
            out->errors++;
            continue;
        }
        out->done++;
        if (isfinite(c->img_s)) img[n_img++] = c->img_s;
        if (c->status == CELL_OK) {
            fin[out->ok] = c->final_top1;
            best[out->ok++] = c->best_top1;
        } else {
            out->diverged++;
            if (used < sizeof steps)
                used += (size_t)snprintf(steps + used, sizeof steps - used, "%s%ld", out->diverged > 1 ? ", " : "",
                                         c->diverged_step);
        }
    }
    out->final = seed_stats_of(fin, out->ok);
    out->best = seed_stats_of(best, out->ok);
    out->img_s = seed_stats_of(img, n_img).mean;
    used = 0;
    char *st = out->status;
    const size_t cap = sizeof out->status;
    if (out->done == 0 && out->errors == 0) snprintf(st, cap, "pending");
    else if (out->diverged == 0 && out->errors == 0) snprintf(st, cap, "ok");
    else {
        if (out->diverged == out->done && out->errors == 0 && s->seeds == 1)
            used += (size_t)snprintf(st, cap, "diverged at step %s", steps);
        else if (out->diverged)
            used += (size_t)snprintf(st, cap, "%d/%d diverged at step %s", out->diverged, out->done + out->errors, steps);
        if (out->errors && used < cap) snprintf(st + used, cap - used, "%s%d error", used ? "; " : "", out->errors);
    }
}

/* "85.10 ± 0.32", "85.10" (one seed), "NaN" (every seed diverged) or "–" (nothing yet). */
static const char *fmt_mean_std(char *buf, size_t size, const variant_summary *vs, const seed_stats *st) {
    if (vs->ok == 0) snprintf(buf, size, "%s", vs->diverged ? "NaN" : "–");
    else if (isfinite(st->std)) snprintf(buf, size, "%.2f ± %.2f", st->mean, st->std);
    else snprintf(buf, size, "%.2f", st->mean);
    return buf;
}

/* "[84.30, 85.90]", or "–" below two finished seeds. */
static const char *fmt_interval(char *buf, size_t size, const seed_stats *st) {
    if (isfinite(st->lo)) snprintf(buf, size, "[%.2f, %.2f]", st->lo, st->hi);
    else snprintf(buf, size, "–");
    return buf;
}

static const char *fmt_num(char *buf, size_t size, const char *fmt, double x) {
    if (isfinite(x)) snprintf(buf, size, fmt, x);
    else snprintf(buf, size, isnan(x) ? "NaN" : "–");
    return buf;
}

static const char *cell_status_text(char *buf, size_t size, const cell *c) {
    switch (c->status) {
    case CELL_OK: snprintf(buf, size, "ok"); break;
    case CELL_DIVERGED: snprintf(buf, size, "diverged at step %ld", c->diverged_step); break;
    case CELL_ERROR: snprintf(buf, size, "error"); break;
    default: snprintf(buf, size, "pending");
    }
    return buf;
}

static void fill_markdown(FILE *f, const void *arg) {
    const study *s = arg;
    char a[64], b[64], c3[64], ci[64], st[64];
    fprintf(f, "# Ablation of %s\n\n", s->base);
    fprintf(f,
            "%d seed%s per variant (train.seed + 0..%d). Top-1 on the val split in percent: mean ± sample "
            "standard deviation (n − 1) over the seeds that finished; a seed that diverged (NaN/Inf) is left "
            "out of the mean and named in the status with its step. 95 %% CI: the 95 %% confidence interval "
            "of the final top-1 mean, mean ± t(0.975, n − 1) · std / √n over the n finished seeds (none below "
            "two). Train img/s: mean over seeds of each run's median log-line rate.\n\n",
            s->seeds, s->seeds > 1 ? "s" : "", s->seeds - 1);
    fprintf(f, "| variant | final top-1 | 95 %% CI | best top-1 | seeds | train img/s | params | MMACs/img | exp()/img | status |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int v = 0; v < s->n_variants; v++) {
        const variant *var = &s->variants[v];
        variant_summary vs;
        summarize(s, v, &vs);
        fprintf(f, "| %s | %s | %s | %s | %d/%d | %s | %.0f | %.2f | %.0f | %s |\n", var->name,
                fmt_mean_std(a, sizeof a, &vs, &vs.final), fmt_interval(ci, sizeof ci, &vs.final),
                fmt_mean_std(b, sizeof b, &vs, &vs.best), vs.ok, s->seeds,
                isfinite(vs.img_s) ? fmt_num(c3, sizeof c3, "%.0f", vs.img_s) : "–", var->params, var->macs / 1e6, var->exps, vs.status);
    }
    fprintf(f, "\n## Runs\n\n| variant | seed | final top-1 | best top-1 | epochs | train img/s | time (s) | status |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->n_cells; i++) {
        const cell *c = &s->cells[i];
        if (c->status == CELL_PENDING) continue;
        fprintf(f, "| %s | %llu | %s | %s | %d | %s | %.0f | %s |\n", s->variants[c->variant].name, c->seed,
                fmt_num(a, sizeof a, "%.2f", c->final_top1), fmt_num(b, sizeof b, "%.2f", c->best_top1), c->epochs,
                fmt_num(c3, sizeof c3, "%.0f", c->img_s), c->seconds, cell_status_text(st, sizeof st, c));
    }
}

static void csv_number(FILE *f, const char *fmt, double x) {
    if (isfinite(x)) fprintf(f, fmt, x);
    else if (isnan(x)) fprintf(f, "nan");
}

static void fill_csv(FILE *f, const void *arg) {
    const study *s = arg;
    fprintf(f, "variant,seeds,seeds_ok,seeds_diverged,final_top1_mean,final_top1_std,best_top1_mean,best_top1_std,"
               "final_top1_ci95_lo,final_top1_ci95_hi,best_top1_ci95_lo,best_top1_ci95_hi,"
               "train_img_per_s,params,macs,exp_per_img,status\n");
    for (int v = 0; v < s->n_variants; v++) {
        variant_summary vs;
        summarize(s, v, &vs);
        const variant *var = &s->variants[v];
        fprintf(f, "\"%s\",%d,%d,%d,", var->name, vs.done, vs.ok, vs.diverged);
        const double cols[9] = {vs.final.mean, vs.final.std, vs.best.mean, vs.best.std, vs.final.lo,
                                vs.final.hi,   vs.best.lo,   vs.best.hi,    vs.img_s};
        for (int i = 0; i < 9; i++) {
            csv_number(f, i == 8 ? "%.1f" : "%.4f", cols[i]);
            fputc(',', f);
        }
        fprintf(f, "%.0f,%.0f,%.0f,\"%s\"\n", var->params, var->macs, var->exps, vs.status);  // "1/3 diverged at step 5, 9"
    }
}

static void fill_runs_csv(FILE *f, const void *arg) {
    const study *s = arg;
    char st[64];
    fprintf(f, "variant,seed,status,diverged_step,epochs,final_top1,best_top1,train_img_per_s,seconds,run_dir\n");
    for (int i = 0; i < s->n_cells; i++) {
        const cell *c = &s->cells[i];
        if (c->status == CELL_PENDING) continue;
        fprintf(f, "\"%s\",%llu,%s,%ld,%d,", s->variants[c->variant].name, c->seed,
                c->status == CELL_DIVERGED ? "diverged" : cell_status_text(st, sizeof st, c), c->diverged_step,
                c->epochs);
        const double cols[4] = {c->final_top1, c->best_top1, c->img_s, c->seconds};
        for (int k = 0; k < 4; k++) {
            csv_number(f, k < 2 ? "%.4f" : "%.1f", cols[k]);
            fputc(',', f);
        }
        fprintf(f, "\"%s\"\n", c->dir);
    }
}

static int write_tables(const study *s) {
    char md[SF_PATH_MAX + 32], csv[SF_PATH_MAX + 32], runs[SF_PATH_MAX + 32];
    snprintf(md, sizeof md, "%s/ablation.md", s->dir);
    snprintf(csv, sizeof csv, "%s/ablation.csv", s->dir);
    snprintf(runs, sizeof runs, "%s/runs.csv", s->dir);
    if (sf_mkdir_p(s->dir) != 0) return sf_error("cannot create %s: %s", s->dir, strerror(errno));
    if (write_atomic(md, fill_markdown, s) || write_atomic(csv, fill_csv, s) || write_atomic(runs, fill_runs_csv, s))
        return -1;
    return 0;
}

static void print_file(const char *path) {
    char *text = sf_read_text_file(path);
    if (text) fputs(text, stdout);
    free(text);
}

int sf_cmd_ablate(int argc, char **argv) {
    ablate_args a;
    if (parse_args(argc, argv, &a) != 0) {
        sf_hint("example: sfvit ablate configs/fmnist_tiny.yaml model.attn_norm=l1,l2,none --seeds 3");
        return 2;
    }
    if (sf_dist_init() < 1) return 1;  // the rank is known before any file is written
    study s;
    if (study_init(&s, &a) != 0) {
        study_free(&s);
        return 1;
    }
    int worst = 0, interrupted = 0;
    for (int i = 0; i < s.n_cells && !interrupted; i++) {
        cell *c = &s.cells[i];
        const char *name = s.variants[c->variant].name;
        const sf_config cfg = cell_config(&s, c);
        if (cell_check_config(c, &cfg) != 0) {  // another study's folder: leave it as it is
            study_free(&s);
            return 1;
        }
        if (cell_read_result(c) == 0) {
            printf("=== cell %d/%d: %s seed %llu: finished earlier, not run again\n", i + 1, s.n_cells, name, c->seed);
            continue;
        }
        printf("\n=== cell %d/%d: %s seed %llu ===\n", i + 1, s.n_cells, name, c->seed);
        fflush(stdout);
        sf_test_hold("cell %d", i + 1);
        int r = cell_run(&s, c);
        if (r == RUN_ERROR) worst = 1;
        interrupted = r == RUN_INTERRUPTED;
        if (write_tables(&s) != 0) worst = 1;
    }
    if (s.n_cells > 0 && write_tables(&s) != 0) worst = 1;
    char md[SF_PATH_MAX + 32];
    snprintf(md, sizeof md, "%s/ablation.md", s.dir);
    if (sf_dist_rank() == 0) {
        printf("\nablation table: %s\n", md);
        print_file(md);
    }
    if (interrupted) {
        printf("\nablation interrupted; the same command continues it (finished cells are not run again)\n");
        worst = 130;
    }
    study_free(&s);
    return worst;
}
