/* trainer.c — the training loop: data → forward → loss → backward → AdamW, evaluation,
 * logs, checkpoints, resume, fine-tuning and the NaN stop.
 *
 * Under mpirun the same loop runs data-parallel (train/dist.c, docs/distributed.md): each
 * rank trains on its DistributedSampler shard with batch train.batch_size / P, the gradient
 * is averaged over the ranks between backward and the optimizer, and evaluation is sharded
 * and summed. Rank 0 alone owns the run folder. The hooks are marked "MPI:"; with one
 * process each is the identity, so single-process runs are unchanged.
 *
 * Run folder <train.out>/<train.name>/: config.yaml (resolved), log.jsonl, metrics.csv,
 * last.safetensors (every epoch, and every train.save_every_steps steps), best.safetensors,
 * ema.safetensors (train.ema_decay > 0: the EMA of the weights, timm ModelEmaV2 as DeiT).
 *
 * Read sf_train at the bottom first: set up, then per epoch the steps, the evaluation and
 * the checkpoints. Set-up checks everything a user can get wrong before the run folder is
 * written.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfvit/checkpoint.h"
#include "sfvit/precision.h"
#include "tensorboard.h"
#include "dist_internal.h"
#include "sfvit/optim.h"
#include "sfvit/train.h"

/* ---- signals: the first SIGINT/SIGTERM stops after the current step (with a
 * checkpoint); a second one exits at once. ---- */
static volatile sig_atomic_t g_stop_requested = 0;

static void on_stop_signal(int sig) {
    if (g_stop_requested) {
        static const char msg[] = "\nsfvit: second signal, exiting now\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    g_stop_requested = 1;
    static const char msg[] = "\nsfvit: stopping after this step (a second signal exits at once)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    sf_test_hold_release();
}

static void install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A file-size limit must surface as a failed checkpoint write (EFBIG, reported with the
     * path), not as a silent kill in the middle of it. */
    signal(SIGXFSZ, SIG_IGN);
}

/* Temporary files of checkpoint writes that a kill interrupted ("<name>.tmp.<pid>"): only
 * one trainer owns a run folder, so any found at start are stale. */
static void remove_stale_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[SF_PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "last.safetensors.tmp.", 21) != 0 && strncmp(e->d_name, "best.safetensors.tmp.", 21) != 0)
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && unlink(path) == 0)
            printf("removed %s, left by an interrupted checkpoint write\n", path);
    }
    closedir(d);
}

/* ---- small file helpers ---- */

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}


static void rng_to_hex(const sf_rng *r, char *out, size_t n) {
    snprintf(out, n, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, r->s[0], r->s[1],
             r->s[2], r->s[3]);
}

static int rng_from_hex(sf_rng *r, const char *s) {
    if (!s || strlen(s) != 64) return -1;
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, s + 16 * i, 16);
        part[16] = 0;
        char *end;
        r->s[i] = strtoull(part, &end, 16);
        if (*end) return -1;
    }
    return 0;
}

/* Samples of a training batch whose largest logit is their label (with mixup or cutmix: the
 * unmixed label), for the train top-1 column of metrics.csv. MPI: rank 0's share only. */
static long count_top1(const sf_tensor *logits, const int *labels, int n) {
    const int K = logits->shape[1];
    long correct = 0;
    for (int i = 0; i < n; i++) {
        const float *row = logits->data + (size_t)i * K;  // (K)
        int best = 0;
        for (int k = 1; k < K; k++)
            if (row[k] > row[best]) best = k;
        correct += best == labels[i];
    }
    return correct;
}

/* A batch's images wrapped as a tensor without copying (the loader owns the memory). */
static sf_tensor batch_tensor(const sf_batch *b, int C, int S) {
    sf_tensor t;
    memset(&t, 0, sizeof t);
    t.data = b->images;
    t.ndim = 4;
    t.shape[0] = b->size;
    t.shape[1] = C;
    t.shape[2] = S;
    t.shape[3] = S;
    t.numel = (size_t)b->size * C * S * S;
    return t;
}

/* ---- evaluation ---- */
int sf_evaluate(sf_model *m, sf_params *ps, sf_loader *l, int num_classes, sf_eval_result *r) {
    return sf_evaluate_each(m, ps, l, num_classes, r, NULL, NULL);
}

int sf_evaluate_each(sf_model *m, sf_params *ps, sf_loader *l, int num_classes, sf_eval_result *r,
                     sf_eval_batch_fn each, void *arg) {
    const sf_model_cfg *mc = sf_model_config(m);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 0;
    g.training = 0;
    /* bf16: the weights as they are now (the EMA's when swapped in) converted once for every
     * batch; dropped at the end, since training changes them next. */
    if (ps)
        sf_precision_weights_refresh(ps);
    else
        sf_bf16_weights_clear();
    double loss_sum = 0;
    long top1 = 0, top5 = 0, count = 0;
    int k5 = num_classes < 5 ? num_classes : 5, got, batch_index = 0;
    sf_batch b;
    sf_loader_start_epoch(l, 0, 0);
    while ((got = sf_loader_next(l, &b)) > 0) {
        /* the loader's side: a SOFT model evaluates at another resolution than it was built for */
        sf_tensor x = batch_tensor(&b, mc->in_chans, sf_loader_img_size(l));
        sf_tensor *logits = sf_model_forward(&g, m, &x);
        if (each) each(arg, batch_index++, &b, logits->data);
        sf_tensor *loss = sf_cross_entropy(&g, logits, b.labels, NULL, 0.0f);
        loss_sum += (double)loss->data[0] * b.size;
        for (int i = 0; i < b.size; i++) {
            const float *z = logits->data + (size_t)i * num_classes;
            float zy = z[b.labels[i]];
            int rank = 0; /* classes scoring strictly higher than the true one */
            for (int k = 0; k < num_classes; k++)
                if (z[k] > zy || (z[k] == zy && k < b.labels[i])) rank++;
            top1 += rank < 1;
            top5 += rank < k5;
        }
        count += b.size;
        sf_ctx_reset(&g);
    }
    sf_ctx_free(&g);
    sf_bf16_weights_clear();
    /* MPI: each rank evaluated its own slice of the split; the totals are over all of them. */
    double tot[5] = {loss_sum, (double)top1, (double)top5, (double)count, got < 0};
    sf_dist_sum(tot, 5);
    loss_sum = tot[0];
    top1 = (long)tot[1];
    top5 = (long)tot[2];
    count = (long)tot[3];
    r->count = (int)count;
    r->loss = count ? loss_sum / count : 0;
    r->top1 = count ? 100.0 * top1 / count : 0;
    r->top5 = count ? 100.0 * top5 / count : 0;
    return tot[4] > 0 ? -1 : 0;
}

