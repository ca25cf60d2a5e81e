/* names.h — checkpoint key layouts: sfvit's own names (the official repos' state_dict keys),
 * timm's names, and the prefix a DistributedDataParallel model adds (docs/checkpoints.md).
 *
 * sfvit's parameter names are the official DeiT / XCiT / SimA / SOFT(++) keys; DeiT's equal
 * timm's. timm renames two things in XCiT: `pos_embeder.` is `pos_embed.`, and class
 * attention has separate `attn.q`, `attn.k`, `attn.v` Linears where the official code has one
 * `attn.qkv` (rows [q; k; v]). A layout is detected by trying each known one on the file's
 * keys and keeping the one that names the most parameters of the model.
 *
 * Deliberately not here: shape checks (sf_checkpoint_load does them after the renaming) and
 * layouts of other model families.
 */
#ifndef SFVIT_NAMES_H
#define SFVIT_NAMES_H

#include "sfvit/safetensors.h"
#include "sfvit/tensor.h"

typedef struct sf_layout_report {
    char layout[96];  /* "timm XCiT", "official DeiT (= timm)", ... */
    int ddp_prefix;   /* 1 if a "module." prefix was removed */
    int n_renamed;    /* tensors whose key changed */
    int n_merged;     /* q/k/v triples concatenated into one qkv */
    int n_fit;        /* parameters of the model the renamed file names */
} sf_layout_report;

/* Renames the tensors of f in place to ps's names when f uses another known layout (merging
 * timm's q/k/v). Always fills rep. Returns -1 (with a message naming the file) only when a
 * q/k/v triple cannot be merged (a part missing, shapes or dtypes that differ). */
int sf_names_adapt(sf_st_file *f, sf_params *ps, sf_layout_report *rep);

/* The family of a parameter store, by its names: "DeiT", "XCiT", "SimA (XCiT)", "SOFT". */
const char *sf_names_family(sf_params *ps);

#endif
