/* test_golden_ops.c — every op against PyTorch: forward output and input gradients.
 *
 * Each file tests/golden/ops/<case>.safetensors (written by tests/golden/gen.py) holds an
 * op's inputs, PyTorch's output "out", a fixed upstream gradient "g_out" and PyTorch's
 * autograd gradients "grad.<input>" for L = sum(out * g_out); "__metadata__" names the op
 * ("op"), its arguments and the tolerances ("rtol", "atol"). For each file this program runs
 * the sfvit op with grad mode on, seeds the backward with g_out (sf_backward_seeded), and
 * compares the output and every input gradient element-wise:
 *   |got - want| <= atol + rtol * |want|.
 * Entries "<input>.after" are the expected contents of an input the op updates in place
 * (BatchNorm running statistics). Every op in the op table must have at least one case.
 *
 * Each case runs in a child process, so an op that aborts fails its own cases only and the
 * rest still report. Data: $SFVIT_TEST_DATA/golden/ops (set by meson to the tests/ source
 * directory), else golden/ops next to this source file. An optional argument runs only the
 * cases whose name contains it.
 *
 * Deliberately not here: random masks (dropout and drop path run in eval mode here; their
 * training masks are sfvit's own RNG, covered by the gradient checks), timing.
 *
 * Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks.
 */
#include <dirent.h>
#include <libgen.h>
#include <sys/wait.h>
#include <unistd.h>

/* The shared harness brings CHECK and test_summary; its finite-difference helpers are not
 * used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "gradcheck.h"
#pragma GCC diagnostic pop
#include "ops_internal.h" /* the op table: every op has a golden runner */
#include "sfvit/safetensors.h"

#define MAX_NAMED 16

/* One case: the file and the leaf tensors made from it, by name. */
typedef struct golden_case {
    sf_st_file f;
    const char *name;
    sf_ctx *g;
    const char *in_name[MAX_NAMED];
    sf_tensor *in[MAX_NAMED];
    int n_in;
} golden_case;

static int grad_entry_exists(const golden_case *c, const char *input) {
    char key[128];
    snprintf(key, sizeof key, "grad.%s", input);
    return sf_st_find(&c->f, key) != NULL;
}

/* The input tensor `name` as an arena leaf; it requires grad iff the file has its
 * gradient. Aborts the case if the file lacks it (a malformed golden file). */
static sf_tensor *input(golden_case *c, const char *name) {
    for (int i = 0; i < c->n_in; i++)
        if (strcmp(c->in_name[i], name) == 0) return c->in[i];
    const sf_st_entry *e = sf_st_find(&c->f, name);
    SF_ASSERT(e, "%s: golden file has no tensor '%s'", c->name, name);
    SF_ASSERT(e->ndim >= 1 && e->ndim <= SF_MAX_DIMS, "%s: %s has %d dims", c->name, name, e->ndim);
    int shape[SF_MAX_DIMS];
    for (int i = 0; i < e->ndim; i++) shape[i] = (int)e->shape[i];
    sf_tensor *t = sf_tensor_new(c->g, e->ndim, shape);
    SF_ASSERT(sf_st_read_f32(&c->f, e, t->data, t->numel) == 0);
    t->requires_grad = grad_entry_exists(c, name);
    SF_ASSERT(c->n_in < MAX_NAMED);
    c->in_name[c->n_in] = e->name; /* lives as long as the file */
    c->in[c->n_in++] = t;
    return t;
}

static sf_tensor *input_opt(golden_case *c, const char *name) {
    return sf_st_find(&c->f, name) ? input(c, name) : NULL;
}

static const char *meta(const golden_case *c, const char *key) {
    const char *v = sf_st_meta_get(&c->f, key);
    SF_ASSERT(v, "%s: golden file has no metadata '%s'", c->name, key);
    return v;
}

static int meta_int(const golden_case *c, const char *key) { return atoi(meta(c, key)); }
static float meta_float(const golden_case *c, const char *key) { return strtof(meta(c, key), NULL); }

/* "0,2,1,3" -> {0, 2, 1, 3}; returns the count. */
static int meta_ints(const golden_case *c, const char *key, int *out, int cap) {
    const char *list = meta(c, key), *s = list;
    int n = 0;
    while (n < cap) {
        char *end;
        long v = strtol(s, &end, 10);
        SF_ASSERT(end != s, "%s: metadata %s='%s' is not an integer list", c->name, key, list);
        out[n++] = (int)v;
        if (*end != ',') break;
        s = end + 1;
    }
    return n;
}

