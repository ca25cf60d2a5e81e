/* infer.c — the C inference API of include/sfvit.h: a checkpoint's model, config and class
 * names behind one opaque handle, the eval transform, batched forwards without a tape.
 * `sfvit predict` (cli/predict.c) and examples/classify.c are its users.
 *
 * Deliberately not here: training state (optimizer moments are not loaded), any output
 * formatting (the commands do that).
 *
 * Dimension legend: B images, C channels, S input side, K classes.
 */
#include "sfvit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "sfvit/train.h"

struct sfvit_classifier {
    sf_config cfg;
    sf_params ps;
    sf_model *model;
    sf_ctx g;                 /* activations of one forward, reset after it */
    char **class_names;       /* (K) or NULL */
};

sfvit_classifier *sfvit_classifier_load(const char *checkpoint_path, const char *config_path) {
    sfvit_classifier *c = sf_calloc(1, sizeof(*c));
    sf_params_init(&c->ps);
    sf_ctx_init(&c->g, 0);
    sf_ckpt_report rep = {0};
    if (sf_checkpoint_config(checkpoint_path, config_path, &c->cfg) != 0 || sf_config_validate(&c->cfg) != 0)
        goto fail;
    sf_threads_init(c->cfg.train.threads);
    if (!(c->model = sf_model_build(&c->cfg.model, &c->ps))) goto fail;
    sf_params_alloc(&c->ps);
    if (sf_checkpoint_load(checkpoint_path, &c->ps, &(sf_ckpt_opts){.strict = 1}, &rep) != 0) goto fail;
    const char *names = sf_ckpt_meta_get(&rep, SF_CKPT_META_CLASS_NAMES);
    if (names) {
        int n = sf_class_names_parse(names, &c->class_names);
        if (n != c->cfg.model.num_classes) {
            sf_error("%s: metadata %s holds %d names for %d classes", checkpoint_path, SF_CKPT_META_CLASS_NAMES, n,
                     c->cfg.model.num_classes);
            sf_class_names_free(c->class_names, n > 0 ? n : 0);
            c->class_names = NULL;
            goto fail;
        }
    }
    sf_ckpt_report_free(&rep);
    c->g.grad_enabled = 0;
    c->g.training = 0;
    return c;
fail:
    sf_ckpt_report_free(&rep);
    sfvit_classifier_free(c);
    return NULL;
}

void sfvit_classifier_free(sfvit_classifier *c) {
    if (!c) return;
    if (c->model) sf_model_free(c->model);
    sf_params_free(&c->ps);
    sf_ctx_free(&c->g);
    sf_class_names_free(c->class_names, c->cfg.model.num_classes);
    free(c);
}

int sfvit_classifier_num_classes(const sfvit_classifier *c) { return c->cfg.model.num_classes; }

void sfvit_classifier_input_shape(const sfvit_classifier *c, int *channels, int *size) {
    if (channels) *channels = c->cfg.model.in_chans;
    if (size) *size = c->cfg.model.img_size;
}

const char *sfvit_classifier_class_name(const sfvit_classifier *c, int k) {
    if (!c->class_names || k < 0 || k >= c->cfg.model.num_classes) return NULL;
    return c->class_names[k];
}

int sfvit_classifier_preprocess(const sfvit_classifier *c, const char *image_path, float *out) {
    const sf_model_cfg *mc = &c->cfg.model;
    const sf_aug_cfg *aug = &c->cfg.aug;
    sf_image im;
    char err[256];
    if (sf_image_load(image_path, mc->in_chans, &im, err, sizeof err) != 0)
        return sf_error("%s: %s", image_path, err);
    /* the transform of the eval loader (data/loader.c): "random" interpolation is bilinear there */
    sf_transform_eval(&im, mc->img_size, aug->crop_pct, sf_interp_pick(aug->interpolation, NULL), aug->mean,
                      aug->std, out);
    sf_image_free(&im);
    return 0;
}

int sfvit_classifier_logits(sfvit_classifier *c, const float *images, int batch, float *logits) {
    const sf_model_cfg *mc = &c->cfg.model;
    if (batch <= 0 || !images || !logits) return sf_error("sfvit_classifier_logits: batch %d or a NULL buffer", batch);
    const int C = mc->in_chans, S = mc->img_size, K = mc->num_classes;
    /* the forward only reads its input; the cast keeps the tensor struct's plain pointer */
    sf_tensor x = {.data = (float *)images, .ndim = 4, .shape = {batch, C, S, S}, .numel = (size_t)batch * C * S * S};
    sf_tensor *y = sf_model_forward(&c->g, c->model, &x);  // (B, K)
    memcpy(logits, y->data, (size_t)batch * K * sizeof(float));
    sf_ctx_reset(&c->g);
    return 0;
}

int sfvit_classifier_predict(sfvit_classifier *c, const float *images, int batch, float *probs) {
    if (sfvit_classifier_logits(c, images, batch, probs) != 0) return -1;
    const int K = c->cfg.model.num_classes;
    for (int b = 0; b < batch; b++) {  // softmax per row, max subtracted
        float *p = probs + (size_t)b * K, mx = p[0];
        for (int k = 1; k < K; k++) mx = p[k] > mx ? p[k] : mx;
        double sum = 0;
        for (int k = 0; k < K; k++) sum += (p[k] = expf(p[k] - mx));
        for (int k = 0; k < K; k++) p[k] = (float)(p[k] / sum);
    }
    return 0;
}

int sfvit_classifier_predict_image(sfvit_classifier *c, const char *image_path, float *probs) {
    const sf_model_cfg *mc = &c->cfg.model;
    float *x = sf_malloc((size_t)mc->in_chans * mc->img_size * mc->img_size * sizeof(float));  // (C, S, S)
    int rc = sfvit_classifier_preprocess(c, image_path, x);
    if (rc == 0) rc = sfvit_classifier_predict(c, x, 1, probs);
    free(x);
    return rc;
}

int sfvit_topk(const float *scores, int n, int k, int *top) {
    if (k > n) k = n;
    for (int j = 0; j < k; j++) {  // k selection passes: k is small
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int t = 0; t < j && !taken; t++) taken = top[t] == i;
            if (!taken && (best < 0 || scores[i] > scores[best])) best = i;
        }
        top[j] = best;
    }
    return k < 0 ? 0 : k;
}
