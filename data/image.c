/* image.c — PNG (libpng) and JPEG (libjpeg-turbo) decoding to 8-bit gray or RGB, and 8-bit
 * PNG writing.
 *
 * The format is chosen by the magic bytes, never by the extension. Every libpng/libjpeg error
 * is caught (setjmp/longjmp) and returned as a one-line reason, so a corrupt, truncated or
 * empty file is an error for the caller to skip, never a crash. libjpeg reports a truncated
 * or damaged entropy stream only as a warning (and pads the image with gray); those warnings
 * are promoted to errors here, so damaged data is never passed on as an image.
 * Deliberately not handled: colour management (ICC profiles, gamma), EXIF orientation,
 * alpha compositing (alpha is dropped, as PIL's convert("RGB") does).
 * Pixels are (h, w, c) interleaved uint8.
 */
#include "sfvit/data.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

/* Largest side accepted; larger headers are treated as corrupt (a bogus header must not make
 * us allocate gigabytes). */
#define IMAGE_MAX_SIDE 32768

static void set_err(char *err, size_t err_len, const char *fmt, ...) {
    if (!err || !err_len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* ITU-R 601 luma in 16-bit fixed point with rounding, the formula PIL uses for RGB -> L. */
static inline uint8_t luma(const uint8_t *p) {
    return (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

/* Converts img in place between 1 and 3 channels (want_c 0 keeps it). */
static void convert_channels(sf_image *img, int want_c) {
    if (want_c == 0 || want_c == img->c) return;
    size_t n = (size_t)img->w * img->h;
    if (want_c == 3) {
        uint8_t *out = sf_malloc(n * 3);
        for (size_t i = 0; i < n; i++) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = img->px[i];
        free(img->px);
        img->px = out;
    } else {
        for (size_t i = 0; i < n; i++) img->px[i] = luma(img->px + 3 * i);
    }
    img->c = want_c;
}

/* ---- PNG ---- */
typedef struct png_ctx {
    jmp_buf jmp;
    char msg[192];
    const uint8_t *buf;
    size_t len, pos;
} png_ctx;

static void png_err_fn(png_structp png, png_const_charp msg) {
    png_ctx *ctx = png_get_error_ptr(png);
    snprintf(ctx->msg, sizeof(ctx->msg), "%s", msg);
    longjmp(ctx->jmp, 1);
}

static void png_warn_fn(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* ancillary-chunk warnings (bad iCCP, ...) do not affect the pixels */
}

static void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
    png_ctx *ctx = png_get_io_ptr(png);
    if (n > ctx->len - ctx->pos) png_error(png, "file is truncated");
    memcpy(out, ctx->buf + ctx->pos, n);
    ctx->pos += n;
}

static int decode_png(const uint8_t *buf, size_t len, int want_c, sf_image *img, char *err,
                      size_t err_len) {
    png_ctx ctx = {.buf = buf, .len = len};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, png_err_fn, png_warn_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        set_err(err, err_len, "libpng initialisation failed");
        return -1;
    }
    /* volatile: modified between setjmp and a possible longjmp */
    uint8_t *volatile px = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(ctx.jmp)) {
        free(px);
        free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        set_err(err, err_len, "corrupt PNG: %s", ctx.msg);
        return -1;
    }
    png_set_read_fn(png, &ctx, png_read_fn);
    png_set_user_limits(png, IMAGE_MAX_SIDE, IMAGE_MAX_SIDE);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    /* palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha; then 16 -> 8 bit, drop alpha */
    png_set_expand(png);
    if (depth == 16) png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int c = png_get_channels(png, info);
    if (c != 1 && c != 3) png_error(png, "unsupported channel layout");
    (void)color;
    /* Not sf_malloc: a header can claim up to IMAGE_MAX_SIDE^2 pixels, and an allocation
     * that fails for one bad file must make it a skipped file, not end the process. */
    px = malloc((size_t)w * h * c);
    rows = malloc(sizeof(png_bytep) * h);
    if (!px || !rows) png_error(png, "image too large to allocate");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = px + (size_t)y * w * c;
    png_read_image(png, rows);
    /* The end chunk is not read: trailing garbage after the pixel data is harmless. */
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    img->w = (int)w;
    img->h = (int)h;
    img->c = c;
    img->px = px;
    convert_channels(img, want_c);
    return 0;
}

/* ---- JPEG ---- */
typedef struct jpeg_ctx {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX + 32];
} jpeg_ctx;

