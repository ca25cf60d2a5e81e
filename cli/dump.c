/* dump.c — `sfvit dump`: one forward and backward of a model on given images and labels
 * from given weights, writing logits, loss and every parameter's gradient (the golden
 * comparisons of tests/golden, docs/testing.md).
 * This is how a port is checked against another implementation, and how the golden model
 * tests compare with PyTorch. Dropout and drop-path are off, BatchNorm uses its running
 * statistics, the loss is plain mean cross-entropy. */
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "sfvit/safetensors.h"
#include "cli.h"

/* images (B, C, S, S) and labels (B) of the input file, checked against the model's input;
 * *images and *labels are malloc'd. Returns B, or -1 after an error. */
static int read_input(const char *path, const sf_model_cfg *mc, float **images, int **labels) {
    sf_st_file in;
    if (sf_st_open(&in, path) != 0) return -1;
    int B = -1;
    int64_t *labels64 = NULL;
    const sf_st_entry *ei = sf_st_find(&in, "images"), *el = sf_st_find(&in, "labels");
    const int C = mc->in_chans, S = mc->img_size;
    if (!ei || !el) {
        sf_error("%s: needs tensors 'images' (F32 [B,C,H,W]) and 'labels' (I64 [B])", path);
        goto out;
    }
    if (ei->ndim != 4 || ei->shape[1] != C || ei->shape[2] != S || ei->shape[3] != S || el->ndim != 1 ||
        el->shape[0] != ei->shape[0]) {
        char a[64], b[64];
        sf_error("%s: images %s / labels %s do not fit the model (expected [B,%d,%d,%d] and [B])", path,
                 sf_st_shape_str(ei, a, sizeof a), sf_st_shape_str(el, b, sizeof b), C, S, S);
        goto out;
    }
    const int n = (int)ei->shape[0];
    *images = sf_malloc(ei->numel * sizeof(float));
    *labels = sf_malloc((size_t)n * sizeof(int));
    labels64 = sf_malloc((size_t)n * sizeof(int64_t));
    if (sf_st_read_f32(&in, ei, *images, ei->numel) != 0 || sf_st_read_i64(&in, el, labels64, (size_t)n) != 0)
        goto out;
    for (int i = 0; i < n; i++) {
        if (labels64[i] < 0 || labels64[i] >= mc->num_classes) {
            sf_error("%s: label %lld of sample %d is outside [0, %d)", path, (long long)labels64[i], i,
                     mc->num_classes);
            goto out;
        }
        (*labels)[i] = (int)labels64[i];
    }
    B = n;
out:
    free(labels64);
    sf_st_close(&in);
    return B;
}

/* logits, loss and grad.<name> of every trainable parameter, to path. */
static int write_output(const char *path, const sf_params *ps, const sf_tensor *logits, const sf_tensor *loss) {
    sf_st_writer w;
    sf_st_writer_init(&w);
    int64_t lshape[2] = {logits->shape[0], logits->shape[1]}, one[1] = {1};
    int rc = sf_st_writer_add(&w, "logits", SF_DTYPE_F32, 2, lshape, logits->data);
    rc |= sf_st_writer_add(&w, "loss", SF_DTYPE_F32, 1, one, loss->data);
    char name[512];
    for (int i = 0; i < ps->count && rc == 0; i++) {
        const sf_param *p = &ps->list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        int64_t shape[SF_MAX_DIMS];
        for (int d = 0; d < p->t->ndim; d++) shape[d] = p->t->shape[d];
        snprintf(name, sizeof name, "grad.%s", p->t->name);
        rc |= sf_st_writer_add(&w, name, SF_DTYPE_F32, p->t->ndim, shape, p->t->grad);
    }
    sf_st_writer_set_meta(&w, "format", "sfvit-dump-1");
    if (rc == 0) rc = sf_st_writer_write(&w, path);
    if (rc == 0)
        printf("wrote %s: logits [%d, %d], loss %.6f, %d parameter gradients\n", path, logits->shape[0],
               logits->shape[1], loss->data[0], w.n - 2);
    sf_st_writer_free(&w);
    return rc == 0 ? 0 : -1;
}

int sf_cmd_dump(int argc, char **argv) {
    cli_args args;
    if (cli_parse("dump", argc, argv, &args)) return 2;
    const char *config_path = args.n_pos ? args.pos[0] : NULL, *weights = cli_get(&args, "dump", "--weights"),
               *input = cli_get(&args, "dump", "--input"), *out = cli_get(&args, "dump", "--out");
    char **overrides = args.over;
    const int n_over = args.n_over;
    cli_args_free(&args);
    if (!config_path || !weights || !input || !out) {
        sf_error("dump: missing arguments");
        sf_hint("usage: sfvit dump CONFIG.yaml --weights W.safetensors --input IN.safetensors --out OUT.safetensors");
        return 2;
    }
    sf_config cfg;
    if (sf_config_load(&cfg, config_path, n_over, overrides) != 0 || sf_config_validate(&cfg) != 0) return 1;
    sf_threads_init(cfg.train.threads);
    if (sf_precision_setup(&cfg, 0) != 0) return 1;

    int status = 1, B;
    sf_params ps;
    sf_params_init(&ps);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    float *images = NULL;
    int *labels = NULL;
    sf_model *m = sf_model_build(&cfg.model, &ps);
    if (!m) goto done;
    sf_params_alloc(&ps);
    if (sf_checkpoint_load(weights, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) != 0) goto done;
    if ((B = read_input(input, &cfg.model, &images, &labels)) < 0) goto done;
    /* one forward and backward: dropout and drop-path off, BatchNorm on running statistics */
    g.training = 0;
    g.grad_enabled = 1;
    sf_params_zero_grad(&ps);
    const int C = cfg.model.in_chans, S = cfg.model.img_size;
    sf_tensor x = {.data = images, .ndim = 4, .shape = {B, C, S, S}, .numel = (size_t)B * C * S * S};
    sf_tensor *logits = sf_model_forward(&g, m, &x);
    sf_tensor *loss = sf_cross_entropy(&g, logits, labels, NULL, 0.0f);
    sf_backward(&g, loss);
    status = write_output(out, &ps, logits, loss) == 0 ? 0 : 1;
done:
    free(images);
    free(labels);
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    sf_ctx_free(&g);
    return status;
}
