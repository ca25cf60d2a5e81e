/* test_safetensors.c — the safetensors reader and writer: a round trip over every dtype,
 * then hostile files (each written here byte by byte) that must be rejected with a message
 * naming the file and the problem, never a crash or an out-of-bounds read (run under ASan),
 * then every truncation and random byte flips of a valid file.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradcheck.h"
#include "sfvit/safetensors.h"

static char tmpdir[256];

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* A raw file: 8-byte LE header length (as given, or the JSON's length if len_override is
 * ~0), header JSON, then data. */
static size_t make_raw(unsigned char *out, const char *json, uint64_t len_override, const void *data, size_t dn) {
    uint64_t hl = len_override == ~(uint64_t)0 ? strlen(json) : len_override;
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(hl >> (8 * i));
    memcpy(out + 8, json, strlen(json));
    if (dn) memcpy(out + 8 + strlen(json), data, dn);
    return 8 + strlen(json) + dn;
}

/* Writes the bytes to <tmpdir>/<label>.safetensors and expects a rejection whose message
 * names the file and contains `needle`. */
static void expect_reject_bytes(const char *label, const unsigned char *b, size_t n, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.safetensors", tmpdir, label);
    write_bytes(path, b, n);
    sf_st_file f;
    int saved = capture_begin();
    int rc = sf_st_open(&f, path);
    capture_end(saved);
    printf("  %-22s -> %s", label, errbuf[0] ? errbuf : "(no message)\n");
    CHECK(rc == -1, "%s: hostile file was accepted", label);
    CHECK(strstr(errbuf, path) != NULL, "%s: message does not name the file: %s", label, errbuf);
    CHECK(strstr(errbuf, needle) != NULL, "%s: message lacks '%s': %s", label, needle, errbuf);
    CHECK(f.entries == NULL && f.buf == NULL, "%s: rejected file left state behind", label);
    sf_st_close(&f);
}

static void expect_reject(const char *label, const char *json, const void *data, size_t dn, const char *needle) {
    unsigned char *b = malloc(strlen(json) + dn + 16);
    size_t n = make_raw(b, json, ~(uint64_t)0, data, dn);
    expect_reject_bytes(label, b, n, needle);
    free(b);
}