/* ---- checkpoints of the run ---- */
typedef struct run_state {
    int epoch;          /* epoch to continue from */
    int step_in_epoch;  /* batches of that epoch already done */
    long global_step;   /* optimizer updates done */
    float best_top1;
    sf_rng drop_rng;
} run_state;

/* What the run's sums were ordered by besides its state: the thread count (OpenBLAS's sgemm
 * and the per-thread partial sums give other last bits on 1, 2 and 3 threads), the ranks and
 * the kernels line. Stored in each checkpoint, so that a resume on others says its steps need
 * not repeat the uninterrupted run's bits; it trains on from the same state all the same. */
typedef struct run_host {
    int threads, ranks;
    const char *kernels; /* the kernels line (sf_precision_kernels) */
} run_host;

/* class_names: the training split's class folder names as a JSON array (id order), so
 * `sfvit predict` and the C API (include/sfvit.h) can name what a checkpoint predicts. */
static int save_checkpoint(const char *path, const sf_params *ps, const run_state *st, const run_host *host,
                           const char *config_text, const char *class_names, int with_optim) {
    char epoch[32], step[32], gstep[32], best[32], rng[80], threads[16], ranks[16];
    snprintf(epoch, sizeof epoch, "%d", st->epoch);
    snprintf(step, sizeof step, "%d", st->step_in_epoch);
    snprintf(gstep, sizeof gstep, "%ld", st->global_step);
    snprintf(best, sizeof best, "%.9g", st->best_top1);
    rng_to_hex(&st->drop_rng, rng, sizeof rng);
    snprintf(threads, sizeof threads, "%d", host->threads);
    snprintf(ranks, sizeof ranks, "%d", host->ranks);
    const sf_kv meta[] = {{"format", "sfvit-1"},   {"config", config_text}, {"epoch", epoch},
                          {"step_in_epoch", step}, {"global_step", gstep},  {"best_top1", best},
                          {"rng_drop", rng},       {SF_CKPT_META_CLASS_NAMES, class_names},
                          {"threads", threads},    {"ranks", ranks},        {"kernels", host->kernels}};
    return sf_checkpoint_save(path, ps, with_optim, meta, (int)(sizeof meta / sizeof meta[0]));
}

/* MPI: rank 0 writes; every rank learns whether it worked (so all stop together). */
static int save_on_rank0(const char *path, const sf_params *ps, const run_state *st, const run_host *host,
                         const char *config_text, const char *class_names, int with_optim) {
    int rc = sf_dist_rank() == 0 ? save_checkpoint(path, ps, st, host, config_text, class_names, with_optim) : 0;
    return sf_dist_all_ok(rc == 0) ? 0 : -1;
}

/* A resume on other threads, ranks or kernels than those that wrote the checkpoint: each
 * difference named, from rank 0 alone. */
static void resume_host_note(const char *path, const sf_ckpt_report *meta, const run_host *now) {
    const char *t = sf_ckpt_meta_get(meta, "threads"), *n = sf_ckpt_meta_get(meta, "ranks"),
               *k = sf_ckpt_meta_get(meta, "kernels");
    if (!t || !n || !k || sf_dist_rank() != 0) return; /* written before these were stored */
    const int then_threads = atoi(t), then_ranks = atoi(n);
    const int threads = then_threads != now->threads, ranks = then_ranks != now->ranks,
              kernels = strcmp(k, now->kernels) != 0;
    if (!threads && !ranks && !kernels) return;
    if (threads) sf_warn("%s: threads: %d then, %d now", path, then_threads, now->threads);
    if (ranks) sf_warn("%s: ranks: %d then, %d now", path, then_ranks, now->ranks);
    if (kernels) sf_warn("%s: kernels then: %s; now: %s", path, k, now->kernels);
    sf_hint("the run resumes from the same state, but its steps need not match an uninterrupted run's bit for "
            "bit: products and sums are ordered by threads, ranks and kernels");
    if (threads) sf_hint("train.threads=%d (or SFVIT_THREADS=%d) repeats them", then_threads, then_threads);
}

static int load_resume_state(const char *path, sf_params *ps, run_state *st, const run_host *now) {
    sf_ckpt_opts opts = {.strict = 1, .load_optim = 1};
    sf_ckpt_report meta;
    if (sf_checkpoint_load(path, ps, &opts, &meta) != 0) {
        sf_ckpt_report_free(&meta);
        return -1;
    }
    const char *e = sf_ckpt_meta_get(&meta, "epoch");
    const char *s = sf_ckpt_meta_get(&meta, "step_in_epoch");
    const char *gs = sf_ckpt_meta_get(&meta, "global_step");
    const char *b = sf_ckpt_meta_get(&meta, "best_top1");
    const char *r = sf_ckpt_meta_get(&meta, "rng_drop");
    int ok = e && s && gs && b && rng_from_hex(&st->drop_rng, r) == 0;
    if (ok) {
        st->epoch = atoi(e);
        st->step_in_epoch = atoi(s);
        st->global_step = atol(gs);
        st->best_top1 = strtof(b, NULL);
        resume_host_note(path, &meta, now);
    }
    sf_ckpt_report_free(&meta);
    if (!ok) {
        sf_error("%s: checkpoint has no training state (epoch, step, RNG) to resume from", path);
        sf_hint("it may come from another tool; use model.init_from=%s to fine-tune from it", path);
        return -1;
    }
    return 0;
}

/* The epoch a run folder's last.safetensors continues from, read from its metadata without
 * loading it (so `--resume` can refuse before anything is written); -1 after an error. */
static int resume_epoch(const char *path) {
    if (!file_exists(path)) {
        sf_error("%s: no checkpoint to resume from", path);
        sf_hint("start the run with `sfvit train CONFIG.yaml` (it writes last.safetensors after each epoch)");
        return -1;
    }
    sf_st_file f;
    if (sf_st_open(&f, path) != 0) return -1;
    const char *e = sf_st_meta_get(&f, "epoch");
    int epoch = e ? atoi(e) : -1;
    sf_st_close(&f);
    if (epoch < 0) {
        sf_error("%s: checkpoint has no training state (epoch, step, RNG) to resume from", path);
        sf_hint("it may come from another tool; use model.init_from=%s to fine-tune from it", path);
    }
    return epoch;
}

static void print_progress(FILE *f, int tty, int epoch, int epochs, int step, int steps, double loss,
                           float lr, double img_s, double eta_s, double stall) {
    if (tty)
        fprintf(f, "\r  epoch %d/%d  step %d/%d  loss %.4f  lr %.2e  %.1f img/s  ETA %02d:%02d  ",
                epoch + 1, epochs, step, steps, loss, lr, img_s, (int)(eta_s / 60),
                (int)fmod(eta_s, 60));
    else
        fprintf(f, "epoch %d/%d step %d/%d loss %.4f lr %.3e img/s %.1f stall %.2fs eta %.0fs\n",
                epoch + 1, epochs, step, steps, loss, lr, img_s, stall, eta_s);
    fflush(f);
}

