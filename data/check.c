/* check.c — `sfvit data check ROOT`: decodes every image of every split folder of ROOT and
 * reports images per class, the most common image sizes, channel counts and every bad file.
 * Returns 0 when all splits index and decode cleanly, 1 otherwise (bad files, empty class
 * folders, no split). Decoding runs in parallel (OpenMP) since it reads the whole dataset.
 * Deliberately not checked: duplicate images, label noise.
 */
#include "sfvit/data.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct size_count {
    uint64_t key; /* w << 32 | h */
    int n;
} size_count;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_count_desc(const void *a, const void *b) {
    const size_count *x = a, *y = b;
    if (x->n != y->n) return y->n - x->n;
    return x->key < y->key ? -1 : x->key > y->key;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int check_split(const char *root, const char *split, FILE *out) {
    sf_dataset ds;
    if (sf_dataset_open(&ds, root, split) != 0) {
        fprintf(out, "split %s: cannot be indexed (see the error above)\n", split);
        return 1;
    }
    int n = ds.count;
    uint64_t *keys = sf_malloc(sizeof(uint64_t) * n); // (n) w << 32 | h, or UINT64_MAX if bad
    uint8_t *chans = sf_malloc(n);
    char (*errs)[160] = sf_calloc((size_t)n, sizeof(*errs));
#pragma omp parallel
    {
        uint8_t *buf = NULL;
        size_t cap = 0;
#pragma omp for schedule(dynamic, 16)
        for (int i = 0; i < n; i++) {
            size_t len = 0;
            sf_image img;
            int rc = sf_read_file(ds.paths[i], &buf, &cap, &len, errs[i], sizeof(errs[i]));
            if (rc == 0) rc = sf_image_decode(buf, len, 0, &img, errs[i], sizeof(errs[i]));
            if (rc == 0) {
                keys[i] = (uint64_t)img.w << 32 | (uint32_t)img.h;
                chans[i] = (uint8_t)img.c;
                sf_image_free(&img);
            } else {
                keys[i] = UINT64_MAX;
                chans[i] = 0;
            }
        }
        free(buf);
    }
    int bad = 0, gray = 0, rgb = 0;
    for (int i = 0; i < n; i++) {
        bad += keys[i] == UINT64_MAX;
        gray += chans[i] == 1;
        rgb += chans[i] == 3;
    }
    fprintf(out, "split %s: %d images, %d classes, %d gray, %d RGB, %d bad\n", split, n,
            ds.num_classes, gray, rgb, bad);
    int lo = 0;
    for (int k = 0; k < ds.num_classes; k++) {
        int hi = lo;
        while (hi < n && ds.labels[hi] == k) hi++;
        fprintf(out, "  class %4d %-32s %8d images\n", k, ds.class_names[k], hi - lo);
        lo = hi;
    }
    /* size histogram: sort the keys and count runs */
    uint64_t *sorted = sf_malloc(sizeof(uint64_t) * n);
    memcpy(sorted, keys, sizeof(uint64_t) * n);
    qsort(sorted, n, sizeof(uint64_t), cmp_u64);
    size_count *hist = sf_malloc(sizeof(size_count) * (n + 1));
    int nh = 0;
    for (int i = 0; i < n && sorted[i] != UINT64_MAX;) {
        int j = i;
        while (j < n && sorted[j] == sorted[i]) j++;
        hist[nh++] = (size_count){sorted[i], j - i};
        i = j;
    }
    qsort(hist, nh, sizeof(size_count), cmp_count_desc);
    fprintf(out, "  %d distinct sizes; most common (w x h):\n", nh);
    for (int i = 0; i < nh && i < 10; i++)
        fprintf(out, "    %5u x %-5u %8d\n", (unsigned)(hist[i].key >> 32),
                (unsigned)(hist[i].key & 0xffffffffu), hist[i].n);
    if (bad) {
        fprintf(out, "  bad files:\n");
        for (int i = 0; i < n; i++)
            if (keys[i] == UINT64_MAX) fprintf(out, "    %s: %s\n", ds.paths[i], errs[i]);
    }
    free(hist);
    free(sorted);
    free(errs);
    free(chans);
    free(keys);
    sf_dataset_free(&ds);
    return bad ? 1 : 0;
}

int sf_data_check(const char *root, FILE *out) {
    DIR *d = opendir(root);
    if (!d) {
        sf_error("dataset folder %s: %s", root, strerror(errno));
        return 1;
    }
    char **splits = NULL;
    int ns = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[SF_PATH_MAX * 2];
        snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        splits = sf_realloc(splits, sizeof(char *) * (ns + 1));
        splits[ns++] = sf_strdup(e->d_name);
    }
    closedir(d);
    if (ns == 0) {
        sf_error("dataset folder %s has no split folders", root);
        sf_hint("expected %s/<split>/<class>/<image>.{png,jpg,jpeg}, e.g. split = train, val", root);
        free(splits);
        return 1;
    }
    qsort(splits, ns, sizeof(char *), cmp_str);
    int status = 0;
    for (int i = 0; i < ns; i++) {
        status |= check_split(root, splits[i], out);
        free(splits[i]);
    }
    free(splits);
    fprintf(out, "%s\n", status ? "check: problems found (see above)" : "check: all images decode");
    return status;
}
