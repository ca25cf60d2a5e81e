/* config.c — YAML configs: one key table drives parsing, validation, overrides, the boxed
 * printout, the YAML writer and the reference in docs/configs.md (include/sfvit/config.h).
 * Here: the table, the defaults, parsing of files and overrides. Output (the YAML writer,
 * the boxed table, the docs table, diffs) is in config_print.c, the checks across keys in
 * config_check.c.
 *
 * A file is a mapping of sections (model, data, aug, optim, sched, train) to mappings of
 * keys, plus an optional `base:` path (relative to the file) loaded first. model.name is
 * applied before the other keys of the same file, because it resets every model key to
 * that model's defaults. Command-line overrides "a.b=value" go through the same scalar rules
 * (the value is parsed as YAML; lists as "[1,2]" or "1,2").
 *
 * Deliberately strict (docs/configs.md): an unknown key, a duplicate key, a wrong type, an
 * out-of-range value or an unknown enum value is an error naming file:line:key, with the
 * closest known key suggested. Never a default substituted for a bad value.
 * Deliberately not here: anchors across files, environment-variable expansion.
 */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>


_Static_assert(sizeof(sf_family) == sizeof(int) && sizeof(sf_attn_kind) == sizeof(int) &&
               sizeof(sf_attn_norm) == sizeof(int) && sizeof(sf_sima_order) == sizeof(int) &&
               sizeof(sf_act) == sizeof(int) && sizeof(sf_landmarks) == sizeof(int), "enum fields are read and written as int");


/* The model's enums take their names from the models and ops layers' lists (model.h, ops.h). */
static const char *const interps[] = {"bilinear", "bicubic", "random", NULL};
static const char *const decay_masks[] = {"sfvit", "official", NULL};
static const char *const precisions[] = {"fp32", "bf16", "bf16_emulated", NULL};
static const char *const precision_fallbacks[] = {"none", "fp32", NULL};
static const char *const bf16_products[] = {"auto", "onednn", "fp32", NULL};

#define OFF(f) offsetof(sf_config, f)
#define SZ(f) sizeof(((sf_config *)0)->f)
#define CAP(f, T) (SZ(f) / sizeof(T))
#define BIG 1e9