/* ---- MPI helpers (each is the identity, or rank 0's plain action, with one process) ---- */

/* This rank's contiguous slice of an evaluation split: a view sharing ds's arrays (never
 * freed). Contiguous slices without padding count every image exactly once. */
static sf_dataset dataset_slice(const sf_dataset *ds, int rank, int world) {
    sf_dataset s = *ds;
    int lo = (int)((long)ds->count * rank / world), hi = (int)((long)ds->count * (rank + 1) / world);
    s.count = hi - lo;
    s.paths = ds->paths + lo;
    s.labels = ds->labels + lo;
    return s;
}

/* Drop-path/dropout generator for this step. One process: the run's stream continues.
 * Several: each rank draws its masks from a generator seeded by (run stream, rank) and the
 * run stream advances by one draw per step, so it stays equal on every rank and a checkpoint
 * resumes at any rank count. */
static void step_rng_begin(sf_ctx *g, sf_rng *run, int rank, int world) {
    if (world == 1) {
        g->rng = *run;
        return;
    }
    sf_rng probe = *run;
    uint64_t h = sf_rng_u64(&probe) ^ (0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1));
    sf_rng_seed(&g->rng, h);
}

static void step_rng_end(const sf_ctx *g, sf_rng *run, int world) {
    if (world == 1)
        *run = g->rng;
    else
        (void)sf_rng_u64(run);
}

/* One small all-reduce per step: the loss of the global batch (mean of the ranks' equal-sized
 * batch means), and whether any rank diverged or received a stop signal. */
static void agree_step(int world, float *loss, int *diverged, int *stop) {
    if (world == 1) return;
    double v[3] = {*loss, *diverged ? 1.0 : 0.0, *stop ? 1.0 : 0.0};
    sf_dist_sum(v, 3);
    *loss = (float)(v[0] / world);
    *diverged = v[1] > 0;
    *stop = v[2] > 0;
}

/* A value decided on rank 0 (e.g. from its view of the run folder), on every rank. */
static int rank0_decides(int v) {
    float f = (float)v;
    sf_dist_broadcast(&f, 1);
    return f != 0;
}

/* SFVIT_DUMP_GRAD=FILE: the first update's gradient, after the all-reduce and before clipping,
 * as raw float32 (sf_params order, ps->total values), written by rank 0. For the data-parallel
 * equivalence test (tests/test_mpi.sh). */
static void dump_first_grad(const sf_params *ps, long global_step) {
    const char *path = getenv("SFVIT_DUMP_GRAD");
    if (!path || !*path || global_step != 0 || sf_dist_rank() != 0) return;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(ps->grad, sizeof(float), ps->total, f) == ps->total;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) sf_warn("SFVIT_DUMP_GRAD: cannot write %s: %s", path, strerror(errno));
}

/* ---- one run: what set-up builds, the loop uses and run_free releases ---- */
typedef struct run {
    sf_config cfg;
    const char *resume_dir;
    int world, rank, rank_batch, threads, tty, accum, steps_per_epoch, log_nr;
    run_host host;              /* threads, ranks and kernels, stored in every checkpoint */
    float base_lr;
    char dir[SF_PATH_MAX];
    char path_last[SF_PATH_MAX + 32], path_best[SF_PATH_MAX + 32], path_ema[SF_PATH_MAX + 32];
    char path_cfg[SF_PATH_MAX + 32], path_log[SF_PATH_MAX + 32], path_csv[SF_PATH_MAX + 32];
    char *config_text;          /* the resolved config.yaml, stored in every checkpoint */
    char *class_names;          /* JSON array of the training classes, stored in every checkpoint */
    sf_dataset train_ds, val_ds, val_slice;  /* val_slice: MPI, this rank's part of val_ds */
    sf_loader *train_loader, *val_loader;
    sf_model *model;
    sf_params ps;
    float *ema;                 /* (ps.total) EMA of every value of ps.data, or NULL */
    sf_ctx g;
    FILE *flog, *fcsv;
    sf_tb_writer *tb;           /* train.tensorboard: the same scalars as TensorBoard events (rank 0) */
    run_state st;
    long steps_this_run;
    int stopped_by_signal;
    int copies_current;         /* bf16: the last update wrote the weights' bf16 copies (no refresh due) */
    int grads_zero;             /* no backward since the gradients were zeroed (by the last update) */
} run;

/* What an epoch's steps leave for its evaluation line. */
typedef struct epoch_stats {
    double loss_sum, t0;
    int loss_count;
    long train_correct, train_seen;  // training samples whose top-1 was their label
    float lr;
} epoch_stats;

/* Checks that need no file written (the config itself is validated by the caller,
 * sf_config_validate): the config against this launch (ranks), the run folder's state (a checkpoint in the way, or one that leaves nothing to
 * do). Everything a user can get wrong fails here or while the data and model are built,
 * before the run folder is touched. */
static int run_check(run *r) {
    const sf_config *c = &r->cfg;
    if (c->train.batch_size % r->world != 0) {
        sf_error("train.batch_size=%d (the global batch) is not divisible by the %d ranks", c->train.batch_size,
                 r->world);
        sf_hint("set train.batch_size to a multiple of %d", r->world);
        return -1;
    }
    r->rank_batch = c->train.batch_size / r->world;
    if (r->world > 1 && (c->aug.mixup > 0 || c->aug.cutmix > 0) && r->rank_batch % 2 != 0) {
        sf_error("mixup/cutmix pair samples within a rank's batch: %d per rank is odd", r->rank_batch);
        sf_hint("set train.batch_size to a multiple of %d", 2 * r->world);
        return -1;
    }
    int len = r->resume_dir ? snprintf(r->dir, sizeof r->dir, "%s", r->resume_dir)
                            : snprintf(r->dir, sizeof r->dir, "%s/%s", c->train.out, c->train.name);
    if (len >= (int)sizeof r->dir)
        return sf_error("run folder path is longer than %d characters: %s/%s", SF_PATH_MAX - 1, c->train.out,
                        c->train.name);
    snprintf(r->path_last, sizeof r->path_last, "%s/last.safetensors", r->dir);
    snprintf(r->path_best, sizeof r->path_best, "%s/best.safetensors", r->dir);
    snprintf(r->path_ema, sizeof r->path_ema, "%s/ema.safetensors", r->dir);
    snprintf(r->path_cfg, sizeof r->path_cfg, "%s/config.yaml", r->dir);
    snprintf(r->path_log, sizeof r->path_log, "%s/log.jsonl", r->dir);
    snprintf(r->path_csv, sizeof r->path_csv, "%s/metrics.csv", r->dir);
    if (r->rank != 0) return 0;
    if (!r->resume_dir && file_exists(r->path_last)) {
        sf_error("run folder %s already holds a checkpoint", r->dir);
        sf_hint("continue it with `sfvit train --resume %s`, or set train.name=<new name>", r->dir);
        return -1;
    }
    if (r->resume_dir) {
        int done = resume_epoch(r->path_last);
        if (done < 0) return -1;
        if (done >= c->train.epochs) {
            sf_error("%s has completed %d epoch%s and train.epochs is %d: nothing left to train", r->path_last,
                     done, done == 1 ? "" : "s", c->train.epochs);
            sf_hint("to train longer, resume with train.epochs=%d (or more)", done + 1);
            return -1;
        }
    }
    return 0;
}