static void test_round_trip(void) {
    float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
    int64_t i64[4] = {0, -1, 123456789012LL, 7};
    double f64[2] = {0.1, -1e100};
    uint16_t f16[4] = {0x3C00, 0xC000, 0x3555, 0x0001};  /* 1, -2, 0.333251953125, 2^-24 */
    uint16_t bf16[2] = {0x3F80, 0xC0A0};                  /* 1, -5 */
    int32_t i32[3] = {-7, 0, 2147483647};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    uint8_t bl[2] = {1, 0};
    float scalar = 42.0f;
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s2[1] = {2}, s3[1] = {3}, s5[1] = {5}, s03[2] = {0, 3};

    sf_st_writer w;
    sf_st_writer_init(&w);
    CHECK(sf_st_writer_add(&w, "a.weight", SF_DTYPE_F32, 2, s23, f32) == 0, "add f32");
    CHECK(sf_st_writer_add(&w, "bn.num_batches_tracked", SF_DTYPE_I64, 1, s4, i64) == 0, "add i64");
    CHECK(sf_st_writer_add(&w, "f64", SF_DTYPE_F64, 1, s2, f64) == 0, "add f64");
    CHECK(sf_st_writer_add(&w, "f16", SF_DTYPE_F16, 1, s4, f16) == 0, "add f16");
    CHECK(sf_st_writer_add(&w, "bf16", SF_DTYPE_BF16, 1, s2, bf16) == 0, "add bf16");
    CHECK(sf_st_writer_add(&w, "i32", SF_DTYPE_I32, 1, s3, i32) == 0, "add i32");
    CHECK(sf_st_writer_add(&w, "u8", SF_DTYPE_U8, 1, s5, u8) == 0, "add u8");
    CHECK(sf_st_writer_add(&w, "mask", SF_DTYPE_BOOL, 1, s2, bl) == 0, "add bool");
    CHECK(sf_st_writer_add_copy(&w, "scalar", SF_DTYPE_F32, 0, NULL, &scalar) == 0, "add scalar");
    CHECK(sf_st_writer_add(&w, "empty", SF_DTYPE_F32, 2, s03, NULL) == 0, "add empty");
    int saved = capture_begin();
    int dup_rc = sf_st_writer_add(&w, "a.weight", SF_DTYPE_F32, 2, s23, f32);
    int meta_rc = sf_st_writer_set_meta(&w, "crc32", "x");
    capture_end(saved);
    CHECK(dup_rc == -1 && strstr(errbuf, "a.weight"), "duplicate name must be refused: %s", errbuf);
    CHECK(meta_rc == -1, "crc32 metadata key is reserved");
    scalar = -1.0f; /* the copy must not see this */
    CHECK(sf_st_writer_set_meta(&w, "epoch", "3") == 0, "meta");
    CHECK(sf_st_writer_set_meta(&w, "config", "model:\n  name: \"x\\\"y\"\n") == 0, "meta");
    CHECK(sf_st_writer_set_meta(&w, "epoch", "4") == 0, "meta replace");
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
    CHECK(sf_st_writer_write(&w, path) == 0, "write");
    sf_st_writer_free(&w);

    char tmpname[600];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmpname, F_OK) != 0, "temporary file left behind");

    size_t n;
    unsigned char *raw = read_all(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | raw[i];
    CHECK((8 + hl) % 8 == 0, "data section not 8-byte aligned (header %llu)", (unsigned long long)hl);
    CHECK(raw[8] == '{', "header starts with JSON");
    free(raw);

    sf_st_file f;
    CHECK(sf_st_open(&f, path) == 0, "open round trip");
    CHECK(f.n_entries == 10, "entries %d", f.n_entries);
    CHECK(f.crc_checked == 1, "crc verified");
    CHECK(sf_st_meta_get(&f, "epoch") && !strcmp(sf_st_meta_get(&f, "epoch"), "4"), "meta epoch");
    CHECK(sf_st_meta_get(&f, "config") && !strcmp(sf_st_meta_get(&f, "config"), "model:\n  name: \"x\\\"y\"\n"),
          "meta config with quotes and newlines");
    CHECK(sf_st_meta_get(&f, "nope") == NULL, "absent meta");
    CHECK(sf_st_find(&f, "nope") == NULL, "absent tensor");

    const sf_st_entry *e = sf_st_find(&f, "a.weight");
    float out[8];
    CHECK(e && e->dtype == SF_DTYPE_F32 && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3, "f32 entry");
    CHECK(e && sf_st_read_f32(&f, e, out, 6) == 0 && memcmp(out, f32, sizeof f32) == 0, "f32 bytes exact");
    e = sf_st_find(&f, "bn.num_batches_tracked");
    int64_t iv[8];
    CHECK(e && sf_st_read_i64(&f, e, iv, 4) == 0 && memcmp(iv, i64, sizeof i64) == 0, "i64 exact");
    CHECK(e && sf_st_read_f32(&f, e, out, 4) == 0 && out[1] == -1.0f && out[3] == 7.0f, "i64 -> float");
    e = sf_st_find(&f, "f64");
    CHECK(e && sf_st_read_f32(&f, e, out, 2) == 0 && out[0] == 0.1f && out[1] == -INFINITY, "f64 -> float");
    e = sf_st_find(&f, "f16");
    CHECK(e && sf_st_read_f32(&f, e, out, 4) == 0 && out[0] == 1.0f && out[1] == -2.0f &&
              out[2] == 0.333251953125f && out[3] == ldexpf(1.0f, -24), "f16 -> float: %g %g %g %g",
          out[0], out[1], out[2], out[3]);
    e = sf_st_find(&f, "bf16");
    CHECK(e && sf_st_read_f32(&f, e, out, 2) == 0 && out[0] == 1.0f && out[1] == -5.0f, "bf16 -> float");
    e = sf_st_find(&f, "i32");
    CHECK(e && sf_st_read_i64(&f, e, iv, 3) == 0 && iv[0] == -7 && iv[2] == 2147483647, "i32 -> i64");
    e = sf_st_find(&f, "u8");
    CHECK(e && sf_st_read_i64(&f, e, iv, 5) == 0 && iv[3] == 254 && iv[4] == 255, "u8 -> i64");
    saved = capture_begin();
    int r_u8 = e ? sf_st_read_f32(&f, e, out, 5) : 0;
    capture_end(saved);
    CHECK(r_u8 == -1 && strstr(errbuf, "u8") && strstr(errbuf, "U8"), "u8 as float refused: %s", errbuf);
    e = sf_st_find(&f, "mask");
    CHECK(e && e->dtype == SF_DTYPE_BOOL && sf_st_read_i64(&f, e, iv, 2) == 0 && iv[0] == 1 && iv[1] == 0, "bool");
    saved = capture_begin();
    int r_bool = e ? sf_st_read_f32(&f, e, out, 2) : 0;
    int r_n = sf_st_read_f32(&f, sf_st_find(&f, "a.weight"), out, 5);
    capture_end(saved);
    CHECK(r_bool == -1, "bool as float refused");
    CHECK(r_n == -1, "wrong element count refused");
    e = sf_st_find(&f, "scalar");
    CHECK(e && e->ndim == 0 && e->numel == 1 && sf_st_read_f32(&f, e, out, 1) == 0 && out[0] == 42.0f, "scalar copy");
    e = sf_st_find(&f, "empty");
    CHECK(e && e->numel == 0 && e->begin == e->end, "zero-size tensor");
    sf_st_close(&f);

    /* The same bytes through the in-memory entry point. */
    raw = read_all(path, &n);
    CHECK(sf_st_open_mem(&f, raw, n, "mem") == 0 && f.n_entries == 10, "open_mem");
    sf_st_close(&f);
    free(raw);
}

