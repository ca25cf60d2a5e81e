/* config_check.c — the checks across keys of a loaded config (sf_config_validate): what no
 * single key's type and range can say (a width divisible by its heads, an even batch for
 * mixup, a warmup shorter than the run). Each failure names the key, as the parser does;
 * every failure of these is reported, not only the first. The model's constraints are
 * sf_model_check's (the models layer), called here with the file's name. docs/configs.md
 * lists them.
 * The key table, parsing and output are in config.c.
 */
#include <stdio.h>
#include <string.h>

#include "sfvit/config.h"

int sf_config_validate(const sf_config *cfg) {
    const char *file = cfg->path[0] ? cfg->path : "config";
    const sf_model_cfg *m = &cfg->model;
    int bad = 0;
#define FAIL(key, fmt, ...) (bad = 1, sf_error("%s: %s: " fmt, file, key, ##__VA_ARGS__))
    /* the model's own validator, with this file named in its message */
    char where[SF_PATH_MAX + 8];
    snprintf(where, sizeof where, "%s: ", file);
    if (sf_model_check(m, where) != 0) bad = 1;
    const sf_aug_cfg *a = &cfg->aug;
    if (a->scale_min > a->scale_max)
        FAIL("aug.scale_min", "%g is larger than aug.scale_max %g", (double)a->scale_min, (double)a->scale_max);
    if (a->ratio_min > a->ratio_max)
        FAIL("aug.ratio_min", "%g is larger than aug.ratio_max %g", (double)a->ratio_min, (double)a->ratio_max);
    sf_randaug ra; /* the data layer's own parser: every key and value, not only the prefix */
    if (sf_randaug_parse(a->randaugment, &ra) != 0) {
        bad = 1;
        sf_hint("%s: aug.randaugment takes timm's form, e.g. rand-m9-mstd0.5-inc1 (\"\" = off)", file);
    }
    int mixing = (a->mixup > 0 || a->cutmix > 0) && a->mixup_prob > 0;
    if (mixing && cfg->train.batch_size % 2 != 0)
        FAIL("train.batch_size", "mixup/cutmix pair samples: the batch size must be even, got %d",
             cfg->train.batch_size);
    if (cfg->sched.warmup_epochs >= (float)cfg->train.epochs)
        FAIL("sched.warmup_epochs", "%g must be less than train.epochs %d", (double)cfg->sched.warmup_epochs,
             cfg->train.epochs);
    if (!cfg->train.name[0] || strchr(cfg->train.name, '/'))
        FAIL("train.name", "'%s' must be a non-empty folder name without '/'", cfg->train.name);
    if (!cfg->train.out[0]) FAIL("train.out", "must not be empty");
#undef FAIL
    return bad ? -1 : 0;
}
