/* pth.c — torch.save files without Python: zip container, legacy stream, a pickle machine that
 * builds only whitelisted objects (include/sfvit/pth.h, docs/checkpoints.md).
 *
 * Hostile input is the normal case here: every length is checked against the bytes that are
 * left, every count is bounded by the input size, the machine is iterative (no recursion while
 * parsing) and the walk over the result is depth- and work-bounded, so a crafted file gives an
 * error, never a crash, a hang or a huge allocation. Values live in one pool and refer to each
 * other by index; the memo shares them (a pickle may reference one object many times, and a
 * list may even contain itself).
 *
 * Deliberately not here: executing anything, globals outside the whitelist, big-endian files,
 * compressed zip entries, pickle protocol 5 out-of-band buffers, quantized or sparse tensors.
 */
#include "sfvit/pth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfvit/core.h"

/* ---- values ---- */

typedef enum vkind {
    V_NONE = 0, V_BOOL, V_INT, V_FLOAT, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT, V_GLOBAL,
    V_STORAGE, V_TENSOR, V_OPAQUE, /* an object of a global outside the whitelist, a big int */
} vkind;

/* Globals the machine understands; everything else is G_OTHER and builds V_OPAQUE. */
typedef enum gid {
    G_OTHER = 0, G_ORDERED_DICT, G_REBUILD_TENSOR_V2, G_REBUILD_TENSOR, G_REBUILD_PARAM,
    G_REBUILD_PARAM_STATE, G_REBUILD_FROM_TYPE_V2, G_TENSOR_TYPE, G_STORAGE,
} gid;

typedef struct val {
    vkind kind;
    int gid;                 /* V_GLOBAL */
    int dtype;               /* V_GLOBAL G_STORAGE */
    int64_t i;               /* V_BOOL, V_INT; V_STORAGE / V_TENSOR: table index */
    double d;                /* V_FLOAT */
    char *s;                 /* V_STR, V_BYTES (NUL-terminated copy), V_GLOBAL "module.name" */
    uint32_t len;            /* V_STR, V_BYTES */
    uint32_t *items, n, cap; /* V_TUPLE, V_LIST: n items; V_DICT: n/2 (key, value) pairs */
} val;

typedef struct storage {
    int dtype;                 /* sf_dtype */
    char *key;
    uint64_t numel;
    const unsigned char *data; /* NULL until the legacy format's data section is read */
} storage;

typedef struct tensor {
    int storage;
    int ndim;
    int64_t offset, shape[SF_ST_MAX_DIMS], stride[SF_ST_MAX_DIMS];
    uint64_t numel;
} tensor;

typedef struct zentry {
    const char *name; /* points into the file; not NUL-terminated */
    size_t name_len;
    uint64_t data, size; /* data offset and size in the file */
    unsigned method;     /* 0 = stored; anything else is refused when the entry is used */
} zentry;

typedef struct pk {
    const char *file;
    const unsigned char *buf;
    size_t size;
    const unsigned char *start, *p, *end; /* the current pickle */
    val *v;
    uint32_t nv, capv;
    uint32_t *stack, nstack, capstack;
    uint32_t *marks, nmarks, capmarks;
    uint32_t *memo, nmemo; /* UINT32_MAX = empty slot */
    uint32_t memo_count;   /* filled slots (MEMOIZE writes the next one) */
    storage *st;
    int nst, capst;
    tensor *t;
    int nt, capt;
    /* zip: storages are entries "<prefix>/data/<key>" */
    zentry *ze;
    size_t nze;
    const char *prefix;
    size_t prefix_len;
    int legacy;
} pk;

#define NIL UINT32_MAX

static void pk_report(pk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pk_report(pk *k, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (k->start && k->p >= k->start && k->p <= k->end)
        sf_error("%s: pickle byte %zu: %s", k->file, (size_t)(k->p - k->start), msg);
    else
        sf_error("%s: %s", k->file, msg);
}
/* -1, visibly to the compiler (a variadic function is never inlined), so an output that a
 * failing call leaves unset is not taken for one that may be used. */
#define pk_fail(k, ...) ({ pk_report((k), __VA_ARGS__); -1; })

static void *grow(void *p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return p;
    uint32_t c = *cap ? *cap : 16;
    while (c < need) c = c > UINT32_MAX / 2 ? need : 2 * c;
    *cap = c;
    return sf_realloc(p, (size_t)c * elem);
}

static uint32_t new_val(pk *k, vkind kind) {
    k->v = grow(k->v, &k->capv, k->nv + 1, sizeof(val));
    memset(&k->v[k->nv], 0, sizeof(val));
    k->v[k->nv].kind = kind;
    return k->nv++;
}

static uint32_t new_int(pk *k, vkind kind, int64_t i) {
    uint32_t x = new_val(k, kind);
    k->v[x].i = i;
    return x;
}

static uint32_t new_str(pk *k, vkind kind, const unsigned char *s, size_t len) {
    uint32_t x = new_val(k, kind);
    k->v[x].s = sf_malloc(len + 1);
    memcpy(k->v[x].s, s, len);
    k->v[x].s[len] = 0;
    k->v[x].len = (uint32_t)len;
    return x;
}

static void seq_push(pk *k, uint32_t seq, uint32_t item) {
    val *s = &k->v[seq];
    s->items = grow(s->items, &s->cap, s->n + 1, sizeof(uint32_t));
    s->items[s->n++] = item;
}

static void push(pk *k, uint32_t x) {
    k->stack = grow(k->stack, &k->capstack, k->nstack + 1, sizeof(uint32_t));
    k->stack[k->nstack++] = x;
}

static int pop(pk *k, uint32_t *x) {
    uint32_t floor = k->nmarks ? k->marks[k->nmarks - 1] : 0;
    if (k->nstack <= floor) return pk_fail(k, "the pickle stack is empty (corrupt pickle)");
    *x = k->stack[--k->nstack];
    return 0;
}

static int top(pk *k, uint32_t *x) {
    if (pop(k, x) != 0) return -1;
    k->nstack++;
    return 0;
}

/* The items above the last MARK: [*first, nstack). */
static int pop_mark(pk *k, uint32_t *first) {
    if (!k->nmarks) return pk_fail(k, "an opcode needs a MARK that is not there (corrupt pickle)");
    *first = k->marks[--k->nmarks];
    return 0;
}

/* ---- reading the pickle ---- */

static int need(pk *k, size_t n) {
    if ((size_t)(k->end - k->p) < n)
        return pk_fail(k, "the pickle ends inside an opcode (needs %zu more bytes, %zu left): the file is truncated", n,
                       (size_t)(k->end - k->p));
    return 0;
}

static uint64_t rd_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A text argument up to the next newline (protocol 0 opcodes). */
static int rd_line(pk *k, const unsigned char **s, size_t *len) {
    *s = k->p;
    *len = 0;
    const unsigned char *nl = memchr(k->p, '\n', (size_t)(k->end - k->p));
    if (!nl) return pk_fail(k, "a text opcode has no end of line: the file is truncated");
    *s = k->p;
    *len = (size_t)(nl - k->p);
    k->p = nl + 1;
    return 0;
}

static const struct {
    const char *name;
    sf_dtype dtype;
} storage_types[] = {
    {"FloatStorage", SF_DTYPE_F32}, {"DoubleStorage", SF_DTYPE_F64}, {"HalfStorage", SF_DTYPE_F16},
    {"BFloat16Storage", SF_DTYPE_BF16}, {"LongStorage", SF_DTYPE_I64}, {"IntStorage", SF_DTYPE_I32},
    {"ShortStorage", SF_DTYPE_I16}, {"CharStorage", SF_DTYPE_I8}, {"ByteStorage", SF_DTYPE_U8},
    {"BoolStorage", SF_DTYPE_BOOL},
};

static uint32_t new_global(pk *k, const char *mod, size_t mlen, const char *name, size_t nlen) {
    uint32_t x = new_val(k, V_GLOBAL);
    val *g = &k->v[x];
    g->s = sf_malloc(mlen + nlen + 2);
    memcpy(g->s, mod, mlen);
    g->s[mlen] = '.';
    memcpy(g->s + mlen + 1, name, nlen);
    g->s[mlen + nlen + 1] = 0;
    const char *full = g->s;
    static const struct {
        const char *name;
        gid id;
    } known[] = {
        {"collections.OrderedDict", G_ORDERED_DICT},
        {"torch._utils._rebuild_tensor_v2", G_REBUILD_TENSOR_V2},
        {"torch._utils._rebuild_tensor", G_REBUILD_TENSOR},
        {"torch._utils._rebuild_parameter", G_REBUILD_PARAM},
        {"torch._utils._rebuild_parameter_with_state", G_REBUILD_PARAM_STATE},
        {"torch._tensor._rebuild_from_type_v2", G_REBUILD_FROM_TYPE_V2},
        {"torch.Tensor", G_TENSOR_TYPE},
        {"torch.nn.parameter.Parameter", G_TENSOR_TYPE},
    };
    g->gid = G_OTHER;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(full, known[i].name)) g->gid = known[i].id;
    if (mlen == 5 && !memcmp(mod, "torch", 5))
        for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
            if (!strcmp(full + 6, storage_types[i].name)) {
                g->gid = G_STORAGE;
                g->dtype = storage_types[i].dtype;
            }
    return x;
}

