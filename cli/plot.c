/* plot.c — `sfvit plot`: figures drawn here pixel by pixel and written as PNG (libpng).
 *
 *   sfvit plot DIR... -o curves.png       loss and top-1 per epoch, train (dashed) and val
 *                                         (solid), one colour per DIR: a run folder (its
 *                                         metrics.csv) or a variant folder (seed<S>/ runs:
 *                                         the mean over seeds, a band from min to max of val)
 *   sfvit plot ABLATION_DIR -o dots.png   each variant's final val top-1: the mean as a dot
 *                                         with its 95 % t interval, a mark per seed; the axis
 *                                         spans the values. --bars: bars from 0 instead
 *   sfvit plot --dots VARIANT_DIR... -o dots.png   the same chart for variant folders of
 *                                         any grids
 *   sfvit plot SWEEP.csv -o scaling.png   a `bench --token-sweep`, log-log (cli/plot_scaling.c)
 *   sfvit plot --series 'nr_iters_{x}.json' --x 1,2,5 VARIANT_DIR... -o nr.png   one evaluation
 *                                         over a setting: mean, 95 % band, seeds (cli/plot_series.c)
 * A folder holding ablation.csv is an ablation (sfvit ablate). The drawing itself (canvas,
 * bitmap font, axes) is cli/draw.c; the seed folders and the statistics cli/seeds.c.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfvit/data.h"
#include "cli.h"

#include "draw.h"
#include "seeds.h"

/* ---- files ---- */

static int is_dir_with(const char *dir, const char *file) {
    char path[SF_PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Splits a CSV line in place at commas outside double quotes (quotes removed). */
int csv_split(char *line, char **fields, int max) {
    int n = 0, quoted = 0;
    char *w = line, *start = line;
    for (char *r = line;; r++) {
        if (*r == '"') {
            quoted = !quoted;
            continue;
        }
        if ((*r == ',' && !quoted) || *r == 0 || *r == '\n' || *r == '\r') {
            int end = *r != ',';
            *w++ = 0;
            if (n < max) fields[n++] = start;
            start = w;
            if (end) break;
            continue;
        }
        *w++ = *r;
    }
    return n;
}

int column(char **names, int n, const char *want) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], want)) return i;
    return -1;
}

double field_number(char **f, int n, int col) {
    if (col < 0 || col >= n || !*f[col]) return NAN;
    char *end;
    double v = strtod(f[col], &end);
    return *end ? NAN : v;
}

/* ---- curves of runs ---- */

enum { SERIES_TRAIN_LOSS, SERIES_VAL_LOSS, SERIES_TRAIN_TOP1, SERIES_VAL_TOP1, N_SERIES };
static const char *const SERIES_COLUMN[N_SERIES] = {"train_loss", "val_loss", "train_top1", "top1"};

typedef struct run_curves {
    char label[160];
    int n;                         // epochs
    double *epoch;                 // (n)
    double *v[N_SERIES];           // (n) each, NaN where not logged; a variant's: the mean over seeds
    double *lo[N_SERIES], *hi[N_SERIES];  // a variant's min and max over seeds; NULL for a run
    long diverged_step;            // -1 if none
    int seeds;                     // a variant: the seeds in its mean (0 for a run)
    char left_out[256];            // a variant: its seeds that diverged, left out of the mean
} run_curves;

#define BAND_ALPHA 0.25

/* "runs/kinds/config=study_vit/seed0" -> "kinds/config=study_vit/seed0": a seed folder keeps its
 * grid and variant, so it reads apart from the variant's own line; "runs/A" -> "A". */
static void run_label(const char *dir, char *out, size_t size) {
    char last[SF_PATH_MAX];
    dir_label(dir, 0, last, sizeof last);
    dir_label(dir, strncmp(last, "seed", 4) ? 0 : 2, out, size);
}

static long diverged_step_of(const char *dir) {
    char path[SF_PATH_MAX + 16], line[512];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    FILE *f = fopen(path, "r");
    long step = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"event\":\"diverged\",\"step\":");
        if (p) step = strtol(p + strlen("\"event\":\"diverged\",\"step\":"), NULL, 10);
    }
    fclose(f);
    return step;
}

