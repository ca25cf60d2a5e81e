/* plot_series.c — `sfvit plot --series PATTERN --x LIST VARIANT_DIR... -o out.png`: one
 * evaluation repeated over a setting (Newton–Raphson iterations, test resolution) as curves.
 * PATTERN names the file of each x with "{x}" (nr_iters_{x}.json is nr_iters_1.json at x = 1);
 * per variant folder and x: the mean of --metric over its seeds (a line through the x values),
 * the 95 % interval of that mean (a band) and a mark per seed (in its colour, beside the mean). The x ticks are the values given,
 * on a linear axis or, with --logx, a logarithmic one; the y axis spans the values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/data.h"
#include "cli.h"

#include "draw.h"
#include "seeds.h"

enum { SERIES_MAX_X = 32, SERIES_W = 1280, SERIES_PANEL_H = 420, SERIES_MARGIN_L = 90, SERIES_MARGIN_T = 70,
       SERIES_LEGEND_ROW = 26, SEED_MARK_W = 7 };
#define SERIES_BAND_ALPHA 0.25

/* One variant folder: at each x its ok seeds' values and their statistics. */
typedef struct series_row {
    char label[300];
    int n_x;
    double *values[SERIES_MAX_X];  // (stats[j].n) the ok seeds' values at x j
    seed_stats stats[SERIES_MAX_X];
    int seeds, diverged, pending;  // seed folders; the most diverged / without the file at any x
} series_row;

static void series_row_free(series_row *r) {
    for (int j = 0; j < r->n_x; j++) free(r->values[j]);
}

/* PATTERN with "{x}" replaced by the x value as given on the command line. */
static void series_file(const char *pattern, const char *x, char *out, size_t size) {
    const char *at = strstr(pattern, "{x}");
    snprintf(out, size, "%.*s%s%s", (int)(at - pattern), pattern, x, at + 3);
}

static int series_row_read(series_row *r, const char *dir, const char *pattern, char **xs, int n_x, const char *metric) {
    dir_label(dir, 1, r->label, sizeof r->label);
    for (int j = 0; j < n_x; j++) {
        char file[512];
        series_file(pattern, xs[j], file, sizeof file);
        seed_set set;
        if (seed_set_read(dir, file, metric, 0, &set) != 0) return -1;
        r->values[j] = sf_malloc(((size_t)set.n_ok + 1) * sizeof(double));
        seed_set_values(&set, r->values[j]);
        r->stats[j] = seed_stats_of(r->values[j], set.n_ok);
        r->n_x = j + 1;
        r->seeds = set.n;
        r->diverged = set.n_diverged > r->diverged ? set.n_diverged : r->diverged;
        r->pending = set.n_missing > r->pending ? set.n_missing : r->pending;
        seed_set_free(&set);
    }
    return 0;
}

/* The x values: numbers, strictly ascending, positive on a log axis. */
static int series_parse_x(char *list, char **xs, double *x, int logx) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        if (n == SERIES_MAX_X) return cli_usage_error("plot", "--x: at most %d values", SERIES_MAX_X), -1;
        x[n] = strtod(t, &end);
        if (end == t || *end || !isfinite(x[n])) return cli_usage_error("plot", "--x: '%s' is not a number", t), -1;
        if (n && x[n] <= x[n - 1]) return cli_usage_error("plot", "--x: the values must ascend ('%s' after '%s')", t, xs[n - 1]), -1;
        if (logx && x[n] <= 0) return cli_usage_error("plot", "--x: '%s' on a log axis (--logx) must be positive", t), -1;
        xs[n++] = t;
    }
    if (n < 2) return cli_usage_error("plot", "--x: at least two values, comma-separated (e.g. --x 1,2,5,10)"), -1;
    return n;
}

/* The band of row r between the 95 % interval bounds, linear between neighbouring x values
 * that both have one. */
