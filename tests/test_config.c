/* test_config.c — YAML configs: defaults, base: inheritance (relative paths, two levels),
 * model.name applied first, command-line overrides, every error kind naming file:line:key,
 * cross-field validation, and write -> load giving identical settings.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "gradcheck.h"
#include "sfvit/config.h"

static char tmpdir[256];

static const char *put(const char *name, const char *text) {
    static char path[8][512];
    static int k = 0;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0) exit(1);
    fclose(f);
    return p;
}

/* Loads `text` as <name> and expects failure with every needle in the message. */
static void expect_error(const char *name, const char *text, int n_over, char *const *over, const char *n1,
                         const char *n2, const char *n3) {
    const char *p = put(name, text);
    sf_config c;
    int saved = capture_begin();
    int rc = sf_config_load(&c, p, n_over, over);
    capture_end(saved);
    printf("  %-18s -> %s", name, errbuf[0] ? errbuf : "(no message)\n");
    CHECK(rc == -1, "%s: bad config accepted", name);
    const char *needles[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        if (needles[i]) CHECK(strstr(errbuf, needles[i]) != NULL, "%s: message lacks '%s': %s", name, needles[i], errbuf);
}

static void expect_invalid(const char *what, const sf_config *c, const char *key) {
    int saved = capture_begin();
    int rc = sf_config_validate(c);
    capture_end(saved);
    printf("  validate %-18s -> %s", what, errbuf[0] ? errbuf : "(no message)\n");
    CHECK(rc == -1, "%s: invalid config passed validation", what);
    CHECK(strstr(errbuf, key) != NULL, "%s: message lacks %s: %s", what, key, errbuf);
}

/* Settings equal, byte for byte (path aside). */
static int same(const sf_config *a, const sf_config *b) {
    sf_config x = *a, y = *b;
    memset(x.path, 0, sizeof x.path);
    memset(y.path, 0, sizeof y.path);
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Any YAML reader sees every key of a written config exactly once: no mapping (the top
 * level or a section) repeats a key, which readers resolve differently (PyYAML keeps the
 * last). Returns the number of section keys, or -1. */
static int yaml_keys_unique(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    int ok = yaml_parser_load(&p, &doc), n = 0;
    yaml_parser_delete(&p);
    fclose(f);
    if (!ok) return -1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE) n = -1;
    for (yaml_node_pair_t *a = root && n >= 0 ? root->data.mapping.pairs.start : NULL;
         a && a < root->data.mapping.pairs.top && n >= 0; a++) {
        for (yaml_node_pair_t *b = root->data.mapping.pairs.start; b < a; b++)
            if (!strcmp((char *)yaml_document_get_node(&doc, a->key)->data.scalar.value,
                        (char *)yaml_document_get_node(&doc, b->key)->data.scalar.value))
                n = -1;
        yaml_node_t *sec = yaml_document_get_node(&doc, a->value);
        if (n < 0 || sec->type != YAML_MAPPING_NODE) continue;
        for (yaml_node_pair_t *x = sec->data.mapping.pairs.start; x < sec->data.mapping.pairs.top; x++, n++)
            for (yaml_node_pair_t *y = sec->data.mapping.pairs.start; y < x; y++)
                if (!strcmp((char *)yaml_document_get_node(&doc, x->key)->data.scalar.value,
                            (char *)yaml_document_get_node(&doc, y->key)->data.scalar.value))
                    n = -1;
    }
    yaml_document_delete(&doc);
    return n;
}

static void round_trip(const char *what, const sf_config *c) {
    char out[512];
    snprintf(out, sizeof out, "%s/written_%s.yaml", tmpdir, what);
    CHECK(sf_config_write(c, out) == 0, "%s: write", what);
    int nk = yaml_keys_unique(out);
    CHECK(nk > 50, "%s: written YAML has a repeated key (or cannot be read): %d keys", what, nk);
    sf_config back;
    CHECK(sf_config_load(&back, out, 0, NULL) == 0, "%s: written config loads", what);
    int d = sf_config_diff(c, &back, stderr);
    CHECK(d == 0 && same(c, &back), "%s: %d keys differ after write -> load", what, d);
}

static void test_defaults(void) {
    sf_config c;
    sf_config_defaults(&c);
    CHECK(c.optim.lr == 5e-4f && c.optim.weight_decay == 0.05f && c.optim.beta2 == 0.999f && c.optim.eps == 1e-8f,
          "optim defaults");
    CHECK(c.sched.warmup_epochs == 5 && c.sched.warmup_lr == 1e-6f && c.sched.min_lr == 1e-5f, "sched defaults");
    CHECK(c.aug.mixup == 0.8f && c.aug.cutmix == 1.0f && c.aug.reprob == 0.25f && c.aug.smoothing == 0.1f &&
              !strcmp(c.aug.randaugment, "rand-m9-mstd0.5-inc1") && !strcmp(c.aug.interpolation, "bicubic") &&
              c.aug.crop_pct == 0.875f && c.aug.mean[0] == 0.485f && c.aug.std[2] == 0.225f,
          "aug defaults");
    CHECK(c.train.batch_size == 128 && c.train.epochs == 300 && !strcmp(c.train.out, "runs") &&
              !strcmp(c.train.name, "run") && c.train.log_every == 50 && c.data.workers == 2 && c.data.prefetch == 4,
          "train defaults");
    CHECK(c.model.family == SF_FAMILY_VIT && c.model.embed_dim == 192 && c.model.depth == 12 &&
              c.model.num_heads == 3 && c.model.attn == SF_ATTN_MSA && c.model.drop_path_rate == 0.1f &&
              c.model.img_size == 224 && c.model.patch_size == 16,
          "model defaults");
    CHECK(sf_config_validate(&c) == 0, "defaults validate");
    round_trip("defaults", &c);
}

static void test_load(void) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/subdir", tmpdir);
    mkdir(sub, 0755);
    put("root.yaml",
        "# the root of the chain\n"
        "model:\n"
        "  embed_dim: 64\n"
        "  depth: 2\n"
        "  name: \"\"\n" /* applied first despite its position */
        "  num_heads: 4\n"
        "  patch_size: 4\n"
        "  img_size: 32\n"
        "  in_chans: 1\n"
        "train:\n"
        "  epochs: 10\n"
        "  batch_size: 64\n"
        "  seed: 18446744073709551615\n");
    put("subdir/mid.yaml",
        "base: ../root.yaml\n"
        "optim: {lr: 1.0e-3, scale_lr: yes}\n"
        "aug:\n"
        "  mean: [0.5]\n"
        "  rrc: false\n");
    const char *child = put("child.yaml",
                            "base: subdir/mid.yaml\n"
                            "model:\n"
                            "  attn: sima\n"
                            "  attn_norm: l2\n"
                            "  block_attn: [sima, msa]\n"
                            "train.name: child   # a dotted key at the top level\n"
                            "data:\n"
                            "  root: 'images: \"quoted\"'\n");
    char *over[] = {"train.epochs=20", "aug.std=0.5,0.25,0.125", "model.block_attn=[msa, sima]",
                    "data.val_split=valid", "optim.weight_decay=0", "train.out=/tmp/runs #1: x"};
    sf_config c;
    CHECK(sf_config_load(&c, child, 6, over) == 0, "load chain");
    CHECK(!strcmp(c.train.out, "/tmp/runs #1: x"), "unquoted string override taken as written: %s", c.train.out);
    CHECK(!strcmp(c.path, child), "path recorded");
    CHECK(c.model.embed_dim == 64 && c.model.depth == 2 && c.model.num_heads == 4 && c.model.img_size == 32 &&
              c.model.in_chans == 1,
          "root values survive model.name (applied first): dim %d", c.model.embed_dim);
    CHECK(c.model.attn == SF_ATTN_SIMA && c.model.attn_norm == SF_NORM_L2, "child enums");
    CHECK(c.model.n_block_attn == 2 && c.model.block_attn[0] == SF_ATTN_MSA && c.model.block_attn[1] == SF_ATTN_SIMA,
          "block_attn override");
    CHECK(c.optim.lr == 1e-3f && c.optim.scale_lr == 1 && c.optim.weight_decay == 0.0f, "mid + override optim");
    CHECK(c.aug.mean[0] == 0.5f && c.aug.mean[1] == 0.5f && c.aug.mean[2] == 0.5f, "one mean value repeated");
    CHECK(c.aug.std[0] == 0.5f && c.aug.std[1] == 0.25f && c.aug.std[2] == 0.125f, "comma list override");
    CHECK(c.aug.rrc == 0, "bool false");
    CHECK(c.train.epochs == 20 && c.train.batch_size == 64 && !strcmp(c.train.name, "child"), "train");
    CHECK(c.train.seed == UINT64_MAX, "u64 seed %llu", (unsigned long long)c.train.seed);
    CHECK(!strcmp(c.data.root, "images: \"quoted\"") && !strcmp(c.data.val_split, "valid"), "strings: %s",
          c.data.root);
    CHECK(sf_config_validate(&c) == 0, "chain validates");
    round_trip("chain", &c);

    /* A child naming a model resets the base's model keys; its own keys still apply. */
    const char *reset = put("reset.yaml", "base: root.yaml\nmodel:\n  depth: 3\n  name: \"\"\n");
    CHECK(sf_config_load(&c, reset, 0, NULL) == 0, "load reset");
    CHECK(c.model.embed_dim == 192 && c.model.depth == 3, "child's name resets base model keys: %d %d",
          c.model.embed_dim, c.model.depth);

    /* sf_config_set: num_heads as a list sets the SOFT stage heads. */
    sf_config_defaults(&c);
    CHECK(sf_config_set(&c, "model.num_heads", "[1, 2, 5, 8]", NULL) == 0, "num_heads list");
    CHECK(c.model.stage_heads[2] == 5 && c.model.num_heads == 3, "stage_heads set, num_heads unchanged");
    CHECK(sf_config_set(&c, "model.num_heads", "6", "test") == 0 && c.model.num_heads == 6, "num_heads scalar");
    CHECK(sf_config_set(&c, "aug.randaugment", "", NULL) == 0 && c.aug.randaugment[0] == 0, "empty string");
    CHECK(sf_config_set(&c, "train.name", "'quoted'", NULL) == 0 && !strcmp(c.train.name, "quoted"), "quoted string");
    CHECK(sf_config_set(&c, "model.block_attn", "[]", NULL) == 0 && c.model.n_block_attn == 0, "empty list");
}

