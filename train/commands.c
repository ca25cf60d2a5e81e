/* commands.c — `sfvit train`, `eval`, `info` and `data`: argument parsing and
 * the glue between config, data, model, checkpoint and the trainer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfvit/checkpoint.h"
#include "sfvit/train.h"

static int is_override(const char *arg) { return strchr(arg, '=') != NULL && arg[0] != '-'; }

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- sfvit train CONFIG [key=value ...] | --resume RUN_DIR [key=value ...] ---- */
int sf_cmd_train(int argc, char **argv) {
    const char *config_path = NULL, *resume = NULL;
    char *overrides[128];
    int n_over = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--resume") && i + 1 < argc)
            resume = argv[++i];
        else if (is_override(argv[i]) && n_over < 128)
            overrides[n_over++] = argv[i];
        else if (argv[i][0] != '-' && !config_path)
            config_path = argv[i];
        else {
            sf_error("train: unexpected argument '%s'", argv[i]);
            sf_hint("usage: sfvit train CONFIG.yaml [key=value ...]  |  sfvit train --resume RUN_DIR");
            return 2;
        }
    }
    char resume_cfg[SF_PATH_MAX + 16];
    if (resume) {
        if (config_path) {
            sf_error("train: give either a config or --resume RUN_DIR, not both");
            return 2;
        }
        snprintf(resume_cfg, sizeof resume_cfg, "%s/config.yaml", resume);
        config_path = resume_cfg;
        if (access(resume_cfg, R_OK) != 0) {
            sf_error("%s is not a run folder: it has no config.yaml", resume);
            sf_hint("--resume takes <train.out>/<train.name> of a run started with `sfvit train CONFIG.yaml`");
            return SF_TRAIN_ERROR;
        }
    }
    if (!config_path) {
        sf_error("train: no config given");
        sf_hint("usage: sfvit train CONFIG.yaml [key=value ...]");
        return 2;
    }
    /* A resumed run goes on to train.epochs: the train.max_steps of the interrupted launch
     * (stored in its config.yaml) is not re-applied; one given now still is. */
    char *with_reset[129];
    if (resume) {
        with_reset[0] = "train.max_steps=0";
        memcpy(with_reset + 1, overrides, sizeof(char *) * (size_t)n_over);
    }
    sf_config cfg;
    if (sf_config_load(&cfg, config_path, resume ? n_over + 1 : n_over, resume ? with_reset : overrides) != 0)
        return SF_TRAIN_ERROR;
    if (sf_config_validate(&cfg) != 0) return SF_TRAIN_ERROR;
    sf_train_result res;
    int status = sf_train(&cfg, resume, &res);
    if (status == SF_TRAIN_OK && res.epochs_done > 0)
        printf("final val top-1 %.2f%%  top-5 %.2f%%  best top-1 %.2f%%  (%.0f s)\n", res.final_top1,
               res.final_top5, res.best_top1, res.seconds);
    return status;
}

/* Loads the config stored in a checkpoint's metadata (written by sfvit train). */
static int config_from_checkpoint(const char *ckpt, sf_config *cfg, int n_over, char *const *over) {
    sf_st_file meta;
    if (sf_ckpt_open(&meta, ckpt, NULL, NULL, NULL) != 0) return -1;
    const char *text = sf_st_meta_get(&meta, "config");
    if (!text) {
        sf_st_close(&meta);
        sf_error("%s: checkpoint holds no config", ckpt);
        sf_hint("pass the model's config with --config FILE.yaml");
        return -1;
    }
    char tmp[] = "/tmp/sfvit-config-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        sf_st_close(&meta);
        return sf_error("cannot create a temporary file: %s", strerror(errno));
    }
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    sf_st_close(&meta);
    int rc = ok ? sf_config_load(cfg, tmp, n_over, over) : sf_error("cannot write %s", tmp);
    unlink(tmp);
    return rc;
}

