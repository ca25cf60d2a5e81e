/* optim.c — AdamW, the LR schedule and gradient utilities over the parameter store.
 * AdamW is one loop per view over the parallel data/grad/m/v buffers; the view's flags
 * say whether it decays (per-view flags, not a hard-coded index list). */
#include "sfvit/optim.h"

#include <math.h>
#include <string.h>

static int view_decays(const sf_param *p, const sf_optim_cfg *o) {
    int official = strcmp(o->decay_mask, "official") == 0;
    return (p->flags & (official ? SF_PARAM_DECAY_OFFICIAL : SF_PARAM_DECAY)) != 0;
}

void sf_adamw_step(sf_params *ps, const sf_optim_cfg *o, float lr, long t) {
    const float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
    /* Bias corrections as torch.optim.AdamW: step = lr / (1 - b1^t), denom uses sqrt(1 - b2^t). */
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const float step = (float)(lr / bc1), rbc2 = (float)(1.0 / sqrt(bc2));
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        /* Decoupled decay: w <- w * (1 - lr * wd), applied before the Adam step (torch order). */
        const float keep = view_decays(p, o) ? 1.0f - lr * o->weight_decay : 1.0f;
        float *w = ps->data + p->offset, *gr = ps->grad + p->offset;
        float *m = ps->m + p->offset, *v = ps->v + p->offset;
        const long n = (long)p->t->numel;
#pragma omp parallel for schedule(static) if (n > 32768)
        for (long j = 0; j < n; j++) {
            float gj = gr[j];
            m[j] = b1 * m[j] + (1.0f - b1) * gj;
            v[j] = b2 * v[j] + (1.0f - b2) * gj * gj;
            w[j] = w[j] * keep - step * m[j] / (sqrtf(v[j]) * rbc2 + eps);
        }
    }
}

float sf_lr_at(float base_lr, const sf_sched_cfg *s, int epochs, double e) {
    if (e < s->warmup_epochs)
        return (float)(s->warmup_lr + e * (base_lr - s->warmup_lr) / s->warmup_epochs);
    double frac = epochs > 0 ? e / epochs : 1.0;
    if (frac > 1.0) frac = 1.0;
    return (float)(s->min_lr + 0.5 * (base_lr - s->min_lr) * (1.0 + cos(M_PI * frac)));
}

float sf_lr_base(const sf_optim_cfg *o, int global_batch) {
    if (!o->scale_lr) return o->lr;
    return o->lr * (float)global_batch / (float)o->scale_lr_base;
}

double sf_grad_norm(const sf_params *ps) {
    double s = 0;
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        const float *gr = ps->grad + p->offset;
        for (size_t j = 0; j < p->t->numel; j++) s += (double)gr[j] * gr[j];
    }
    return sqrt(s);
}

void sf_grad_scale(sf_params *ps, float s) {
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        float *gr = ps->grad + p->offset;
        for (size_t j = 0; j < p->t->numel; j++) gr[j] *= s;
    }
}

const char *sf_grad_first_nonfinite(const sf_params *ps) {
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        const float *gr = ps->grad + p->offset;
        for (size_t j = 0; j < p->t->numel; j++)
            if (!isfinite(gr[j])) return p->t->name;
    }
    return NULL;
}

void sf_params_ema_update(const sf_params *ps, float *ema, float decay) {
    const float rest = 1.0f - decay;
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        float *e = ema + p->offset;
        const float *x = ps->data + p->offset;
        const long n = (long)p->t->numel;
        if (p->flags & SF_PARAM_I64) {
            memcpy(e, x, (size_t)n * sizeof(float));
            continue;
        }
#pragma omp parallel for schedule(static) if (n > 32768)
        for (long j = 0; j < n; j++) e[j] = decay * e[j] + rest * x[j];
    }
}
