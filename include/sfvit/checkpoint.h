/* checkpoint.h — saving and loading the parameter store as safetensors (docs/checkpoints.md).
 *
 * Keys are the parameter names (timm state_dict keys), F32, or I64 for SF_PARAM_I64 views
 * (BatchNorm num_batches_tracked). With optimizer state, every trainable parameter also has
 * "optim.exp_avg.<name>" and "optim.exp_avg_sq.<name>" (AdamW m and v). Metadata strings
 * (config YAML, epoch, step, RNG states) ride in __metadata__; every tensor carries a CRC32.
 * Writes are atomic (see safetensors.h).
 */
#ifndef SFVIT_CHECKPOINT_H
#define SFVIT_CHECKPOINT_H

#include "sfvit/names.h"
#include "sfvit/pth.h"
#include "sfvit/safetensors.h"
#include "sfvit/tensor.h"

#define SF_CKPT_OPTIM_M "optim.exp_avg."
#define SF_CKPT_OPTIM_V "optim.exp_avg_sq."
/* Metadata key of the class names (a JSON array of strings, class id order); checkpoints
 * written before it existed lack it. */
#define SF_CKPT_META_CLASS_NAMES "class_names"

typedef struct sf_kv {
    const char *key, *value;
} sf_kv;

/* Saves every parameter (and, with with_optim, the AdamW moments of trainable ones) plus
 * n_meta metadata strings. Returns -1 with a message naming the path on failure; the
 * previous file at path is then untouched. */
int sf_checkpoint_save(const char *path, const sf_params *ps, int with_optim, const sf_kv *meta,
                       int n_meta);

typedef struct sf_ckpt_opts {
    int strict;       /* any missing / unexpected / mismatched key: load nothing, return -1 */
    int load_optim;   /* also load optim.exp_avg(_sq).<name> into ps->m / ps->v */
    const char *const *skip_prefixes; /* parameters whose names start with one of these are
                                         neither loaded nor reported (e.g. "head.") */
    int n_skip;
    int quiet;        /* do not print the missing / unexpected / mismatch lists */
} sf_ckpt_opts;

typedef struct sf_ckpt_report {
    int n_loaded;       /* parameters whose values came from the file */
    int n_missing;      /* parameters (or requested moments) the file does not hold */
    int n_unexpected;   /* file tensors no parameter claims */
    int n_mismatch;     /* shape or dtype mismatches */
    int n_skipped;      /* parameters left alone by skip_prefixes */
    unsigned char *loaded; /* (ps->count): 1 if parameter i was loaded */
    sf_st_meta *meta;   /* copy of the file's metadata */
    int n_meta;
    sf_ckpt_format format;  /* safetensors or a torch.save file */
    sf_layout_report layout; /* key layout detected (names.h) */
} sf_ckpt_report;

/* Opens a checkpoint of any readable format — safetensors, or a torch.save file (pth.h),
 * told apart by their first bytes — into f. Given a parameter store, the keys are renamed
 * to its names when the file uses another known layout (names.h; rep may be NULL). Returns
 * -1 with a message naming the file. */
int sf_ckpt_open(sf_st_file *f, const char *path, sf_params *ps, sf_layout_report *rep, sf_ckpt_format *format);

/* Loads path (any format sf_ckpt_open reads, in any layout it knows) into ps (allocated).
 * A torch.save file or a renamed layout is reported on one line ("loaded 152 tensors, timm
 * XCiT layout") unless quiet. Prints missing, unexpected and mismatched keys by name
 * (at most 20 of each). Strict: any of them fails the load and ps is unchanged. Non-strict
 * (fine-tuning): the rest is loaded and report->loaded says which parameters were. report
 * may be NULL; otherwise free it with sf_ckpt_report_free. Returns -1 on an unreadable or
 * corrupt file or a strict failure. */
int sf_checkpoint_load(const char *path, sf_params *ps, const sf_ckpt_opts *opts,
                       sf_ckpt_report *report);
/* A metadata value from the report (NULL if absent). */
const char *sf_ckpt_meta_get(const sf_ckpt_report *r, const char *key);
void sf_ckpt_report_free(sf_ckpt_report *r);

/* The class names as the JSON array stored under SF_CKPT_META_CLASS_NAMES (malloc'd). */
char *sf_class_names_json(char *const *names, int n);
/* Parses such an array into *names (n malloc'd strings in a malloc'd array). Returns the
 * count, or -1 when json is not an array of strings. */
int sf_class_names_parse(const char *json, char ***names);
void sf_class_names_free(char **names, int n);

#endif
