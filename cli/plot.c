/* plot.c — `sfvit plot`: figures drawn here pixel by pixel and written as PNG (libpng).
 *
 *   sfvit plot RUN_DIR... -o curves.png   loss and top-1 per epoch, train (dashed) and val
 *                                         (solid), of one or more runs, one colour per run
 *   sfvit plot ABLATION_DIR -o bars.png   each variant's final val top-1 as a bar: mean over
 *                                         its seeds, ± one sample std, a dot per seed
 *   sfvit plot SWEEP.csv -o scaling.png   a `bench --token-sweep`, log-log (cli/plot_scaling.c)
 * A folder holding ablation.csv is an ablation (sfvit ablate); any other must hold the
 * metrics.csv of a run. The drawing itself (canvas, bitmap font, axes) is cli/draw.c.
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
    double *v[N_SERIES];           // (n) each, NaN where not logged
    long diverged_step;            // -1 if none
} run_curves;

/* "kinds/config=study_vit/seed0" -> "config=study_vit/seed0": seed folders keep their variant. */
static void run_label(const char *dir, char *out, size_t size) {
    char d[SF_PATH_MAX];
    snprintf(d, sizeof d, "%s", dir);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') d[--n] = 0;
    char *last = strrchr(d, '/');
    if (last && !strncmp(last + 1, "seed", 4)) {
        *last = 0;
        char *prev = strrchr(d, '/');
        *last = '/';
        snprintf(out, size, "%s", prev ? prev + 1 : d);
    } else {
        snprintf(out, size, "%s", last ? last + 1 : d);
    }
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
        sf_hint("give run folders (with metrics.csv) or an ablation folder (with ablation.csv)");
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
    for (int s = 0; s < N_SERIES; s++) free(r->v[s]);
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
                    lo = fmin(lo, runs[i].v[s][k]);
                    hi = fmax(hi, runs[i].v[s][k]);
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

/* The line styles (val solid, train dashed), then a colour swatch and a name per run. */
static void draw_legend(sf_image *im, int y, const run_curves *runs, int n_runs) {
    draw_line(im, MARGIN_L, y + TEXT_H / 2, MARGIN_L + 40, y + TEXT_H / 2, AXIS, 3, 0);
    int x = MARGIN_L + 50 + draw_text(im, MARGIN_L + 50, y, "val", AXIS) + 40;
    draw_line(im, x, y + TEXT_H / 2, x + 40, y + TEXT_H / 2, AXIS, 3, 10);
    draw_text(im, x + 50, y, "train", AXIS);
    for (int i = 0; i < n_runs; i++) {
        y += LEGEND_ROW;
        fill_rect(im, MARGIN_L, y + 2, MARGIN_L + 40, y + TEXT_H - 3, PALETTE[i % 10]);
        char label[224];
        if (runs[i].diverged_step >= 0)
            snprintf(label, sizeof label, "%s  (NaN at step %ld)", runs[i].label, runs[i].diverged_step);
        else
            snprintf(label, sizeof label, "%s", runs[i].label);
        draw_text(im, MARGIN_L + 50, y, label, runs[i].diverged_step >= 0 ? RED : BLACK);
    }
}

static int plot_runs(char **dirs, int n_runs, const char *out) {
    run_curves *runs = sf_calloc((size_t)n_runs, sizeof(run_curves));
    int rc = 0;
    for (int i = 0; i < n_runs && rc == 0; i++) rc = run_read(dirs[i], &runs[i]);
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

/* ---- bars of an ablation ---- */

typedef struct bar {
    char name[256], status[256];
    int seeds_ok;
    double mean, std;
    double seed_top1[64];
    int n_seed;
} bar;

/* The variants of ablation.csv and the per-seed final top-1 of runs.csv. */
static int bars_read(const char *dir, bar **out, int *n_out) {
    char path[SF_PATH_MAX + 32], line[4096];
    snprintf(path, sizeof path, "%s/ablation.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return sf_error("plot: cannot read %s: %s", path, strerror(errno));
    char *names[32], header[1024];
    int nn = fgets(header, sizeof header, f) ? csv_split(header, names, 32) : 0;
    int c_var = column(names, nn, "variant"), c_ok = column(names, nn, "seeds_ok"),
        c_mean = column(names, nn, "final_top1_mean"), c_std = column(names, nn, "final_top1_std"),
        c_status = column(names, nn, "status");
    if (c_var < 0 || c_mean < 0 || c_std < 0 || c_status < 0 || c_ok < 0) {
        fclose(f);
        return sf_error("plot: %s lacks the columns of sfvit ablate", path);
    }
    int n = 0, cap = 8;
    bar *b = sf_calloc((size_t)cap, sizeof(bar));
    while (fgets(line, sizeof line, f)) {
        char *fl[32];
        int k = csv_split(line, fl, 32);
        if (k <= c_status) continue;
        if (n == cap) b = sf_realloc(b, (size_t)(cap *= 2) * sizeof(bar));
        memset(&b[n], 0, sizeof b[n]);
        snprintf(b[n].name, sizeof b[n].name, "%s", fl[c_var]);
        snprintf(b[n].status, sizeof b[n].status, "%s", fl[c_status]);
        b[n].seeds_ok = (int)field_number(fl, k, c_ok);
        b[n].mean = field_number(fl, k, c_mean);
        b[n].std = field_number(fl, k, c_std);
        n++;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/runs.csv", dir);
    f = fopen(path, "r");
    if (f) {
        int rn = fgets(header, sizeof header, f) ? csv_split(header, names, 32) : 0;
        int r_var = column(names, rn, "variant"), r_status = column(names, rn, "status"),
            r_top1 = column(names, rn, "final_top1");
        while (r_var >= 0 && r_status >= 0 && r_top1 >= 0 && fgets(line, sizeof line, f)) {
            char *fl[32];
            int k = csv_split(line, fl, 32);
            if (k <= r_top1 || strcmp(fl[r_status], "ok")) continue;
            for (int i = 0; i < n; i++)
                if (!strcmp(b[i].name, fl[r_var]) && b[i].n_seed < 64) b[i].seed_top1[b[i].n_seed++] = field_number(fl, k, r_top1);
        }
        fclose(f);
    }
    *out = b;
    *n_out = n;
    return 0;
}

enum { BARS_W = 1200, BAR_ROW = 40, BAR_H = 24 };

/* Variant i: its name, a bar to the mean with a ± std error bar and a dot per seed, the value;
 * a variant without a finished seed gets its status instead (red NaN when seeds diverged). */
static void draw_bar_row(sf_image *im, const panel *p, const bar *bi, int i) {
    const int yc = p->y0 + 10 + i * BAR_ROW + BAR_H / 2;
    char buf[320];
    const rgb c = PALETTE[i % 10];
    draw_text(im, p->x0 - 20 - text_width(bi->name), yc - TEXT_H / 2, bi->name, BLACK);
    if (!isfinite(bi->mean)) {  // every seed diverged, or none has finished yet
        const int nan = strstr(bi->status, "diverged") != NULL;
        snprintf(buf, sizeof buf, "%s%s", nan ? "NaN: " : "", bi->status);
        draw_text(im, p->x0 + 10, yc - TEXT_H / 2, buf, nan ? RED : AXIS);
        return;
    }
    fill_rect(im, p->x0, yc - BAR_H / 2, px_x(p, bi->mean), yc + BAR_H / 2, c);
    if (isfinite(bi->std)) {
        int xa = px_x(p, bi->mean - bi->std), xb = px_x(p, bi->mean + bi->std);
        draw_line(im, xa, yc, xb, yc, BLACK, 2, 0);
        draw_line(im, xa, yc - 8, xa, yc + 8, BLACK, 2, 0);
        draw_line(im, xb, yc - 8, xb, yc + 8, BLACK, 2, 0);
    }
    for (int k = 0; k < bi->n_seed; k++) {
        int xs = px_x(p, bi->seed_top1[k]);
        fill_rect(im, xs - 3, yc - 3 + (k % 3 - 1) * 6, xs + 3, yc + 3 + (k % 3 - 1) * 6, BLACK);
    }
    if (isfinite(bi->std)) snprintf(buf, sizeof buf, "%.2f ± %.2f", bi->mean, bi->std);
    else snprintf(buf, sizeof buf, "%.2f", bi->mean);
    int tx = draw_text(im, p->x1 + 14, yc - TEXT_H / 2, buf, BLACK);
    if (strcmp(bi->status, "ok")) {
        snprintf(buf, sizeof buf, " (%s)", strstr(bi->status, "diverged") ? "NaN seeds" : bi->status);
        draw_text(im, p->x1 + 14 + tx, yc - TEXT_H / 2, buf, RED);
    }
}

static int plot_ablation(const char *dir, const char *out) {
    bar *b = NULL;
    int n = 0;
    if (bars_read(dir, &b, &n) != 0) return 1;
    if (n == 0) {
        free(b);
        sf_error("plot: %s/ablation.csv has no variants", dir);
        return 1;
    }
    int label_w = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        label_w = label_w > text_width(b[i].name) ? label_w : text_width(b[i].name);
        double sd = isfinite(b[i].std) ? b[i].std : 0;
        if (isfinite(b[i].mean)) lo = fmin(lo, b[i].mean - sd), hi = fmax(hi, b[i].mean + sd);
        for (int k = 0; k < b[i].n_seed; k++) lo = fmin(lo, b[i].seed_top1[k]), hi = fmax(hi, b[i].seed_top1[k]);
    }
    if (!isfinite(lo)) lo = 0, hi = 100;
    /* The axis spans the values, not 0..100: the differences are the point; the ticks say where it starts. */
    double pad = fmax(0.5, (hi - lo) * 0.15);
    panel p = {0};
    p.ymin = 0, p.ymax = 1, p.ystep = 1;
    p.xmin = fmax(0, lo - pad);
    p.xmax = fmin(100, hi + pad);
    p.xstep = nice_range(&p.xmin, &p.xmax, 6);
    p.x0 = 30 + label_w + 20;
    p.x1 = BARS_W - 260;
    p.y0 = 70;
    p.y1 = p.y0 + n * BAR_ROW + 10;
    sf_image im = {BARS_W, p.y1 + 80, 3, NULL};
    im.px = sf_malloc((size_t)im.w * im.h * 3);
    memset(im.px, 255, (size_t)im.w * im.h * 3);
    char title[SF_PATH_MAX + 128], buf[320];
    run_label(dir, buf, sizeof buf);
    snprintf(title, sizeof title, "%s: final val top-1 (%%), mean ± std over seeds, dots = seeds", buf);
    draw_text(&im, 30, 20, title, BLACK);
    for (double x = p.xmin; x <= p.xmax + p.xstep * 1e-6; x += p.xstep) {
        int px = px_x(&p, x);
        draw_line(&im, px, p.y0, px, p.y1, GRID, 1, 0);
        tick_label(buf, sizeof buf, x, p.xstep);
        draw_text(&im, px - text_width(buf) / 2, p.y1 + 8, buf, AXIS);
    }
    draw_text(&im, (p.x0 + p.x1 - text_width("top-1 (%)")) / 2, p.y1 + 14 + TEXT_H, "top-1 (%)", AXIS);
    for (int i = 0; i < n; i++) draw_bar_row(&im, &p, &b[i], i);
    draw_line(&im, p.x0, p.y0, p.x0, p.y1, AXIS, 2, 0);
    draw_line(&im, p.x0, p.y1, p.x1, p.y1, AXIS, 2, 0);
    int rc = sf_image_write_png(out, &im);
    if (rc == 0) printf("wrote %s (%dx%d): %d variants of %s\n", out, im.w, im.h, n, dir);
    free(im.px);
    free(b);
    return rc ? 1 : 0;
}

int sf_cmd_plot(int argc, char **argv) {
    cli_args args;
    if (cli_parse("plot", argc, argv, &args)) return 2;
    const char *out = cli_get(&args, "plot", "-o");
    char *dirs[64];
    int n = args.n_pos;
    memcpy(dirs, args.pos, sizeof(char *) * (size_t)n);
    cli_args_free(&args);
    if (n == 0 || !out) {
        if (n && !out) sf_error("plot: no output file (-o FILE.png)");
        else if (!n) sf_error("plot: no run or ablation folder given");
        sf_hint("usage: sfvit plot RUN_DIR... -o curves.png  |  sfvit plot ABLATION_DIR -o bars.png");
        return 2;
    }
    const int sweep = plot_is_sweep_csv(dirs[0]);
    if (sweep < 0) return 1;
    if (sweep) {
        if (n > 1) return cli_usage_error("plot", "a sweep CSV is plotted alone (%s)", dirs[0]);
        return plot_scaling(dirs[0], out);
    }
    if (is_dir_with(dirs[0], "ablation.csv")) {
        if (n > 1) {
            sf_error("plot: an ablation folder is plotted alone (%s)", dirs[0]);
            return 2;
        }
        return plot_ablation(dirs[0], out);
    }
    return plot_runs(dirs, n, out);
}
