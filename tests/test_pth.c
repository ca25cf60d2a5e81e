/* test_pth.c — the torch.save reader and the key layouts on real files written by
 * torch.save (tests/golden/gen_pth.py, Debian python3-torch), then hostile input.
 *
 * Real files: strided, offset and storage-sharing tensors and every dtype against the same
 * values written as safetensors (zip and legacy format); the choice of the weights inside a
 * training checkpoint; every model fixture loaded strictly into the model of its golden case
 * (tests/golden/models/) must reproduce that case's weights exactly and report its layout.
 * (test_pth_golden.sh runs `sfvit dump` on them and compares logits and gradients.)
 * Hostile input: legacy streams and pickles written here byte by byte (lying offsets, huge
 * shapes, deep nesting, cycles, exponential sharing, globals outside the whitelist, bad
 * opcodes), a compressed zip entry, a tar file, every truncation and random byte flips of
 * real files. Each must give one message naming the file, never a crash (run under ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "sfvit/checkpoint.h"
#include "sfvit/config.h"
#include "sfvit/model.h"
#include "sfvit/pth.h"

static char tmpdir[256], pth_dir[512], models_dir[512];

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "test setup: cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* ---- real files ---- */

static int entries_equal(const sf_st_entry *a, const sf_st_entry *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->numel != b->numel) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return memcmp(a->data, b->data, (size_t)(a->end - a->begin)) == 0;
}

static void test_views(const char *file) {
    char path[700], want_path[700];
    snprintf(path, sizeof path, "%s/%s", pth_dir, file);
    snprintf(want_path, sizeof want_path, "%s/views.safetensors", pth_dir);
    sf_st_file f, want;
    CHECK(sf_pth_open(&f, path, NULL) == 0, "%s does not open", file);
    CHECK(sf_st_open(&want, want_path) == 0, "views.safetensors does not open");
    CHECK(f.n_entries == want.n_entries, "%s: %d tensors, expected %d", file, f.n_entries, want.n_entries);
    for (int i = 0; i < want.n_entries; i++) {
        const sf_st_entry *e = sf_st_find(&f, want.entries[i].name);
        CHECK(e && entries_equal(e, &want.entries[i]), "%s: tensor %s differs", file, want.entries[i].name);
    }
    const char *fmt = sf_st_meta_get(&f, "pth.format");
    CHECK(fmt && !strcmp(fmt, strstr(file, "legacy") ? "legacy" : "zip"), "%s: format %s", file, fmt ? fmt : "-");
    printf("  %-38s %d tensors, every dtype and view as written\n", file, f.n_entries);
    sf_st_close(&f);
    sf_st_close(&want);
}

static void test_selection(void) {
    char path[700];
    sf_st_file f;
    snprintf(path, sizeof path, "%s/vit_mixed_msa_sima.deit_train.pth", pth_dir);
    CHECK(sf_pth_open(&f, path, NULL) == 0, "deit training checkpoint");
    const char *src = sf_st_meta_get(&f, "pth.source");
    CHECK(src && !strcmp(src, "model") && f.n_entries == 32, "weights from 'model' (%s, %d)", src, f.n_entries);
    sf_st_close(&f);
    CHECK(sf_pth_open(&f, path, &(sf_pth_opts){.key = "optimizer"}) == 0, "optimizer key");
    CHECK(sf_st_find(&f, "state.0.exp_avg") && sf_st_find(&f, "state.1.exp_avg_sq"), "optimizer moments by name");
    sf_st_close(&f);
    snprintf(path, sizeof path, "%s/xcit_sima_l2_nolpi.official_ddp.pth", pth_dir);
    CHECK(sf_pth_open(&f, path, &(sf_pth_opts){.prefer_ema = 1}) == 0, "ema");
    src = sf_st_meta_get(&f, "pth.source");
    CHECK(src && !strcmp(src, "model_ema") && f.n_entries == 3, "prefer_ema takes model_ema (%s)", src);
    sf_st_close(&f);
    int saved = capture_begin();
    int rc = sf_pth_open(&f, path, &(sf_pth_opts){.key = "nope"});
    capture_end(saved);
    CHECK(rc == -1 && strstr(errbuf, "'nope'"), "a missing key is named: %s", errbuf);
}

