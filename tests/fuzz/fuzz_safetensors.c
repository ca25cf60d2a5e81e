/* fuzz_safetensors.c — the safetensors reader on arbitrary bytes (sf_st_open_mem), then, for
 * every file it accepts: reading each tensor as float32 and as int64, the lookups a checkpoint
 * load does (by name, the optimizer-moment names, the metadata keys of a run), a strict and a
 * non-strict sf_checkpoint_load into a small parameter store, and a writer round trip (the
 * accepted tensors and metadata written back with sf_st_writer and read again must give the
 * same names, shapes and bytes).
 * Deliberately not here: the model code (the parameter store is built by hand).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sfvit/checkpoint.h"
#include "sfvit/core.h"
#include "fuzz_util.h"

static char path_in[512], path_rt[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *d = fuzz_scratch("st");
    snprintf(path_in, sizeof path_in, "%s/in.safetensors", d);
    snprintf(path_rt, sizeof path_rt, "%s/rt.safetensors", d);
    return 0;
}

/* A store shaped like a tiny model: names the seed corpus files use. */
static void small_store(sf_params *ps) {
    sf_params_init(ps);
    const int s23[2] = {2, 3}, s3[1] = {3}, s1[1] = {1};
    sf_param_add(ps, "w", 2, s23, SF_PARAM_TRAINABLE | SF_PARAM_DECAY, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "b", 1, s3, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "head.weight", 2, s23, SF_PARAM_TRAINABLE | SF_PARAM_DECAY, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "bn.num_batches_tracked", 1, s1, SF_PARAM_I64, SF_INIT_ZEROS, 0);
    sf_params_alloc(ps);
}

/* crc_checked promises that every tensor's CRC was compared: each must be named in crc32. */
static void check_crc_coverage(const sf_st_file *f) {
    if (!f->crc_checked) return;
    cJSON *m = cJSON_Parse(sf_st_meta_get(f, "crc32"));
    FUZZ_CHECK(m, "crc_checked without a parsable crc32");
    for (int i = 0; i < f->n_entries; i++)
        FUZZ_CHECK(cJSON_GetObjectItemCaseSensitive(m, f->entries[i].name),
                   "crc_checked but tensor '%s' has no CRC entry", f->entries[i].name);
    cJSON_Delete(m);
}

static void checkpoint_loads(void) {
    static const char *const skip[] = {"head."};
    const sf_ckpt_opts variants[] = {
        {.strict = 1, .load_optim = 1, .quiet = 1},
        {.strict = 0, .load_optim = 0, .skip_prefixes = skip, .n_skip = 1, .quiet = 1},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        sf_params ps;
        small_store(&ps);
        sf_ckpt_report r;
        int rc = sf_checkpoint_load(path_in, &ps, &variants[v], &r);
        if (rc == 0) FUZZ_CHECK(r.n_loaded <= ps.count, "loaded %d of %d", r.n_loaded, ps.count);
        if (rc == 0 && variants[v].strict)
            FUZZ_CHECK(r.n_missing == 0 && r.n_unexpected == 0 && r.n_mismatch == 0,
                       "strict load succeeded with problems");
        (void)sf_ckpt_meta_get(&r, "epoch");
        sf_ckpt_report_free(&r);
        sf_params_free(&ps);
    }
}