/* ---- building the whitelisted objects ---- */

static int as_int(const pk *k, uint32_t x, int64_t *out) {
    if (k->v[x].kind != V_INT && k->v[x].kind != V_BOOL) return -1;
    *out = k->v[x].i;
    return 0;
}

static int zip_compressed(pk *k, const zentry *e) {
    k->start = NULL;
    return pk_fail(k, "zip entry %.*s is compressed (method %u%s); torch.save writes stored entries", (int)e->name_len,
                   e->name, e->method, e->method == 8 ? ", deflate" : "");
}

static const zentry *zip_find(const pk *k, const char *key) {
    size_t klen = strlen(key);
    for (size_t i = 0; i < k->nze; i++) {
        const zentry *e = &k->ze[i];
        if (e->name_len == k->prefix_len + 6 + klen && !memcmp(e->name, k->prefix, k->prefix_len) &&
            !memcmp(e->name + k->prefix_len, "/data/", 6) && !memcmp(e->name + k->prefix_len + 6, key, klen))
            return e;
    }
    return NULL;
}

/* Legacy storages are shared by key: the data section fills each key once. */
static int find_storage(const pk *k, const char *key) {
    for (int i = 0; i < k->nst; i++)
        if (!strcmp(k->st[i].key, key)) return i;
    return -1;
}

/* BINPERSID: ('storage', torch.<Type>Storage, key, location, numel[, view_metadata]). */
static int persistent_load(pk *k, uint32_t pid, uint32_t *out) {
    const val *t = &k->v[pid];
    if (t->kind != V_TUPLE || t->n < 5 || k->v[t->items[0]].kind != V_STR || strcmp(k->v[t->items[0]].s, "storage"))
        return pk_fail(k, "a persistent id that is not ('storage', type, key, location, size)");
    const val *ty = &k->v[t->items[1]], *key = &k->v[t->items[2]];
    int64_t numel;
    if (ty->kind != V_GLOBAL || ty->gid != G_STORAGE)
        return pk_fail(k, "storage of type %s: only torch.<Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool>"
                          "Storage are read",
                       ty->kind == V_GLOBAL ? ty->s : "(not a class)");
    if (key->kind != V_STR || as_int(k, t->items[4], &numel) != 0 || numel < 0)
        return pk_fail(k, "a storage with a bad key or size");
    if (t->n > 5 && k->v[t->items[5]].kind != V_NONE) /* (view key, offset, size): PyTorch < 0.4 */
        return pk_fail(k, "storage '%s' is a view of another storage (PyTorch < 0.4): not read", key->s);
    size_t es = sf_dtype_size((sf_dtype)ty->dtype);
    if ((uint64_t)numel > (uint64_t)SIZE_MAX / es || (uint64_t)numel * es > k->size)
        return pk_fail(k, "storage '%s' claims %lld elements, more than the file holds", key->s, (long long)numel);
    int idx = k->legacy ? find_storage(k, key->s) : -1;
    if (idx >= 0 && (k->st[idx].dtype != ty->dtype || k->st[idx].numel != (uint64_t)numel))
        return pk_fail(k, "storage '%s' appears with two different types or sizes", key->s);
    if (idx < 0) {
        const unsigned char *data = NULL;
        if (!k->legacy) {
            const zentry *e = zip_find(k, key->s);
            if (!e) return pk_fail(k, "storage '%s' has no entry %.*s/data/%s in the zip", key->s, (int)k->prefix_len,
                                   k->prefix, key->s);
            if (e->method) return zip_compressed(k, e);
            if (e->size < (uint64_t)numel * es)
                return pk_fail(k, "storage '%s' needs %llu bytes but its zip entry holds %llu: the file is corrupt",
                               key->s, (unsigned long long)((uint64_t)numel * es), (unsigned long long)e->size);
            data = k->buf + e->data;
        }
        uint32_t cap = (uint32_t)k->capst;
        k->st = grow(k->st, &cap, (uint32_t)k->nst + 1, sizeof(storage));
        k->capst = (int)cap;
        k->st[k->nst] = (storage){.dtype = ty->dtype, .key = sf_strdup(key->s), .numel = (uint64_t)numel, .data = data};
        idx = k->nst++;
    }
    *out = new_int(k, V_STORAGE, idx);
    return 0;
}