/* Datasets and loaders (MPI: this rank's shard of the training order, a contiguous slice of
 * the val split, so every val image counts once). */
static int run_open_data(run *r) {
    const sf_config *c = &r->cfg;
    if (sf_dataset_open(&r->train_ds, c->data.root, c->data.train_split) != 0) return -1;
    if (sf_dataset_open(&r->val_ds, c->data.root, c->data.val_split) != 0) return -1;
    if (r->train_ds.num_classes != c->model.num_classes) {
        sf_error("%s/%s has %d classes but model.num_classes is %d", c->data.root, c->data.train_split,
                 r->train_ds.num_classes, c->model.num_classes);
        sf_hint("set model.num_classes=%d", r->train_ds.num_classes);
        return -1;
    }
    r->class_names = sf_class_names_json(r->train_ds.class_names, r->train_ds.num_classes);
    if (r->val_ds.count < r->world)
        return sf_error("%s/%s: %d images for %d ranks", c->data.root, c->data.val_split, r->val_ds.count, r->world);
    sf_loader_opts lo = sf_config_loader_opts(c, 1);
    lo.batch_size = r->rank_batch;  // MPI: this rank's share of the global batch
    lo.rank = r->rank;
    lo.world = r->world;
    r->train_loader = sf_loader_create(&r->train_ds, &lo);
    r->val_slice = r->world > 1 ? dataset_slice(&r->val_ds, r->rank, r->world) : r->val_ds;
    sf_loader_opts vo = sf_config_loader_opts(c, 0);  // every rank its slice, whole
    vo.batch_size = (c->train.eval_batch_size + r->world - 1) / r->world;
    r->val_loader = sf_loader_create(&r->val_slice, &vo);
    if (!r->train_loader || !r->val_loader) return -1;
    r->steps_per_epoch = sf_loader_steps_per_epoch(r->train_loader);
    if (r->steps_per_epoch < 1)
        return sf_error("%s/%s: %d images is less than one batch of %d", c->data.root, c->data.train_split,
                        r->train_ds.count, c->train.batch_size);
    return 0;
}

/* The model, its parameters initialized from train.seed. */
static int run_build_model(run *r) {
    const sf_model_cfg *mc = &r->cfg.model;
    r->model = sf_model_build(mc, &r->ps);
    if (!r->model) return -1;
    sf_params_alloc(&r->ps);
    sf_rng init_rng;
    sf_rng_seed(&init_rng, r->cfg.train.seed * 1000003ULL + 1);
    sf_model_init(r->model, &r->ps, &init_rng);
    r->log_nr = mc->attn == SF_ATTN_SOFT;
    for (int i = 0; i < mc->n_block_attn; i++) r->log_nr |= mc->block_attn[i] == SF_ATTN_SOFT;
    return 0;
}

/* Splits this rank's batch into accum micro-batches of at most fit images (mixup pairs
 * samples within a rank's micro-batch under MPI, so those stay even). 0 if none does. */
static int accum_split(const run *r, int fit) {
    const int pairs = r->world > 1 && (r->cfg.aug.mixup > 0 || r->cfg.aug.cutmix > 0);
    for (int a = 2; a <= r->rank_batch; a++)
        if (r->rank_batch % a == 0 && r->rank_batch / a <= fit && !(pairs && (r->rank_batch / a) % 2))
            return a;
    return 0;
}

/* What the run will hold at its peak, an evaluation after training steps (the evaluation has
 * its own activation arena; the step's stays allocated), against what this process may use
 * (train/memory.c): a batch too large for the machine stops here, before the run folder is
 * written, with the split that fits. */
static int run_check_memory(run *r) {
    const sf_config *c = &r->cfg;
    const sf_model_cfg *mc = &c->model;
    const char *source = NULL;
    const double avail = sf_memory_available(&source);
    if (avail == -2.0) return -1;
    if (avail < 0) {
        printf("memory: not checked (%s)\n", source);
        return 0;
    }
    const double image = (double)mc->in_chans * mc->img_size * mc->img_size * sizeof(float);
    int eval_batch = (c->train.eval_batch_size + r->world - 1) / r->world; /* no larger than the split */
    if (eval_batch > r->val_slice.count) eval_batch = r->val_slice.count;
    sf_memory_need step = {0}, eval = {0}; /* activation arenas */
    sf_memory_probe(r->model, &r->ps, mc, r->rank_batch, &step, &eval);
    /* Training: held now; the parameters' gradients, two moments and EMA copy; both loaders'
     * rings of prepared batches; the step's activations, growing with its micro-batch. An
     * evaluation adds its own arena to all that (the step's stays allocated). */
    const double params = (double)r->ps.total * sizeof(float) * (3 + (c->train.ema_decay > 0));
    const sf_memory_need train = {sf_memory_held() + params + c->data.prefetch * eval_batch * image + step.fixed,
                                  c->data.prefetch * image + step.per_image};
    const double eval_bytes = sf_memory_at(&eval, eval_batch), train_bytes = sf_memory_at(&train, r->rank_batch);
    const double peak = train_bytes + eval_bytes, step_bytes = sf_memory_at(&step, r->rank_batch);
    char s1[32], s2[32], s3[32], s4[32];
    printf("memory: about %s at the peak (a training step's activations %s, %.2f MiB per image; an evaluation "
           "batch's %s); %s available (%s)\n",
           sf_memory_str(peak, s1), sf_memory_str(step_bytes, s2), step.per_image / 1048576.0,
           sf_memory_str(eval_bytes, s3), sf_memory_str(avail, s4), source);
    if (peak <= avail) return 0;
    if (train_bytes <= avail && eval_bytes > step_bytes) { /* the evaluation batch is what does not fit */
        sf_error("train.eval_batch_size=%d: an evaluation batch of %d images needs about %s (%.2f MiB per image) "
                 "on top of training, and this process may use %s (%s)",
                 c->train.eval_batch_size, eval_batch, sf_memory_str(eval_bytes, s1), eval.per_image / 1048576.0,
                 sf_memory_str(avail, s2), source);
        const double room = avail - train_bytes - eval.fixed;
        if (room >= eval.per_image)
            sf_hint("train.eval_batch_size=%d fits", (int)(room / eval.per_image) * r->world);
        else
            sf_hint("not even a one-image evaluation fits next to training: lower train.batch_size");
    } else {
        sf_error("train.batch_size=%d: training on %d images per step needs about %s (%.2f MiB per image), and "
                 "this process may use %s (%s)",
                 c->train.batch_size, r->rank_batch, sf_memory_str(peak, s1), train.per_image / 1048576.0,
                 sf_memory_str(avail, s2), source);
        const sf_memory_need run = {train.fixed + eval_bytes, train.per_image};
        const int fit = sf_memory_fit(&run, avail), a = accum_split(r, fit);
        int batchnorm = 0;
        for (int i = 0; i < r->ps.count; i++)
            batchnorm |= r->ps.list[i].t->name && strstr(r->ps.list[i].t->name, "running_mean");
        if (a)
            sf_hint("train.batch_size=%d optim.accum_steps=%d keeps %d images per update, in micro-batches of %d "
                    "that need about %s%s",
                    c->train.batch_size / a, r->accum * a, c->train.batch_size * r->accum, r->rank_batch / a,
                    sf_memory_str(sf_memory_at(&run, r->rank_batch / a), s3),
                    batchnorm ? " (BatchNorm statistics are then per micro-batch)" : "");
        else if (fit > 0)
            sf_hint("at most %d images per micro-batch fit: lower train.batch_size, raise optim.accum_steps", fit);
        else if (sf_memory_fit(&train, avail) > 0)
            sf_hint("the evaluation batch alone needs %s: lower train.eval_batch_size too",
                    sf_memory_str(eval_bytes, s3));
        else
            sf_hint("not even one image fits: a smaller model or model.img_size");
    }
    sf_hint("SFVIT_MEMORY_MIB=N sets what sfvit may use (where swap, or memory freed later, makes room)");
    return -1;
}