static void test_soft_custom(void) {
    const char *p = put("soft.yaml",
                        "model:\n"
                        "  family: soft\n"
                        "  attn: soft\n"
                        "  attn_norm: symmetric\n"
                        "  embed_dims: [64, 128, 320, 512]\n"
                        "  depths: [1, 2, 3, 2]\n"
                        "  num_heads: [1, 2, 5, 8]\n"
                        "  nr_init: paper\n"
                        "  block_attn: [soft, soft, soft, soft, soft, soft, msa, msa]\n");
    sf_config c;
    CHECK(sf_config_load(&c, p, 0, NULL) == 0, "custom SOFT loads");
    CHECK(c.model.num_stages == 4 && c.model.embed_dims[2] == 320 && c.model.depths[3] == 2 &&
              c.model.stage_heads[3] == 8 && c.model.nr_init == SF_NR_PAPER,
          "SOFT lists");
    CHECK(sf_config_validate(&c) == 0, "custom SOFT validates");
    round_trip("soft", &c);
    sf_config bad = c;
    bad.model.stage_heads[2] = 3;
    expect_invalid("soft_heads", &bad, "model.embed_dims");
    bad = c;
    bad.model.depths[3] = 0;
    expect_invalid("soft_depths_short", &bad, "model.depths");
    bad = c;
    bad.model.img_size = 200;
    expect_invalid("soft_img", &bad, "model.img_size");
    bad = c;
    bad.model.attn_norm = SF_NORM_L1;
    expect_invalid("soft_norm", &bad, "model.attn_norm");
}

