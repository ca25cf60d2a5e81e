/* core.h — errors, checked allocation, seeded RNG, thread setting.
 *
 * Two kinds of errors (docs/architecture.md, "Errors"): programmer errors abort with file:line via SF_ASSERT;
 * user errors (bad config, missing file, corrupt checkpoint) are reported with sf_error()
 * and returned as a non-zero status up to the command.
 */
#ifndef SFVIT_CORE_H
#define SFVIT_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Longest path kept in fixed buffers (configs, dataset roots, run folders). */
#define SF_PATH_MAX 1024

#define SF_ASSERT(cond, ...)                                                         \
    do {                                                                             \
        if (!(cond)) sf_assert_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);      \
    } while (0)

/* fmt may be empty (no format attribute for that reason). */
_Noreturn void sf_assert_fail(const char *file, int line, const char *cond, const char *fmt, ...);

/* Prints "sfvit: error: <message>" on stderr (one line). Returns -1 so callers can
 * `return sf_error(...)`. */
int sf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "sfvit: warning: <message>". */
void sf_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "---> HINT: <message>" after an error. */
void sf_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Checked allocation: on failure prints the size asked for and exits(2) cleanly. */
void *sf_malloc(size_t bytes);
void *sf_calloc(size_t count, size_t size);
void *sf_realloc(void *p, size_t bytes);
/* 64-byte aligned, for tensors. Free with free(). */
void *sf_aligned_alloc(size_t bytes);
char *sf_strdup(const char *s);
/* The one whole-file reader. Reads a regular file into *buf (grown with sf_realloc and kept
 * across calls, *cap bytes; NUL-terminated after the *len bytes read). Prints nothing: returns 0,
 * or an errno value with *what saying which step failed (for callers that report per file,
 * such as the data loader). */
int sf_read_file_quiet(const char *path, unsigned char **buf, size_t *cap, size_t *len,
                       const char **what);
/* The same into a fresh buffer (free() it; never NULL on success) of *size bytes; every
 * failure is one error naming the file, and -1. */
int sf_read_whole_file(const char *path, unsigned char **buf, size_t *size);
/* The same as a NUL-terminated string, or NULL without a message (a file that may be absent). */
char *sf_read_text_file(const char *path);
/* mkdir -p: creates path and its missing parents (0755). Prints nothing: -1 with errno set,
 * so each caller names the folder in its own words. */
int sf_mkdir_p(const char *path);

/* Seeded RNG: xoshiro256** with splitmix64 seeding. One generator per purpose
 * (init, data order, augmentation, drop-path); the state is plain data so it can be saved
 * in checkpoints. */
typedef struct sf_rng {
    uint64_t s[4];
} sf_rng;

void sf_rng_seed(sf_rng *r, uint64_t seed);
uint64_t sf_rng_u64(sf_rng *r);
uint32_t sf_rng_below(sf_rng *r, uint32_t n); /* uniform in [0, n) without modulo bias */
float sf_rng_uniform(sf_rng *r);              /* [0, 1) */
float sf_rng_normal(sf_rng *r);               /* N(0, 1), Box–Muller */
/* timm trunc_normal_(std, a=-2, b=2): normal(0, std^2) rejected outside +-2 absolute. */
float sf_rng_trunc_normal(sf_rng *r, float std);
/* Beta(a, a) via two gammas (Marsaglia–Tsang), for mixup/cutmix lambda. */
float sf_rng_beta(sf_rng *r, float a, float b);

/* One thread setting drives both OpenMP and OpenBLAS, so they never oversubscribe.
 * n <= 0 means: env SFVIT_THREADS if set, else the number of cores. Returns the count used. */
int sf_threads_init(int n);
/* 1 unless SFVIT_GEMM=openblas: large products split over the OpenMP team (sf_gemm,
 * src/ops/gemm.c) and OpenBLAS itself runs single-threaded; 0: OpenBLAS threads them. */
int sf_gemm_split_enabled(void);

/* The one atomic write: a file is written to "<path>.tmp.<pid>", fsynced, renamed over path
 * and its folder fsynced, so a reader (or a kill at any point) sees the old file or the whole
 * new one. In pieces: sf_atomic_open, sf_atomic_write (the first failure is kept),
 * sf_atomic_commit (reports a failure naming the step: "PATH: write of TMP failed: ...
 * (the previous file, if any, is unchanged)"), or sf_atomic_abort. Each returns 0 or -1. */
typedef struct sf_atomic_file {
    int fd, err;
    const char *stage;
    char path[SF_PATH_MAX], tmp[SF_PATH_MAX + 32];
} sf_atomic_file;
int sf_atomic_open(sf_atomic_file *a, const char *path);
int sf_atomic_write(sf_atomic_file *a, const void *data, size_t n);
int sf_atomic_commit(sf_atomic_file *a);
void sf_atomic_abort(sf_atomic_file *a);
/* Whole buffers, and text made by fill(f, arg) into a FILE. */
int sf_write_file_atomic(const char *path, const void *data, size_t n);
int sf_write_stream_atomic(const char *path, void (*fill)(FILE *, const void *), const void *arg);

/* Wall clock in seconds (monotonic). */
double sf_now(void);

/* fp32 -> bf16, round to nearest even; NaN stays a quiet NaN with its sign. Branch-free (a
 * select, not a jump) so that loops calling it vectorize. Here rather than with the bf16
 * products (src/ops/bf16.c) because AdamW writes the weights' bf16 copies too. */
static inline __attribute__((always_inline)) uint16_t sf_to_bf16(float x) {
    uint32_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    /* Add 0x7fff plus the lowest kept bit, drop the lower 16: Inf stays Inf (lower bits 0),
     * the largest finite values round up into Inf as they should. */
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x0040u; /* keeps the sign; never rounds into Inf */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/* bf16 -> fp32, exact (the bf16 bits are the upper half of the fp32's). */
static inline __attribute__((always_inline)) float sf_from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}

/* Test hook, so tests synchronize on events instead of guessing how long a step takes.
 * SFVIT_TEST_HOLD="POINT;POINT;..." arms the listed points one after another: when the
 * process reaches the armed point (the formatted string equals it), it prints
 * "sfvit test hook: held at POINT" on stderr and waits there until a signal handler calls
 * sf_test_hold_release() (SIGINT/SIGTERM in training) or the process is killed; then the
 * next point is armed. A point written "pass POINT" is only reached, not held:
 * "pass step 5;write last.safetensors" holds in the checkpoint write after update 5.
 * Points: "step N" before update N begins (trainer), "write NAME" half-way through the data
 * of an atomic write of the file NAME (before fsync and rename), "cell N" before the N-th
 * cell of an ablation (1-based). Without the variable it costs a getenv per point. */
void sf_test_hold(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Ends a hold; async-signal-safe, a no-op when nothing is held or armed. */
void sf_test_hold_release(void);

#endif