/* A tuple of at most SF_ST_MAX_DIMS non-negative ints. */
static int int_tuple(pk *k, uint32_t x, int64_t *v, int *n, const char *what) {
    const val *t = &k->v[x];
    if (t->kind != V_TUPLE) return pk_fail(k, "tensor %s is not a tuple", what);
    if (t->n > SF_ST_MAX_DIMS) return pk_fail(k, "tensor with %u dimensions (at most %d are read)", t->n, SF_ST_MAX_DIMS);
    for (uint32_t i = 0; i < t->n; i++)
        if (as_int(k, t->items[i], &v[i]) != 0 || v[i] < 0) return pk_fail(k, "tensor %s holds a bad value", what);
    *n = (int)t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) or
 * _rebuild_tensor(storage, offset, size, stride). The view must lie inside its storage. */
static int rebuild_tensor(pk *k, const val *args, uint32_t *out) {
    if (args->n < 4) return pk_fail(k, "_rebuild_tensor with %u arguments", args->n);
    const val *s = &k->v[args->items[0]];
    if (s->kind != V_STORAGE) return pk_fail(k, "a tensor rebuilt from something that is not a storage");
    tensor t = {.storage = (int)s->i};
    int nstride;
    if (as_int(k, args->items[1], &t.offset) != 0 || t.offset < 0) return pk_fail(k, "tensor with a bad storage offset");
    if (int_tuple(k, args->items[2], t.shape, &t.ndim, "size") || int_tuple(k, args->items[3], t.stride, &nstride, "stride"))
        return -1;
    if (nstride != t.ndim) return pk_fail(k, "tensor with %d sizes but %d strides", t.ndim, nstride);
    const storage *st = &k->st[t.storage];
    uint64_t numel = 1, last = (uint64_t)t.offset;
    for (int d = 0; d < t.ndim; d++) {
        uint64_t step;
        if (t.shape[d] && __builtin_mul_overflow(numel, (uint64_t)t.shape[d], &numel))
            return pk_fail(k, "tensor shape overflows");
        if (t.shape[d] == 0) numel = 0;
        if (t.shape[d] && (__builtin_mul_overflow((uint64_t)(t.shape[d] - 1), (uint64_t)t.stride[d], &step) ||
                           __builtin_add_overflow(last, step, &last)))
            return pk_fail(k, "tensor strides overflow");
    }
    if (numel > st->numel)
        return pk_fail(k, "tensor of %llu elements in storage '%s' of %llu: broadcast views are not read",
                       (unsigned long long)numel, st->key, (unsigned long long)st->numel);
    if (numel && last >= st->numel)
        return pk_fail(k, "tensor reaches element %llu of storage '%s', which has %llu: the offsets lie",
                       (unsigned long long)last, st->key, (unsigned long long)st->numel);
    t.numel = numel;
    uint32_t cap = (uint32_t)k->capt;
    k->t = grow(k->t, &cap, (uint32_t)k->nt + 1, sizeof(tensor));
    k->capt = (int)cap;
    k->t[k->nt] = t;
    *out = new_int(k, V_TENSOR, k->nt++);
    return 0;
}

/* REDUCE of a whitelisted global; anything else becomes an opaque object. */
static int call_global(pk *k, uint32_t fn, uint32_t args, uint32_t *out) {
    const val *f = &k->v[fn], *a = &k->v[args];
    if (f->kind != V_GLOBAL || a->kind != V_TUPLE) {
        *out = new_val(k, V_OPAQUE);
        return 0;
    }
    switch ((gid)f->gid) {
    case G_ORDERED_DICT:
        *out = new_val(k, a->n == 0 ? V_DICT : V_OPAQUE);
        return 0;
    case G_REBUILD_TENSOR_V2:
    case G_REBUILD_TENSOR:
        return rebuild_tensor(k, a, out);
    case G_REBUILD_PARAM:
    case G_REBUILD_PARAM_STATE: /* (data, requires_grad, hooks[, state]): the data tensor */
        if (a->n < 1 || k->v[a->items[0]].kind != V_TENSOR) return pk_fail(k, "_rebuild_parameter without a tensor");
        *out = a->items[0];
        return 0;
    case G_REBUILD_FROM_TYPE_V2: /* (func, type, args, state): func(*args) */
        if (a->n < 3) return pk_fail(k, "_rebuild_from_type_v2 with %u arguments", a->n);
        if (k->v[a->items[0]].kind == V_GLOBAL && k->v[a->items[0]].gid == G_REBUILD_FROM_TYPE_V2)
            return pk_fail(k, "_rebuild_from_type_v2 calls itself");
        return call_global(k, a->items[0], a->items[2], out);
    default:
        *out = new_val(k, V_OPAQUE);
        return 0;
    }
}

/* ---- the machine ---- */

static int memo_put(pk *k, uint64_t idx) {
    uint32_t x;
    if (top(k, &x) != 0) return -1;
    /* Real pickles number memo slots 0, 1, 2, ...; a slot far beyond the opcodes read so far is a lie. */
    if (idx > (uint64_t)(k->p - k->start) + 16) return pk_fail(k, "memo slot %llu is absurd", (unsigned long long)idx);
    if (idx >= k->nmemo) {
        uint32_t old = k->nmemo, cap = k->nmemo;
        k->memo = grow(k->memo, &cap, (uint32_t)idx + 1, sizeof(uint32_t));
        for (uint32_t i = old; i < cap; i++) k->memo[i] = NIL;
        k->nmemo = cap;
    }
    if (k->memo[idx] == NIL) k->memo_count++;
    k->memo[idx] = x;
    return 0;
}

/* A decimal memo index of a text opcode; garbage gives an index memo_put / memo_get refuse. */
static uint64_t text_index(const unsigned char *s, size_t len) {
    uint64_t v = 0;
    if (len == 0 || len > 18) return UINT64_MAX;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return UINT64_MAX;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    return v;
}

