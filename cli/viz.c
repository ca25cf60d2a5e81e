/* viz.c — `sfvit viz CKPT IMAGE -o heat.png`: the l2 norm of each token of Q-hat and K-hat
 * in the last SimA block, on the patch grid, upsampled, scaled to [0, 1] and laid over the
 * image (SimA paper, Figure 3). Output: [image | Q-hat overlay | K-hat overlay] in one PNG.
 * In CvT the keys come from a stride-2 convolution of the query grid: K-hat is drawn from its
 * own coarser grid, and the score below gives each query cell the norm of the key token
 * whose stride-2 cell holds it.
 *
 * `sfvit viz CKPT --score DIR [--split S]`: how well those token norms mark the foreground,
 * over every image of a split whose background is exactly 0 (Fashion-MNIST, MNIST). The image
 * is resized to the model's S x S as for the heat map; token (i, j) of a gh x gw grid covers
 * the pixel block rows [i*S/gh, (i+1)*S/gh) x columns [j*S/gw, (j+1)*S/gw): exactly its patch
 * for a ViT patch embedding; for XCiT's conv patch embedding (3x3 convolutions of stride 2,
 * padding 1) the block is the token's stride cell, while its receptive field is centred on the
 * cell's top-left pixel and reaches 2^u - 1 pixels around it (u convolutions). A token's
 * foreground fraction is the share of its pixels > 0 (any channel) after the resize; a token
 * is foreground when that share is >= 0.5. Per image: the ROC AUC of the token norm as a
 * classifier of foreground tokens (ties count one half) and the Spearman correlation of the
 * norm with the fraction (average ranks for ties; 0 when the norms are all equal), for Q-hat
 * and K-hat; an image whose tokens are all foreground or all background is skipped and
 * counted. --random-init scores the same model freshly initialized (train.seed), the
 * untrained baseline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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
 * the normalized Q-hat and K-hat token norms laid over it, each from its grid (h, w). */
static void draw_panels(const sf_image *im, const float *qn, const int q_grid[2], const float *kn, const int k_grid[2],
                        int S, sf_image *canvas) {
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
                    const int *grid = panel == 1 ? q_grid : k_grid;
                    float t = sample_grid(panel == 1 ? qn : kn, grid[0], grid[1], D, y, xx), h[3];
                    heat_color(t, h);
                    for (int c = 0; c < 3; c++) color[c] = 0.45f * rgb[c] + 0.55f * 255.0f * h[c];
                }
                uint8_t *p = canvas->px + ((size_t)y * canvas->w + panel * D + xx) * 3;
                for (int c = 0; c < 3; c++) p[c] = (uint8_t)fminf(255.0f, fmaxf(0.0f, color[c] + 0.5f));
            }
        }
}

/* ---- the foreground score ---- */

/* Share of pixels > 0 (any channel) of each token's block, on the S x S resize of the image. */
static void foreground_fraction(const sf_image *im, int S, int gh, int gw, float *frac) {
    for (int i = 0; i < gh; i++)
        for (int j = 0; j < gw; j++) {
            const int y0 = i * S / gh, y1 = (i + 1) * S / gh, x0 = j * S / gw, x1 = (j + 1) * S / gw;
            int fg = 0;
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++) {
                    int on = 0;
                    for (int c = 0; c < im->c && !on; c++)
                        on = sample_u8(im, (y + 0.5f) * im->h / S - 0.5f, (x + 0.5f) * im->w / S - 0.5f, c) > 0;
                    fg += on;
                }
            frac[i * gw + j] = (y1 > y0 && x1 > x0) ? (float)fg / (float)((y1 - y0) * (x1 - x0)) : 0.0f;
        }
}

/* Ranks 1..n of v, ties given their average rank (scratch: n ints). */
static void average_ranks(const float *v, int n, double *rank, int *order) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) {  // insertion sort: n is a token grid (16 to a few hundred)
        int t = order[i], j = i;
        while (j > 0 && v[order[j - 1]] > v[t]) order[j] = order[j - 1], j--;
        order[j] = t;
    }
    for (int a = 0; a < n;) {
        int b = a;
        while (b + 1 < n && v[order[b + 1]] == v[order[a]]) b++;
        for (int k = a; k <= b; k++) rank[order[k]] = (a + b) / 2.0 + 1;
        a = b + 1;
    }
}

static double pearson(const double *a, const double *b, int n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) ma += a[i], mb += b[i];
    ma /= n, mb /= n;
    for (int i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0.0;
}

