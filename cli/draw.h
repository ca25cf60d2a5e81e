/* draw.h — pixel drawing for `sfvit plot` (cli/draw.c): canvas, lines, bitmap text, axes.
 * Part of the command layer, not a public header. */
#ifndef SFVIT_CLI_DRAW_H
#define SFVIT_CLI_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "sfvit/data.h"

typedef struct rgb {
    uint8_t r, g, b;
} rgb;

extern const rgb BLACK, GRID, AXIS, RED;
extern const rgb PALETTE[10]; /* matplotlib's tab10 */

/* Text: a 5x8 font drawn FONT_SCALE times its size; TEXT_H pixels high. */
enum { FONT_W = 5, FONT_H = 8, FONT_SCALE = 2, CHAR_ADVANCE = (FONT_W + 1) * FONT_SCALE, TEXT_H = FONT_H * FONT_SCALE };

/* im is RGB (c = 3); pixels outside it are skipped. */
void put(sf_image *im, int x, int y, rgb c);
void fill_rect(sf_image *im, int x0, int y0, int x1, int y1, rgb c);
/* c mixed into the pixel at (x, y) with weight alpha (0 keeps it, 1 replaces it): a translucent
 * band; tint(c, alpha) is its colour over the white background. */
void blend(sf_image *im, int x, int y, rgb c, double alpha);
rgb tint(rgb c, double alpha);
void fill_circle(sf_image *im, int cx, int cy, int r, rgb c);
/* A line `thick` pixels wide; dash > 0 draws dash pixels, skips dash/2 + 2, and so on. */
void draw_line(sf_image *im, int x0, int y0, int x1, int y1, rgb c, int thick, int dash);
int text_width(const char *s);
/* Draws s (ASCII and '±') with its top-left corner at (x, y); returns the width. */
int draw_text(sf_image *im, int x, int y, const char *s, rgb c);

/* A plot area and its data ranges. */
typedef struct panel {
    int x0, y0, x1, y1;            // plot area in pixels (y0 top)
    double xmin, xmax, ymin, ymax;
    double xstep, ystep;           // tick spacing
} panel;

int px_x(const panel *p, double x);
int px_y(const panel *p, double y);
/* A 1-2-5 step giving about `want` ticks over [lo, hi]; lo and hi widened to multiples of it. */
double nice_range(double *lo, double *hi, int want);
void tick_label(char *buf, size_t n, double v, double step);
/* Frame, grid lines at the ticks, tick labels and a title above the area. */
void draw_axes(sf_image *im, const panel *p, const char *title, const char *xlabel);
/* The same on log axes: the panel's ranges (and what px_x/px_y take) are log10 of the values;
 * grid lines at 1..9 x 10^k, labels at the decades (and at 2 and 5 x 10^k where the range
 * holds fewer than two decades); steps are unused. */
void draw_log_axes(sf_image *im, const panel *p, const char *title, const char *xlabel);
/* 10^e as a short label: 0.01, 2, 500, 10000, 1e6, 2e-5. */
void log_tick_label(char *buf, size_t n, double e);

#endif