/* The model of golden case `c`, its params allocated and zeroed. */
static sf_model *golden_model(const char *c, sf_params *ps) {
    char cfg_path[700];
    snprintf(cfg_path, sizeof cfg_path, "%s/%s/config.yaml", models_dir, c);
    sf_config cfg;
    SF_ASSERT(sf_config_load(&cfg, cfg_path, 0, NULL) == 0, "%s", cfg_path);
    sf_params_init(ps);
    sf_model *m = sf_model_build(&cfg.model, ps);
    SF_ASSERT(m, "%s", c);
    sf_params_alloc(ps);
    return m;
}

static void test_model_file(const char *c, const char *file, const char *layout, int ddp) {
    char path[700], wpath[700];
    snprintf(path, sizeof path, "%s/%s", pth_dir, file);
    snprintf(wpath, sizeof wpath, "%s/%s/weights.safetensors", models_dir, c);
    sf_params ps, want;
    sf_model *m = golden_model(c, &ps), *mw = golden_model(c, &want);
    sf_ckpt_report rep;
    int rc = sf_checkpoint_load(path, &ps, &(sf_ckpt_opts){.strict = 1, .quiet = 1}, &rep);
    CHECK(rc == 0, "%s: strict load failed", file);
    CHECK(sf_checkpoint_load(wpath, &want, &(sf_ckpt_opts){.strict = 1, .quiet = 1}, NULL) == 0, "%s", wpath);
    CHECK(rep.n_loaded == ps.count, "%s: %d of %d loaded", file, rep.n_loaded, ps.count);
    CHECK(!strcmp(rep.layout.layout, layout), "%s: layout '%s', expected '%s'", file, rep.layout.layout, layout);
    CHECK(rep.layout.ddp_prefix == ddp, "%s: ddp prefix %d", file, rep.layout.ddp_prefix);
    size_t diff = 0;
    for (int i = 0; i < ps.count; i++)
        diff += memcmp(ps.list[i].t->data, want.list[i].t->data, ps.list[i].t->numel * sizeof(float)) != 0;
    CHECK(diff == 0, "%s: %zu parameters differ from %s", file, diff, wpath);
    printf("  %-38s %3d tensors, %s layout%s, equal to the golden weights\n", file, rep.n_loaded, rep.layout.layout,
           ddp ? " (module. removed)" : "");
    sf_ckpt_report_free(&rep);
    sf_model_free(m);
    sf_model_free(mw);
    sf_params_free(&ps);
    sf_params_free(&want);
}

/* A timm-layout file whose q/k/v parts disagree, and a file of another model. */
static void test_layout_refusals(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/soft.official.pth", pth_dir);
    sf_params ps;
    sf_model *m = golden_model("vit_mixed_msa_sima", &ps);
    int saved = capture_begin();
    int rc = sf_checkpoint_load(path, &ps, &(sf_ckpt_opts){.strict = 1}, NULL);
    capture_end(saved);
    CHECK(rc == -1 && strstr(errbuf, "known layout") && strstr(errbuf, "pos_embed1"),
          "a file of another model lists the layouts and its first keys: %s", errbuf);
    sf_model_free(m);
    sf_params_free(&ps);
}

/* Some converters and exporters drop BatchNorm's integer num_batches_tracked counters. A
 * file without them loads strictly, with the counters set to 0 and one line saying so; a
 * file missing any other key is still refused. `file` is a torch.save file without the
 * counters, or NULL for a safetensors copy of the case's weights written here without them
 * (and, to check the refusal, without one more key). */
static int is_counter(const char *name) {
    const char *sfx = ".num_batches_tracked";
    size_t n = strlen(name), k = strlen(sfx);
    return n >= k && strcmp(name + n - k, sfx) == 0;
}

static void strip_to(const sf_st_file *f, const char *out, int also_drop) {
    sf_st_writer w;
    sf_st_writer_init(&w);
    for (int i = 0, kept = 0; i < f->n_entries; i++) {
        const sf_st_entry *e = &f->entries[i];
        if (is_counter(e->name) || (also_drop && kept++ == 0)) continue;
        SF_ASSERT(sf_st_writer_add(&w, e->name, e->dtype, e->ndim, e->shape, e->data) == 0);
    }
    SF_ASSERT(sf_st_writer_write(&w, out) == 0, "%s", out);
    sf_st_writer_free(&w);
}

