/* tensor.c — the arena, tensors, the tape and the parameter store (see tensor.h).
 * Deliberately no reference counting and no views: an arena reset frees a whole step. */
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Under AddressSanitizer the arena marks what nothing may read: a block's memory until it is
 * handed out, a released chunk past its list header, everything after a reset. A read of a
 * released tensor then fails the sanitizer tests wherever the chunk's reuse would not show. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- arena ---- */
static void arena_init(sf_arena *a, size_t block_size) {
    memset(a, 0, sizeof(*a));
    a->block_size = block_size ? block_size : (size_t)64 << 20;
}

static sf_arena_block *arena_new_block(sf_arena *a, size_t min_bytes) {
    size_t size = a->block_size > min_bytes ? a->block_size : min_bytes;
    sf_arena_block *b = sf_malloc(sizeof(*b));
    b->mem = sf_aligned_alloc(size);
    ARENA_POISON(b->mem, size);
    b->size = size;
    b->used = 0;
    b->next = NULL;
    a->capacity += size;
    return b;
}

/* Header written into a released chunk (every chunk is at least 64 bytes). */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size;
} arena_chunk;

/* Bytes a request takes: a multiple of 64, so that every chunk stays 64-byte aligned. */
static size_t chunk_bytes(size_t bytes) {
    const size_t need = (bytes + 63) & ~(size_t)63;
    return need ? need : 64;
}

static void *arena_take(sf_arena *a, void *p, size_t need) {
    ARENA_UNPOISON(p, need);
    a->in_use += need;
    if (a->in_use > a->peak) a->peak = a->in_use;
    return p;
}

/* A released chunk that fits: one of exactly this size (same-shaped tensors recur every
 * block), else the smallest larger one, its rest released again. NULL if none fits. Best fit
 * rather than exact sizes alone: a bf16 copy, a column buffer or a partial sum rarely meets a
 * chunk of its size, and each miss used to take fresh memory, 4 MiB of the Fashion-MNIST
 * model's 30 MiB step and 23 MiB of DeiT-S's 487. */
static void *recycled_fit(sf_arena *a, size_t need) {
    arena_chunk **best = NULL;
    for (arena_chunk **c = (arena_chunk **)&a->recycled; *c; c = &(*c)->next) {
        if ((*c)->size == need) {
            best = c;
            break;
        }
        if ((*c)->size > need && (!best || (*c)->size < (*best)->size)) best = c;
    }
    if (!best) return NULL;
    arena_chunk *c = *best;
    *best = c->next;
    if (c->size > need) {
        arena_chunk *rest = (arena_chunk *)((char *)c + need);
        ARENA_UNPOISON(rest, sizeof *rest);
        rest->size = c->size - need;
        rest->next = a->recycled;
        a->recycled = rest;
    }
    return c;
}

void *sf_arena_alloc(sf_arena *a, size_t bytes) {
    const size_t need = chunk_bytes(bytes);
    if (a->limit && a->in_use + need > a->limit) {
        fprintf(stderr,
                "sfvit: error: activation arena overflow: %zu bytes needed, %zu available "
                "(limit %zu)\n",
                a->in_use + need, a->limit - a->in_use, a->limit);
        exit(2);
    }
    void *p = recycled_fit(a, need);
    if (p) return arena_take(a, p, need);
    /* Walk forward through kept blocks before asking for a new one: after the first step
     * every allocation is served by blocks that already exist. */
    if (!a->first) a->first = a->head = arena_new_block(a, need);
    while (a->head->used + need > a->head->size) {
        if (!a->head->next) a->head->next = arena_new_block(a, need);
        a->head = a->head->next;
    }
    p = a->head->mem + a->head->used;
    a->head->used += need;
    return arena_take(a, p, need);
}