static void jpeg_error_exit_fn(j_common_ptr cinfo) {
    jpeg_ctx *ctx = (jpeg_ctx *)cinfo->err;
    char m[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, m);
    snprintf(ctx->msg, sizeof(ctx->msg), "%s", m);
    longjmp(ctx->jmp, 1);
}

/* Warnings (msg_level -1) that mean the entropy-coded data is damaged or cut short; libjpeg
 * would otherwise return an image padded with gray. Other warnings (extraneous bytes between
 * markers, odd JFIF versions) leave the pixels intact and are ignored, as PIL does. */
static void jpeg_emit_message_fn(j_common_ptr cinfo, int level) {
    if (level != -1) return;
    switch (cinfo->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
        jpeg_error_exit_fn(cinfo);
    default:
        break;
    }
}

static int decode_jpeg(const uint8_t *buf, size_t len, int want_c, sf_image *img, char *err,
                       size_t err_len) {
    struct jpeg_decompress_struct cinfo;
    jpeg_ctx ctx;
    cinfo.err = jpeg_std_error(&ctx.pub);
    ctx.pub.error_exit = jpeg_error_exit_fn;
    ctx.pub.emit_message = jpeg_emit_message_fn;
    uint8_t *volatile px = NULL;
    uint8_t *volatile cmyk = NULL;
    if (setjmp(ctx.jmp)) {
        free(px);
        free(cmyk);
        jpeg_destroy_decompress(&cinfo);
        set_err(err, err_len, "corrupt JPEG: %s", ctx.msg);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, buf, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.image_width > IMAGE_MAX_SIDE || cinfo.image_height > IMAGE_MAX_SIDE) {
        jpeg_destroy_decompress(&cinfo);
        set_err(err, err_len, "JPEG too large (%ux%u)", cinfo.image_width, cinfo.image_height);
        return -1;
    }
    int c;
    int is_cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    if (is_cmyk) {
        cinfo.out_color_space = JCS_CMYK; /* libjpeg converts YCCK -> CMYK */
        c = 3;
    } else if (cinfo.num_components == 1) {
        cinfo.out_color_space = JCS_GRAYSCALE;
        c = 1;
    } else if (cinfo.num_components == 3) {
        cinfo.out_color_space = JCS_RGB;
        c = 3;
    } else {
        jpeg_destroy_decompress(&cinfo);
        set_err(err, err_len, "unsupported JPEG with %d components", cinfo.num_components);
        return -1;
    }
    jpeg_start_decompress(&cinfo);
    size_t w = cinfo.output_width, h = cinfo.output_height;
    /* Not sf_malloc: see decode_png. */
    px = malloc(w * h * c);
    cmyk = is_cmyk ? malloc(w * 4) : NULL;
    if (!px || (is_cmyk && !cmyk)) {
        snprintf(ctx.msg, sizeof(ctx.msg), "image too large to allocate (%zux%zu)", w, h);
        longjmp(ctx.jmp, 1);
    }
    if (is_cmyk) {
        /* Adobe writes CMYK JPEGs inverted (0 = full ink); plain CMYK is not. */
        int inverted = cinfo.saw_Adobe_marker;
        while (cinfo.output_scanline < h) {
            JSAMPROW row = cmyk;
            uint8_t *o = px + (size_t)cinfo.output_scanline * w * 3;
            jpeg_read_scanlines(&cinfo, &row, 1);
            for (size_t x = 0; x < w; x++) {
                unsigned k = cmyk[4 * x + 3];
                for (int ch = 0; ch < 3; ch++) {
                    unsigned v = cmyk[4 * x + ch];
                    o[3 * x + ch] = inverted ? (uint8_t)((v * k + 127) / 255)
                                             : (uint8_t)(((255 - v) * (255 - k) + 127) / 255);
                }
            }
        }
        free(cmyk);
        cmyk = NULL;
    } else {
        while (cinfo.output_scanline < h) {
            JSAMPROW row = px + (size_t)cinfo.output_scanline * w * c;
            jpeg_read_scanlines(&cinfo, &row, 1);
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    img->w = (int)w;
    img->h = (int)h;
    img->c = c;
    img->px = px;
    convert_channels(img, want_c);
    return 0;
}

int sf_image_decode(const uint8_t *buf, size_t len, int want_c, sf_image *img, char *err,
                    size_t err_len) {
    SF_ASSERT(want_c == 0 || want_c == 1 || want_c == 3, "want_c=%d", want_c);
    memset(img, 0, sizeof(*img));
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len == 0) {
        set_err(err, err_len, "empty file");
        return -1;
    }
    if (len >= 8 && memcmp(buf, png_magic, 8) == 0)
        return decode_png(buf, len, want_c, img, err, err_len);
    if (len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF)
        return decode_jpeg(buf, len, want_c, img, err, err_len);
    set_err(err, err_len, "not a PNG or JPEG file (unknown magic bytes)");
    return -1;
}

/* Reads a whole file into *buf (grown as needed, reused across calls). */
int sf_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, char *err,
                 size_t err_len) {
    const char *what;
    int e = sf_read_file_quiet(path, buf, cap, len, &what);
    if (e) set_err(err, err_len, "%s: %s", what, strerror(e));
    return e ? -1 : 0;
}

