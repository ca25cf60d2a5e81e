/* safetensors.c — validated safetensors reader and atomic writer (include/sfvit/safetensors.h).
 *
 * The reader trusts nothing in the file: every length, offset and shape is checked against
 * the file size before any tensor byte is touched, with overflow-checked arithmetic, and
 * the data section must be covered exactly once (no overlap, no hole, no trailing bytes —
 * the rule of the reference implementation, which keeps polyglot files out). Errors name
 * the file and the problem and return -1; nothing aborts on bad input.
 *
 * Deliberately not here: mmap (one read is simple and the files are small enough), lazy
 * reads, big-endian hosts (the format is little-endian and so are our targets).
 */
#include "sfvit/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cjson/cJSON.h>

#include "sfvit/core.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[SF_DTYPE_COUNT] = {
    [SF_DTYPE_F32] = {"F32", 4}, [SF_DTYPE_F64] = {"F64", 8}, [SF_DTYPE_F16] = {"F16", 2},
    [SF_DTYPE_BF16] = {"BF16", 2}, [SF_DTYPE_I64] = {"I64", 8}, [SF_DTYPE_I32] = {"I32", 4},
    [SF_DTYPE_I16] = {"I16", 2}, [SF_DTYPE_I8] = {"I8", 1}, [SF_DTYPE_U8] = {"U8", 1},
    [SF_DTYPE_BOOL] = {"BOOL", 1},
};

const char *sf_dtype_name(sf_dtype dt) {
    return (unsigned)dt < SF_DTYPE_COUNT ? dtype_info[dt].name : "?";
}

static int dtype_from_name(const char *name) {
    for (int i = 0; i < SF_DTYPE_COUNT; i++)
        if (strcmp(dtype_info[i].name, name) == 0) return i;
    return -1;
}

size_t sf_dtype_size(sf_dtype dt) { return (unsigned)dt < SF_DTYPE_COUNT ? dtype_info[dt].size : 0; }

/* ---- reader ---- */

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* zlib's crc32 takes a uInt length; feed large tensors in chunks. */
static uint32_t crc32_bytes(const unsigned char *p, uint64_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

/* A JSON number that is a non-negative integer exactly representable in a double. */
static int json_u64(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return -1;
    double v = x->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0) || v != floor(v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int cmp_entry_offset(const void *a, const void *b) {
    const sf_st_entry *x = *(const sf_st_entry *const *)a, *y = *(const sf_st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const sf_st_entry *const *)a)->name, (*(const sf_st_entry *const *)b)->name);
}

static int parse_entry(const char *file, const cJSON *item, sf_st_entry *e) {
    const char *nm = item->string;
    if (!cJSON_IsObject(item))
        return sf_error("%s: tensor '%s': header entry is not a JSON object", file, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!dt) return sf_error("%s: tensor '%s': missing field \"dtype\"", file, nm);
    if (!sh) return sf_error("%s: tensor '%s': missing field \"shape\"", file, nm);
    if (!off) return sf_error("%s: tensor '%s': missing field \"data_offsets\"", file, nm);
    if (!cJSON_IsString(dt)) return sf_error("%s: tensor '%s': \"dtype\" is not a string", file, nm);
    int d = dtype_from_name(dt->valuestring);
    if (d < 0)
        return sf_error("%s: tensor '%s': unknown dtype '%s' (known: F32 F64 F16 BF16 I64 I32 "
                        "I16 I8 U8 BOOL)", file, nm, dt->valuestring);
    e->dtype = (sf_dtype)d;
    if (!cJSON_IsArray(sh)) return sf_error("%s: tensor '%s': \"shape\" is not an array", file, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > SF_ST_MAX_DIMS)
        return sf_error("%s: tensor '%s': %d dimensions (at most %d supported)", file, nm, nd,
                        SF_ST_MAX_DIMS);
    e->ndim = nd;
    uint64_t numel = 1;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, sh) {
        uint64_t v;
        if (json_u64(x, &v) != 0 || v > (uint64_t)INT64_MAX)
            return sf_error("%s: tensor '%s': shape[%d] is not a non-negative integer", file, nm, i);
        e->shape[i++] = (int64_t)v;
        if (__builtin_mul_overflow(numel, v, &numel))
            return sf_error("%s: tensor '%s': the product of the shape overflows", file, nm);
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)sf_dtype_size(e->dtype), &bytes))
        return sf_error("%s: tensor '%s': the byte size of the shape overflows", file, nm);
    e->numel = numel;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        json_u64(cJSON_GetArrayItem(off, 0), &e->begin) != 0 ||
        json_u64(cJSON_GetArrayItem(off, 1), &e->end) != 0)
        return sf_error("%s: tensor '%s': \"data_offsets\" is not [begin, end] of non-negative "
                        "integers", file, nm);
    if (e->end < e->begin)
        return sf_error("%s: tensor '%s': data_offsets [%llu, %llu] end before begin", file, nm,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != bytes) {
        char sb[160];
        sf_st_shape_str(e, sb, sizeof sb);
        return sf_error("%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes but %s %s "
                        "needs %llu", file, nm, (unsigned long long)e->begin,
                        (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                        sf_dtype_name(e->dtype), sb, (unsigned long long)bytes);
    }
    return 0;
}