/* MPI: rank 0 alone creates the run folder and writes the config, logs and checkpoints. */
static int run_make_folder(run *r) {
    if (r->rank != 0) return 0;
    if (sf_mkdir_p(r->dir) != 0) return sf_error("cannot create run folder %s: %s", r->dir, strerror(errno));
    if (sf_config_write(&r->cfg, r->path_cfg) != 0) return -1;
    if (!(r->config_text = sf_read_text_file(r->path_cfg))) return sf_error("cannot read back %s", r->path_cfg);
    remove_stale_temporaries(r->dir);
    return 0;
}

/* Swaps the weights and the EMA weights (evaluation and saving of the EMA model). */
static void ema_swap(run *r) {
    for (size_t i = 0; i < r->ps.total; i++) {
        float t = r->ps.data[i];
        r->ps.data[i] = r->ema[i];
        r->ema[i] = t;
    }
}

/* Starting weights: the run's last checkpoint (--resume), model.init_from, or the fresh
 * initialization; the EMA starts as a copy of them unless the run saved its own. */
static int run_restore(run *r) {
    sf_rng_seed(&r->st.drop_rng, r->cfg.train.seed * 7919ULL + 3);
    if (r->resume_dir) {
        if (load_resume_state(r->path_last, &r->ps, &r->st, &r->host) != 0) return -1;
        printf("resumed %s at epoch %d, step %d of it (%ld updates done)\n", r->path_last, r->st.epoch + 1,
               r->st.step_in_epoch, r->st.global_step);
    } else if (r->cfg.model.init_from[0]) {
        if (sf_checkpoint_finetune(r->cfg.model.init_from, &r->ps, &r->cfg.model) != 0) return -1;
    }
    if (r->cfg.train.ema_decay <= 0) return 0;
    r->ema = sf_malloc(r->ps.total * sizeof(float));
    memcpy(r->ema, r->ps.data, r->ps.total * sizeof(float));
    if (r->resume_dir && file_exists(r->path_ema)) {
        sf_ckpt_report rep;
        ema_swap(r);
        int rc = sf_checkpoint_load(r->path_ema, &r->ps, &(sf_ckpt_opts){.strict = 1}, &rep);
        ema_swap(r);
        const char *gs = rc == 0 ? sf_ckpt_meta_get(&rep, "global_step") : NULL;
        if (gs && atol(gs) != r->st.global_step)  // a kill between the two writes
            sf_warn("%s is from update %s, %s from update %ld; the EMA continues from its own", r->path_ema, gs,
                    r->path_last, r->st.global_step);
        sf_ckpt_report_free(&rep);
        if (rc != 0) return -1;
        printf("EMA weights resumed from %s\n", r->path_ema);
    } else if (r->resume_dir) {
        printf("no %s: the EMA starts from the resumed weights\n", r->path_ema);
    }
    return 0;
}

static int run_open_logs(run *r) {
    /* MPI: ranks other than 0 write their logs nowhere. */
    r->flog = fopen(r->rank == 0 ? r->path_log : "/dev/null", "a");
    r->fcsv = fopen(r->rank == 0 ? r->path_csv : "/dev/null", r->resume_dir ? "a" : "w");
    if (!r->flog || !r->fcsv) return sf_error("cannot write logs in %s: %s", r->dir, strerror(errno));
    if (r->cfg.train.tensorboard && r->rank == 0 && !(r->tb = sf_tb_open(r->dir))) return -1;
    if (!r->resume_dir)
        fprintf(r->fcsv, "epoch,train_loss,val_loss,top1,top5,lr,seconds,skipped,train_top1%s\n",
                r->ema ? ",ema_val_loss,ema_top1,ema_top5" : "");
    return 0;
}

static void print_startup(const run *r) {
    const sf_config *c = &r->cfg;
    sf_config_print(c, stdout);
    printf("threads: %d (OpenMP and OpenBLAS)   run folder: %s\n", r->threads, r->dir);
    const int per_update = c->train.batch_size * r->accum;
    if (r->world > 1)
        printf("distributed: %d ranks x %d images = global batch %d; BatchNorm statistics %s\n", r->world,
               r->rank_batch, c->train.batch_size,
               c->train.bn_sync ? "over all ranks (train.bn_sync)" : "per rank (train.bn_sync=false)");
    /* timm's convention: the lr scales with the images of an update, accumulated ones included */
    if (r->accum > 1 || c->optim.scale_lr)
        printf("update: %d images (train.batch_size %d x optim.accum_steps %d); lr %.3e (%s)\n", per_update,
               c->train.batch_size, r->accum, sf_lr_base(&c->optim, per_update),
               c->optim.scale_lr ? "optim.lr x images per update / optim.scale_lr_base" : "optim.scale_lr off");
    fflush(stdout);
}

