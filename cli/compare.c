/* compare.c — `sfvit compare`: variants against a base, paired by seed.
 *
 *   sfvit compare BASE_DIR OTHER_DIR... [--metric KEY] [--file NAME] [--margin M] [-o OUT.md|OUT.csv]
 *   sfvit compare DIR [OTHER_DIR...] --base-file BASE_NAME --file NAME [--metric KEY] ...
 *
 * Each DIR is a variant folder of `sfvit ablate` (<grid>/<variant>/seed<S>/). The number KEY
 * (final_top1) of NAME (result.json) in each seed folder is read; runs pair by seed number,
 * and only seeds with a value on both sides count. With --base-file, the base is the first
 * folder's BASE_NAME files and every folder given, the first included, is a variant read from
 * NAME: two evaluations of the same runs (a trained model against its initialization, say),
 * paired by seed. Per OTHER: the differences other − base,
 * their mean with its 95 % Student-t interval, wins/ties/losses and a verdict against the
 * equivalence margin M (0.5) fixed before looking:
 *   better / worse                 the interval lies above / below 0 (and not within ±M)
 *   better, within margin / worse, within margin
 *                                  above / below 0 but inside ±M: real, and smaller than M
 *   equivalent                     the interval contains 0 and lies inside ±M
 *   inconclusive                   the interval contains 0 and reaches past ±M
 *   too few pairs                  fewer than two pairs: no interval
 * Seeds that diverged (result.json status not "ok", or a null/NaN value) or lack the file are
 * counted per variant and named under the table, never dropped silently.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seeds.h"

#define TIE_EPS 1e-9

typedef struct comparison {
    const char *dir;
    char label[300];
    seed_set set;
    int pairs;
    long *seed;                    // (pairs) the paired seeds
    double *base, *other, *diff;   // (pairs) diff = other - base
    double base_mean, other_mean;  // over the paired seeds
    seed_stats d;                  // of diff
    int wins, ties, losses;
    const char *verdict;
} comparison;

typedef struct compare_args {
    const char *metric, *file, *out;
    const char *base_file;         // the base's file when it differs from the variants' (--base-file)
    double margin;
} compare_args;

static const char *verdict_of(const seed_stats *d, double margin) {
    if (d->n < 2) return "too few pairs";
    const int within = d->lo > -margin && d->hi < margin;
    if (d->lo > 0) return within ? "better, within margin" : "better";
    if (d->hi < 0) return within ? "worse, within margin" : "worse";
    return within ? "equivalent" : "inconclusive";
}

static const seed_value *find_seed(const seed_set *s, long seed) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i].seed == seed) return &s->v[i];
    return NULL;
}

static void compare_one(const seed_set *base, comparison *c, double margin) {
    const int cap = c->set.n;
    c->seed = sf_calloc((size_t)cap + 1, sizeof(long));
    c->base = sf_calloc((size_t)cap + 1, sizeof(double));
    c->other = sf_calloc((size_t)cap + 1, sizeof(double));
    c->diff = sf_calloc((size_t)cap + 1, sizeof(double));
    for (int i = 0; i < c->set.n; i++) {
        const seed_value *o = &c->set.v[i], *b = find_seed(base, o->seed);
        if (o->state != SEED_OK || !b || b->state != SEED_OK) continue;
        const int k = c->pairs++;
        c->seed[k] = o->seed;
        c->base[k] = b->value;
        c->other[k] = o->value;
        c->diff[k] = o->value - b->value;
        c->wins += c->diff[k] > TIE_EPS;
        c->losses += c->diff[k] < -TIE_EPS;
        c->ties += fabs(c->diff[k]) <= TIE_EPS;
    }
    c->base_mean = seed_stats_of(c->base, c->pairs).mean;
    c->other_mean = seed_stats_of(c->other, c->pairs).mean;
    c->d = seed_stats_of(c->diff, c->pairs);
    c->verdict = verdict_of(&c->d, margin);
}

static void comparison_free(comparison *c) {
    seed_set_free(&c->set);
    free(c->seed);
    free(c->base);
    free(c->other);
    free(c->diff);
}

/* ---- output ---- */

