/* data.h — ImageNet-format folder datasets, PNG/JPEG decoding, augmentation, the threaded
 * loader, IDX import and `sfvit data check`.
 *
 * Layout: ROOT/<split>/<class>/<image>.{png,jpg,jpeg} (extension case-insensitive). Class ids
 * are the sorted class folder names (byte order, as torchvision ImageFolder). Batches are
 * deterministic for a seed whatever the worker count: every sample's augmentation draws
 * from a generator seeded by (seed, epoch, sample position), every batch's mixup/cutmix from
 * (seed, epoch, batch index).
 */
#ifndef SFVIT_DATA_H
#define SFVIT_DATA_H

#include "sfvit/core.h"

/* The augmentation recipe (the config's aug section). */
typedef struct sf_aug_cfg {
    int rrc;                  /* RandomResizedCrop on (1) or plain resize (0) */
    float scale_min, scale_max, ratio_min, ratio_max;
    char interpolation[16];   /* bilinear | bicubic | random */
    float hflip;              /* probability */
    char randaugment[64];     /* "" (off) or timm string like "rand-m9-mstd0.5-inc1" */
    float mean[3], std[3];
    float reprob;             /* random erasing probability */
    float mixup, cutmix, mixup_switch, mixup_prob; /* alphas (0 = off), switch prob, prob */
    float smoothing;          /* label smoothing */
    float crop_pct;           /* eval: resize shorter side to size/crop_pct, center crop */
} sf_aug_cfg;

/* ---- images ---- */
typedef struct sf_image {
    int w, h, c;          /* c = 1 (gray) or 3 (RGB) */
    uint8_t *px;          /* (h, w, c) interleaved */
} sf_image;

/* Decodes PNG or JPEG (chosen by content, not extension) to `want_c` channels (1 or 3;
 * 0 = keep the file's gray/RGB). Returns 0, or -1 with a one-line reason in err. */
int sf_image_load(const char *path, int want_c, sf_image *img, char *err, size_t err_len);
int sf_image_decode(const uint8_t *buf, size_t len, int want_c, sf_image *img, char *err,
                    size_t err_len);
int sf_image_write_png(const char *path, const sf_image *img);
/* 1 if a file name ends in .png, .jpg or .jpeg (any case): the files a dataset lists. */
int sf_image_has_ext(const char *name);
void sf_image_free(sf_image *img);

/* ---- dataset index ---- */
typedef struct sf_dataset {
    char root[SF_PATH_MAX], split[64];
    int num_classes;
    char **class_names;   /* (num_classes) sorted */
    int count;            /* images */
    char **paths;         /* (count) full paths, grouped by class, sorted within a class */
    int *labels;          /* (count) */
} sf_dataset;

/* Builds the index of root/split. Errors (missing split, no class folders, an empty class
 * folder) print a clear message and return -1. */
int sf_dataset_open(sf_dataset *ds, const char *root, const char *split);
void sf_dataset_free(sf_dataset *ds);

/* ---- loader ---- */
typedef struct sf_loader_opts {
    int batch_size;       /* per process */
    int img_size, in_chans;
    int train;            /* 1: shuffle, augment, mixup, drop_last; 0: eval transform, in order */
    int workers, prefetch;
    uint64_t seed;
    const sf_aug_cfg *aug;
    int num_classes;      /* for soft targets */
    int rank, world;      /* data-parallel shard (0, 1 when single process) */
    float fraction;       /* use the first fraction of each epoch's order (1 = all) */
    int repeats;          /* training: repeated augmentation, each image k times per epoch
                             (DeiT's RASampler; 0 or 1 = off) */
} sf_loader_opts;

typedef struct sf_batch {
    int size;             /* samples in this batch (<= batch_size; eval's last may be short) */
    float *images;        /* (size, C, H, W) normalized */
    int *labels;          /* (size) */
    float *soft_targets;  /* (size, K) when mixup/cutmix is on, else NULL */
} sf_batch;

typedef struct sf_loader sf_loader;