/* Set-up, in the order that keeps mistakes from leaving files behind: checks, the settings
 * table, data, model, then the run folder, starting weights and logs. */
static int run_setup(run *r, const sf_config *cfg, const char *resume_dir) {
    r->cfg = *cfg;
    r->resume_dir = resume_dir;
    sf_params_init(&r->ps);
    sf_ctx_init(&r->g, 0);
    /* MPI: P ranks split the global batch; ranks other than 0 print nothing on stdout. */
    if ((r->world = sf_dist_init()) < 1) return SF_TRAIN_ERROR;
    r->rank = sf_dist_rank();
    if (!sf_dist_all_ok(run_check(r) == 0)) return SF_TRAIN_ERROR;
    if (r->rank > 0 && !freopen("/dev/null", "w", stdout)) sf_warn("rank %d: cannot silence stdout", r->rank);
    int threads_wanted = r->cfg.train.threads;
    if (threads_wanted <= 0 && !getenv("SFVIT_THREADS") && sf_dist_local_world() > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);  // shared by the ranks of this node
        threads_wanted = cores / sf_dist_local_world() > 1 ? (int)(cores / sf_dist_local_world()) : 1;
    }
    r->threads = sf_threads_init(threads_wanted);
    if (!sf_dist_all_ok(sf_precision_setup(&r->cfg, r->rank == 0) == 0)) return SF_TRAIN_ERROR;
    r->host.threads = r->threads;
    r->host.ranks = r->world;
    r->host.kernels = sf_precision_kernels(); /* bf16's products choice is in the stored config */
    r->g.sum_over_ranks = sf_dist_batchnorm_hook(r->cfg.train.bn_sync);  // MPI: SyncBatchNorm
    r->accum = r->cfg.optim.accum_steps > 0 ? r->cfg.optim.accum_steps : 1;
    print_startup(r);
    int ok = run_open_data(r) == 0 && run_build_model(r) == 0 && run_check_memory(r) == 0;
    ok = sf_dist_all_ok(ok) && sf_dist_all_ok(run_make_folder(r) == 0);
    if (ok) {
        printf("model: %s  params: %zu  images: %d train / %d val, %d classes, %d steps/epoch\n",
               r->cfg.model.name[0] ? r->cfg.model.name : "vit", sf_params_count_trainable(&r->ps),
               r->train_ds.count, r->val_ds.count, r->train_ds.num_classes, r->steps_per_epoch);
        ok = run_restore(r) == 0 && run_open_logs(r) == 0;
    }
    /* MPI: an error on any rank stops every rank; then all start from rank 0's parameters
     * (and moments, on resume). */
    if (!sf_dist_all_ok(ok)) return SF_TRAIN_ERROR;
    sf_dist_broadcast_params(&r->ps, resume_dir != NULL);
    if (r->ema) sf_dist_broadcast(r->ema, r->ps.total);
    install_signal_handlers();
    r->tty = isatty(fileno(stdout));
    r->base_lr = sf_lr_base(&r->cfg.optim, r->cfg.train.batch_size * r->accum); /* as print_startup says */
    return SF_TRAIN_OK;
}

static void run_free(run *r) {
    if (r->flog) fclose(r->flog);
    sf_tb_close(r->tb);
    if (r->fcsv) fclose(r->fcsv);
    if (r->train_loader) sf_loader_free(r->train_loader);
    if (r->val_loader) sf_loader_free(r->val_loader);
    sf_dataset_free(&r->train_ds);
    sf_dataset_free(&r->val_ds);
    if (r->model) sf_model_free(r->model);
    sf_params_free(&r->ps);
    sf_ctx_free(&r->g);
    free(r->ema);
    free(r->config_text);
    free(r->class_names);
}

/* One micro-batch: forward, loss, backward, and the NaN/Inf check of loss and gradients.
 * Returns 0, or 1 when this rank diverged (the step and the tensor are named). */
static int forward_backward(run *r, const sf_batch *b, int epoch, int step, float *loss_value, long *correct) {
    const sf_config *c = &r->cfg;
    sf_tensor x = batch_tensor(b, c->model.in_chans, c->model.img_size);
    sf_tensor *logits = sf_model_forward(&r->g, r->model, &x);
    sf_tensor *loss = sf_cross_entropy(&r->g, logits, b->labels, b->soft_targets, c->aug.smoothing);
    *loss_value = loss->data[0];
    *correct = count_top1(logits, b->labels, b->size);
    if (!isfinite(*loss_value)) {
        sf_error("loss is %s at step %ld (epoch %d, batch %d): training stopped", isnan(*loss_value) ? "NaN" : "Inf",
                 r->st.global_step + 1, epoch + 1, step + 1);
        return 1;
    }
    /* Accumulated micro-batches each contribute 1/accum of the mean loss. */
    sf_backward(&r->g, r->accum > 1 ? sf_scale(&r->g, loss, 1.0f / r->accum) : loss);
    const char *bad = sf_grad_first_nonfinite(&r->ps);
    if (bad) {
        sf_error("gradient of %s is NaN/Inf at step %ld (epoch %d, batch %d): training stopped", bad,
                 r->st.global_step + 1, epoch + 1, step + 1);
        return 1;
    }
    return 0;
}

/* The update once a global batch's gradient is complete: all-reduce, clip, AdamW, EMA. */
static void update(run *r, float lr) {
    sf_dist_allreduce_grads(&r->ps);  // MPI: the mean gradient of the global batch
    dump_first_grad(&r->ps, r->st.global_step);
    if (r->cfg.optim.clip_grad > 0) {
        double norm = sf_grad_norm(&r->ps);
        if (norm > r->cfg.optim.clip_grad) sf_grad_scale(&r->ps, (float)(r->cfg.optim.clip_grad / (norm + 1e-6)));
    }
    r->st.global_step++;
    r->copies_current = sf_precision_adamw_step(&r->ps, &r->cfg.optim, lr, r->st.global_step);
    r->grads_zero = 1; /* the update zeroes the gradients it reads */
    if (r->ema) sf_params_ema_update(&r->ps, r->ema, r->cfg.train.ema_decay);
}

static void tb_stop(run *r) {
    sf_warn("TensorBoard events stop here; log.jsonl goes on");
    sf_tb_close(r->tb);
    r->tb = NULL;
}