/* A file written by other tooling: no crc32, keys in any order, unpadded header. */
static void test_foreign_file(void) {
    float d[3] = {1, 2, 3};
    int64_t l[2] = {5, 9};
    unsigned char data[28];
    memcpy(data, l, 16);
    memcpy(data + 16, d, 12);
    const char *json = "{\"w\":{\"shape\":[3],\"dtype\":\"F32\",\"data_offsets\":[16,28]},"
                       "\"labels\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                       "\"__metadata__\":{\"format\":\"pt\"}}";
    unsigned char buf[512];
    size_t n = make_raw(buf, json, ~(uint64_t)0, data, sizeof data);
    char path[512];
    snprintf(path, sizeof path, "%s/foreign.safetensors", tmpdir);
    write_bytes(path, buf, n);
    sf_st_file f;
    CHECK(sf_st_open(&f, path) == 0, "file without crc32 loads");
    CHECK(f.crc_checked == 0, "no crc to check");
    float out[3];
    const sf_st_entry *e = sf_st_find(&f, "w");
    CHECK(e && sf_st_read_f32(&f, e, out, 3) == 0 && out[2] == 3.0f, "unaligned f32 read");
    CHECK(sf_st_meta_get(&f, "format") && !strcmp(sf_st_meta_get(&f, "format"), "pt"), "foreign meta");
    sf_st_close(&f);
}