const key_def config_keys[] = {
    /* model */
    {"model.name", K_NAME, OFF(model.name), SZ(model.name), 0, 0, 0, 0, NULL,
     "named model (deit_tiny, deit_small, xcit_*, soft_*, cvt_13, cvt_21) or \"\" for the custom ViT; sets every model key first"},
    {"model.family", K_ENUM, OFF(model.family), 0, 0, 0, 0, 0, sf_family_names, "architecture family (set by model.name)"},
    {"model.img_size", K_INT, OFF(model.img_size), 0, 0, 0, 1, 8192, NULL, "input side in pixels"},
    {"model.in_chans", K_INT, OFF(model.in_chans), 0, 0, 0, 1, 3, NULL, "input channels (1 or 3)"},
    {"model.num_classes", K_INT, OFF(model.num_classes), 0, 0, 0, 1, 1000000, NULL, "classifier outputs"},
    {"model.patch_size", K_INT, OFF(model.patch_size), 0, 0, 0, 1, 256, NULL, "ViT/XCiT patch side"},
    {"model.embed_dim", K_INT, OFF(model.embed_dim), 0, 0, 0, 1, 65536, NULL, "ViT/XCiT width C (SOFT/CvT: set to the last stage's width)"},
    {"model.depth", K_INT, OFF(model.depth), 0, 0, 0, 1, SF_MAX_BLOCKS, NULL, "ViT/XCiT blocks (SOFT/CvT: set to the total of model.depths)"},
    {"model.num_heads", K_INT, OFF(model.num_heads), 0, 0, 0, 1, 4096, NULL,
     "ViT/XCiT heads; a list sets model.stage_heads (SOFT/CvT: set to the last stage's heads)"},
    {"model.mlp_ratio", K_FLOAT, OFF(model.mlp_ratio), 0, 0, 0, 0.01, 64, NULL, "MLP hidden width / C"},
    {"model.num_stages", K_INT, OFF(model.num_stages), 0, 0, 0, 0, 4, NULL,
     "SOFT (4) / CvT (3) stages (the lists below give one value per stage)"},
    {"model.embed_dims", K_INT_LIST, OFF(model.embed_dims), CAP(model.embed_dims, int), L_ZEROPAD, 0, 1, 65536,
     NULL, "SOFT/CvT per-stage widths"},
    {"model.depths", K_INT_LIST, OFF(model.depths), CAP(model.depths, int), L_ZEROPAD, 0, 1, SF_MAX_BLOCKS,
     NULL, "SOFT/CvT per-stage blocks"},
    {"model.stage_heads", K_INT_LIST, OFF(model.stage_heads), CAP(model.stage_heads, int), L_ZEROPAD, 0, 1,
     4096, NULL, "SOFT/CvT per-stage heads (also settable as a list in model.num_heads)"},
    {"model.nr_iters", K_INT, OFF(model.nr_iters), 0, 0, 0, 1, 1000, NULL, "SOFT Newton-Raphson iterations"},
    {"model.nr_init", K_ENUM, OFF(model.nr_init), 0, 0, 0, 0, 0, sf_nr_init_names, "SOFT Newton-Raphson initialization"},
    {"model.soft_landmarks", K_ENUM, OFF(model.soft_landmarks), 0, 0, 0, 0, 0, sf_landmarks_names,
     "SOFT landmarks: stride (learned stride-r conv, pyramid) | fixed (adaptive avg pooling of Q to model.num_landmarks; ViT: fixed only)"},
    {"model.num_landmarks", K_INT, OFF(model.num_landmarks), 0, 0, 0, 1, 1048576, NULL,
     "SOFT fixed landmarks m, a perfect square (sqrt(m) per side, capped by the token grid)"},
    {"model.attn", K_ENUM, OFF(model.attn), 0, 0, 0, 0, 0, sf_attn_names, "attention kind of every block"},
    {"model.attn_norm", K_ENUM, OFF(model.attn_norm), 0, 0, 0, 0, 0, sf_attn_norm_names,
     "sima: l1|l2|none; soft: none (SOFT) | symmetric (SOFT++)"},
    {"model.sima_order", K_ENUM, OFF(model.sima_order), 0, 0, 0, 0, 0, sf_sima_order_names,
     "SimA product order (auto: (QK^T)V when N < D)"},
    {"model.block_attn", K_ENUM_LIST, OFF(model.block_attn), SF_MAX_BLOCKS, L_COUNTED, OFF(model.n_block_attn),
     0, 0, sf_attn_names, "per-block attention kinds ([] = model.attn everywhere)"},
    {"model.act", K_ENUM, OFF(model.act), 0, 0, 0, 0, 0, sf_act_names, "MLP activation (quick_gelu: x·sigmoid(1.702x), CvT's)"},
    {"model.global_pool", K_ENUM, OFF(model.global_pool), 0, 0, 0, 0, 0, sf_pool_names, "ViT classifier input: cls token or mean of patch tokens"},
    {"model.lpi", K_BOOL, OFF(model.lpi), 0, 0, 0, 0, 1, NULL, "XCiT local patch interaction"},
    {"model.layer_scale_init", K_FLOAT, OFF(model.layer_scale_init), 0, 0, 0, 0, 100, NULL, "XCiT layer-scale eta"},
    {"model.cls_attn_layers", K_INT, OFF(model.cls_attn_layers), 0, 0, 0, 0, 64, NULL, "XCiT class-attention layers"},
    {"model.drop_path_rate", K_FLOAT, OFF(model.drop_path_rate), 0, 0, 0, 0, 0.99, NULL, "stochastic depth rate (CvT: of its last stage)"},
    {"model.drop_rate", K_FLOAT, OFF(model.drop_rate), 0, 0, 0, 0, 0.99, NULL, "dropout rate"},
    {"model.init_from", K_STR, OFF(model.init_from), SZ(model.init_from), 0, 0, 0, 0, NULL,
     "fine-tune from this checkpoint (\"\" = none)"},
    /* data */
    {"data.root", K_STR, OFF(data.root), SZ(data.root), 0, 0, 0, 0, NULL, "ImageNet-format folder (root/<split>/<class>/*)"},
    {"data.train_split", K_STR, OFF(data.train_split), SZ(data.train_split), 0, 0, 0, 0, NULL, "training subfolder"},
    {"data.val_split", K_STR, OFF(data.val_split), SZ(data.val_split), 0, 0, 0, 0, NULL, "validation subfolder"},
    {"data.workers", K_INT, OFF(data.workers), 0, 0, 0, 1, 256, NULL, "loader threads"},
    {"data.prefetch", K_INT, OFF(data.prefetch), 0, 0, 0, 1, 256, NULL, "batches prepared ahead"},
    {"data.repeated_aug", K_INT, OFF(data.repeated_aug), 0, 0, 0, 1, 16, NULL,
     "repeated augmentation: each training image k times per epoch, as DeiT's RASampler (DeiT: 3; 1 = off)"},
    /* aug */
    {"aug.rrc", K_BOOL, OFF(aug.rrc), 0, 0, 0, 0, 1, NULL, "RandomResizedCrop (false: plain resize)"},
    {"aug.scale_min", K_FLOAT, OFF(aug.scale_min), 0, 0, 0, 0.001, 1, NULL, "RRC area fraction, lower"},
    {"aug.scale_max", K_FLOAT, OFF(aug.scale_max), 0, 0, 0, 0.001, 1, NULL, "RRC area fraction, upper"},
    {"aug.ratio_min", K_FLOAT, OFF(aug.ratio_min), 0, 0, 0, 0.01, 100, NULL, "RRC aspect ratio, lower"},
    {"aug.ratio_max", K_FLOAT, OFF(aug.ratio_max), 0, 0, 0, 0.01, 100, NULL, "RRC aspect ratio, upper"},
    {"aug.interpolation", K_SENUM, OFF(aug.interpolation), SZ(aug.interpolation), 0, 0, 0, 0, interps,
     "resize filter for training"},
    {"aug.hflip", K_FLOAT, OFF(aug.hflip), 0, 0, 0, 0, 1, NULL, "horizontal flip probability"},
    {"aug.randaugment", K_STR, OFF(aug.randaugment), SZ(aug.randaugment), 0, 0, 0, 0, NULL,
     "timm RandAugment string (\"\" = off)"},
    {"aug.mean", K_FLOAT_LIST, OFF(aug.mean), 3, L_FIXED, 0, -1000, 1000, NULL,
     "per-channel mean (3 values, or 1 repeated)"},
    {"aug.std", K_FLOAT_LIST, OFF(aug.std), 3, L_FIXED, 0, 1e-6, 1000, NULL, "per-channel std (3 values, or 1 repeated)"},
    {"aug.reprob", K_FLOAT, OFF(aug.reprob), 0, 0, 0, 0, 1, NULL, "random erasing probability"},
    {"aug.mixup", K_FLOAT, OFF(aug.mixup), 0, 0, 0, 0, 100, NULL, "mixup alpha (0 = off)"},
    {"aug.cutmix", K_FLOAT, OFF(aug.cutmix), 0, 0, 0, 0, 100, NULL, "cutmix alpha (0 = off)"},
    {"aug.mixup_switch", K_FLOAT, OFF(aug.mixup_switch), 0, 0, 0, 0, 1, NULL,
     "probability of cutmix instead of mixup when both are on"},
    {"aug.mixup_prob", K_FLOAT, OFF(aug.mixup_prob), 0, 0, 0, 0, 1, NULL, "probability of mixing a batch"},
    {"aug.smoothing", K_FLOAT, OFF(aug.smoothing), 0, 0, 0, 0, 0.99, NULL, "label smoothing"},
    {"aug.crop_pct", K_FLOAT, OFF(aug.crop_pct), 0, 0, 0, 0.01, 1, NULL, "eval: resize to size/crop_pct, center crop"},
    /* optim */
    {"optim.lr", K_FLOAT, OFF(optim.lr), 0, 0, 0, 0, 10, NULL, "peak learning rate (before scale_lr)"},
    {"optim.weight_decay", K_FLOAT, OFF(optim.weight_decay), 0, 0, 0, 0, 10, NULL, "AdamW decoupled weight decay"},
    {"optim.beta1", K_FLOAT, OFF(optim.beta1), 0, 0, 0, 0, 0.999999, NULL, "AdamW beta1"},
    {"optim.beta2", K_FLOAT, OFF(optim.beta2), 0, 0, 0, 0, 0.999999, NULL, "AdamW beta2"},
    {"optim.eps", K_FLOAT, OFF(optim.eps), 0, 0, 0, 1e-12, 1, NULL, "AdamW epsilon"},
    {"optim.scale_lr", K_BOOL, OFF(optim.scale_lr), 0, 0, 0, 0, 1, NULL, "lr *= global batch / scale_lr_base"},
    {"optim.scale_lr_base", K_INT, OFF(optim.scale_lr_base), 0, 0, 0, 1, 1 << 24, NULL, "reference batch for scale_lr"},
    {"optim.clip_grad", K_FLOAT, OFF(optim.clip_grad), 0, 0, 0, 0, BIG, NULL, "global gradient L2-norm clip (0 = off)"},
    {"optim.accum_steps", K_INT, OFF(optim.accum_steps), 0, 0, 0, 1, 4096, NULL, "batches whose gradients are summed into one update (lr scales with their images)"},
    {"optim.decay_mask", K_SENUM, OFF(optim.decay_mask), SZ(optim.decay_mask), 0, 0, 0, 0, decay_masks,
     "which parameters get weight decay"},
    /* sched */
    {"sched.warmup_epochs", K_FLOAT, OFF(sched.warmup_epochs), 0, 0, 0, 0, 100000, NULL, "linear warmup length"},
    {"sched.warmup_lr", K_FLOAT, OFF(sched.warmup_lr), 0, 0, 0, 0, 10, NULL, "learning rate at step 0"},
    {"sched.min_lr", K_FLOAT, OFF(sched.min_lr), 0, 0, 0, 0, 10, NULL, "cosine floor"},
    /* train */
    {"train.epochs", K_INT, OFF(train.epochs), 0, 0, 0, 1, 100000, NULL, "training epochs"},
    {"train.batch_size", K_INT, OFF(train.batch_size), 0, 0, 0, 1, 1 << 20, NULL, "global batch size"},
    {"train.eval_batch_size", K_INT, OFF(train.eval_batch_size), 0, 0, 0, 1, 1 << 20, NULL, "evaluation batch size"},
    {"train.out", K_STR, OFF(train.out), SZ(train.out), 0, 0, 0, 0, NULL, "folder of run folders"},
    {"train.name", K_STR, OFF(train.name), SZ(train.name), 0, 0, 0, 0, NULL, "run folder name"},
    {"train.seed", K_U64, OFF(train.seed), 0, 0, 0, 0, 0, NULL, "seed of every generator"},
    {"train.threads", K_INT, OFF(train.threads), 0, 0, 0, 0, 4096, NULL, "compute threads (0 = SFVIT_THREADS or cores)"},
    {"train.log_every", K_INT, OFF(train.log_every), 0, 0, 0, 1, 1 << 30, NULL, "steps between log lines"},
    {"train.save_every_steps", K_INT, OFF(train.save_every_steps), 0, 0, 0, 0, 1 << 30, NULL,
     "extra last.safetensors every N steps (0 = per epoch only)"},
    {"train.max_steps", K_INT, OFF(train.max_steps), 0, 0, 0, 0, INT_MAX, NULL, "stop after N steps (0 = no limit)"},
    {"train.eval_every", K_INT, OFF(train.eval_every), 0, 0, 0, 1, 100000, NULL, "epochs between evaluations"},
    {"train.max_train_fraction", K_FLOAT, OFF(train.max_train_fraction), 0, 0, 0, 1e-6, 1, NULL,
     "fraction of the train set used (smoke runs)"},
    {"train.bn_sync", K_BOOL, OFF(train.bn_sync), 0, 0, 0, 0, 1, NULL,
     "under mpirun: BatchNorm statistics over the global batch (true) or per rank (false)"},
    {"train.ema_decay", K_FLOAT, OFF(train.ema_decay), 0, 0, 0, 0, 0.9999999, NULL,
     "EMA of the weights after every update, evaluated and saved as ema.safetensors (DeiT: 0.99996; 0 = off)"},
    {"train.tensorboard", K_BOOL, OFF(train.tensorboard), 0, 0, 0, 0, 1, NULL,
     "also write the log's scalars as TensorBoard events (events.out.tfevents.*) in the run folder"},
    {"train.precision", K_SENUM, OFF(train.precision), SZ(train.precision), 0, 0, 0, 0, precisions,
     "products of linear, attention and conv: fp32, bf16 (native: AVX512_BF16/AMX), bf16_emulated (reference)"},
    {"train.precision_fallback", K_SENUM, OFF(train.precision_fallback), SZ(train.precision_fallback), 0, 0, 0, 0,
     precision_fallbacks, "precision bf16 without native bf16: none (error) or fp32 (warning, fp32)"},
    {"train.bf16_products", K_SENUM, OFF(train.bf16_products), SZ(train.bf16_products), 0, 0, 0, 0, bf16_products,
     "precision bf16: products on oneDNN's bf16 kernels, on fp32 kernels (same products), or auto (the faster, "
     "measured at start)"},
};
const int config_n_keys = (int)(sizeof config_keys / sizeof config_keys[0]);