static void test_missing_batch_counters(const char *c, const char *file) {
    char wpath[700], path[700], worse[700];
    snprintf(wpath, sizeof wpath, "%s/%s/weights.safetensors", models_dir, c);
    sf_st_file golden;
    SF_ASSERT(sf_st_open(&golden, wpath) == 0, "%s", wpath);
    int n_counters = 0;
    for (int i = 0; i < golden.n_entries; i++) n_counters += is_counter(golden.entries[i].name);
    if (file) {
        snprintf(path, sizeof path, "%s/%s", pth_dir, file);
    } else {
        snprintf(path, sizeof path, "%s/%s.no_counters.safetensors", tmpdir, c);
        snprintf(worse, sizeof worse, "%s/%s.no_counters_and_more.safetensors", tmpdir, c);
        strip_to(&golden, path, 0);
        strip_to(&golden, worse, 1);
    }
    const char *shown = file ? file : "safetensors";
    sf_params ps, want;
    sf_model *m = golden_model(c, &ps), *mw = golden_model(c, &want);
    for (int i = 0; i < ps.count; i++)  // counters that must come back as 0
        if (is_counter(ps.list[i].t->name)) ps.list[i].t->data[0] = 7;
    sf_ckpt_report rep;
    int saved = capture_begin();
    int rc = sf_checkpoint_load(path, &ps, &(sf_ckpt_opts){.strict = 1, .quiet = 1}, &rep);
    capture_end(saved);
    char line[200];
    snprintf(line, sizeof line, "%d BatchNorm num_batches_tracked counters are not in the file; set to 0", n_counters);
    CHECK(n_counters > 0 && rc == 0 && strstr(errbuf, line), "%s %s without its %d counters: rc %d, said: %s", c,
          shown, n_counters, rc, errbuf);
    CHECK(rep.n_loaded == ps.count - n_counters, "%s %s: %d of %d loaded", c, shown, rep.n_loaded, ps.count);
    SF_ASSERT(sf_checkpoint_load(wpath, &want, &(sf_ckpt_opts){.strict = 1, .quiet = 1}, NULL) == 0, "%s", wpath);
    int zeroed = 0, differ = 0;
    for (int i = 0; i < ps.count; i++) {
        const sf_tensor *t = ps.list[i].t;
        if (is_counter(t->name)) zeroed += t->data[0] == 0;
        else differ += memcmp(t->data, want.list[i].t->data, t->numel * sizeof(float)) != 0;
    }
    CHECK(zeroed == n_counters && differ == 0, "%s %s: %d of %d counters zeroed, %d parameters differ", c, shown,
          zeroed, n_counters, differ);
    if (!file) {
        saved = capture_begin();
        rc = sf_checkpoint_load(worse, &ps, &(sf_ckpt_opts){.strict = 1, .quiet = 1}, NULL);
        capture_end(saved);
        CHECK(rc == -1 && strstr(errbuf, "1 keys missing from the checkpoint"),
              "%s: a file missing a key besides the counters is refused: %s", c, errbuf);
    }
    printf("  %-38s loads without its %d BatchNorm counters (set to 0)\n", file ? file : c, n_counters);
    sf_ckpt_report_free(&rep);
    sf_st_close(&golden);
    sf_model_free(m);
    sf_model_free(mw);
    sf_params_free(&ps);
    sf_params_free(&want);
}

/* ---- hostile input ---- */