static void test_hostile(void) {
    unsigned char b[4096] = {0};
    float z[16] = {0};
    size_t n;

    expect_reject_bytes("empty", b, 0, "shorter than");
    memset(b, 0, 5);
    expect_reject_bytes("five_bytes", b, 5, "shorter than");
    n = make_raw(b, "{}", (uint64_t)1 << 40, NULL, 0);
    expect_reject_bytes("absurd_header_len", b, n, "absurd");
    n = make_raw(b, "{\"__metadata__\":{}}", 1000, NULL, 0);
    expect_reject_bytes("header_past_end", b, n, "past the end");
    n = make_raw(b, "{}", 1, NULL, 0);
    expect_reject_bytes("header_too_short", b, n, "cannot hold");
    expect_reject("invalid_json", "{\"a\": {\"dtype\": ", NULL, 0, "not valid JSON");
    expect_reject("json_trailing", "{} {}", NULL, 0, "not valid JSON");
    expect_reject("json_array", "[1, 2]", NULL, 0, "not a JSON object");
    {
        /* Deep nesting must fail cleanly, not blow the stack. */
        char *deep = malloc(200003);
        memset(deep, '[', 200000);
        deep[200000] = 0;
        expect_reject("deep_nesting", deep, NULL, 0, "not valid JSON");
        free(deep);
    }
    {
        unsigned char nul[64];
        size_t k = make_raw(nul, "{\"a\":1}   ", ~(uint64_t)0, NULL, 0);
        nul[8 + 8] = 0;
        expect_reject_bytes("nul_in_header", nul, k, "NUL");
    }
    expect_reject("entry_not_object", "{\"a\": 5}", NULL, 0, "not a JSON object");
    expect_reject("missing_dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, "missing field \"dtype\"");
    expect_reject("missing_shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", z, 4, "missing field \"shape\"");
    expect_reject("missing_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", z, 4, "missing field \"data_offsets\"");
    expect_reject("unknown_dtype", "{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", z, 1,
                  "unknown dtype 'F8'");
    expect_reject("dtype_not_string", "{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4,
                  "not a string");
    expect_reject("shape_negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", z, 4,
                  "shape[0]");
    expect_reject("shape_fraction", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,4]}}", z, 4,
                  "shape[1]");
    expect_reject("shape_string", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", z, 4,
                  "shape[0]");
    expect_reject("shape_not_array", "{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", z, 4,
                  "not an array");
    expect_reject("shape_overflow",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", z, 4,
                  "overflows");
    expect_reject("bytes_overflow",
                  "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,4]}}", z, 4,
                  "overflows");
    expect_reject("too_many_dims",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", z, 1, "dimensions");
    expect_reject("offsets_vs_shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", z, 12,
                  "needs 16");
    expect_reject("offsets_reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", z, 8,
                  "end before begin");
    expect_reject("offsets_three", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", z, 8,
                  "data_offsets");
    expect_reject("offsets_huge",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1e300,1e300]}}", z, 4, "data_offsets");
    expect_reject("offsets_out_of_bounds", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", z, 8,
                  "past the end");
    expect_reject("offsets_overlap",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  z, 12, "overlap");
    expect_reject("offsets_gap",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                  z, 12, "unused bytes");
    expect_reject("trailing_bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 12,
                  "after the last tensor");
    expect_reject("duplicate_name",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  z, 8, "appears twice");
    expect_reject("meta_not_object", "{\"__metadata__\":[1]}", NULL, 0, "__metadata__");
    expect_reject("meta_value_not_string", "{\"__metadata__\":{\"epoch\":3}}", NULL, 0, "'epoch' is not a string");
    expect_reject("crc_not_json",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"__metadata__\":{\"crc32\":\"{oops\"}}",
                  z, 4, "crc32");
    expect_reject("crc_unknown_tensor",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"__metadata__\":{\"crc32\":\"{\\\"b\\\":\\\"00000000\\\"}\"}}",
                  z, 4, "'b'");
    expect_reject("crc_not_hex",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"__metadata__\":{\"crc32\":\"{\\\"a\\\":\\\"xyz\\\"}\"}}",
                  z, 4, "hex");
    /* crc32 of four zero bytes is 2144df1c (zlib); a listed tensor missing from the map. */
    expect_reject("crc_missing_entry",
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                  "\"__metadata__\":{\"crc32\":\"{\\\"a\\\":\\\"2144df1c\\\"}\"}}",
                  z, 8, "'b' has no entry");

    /* Corruptions of a file the writer made: a flipped data byte and a truncated tail. */
    float vals[64];
    for (int i = 0; i < 64; i++) vals[i] = (float)i * 0.5f;
    int64_t s8x8[2] = {8, 8};
    sf_st_writer w;
    sf_st_writer_init(&w);
    sf_st_writer_add(&w, "first", SF_DTYPE_F32, 2, s8x8, vals);
    sf_st_writer_add(&w, "blocks.0.attn.qkv.weight", SF_DTYPE_F32, 2, s8x8, vals);
    char path[512];
    snprintf(path, sizeof path, "%s/good.safetensors", tmpdir);
    CHECK(sf_st_writer_write(&w, path) == 0, "write good");
    sf_st_writer_free(&w);
    unsigned char *raw = read_all(path, &n);
    raw[n - 10] ^= 0x01;
    expect_reject_bytes("crc_mismatch", raw, n, "'blocks.0.attn.qkv.weight': CRC32 mismatch");
    raw[n - 10] ^= 0x01;
    expect_reject_bytes("truncated_tail", raw, n - 3, "truncated");

    /* Every truncation is rejected; random flips never crash (ASan watches the reads). */
    int saved = capture_begin();
    int accepted_trunc = 0;
    for (size_t len = 0; len < n; len++) {
        sf_st_file f;
        if (sf_st_open_mem(&f, raw, len, "trunc") == 0) accepted_trunc++;
        sf_st_close(&f);
    }
    sf_rng r;
    sf_rng_seed(&r, 7);
    unsigned char *mut = malloc(n);
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(mut, raw, n);
        int flips = 1 + (int)sf_rng_below(&r, 4);
        for (int k = 0; k < flips; k++) {
            /* Mostly the length and the header, where the parsing is. */
            size_t pos = sf_rng_below(&r, 4) ? sf_rng_below(&r, (uint32_t)(n - 512)) : sf_rng_below(&r, (uint32_t)n);
            mut[pos] = (unsigned char)sf_rng_below(&r, 256);
        }
        sf_st_file f;
        if (sf_st_open_mem(&f, mut, n, "fuzz") == 0) {
            /* Accepted: every entry must lie inside the buffer. */
            for (int i = 0; i < f.n_entries; i++) {
                const sf_st_entry *e = &f.entries[i];
                int inside = e->data >= f.buf && e->data + (e->end - e->begin) <= f.buf + f.size;
                if (!inside) rejected = -1000000;
                if (sf_st_is_floatable(e) && e->numel < 100000) {
                    float *tmp = malloc((e->numel + 1) * sizeof(float));
                    sf_st_read_f32(&f, e, tmp, e->numel);
                    free(tmp);
                }
            }
            accepted++;
        } else {
            rejected++;
        }
        sf_st_close(&f);
    }
    capture_end(saved);
    free(mut);
    free(raw);
    CHECK(accepted_trunc == 0, "%d truncated copies were accepted", accepted_trunc);
    CHECK(rejected > 0, "fuzz: an accepted entry pointed outside the file");
    printf("  fuzz: %d mutated files rejected, %d accepted (flips that keep the file valid)\n", rejected, accepted);
}