static const char *const sections[] = {"model", "data", "aug", "optim", "sched", "train", NULL};

static const key_def *key_find(const char *k) {
    for (int i = 0; i < config_n_keys; i++)
        if (strcmp(config_keys[i].key, k) == 0) return &config_keys[i];
    return NULL;
}

/* ---- defaults ---- */


void sf_config_defaults(sf_config *cfg) {
    /* Zeroed first so unused string bytes compare equal (round-trip tests use memcmp). */
    memset(cfg, 0, sizeof(*cfg));
    sf_model_defaults(&cfg->model, ""); /* the custom small ViT */
    sf_data_cfg *d = &cfg->data;
    strcpy(d->train_split, "train");
    strcpy(d->val_split, "val");
    d->workers = 2;
    d->prefetch = 4;
    d->repeated_aug = 1;
    /* DeiT recipe (timm train.py arguments used by facebookresearch/deit). */
    sf_aug_cfg *a = &cfg->aug;
    a->rrc = 1;
    a->scale_min = 0.08f;
    a->scale_max = 1.0f;
    a->ratio_min = 0.75f;
    a->ratio_max = 4.0f / 3.0f;
    strcpy(a->interpolation, "bicubic");
    a->hflip = 0.5f;
    strcpy(a->randaugment, "rand-m9-mstd0.5-inc1");
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(a->mean, mean, sizeof mean);
    memcpy(a->std, std, sizeof std);
    a->reprob = 0.25f;
    a->mixup = 0.8f;
    a->cutmix = 1.0f;
    a->mixup_switch = 0.5f;
    a->mixup_prob = 1.0f;
    a->smoothing = 0.1f;
    a->crop_pct = 0.875f;
    sf_optim_cfg *o = &cfg->optim;
    o->lr = 5e-4f;
    o->weight_decay = 0.05f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->scale_lr = 0;
    o->scale_lr_base = 512;
    o->clip_grad = 0.0f;
    o->accum_steps = 1;
    strcpy(o->decay_mask, "sfvit");
    cfg->sched.warmup_epochs = 5.0f;
    cfg->sched.warmup_lr = 1e-6f;
    cfg->sched.min_lr = 1e-5f;
    sf_train_cfg *t = &cfg->train;
    t->epochs = 300;
    t->batch_size = 128;
    t->eval_batch_size = 128;
    strcpy(t->out, "runs");
    strcpy(t->name, "run");
    t->seed = 0;
    t->threads = 0;
    t->log_every = 50;
    t->save_every_steps = 0;
    t->max_steps = 0;
    t->eval_every = 1;
    t->max_train_fraction = 1.0f;
    t->bn_sync = 1;
    strcpy(t->precision, "fp32");
    strcpy(t->precision_fallback, "none");
    strcpy(t->bf16_products, "auto");
}

