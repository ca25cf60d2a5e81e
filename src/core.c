/* core.c — error reporting, checked allocation, the seeded RNG and the thread setting.
 * No global state but settings read from the environment (SFVIT_GEMM, SFVIT_TEST_HOLD). */
#include "sfvit/core.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void sf_assert_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    fprintf(stderr, "sfvit: internal error at %s:%d: assertion `%s` failed", file, line, cond);
    if (fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    abort();
}

/* Messages go to stderr, which is unbuffered, while stdout is block-buffered when it is a
 * file or a pipe: stdout is flushed first, so a message lands after what was printed before
 * it (not in the middle of the settings table of a log captured with 2>&1). */
int sf_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("sfvit: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

void sf_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("sfvit: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void sf_hint(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("---> HINT: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static _Noreturn void out_of_memory(size_t bytes) {
    fprintf(stderr, "sfvit: error: out of memory: could not allocate %zu bytes (%.1f MiB)\n", bytes,
            (double)bytes / (1024.0 * 1024.0));
    fputs("---> HINT: lower train.batch_size or the image size\n", stderr);
    exit(2);
}

void *sf_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) out_of_memory(bytes);
    return p;
}

void *sf_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size);
    return p;
}

void *sf_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) out_of_memory(bytes);
    return q;
}

void *sf_aligned_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) out_of_memory(bytes);
    return p;
}

char *sf_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = sf_malloc(n);
    memcpy(d, s, n);
    return d;
}