typedef struct bytes {
    unsigned char b[1 << 16];
    size_t n;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
    SF_ASSERT(o->n + n <= sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void puts_(bytes *o, const char *s) { put(o, s, strlen(s)); }
#define PUT_LIT(o, lit) put(o, lit, sizeof(lit) - 1) /* a literal that may hold NUL bytes */
static void put_u32(bytes *o, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(o, b, 4);
}
static void put_u64(bytes *o, uint64_t v) {
    put_u32(o, (uint32_t)v);
    put_u32(o, (uint32_t)(v >> 32));
}
static void put_str(bytes *o, const char *s) { /* BINUNICODE */
    puts_(o, "X");
    put_u32(o, (uint32_t)strlen(s));
    puts_(o, s);
}
/* LONG1 with 8 bytes: any int64 */
static void put_int(bytes *o, int64_t v) {
    puts_(o, "\x8a\x08");
    put_u64(o, (uint64_t)v);
}

static int storage_as_view; /* the next persistent ids carry legacy view metadata */

/* _rebuild_tensor_v2(storage '0' of `numel` floats, offset, size, stride, False, OrderedDict()) */
static void put_tensor(bytes *o, int64_t numel, int64_t offset, int ndim, const int64_t *size, const int64_t *stride) {
    puts_(o, "ctorch._utils\n_rebuild_tensor_v2\n(");
    puts_(o, "(");
    put_str(o, "storage");
    puts_(o, "ctorch\nFloatStorage\n");
    put_str(o, "0");
    put_str(o, "cpu");
    put_int(o, numel);
    if (storage_as_view) { /* ('0', offset 0, 4 elements) */
        puts_(o, "(");
        put_str(o, "0");
        PUT_LIT(o, "K\x00K\x04t");
    }
    puts_(o, "tQ");
    put_int(o, offset);
    puts_(o, "(");
    for (int d = 0; d < ndim; d++) put_int(o, size[d]);
    puts_(o, "t(");
    for (int d = 0; d < ndim; d++) put_int(o, stride[d]);
    puts_(o, "t\x89" "ccollections\nOrderedDict\n)RtR");
}

/* A legacy stream: magic, protocol 1001, sys_info, `main`, keys ['0'], one storage of n floats
 * (no key and no storage when both counts are 0). */
static void legacy(bytes *o, const bytes *main, uint64_t n_declared, size_t n_data) {
    static const unsigned char magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                          0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
    o->n = 0;
    put(o, magic, sizeof magic);
    puts_(o, "\x80\x02M\xe9\x03.");
    puts_(o, "\x80\x02}.");
    put(o, main->b, main->n);
    if (n_declared == 0 && n_data == 0) {
        puts_(o, "\x80\x02].");
        return;
    }
    puts_(o, "\x80\x02](");
    put_str(o, "0");
    puts_(o, "e.");
    put_u64(o, n_declared);
    for (size_t i = 0; i < n_data; i++) put(o, "\0\0\x80\x3f", 4);
}

static void expect(const char *label, const unsigned char *b, size_t n, int ok, const char *needle) {
    sf_st_file f;
    int saved = capture_begin();
    int rc = sf_pth_open_mem(&f, b, n, label, NULL);
    capture_end(saved);
    if (!ok) printf("  %-22s -> %s", label, errbuf[0] ? errbuf : "(no message)\n");
    CHECK((rc == 0) == ok, "%s: %s (%s)", label, ok ? "refused" : "accepted", errbuf);
    if (!ok) {
        CHECK(strstr(errbuf, label) != NULL, "%s: message does not name the file: %s", label, errbuf);
        CHECK(needle == NULL || strstr(errbuf, needle) != NULL, "%s: message lacks '%s': %s", label, needle, errbuf);
        CHECK(f.entries == NULL && f.buf == NULL, "%s: refused file left state behind", label);
    }
    sf_st_close(&f);
}

static void test_crafted(void) {
    static bytes main, file;
    const int64_t s2[1] = {2}, st1[1] = {1};

    main.n = 0; /* {'w': tensor(2 of 4 floats, offset 1)} — the valid baseline */
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, 4, 1, 1, s2, st1);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("valid_legacy", file.b, file.n, 1, NULL);
    legacy(&file, &main, 4, 3);
    expect("short_storage", file.b, file.n, 0, "truncated");
    legacy(&file, &main, 5, 4);
    expect("storage_size_lies", file.b, file.n, 0, "lies");

    main.n = 0; /* a storage view of PyTorch < 0.4 */
    storage_as_view = 1;
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, 4, 1, 1, s2, st1);
    puts_(&main, "u.");
    storage_as_view = 0;
    legacy(&file, &main, 4, 4);
    expect("storage_view", file.b, file.n, 0, "PyTorch < 0.4");

    main.n = 0; /* offset past the storage */
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, 4, 3, 1, s2, st1);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("offset_lies", file.b, file.n, 0, "offsets lie");

    const int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, zero[2] = {0, 0};
    main.n = 0; /* a broadcast view of 2^80 elements in 4 floats */
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, 4, 0, 2, huge, zero);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("huge_shape", file.b, file.n, 0, "overflows");
    const int64_t big[1] = {(int64_t)1 << 40};
    main.n = 0;
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, 4, 0, 1, big, st1);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("huge_numel", file.b, file.n, 0, "broadcast");
    main.n = 0; /* a storage of 2^60 floats in a tiny file */
    puts_(&main, "\x80\x02}(");
    put_str(&main, "w");
    put_tensor(&main, (int64_t)1 << 60, 0, 1, s2, st1);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("huge_storage", file.b, file.n, 0, "more than the file");

    main.n = 0; /* 20000 nested lists around a tensor: the machine is iterative, the walk bounded */
    puts_(&main, "\x80\x02");
    for (int i = 0; i < 20000; i++) puts_(&main, "]");
    put_tensor(&main, 4, 0, 1, s2, st1);
    for (int i = 0; i < 20000; i++) puts_(&main, "a");
    puts_(&main, ".");
    legacy(&file, &main, 4, 4);
    expect("deep_nesting", file.b, file.n, 0, "deeper");

    main.n = 0; /* a list that contains a tensor and itself */
    PUT_LIT(&main, "\x80\x02]q\x00");
    put_tensor(&main, 4, 0, 1, s2, st1);
    PUT_LIT(&main, "ah\x00" "a.");
    legacy(&file, &main, 4, 4);
    expect("cycle", file.b, file.n, 0, "deeper");

    main.n = 0; /* L0 = [t]; L(i+1) = [Li, Li]: 2^25 paths to one tensor */
    puts_(&main, "\x80\x02");
    put_tensor(&main, 4, 0, 1, s2, st1);
    PUT_LIT(&main, "\x85q\x00");
    for (int i = 0; i < 25; i++) {
        unsigned char get[] = {'h', (unsigned char)i, 'h', (unsigned char)i, 0x86, 'q', (unsigned char)(i + 1)};
        put(&main, get, sizeof get);
    }
    puts_(&main, ".");
    legacy(&file, &main, 4, 4);
    expect("exponential_sharing", file.b, file.n, 0, "shares");

    main.n = 0; /* os.system('x') next to a tensor: never resolved, the tensor still loads */
    puts_(&main, "\x80\x02}(");
    put_str(&main, "evil");
    puts_(&main, "cos\nsystem\n(");
    put_str(&main, "touch /tmp/sfvit-pwned");
    puts_(&main, "tR");
    put_str(&main, "args");
    puts_(&main, "cargparse\nNamespace\n)\x81}(");
    put_str(&main, "lr");
    puts_(&main, "G?\xb9\x99\x99\x99\x99\x99\x9aub");
    put_str(&main, "w");
    put_tensor(&main, 4, 0, 1, s2, st1);
    puts_(&main, "u.");
    legacy(&file, &main, 4, 4);
    expect("foreign_globals", file.b, file.n, 1, NULL);

    main.n = 0; /* only a foreign object: nothing to load */
    puts_(&main, "\x80\x02" "cos\nsystem\n(");
    put_str(&main, "true");
    puts_(&main, "tR.");
    legacy(&file, &main, 0, 0);
    expect("no_tensors", file.b, file.n, 0, "no tensors");

    struct {
        const char *label, *pickle, *needle;
    } bad[] = {
        {"unknown_opcode", "\x80\x02\xff.", "opcode 0xff"},
        {"memo_before_put", "\x80\x02h\x05.", "memo slot 5"},
        {"no_stop", "\x80\x02}", "opcode"}, /* runs on into the next pickle and the data */
        {"empty_stack", "\x80\x02.", "empty"},
        {"setitems_no_mark", "\x80\x02}u.", "MARK"},
        {"append_to_int", "\x80\x02K\x01K\x02" "a.", "not a list"},
        {"string_too_long", "\x80\x02X\xff\xff\xff\x7f.", "past the end"},
        {"protocol_9", "\x80\x09.", "protocol 9"},
        {"bad_persid", "\x80\x02K\x01Q.", "persistent id"},
        {"text_persid", "\x80\x02P0\n.", "persistent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        main.n = 0;
        puts_(&main, bad[i].pickle);
        legacy(&file, &main, 4, 4);
        expect(bad[i].label, file.b, file.n, 0, bad[i].needle);
    }
}