/* A small CvT from its keys: three per-stage lists, QuickGELU, SimA; then the checks. */
static void test_cvt_custom(void) {
    const char *p = put("cvt.yaml",
                        "model:\n"
                        "  name: cvt_13\n"
                        "  img_size: 28\n"
                        "  in_chans: 1\n"
                        "  embed_dims: [16, 32, 48]\n"
                        "  depths: [1, 1, 2]\n"
                        "  num_heads: [1, 2, 3]\n"
                        "  attn: sima\n"
                        "  act: quick_gelu\n"
                        "  block_attn: [msa, sima, sima, msa]\n");
    sf_config c;
    CHECK(sf_config_load(&c, p, 0, NULL) == 0, "custom CvT loads");
    CHECK(c.model.family == SF_FAMILY_CVT && c.model.num_stages == 3 && c.model.embed_dims[2] == 48 &&
              c.model.embed_dims[3] == 0 && c.model.stage_heads[1] == 2 && c.model.act == SF_ACT_QUICK_GELU &&
              c.model.n_block_attn == 4,
          "CvT lists");
    CHECK(sf_config_validate(&c) == 0, "custom CvT validates");
    round_trip("cvt", &c);
    sf_config bad = c;
    bad.model.stage_heads[2] = 5;
    expect_invalid("cvt_heads", &bad, "model.embed_dims");
    bad = c;
    bad.model.num_stages = 4;
    expect_invalid("cvt_stages", &bad, "model.num_stages");
    bad = c;
    bad.model.n_block_attn = 3;
    expect_invalid("cvt_block_attn", &bad, "model.block_attn");
    bad = c;
    bad.model.attn = SF_ATTN_XCA;
    expect_invalid("cvt_xca", &bad, "model.attn");
    CHECK(sf_config_set(&c, "model.act", "quick_gelu", NULL) == 0 && c.model.act == SF_ACT_QUICK_GELU, "act quick_gelu");
}