typedef struct report {
    const compare_args *a;
    char base_label[300];
    const seed_set *base;
    comparison *c;
    int n;
    int decimals;                  // of the metric's numbers in the markdown
} report;

static const char *fmt(char *buf, size_t size, int decimals, double x, int sign) {
    if (isfinite(x)) snprintf(buf, size, sign ? "%+.*f" : "%.*f", decimals, x);
    else snprintf(buf, size, "–");
    return buf;
}

static void seed_counts(char *buf, size_t size, const seed_set *s) {
    snprintf(buf, size, "%d seed%s: %d ok, %d diverged, %d missing", s->n, s->n == 1 ? "" : "s", s->n_ok,
             s->n_diverged, s->n_missing);
}

/* "seed 3 (only in base); seed 4 (variant: status diverged)": the seeds of either side that
 * are not in a pair, with the reason. */
static void unpaired_text(const report *r, const comparison *c, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (int side = 0; side < 2; side++) {
        const seed_set *s = side ? r->base : &c->set, *t = side ? &c->set : r->base;
        for (int i = 0; i < s->n && used < size; i++) {
            const seed_value *a = &s->v[i], *b = find_seed(t, a->seed);
            if (side && b) continue;  // seen from the variant's side already
            const seed_value *vv = side ? b : a, *bb = side ? a : b;  // variant's, base's
            if (vv && vv->state == SEED_OK && bb && bb->state == SEED_OK) continue;
            char why[300];
            if (!b) snprintf(why, sizeof why, "only in %s", side ? "base" : "variant");
            else if (vv->state != SEED_OK && bb->state != SEED_OK) snprintf(why, sizeof why, "base: %s; variant: %s", bb->why, vv->why);
            else if (vv->state != SEED_OK) snprintf(why, sizeof why, "variant: %s", vv->why);
            else snprintf(why, sizeof why, "base: %s", bb->why);
            used += (size_t)snprintf(buf + used, size - used, "%sseed %ld (%s)", used ? "; " : "", a->seed, why);
        }
    }
}