static int memo_get(pk *k, uint64_t idx) {
    if (idx >= k->nmemo || k->memo[idx] == NIL) return pk_fail(k, "memo slot %llu is read before it is written", (unsigned long long)idx);
    push(k, k->memo[idx]);
    return 0;
}

static int push_int_text(pk *k, const unsigned char *s, size_t len) {
    char buf[32];
    if (len == 2 && (s[0] == '0') && (s[1] == '0' || s[1] == '1')) { /* INT "00" / "01": False / True */
        push(k, new_int(k, V_BOOL, s[1] == '1'));
        return 0;
    }
    if (len && s[len - 1] == 'L') len--; /* LONG "123L" */
    if (len == 0 || len >= sizeof buf) {
        push(k, new_val(k, V_OPAQUE));
        return 0;
    }
    memcpy(buf, s, len);
    buf[len] = 0;
    char *e;
    errno = 0;
    long long v = strtoll(buf, &e, 10);
    if (*e || errno) push(k, new_val(k, V_OPAQUE));
    else push(k, new_int(k, V_INT, v));
    return 0;
}

/* LONG1 / LONG4: little-endian two's complement; wider than 64 bits is opaque. */
static void push_long(pk *k, const unsigned char *s, size_t n) {
    if (n > 8) {
        push(k, new_val(k, V_OPAQUE));
        return;
    }
    uint64_t v = n ? rd_le(s, (int)n) : 0;
    if (n && n < 8 && (s[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);
    push(k, new_int(k, V_INT, (int64_t)v));
}

static int make_tuple(pk *k, uint32_t first) {
    uint32_t t = new_val(k, V_TUPLE);
    for (uint32_t i = first; i < k->nstack; i++) seq_push(k, t, k->stack[i]);
    k->nstack = first;
    push(k, t);
    return 0;
}

static int op_tuple_n(pk *k, uint32_t n) {
    uint32_t floor = k->nmarks ? k->marks[k->nmarks - 1] : 0;
    if (k->nstack < floor + n) return pk_fail(k, "TUPLE%u with %u items on the stack", n, k->nstack - floor);
    return make_tuple(k, k->nstack - n);
}

/* APPEND(S) / SETITEM(S) / ADDITEMS: into a list, set (a list here) or dict; other targets
 * (an opaque object's extend) drop the items. */
static int add_items(pk *k, uint32_t first, int pairs) {
    if (first == 0 || first > k->nstack) return pk_fail(k, "no container under the items");
    uint32_t c = k->stack[first - 1];
    uint32_t n = k->nstack - first;
    if (pairs && n % 2) return pk_fail(k, "SETITEMS with an odd number of items");
    vkind want = pairs ? V_DICT : V_LIST;
    if (k->v[c].kind == want)
        for (uint32_t i = first; i < k->nstack; i++) seq_push(k, c, k->stack[i]);
    else if (k->v[c].kind != V_OPAQUE)
        return pk_fail(k, "%s into something that is not a %s", pairs ? "SETITEM" : "APPEND", pairs ? "dict" : "list");
    k->nstack = first;
    return 0;
}

/* Runs one pickle from k->p to its STOP; *root is the value left on the stack. */
static int run_pickle(pk *k, uint32_t *root) {
    k->start = k->p;
    k->nstack = k->nmarks = 0;
    for (uint32_t i = 0; i < k->nmemo; i++) k->memo[i] = NIL;
    k->memo_count = 0;
    while (k->p < k->end) {
        const unsigned char op = *k->p++;
        const unsigned char *s = NULL;
        size_t len = 0;
        uint32_t a = 0, b = 0, c = 0, first = 0;
        int64_t i64;
        switch (op) {
        case 0x80: /* PROTO */
            if (need(k, 1)) return -1;
            if (*k->p > 5) return pk_fail(k, "pickle protocol %d (at most 5 is read)", *k->p);
            k->p++;
            break;
        case 0x95: /* FRAME: a length hint */
            if (need(k, 8)) return -1;
            k->p += 8;
            break;
        case '.': /* STOP */
            if (pop(k, root)) return -1;
            return 0;
        case '(': /* MARK */
            k->marks = grow(k->marks, &k->capmarks, k->nmarks + 1, sizeof(uint32_t));
            k->marks[k->nmarks++] = k->nstack;
            break;
        case '0': /* POP */
            if (k->nmarks && k->marks[k->nmarks - 1] == k->nstack) k->nmarks--; /* pops a mark */
            else if (pop(k, &a)) return -1;
            break;
        case '1': /* POP_MARK */
            if (pop_mark(k, &first)) return -1;
            k->nstack = first;
            break;
        case '2': /* DUP */
            if (top(k, &a)) return -1;
            push(k, a);
            break;
        case 'N': push(k, new_val(k, V_NONE)); break;
        case 0x88: push(k, new_int(k, V_BOOL, 1)); break;
        case 0x89: push(k, new_int(k, V_BOOL, 0)); break;
        case 'J': /* BININT */
            if (need(k, 4)) return -1;
            push(k, new_int(k, V_INT, (int32_t)rd_le(k->p, 4)));
            k->p += 4;
            break;
        case 'K': /* BININT1 */
            if (need(k, 1)) return -1;
            push(k, new_int(k, V_INT, *k->p++));
            break;
        case 'M': /* BININT2 */
            if (need(k, 2)) return -1;
            push(k, new_int(k, V_INT, (int64_t)rd_le(k->p, 2)));
            k->p += 2;
            break;
        case 0x8a: /* LONG1 */
            if (need(k, 1) || need(k, 1 + (size_t)k->p[0])) return -1;
            len = *k->p++;
            push_long(k, k->p, len);
            k->p += len;
            break;
        case 0x8b: /* LONG4 */
            if (need(k, 4)) return -1;
            len = (size_t)rd_le(k->p, 4);
            k->p += 4;
            if (need(k, len)) return -1;
            push_long(k, k->p, len);
            k->p += len;
            break;
        case 'I': case 'L': /* INT, LONG (text) */
            if (rd_line(k, &s, &len)) return -1;
            push_int_text(k, s, len);
            break;
        case 'G': { /* BINFLOAT, big-endian */
            if (need(k, 8)) return -1;
            uint64_t bits = 0;
            for (int j = 0; j < 8; j++) bits = (bits << 8) | k->p[j];
            k->p += 8;
            a = new_val(k, V_FLOAT);
            memcpy(&k->v[a].d, &bits, 8);
            push(k, a);
            break;
        }
        case 'F': /* FLOAT (text) */
            if (rd_line(k, &s, &len)) return -1;
            push(k, new_val(k, V_FLOAT));
            break;
        case 'X': case 'B': case 'T': /* BINUNICODE, BINBYTES, BINSTRING: 4-byte length */
        case 0x8c: case 'C': case 'U': /* SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING */
        case 0x8d: case 0x8e: case 0x96: { /* BINUNICODE8, BINBYTES8, BYTEARRAY8 */
            int w = (op == 0x8c || op == 'C' || op == 'U') ? 1 : (op == 0x8d || op == 0x8e || op == 0x96) ? 8 : 4;
            if (need(k, (size_t)w)) return -1;
            uint64_t n = rd_le(k->p, w);
            k->p += w;
            if (n > (uint64_t)(k->end - k->p)) return pk_fail(k, "a string of %llu bytes runs past the end of the pickle",
                                                            (unsigned long long)n);
            vkind kind = (op == 'X' || op == 0x8c || op == 0x8d || op == 'T' || op == 'U') ? V_STR : V_BYTES;
            push(k, new_str(k, kind, k->p, (size_t)n));
            k->p += n;
            break;
        }
        case 'S': case 'V': /* STRING (quoted text), UNICODE (raw-unicode-escape text) */
            if (rd_line(k, &s, &len)) return -1;
            if (op == 'S' && len >= 2 && (s[0] == '\'' || s[0] == '"') && s[len - 1] == s[0]) {
                s++;
                len -= 2;
            }
            push(k, new_str(k, V_STR, s, len));
            break;
        case ')': push(k, new_val(k, V_TUPLE)); break;
        case 't': /* TUPLE */
            if (pop_mark(k, &first)) return -1;
            make_tuple(k, first);
            break;
        case 0x85: case 0x86: case 0x87: /* TUPLE1..3 */
            if (op_tuple_n(k, (uint32_t)(op - 0x84))) return -1;
            break;
        case ']': case 0x8f: push(k, new_val(k, V_LIST)); break; /* EMPTY_LIST, EMPTY_SET */
        case '}': push(k, new_val(k, V_DICT)); break;
        case 'l': case 0x91: /* LIST, FROZENSET */
        case 'd': /* DICT */
            if (pop_mark(k, &first)) return -1;
            if (op == 'd' && (k->nstack - first) % 2) return pk_fail(k, "DICT with an odd number of items");
            a = new_val(k, op == 'd' ? V_DICT : V_LIST);
            for (uint32_t j = first; j < k->nstack; j++) seq_push(k, a, k->stack[j]);
            k->nstack = first;
            push(k, a);
            break;
        case 'a': /* APPEND */
            if (k->nstack < 2 || (k->nmarks && k->marks[k->nmarks - 1] > k->nstack - 2))
                return pk_fail(k, "APPEND without a list");
            if (add_items(k, k->nstack - 1, 0)) return -1;
            break;
        case 's': /* SETITEM */
            if (k->nstack < 3 || (k->nmarks && k->marks[k->nmarks - 1] > k->nstack - 3))
                return pk_fail(k, "SETITEM without a dict");
            if (add_items(k, k->nstack - 2, 1)) return -1;
            break;
        case 'e': case 0x90: /* APPENDS, ADDITEMS */
            if (pop_mark(k, &first) || add_items(k, first, 0)) return -1;
            break;
        case 'u': /* SETITEMS */
            if (pop_mark(k, &first) || add_items(k, first, 1)) return -1;
            break;
        case 'c': { /* GLOBAL "module\nname\n" */
            const unsigned char *m = NULL, *n = NULL;
            size_t mlen = 0, nlen = 0;
            if (rd_line(k, &m, &mlen) || rd_line(k, &n, &nlen)) return -1;
            push(k, new_global(k, (const char *)m, mlen, (const char *)n, nlen));
            break;
        }
        case 0x93: /* STACK_GLOBAL */
            if (pop(k, &b) || pop(k, &a)) return -1;
            if (k->v[a].kind != V_STR || k->v[b].kind != V_STR) return pk_fail(k, "STACK_GLOBAL of non-strings");
            push(k, new_global(k, k->v[a].s, k->v[a].len, k->v[b].s, k->v[b].len));
            break;
        case 'R': /* REDUCE */
            if (pop(k, &b) || pop(k, &a) || call_global(k, a, b, &c)) return -1;
            push(k, c);
            break;
        case 0x81: /* NEWOBJ: cls.__new__(cls, *args) */
            if (pop(k, &b) || pop(k, &a)) return -1;
            push(k, new_val(k, V_OPAQUE));
            break;
        case 0x92: /* NEWOBJ_EX */
            if (pop(k, &c) || pop(k, &b) || pop(k, &a)) return -1;
            push(k, new_val(k, V_OPAQUE));
            break;
        case 'b': /* BUILD: sets attributes (an OrderedDict's _metadata, an object's __dict__); ignored */
            if (pop(k, &b) || top(k, &a)) return -1;
            break;
        case 'i': { /* INST "module\nname\n": MARK args */
            const unsigned char *m = NULL, *n = NULL;
            size_t mlen = 0, nlen = 0;
            if (rd_line(k, &m, &mlen) || rd_line(k, &n, &nlen) || pop_mark(k, &first)) return -1;
            k->nstack = first;
            push(k, new_val(k, V_OPAQUE));
            break;
        }
        case 'o': /* OBJ: MARK cls args */
            if (pop_mark(k, &first)) return -1;
            k->nstack = first;
            push(k, new_val(k, V_OPAQUE));
            break;
        case 'p': /* PUT (text) */
            if (rd_line(k, &s, &len) || memo_put(k, text_index(s, len))) return -1;
            break;
        case 'q':
            if (need(k, 1) || memo_put(k, *k->p++)) return -1;
            break;
        case 'r':
            if (need(k, 4)) return -1;
            i64 = (int64_t)rd_le(k->p, 4);
            k->p += 4;
            if (memo_put(k, (uint64_t)i64)) return -1;
            break;
        case 0x94: /* MEMOIZE */
            if (memo_put(k, k->memo_count)) return -1;
            break;
        case 'g': /* GET (text) */
            if (rd_line(k, &s, &len) || memo_get(k, text_index(s, len))) return -1;
            break;
        case 'h':
            if (need(k, 1) || memo_get(k, *k->p++)) return -1;
            break;
        case 'j':
            if (need(k, 4)) return -1;
            i64 = (int64_t)rd_le(k->p, 4);
            k->p += 4;
            if (memo_get(k, (uint64_t)i64)) return -1;
            break;
        case 'Q': /* BINPERSID */
            if (pop(k, &a) || persistent_load(k, a, &b)) return -1;
            push(k, b);
            break;
        case 'P': /* PERSID (text) */
            return pk_fail(k, "text persistent ids are not written by torch.save");
        default:
            return pk_fail(k, "unknown or unsupported pickle opcode 0x%02x", op);
        }
    }
    return pk_fail(k, "the pickle has no STOP: the file is truncated");
}

/* ---- the zip container ---- */

/* Central directory entries; zip64 sizes and offsets are read from the 0x0001 extra field. */
static int zip_read_directory(pk *k) {
    const unsigned char *b = k->buf;
    const size_t n = k->size;
    if (n < 22) return pk_fail(k, "a zip of %zu bytes is too short to hold its directory: the file is truncated", n);
    size_t eocd = SIZE_MAX;
    for (size_t i = n - 22 + 1; i-- > 0 && n - i <= 22 + 65535;)
        if (rd_le(b + i, 4) == 0x06054b50) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX) return pk_fail(k, "no zip end-of-directory record: the file is truncated or not a zip");
    uint64_t count = rd_le(b + eocd + 10, 2), cd_size = rd_le(b + eocd + 12, 4), cd_off = rd_le(b + eocd + 16, 4);
    if ((count == 0xffff || cd_off == 0xffffffff) && eocd >= 20 && rd_le(b + eocd - 20, 4) == 0x07064b50) {
        uint64_t z64 = rd_le(b + eocd - 20 + 8, 8);
        if (z64 > n - 56 || n < 56 || rd_le(b + z64, 4) != 0x06064b50) return pk_fail(k, "a broken zip64 end record");
        count = rd_le(b + z64 + 32, 8);
        cd_size = rd_le(b + z64 + 40, 8);
        cd_off = rd_le(b + z64 + 48, 8);
    }
    if (cd_off > n || cd_size > n - cd_off || count > cd_size / 46 + 1)
        return pk_fail(k, "the zip directory (%llu entries at byte %llu) lies outside the file: truncated or corrupt",
                       (unsigned long long)count, (unsigned long long)cd_off);
    k->ze = sf_calloc((size_t)count + 1, sizeof(zentry));
    size_t p = (size_t)cd_off, end = (size_t)(cd_off + cd_size);
    for (uint64_t e = 0; e < count; e++) {
        if (end - p < 46 || rd_le(b + p, 4) != 0x02014b50) return pk_fail(k, "zip directory entry %llu is corrupt", (unsigned long long)e);
        unsigned method = (unsigned)rd_le(b + p + 10, 2);
        uint64_t csize = rd_le(b + p + 20, 4), usize = rd_le(b + p + 24, 4), local = rd_le(b + p + 42, 4);
        size_t nl = (size_t)rd_le(b + p + 28, 2), xl = (size_t)rd_le(b + p + 30, 2), cl = (size_t)rd_le(b + p + 32, 2);
        if (end - p - 46 < nl + xl + cl) return pk_fail(k, "zip directory entry %llu runs past the directory", (unsigned long long)e);
        const unsigned char *name = b + p + 46, *x = name + nl, *xend = x + xl;
        while (xend - x >= 4) { /* zip64 extra: the 0xffffffff fields, in this order */
            unsigned id = (unsigned)rd_le(x, 2), sz = (unsigned)rd_le(x + 2, 2);
            const unsigned char *f = x + 4;
            if ((size_t)(xend - f) < sz) break;
            if (id == 1) {
                const unsigned char *fe = f + sz;
                if (usize == 0xffffffff && fe - f >= 8) usize = rd_le(f, 8), f += 8;
                if (csize == 0xffffffff && fe - f >= 8) csize = rd_le(f, 8), f += 8;
                if (local == 0xffffffff && fe - f >= 8) local = rd_le(f, 8);
            }
            x += 4 + sz;
        }
        if (method == 0 && csize != usize) return pk_fail(k, "zip entry %.*s: stored, yet sizes %llu and %llu differ", (int)nl, name,
                                           (unsigned long long)csize, (unsigned long long)usize);
        if (local > n || n - local < 30 || rd_le(b + local, 4) != 0x04034b50)
            return pk_fail(k, "zip entry %.*s: its local header at byte %llu is missing: truncated or corrupt", (int)nl,
                           name, (unsigned long long)local);
        uint64_t data = local + 30 + rd_le(b + local + 26, 2) + rd_le(b + local + 28, 2);
        if (data > n || (method == 0 ? usize : csize) > n - data)
            return pk_fail(k, "zip entry %.*s (%llu bytes at %llu) runs past the end of the file (%zu bytes): truncated",
                           (int)nl, name, (unsigned long long)usize, (unsigned long long)data, n);
        k->ze[k->nze++] = (zentry){.name = (const char *)name, .name_len = nl, .data = data, .size = usize,
                                   .method = method};
        p += 46 + nl + xl + cl;
    }
    return 0;
}

static int zip_load(pk *k, uint32_t *root) {
    if (zip_read_directory(k)) return -1;
    const zentry *pkl = NULL;
    for (size_t i = 0; i < k->nze && !pkl; i++) {
        const zentry *e = &k->ze[i];
        if (e->name_len >= 8 && !memcmp(e->name + e->name_len - 8, "data.pkl", 8) &&
            (e->name_len == 8 || e->name[e->name_len - 9] == '/'))
            pkl = e;
    }
    if (!pkl) return pk_fail(k, "the zip has no data.pkl: not a torch.save file");
    for (size_t i = 0; i < k->nze; i++) {
        const zentry *e = &k->ze[i];
        if (e->name_len >= 14 && !memcmp(e->name + e->name_len - 14, "/constants.pkl", 14))
            return pk_fail(k, "a TorchScript archive (torch.jit.save): not read; torch.save its state_dict() instead");
    }
    if (pkl->method) return zip_compressed(k, pkl);
    k->prefix = pkl->name;
    k->prefix_len = pkl->name_len > 9 ? pkl->name_len - 9 : 0;
    /* PyTorch >= 2.1 records the byte order of the storages; older files are little-endian. */
    for (size_t i = 0; i < k->nze; i++) {
        const zentry *e = &k->ze[i];
        if (e->name_len == k->prefix_len + 10 && !memcmp(e->name + k->prefix_len, "/byteorder", 10) && !e->method &&
            e->size >= 3 && !memcmp(k->buf + e->data, "big", 3))
            return pk_fail(k, "written on a big-endian machine (byteorder 'big'): not read");
    }
    if (pkl->size > SF_PTH_MAX_PICKLE) return pk_fail(k, "data.pkl of %llu bytes is absurd", (unsigned long long)pkl->size);
    k->p = k->buf + pkl->data;
    k->end = k->p + pkl->size;
    return run_pickle(k, root);
}

/* ---- the legacy stream: magic, protocol, sys_info, object, storage keys, storage data ---- */

static const unsigned char legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                             0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

static const val *dict_get(const pk *k, const val *d, const char *key) {
    for (uint32_t i = 0; d->kind == V_DICT && i + 1 < d->n; i += 2) {
        const val *kv = &k->v[d->items[i]];
        if (kv->kind == V_STR && !strcmp(kv->s, key)) return &k->v[d->items[i + 1]];
    }
    return NULL;
}

static int legacy_load(pk *k, uint32_t *root) {
    k->legacy = 1;
    k->p = k->buf + sizeof legacy_magic;
    k->end = k->buf + (k->size < SF_PTH_MAX_PICKLE ? k->size : SF_PTH_MAX_PICKLE);
    uint32_t proto, info, keys;
    if (run_pickle(k, &proto) || run_pickle(k, &info)) return -1;
    const val *le = dict_get(k, &k->v[info], "little_endian");
    if (k->v[proto].kind != V_INT || k->v[proto].i != 1001)
        return pk_fail(k, "legacy torch.save protocol %lld (1001 is read)", (long long)k->v[proto].i);
    if (le && le->kind == V_BOOL && !le->i) return pk_fail(k, "written on a big-endian machine: not read");
    if (run_pickle(k, root) || run_pickle(k, &keys)) return -1;
    if (k->v[keys].kind != V_LIST) return pk_fail(k, "the legacy storage key list is missing");
    k->start = NULL;
    size_t pos = (size_t)(k->p - k->buf);
    for (uint32_t i = 0; i < k->v[keys].n; i++) {
        const val *key = &k->v[k->v[keys].items[i]];
        int s = key->kind == V_STR ? find_storage(k, key->s) : -1;
        if (s < 0) return pk_fail(k, "legacy storage key %u names no storage of the object", i);
        storage *st = &k->st[s];
        size_t bytes = (size_t)st->numel * sf_dtype_size((sf_dtype)st->dtype);
        if (k->size - pos < 8 || rd_le(k->buf + pos, 8) != st->numel || k->size - pos - 8 < bytes)
            return pk_fail(k, "legacy storage '%s' (%llu elements at byte %zu) is truncated or its size lies", st->key,
                           (unsigned long long)st->numel, pos);
        if (st->data) return pk_fail(k, "legacy storage '%s' appears twice in the data section", st->key);
        st->data = k->buf + pos + 8;
        pos += 8 + bytes;
    }
    for (int i = 0; i < k->nst; i++)
        if (!k->st[i].data) return pk_fail(k, "legacy storage '%s' has no data: the file is truncated", k->st[i].key);
    return 0;
}

/* ---- from the object to named tensors ---- */

typedef struct named {
    char *name;
    int tensor;
} named;

typedef struct walk {
    named *out;
    uint32_t n, cap;
    uint64_t budget; /* node visits left: shared sub-objects must not blow up the walk */
} walk;

static int has_tensors(const pk *k, const val *d) {
    for (uint32_t i = 1; d->kind == V_DICT && i < d->n; i += 2)
        if (k->v[d->items[i]].kind == V_TENSOR) return 1;
    return 0;
}

static int collect(pk *k, uint32_t x, const char *path, int depth, walk *w) {
    const val *v = &k->v[x];
    if (w->budget-- == 0) return pk_fail(k, "the object shares its parts too often to walk (a crafted file?)");
    if (v->kind == V_TENSOR) {
        w->out = grow(w->out, &w->cap, w->n + 1, sizeof(named));
        w->out[w->n++] = (named){.name = sf_strdup(path), .tensor = (int)v->i};
        return 0;
    }
    if (v->kind != V_DICT && v->kind != V_LIST && v->kind != V_TUPLE) return 0;
    if (depth >= SF_PTH_MAX_DEPTH) return pk_fail(k, "the object nests deeper than %d levels", SF_PTH_MAX_DEPTH);
    int pairs = v->kind == V_DICT;
    for (uint32_t i = 0; i < v->n; i += pairs ? 2 : 1) {
        char part[48], *full;
        const char *name = part;
        if (pairs) {
            const val *key = &k->v[v->items[i]];
            if (key->kind == V_STR && strlen(key->s) == key->len) name = key->s;
            else if (key->kind == V_INT) snprintf(part, sizeof part, "%lld", (long long)key->i);
            else continue; /* a key that cannot be a tensor name */
        } else {
            snprintf(part, sizeof part, "%u", i);
        }
        size_t len = strlen(path) + strlen(name) + 2;
        if (len > 4096) return pk_fail(k, "a tensor name longer than 4096 bytes");
        full = sf_malloc(len);
        snprintf(full, len, "%s%s%s", path, *path ? "." : "", name);
        int rc = collect(k, v->items[i + (uint32_t)pairs], full, depth + 1, w);
        free(full);
        if (rc) return -1;
    }
    return 0;
}

/* The weights inside a training checkpoint (see pth.h). */
static uint32_t select_weights(pk *k, uint32_t root, const sf_pth_opts *o, const char **source) {
    static const char *const plain[] = {"state_dict", "model", "model_state_dict", "module", "net", "params",
                                        "model_ema", "state_dict_ema", NULL};
    static const char *const ema[] = {"model_ema", "state_dict_ema", "state_dict", "model", "model_state_dict",
                                      "module", "net", "params", NULL};
    const val *r = &k->v[root];
    *source = "";
    if (o->key) {
        *source = o->key;
        for (uint32_t i = 0; r->kind == V_DICT && i + 1 < r->n; i += 2)
            if (k->v[r->items[i]].kind == V_STR && !strcmp(k->v[r->items[i]].s, o->key)) return r->items[i + 1];
        return NIL;
    }
    if (has_tensors(k, r)) return root;
    for (const char *const *key = o->prefer_ema ? ema : plain; *key; key++)
        for (uint32_t i = 0; r->kind == V_DICT && i + 1 < r->n; i += 2)
            if (k->v[r->items[i]].kind == V_STR && !strcmp(k->v[r->items[i]].s, *key) &&
                has_tensors(k, &k->v[r->items[i + 1]])) {
                *source = *key;
                return r->items[i + 1];
            }
    return root;
}

/* Copies a strided view into dst, element by element in row-major order (one memcpy when
 * the view is contiguous). */
static void gather(const pk *k, const tensor *t, unsigned char *dst) {
    const storage *st = &k->st[t->storage];
    const size_t es = sf_dtype_size((sf_dtype)st->dtype);
    int contiguous = 1;
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) contiguous = 0;
        want *= t->shape[d];
    }
    if (t->numel == 0) return;
    if (contiguous) {
        memcpy(dst, st->data + (size_t)t->offset * es, (size_t)t->numel * es);
        return;
    }
    int64_t idx[SF_ST_MAX_DIMS] = {0};
    for (uint64_t i = 0; i < t->numel; i++) {
        int64_t src = t->offset;
        for (int d = 0; d < t->ndim; d++) src += idx[d] * t->stride[d];
        memcpy(dst + i * es, st->data + (size_t)src * es, es);
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--) idx[d] = 0;
    }
}

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

