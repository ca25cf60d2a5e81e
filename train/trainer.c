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
 * last.safetensors (every epoch, and every train.save_every_steps steps), best.safetensors.
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
#include "sfvit/dist.h"
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
static int mkdir_p(const char *path) {
    char tmp[SF_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = sf_malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = 0;
    return s;
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
int sf_evaluate(sf_model *m, sf_loader *l, int num_classes, sf_eval_result *r) {
    const sf_model_cfg *mc = sf_model_config(m);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.grad_enabled = 0;
    g.training = 0;
    double loss_sum = 0;
    long top1 = 0, top5 = 0, count = 0;
    int k5 = num_classes < 5 ? num_classes : 5;
    sf_batch b;
    sf_loader_start_epoch(l, 0, 0);
    while (sf_loader_next(l, &b) > 0) {
        sf_tensor x = batch_tensor(&b, mc->in_chans, mc->img_size);
        sf_tensor *logits = sf_model_forward(&g, m, &x);
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
    /* MPI: each rank evaluated its own slice of the split; the totals are over all of them. */
    double tot[4] = {loss_sum, (double)top1, (double)top5, (double)count};
    sf_dist_sum(tot, 4);
    loss_sum = tot[0];
    top1 = (long)tot[1];
    top5 = (long)tot[2];
    count = (long)tot[3];
    r->count = (int)count;
    r->loss = count ? loss_sum / count : 0;
    r->top1 = count ? 100.0 * top1 / count : 0;
    r->top5 = count ? 100.0 * top5 / count : 0;
    return 0;
}

/* ---- the run ---- */
typedef struct run_state {
    int epoch;          /* epoch to continue from */
    int step_in_epoch;  /* batches of that epoch already done */
    long global_step;   /* optimizer updates done */
    float best_top1;
    sf_rng drop_rng;
} run_state;

static int save_checkpoint(const char *path, const sf_params *ps, const run_state *st,
                           const char *config_text, int with_optim) {
    char epoch[32], step[32], gstep[32], best[32], rng[80];
    snprintf(epoch, sizeof epoch, "%d", st->epoch);
    snprintf(step, sizeof step, "%d", st->step_in_epoch);
    snprintf(gstep, sizeof gstep, "%ld", st->global_step);
    snprintf(best, sizeof best, "%.9g", st->best_top1);
    rng_to_hex(&st->drop_rng, rng, sizeof rng);
    const sf_kv meta[] = {{"format", "sfvit-1"},       {"config", config_text}, {"epoch", epoch},
                          {"step_in_epoch", step},     {"global_step", gstep},  {"best_top1", best},
                          {"rng_drop", rng}};
    return sf_checkpoint_save(path, ps, with_optim, meta, (int)(sizeof meta / sizeof meta[0]));
}

/* MPI: rank 0 writes; every rank learns whether it worked (so all stop together). */
static int save_on_rank0(const char *path, const sf_params *ps, const run_state *st,
                         const char *config_text, int with_optim) {
    int rc = sf_dist_rank() == 0 ? save_checkpoint(path, ps, st, config_text, with_optim) : 0;
    return sf_dist_all_ok(rc == 0) ? 0 : -1;
}

static int load_resume_state(const char *path, sf_params *ps, run_state *st) {
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
    }
    sf_ckpt_report_free(&meta);
    if (!ok) {
        sf_error("%s: checkpoint has no training state (epoch, step, RNG) to resume from", path);
        sf_hint("it may come from another tool; use model.init_from=%s to fine-tune from it", path);
        return -1;
    }
    return 0;
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

int sf_train(const sf_config *cfg_in, const char *resume_dir, sf_train_result *res) {
    sf_config cfg = *cfg_in;
    memset(res, 0, sizeof *res);
    res->status = SF_TRAIN_ERROR;
    res->diverged_step = -1;
    const double t_start = sf_now();
    /* MPI: P ranks split the global batch; ranks other than 0 print nothing on stdout. */
    const int world = sf_dist_init(), rank = sf_dist_rank();
    if (cfg.train.batch_size % world != 0) {
        sf_error("train.batch_size=%d (the global batch) is not divisible by the %d ranks", cfg.train.batch_size,
                 world);
        sf_hint("set train.batch_size to a multiple of %d", world);
        return res->status;
    }
    const int rank_batch = cfg.train.batch_size / world;
    if (world > 1 && (cfg.aug.mixup > 0 || cfg.aug.cutmix > 0) && rank_batch % 2 != 0) {
        sf_error("mixup/cutmix pair samples within a rank's batch: %d per rank is odd", rank_batch);
        sf_hint("set train.batch_size to a multiple of %d", 2 * world);
        return res->status;
    }
    if (rank > 0 && !freopen("/dev/null", "w", stdout)) sf_warn("rank %d: cannot silence stdout", rank);
    int threads_wanted = cfg.train.threads;
    if (threads_wanted <= 0 && !getenv("SFVIT_THREADS") && sf_dist_local_world() > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);  // shared by the ranks of this node
        threads_wanted = cores / sf_dist_local_world() > 1 ? (int)(cores / sf_dist_local_world()) : 1;
    }
    int threads = sf_threads_init(threads_wanted);
    sf_dist_set_bn_sync(cfg.train.bn_sync);

    int len = resume_dir ? snprintf(res->run_dir, sizeof res->run_dir, "%s", resume_dir)
                         : snprintf(res->run_dir, sizeof res->run_dir, "%s/%s", cfg.train.out, cfg.train.name);
    if (len >= (int)sizeof res->run_dir) {
        sf_error("run folder path is longer than %d characters: %s/%s", SF_PATH_MAX - 1, cfg.train.out,
                 cfg.train.name);
        return res->status;
    }
    char path_last[SF_PATH_MAX + 32], path_best[SF_PATH_MAX + 32], path_cfg[SF_PATH_MAX + 32];
    char path_log[SF_PATH_MAX + 32], path_csv[SF_PATH_MAX + 32];
    snprintf(path_last, sizeof path_last, "%s/last.safetensors", res->run_dir);
    snprintf(path_best, sizeof path_best, "%s/best.safetensors", res->run_dir);
    snprintf(path_cfg, sizeof path_cfg, "%s/config.yaml", res->run_dir);
    snprintf(path_log, sizeof path_log, "%s/log.jsonl", res->run_dir);
    snprintf(path_csv, sizeof path_csv, "%s/metrics.csv", res->run_dir);

    /* MPI: rank 0 alone creates the run folder and writes config, logs and checkpoints; the
     * ranks agree on whether it could. */
    char *config_text = NULL;
    int folder_ok = 1;
    if (rank == 0) {
        if (!resume_dir && file_exists(path_last)) {
            sf_error("run folder %s already holds a checkpoint", res->run_dir);
            sf_hint("continue it with `sfvit train --resume %s`, or set train.name=<new name>", res->run_dir);
            folder_ok = 0;
        } else if (mkdir_p(res->run_dir) != 0) {
            sf_error("cannot create run folder %s: %s", res->run_dir, strerror(errno));
            folder_ok = 0;
        } else if (sf_config_write(&cfg, path_cfg) != 0) {
            folder_ok = 0;
        } else if (!(config_text = read_text_file(path_cfg))) {
            sf_error("cannot read back %s", path_cfg);
            folder_ok = 0;
        } else {
            remove_stale_temporaries(res->run_dir);
        }
    }
    if (!sf_dist_all_ok(folder_ok)) {
        free(config_text);
        return res->status;
    }

    sf_config_print(&cfg, stdout);
    printf("threads: %d (OpenMP and OpenBLAS)   run folder: %s\n", threads, res->run_dir);
    if (world > 1)
        printf("distributed: %d ranks x %d images = global batch %d; lr %.3e (%s); BatchNorm statistics %s\n",
               world, rank_batch, cfg.train.batch_size, sf_lr_base(&cfg.optim, cfg.train.batch_size),
               cfg.optim.scale_lr ? "scaled by the global batch" : "optim.scale_lr off: not scaled",
               cfg.train.bn_sync ? "over all ranks (train.bn_sync)" : "per rank (train.bn_sync=false)");

    /* data */
    sf_dataset train_ds, val_ds;
    memset(&train_ds, 0, sizeof train_ds);
    memset(&val_ds, 0, sizeof val_ds);
    sf_loader *train_loader = NULL, *val_loader = NULL;
    sf_model *model = NULL;
    sf_params ps;
    sf_params_init(&ps);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    FILE *flog = NULL, *fcsv = NULL;
    sf_dataset val_slice;  // MPI: this rank's part of the val split (a view of val_ds)
    int setup_ok = 0, steps_per_epoch = 0;

    if (sf_dataset_open(&train_ds, cfg.data.root, cfg.data.train_split) != 0) goto setup_end;
    if (sf_dataset_open(&val_ds, cfg.data.root, cfg.data.val_split) != 0) goto setup_end;
    if (train_ds.num_classes != cfg.model.num_classes) {
        sf_error("%s/%s has %d classes but model.num_classes is %d", cfg.data.root,
                 cfg.data.train_split, train_ds.num_classes, cfg.model.num_classes);
        sf_hint("set model.num_classes=%d", train_ds.num_classes);
        goto setup_end;
    }
    sf_loader_opts lo = {
        .batch_size = cfg.train.batch_size,
        .img_size = cfg.model.img_size,
        .in_chans = cfg.model.in_chans,
        .train = 1,
        .workers = cfg.data.workers,
        .prefetch = cfg.data.prefetch,
        .seed = cfg.train.seed,
        .aug = &cfg.aug,
        .num_classes = cfg.model.num_classes,
        .rank = rank,
        .world = world,
        .fraction = cfg.train.max_train_fraction,
    };
    lo.batch_size = rank_batch;  // MPI: this rank's share of the global batch
    train_loader = sf_loader_create(&train_ds, &lo);
    /* MPI: evaluation is sharded as contiguous slices without padding (sums reduced in
     * sf_evaluate), so every image counts once and top-1/top-5 equal a single process's. */
    if (val_ds.count < world) {
        sf_error("%s/%s: %d images for %d ranks", cfg.data.root, cfg.data.val_split, val_ds.count, world);
        goto setup_end;
    }
    val_slice = world > 1 ? dataset_slice(&val_ds, rank, world) : val_ds;
    sf_loader_opts vo = lo;
    vo.train = 0;
    vo.batch_size = cfg.train.eval_batch_size > 0 ? cfg.train.eval_batch_size : cfg.train.batch_size;
    vo.batch_size = (vo.batch_size + world - 1) / world;
    vo.rank = 0;
    vo.world = 1;
    vo.fraction = 1.0f;
    val_loader = sf_loader_create(&val_slice, &vo);
    if (!train_loader || !val_loader) goto setup_end;
    steps_per_epoch = sf_loader_steps_per_epoch(train_loader);
    if (steps_per_epoch < 1) {
        sf_error("%s/%s: %d images is less than one batch of %d", cfg.data.root, cfg.data.train_split,
                 train_ds.count, cfg.train.batch_size);
        goto setup_end;
    }

    /* model and parameters */
    model = sf_model_build(&cfg.model, &ps);
    if (!model) goto setup_end;
    sf_params_alloc(&ps);
    sf_rng init_rng;
    sf_rng_seed(&init_rng, cfg.train.seed * 1000003ULL + 1);
    sf_model_init(model, &ps, &init_rng);
    printf("model: %s  params: %zu  images: %d train / %d val, %d classes, %d steps/epoch\n",
           cfg.model.name[0] ? cfg.model.name : "vit", sf_params_count_trainable(&ps), train_ds.count,
           val_ds.count, train_ds.num_classes, steps_per_epoch);

    run_state st = {0};
    sf_rng_seed(&st.drop_rng, cfg.train.seed * 7919ULL + 3);
    if (resume_dir) {
        if (load_resume_state(path_last, &ps, &st) != 0) goto setup_end;
        printf("resumed %s at epoch %d, step %d of it (%ld updates done)\n", path_last, st.epoch + 1,
               st.step_in_epoch, st.global_step);
    } else if (cfg.model.init_from[0]) {
        if (sf_checkpoint_finetune(cfg.model.init_from, &ps, &cfg.model) != 0) goto setup_end;
    }

    /* MPI: ranks other than 0 write their logs nowhere. */
    flog = fopen(rank == 0 ? path_log : "/dev/null", "a");
    fcsv = fopen(rank == 0 ? path_csv : "/dev/null", resume_dir ? "a" : "w");
    if (!flog || !fcsv) {
        sf_error("cannot write logs in %s: %s", res->run_dir, strerror(errno));
        goto setup_end;
    }
    if (!resume_dir) fprintf(fcsv, "epoch,train_loss,val_loss,top1,top5,lr,seconds,skipped\n");
    setup_ok = 1;
setup_end:
    /* MPI: an error on any rank stops every rank; then all start from rank 0's parameters
     * (and moments, on resume). */
    if (!sf_dist_all_ok(setup_ok)) goto done;
    sf_dist_broadcast_params(&ps, resume_dir != NULL);

    install_signal_handlers();
    const int tty = isatty(fileno(stdout));
    const float base_lr = sf_lr_base(&cfg.optim, cfg.train.batch_size);
    const int accum = cfg.optim.accum_steps > 0 ? cfg.optim.accum_steps : 1;
    long steps_this_run = 0;
    int stopped_by_signal = 0;
    res->status = SF_TRAIN_OK;

    for (int epoch = st.epoch; epoch < cfg.train.epochs; epoch++) {
        const double t_epoch = sf_now();
        sf_loader_start_epoch(train_loader, epoch, st.step_in_epoch);
        double loss_sum = 0, loss_window = 0;
        int loss_count = 0, window_count = 0;
        double t_window = sf_now();
        float lr = 0;
        sf_batch b;
        int step = st.step_in_epoch;
        const int first_step = step;
        while (sf_loader_next(train_loader, &b) > 0) {
            g.training = 1;
            g.grad_enabled = 1;
            step_rng_begin(&g, &st.drop_rng, rank, world);  // MPI: per-rank masks
            lr = sf_lr_at(base_lr, &cfg.sched, cfg.train.epochs, (double)epoch + (double)step / steps_per_epoch);
            if (step % accum == 0) sf_params_zero_grad(&ps);

            sf_tensor x = batch_tensor(&b, cfg.model.in_chans, cfg.model.img_size);
            sf_tensor *logits = sf_model_forward(&g, model, &x);
            sf_tensor *loss = sf_cross_entropy(&g, logits, b.labels, b.soft_targets, cfg.aug.smoothing);
            float loss_value = loss->data[0];
            int diverged = 0, stop_signal = g_stop_requested;
            if (!isfinite(loss_value)) {
                sf_error("loss is %s at step %ld (epoch %d, batch %d): training stopped",
                         isnan(loss_value) ? "NaN" : "Inf", st.global_step + 1, epoch + 1, step + 1);
                diverged = 1;
            } else {
                /* Accumulated micro-batches each contribute 1/accum of the mean loss. */
                sf_backward(&g, accum > 1 ? sf_scale(&g, loss, 1.0f / accum) : loss);
                const char *bad = sf_grad_first_nonfinite(&ps);
                if (bad) {
                    sf_error("gradient of %s is NaN/Inf at step %ld (epoch %d, batch %d): training stopped",
                             bad, st.global_step + 1, epoch + 1, step + 1);
                    diverged = 1;
                }
            }
            agree_step(world, &loss_value, &diverged, &stop_signal);  // MPI: global loss, any rank's stop
            if (diverged) {
                res->status = SF_TRAIN_DIVERGED;
                res->diverged_step = st.global_step + 1;
                if (rank == 0 && file_exists(path_last))
                    sf_hint("the last good checkpoint is kept: %s", path_last);
                else if (rank == 0)
                    sf_hint("no checkpoint was written before the divergence");
                fprintf(flog, "{\"event\":\"diverged\",\"step\":%ld,\"epoch\":%d}\n", res->diverged_step, epoch);
                goto done;
            }
            step_rng_end(&g, &st.drop_rng, world);
            sf_ctx_reset(&g);

            step++;
            if (step % accum == 0 || step == steps_per_epoch) {
                sf_dist_allreduce_grads(&ps);  // MPI: the mean gradient of the global batch
                dump_first_grad(&ps, st.global_step);
                if (cfg.optim.clip_grad > 0) {
                    double norm = sf_grad_norm(&ps);
                    if (norm > cfg.optim.clip_grad) sf_grad_scale(&ps, (float)(cfg.optim.clip_grad / (norm + 1e-6)));
                }
                st.global_step++;
                sf_adamw_step(&ps, &cfg.optim, lr, st.global_step);
            }
            steps_this_run++;
            st.step_in_epoch = step;
            loss_sum += loss_value;
            loss_count++;
            loss_window += loss_value;
            window_count++;

            const int log_now = step % cfg.train.log_every == 0 || step == steps_per_epoch;
            if (log_now || tty) {
                double dt = sf_now() - t_window;
                double img_s = dt > 0 ? window_count * (double)cfg.train.batch_size / dt : 0;
                double elapsed_epoch = sf_now() - t_epoch;
                int done_here = step - first_step;
                double eta = done_here > 0 ? elapsed_epoch / done_here * (steps_per_epoch - step) : 0;
                if (log_now) {
                    double stall = sf_loader_stall_seconds(train_loader);
                    print_progress(stdout, tty, epoch, cfg.train.epochs, step, steps_per_epoch,
                                   loss_window / window_count, lr, img_s, eta, stall);
                    fprintf(flog,
                            "{\"step\":%ld,\"epoch\":%d,\"batch\":%d,\"loss\":%.6f,\"lr\":%.6e,"
                            "\"img_per_s\":%.2f,\"stall_s\":%.3f}\n",
                            st.global_step, epoch, step, loss_window / window_count, lr, img_s, stall);
                    fflush(flog);
                    loss_window = 0;
                    window_count = 0;
                    t_window = sf_now();
                }
            }
            if (cfg.train.save_every_steps > 0 && step % cfg.train.save_every_steps == 0 &&
                step < steps_per_epoch) {
                st.epoch = epoch;
                if (save_on_rank0(path_last, &ps, &st, config_text, 1) != 0) {
                    res->status = SF_TRAIN_ERROR;
                    goto done;
                }
            }
            if (world == 1) stop_signal = g_stop_requested;
            if (stop_signal || (cfg.train.max_steps > 0 && steps_this_run >= cfg.train.max_steps)) {
                stopped_by_signal = stop_signal;
                break;
            }
        }
        if (tty) printf("\n");
        const int epoch_complete = st.step_in_epoch >= steps_per_epoch;

        /* Evaluate and checkpoint at the end of a complete epoch. */
        sf_eval_result ev = {0};
        if (epoch_complete && ((epoch + 1) % cfg.train.eval_every == 0 || epoch + 1 == cfg.train.epochs)) {
            sf_dist_broadcast_buffers(&ps);  // MPI: rank 0's BatchNorm running statistics
            sf_evaluate(model, val_loader, cfg.model.num_classes, &ev);
            int skipped = sf_loader_skipped(train_loader);
            printf("epoch %d/%d  train loss %.4f  val loss %.4f  top-1 %.2f%%  top-5 %.2f%%  (%.0fs%s)\n",
                   epoch + 1, cfg.train.epochs, loss_count ? loss_sum / loss_count : 0, ev.loss, ev.top1,
                   ev.top5, sf_now() - t_epoch, skipped ? ", skipped bad images" : "");
            if (skipped) printf("  %d bad train images were skipped this epoch\n", skipped);
            fprintf(flog, "{\"epoch\":%d,\"train_loss\":%.6f,\"val_loss\":%.6f,\"top1\":%.4f,\"top5\":%.4f}\n",
                    epoch + 1, loss_count ? loss_sum / loss_count : 0, ev.loss, ev.top1, ev.top5);
            fflush(flog);
            fprintf(fcsv, "%d,%.6f,%.6f,%.4f,%.4f,%.6e,%.1f,%d\n", epoch + 1,
                    loss_count ? loss_sum / loss_count : 0, ev.loss, ev.top1, ev.top5, lr,
                    sf_now() - t_epoch, skipped);
            fflush(fcsv);
            res->final_top1 = (float)ev.top1;
            res->final_top5 = (float)ev.top5;
            if (ev.top1 > st.best_top1 || rank0_decides(rank == 0 && !file_exists(path_best))) {
                if (ev.top1 > st.best_top1) st.best_top1 = (float)ev.top1;
                st.epoch = epoch + 1;
                st.step_in_epoch = 0;
                if (save_on_rank0(path_best, &ps, &st, config_text, 0) != 0) {
                    res->status = SF_TRAIN_ERROR;
                    goto done;
                }
            }
        }
        if (epoch_complete) {
            st.epoch = epoch + 1;
            st.step_in_epoch = 0;
            res->epochs_done++;
        } else {
            st.epoch = epoch;
        }
        /* MPI: identical updates keep the ranks' parameters bit-equal; check that before
         * saving, and continue from rank 0's if a reduction was not bitwise reproducible. */
        if (!sf_dist_params_in_sync(&ps)) {
            sf_warn("parameters differ between ranks after epoch %d; continuing from rank 0's", epoch + 1);
            sf_dist_broadcast_params(&ps, 1);
        }
        if (save_on_rank0(path_last, &ps, &st, config_text, 1) != 0) {
            res->status = SF_TRAIN_ERROR;
            goto done;
        }
        if (!epoch_complete) {
            if (stopped_by_signal)
                printf("stopped by signal after step %ld; checkpoint written: %s\n", st.global_step, path_last);
            else
                printf("stopped after train.max_steps=%d steps; checkpoint written: %s\n", cfg.train.max_steps,
                       path_last);
            break;
        }
    }
    res->best_top1 = st.best_top1;
    res->steps_done = st.global_step;
    if (world > 1) {
        double secs;
        long calls;
        sf_dist_allreduce_stats(&secs, &calls);
        printf("allreduce: %.2f ms per update over %ld updates, %.2f MB of gradient each, %d ranks\n",
               calls ? 1e3 * secs / calls : 0.0, calls, ps.total * sizeof(float) / 1e6, world);
    }

done:
    res->seconds = sf_now() - t_start;
    if (flog) fclose(flog);
    if (fcsv) fclose(fcsv);
    if (train_loader) sf_loader_free(train_loader);
    if (val_loader) sf_loader_free(val_loader);
    sf_dataset_free(&train_ds);
    sf_dataset_free(&val_ds);
    if (model) sf_model_free(model);
    sf_params_free(&ps);
    sf_ctx_free(&g);
    free(config_text);
    return res->status;
}