void *sf_arena_calloc(sf_arena *a, size_t bytes) {
    void *p = sf_arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

static void arena_reset(sf_arena *a) {
    for (sf_arena_block *b = a->first; b; b = b->next) {
        ARENA_POISON(b->mem, b->used);
        b->used = 0;
    }
    a->head = a->first;
    a->in_use = 0;
    a->recycled = NULL;
}

static int arena_owns(const sf_arena *a, const void *p) {
    for (const sf_arena_block *b = a->first; b; b = b->next)
        if ((const char *)p >= b->mem && (const char *)p < b->mem + b->used) return 1;
    return 0;
}

/* Released chunks that end where the current block's free space starts give that space
 * back: the next allocation of any size starts lower. Only chunks of that block: another
 * block's memory may end where this one begins. */
static int at_top(const sf_arena_block *h, const void *p, size_t size) {
    return (const char *)p >= h->mem && (const char *)p + size == h->mem + h->used;
}

static void lower_top(sf_arena *a) {
    sf_arena_block *h = a->head;
    for (int found = 1; found;) {
        found = 0;
        for (arena_chunk **c = (arena_chunk **)&a->recycled; *c; c = &(*c)->next)
            if (at_top(h, *c, (*c)->size)) {
                h->used -= (*c)->size;
                arena_chunk *top = *c;
                *c = top->next;
                ARENA_POISON(top, sizeof *top);
                found = 1;
                break;
            }
    }
}

void sf_arena_release(sf_arena *a, void *p, size_t bytes) {
    const size_t need = chunk_bytes(bytes);
    SF_ASSERT(arena_owns(a, p), "arena_release: %p is not arena memory", p);
    a->in_use -= need;
    arena_chunk *c = p;
    c->size = need;
    c->next = a->recycled;
    a->recycled = c;
    ARENA_POISON((char *)p + sizeof *c, need - sizeof *c);
    if (at_top(a->head, p, need)) lower_top(a);
}

static void arena_free(sf_arena *a) {
    sf_arena_block *b = a->first;
    while (b) {
        sf_arena_block *next = b->next;
        ARENA_UNPOISON(b->mem, b->size);
        free(b->mem);
        free(b);
        b = next;
    }
    memset(a, 0, sizeof(*a));
}

/* ---- context ---- */
void sf_ctx_init(sf_ctx *g, size_t arena_block_bytes) {
    memset(g, 0, sizeof(*g));
    g->arena = sf_calloc(1, sizeof *g->arena);
    arena_init(g->arena, arena_block_bytes);
    g->grad_enabled = 1;
    g->training = 1;
    sf_rng_seed(&g->rng, 0x5f1c2d3e4b5a6978ULL);
}

static void scope_close(sf_ctx *g) {
    if (g->scope_depth == 0) return;
    g->arena = g->outer;
    g->outer = NULL;
    g->scope_depth = 0;
}

void sf_ctx_free(sf_ctx *g) {
    scope_close(g);
    if (g->scratch) arena_free(g->scratch);
    free(g->scratch);
    if (g->arena) arena_free(g->arena);
    free(g->arena);
    free(g->tape);
    memset(g, 0, sizeof(*g));
}

/* Outside a scope g->arena is the context's own arena and g->scratch the scopes'. Their peaks
 * fall at different times; both arenas keep their blocks, so the sum is what is held. */
size_t sf_ctx_arena_in_use(const sf_ctx *g) {
    const sf_arena *own = g->scope_depth ? g->outer : g->arena;
    return own->in_use + (g->scratch ? g->scratch->in_use : 0);
}
size_t sf_ctx_arena_peak(const sf_ctx *g) {
    const sf_arena *own = g->scope_depth ? g->outer : g->arena;
    return own->peak + (g->scratch ? g->scratch->peak : 0);
}

void sf_scope_begin(sf_ctx *g) {
    if (g->grad_enabled) return;
    if (g->scope_depth++ > 0) return;
    if (!g->scratch) {
        g->scratch = sf_calloc(1, sizeof *g->scratch);
        arena_init(g->scratch, g->arena->block_size);
    }
    g->outer = g->arena;
    g->arena = g->scratch;
}

sf_tensor *sf_scope_end(sf_ctx *g, sf_tensor *y, sf_tensor *in) {
    if (g->scope_depth == 0 || --g->scope_depth > 0) return y;
    g->arena = g->outer;
    g->outer = NULL;
    /* released first, so that the output takes its chunk (same size: reused first); only
     * arena memory (not a parameter, not the caller's images) */
    if (in && in->data && in->data != y->data && arena_owns(g->arena, in->data)) sf_tensor_release_data(g, in);
    sf_tensor *kept = sf_tensor_new(g, y->ndim, y->shape);
    memcpy(kept->data, y->data, y->numel * sizeof(float));
    arena_reset(g->scratch);
    return kept;
}

void sf_ctx_reset(sf_ctx *g) {
    scope_close(g);
    if (g->scratch) arena_reset(g->scratch);
    arena_reset(g->arena);
    g->tape_len = 0;
}

/* ---- tensors ---- */
/* A tensor of that shape without its values (data and data16 NULL). */
static sf_tensor *tensor_header(sf_ctx *g, int ndim, const int *shape) {
    SF_ASSERT(ndim >= 1 && ndim <= SF_MAX_DIMS, "ndim %d", ndim);
    sf_tensor *t = sf_arena_alloc(g->arena, sizeof(sf_tensor));
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        SF_ASSERT(shape[i] > 0, "dim %d is %d", i, shape[i]);
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    for (int i = ndim; i < SF_MAX_DIMS; i++) t->shape[i] = 1;
    return t;
}

sf_tensor *sf_tensor_new(sf_ctx *g, int ndim, const int *shape) {
    sf_tensor *t = tensor_header(g, ndim, shape);
    t->data = sf_arena_alloc(g->arena, t->numel * sizeof(float));
    return t;
}

sf_tensor *sf_tensor_new_bf16(sf_ctx *g, int ndim, const int *shape) {
    sf_tensor *t = tensor_header(g, ndim, shape);
    t->data16 = sf_arena_alloc(g->arena, t->numel * sizeof *t->data16);
    return t;
}

sf_tensor *sf_tensor_new1(sf_ctx *g, int d0) { return sf_tensor_new(g, 1, (int[]){d0}); }
sf_tensor *sf_tensor_new2(sf_ctx *g, int d0, int d1) { return sf_tensor_new(g, 2, (int[]){d0, d1}); }
sf_tensor *sf_tensor_new3(sf_ctx *g, int d0, int d1, int d2) {
    return sf_tensor_new(g, 3, (int[]){d0, d1, d2});
}
sf_tensor *sf_tensor_new4(sf_ctx *g, int d0, int d1, int d2, int d3) {
    return sf_tensor_new(g, 4, (int[]){d0, d1, d2, d3});
}

sf_tensor *sf_tensor_like(sf_ctx *g, const sf_tensor *t) { return sf_tensor_new(g, t->ndim, t->shape); }


/* The arena p came from: in an evaluation scope, a tensor from before it lives in the outer one. */
static sf_arena *arena_of(sf_ctx *g, const void *p) {
    return g->scope_depth && !arena_owns(g->arena, p) ? g->outer : g->arena;
}

void sf_tensor_release_data(sf_ctx *g, sf_tensor *t) {
    if (t->data16) {
        sf_arena_release(arena_of(g, t->data16), t->data16, t->numel * sizeof *t->data16);
        t->data16 = NULL;
    }
    if (!t->data) return;
    sf_arena_release(arena_of(g, t->data), t->data, t->numel * sizeof(float));
    t->data = NULL;
}

void sf_tensor_keep_bf16(sf_ctx *g, sf_tensor *t, uint16_t *copy) {
    SF_ASSERT(copy && !t->data16, "keep_bf16: a tensor with bf16 values already, or no copy");
    sf_tensor_release_data(g, t);
    t->data16 = copy;
}

float *sf_grad(sf_ctx *g, sf_tensor *t) {
    SF_ASSERT(!t->grad16, "a gradient held in bf16 alone (an MLP activation's output) has one reader, one writer");
    if (!t->grad) t->grad = sf_arena_calloc(g->arena, t->numel * sizeof(float));
    return t->grad;
}

/* For a backward that writes every element of t's gradient: a gradient
 * that does not exist yet is allocated uninitialized and the op writes it (*accumulate = 0),
 * which saves the zero fill and one read of the buffer; otherwise the op accumulates. */
float *sf_grad_dst(sf_ctx *g, sf_tensor *t, int *accumulate) {
    SF_ASSERT(!t->grad16, "a gradient held in bf16 alone (an MLP activation's output) has one reader, one writer");
    *accumulate = t->grad != NULL;
    if (!t->grad) t->grad = sf_arena_alloc(g->arena, t->numel * sizeof(float));
    return t->grad;
}

const char *sf_shape_str(const sf_tensor *t, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "(");
    for (int i = 0; i < t->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %d" : "%d", t->shape[i]);
    if (used < n) snprintf(buf + used, n - used, ")");
    return buf;
}

int sf_same_shape(const sf_tensor *a, const sf_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* ---- profile: seconds per op, forward (time since the previous tape push, so it is
 * exact for a grad-mode forward made only of ops) and backward ---- */
static int g_profile = -1;
static double g_prof_fwd[SF_MAX_OPS], g_prof_bwd[SF_MAX_OPS], g_prof_last;
static long g_prof_calls[SF_MAX_OPS];

static int profiling(void) {
    if (g_profile < 0) {
        const char *e = getenv("SFVIT_PROFILE");
        g_profile = e && *e && strcmp(e, "0") != 0;
    }
    return g_profile;
}

void sf_profile_mark(void) {
    if (profiling()) g_prof_last = sf_now();
}

void sf_profile_reset(void) {
    memset(g_prof_fwd, 0, sizeof g_prof_fwd);
    memset(g_prof_bwd, 0, sizeof g_prof_bwd);
    memset(g_prof_calls, 0, sizeof g_prof_calls);
}

void sf_profile_report(FILE *f, const char *(*op_name)(int op)) {
    if (!profiling()) return;
    double tf = 0, tb = 0;
    for (int i = 0; i < SF_MAX_OPS; i++) {
        tf += g_prof_fwd[i];
        tb += g_prof_bwd[i];
    }
    fprintf(f, "  %-16s %8s %10s %10s %7s\n", "op", "calls", "fwd ms", "bwd ms", "share");
    for (int i = 1; i < SF_MAX_OPS; i++) {
        if (!g_prof_calls[i]) continue;
        fprintf(f, "  %-16s %8ld %10.1f %10.1f %6.1f%%\n", op_name(i), g_prof_calls[i], 1e3 * g_prof_fwd[i],
                1e3 * g_prof_bwd[i], 100 * (g_prof_fwd[i] + g_prof_bwd[i]) / (tf + tb));
    }
    fprintf(f, "  %-16s %8s %10.1f %10.1f\n", "total", "", 1e3 * tf, 1e3 * tb);
}

/* ---- tape ---- */
int sf_needs_grad(const sf_ctx *g, sf_tensor *const *in, int n_in) {
    if (!g->grad_enabled) return 0;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) return 1;
    return 0;
}

sf_node *sf_tape_record(sf_ctx *g, int op, sf_backward_fn backward, sf_tensor *out, sf_tensor *const *in,
                        int n_in) {
    SF_ASSERT(n_in <= SF_MAX_INPUTS);
    SF_ASSERT(op > 0 && op < SF_MAX_OPS && backward, "op %d", op);
    if (g->tape_len == g->tape_cap) {
        g->tape_cap = g->tape_cap ? 2 * g->tape_cap : 256;
        g->tape = sf_realloc(g->tape, (size_t)g->tape_cap * sizeof(sf_node));
    }
    if (profiling()) {
        double now = sf_now();
        g_prof_fwd[op] += now - g_prof_last;
        g_prof_calls[op]++;
        g_prof_last = now;
    }
    sf_node *n = &g->tape[g->tape_len++];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->backward = backward;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    out->requires_grad = 1;
    return n;
}

static void tape_walk(sf_ctx *g);

void sf_backward(sf_ctx *g, sf_tensor *loss) {
    SF_ASSERT(loss->numel == 1, "backward needs a scalar loss");
    if (!loss->requires_grad) return;
    sf_grad(g, loss)[0] += 1.0f;
    tape_walk(g);
}

void sf_backward_seeded(sf_ctx *g, sf_tensor *t, const float *seed) {
    if (!t->requires_grad) return;
    float *dt = sf_grad(g, t);
    for (size_t i = 0; i < t->numel; i++) dt[i] += seed[i];
    tape_walk(g);
}

/* After a node's backward nothing reads its output's gradient (the output's consumers ran
 * before it), so the buffer returns to the arena, unless an input took it over as its own
 * gradient (sf_add_backward, sf_reshape_backward; released with that input's node then), or
 * it is not arena memory (a caller's buffer). */
static void release_out_grad(sf_ctx *g, sf_node *n) {
    if (n->out->grad16) { /* read by its node alone */
        sf_arena_release(g->arena, n->out->grad16, n->out->numel * sizeof *n->out->grad16);
        n->out->grad16 = NULL;
    }
    float *G = n->out->grad;
    if (!G) return;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && n->in[i]->grad == G) return;
    if (!arena_owns(g->arena, G)) return;
    sf_arena_release(g->arena, G, n->out->numel * sizeof(float));
    n->out->grad = NULL;
}

