/* tensor.h — tensors, the per-step arena, the tape (autograd) and the parameter store.
 *
 * Tensors are float32, row-major, contiguous, up to 4 dims. Activations and their
 * gradients live in a per-step arena (reset after each step; after the first step no
 * malloc happens). Parameters live in one contiguous buffer with named views; gradients
 * and AdamW moments are parallel buffers with the same offsets.
 *
 * The tape: every op computes its forward at once and, when grad mode is on and an
 * input requires grad, pushes a node {op, inputs, output, saved context}. sf_backward()
 * walks the nodes in reverse and calls each op's hand-written backward, which
 * accumulates (+=) into the inputs' gradients. Once a node's backward has run, its output's
 * gradient is dead and goes back to the arena for reuse.
 *
 * The arena's and the tape's internals (blocks, nodes, recording) are in
 * src/engine_internal.h, for the engine and the ops layer only.
 *
 * One exception to float32: in bf16 precision an op whose output goes only into the next
 * linear layer's bf16 product (the *_to_linear ops) writes that output as bf16 alone
 * (data16, data NULL), so no fp32 copy is written and read back to be converted; and SimA
 * keeps its handed-over q̂, k̂ as its bf16 copies alone (sf_tensor_keep_bf16). Likewise an
 * MLP activation's output gradient, made by fc2's bf16 product, is held in bf16 alone (grad16).
 *
 * Deliberately not here: strides/views (a non-contiguous result is materialized by an
 * explicit op), other dtypes, dynamic graphs across steps.
 */
#ifndef SFVIT_TENSOR_H
#define SFVIT_TENSOR_H

#include "sfvit/core.h"

#include <stdint.h>

#define SF_MAX_DIMS 4

typedef struct sf_tensor {
    float *data;          /* numel floats; NULL once released, or when data16 holds the values */
    uint16_t *data16;     /* numel bf16 values instead of data (a *_to_linear op's output, SimA's
                             q̂, k̂ in bf16: sf_tensor_keep_bf16), or NULL */
    float *grad;          /* same size; NULL until something flows into it */
    uint16_t *grad16;     /* dL/dt in bf16 instead of grad: an MLP activation's output, whose
                             gradient fc2's input-gradient product writes in bf16 and the
                             activation's fused backward alone reads (ops/matmul.c), or NULL */
    int ndim;
    int shape[SF_MAX_DIMS];
    size_t numel;
    int requires_grad;
    const char *name;     /* parameter name (timm state_dict key) or NULL */
} sf_tensor;

/* The arena and the tape are the engine's and the ops layer's (src/engine_internal.h):
 * everything above sees a step context and the counts below. */
struct sf_arena;
struct sf_node;

typedef struct sf_ctx {
    struct sf_arena *arena;   /* the step's activations (engine and ops only) */
    struct sf_node *tape;     /* the recorded nodes (engine and ops only) */
    int tape_len, tape_cap;   /* nodes recorded since the last reset (0 in evaluation) */
    int grad_enabled;     /* record the tape (training / gradient checks) */
    int training;         /* dropout, drop-path active; BatchNorm uses batch statistics */
    sf_rng rng;           /* drop-path / dropout masks */
    /* Sums n doubles over the data-parallel ranks in place, or NULL (one process): BatchNorm
     * in training mode reduces its batch statistics with it (SyncBatchNorm). Set by the
     * trainer (sf_dist_batchnorm_hook), so the ops need nothing from the layers above. */
    void (*sum_over_ranks)(double *buf, int n);
    /* Evaluation scopes (sf_scope_begin/end): the block's arena while one is open, and the
     * arena it replaced. */
    struct sf_arena *scratch, *outer;
    int scope_depth;
} sf_ctx;

void sf_ctx_init(sf_ctx *g, size_t arena_block_bytes);
void sf_ctx_free(sf_ctx *g);
/* Forget the tape and every activation: call after each step. */
void sf_ctx_reset(sf_ctx *g);
/* A block's intermediates without gradients: between sf_scope_begin and sf_scope_end(g, y,
 * in) every tensor goes to a scratch arena; the end gives the block's input `in` back (the
 * caller says nothing reads it after the block; NULL keeps it), copies y (the block's output)
 * into the context's own arena, where it takes the input's place when their shapes match, and
 * empties the scratch for the next block. So an evaluation forward holds about two block
 * outputs and one block's intermediates, not every intermediate of every block. With
 * gradients on (the backward needs them all) both do nothing and y is returned; nested scopes
 * belong to the outermost. */
void sf_scope_begin(sf_ctx *g);
sf_tensor *sf_scope_end(sf_ctx *g, sf_tensor *y, sf_tensor *in);
/* Arena bytes handed out since the last reset, and the most ever (the step's peak); both
 * count the evaluation scopes' scratch arena too. */
size_t sf_ctx_arena_in_use(const sf_ctx *g);
size_t sf_ctx_arena_peak(const sf_ctx *g);