int sf_checkpoint_config(const char *ckpt, const char *config_path, sf_config *cfg) {
    return config_path ? sf_config_load(cfg, config_path, 0, NULL) : config_from_checkpoint(ckpt, cfg, 0, NULL);
}

/* ---- sfvit eval CKPT --data DIR [--config FILE] [--split val] [key=value ...] ---- */

/* Top-1/top-5 of the checkpoint's weights on cfg's data.root/val_split. */
static int evaluate_checkpoint(const sf_config *cfg, const char *ckpt) {
    sf_dataset ds = {0};
    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = NULL;
    sf_loader *l = NULL;
    sf_eval_result r;
    int status = 1;
    const double t0 = sf_now();
    if (sf_dataset_open(&ds, cfg->data.root, cfg->data.val_split) != 0) goto out;
    if (ds.num_classes != cfg->model.num_classes) {
        sf_error("%s/%s has %d classes, the model %d", cfg->data.root, cfg->data.val_split, ds.num_classes,
                 cfg->model.num_classes);
        goto out;
    }
    if (!(m = sf_model_build(&cfg->model, &ps))) goto out;
    sf_params_alloc(&ps);
    if (sf_checkpoint_load(ckpt, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) != 0) goto out;
    sf_loader_opts o = {.batch_size = cfg->train.eval_batch_size, .img_size = cfg->model.img_size,
                        .in_chans = cfg->model.in_chans, .workers = cfg->data.workers,
                        .prefetch = cfg->data.prefetch, .seed = cfg->train.seed, .aug = &cfg->aug,
                        .num_classes = cfg->model.num_classes, .world = 1, .fraction = 1.0f};
    if (!(l = sf_loader_create(&ds, &o)) || sf_evaluate(m, l, cfg->model.num_classes, &r) != 0) goto out;
    printf("%s on %s/%s: %d images  loss %.4f  top-1 %.2f%%  top-5 %.2f%%  (%.1f s)\n", ckpt, cfg->data.root,
           cfg->data.val_split, r.count, r.loss, r.top1, r.top5, sf_now() - t0);
    if (sf_loader_skipped(l)) printf("%d bad images were skipped\n", sf_loader_skipped(l));
    status = 0;
out:
    if (l) sf_loader_free(l);
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    sf_dataset_free(&ds);
    return status;
}

int sf_cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *config_path = NULL, *split = NULL;
    char *overrides[128];
    int n_over = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) config_path = argv[++i];
        else if (!strcmp(argv[i], "--split") && i + 1 < argc) split = argv[++i];
        else if (is_override(argv[i]) && n_over < 128) overrides[n_over++] = argv[i];
        else if (argv[i][0] != '-' && !ckpt) ckpt = argv[i];
        else {
            sf_error("eval: unexpected argument '%s'", argv[i]);
            sf_hint("usage: sfvit eval CKPT.safetensors --data DIR [--config FILE.yaml] [--split val]");
            return 2;
        }
    }
    if (!ckpt) {
        sf_error("eval: no checkpoint given");
        sf_hint("usage: sfvit eval CKPT.safetensors --data DIR");
        return 2;
    }
    sf_config cfg;
    int rc = config_path ? sf_config_load(&cfg, config_path, n_over, overrides)
                         : config_from_checkpoint(ckpt, &cfg, n_over, overrides);
    if (rc != 0) return 1;
    if (data) snprintf(cfg.data.root, sizeof cfg.data.root, "%s", data);
    if (split) snprintf(cfg.data.val_split, sizeof cfg.data.val_split, "%s", split);
    sf_threads_init(cfg.train.threads);
    if (sf_precision_setup(&cfg, 1) != 0) return 1;
    return evaluate_checkpoint(&cfg, ckpt);
}

