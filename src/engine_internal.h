/* engine_internal.h — the arena and the tape as the engine (src/tensor.c) and the ops layer
 * (src/ops/, through ops_internal.h) see them: arena blocks and allocation, tape nodes with
 * their saved context and small arguments, recording. Not a public header: the layers above
 * see sf_ctx and its counts (tensor.h) only, and white-box tests include this.
 */
#ifndef SFVIT_ENGINE_INTERNAL_H
#define SFVIT_ENGINE_INTERNAL_H

#include "sfvit/tensor.h"

#define SF_MAX_INPUTS 6

/* ---- arena: chained blocks, kept across resets, 64-byte aligned allocations ---- */
typedef struct sf_arena_block {
    struct sf_arena_block *next;
    size_t size, used;
    char *mem;
} sf_arena_block;

typedef struct sf_arena {
    sf_arena_block *head;   /* block currently allocated from */
    sf_arena_block *first;
    size_t block_size;      /* default size of a new block */
    size_t in_use, peak;    /* bytes handed out since the last reset, and the maximum */
    size_t capacity;        /* bytes reserved over all blocks */
    size_t limit;           /* 0 = unlimited; else an allocation past it is an error */
    void *recycled;         /* released chunks (sf_arena_release), reused exact or best fit */
} sf_arena;

void *sf_arena_alloc(sf_arena *a, size_t bytes);   /* uninitialized */
/* A new activation holding bf16 values only (data16, uninitialized; data NULL): the output of
 * a *_to_linear op in bf16 precision (sf_tensor_for_linear, src/ops/bf16.c). */
sf_tensor *sf_tensor_new_bf16(sf_ctx *g, int ndim, const int *shape);
void *sf_arena_calloc(sf_arena *a, size_t bytes);  /* zeroed */
/* Hand back a chunk nothing will read again (bytes as allocated); a later allocation of the
 * same rounded size reuses it (which keeps the memory cache-hot), else one that fits in it,
 * and a chunk at the top of the current block gives its space back to any size: the step
 * touches little more memory than its peak. */
void sf_arena_release(sf_arena *a, void *p, size_t bytes);

/* ---- the tape ----
 * The engine records nodes and walks them backwards; it knows an op only by its number
 * (for profiling) and its backward function. The ops themselves, their list and table are
 * the ops layer's (ops.h, src/ops/). */
typedef void (*sf_backward_fn)(struct sf_ctx *g, struct sf_node *node);

typedef struct sf_node {
    int op;               /* sf_op (ops.h) */
    sf_backward_fn backward;
    sf_tensor *out;
    sf_tensor *in[SF_MAX_INPUTS];
    int n_in;
    void *saved;          /* op-specific saved context, arena-allocated */
    int iarg[8];          /* small integer arguments (dims, flags) */
    float farg[4];        /* small float arguments (eps, scale, p) */
} sf_node;

/* Whether an op with these inputs must record a node. */
int sf_needs_grad(const sf_ctx *g, sf_tensor *const *in, int n_in);
/* Records a node of op number `op` (< SF_MAX_OPS) whose backward is `backward`;
 * out->requires_grad is set. Returns the node so the op can fill saved/iarg/farg. Call only
 * when sf_needs_grad() said so; ops call it through sf_tape_push (ops.h). */
#define SF_MAX_OPS 64
sf_node *sf_tape_record(sf_ctx *g, int op, sf_backward_fn backward, sf_tensor *out, sf_tensor *const *in,
                        int n_in);

#endif