/* ---- one runner per op: builds the op from the case's inputs and metadata ---- */
typedef sf_tensor *(*golden_run_fn)(golden_case *c);

static sf_tensor *run_linear(golden_case *c) {
    return sf_linear(c->g, input(c, "x"), input(c, "w"), input_opt(c, "b"));
}
static sf_tensor *run_matmul(golden_case *c) {
    return sf_matmul(c->g, input(c, "a"), input(c, "b"), meta_int(c, "trans_a"), meta_int(c, "trans_b"));
}
static sf_tensor *run_add(golden_case *c) { return sf_add(c->g, input(c, "a"), input(c, "b")); }
static sf_tensor *run_add_broadcast(golden_case *c) {
    return sf_add_broadcast(c->g, input(c, "x"), input(c, "y"));
}
static sf_tensor *run_mul_broadcast(golden_case *c) {
    return sf_mul_broadcast(c->g, input(c, "x"), input(c, "y"));
}
static sf_tensor *run_scale(golden_case *c) { return sf_scale(c->g, input(c, "x"), meta_float(c, "s")); }
static sf_tensor *run_gelu(golden_case *c) { return sf_gelu(c->g, input(c, "x")); }
static sf_tensor *run_gelu_tanh(golden_case *c) { return sf_gelu_tanh(c->g, input(c, "x")); }
static sf_tensor *run_quick_gelu(golden_case *c) { return sf_quick_gelu(c->g, input(c, "x")); }
static sf_tensor *run_relu(golden_case *c) { return sf_relu(c->g, input(c, "x")); }
static sf_tensor *run_elu1(golden_case *c) { return sf_elu1(c->g, input(c, "x")); }
static sf_tensor *run_dropout(golden_case *c) { return sf_dropout(c->g, input(c, "x"), meta_float(c, "p")); }
static sf_tensor *run_drop_path(golden_case *c) {
    return sf_drop_path(c->g, input(c, "x"), meta_float(c, "p"));
}
static sf_tensor *run_residual(golden_case *c) {
    return sf_residual(c->g, input(c, "x"), input(c, "y"), meta_float(c, "p"));
}
static sf_tensor *run_reshape(golden_case *c) {
    int shape[SF_MAX_DIMS];
    int n = meta_ints(c, "shape", shape, SF_MAX_DIMS);
    return sf_reshape(c->g, input(c, "x"), n, shape);
}
static sf_tensor *run_permute(golden_case *c) {
    int perm[SF_MAX_DIMS];
    sf_tensor *x = input(c, "x");
    SF_ASSERT(meta_ints(c, "perm", perm, SF_MAX_DIMS) == x->ndim);
    return sf_permute(c->g, x, perm);
}
static sf_tensor *run_heads_split(golden_case *c) {
    return sf_heads_split(c->g, input(c, "x"), meta_int(c, "parts"), meta_int(c, "part"), meta_int(c, "H"));
}
static sf_tensor *run_heads_merge(golden_case *c) { return sf_heads_merge(c->g, input(c, "x")); }
static sf_tensor *run_slice_tokens(golden_case *c) {
    return sf_slice_tokens(c->g, input(c, "x"), meta_int(c, "start"), meta_int(c, "len"));
}
static sf_tensor *run_concat_tokens(golden_case *c) {
    return sf_concat_tokens(c->g, input(c, "a"), input(c, "b"));
}
static sf_tensor *run_mean_tokens(golden_case *c) { return sf_mean_tokens(c->g, input(c, "x")); }
static sf_tensor *run_softmax(golden_case *c) { return sf_softmax(c->g, input(c, "x")); }
static sf_tensor *run_layernorm(golden_case *c) {
    return sf_layernorm(c->g, input(c, "x"), input(c, "w"), input(c, "b"), meta_float(c, "eps"));
}
static sf_tensor *run_batchnorm2d(golden_case *c) {
    return sf_batchnorm2d(c->g, input(c, "x"), input(c, "w"), input(c, "b"), input(c, "running_mean"),
                          input(c, "running_var"), input(c, "num_batches"), meta_float(c, "eps"),
                          meta_float(c, "momentum"));
}
static sf_tensor *run_heads_split_norm(golden_case *c) {
    return sf_heads_split_norm(c->g, input(c, "x"), meta_int(c, "parts"), meta_int(c, "part"), meta_int(c, "H"),
                               meta_int(c, "p"), meta_float(c, "eps"));
}
static sf_tensor *run_l1norm_tokens(golden_case *c) {
    return sf_l1norm_tokens(c->g, input(c, "x"), meta_float(c, "eps"));
}
static sf_tensor *run_l2norm_tokens(golden_case *c) {
    return sf_l2norm_tokens(c->g, input(c, "x"), meta_float(c, "eps"));
}
static sf_tensor *run_sima(golden_case *c) {
    const char *o = meta(c, "order");
    sf_sima_order order = strcmp(o, "qk_first") == 0   ? SF_SIMA_QK_FIRST
                          : strcmp(o, "kv_first") == 0 ? SF_SIMA_KV_FIRST
                                                       : SF_SIMA_AUTO;
    SF_ASSERT(order != SF_SIMA_AUTO || strcmp(o, "auto") == 0, "%s: unknown order %s", c->name, o);
    return sf_sima(c->g, input(c, "q"), input(c, "k"), input(c, "v"), order);
}
static sf_tensor *run_msa(golden_case *c) {
    return sf_msa(c->g, input(c, "q"), input(c, "k"), input(c, "v"), meta_float(c, "scale"));
}
static sf_tensor *run_xca(golden_case *c) {
    return sf_xca(c->g, input(c, "q"), input(c, "k"), input(c, "v"), input(c, "temperature"));
}
static sf_tensor *run_gauss_kernel(golden_case *c) {
    sf_tensor *q = input(c, "q");
    /* Symmetric K2: the very same tensor as both arguments, as the SOFT core calls it. */
    int sym = sf_st_meta_get(&c->f, "symmetric") && meta_int(c, "symmetric");
    return sf_gauss_kernel(c->g, q, sym ? q : input(c, "l"), meta_float(c, "c"));
}
static sf_nr_init nr_init_of(golden_case *c) {
    const char *s = meta(c, "init");
    SF_ASSERT(strcmp(s, "master") == 0 || strcmp(s, "paper") == 0, "%s: unknown init %s", c->name, s);
    return strcmp(s, "paper") == 0 ? SF_NR_PAPER : SF_NR_MASTER;
}
static sf_tensor *run_nr_pinv(golden_case *c) {
    return sf_nr_pinv(c->g, input(c, "a"), meta_int(c, "iters"), nr_init_of(c));
}
static sf_tensor *run_soft_symnorm(golden_case *c) {
    return sf_soft_symnorm(c->g, input(c, "a"), meta_int(c, "iters"), nr_init_of(c));
}
static sf_tensor *run_conv2d(golden_case *c) {
    return sf_conv2d(c->g, input(c, "x"), input(c, "w"), input_opt(c, "b"), meta_int(c, "stride"),
                     meta_int(c, "pad"), meta_int(c, "groups"));
}
static sf_tensor *run_avgpool2d(golden_case *c) {
    return sf_avgpool2d(c->g, input(c, "x"), meta_int(c, "k"), meta_int(c, "stride"));
}
static sf_tensor *run_cross_entropy(golden_case *c) {
    sf_tensor *logits = input(c, "logits");
    sf_tensor *soft = input_opt(c, "soft_targets");
    if (soft) return sf_cross_entropy(c->g, logits, NULL, soft->data, 0.0f);
    static int labels[256];
    int n = meta_ints(c, "labels", labels, 256);
    SF_ASSERT(n == logits->shape[0], "%s: %d labels for batch %d", c->name, n, logits->shape[0]);
    return sf_cross_entropy(c->g, logits, labels, NULL, meta_float(c, "smoothing"));
}