/* New activation tensor in the arena (data uninitialized). Unused trailing dims: pass 0
 * or omit via the helpers below. */
sf_tensor *sf_tensor_new(sf_ctx *g, int ndim, const int *shape);
sf_tensor *sf_tensor_new1(sf_ctx *g, int d0);
sf_tensor *sf_tensor_new2(sf_ctx *g, int d0, int d1);
sf_tensor *sf_tensor_new3(sf_ctx *g, int d0, int d1, int d2);
sf_tensor *sf_tensor_new4(sf_ctx *g, int d0, int d1, int d2, int d3);
/* Same shape as t, uninitialized. */
sf_tensor *sf_tensor_like(sf_ctx *g, const sf_tensor *t);
/* Release an activation's data when no backward reads it (e.g. the fused qkv output once it
 * is split into heads); t->data (and t->data16) become NULL, its shape and gradient stay. */
void sf_tensor_release_data(sf_ctx *g, sf_tensor *t);
/* From now on t's values are copy (t->numel bf16 values from g's arena, t's to release): its
 * fp32 data is released. For a consumer that reads t in bf16 alone while the op that made t
 * reads t's values in its backward (SimA's q̂, k̂: the token normalization reads them). */
void sf_tensor_keep_bf16(sf_ctx *g, sf_tensor *t, uint16_t *copy);
/* The gradient buffer of t, allocated zeroed from the arena on first use. */
float *sf_grad(sf_ctx *g, sf_tensor *t);
/* "(2, 197, 384)" into buf; returns buf. */
const char *sf_shape_str(const sf_tensor *t, char *buf, size_t n);
int sf_same_shape(const sf_tensor *a, const sf_tensor *b);

/* For an op's backward that writes every element of t's gradient: *accumulate = 0 when the
 * buffer is new and uninitialized (write with = / sgemm beta 0), 1 when it already holds
 * gradient (+= / beta 1). Ops that write only part of a gradient use sf_grad() (zeroed). */
float *sf_grad_dst(sf_ctx *g, sf_tensor *t, int *accumulate);

/* Reverse-mode pass from a scalar (numel 1) loss: seeds dloss = 1 and runs every node's
 * backward in reverse order. */
void sf_backward(sf_ctx *g, sf_tensor *loss);
/* Same walk seeded with an arbitrary upstream gradient dL/dt (t->numel floats); used by
 * the gradient checks. */
void sf_backward_seeded(sf_ctx *g, sf_tensor *t, const float *seed);

/* Per-op timing when the environment sets SFVIT_PROFILE=1: sf_profile_mark() starts the
 * clock before a forward; sf_profile_report() prints forward and backward ms per op, named
 * by op_name (sf_op_name of ops.h). */
void sf_profile_mark(void);
void sf_profile_report(FILE *f, const char *(*op_name)(int op));
/* Forgets what was timed so far (work before the steps that are to be reported). */
void sf_profile_reset(void);

/* ---- parameter store ---- */
enum {
    SF_PARAM_DECAY = 1 << 0,      /* AdamW applies weight decay */
    SF_PARAM_TRAINABLE = 1 << 1,  /* has a gradient and optimizer moments */
    SF_PARAM_I64 = 1 << 2,        /* saved as int64 (BatchNorm num_batches_tracked) */
    SF_PARAM_DECAY_OFFICIAL = 1 << 3, /* decayed under the official (timm) mask */
};

typedef enum sf_init {
    SF_INIT_ZEROS = 0,
    SF_INIT_ONES,
    SF_INIT_TRUNC_NORMAL,   /* tn(std): arg = std */
    SF_INIT_KAIMING_UNIFORM,/* U(-1/sqrt(fan_in), +1/sqrt(fan_in)): arg = fan_in */
    SF_INIT_CONST,          /* arg = value */
} sf_init;

typedef struct sf_param {
    sf_tensor *t;         /* stable pointer; data/grad point into the store's buffers */
    size_t offset;        /* in floats, into data/grad/m/v */
    int flags;
    sf_init init;
    float init_arg;
} sf_param;

typedef struct sf_params {
    sf_param *list;
    int count, cap;
    size_t total;         /* floats in every buffer */
    float *data, *grad, *m, *v; /* (total) each; grad/m/v cover non-trainable views too */
    int allocated;
} sf_params;

void sf_params_init(sf_params *ps);
void sf_params_free(sf_params *ps);
/* Register a named view. Data pointers are valid only after sf_params_alloc(). */
sf_tensor *sf_param_add(sf_params *ps, const char *name, int ndim, const int *shape, int flags,
                        sf_init init, float init_arg);
/* Allocate the contiguous buffers and point every view into them. */
void sf_params_alloc(sf_params *ps);
/* Apply every view's init scheme with this generator (in registration order). */
void sf_params_init_values(sf_params *ps, sf_rng *r);
void sf_params_zero_grad(sf_params *ps);
sf_param *sf_params_find(sf_params *ps, const char *name);
size_t sf_params_count_trainable(const sf_params *ps);

#endif