static void writer_round_trip(const sf_st_file *f) {
    sf_st_writer w;
    sf_st_writer_init(&w);
    int ok = 1;
    for (int i = 0; i < f->n_entries && ok; i++) {
        const sf_st_entry *e = &f->entries[i];
        ok = sf_st_writer_add(&w, e->name, e->dtype, e->ndim, e->shape, e->data) == 0;
    }
    for (int i = 0; i < f->n_meta && ok; i++)
        if (strcmp(f->meta[i].key, "crc32") != 0)
            ok = sf_st_writer_set_meta(&w, f->meta[i].key, f->meta[i].value) == 0;
    /* Names the writer refuses (e.g. "") are the reader's leniency, not a round-trip failure. */
    if (ok) {
        FUZZ_CHECK(sf_st_writer_write(&w, path_rt) == 0, "write of an accepted file failed");
        sf_st_file g;
        FUZZ_CHECK(sf_st_open(&g, path_rt) == 0, "written file does not read back");
        FUZZ_CHECK(g.n_entries == f->n_entries, "%d entries, wrote %d", g.n_entries, f->n_entries);
        FUZZ_CHECK(g.crc_checked, "written file has no crc32");
        for (int i = 0; i < f->n_entries; i++) {
            const sf_st_entry *a = &f->entries[i], *b = sf_st_find(&g, a->name);
            FUZZ_CHECK(b, "tensor '%s' lost in the round trip", a->name);
            FUZZ_CHECK(b->dtype == a->dtype && b->ndim == a->ndim, "'%s' dtype/ndim changed", a->name);
            for (int d = 0; d < a->ndim; d++) FUZZ_CHECK(a->shape[d] == b->shape[d], "'%s' shape", a->name);
            FUZZ_CHECK(b->end - b->begin == a->end - a->begin &&
                           memcmp(a->data, b->data, a->end - a->begin) == 0,
                       "'%s' bytes changed", a->name);
        }
        for (int i = 0; i < f->n_meta; i++) {
            if (strcmp(f->meta[i].key, "crc32") == 0) continue;
            const char *v = sf_st_meta_get(&g, f->meta[i].key);
            FUZZ_CHECK(v && strcmp(v, f->meta[i].value) == 0, "metadata '%s' changed", f->meta[i].key);
        }
        sf_st_close(&g);
    }
    sf_st_writer_free(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sf_st_file f;
    if (sf_st_open_mem(&f, data, size, "fuzz") != 0) {
        FUZZ_CHECK(f.n_entries == 0 && f.buf == NULL, "failed open left state behind");
        sf_st_close(&f);
        return 0;
    }
    check_crc_coverage(&f);
    char shape[256];
    for (int i = 0; i < f.n_entries; i++) {
        const sf_st_entry *e = &f.entries[i];
        FUZZ_CHECK(sf_st_find(&f, e->name) == e, "find('%s') is another entry", e->name);
        FUZZ_CHECK(e->data >= f.buf && e->data + (e->end - e->begin) <= f.buf + f.size, "'%s' out of the buffer",
                   e->name);
        sf_st_shape_str(e, shape, sizeof shape);
        size_t n = (size_t)e->numel;
        float *fv = malloc((n ? n : 1) * sizeof(float));     // (numel)
        int64_t *iv = malloc((n ? n : 1) * sizeof(int64_t)); // (numel)
        int rf = sf_st_read_f32(&f, e, fv, n), ri = sf_st_read_i64(&f, e, iv, n);
        FUZZ_CHECK((rf == 0) == (sf_st_is_floatable(e) != 0), "'%s' read_f32 %d", e->name, rf);
        (void)ri;
        FUZZ_CHECK(sf_st_read_f32(&f, e, fv, n + 1) != 0, "wrong element count accepted");
        free(fv);
        free(iv);
        /* The lookups a resume does. */
        char key[512];
        snprintf(key, sizeof key, SF_CKPT_OPTIM_M "%s", e->name);
        (void)sf_st_find(&f, key);
        snprintf(key, sizeof key, SF_CKPT_OPTIM_V "%s", e->name);
        (void)sf_st_find(&f, key);
    }
    static const char *const meta_keys[] = {"format", "config", "epoch", "step_in_epoch",
                                            "global_step", "best_top1", "rng_drop", "crc32"};
    for (size_t i = 0; i < sizeof meta_keys / sizeof meta_keys[0]; i++) (void)sf_st_meta_get(&f, meta_keys[i]);
    fuzz_write(path_in, data, size);
    checkpoint_loads();
    writer_round_trip(&f);
    sf_st_close(&f);
    return 0;
}