static int run_read(const char *dir, run_curves *r) {
    char path[SF_PATH_MAX + 16], line[1024];
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        sf_error("plot: cannot read %s: %s", path, strerror(errno));
        sf_hint("give run folders (with metrics.csv), variant folders (seed<S>/ runs) or an ablation folder (with ablation.csv)");
        return -1;
    }
    char *names[32], header[1024];
    int n_names = fgets(header, sizeof header, f) ? csv_split(header, names, 32) : 0;
    int col_epoch = column(names, n_names, "epoch"), col[N_SERIES];
    for (int s = 0; s < N_SERIES; s++) col[s] = column(names, n_names, SERIES_COLUMN[s]);
    if (col_epoch < 0 || col[SERIES_VAL_TOP1] < 0) {
        fclose(f);
        return sf_error("plot: %s has no epoch and top1 columns", path);
    }
    int cap = 16;
    r->epoch = sf_malloc((size_t)cap * sizeof(double));
    for (int s = 0; s < N_SERIES; s++) r->v[s] = sf_malloc((size_t)cap * sizeof(double));
    while (fgets(line, sizeof line, f)) {
        char *fl[32];
        int n = csv_split(line, fl, 32);
        double e = field_number(fl, n, col_epoch);
        if (!isfinite(e)) continue;
        if (r->n == cap) {
            cap *= 2;
            r->epoch = sf_realloc(r->epoch, (size_t)cap * sizeof(double));
            for (int s = 0; s < N_SERIES; s++) r->v[s] = sf_realloc(r->v[s], (size_t)cap * sizeof(double));
        }
        r->epoch[r->n] = e;
        for (int s = 0; s < N_SERIES; s++) r->v[s][r->n] = field_number(fl, n, col[s]);
        r->n++;
    }
    fclose(f);
    run_label(dir, r->label, sizeof r->label);
    r->diverged_step = diverged_step_of(dir);
    return 0;
}

static void run_free(run_curves *r) {
    free(r->epoch);
    for (int s = 0; s < N_SERIES; s++) free(r->v[s]), free(r->lo[s]), free(r->hi[s]);
}

/* A variant folder: the per-epoch mean, min and max over its seed runs that did not diverge
 * (a diverged seed would pull the mean down only while it lasts; it is named instead). An
 * epoch's statistics use the seeds that reached it. */
