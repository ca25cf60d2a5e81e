/* finetune.c — model.init_from: start a run from another checkpoint's weights.
 * Loads every parameter by name; a head with another class count keeps its fresh
 * initialization (reported); a DeiT/ViT pos_embed for another grid is resized bicubically
 * (cls position kept, as deit main.py --finetune); everything else missing or unexpected is
 * listed. Optimizer moments start from zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "sfvit/train.h"

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

int sf_checkpoint_finetune(const char *path, sf_params *ps, const sf_model_cfg *mc) {
    sf_ckpt_opts opts = {.strict = 0, .load_optim = 0, .quiet = 1};
    sf_ckpt_report rep;
    if (sf_checkpoint_load(path, ps, &opts, &rep) != 0) {
        sf_ckpt_report_free(&rep);
        return -1;
    }
    sf_st_file f;
    if (sf_ckpt_open(&f, path, ps, NULL, NULL) != 0) {
        sf_ckpt_report_free(&rep);
        return -1;
    }
    int reinit_head = 0, interpolated = 0, others = 0;
    for (int i = 0; i < ps->count; i++) {
        if (rep.loaded[i]) continue;
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE) && !strstr(p->t->name, "running_") &&
            !strstr(p->t->name, "num_batches"))
            continue;
        const sf_st_entry *e = sf_st_find(&f, p->t->name);
        if (starts_with(p->t->name, "head.")) {
            printf("fine-tune: %s re-initialized (%s)\n", p->t->name,
                   e ? "the checkpoint's head has another class count" : "not in the checkpoint");
            reinit_head++;
            continue;
        }
        if (mc->family == SF_FAMILY_VIT && !strcmp(p->t->name, "pos_embed") && e && e->ndim == 3 &&
            e->shape[2] == p->t->shape[2] && sf_st_is_floatable(e)) {
            const int C = p->t->shape[2];
            int src_grid = (int)lround(sqrt((double)(e->shape[1] - 1)));
            int dst_grid = (int)lround(sqrt((double)(p->t->shape[1] - 1)));
            if (src_grid * src_grid + 1 == e->shape[1] && dst_grid * dst_grid + 1 == p->t->shape[1]) {
                float *src = sf_malloc(e->numel * sizeof(float));
                if (sf_st_read_f32(&f, e, src, e->numel) == 0) {
                    sf_vit_interpolate_pos_embed(src, src_grid, p->t->data, dst_grid, C);
                    printf("fine-tune: pos_embed resized from a %dx%d to a %dx%d grid (bicubic)\n", src_grid,
                           src_grid, dst_grid, dst_grid);
                    interpolated++;
                    free(src);
                    continue;
                }
                free(src);
            }
        }
        printf("fine-tune: %s not loaded (%s); keeps its initialization\n", p->t->name,
               e ? "shape differs" : "missing in the checkpoint");
        others++;
    }
    /* Tensors of the checkpoint no parameter claims (optimizer moments aside). */
    int unexpected = 0;
    for (int i = 0; i < f.n_entries; i++) {
        const char *n = f.entries[i].name;
        if (starts_with(n, SF_CKPT_OPTIM_M) || starts_with(n, SF_CKPT_OPTIM_V)) continue;
        if (!sf_params_find(ps, n)) {
            if (unexpected < 20) printf("fine-tune: unexpected key in checkpoint: %s\n", n);
            unexpected++;
        }
    }
    printf("fine-tune from %s (%s layout): %d tensors loaded, %d head re-initialized, %d interpolated, %d other missing/mismatched, "
           "%d unexpected\n",
           path, rep.layout.layout, rep.n_loaded, reinit_head, interpolated, others, unexpected);
    sf_st_close(&f);
    sf_ckpt_report_free(&rep);
    return 0;
}
