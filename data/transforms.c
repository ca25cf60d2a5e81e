/* transforms.c — per-sample image transforms and batch mixup/cutmix, following timm's
 * ImageNet pipeline (transforms_factory.py, auto_augment.py, random_erasing.py, mixup.py)
 * and torchvision's RandomResizedCrop / Resize / CenterCrop.
 *
 * Train: RandomResizedCrop -> horizontal flip -> RandAugment (uint8) -> normalize ->
 * random erasing (float, normalized space). Eval: resize shorter side to size/crop_pct ->
 * centre crop -> normalize. Resizing uses PIL's separable filters with the support widened by
 * the downscale factor (antialiased, as torchvision on PIL images), computed in float.
 * Deliberately not done: AugMix / AutoAugment policies, colour jitter (timm skips it when
 * RandAugment is on), per-op random interpolation in RandAugment (bilinear always).
 * Dimension legend: B batch, C channels, H x W image, K classes.
 */
#include "sfvit/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- resampling (PIL Resample.c: precompute_coeffs, ImagingResampleHorizontal/Vertical) ---- */
static double filter_bilinear(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_bicubic(double x) {
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* For each output position: first input index, tap count and normalized weights. */
typedef struct resample_axis {
    int ksize;
    int *first, *count; /* (out) */
    float *w;           /* (out, ksize) */
} resample_axis;

static void axis_init(resample_axis *ax, int in_size, double in0, double in1, int out_size,
                      int interp) {
    double support0 = interp == SF_INTERP_BICUBIC ? 2.0 : 1.0;
    double (*filt)(double) = interp == SF_INTERP_BICUBIC ? filter_bicubic : filter_bilinear;
    double scale = (in1 - in0) / out_size;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = support0 * fscale;
    ax->ksize = (int)ceil(support) * 2 + 1;
    ax->first = sf_malloc(sizeof(int) * out_size);
    ax->count = sf_malloc(sizeof(int) * out_size);
    ax->w = sf_calloc((size_t)out_size * ax->ksize, sizeof(float));
    for (int o = 0; o < out_size; o++) {
        double center = in0 + (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        if (n > ax->ksize) n = ax->ksize;
        double ww = 0.0;
        float *wo = ax->w + (size_t)o * ax->ksize;
        for (int i = 0; i < n; i++) {
            double v = filt((i + lo - center + 0.5) / fscale);
            wo[i] = (float)v;
            ww += v;
        }
        for (int i = 0; i < n; i++) wo[i] = ww != 0.0 ? (float)(wo[i] / ww) : 0.0f;
        if (n <= 0) { /* a box entirely outside the image: nearest edge pixel */
            lo = lo >= in_size ? in_size - 1 : 0;
            n = 1;
            wo[0] = 1.0f;
        }
        ax->first[o] = lo;
        ax->count[o] = n;
    }
}

static void axis_free(resample_axis *ax) {
    free(ax->first);
    free(ax->count);
    free(ax->w);
}

static inline uint8_t clip_u8(float v) {
    v = v + 0.5f;
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

/* Resamples the box [x0, x1) x [y0, y1) of src (source pixel units, may be fractional) to
 * ow x oh with PIL's separable filters (support widened by the downscale factor, i.e.
 * antialiased, as torchvision's Resize on PIL images). dst is allocated. */
static void image_resample(const sf_image *src, double x0, double y0, double x1, double y1, int ow, int oh,
                           int interp, sf_image *dst) {
    SF_ASSERT(ow > 0 && oh > 0 && x1 > x0 && y1 > y0);
    int c = src->c, W = src->w;
    resample_axis ax, ay;
    axis_init(&ax, src->w, x0, x1, ow, interp);
    axis_init(&ay, src->h, y0, y1, oh, interp);
    /* only the source rows some output row reads */
    int rlo = src->h, rhi = 0;
    for (int o = 0; o < oh; o++) {
        if (ay.first[o] < rlo) rlo = ay.first[o];
        if (ay.first[o] + ay.count[o] > rhi) rhi = ay.first[o] + ay.count[o];
    }
    /* PIL stores the horizontal pass as uint8 (rounded, clipped): bicubic overshoot is cut
     * before the vertical pass, which we keep for agreement with PIL */
    float *tmp = sf_malloc(sizeof(float) * (size_t)(rhi - rlo) * ow * c); // (rows, ow, c)
    for (int y = rlo; y < rhi; y++) {
        const uint8_t *row = src->px + (size_t)y * W * c;
        float *t = tmp + (size_t)(y - rlo) * ow * c;
        for (int o = 0; o < ow; o++) {
            const float *w = ax.w + (size_t)o * ax.ksize;
            const uint8_t *p = row + (size_t)ax.first[o] * c;
            int n = ax.count[o];
            if (c == 3) {
                float s0 = 0, s1 = 0, s2 = 0;
                for (int i = 0; i < n; i++) {
                    s0 += w[i] * p[3 * i];
                    s1 += w[i] * p[3 * i + 1];
                    s2 += w[i] * p[3 * i + 2];
                }
                t[3 * o] = clip_u8(s0);
                t[3 * o + 1] = clip_u8(s1);
                t[3 * o + 2] = clip_u8(s2);
            } else {
                float s = 0;
                for (int i = 0; i < n; i++) s += w[i] * p[i];
                t[o] = clip_u8(s);
            }
        }
    }
    dst->w = ow;
    dst->h = oh;
    dst->c = c;
    dst->px = sf_malloc((size_t)ow * oh * c);
    size_t rowlen = (size_t)ow * c;
    float *acc = sf_malloc(sizeof(float) * rowlen); // (ow, c)
    for (int o = 0; o < oh; o++) {
        const float *w = ay.w + (size_t)o * ay.ksize;
        memset(acc, 0, sizeof(float) * rowlen);
        for (int i = 0; i < ay.count[o]; i++) {
            const float *t = tmp + (size_t)(ay.first[o] + i - rlo) * rowlen;
            float wi = w[i];
            for (size_t k = 0; k < rowlen; k++) acc[k] += wi * t[k];
        }
        uint8_t *out = dst->px + (size_t)o * rowlen;
        for (size_t k = 0; k < rowlen; k++) out[k] = clip_u8(acc[k]);
    }
    free(acc);
    free(tmp);
    axis_free(&ax);
    axis_free(&ay);
}

int sf_interp_pick(const char *name, sf_rng *r) {
    if (name && strcmp(name, "bilinear") == 0) return SF_INTERP_BILINEAR;
    if (name && strcmp(name, "random") == 0)
        return r && sf_rng_uniform(r) < 0.5f ? SF_INTERP_BICUBIC : SF_INTERP_BILINEAR;
    return SF_INTERP_BICUBIC; /* "bicubic" (the timm/DeiT default) */
}

/* Python's round(): half to even (default FP rounding mode). */
static int round_half_even(double x) { return (int)nearbyint(x); }

/* torchvision Resize(s) (shorter side -> s, longer int(s * long / short)) followed by
 * CenterCrop(size), done as one resample of the source box the crop covers. */
static void resize_center_crop(const sf_image *img, int scale_size, int size, int interp,
                               sf_image *out) {
    int rw, rh;
    if (img->w <= img->h) {
        rw = scale_size;
        rh = (int)((double)scale_size * img->h / img->w);
    } else {
        rh = scale_size;
        rw = (int)((double)scale_size * img->w / img->h);
    }
    /* CenterCrop pads when the image is smaller than the crop; scale_size >= size here */
    int top = round_half_even((rh - size) / 2.0), left = round_half_even((rw - size) / 2.0);
    double sx = (double)img->w / rw, sy = (double)img->h / rh;
    image_resample(img, left * sx, top * sy, (left + size) * sx, (top + size) * sy, size, size,
                      interp, out);
}

static void normalize_chw(const sf_image *img, const float *mean, const float *std, float *out) {
    int c = img->c;
    size_t hw = (size_t)img->w * img->h;
    for (int ch = 0; ch < c; ch++) {
        float s = 1.0f / (255.0f * std[ch]), b = -mean[ch] / std[ch];
        float *o = out + ch * hw;
        const uint8_t *p = img->px + ch;
        for (size_t i = 0; i < hw; i++) o[i] = p[i * c] * s + b;
    }
}

void sf_transform_eval(const sf_image *img, int size, float crop_pct, int interp,
                       const float *mean, const float *std, float *out) {
    /* timm: scale_size = floor(img_size / crop_pct) */
    int scale_size = (int)floor(size / (crop_pct > 0 ? crop_pct : 1.0f) + 1e-6);
    if (scale_size < size) scale_size = size;
    sf_image t;
    resize_center_crop(img, scale_size, size, interp, &t);
    normalize_chw(&t, mean, std, out);
    sf_image_free(&t);
}

/* torchvision RandomResizedCrop.get_params: returns the crop (top, left, h, w). */
static void rrc_params(int W, int H, const sf_aug_cfg *aug, sf_rng *r, int *top, int *left,
                       int *ch, int *cw) {
    double area = (double)W * H;
    double lr0 = log(aug->ratio_min), lr1 = log(aug->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (aug->scale_min + (aug->scale_max - aug->scale_min) * sf_rng_uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * sf_rng_uniform(r));
        int w = round_half_even(sqrt(target * aspect));
        int h = round_half_even(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            *top = (int)sf_rng_below(r, (uint32_t)(H - h + 1));
            *left = (int)sf_rng_below(r, (uint32_t)(W - w + 1));
            *ch = h;
            *cw = w;
            return;
        }
    }
    /* fallback: whole image, centre-cropped to the ratio range */
    double in_ratio = (double)W / H;
    int w, h;
    if (in_ratio < aug->ratio_min) {
        w = W;
        h = round_half_even(w / aug->ratio_min);
    } else if (in_ratio > aug->ratio_max) {
        h = H;
        w = round_half_even(h * aug->ratio_max);
    } else {
        w = W;
        h = H;
    }
    *top = (H - h) / 2;
    *left = (W - w) / 2;
    *ch = h;
    *cw = w;
}

static void hflip(sf_image *img) {
    int c = img->c;
    for (int y = 0; y < img->h; y++) {
        uint8_t *row = img->px + (size_t)y * img->w * c;
        for (int a = 0, b = img->w - 1; a < b; a++, b--)
            for (int k = 0; k < c; k++) {
                uint8_t t = row[a * c + k];
                row[a * c + k] = row[b * c + k];
                row[b * c + k] = t;
            }
    }
}

/* timm RandomErasing(mode='pixel', count 1): area 0.02..1/3, log-uniform aspect 0.3..3.33,
 * up to 10 attempts, per-pixel N(0, 1) in normalized space. x: (C, H, W). */
static void random_erase(float *x, int C, int H, int W, float p, sf_rng *r) {
    if (sf_rng_uniform(r) > p) return;
    double area = (double)H * W, la0 = log(0.3), la1 = log(1.0 / 0.3);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (0.02 + (1.0 / 3.0 - 0.02) * sf_rng_uniform(r));
        double aspect = exp(la0 + (la1 - la0) * sf_rng_uniform(r));
        int h = round_half_even(sqrt(target * aspect)), w = round_half_even(sqrt(target / aspect));
        if (w < W && h < H) {
            int top = (int)sf_rng_below(r, (uint32_t)(H - h + 1));
            int left = (int)sf_rng_below(r, (uint32_t)(W - w + 1));
            for (int c = 0; c < C; c++)
                for (int y = top; y < top + h; y++)
                    for (int xx = left; xx < left + w; xx++)
                        x[((size_t)c * H + y) * W + xx] = sf_rng_normal(r);
            return;
        }
    }
}

void sf_transform_train(const sf_image *img, int size, const sf_aug_cfg *aug,
                        const sf_randaug *ra, sf_rng *r, float *out) {
    sf_image t;
    if (aug->rrc) {
        int top, left, h, w;
        rrc_params(img->w, img->h, aug, r, &top, &left, &h, &w);
        int interp = sf_interp_pick(aug->interpolation, r);
        image_resample(img, left, top, left + w, top + h, size, size, interp, &t);
    } else {
        resize_center_crop(img, size, size, sf_interp_pick(aug->interpolation, r), &t);
    }
    if (aug->hflip > 0 && sf_rng_uniform(r) < aug->hflip) hflip(&t);
    if (ra && ra->n > 0) {
        uint8_t fill[3];
        for (int k = 0; k < 3; k++) {
            float v = roundf(255.0f * aug->mean[t.c == 1 ? 0 : k]);
            fill[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        sf_randaug_apply(&t, ra, fill, r);
    }
    normalize_chw(&t, aug->mean, aug->std, out);
    if (aug->reprob > 0) random_erase(out, t.c, size, size, aug->reprob, r);
    sf_image_free(&t);
}

/* ---- RandAugment (timm auto_augment.py, rand_augment_transform) ---- */
enum {
    RA_AUTOCONTRAST, RA_EQUALIZE, RA_INVERT, RA_ROTATE, RA_POSTERIZE, RA_SOLARIZE,
    RA_SOLARIZE_ADD, RA_COLOR, RA_CONTRAST, RA_BRIGHTNESS, RA_SHARPNESS, RA_SHEAR_X,
    RA_SHEAR_Y, RA_TRANSLATE_X, RA_TRANSLATE_Y, RA_COUNT
};

int sf_randaug_parse(const char *s, sf_randaug *ra) {
    /* timm defaults: n=2, prob 0.5, mstd 0, mmax 10, non-increasing ops */
    *ra = (sf_randaug){.n = 2, .m = 10.0f, .mstd = 0.0f, .mmax = 10.0f, .p = 0.5f, .inc = 0};
    if (!s || !s[0]) {
        ra->n = 0;
        return 0;
    }
    if (strncmp(s, "rand", 4) != 0 || (s[4] && s[4] != '-'))
        return sf_error("aug.randaugment '%s': must start with 'rand' (e.g. rand-m9-mstd0.5-inc1)", s);
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf + 4, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        /* key = leading letters, value = the rest (timm: re.split(r'(\d.*)', c)) */
        char key[16];
        size_t k = 0;
        while (tok[k] && !(tok[k] >= '0' && tok[k] <= '9') && tok[k] != '.' && k < sizeof(key) - 1)
            key[k] = tok[k], k++;
        key[k] = 0;
        char *end;
        double v = strtod(tok + k, &end);
        if (end == tok + k || *end)
            return sf_error("aug.randaugment '%s': bad value in '%s'", s, tok);
        if (!strcmp(key, "m")) ra->m = (float)v;
        else if (!strcmp(key, "n")) ra->n = (int)v;
        else if (!strcmp(key, "mstd")) ra->mstd = v > 100 ? INFINITY : (float)v; /* timm */
        else if (!strcmp(key, "mmax")) ra->mmax = (float)v;
        else if (!strcmp(key, "inc")) ra->inc = v != 0;
        else if (!strcmp(key, "p")) ra->p = (float)v;
        else
            return sf_error("aug.randaugment '%s': unknown key '%s' (known: m n mstd mmax inc p)",
                            s, key);
    }
    if (ra->n < 0 || ra->n > 16 || ra->m < 0 || ra->p < 0 || ra->p > 1 || ra->mstd < 0)
        return sf_error("aug.randaugment '%s': value out of range", s);
    return 0;
}

static float rand_negate(float v, sf_rng *r) { return sf_rng_uniform(r) > 0.5f ? -v : v; }

static void apply_lut(sf_image *img, const uint8_t lut[][256], int per_channel) {
    size_t n = (size_t)img->w * img->h * img->c;
    for (size_t i = 0; i < n; i++) img->px[i] = lut[per_channel ? i % img->c : 0][img->px[i]];
}

static void channel_hist(const sf_image *img, int ch, int hist[256]) {
    memset(hist, 0, sizeof(int) * 256);
    size_t n = (size_t)img->w * img->h;
    for (size_t i = 0; i < n; i++) hist[img->px[i * img->c + ch]]++;
}

static void op_autocontrast(sf_image *img) { /* ImageOps.autocontrast, cutoff 0 */
    uint8_t lut[3][256];
    for (int ch = 0; ch < img->c; ch++) {
        int hist[256], lo = 0, hi = 255;
        channel_hist(img, ch, hist);
        while (lo < 256 && !hist[lo]) lo++;
        while (hi >= 0 && !hist[hi]) hi--;
        for (int i = 0; i < 256; i++) {
            if (hi <= lo) {
                lut[ch][i] = (uint8_t)i;
                continue;
            }
            double scale = 255.0 / (hi - lo), offset = -lo * scale;
            int v = (int)(i * scale + offset);
            lut[ch][i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    apply_lut(img, lut, 1);
}

static void op_equalize(sf_image *img) { /* ImageOps.equalize */
    uint8_t lut[3][256];
    for (int ch = 0; ch < img->c; ch++) {
        int hist[256], last = 0, total = 0;
        channel_hist(img, ch, hist);
        for (int i = 0; i < 256; i++)
            if (hist[i]) total += hist[i], last = hist[i];
        int step = (total - last) / 255;
        for (int i = 0, n = step / 2; i < 256; i++) {
            if (!step) {
                lut[ch][i] = (uint8_t)i;
                continue;
            }
            int v = n / step;
            lut[ch][i] = (uint8_t)(v > 255 ? 255 : v);
            n += hist[i];
        }
    }
    apply_lut(img, lut, 1);
}

static void op_lut_all(sf_image *img, int kind, int arg) {
    uint8_t lut[1][256];
    for (int i = 0; i < 256; i++) {
        int v = i;
        if (kind == RA_INVERT) v = 255 - i;
        else if (kind == RA_POSTERIZE) v = arg >= 8 ? i : i & (~((1 << (8 - arg)) - 1) & 0xff);
        else if (kind == RA_SOLARIZE) v = i < arg ? i : 255 - i;
        else if (kind == RA_SOLARIZE_ADD) v = i < 128 ? (i + arg > 255 ? 255 : i + arg) : i;
        lut[0][i] = (uint8_t)v;
    }
    apply_lut(img, lut, 0);
}

/* PIL Image.blend(degenerate, img, f) = deg + f * (img - deg), clipped. deg NULL = black. */
static void blend(sf_image *img, const uint8_t *deg, float f) {
    size_t n = (size_t)img->w * img->h * img->c;
    for (size_t i = 0; i < n; i++) {
        float d = deg ? deg[i] : 0.0f;
        float v = d + f * ((float)img->px[i] - d);
        img->px[i] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
    }
}

static void op_enhance(sf_image *img, int kind, float f) {
    size_t hw = (size_t)img->w * img->h, n = hw * img->c;
    int c = img->c;
    if (kind == RA_BRIGHTNESS) {
        blend(img, NULL, f);
        return;
    }
    uint8_t *deg = sf_malloc(n);
    if (kind == RA_COLOR) {
        if (c == 1) { /* gray: the degenerate image is the image itself */
            free(deg);
            return;
        }
        for (size_t i = 0; i < hw; i++) {
            const uint8_t *p = img->px + 3 * i;
            uint8_t l = (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
            deg[3 * i] = deg[3 * i + 1] = deg[3 * i + 2] = l;
        }
    } else if (kind == RA_CONTRAST) {
        double sum = 0;
        for (size_t i = 0; i < hw; i++) {
            const uint8_t *p = img->px + c * i;
            sum += c == 1 ? p[0] : ((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
        }
        memset(deg, (int)(sum / hw + 0.5), n);
    } else { /* RA_SHARPNESS: SMOOTH filter (1 1 1 / 1 5 1 / 1 1 1) / 13, borders kept */
        memcpy(deg, img->px, n);
        int W = img->w, H = img->h;
        for (int y = 1; y < H - 1; y++)
            for (int x = 1; x < W - 1; x++)
                for (int k = 0; k < c; k++) {
                    int s = 0;
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++)
                            s += img->px[((size_t)(y + dy) * W + x + dx) * c + k] *
                                 (dx == 0 && dy == 0 ? 5 : 1);
                    deg[((size_t)y * W + x) * c + k] = (uint8_t)((s + 6) / 13);
                }
    }
    blend(img, deg, f);
    free(deg);
}

/* PIL Image.transform(AFFINE, (a, b, c, d, e, f)): output pixel centre (x, y) samples the
 * source at (a x + b y + c, d x + e y + f), bilinear, fill outside. */
static void affine(sf_image *img, const double m[6], const uint8_t fill[3]) {
    int W = img->w, H = img->h, c = img->c;
    uint8_t *out = sf_malloc((size_t)W * H * c);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double xs = m[0] * (x + 0.5) + m[1] * (y + 0.5) + m[2];
            double ys = m[3] * (x + 0.5) + m[4] * (y + 0.5) + m[5];
            uint8_t *o = out + ((size_t)y * W + x) * c;
            if (xs < 0 || ys < 0 || xs >= W || ys >= H) {
                for (int k = 0; k < c; k++) o[k] = fill[k];
                continue;
            }
            double fx = xs - 0.5, fy = ys - 0.5;
            int x0 = (int)floor(fx), y0 = (int)floor(fy);
            double ax = fx - x0, ay = fy - y0;
            int x1 = x0 + 1, y1 = y0 + 1;
            if (x0 < 0) x0 = 0;
            if (y0 < 0) y0 = 0;
            if (x1 > W - 1) x1 = W - 1;
            if (y1 > H - 1) y1 = H - 1;
            for (int k = 0; k < c; k++) {
                double v00 = img->px[((size_t)y0 * W + x0) * c + k], v01 = img->px[((size_t)y0 * W + x1) * c + k];
                double v10 = img->px[((size_t)y1 * W + x0) * c + k], v11 = img->px[((size_t)y1 * W + x1) * c + k];
                double v = (1 - ay) * ((1 - ax) * v00 + ax * v01) + ay * ((1 - ax) * v10 + ax * v11);
                o[k] = (uint8_t)(v + 0.5);
            }
        }
    free(img->px);
    img->px = out;
}

static void apply_op(sf_image *img, int op, float level, int inc, const uint8_t fill[3],
                     sf_rng *r) {
    float l = level / 10.0f; /* timm _LEVEL_DENOM */
    double W = img->w, H = img->h;
    switch (op) {
    case RA_AUTOCONTRAST: op_autocontrast(img); break;
    case RA_EQUALIZE: op_equalize(img); break;
    case RA_INVERT: op_lut_all(img, RA_INVERT, 0); break;
    case RA_POSTERIZE: {
        int bits = (int)(l * 4);
        op_lut_all(img, RA_POSTERIZE, inc ? 4 - bits : bits);
        break;
    }
    case RA_SOLARIZE: {
        int t = (int)(l * 256);
        op_lut_all(img, RA_SOLARIZE, inc ? 256 - t : t);
        break;
    }
    case RA_SOLARIZE_ADD: op_lut_all(img, RA_SOLARIZE_ADD, (int)(l * 110)); break;
    case RA_COLOR: case RA_CONTRAST: case RA_BRIGHTNESS: case RA_SHARPNESS: {
        float f = inc ? 1.0f + rand_negate(l * 0.9f, r) : l * 1.8f + 0.1f;
        op_enhance(img, op, f);
        break;
    }
    case RA_ROTATE: {
        /* PIL rotate(deg): counter-clockwise about the centre */
        double a = -rand_negate(l * 30.0f, r) * M_PI / 180.0, cs = cos(a), sn = sin(a);
        double cx = W / 2.0, cy = H / 2.0;
        double m[6] = {cs, sn, 0, -sn, cs, 0};
        m[2] = m[0] * -cx + m[1] * -cy + cx;
        m[5] = m[3] * -cx + m[4] * -cy + cy;
        affine(img, m, fill);
        break;
    }
    case RA_SHEAR_X: {
        double m[6] = {1, rand_negate(l * 0.3f, r), 0, 0, 1, 0};
        affine(img, m, fill);
        break;
    }
    case RA_SHEAR_Y: {
        double m[6] = {1, 0, 0, rand_negate(l * 0.3f, r), 1, 0};
        affine(img, m, fill);
        break;
    }
    case RA_TRANSLATE_X: {
        double m[6] = {1, 0, rand_negate(l * 0.45f, r) * W, 0, 1, 0};
        affine(img, m, fill);
        break;
    }
    case RA_TRANSLATE_Y: {
        double m[6] = {1, 0, 0, 0, 1, rand_negate(l * 0.45f, r) * H};
        affine(img, m, fill);
        break;
    }
    default: SF_ASSERT(0, "op %d", op);
    }
}

void sf_randaug_apply(sf_image *img, const sf_randaug *ra, const uint8_t fill[3], sf_rng *r) {
    int ops[16];
    /* np.random.choice(ops, n, replace=True): all ops are drawn before any is applied */
    for (int i = 0; i < ra->n; i++) ops[i] = (int)sf_rng_below(r, RA_COUNT);
    for (int i = 0; i < ra->n; i++) {
        if (ra->p < 1.0f && sf_rng_uniform(r) > ra->p) continue;
        float mag = ra->m;
        if (isinf(ra->mstd)) mag = sf_rng_uniform(r) * mag;
        else if (ra->mstd > 0) mag = mag + ra->mstd * sf_rng_normal(r);
        float upper = ra->mmax > 0 ? ra->mmax : 10.0f;
        mag = mag < 0 ? 0 : mag > upper ? upper : mag;
        apply_op(img, ops[i], mag, ra->inc, fill, r);
    }
}

/* ---- mixup / cutmix (timm mixup.py Mixup, mode 'batch', correct_lam=True) ---- */
float sf_mixup_batch(float *x, int B, int C, int H, int W, const int *labels, int K,
                     const sf_aug_cfg *aug, sf_rng *r, float *soft, int *cutmix) {
    float lam = 1.0f;
    int use_cutmix = 0;
    if (sf_rng_uniform(r) < aug->mixup_prob) {
        if (aug->mixup > 0 && aug->cutmix > 0) {
            use_cutmix = sf_rng_uniform(r) < aug->mixup_switch;
            lam = use_cutmix ? sf_rng_beta(r, aug->cutmix, aug->cutmix)
                             : sf_rng_beta(r, aug->mixup, aug->mixup);
        } else if (aug->mixup > 0) {
            lam = sf_rng_beta(r, aug->mixup, aug->mixup);
        } else if (aug->cutmix > 0) {
            use_cutmix = 1;
            lam = sf_rng_beta(r, aug->cutmix, aug->cutmix);
        }
    }
    size_t chw = (size_t)C * H * W;
    if (lam < 1.0f) {
        if (use_cutmix) {
            /* rand_bbox: cut = int(side * sqrt(1 - lam)), centre uniform, clipped */
            float ratio = sqrtf(1.0f - lam);
            int cut_h = (int)(H * ratio), cut_w = (int)(W * ratio);
            int cy = (int)sf_rng_below(r, (uint32_t)H), cx = (int)sf_rng_below(r, (uint32_t)W);
            int yl = cy - cut_h / 2, yh = cy + cut_h / 2, xl = cx - cut_w / 2, xh = cx + cut_w / 2;
            yl = yl < 0 ? 0 : yl > H ? H : yl;
            yh = yh < 0 ? 0 : yh > H ? H : yh;
            xl = xl < 0 ? 0 : xl > W ? W : xl;
            xh = xh < 0 ? 0 : xh > W ? W : xh;
            /* swap the box between each pair (b, B-1-b): both read the other's original */
            for (int b = 0; b < B / 2; b++) {
                float *xa = x + b * chw, *xb = x + (size_t)(B - 1 - b) * chw;
                for (int c = 0; c < C; c++)
                    for (int y = yl; y < yh; y++)
                        for (int xx = xl; xx < xh; xx++) {
                            size_t i = ((size_t)c * H + y) * W + xx;
                            float t = xa[i];
                            xa[i] = xb[i];
                            xb[i] = t;
                        }
            }
            lam = 1.0f - (float)((yh - yl) * (xh - xl)) / (float)(H * W);
        } else {
            for (int b = 0; b < B / 2; b++) {
                float *xa = x + b * chw, *xb = x + (size_t)(B - 1 - b) * chw;
                for (size_t i = 0; i < chw; i++) {
                    float a = xa[i], bb = xb[i];
                    xa[i] = lam * a + (1.0f - lam) * bb;
                    xb[i] = lam * bb + (1.0f - lam) * a;
                }
            }
        }
    }
    float off = aug->smoothing / K, on = 1.0f - aug->smoothing + off;
    for (int b = 0; b < B; b++) {
        float *t = soft + (size_t)b * K;
        for (int k = 0; k < K; k++) t[k] = off;
        t[labels[b]] += lam * (on - off);
        t[labels[B - 1 - b]] += (1.0f - lam) * (on - off);
    }
    if (cutmix) *cutmix = use_cutmix;
    return lam;
}