static void test_errors(void) {
    expect_error("unknown_key.yaml", "optim:\n  lr: 1.0\n  betas: 0.9\n", 0, NULL, "unknown_key.yaml:3:", "optim.betas",
                 "did you mean optim.beta");
    expect_error("typo.yaml", "optim:\n  lrr: 1.0\n", 0, NULL, "typo.yaml:2:", "optim.lrr", "did you mean optim.lr?");
    expect_error("wrong_section.yaml", "\nmodel:\n  lr: 1.0\n", 0, NULL, "wrong_section.yaml:3:", "model.lr",
                 "did you mean optim.lr?");
    expect_error("unknown_section.yaml", "optimizer:\n  lr: 1\n", 0, NULL, "unknown_section.yaml:1:", "optimizer",
                 "did you mean optim?");
    expect_error("dup.yaml", "train:\n  epochs: 3\n  batch_size: 4\n  epochs: 5\n", 0, NULL, "dup.yaml:4:",
                 "train.epochs: duplicate key", "line 2");
    expect_error("dup_section.yaml", "train:\n  epochs: 3\ntrain.epochs: 4\n", 0, NULL, "dup_section.yaml:3:",
                 "duplicate", NULL);
    expect_error("type.yaml", "optim:\n  lr: abc\n", 0, NULL, "type.yaml:2:", "optim.lr: expected a number, got 'abc'",
                 NULL);
    expect_error("type_int.yaml", "train:\n  batch_size: 3.5\n", 0, NULL, "type_int.yaml:2:",
                 "train.batch_size: expected an integer", NULL);
    expect_error("quoted_num.yaml", "train:\n  epochs: \"3\"\n", 0, NULL, "quoted_num.yaml:2:", "train.epochs", NULL);
    expect_error("type_bool.yaml", "aug:\n  rrc: maybe\n", 0, NULL, "type_bool.yaml:2:", "aug.rrc: expected true or false",
                 NULL);
    expect_error("list_scalar.yaml", "optim:\n  lr: [1, 2]\n", 0, NULL, "list_scalar.yaml:2:", "got a list", NULL);
    expect_error("mapping.yaml", "optim:\n  lr:\n    a: 1\n", 0, NULL, "mapping.yaml:2:", "got a mapping", NULL);
    expect_error("range.yaml", "train:\n  batch_size: 0\n", 0, NULL, "range.yaml:2:", "train.batch_size",
                 "must be >= 1");
    expect_error("range_hi.yaml", "aug:\n  hflip: 1.5\n", 0, NULL, "range_hi.yaml:2:", "aug.hflip", "must be <= 1");
    expect_error("nan.yaml", "optim:\n  lr: .nan\n", 0, NULL, "nan.yaml:2:", "optim.lr", NULL);
    expect_error("enum.yaml", "model:\n  attn: linear\n", 0, NULL, "enum.yaml:2:", "model.attn: unknown value 'linear'",
                 "allowed: msa, xca, sima, soft");
    expect_error("senum.yaml", "aug:\n  interpolation: nearest\n", 0, NULL, "senum.yaml:2:", "aug.interpolation",
                 "bilinear, bicubic, random");
    expect_error("enum_list.yaml", "model:\n  block_attn: [sima, nope]\n", 0, NULL, "enum_list.yaml:2:",
                 "model.block_attn: unknown value 'nope'", NULL);
    expect_error("mean_count.yaml", "aug:\n  mean: [0.1, 0.2]\n", 0, NULL, "mean_count.yaml:2:", "aug.mean",
                 "expected 3 values");
    expect_error("too_many.yaml", "model:\n  embed_dims: [1, 2, 3, 4, 5]\n", 0, NULL, "too_many.yaml:2:",
                 "model.embed_dims", "at most 4");
    expect_error("model_name.yaml", "\n\nmodel:\n  name: resnet50\n", 0, NULL, "model_name.yaml:4:", "model.name",
                 "unknown model 'resnet50'");
    expect_error("base_missing.yaml", "# comment\nbase: nowhere.yaml\n", 0, NULL, "base_missing.yaml:2:", "base",
                 "nowhere.yaml");
    put("cyc_a.yaml", "base: cyc_b.yaml\n");
    expect_error("cyc_b.yaml", "base: cyc_a.yaml\n", 0, NULL, "cycle", "base", NULL);
    expect_error("self.yaml", "base: self.yaml\n", 0, NULL, "self.yaml:1:", "cycle", NULL);
    expect_error("syntax.yaml", "model:\n  depth: 3\n   bad: [1\n", 0, NULL, "syntax.yaml:", "YAML syntax error", NULL);
    expect_error("not_mapping.yaml", "- a\n- b\n", 0, NULL, "not_mapping.yaml:1:", "mapping", NULL);
    expect_error("section_scalar.yaml", "optim: 3\n", 0, NULL, "section_scalar.yaml:1:", "optim", "mapping");
    char long_name[400];
    memset(long_name, 'x', 300);
    long_name[300] = 0;
    char text[512];
    snprintf(text, sizeof text, "train:\n  name: %s\n", long_name);
    expect_error("too_long.yaml", text, 0, NULL, "too_long.yaml:2:", "train.name", "at most 255");

    /* Overrides: same rules, the override named in the message. */
    char *o1[] = {"optim.lr=abc"};
    expect_error("ok1.yaml", "train:\n  epochs: 3\n", 1, o1, "command line 'optim.lr=abc'",
                 "optim.lr: expected a number", NULL);
    char *o2[] = {"optim.lr"};
    expect_error("ok2.yaml", "", 1, o2, "not key=value", NULL, NULL);
    char *o3[] = {"optim.lrate=1"};
    expect_error("ok3.yaml", "", 1, o3, "optim.lrate: unknown key", "did you mean optim.lr?", NULL);
    char *o4[] = {"train.epochs=0"};
    expect_error("ok4.yaml", "", 1, o4, "train.epochs", "must be >= 1", NULL);

    sf_config c;
    int saved = capture_begin();
    int rc = sf_config_load(&c, "/nonexistent/dir/x.yaml", 0, NULL);
    capture_end(saved);
    CHECK(rc == -1 && strstr(errbuf, "/nonexistent/dir/x.yaml"), "missing file: %s", errbuf);

    /* An empty file is the defaults. */
    sf_config d;
    sf_config_defaults(&d);
    CHECK(sf_config_load(&c, put("empty.yaml", "# nothing\n"), 0, NULL) == 0 && c.train.epochs == d.train.epochs,
          "empty file");
}