static int parse_meta(const char *file, const cJSON *m, sf_st_file *f) {
    if (!cJSON_IsObject(m)) return sf_error("%s: \"__metadata__\" is not a JSON object", file);
    int n = cJSON_GetArraySize(m);
    f->meta = sf_calloc((size_t)n, sizeof(sf_st_meta));
    const cJSON *x;
    cJSON_ArrayForEach(x, m) {
        if (!cJSON_IsString(x))
            return sf_error("%s: metadata '%s' is not a string (safetensors metadata maps strings "
                            "to strings)", file, x->string);
        for (int i = 0; i < f->n_meta; i++)
            if (strcmp(f->meta[i].key, x->string) == 0)
                return sf_error("%s: metadata key '%s' appears twice", file, x->string);
        f->meta[f->n_meta].key = sf_strdup(x->string);
        f->meta[f->n_meta].value = sf_strdup(x->valuestring);
        f->n_meta++;
    }
    return 0;
}

static int check_crc(const char *file, sf_st_file *f, const char *text) {
    cJSON *m = cJSON_Parse(text);
    int rc = 0;
    if (!m || !cJSON_IsObject(m)) {
        rc = sf_error("%s: metadata crc32 is not a JSON object of tensor names to hex CRCs", file);
        goto out;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, m) {
        const sf_st_entry *e = sf_st_find(f, x->string);
        if (!e) {
            rc = sf_error("%s: metadata crc32 names tensor '%s', which the file does not hold", file,
                          x->string);
            goto out;
        }
        if (!cJSON_IsString(x) || !x->valuestring[0] || strlen(x->valuestring) > 8 ||
            strspn(x->valuestring, "0123456789abcdefABCDEF") != strlen(x->valuestring)) {
            rc = sf_error("%s: metadata crc32 of tensor '%s' is not a hex number", file, x->string);
            goto out;
        }
        uint32_t want = (uint32_t)strtoul(x->valuestring, NULL, 16);
        uint32_t got = crc32_bytes(e->data, e->end - e->begin);
        if (got != want) {
            rc = sf_error("%s: tensor '%s': CRC32 mismatch (stored %08x, computed %08x): the file "
                          "is corrupt", file, x->string, want, got);
            goto out;
        }
    }
    /* Every tensor must be listed; counting the listed names is not enough, since a JSON
     * object may name one tensor twice. */
    for (int i = 0; i < f->n_entries; i++)
        if (!cJSON_GetObjectItemCaseSensitive(m, f->entries[i].name)) {
            rc = sf_error("%s: tensor '%s' has no entry in metadata crc32", file, f->entries[i].name);
            goto out;
        }
    f->crc_checked = 1;
out:
    cJSON_Delete(m);
    return rc;
}

