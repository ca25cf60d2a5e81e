/* checkpoint.c — the parameter store to and from safetensors (include/sfvit/checkpoint.h).
 *
 * A load first matches every file key against the store by name and only then copies, so a
 * strict load that fails leaves the parameters untouched, and a non-strict load (fine-tuning)
 * can say exactly which parameters kept their initial values. Mismatches are listed by name,
 * never silently resized or partially copied.
 *
 * Files in other formats (torch.save) and other key layouts (timm's XCiT names) are turned
 * into the same view of named tensors by sf_ckpt_open before matching (pth.c, names.c).
 */
#include "sfvit/checkpoint.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/core.h"

#define LIST_PRINT_MAX 20

int sf_checkpoint_save(const char *path, const sf_params *ps, int with_optim, const sf_kv *meta,
                       int n_meta) {
    SF_ASSERT(ps->allocated, "checkpoint save before sf_params_alloc");
    sf_st_writer w;
    sf_st_writer_init(&w);
    int rc = 0;
    for (int i = 0; i < ps->count && rc == 0; i++) {
        const sf_param *p = &ps->list[i];
        const sf_tensor *t = p->t;
        int64_t shape[SF_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
        if (p->flags & SF_PARAM_I64) {
            int64_t *iv = sf_malloc(t->numel * sizeof(int64_t)); // (numel)
            for (size_t j = 0; j < t->numel; j++) iv[j] = (int64_t)llrintf(t->data[j]);
            rc = sf_st_writer_add_copy(&w, t->name, SF_DTYPE_I64, t->ndim, shape, iv);
            free(iv);
        } else {
            rc = sf_st_writer_add(&w, t->name, SF_DTYPE_F32, t->ndim, shape, t->data);
        }
        if (rc == 0 && with_optim && (p->flags & SF_PARAM_TRAINABLE)) {
            size_t len = strlen(t->name) + 32;
            char *key = sf_malloc(len);
            snprintf(key, len, SF_CKPT_OPTIM_M "%s", t->name);
            rc = sf_st_writer_add(&w, key, SF_DTYPE_F32, t->ndim, shape, ps->m + p->offset);
            snprintf(key, len, SF_CKPT_OPTIM_V "%s", t->name);
            if (rc == 0) rc = sf_st_writer_add(&w, key, SF_DTYPE_F32, t->ndim, shape, ps->v + p->offset);
            free(key);
        }
    }
    for (int i = 0; i < n_meta && rc == 0; i++) rc = sf_st_writer_set_meta(&w, meta[i].key, meta[i].value);
    if (rc == 0) rc = sf_st_writer_write(&w, path);
    sf_st_writer_free(&w);
    return rc;
}

/* [] and [1] (and [1, 1]) are the same single value: PyTorch stores num_batches_tracked as
 * a 0-dim tensor. Otherwise shapes must match exactly. */
static int same_shape(const sf_tensor *t, const sf_st_entry *e) {
    if (t->numel == 1 && e->numel == 1) return 1;
    if (t->ndim != e->ndim) return 0;
    for (int d = 0; d < t->ndim; d++)
        if ((int64_t)t->shape[d] != e->shape[d]) return 0;
    return 1;
}

static int has_prefix(const char *s, const char *const *pre, int n) {
    for (int i = 0; i < n; i++)
        if (pre[i] && strncmp(s, pre[i], strlen(pre[i])) == 0) return 1;
    return 0;
}

typedef struct name_list {
    char **s;
    int n, cap;
} name_list;

static void list_add(name_list *l, const char *fmt_a, const char *b) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->s = sf_realloc(l->s, (size_t)l->cap * sizeof(char *));
    }
    size_t len = strlen(fmt_a) + strlen(b) + 1;
    l->s[l->n] = sf_malloc(len);
    snprintf(l->s[l->n], len, "%s%s", fmt_a, b);
    l->n++;
}