static void log_step(run *r, int epoch, int step, double loss, int n, double t_window, double t_epoch,
                     int first_step, float lr) {
    double dt = sf_now() - t_window;
    double img_s = dt > 0 ? n * (double)r->cfg.train.batch_size / dt : 0;
    int done_here = step - first_step;
    double eta = done_here > 0 ? (sf_now() - t_epoch) / done_here * (r->steps_per_epoch - step) : 0;
    double stall = sf_loader_stall_seconds(r->train_loader);
    print_progress(stdout, r->tty, epoch, r->cfg.train.epochs, step, r->steps_per_epoch, loss / n, lr, img_s, eta,
                   stall);
    char nr[64] = "";
    /* SOFT: the worst Newton-Raphson residual of the step's last inverse
     * (docs/math/soft_conv_norm.md); JSON has no NaN, so a NaN residual is null. */
    const float res = r->log_nr ? sf_nr_last_residual() : 0;
    if (r->log_nr) snprintf(nr, sizeof nr, isnan(res) ? ",\"nr_residual\":null" : ",\"nr_residual\":%.4g", (double)res);
    fprintf(r->flog,
            "{\"step\":%ld,\"epoch\":%d,\"batch\":%d,\"loss\":%.6f,\"lr\":%.6e,\"img_per_s\":%.2f,\"stall_s\":%.3f%s}\n",
            r->st.global_step, epoch, step, loss / n, lr, img_s, stall, nr);
    fflush(r->flog);
    if (r->tb) {  // a failed event write is reported once and ends the TensorBoard log, not the run
        const long s = r->st.global_step;
        int rc = sf_tb_scalar(r->tb, "train/loss", s, (float)(loss / n)) | sf_tb_scalar(r->tb, "train/lr", s, lr) |
                 sf_tb_scalar(r->tb, "train/img_per_s", s, (float)img_s) |
                 sf_tb_scalar(r->tb, "train/stall_s", s, (float)stall);
        if (r->log_nr) rc |= sf_tb_scalar(r->tb, "train/nr_residual", s, res);
        if (rc) tb_stop(r);
    }
}

/* last.safetensors with the optimizer moments, and ema.safetensors (the same state in its
 * metadata, so a resume can tell they belong together). */
static int save_checkpoints(run *r) {
    if (r->ema) {
        ema_swap(r);
        int rc = save_on_rank0(r->path_ema, &r->ps, &r->st, &r->host, r->config_text, r->class_names, 0);
        ema_swap(r);
        if (rc != 0) return SF_TRAIN_ERROR;
    }
    return save_on_rank0(r->path_last, &r->ps, &r->st, &r->host, r->config_text, r->class_names, 1) == 0 ? SF_TRAIN_OK : SF_TRAIN_ERROR;
}

/* The steps of one epoch, from st.step_in_epoch until its end, a stop signal, train.max_steps
 * or a NaN/Inf (SF_TRAIN_DIVERGED, the weights untouched by that step). */
static int train_epoch(run *r, int epoch, epoch_stats *es) {
    const sf_config *c = &r->cfg;
    memset(es, 0, sizeof *es);
    es->t0 = sf_now();
    sf_loader_start_epoch(r->train_loader, epoch, r->st.step_in_epoch);
    double loss_window = 0, t_window = sf_now();
    int window_count = 0, step = r->st.step_in_epoch, got;
    const int first_step = step;
    sf_batch b;
    while ((got = sf_loader_next(r->train_loader, &b)) > 0) {
        sf_test_hold("step %ld", r->st.global_step + 1);
        r->g.training = 1;
        r->g.grad_enabled = 1;
        step_rng_begin(&r->g, &r->st.drop_rng, r->rank, r->world);  // MPI: per-rank masks
        es->lr = sf_lr_at(r->base_lr, &c->sched, c->train.epochs, (double)epoch + (double)step / r->steps_per_epoch);
        if (step % r->accum == 0) {
            if (!r->grads_zero) sf_params_zero_grad(&r->ps); /* the run's first step */
            /* bf16: this update's weights, converted once (by the update itself when it could) */
            if (!r->copies_current) sf_precision_weights_refresh(&r->ps);
        }
        float loss;
        long correct;
        int diverged = forward_backward(r, &b, epoch, step, &loss, &correct), stop = g_stop_requested;
        r->grads_zero = 0;
        agree_step(r->world, &loss, &diverged, &stop);  // MPI: global loss, any rank's stop
        if (diverged) {
            if (r->rank == 0 && file_exists(r->path_last)) sf_hint("the last good checkpoint is kept: %s", r->path_last);
            else if (r->rank == 0) sf_hint("no checkpoint was written before the divergence");
            fprintf(r->flog, "{\"event\":\"diverged\",\"step\":%ld,\"epoch\":%d}\n", r->st.global_step + 1, epoch);
            return SF_TRAIN_DIVERGED;
        }
        step_rng_end(&r->g, &r->st.drop_rng, r->world);
        sf_ctx_reset(&r->g);
        step++;
        if (step % r->accum == 0 || step == r->steps_per_epoch) update(r, es->lr);
        r->steps_this_run++;
        r->st.step_in_epoch = step;
        es->loss_sum += loss;
        es->loss_count++;
        es->train_correct += correct;
        es->train_seen += b.size;
        loss_window += loss;
        window_count++;
        if (step % c->train.log_every == 0 || step == r->steps_per_epoch) {
            log_step(r, epoch, step, loss_window, window_count, t_window, es->t0, first_step, es->lr);
            loss_window = 0;
            window_count = 0;
            t_window = sf_now();
        }
        if (c->train.save_every_steps > 0 && step % c->train.save_every_steps == 0 && step < r->steps_per_epoch) {
            r->st.epoch = epoch;
            if (save_checkpoints(r) != SF_TRAIN_OK) return SF_TRAIN_ERROR;
        }
        if (r->world == 1) stop = g_stop_requested;
        if (stop || (c->train.max_steps > 0 && r->steps_this_run >= c->train.max_steps)) {
            r->stopped_by_signal = stop;
            break;
        }
    }
    if (r->tty) printf("\n");
    if (!sf_dist_all_ok(got >= 0)) return SF_TRAIN_ERROR;  // the loader's error is already printed
    return SF_TRAIN_OK;
}