/* The two token norms a SimA block records, in the order of every table, CSV and JSON key. */
enum { NORM_Q, NORM_K, N_NORMS };

/* How well one token score marks the foreground of one image. */
typedef struct token_agreement {
    double auc;  // ROC AUC of the score for the foreground tokens
    double rho;  // Spearman correlation of the score with the foreground fraction
} token_agreement;

/* ROC AUC of score for the tokens marked positive (Mann-Whitney from average ranks) and the
 * Spearman correlation of score with frac. */
static token_agreement token_score(const float *score, const float *frac, const unsigned char *fg, int n,
                                   double *r_score, double *r_frac, int *order) {
    average_ranks(score, n, r_score, order);
    average_ranks(frac, n, r_frac, order);
    double pos_rank_sum = 0;
    int n_pos = 0;
    for (int t = 0; t < n; t++)
        if (fg[t]) pos_rank_sum += r_score[t], n_pos++;
    const int n_neg = n - n_pos;
    return (token_agreement){.auc = (pos_rank_sum - n_pos * (n_pos + 1) / 2.0) / ((double)n_pos * n_neg),
                             .rho = pearson(r_score, r_frac, n)};
}

/* K-hat's norms (k_grid) onto the query grid: each query cell (i, j) takes the key token
 * (i·kh/h, j·kw/w), which for CvT's keys (kh = ceil(h/2)) is (i/2, j/2), the key whose
 * stride-2 cell holds it. */
static void keys_on_query_grid(const float *kn, const int k_grid[2], const int q_grid[2], float *out) {
    for (int i = 0; i < q_grid[0]; i++)
        for (int j = 0; j < q_grid[1]; j++)
            out[i * q_grid[1] + j] = kn[(i * k_grid[0] / q_grid[0]) * k_grid[1] + j * k_grid[1] / q_grid[1]];
}

static void csv_list(FILE *f, const float *v, int n) {
    fputc(',', f);
    for (int t = 0; t < n; t++) fprintf(f, "%s%.6g", t ? " " : "", v[t]);
}

/* Scores every image of root/split; prints the summary line, writes the JSON and the per-image
 * CSV (index,path,label,fg_tokens,tokens,auc_q,auc_k,spearman_q,spearman_k, then the token
 * lists fg_fraction, q_norm, k_norm, space-separated, row-major over the grid). */