static int variant_read(const char *dir, run_curves *r) {
    long *seeds;
    const int n_seeds = seed_dirs_list(dir, &seeds);
    run_curves *runs = sf_calloc((size_t)n_seeds, sizeof(run_curves));
    int rc = 0, n_epochs = 1;
    size_t used = 0;
    memset(r, 0, sizeof *r);
    r->diverged_step = -1;
    for (int i = 0; i < n_seeds && rc == 0; i++) {
        char path[SF_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/seed%ld", dir, seeds[i]);
        rc = run_read(path, &runs[i]);
        if (rc == 0 && runs[i].diverged_step >= 0 && used < sizeof r->left_out)
            used += (size_t)snprintf(r->left_out + used, sizeof r->left_out - used, "%sseed %ld NaN at step %ld",
                                     used ? ", " : "", seeds[i], runs[i].diverged_step);
        for (int k = 0; rc == 0 && k < runs[i].n; k++) n_epochs = (int)fmax(n_epochs, runs[i].epoch[k]);
    }
    if (rc == 0) {
        r->n = n_epochs;
        r->epoch = sf_malloc((size_t)n_epochs * sizeof(double));
        for (int k = 0; k < n_epochs; k++) r->epoch[k] = k + 1;
        double *one = sf_malloc((size_t)n_epochs * sizeof(double));  // a seed's series by epoch
        int *count = sf_malloc((size_t)n_epochs * sizeof(int));
        for (int s = 0; s < N_SERIES; s++) {
            r->v[s] = sf_calloc((size_t)n_epochs, sizeof(double));
            r->lo[s] = sf_malloc((size_t)n_epochs * sizeof(double));
            r->hi[s] = sf_malloc((size_t)n_epochs * sizeof(double));
            for (int k = 0; k < n_epochs; k++) r->lo[s][k] = INFINITY, r->hi[s][k] = -INFINITY, count[k] = 0;
            for (int i = 0; i < n_seeds; i++) {
                if (runs[i].diverged_step >= 0) continue;
                for (int k = 0; k < n_epochs; k++) one[k] = NAN;
                for (int k = 0; k < runs[i].n; k++) {  // a resumed run may repeat an epoch: the last row counts
                    const long e = lround(runs[i].epoch[k]);
                    if (e >= 1 && e <= n_epochs) one[e - 1] = runs[i].v[s][k];
                }
                for (int k = 0; k < n_epochs; k++)
                    if (isfinite(one[k])) {
                        r->v[s][k] += one[k];
                        r->lo[s][k] = fmin(r->lo[s][k], one[k]);
                        r->hi[s][k] = fmax(r->hi[s][k], one[k]);
                        count[k]++;
                    }
            }
            for (int k = 0; k < n_epochs; k++)
                if (count[k]) r->v[s][k] /= count[k];
                else r->v[s][k] = r->lo[s][k] = r->hi[s][k] = NAN;
        }
        free(one);
        free(count);
        for (int i = 0; i < n_seeds; i++) r->seeds += runs[i].diverged_step < 0;
        dir_label(dir, 0, r->label, sizeof r->label);
    }
    for (int i = 0; i < n_seeds; i++) run_free(&runs[i]);
    free(runs);
    free(seeds);
    return rc;
}

/* Whether any value of any series can be drawn. */
static int run_drawn(const run_curves *r) {
    for (int s = 0; s < N_SERIES; s++)
        for (int k = 0; k < r->n; k++)
            if (isfinite(r->v[s][k])) return 1;
    return 0;
}

/* The band of series s between its min and max over seeds, blended over what is drawn: linear
 * between epochs, a strip 9 pixels wide at an epoch without a neighbour. */
static void draw_band(sf_image *im, const panel *p, const run_curves *r, int s, rgb c) {
    const double *lo = r->lo[s], *hi = r->hi[s];
    for (int x = p->x0; x <= p->x1; x++) {
        const double e = p->xmin + (double)(x - p->x0) / (p->x1 - p->x0) * (p->xmax - p->xmin);
        const int k = (int)floor(e) - 1, near = (int)lround(e) - 1;  // epoch k + 1 <= e; the nearest
        double a, b;
        if (k >= 0 && k + 1 < r->n && isfinite(lo[k]) && isfinite(lo[k + 1])) {
            const double t = e - (k + 1);
            a = lo[k] + (lo[k + 1] - lo[k]) * t;
            b = hi[k] + (hi[k + 1] - hi[k]) * t;
        } else if (near >= 0 && near < r->n && isfinite(lo[near]) && abs(x - px_x(p, r->epoch[near])) <= 4) {
            a = lo[near], b = hi[near];
        } else {
            continue;
        }
        for (int y = px_y(p, b); y <= px_y(p, a); y++)
            if (y >= p->y0 && y <= p->y1) blend(im, x, y, c, BAND_ALPHA);
    }
}

/* One panel of the curves figure: series a (train, dashed) and b (val, solid) of every run. */
static void draw_curves_panel(sf_image *im, panel p, const run_curves *runs, int n_runs, int a, int b,
                              const char *title) {
    double lo = INFINITY, hi = -INFINITY, emax = 1;
    for (int i = 0; i < n_runs; i++)
        for (int k = 0; k < runs[i].n; k++) {
            emax = fmax(emax, runs[i].epoch[k]);
            for (int s = a; s <= b; s += b - a)
                if (isfinite(runs[i].v[s][k])) {
                    lo = fmin(lo, runs[i].lo[s] ? runs[i].lo[s][k] : runs[i].v[s][k]);
                    hi = fmax(hi, runs[i].hi[s] ? runs[i].hi[s][k] : runs[i].v[s][k]);
                }
        }
    if (!isfinite(lo)) lo = 0, hi = 1;
    p.ymin = lo;
    p.ymax = hi;
    p.ystep = nice_range(&p.ymin, &p.ymax, 5);
    p.xmin = emax > 1 ? 1 : 0.5;
    p.xmax = emax > 1 ? emax : 1.5;
    p.xstep = emax > 1 ? fmax(1, nice_range(&p.xmin, &p.xmax, 8)) : 1;
    if (emax > 1) p.xmin = fmax(p.xmin, 1), p.xmax = fmax(p.xmax, emax);
    draw_axes(im, &p, title, "epoch");
    for (int i = 0; i < n_runs; i++)  // bands under every line
        if (runs[i].lo[b]) draw_band(im, &p, &runs[i], b, PALETTE[i % 10]);
    for (int i = 0; i < n_runs; i++) {
        const rgb c = PALETTE[i % 10];
        for (int s = a; s <= b; s += b - a) {
            const int dash = s == a ? 10 : 0;
            int have_prev = 0, px = 0, py = 0;
            for (int k = 0; k < runs[i].n; k++) {
                double y = runs[i].v[s][k];
                if (!isfinite(y)) {
                    have_prev = 0;
                    continue;
                }
                int x1 = px_x(&p, runs[i].epoch[k]), y1 = px_y(&p, y);
                if (have_prev) draw_line(im, px, py, x1, y1, c, 3, dash);
                fill_rect(im, x1 - 3, y1 - 3, x1 + 3, y1 + 3, c);
                px = x1, py = y1, have_prev = 1;
            }
        }
    }
}

enum { CURVES_W = 1280, PANEL_H = 380, MARGIN_L = 90, MARGIN_T = 50, LEGEND_ROW = 26 };

/* The styles of what is drawn (val solid; train dashed, a band, when there are such), then a
 * colour swatch and a name per drawn run; a run with nothing to draw is named in red, without
 * a swatch. */
static void draw_legend(sf_image *im, int y, const run_curves *runs, int n_runs) {
    int any_train = 0, any_band = 0;
    for (int i = 0; i < n_runs; i++)
        for (int k = 0; k < runs[i].n; k++) {
            any_train |= isfinite(runs[i].v[SERIES_TRAIN_LOSS][k]) || isfinite(runs[i].v[SERIES_TRAIN_TOP1][k]);
            any_band |= runs[i].lo[SERIES_VAL_TOP1] && isfinite(runs[i].lo[SERIES_VAL_TOP1][k]);
        }
    draw_line(im, MARGIN_L, y + TEXT_H / 2, MARGIN_L + 40, y + TEXT_H / 2, AXIS, 3, 0);
    int x = MARGIN_L + 50 + draw_text(im, MARGIN_L + 50, y, "val", AXIS) + 40;
    if (any_train) {
        draw_line(im, x, y + TEXT_H / 2, x + 40, y + TEXT_H / 2, AXIS, 3, 10);
        x += 50 + draw_text(im, x + 50, y, "train", AXIS) + 40;
    }
    if (any_band) {
        fill_rect(im, x, y + 2, x + 40, y + TEXT_H - 3, tint(AXIS, BAND_ALPHA));
        draw_text(im, x + 50, y, "band: min-max of val over a variant's seeds; line: their mean", AXIS);
    }
    for (int i = 0; i < n_runs; i++) {
        y += LEGEND_ROW;
        const int drawn = run_drawn(&runs[i]);
        char label[640];
        size_t used = (size_t)snprintf(label, sizeof label, "%s%s", drawn ? "" : "not drawn (no value): ", runs[i].label);
        if (runs[i].lo[0])
            used += (size_t)snprintf(label + used, sizeof label - used, "  (mean of %d seed%s)", runs[i].seeds,
                                     runs[i].seeds == 1 ? "" : "s");
        if (drawn) fill_rect(im, MARGIN_L, y + 2, MARGIN_L + 40, y + TEXT_H - 3, PALETTE[i % 10]);
        const int x_text = MARGIN_L + 50 + draw_text(im, MARGIN_L + 50, y, label, drawn ? BLACK : RED);
        if (runs[i].diverged_step >= 0)
            snprintf(label, sizeof label, "  (NaN at step %ld)", runs[i].diverged_step);
        else if (runs[i].left_out[0])
            snprintf(label, sizeof label, "  (left out: %s)", runs[i].left_out);
        else
            label[0] = 0;
        draw_text(im, x_text, y, label, RED);
    }
}

static int plot_runs(char **dirs, int n_runs, const char *out) {
    run_curves *runs = sf_calloc((size_t)n_runs, sizeof(run_curves));
    int rc = 0;
    for (int i = 0; i < n_runs && rc == 0; i++) {
        long *seeds = NULL;
        const int variant = !is_dir_with(dirs[i], "metrics.csv") && seed_dirs_list(dirs[i], &seeds) > 0;
        free(seeds);
        rc = variant ? variant_read(dirs[i], &runs[i]) : run_read(dirs[i], &runs[i]);
    }
    if (rc == 0) {
        const int legend_h = (n_runs + 1) * LEGEND_ROW + 20;
        sf_image im = {CURVES_W, MARGIN_T + PANEL_H + 70 + legend_h, 3, NULL};
        im.px = sf_malloc((size_t)im.w * im.h * 3);
        memset(im.px, 255, (size_t)im.w * im.h * 3);
        const int pw = (CURVES_W - 2 * MARGIN_L - 100) / 2;
        panel left = {MARGIN_L, MARGIN_T, MARGIN_L + pw, MARGIN_T + PANEL_H, 0, 0, 0, 0, 0, 0};
        panel right = left;
        right.x0 = left.x1 + 60 + MARGIN_L;
        right.x1 = right.x0 + pw;
        draw_curves_panel(&im, left, runs, n_runs, SERIES_TRAIN_LOSS, SERIES_VAL_LOSS, "loss (cross-entropy)");
        draw_curves_panel(&im, right, runs, n_runs, SERIES_TRAIN_TOP1, SERIES_VAL_TOP1, "top-1 (%)");
        draw_legend(&im, MARGIN_T + PANEL_H + 70, runs, n_runs);
        rc = sf_image_write_png(out, &im);
        free(im.px);
        if (rc == 0) printf("wrote %s (%dx%d): %d run%s\n", out, im.w, im.h, n_runs, n_runs > 1 ? "s" : "");
    }
    for (int i = 0; i < n_runs; i++) run_free(&runs[i]);
    free(runs);
    return rc ? 1 : 0;
}

/* ---- the chart of variants: dots with intervals, or bars from 0 ---- */

typedef struct chart_row {
    char name[300];
    seed_set set;                  // empty for a variant without seed folders yet
    double *values;                // (set.n_ok) the ok seeds' values
    seed_stats st;                 // mean, std, 95 % interval over them
} chart_row;

static void chart_rows_free(chart_row *rows, int n) {
    for (int i = 0; i < n; i++) seed_set_free(&rows[i].set), free(rows[i].values);
    free(rows);
}

static int chart_row_read(chart_row *r, const char *dir, const char *file, const char *metric, int require_value) {
    long *seeds;
    const int n = seed_dirs_list(dir, &seeds);
    free(seeds);
    if (n > 0 || require_value)
        if (seed_set_read(dir, file, metric, require_value, &r->set) != 0) return -1;
    r->values = sf_malloc(((size_t)r->set.n_ok + 1) * sizeof(double));
    seed_set_values(&r->set, r->values);
    r->st = seed_stats_of(r->values, r->set.n_ok);
    return 0;
}

/* The variants of ABLATION_DIR/ablation.csv, in its order, read from their seed folders (a
 * study in progress may have variants without any yet). */
static int chart_read_ablation(const char *dir, const char *file, const char *metric, chart_row **out, int *n_out) {
    char path[SF_PATH_MAX + 32], line[4096], header[1024], *names[32];
    snprintf(path, sizeof path, "%s/ablation.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return sf_error("plot: cannot read %s: %s", path, strerror(errno));
    const int nn = fgets(header, sizeof header, f) ? csv_split(header, names, 32) : 0, c_var = column(names, nn, "variant");
    if (c_var < 0) {
        fclose(f);
        return sf_error("plot: %s has no variant column", path);
    }
    int n = 0, cap = 8, rc = 0;
    chart_row *rows = sf_calloc((size_t)cap, sizeof(chart_row));
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char *fl[32], vdir[SF_PATH_MAX + 300];
        if (csv_split(line, fl, 32) <= c_var || !*fl[c_var]) continue;
        if (n == cap) rows = sf_realloc(rows, (size_t)(cap *= 2) * sizeof(chart_row)), memset(rows + n, 0, (size_t)(cap - n) * sizeof(chart_row));
        snprintf(rows[n].name, sizeof rows[n].name, "%s", fl[c_var]);
        snprintf(vdir, sizeof vdir, "%s/%s", dir, fl[c_var]);
        rc = chart_row_read(&rows[n++], vdir, file, metric, 0);
    }
    fclose(f);
    if (rc == 0 && n == 0) rc = sf_error("plot: %s has no variants", path);
    if (rc) return chart_rows_free(rows, n), -1;
    *out = rows;
    *n_out = n;
    return 0;
}

enum { CHART_W = 1400, CHART_TEXT_W = 460, BAR_ROW = 40, BAR_H = 24, MEAN_DOT_R = 6, SEED_MARK_H = 10 };

/* Variant i: its name, then a bar from 0 to the mean (bars) or a dot at the mean, the 95 %
 * interval as a line with end caps, a thin mark per seed, and the numbers; a variant without
 * a finished seed gets its state instead (red NaN when its seeds diverged). */
static void draw_chart_row(sf_image *im, const panel *p, const chart_row *r, int i, int bars) {
    const int yc = p->y0 + 10 + i * BAR_ROW + BAR_H / 2;
    const rgb c = PALETTE[i % 10];
    char buf[320];
    draw_text(im, p->x0 - 20 - text_width(r->name), yc - TEXT_H / 2, r->name, BLACK);
    if (r->st.n == 0) {
        if (r->set.n_diverged) snprintf(buf, sizeof buf, "NaN: %d/%d seeds diverged", r->set.n_diverged, r->set.n);
        else snprintf(buf, sizeof buf, "pending: no finished seed");
        draw_text(im, p->x0 + 10, yc - TEXT_H / 2, buf, r->set.n_diverged ? RED : AXIS);
        return;
    }
    const int xm = px_x(p, r->st.mean);
    if (bars) fill_rect(im, px_x(p, 0), yc - BAR_H / 2, xm, yc + BAR_H / 2, c);
    if (isfinite(r->st.lo)) {
        const int xa = px_x(p, r->st.lo), xb = px_x(p, r->st.hi);
        const rgb ci = bars ? BLACK : c;
        draw_line(im, xa, yc, xb, yc, ci, 3, 0);
        draw_line(im, xa, yc - 8, xa, yc + 8, ci, 3, 0);
        draw_line(im, xb, yc - 8, xb, yc + 8, ci, 3, 0);
    }
    for (int k = 0; k < r->set.n_ok; k++) {  // taller than the dot: seen above and below it
        const int xs = px_x(p, r->values[k]);
        fill_rect(im, xs - 1, yc - SEED_MARK_H, xs, yc + SEED_MARK_H, BLACK);
    }
    if (!bars) fill_circle(im, xm, yc, MEAN_DOT_R, c);
    int tx = p->x1 + 14;
    if (isfinite(r->st.lo)) snprintf(buf, sizeof buf, "%.2f [%.2f, %.2f] n=%d", r->st.mean, r->st.lo, r->st.hi, r->st.n);
    else snprintf(buf, sizeof buf, "%.2f n=1, no interval", r->st.mean);
    tx += draw_text(im, tx, yc - TEXT_H / 2, buf, BLACK);
    if (r->set.n_diverged) {
        snprintf(buf, sizeof buf, " +%d NaN", r->set.n_diverged);
        tx += draw_text(im, tx, yc - TEXT_H / 2, buf, RED);
    }
    if (r->set.n_missing) {
        snprintf(buf, sizeof buf, " +%d pending", r->set.n_missing);
        draw_text(im, tx, yc - TEXT_H / 2, buf, AXIS);
    }
}

/* subject: "abl: final val top-1 (%)", xlabel: "final val top-1 (%)". The title says what the marks are and over how many seeds. */
static int draw_chart(const chart_row *rows, int n, const char *subject, const char *xlabel, int bars, const char *out) {
    int label_w = 0, n_min = 0, n_max = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        label_w = label_w > text_width(rows[i].name) ? label_w : text_width(rows[i].name);
        const seed_stats *st = &rows[i].st;
        if (st->n == 0) continue;
        n_min = n_min && n_min < st->n ? n_min : st->n;
        n_max = n_max > st->n ? n_max : st->n;
        lo = fmin(lo, st->mean), hi = fmax(hi, st->mean);
        if (isfinite(st->lo)) lo = fmin(lo, st->lo), hi = fmax(hi, st->hi);
        for (int k = 0; k < st->n; k++) lo = fmin(lo, rows[i].values[k]), hi = fmax(hi, rows[i].values[k]);
    }
    if (!isfinite(lo)) lo = 0, hi = 100;
    panel p = {0};
    p.ymin = 0, p.ymax = 1, p.ystep = 1;
    if (bars) {  // bar lengths are only comparable from 0
        p.xmin = fmin(0, lo);
        p.xmax = fmax(0, hi);
    } else {  // the axis spans the values: the differences are the point; the ticks say where it starts
        const double pad = 0.15 * (hi - lo);
        p.xmin = lo >= 0 ? fmax(0, lo - pad) : lo - pad;
        p.xmax = hi + pad;
    }
    p.xstep = nice_range(&p.xmin, &p.xmax, 6);
    p.x0 = 30 + label_w + 20;
    p.x1 = CHART_W - CHART_TEXT_W;
    p.y0 = 70;
    p.y1 = p.y0 + n * BAR_ROW + 10;
    sf_image im = {CHART_W, p.y1 + 80, 3, NULL};
    im.px = sf_malloc((size_t)im.w * im.h * 3);
    memset(im.px, 255, (size_t)im.w * im.h * 3);
    char title[SF_PATH_MAX + 512], seeds[64], buf[64];
    if (n_min == n_max) snprintf(seeds, sizeof seeds, "%d seed%s", n_max, n_max == 1 ? "" : "s");
    else snprintf(seeds, sizeof seeds, "%d-%d seeds (n per row)", n_min, n_max);
    snprintf(title, sizeof title, "%s: %s and 95 %% interval of the mean over %s; | = one seed", subject,
             bars ? "mean (bar from 0)" : "mean (dot)", seeds);
    draw_text(&im, 30, 16, title, BLACK);
    draw_text(&im, 30, 40,
              bars ? "interval: mean +- t(0.975, n-1) * std / sqrt(n)"
                   : "interval: mean +- t(0.975, n-1) * std / sqrt(n); the axis spans the values, it does not start at 0",
              AXIS);
    for (double x = p.xmin; x <= p.xmax + p.xstep * 1e-6; x += p.xstep) {
        const int px = px_x(&p, x);
        draw_line(&im, px, p.y0, px, p.y1, GRID, 1, 0);
        tick_label(buf, sizeof buf, x, p.xstep);
        draw_text(&im, px - text_width(buf) / 2, p.y1 + 8, buf, AXIS);
    }
    draw_text(&im, (p.x0 + p.x1 - text_width(xlabel)) / 2, p.y1 + 14 + TEXT_H, xlabel, AXIS);
    for (int i = 0; i < n; i++) draw_chart_row(&im, &p, &rows[i], i, bars);
    draw_line(&im, p.x0, p.y0, p.x0, p.y1, AXIS, 2, 0);
    draw_line(&im, p.x0, p.y1, p.x1, p.y1, AXIS, 2, 0);
    const int rc = sf_image_write_png(out, &im);
    if (rc == 0) printf("wrote %s (%dx%d): %d variants, x axis from %g to %g\n", out, im.w, im.h, n, p.xmin, p.xmax);
    free(im.px);
    return rc ? 1 : 0;
}