/* Generated from the op list (SF_OPS in ops.h): an op without a run_<name> above does not
 * compile, and one without a golden case fails the coverage check in main. */
static const golden_run_fn runners[SF_OP_COUNT] = {
#define GOLDEN_RUNNER(ID, name) [SF_OP_##ID] = run_##name,
    SF_OPS(GOLDEN_RUNNER)
#undef GOLDEN_RUNNER
};

static int op_index(const char *name) {
    for (int i = 1; i < SF_OP_COUNT; i++)
        if (strcmp(sf_op_table[i].name, name) == 0) return i;
    return -1;
}

/* ---- comparison ---- */

/* |got - want| <= atol + rtol * |want| for every element. Prints the first mismatches and
 * the max abs diff; *worst receives the largest |diff| / (atol + rtol |want|) seen. */
static int compare(const char *case_name, const char *what, const float *got, const float *want, size_t n,
                   double rtol, double atol, double *worst) {
    int bad = 0;
    double maxdiff = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double lim = atol + rtol * fabs((double)want[i]);
        if (!(d <= lim)) { /* NaN fails too */
            if (bad < 5)
                fprintf(stderr, "  %s %s[%zu]: got %.8g want %.8g (diff %.3g)\n", case_name, what, i, got[i],
                        want[i], d);
            bad++;
        }
        if (!(d <= maxdiff)) {
            maxdiff = d;
            at = i;
        }
        double r = d / lim;
        if (!(r <= *worst)) *worst = r;
    }
    if (bad)
        fprintf(stderr, "  %s %s: %d of %zu mismatched, max abs diff %.3g at [%zu] (rtol %g, atol %g)\n", case_name,
                what, bad, n, maxdiff, at, rtol, atol);
    return bad == 0;
}

