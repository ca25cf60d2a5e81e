/* config.h — the typed, validated configuration (YAML via libyaml, see docs/configs.md).
 * Trainer layer (train/config.c): it gathers the sections the layers below define (the
 * model's sf_model_cfg, the data layer's sf_aug_cfg, the engine's sf_optim_cfg and
 * sf_sched_cfg) with the trainer's own data and train sections.
 *
 * Sections model, data, aug, optim, sched, train. A config may name `base:` (a path
 * relative to its own file) to extend; command-line overrides use dotted keys
 * (`optim.lr=1e-3`). Unknown keys, duplicate keys, wrong types and out-of-range values
 * are errors naming file:line:key. Setting model.name first fills every model key with
 * that model's defaults (sf_model_defaults); explicit keys then override them.
 */
#ifndef SFVIT_CONFIG_H
#define SFVIT_CONFIG_H

#include "sfvit/data.h"
#include "sfvit/model.h"
#include "sfvit/optim.h"

typedef struct sf_data_cfg {
    char root[SF_PATH_MAX];   /* ImageNet-format folder: root/train/<class>/<image>, root/val/... */
    char train_split[64];     /* "train" */
    char val_split[64];       /* "val" */
    int workers;              /* loader threads (default 2) */
    int prefetch;             /* batches in the ring (default 4) */
    int repeated_aug;         /* each training image k times per epoch (DeiT: 3; 1 = off) */
} sf_data_cfg;

typedef struct sf_train_cfg {
    int epochs, batch_size, eval_batch_size;
    char out[SF_PATH_MAX];    /* runs */
    char name[256];           /* run folder name */
    uint64_t seed;
    int threads;              /* 0 = SFVIT_THREADS or cores */
    int log_every;            /* steps between plain log lines */
    int save_every_steps;     /* extra last.safetensors every N steps; 0 = per epoch only */
    int max_steps;            /* stop after this many steps (0 = no limit); for tests */
    int eval_every;           /* epochs between evaluations */
    float max_train_fraction; /* use only this fraction of the train set (smoke runs); 1 = all */
    int bn_sync;              /* under MPI: BatchNorm batch statistics over all ranks (1) or per rank (0) */
    float ema_decay;          /* EMA of the weights per update (DeiT: 0.99996); 0 = off */
    int tensorboard;          /* also write TensorBoard event files in the run folder */
    char precision[16];       /* products: fp32, bf16, bf16_emulated (train/precision.c) */
    char precision_fallback[8]; /* none, fp32: what bf16 does without native bf16 */
    char bf16_products[8];      /* auto, onednn, fp32: the kernels of bf16 products */
} sf_train_cfg;

typedef struct sf_config {
    sf_model_cfg model;
    sf_data_cfg data;
    sf_aug_cfg aug;
    sf_optim_cfg optim;
    sf_sched_cfg sched;
    sf_train_cfg train;
    char path[SF_PATH_MAX];   /* file it was loaded from ("" if none) */
} sf_config;

/* Fills every default (no model name: a small ViT). */
void sf_config_defaults(sf_config *cfg);
/* Loads path (following base: chains), then applies overrides ("a.b=v"). On error prints
 * one message naming file:line:key (or the override) and returns -1. */
int sf_config_load(sf_config *cfg, const char *path, int n_overrides, char *const *overrides);
/* Applies one dotted key; `where` names the origin for messages ("cli", "f.yaml:12"). */
int sf_config_set(sf_config *cfg, const char *key, const char *value, const char *where);
/* Cross-field checks (e.g. embed_dim divisible by num_heads; even batch for mixup). */
int sf_config_validate(const sf_config *cfg);
/* The resolved config as YAML (every key, each section once) that sf_config_load, and any
 * YAML reader, reads back to the same values. _write writes it atomically to path. */
void sf_config_yaml(const sf_config *cfg, FILE *f);
int sf_config_write(const sf_config *cfg, const char *path);
/* Prints the resolved settings as a boxed table (stdout). */
void sf_config_print(const sf_config *cfg, FILE *f);
/* Prints every key (type, default, allowed values, meaning) as a markdown table: the
 * reference in docs/configs.md. */
void sf_config_doc(FILE *f);
/* Prints "key: a -> b" for every key whose value differs (f may be NULL); returns the
 * number of differing keys (0 = same settings). */
int sf_config_diff(const sf_config *a, const sf_config *b, FILE *f);

#endif