/* ---- values: a scalar or a list of scalars, from YAML or the command line ---- */

#define MAX_ITEMS SF_MAX_BLOCKS

typedef struct sval {
    const char *s;
    int plain;                /* plain (unquoted) YAML scalar */
} sval;

typedef struct val {
    int is_list;
    int n;                    /* list items */
    sval sc;                  /* the scalar, when !is_list */
    sval item[MAX_ITEMS + 1];
    char *owned;              /* buffer the items point into (comma splitting) */
} val;

static int is_null(const sval *v) {
    return v->plain && (!v->s[0] || !strcmp(v->s, "~") || !strcmp(v->s, "null") ||
                        !strcmp(v->s, "Null") || !strcmp(v->s, "NULL"));
}

static int fmt_err(const char *where, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fmt_err(const char *where, const char *key, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sf_error("%s: %s: %s", where, key, msg);
}

static const char *type_word(ktype t) {
    switch (t) {
    case K_INT: case K_U64: case K_INT_LIST: return "an integer";
    case K_FLOAT: case K_FLOAT_LIST: return "a number";
    case K_BOOL: return "true or false";
    default: return "a string";
    }
}

void config_fmt_range(char *buf, size_t n, double v) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
}

static int check_range(const key_def *k, double v, const char *where) {
    char b[64];
    if (v < k->min) {
        config_fmt_range(b, sizeof b, k->min);
        return fmt_err(where, k->key, "value is out of range: must be >= %s", b);
    }
    if (v > k->max) {
        config_fmt_range(b, sizeof b, k->max);
        return fmt_err(where, k->key, "value is out of range: must be <= %s", b);
    }
    return 0;
}

