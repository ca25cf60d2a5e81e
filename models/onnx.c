/* onnx.c — `sfvit export`: a model as an ONNX graph (opset 17, IR version 8) built from its
 * config and the parameter store, written with the small protobuf encoder (protobuf.h).
 *
 * The graph follows the eval forward of vit.c, xcit.c, soft.c and cvt.c op for op: weights are
 * initializers under their timm names (Linear weights transposed once, named
 * "<name>.T", so a Linear is MatMul + Add), the batch dimension is symbolic ("batch"),
 * BatchNorm uses its running statistics, GELU is its Erf formula 0.5·x·(1 + erf(x/√2))
 * (opset 17 has no Gelu op), LayerNorm is LayerNormalization (opset 17). SimA's product is
 * emitted in the order the eval forward uses (cfg sima_order, `auto` resolved as
 * sf_sima_resolve does), so the graph has no Exp or Softmax where the model has none.
 *
 * SOFT/SOFT++: the Gaussian kernel in its expanded form, the Newton–Raphson iterations
 * unrolled (model.nr_iters of them, master init), SOFT++'s degree normalization; fixed
 * landmarks (pyramid and ViT) as a MatMul with the constant pooling matrix.
 *
 * CvT: convolutional token embeddings, q/k/v through depthwise Conv + BatchNorm on the token
 * grid with the last stage's cls token around them, QuickGELU as x·Sigmoid(1.702x).
 *
 * Deliberately not here: SOFT's paper NR init (a data-dependent loop) and positional
 * embeddings resized in the forward (both refused by name), the NaN guard of sf_nr_pinv for a
 * non-positive row sum, training-only parts (dropout, drop path), any graph optimization
 * (ONNX Runtime folds constants itself).
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, K classes.
 */
#include "models_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/protobuf.h"

/* onnx.proto field numbers (onnx/onnx.proto, IR version 8). */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7,
    MODEL_OPSET_IMPORT = 8,
    OPSET_DOMAIN = 1, OPSET_VERSION = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20,
    ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7,
    TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_INT64_DATA = 7, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9,
    DTYPE_FLOAT = 1, DTYPE_INT64 = 7,
    VALUE_INFO_NAME = 1, VALUE_INFO_TYPE = 2,
    TYPE_TENSOR = 1, TYPE_TENSOR_ELEM_TYPE = 1, TYPE_TENSOR_SHAPE = 2,
    SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
};
#define ONNX_IR_VERSION 8
#define ONNX_OPSET 17

/* One node attribute: an int, a float, or a list of ints. */
typedef struct attr {
    const char *name;
    int type;              /* ATTR_TYPE_* */
    int64_t i;
    float f;
    int n;                 /* ints */
    int64_t ints[6];
} attr;
#define AI(nm, v) ((attr){.name = (nm), .type = ATTR_TYPE_INT, .i = (v)})
#define AF(nm, v) ((attr){.name = (nm), .type = ATTR_TYPE_FLOAT, .f = (v)})
#define AINTS(nm, ...) ((attr){.name = (nm), .type = ATTR_TYPE_INTS, .n = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), .ints = {__VA_ARGS__}})

#define MAX_OP_TYPES 48

/* The graph being built: nodes and initializers as encoded messages, names of values. */
typedef struct graph {
    sf_params *ps;
    sf_pb nodes, inits, tmp, tmp2;
    int n_values;          /* counter for value names t0, t1, ... */
    char **names;          /* every name handed out, freed at the end */
    int n_names, cap_names;
    const char *op_types[MAX_OP_TYPES];
    int op_counts[MAX_OP_TYPES], n_op_types, n_nodes, n_inits;
    size_t init_bytes;
} graph;

static const char *keep_name(graph *g, char *s) {
    if (g->n_names == g->cap_names) {
        g->cap_names = g->cap_names ? 2 * g->cap_names : 256;
        g->names = sf_realloc(g->names, (size_t)g->cap_names * sizeof(char *));
    }
    return g->names[g->n_names++] = s;
}

static const char *new_value(graph *g) {
    char buf[32];
    snprintf(buf, sizeof buf, "t%d", g->n_values++);
    return keep_name(g, sf_strdup(buf));
}

static void count_op(graph *g, const char *type) {
    for (int i = 0; i < g->n_op_types; i++)
        if (!strcmp(g->op_types[i], type)) {
            g->op_counts[i]++;
            return;
        }
    SF_ASSERT(g->n_op_types < MAX_OP_TYPES, "too many ONNX op types");
    g->op_types[g->n_op_types] = type;
    g->op_counts[g->n_op_types++] = 1;
}

/* Appends a node; returns the name of its (single) output. */
static const char *node(graph *g, const char *type, int n_in, const char *const *in, int n_attr, const attr *at) {
    const char *out = new_value(g);
    sf_pb *n = &g->tmp, *a = &g->tmp2;
    sf_pb_reset(n);
    for (int i = 0; i < n_in; i++) sf_pb_string(n, NODE_INPUT, in[i]);
    sf_pb_string(n, NODE_OUTPUT, out);
    char name[48];
    snprintf(name, sizeof name, "%s_%d", type, g->n_nodes);
    sf_pb_string(n, NODE_NAME, name);
    sf_pb_string(n, NODE_OP_TYPE, type);
    for (int i = 0; i < n_attr; i++) {
        sf_pb_reset(a);
        sf_pb_string(a, ATTR_NAME, at[i].name);
        sf_pb_varint(a, ATTR_TYPE, (uint64_t)at[i].type);
        if (at[i].type == ATTR_TYPE_INT) sf_pb_varint(a, ATTR_I, (uint64_t)at[i].i);
        else if (at[i].type == ATTR_TYPE_FLOAT) sf_pb_float(a, ATTR_F, at[i].f);
        else
            for (int j = 0; j < at[i].n; j++) sf_pb_varint(a, ATTR_INTS, (uint64_t)at[i].ints[j]);
        sf_pb_message(n, NODE_ATTRIBUTE, a);
    }
    sf_pb_message(&g->nodes, GRAPH_NODE, n);
    g->n_nodes++;
    count_op(g, type);
    return out;
}
#define N_ARGS(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *))
#define OP(g, type, ...) node((g), (type), N_ARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__}, 0, NULL)
#define OPA(g, type, attrs, ...) \
    node((g), (type), N_ARGS(__VA_ARGS__), (const char *[]){__VA_ARGS__}, (int)(sizeof(attrs) / sizeof(attr)), (attrs))

/* ---- initializers ---- */

