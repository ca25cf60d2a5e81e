/* norm.c — LayerNorm over the last dim and BatchNorm2d (train and eval), each with its
 * hand-written backward. Derivations: docs/math/soft_conv_norm.md#layernorm and #batchnorm.
 *
 * BatchNorm under MPI (train/dist.c, train.bn_sync): when the context's sum_over_ranks hook
 * is set, the per-channel sums of the forward (Σx, Σ(x − μ)², the count) and of the backward
 * (Σĝ, Σĝ⊙x̂) are summed over the ranks, i.e. SyncBatchNorm; dγ and dβ stay per rank (the
 * gradient all-reduce averages them). Unset, every sum is this process's own.
 *
 * Deliberately not here: GroupNorm/RMSNorm (no model uses them) and a fused BatchNorm+ReLU
 * (ReLU is its own op).
 *
 * Dimension legend: B batch, N tokens, C channels (LayerNorm: the last dim), H W image height and
 * width (BatchNorm2d input is (B, C, H, W)).
 */
#include "ops_internal.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

/* ---- LayerNorm ( docs/math/soft_conv_norm.md#layernorm) ---- */

typedef struct layernorm_saved {
    float *mean;  // (rows) μ per row
    float *rstd;  // (rows) (σ² + ε)^−½ per row
} layernorm_saved;

/* One row's output y = γ ⊙ (x − μ)·r + β (w, b may be NULL), n values from column `at`: one
 * expression for the fp32 output and the bf16 one (rounded after), so both have its bits. */
static void layernorm_row(float *restrict y, const float *restrict xr, const float *wd, const float *bd, float m,
                          float rs, int at, int n) {
    if (wd && bd) {  // the common case, a loop that vectorizes
#pragma omp simd
        for (int i = 0; i < n; i++) y[i] = wd[at + i] * ((xr[at + i] - m) * rs) + bd[at + i];
    } else {
        for (int i = 0; i < n; i++) {
            float xh = (xr[at + i] - m) * rs;
            y[i] = (wd ? wd[at + i] : 1.0f) * xh + (bd ? bd[at + i] : 0.0f);
        }
    }
}

/* to_linear (sf_layernorm_to_linear): in bf16 precision the output is written in bf16 alone,
 * each row rounded in blocks of LN_BLOCK from a stack buffer; the backward reads x and the
 * saved statistics, never y. */
#define LN_BLOCK 512

static sf_tensor *layernorm(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps, int to_linear) {
    char bx[64];
    const int C = x->shape[x->ndim - 1];
    SF_ASSERT((!w || w->numel == (size_t)C) && (!b || b->numel == (size_t)C),
              "layernorm: weight/bias must have %d elements for x %s", C,
              sf_shape_str(x, bx, sizeof bx));
    const int rows = (int)(x->numel / (size_t)C);
    sf_tensor *out = to_linear ? sf_tensor_for_linear(g, x->ndim, x->shape) : sf_tensor_like(g, x);  // (..., C)
    sf_tensor *ins[3] = {x, w, b};
    const int record = sf_needs_grad(g, ins, 3);
    layernorm_saved *sv = NULL;
    if (record) {
        sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->mean = sf_arena_alloc(g->arena, (size_t)rows * sizeof(float));
        sv->rstd = sf_arena_alloc(g->arena, (size_t)rows * sizeof(float));
    }
    const float *wd = w ? w->data : NULL, *bd = b ? b->data : NULL;
#pragma omp parallel for if (x->numel > 32768)
    for (int r = 0; r < rows; r++) {
        const float *xr = x->data + (size_t)r * C;
        float m = 0;
#pragma omp simd reduction(+ : m)
        for (int i = 0; i < C; i++) m += xr[i];
        m /= (float)C;
        float v = 0;  // two passes: no cancellation when |μ| >> σ
#pragma omp simd reduction(+ : v)
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= (float)C;  // biased, as torch
        const float rs = 1.0f / sqrtf(v + eps);
        if (out->data) {
            layernorm_row(out->data + (size_t)r * C, xr, wd, bd, m, rs, 0, C);
        } else {
            for (int at = 0; at < C; at += LN_BLOCK) {
                const int n = C - at < LN_BLOCK ? C - at : LN_BLOCK;
                float block[LN_BLOCK];
                layernorm_row(block, xr, wd, bd, m, rs, at, n);
                sf_bf16_convert(block, out->data16 + (size_t)r * C + at, (size_t)n);
            }
        }
        if (sv) {
            sv->mean[r] = m;
            sv->rstd[r] = rs;
        }
    }
    if (record) {
        sf_node *node = sf_tape_push(g, SF_OP_LAYERNORM, out, ins, 3);
        node->saved = sv;
    }
    return out;
}

