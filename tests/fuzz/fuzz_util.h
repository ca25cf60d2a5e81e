/* fuzz_util.h — helpers shared by the libFuzzer targets: a private scratch folder in
 * /dev/shm (removed at exit), writing a buffer to a file there, and emptying a folder.
 * Deliberately not here: anything that touches the code under test.
 */
#ifndef SFVIT_FUZZ_UTIL_H
#define SFVIT_FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[256];

static inline int fuzz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p) != 0 ? 0 : 0; /* best effort: keep walking */
}

/* Removes path and everything under it. */
static inline void fuzz_rm_rf(const char *path) { nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static inline void fuzz_cleanup(void) {
    if (fuzz_dir[0]) fuzz_rm_rf(fuzz_dir);
}

/* Creates /dev/shm/sfvit-fuzz-<name>-<pid> (or under $TMPDIR if /dev/shm is missing). */
static inline const char *fuzz_scratch(const char *name) {
    if (fuzz_dir[0]) return fuzz_dir;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/sfvit-fuzz-%s-%ld", base, name, (long)getpid());
    fuzz_rm_rf(fuzz_dir);
    if (mkdir(fuzz_dir, 0700) != 0) {
        perror(fuzz_dir);
        abort();
    }
    atexit(fuzz_cleanup);
    return fuzz_dir;
}

static inline void fuzz_write(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            perror(path);
            abort();
        }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* An invariant of the code under test failed: report and crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond, ...)                                                     \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__,     \
                    __LINE__, #cond);                                             \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            abort();                                                              \
        }                                                                         \
    } while (0)

#endif