static void add_init(graph *g, const char *name, int dtype, int ndim, const int64_t *dims, const void *data,
                     size_t bytes) {
    sf_pb *t = &g->tmp;
    sf_pb_reset(t);
    for (int d = 0; d < ndim; d++) sf_pb_varint(t, TENSOR_DIMS, (uint64_t)dims[d]);
    sf_pb_varint(t, TENSOR_DATA_TYPE, (uint64_t)dtype);
    sf_pb_string(t, TENSOR_NAME, name);
    sf_pb_bytes(t, TENSOR_RAW_DATA, data, bytes);  // raw_data is little-endian, as x86/ARM
    sf_pb_message(&g->inits, GRAPH_INITIALIZER, t);
    g->n_inits++;
    g->init_bytes += bytes;
}

static const char *const_f32(graph *g, float v) {
    char buf[48];
    snprintf(buf, sizeof buf, "const.f%d", g->n_values++);
    const char *name = keep_name(g, sf_strdup(buf));
    add_init(g, name, DTYPE_FLOAT, 0, NULL, &v, sizeof v);
    return name;
}

/* An int64 tensor: a scalar when n < 0 (one value), else a 1-D list of n values. */
static const char *const_i64(graph *g, int n, const int64_t *v) {
    char buf[48];
    snprintf(buf, sizeof buf, "const.i%d", g->n_values++);
    const char *name = keep_name(g, sf_strdup(buf));
    int64_t dims[1] = {n};
    add_init(g, name, DTYPE_INT64, n < 0 ? 0 : 1, dims, v, (size_t)(n < 0 ? 1 : n) * sizeof(int64_t));
    return name;
}
#define I64S(g, ...) const_i64((g), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define I64SCALAR(g, v) const_i64((g), -1, (int64_t[]){(v)})

static sf_tensor *param(graph *g, const char *name) {
    sf_param *p = sf_params_find(g->ps, name);
    SF_ASSERT(p, "ONNX export: parameter %s not registered", name);
    return p->t;
}

/* A parameter as an initializer under its own name and shape. */
static const char *weight(graph *g, const char *name) {
    sf_tensor *t = param(g, name);
    int64_t dims[SF_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) dims[d] = t->shape[d];
    add_init(g, t->name, DTYPE_FLOAT, t->ndim, dims, t->data, t->numel * sizeof(float));
    return t->name;
}

/* ---- modules ---- */

static const char *fmt(char *buf, size_t n, const char *prefix, const char *suffix) {
    snprintf(buf, n, "%s%s", prefix, suffix);
    return buf;
}

/* timm Linear y = x Wᵀ + b: Wᵀ stored once as "<prefix>.weight.T". */
static const char *linear(graph *g, const char *prefix, const char *x) {
    char n[256];
    sf_tensor *w = param(g, fmt(n, sizeof n, prefix, ".weight"));
    const int O = w->shape[0], I = w->shape[1];
    float *wt = sf_malloc((size_t)O * I * sizeof(float));  // (I, O)
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) wt[(size_t)i * O + o] = w->data[(size_t)o * I + i];
    const char *wt_name = keep_name(g, sf_strdup(fmt(n, sizeof n, prefix, ".weight.T")));
    add_init(g, wt_name, DTYPE_FLOAT, 2, (int64_t[]){I, O}, wt, (size_t)O * I * sizeof(float));
    free(wt);
    const char *y = OP(g, "MatMul", x, wt_name);
    return OP(g, "Add", y, weight(g, fmt(n, sizeof n, prefix, ".bias")));
}

static const char *layernorm(graph *g, const char *prefix, const char *x, float eps) {
    char a[256], b[256];
    attr at[] = {AI("axis", -1), AF("epsilon", eps)};
    return OPA(g, "LayerNormalization", at, x, weight(g, fmt(a, sizeof a, prefix, ".weight")),
               weight(g, fmt(b, sizeof b, prefix, ".bias")));
}

static const char *batchnorm(graph *g, const char *prefix, const char *x) {
    char a[256], b[256], m[256], v[256];
    attr at[] = {AF("epsilon", 1e-5f)};
    return OPA(g, "BatchNormalization", at, x, weight(g, fmt(a, sizeof a, prefix, ".weight")),
               weight(g, fmt(b, sizeof b, prefix, ".bias")), weight(g, fmt(m, sizeof m, prefix, ".running_mean")),
               weight(g, fmt(v, sizeof v, prefix, ".running_var")));
}

static const char *conv(graph *g, const char *prefix, const char *x, int k, int stride, int pad, int groups, int bias) {
    char a[256], b[256];
    attr at[] = {AINTS("kernel_shape", k, k), AINTS("strides", stride, stride), AINTS("pads", pad, pad, pad, pad),
                 AI("group", groups)};
    const char *w = weight(g, fmt(a, sizeof a, prefix, ".weight"));
    if (bias) return OPA(g, "Conv", at, x, w, weight(g, fmt(b, sizeof b, prefix, ".bias")));
    return OPA(g, "Conv", at, x, w);
}

/* GELU, exact: 0.5·x·(1 + erf(x·(1/√2))), as sf_gelu. */
static const char *gelu(graph *g, const char *x) {
    const char *e = OP(g, "Erf", OP(g, "Mul", x, const_f32(g, (float)M_SQRT1_2)));
    return OP(g, "Mul", OP(g, "Mul", x, const_f32(g, 0.5f)), OP(g, "Add", e, const_f32(g, 1.0f)));
}

/* GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as sf_gelu_tanh. */
static const char *gelu_tanh(graph *g, const char *x) {
    const char *x3 = OP(g, "Mul", OP(g, "Mul", x, x), x);
    const char *u = OP(g, "Mul", OP(g, "Add", x, OP(g, "Mul", x3, const_f32(g, 0.044715f))),
                       const_f32(g, 0.79788456080286535588f));
    return OP(g, "Mul", OP(g, "Mul", x, const_f32(g, 0.5f)), OP(g, "Add", OP(g, "Tanh", u), const_f32(g, 1.0f)));
}

/* QuickGELU: x·sigmoid(1.702·x), as sf_quick_gelu (CvT's activation). */
static const char *quick_gelu(graph *g, const char *x) {
    return OP(g, "Mul", x, OP(g, "Sigmoid", OP(g, "Mul", x, const_f32(g, 1.702f))));
}

static const char *act(graph *g, sf_act a, const char *x) {
    switch (a) {  // no default: a new activation is a -Wswitch warning until it has a case
    case SF_ACT_GELU: return gelu(g, x);
    case SF_ACT_RELU: return OP(g, "Relu", x);
    case SF_ACT_QUICK_GELU: return quick_gelu(g, x);
    case SF_ACT_COUNT: break;
    }
    SF_ASSERT(0, "activation %d", (int)a);
    return NULL;
}

