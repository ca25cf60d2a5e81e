/* test_golden_models.c — whole models against independent PyTorch references: logits, loss
 * and every parameter gradient.
 *
 * Each directory tests/golden/models/<case>/ (written by tests/golden/models.py) holds a
 * config.yaml, weights.safetensors (every state_dict entry), input.safetensors (images,
 * labels) and expected.safetensors (PyTorch's logits, loss and grad.<name> for every
 * trainable parameter, computed in float64; metadata rtol_logits, rtol_grad). For each case
 * this program does what `sfvit dump` does (cli/dump.c): load the config, build the model,
 * load the weights strictly, one forward in eval mode (no dropout or drop path, BatchNorm on
 * running statistics), plain mean cross-entropy, backward. It then requires
 *   max |got - want| / max |want| <= rtol_logits   over the logits (and for the loss),
 *   max |got - want| / max |want| <= rtol_grad     per parameter gradient,
 * that the model's trainable parameters and the expected gradients are the same set, and
 * that no expected gradient is identically zero (every parameter must matter for the check
 * to mean anything) unless the file's metadata zero_grads lists it as zero by the model's
 * construction (CvT: see tests/golden/models.py), and then sfvit's must be below 1e-6. Models with SimA blocks are run three times: sima_order auto, qk_first
 * and kv_first (the config's own order plus both forced ones).
 *
 * Each case runs in a child process, so one that aborts fails alone. Data:
 * $SFVIT_TEST_DATA/golden/models (meson sets it to the tests/ directory), else next to this
 * source file. Arguments: an optional substring selects cases. With
 * `--compare OUT.safetensors EXPECTED.safetensors [RTOL_LOGITS RTOL_GRAD]` it only compares a
 * file written by `sfvit dump` with an expected file by the same rules (tests/test_golden_dump.sh;
 * the tolerances given replace the file's: bf16, tests/test_bf16_golden.sh).
 *
 * Deliberately not here: training-mode randomness (dropout, drop path, BatchNorm batch
 * statistics), covered by the gradient checks in test_models.c.
 *
 * Dimension legend: B batch, K classes.
 */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gradcheck.h"
#pragma GCC diagnostic pop
#include "sfvit/checkpoint.h"
#include "sfvit/safetensors.h"
#include "sfvit/train.h"

/* max |got - want| / max |want| over n values; 0/0 counts as 0. */
static double rel_err(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= num)) num = d; /* NaN in got propagates */
        if (fabs((double)want[i]) > den) den = fabs((double)want[i]);
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? num / den : num;
}

static double meta_double(const sf_st_file *f, const char *key, double dflt) {
    const char *v = sf_st_meta_get(f, key);
    return v ? atof(v) : dflt;
}

/* A float copy of entry `name` of f, or NULL (with *n = 0) if absent. */
static float *read_entry(const sf_st_file *f, const char *name, size_t *n) {
    const sf_st_entry *e = sf_st_find(f, name);
    *n = 0;
    if (!e) return NULL;
    float *buf = malloc((e->numel ? e->numel : 1) * sizeof(float));
    if (sf_st_read_f32(f, e, buf, e->numel) != 0) {
        free(buf);
        return NULL;
    }
    *n = e->numel;
    return buf;
}

typedef struct worst {
    double logits, loss, grad; /* errors */
    char grad_name[256];
    int fails;
} worst;

/* Whether the expected file's metadata zero_grads (comma-separated names) lists pname. */
static int listed_zero(const sf_st_file *exp, const char *pname) {
    const char *v = sf_st_meta_get(exp, "zero_grads");
    const size_t n = strlen(pname);
    for (const char *s = v; s && *s;) {
        const char *e = strchr(s, ',');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && !strncmp(s, pname, n)) return 1;
        s = e ? e + 1 : s + len;
    }
    return 0;
}

/* Checks one gradient against the expected file; updates w. A parameter the file lists in
 * zero_grads must have a zero gradient on both sides. */
