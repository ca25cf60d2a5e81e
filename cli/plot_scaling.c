/* plot_scaling.c — `sfvit plot SWEEP.csv -o scaling.png`: the figure of a
 * `sfvit bench --token-sweep` (cli/sweep.c). Three log-log panels over the token count N —
 * inference time, training-step time, peak memory of the training step — one line with
 * markers per attention kind, dashed reference lines of slope 1 and 2, and under each panel
 * a legend with each kind's fitted slope (least squares over the upper half of the range,
 * N >= sqrt(min N x max N), as the sweep's table). Skipped points are left out and counted
 * in the legend. The drawing is cli/draw.c's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfvit/data.h"
#include "cli.h"
#include "draw.h"

#define SWEEP_HEADER "kind,N,phase,ms,peak_bytes,macs,status"

int plot_is_sweep_csv(const char *path) {
    size_t n = strlen(path);
    struct stat st;
    if (n < 4 || strcmp(path + n - 4, ".csv") || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "r");
    char line[256] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    if (!strncmp(line, SWEEP_HEADER, strlen(SWEEP_HEADER))) return 1;
    sf_error("plot: %s is not the CSV of sfvit bench --token-sweep (its header starts with %s)", path, SWEEP_HEADER);
    return -1;
}

/* ---- reading ---- */

enum { MAX_KINDS = 16, MAX_PTS = 64 };
enum { SERIES_INFER, SERIES_TRAIN, SERIES_PEAK, N_SERIES };
static const char *const SERIES_TITLE[N_SERIES] = {"inference forward (ms)", "training step (ms)",
                                                   "peak memory, training step (MiB)"};

typedef struct kind_series {
    char name[64];
    int n[N_SERIES], skipped[N_SERIES];
    double x[N_SERIES][MAX_PTS], y[N_SERIES][MAX_PTS];
} kind_series;

typedef struct sweep_data {
    kind_series k[MAX_KINDS];
    int n_kinds;
    double n_min, n_max;
    char about[384];        /* D_h, heads, threads, CPU of the first row */
} sweep_data;

static kind_series *kind_of(sweep_data *d, const char *name) {
    for (int i = 0; i < d->n_kinds; i++)
        if (!strcmp(d->k[i].name, name)) return &d->k[i];
    if (d->n_kinds == MAX_KINDS) return NULL;
    kind_series *k = &d->k[d->n_kinds++];
    snprintf(k->name, sizeof k->name, "%s", name);
    return k;
}

static void add(kind_series *k, int s, double x, double y, int ok) {
    if (!ok || !(y > 0)) k->skipped[s]++;
    else if (k->n[s] < MAX_PTS) k->x[s][k->n[s]] = x, k->y[s][k->n[s]++] = y;
}

static int sweep_read(const char *path, sweep_data *d) {
    memset(d, 0, sizeof *d);
    d->n_min = INFINITY, d->n_max = 0;
    FILE *f = fopen(path, "r");
    if (!f) return sf_error("plot: cannot read %s: %s", path, strerror(errno));
    char line[2048], *names[32];
    int nn = fgets(line, sizeof line, f) ? csv_split(line, names, 32) : 0;
    const int c_kind = column(names, nn, "kind"), c_n = column(names, nn, "N"), c_phase = column(names, nn, "phase"),
              c_ms = column(names, nn, "ms"), c_peak = column(names, nn, "peak_bytes"),
              c_status = column(names, nn, "status"), c_dh = column(names, nn, "d_h"),
              c_heads = column(names, nn, "heads"), c_threads = column(names, nn, "threads"),
              c_cpu = column(names, nn, "cpu");
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char *fl[32];
        int k = csv_split(line, fl, 32);
        const double N = field_number(fl, k, c_n);
        if (k <= c_status || !isfinite(N)) continue;
        kind_series *ks = kind_of(d, fl[c_kind]);
        if (!ks) continue;
        rows++;
        d->n_min = fmin(d->n_min, N), d->n_max = fmax(d->n_max, N);
        const int ok = !strcmp(fl[c_status], "ok"), train = !strcmp(fl[c_phase], "train");
        add(ks, train ? SERIES_TRAIN : SERIES_INFER, N, field_number(fl, k, c_ms), ok);
        if (train) add(ks, SERIES_PEAK, N, field_number(fl, k, c_peak) / 1048576.0, ok);
        if (!d->about[0] && c_cpu >= 0 && c_cpu < k)
            snprintf(d->about, sizeof d->about, "D_h %.0f, heads %.0f, batch 1, %.0f thread%s - %s",
                     field_number(fl, k, c_dh), field_number(fl, k, c_heads), field_number(fl, k, c_threads),
                     field_number(fl, k, c_threads) == 1 ? "" : "s", fl[c_cpu]);
    }
    fclose(f);
    if (rows == 0) return sf_error("plot: %s has no rows", path);
    return 0;
}