static const char *mlp(graph *g, const char *prefix, sf_act a, const char *x) {
    char f1[256], f2[256];
    return linear(g, fmt(f2, sizeof f2, prefix, "fc2"), act(g, a, linear(g, fmt(f1, sizeof f1, prefix, "fc1"), x)));
}

static const char *transpose(graph *g, const char *x, int64_t p0, int64_t p1, int64_t p2, int64_t p3, int nd) {
    attr at3[] = {AINTS("perm", p0, p1, p2)}, at4[] = {AINTS("perm", p0, p1, p2, p3)};
    return nd == 3 ? OPA(g, "Transpose", at3, x) : OPA(g, "Transpose", at4, x);
}

/* Slice of axis `axis` from start to end. */
static const char *slice(graph *g, const char *x, int axis, int start, int end) {
    return OP(g, "Slice", x, I64S(g, start), I64S(g, end), I64S(g, axis));
}

/* x / max(‖x‖_p over tokens, eps): sf_l1norm_tokens / sf_l2norm_tokens on (B, H, N, D). */
static const char *token_norm(graph *g, const char *x, sf_attn_norm norm, float eps) {
    if (norm == SF_NORM_NONE) return x;
    attr at[] = {AINTS("axes", 2), AI("keepdims", 1)};
    const char *s = norm == SF_NORM_L1 ? OPA(g, "ReduceL1", at, x) : OPA(g, "ReduceL2", at, x);
    return OP(g, "Div", x, OP(g, "Max", s, const_f32(g, eps)));
}

/* (B, N, parts·C) -> parts tensors (B, H, N, D) from a fused output with order
 * [parts][H][D] (sf_heads_split); one part is a plain head split. */
static void split_heads(graph *g, const char *x, int parts, int H, int D, const char **out) {
    if (parts == 1) {
        out[0] = transpose(g, OP(g, "Reshape", x, I64S(g, 0, 0, H, D)), 0, 2, 1, 3, 4);
        return;
    }
    const char *r = OP(g, "Reshape", x, I64S(g, 0, 0, parts, H, D));  // (B, N, parts, H, D)
    attr at[] = {AINTS("perm", 2, 0, 3, 1, 4)};
    const char *t = OPA(g, "Transpose", at, r);                        // (parts, B, H, N, D)
    attr ax[] = {AI("axis", 0)};
    for (int i = 0; i < parts; i++) out[i] = OPA(g, "Gather", ax, t, I64SCALAR(g, i));
}

static void split_qkv(graph *g, const char *qkv, int H, int D, const char **q, const char **k, const char **v) {
    const char *o[3];
    split_heads(g, qkv, 3, H, D, o);
    *q = o[0];
    *k = o[1];
    *v = o[2];
}

/* (B, H, N, D) -> (B, N, H·D). */
static const char *merge_heads(graph *g, const char *o) {
    return OP(g, "Reshape", transpose(g, o, 0, 2, 1, 3, 4), I64S(g, 0, 0, -1));
}

/* softmax(scale · q kᵀ) v over (B, H, Nq, D) x (B, H, N, D). */
static const char *msa(graph *g, const char *q, const char *k, const char *v, float scale) {
    const char *s = OP(g, "Mul", OP(g, "MatMul", q, transpose(g, k, 0, 1, 3, 2, 4)), const_f32(g, scale));
    attr ax[] = {AI("axis", -1)};
    return OP(g, "MatMul", OPA(g, "Softmax", ax, s), v);
}

/* SimA product in the given order: (q̂ k̂ᵀ) v or q̂ (k̂ᵀ v). */
static const char *sima(graph *g, const char *qn, const char *kn, const char *v, sf_sima_order order) {
    const char *kt = transpose(g, kn, 0, 1, 3, 2, 4);
    if (order == SF_SIMA_QK_FIRST) return OP(g, "MatMul", OP(g, "MatMul", qn, kt), v);
    return OP(g, "MatMul", qn, OP(g, "MatMul", kt, v));
}

/* XCA (sf_xca): q̂, k̂ l2-normalized over tokens; P = softmax(τ q̂ᵀ k̂) over key channels;
 * out = v Pᵀ, all per (B, H). */
static const char *xca(graph *g, const char *prefix, const char *q, const char *k, const char *v) {
    char t[256];
    const char *qn = token_norm(g, q, SF_NORM_L2, 1e-12f), *kn = token_norm(g, k, SF_NORM_L2, 1e-12f);
    const char *cm = OP(g, "MatMul", transpose(g, qn, 0, 1, 3, 2, 4), kn);  // (B, H, D, D)
    const char *a = OP(g, "Mul", cm, weight(g, fmt(t, sizeof t, prefix, "temperature")));
    attr ax[] = {AI("axis", -1)};
    const char *p = OPA(g, "Softmax", ax, a);
    return OP(g, "MatMul", v, transpose(g, p, 0, 1, 3, 2, 4));
}

static const char *soft_vit_mix(graph *g, const sf_model_cfg *c, const char *prefix, const char *q, const char *v);

/* mdl_attn_fwd: qkv (soft: q, v) -> heads -> {msa, sima, xca, soft} -> merge -> proj. N: tokens. */
static const char *attention(graph *g, const sf_model_cfg *c, sf_attn_kind kind, const char *prefix, const char *x,
                             int C, int N) {
    char qkv_name[256], proj_name[256];
    const int H = c->num_heads, D = C / H;
    const char *q, *k, *v, *o = NULL;
    if (kind == SF_ATTN_SOFT) {  // K = Q
        split_heads(g, linear(g, fmt(qkv_name, sizeof qkv_name, prefix, "q"), x), 1, H, D, &q);
        split_heads(g, linear(g, fmt(qkv_name, sizeof qkv_name, prefix, "v"), x), 1, H, D, &v);
        k = q;
    } else {
        split_qkv(g, linear(g, fmt(qkv_name, sizeof qkv_name, prefix, "qkv"), x), H, D, &q, &k, &v);
    }
    switch (kind) {
    case SF_ATTN_MSA: o = msa(g, q, k, v, 1.0f / sqrtf((float)D)); break;
    case SF_ATTN_XCA: o = xca(g, prefix, q, k, v); break;
    case SF_ATTN_SIMA:
        o = sima(g, token_norm(g, q, c->attn_norm, 1e-12f), token_norm(g, k, c->attn_norm, 1e-12f), v,
                 sf_sima_resolve(c->sima_order, N, D));
        break;
    case SF_ATTN_SOFT: o = soft_vit_mix(g, c, prefix, q, v); break;
    /* no default: a kind added to the list without its graph here is a -Wswitch warning,
     * which the warnings stage of tests/run.sh turns into a failure */
    case SF_ATTN_COUNT: SF_ASSERT(0, "attention kind %d in a ViT/XCiT block", (int)kind);
    }
    return linear(g, fmt(proj_name, sizeof proj_name, prefix, "proj"), merge_heads(g, o));
}