static int same_shape(const sf_tensor *t, const sf_st_entry *e) {
    if (e->ndim != t->ndim) return 0;
    for (int i = 0; i < e->ndim; i++)
        if (e->shape[i] != t->shape[i]) return 0;
    return 1;
}

static const float *entry_f32(golden_case *c, const sf_st_entry *e, float *buf) {
    SF_ASSERT(sf_st_read_f32(&c->f, e, buf, e->numel) == 0);
    return buf;
}

/* Runs one case; returns the number of failed comparisons. */
static int run_case(const char *path, const char *name) {
    golden_case c = {0};
    c.name = name;
    if (sf_st_open(&c.f, path) != 0) return 1;
    const char *op_name = meta(&c, "op");
    int op = op_index(op_name);
    if (op < 0 || !runners[op]) {
        fprintf(stderr, "  %s: unknown op '%s'\n", name, op_name);
        sf_st_close(&c.f);
        return 1;
    }
    double rtol = strtod(meta(&c, "rtol"), NULL), atol = strtod(meta(&c, "atol"), NULL);
    sf_threads_init(0);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)4 << 20);
    c.g = &g;
    g.grad_enabled = 1;
    g.training = sf_st_meta_get(&c.f, "training") ? meta_int(&c, "training") : 1;

    int fails = 0;
    double worst = 0;
    sf_tensor *out = runners[op](&c);
    const sf_st_entry *e_out = sf_st_find(&c.f, "out");
    SF_ASSERT(e_out, "%s: no 'out'", name);
    float *buf = malloc((e_out->numel + 1) * sizeof(float));
    char s1[64], s2[64];
    if (!same_shape(out, e_out)) {
        fprintf(stderr, "  %s: output shape %s, want %s\n", name, sf_shape_str(out, s1, sizeof s1),
                sf_st_shape_str(e_out, s2, sizeof s2));
        fails++;
    } else {
        fails += !compare(name, "out", out->data, entry_f32(&c, e_out, buf), out->numel, rtol, atol, &worst);
    }

    /* In-place updates of inputs (BatchNorm running statistics). */
    for (int i = 0; i < c.f.n_entries; i++) {
        const char *en = c.f.entries[i].name;
        size_t len = strlen(en);
        if (len < 7 || strcmp(en + len - 6, ".after") != 0) continue;
        char base[128];
        snprintf(base, sizeof base, "%.*s", (int)(len - 6), en);
        sf_tensor *t = input(&c, base);
        float *want = malloc(t->numel * sizeof(float));
        fails += !compare(name, en, t->data, entry_f32(&c, &c.f.entries[i], want), t->numel, rtol, atol, &worst);
        free(want);
    }

    if (sf_st_meta_get(&c.f, "residual")) { /* nr_pinv, soft_symnorm */
        /* The logged convergence residual: ~0 in float64 for these converged cases, so
         * float32 must report it below 1e-4 (a wrong or missing residual shows as 0.01 or more). */
        double want = strtod(meta(&c, "residual"), NULL), got = sf_nr_last_residual();
        if (!(fabs(got - want) <= 2e-2 * want + 1e-4)) {
            fprintf(stderr, "  %s: sf_nr_last_residual %.6g, want %.6g\n", name, got, want);
            fails++;
        }
    }

    /* Backward from g_out, then every input gradient. */
    const sf_st_entry *e_g = sf_st_find(&c.f, "g_out");
    SF_ASSERT(e_g && e_g->numel == e_out->numel, "%s: g_out missing or of the wrong size", name);
    int any_grad = 0;
    for (int i = 0; i < c.n_in; i++) any_grad |= c.in[i]->requires_grad;
    if (any_grad && out->numel == e_out->numel) {
        if (!out->requires_grad) {
            fprintf(stderr, "  %s: output records no tape node although an input requires grad\n", name);
            fails++;
        } else {
            sf_backward_seeded(&g, out, entry_f32(&c, e_g, buf));
        }
        for (int i = 0; out->requires_grad && i < c.f.n_entries; i++) {
            const sf_st_entry *e = &c.f.entries[i];
            if (strncmp(e->name, "grad.", 5) != 0) continue;
            sf_tensor *x = input(&c, e->name + 5);
            float *want = malloc(e->numel * sizeof(float));
            float *got = x->grad;
            float *zeros = NULL;
            if (!got) got = zeros = calloc(x->numel, sizeof(float)); /* nothing flowed into it */
            SF_ASSERT(e->numel == x->numel);
            fails += !compare(name, e->name, got, entry_f32(&c, e, want), x->numel, rtol, atol, &worst);
            free(want);
            free(zeros);
        }
    }
    printf("  golden %-36s %-14s %s (worst %.2f of tolerance)\n", name, op_name, fails ? "FAIL" : "ok", worst);
    free(buf);
    sf_ctx_free(&g);
    sf_st_close(&c.f);
    return fails;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *data_dir(void) {
    const char *env = getenv("SFVIT_TEST_DATA");
    char *dir = malloc(4096);
    if (env && *env) {
        snprintf(dir, 4096, "%s/golden/ops", env);
    } else {
        char src[4096];
        snprintf(src, sizeof src, "%s", __FILE__);
        snprintf(dir, 4096, "%s/golden/ops", dirname(src));
    }
    return dir;
}