static void test_validate(void) {
    sf_config c;
    sf_config_defaults(&c);
    c.model.embed_dim = 100;
    expect_invalid("dim_heads", &c, "model.embed_dim");
    sf_config_defaults(&c);
    c.model.img_size = 30;
    expect_invalid("img_patch", &c, "model.img_size");
    sf_config_defaults(&c);
    c.model.in_chans = 2;
    expect_invalid("in_chans", &c, "model.in_chans");
    sf_config_defaults(&c);
    c.train.batch_size = 7;
    expect_invalid("odd_batch_mixup", &c, "train.batch_size");
    c.aug.mixup = 0;
    c.aug.cutmix = 0;
    CHECK(sf_config_validate(&c) == 0, "odd batch without mixing is fine");
    sf_config_defaults(&c);
    c.sched.warmup_epochs = 300;
    expect_invalid("warmup", &c, "sched.warmup_epochs");
    sf_config_defaults(&c);
    c.model.n_block_attn = 3;
    expect_invalid("block_attn_len", &c, "model.block_attn");
    sf_config_defaults(&c);
    c.model.attn = SF_ATTN_SIMA;
    c.model.attn_norm = SF_NORM_SYMMETRIC;
    expect_invalid("sima_norm", &c, "model.attn_norm");
    sf_config_defaults(&c);
    c.model.family = SF_FAMILY_XCIT;
    c.model.patch_size = 4;
    c.model.img_size = 32;
    expect_invalid("xcit_patch", &c, "model.patch_size");
    sf_config_defaults(&c);
    c.aug.scale_min = 0.9f;
    c.aug.scale_max = 0.5f;
    expect_invalid("scale", &c, "aug.scale_min");
    sf_config_defaults(&c);
    strcpy(c.train.name, "a/b");
    expect_invalid("run_name", &c, "train.name");
    /* the whole RandAugment string, with the data layer's parser, not only its prefix */
    sf_config_defaults(&c);
    strcpy(c.aug.randaugment, "rand-m9-zz3");
    expect_invalid("randaugment_key", &c, "aug.randaugment");
    strcpy(c.aug.randaugment, "rand-mx");
    expect_invalid("randaugment_value", &c, "aug.randaugment");
}