static int score_split(sf_model *m, const sf_config *cfg, const char *ckpt, int random_init, const char *root,
                       const char *split, const char *json_path, const char *per_image_path) {
    sf_dataset ds = {0};
    if (sf_dataset_open(&ds, root, split) != 0) return 1;
    const int C = cfg->model.in_chans, S = cfg->model.img_size;
    int q_grid[2], k_grid[2], status = 1, n = 0, scored = 0, all_fg = 0, all_bg = 0, unreadable = 0;
    sf_model_sima_token_norms(m, NULL, NULL, q_grid, k_grid);
    const int gh = q_grid[0], gw = q_grid[1], own_k_grid = k_grid[0] != gh || k_grid[1] != gw;
    n = gh * gw;
    float *norm[N_NORMS];  // on the query grid
    for (int k = 0; k < N_NORMS; k++) norm[k] = sf_malloc((size_t)n * sizeof(float));
    float *k_norm = own_k_grid ? sf_malloc((size_t)k_grid[0] * k_grid[1] * sizeof(float)) : NULL;
    float *frac = sf_malloc((size_t)n * sizeof(float));
    unsigned char *fg = sf_malloc((size_t)n);
    double *r1 = sf_malloc((size_t)n * sizeof(double)), *r2 = sf_malloc((size_t)n * sizeof(double));
    int *order = sf_malloc((size_t)n * sizeof(int));
    token_agreement sum[N_NORMS] = {{0}};
    char *rows = NULL;
    size_t rows_len = 0;
    FILE *csv = per_image_path ? open_memstream(&rows, &rows_len) : NULL;
    if (csv) fputs("index,path,label,fg_tokens,tokens,auc_q,auc_k,spearman_q,spearman_k,fg_fraction,q_norm,k_norm\n", csv);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 0;
    g.training = 0;
    const double t0 = sf_now();
    for (int i = 0; i < ds.count; i++) {
        sf_image im;
        char err[256];
        if (sf_image_load(ds.paths[i], C, &im, err, sizeof err) != 0) {
            sf_warn("skipping bad image %s: %s", ds.paths[i], err);
            unreadable++;
            continue;
        }
        float *pixels = model_input(&im, C, S, &cfg->aug);
        sf_tensor x = {.data = pixels, .ndim = 4, .shape = {1, C, S, S}, .numel = (size_t)C * S * S};
        sf_model_forward(&g, m, &x);
        int rc = sf_model_sima_token_norms(m, norm[NORM_Q], own_k_grid ? k_norm : norm[NORM_K], NULL, NULL);
        if (rc == 0 && own_k_grid) keys_on_query_grid(k_norm, k_grid, q_grid, norm[NORM_K]);
        sf_ctx_reset(&g);
        free(pixels);
        if (rc != 0) {
            sf_image_free(&im);
            sf_error("viz: the model recorded no token norms");
            goto done;
        }
        foreground_fraction(&im, S, gh, gw, frac);
        sf_image_free(&im);
        int n_fg = 0;
        for (int t = 0; t < n; t++) n_fg += fg[t] = frac[t] >= 0.5f;
        token_agreement a[N_NORMS] = {{NAN, NAN}, {NAN, NAN}};
        if (n_fg == n) all_fg++;
        else if (n_fg == 0) all_bg++;
        else {
            for (int k = 0; k < N_NORMS; k++) {
                a[k] = token_score(norm[k], frac, fg, n, r1, r2, order);
                sum[k].auc += a[k].auc;
                sum[k].rho += a[k].rho;
            }
            scored++;
        }
        if (csv) {
            fprintf(csv, "%d,", i);
            cli_csv_field(csv, ds.paths[i] + strlen(root) + strlen(split) + 2);  // relative to the split
            fprintf(csv, ",%d,%d,%d,%.6f,%.6f,%.6f,%.6f", ds.labels[i], n_fg, n, a[NORM_Q].auc, a[NORM_K].auc,
                    a[NORM_Q].rho, a[NORM_K].rho);
            csv_list(csv, frac, n);
            for (int k = 0; k < N_NORMS; k++) csv_list(csv, norm[k], n);
            fputc('\n', csv);
        }
    }
    const double d = scored ? scored : 1;
    token_agreement mean[N_NORMS];
    for (int k = 0; k < N_NORMS; k++) mean[k] = (token_agreement){sum[k].auc / d, sum[k].rho / d};
    char keys[48] = "";
    if (own_k_grid) snprintf(keys, sizeof keys, ", keys %dx%d on it", k_grid[0], k_grid[1]);
    printf("token-norm foreground score of %s%s on %s/%s (grid %dx%d%s, %dx%d input): %d images scored, %d skipped "
           "(%d all foreground, %d all background, %d unreadable)  AUC q-hat %.4f k-hat %.4f  Spearman q-hat %.4f "
           "k-hat %.4f  (%.1f s)\n",
           ckpt, random_init ? " (random init)" : "", root, split, gh, gw, keys, S, S, scored,
           all_fg + all_bg + unreadable,
           all_fg, all_bg, unreadable, mean[NORM_Q].auc, mean[NORM_K].auc, mean[NORM_Q].rho, mean[NORM_K].rho,
           sf_now() - t0);
    if (csv) {
        fclose(csv);
        csv = NULL;
        if (sf_write_file_atomic(per_image_path, rows, rows_len) != 0) goto done;
        printf("wrote %s: one row per image in the dataset's order\n", per_image_path);
    }
    if (json_path) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "checkpoint", ckpt);
        cJSON_AddBoolToObject(o, "random_init", random_init);
        cJSON_AddStringToObject(o, "split", split);
        cJSON_AddNumberToObject(o, "grid_h", gh);
        cJSON_AddNumberToObject(o, "grid_w", gw);
        cJSON_AddNumberToObject(o, "k_grid_h", k_grid[0]);
        cJSON_AddNumberToObject(o, "k_grid_w", k_grid[1]);
        cJSON_AddNumberToObject(o, "img_size", S);
        cJSON_AddNumberToObject(o, "images", ds.count);
        cJSON_AddNumberToObject(o, "scored", scored);
        cJSON_AddNumberToObject(o, "skipped_all_foreground", all_fg);
        cJSON_AddNumberToObject(o, "skipped_all_background", all_bg);
        cJSON_AddNumberToObject(o, "unreadable", unreadable);
        cJSON_AddNumberToObject(o, "auc_q", mean[NORM_Q].auc);
        cJSON_AddNumberToObject(o, "auc_k", mean[NORM_K].auc);
        cJSON_AddNumberToObject(o, "spearman_q", mean[NORM_Q].rho);
        cJSON_AddNumberToObject(o, "spearman_k", mean[NORM_K].rho);
        if (cli_write_json(json_path, o) != 0) goto done;
        printf("wrote %s\n", json_path);
    }
    status = 0;