static void fill_markdown(FILE *f, const void *arg) {
    const report *r = arg;
    const int dp = r->decimals;
    char a[64], b[64], c3[64], d[64], e[64], counts[128];
    seed_counts(counts, sizeof counts, r->base);
    if (r->a->base_file)
        fprintf(f, "# %s of %s against %s, paired by seed\n\n", r->a->metric, r->a->file, r->a->base_file);
    else
        fprintf(f, "# %s of %s, paired by seed\n\n", r->a->metric, r->a->file);
    fprintf(f, "Base: %s (%s).\n\n", r->base_label, counts);
    fprintf(f,
            "Each row compares a variant with the base over the seeds where both have a value (pairs): the "
            "difference is variant − base per seed, its mean and the 95 %% interval of that mean, "
            "mean ± t(0.975, pairs − 1) · sd / √pairs; wins/ties/losses count the seeds where the variant is "
            "above/equal to/below the base. Verdict, with the equivalence margin ±%g set before the "
            "comparison: better/worse = the interval lies above/below 0; \"within margin\" added when it also "
            "lies inside ±%g (a real difference smaller than the margin); equivalent = the interval contains "
            "0 and lies inside ±%g; inconclusive = it contains 0 and reaches past ±%g.\n\n",
            r->a->margin, r->a->margin, r->a->margin, r->a->margin);
    /* each folder on its own first: all its ok seeds, paired or not */
    fprintf(f, "| folder | seeds ok/all | diverged | mean | 95 %% interval of the mean |\n|---|---|---|---|---|\n");
    for (int i = -1; i < r->n; i++) {
        const seed_set *set = i < 0 ? r->base : &r->c[i].set;
        double *v = sf_calloc((size_t)set->n + 1, sizeof(double));
        seed_set_values(set, v);
        const seed_stats st = seed_stats_of(v, set->n_ok);
        free(v);
        char ci[160] = "–";
        if (isfinite(st.lo))
            snprintf(ci, sizeof ci, "[%s, %s]", fmt(d, sizeof d, dp, st.lo, 0), fmt(e, sizeof e, dp, st.hi, 0));
        fprintf(f, "| %s%s | %d/%d | %d | %s | %s |\n", i < 0 ? r->base_label : r->c[i].label, i < 0 ? " (base)" : "",
                set->n_ok, set->n, set->n_diverged, fmt(a, sizeof a, dp, st.mean, 0), ci);
    }
    fprintf(f, "\n");
    fprintf(f, "| variant | pairs | diverged | base | variant mean | difference | 95 %% interval | wins/ties/losses | verdict |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < r->n; i++) {
        const comparison *c = &r->c[i];
        char ci[160] = "–";
        if (isfinite(c->d.lo))
            snprintf(ci, sizeof ci, "[%s, %s]", fmt(d, sizeof d, dp, c->d.lo, 1), fmt(e, sizeof e, dp, c->d.hi, 1));
        fprintf(f, "| %s | %d | %d/%d | %s | %s | %s | %s | %d/%d/%d | %s |\n", c->label, c->pairs, c->set.n_diverged,
                c->set.n, fmt(a, sizeof a, dp, c->base_mean, 0), fmt(b, sizeof b, dp, c->other_mean, 0),
                fmt(c3, sizeof c3, dp, c->d.mean, 1), ci, c->wins, c->ties, c->losses, c->verdict);
    }
    int header = 0;
    for (int i = 0; i < r->n; i++) {
        char why[2048];
        unpaired_text(r, &r->c[i], why, sizeof why);
        if (!why[0]) continue;
        if (!header++) fprintf(f, "\nSeeds not in a pair (left out of the differences):\n\n");
        fprintf(f, "- %s: %s\n", r->c[i].label, why);
    }
    fprintf(f, "\n## Per-seed differences\n\n| variant | seed | base | variant | difference |\n|---|---|---|---|---|\n");
    for (int i = 0; i < r->n; i++)
        for (int k = 0; k < r->c[i].pairs; k++)
            fprintf(f, "| %s | %ld | %s | %s | %s |\n", r->c[i].label, r->c[i].seed[k],
                    fmt(a, sizeof a, dp, r->c[i].base[k], 0), fmt(b, sizeof b, dp, r->c[i].other[k], 0),
                    fmt(c3, sizeof c3, dp, r->c[i].diff[k], 1));
}

static void csv_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6f,", x);
    else fprintf(f, "nan,");
}