/* ---- drawing ---- */

/* A marker of shape `shape` centred at (x, y): square, diamond, triangle, plus, cross, disc. */
static void marker(sf_image *im, int x, int y, int shape, rgb c) {
    const int r = 5;
    switch (shape % 6) {
    case 0: fill_rect(im, x - r + 1, y - r + 1, x + r - 1, y + r - 1, c); break;
    case 1:
        for (int dy = -r; dy <= r; dy++) fill_rect(im, x - (r - abs(dy)), y + dy, x + (r - abs(dy)), y + dy, c);
        break;
    case 2:
        for (int dy = 0; dy <= 2 * r; dy++) fill_rect(im, x - dy / 2, y - r + dy, x + dy / 2, y - r + dy, c);
        break;
    case 3:
        fill_rect(im, x - r, y - 1, x + r, y + 1, c);
        fill_rect(im, x - 1, y - r, x + 1, y + r, c);
        break;
    case 4:
        draw_line(im, x - r, y - r, x + r, y + r, c, 3, 0);
        draw_line(im, x - r, y + r, x + r, y - r, c, 3, 0);
        break;
    default:
        for (int dy = -r; dy <= r; dy++) {
            int w = (int)sqrt((double)(r * r - dy * dy));
            fill_rect(im, x - w, y + dy, x + w, y + dy, c);
        }
    }
}

/* The line y = ya + slope (x - xa) (log units) clipped to the panel, dashed, labelled at its end. */
static void reference_line(sf_image *im, const panel *p, double xa, double ya, double slope, const char *label) {
    double xl = p->xmin, xr = p->xmax;
    /* x where the line meets the bottom and the top */
    xl = fmax(xl, xa + (p->ymin - ya) / slope);
    xr = fmin(xr, xa + (p->ymax - ya) / slope);
    if (!(xr > xl)) return;
    const int x0 = px_x(p, xl), y0 = px_y(p, ya + slope * (xl - xa)), x1 = px_x(p, xr), y1 = px_y(p, ya + slope * (xr - xa));
    draw_line(im, x0, y0, x1, y1, AXIS, 2, 8);
    int tx = x1 - text_width(label) - 4, ty = y1 + 6;
    if (ty + TEXT_H > p->y1) ty = y1 - TEXT_H - 6;
    draw_text(im, tx, ty, label, AXIS);
}

enum { FIG_W = 1600, PANEL_W = 380, PANEL_GAP = 130, FIG_MARGIN_L = 90, FIG_TOP = 90, FIG_PANEL_H = 400, ROW = 24 };

