/* train.h — the trainer library: the training loop, evaluation, checkpoint configs and
 * fine-tuning (train/). The commands built on it are the command layer's (cli/). */
#ifndef SFVIT_TRAIN_H
#define SFVIT_TRAIN_H

#include "sfvit/config.h"
#include "sfvit/data.h"

/* Exit statuses of `sfvit train` (also used by `sfvit ablate` to classify a variant). */
enum {
    SF_TRAIN_OK = 0,
    SF_TRAIN_ERROR = 1,     /* bad input: config, data, checkpoint */
    SF_TRAIN_DIVERGED = 3,  /* NaN/Inf loss or gradient; last good checkpoint kept */
};

typedef struct sf_train_result {
    int status;             /* SF_TRAIN_* */
    int epochs_done;
    long steps_done;
    long diverged_step;     /* step of the NaN/Inf, or -1 */
    float final_top1, best_top1, final_top5;
    float ema_top1;         /* last evaluation of the EMA weights (train.ema_decay > 0) */
    double seconds;
    char run_dir[SF_PATH_MAX];
} sf_train_result;

/* Trains as the config says. resume_dir: continue the run in that folder from its
 * last.safetensors (config taken from the folder). */
int sf_train(const sf_config *cfg, const char *resume_dir, sf_train_result *res);

typedef struct sf_eval_result {
    double loss, top1, top5;  /* top-k in percent */
    int count;
} sf_eval_result;

/* Evaluates a built model on a loader (grad mode off, eval mode). ps: the parameters the
 * model was built into; in bf16 their weights are converted once for the whole evaluation
 * (NULL: once per product, as training's products are not). */
int sf_evaluate(sf_model *m, sf_params *ps, sf_loader *l, int num_classes, sf_eval_result *r);
/* The same, calling each(arg, batch index, batch, logits (b->size, K)) after every batch's
 * forward: per-image outputs (`sfvit eval --save-preds`) from the one evaluation loop. */
typedef void (*sf_eval_batch_fn)(void *arg, int batch_index, const sf_batch *b, const float *logits);
int sf_evaluate_each(sf_model *m, sf_params *ps, sf_loader *l, int num_classes, sf_eval_result *r,
                     sf_eval_batch_fn each, void *arg);

/* train.precision (train/precision.c): checks the machine can run it (error naming the
 * missing instructions, or with train.precision_fallback: fp32 a warning and fp32, written
 * back into cfg), sets it for every product, and with verbose prints the precision and the
 * kernels. 0 or -1 (reported). */
int sf_precision_setup(sf_config *cfg, int verbose);
/* train.bf16_products=auto's rule, from the measured GFLOP/s of bf16 and fp32 products:
 * SF_BF16_PRODUCTS_FP32 when fp32 kernels win by a clear margin, else SF_BF16_PRODUCTS_ONEDNN. */
int sf_bf16_products_choose(double bf16_rate, double fp32_rate);
/* Weights to bf16 once per step (no-op in fp32): after the update, before the next forward. */
void sf_precision_weights_refresh(sf_params *ps);
/* AdamW (sf_adamw_step) that writes the weights' bf16 copies in the same pass. Returns 1 when
 * every weight with a copy slot had one, so the copies match the updated weights and the next
 * step needs no refresh; 0 when there were none to write (fp32, bf16 on fp32 kernels, copies
 * dropped by an evaluation): then refresh as before. */
int sf_precision_adamw_step(sf_params *ps, const sf_optim_cfg *o, float lr, long t);
/* One line: the fp32 product backend and oneDNN's ISA and kernels. */
void sf_kernels_describe(char *buf, size_t size);
/* That line as the last sf_precision_setup described it ("" before one): the kernels line a
 * run prints and stores in its checkpoints, without asking oneDNN again. */
const char *sf_precision_kernels(void);

/* Memory of a training step (train/memory.c), in bytes: fixed + micro-batch * per_image. */
typedef struct sf_memory_need {
    double fixed, per_image;
} sf_memory_need;
/* Adds the activation arena's share of a training step to *train and, if eval is not NULL,
 * of an evaluation forward to *eval, measured in a context of their own: training steps of
 * four and eight images (half of micro_batch and micro_batch when that is smaller), evaluation
 * forwards of two and four. The model's parameters, buffers and gradients are left as found. */
void sf_memory_probe(sf_model *m, sf_params *ps, const sf_model_cfg *mc, int micro_batch, sf_memory_need *train,
                     sf_memory_need *eval);
/* Bytes this process may use: SFVIT_MEMORY_MIB, else what it holds plus MemAvailable (and
 * the cgroup's limit) shared by the node's ranks. -1: not to be checked (SFVIT_MEMORY_MIB=off,
 * or no /proc/meminfo); -2: SFVIT_MEMORY_MIB malformed (reported). source says which. */
double sf_memory_available(const char **source);
double sf_memory_held(void); /* resident bytes now */
/* A "Key:   N kB" line of a /proc file (/proc/self/status, /proc/meminfo), in bytes; -1 if
 * the file or the key is missing. */
double sf_proc_value(const char *path, const char *key);
double sf_memory_at(const sf_memory_need *need, int micro_batch);
/* The largest micro-batch whose need fits in available bytes (0: not even one image). */
int sf_memory_fit(const sf_memory_need *need, double available);
/* "850 MiB", "68.8 GiB": bytes for a message, written into buf. */
const char *sf_memory_str(double bytes, char buf[32]);

/* The config of a checkpoint: from config_path if given, else from the checkpoint's
 * metadata (written by sfvit train). The _over form applies key=value overrides on top of
 * the stored config. (train/eval.c) */
int sf_checkpoint_config(const char *ckpt, const char *config_path, sf_config *cfg);
int sf_checkpoint_config_over(const char *ckpt, sf_config *cfg, int n_over, char *const *over);

/* The loader options of a config: training (batch_size, max_train_fraction, repeated_aug)
 * or evaluation (eval_batch_size, every image once); one process (world 1). */
sf_loader_opts sf_config_loader_opts(const sf_config *cfg, int train);

/* model.init_from: loads a checkpoint's weights by name into ps for fine-tuning (head of
 * another class count re-initialized, ViT pos_embed interpolated), listing what differs. */
int sf_checkpoint_finetune(const char *path, sf_params *ps, const sf_model_cfg *mc);

#endif
