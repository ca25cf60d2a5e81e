/* eval.c — `sfvit eval CKPT --data DIR [--split S] [--save-preds P.csv] [--json R.json]
 * [key=value ...]`: top-1/top-5 and mean cross-entropy of a checkpoint on a split, through the
 * trainer's own evaluation loop (sf_evaluate_each), optionally with one row per image and a
 * JSON summary, both written atomically.
 *
 * Overrides change the model that is evaluated: model.nr_iters (SOFT's Newton-Raphson
 * iterations), model.img_size (another test resolution: SOFT resizes its positional
 * embeddings in the forward, XCiT's Fourier encoding and CvT's convolutions follow the grid,
 * and a DeiT/ViT pos_embed is resized bicubically here, cls position kept, as at fine-tuning).
 *
 * --save-preds rows follow the dataset's order: class folders sorted by name (byte order,
 * which defines the class ids), files sorted by name within a class, so `index` is the
 * image's position in that order and two files from two models on the same split line up
 * row by row. Images that do not decode are left out (warned about by the loader).
 * Dimension legend: K classes, B batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sfvit.h"
#include "sfvit/checkpoint.h"
#include "cli.h"

/* Per-image results in dataset order (index -> row); filled batch by batch. */
typedef struct eval_preds {
    const sf_dataset *ds;
    int K, B, C;             /* classes, eval batch size, channels */
    int *pred;               /* (count) predicted class, -1: image left out */
    float *prob;             /* (count) softmax probability of pred */
    int (*top5)[5];          /* (count) best classes, best first (K < 5: the rest -1) */
} eval_preds;

/* 1 if the image decodes as the loader would decode it. */
static int image_decodes(const char *path, int C) {
    sf_image im;
    char err[256];
    if (sf_image_load(path, C, &im, err, sizeof err) != 0) return 0;
    sf_image_free(&im);
    return 1;
}

/* One batch of the eval loader: positions [batch_index * B, + B) of the dataset's order, less
 * the images that did not decode (the loader compacts them out). */
static void record_batch(void *arg, int batch_index, const sf_batch *b, const float *logits) {
    eval_preds *p = arg;
    const int first = batch_index * p->B, want = p->ds->count - first < p->B ? p->ds->count - first : p->B;
    int row = 0;
    for (int j = 0; j < want && row < b->size; j++) {
        const int idx = first + j;
        if (b->size < want && !image_decodes(p->ds->paths[idx], p->C)) continue;  // a short batch: find who is missing
        const float *z = logits + (size_t)row * p->K;  // (K)
        int top[5] = {-1, -1, -1, -1, -1};
        sfvit_topk(z, p->K, p->K < 5 ? p->K : 5, top);
        double sum = 0;  // softmax of the best class, max subtracted
        for (int k = 0; k < p->K; k++) sum += exp((double)z[k] - z[top[0]]);
        p->pred[idx] = top[0];
        p->prob[idx] = (float)(1.0 / sum);
        memcpy(p->top5[idx], top, sizeof top);
        row++;
    }
}

void cli_csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void fill_preds_csv(FILE *f, const void *arg) {
    const eval_preds *p = arg;
    const size_t skip = strlen(p->ds->root) + 1 + strlen(p->ds->split) + 1;  // "ROOT/split/"
    fputs("index,path,label,pred,prob,correct,top5\n", f);
    for (int i = 0; i < p->ds->count; i++) {
        if (p->pred[i] < 0) continue;
        const char *path = p->ds->paths[i];
        fprintf(f, "%d,", i);
        cli_csv_field(f, strlen(path) > skip ? path + skip : path);
        fprintf(f, ",%d,%d,%.6f,%d,", p->ds->labels[i], p->pred[i], p->prob[i], p->pred[i] == p->ds->labels[i]);
        for (int t = 0; t < 5 && p->top5[i][t] >= 0; t++) fprintf(f, "%s%d", t ? " " : "", p->top5[i][t]);
        fputc('\n', f);
    }
}

int cli_write_json(const char *path, cJSON *o) {
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return -1;
    size_t n = strlen(text);
    text[n] = '\n';  // cJSON_Print's terminator becomes the file's last newline
    int rc = sf_write_file_atomic(path, text, n + 1);
    free(text);
    return rc;
}