/* (B, C, h, w) -> (B, h·w, C). */
static const char *tokens_from_image(graph *g, const char *x, int C) {
    return transpose(g, OP(g, "Reshape", x, I64S(g, 0, C, -1)), 0, 2, 1, 0, 3);
}

/* (B, h·w, C) -> (B, C, h, w). */
static const char *image_from_tokens(graph *g, const char *x, int C, int h, int w) {
    return OP(g, "Reshape", transpose(g, x, 0, 2, 1, 0, 3), I64S(g, 0, C, h, w));
}

/* The cls token `name` (1, 1, C) repeated over the batch of `images` and put before x. */
static const char *prepend_cls(graph *g, const char *name, const char *images, const char *x, int C) {
    attr sh[] = {AI("start", 0), AI("end", 1)};
    const char *batch = OPA(g, "Shape", sh, images);                      // (1): B
    attr ax0[] = {AI("axis", 0)};
    const char *shape = OPA(g, "Concat", ax0, batch, I64S(g, 1, C));      // [B, 1, C]
    const char *cls = OP(g, "Expand", weight(g, name), shape);            // (B, 1, C)
    attr ax1[] = {AI("axis", 1)};
    return OPA(g, "Concat", ax1, cls, x);
}

/* ---- families ---- */

static const char *vit_graph(graph *g, const sf_model_cfg *c, const char *images) {
    const int C = c->embed_dim, G = c->img_size / c->patch_size, N = G * G + 1;
    char p[128];
    const char *x = tokens_from_image(g, conv(g, "patch_embed.proj", images, c->patch_size, c->patch_size, 0, 1, 1), C);
    x = prepend_cls(g, "cls_token", images, x, C);
    x = OP(g, "Add", x, weight(g, "pos_embed"));
    for (int i = 0; i < c->depth; i++) {
        snprintf(p, sizeof p, "blocks.%d.norm1", i);
        const char *a = layernorm(g, p, x, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.attn.", i);
        x = OP(g, "Add", x, attention(g, c, mdl_block_attn(c, i), p, a, C, N));
        snprintf(p, sizeof p, "blocks.%d.norm2", i);
        const char *m = layernorm(g, p, x, 1e-6f);
        snprintf(p, sizeof p, "blocks.%d.mlp.", i);
        x = OP(g, "Add", x, mlp(g, p, c->act, m));
    }
    x = layernorm(g, "norm", x, 1e-6f);
    const char *pooled;  // (B, C)
    if (c->global_pool == SF_POOL_AVG) {
        attr at[] = {AINTS("axes", 1), AI("keepdims", 0)};
        pooled = OPA(g, "ReduceMean", at, slice(g, x, 1, 1, N));
    } else {
        attr ax[] = {AI("axis", 1)};
        pooled = OPA(g, "Gather", ax, x, I64SCALAR(g, 0));
    }
    return linear(g, "head", pooled);
}

/* XCiT class attention (xcit.c ca_forward): only the cls row attends. x (B, N+1, C). */
static const char *xcit_class_attention(graph *g, const sf_model_cfg *c, int j, const char *x, int N1) {
    const int C = c->embed_dim, H = c->num_heads, D = C / H;
    char p[128], q2[160];
    snprintf(p, sizeof p, "cls_attn_blocks.%d.", j);
    const char *u = layernorm(g, fmt(q2, sizeof q2, p, "norm1"), x, 1e-6f);
    const char *q, *k, *v, *o;
    split_qkv(g, linear(g, fmt(q2, sizeof q2, p, "attn.qkv"), u), H, D, &q, &k, &v);
    if (c->attn == SF_ATTN_SIMA) {
        const char *qn = token_norm(g, q, c->attn_norm, 1e-6f), *kn = token_norm(g, k, c->attn_norm, 1e-6f);
        o = sima(g, slice(g, qn, 2, 0, 1), kn, v, SF_SIMA_QK_FIRST);  // one query row: the cheaper order
    } else {
        o = msa(g, slice(g, q, 2, 0, 1), k, v, 1.0f / sqrtf((float)D));
    }
    const char *cls = linear(g, fmt(q2, sizeof q2, p, "attn.proj"), merge_heads(g, o));  // (B, 1, C)
    attr ax1[] = {AI("axis", 1)};
    const char *att = OPA(g, "Concat", ax1, cls, slice(g, u, 1, 1, N1));
    x = OP(g, "Add", x, OP(g, "Mul", att, weight(g, fmt(q2, sizeof q2, p, "gamma1"))));
    x = layernorm(g, fmt(q2, sizeof q2, p, "norm2"), x, 1e-6f);
    const char *mc = OP(g, "Mul", mlp(g, fmt(q2, sizeof q2, p, "mlp."), c->act, slice(g, x, 1, 0, 1)),
                        weight(g, fmt(q2, sizeof q2, p, "gamma2")));
    return OP(g, "Add", x, OPA(g, "Concat", ax1, mc, slice(g, x, 1, 1, N1)));
}

static const char *xcit_graph(graph *g, const sf_model_cfg *c, const char *images) {
    const int C = c->embed_dim, units = c->patch_size == 16 ? 4 : 3, Hp = c->img_size / c->patch_size, N = Hp * Hp;
    char p[128], q2[160];
    const char *h = images;
    for (int u = 0; u < units; u++) {
        snprintf(p, sizeof p, "patch_embed.proj.%d.0", 2 * u);
        h = conv(g, p, h, 3, 2, 1, 1, 0);
        snprintf(p, sizeof p, "patch_embed.proj.%d.1", 2 * u);
        h = batchnorm(g, p, h);
        if (u < units - 1) h = gelu(g, h);
    }
    const char *t = tokens_from_image(g, h, C);
    /* The Fourier features depend on the grid only: a constant, projected by the 1x1 conv. */
    float *four = sf_malloc((size_t)64 * N * sizeof(float));  // (1, 64, Hp, Hp)
    mdl_xcit_fourier(four, Hp, Hp);
    add_init(g, "pos_embeder.fourier_features", DTYPE_FLOAT, 4, (int64_t[]){1, 64, Hp, Hp}, four,
             (size_t)64 * N * sizeof(float));
    free(four);
    const char *pos = conv(g, "pos_embeder.token_projection", "pos_embeder.fourier_features", 1, 1, 0, 1, 1);
    t = OP(g, "Add", t, tokens_from_image(g, pos, C));
    for (int i = 0; i < c->depth; i++) {
        snprintf(p, sizeof p, "blocks.%d.", i);
        const char *a = attention(g, c, mdl_block_attn(c, i), fmt(q2, sizeof q2, p, "attn."),
                                  layernorm(g, fmt(q2, sizeof q2, p, "norm1"), t, 1e-6f), C, N);
        t = OP(g, "Add", t, OP(g, "Mul", a, weight(g, fmt(q2, sizeof q2, p, "gamma1"))));
        if (c->lpi) {  // conv -> GELU -> BN -> conv, on the token grid
            const char *l = layernorm(g, fmt(q2, sizeof q2, p, "norm3"), t, 1e-6f);
            l = image_from_tokens(g, l, C, Hp, Hp);
            l = gelu(g, conv(g, fmt(q2, sizeof q2, p, "local_mp.conv1"), l, 3, 1, 1, C, 1));
            l = batchnorm(g, fmt(q2, sizeof q2, p, "local_mp.bn"), l);
            l = tokens_from_image(g, conv(g, fmt(q2, sizeof q2, p, "local_mp.conv2"), l, 3, 1, 1, C, 1), C);
            t = OP(g, "Add", t, OP(g, "Mul", l, weight(g, fmt(q2, sizeof q2, p, "gamma3"))));
        }
        const char *f = mlp(g, fmt(q2, sizeof q2, p, "mlp."), c->act, layernorm(g, fmt(q2, sizeof q2, p, "norm2"), t, 1e-6f));
        t = OP(g, "Add", t, OP(g, "Mul", f, weight(g, fmt(q2, sizeof q2, p, "gamma2"))));
    }
    t = prepend_cls(g, "cls_token", images, t, C);
    for (int j = 0; j < c->cls_attn_layers; j++) t = xcit_class_attention(g, c, j, t, N + 1);
    t = layernorm(g, "norm", t, 1e-6f);
    attr ax[] = {AI("axis", 1)};
    return linear(g, "head", OPA(g, "Gather", ax, t, I64SCALAR(g, 0)));
}


/* ---- SOFT / SOFT++ (soft.c) ---- */

/* Gaussian kernel (sf_gauss_kernel, c = 1): S_ij = exp(−(‖q_i‖² + ‖l_j‖² − 2 q_i·l_j) / 2),
 * the distance in the same expanded form. q (B, H, n, D), l (B, H, M, D) -> (B, H, n, M). */
static const char *gauss_kernel(graph *g, const char *q, const char *l) {
    attr at[] = {AINTS("axes", -1), AI("keepdims", 1)};
    const char *qn = OPA(g, "ReduceSumSquare", at, q);                                     // (B, H, n, 1)
    const char *ln = transpose(g, OPA(g, "ReduceSumSquare", at, l), 0, 1, 3, 2, 4);        // (B, H, 1, M)
    const char *dot = OP(g, "MatMul", q, transpose(g, l, 0, 1, 3, 2, 4));                  // (B, H, n, M)
    const char *d = OP(g, "Sub", OP(g, "Add", qn, ln), OP(g, "Mul", dot, const_f32(g, 2.0f)));
    return OP(g, "Exp", OP(g, "Mul", d, const_f32(g, -0.5f)));
}

/* Newton–Raphson pseudo-inverse, master init (sf_nr_pinv): P = A + 0.01 I,
 * alpha = 0.9·2 / (max row sum of A)², V₀ = alpha P, V ← 2V − V(PV), unrolled `iters` times.
 * a (B, H, M, M). */
static const char *nr_pinv(graph *g, const char *a, int M, int iters) {
    float *eye = sf_calloc((size_t)M * M, sizeof(float));  // (M, M) 0.01 I
    for (int i = 0; i < M; i++) eye[(size_t)i * M + i] = 0.01f;
    char name[48];
    snprintf(name, sizeof name, "const.eye%d", g->n_values++);
    const char *eye_name = keep_name(g, sf_strdup(name));
    add_init(g, eye_name, DTYPE_FLOAT, 2, (int64_t[]){M, M}, eye, (size_t)M * M * sizeof(float));
    free(eye);
    const char *p = OP(g, "Add", a, eye_name);
    const char *rows = OP(g, "ReduceSum", a, I64S(g, -1));                       // (B, H, M, 1)
    attr mx[] = {AINTS("axes", -2), AI("keepdims", 1)};
    const char *rmax = OPA(g, "ReduceMax", mx, rows);                             // (B, H, 1, 1)
    const char *alpha = OP(g, "Div", const_f32(g, 0.9f * 2.0f), OP(g, "Mul", rmax, rmax));
    const char *v = OP(g, "Mul", p, alpha);
    for (int k = 0; k < iters; k++) {
        const char *t = OP(g, "MatMul", p, v);
        v = OP(g, "Sub", OP(g, "Mul", v, const_f32(g, 2.0f)), OP(g, "MatMul", v, t));
    }
    return v;
}

/* SOFT++ (sf_soft_symnorm): D^−½ NR(A) D^−½ with d = A·1 from A itself. */
static const char *soft_symnorm(graph *g, const char *a, int M, int iters) {
    const char *y = nr_pinv(g, a, M, iters);
    const char *u = OP(g, "Reciprocal", OP(g, "Sqrt", OP(g, "ReduceSum", a, I64S(g, -1))));  // (B, H, M, 1)
    return OP(g, "Mul", OP(g, "Mul", u, y), transpose(g, u, 0, 1, 3, 2, 4));
}

/* Fixed landmarks (mdl_soft_pool_landmarks): the constant pooling matrix P (M, skip + Hs·Ws)
 * times Q (B, H, skip + Hs·Ws, D) -> (B, H, M, D), MatMul broadcasting P over (B, H). */
static const char *soft_pool_landmarks(graph *g, const char *Q, int Hs, int Ws, int hs, int ws, int skip) {
    const int M = hs * ws, n = skip + Hs * Ws;
    float *P = sf_malloc((size_t)M * n * sizeof(float));
    mdl_soft_pool_matrix(P, Hs, Ws, hs, ws, skip);
    char name[48];
    snprintf(name, sizeof name, "const.pool%d", g->n_values++);
    const char *p_name = keep_name(g, sf_strdup(name));
    add_init(g, p_name, DTYPE_FLOAT, 2, (int64_t[]){M, n}, P, (size_t)M * n * sizeof(float));
    free(P);
    return OP(g, "MatMul", p_name, Q);
}

/* mdl_soft_attend: (K1 Z)(K1ᵀ V), Q and V (B, H, n, D), L (B, H, M, D). */
static const char *soft_attend(graph *g, const sf_model_cfg *c, const char *Q, const char *V, const char *L, int M) {
    const char *K1 = gauss_kernel(g, Q, L), *K2 = gauss_kernel(g, L, L);
    const char *Z = c->attn_norm == SF_NORM_SYMMETRIC ? soft_symnorm(g, K2, M, c->nr_iters) : nr_pinv(g, K2, M, c->nr_iters);
    const char *T = OP(g, "MatMul", transpose(g, K1, 0, 1, 3, 2, 4), V);                       // (B, H, M, D)
    return OP(g, "MatMul", OP(g, "MatMul", K1, Z), T);                                          // (B, H, n, D)
}

/* The soft kind in a ViT block (soft.c soft_mix): landmarks pooled from the patch grid, the
 * cls token (token 0) a query and a value only. q, v (B, H, N, D). */
static const char *soft_vit_mix(graph *g, const sf_model_cfg *c, const char *prefix, const char *q, const char *v) {
    char name[256];
    const int G = c->img_size / c->patch_size, D = c->embed_dim / c->num_heads, side = mdl_soft_landmark_side(c, G);
    const char *Q = OP(g, "Mul", q, const_f32(g, 1.0f / sqrtf(sqrtf((float)D))));
    const char *L = soft_pool_landmarks(g, Q, G, G, side, side, 1);
    L = gelu(g, layernorm(g, fmt(name, sizeof name, prefix, "Qnorm_act.0"), L, 1e-5f));
    return soft_attend(g, c, Q, v, L, side * side);
}

/* One SOFT layer (soft_layer_fwd with soft_core) on x (B, n, C) of an Hs x Ws grid. */
static const char *soft_layer(graph *g, const sf_model_cfg *c, int st, int i, const char *x, int Hs, int Ws) {
    static const int ratio[3] = {8, 4, 2}, vconv[3] = {9, 5, 3};  // soft.c soft_ratio / soft_vconv
    const int C = c->embed_dims[st], H = c->stage_heads[st], D = C / H, n = Hs * Ws;
    const int fixed = c->soft_landmarks == SF_LANDMARKS_FIXED, r = ratio[st];
    const int hs = fixed ? mdl_soft_landmark_side(c, Hs) : (Hs - r) / r + 1;
    const int ws = fixed ? mdl_soft_landmark_side(c, Ws) : (Ws - r) / r + 1, M = hs * ws;
    char p[128], q2[192];
    snprintf(p, sizeof p, "block%d.%d.att.", st + 1, i);
    const char *Q, *V;
    split_heads(g, linear(g, fmt(q2, sizeof q2, p, "mha.W_q"), x), 1, H, D, &Q);
    split_heads(g, linear(g, fmt(q2, sizeof q2, p, "mha.W_v"), x), 1, H, D, &V);
    Q = OP(g, "Mul", Q, const_f32(g, 1.0f / sqrtf(sqrtf((float)D))));                        // (B, H, n, D)
    const char *L;
    if (fixed) {
        L = soft_pool_landmarks(g, Q, Hs, Ws, hs, ws, 0);
    } else {
        const char *li = OP(g, "Reshape", transpose(g, Q, 0, 1, 3, 2, 4), I64S(g, -1, D, Hs, Ws)); // (B·H, D, Hs, Ws)
        li = conv(g, fmt(q2, sizeof q2, p, "mha.attn.Qlandmark_op"), li, r, r, 0, 1, 0);           // (B·H, D, hs, ws)
        L = transpose(g, OP(g, "Reshape", li, I64S(g, -1, H, D, M)), 0, 1, 3, 2, 4);               // (B, H, M, D)
    }
    L = gelu(g, layernorm(g, fmt(q2, sizeof q2, p, "mha.attn.Qnorm_act.0"), L, 1e-5f));
    const char *X = soft_attend(g, c, Q, V, L, M);                                              // (B, H, n, D)
    /* V conv: V as (B·D, H, Hs, Ws), one kernel per head shared over D */
    const int k = vconv[st];
    const char *vc = OP(g, "Reshape", transpose(g, V, 0, 3, 1, 2, 4), I64S(g, -1, H, Hs, Ws));
    vc = conv(g, fmt(q2, sizeof q2, p, "mha.attn.conv"), vc, k, 1, k / 2, H, 0);
    vc = transpose(g, OP(g, "Reshape", vc, I64S(g, -1, D, H, n)), 0, 2, 3, 1, 4);              // (B, H, n, D)
    const char *a = linear(g, fmt(q2, sizeof q2, p, "mha.ff"), merge_heads(g, OP(g, "Add", X, vc)));
    const char *h = layernorm(g, fmt(q2, sizeof q2, p, "norm1"), OP(g, "Add", a, x), 1e-5f);
    const char *f = linear(g, fmt(q2, sizeof q2, p, "ff2"), gelu_tanh(g, linear(g, fmt(q2, sizeof q2, p, "ff1"), h)));
    return layernorm(g, fmt(q2, sizeof q2, p, "norm2"), OP(g, "Add", f, h), 1e-5f);
}

/* Stage 4 block (block4_fwd): pre-norm softmax MSA with separate q and kv Linears. */
static const char *soft_block4(graph *g, const sf_model_cfg *c, int i, const char *x) {
    const int C = c->embed_dims[3], H = c->stage_heads[3], D = C / H;
    char p[64], q2[128];
    snprintf(p, sizeof p, "block4.%d.", i);
    const char *u = layernorm(g, fmt(q2, sizeof q2, p, "norm1"), x, 1e-6f);
    const char *q, *kv[2];
    split_heads(g, linear(g, fmt(q2, sizeof q2, p, "attn.q"), u), 1, H, D, &q);
    split_heads(g, linear(g, fmt(q2, sizeof q2, p, "attn.kv"), u), 2, H, D, kv);
    const char *o = msa(g, q, kv[0], kv[1], 1.0f / sqrtf((float)D));
    x = OP(g, "Add", x, linear(g, fmt(q2, sizeof q2, p, "attn.proj"), merge_heads(g, o)));
    return OP(g, "Add", x, mlp(g, fmt(q2, sizeof q2, p, "mlp."), c->act, layernorm(g, fmt(q2, sizeof q2, p, "norm2"), x, 1e-6f)));
}

static int conv_out(int size, int k, int stride, int pad) { return (size + 2 * pad - k) / stride + 1; }

static const char *soft_graph(graph *g, const sf_model_cfg *c, const char *images) {
    char p[64];
    const char *h = images;
    int side = c->img_size;
    static const int stem_stride[3] = {2, 1, 2};
    for (int u = 0; u < 3; u++) {
        snprintf(p, sizeof p, "patch_embed1.proj.%d", 3 * u);
        h = conv(g, p, h, 3, stem_stride[u], 1, 1, 1);
        snprintf(p, sizeof p, "patch_embed1.proj.%d", 3 * u + 1);
        h = OP(g, "Relu", batchnorm(g, p, h));
        side = conv_out(side, 3, stem_stride[u], 1);
    }
    const char *x = NULL;
    for (int st = 0; st < 4; st++) {
        const int C = c->embed_dims[st];
        if (st > 0) {
            h = image_from_tokens(g, x, c->embed_dims[st - 1], side, side);
            snprintf(p, sizeof p, "patch_embed%d.proj.0", st + 1);
            h = conv(g, p, h, 3, 2, 1, 1, 1);
            snprintf(p, sizeof p, "patch_embed%d.proj.1", st + 1);
            h = OP(g, "Relu", batchnorm(g, p, h));
            side = conv_out(side, 3, 2, 1);
        }
        x = tokens_from_image(g, h, C);
        snprintf(p, sizeof p, "pos_embed%d", st + 1);
        if (st == 3) x = prepend_cls(g, "cls_token", images, x, C);
        x = OP(g, "Add", x, weight(g, p));
        for (int i = 0; i < c->depths[st]; i++)
            x = st < 3 ? soft_layer(g, c, st, i, x, side, side) : soft_block4(g, c, i, x);
    }
    x = layernorm(g, "norm", x, 1e-6f);
    attr ax[] = {AI("axis", 1)};
    return linear(g, "head", OPA(g, "Gather", ax, x, I64SCALAR(g, 0)));
}

/* ---- CvT (cvt.c) ---- */

/* Depthwise 3x3 conv (no bias) + BatchNorm of the grid image, back to tokens: conv_proj. */
static const char *cvt_conv_proj(graph *g, const char *prefix, const char *which, const char *img, int C, int stride) {
    char n[192]; /* prefix (< 160) + "conv_proj_q.conv"; conv() and batchnorm() append to it in 256 */
    snprintf(n, sizeof n, "%sconv_proj_%s.conv", prefix, which);
    const char *y = conv(g, n, img, 3, stride, 1, C, 0);
    snprintf(n, sizeof n, "%sconv_proj_%s.bn", prefix, which);
    return tokens_from_image(g, batchnorm(g, n, y), C);
}

/* cvt_attn_fwd: x (B, [1+]h·w, C), already normalized; the cls token (if any) bypasses the
 * convolutions. H heads of width C / H, the official scale C^-1/2 for softmax. */
static const char *cvt_attention(graph *g, const sf_model_cfg *c, sf_attn_kind kind, const char *prefix,
                                 const char *x, int C, int H, int h, int w, int has_cls) {
    char n[192]; /* prefix (< 160) + "proj_q"; linear() appends ".weight.T" in 256 */
    const int D = C / H, hk = mdl_cvt_kv_side(h), wk = mdl_cvt_kv_side(w);
    const int Nq = h * w + has_cls, Nk = hk * wk + has_cls;
    const char *grid = has_cls ? slice(g, x, 1, 1, Nq) : x;
    const char *img = image_from_tokens(g, grid, C, h, w);
    const char *q = cvt_conv_proj(g, prefix, "q", img, C, 1), *k = cvt_conv_proj(g, prefix, "k", img, C, 2),
               *v = cvt_conv_proj(g, prefix, "v", img, C, 2);
    if (has_cls) {
        const char *cls = slice(g, x, 1, 0, 1);
        attr ax1[] = {AI("axis", 1)};
        q = OPA(g, "Concat", ax1, cls, q);
        k = OPA(g, "Concat", ax1, cls, k);
        v = OPA(g, "Concat", ax1, cls, v);
    }
    const char *Q, *K, *V, *o;
    split_heads(g, linear(g, fmt(n, sizeof n, prefix, "proj_q"), q), 1, H, D, &Q);
    split_heads(g, linear(g, fmt(n, sizeof n, prefix, "proj_k"), k), 1, H, D, &K);
    split_heads(g, linear(g, fmt(n, sizeof n, prefix, "proj_v"), v), 1, H, D, &V);
    if (kind == SF_ATTN_MSA)
        o = msa(g, Q, K, V, 1.0f / sqrtf((float)C));
    else
        o = sima(g, token_norm(g, Q, c->attn_norm, 1e-12f), token_norm(g, K, c->attn_norm, 1e-12f), V,
                 mdl_cvt_sima_order(c->sima_order, Nq, Nk, D));
    return linear(g, fmt(n, sizeof n, prefix, "proj"), merge_heads(g, o));
}

static const char *cvt_graph(graph *g, const sf_model_cfg *c, const char *images) {
    char p[128], q2[160];
    const char *img = images, *x = NULL;
    int side = c->img_size, i_global = 0;
    for (int s = 0; s < MDL_CVT_STAGES; s++) {
        const int C = c->embed_dims[s], H = c->stage_heads[s], has_cls = s == MDL_CVT_STAGES - 1;
        snprintf(p, sizeof p, "stage%d.patch_embed.proj", s);
        img = conv(g, p, img, mdl_cvt_embed_k[s], mdl_cvt_embed_stride[s], mdl_cvt_embed_pad[s], 1, 1);
        side = mdl_cvt_embed_out(side, s);
        snprintf(p, sizeof p, "stage%d.patch_embed.norm", s);
        x = layernorm(g, p, tokens_from_image(g, img, C), 1e-5f);
        if (has_cls) {
            snprintf(p, sizeof p, "stage%d.cls_token", s);
            x = prepend_cls(g, p, images, x, C);
        }
        for (int j = 0; j < c->depths[s]; j++, i_global++) {
            snprintf(p, sizeof p, "stage%d.blocks.%d.", s, j);
            const char *a = layernorm(g, fmt(q2, sizeof q2, p, "norm1"), x, 1e-5f);
            const sf_attn_kind kind = mdl_block_attn(c, i_global);
            x = OP(g, "Add", x, cvt_attention(g, c, kind, fmt(q2, sizeof q2, p, "attn."), a, C, H, side, side, has_cls));
            const char *m = layernorm(g, fmt(q2, sizeof q2, p, "norm2"), x, 1e-5f);
            x = OP(g, "Add", x, mlp(g, fmt(q2, sizeof q2, p, "mlp."), c->act, m));
        }
        if (s < MDL_CVT_STAGES - 1) img = image_from_tokens(g, x, C, side, side);
    }
    attr ax[] = {AI("axis", 1)};
    return linear(g, "head", layernorm(g, "norm", OPA(g, "Gather", ax, x, I64SCALAR(g, 0)), 1e-5f));
}

/* What the SOFT graph cannot express yet, or NULL: the paper's NR init halves alpha in a
 * data-dependent loop, and a positional embedding built for another grid is resized. */
static const char *soft_unsupported(const sf_model_cfg *c, sf_params *ps) {
    if (c->nr_init == SF_NR_PAPER)
        return "model.nr_init=paper (its alpha halving is a data-dependent loop; master is exported)";
    int side = c->img_size;
    static const int stem_stride[3] = {2, 1, 2};
    for (int u = 0; u < 3; u++) side = conv_out(side, 3, stem_stride[u], 1);
    for (int st = 0; st < 4; st++) {
        if (st > 0) side = conv_out(side, 3, 2, 1);
        char name[32];
        snprintf(name, sizeof name, "pos_embed%d", st + 1);
        sf_param *p = sf_params_find(ps, name);
        if (!p || p->t->shape[1] != side * side + (st == 3))
            return "a positional embedding built for another grid than model.img_size gives (resized in the forward)";
    }
    return NULL;
}

/* ---- the model file ---- */

/* ValueInfoProto of a float tensor whose first dimension is the symbolic "batch". */
static void value_info(sf_pb *out, int field, const char *name, int ndim, const int64_t *dims) {
    sf_pb shape, tensor, type, vi, dim;
    sf_pb_init(&shape);
    sf_pb_init(&tensor);
    sf_pb_init(&type);
    sf_pb_init(&vi);
    sf_pb_init(&dim);
    for (int d = 0; d < ndim; d++) {
        sf_pb_reset(&dim);
        if (d == 0) sf_pb_string(&dim, DIM_PARAM, "batch");
        else sf_pb_varint(&dim, DIM_VALUE, (uint64_t)dims[d]);
        sf_pb_message(&shape, SHAPE_DIM, &dim);
    }
    sf_pb_varint(&tensor, TYPE_TENSOR_ELEM_TYPE, DTYPE_FLOAT);
    sf_pb_message(&tensor, TYPE_TENSOR_SHAPE, &shape);
    sf_pb_message(&type, TYPE_TENSOR, &tensor);
    sf_pb_string(&vi, VALUE_INFO_NAME, name);
    sf_pb_message(&vi, VALUE_INFO_TYPE, &type);
    sf_pb_message(out, field, &vi);
    sf_pb_free(&shape);
    sf_pb_free(&tensor);
    sf_pb_free(&type);
    sf_pb_free(&vi);
    sf_pb_free(&dim);
}

int sf_model_export_onnx(const sf_model_cfg *c, sf_params *ps, const char *path, sf_onnx_stats *st) {
    const char *why = c->family == SF_FAMILY_SOFT ? soft_unsupported(c, ps) : NULL;
    if (why) return sf_error("%s: this SOFT model has no ONNX form yet: %s", path, why);
    if (c->family == SF_FAMILY_VIT && c->nr_init == SF_NR_PAPER)
        for (int i = 0; i < c->depth; i++)
            if (mdl_block_attn(c, i) == SF_ATTN_SOFT)
                return sf_error("%s: this ViT's soft blocks have no ONNX form yet: model.nr_init=paper (its alpha "
                                "halving is a data-dependent loop; master is exported)", path);
    graph g = {.ps = ps};
    sf_pb_init(&g.nodes);
    sf_pb_init(&g.inits);
    sf_pb_init(&g.tmp);
    sf_pb_init(&g.tmp2);
    const char *logits = c->family == SF_FAMILY_XCIT   ? xcit_graph(&g, c, "images")
                         : c->family == SF_FAMILY_SOFT ? soft_graph(&g, c, "images")
                         : c->family == SF_FAMILY_CVT  ? cvt_graph(&g, c, "images")
                                                       : vit_graph(&g, c, "images");
    /* The last node's output is renamed by an Identity, so the graph output is "logits". */
    sf_pb *n = &g.tmp;
    sf_pb_reset(n);
    sf_pb_string(n, NODE_INPUT, logits);
    sf_pb_string(n, NODE_OUTPUT, "logits");
    sf_pb_string(n, NODE_NAME, "output");
    sf_pb_string(n, NODE_OP_TYPE, "Identity");
    sf_pb_message(&g.nodes, GRAPH_NODE, n);
    g.n_nodes++;
    count_op(&g, "Identity");

    sf_pb graph_pb, model, opset;
    sf_pb_init(&graph_pb);
    sf_pb_init(&model);
    sf_pb_init(&opset);
    sf_pb_append(&graph_pb, g.nodes.data, g.nodes.len);
    sf_pb_string(&graph_pb, GRAPH_NAME, c->name[0] ? c->name : "sfvit");
    sf_pb_append(&graph_pb, g.inits.data, g.inits.len);
    value_info(&graph_pb, GRAPH_INPUT, "images", 4, (int64_t[]){0, c->in_chans, c->img_size, c->img_size});
    value_info(&graph_pb, GRAPH_OUTPUT, "logits", 2, (int64_t[]){0, c->num_classes});
    sf_pb_varint(&model, MODEL_IR_VERSION, ONNX_IR_VERSION);
    sf_pb_string(&model, MODEL_PRODUCER_NAME, "sfvit");
    sf_pb_string(&model, MODEL_PRODUCER_VERSION, "0.1.0");
    sf_pb_message(&model, MODEL_GRAPH, &graph_pb);
    sf_pb_string(&opset, OPSET_DOMAIN, "");
    sf_pb_varint(&opset, OPSET_VERSION, ONNX_OPSET);
    sf_pb_message(&model, MODEL_OPSET_IMPORT, &opset);
    int rc = sf_write_file_atomic(path, model.data, model.len);

    if (st) {
        memset(st, 0, sizeof(*st));
        st->nodes = g.n_nodes;
        st->initializers = g.n_inits;
        st->bytes = model.len;
        st->n_op_types = g.n_op_types;
        for (int i = 0; i < g.n_op_types; i++) {
            snprintf(st->op_types[i], sizeof st->op_types[i], "%s", g.op_types[i]);
            st->op_counts[i] = g.op_counts[i];
        }
    }
    for (int i = 0; i < g.n_names; i++) free(g.names[i]);
    free(g.names);
    sf_pb_free(&g.nodes);
    sf_pb_free(&g.inits);
    sf_pb_free(&g.tmp);
    sf_pb_free(&g.tmp2);
    sf_pb_free(&graph_pb);
    sf_pb_free(&model);
    sf_pb_free(&opset);
    return rc;
}

int sf_onnx_stats_count(const sf_onnx_stats *st, const char *op_type) {
    for (int i = 0; i < st->n_op_types; i++)
        if (!strcmp(st->op_types[i], op_type)) return st->op_counts[i];
    return 0;
}