static void tape_walk(sf_ctx *g) {
    for (int i = g->tape_len - 1; i >= 0; i--) {
        sf_node *n = &g->tape[i];
        if (!n->out->grad && !n->out->grad16) continue; /* nothing flowed into this node's output */
        if (profiling()) {
            double t0 = sf_now();
            n->backward(g, n);
            g_prof_bwd[n->op] += sf_now() - t0;
        } else {
            n->backward(g, n);
        }
        release_out_grad(g, n);
    }
}

/* ---- parameters ---- */
void sf_params_init(sf_params *ps) { memset(ps, 0, sizeof(*ps)); }

void sf_params_free(sf_params *ps) {
    for (int i = 0; i < ps->count; i++) {
        free((char *)ps->list[i].t->name);
        free(ps->list[i].t);
    }
    free(ps->list);
    free(ps->data);
    free(ps->grad);
    free(ps->m);
    free(ps->v);
    memset(ps, 0, sizeof(*ps));
}

sf_tensor *sf_param_add(sf_params *ps, const char *name, int ndim, const int *shape, int flags,
                        sf_init init, float init_arg) {
    SF_ASSERT(!ps->allocated, "parameter %s registered after allocation", name);
    SF_ASSERT(!sf_params_find(ps, name), "duplicate parameter name %s", name);
    if (ps->count == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->list = sf_realloc(ps->list, (size_t)ps->cap * sizeof(sf_param));
    }
    sf_tensor *t = sf_calloc(1, sizeof(sf_tensor));
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < SF_MAX_DIMS; i++) t->shape[i] = 1;
    for (int i = 0; i < ndim; i++) {
        SF_ASSERT(shape[i] > 0, "%s dim %d is %d", name, i, shape[i]);
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->name = sf_strdup(name);
    t->requires_grad = (flags & SF_PARAM_TRAINABLE) != 0;
    sf_param *p = &ps->list[ps->count++];
    p->t = t;
    /* Keep every view 16-float aligned so vector loads never straddle views. */
    p->offset = (ps->total + 15) & ~(size_t)15;
    ps->total = p->offset + t->numel;
    p->flags = flags;
    p->init = init;
    p->init_arg = init_arg;
    return t;
}