int sf_image_load(const char *path, int want_c, sf_image *img, char *err, size_t err_len) {
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    memset(img, 0, sizeof(*img));
    int rc = sf_read_file(path, &buf, &cap, &len, err, err_len);
    if (rc == 0) rc = sf_image_decode(buf, len, want_c, img, err, err_len);
    free(buf);
    return rc;
}

void sf_image_free(sf_image *img) {
    free(img->px);
    img->px = NULL;
}

/* ---- PNG writing ---- */
typedef struct png_out {
    uint8_t *buf;
    size_t len, cap;
} png_out;

static void png_write_fn(png_structp png, png_bytep data, png_size_t n) {
    png_out *o = png_get_io_ptr(png);
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2;
        o->buf = sf_realloc(o->buf, o->cap);
    }
    memcpy(o->buf + o->len, data, n);
    o->len += n;
}

static void png_flush_fn(png_structp png) { (void)png; }

static void png_write_err_fn(png_structp png, png_const_charp msg) {
    (void)msg;
    longjmp(png_jmpbuf(png), 1);
}

int sf_image_encode_png(const sf_image *img, int level, uint8_t **buf, size_t *len) {
    SF_ASSERT(img->c == 1 || img->c == 3);
    png_out out = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, png_write_err_fn, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(out.buf);
        return -1;
    }
    png_set_write_fn(png, &out, png_write_fn, png_flush_fn);
    png_set_compression_level(png, level);
    png_set_IHDR(png, info, (png_uint_32)img->w, (png_uint_32)img->h, 8,
                 img->c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < img->h; y++) png_write_row(png, img->px + (size_t)y * img->w * img->c);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    *buf = out.buf;
    *len = out.len;
    return 0;
}

int sf_write_file(const char *path, const uint8_t *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return sf_error("cannot write %s: %s", path, strerror(errno));
    size_t put = fwrite(buf, 1, len, f);
    if (fclose(f) != 0 || put != len) {
        unlink(path);
        return sf_error("cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

int sf_image_write_png(const char *path, const sf_image *img) {
    uint8_t *buf;
    size_t len;
    if (sf_image_encode_png(img, 6, &buf, &len) != 0) return sf_error("cannot encode PNG %s", path);
    int rc = sf_write_file_atomic(path, buf, len);
    free(buf);
    return rc;
}
