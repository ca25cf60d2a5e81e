/* names.c — checkpoint key layouts: detection and renaming (include/sfvit/names.h).
 *
 * Each layout is a function from a file key to an sfvit key (and, for a part of a tensor
 * sfvit keeps whole, the part's index). Detection scores every layout by how many of the
 * model's parameters the renamed keys name; ties go to the earlier layout, so sfvit's own
 * names win whenever they fit.
 *
 * Deliberately not here: the reverse direction (sfvit writes its own names) and any shape
 * logic beyond checking that merged parts agree.
 */
#include "sfvit/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/core.h"

#define DDP_PREFIX "module."

typedef int (*rename_fn)(const char *key, char *out, size_t n, int *part);

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int rename_same(const char *key, char *out, size_t n, int *part) {
    *part = -1;
    snprintf(out, n, "%s", key);
    return 0;
}

/* timm XCiT: pos_embed.token_projection.* = pos_embeder.token_projection.*;
 * cls_attn_blocks.{j}.attn.{q,k,v}.{weight,bias} are the row blocks of attn.qkv. */
static int rename_timm_xcit(const char *key, char *out, size_t n, int *part) {
    *part = -1;
    if (starts_with(key, "pos_embed.token_projection.")) {
        snprintf(out, n, "pos_embeder.%s", key + strlen("pos_embed."));
        return 1;
    }
    const char *a = starts_with(key, "cls_attn_blocks.") ? strstr(key, ".attn.") : NULL;
    /* a[6] != 0 first: strchr finds the terminator too, and a key ending in ".attn." has no a[7] */
    if (a && a[6] && strchr("qkv", a[6]) && a[7] == '.' && (!strcmp(a + 8, "weight") || !strcmp(a + 8, "bias"))) {
        *part = (int)(strchr("qkv", a[6]) - "qkv");
        snprintf(out, n, "%.*s.attn.qkv.%s", (int)(a - key), key, a + 8);
        return 1;
    }
    snprintf(out, n, "%s", key);
    return 0;
}

static const struct {
    const char *name; /* NULL: "official <family>" */
    rename_fn fn;
} layouts[] = {
    {NULL, rename_same},
    {"timm XCiT", rename_timm_xcit},
};

const char *sf_names_family(sf_params *ps) {
    if (sf_params_find(ps, "patch_embed1.proj.0.weight")) return "SOFT";
    if (sf_params_find(ps, "stage0.patch_embed.proj.weight")) return "CvT";
    if (sf_params_find(ps, "pos_embeder.token_projection.weight"))
        return sf_params_find(ps, "blocks.0.attn.temperature") || !sf_params_find(ps, "blocks.0.attn.qkv.weight")
                   ? "XCiT"
                   : "SimA (XCiT)";
    return "DeiT";
}

static const char *strip(const char *key, int ddp) { return ddp ? key + strlen(DDP_PREFIX) : key; }

/* How many parameters of ps the layout's names of f's keys hit. */
static int layout_fit(const sf_st_file *f, sf_params *ps, rename_fn fn, int ddp) {
    int fit = 0, part;
    char name[1024];
    for (int i = 0; i < f->n_entries; i++) {
        fn(strip(f->entries[i].name, ddp), name, sizeof name, &part);
        if (part <= 0 && sf_params_find(ps, name)) fit++;
    }
    return fit;
}