static void fill_csv(FILE *f, const void *arg) {
    const report *r = arg;
    fprintf(f, "base,variant,file,metric,margin,pairs,base_seeds,base_diverged,base_missing,variant_seeds,"
               "variant_diverged,variant_missing,base_mean,variant_mean,diff_mean,diff_std,diff_ci95_lo,diff_ci95_hi,"
               "wins,ties,losses,verdict,diffs\n");
    for (int i = 0; i < r->n; i++) {
        const comparison *c = &r->c[i];
        fprintf(f, "\"%s\",\"%s\",\"%s\",\"%s\",%g,%d,%d,%d,%d,%d,%d,%d,", r->base_label, c->label, r->a->file,
                r->a->metric, r->a->margin, c->pairs, r->base->n, r->base->n_diverged, r->base->n_missing, c->set.n,
                c->set.n_diverged, c->set.n_missing);
        const double cols[6] = {c->base_mean, c->other_mean, c->d.mean, c->d.std, c->d.lo, c->d.hi};
        for (int k = 0; k < 6; k++) csv_num(f, cols[k]);
        fprintf(f, "%d,%d,%d,\"%s\",\"", c->wins, c->ties, c->losses, c->verdict);
        for (int k = 0; k < c->pairs; k++) fprintf(f, "%sseed%ld:%.6f", k ? ";" : "", c->seed[k], c->diff[k]);
        fprintf(f, "\"\n");
    }
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Two decimals for percent-like metrics, more when the margin is finer than 0.1. */
static int decimals_for(double margin) {
    return margin >= 0.1 ? 2 : (int)ceil(-log10(margin)) + 1;
}

/* A folder's label, "<grid>/<variant>", and with --base-file the file read from it, since the
 * same folder can then be on both sides: "<grid>/<variant>: saliency.json". */
static void file_label(const char *dir, const char *file, char *out, size_t size) {
    char label[280];
    dir_label(dir, 1, label, sizeof label);
    if (file) snprintf(out, size, "%s: %s", label, file);
    else snprintf(out, size, "%s", label);
}

int sf_cmd_compare(int argc, char **argv) {
    cli_args args;
    if (cli_parse("compare", argc, argv, &args)) return 2;
    compare_args a = {cli_get(&args, "compare", "--metric"), cli_get(&args, "compare", "--file"),
                      cli_get(&args, "compare", "-o"), cli_get(&args, "compare", "--base-file"), 0.5};
    const char *margin = cli_get(&args, "compare", "--margin");
    char **dirs = args.pos;
    const int n_dirs = args.n_pos;
    if (!a.metric) a.metric = "final_top1";
    if (!a.file) a.file = "result.json";
    if (margin) {
        char *end;
        a.margin = strtod(margin, &end);
        if (*end || !(a.margin > 0) || !isfinite(a.margin)) {
            cli_args_free(&args);
            return cli_usage_error("compare", "--margin takes a positive number, got '%s'", margin);
        }
    }
    if (a.base_file && !cli_get(&args, "compare", "--file")) {
        cli_args_free(&args);
        return cli_usage_error("compare", "--base-file needs --file: the variants' file to compare with it");
    }
    /* With --base-file the first folder is also a variant (its other file). */
    const int first_variant = a.base_file ? 0 : 1;
    if (n_dirs < 2 - !!a.base_file) {
        cli_args_free(&args);
        return cli_usage_error("compare", a.base_file ? "give at least one variant folder"
                                                      : "give a base variant folder and at least one other");
    }
    seed_set base;
    int rc = 0;
    if (seed_set_read(dirs[0], a.base_file ? a.base_file : a.file, a.metric, 1, &base) != 0) {
        cli_args_free(&args);
        return 1;
    }
    report r = {&a, "", &base, sf_calloc((size_t)n_dirs, sizeof(comparison)), 0, decimals_for(a.margin)};
    file_label(dirs[0], a.base_file, r.base_label, sizeof r.base_label);
    for (int i = first_variant; i < n_dirs && rc == 0; i++) {
        comparison *c = &r.c[r.n];
        c->dir = dirs[i];
        file_label(dirs[i], a.base_file ? a.file : NULL, c->label, sizeof c->label);
        if (seed_set_read(dirs[i], a.file, a.metric, 1, &c->set) != 0) {
            rc = 1;
            break;
        }
        r.n++;
        compare_one(&base, c, a.margin);
    }
    cli_args_free(&args);
    if (rc == 0) {
        fill_markdown(stdout, &r);
        if (a.out && sf_write_stream_atomic(a.out, ends_with(a.out, ".csv") ? fill_csv : fill_markdown, &r) != 0)
            rc = 1;
        else if (a.out)
            fprintf(stderr, "wrote %s\n", a.out);
    }
    for (int i = 0; i < r.n; i++) comparison_free(&r.c[i]);
    free(r.c);
    seed_set_free(&base);
    return rc;
}