static void check_grad(const sf_st_file *exp, const char *label, const char *pname, const float *got, size_t n,
                       double rtol, double zero_abs, worst *w) {
    char key[300];
    snprintf(key, sizeof key, "grad.%s", pname);
    size_t ne = 0;
    float *want = read_entry(exp, key, &ne);
    if (!want || ne != n) {
        printf("  %s: expected file has no %s of %zu values\n", label, key, n);
        w->fails++;
        free(want);
        return;
    }
    double mx = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > mx) mx = fabs(want[i]);
    if (mx < 1e-12 && listed_zero(exp, pname)) {
        /* zero by the model's construction (metadata zero_grads; in float64 below 1e-12, rounding
         * only): sfvit's must be rounding-sized too, far below the others (zero_abs: 1e-6 in
         * float32; in bf16 the cancelling terms are rounded to 8 bits, see compare_files) */
        double g = 0;
        for (size_t i = 0; i < n; i++)
            if (fabs(got[i]) > g) g = fabs(got[i]);
        if (!(g <= zero_abs)) {
            printf("  %s: %s is zero by construction, got max |g| %.3e > %.1e\n", label, key, g, zero_abs);
            w->fails++;
        }
        free(want);
        return;
    }
    if (mx == 0 || listed_zero(exp, pname)) {
        printf("  %s: reference gradient %s is %s zero (the case does not test it)\n", label, key,
               mx == 0 ? "identically" : "listed as zero but not");
        w->fails++;
    }
    double e = rel_err(got, want, n);
    if (!(e <= rtol)) {
        printf("  %s: %s max rel err %.3e > %.0e\n", label, key, e, rtol);
        w->fails++;
    }
    if (!(e <= w->grad)) {
        w->grad = e;
        snprintf(w->grad_name, sizeof w->grad_name, "%s", pname);
    }
    free(want);
}

static void check_logits_loss(const sf_st_file *exp, const char *label, const float *logits, size_t n_logits,
                              float loss, double rtol, worst *w) {
    size_t n = 0;
    float *want = read_entry(exp, "logits", &n);
    if (!want || n != n_logits) {
        printf("  %s: expected logits of %zu values missing\n", label, n_logits);
        w->fails++;
    } else {
        w->logits = rel_err(logits, want, n);
        if (!(w->logits <= rtol)) {
            printf("  %s: logits max rel err %.3e > %.0e\n", label, w->logits, rtol);
            w->fails++;
        }
    }
    free(want);
    want = read_entry(exp, "loss", &n);
    if (!want || n != 1) {
        printf("  %s: expected loss missing\n", label);
        w->fails++;
    } else {
        w->loss = rel_err(&loss, want, 1);
        if (!(w->loss <= rtol)) {
            printf("  %s: loss %.7f vs %.7f, rel err %.3e > %.0e\n", label, loss, want[0], w->loss, rtol);
            w->fails++;
        }
    }
    free(want);
}

/* Expected grad.* entries that the model (or dump file) does not have. */
static int count_grad_entries(const sf_st_file *f) {
    int n = 0;
    for (int i = 0; i < f->n_entries; i++)
        if (strncmp(f->entries[i].name, "grad.", 5) == 0) n++;
    return n;
}

static const char *order_name(int o) { return o == 0 ? "auto" : o == 1 ? "qk_first" : "kv_first"; }

/* One case with the given sima_order override (-1: the config as written). Returns the
 * number of failures. */