/* ---- sfvit info MODEL|CONFIG [key=value ...] ---- */
int sf_cmd_info(int argc, char **argv) {
    if (argc < 1) {
        sf_error("info: name a model or a config");
        fprintf(stderr, "models:");
        for (int i = 0; sf_model_names[i]; i++) fprintf(stderr, " %s", sf_model_names[i]);
        fputc('\n', stderr);
        return 2;
    }
    sf_config cfg;
    int rc;
    if (ends_with(argv[0], ".yaml") || ends_with(argv[0], ".yml")) {
        rc = sf_config_load(&cfg, argv[0], argc - 1, argv + 1);
    } else {
        sf_config_defaults(&cfg);
        rc = sf_config_set(&cfg, "model.name", argv[0], "command line");
        for (int i = 1; rc == 0 && i < argc; i++) {
            char key[256];
            const char *eq = strchr(argv[i], '=');
            if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
                sf_error("info: expected key=value, got '%s'", argv[i]);
                return 2;
            }
            /* With a model name, bare keys are model keys: `sfvit info deit_small attn=sima`. */
            int bare = memchr(argv[i], '.', (size_t)(eq - argv[i])) == NULL;
            if ((size_t)(eq - argv[i]) + 6 >= sizeof key) {
                sf_error("info: key too long in '%s'", argv[i]);
                return 2;
            }
            snprintf(key, sizeof key, "%s%.*s", bare ? "model." : "", (int)(eq - argv[i]), argv[i]);
            rc = sf_config_set(&cfg, key, eq + 1, "command line");
        }
    }
    if (rc != 0 || sf_config_validate(&cfg) != 0) return 1;
    sf_model_info(&cfg.model, stdout);
    char kernels[512];
    sf_kernels_describe(kernels, sizeof kernels);
    printf("precision: %s   kernels: %s\n", cfg.train.precision, kernels);
    return 0;
}

/* ---- sfvit config CONFIG [key=value ...] | --keys ---- */
int sf_cmd_config(int argc, char **argv) {
    if (argc == 1 && !strcmp(argv[0], "--keys")) {
        sf_config_doc(stdout);
        return 0;
    }
    if (argc < 1 || argv[0][0] == '-' || is_override(argv[0])) {
        sf_error("config: name a config file (or --keys)");
        sf_hint("usage: sfvit config CONFIG.yaml [key=value ...]  |  sfvit config --keys");
        return 2;
    }
    sf_config cfg;
    if (sf_config_load(&cfg, argv[0], argc - 1, argv + 1) != 0 || sf_config_validate(&cfg) != 0) return 1;
    sf_config_yaml(&cfg, stdout);
    return 0;
}

/* ---- sfvit data import-idx | check ---- */
int sf_cmd_data(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[0], "import-idx")) {
        const char *classes = NULL;
        for (int i = 4; i < argc; i++) {
            if (!strcmp(argv[i], "--classes") && i + 1 < argc) classes = argv[++i];
            else {
                sf_error("data import-idx: unexpected argument '%s'", argv[i]);
                return 2;
            }
        }
        return sf_data_import_idx(argv[1], argv[2], argv[3], classes) == 0 ? 0 : 1;
    }
    if (argc == 2 && !strcmp(argv[0], "check")) return sf_data_check(argv[1], stdout) == 0 ? 0 : 1;
    if (argc == 2 && !strcmp(argv[0], "check-image")) {
        sf_image im;
        char err[256];
        if (sf_image_load(argv[1], 0, &im, err, sizeof err) != 0) {
            sf_error("%s: %s", argv[1], err);
            return 1;
        }
        printf("%s: %dx%d, %d channel%s\n", argv[1], im.w, im.h, im.c, im.c > 1 ? "s" : "");
        sf_image_free(&im);
        return 0;
    }
    sf_error("data: unknown or incomplete subcommand");
    sf_hint("usage: sfvit data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt]\n"
            "       sfvit data check ROOT\n"
            "       sfvit data check-image FILE");
    return 2;
}