/* "final val top-1 (%)" for the default metric, "top1 of test.json" otherwise. */
static void metric_name(const char *file, const char *metric, char *out, size_t size) {
    if (!strcmp(file, "result.json") && !strcmp(metric, "final_top1")) snprintf(out, size, "final val top-1 (%%)");
    else snprintf(out, size, "%s of %s", metric, file);
}

int sf_cmd_plot(int argc, char **argv) {
    cli_args args;
    if (cli_parse("plot", argc, argv, &args)) return 2;
    const char *out = cli_get(&args, "plot", "-o"), *metric = cli_get(&args, "plot", "--metric"),
               *file = cli_get(&args, "plot", "--file");
    const int bars = cli_get(&args, "plot", "--bars") != NULL, dots = cli_get(&args, "plot", "--dots") != NULL,
              logx = cli_get(&args, "plot", "--logx") != NULL;
    const char *series = cli_get(&args, "plot", "--series"), *x_list = cli_get(&args, "plot", "--x"),
               *xlabel = cli_get(&args, "plot", "--xlabel");
    char *dirs[64];
    int n = args.n_pos;
    memcpy(dirs, args.pos, sizeof(char *) * (size_t)n);
    cli_args_free(&args);
    if (n == 0 || !out) {
        if (n && !out) sf_error("plot: no output file (-o FILE.png)");
        else if (!n) sf_error("plot: no run or ablation folder given");
        sf_hint("usage: sfvit plot DIR... -o curves.png  |  sfvit plot ABLATION_DIR -o dots.png  |  "
                "sfvit plot --dots VARIANT_DIR... -o dots.png");
        return 2;
    }
    if (series || x_list) {
        if (!series || !x_list) return cli_usage_error("plot", "--series PATTERN and --x LIST go together");
        if (dots || bars || file)
            return cli_usage_error("plot", "--series draws curves of the files it names; --dots, --bars and --file are for charts");
        return plot_series(dirs, n, series, x_list, metric ? metric : "top1", logx, xlabel, out);
    }
    if (logx || xlabel) return cli_usage_error("plot", "--logx and --xlabel are for --series");
    const int sweep = plot_is_sweep_csv(dirs[0]);
    if (sweep < 0) return 1;
    if (sweep) {
        if (n > 1) return cli_usage_error("plot", "a sweep CSV is plotted alone (%s)", dirs[0]);
        return plot_scaling(dirs[0], out);
    }
    static const char default_metric[] = "final_top1", default_file[] = "result.json";
    if (!metric) metric = default_metric;
    if (!file) file = default_file;
    const int ablation = is_dir_with(dirs[0], "ablation.csv");
    if (ablation || dots) {
        if (ablation && !dots && n > 1) {
            sf_error("plot: an ablation folder is plotted alone (%s); --dots VARIANT_DIR... puts variants of several grids in one chart", dirs[0]);
            return 2;
        }
        chart_row *rows = NULL;
        int n_rows = 0, rc = 0;
        char subject[SF_PATH_MAX + 200], name[128];
        metric_name(file, metric, name, sizeof name);
        if (!dots) {
            char grid[SF_PATH_MAX];
            dir_label(dirs[0], 0, grid, sizeof grid);
            snprintf(subject, sizeof subject, "%s: %s", grid, name);
            rc = chart_read_ablation(dirs[0], file, metric, &rows, &n_rows);
        } else {
            snprintf(subject, sizeof subject, "%s", name);
            rows = sf_calloc((size_t)n, sizeof(chart_row));
            for (n_rows = 0; n_rows < n && rc == 0; n_rows++) {
                dir_label(dirs[n_rows], 1, rows[n_rows].name, sizeof rows[n_rows].name);
                rc = chart_row_read(&rows[n_rows], dirs[n_rows], file, metric, 1);
            }
        }
        if (rc == 0) rc = draw_chart(rows, n_rows, subject, name, bars, out);
        chart_rows_free(rows, n_rows);
        return rc ? 1 : 0;
    }
    if (bars || metric != default_metric || file != default_file)
        sf_warn("plot: --bars, --metric and --file are for an ablation or --dots chart; curves are drawn");
    return plot_runs(dirs, n, out);
}
