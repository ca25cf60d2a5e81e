/* eval.c — what every evaluating command needs from a config or a checkpoint, in one place:
 * the config stored in a checkpoint (with overrides), and the loader options a config gives
 * for training or for evaluation (used by the trainer and by `sfvit eval`).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/checkpoint.h"
#include "sfvit/train.h"

/* Loads the config stored in a checkpoint's metadata (written by sfvit train). */
int sf_checkpoint_config_over(const char *ckpt, sf_config *cfg, int n_over, char *const *over) {
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
    return config_path ? sf_config_load(cfg, config_path, 0, NULL) : sf_checkpoint_config_over(ckpt, cfg, 0, NULL);
}

sf_loader_opts sf_config_loader_opts(const sf_config *c, int train) {
    sf_loader_opts o = {
        .batch_size = train ? c->train.batch_size : c->train.eval_batch_size,
        .img_size = c->model.img_size,
        .in_chans = c->model.in_chans,
        .train = train,
        .workers = c->data.workers,
        .prefetch = c->data.prefetch,
        .seed = c->train.seed,
        .aug = &c->aug,
        .num_classes = c->model.num_classes,
        .world = 1,
        .fraction = train ? c->train.max_train_fraction : 1.0f,
        .repeats = train ? c->data.repeated_aug : 1,
    };
    return o;
}