sf_tensor *sf_layernorm(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps) {
    return layernorm(g, x, w, b, eps, 0);
}

sf_tensor *sf_layernorm_to_linear(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b, float eps) {
    return layernorm(g, x, w, b, eps, 1);
}

/* In the forward pass this was: y = γ ⊙ (x − μ)·r + β with r = (σ² + ε)^−½.
 * So with ĝ = g ⊙ γ: dx = r·(ĝ − mean(ĝ) − x̂·mean(ĝ ⊙ x̂)); dγ = Σ_rows g ⊙ x̂; dβ = Σ_rows g.
 * dγ and dβ are summed per thread, then reduced, so the row loop runs in parallel. */
void sf_layernorm_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    const layernorm_saved *sv = node->saved;
    const int C = x->shape[x->ndim - 1], rows = (int)(x->numel / (size_t)C);
    const float *G = node->out->grad;  // (..., C)
    const int broken = sf_break_backward("layernorm");  // teeth: mean(ĝ) term dropped
    int acc = 1;  // a new dx is written, not accumulated
    float *dx = x->requires_grad ? sf_grad_dst(g, x, &acc) : NULL;
    float *dw = w && w->requires_grad ? sf_grad(g, w) : NULL;
    const float *wd = w ? w->data : NULL;
    float *db = b && b->requires_grad ? sf_grad(g, b) : NULL;
    const int nt = omp_get_max_threads();
    float *part = (dw || db) ? sf_arena_calloc(g->arena, (size_t)nt * 2 * C * sizeof(float))
                             : NULL;  // (threads, 2, C) partial dγ, dβ
#pragma omp parallel if (x->numel > 32768)
    {
        float *pw = part ? part + (size_t)omp_get_thread_num() * 2 * C : NULL, *pb = pw ? pw + C : NULL;
#pragma omp for
        for (int r = 0; r < rows; r++) {
            const float *xr = x->data + (size_t)r * C, *gr = G + (size_t)r * C;
            const float m = sv->mean[r], rs = sv->rstd[r];
            if (dx) {
                float sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
                for (int i = 0; i < C; i++) {
                    float gh = gr[i] * (wd ? wd[i] : 1.0f);
                    sg += gh;
                    sgx += gh * (xr[i] - m) * rs;
                }
                sg /= (float)C;
                sgx /= (float)C;
                if (broken) sg = 0;
                float *d = dx + (size_t)r * C;
#pragma omp simd
                for (int i = 0; i < C; i++) {
                    float gh = gr[i] * (wd ? wd[i] : 1.0f);
                    float v = rs * (gh - sg - (xr[i] - m) * rs * sgx);
                    d[i] = acc ? d[i] + v : v;
                }
            }
            if (part)
#pragma omp simd
                for (int i = 0; i < C; i++) {
                    pw[i] += gr[i] * (xr[i] - m) * rs;
                    pb[i] += gr[i];
                }
        }
    }
    if (part)
        for (int t = 0; t < nt; t++)
            for (int i = 0; i < C; i++) {
                if (dw) dw[i] += part[(size_t)t * 2 * C + i];
                if (db) db[i] += part[(size_t)t * 2 * C + C + i];
            }
}

/* ---- BatchNorm2d ( docs/math/soft_conv_norm.md#batchnorm) ---- */

typedef struct batchnorm_saved {
    float *mean;  // (C) the μ used: batch (train) or running (eval)
    float *rstd;  // (C) (σ² + ε)^−½ with the same choice
} batchnorm_saved;