static void draw_series_band(sf_image *im, const panel *p, const series_row *r, const double *xv, rgb c) {
    for (int j = 0; j + 1 < r->n_x; j++) {
        const seed_stats *a = &r->stats[j], *b = &r->stats[j + 1];
        if (!isfinite(a->lo) || !isfinite(b->lo)) continue;
        const int xa = px_x(p, xv[j]), xb = px_x(p, xv[j + 1]);
        for (int x = xa; x <= xb; x++) {
            const double t = xb > xa ? (double)(x - xa) / (xb - xa) : 0;
            const double lo = a->lo + (b->lo - a->lo) * t, hi = a->hi + (b->hi - a->hi) * t;
            for (int y = px_y(p, hi); y <= px_y(p, lo); y++)
                if (y >= p->y0 && y <= p->y1) blend(im, x, y, c, SERIES_BAND_ALPHA);
        }
    }
}

int plot_series(char **dirs, int n_dirs, const char *pattern, const char *x_list, const char *metric, int logx,
                const char *xlabel, const char *out) {
    if (!strstr(pattern, "{x}")) return cli_usage_error("plot", "--series '%s' has no {x} (e.g. nr_iters_{x}.json)", pattern);
    char *list = strdup(x_list), *xs[SERIES_MAX_X];
    double x[SERIES_MAX_X], xv[SERIES_MAX_X];
    const int n_x = series_parse_x(list, xs, x, logx);
    if (n_x < 0) return free(list), 2;
    for (int j = 0; j < n_x; j++) xv[j] = logx ? log10(x[j]) : x[j];
    series_row *rows = sf_calloc((size_t)n_dirs, sizeof(series_row));
    int rc = 0;
    for (int i = 0; i < n_dirs && rc == 0; i++) rc = series_row_read(&rows[i], dirs[i], pattern, xs, n_x, metric);
    double lo = INFINITY, hi = -INFINITY;
    int drawn = 0;
    for (int i = 0; i < n_dirs && rc == 0; i++)
        for (int j = 0; j < rows[i].n_x; j++) {
            const seed_stats *st = &rows[i].stats[j];
            if (st->n) drawn = 1;
            for (int k = 0; k < st->n; k++) lo = fmin(lo, rows[i].values[j][k]), hi = fmax(hi, rows[i].values[j][k]);
            if (isfinite(st->lo)) lo = fmin(lo, st->lo), hi = fmax(hi, st->hi);
        }
    if (rc == 0 && !drawn) rc = sf_error("plot: no seed of any folder has a value of '%s' in %s", metric, pattern);
    if (rc != 0) {
        for (int i = 0; i < n_dirs; i++) series_row_free(&rows[i]);
        free(rows);
        free(list);
        return 1;
    }

    panel p = {0};
    p.x0 = SERIES_MARGIN_L, p.x1 = SERIES_W - 80, p.y0 = SERIES_MARGIN_T, p.y1 = SERIES_MARGIN_T + SERIES_PANEL_H;
    const double pad = 0.04 * (xv[n_x - 1] - xv[0]);
    p.xmin = xv[0] - pad, p.xmax = xv[n_x - 1] + pad;
    p.ymin = lo, p.ymax = hi;
    p.ystep = nice_range(&p.ymin, &p.ymax, 6);
    sf_image im = {SERIES_W, p.y1 + 70 + (n_dirs + 1) * SERIES_LEGEND_ROW, 3, NULL};
    im.px = sf_malloc((size_t)im.w * im.h * 3);
    memset(im.px, 255, (size_t)im.w * im.h * 3);

    char buf[640];
    for (double y = p.ymin; y <= p.ymax + p.ystep * 1e-6; y += p.ystep) {
        const int py = px_y(&p, y);
        draw_line(&im, p.x0, py, p.x1, py, GRID, 1, 0);
        tick_label(buf, sizeof buf, y, p.ystep);
        draw_text(&im, p.x0 - 8 - text_width(buf), py - TEXT_H / 2, buf, AXIS);
    }
    for (int j = 0; j < n_x; j++) {  // a tick at every value given, labelled as given
        const int px = px_x(&p, xv[j]);
        draw_line(&im, px, p.y0, px, p.y1, GRID, 1, 0);
        draw_text(&im, px - text_width(xs[j]) / 2, p.y1 + 8, xs[j], AXIS);
    }
    draw_line(&im, p.x0, p.y0, p.x0, p.y1, AXIS, 2, 0);
    draw_line(&im, p.x0, p.y1, p.x1, p.y1, AXIS, 2, 0);
    snprintf(buf, sizeof buf, "%s of %s: mean over seeds, 95 %% interval band, a dash per seed", metric, pattern);
    draw_text(&im, 30, 16, buf, BLACK);
    snprintf(buf, sizeof buf, "interval: mean +- t(0.975, n-1) * std / sqrt(n); the y axis spans the values%s",
             logx ? "; x on a log scale" : "");
    draw_text(&im, 30, 40, buf, AXIS);
    snprintf(buf, sizeof buf, "%s", xlabel ? xlabel : "x");
    draw_text(&im, (p.x0 + p.x1 - text_width(buf)) / 2, p.y1 + 14 + TEXT_H, buf, AXIS);

    for (int i = 0; i < n_dirs; i++) draw_series_band(&im, &p, &rows[i], xv, PALETTE[i % 10]);
    for (int i = 0; i < n_dirs; i++) {
        const rgb c = PALETTE[i % 10];
        int have_prev = 0, prev_x = 0, prev_y = 0;
        for (int j = 0; j < rows[i].n_x; j++) {
            const seed_stats *st = &rows[i].stats[j];
            if (st->n == 0) {
                have_prev = 0;
                continue;
            }
            const int px = px_x(&p, xv[j]), py = px_y(&p, st->mean);
            if (have_prev) draw_line(&im, prev_x, prev_y, px, py, c, 3, 0);
            fill_circle(&im, px, py, 5, c);
            const int xs = px + 8 + (i % 4) * (SEED_MARK_W + 3);  // beside the dot, a column per folder
            for (int k = 0; k < st->n; k++) {
                const int ys = px_y(&p, rows[i].values[j][k]);
                fill_rect(&im, xs, ys - 1, xs + SEED_MARK_W - 1, ys + 1, c);
            }
            prev_x = px, prev_y = py, have_prev = 1;
        }
    }
    int y = p.y1 + 20 + TEXT_H + 10 + SERIES_LEGEND_ROW / 2;
    fill_rect(&im, SERIES_MARGIN_L, y + 2, SERIES_MARGIN_L + 40, y + TEXT_H - 3, tint(AXIS, SERIES_BAND_ALPHA));
    draw_text(&im, SERIES_MARGIN_L + 50, y, "band: 95 % interval of the mean over a folder's seeds (where n >= 2)", AXIS);
    for (int i = 0; i < n_dirs; i++) {
        y += SERIES_LEGEND_ROW;
        const series_row *r = &rows[i];
        int any = 0, n_min = 0, n_max = 0;
        for (int j = 0; j < r->n_x; j++) {
            if (!r->stats[j].n) continue;
            n_min = any && n_min < r->stats[j].n ? n_min : r->stats[j].n;
            n_max = n_max > r->stats[j].n ? n_max : r->stats[j].n;
            any = 1;
        }
        if (any) {
            fill_rect(&im, SERIES_MARGIN_L, y + 2, SERIES_MARGIN_L + 40, y + TEXT_H - 3, PALETTE[i % 10]);
            if (n_min == n_max) snprintf(buf, sizeof buf, "%s  (%d seed%s)", r->label, n_max, n_max == 1 ? "" : "s");
            else snprintf(buf, sizeof buf, "%s  (%d-%d seeds per x)", r->label, n_min, n_max);
        } else {
            snprintf(buf, sizeof buf, "not drawn (no value): %s", r->label);
        }
        const int xt = SERIES_MARGIN_L + 50 + draw_text(&im, SERIES_MARGIN_L + 50, y, buf, any ? BLACK : RED);
        buf[0] = 0;
        if (r->diverged) snprintf(buf, sizeof buf, "  +%d NaN", r->diverged);
        const int xp = xt + draw_text(&im, xt, y, buf, RED);
        if (r->pending) snprintf(buf, sizeof buf, "  +%d pending", r->pending), draw_text(&im, xp, y, buf, AXIS);
    }
    rc = sf_image_write_png(out, &im);
    if (rc == 0)
        printf("wrote %s (%dx%d): %d folder%s at %d values of x, y axis from %g to %g\n", out, im.w, im.h, n_dirs,
               n_dirs == 1 ? "" : "s", n_x, p.ymin, p.ymax);
    free(im.px);
    for (int i = 0; i < n_dirs; i++) series_row_free(&rows[i]);
    free(rows);
    free(list);
    return rc ? 1 : 0;
}