/* The sf_st_file: one buffer with every selected tensor, contiguous, in the pickle's order. */
static int build_file(pk *k, walk *w, sf_st_file *f, const char *format, const char *source) {
    named *sorted = sf_malloc((w->n ? w->n : 1) * sizeof(named));
    memcpy(sorted, w->out, w->n * sizeof(named));
    qsort(sorted, w->n, sizeof(named), cmp_named);
    for (uint32_t i = 1; i < w->n; i++)
        if (!strcmp(sorted[i].name, sorted[i - 1].name)) {
            pk_fail(k, "tensor name '%s' appears twice", sorted[i].name);
            free(sorted);
            return -1;
        }
    free(sorted);
    uint64_t total = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        const tensor *t = &k->t[w->out[i].tensor];
        total += t->numel * sf_dtype_size((sf_dtype)k->st[t->storage].dtype);
        /* Tensors may share storages; never more than a few copies of the file. */
        if (total > 4 * (uint64_t)k->size + (1u << 20))
            return pk_fail(k, "the tensors would take %llu bytes, far more than the file's %zu (a crafted file?)",
                           (unsigned long long)total, k->size);
    }
    f->buf = sf_malloc(total ? (size_t)total : 1);
    f->size = (size_t)total;
    f->entries = sf_calloc(w->n ? w->n : 1, sizeof(sf_st_entry));
    uint64_t off = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        const tensor *t = &k->t[w->out[i].tensor];
        sf_st_entry *e = &f->entries[i];
        e->name = w->out[i].name;
        w->out[i].name = NULL;
        e->dtype = (sf_dtype)k->st[t->storage].dtype;
        e->ndim = t->ndim;
        memcpy(e->shape, t->shape, sizeof e->shape);
        e->numel = t->numel;
        e->begin = off;
        e->end = off + t->numel * sf_dtype_size(e->dtype);
        e->data = f->buf + off;
        gather(k, t, f->buf + off);
        off = e->end;
        f->n_entries++;
    }
    f->meta = sf_calloc(2, sizeof(sf_st_meta));
    f->meta[0] = (sf_st_meta){sf_strdup("pth.format"), sf_strdup(format)};
    f->meta[1] = (sf_st_meta){sf_strdup("pth.source"), sf_strdup(source)};
    f->n_meta = 2;
    return 0;
}