static int parse_int(const key_def *k, const sval *v, long long *out, const char *where) {
    if (is_null(v)) return fmt_err(where, k->key, "expected %s, got an empty value", type_word(k->type));
    char *end;
    errno = 0;
    long long x = strtoll(v->s, &end, 10);
    if (!v->plain || !v->s[0] || *end || errno == ERANGE || isspace((unsigned char)v->s[0]))
        return fmt_err(where, k->key, "expected %s, got '%s'", type_word(k->type), v->s);
    if (check_range(k, (double)x, where)) return -1;
    *out = x;
    return 0;
}

static int parse_u64(const key_def *k, const sval *v, uint64_t *out, const char *where) {
    if (is_null(v)) return fmt_err(where, k->key, "expected an integer, got an empty value");
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->s, &end, 10);
    if (!v->plain || !isdigit((unsigned char)v->s[0]) || *end || errno == ERANGE)
        return fmt_err(where, k->key, "expected a non-negative integer, got '%s'", v->s);
    *out = (uint64_t)x;
    return 0;
}

static int parse_float(const key_def *k, const sval *v, float *out, const char *where) {
    if (is_null(v)) return fmt_err(where, k->key, "expected a number, got an empty value");
    char *end;
    double x = strtod(v->s, &end);
    if (!v->plain || !v->s[0] || *end || isspace((unsigned char)v->s[0]))
        return fmt_err(where, k->key, "expected a number, got '%s'", v->s);
    if (!isfinite(x) || !isfinite((float)x))
        return fmt_err(where, k->key, "expected a finite number, got '%s'", v->s);
    if (check_range(k, x, where)) return -1;
    *out = (float)x;
    return 0;
}

static int parse_bool(const key_def *k, const sval *v, int *out, const char *where) {
    static const char *const t[] = {"true", "yes", "on", "1"}, *const f[] = {"false", "no", "off", "0"};
    for (int i = 0; v->plain && i < 4; i++) {
        if (!strcasecmp(v->s, t[i])) return *out = 1, 0;
        if (!strcasecmp(v->s, f[i])) return *out = 0, 0;
    }
    return fmt_err(where, k->key, "expected true or false, got '%s'", v->s);
}

static int parse_enum(const key_def *k, const sval *v, int *out, const char *where) {
    for (int i = 0; k->names[i]; i++)
        if (!strcmp(v->s, k->names[i])) return *out = i, 0;
    char allowed[256] = "";
    for (int i = 0; k->names[i]; i++) {
        strncat(allowed, i ? ", " : "", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, k->names[i], sizeof allowed - strlen(allowed) - 1);
    }
    return fmt_err(where, k->key, "unknown value '%s' (allowed: %s)", v->s, allowed);
}

static int set_string(const key_def *k, const sval *v, char *dst, const char *where) {
    const char *s = is_null(v) ? "" : v->s;
    if (strlen(s) >= k->size)
        return fmt_err(where, k->key, "value is %zu characters, at most %zu allowed", strlen(s), k->size - 1);
    memset(dst, 0, k->size);
    memcpy(dst, s, strlen(s));
    return 0;
}

static int set_model_name(sf_config *cfg, const key_def *k, const sval *v, const char *where) {
    const char *name = is_null(v) ? "" : v->s;
    if (strlen(name) >= k->size) return fmt_err(where, k->key, "name too long: '%s'", name);
    sf_model_cfg m;
    if (!name[0]) {
        sf_model_defaults(&m, "");
    } else {
        int known = 0;
        const char *const *names = sf_model_names;
        for (int i = 0; names[i]; i++) known |= !strcmp(names[i], name);
        if (!known) {
            char list[512] = "\"\" (custom ViT)";
            for (int i = 0; names[i]; i++) {
                strncat(list, ", ", sizeof list - strlen(list) - 1);
                strncat(list, names[i], sizeof list - strlen(list) - 1);
            }
            return fmt_err(where, k->key, "unknown model '%s' (known: %s)", name, list);
        }
        memset(&m, 0, sizeof m);
        if (sf_model_defaults(&m, name) != 0) return fmt_err(where, k->key, "unknown model '%s'", name);
    }
    memset(m.name, 0, sizeof m.name);
    memcpy(m.name, name, strlen(name));
    cfg->model = m;
    return 0;
}