/* Validates f->buf (f->size bytes) and fills entries/meta. */
static int parse_file(sf_st_file *f) {
    const char *file = f->path;
    if (f->size < 8)
        return sf_error("%s: file is %zu bytes, shorter than the 8-byte header length: not a "
                        "safetensors file", file, f->size);
    uint64_t n = le64(f->buf);
    if (n > SF_ST_MAX_HEADER)
        return sf_error("%s: header length %llu is absurd (limit %llu bytes): not a safetensors "
                        "file or corrupt", file, (unsigned long long)n,
                        (unsigned long long)SF_ST_MAX_HEADER);
    if (n > f->size - 8)
        return sf_error("%s: header length %llu runs past the end of the file (%zu bytes): "
                        "truncated or not a safetensors file", file, (unsigned long long)n, f->size);
    if (n < 2) return sf_error("%s: header of %llu bytes cannot hold a JSON object", file,
                               (unsigned long long)n);
    const unsigned char *hb = f->buf + 8;
    if (memchr(hb, 0, n)) return sf_error("%s: header contains a NUL byte: corrupt", file);
    char *hdr = sf_malloc(n + 1);
    memcpy(hdr, hb, n);
    hdr[n] = 0;
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithOpts(hdr, &endp, 1);
    int rc = 0;
    sf_st_entry **idx = NULL;
    if (!root) {
        size_t at = endp ? (size_t)(endp - hdr) : 0;
        rc = sf_error("%s: header is not valid JSON (error near byte %zu of %llu)", file, at,
                      (unsigned long long)n);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        rc = sf_error("%s: header is not a JSON object", file);
        goto out;
    }
    uint64_t data_size = f->size - 8 - n;
    const unsigned char *data = f->buf + 8 + n;
    int count = cJSON_GetArraySize(root);
    f->entries = sf_calloc((size_t)count, sizeof(sf_st_entry));
    const cJSON *item;
    int seen_meta = 0;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (seen_meta++) {
                rc = sf_error("%s: \"__metadata__\" appears twice", file);
                goto out;
            }
            if ((rc = parse_meta(file, item, f)) != 0) goto out;
            continue;
        }
        sf_st_entry *e = &f->entries[f->n_entries];
        e->name = sf_strdup(item->string);
        f->n_entries++;
        if ((rc = parse_entry(file, item, e)) != 0) goto out;
    }
    /* Names unique; data covered exactly once. */
    idx = sf_malloc(((size_t)f->n_entries + 1) * sizeof(*idx));
    for (int i = 0; i < f->n_entries; i++) idx[i] = &f->entries[i];
    qsort(idx, (size_t)f->n_entries, sizeof(*idx), cmp_entry_name);
    for (int i = 1; i < f->n_entries; i++)
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0) {
            rc = sf_error("%s: tensor '%s' appears twice in the header", file, idx[i]->name);
            goto out;
        }
    qsort(idx, (size_t)f->n_entries, sizeof(*idx), cmp_entry_offset);
    uint64_t pos = 0;
    for (int i = 0; i < f->n_entries; i++) {
        sf_st_entry *e = idx[i];
        if (e->end > data_size) {
            rc = sf_error("%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data "
                          "(%llu bytes): the file is truncated or the header is corrupt", file,
                          e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)data_size);
            goto out;
        }
        if (e->begin < pos) {
            rc = sf_error("%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'", file,
                          e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          idx[i - 1]->name);
            goto out;
        }
        if (e->begin > pos) {
            rc = sf_error("%s: tensor '%s': %llu unused bytes before its data (offsets must cover "
                          "the data without holes)", file, e->name,
                          (unsigned long long)(e->begin - pos));
            goto out;
        }
        pos = e->end;
        e->data = data + e->begin;
    }
    if (pos != data_size) {
        rc = sf_error("%s: %llu bytes after the last tensor's data: corrupt or not written by a "
                      "safetensors writer", file, (unsigned long long)(data_size - pos));
        goto out;
    }
    const char *crc = sf_st_meta_get(f, "crc32");
    if (crc) rc = check_crc(file, f, crc);
out:
    free(idx);
    cJSON_Delete(root);
    free(hdr);
    return rc;
}

static void st_clear(sf_st_file *f) {
    for (int i = 0; i < f->n_entries; i++) free(f->entries[i].name);
    free(f->entries);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    free(f->buf);
    free(f->path);
    memset(f, 0, sizeof(*f));
}

int sf_st_open(sf_st_file *f, const char *path) {
    memset(f, 0, sizeof(*f));
    unsigned char *buf;
    size_t size;
    if (sf_read_whole_file(path, &buf, &size) != 0) return -1;
    f->path = sf_strdup(path);
    f->buf = buf;
    f->size = size;
    if (parse_file(f) != 0) {
        st_clear(f);
        return -1;
    }
    return 0;
}

int sf_st_open_mem(sf_st_file *f, const void *data, size_t size, const char *name) {
    memset(f, 0, sizeof(*f));
    f->path = sf_strdup(name);
    f->buf = sf_malloc(size ? size : 1);
    if (size) memcpy(f->buf, data, size);
    f->size = size;
    if (parse_file(f) != 0) {
        st_clear(f);
        return -1;
    }
    return 0;
}

void sf_st_close(sf_st_file *f) { st_clear(f); }