static int run_case(const char *dir, const char *name, int order) {
    char path[8448], exp_path[8448], w_path[8448], in_path[8448], label[300], over[64];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    snprintf(w_path, sizeof w_path, "%s/weights.safetensors", dir);
    snprintf(in_path, sizeof in_path, "%s/input.safetensors", dir);
    snprintf(exp_path, sizeof exp_path, "%s/expected.safetensors", dir);
    snprintf(label, sizeof label, "%s%s%s", name, order >= 0 ? " sima_order=" : "", order >= 0 ? order_name(order) : "");
    snprintf(over, sizeof over, "model.sima_order=%s", order >= 0 ? order_name(order) : "auto");
    char *overs[1] = {over};

    sf_config cfg;
    if (sf_config_load(&cfg, path, order >= 0 ? 1 : 0, overs) != 0 || sf_config_validate(&cfg) != 0) {
        printf("  %s: config does not load\n", label);
        return 1;
    }
    sf_threads_init(cfg.train.threads);
    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = sf_model_build(&cfg.model, &ps);
    if (!m) {
        printf("  %s: model does not build\n", label);
        sf_params_free(&ps);
        return 1;
    }
    sf_params_alloc(&ps);
    SF_ASSERT(sf_checkpoint_load(w_path, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) == 0, "%s: weights do not load",
              label);

    sf_st_file in, exp;
    SF_ASSERT(sf_st_open(&in, in_path) == 0 && sf_st_open(&exp, exp_path) == 0);
    const sf_st_entry *ei = sf_st_find(&in, "images"), *el = sf_st_find(&in, "labels");
    SF_ASSERT(ei && el && ei->ndim == 4 && el->ndim == 1 && el->shape[0] == ei->shape[0]);
    SF_ASSERT(ei->shape[1] == cfg.model.in_chans && ei->shape[2] == cfg.model.img_size &&
              ei->shape[3] == cfg.model.img_size);
    const int B = (int)ei->shape[0], K = cfg.model.num_classes;
    sf_tensor x;
    memset(&x, 0, sizeof x);
    x.data = malloc(ei->numel * sizeof(float));
    x.ndim = 4;
    for (int d = 0; d < 4; d++) x.shape[d] = (int)ei->shape[d];
    x.numel = ei->numel;
    int64_t *lab64 = malloc((size_t)B * sizeof(int64_t));
    int *labels = malloc((size_t)B * sizeof(int));
    SF_ASSERT(sf_st_read_f32(&in, ei, x.data, ei->numel) == 0 && sf_st_read_i64(&in, el, lab64, (size_t)B) == 0);
    for (int i = 0; i < B; i++) labels[i] = (int)lab64[i];

    /* Exactly the `sfvit dump` sequence. */
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.training = 0;
    g.grad_enabled = 1;
    sf_params_zero_grad(&ps);
    sf_tensor *logits = sf_model_forward(&g, m, &x);
    sf_tensor *loss = sf_cross_entropy(&g, logits, labels, NULL, 0.0f);
    sf_backward(&g, loss);

    worst w = {0, 0, 0, "", 0};
    const double rtol_l = meta_double(&exp, "rtol_logits", 1e-4), rtol_g = meta_double(&exp, "rtol_grad", 1e-3);
    SF_ASSERT(logits->numel == (size_t)B * K);
    check_logits_loss(&exp, label, logits->data, logits->numel, loss->data[0], rtol_l, &w);
    int n_trainable = 0;
    for (int i = 0; i < ps.count; i++) {
        const sf_param *p = &ps.list[i];
        if (!(p->flags & SF_PARAM_TRAINABLE)) continue;
        n_trainable++;
        check_grad(&exp, label, p->t->name, p->t->grad, p->t->numel, rtol_g, 1e-6, &w);
    }
    int n_exp = count_grad_entries(&exp);
    if (n_exp != n_trainable) {
        printf("  %s: %d trainable parameters, expected file has %d gradients\n", label, n_trainable, n_exp);
        w.fails++;
    }
    printf("  golden %-44s %s  logits %.1e  loss %.1e  grads %d, worst %.1e (%s)\n", label, w.fails ? "FAIL" : "ok",
           w.logits, w.loss, n_trainable, w.grad, w.grad_name);

    free(x.data);
    free(lab64);
    free(labels);
    sf_ctx_free(&g);
    sf_st_close(&in);
    sf_st_close(&exp);
    sf_model_free(m);
    sf_params_free(&ps);
    return w.fails;
}

/* The largest |value| over every grad.* entry of an expected file. */
static double max_expected_grad(const sf_st_file *f) {
    double mx = 0;
    for (int i = 0; i < f->n_entries; i++) {
        if (strncmp(f->entries[i].name, "grad.", 5) != 0) continue;
        size_t n = 0;
        float *v = read_entry(f, f->entries[i].name, &n);
        for (size_t j = 0; v && j < n; j++)
            if (fabs(v[j]) > mx) mx = fabs(v[j]);
        free(v);
    }
    return mx;
}