static void pk_free(pk *k) {
    for (uint32_t i = 0; i < k->nv; i++) {
        free(k->v[i].s);
        free(k->v[i].items);
    }
    for (int i = 0; i < k->nst; i++) free(k->st[i].key);
    free(k->v);
    free(k->stack);
    free(k->marks);
    free(k->memo);
    free(k->st);
    free(k->t);
    free(k->ze);
}

sf_ckpt_format sf_ckpt_sniff(const unsigned char *h, size_t n) {
    if (n >= 4 && !memcmp(h, "PK\x03\x04", 4)) return SF_CKPT_PTH_ZIP;
    if (n >= sizeof legacy_magic && !memcmp(h, legacy_magic, sizeof legacy_magic)) return SF_CKPT_PTH_LEGACY;
    if (n >= 262 && !memcmp(h + 257, "ustar", 5)) return SF_CKPT_PTH_TAR;
    if (n >= 9 && h[8] == '{') return SF_CKPT_SAFETENSORS;
    return SF_CKPT_UNKNOWN;
}

int sf_pth_open_mem(sf_st_file *f, const void *data, size_t size, const char *name, const sf_pth_opts *opts) {
    memset(f, 0, sizeof(*f));
    sf_pth_opts o = {0};
    if (opts) o = *opts;
    pk k = {.file = name, .buf = data, .size = size};
    sf_ckpt_format fmt = sf_ckpt_sniff(data, size);
    uint32_t root;
    int rc;
    if (fmt == SF_CKPT_PTH_ZIP) rc = zip_load(&k, &root);
    else if (fmt == SF_CKPT_PTH_LEGACY) rc = legacy_load(&k, &root);
    else if (fmt == SF_CKPT_PTH_TAR)
        rc = sf_error("%s: a torch.save tar archive (PyTorch < 0.4): not read; load it with torch and torch.save it "
                      "again",
                      name);
    else
        rc = sf_error("%s: not a torch.save file (neither a zip nor a legacy pickle stream)", name);
    if (rc == 0) {
        const char *source;
        uint32_t sel = select_weights(&k, root, &o, &source);
        walk w = {.budget = 4 * (uint64_t)k.nv + 64};
        k.start = NULL;
        if (sel == NIL) rc = sf_error("%s: has no top-level key '%s'", name, o.key);
        else rc = collect(&k, sel, "", 0, &w);
        if (rc == 0 && w.n == 0) rc = sf_error("%s: holds no tensors%s%s", name, *source ? " under " : "", source);
        if (rc == 0) {
            f->path = sf_strdup(name);
            rc = build_file(&k, &w, f, fmt == SF_CKPT_PTH_ZIP ? "zip" : "legacy", source);
        }
        for (uint32_t i = 0; i < w.n; i++) free(w.out[i].name);
        free(w.out);
    }
    pk_free(&k);
    if (rc != 0) {
        sf_st_close(f);
        return -1;
    }
    return 0;
}

int sf_pth_open(sf_st_file *f, const char *path, const sf_pth_opts *opts) {
    memset(f, 0, sizeof(*f));
    unsigned char *buf;
    size_t size;
    if (sf_read_whole_file(path, &buf, &size) != 0) return -1;
    int rc = sf_pth_open_mem(f, buf, size, path, opts);
    free(buf);
    return rc;
}