/* Top-1 of the weights, and of the EMA weights; best.safetensors when top-1 improves. */
static int evaluate(run *r, int epoch, const epoch_stats *es, sf_train_result *res) {
    const sf_config *c = &r->cfg;
    sf_dist_broadcast_buffers(&r->ps);  // MPI: rank 0's BatchNorm running statistics
    sf_eval_result ev = {0}, ee = {0};
    r->copies_current = 0;  // an evaluation converts the weights it runs (the EMA's too) and drops the copies
    if (sf_evaluate(r->model, &r->ps, r->val_loader, c->model.num_classes, &ev) != 0) return SF_TRAIN_ERROR;
    if (r->ema) {
        ema_swap(r);
        int rc = sf_evaluate(r->model, &r->ps, r->val_loader, c->model.num_classes, &ee);
        ema_swap(r);
        if (rc != 0) return SF_TRAIN_ERROR;
    }
    const double train_loss = es->loss_count ? es->loss_sum / es->loss_count : 0;
    const int skipped = sf_loader_skipped(r->train_loader);
    printf("epoch %d/%d  train loss %.4f  val loss %.4f  top-1 %.2f%%  top-5 %.2f%%  (%.0fs%s)\n", epoch + 1,
           c->train.epochs, train_loss, ev.loss, ev.top1, ev.top5, sf_now() - es->t0,
           skipped ? ", skipped bad images" : "");
    if (r->ema) printf("  EMA weights: val loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", ee.loss, ee.top1, ee.top5);
    if (skipped) printf("  %d bad train images were skipped this epoch\n", skipped);
    fprintf(r->flog, "{\"epoch\":%d,\"train_loss\":%.6f,\"val_loss\":%.6f,\"top1\":%.4f,\"top5\":%.4f", epoch + 1,
            train_loss, ev.loss, ev.top1, ev.top5);
    if (r->ema) fprintf(r->flog, ",\"ema_val_loss\":%.6f,\"ema_top1\":%.4f,\"ema_top5\":%.4f", ee.loss, ee.top1, ee.top5);
    fprintf(r->flog, "}\n");
    fflush(r->flog);
    if (r->tb) {  // per epoch, at the global step the epoch ended on
        const long s = r->st.global_step;
        int rc = sf_tb_scalar(r->tb, "val/loss", s, (float)ev.loss) | sf_tb_scalar(r->tb, "val/top1", s, (float)ev.top1) |
                 sf_tb_scalar(r->tb, "val/top5", s, (float)ev.top5) |
                 sf_tb_scalar(r->tb, "train/epoch_loss", s, (float)train_loss);
        if (es->train_seen) rc |= sf_tb_scalar(r->tb, "train/top1", s, (float)(100.0 * es->train_correct / es->train_seen));
        if (r->ema) rc |= sf_tb_scalar(r->tb, "ema/top1", s, (float)ee.top1);
        if (rc) tb_stop(r);
    }
    fprintf(r->fcsv, "%d,%.6f,%.6f,%.4f,%.4f,%.6e,%.1f,%d,%.4f", epoch + 1, train_loss, ev.loss, ev.top1, ev.top5,
            es->lr, sf_now() - es->t0, skipped, es->train_seen ? 100.0 * es->train_correct / es->train_seen : 0.0);
    if (r->ema) fprintf(r->fcsv, ",%.6f,%.4f,%.4f", ee.loss, ee.top1, ee.top5);
    fprintf(r->fcsv, "\n");
    fflush(r->fcsv);
    res->final_top1 = (float)ev.top1;
    res->final_top5 = (float)ev.top5;
    res->ema_top1 = (float)ee.top1;
    if (ev.top1 > r->st.best_top1 || rank0_decides(r->rank == 0 && !file_exists(r->path_best))) {
        if (ev.top1 > r->st.best_top1) r->st.best_top1 = (float)ev.top1;
        r->st.epoch = epoch + 1;
        r->st.step_in_epoch = 0;
        if (save_on_rank0(r->path_best, &r->ps, &r->st, &r->host, r->config_text, r->class_names, 0) != 0) return SF_TRAIN_ERROR;
    }
    return SF_TRAIN_OK;
}

/* The checkpoints at the end of an epoch or a stop. */
static int save_last(run *r) {
    /* MPI: identical updates keep the ranks' parameters bit-equal; check that before saving,
     * and continue from rank 0's if a reduction was not bitwise reproducible. */
    if (!sf_dist_params_in_sync(&r->ps)) {
        sf_warn("parameters differ between ranks after epoch %d; continuing from rank 0's", r->st.epoch + 1);
        sf_dist_broadcast_params(&r->ps, 1);
        if (r->ema) sf_dist_broadcast(r->ema, r->ps.total);
    }
    return save_checkpoints(r);
}

static void report_stop(const run *r) {
    if (r->stopped_by_signal)
        printf("stopped by signal after step %ld; checkpoint written: %s\n", r->st.global_step, r->path_last);
    else
        printf("stopped after train.max_steps=%d steps; checkpoint written: %s\n", r->cfg.train.max_steps,
               r->path_last);
}

static void report_allreduce(const run *r) {
    if (r->world > 1) {
        double secs;
        long calls;
        sf_dist_allreduce_stats(&secs, &calls);
        printf("allreduce: %.2f ms per update over %ld updates, %.2f MB of gradient each, %d ranks\n",
               calls ? 1e3 * secs / calls : 0.0, calls, r->ps.total * sizeof(float) / 1e6, r->world);
    }
}

/* The training run, as the algorithm reads: set up; for each epoch, its steps, then at the
 * end of a complete epoch the evaluation and the checkpoints; finish. */
int sf_train(const sf_config *cfg, const char *resume_dir, sf_train_result *res) {
    const double t_start = sf_now();
    memset(res, 0, sizeof *res);
    res->diverged_step = -1;
    run *r = sf_calloc(1, sizeof *r);
    int status = run_setup(r, cfg, resume_dir);
    for (int epoch = r->st.epoch; status == SF_TRAIN_OK && epoch < r->cfg.train.epochs; epoch++) {
        epoch_stats es;
        status = train_epoch(r, epoch, &es);
        if (status == SF_TRAIN_DIVERGED) res->diverged_step = r->st.global_step + 1;
        if (status != SF_TRAIN_OK) break;
        const int complete = r->st.step_in_epoch >= r->steps_per_epoch;
        if (complete && ((epoch + 1) % r->cfg.train.eval_every == 0 || epoch + 1 == r->cfg.train.epochs))
            status = evaluate(r, epoch, &es, res);
        r->st.epoch = complete ? epoch + 1 : epoch;
        if (complete) r->st.step_in_epoch = 0;
        if (status == SF_TRAIN_OK) status = save_last(r);
        if (status == SF_TRAIN_OK && complete) res->epochs_done++;
        /* a stop or the step budget at an epoch's last step ends the run too, not one step later */
        const int halted = r->stopped_by_signal ||
                           (r->cfg.train.max_steps > 0 && r->steps_this_run >= r->cfg.train.max_steps);
        if (status == SF_TRAIN_OK && (!complete || (halted && epoch + 1 < r->cfg.train.epochs))) {
            report_stop(r);
            break;
        }
    }
    if (status == SF_TRAIN_OK) report_allreduce(r);
    res->best_top1 = r->st.best_top1;
    res->steps_done = r->st.global_step;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", r->dir);
    res->seconds = sf_now() - t_start;
    run_free(r);
    free(r);
    return res->status = status;
}