static void test_containers(void) {
    char path[700];
    size_t n;
    snprintf(path, sizeof path, "%s/views.pth", pth_dir);
    unsigned char *b = read_all(path, &n);
    unsigned char *m = malloc(n);
    /* the zip directory entry of data.pkl says deflate */
    memcpy(m, b, n);
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(m + i, "PK\x01\x02", 4)) {
            m[i + 10] = 8;
            break;
        }
    expect("deflated_zip", m, n, 0, "compressed");
    /* a local header offset past the end */
    memcpy(m, b, n);
    for (size_t i = 0; i + 46 <= n; i++)
        if (!memcmp(m + i, "PK\x01\x02", 4)) {
            m[i + 45] = 0x7f;
            break;
        }
    expect("zip_offset_lies", m, n, 0, "local header");
    free(m);
    static unsigned char tar[1024];
    memcpy(tar, "sys_info", 8);
    memcpy(tar + 257, "ustar", 5);
    expect("old_tar", tar, sizeof tar, 0, "tar");
    expect("not_torch", (const unsigned char *)"hello world, not a checkpoint", 29, 0, "not a torch.save");
    free(b);
    static const char *const refused[][2] = {
        {"torchscript.pt", "TorchScript"}, {"complex.pth", "ComplexFloatStorage"}, {"bigendian.pth", "big-endian"}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", pth_dir, refused[i][0]);
        b = read_all(path, &n);
        expect(refused[i][0], b, n, 0, refused[i][1]);
        free(b);
    }
}