/* File-scope so that the forked children, which exit without freeing what the parent
 * allocated, leave them reachable (valgrind's leak check runs in every child). */
static char *dir;
static char **files;

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    /* Threads (OpenMP, OpenBLAS) start only in the children: none are running at fork. */
    dir = data_dir();
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open golden data directory %s (set SFVIT_TEST_DATA to the tests/ directory)\n",
                dir);
        CHECK(0, "golden data directory %s missing", dir);
        return test_summary("golden_ops");
    }
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 12 || strcmp(de->d_name + len - 12, ".safetensors") != 0) continue;
        if (n == cap) files = realloc(files, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(char *));
        files[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(files, (size_t)n, sizeof(char *), cmp_str);
    CHECK(n > 0, "no golden files in %s (run tests/golden/gen.py)", dir);

    int covered[SF_OP_COUNT] = {0};
    int ran = 0;
    for (int i = 0; i < n; i++) {
        char name[256], path[8192];
        snprintf(name, sizeof name, "%.*s", (int)(strlen(files[i]) - 12), files[i]);
        if (filter && !strstr(name, filter)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        /* Which op, for the coverage check (read in the parent; the child re-reads). */
        sf_st_file f;
        if (sf_st_open(&f, path) == 0) {
            const char *op = sf_st_meta_get(&f, "op");
            int k = op ? op_index(op) : -1;
            if (k > 0) covered[k]++;
            sf_st_close(&f);
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            int failed = run_case(path, name);
            fflush(stdout);
            fflush(stderr);
            _exit(failed ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (WIFSIGNALED(status)) printf("  golden %-36s crashed (signal %d)\n", name, WTERMSIG(status));
        CHECK(ok, "golden case %s", name);
        ran++;
    }
    if (!filter) {
        for (int k = 1; k < SF_OP_COUNT; k++)
            CHECK(covered[k] > 0, "op %s has no golden case (add one to tests/golden/gen.py)", sf_op_table[k].name);
    }
    CHECK(ran > 0, "no golden case matched '%s'", filter ? filter : "");
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    free(dir);
    return test_summary("golden_ops");
}