static int set_list(sf_config *cfg, const key_def *k, const val *v, const char *where) {
    char *base = (char *)cfg + k->off;
    int n = v->is_list ? v->n : 1;
    const sval *items = v->is_list ? v->item : &v->sc;
    if (!v->is_list && is_null(&v->sc)) n = 0;
    if ((size_t)n > k->size)
        return fmt_err(where, k->key, "%d values given, at most %zu allowed", n, k->size);
    if (k->lm == L_FIXED && n != 1 && (size_t)n != k->size)
        return fmt_err(where, k->key, "expected %zu values (or 1, repeated), got %d", k->size, n);
    int iv[MAX_ITEMS + 1] = {0};
    float fv[MAX_ITEMS + 1] = {0};
    for (int i = 0; i < n; i++) {
        long long x;
        if (k->type == K_INT_LIST) {
            if (parse_int(k, &items[i], &x, where)) return -1;
            iv[i] = (int)x;
        } else if (k->type == K_FLOAT_LIST) {
            if (parse_float(k, &items[i], &fv[i], where)) return -1;
        } else {
            if (parse_enum(k, &items[i], &iv[i], where)) return -1;
        }
    }
    size_t elem = k->type == K_FLOAT_LIST ? sizeof(float) : sizeof(int);
    memset(base, 0, k->size * elem);
    if (k->lm == L_FIXED && n == 1)
        for (size_t i = 1; i < k->size; i++) fv[i] = fv[0], iv[i] = iv[0];
    size_t count = k->lm == L_FIXED ? k->size : (size_t)n;
    memcpy(base, k->type == K_FLOAT_LIST ? (void *)fv : (void *)iv, count * elem);
    if (k->lm == L_COUNTED) *(int *)((char *)cfg + k->count_off) = n;
    return 0;
}

static int set_value(sf_config *cfg, const key_def *k, const val *v, const char *where) {
    char *p = (char *)cfg + k->off;
    if (k->type == K_INT && v->is_list && !strcmp(k->key, "model.num_heads"))
        return set_list(cfg, key_find("model.stage_heads"), v, where);
    if (k->type >= K_INT_LIST) return set_list(cfg, k, v, where);
    if (v->is_list) return fmt_err(where, k->key, "expected %s, got a list", type_word(k->type));
    const sval *s = &v->sc;
    long long x;
    switch (k->type) {
    case K_INT:
        if (parse_int(k, s, &x, where)) return -1;
        *(int *)p = (int)x;
        return 0;
    case K_U64: return parse_u64(k, s, (uint64_t *)p, where);
    case K_FLOAT: return parse_float(k, s, (float *)p, where);
    case K_BOOL: return parse_bool(k, s, (int *)p, where);
    case K_ENUM: return parse_enum(k, s, (int *)p, where);
    case K_SENUM: {
        int idx;
        if (parse_enum(k, s, &idx, where)) return -1;
        return set_string(k, s, p, where);
    }
    case K_STR: return set_string(k, s, p, where);
    case K_NAME: return set_model_name(cfg, k, s, where);
    default: return -1;
    }
}

/* ---- unknown keys: suggest the closest known key ---- */

static int levenshtein(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 127 || lb > 127) return 1000;
    int prev[128], cur[128];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < c) c = prev[j] + 1;
            if (cur[j - 1] + 1 < c) c = cur[j - 1] + 1;
            cur[j] = c;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

static const char *suggest(const char *key) {
    const char *best = NULL;
    int best_d = 1000;
    const char *leaf = strrchr(key, '.');
    leaf = leaf ? leaf + 1 : key;
    for (int i = 0; i < config_n_keys; i++) {
        int d = levenshtein(key, config_keys[i].key);
        const char *kl = strrchr(config_keys[i].key, '.') + 1;
        int dl = levenshtein(leaf, kl) + 1; /* right name, wrong section */
        if (dl < d) d = dl;
        if (d < best_d) best_d = d, best = config_keys[i].key;
    }
    if (!strchr(key, '.'))
        for (int i = 0; sections[i]; i++)
            if (levenshtein(key, sections[i]) <= (int)strlen(key) / 2) return sections[i];
    int len = (int)strlen(leaf);
    return best_d <= (len < 9 ? 3 : len / 3 + 1) ? best : NULL;
}

static int unknown_key(const char *where, const char *key) {
    const char *s = suggest(key);
    if (s) return sf_error("%s: %s: unknown key (did you mean %s?)", where, key, s);
    return sf_error("%s: %s: unknown key (see docs/configs.md for every key)", where, key);
}

/* ---- YAML files ---- */

typedef struct item {
    char key[128];
    yaml_node_t *node;
    int line;
} item;

typedef struct load_state {
    const char *stack[16];    /* realpaths of the files being loaded (cycle detection) */
    int depth;
} load_state;

static int node_to_val(yaml_document_t *doc, yaml_node_t *n, val *v, const char *where, const char *key) {
    memset(v, 0, sizeof(*v));
    if (n->type == YAML_SCALAR_NODE) {
        v->sc.s = (const char *)n->data.scalar.value;
        v->sc.plain = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        return 0;
    }
    if (n->type == YAML_MAPPING_NODE) return fmt_err(where, key, "expected a value, got a mapping");
    v->is_list = 1;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *c = yaml_document_get_node(doc, *it);
        if (c->type != YAML_SCALAR_NODE) return fmt_err(where, key, "list items must be plain values");
        if (v->n >= MAX_ITEMS) return fmt_err(where, key, "too many values (at most %d)", MAX_ITEMS);
        v->item[v->n].s = (const char *)c->data.scalar.value;
        v->item[v->n].plain = c->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        v->n++;
    }
    return 0;
}