static void draw_panel(sf_image *im, const sweep_data *d, int s, int x0) {
    double ylo = INFINITY, yhi = -INFINITY, ya = INFINITY;
    for (int i = 0; i < d->n_kinds; i++)
        for (int j = 0; j < d->k[i].n[s]; j++) {
            const double ly = log10(d->k[i].y[s][j]);
            ylo = fmin(ylo, ly), yhi = fmax(yhi, ly);
            if (d->k[i].x[s][j] == d->n_min) ya = fmin(ya, ly);
        }
    if (!isfinite(ylo)) ylo = 0, yhi = 1;
    if (!isfinite(ya)) ya = ylo;
    const double pad = fmax(0.08, (yhi - ylo) * 0.05);
    panel p = {x0, FIG_TOP, x0 + PANEL_W, FIG_TOP + FIG_PANEL_H, log10(d->n_min) - 0.08, log10(d->n_max) + 0.08,
               ylo - pad, yhi + pad, 0, 0};
    if (p.ymax - p.ymin < 1) p.ymin -= (1 - (p.ymax - p.ymin)) / 2, p.ymax = p.ymin + 1;
    draw_log_axes(im, &p, SERIES_TITLE[s], "tokens N");
    /* References start half a decade under the lowest first point, at the smallest N. */
    reference_line(im, &p, log10(d->n_min), ya - 0.5, 1, "slope 1");
    reference_line(im, &p, log10(d->n_min), ya - 0.5, 2, "slope 2");
    const double split = sqrt(d->n_min * d->n_max);
    int ly = p.y1 + 24 + 2 * TEXT_H;
    for (int i = 0; i < d->n_kinds; i++) {
        const kind_series *k = &d->k[i];
        const rgb c = PALETTE[i % 10];
        int px = 0, py = 0;
        for (int j = 0; j < k->n[s]; j++) {
            const int x = px_x(&p, log10(k->x[s][j])), y = px_y(&p, log10(k->y[s][j]));
            if (j) draw_line(im, px, py, x, y, c, 3, 0);
            px = x, py = y;
        }
        for (int j = 0; j < k->n[s]; j++) marker(im, px_x(&p, log10(k->x[s][j])), px_y(&p, log10(k->y[s][j])), i, c);
        /* the legend row: line and marker, name, slope over the upper half */
        double xu[MAX_PTS], yu[MAX_PTS];
        int nu = 0;
        for (int j = 0; j < k->n[s]; j++)
            if (k->x[s][j] >= split * (1 - 1e-9)) xu[nu] = k->x[s][j], yu[nu++] = k->y[s][j];
        const double slope = sweep_loglog_slope(xu, yu, nu);
        char label[160];
        int n = snprintf(label, sizeof label, isfinite(slope) ? "%s slope %.2f" : "%s slope -", k->name, slope);
        if (k->skipped[s]) snprintf(label + n, sizeof label - (size_t)n, " (%d skipped)", k->skipped[s]);
        draw_line(im, x0, ly + TEXT_H / 2, x0 + 36, ly + TEXT_H / 2, c, 3, 0);
        marker(im, x0 + 18, ly + TEXT_H / 2, i, c);
        draw_text(im, x0 + 46, ly, label, k->skipped[s] ? RED : BLACK);
        ly += ROW;
    }
}

int plot_scaling(const char *csv, const char *out) {
    sweep_data *d = sf_calloc(1, sizeof *d);
    if (sweep_read(csv, d) != 0) {
        free(d);
        return 1;
    }
    sf_image im = {FIG_W, FIG_TOP + FIG_PANEL_H + 40 + 2 * TEXT_H + d->n_kinds * ROW + 20, 3, NULL};
    im.px = sf_malloc((size_t)im.w * im.h * 3);
    memset(im.px, 255, (size_t)im.w * im.h * 3);
    char title[600];
    snprintf(title, sizeof title, "token-count sweep (log-log): %s", d->about);
    draw_text(&im, FIG_MARGIN_L - 60, 16, title, BLACK);
    snprintf(title, sizeof title, "legend slopes: least squares over N >= %.0f (upper half of %.0f..%.0f); dashed: slopes 1 and 2",
             sqrt(d->n_min * d->n_max), d->n_min, d->n_max);
    draw_text(&im, FIG_MARGIN_L - 60, 16 + TEXT_H + 6, title, AXIS);
    for (int s = 0; s < N_SERIES; s++) draw_panel(&im, d, s, FIG_MARGIN_L + s * (PANEL_W + PANEL_GAP));
    int rc = sf_image_write_png(out, &im);
    if (rc == 0) printf("wrote %s (%dx%d): %d kinds of %s\n", out, im.w, im.h, d->n_kinds, csv);
    free(im.px);
    free(d);
    return rc ? 1 : 0;
}