/* Every prefix of a real file must be refused cleanly; random flips must not crash. */
static void test_truncations_and_flips(const char *file) {
    char path[700];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", pth_dir, file);
    unsigned char *b = read_all(path, &n);
    int accepted = 0, saved = capture_begin();
    for (size_t len = 0; len < n; len++) {
        sf_st_file f;
        if (sf_pth_open_mem(&f, b, len, "trunc", NULL) == 0) accepted++;
        sf_st_close(&f);
    }
    unsigned char *m = malloc(n);
    sf_rng rng;
    sf_rng_seed(&rng, 14);
    int flips_ok = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, b, n);
        int k = 1 + (int)sf_rng_below(&rng, 4);
        for (int j = 0; j < k; j++) m[sf_rng_below(&rng, (uint32_t)n)] ^= (unsigned char)(1 + sf_rng_below(&rng, 255));
        sf_st_file f;
        if (sf_pth_open_mem(&f, m, n, "flip", NULL) == 0) {
            flips_ok++;
            for (int i = 0; i < f.n_entries; i++)
                CHECK(f.entries[i].data + (f.entries[i].end - f.entries[i].begin) <= f.buf + f.size, "flip: bounds");
        }
        sf_st_close(&f);
    }
    capture_end(saved);
    CHECK(accepted == 0, "%s: %d truncated copies accepted", file, accepted);
    printf("  %-38s %zu truncations refused; 3000 flips: %d still load, none crash\n", file, n, flips_ok);
    free(m);
    free(b);
}

int main(void) {
    const char *data = getenv("SFVIT_TEST_DATA");
    if (!data) data = "tests";
    snprintf(pth_dir, sizeof pth_dir, "%s/golden/pth", data);
    snprintf(models_dir, sizeof models_dir, "%s/golden/models", data);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sfvit_test_pth_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpdir);

    printf("real files (torch.save, %s):\n", pth_dir);
    test_views("views.pth");
    test_views("views.legacy.pth");
    test_selection();
    test_model_file("vit_mixed_msa_sima", "vit_mixed_msa_sima.deit_train.pth", "official DeiT (= timm)", 0);
    test_model_file("vit_sima_l1_avgpool_gray", "vit_sima_l1_avgpool_gray.legacy.pth", "official DeiT (= timm)", 0);
    test_model_file("xcit_xca_nolpi_p16", "xcit_xca_nolpi_p16.timm.pth", "timm XCiT", 0);
    test_model_file("xcit_sima_l2_nolpi", "xcit_sima_l2_nolpi.official_ddp.pth", "official SimA (XCiT)", 1);
    test_model_file("soft", "soft.official.pth", "official SOFT", 0);
    test_layout_refusals();
    test_missing_batch_counters("xcit_xca_lpi", NULL);
    test_missing_batch_counters("soft", NULL);
    test_missing_batch_counters("xcit_xca_lpi", "xcit_xca_lpi.no_counters.pth");
    test_missing_batch_counters("soft", "soft.no_counters.pth");
    printf("hostile input:\n");
    test_crafted();
    test_containers();
    test_truncations_and_flips("views.pth");
    test_truncations_and_flips("views.legacy.pth");

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_pth");
}
