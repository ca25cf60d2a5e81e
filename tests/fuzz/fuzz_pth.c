/* fuzz_pth.c — the torch.save reader on arbitrary bytes (sf_pth_open_mem, zip and legacy
 * stream alike), then, for every file it accepts: each tensor inside the file's buffer and
 * readable as float32 / int64 as its dtype allows, the key-layout renaming (names.h) against a
 * small XCiT-shaped parameter store (timm q/k/v merging included), and a strict and a
 * non-strict sf_checkpoint_load of the same bytes from a file, as every command does.
 * Deliberately not here: the model code (the parameter store is built by hand).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "sfvit/core.h"
#include "fuzz_util.h"

static char path_in[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(path_in, sizeof path_in, "%s/in.pth", fuzz_scratch("pth"));
    return 0;
}

/* Names of the seed corpus and of both XCiT layouts. */
static void small_store(sf_params *ps) {
    sf_params_init(ps);
    const int s62[2] = {6, 2}, s6[1] = {6}, s2[2] = {2, 1}, s1[1] = {1}, s23[2] = {2, 3};
    sf_param_add(ps, "cls_attn_blocks.0.attn.qkv.weight", 2, s62, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "cls_attn_blocks.0.attn.qkv.bias", 1, s6, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "pos_embeder.token_projection.weight", 2, s2, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "weights.transposed", 2, s23, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "bn.num_batches_tracked", 1, s1, SF_PARAM_I64, SF_INIT_ZEROS, 0);
    sf_params_alloc(ps);
}

static void check_entries(const sf_st_file *f) {
    for (int i = 0; i < f->n_entries; i++) {
        const sf_st_entry *e = &f->entries[i];
        FUZZ_CHECK(e->end - e->begin == e->numel * sf_dtype_size(e->dtype), "'%s' size", e->name);
        FUZZ_CHECK(e->data >= f->buf && e->data + (e->end - e->begin) <= f->buf + f->size, "'%s' out of the buffer",
                   e->name);
        size_t n = (size_t)e->numel;
        float *fv = malloc((n ? n : 1) * sizeof(float));     // (numel)
        int64_t *iv = malloc((n ? n : 1) * sizeof(int64_t)); // (numel)
        FUZZ_CHECK((sf_st_read_f32(f, e, fv, n) == 0) == (sf_st_is_floatable(e) != 0), "'%s' read_f32", e->name);
        (void)sf_st_read_i64(f, e, iv, n);
        free(fv);
        free(iv);
    }
}

static void load_variants(void) {
    const sf_ckpt_opts variants[] = {{.strict = 1, .quiet = 1}, {.strict = 0, .quiet = 1}};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        sf_params ps;
        small_store(&ps);
        sf_ckpt_report r;
        int rc = sf_checkpoint_load(path_in, &ps, &variants[v], &r);
        if (rc == 0) FUZZ_CHECK(r.n_loaded <= ps.count, "loaded %d of %d", r.n_loaded, ps.count);
        if (rc == 0 && variants[v].strict) FUZZ_CHECK(r.n_missing == 0 && r.n_mismatch == 0, "strict with problems");
        sf_ckpt_report_free(&r);
        sf_params_free(&ps);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sf_st_file f;
    if (sf_pth_open_mem(&f, data, size, "fuzz", NULL) != 0) {
        FUZZ_CHECK(f.n_entries == 0 && f.buf == NULL, "failed open left state behind");
        sf_st_close(&f);
        return 0;
    }
    check_entries(&f);
    sf_params ps;
    small_store(&ps);
    sf_layout_report rep;
    if (sf_names_adapt(&f, &ps, &rep) == 0) check_entries(&f);
    FUZZ_CHECK(rep.n_fit >= 0 && rep.n_fit <= f.n_entries + 3 * rep.n_merged, "fit %d", rep.n_fit);
    sf_params_free(&ps);
    sf_st_close(&f);
    fuzz_write(path_in, data, size);
    load_variants();
    return 0;
}
