/* commands.c — the small commands `sfvit train`, `info`, `config` and `data`: their
 * arguments (cli_parse) and the calls into the trainer library (`eval` is cli/eval.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfvit/checkpoint.h"
#include "cli.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- sfvit train CONFIG [key=value ...] | --resume RUN_DIR [key=value ...] ---- */
int sf_cmd_train(int argc, char **argv) {
    cli_args args;
    if (cli_parse("train", argc, argv, &args)) return 2;
    const char *config_path = args.n_pos ? args.pos[0] : NULL, *resume = cli_get(&args, "train", "--resume");
    char **overrides = args.over;
    const int n_over = args.n_over;
    cli_args_free(&args);
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
    char *with_reset[CLI_MAX_OVERRIDES + 1];
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

/* ---- sfvit info MODEL|CONFIG [key=value ...] ---- */
int sf_cmd_info(int argc, char **argv) {
    cli_args args;
    if (cli_parse("info", argc, argv, &args)) return 2;
    cli_args_free(&args);  // positional only: the model or config, then key=value
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
    char kernels[768];
    sf_kernels_describe(kernels, sizeof kernels);
    printf("precision: %s   kernels: %s\n", cfg.train.precision, kernels);
    if (!strcmp(cfg.train.precision, "bf16"))
        printf("bf16 products: train.bf16_products=%s%s\n", cfg.train.bf16_products,
               strcmp(cfg.train.bf16_products, "auto") ? ""
                                                      : " (oneDNN's bf16 kernels or fp32 kernels, the faster: measured "
                                                        "when a run starts)");
    return 0;
}

/* ---- sfvit config CONFIG [key=value ...] | --keys ---- */
int sf_cmd_config(int argc, char **argv) {
    cli_args args;
    if (cli_parse("config", argc, argv, &args)) return 2;
    const char *path = args.n_pos ? args.pos[0] : NULL;
    const int keys = cli_get(&args, "config", "--keys") != NULL;
    cli_args_free(&args);
    if (keys && !path && args.n_over == 0) {
        sf_config_doc(stdout);
        return 0;
    }
    if (!path || keys) return cli_usage_error("config", "name a config file (or --keys alone)");
    sf_config cfg;
    if (sf_config_load(&cfg, path, args.n_over, args.over) != 0 || sf_config_validate(&cfg) != 0) return 1;
    sf_config_yaml(&cfg, stdout);
    return 0;
}

/* ---- sfvit data import-idx | check | check-image ---- */
static int check_image(const char *path) {
    sf_image im;
    char err[256];
    if (sf_image_load(path, 0, &im, err, sizeof err) != 0) {
        sf_error("%s: %s", path, err);
        return 1;
    }
    printf("%s: %dx%d, %d channel%s\n", path, im.w, im.h, im.c, im.c > 1 ? "s" : "");
    sf_image_free(&im);
    return 0;
}

/* --range FIRST:END or FIRST: (0-based records, END exclusive; *end = -1: to the end). The
 * bounds against the file's record count are checked by the importer. */
static int parse_range(const char *text, long *first, long *end) {
    char *colon;
    errno = 0;
    *first = strtol(text, &colon, 10);
    if (colon == text || *colon != ':' || errno || *first < 0) return -1;
    *end = -1;
    if (!colon[1]) return 0;
    char *stop;
    *end = strtol(colon + 1, &stop, 10);
    return *stop || errno || *end <= *first ? -1 : 0;
}

/* ---- sfvit data import-idx | check ---- */
int sf_cmd_data(int argc, char **argv) {
    cli_args args;
    if (cli_parse("data", argc, argv, &args)) return 2;
    const char *classes = cli_get(&args, "data", "--classes"), *range = cli_get(&args, "data", "--range"),
               *sub = args.n_pos ? args.pos[0] : "";
    const int n = args.n_pos;
    char **pos = args.pos;
    int rc = -1;
    long first = 0, end = -1;
    if (range && strcmp(sub, "import-idx")) {
        cli_args_free(&args);
        return cli_usage_error("data", "--range is an option of import-idx");
    }
    if (range && parse_range(range, &first, &end) != 0) {
        cli_args_free(&args);
        return cli_usage_error("data", "--range '%s': expected FIRST:END (0 <= FIRST < END, END exclusive) or FIRST:",
                               range);
    }
    if (n == 4 && !strcmp(sub, "import-idx"))
        rc = sf_data_import_idx(pos[1], pos[2], pos[3], classes, first, end) == 0 ? 0 : 1;
    else if (n == 2 && !classes && !strcmp(sub, "check")) rc = sf_data_check(pos[1], stdout) == 0 ? 0 : 1;
    else if (n == 2 && !classes && !strcmp(sub, "check-image")) rc = check_image(pos[1]);
    cli_args_free(&args);
    if (rc >= 0) return rc;
    sf_error("data: unknown or incomplete subcommand");
    sf_hint("usage: sfvit data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt] [--range FIRST:END]\n"
            "       sfvit data check ROOT\n"
            "       sfvit data check-image FILE");
    return 2;
}
