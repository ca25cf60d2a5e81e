/* optim.h — AdamW over the one contiguous parameter buffer, the warmup + cosine learning
 * rate schedule, gradient clipping and the finite-gradient check. */
#ifndef SFVIT_OPTIM_H
#define SFVIT_OPTIM_H

#include "sfvit/tensor.h"

typedef struct sf_optim_cfg {
    float lr, weight_decay, beta1, beta2, eps;
    int scale_lr;             /* lr *= global_batch / scale_lr_base */
    int scale_lr_base;        /* 512 (DeiT) or 1024 (SOFT) */
    float clip_grad;          /* global L2 norm; 0 = off */
    int accum_steps;          /* gradient accumulation */
    char decay_mask[16];      /* sfvit | official */
} sf_optim_cfg;

typedef struct sf_sched_cfg {
    float warmup_epochs, warmup_lr, min_lr;
} sf_sched_cfg;

/* One AdamW update of every trainable view (decoupled weight decay on views whose decay
 * flag is set under the configured mask). t is the 1-based update count (bias correction).
 * It leaves every gradient zero (trainable or not), ready for the next step's accumulation:
 * read the gradients before the update, not after. */
void sf_adamw_step(sf_params *ps, const sf_optim_cfg *o, float lr, long t);
/* The same update, and for each view i with copies[i] not NULL the updated weights rounded to
 * bf16 into copies[i] in the same pass (the bf16 copies the products read, which would
 * otherwise be converted from the weights in a pass of their own at the next step). */
void sf_adamw_step_copies(sf_params *ps, const sf_optim_cfg *o, float lr, long t, uint16_t *const *copies);

/* timm CosineLRScheduler evaluated at fractional epoch e (= step / steps_per_epoch):
 * linear warmup from warmup_lr to lr over warmup_epochs, then cosine from lr to min_lr
 * over `epochs` (t not shifted by the warmup, as timm). */
float sf_lr_at(float base_lr, const sf_sched_cfg *s, int epochs, double e);

/* The base lr after optional scaling by global_batch / scale_lr_base. */
float sf_lr_base(const sf_optim_cfg *o, int global_batch);

/* Global L2 norm of all trainable gradients. */
double sf_grad_norm(const sf_params *ps);
/* Multiplies every gradient by s. */
void sf_grad_scale(sf_params *ps, float s);
/* Returns NULL if every gradient is finite, else the name of the first view with a NaN/Inf. */
const char *sf_grad_first_nonfinite(const sf_params *ps);
/* ema <- decay * ema + (1 - decay) * ps->data over every view (timm ModelEmaV2: BatchNorm
 * statistics included); int64 views (counters) are copied. ema: (ps->total). */
void sf_params_ema_update(const sf_params *ps, float *ema, float decay);

#endif