static int write_json_summary(const char *path, const sf_eval_result *r, const char *ckpt, const char *split) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "top1", r->top1);
    cJSON_AddNumberToObject(o, "top5", r->top5);
    cJSON_AddNumberToObject(o, "images", r->count);
    cJSON_AddNumberToObject(o, "loss", r->loss);
    cJSON_AddStringToObject(o, "checkpoint", ckpt);
    cJSON_AddStringToObject(o, "split", split);
    return cli_write_json(path, o);
}

/* The checkpoint's weights into ps. A DeiT/ViT evaluated at another model.img_size than it was
 * trained at gets its pos_embed resized bicubically; every other tensor loads strictly. */
static int load_weights(const sf_config *cfg, int trained_size, const char *ckpt, sf_params *ps) {
    if (cfg->model.family != SF_FAMILY_VIT || cfg->model.img_size == trained_size)
        return sf_checkpoint_load(ckpt, ps, &(sf_ckpt_opts){.strict = 1}, NULL);
    static const char *const pos_prefix[] = {"pos_embed"};
    if (sf_checkpoint_load(ckpt, ps, &(sf_ckpt_opts){.strict = 1, .skip_prefixes = pos_prefix, .n_skip = 1}, NULL) != 0)
        return -1;
    const sf_param *pe = sf_params_find(ps, "pos_embed");
    if (!pe) return 0;  // no learned positions (nothing fixes the grid)
    sf_tensor *dst = pe->t;
    sf_st_file f;
    if (sf_ckpt_open(&f, ckpt, ps, NULL, NULL) != 0) return -1;
    const sf_st_entry *e = sf_st_find(&f, "pos_embed");
    const int C = dst->shape[2], dst_grid = cfg->model.img_size / cfg->model.patch_size;
    const int src_grid = e && e->ndim == 3 ? (int)lround(sqrt((double)(e->shape[1] - 1))) : 0;
    int rc = -1;
    if (!e || !sf_st_is_floatable(e) || e->ndim != 3 || e->shape[2] != C || src_grid * src_grid + 1 != e->shape[1] ||
        dst_grid * dst_grid + 1 != dst->shape[1]) {
        sf_error("%s: pos_embed cannot be resized to model.img_size=%d (needs one cls position and a square grid)",
                 ckpt, cfg->model.img_size);
    } else {
        float *src = sf_malloc(e->numel * sizeof(float));
        rc = sf_st_read_f32(&f, e, src, e->numel) == 0 ? sf_vit_interpolate_pos_embed(src, src_grid, dst->data, dst_grid, C)
                                                        : -1;
        if (rc == 0)
            printf("pos_embed resized from a %dx%d to a %dx%d grid (bicubic) for model.img_size=%d\n", src_grid,
                   src_grid, dst_grid, dst_grid, cfg->model.img_size);
        free(src);
    }
    sf_st_close(&f);
    return rc;
}

/* Top-1/top-5 of the checkpoint's weights on cfg's data.root/val_split; trained_size: the
 * model.img_size the checkpoint was trained at. */
