/* viz.c — `sfvit viz CKPT IMAGE -o heat.png`: the l2 norm of each token of Q-hat and K-hat
 * in the last SimA block, on the patch grid, upsampled, scaled to [0, 1] and laid over the
 * image (SimA paper, Figure 3). Output: [image | Q-hat overlay | K-hat overlay] in one PNG. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "cli.h"

/* Bilinear sample of an 8-bit image (h, w, c) at continuous pixel coordinates. */
static float sample_u8(const sf_image *im, float y, float x, int ch) {
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    if (x > im->w - 1) x = (float)(im->w - 1);
    if (y > im->h - 1) y = (float)(im->h - 1);
    int x0 = (int)x, y0 = (int)y;
    int x1 = x0 + 1 < im->w ? x0 + 1 : x0, y1 = y0 + 1 < im->h ? y0 + 1 : y0;
    float fx = x - x0, fy = y - y0;
    const uint8_t *p = im->px;
    int c = im->c;
    float a = p[(y0 * im->w + x0) * c + ch], b = p[(y0 * im->w + x1) * c + ch];
    float d = p[(y1 * im->w + x0) * c + ch], e = p[(y1 * im->w + x1) * c + ch];
    return (a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy;
}

/* Bilinear sample of a float grid (gh, gw) at output pixel (y, x) of an (S, S) canvas,
 * pixel centres aligned as align_corners=false. */
static float sample_grid(const float *g, int gh, int gw, int S, int y, int x) {
    float gy = (y + 0.5f) * gh / S - 0.5f, gx = (x + 0.5f) * gw / S - 0.5f;
    if (gy < 0) gy = 0;
    if (gx < 0) gx = 0;
    if (gy > gh - 1) gy = (float)(gh - 1);
    if (gx > gw - 1) gx = (float)(gw - 1);
    int y0 = (int)gy, x0 = (int)gx;
    int y1 = y0 + 1 < gh ? y0 + 1 : y0, x1 = x0 + 1 < gw ? x0 + 1 : x0;
    float fy = gy - y0, fx = gx - x0;
    return (g[y0 * gw + x0] * (1 - fx) + g[y0 * gw + x1] * fx) * (1 - fy) +
           (g[y1 * gw + x0] * (1 - fx) + g[y1 * gw + x1] * fx) * fy;
}

/* A blue → cyan → yellow → red ramp for t in [0, 1]. */
static void heat_color(float t, float rgb[3]) {
    static const float stops[5][3] = {{0, 0, 0.5f}, {0, 0.5f, 1}, {0.5f, 1, 0.5f}, {1, 0.8f, 0}, {0.8f, 0, 0}};
    float s = t * 4;
    int i = (int)s;
    if (i >= 4) i = 3;
    float f = s - i;
    for (int c = 0; c < 3; c++) rgb[c] = stops[i][c] * (1 - f) + stops[i + 1][c] * f;
}

static void normalize01(float *v, int n) {
    float lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    float span = hi - lo > 1e-12f ? hi - lo : 1.0f;
    for (int i = 0; i < n; i++) v[i] = (v[i] - lo) / span;
}

/* The model input: the whole image resized to S x S, normalized as in training.
 * Returns (C, S, S) floats, malloc'd. */
static float *model_input(const sf_image *im, int C, int S, const sf_aug_cfg *aug) {
    float *pixels = sf_malloc((size_t)C * S * S * sizeof(float));
    for (int c = 0; c < C; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                float v = sample_u8(im, (y + 0.5f) * im->h / S - 0.5f, (x + 0.5f) * im->w / S - 0.5f, c) / 255.0f;
                pixels[((size_t)c * S + y) * S + x] = (v - aug->mean[c]) / aug->std[c];
            }
    return pixels;
}

/* Three panels of D x D pixels (at least 224 so small inputs stay visible): the image, and
 * the normalized Q-hat and K-hat token norms (gh, gw) laid over it. */
static void draw_panels(const sf_image *im, const float *qn, const float *kn, int gh, int gw, int S, sf_image *canvas) {
    const int D = S < 224 ? 224 : S;
    canvas->w = 3 * D;
    canvas->h = D;
    canvas->c = 3;
    canvas->px = sf_malloc((size_t)canvas->w * canvas->h * 3);
    for (int y = 0; y < D; y++)
        for (int xx = 0; xx < D; xx++) {
            float rgb[3];
            for (int c = 0; c < 3; c++)
                rgb[c] = sample_u8(im, (y + 0.5f) * im->h / D - 0.5f, (xx + 0.5f) * im->w / D - 0.5f, im->c == 3 ? c : 0);
            for (int panel = 0; panel < 3; panel++) {
                float color[3] = {rgb[0], rgb[1], rgb[2]};
                if (panel > 0) {
                    float t = sample_grid(panel == 1 ? qn : kn, gh, gw, D, y, xx), h[3];
                    heat_color(t, h);
                    for (int c = 0; c < 3; c++) color[c] = 0.45f * rgb[c] + 0.55f * 255.0f * h[c];
                }
                uint8_t *p = canvas->px + ((size_t)y * canvas->w + panel * D + xx) * 3;
                for (int c = 0; c < 3; c++) p[c] = (uint8_t)fminf(255.0f, fmaxf(0.0f, color[c] + 0.5f));
            }
        }
}

int sf_cmd_viz(int argc, char **argv) {
    cli_args args;
    if (cli_parse("viz", argc, argv, &args)) return 2;
    const char *ckpt = args.n_pos > 0 ? args.pos[0] : NULL, *image = args.n_pos > 1 ? args.pos[1] : NULL,
               *out = cli_get(&args, "viz", "-o"), *config_path = cli_get(&args, "viz", "--config");
    cli_args_free(&args);
    if (!ckpt || !image || !out) {
        sf_error("viz: missing arguments");
        sf_hint("usage: sfvit viz CKPT.safetensors IMAGE.png|jpg -o heat.png [--config FILE.yaml]");
        return 2;
    }
    sf_config cfg;
    if (sf_checkpoint_config(ckpt, config_path, &cfg) != 0) return 1;
    sf_threads_init(cfg.train.threads);
    if (cfg.model.attn != SF_ATTN_SIMA) {
        sf_error("viz: %s is not a SimA model (model.attn is not sima)", ckpt);
        return 1;
    }
    int status = 1, gh = 0, gw = 0;
    sf_params ps;
    sf_params_init(&ps);
    sf_image im = {0}, canvas = {0};
    float *pixels = NULL, *qn = NULL, *kn = NULL;
    sf_ctx g;
    sf_ctx_init(&g, 0);
    char err[256];
    const int C = cfg.model.in_chans, S = cfg.model.img_size;
    sf_model *m = sf_model_build(&cfg.model, &ps);
    if (!m) goto done;
    sf_params_alloc(&ps);
    if (sf_checkpoint_load(ckpt, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) != 0) goto done;
    if (sf_image_load(image, C, &im, err, sizeof err) != 0) {
        sf_error("%s: %s", image, err);
        goto done;
    }
    /* one forward in evaluation mode; the last SimA block records its token norms */
    pixels = model_input(&im, C, S, &cfg.aug);
    sf_tensor x = {.data = pixels, .ndim = 4, .shape = {1, C, S, S}, .numel = (size_t)C * S * S};
    g.grad_enabled = 0;
    g.training = 0;
    sf_model_forward(&g, m, &x);
    sf_model_sima_token_norms(m, NULL, NULL, &gh, &gw);  // the grid, to size the buffers
    qn = sf_malloc((size_t)gh * gw * sizeof(float));
    kn = sf_malloc((size_t)gh * gw * sizeof(float));
    if (sf_model_sima_token_norms(m, qn, kn, &gh, &gw) != 0) {
        if (cfg.model.family == SF_FAMILY_CVT)
            sf_error("viz: CvT has no token-norm heat map (its queries and keys live on different grids)");
        else
            sf_error("viz: the model has no SimA block to visualize");
        goto done;
    }
    normalize01(qn, gh * gw);
    normalize01(kn, gh * gw);
    draw_panels(&im, qn, kn, gh, gw, S, &canvas);
    if (sf_image_write_png(out, &canvas) != 0) goto done;
    printf("wrote %s (%dx%d): image | Q-hat token norms | K-hat token norms, grid %dx%d\n", out, canvas.w, canvas.h,
           gh, gw);
    status = 0;
done:
    free(pixels);
    free(qn);
    free(kn);
    sf_image_free(&im);
    free(canvas.px);
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    sf_ctx_free(&g);
    return status;
}
