/* dataset.c — the index of an ImageNet-format folder: ROOT/<split>/<class>/<image>.
 *
 * Class ids are the class folder names sorted in byte order (strcmp), as torchvision
 * ImageFolder; images are sorted by name within a class. One opendir/readdir pass per folder;
 * d_type decides file vs folder, stat() is called only when the file system reports
 * DT_UNKNOWN (or a symlink that might be a folder), so indexing 1.28M files costs no per-file
 * system call. Extensions .png .jpg .jpeg (any case). Other files are ignored, hidden entries
 * (".name") too. Deliberately not checked here: whether the files decode (the loader skips
 * bad ones; `sfvit data check` lists them).
 */
#include "sfvit/data.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sf_image_has_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    return !strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg");
}

/* 1 if the entry is a directory (following symlinks), using d_type when it is known. */
static int entry_is_dir(const char *dir, const struct dirent *e) {
    if (e->d_type == DT_DIR) return 1;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) return 0;
    char p[SF_PATH_MAX * 4];
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int entry_is_file(const char *dir, const struct dirent *e) {
    if (e->d_type == DT_REG || e->d_type == DT_LNK) return 1; /* a broken link fails at decode */
    if (e->d_type != DT_UNKNOWN) return 0;
    char p[SF_PATH_MAX * 4];
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A growable list of strings stored back to back in one block (offsets, since the block moves). */
typedef struct strlist {
    char *buf;
    size_t len, cap;
    size_t *off;
    int n, ncap;
} strlist;

static void strlist_push(strlist *l, const char *a, const char *b, const char *c) {
    size_t need = strlen(a) + strlen(b) + strlen(c) + 1;
    if (l->len + need > l->cap) {
        l->cap = (l->cap ? l->cap * 2 : 1 << 16) + need;
        l->buf = sf_realloc(l->buf, l->cap);
    }
    if (l->n == l->ncap) {
        l->ncap = l->ncap ? l->ncap * 2 : 1024;
        l->off = sf_realloc(l->off, sizeof(size_t) * l->ncap);
    }
    l->off[l->n++] = l->len;
    l->len += (size_t)sprintf(l->buf + l->len, "%s%s%s", a, b, c) + 1;
}

int sf_dataset_open(sf_dataset *ds, const char *root, const char *split) {
    memset(ds, 0, sizeof(*ds));
    snprintf(ds->root, sizeof(ds->root), "%s", root);
    snprintf(ds->split, sizeof(ds->split), "%s", split);
    char dir[SF_PATH_MAX * 2];
    snprintf(dir, sizeof(dir), "%s/%s", root, split);
    DIR *d = opendir(dir);
    if (!d) {
        sf_error("dataset split folder %s: %s", dir, strerror(errno));
        sf_hint("expected the layout %s/%s/<class>/<image>.{png,jpg,jpeg}", root, split);
        return -1;
    }
    int ncap = 64, nc = 0;
    char **classes = sf_malloc(sizeof(char *) * ncap);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !entry_is_dir(dir, e)) continue;
        if (nc == ncap) classes = sf_realloc(classes, sizeof(char *) * (ncap *= 2));
        classes[nc++] = sf_strdup(e->d_name);
    }
    closedir(d);
    if (nc == 0) {
        free(classes);
        sf_error("dataset split folder %s has no class folders", dir);
        sf_hint("expected the layout %s/%s/<class>/<image>.{png,jpg,jpeg}", root, split);
        return -1;
    }
    qsort(classes, nc, sizeof(char *), cmp_str);

    strlist paths = {0};
    int *class_start = sf_malloc(sizeof(int) * (nc + 1));
    char **names = NULL;
    int names_cap = 0;
    for (int k = 0; k < nc; k++) {
        char cdir[SF_PATH_MAX * 3];
        snprintf(cdir, sizeof(cdir), "%s/%s", dir, classes[k]);
        class_start[k] = paths.n;
        DIR *cd = opendir(cdir);
        if (!cd) {
            sf_error("class folder %s: %s", cdir, strerror(errno));
            goto fail;
        }
        int nn = 0;
        while ((e = readdir(cd))) {
            if (e->d_name[0] == '.' || !sf_image_has_ext(e->d_name) || !entry_is_file(cdir, e))
                continue;
            if (nn == names_cap) {
                names_cap = names_cap ? names_cap * 2 : 1024;
                names = sf_realloc(names, sizeof(char *) * names_cap);
            }
            names[nn++] = sf_strdup(e->d_name);
        }
        closedir(cd);
        if (nn == 0) {
            sf_error("class folder %s has no images (.png .jpg .jpeg)", cdir);
            sf_hint("remove the empty folder or add its images: every class folder is a class id");
            goto fail;
        }
        qsort(names, nn, sizeof(char *), cmp_str);
        for (int i = 0; i < nn; i++) {
            strlist_push(&paths, cdir, "/", names[i]);
            free(names[i]);
        }
    }
    class_start[nc] = paths.n;
    free(names);
    ds->num_classes = nc;
    ds->class_names = classes;
    ds->count = paths.n;
    ds->paths = sf_malloc(sizeof(char *) * paths.n);
    ds->labels = sf_malloc(sizeof(int) * paths.n);
    /* paths[0] is the start of the one block that holds every path (freed through it) */
    for (int i = 0; i < paths.n; i++) ds->paths[i] = paths.buf + paths.off[i];
    for (int k = 0; k < nc; k++)
        for (int i = class_start[k]; i < class_start[k + 1]; i++) ds->labels[i] = k;
    free(paths.off);
    free(class_start);
    return 0;
fail:
    free(names);
    free(paths.buf);
    free(paths.off);
    free(class_start);
    for (int k = 0; k < nc; k++) free(classes[k]);
    free(classes);
    memset(ds, 0, sizeof(*ds));
    return -1;
}

void sf_dataset_free(sf_dataset *ds) {
    if (ds->count > 0) free(ds->paths[0]);
    free(ds->paths);
    free(ds->labels);
    for (int k = 0; k < ds->num_classes; k++) free(ds->class_names[k]);
    free(ds->class_names);
    memset(ds, 0, sizeof(*ds));
}