static void test_output(void) {
    sf_config c;
    sf_config_defaults(&c);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    sf_config_print(&c, f);
    fclose(f);
    CHECK(buf && strstr(buf, "| optim.lr") && strstr(buf, "0.0005") && strstr(buf, "+---"), "boxed table");
    /* Every line of the box has the same width. */
    size_t w = strchr(buf, '\n') - buf;
    int same_w = 1;
    for (char *l = buf; *l; l = strchr(l, '\n') + 1) same_w &= (size_t)(strchr(l, '\n') - l) == w;
    CHECK(same_w, "box lines of equal width");
    free(buf);
    f = open_memstream(&buf, &n);
    sf_config_doc(f);
    fclose(f);
    CHECK(buf && strstr(buf, "| `model.num_heads` |") && strstr(buf, "| `train.max_train_fraction` |") &&
              strstr(buf, "msa \\| xca"),
          "doc table");
    free(buf);
    sf_config a, b;
    sf_config_defaults(&a);
    b = a;
    b.optim.lr = 1e-3f;
    CHECK(sf_config_diff(&a, &b, NULL) == 1, "diff counts one key");
}

/* The project's own small configs load and validate (the named-model ones need models/). */
static void test_repo_configs(void) {
    const char *dir = getenv("SFVIT_TEST_DATA");
    if (!dir) dir = "tests";
    char p[1024];
    snprintf(p, sizeof p, "%s/../configs/fmnist_msa.yaml", dir);
    if (access(p, R_OK) != 0) {
        printf("  (no %s: repository configs not checked)\n", p);
        return;
    }
    sf_config c;
    CHECK(sf_config_load(&c, p, 0, NULL) == 0 && sf_config_validate(&c) == 0, "%s loads and validates", p);
    CHECK(c.model.attn == SF_ATTN_MSA && c.model.in_chans == 1, "fmnist_msa inherits fmnist_sima and overrides attn");
    round_trip("fmnist", &c);
}