sf_tensor *sf_batchnorm2d(sf_ctx *g, sf_tensor *x, sf_tensor *w, sf_tensor *b,
                          sf_tensor *running_mean, sf_tensor *running_var,
                          sf_tensor *num_batches, float eps, float momentum) {
    char bx[64];
    SF_ASSERT(x->ndim == 4, "batchnorm2d: x %s must be (B, C, H, W)", sf_shape_str(x, bx, sizeof bx));
    const int B = x->shape[0], C = x->shape[1], HW = x->shape[2] * x->shape[3];
    const size_t M = (size_t)B * HW;  // values per channel
    SF_ASSERT((!w || w->numel == (size_t)C) && (!b || b->numel == (size_t)C) &&
                  running_mean->numel == (size_t)C && running_var->numel == (size_t)C,
              "batchnorm2d: weight, bias and running stats need %d elements", C);
    /* The running statistics are buffers updated in place, never differentiated. */
    SF_ASSERT(!running_mean->requires_grad && !running_var->requires_grad &&
                  (!num_batches || !num_batches->requires_grad),
              "batchnorm2d: running statistics must not require grad");
    const int train = g->training;
    SF_ASSERT(!train || M > 1, "batchnorm2d: training needs more than 1 value per channel (x %s)",
              sf_shape_str(x, bx, sizeof bx));
    sf_tensor *out = sf_tensor_like(g, x);                                   // (B, C, H, W)
    float *mean = sf_arena_alloc(g->arena, (size_t)2 * C * sizeof(float));  // (C)
    float *rstd = mean + C;                                                  // (C)

    /* Training statistics in two passes (Σx, then Σ(x − μ)²), each summed over the ranks by
     * the SyncBatchNorm hook when it is set. */
    double *sum = NULL, *sq = NULL;  // (C + 1) Σx and the count; (C) Σ(x − μ)²
    double Mg = (double)M;           // values per channel over every rank
    void (*sync)(double *, int) = train ? g->sum_over_ranks : NULL;
    if (train) {
        sum = sf_arena_alloc(g->arena, (size_t)(2 * C + 1) * sizeof(double));
        sq = sum + C + 1;
#pragma omp parallel for if (x->numel > 32768)
        for (int c = 0; c < C; c++) {
            double s = 0;  // float sums per (image, channel) plane, vectorized; double across planes
            for (int bi = 0; bi < B; bi++) {
                const float *xp = x->data + ((size_t)bi * C + c) * HW;
                float ps = 0;
#pragma omp simd reduction(+ : ps)
                for (int i = 0; i < HW; i++) ps += xp[i];
                s += ps;
            }
            sum[c] = s;
        }
        sum[C] = (double)M;
        if (sync) sync(sum, C + 1);
        Mg = sum[C];
#pragma omp parallel for if (x->numel > 32768)
        for (int c = 0; c < C; c++) {
            const float m = (float)(sum[c] / Mg);
            double v = 0;
            for (int bi = 0; bi < B; bi++) {
                const float *xp = x->data + ((size_t)bi * C + c) * HW;
                float pv = 0;
#pragma omp simd reduction(+ : pv)
                for (int i = 0; i < HW; i++) pv += (xp[i] - m) * (xp[i] - m);
                v += pv;
            }
            sq[c] = v;
        }
        if (sync) sync(sq, C);
    }

#pragma omp parallel for if (x->numel > 32768)
    for (int c = 0; c < C; c++) {
        if (train) {
            const double m = sum[c] / Mg;
            const double v = sq[c] / Mg;  // biased for normalizing, as torch
            mean[c] = (float)m;
            rstd[c] = (float)(1.0 / sqrt(v + eps));
            /* torch: running ← (1 − momentum)·running + momentum·stat, variance unbiased */
            running_mean->data[c] = (1.0f - momentum) * running_mean->data[c] + momentum * (float)m;
            running_var->data[c] = (1.0f - momentum) * running_var->data[c] +
                                   momentum * (float)(v * Mg / (Mg - 1.0));
        } else {
            mean[c] = running_mean->data[c];
            rstd[c] = 1.0f / sqrtf(running_var->data[c] + eps);
        }
        const float sc = (w ? w->data[c] : 1.0f) * rstd[c], sh = b ? b->data[c] : 0.0f;
        for (int bi = 0; bi < B; bi++) {
            const float *xp = x->data + ((size_t)bi * C + c) * HW;
            float *y = out->data + ((size_t)bi * C + c) * HW;
            for (int i = 0; i < HW; i++) y[i] = (xp[i] - mean[c]) * sc + sh;
        }
    }
    /* A float holding a count (saved as int64 by the checkpoint code). */
    if (train && num_batches) num_batches->data[0] += 1.0f;

    sf_tensor *ins[3] = {x, w, b};
    if (sf_needs_grad(g, ins, 3)) {
        sf_node *node = sf_tape_push(g, SF_OP_BATCHNORM2D, out, ins, 3);
        batchnorm_saved *sv = sf_arena_alloc(g->arena, sizeof(*sv));
        sv->mean = mean;
        sv->rstd = rstd;
        node->saved = sv;
        node->iarg[0] = train;
        node->iarg[1] = sync != NULL;  // backward sums over the ranks too
    }
    return out;
}