static int same_layout(const sf_st_entry *a, const sf_st_entry *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->ndim < 1) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* Merges every q/k/v triple into one tensor [3*rows, ...]; the parts are dropped. */
static int merge_parts(sf_st_file *f, char **names, const int *parts, sf_layout_report *rep) {
    size_t extra = 0;
    int *first = sf_malloc((size_t)(f->n_entries ? f->n_entries : 1) * 3 * sizeof(int));
    for (int i = 0; i < f->n_entries; i++) {
        first[3 * i] = first[3 * i + 1] = first[3 * i + 2] = -1;
        if (parts[i] != 0) continue;
        first[3 * i] = i;
        for (int j = 0; j < f->n_entries; j++)
            if (parts[j] > 0 && !strcmp(names[j], names[i])) first[3 * i + parts[j]] = j;
        for (int p = 1; p < 3; p++) {
            int j = first[3 * i + p];
            if (j < 0 || !same_layout(&f->entries[i], &f->entries[j])) {
                sf_error("%s: cannot merge the q, k, v parts of '%s' (%s)", f->path, names[i],
                         j < 0 ? "a part is missing" : "their shapes or dtypes differ");
                free(first);
                return -1;
            }
        }
        extra += 3 * (size_t)(f->entries[i].end - f->entries[i].begin);
    }
    for (int j = 0; j < f->n_entries; j++)
        if (parts[j] > 0) {
            int owner = 0;
            for (int i = 0; i < f->n_entries; i++) owner |= first[3 * i + parts[j]] == j;
            if (!owner) {
                free(first);
                return sf_error("%s: '%s' has no matching q part", f->path, f->entries[j].name);
            }
        }
    /* One new buffer: the old bytes, then the merged tensors. */
    unsigned char *buf = sf_malloc(f->size + extra + 1);
    memcpy(buf, f->buf, f->size);
    size_t off = f->size;
    int n = 0;
    for (int i = 0; i < f->n_entries; i++) {
        sf_st_entry e = f->entries[i];
        e.data = buf + (e.data - f->buf);
        if (parts[i] > 0) {
            free(e.name);
            free(names[i]);
            continue;
        }
        if (parts[i] == 0) {
            size_t bytes = (size_t)(e.end - e.begin);
            for (int p = 0; p < 3; p++) memcpy(buf + off + p * bytes, f->entries[first[3 * i + p]].data, bytes);
            e.shape[0] *= 3;
            e.numel *= 3;
            e.data = buf + off;
            e.begin = off;
            e.end = off + 3 * bytes;
            off += 3 * bytes;
            rep->n_merged++;
        }
        free(e.name);
        e.name = names[i];
        names[n] = names[i];
        f->entries[n++] = e;
    }
    free(first);
    free(f->buf);
    f->buf = buf;
    f->size = off;
    f->n_entries = n;
    return 0;
}

int sf_names_adapt(sf_st_file *f, sf_params *ps, sf_layout_report *rep) {
    memset(rep, 0, sizeof(*rep));
    const char *family = sf_names_family(ps);
    int ddp = f->n_entries > 0;
    for (int i = 0; i < f->n_entries && ddp; i++) ddp = starts_with(f->entries[i].name, DDP_PREFIX);
    int best = 0, best_fit = -1;
    for (int l = 0; l < (int)(sizeof layouts / sizeof layouts[0]); l++) {
        int fit = layout_fit(f, ps, layouts[l].fn, ddp);
        if (fit > best_fit) best = l, best_fit = fit;
    }
    if (layouts[best].name) snprintf(rep->layout, sizeof rep->layout, "%s", layouts[best].name);
    else snprintf(rep->layout, sizeof rep->layout, "official %s%s", family, strcmp(family, "DeiT") ? "" : " (= timm)");
    rep->ddp_prefix = ddp;
    rep->n_fit = best_fit;
    if (best == 0 && !ddp) return 0;
    char **names = sf_malloc((size_t)(f->n_entries ? f->n_entries : 1) * sizeof(char *));
    int *parts = sf_malloc((size_t)(f->n_entries ? f->n_entries : 1) * sizeof(int));
    int any_part = 0;
    char name[1024];
    for (int i = 0; i < f->n_entries; i++) {
        layouts[best].fn(strip(f->entries[i].name, ddp), name, sizeof name, &parts[i]);
        names[i] = sf_strdup(name);
        rep->n_renamed += strcmp(name, f->entries[i].name) != 0;
        any_part |= parts[i] >= 0;
    }
    int rc = 0;
    if (any_part) {
        rc = merge_parts(f, names, parts, rep);
        if (rc != 0)
            for (int i = 0; i < f->n_entries; i++) free(names[i]);
    } else {
        for (int i = 0; i < f->n_entries; i++) {
            free(f->entries[i].name);
            f->entries[i].name = names[i];
        }
    }
    free(names);
    free(parts);
    return rc;
}