/* The registry (models/) through config files. A direct reference links it into this test
 * (config.c's own reference is weak so the config layer needs no model). */
static void test_named_models(void) {
    int (*volatile defaults)(sf_model_cfg *, const char *) = sf_model_defaults;
    if (!defaults) return;
    /* name applied first although listed last; the file's other keys refine it. */
    const char *p = put("named.yaml", "model:\n  embed_dim: 96\n  attn: sima\n  name: deit_small\n");
    sf_config c;
    CHECK(sf_config_load(&c, p, 0, NULL) == 0, "named model loads");
    sf_model_cfg want;
    memset(&want, 0, sizeof want);
    CHECK(defaults(&want, "deit_small") == 0, "deit_small known to the registry");
    memset(want.name, 0, sizeof want.name);
    strcpy(want.name, "deit_small");
    want.embed_dim = 96;
    want.attn = SF_ATTN_SIMA;
    CHECK(memcmp(&want, &c.model, sizeof want) == 0, "deit_small defaults + explicit keys");
    /* A base naming a model, a child refining it. */
    put("named_base.yaml", "model:\n  name: deit_small\n  drop_path_rate: 0.2\n");
    p = put("named_child.yaml", "base: named_base.yaml\nmodel:\n  attn: sima\n");
    CHECK(sf_config_load(&c, p, 0, NULL) == 0 && !strcmp(c.model.name, "deit_small") &&
              c.model.drop_path_rate == 0.2f && c.model.attn == SF_ATTN_SIMA,
          "child refines the base's named model");
    /* Every registered model: its defaults write and load back unchanged. */
    int n = 0;
    for (int i = 0; sf_model_names[i]; i++, n++) {
        sf_config_defaults(&c);
        if (sf_config_set(&c, "model.name", sf_model_names[i], "test") != 0) {
            CHECK(0, "model.name %s refused", sf_model_names[i]);
            continue;
        }
        char what[80];
        snprintf(what, sizeof what, "model_%s", sf_model_names[i]);
        round_trip(what, &c);
    }
    printf("  %d registered models round-trip through YAML\n", n);

    /* Every config the project ships loads, validates and round-trips. */
    const char *dir = getenv("SFVIT_TEST_DATA");
    char cdir[1024];
    snprintf(cdir, sizeof cdir, "%s/../configs", dir ? dir : "tests");
    DIR *d = opendir(cdir);
    struct dirent *e;
    int shipped = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", cdir, e->d_name);
        CHECK(sf_config_load(&c, path, 0, NULL) == 0 && sf_config_validate(&c) == 0, "shipped config %s", path);
        char what[300];
        snprintf(what, sizeof what, "shipped_%.*s", (int)(l - 5), e->d_name);
        round_trip(what, &c);
        shipped++;
    }
    if (d) closedir(d);
    printf("  %d shipped configs load, validate and round-trip\n", shipped);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sfvit_test_cfg_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpdir);
    test_defaults();
    test_load();
    test_soft_custom();
    test_cvt_custom();
    test_errors();
    test_validate();
    test_output();
    test_repo_configs();
    test_named_models();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_config");
}