static void list_print(const name_list *l, const char *path, const char *what, int as_error) {
    if (l->n == 0) return;
    if (as_error) sf_error("%s: %d %s:", path, l->n, what);
    else sf_warn("%s: %d %s:", path, l->n, what);
    for (int i = 0; i < l->n && i < LIST_PRINT_MAX; i++) fprintf(stderr, "    %s\n", l->s[i]);
    if (l->n > LIST_PRINT_MAX) fprintf(stderr, "    ... and %d more\n", l->n - LIST_PRINT_MAX);
}

static void list_free(name_list *l) {
    for (int i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
}

static const char *mismatch_str(char *buf, size_t n, const sf_tensor *t, const sf_st_entry *e) {
    char a[96], b[160];
    sf_shape_str(t, a, sizeof a);
    sf_st_shape_str(e, b, sizeof b);
    snprintf(buf, n, " (model %s, file %s %s)", a, sf_dtype_name(e->dtype), b);
    return buf;
}

/* Whether entry e can fill parameter p (dtype and shape); appends to mism if not. */
static int entry_fits(const sf_param *p, const sf_st_entry *e, const char *key, name_list *mism) {
    char buf[320];
    int ok = same_shape(p->t, e) &&
             (sf_st_is_floatable(e) || ((p->flags & SF_PARAM_I64) && e->dtype != SF_DTYPE_BOOL));
    if (!ok) {
        mismatch_str(buf, sizeof buf, p->t, e);
        list_add(mism, key, buf);
    }
    return ok;
}

static int copy_entry(const sf_st_file *f, const sf_st_entry *e, float *dst, size_t n) {
    if (sf_st_is_floatable(e)) return sf_st_read_f32(f, e, dst, n);
    int64_t *tmp = sf_malloc(n * sizeof(int64_t)); // (n)
    int rc = sf_st_read_i64(f, e, tmp, n);
    for (size_t i = 0; rc == 0 && i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
    return rc;
}

/* The first bytes of a file (fewer if it is shorter); an unreadable file is left to the
 * reader to report. */
static sf_ckpt_format sniff_file(const char *path) {
    unsigned char head[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SF_CKPT_UNKNOWN;
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return n > 0 ? sf_ckpt_sniff(head, (size_t)n) : SF_CKPT_UNKNOWN;
}

int sf_ckpt_open(sf_st_file *f, const char *path, sf_params *ps, sf_layout_report *rep, sf_ckpt_format *format) {
    sf_ckpt_format fmt = sniff_file(path);
    int is_pth = fmt == SF_CKPT_PTH_ZIP || fmt == SF_CKPT_PTH_LEGACY || fmt == SF_CKPT_PTH_TAR;
    if (format) *format = is_pth ? fmt : SF_CKPT_SAFETENSORS;
    if (rep) memset(rep, 0, sizeof(*rep));
    if ((is_pth ? sf_pth_open(f, path, NULL) : sf_st_open(f, path)) != 0) return -1;
    if (!ps) return 0;
    sf_layout_report local;
    if (sf_names_adapt(f, ps, rep ? rep : &local) != 0) {
        sf_st_close(f);
        return -1;
    }
    return 0;
}

/* A file whose keys name few of the model's parameters fits none of the known layouts. */
static void hint_layouts(const sf_st_file *f, const sf_params *ps, const sf_layout_report *lay) {
    if (lay->n_fit * 2 >= ps->count) return;
    sf_hint("only %d of the model's %d parameters are named by the file in any known layout (official %s, timm "
            "XCiT, with or without DistributedDataParallel's 'module.'); the file's first keys: %s%s%s%s%s",
            lay->n_fit, ps->count, "DeiT/XCiT/SimA/SOFT", f->n_entries > 0 ? f->entries[0].name : "(none)",
            f->n_entries > 1 ? ", " : "", f->n_entries > 1 ? f->entries[1].name : "", f->n_entries > 2 ? ", " : "",
            f->n_entries > 2 ? f->entries[2].name : "");
}

/* BatchNorm's step counter: an integer that some converters and exporters drop; PyTorch
 * fills a missing one in when loading, and so does sfvit. */
static int is_batch_counter(const sf_param *p) {
    const char *suffix = ".num_batches_tracked", *name = p->t->name;
    size_t n = strlen(name), k = strlen(suffix);
    return !(p->flags & SF_PARAM_TRAINABLE) && n >= k && strcmp(name + n - k, suffix) == 0;
}

int sf_checkpoint_load(const char *path, sf_params *ps, const sf_ckpt_opts *opts,
                       sf_ckpt_report *report) {
    SF_ASSERT(ps->allocated, "checkpoint load before sf_params_alloc");
    sf_ckpt_opts o = {0};
    if (opts) o = *opts;
    sf_ckpt_report r = {0};
    r.loaded = sf_calloc((size_t)(ps->count ? ps->count : 1), 1);
    sf_st_file f;
    if (sf_ckpt_open(&f, path, ps, &r.layout, &r.format) != 0) {
        if (report) *report = r;
        else free(r.loaded);
        return -1;
    }
    /* Plan: which entry fills each parameter and its moments. */
    const sf_st_entry **src = sf_calloc((size_t)ps->count * 3 + 1, sizeof(*src));
    name_list missing = {0}, unexpected = {0}, mism = {0};
    int *zero_counters = sf_calloc((size_t)ps->count + 1, sizeof(int)), n_zero_counters = 0;
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        const char *name = p->t->name;
        if (o.n_skip && has_prefix(name, o.skip_prefixes, o.n_skip)) {
            r.n_skipped++;
            continue;
        }
        const sf_st_entry *e = sf_st_find(&f, name);
        if (!e && is_batch_counter(p)) {  // as PyTorch's BatchNorm does: filled in with 0
            zero_counters[n_zero_counters++] = i;
            continue;
        }
        if (!e) list_add(&missing, "", name);
        else if (entry_fits(p, e, name, &mism)) src[3 * i] = e;
        if (o.load_optim && (p->flags & SF_PARAM_TRAINABLE)) {
            const char *pre[2] = {SF_CKPT_OPTIM_M, SF_CKPT_OPTIM_V};
            for (int k = 0; k < 2; k++) {
                size_t len = strlen(pre[k]) + strlen(name) + 1;
                char *key = sf_malloc(len);
                snprintf(key, len, "%s%s", pre[k], name);
                const sf_st_entry *me = sf_st_find(&f, key);
                if (!me) list_add(&missing, "", key);
                else if (entry_fits(p, me, key, &mism)) src[3 * i + 1 + k] = me;
                free(key);
            }
        }
    }
    for (int j = 0; j < f.n_entries; j++) {
        const char *key = f.entries[j].name, *pname = key;
        int is_optim = 0;
        if (strncmp(key, SF_CKPT_OPTIM_M, strlen(SF_CKPT_OPTIM_M)) == 0) {
            pname = key + strlen(SF_CKPT_OPTIM_M);
            is_optim = 1;
        } else if (strncmp(key, SF_CKPT_OPTIM_V, strlen(SF_CKPT_OPTIM_V)) == 0) {
            pname = key + strlen(SF_CKPT_OPTIM_V);
            is_optim = 1;
        }
        if (is_optim && !o.load_optim) continue;
        if (o.n_skip && has_prefix(pname, o.skip_prefixes, o.n_skip)) continue;
        sf_param *p = sf_params_find(ps, pname);
        if (!p || (is_optim && !(p->flags & SF_PARAM_TRAINABLE))) list_add(&unexpected, "", key);
    }
    r.n_missing = missing.n;
    r.n_unexpected = unexpected.n;
    r.n_mismatch = mism.n;
    int bad = missing.n || unexpected.n || mism.n;
    if (!o.quiet || (o.strict && bad)) {
        list_print(&missing, path, "keys missing from the checkpoint", o.strict);
        list_print(&unexpected, path, "unexpected keys in the checkpoint", o.strict);
        list_print(&mism, path, "keys with a different shape or dtype", o.strict);
    }
    int rc = 0;
    if (bad && (!o.quiet || o.strict)) hint_layouts(&f, ps, &r.layout);
    if (o.strict && bad) {
        sf_hint("the checkpoint was saved from a different model or config; to fine-tune from it "
                "load non-strictly (model.init_from) and skip the mismatched prefixes");
        rc = -1;
    } else {
        for (int i = 0; i < ps->count && rc == 0; i++) {
            sf_param *p = &ps->list[i];
            size_t n = p->t->numel;
            if (src[3 * i]) {
                rc = copy_entry(&f, src[3 * i], p->t->data, n);
                if (rc == 0) {
                    r.loaded[i] = 1;
                    r.n_loaded++;
                }
                /* Moments only travel with the values they belong to. */
                if (rc == 0 && src[3 * i + 1]) rc = copy_entry(&f, src[3 * i + 1], ps->m + p->offset, n);
                if (rc == 0 && src[3 * i + 2]) rc = copy_entry(&f, src[3 * i + 2], ps->v + p->offset, n);
            }
        }
    }
    if (rc == 0 && !(o.strict && bad) && n_zero_counters) {
        for (int k = 0; k < n_zero_counters; k++) {
            sf_param *p = &ps->list[zero_counters[k]];
            memset(p->t->data, 0, p->t->numel * sizeof(float));
        }
        fprintf(stderr, "%s: %d BatchNorm num_batches_tracked counters are not in the file; set to 0 (they play no "
                "part in the math)\n", path, n_zero_counters);
    }
    free(zero_counters);
    if (rc == 0 && !o.quiet && (r.format != SF_CKPT_SAFETENSORS || r.layout.n_renamed))
        printf("%s: loaded %d tensors, %s layout%s\n", path, r.n_loaded, r.layout.layout,
               r.layout.ddp_prefix ? " (DistributedDataParallel 'module.' prefix removed)" : "");
    r.meta = sf_calloc((size_t)(f.n_meta ? f.n_meta : 1), sizeof(sf_st_meta));
    for (int i = 0; i < f.n_meta; i++) {
        r.meta[i].key = sf_strdup(f.meta[i].key);
        r.meta[i].value = sf_strdup(f.meta[i].value);
    }
    r.n_meta = f.n_meta;
    list_free(&missing);
    list_free(&unexpected);
    list_free(&mism);
    free(src);
    sf_st_close(&f);
    if (report) *report = r;
    else sf_ckpt_report_free(&r);
    return rc;
}

const char *sf_ckpt_meta_get(const sf_ckpt_report *r, const char *key) {
    for (int i = 0; i < r->n_meta; i++)
        if (strcmp(r->meta[i].key, key) == 0) return r->meta[i].value;
    return NULL;
}

void sf_ckpt_report_free(sf_ckpt_report *r) {
    for (int i = 0; i < r->n_meta; i++) {
        free(r->meta[i].key);
        free(r->meta[i].value);
    }
    free(r->meta);
    free(r->loaded);
    memset(r, 0, sizeof(*r));
}

/* ---- class names (metadata) ---- */

char *sf_class_names_json(char *const *names, int n) {
    cJSON *a = cJSON_CreateArray();
    SF_ASSERT(a, "out of memory");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
    char *text = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    SF_ASSERT(text, "out of memory");
    char *out = sf_malloc(strlen(text) + 1);  // freed with free(), like every sf_malloc
    strcpy(out, text);
    cJSON_free(text);
    return out;
}

int sf_class_names_parse(const char *json, char ***names) {
    cJSON *a = cJSON_Parse(json);
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    for (int i = 0; i < n; i++)
        if (!cJSON_IsString(cJSON_GetArrayItem(a, i))) n = -1;
    *names = NULL;
    if (n >= 0) {
        *names = sf_calloc(n > 0 ? (size_t)n : 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
            const char *v = cJSON_GetArrayItem(a, i)->valuestring;
            (*names)[i] = sf_malloc(strlen(v) + 1);
            strcpy((*names)[i], v);
        }
    }
    cJSON_Delete(a);
    return n;
}

void sf_class_names_free(char **names, int n) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}