/* "1,2,3" given to a list key becomes a list. */
static int split_commas(const key_def *k, val *v) {
    if (v->is_list || k->type < K_INT_LIST || !v->sc.plain || !strchr(v->sc.s, ',')) return 0;
    v->owned = sf_strdup(v->sc.s);
    v->is_list = 1;
    v->n = 0;
    for (char *save = NULL, *t = strtok_r(v->owned, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        char *e = t + strlen(t);
        while (e > t && isspace((unsigned char)e[-1])) *--e = 0;
        if (v->n >= MAX_ITEMS) return -1;
        v->item[v->n].s = t;
        v->item[v->n].plain = 1;
        v->n++;
    }
    return 0;
}

static int apply_item(sf_config *cfg, yaml_document_t *doc, const item *it, const char *file) {
    char where[SF_PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%d", file, it->line);
    const key_def *k = key_find(it->key);
    if (!k) return unknown_key(where, it->key);
    val v;
    if (node_to_val(doc, it->node, &v, where, it->key)) return -1;
    if (k->type == K_INT && !strcmp(k->key, "model.num_heads") && !v.is_list && v.sc.plain &&
        strchr(v.sc.s, ','))
        k = key_find("model.stage_heads");
    if (split_commas(k, &v)) {
        free(v.owned);
        return fmt_err(where, k->key, "too many values (at most %d)", MAX_ITEMS);
    }
    int rc = set_value(cfg, k, &v, where);
    free(v.owned);
    return rc;
}

static char *dir_of(const char *path) {
    char *d = sf_strdup(path);
    char *s = strrchr(d, '/');
    if (!s) strcpy(d, ".");
    else if (s == d) d[1] = 0;
    else *s = 0;
    return d;
}

static int load_file(sf_config *cfg, const char *path, load_state *st);

static int collect(yaml_document_t *doc, yaml_node_t *root, const char *file, item **items, int *n_items,
                   const char **base, int *base_line) {
    int cap = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key), *v = yaml_document_get_node(doc, p->value);
        int line = (int)k->start_mark.line + 1;
        char where[SF_PATH_MAX + 32];
        snprintf(where, sizeof where, "%s:%d", file, line);
        if (k->type != YAML_SCALAR_NODE) return sf_error("%s: keys must be plain names", where);
        const char *ks = (const char *)k->data.scalar.value;
        if (!strcmp(ks, "base")) {
            if (*base) return sf_error("%s: base: duplicate key (first given on line %d)", where, *base_line);
            if (v->type != YAML_SCALAR_NODE || !v->data.scalar.value[0])
                return sf_error("%s: base: expected a file name", where);
            *base = (const char *)v->data.scalar.value;
            *base_line = line;
            continue;
        }
        int is_section = 0;
        for (int s = 0; sections[s]; s++) is_section |= !strcmp(ks, sections[s]);
        /* A section of keys, or a dotted key at the top level ("optim.lr: 1e-3"). */
        int nsub = 1;
        yaml_node_pair_t *sub = NULL;
        if (is_section) {
            if (v->type == YAML_SCALAR_NODE && is_null(&(sval){(const char *)v->data.scalar.value,
                                                              v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE}))
                continue; /* an empty section */
            if (v->type != YAML_MAPPING_NODE) return sf_error("%s: %s: expected a mapping of keys", where, ks);
            sub = v->data.mapping.pairs.start;
            nsub = (int)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
        } else if (!strchr(ks, '.')) {
            return unknown_key(where, ks);
        }
        for (int j = 0; j < nsub; j++) {
            yaml_node_t *kk = k, *vv = v;
            char full[128];
            if (is_section) {
                kk = yaml_document_get_node(doc, sub[j].key);
                vv = yaml_document_get_node(doc, sub[j].value);
                if (kk->type != YAML_SCALAR_NODE)
                    return sf_error("%s:%d: %s: keys must be plain names", file, (int)kk->start_mark.line + 1, ks);
                snprintf(full, sizeof full, "%s.%s", ks, (const char *)kk->data.scalar.value);
            } else {
                snprintf(full, sizeof full, "%s", ks);
            }
            int l = (int)kk->start_mark.line + 1;
            for (int q = 0; q < *n_items; q++)
                if (!strcmp((*items)[q].key, full))
                    return sf_error("%s:%d: %s: duplicate key (first given on line %d)", file, l, full,
                                    (*items)[q].line);
            if (*n_items == cap) {
                cap = cap ? 2 * cap : 64;
                *items = sf_realloc(*items, (size_t)cap * sizeof(item));
            }
            item *it = &(*items)[(*n_items)++];
            snprintf(it->key, sizeof it->key, "%s", full);
            it->node = vv;
            it->line = l;
        }
    }
    return 0;
}

