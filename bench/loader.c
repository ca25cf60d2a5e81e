/* loader.c — loader throughput benchmark (images/s for JPEG decode + train augmentation at
 * 224, as torchvision's RandomResizedCrop + RandomHorizontalFlip + ToTensor + Normalize).
 *
 *   loader gen DIR N W H        write N synthetic JPEGs (W x H, quality 90) to DIR/train/<c>/
 *   loader run DIR WORKERS BATCH EPOCHS
 *
 * bench/loader.sh runs this next to bench/loader_torch.py on the same files and prints the
 * ratio. Deliberately not measured: RandAugment, mixup, random erasing (the torchvision side
 * would need timm for those).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#include "sfvit/data.h"

/* Photo-like content: smooth colour fields plus texture, so JPEG sizes are realistic. */
static int gen(const char *dir, int n, int W, int H) {
    sf_rng r;
    sf_rng_seed(&r, 42);
    uint8_t *px = sf_malloc((size_t)W * H * 3);
    char p[SF_PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/train", dir);
    mkdir(dir, 0755);
    mkdir(p, 0755);
    for (int i = 0; i < n; i++) {
        int k = i % 8;
        snprintf(p, sizeof(p), "%s/train/c%d", dir, k);
        mkdir(p, 0755);
        float f[6];
        for (int j = 0; j < 6; j++) f[j] = 0.005f + 0.05f * sf_rng_uniform(&r);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < 3; c++) {
                    float v = 128 + 60 * sinf(f[c] * x + f[c + 3] * y + c) +
                              40 * sinf(0.3f * f[c] * x * y / 50.0f) + 12 * (sf_rng_uniform(&r) - 0.5f);
                    px[((size_t)y * W + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
        snprintf(p, sizeof(p), "%s/train/c%d/img%05d.jpg", dir, k, i);
        FILE *fp = fopen(p, "wb");
        if (!fp) return sf_error("cannot write %s", p);
        struct jpeg_compress_struct ci;
        struct jpeg_error_mgr jerr;
        ci.err = jpeg_std_error(&jerr);
        jpeg_create_compress(&ci);
        jpeg_stdio_dest(&ci, fp);
        ci.image_width = W;
        ci.image_height = H;
        ci.input_components = 3;
        ci.in_color_space = JCS_RGB;
        jpeg_set_defaults(&ci);
        jpeg_set_quality(&ci, 90, TRUE);
        jpeg_start_compress(&ci, TRUE);
        while (ci.next_scanline < ci.image_height) {
            JSAMPROW row = px + (size_t)ci.next_scanline * W * 3;
            jpeg_write_scanlines(&ci, &row, 1);
        }
        jpeg_finish_compress(&ci);
        jpeg_destroy_compress(&ci);
        fclose(fp);
    }
    free(px);
    return 0;
}

static int run(const char *dir, int workers, int batch, int epochs) {
    sf_dataset ds;
    if (sf_dataset_open(&ds, dir, "train") != 0) return 1;
    sf_aug_cfg aug = {.rrc = 1, .scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 0.75f,
                      .ratio_max = 4.0f / 3.0f, .hflip = 0.5f, .mean = {0.485f, 0.456f, 0.406f},
                      .std = {0.229f, 0.224f, 0.225f}, .crop_pct = 0.875f};
    /* torchvision's RandomResizedCrop default is bilinear */
    strcpy(aug.interpolation, "bilinear");
    sf_loader_opts o = {.batch_size = batch, .img_size = 224, .in_chans = 3, .train = 1,
                        .workers = workers, .prefetch = 4, .seed = 0, .aug = &aug,
                        .num_classes = ds.num_classes, .rank = 0, .world = 1, .fraction = 1};
    sf_loader *l = sf_loader_create(&ds, &o);
    if (!l) return 1;
    long images = 0;
    double t0 = sf_now(), checksum = 0;
    for (int e = 0; e < epochs; e++) {
        sf_loader_start_epoch(l, e, 0);
        sf_batch b;
        while (sf_loader_next(l, &b) > 0) {
            images += b.size;
            checksum += b.images[0];
        }
    }
    double dt = sf_now() - t0;
    printf("sfvit loader: %ld images in %.2f s = %.1f images/s (workers %d, batch %d, stall %.2f s, "
           "checksum %.3f)\n",
           images, dt, images / dt, workers, batch, sf_loader_stall_seconds(l), checksum);
    sf_loader_free(l);
    sf_dataset_free(&ds);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "gen")) return gen(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5])) ? 1 : 0;
    if (argc == 6 && !strcmp(argv[1], "run")) return run(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: loader gen DIR N W H | loader run DIR WORKERS BATCH EPOCHS\n");
    return 2;
}