/* In the forward pass this was: y = γ·(x − μ)·r + β per channel, μ and r from the batch
 * (train) or from the running statistics (eval).
 * Train, with ĝ = g·γ over the M = B·H·W values: dx = (r/M)(M·ĝ − Σĝ − x̂·Σ(ĝ ⊙ x̂)).
 * Eval (μ, r constants): dx = ĝ·r. Both: dγ = Σ g ⊙ x̂, dβ = Σ g. One thread per channel.
 * Synced (iarg[1]): the sums and M in dx are over every rank, dγ and dβ this rank's own. */
void sf_batchnorm2d_backward(sf_ctx *g, sf_node *node) {
    sf_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    const batchnorm_saved *sv = node->saved;
    const int train = node->iarg[0], synced = node->iarg[1] && g->sum_over_ranks;
    const int B = x->shape[0], C = x->shape[1], HW = x->shape[2] * x->shape[3];
    float M = (float)((size_t)B * HW);
    const float *G = node->out->grad;  // (B, C, H, W)
    int acc = 1; /* a new dx is written, never read */
    float *dx = x->requires_grad ? sf_grad_dst(g, x, &acc) : NULL;
    float *dw = w && w->requires_grad ? sf_grad(g, w) : NULL;
    float *db = b && b->requires_grad ? sf_grad(g, b) : NULL;
    const float keep_var = sf_break_backward("batchnorm2d") ? 0.0f : 1.0f;  // teeth: the x̂ Σ g x̂ term dropped
    double *sums = sf_arena_alloc(g->arena, (size_t)(2 * C + 1) * sizeof(double));  // (2C + 1) Σ g, Σ g ⊙ x̂, M
#pragma omp parallel for if (x->numel > 32768)
    for (int c = 0; c < C; c++) {
        const float m = sv->mean[c], r = sv->rstd[c];
        float sg = 0, sgx = 0;  // Σ g, Σ g ⊙ x̂
        for (int bi = 0; bi < B; bi++) {
            const float *xp = x->data + ((size_t)bi * C + c) * HW, *gp = G + ((size_t)bi * C + c) * HW;
#pragma omp simd reduction(+ : sg, sgx)
            for (int i = 0; i < HW; i++) {
                sg += gp[i];
                sgx += gp[i] * (xp[i] - m) * r;
            }
        }
        if (dw) dw[c] += sgx;
        if (db) db[c] += sg;
        sums[c] = sg;
        sums[C + c] = sgx;
    }
    if (!dx) return;
    if (train && synced) {
        sums[2 * C] = M;
        g->sum_over_ranks(sums, 2 * C + 1);
        M = (float)sums[2 * C];
    }
#pragma omp parallel for if (x->numel > 32768)
    for (int c = 0; c < C; c++) {
        const float m = sv->mean[c], r = sv->rstd[c], gam = w ? w->data[c] : 1.0f;
        const float sg = (float)sums[c], sgx = keep_var * (float)sums[C + c];
        for (int bi = 0; bi < B; bi++) {
            const float *xp = x->data + ((size_t)bi * C + c) * HW, *gp = G + ((size_t)bi * C + c) * HW;
            float *d = dx + ((size_t)bi * C + c) * HW;
            if (train)
#pragma omp simd
                for (int i = 0; i < HW; i++) {
                    const float v = (r / M) * (M * gam * gp[i] - gam * sg - (xp[i] - m) * r * gam * sgx);
                    d[i] = acc ? d[i] + v : v;
                }
            else
#pragma omp simd
                for (int i = 0; i < HW; i++) d[i] = acc ? d[i] + gam * r * gp[i] : gam * r * gp[i];
        }
    }
}