const sf_st_entry *sf_st_find(const sf_st_file *f, const char *name) {
    for (int i = 0; i < f->n_entries; i++)
        if (strcmp(f->entries[i].name, name) == 0) return &f->entries[i];
    return NULL;
}

const char *sf_st_meta_get(const sf_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

const char *sf_st_shape_str(const sf_st_entry *e, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < e->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)e->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

int sf_st_is_floatable(const sf_st_entry *e) {
    switch (e->dtype) {
    case SF_DTYPE_F32: case SF_DTYPE_F64: case SF_DTYPE_F16: case SF_DTYPE_BF16:
    case SF_DTYPE_I64: case SF_DTYPE_I32: return 1;
    default: return 0;
    }
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);                        /* zero / subnormal */
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 0x400), (int)exp - 25);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits |= sign;
    memcpy(&v, &bits, 4);
    return v;
}

int sf_st_read_f32(const sf_st_file *f, const sf_st_entry *e, float *out, size_t n) {
    if (n != e->numel)
        return sf_error("%s: tensor '%s': %llu elements, caller expected %zu", f->path, e->name,
                        (unsigned long long)e->numel, n);
    const unsigned char *p = e->data;
    switch (e->dtype) {
    case SF_DTYPE_F32: memcpy(out, p, n * 4); break;
    case SF_DTYPE_F64:
        for (size_t i = 0; i < n; i++) { double v; memcpy(&v, p + 8 * i, 8); out[i] = (float)v; }
        break;
    case SF_DTYPE_F16:
        for (size_t i = 0; i < n; i++) { uint16_t v; memcpy(&v, p + 2 * i, 2); out[i] = half_to_float(v); }
        break;
    case SF_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v; memcpy(&v, p + 2 * i, 2);
            uint32_t b = (uint32_t)v << 16;
            memcpy(&out[i], &b, 4);
        }
        break;
    case SF_DTYPE_I64:
        for (size_t i = 0; i < n; i++) { int64_t v; memcpy(&v, p + 8 * i, 8); out[i] = (float)v; }
        break;
    case SF_DTYPE_I32:
        for (size_t i = 0; i < n; i++) { int32_t v; memcpy(&v, p + 4 * i, 4); out[i] = (float)v; }
        break;
    default:
        return sf_error("%s: tensor '%s' has dtype %s, which does not convert to float32", f->path,
                        e->name, sf_dtype_name(e->dtype));
    }
    return 0;
}

int sf_st_read_i64(const sf_st_file *f, const sf_st_entry *e, int64_t *out, size_t n) {
    if (n != e->numel)
        return sf_error("%s: tensor '%s': %llu elements, caller expected %zu", f->path, e->name,
                        (unsigned long long)e->numel, n);
    const unsigned char *p = e->data;
    switch (e->dtype) {
    case SF_DTYPE_I64: memcpy(out, p, n * 8); break;
    case SF_DTYPE_I32:
        for (size_t i = 0; i < n; i++) { int32_t v; memcpy(&v, p + 4 * i, 4); out[i] = v; }
        break;
    case SF_DTYPE_I16:
        for (size_t i = 0; i < n; i++) { int16_t v; memcpy(&v, p + 2 * i, 2); out[i] = v; }
        break;
    case SF_DTYPE_I8: for (size_t i = 0; i < n; i++) out[i] = (int8_t)p[i]; break;
    case SF_DTYPE_U8: case SF_DTYPE_BOOL: for (size_t i = 0; i < n; i++) out[i] = p[i]; break;
    default:
        return sf_error("%s: tensor '%s' has dtype %s, expected an integer dtype", f->path, e->name,
                        sf_dtype_name(e->dtype));
    }
    return 0;
}

/* ---- writer ---- */

void sf_st_writer_init(sf_st_writer *w) { memset(w, 0, sizeof(*w)); }

void sf_st_writer_free(sf_st_writer *w) {
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        if (w->t[i].owned) free((void *)w->t[i].data);
    }
    free(w->t);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    memset(w, 0, sizeof(*w));
}