void sf_params_alloc(sf_params *ps) {
    SF_ASSERT(!ps->allocated);
    size_t bytes = (ps->total ? ps->total : 1) * sizeof(float);
    ps->data = sf_aligned_alloc(bytes);
    ps->grad = sf_aligned_alloc(bytes);
    ps->m = sf_aligned_alloc(bytes);
    ps->v = sf_aligned_alloc(bytes);
    memset(ps->data, 0, bytes);
    memset(ps->grad, 0, bytes);
    memset(ps->m, 0, bytes);
    memset(ps->v, 0, bytes);
    for (int i = 0; i < ps->count; i++) {
        sf_param *p = &ps->list[i];
        p->t->data = ps->data + p->offset;
        p->t->grad = (p->flags & SF_PARAM_TRAINABLE) ? ps->grad + p->offset : NULL;
    }
    ps->allocated = 1;
}

void sf_params_init_values(sf_params *ps, sf_rng *r) {
    SF_ASSERT(ps->allocated);
    for (int i = 0; i < ps->count; i++) {
        sf_param *p = &ps->list[i];
        float *x = p->t->data;
        size_t n = p->t->numel;
        switch (p->init) {
        case SF_INIT_ZEROS: memset(x, 0, n * sizeof(float)); break;
        case SF_INIT_ONES: for (size_t j = 0; j < n; j++) x[j] = 1.0f; break;
        case SF_INIT_CONST: for (size_t j = 0; j < n; j++) x[j] = p->init_arg; break;
        case SF_INIT_TRUNC_NORMAL:
            for (size_t j = 0; j < n; j++) x[j] = sf_rng_trunc_normal(r, p->init_arg);
            break;
        case SF_INIT_KAIMING_UNIFORM: {
            float bound = 1.0f / sqrtf(p->init_arg);
            for (size_t j = 0; j < n; j++) x[j] = (2.0f * sf_rng_uniform(r) - 1.0f) * bound;
            break;
        }
        }
    }
}

/* Over the OpenMP team in blocks: one thread's memset of DeiT-S's 88 MB of gradients took
 * 6-8 ms a step, as long as half of AdamW's own pass. */
void sf_params_zero_grad(sf_params *ps) {
    if (!ps->allocated) return;
    const long block = 1L << 16, blocks = ((long)ps->total + block - 1) / block;
#pragma omp parallel for schedule(static) if (blocks > 4)
    for (long b = 0; b < blocks; b++) {
        const long at = b * block, n = (long)ps->total - at < block ? (long)ps->total - at : block;
        memset(ps->grad + at, 0, (size_t)n * sizeof(float));
    }
}

sf_param *sf_params_find(sf_params *ps, const char *name) {
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->list[i].t->name, name) == 0) return &ps->list[i];
    return NULL;
}

size_t sf_params_count_trainable(const sf_params *ps) {
    size_t n = 0;
    for (int i = 0; i < ps->count; i++)
        if (ps->list[i].flags & SF_PARAM_TRAINABLE) n += ps->list[i].t->numel;
    return n;
}