static void test_write_errors(void) {
    float v[4] = {1, 2, 3, 4};
    int64_t s[1] = {4};
    sf_st_writer w;
    sf_st_writer_init(&w);
    sf_st_writer_add(&w, "v", SF_DTYPE_F32, 1, s, v);
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", tmpdir);
    int saved = capture_begin();
    int rc = sf_st_writer_write(&w, path);
    capture_end(saved);
    printf("  write into a missing folder -> %s", errbuf);
    CHECK(rc == -1, "write into a missing folder must fail");
    CHECK(strstr(errbuf, path) && strstr(errbuf, "No such file"), "message names path and error: %s", errbuf);
    /* The target is a folder: the rename fails and the temporary file is removed. */
    snprintf(path, sizeof path, "%s/adir", tmpdir);
    mkdir(path, 0755);
    saved = capture_begin();
    rc = sf_st_writer_write(&w, path);
    capture_end(saved);
    printf("  write over a folder -> %s", errbuf);
    CHECK(rc == -1 && strstr(errbuf, "rename"), "rename over a folder must fail: %s", errbuf);
    char tmpname[600];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmpname, F_OK) != 0, "temporary file removed after a failed rename");
    sf_st_writer_free(&w);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sfvit_test_st_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpdir);
    test_round_trip();
    test_foreign_file();
    test_hostile();
    test_write_errors();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_safetensors");
}