int sf_read_file_quiet(const char *path, unsigned char **buf, size_t *cap, size_t *len,
                       const char **what) {
    *what = "cannot open";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        *what = "cannot stat";
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        *what = "not a regular file";
        return EINVAL;
    }
    /* sized by fstat, grown if the file grows while it is read; one byte more for the NUL */
    size_t want = (size_t)st.st_size + 1, n = 0;
    if (!*buf || *cap < want) {
        *cap = want > *cap ? want : *cap;
        *buf = sf_realloc(*buf, *cap);
    }
    for (;;) {
        if (n + 1 >= *cap) *buf = sf_realloc(*buf, *cap *= 2);
        ssize_t r = read(fd, *buf + n, *cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            *what = "read failed";
            return e;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    (*buf)[n] = 0;
    *len = n;
    return 0;
}

int sf_read_whole_file(const char *path, unsigned char **buf, size_t *size) {
    unsigned char *b = NULL;
    size_t cap = 0, n = 0;
    const char *what;
    int e = sf_read_file_quiet(path, &b, &cap, &n, &what);
    if (e) {
        free(b);
        if (!strcmp(what, "not a regular file")) return sf_error("%s: not a regular file", path);
        return sf_error("%s: %s: %s", path, what, strerror(e));
    }
    *buf = b;
    *size = n;
    return 0;
}

char *sf_read_text_file(const char *path) {
    unsigned char *b = NULL;
    size_t cap = 0, n = 0;
    const char *what;
    if (sf_read_file_quiet(path, &b, &cap, &n, &what) != 0) {
        free(b);
        return NULL;
    }
    return (char *)b;
}

int sf_mkdir_p(const char *path) {
    char tmp[SF_PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return errno = ENAMETOOLONG, -1;
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        if (c == 0) return 0;
        *p = c;
    }
}

/* ---- RNG: xoshiro256** (Blackman & Vigna), seeded through splitmix64 ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sf_rng_seed(sf_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sf_rng_u64(sf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t sf_rng_below(sf_rng *r, uint32_t n) {
    SF_ASSERT(n > 0);
    /* Lemire's nearly-divisionless method with rejection: exact uniformity. */
    uint64_t m = (uint64_t)(uint32_t)(sf_rng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(sf_rng_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

float sf_rng_uniform(sf_rng *r) { return (float)(sf_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

static double uniform_double(sf_rng *r) { return (double)(sf_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

float sf_rng_normal(sf_rng *r) {
    double u1 = uniform_double(r), u2 = uniform_double(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

float sf_rng_trunc_normal(sf_rng *r, float std) {
    for (;;) {
        float x = sf_rng_normal(r) * std;
        if (x >= -2.0f && x <= 2.0f) return x;
    }
}

/* Gamma(a, 1) by Marsaglia & Tsang (2000); a < 1 boosted with u^(1/a). */
static double rng_gamma(sf_rng *r, double a) {
    if (a < 1.0) {
        double u = uniform_double(r);
        return rng_gamma(r, a + 1.0) * pow(u > 1e-300 ? u : 1e-300, 1.0 / a);
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = sf_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = uniform_double(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

float sf_rng_beta(sf_rng *r, float a, float b) {
    double x = rng_gamma(r, a), y = rng_gamma(r, b);
    return (float)(x / (x + y));
}

/* ---- threads ---- */
int sf_gemm_split_enabled(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("SFVIT_GEMM");
        mode = !(e && !strcmp(e, "openblas"));
    }
    return mode;
}


int sf_threads_init(int n) {
    if (n <= 0) {
        const char *env = getenv("SFVIT_THREADS");
        if (env && *env) n = atoi(env);
    }
    if (n <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores > 0 ? (int)cores : 1;
    }
    /* Large products split over the OpenMP team themselves (src/ops/gemm.c); OpenBLAS then
     * runs single-threaded so that only one pool of threads shares the cores. */
    openblas_set_num_threads(sf_gemm_split_enabled() ? 1 : n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    return n;
}


double sf_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- test hook (core.h) ---- */
static struct {
    char *spec;        // SFVIT_TEST_HOLD, points separated by ';'
    char *armed;       // the point held next, inside spec; NULL when none is left
    int wake[2];       // pipe: the held thread reads, a signal handler writes
} g_hold = {.wake = {-1, -1}};

void sf_test_hold(const char *fmt, ...) {
    if (!g_hold.spec) {  // read until found, so a forked child can be given its own points
        const char *e = getenv("SFVIT_TEST_HOLD");
        if (!e || !*e || pipe(g_hold.wake) != 0) return;
        g_hold.armed = g_hold.spec = sf_strdup(e);
    }
    if (!g_hold.armed) return;
    char point[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(point, sizeof point, fmt, ap);
    va_end(ap);
    const char *want = g_hold.armed;
    const int pass = strncmp(want, "pass ", 5) == 0;  // reached, not held
    if (pass) want += 5;
    char *end = strchr(want, ';');
    size_t len = end ? (size_t)(end - want) : strlen(want);
    if (strlen(point) != len || strncmp(point, want, len) != 0) return;
    g_hold.armed = end ? end + 1 : NULL;
    if (pass) return;
    fprintf(stderr, "sfvit test hook: held at %s\n", point);
    fflush(stderr);
    /* A pipe, not pause(): whichever thread runs the handler, its effect (a stop flag) is in
     * place before this read returns, and a signal that arrives before the read is not lost. */
    char byte;
    while (read(g_hold.wake[0], &byte, 1) < 0 && errno == EINTR) {
    }
}

void sf_test_hold_release(void) {
    if (g_hold.wake[1] >= 0) {
        ssize_t w = write(g_hold.wake[1], "x", 1);
        (void)w;
    }
}

int sf_atomic_open(sf_atomic_file *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->fd = -1;
    if (snprintf(a->path, sizeof a->path, "%s", path) >= (int)sizeof a->path ||
        snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof a->tmp)
        return sf_error("%s: path too long", path);
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (a->fd < 0) return sf_error("%s: cannot create temporary file %s: %s", path, a->tmp, strerror(errno));
    return 0;
}

int sf_atomic_write(sf_atomic_file *a, const void *data, size_t n) {
    const char *p = data;
    while (n > 0 && !a->err) {
        ssize_t w = write(a->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            a->err = w < 0 ? errno : EIO;
            a->stage = "write";
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    return a->err ? -1 : 0;
}

void sf_atomic_abort(sf_atomic_file *a) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    unlink(a->tmp);
}

int sf_atomic_commit(sf_atomic_file *a) {
    if (!a->err && fsync(a->fd) != 0) a->err = errno, a->stage = "fsync";
    if (!a->err && close(a->fd) != 0) a->err = errno, a->stage = "close";
    else if (a->err) close(a->fd);
    a->fd = -1;
    if (!a->err && rename(a->tmp, a->path) != 0) a->err = errno, a->stage = "rename";
    if (a->err) {
        unlink(a->tmp);
        return sf_error("%s: %s of %s failed: %s (the previous file, if any, is unchanged)", a->path,
                        a->stage, a->tmp, strerror(a->err));
    }
    /* Make the rename itself durable. Some filesystems cannot fsync a directory. */
    char dir[SF_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", a->path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    if (dfd >= 0) {
        if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)
            rc = sf_error("%s: written, but fsync of directory %s failed: %s", a->path, dir, strerror(errno));
        close(dfd);
    }
    return rc;
}

int sf_write_file_atomic(const char *path, const void *data, size_t n) {
    sf_atomic_file a;
    if (sf_atomic_open(&a, path) != 0) return -1;
    sf_atomic_write(&a, data, n);
    return sf_atomic_commit(&a);
}

int sf_write_stream_atomic(const char *path, void (*fill)(FILE *, const void *), const void *arg) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return sf_error("%s: cannot write: %s", path, strerror(errno));
    fill(f, arg);
    int bad = ferror(f);
    fclose(f);
    int rc = bad ? sf_error("%s: cannot format the file's text", path) : sf_write_file_atomic(path, text, n);
    free(text);
    return rc;
}
