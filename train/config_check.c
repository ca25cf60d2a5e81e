/* config_check.c — the checks across keys of a loaded config (sf_config_validate): what no
 * single key's type and range can say (a width divisible by its heads, an even batch for
 * mixup, a warmup shorter than the run). Each failure names the key, as the parser does;
 * every failure is reported, not only the first. docs/configs.md lists them.
 * The key table, parsing and output are in config.c.
 */
#include <string.h>

#include "sfvit/config.h"

int sf_config_validate(const sf_config *cfg) {
    const char *file = cfg->path[0] ? cfg->path : "config";
    const sf_model_cfg *m = &cfg->model;
    int bad = 0;
#define FAIL(key, fmt, ...) (bad = 1, sf_error("%s: %s: " fmt, file, key, ##__VA_ARGS__))
    if (m->in_chans != 1 && m->in_chans != 3) FAIL("model.in_chans", "must be 1 or 3, got %d", m->in_chans);
    int blocks = m->depth;
    if (m->family == SF_FAMILY_SOFT || m->family == SF_FAMILY_CVT) {
        blocks = 0;
        if (m->family == SF_FAMILY_SOFT && (m->num_stages < 1 || m->num_stages > 4))
            FAIL("model.num_stages", "SOFT needs 1 to 4 stages, got %d", m->num_stages);
        if (m->family == SF_FAMILY_CVT && m->num_stages != 3)
            FAIL("model.num_stages", "CvT has 3 stages, got %d", m->num_stages);
        for (int s = 0; s < m->num_stages && s < 4; s++) {
            if (m->embed_dims[s] <= 0 || m->depths[s] <= 0 || m->stage_heads[s] <= 0) {
                FAIL("model.depths", "model.embed_dims, model.depths and model.stage_heads need %d values "
                     "each (model.num_stages)", m->num_stages);
                break;
            }
            if (m->embed_dims[s] % m->stage_heads[s] != 0)
                FAIL("model.embed_dims", "stage %d: width %d is not divisible by its %d heads", s + 1,
                     m->embed_dims[s], m->stage_heads[s]);
            blocks += m->depths[s];
        }
        for (int s = m->num_stages; s < 4; s++)
            if (m->embed_dims[s] != 0 || m->depths[s] != 0 || m->stage_heads[s] != 0) {
                FAIL("model.depths", "model.embed_dims, model.depths or model.stage_heads has more values "
                     "than model.num_stages %d", m->num_stages);
                break;
            }
        if (m->family == SF_FAMILY_SOFT && m->img_size % 32 != 0)
            FAIL("model.img_size", "SOFT downsamples by 32: %d is not a multiple of 32", m->img_size);
    } else {
        if (m->embed_dim % m->num_heads != 0)
            FAIL("model.embed_dim", "%d is not divisible by model.num_heads %d", m->embed_dim, m->num_heads);
        if (m->img_size % m->patch_size != 0)
            FAIL("model.img_size", "%d is not a multiple of model.patch_size %d", m->img_size, m->patch_size);
        if (m->family == SF_FAMILY_XCIT && m->patch_size != 8 && m->patch_size != 16)
            FAIL("model.patch_size", "XCiT's convolutional patch embedding supports 8 or 16, got %d", m->patch_size);
    }
    if (m->n_block_attn != 0 && m->n_block_attn != blocks)
        FAIL("model.block_attn", "%d kinds given for %d blocks", m->n_block_attn, blocks);
    if (m->attn == SF_ATTN_SIMA && m->attn_norm == SF_NORM_SYMMETRIC)
        FAIL("model.attn_norm", "sima takes l1, l2 or none, not symmetric");
    if (m->attn == SF_ATTN_SOFT && (m->attn_norm == SF_NORM_L1 || m->attn_norm == SF_NORM_L2))
        FAIL("model.attn_norm", "soft takes none (SOFT) or symmetric (SOFT++)");
    if (m->attn == SF_ATTN_SOFT && m->family != SF_FAMILY_SOFT)
        FAIL("model.attn", "soft attention needs a SOFT model (model.name soft_*)");
    if ((m->family == SF_FAMILY_SOFT || m->family == SF_FAMILY_CVT) && (m->attn == SF_ATTN_XCA))
        FAIL("model.attn", "xca needs an XCiT model");
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
