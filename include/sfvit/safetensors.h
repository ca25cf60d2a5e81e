/* safetensors.h — reading and writing safetensors files (docs/checkpoints.md).
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the raw little-endian tensor bytes; offsets are relative to the end of the header.
 *
 * The reader loads the whole file with one read after checking its size and validates
 * everything before handing out a single pointer: header length, JSON, every field, dtype
 * x shape = byte count (with overflow checks), offsets inside the data and neither
 * overlapping nor leaving gaps, and the per-tensor CRC32 when the metadata carries one
 * ("crc32": a JSON-encoded object {"name": "8 hex digits"}). A bad file is reported once,
 * naming the file and the problem, and sf_st_open returns -1.
 *
 * The writer collects tensors and metadata and writes atomically: "<path>.tmp.<pid>",
 * fsync, rename, fsync of the directory. It always adds the crc32 metadata entry.
 *
 * Deliberately not here: memory mapping, lazy loading, big-endian hosts.
 */
#ifndef SFVIT_SAFETENSORS_H
#define SFVIT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum sf_dtype {
    SF_DTYPE_F32 = 0,
    SF_DTYPE_F64,
    SF_DTYPE_F16,
    SF_DTYPE_BF16,
    SF_DTYPE_I64,
    SF_DTYPE_I32,
    SF_DTYPE_I16,
    SF_DTYPE_I8,
    SF_DTYPE_U8,
    SF_DTYPE_BOOL,
    SF_DTYPE_COUNT
} sf_dtype;

#define SF_ST_MAX_DIMS 8
#define SF_ST_MAX_HEADER ((uint64_t)100 << 20) /* larger headers are rejected as absurd */

/* "F32" etc., and the bytes of one element (0 for an unknown dtype). */
const char *sf_dtype_name(sf_dtype dt);
size_t sf_dtype_size(sf_dtype dt);

typedef struct sf_st_entry {
    char *name;
    sf_dtype dtype;
    int ndim;
    int64_t shape[SF_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;      /* byte offsets relative to the data start */
    const unsigned char *data; /* points into the file buffer (may be unaligned) */
} sf_st_entry;

typedef struct sf_st_meta {
    char *key, *value;
} sf_st_meta;

typedef struct sf_st_file {
    char *path;
    unsigned char *buf;       /* the whole file */
    size_t size;
    sf_st_entry *entries;     /* header order */
    int n_entries;
    sf_st_meta *meta;         /* __metadata__ in header order */
    int n_meta;
    int crc_checked;          /* 1 if the file carried crc32 and every tensor matched */
} sf_st_file;

/* Reads and validates path. On any problem prints one error naming the file and returns
 * -1 (f is left empty; sf_st_close is still safe). */
int sf_st_open(sf_st_file *f, const char *path);
/* Same checks on a buffer already in memory (copied); `name` is used in messages. */
int sf_st_open_mem(sf_st_file *f, const void *data, size_t size, const char *name);
void sf_st_close(sf_st_file *f);

const sf_st_entry *sf_st_find(const sf_st_file *f, const char *name);
/* NULL if the key is absent. */
const char *sf_st_meta_get(const sf_st_file *f, const char *key);

/* Whether entry e converts to float (F32, F64, F16, BF16, I64, I32). */
int sf_st_is_floatable(const sf_st_entry *e);
/* Copies e into out (n = e->numel floats) converting to float32. Returns -1 with a
 * message naming the tensor for a dtype that is not floatable or a wrong n. */
int sf_st_read_f32(const sf_st_file *f, const sf_st_entry *e, float *out, size_t n);
/* Copies an integer tensor (I64, I32, I16, I8, U8, BOOL) into out as int64. */
int sf_st_read_i64(const sf_st_file *f, const sf_st_entry *e, int64_t *out, size_t n);
/* "[2, 197, 384]" into buf. */
const char *sf_st_shape_str(const sf_st_entry *e, char *buf, size_t n);

/* ---- writer ---- */
typedef struct sf_st_wtensor {
    char *name;
    sf_dtype dtype;
    int ndim;
    int64_t shape[SF_ST_MAX_DIMS];
    const void *data;         /* borrowed unless owned */
    size_t bytes;
    int owned;
} sf_st_wtensor;

typedef struct sf_st_writer {
    sf_st_wtensor *t;
    int n, cap;
    sf_st_meta *meta;
    int n_meta, cap_meta;
} sf_st_writer;

void sf_st_writer_init(sf_st_writer *w);
/* Adds a tensor; data (numel * dtype size bytes) must stay valid until write. Returns -1
 * (with a message) for a duplicate or empty name, the reserved name "__metadata__", or a
 * bad shape. */
int sf_st_writer_add(sf_st_writer *w, const char *name, sf_dtype dtype, int ndim,
                     const int64_t *shape, const void *data);
/* Same, but the writer keeps its own copy of the data. */
int sf_st_writer_add_copy(sf_st_writer *w, const char *name, sf_dtype dtype, int ndim,
                          const int64_t *shape, const void *data);
/* Sets (or replaces) a metadata string; the key "crc32" is reserved for the writer. */
int sf_st_writer_set_meta(sf_st_writer *w, const char *key, const char *value);
/* Writes atomically; on failure prints an error naming the path and the system error,
 * removes the temporary file, leaves any existing file untouched and returns -1. */
int sf_st_writer_write(sf_st_writer *w, const char *path);
void sf_st_writer_free(sf_st_writer *w);

#endif