static int load_file(sf_config *cfg, const char *path, load_state *st) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return sf_error("%s: cannot open config: %s", path, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, fp);
    if (!yaml_parser_load(&parser, &doc)) {
        sf_error("%s:%d: YAML syntax error: %s%s%s", path, (int)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                 parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        fclose(fp);
        return -1;
    }
    yaml_parser_delete(&parser);
    fclose(fp);
    int rc = 0;
    item *items = NULL;
    int n_items = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    const char *base = NULL;
    int base_line = 0;
    if (!root) goto done; /* empty file */
    if (root->type == YAML_SCALAR_NODE && is_null(&(sval){(const char *)root->data.scalar.value, 1})) goto done;
    if (root->type != YAML_MAPPING_NODE) {
        rc = sf_error("%s:%d: the top level must be a mapping of sections (model, data, aug, optim, sched, train)",
                      path, (int)root->start_mark.line + 1);
        goto done;
    }
    if ((rc = collect(&doc, root, path, &items, &n_items, &base, &base_line)) != 0) goto done;
    if (base) {
        char *dir = dir_of(path);
        size_t len = strlen(dir) + strlen(base) + 2;
        char *bp = sf_malloc(len);
        if (base[0] == '/') snprintf(bp, len, "%s", base);
        else snprintf(bp, len, "%s/%s", dir, base);
        free(dir);
        char *real = realpath(bp, NULL);
        if (!real) {
            rc = sf_error("%s:%d: base: cannot read '%s': %s", path, base_line, bp, strerror(errno));
        } else {
            for (int i = 0; i < st->depth && rc == 0; i++)
                if (!strcmp(st->stack[i], real))
                    rc = sf_error("%s:%d: base: '%s' is already being loaded (a cycle of base: files)", path,
                                  base_line, bp);
            if (rc == 0 && st->depth >= 16)
                rc = sf_error("%s:%d: base: chain deeper than 16 files", path, base_line);
            if (rc == 0) {
                st->stack[st->depth++] = real;
                rc = load_file(cfg, bp, st);
                st->depth--;
            }
            free(real);
        }
        free(bp);
        if (rc) goto done;
    }
    /* model.name first: it resets the model section, which the file's other keys refine. */
    for (int i = 0; i < n_items && rc == 0; i++)
        if (!strcmp(items[i].key, "model.name")) rc = apply_item(cfg, &doc, &items[i], path);
    for (int i = 0; i < n_items && rc == 0; i++)
        if (strcmp(items[i].key, "model.name") != 0) rc = apply_item(cfg, &doc, &items[i], path);
done:
    free(items);
    yaml_document_delete(&doc);
    return rc;
}

/* Parses one command-line value with the YAML scalar rules and applies it. */
static int set_text(sf_config *cfg, const char *key, const char *text, const char *where) {
    const key_def *k = key_find(key);
    if (!k) return unknown_key(where, key);
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    int loaded = yaml_parser_load(&parser, &doc);
    yaml_parser_delete(&parser);
    val v;
    memset(&v, 0, sizeof v);
    yaml_node_t *root = loaded ? yaml_document_get_root_node(&doc) : NULL;
    int raw = !loaded || (root && root->type == YAML_MAPPING_NODE);
    /* A string key takes unquoted text as written ("data.root=/x/#1" keeps its '#'). */
    int is_str = k->type == K_STR || k->type == K_SENUM || k->type == K_NAME;
    if (is_str && text[0] != '"' && text[0] != '\'') raw = 1;
    int rc = 0;
    if (raw) {
        /* Not a YAML scalar (e.g. "a: b"): strings take the text as written. */
        if (!is_str) rc = fmt_err(where, key, "expected %s, got '%s'", type_word(k->type), text);
        v.sc.s = text;
        v.sc.plain = 1;
    } else if (!root) {
        v.sc.s = "";
        v.sc.plain = 1;
    } else {
        rc = node_to_val(&doc, root, &v, where, key);
    }
    if (rc == 0) {
        if (k->type == K_INT && !strcmp(k->key, "model.num_heads") && !v.is_list && v.sc.plain &&
            strchr(v.sc.s, ','))
            k = key_find("model.stage_heads");
        if (split_commas(k, &v)) rc = fmt_err(where, key, "too many values (at most %d)", MAX_ITEMS);
    }
    if (rc == 0) rc = set_value(cfg, k, &v, where);
    free(v.owned);
    if (loaded) yaml_document_delete(&doc);
    return rc;
}

int sf_config_set(sf_config *cfg, const char *key, const char *value, const char *where) {
    return set_text(cfg, key, value, where ? where : "command line");
}

static int apply_override(sf_config *cfg, const char *ov) {
    const char *eq = strchr(ov, '=');
    if (!eq || eq == ov) return sf_error("command line: override '%s' is not key=value", ov);
    char key[128];
    size_t len = (size_t)(eq - ov);
    if (len >= sizeof key) return sf_error("command line: override key too long: '%s'", ov);
    memcpy(key, ov, len);
    key[len] = 0;
    char where[160];
    snprintf(where, sizeof where, "command line '%s'", ov);
    return set_text(cfg, key, eq + 1, where);
}

int sf_config_load(sf_config *cfg, const char *path, int n_overrides, char *const *overrides) {
    sf_config_defaults(cfg);
    if (path) {
        if (strlen(path) >= sizeof cfg->path) return sf_error("%s: path too long", path);
        load_state st = {{0}, 0};
        char *real = realpath(path, NULL);
        if (!real) return sf_error("%s: cannot open config: %s", path, strerror(errno));
        st.stack[st.depth++] = real;
        int rc = load_file(cfg, path, &st);
        free(real);
        if (rc) return -1;
        snprintf(cfg->path, sizeof cfg->path, "%s", path);
    }
    /* As in a file: a model.name override first, then the rest in order. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_overrides; i++) {
            int is_name = !strncmp(overrides[i], "model.name=", 11);
            if (is_name == (pass == 0) && apply_override(cfg, overrides[i])) return -1;
        }
    sf_model_derive(&cfg->model);
    return 0;
}