sf_loader *sf_loader_create(const sf_dataset *ds, const sf_loader_opts *o);
/* Starts an epoch (seeded permutation for training); skips the first start_step batches
 * without decoding them (resume mid-epoch). */
void sf_loader_start_epoch(sf_loader *l, int epoch, int start_step);
/* Next batch of the epoch: returns 1 and fills b (valid until the next call), 0 at the end
 * of the epoch, or -1 after an error already reported (training: no readable image left). */
int sf_loader_next(sf_loader *l, sf_batch *b);
int sf_loader_steps_per_epoch(const sf_loader *l);
/* The side S of the batches' images (opts.img_size). */
int sf_loader_img_size(const sf_loader *l);
/* Bad files skipped so far this epoch (each already warned about once, by name). */
int sf_loader_skipped(const sf_loader *l);
/* Seconds the consumer waited for batches since the last call (stall time). */
double sf_loader_stall_seconds(sf_loader *l);
void sf_loader_free(sf_loader *l);

/* ---- helpers and transforms (used by the loader; public for tests and tools) ---- */
/* Reads a whole file into *buf (grown and reused across calls; *cap is its size). */
int sf_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, char *err,
                 size_t err_len);
/* Encodes 8-bit gray/RGB PNG in memory with zlib level 0..9 (*buf malloc'd). sf_image_write_png
 * uses level 6 and writes atomically (tmp + rename). */
int sf_image_encode_png(const sf_image *img, int level, uint8_t **buf, size_t *len);
/* Writes buf to path (not atomic; returns -1 after printing an error). */
int sf_write_file(const char *path, const uint8_t *buf, size_t len);

enum { SF_INTERP_BILINEAR = 0, SF_INTERP_BICUBIC = 1 };

/* timm RandAugment string "rand-m9-mstd0.5-inc1" (keys m, n, mstd, mmax, inc, p). */
typedef struct sf_randaug {
    int n;            /* ops per image (0 = off) */
    float m, mstd, mmax, p;
    int inc;          /* 1: the "increasing" op variants */
} sf_randaug;
int sf_randaug_parse(const char *s, sf_randaug *ra);
/* Applies n random ops in place (uint8 image); fill = colour for uncovered pixels. */
void sf_randaug_apply(sf_image *img, const sf_randaug *ra, const uint8_t fill[3], sf_rng *r);

/* Eval: resize shorter side to floor(size / crop_pct), centre crop size x size, normalize.
 * out: (c, size, size). */
void sf_transform_eval(const sf_image *img, int size, float crop_pct, int interp,
                       const float *mean, const float *std, float *out);
/* Train: RandomResizedCrop (or resize + centre crop when aug->rrc == 0), flip, RandAugment,
 * normalize, random erasing. out: (c, size, size). */
void sf_transform_train(const sf_image *img, int size, const sf_aug_cfg *aug,
                        const sf_randaug *ra, sf_rng *r, float *out);
/* Batch mixup/cutmix in place (timm mode 'batch', partner = batch reversed) and the soft
 * targets (B, K) with smoothing folded in (docs/models.md). Returns lambda (after the cutmix
 * box correction); *cutmix tells which was used (may be NULL). */
float sf_mixup_batch(float *images, int B, int C, int H, int W, const int *labels, int K,
                     const sf_aug_cfg *aug, sf_rng *r, float *soft, int *cutmix);
/* The interpolation named in aug ("bilinear", "bicubic"; "random" draws one). */
int sf_interp_pick(const char *name, sf_rng *r);

/* ---- commands ---- */
/* `sfvit data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt] [--range FIRST:END]`:
 * records [first, end) (end < 0: to the end of the file), each named by its index in the whole
 * file. A range outside the file is an error naming --range. */
int sf_data_import_idx(const char *images_gz, const char *labels_gz, const char *out_dir,
                       const char *classes_file, long first, long end);
/* `sfvit data check ROOT`: counts per class and split, size histogram, bad files. */
int sf_data_check(const char *root, FILE *out);

#endif