static int evaluate_checkpoint(const sf_config *cfg, const char *ckpt, int trained_size, const char *preds_path,
                               const char *json_path) {
    sf_dataset ds = {0};
    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = NULL;
    sf_loader *l = NULL;
    sf_eval_result r;
    eval_preds p = {0};
    int status = 1;
    const double t0 = sf_now();
    if (sf_dataset_open(&ds, cfg->data.root, cfg->data.val_split) != 0) goto out;
    if (ds.num_classes != cfg->model.num_classes) {
        sf_error("%s/%s has %d classes, the model %d", cfg->data.root, cfg->data.val_split, ds.num_classes,
                 cfg->model.num_classes);
        goto out;
    }
    /* SOFT keeps the positional embeddings of its trained grid and resizes them in the forward
     * (bilinear) to the grid of the images it is given */
    sf_model_cfg built = cfg->model;
    if (built.family == SF_FAMILY_SOFT && built.img_size != trained_size) {
        built.img_size = trained_size;
        printf("SOFT model built for %dx%d images, evaluated at %dx%d (positional embeddings resized in the forward)\n",
               trained_size, trained_size, cfg->model.img_size, cfg->model.img_size);
    }
    if (!(m = sf_model_build(&built, &ps))) goto out;
    sf_params_alloc(&ps);
    if (load_weights(cfg, trained_size, ckpt, &ps) != 0) goto out;
    sf_loader_opts o = sf_config_loader_opts(cfg, 0);
    p = (eval_preds){.ds = &ds, .K = cfg->model.num_classes, .B = o.batch_size, .C = cfg->model.in_chans};
    if (preds_path) {
        p.pred = sf_malloc((size_t)ds.count * sizeof(int));
        p.prob = sf_malloc((size_t)ds.count * sizeof(float));
        p.top5 = sf_malloc((size_t)ds.count * sizeof(*p.top5));
        for (int i = 0; i < ds.count; i++) p.pred[i] = -1;
    }
    if (!(l = sf_loader_create(&ds, &o)) ||
        sf_evaluate_each(m, &ps, l, cfg->model.num_classes, &r, preds_path ? record_batch : NULL, &p) != 0)
        goto out;
    printf("%s on %s/%s: %d images  loss %.4f  top-1 %.2f%%  top-5 %.2f%%  (%.1f s)\n", ckpt, cfg->data.root,
           cfg->data.val_split, r.count, r.loss, r.top1, r.top5, sf_now() - t0);
    if (sf_loader_skipped(l)) printf("%d bad images were skipped\n", sf_loader_skipped(l));
    if (preds_path) {
        if (sf_write_stream_atomic(preds_path, fill_preds_csv, &p) != 0) goto out;
        printf("wrote %s: %d rows in dataset order\n", preds_path, r.count);
    }
    if (json_path) {
        if (write_json_summary(json_path, &r, ckpt, cfg->data.val_split) != 0) goto out;
        printf("wrote %s\n", json_path);
    }
    status = 0;
out:
    free(p.pred);
    free(p.prob);
    free(p.top5);
    if (l) sf_loader_free(l);
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    sf_dataset_free(&ds);
    return status;
}

int sf_cmd_eval(int argc, char **argv) {
    cli_args args;
    if (cli_parse("eval", argc, argv, &args)) return 2;
    const char *ckpt = args.n_pos ? args.pos[0] : NULL, *data = cli_get(&args, "eval", "--data"),
               *config_path = cli_get(&args, "eval", "--config"), *split = cli_get(&args, "eval", "--split"),
               *preds = cli_get(&args, "eval", "--save-preds"), *json = cli_get(&args, "eval", "--json");
    char **overrides = args.over;
    const int n_over = args.n_over;
    cli_args_free(&args);
    if (!ckpt) return cli_usage_error("eval", "no checkpoint given");
    if (preds && !preds[0]) return cli_usage_error("eval", "--save-preds needs a file name");
    if (json && !json[0]) return cli_usage_error("eval", "--json needs a file name");
    sf_config cfg, trained;
    int rc = config_path ? sf_config_load(&cfg, config_path, n_over, overrides)
                         : sf_checkpoint_config_over(ckpt, &cfg, n_over, overrides);
    /* the resolution the weights were trained at: the same config without the overrides */
    if (rc == 0) rc = config_path ? sf_config_load(&trained, config_path, 0, NULL) : sf_checkpoint_config_over(ckpt, &trained, 0, NULL);
    if (rc != 0) return 1;
    if (!config_path) snprintf(cfg.path, sizeof cfg.path, "%s (its stored config)", ckpt);  // named in errors
    if (data) snprintf(cfg.data.root, sizeof cfg.data.root, "%s", data);
    if (split) snprintf(cfg.data.val_split, sizeof cfg.data.val_split, "%s", split);
    /* the model's own checks (an override such as model.img_size=30 for 7-pixel patches) */
    char where[SF_PATH_MAX + 8];
    snprintf(where, sizeof where, "%s: ", cfg.path);
    if (sf_model_check(&cfg.model, where) != 0) return 1;
    sf_threads_init(cfg.train.threads);
    if (sf_precision_setup(&cfg, 1) != 0) return 1;
    return evaluate_checkpoint(&cfg, ckpt, trained.model.img_size, preds, json);
}