done:
    if (csv) fclose(csv);
    free(rows);
    for (int k = 0; k < N_NORMS; k++) free(norm[k]);
    free(k_norm);
    free(frac);
    free(fg);
    free(r1);
    free(r2);
    free(order);
    sf_ctx_free(&g);
    sf_dataset_free(&ds);
    return status;
}

int sf_cmd_viz(int argc, char **argv) {
    cli_args args;
    if (cli_parse("viz", argc, argv, &args)) return 2;
    const char *ckpt = args.n_pos > 0 ? args.pos[0] : NULL, *image = args.n_pos > 1 ? args.pos[1] : NULL,
               *out = cli_get(&args, "viz", "-o"), *config_path = cli_get(&args, "viz", "--config"),
               *score_root = cli_get(&args, "viz", "--score"), *split = cli_get(&args, "viz", "--split"),
               *json_path = cli_get(&args, "viz", "--json"), *per_image = cli_get(&args, "viz", "--per-image");
    const int random_init = cli_get(&args, "viz", "--random-init") != NULL;
    cli_args_free(&args);
    if (score_root) {
        if (image || out) return cli_usage_error("viz", "--score DIR scores a split: give no IMAGE and no -o");
        if (!ckpt) return cli_usage_error("viz", "--score needs a checkpoint");
    } else if (split || json_path || per_image || random_init) {
        return cli_usage_error("viz", "%s needs --score DIR",
                               split ? "--split" : json_path ? "--json" : per_image ? "--per-image" : "--random-init");
    } else if (!ckpt || !image || !out) {
        sf_error("viz: missing arguments");
        sf_hint("usage: sfvit viz CKPT.safetensors IMAGE.png|jpg -o heat.png [--config FILE.yaml]\n"
                "       sfvit viz CKPT.safetensors --score DIR [--split val] [--json F.json] [--per-image F.csv] [--random-init]");
        return 2;
    }
    sf_config cfg;
    if (sf_checkpoint_config(ckpt, config_path, &cfg) != 0) return 1;
    sf_threads_init(cfg.train.threads);
    if (cfg.model.attn != SF_ATTN_SIMA) {
        sf_error("viz: %s is not a SimA model (model.attn is not sima)", ckpt);
        return 1;
    }
    int status = 1;
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
    if (random_init) {
        sf_rng rng;  // the trainer's initialization seed: the model a run with this config starts from
        sf_rng_seed(&rng, cfg.train.seed * 1000003ULL + 1);
        sf_model_init(m, &ps, &rng);
    } else if (sf_checkpoint_load(ckpt, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) != 0) {
        goto done;
    }
    if (sf_model_sima_token_norms(m, NULL, NULL, NULL, NULL) != 0) {
        sf_error("viz: the model has no SimA block to visualize");
        goto done;
    }
    if (score_root) {
        status = score_split(m, &cfg, ckpt, random_init, score_root, split ? split : cfg.data.val_split, json_path,
                             per_image);
        goto done;
    }
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
    int q_grid[2], k_grid[2];
    sf_model_sima_token_norms(m, NULL, NULL, q_grid, k_grid);  // the grids, to size the buffers
    qn = sf_malloc((size_t)q_grid[0] * q_grid[1] * sizeof(float));
    kn = sf_malloc((size_t)k_grid[0] * k_grid[1] * sizeof(float));
    if (sf_model_sima_token_norms(m, qn, kn, NULL, NULL) != 0) {
        sf_error("viz: the model recorded no token norms");
        goto done;
    }
    normalize01(qn, q_grid[0] * q_grid[1]);
    normalize01(kn, k_grid[0] * k_grid[1]);
    draw_panels(&im, qn, q_grid, kn, k_grid, S, &canvas);
    if (sf_image_write_png(out, &canvas) != 0) goto done;
    char keys[48] = "";
    if (k_grid[0] != q_grid[0] || k_grid[1] != q_grid[1])
        snprintf(keys, sizeof keys, ", keys %dx%d", k_grid[0], k_grid[1]);
    printf("wrote %s (%dx%d): image | Q-hat token norms | K-hat token norms, grid %dx%d%s\n", out, canvas.w, canvas.h,
           q_grid[0], q_grid[1], keys);
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