/* --compare OUT EXPECTED: a `sfvit dump` file against the expected file. */
static int compare_files(const char *out_path, const char *exp_path, double rtol_l_set, double rtol_g_set) {
    sf_st_file out, exp;
    if (sf_st_open(&out, out_path) != 0 || sf_st_open(&exp, exp_path) != 0) {
        CHECK(0, "cannot read %s or %s", out_path, exp_path);
        return test_summary("golden_dump_compare");
    }
    worst w = {0, 0, 0, "", 0};
    double rtol_l = meta_double(&exp, "rtol_logits", 1e-4), rtol_g = meta_double(&exp, "rtol_grad", 1e-3);
    double zero_abs = 1e-6;
    if (rtol_l_set > 0) {
        /* bf16 (tests/test_bf16_golden.sh): the given tolerances replace the file's, and a
         * gradient that is zero by construction is a sum of terms that cancel exactly in float64
         * but are rounded to bf16 first, so it is only as small as rtol_logits times the
         * largest expected gradient (CvT's key biases: measured 1e-3 of it) */
        rtol_l = rtol_l_set, rtol_g = rtol_g_set;
        zero_abs = rtol_l * max_expected_grad(&exp);
    }
    size_t nl = 0, nloss = 0;
    float *logits = read_entry(&out, "logits", &nl), *loss = read_entry(&out, "loss", &nloss);
    CHECK(logits && loss && nloss == 1, "%s: no logits / loss", out_path);
    if (logits && loss) check_logits_loss(&exp, out_path, logits, nl, loss[0], rtol_l, &w);
    int n_out = 0;
    for (int i = 0; i < out.n_entries; i++) {
        const char *nm = out.entries[i].name;
        if (strncmp(nm, "grad.", 5) != 0) continue;
        n_out++;
        size_t n = 0;
        float *got = read_entry(&out, nm, &n);
        check_grad(&exp, out_path, nm + 5, got, n, rtol_g, zero_abs, &w);
        free(got);
    }
    int n_exp = count_grad_entries(&exp);
    CHECK(n_out == n_exp, "%s: %d gradients, expected %d", out_path, n_out, n_exp);
    CHECK(w.fails == 0, "%s: %d mismatches", out_path, w.fails);
    printf("  dump %s: logits %.1e  loss %.1e  grads %d, worst %.1e (%s)\n", out_path, w.logits, w.loss, n_out,
           w.grad, w.grad_name);
    free(logits);
    free(loss);
    sf_st_close(&out);
    sf_st_close(&exp);
    return test_summary("golden_dump_compare");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *data_dir(void) {
    const char *env = getenv("SFVIT_TEST_DATA");
    char *dir = malloc(4096);
    if (env && *env) {
        snprintf(dir, 4096, "%s/golden/models", env);
    } else {
        char src[4096];
        snprintf(src, sizeof src, "%s", __FILE__);
        snprintf(dir, 4096, "%s/golden/models", dirname(src));
    }
    return dir;
}

/* Whether the case's model has a SimA block (then both product orders are run too). */
static int has_sima(const char *dir) {
    char path[8448];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    sf_config cfg;
    if (sf_config_load(&cfg, path, 0, NULL) != 0) return 0;
    if (cfg.model.attn == SF_ATTN_SIMA) return 1;
    for (int i = 0; i < cfg.model.n_block_attn; i++)
        if (cfg.model.block_attn[i] == SF_ATTN_SIMA) return 1;
    return 0;
}

/* Runs one (case, order) in a child; returns 1 if it passed. */
static int run_child(const char *dir, const char *name, int order) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int failed = run_case(dir, name, order);
        fflush(stdout);
        fflush(stderr);
        _exit(failed ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) printf("  golden %s crashed (signal %d)\n", name, WTERMSIG(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--compare") == 0) return compare_files(argv[2], argv[3], 0, 0);
    if (argc == 6 && strcmp(argv[1], "--compare") == 0) return compare_files(argv[2], argv[3], atof(argv[4]), atof(argv[5]));
    const char *filter = argc > 1 ? argv[1] : NULL;
    /* Threads (OpenMP, OpenBLAS) start only in the children: none are running at fork. */
    char *dir = data_dir();
    DIR *d = opendir(dir);
    if (!d) {
        CHECK(0, "cannot open golden data directory %s (set SFVIT_TEST_DATA to the tests/ directory)", dir);
        free(dir);
        return test_summary("golden_models");
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char cfg[8192];
        struct stat st;
        snprintf(cfg, sizeof cfg, "%s/%s/config.yaml", dir, de->d_name);
        if (de->d_name[0] == '.' || stat(cfg, &st) != 0) continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? 2 * cap : 32) * sizeof(char *));
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(char *), cmp_str);
    CHECK(n > 0, "no golden model cases in %s (run tests/golden/models.py)", dir);

    int ran = 0;
    for (int i = 0; i < n; i++) {
        if (filter && !strstr(names[i], filter)) continue;
        char cdir[8192];
        snprintf(cdir, sizeof cdir, "%s/%s", dir, names[i]);
        CHECK(run_child(cdir, names[i], -1), "golden model case %s", names[i]);
        if (has_sima(cdir)) {
            CHECK(run_child(cdir, names[i], 1), "golden model case %s, sima_order=qk_first", names[i]);
            CHECK(run_child(cdir, names[i], 2), "golden model case %s, sima_order=kv_first", names[i]);
        }
        ran++;
    }
    CHECK(ran > 0, "no golden model case matched '%s'", filter ? filter : "");
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(dir);
    return test_summary("golden_models");
}