int sf_st_writer_add(sf_st_writer *w, const char *name, sf_dtype dtype, int ndim,
                     const int64_t *shape, const void *data) {
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0)
        return sf_error("safetensors writer: invalid tensor name '%s'", name ? name : "(null)");
    if ((unsigned)dtype >= SF_DTYPE_COUNT || ndim < 0 || ndim > SF_ST_MAX_DIMS)
        return sf_error("safetensors writer: tensor '%s': bad dtype or %d dims", name, ndim);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return sf_error("safetensors writer: tensor '%s' added twice", name);
    uint64_t numel = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(numel, (uint64_t)shape[i], &numel))
            return sf_error("safetensors writer: tensor '%s': bad shape", name);
    if (__builtin_mul_overflow(numel, (uint64_t)sf_dtype_size(dtype), &bytes) || bytes > SIZE_MAX)
        return sf_error("safetensors writer: tensor '%s': too large", name);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->t = sf_realloc(w->t, (size_t)w->cap * sizeof(*w->t));
    }
    sf_st_wtensor *t = &w->t[w->n++];
    memset(t, 0, sizeof(*t));
    t->name = sf_strdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    t->bytes = (size_t)bytes;
    return 0;
}

int sf_st_writer_add_copy(sf_st_writer *w, const char *name, sf_dtype dtype, int ndim,
                          const int64_t *shape, const void *data) {
    if (sf_st_writer_add(w, name, dtype, ndim, shape, data) != 0) return -1;
    sf_st_wtensor *t = &w->t[w->n - 1];
    void *copy = sf_malloc(t->bytes ? t->bytes : 1);
    if (t->bytes) memcpy(copy, data, t->bytes);
    t->data = copy;
    t->owned = 1;
    return 0;
}

static int writer_meta_set(sf_st_writer *w, const char *key, const char *value) {
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = sf_strdup(value);
            return 0;
        }
    if (w->n_meta == w->cap_meta) {
        w->cap_meta = w->cap_meta ? 2 * w->cap_meta : 16;
        w->meta = sf_realloc(w->meta, (size_t)w->cap_meta * sizeof(*w->meta));
    }
    w->meta[w->n_meta].key = sf_strdup(key);
    w->meta[w->n_meta].value = sf_strdup(value);
    w->n_meta++;
    return 0;
}

int sf_st_writer_set_meta(sf_st_writer *w, const char *key, const char *value) {
    if (!key || !value || strcmp(key, "crc32") == 0)
        return sf_error("safetensors writer: metadata key '%s' is reserved or invalid",
                        key ? key : "(null)");
    return writer_meta_set(w, key, value);
}

/* Builds the padded header; returns malloc'ed text and its length in *len. */
static char *build_header(const sf_st_writer *w, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    cJSON *crc = cJSON_CreateObject();
    uint64_t pos = 0;
    for (int i = 0; i < w->n; i++) {
        const sf_st_wtensor *t = &w->t[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "dtype", sf_dtype_name(t->dtype));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *off = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)pos));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(pos + t->bytes)));
        pos += t->bytes;
        cJSON_AddItemToObject(root, t->name, o);
        char hex[16];
        snprintf(hex, sizeof hex, "%08x", crc32_bytes(t->data, t->bytes));
        cJSON_AddStringToObject(crc, t->name, hex);
    }
    cJSON *meta = cJSON_CreateObject();
    for (int i = 0; i < w->n_meta; i++) cJSON_AddStringToObject(meta, w->meta[i].key, w->meta[i].value);
    char *crc_text = cJSON_PrintUnformatted(crc);
    SF_ASSERT(crc_text);
    cJSON_AddStringToObject(meta, "crc32", crc_text);
    free(crc_text);
    cJSON_Delete(crc);
    cJSON_AddItemToObject(root, "__metadata__", meta);
    char *text = cJSON_PrintUnformatted(root);
    SF_ASSERT(text);
    cJSON_Delete(root);
    /* Pad with spaces so the data starts 8-byte aligned (8 + len is a multiple of 8). */
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *out = sf_malloc(padded + 1);
    memcpy(out, text, n);
    memset(out + n, ' ', padded - n);
    out[padded] = 0;
    free(text);
    *len = padded;
    return out;
}

int sf_st_writer_write(sf_st_writer *w, const char *path) {
    size_t hlen;
    char *hdr = build_header(w, &hlen);
    sf_atomic_file f;
    if (sf_atomic_open(&f, path) != 0) {
        free(hdr);
        return -1;
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    sf_atomic_write(&f, lenbuf, 8);
    sf_atomic_write(&f, hdr, hlen);
    for (int i = 0; i < w->n; i++) {
        if (i == w->n / 2) sf_test_hold("write %s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);  // a kill mid-write, in tests
        if (w->t[i].bytes) sf_atomic_write(&f, w->t[i].data, w->t[i].bytes);
    }
    free(hdr);
    return sf_atomic_commit(&f);
}
