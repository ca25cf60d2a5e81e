/* idx.c — `sfvit data import-idx`: MNIST/Fashion-MNIST IDX files (gzip or plain, read with
 * zlib's gzread) to an ImageNet-format folder of 8-bit gray PNGs.
 *
 * Output: OUT/<class>/<index>.png, index zero-padded to the width of the count so file order
 * is sample order. Class folders: with a names file (one name per line), "<NN>_<name>" where
 * NN is the class index zero-padded to at least two digits, so the byte-order sort of the
 * folder names (which defines class ids) is the label order; characters other than
 * [A-Za-z0-9._-] in a name become '_'. Without a names file: the zero-padded class index.
 * PNGs use zlib level 1 (IDX images are small; speed matters more than size).
 * The import is atomic as a whole: files go to OUT.partial, renamed to OUT at the end, so an
 * interrupted import never leaves a half-filled OUT (per-file renames would double the
 * file-system work for 60000 small files). OUT must not exist yet.
 * A range [first, end) imports only those records, each still named by its index in the whole
 * file (zero-padded to the whole file's width), and every class folder of the whole file is
 * made: splits cut from one file (train 0:50000, val 50000:) never share a name and share
 * their class ids.
 * Deliberately not supported: IDX types other than unsigned byte, more than 3 dimensions.
 */
#include "sfvit/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>


static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads an IDX file: checks the magic and returns the dims and the data (malloc'd). */
static int read_idx(const char *path, uint32_t magic, int ndim, uint32_t *dims, uint8_t **data) {
    gzFile f = gzopen(path, "rb");
    if (!f) return sf_error("cannot open IDX file %s: %s", path, strerror(errno));
    uint8_t hdr[16];
    int hlen = 4 + 4 * ndim;
    if (gzread(f, hdr, hlen) != hlen) {
        gzclose(f);
        return sf_error("IDX file %s: too short for its header", path);
    }
    if (be32(hdr) != magic) {
        gzclose(f);
        sf_error("IDX file %s: magic 0x%08x, expected 0x%08x (%s)", path, be32(hdr), magic,
                 magic == 0x803 ? "unsigned-byte images, 3 dims" : "unsigned-byte labels, 1 dim");
        sf_hint("pass the images file first, then the labels file");
        return -1;
    }
    size_t total = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] == 0 || (i > 0 && dims[i] > 4096) || dims[i] > 100000000u) {
            gzclose(f);
            return sf_error("IDX file %s: implausible dimension %d = %u", path, i, dims[i]);
        }
        total *= dims[i];
    }
    *data = sf_malloc(total);
    size_t got = 0;
    while (got < total) {
        unsigned chunk = total - got > (1u << 30) ? (1u << 30) : (unsigned)(total - got);
        int n = gzread(f, *data + got, chunk);
        if (n <= 0) break;
        got += (size_t)n;
    }
    gzclose(f);
    if (got != total) {
        free(*data);
        return sf_error("IDX file %s: truncated (%zu of %zu data bytes)", path, got, total);
    }
    return 0;
}

int sf_data_import_idx(const char *images_gz, const char *labels_gz, const char *out_dir,
                       const char *classes_file, long first, long end) {
    double t0 = sf_now();
    uint32_t idim[3] = {0}, ldim[1] = {0}; // set by read_idx on success; zeroed for -O3 flow analysis
    uint8_t *images = NULL, *labels = NULL;
    if (read_idx(images_gz, 0x00000803, 3, idim, &images) != 0) return -1;
    if (read_idx(labels_gz, 0x00000801, 1, ldim, &labels) != 0) {
        free(images);
        return -1;
    }
    int n = (int)idim[0], rows = (int)idim[1], cols = (int)idim[2], rc = -1;
    char **names = NULL;
    int K = 0;
    if (ldim[0] != idim[0]) {
        sf_error("%s has %u images but %s has %u labels", images_gz, idim[0], labels_gz, ldim[0]);
        goto done;
    }
    if (end < 0) end = n;
    if (first < 0 || first >= end || end > n) {
        sf_error("--range %ld:%ld is outside the %d records of %s", first, end, n, images_gz);
        sf_hint("--range FIRST:END takes 0 <= FIRST < END <= %d (END exclusive; FIRST: runs to the end)", n);
        goto done;
    }
    /* class folders from the whole file's labels, so every range gets the same class ids */
    int maxl = 0;
    for (int i = 0; i < n; i++) maxl = labels[i] > maxl ? labels[i] : maxl;
    if (classes_file) {
        FILE *f = fopen(classes_file, "r");
        if (!f) {
            sf_error("cannot open class names file %s: %s", classes_file, strerror(errno));
            goto done;
        }
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            size_t L = strcspn(line, "\r\n");
            line[L] = 0;
            if (L == 0) continue;
            for (char *p = line; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
                    *p = '_';
            names = sf_realloc(names, sizeof(char *) * (K + 1));
            names[K++] = sf_strdup(line);
        }
        fclose(f);
        if (K <= maxl) {
            sf_error("class names file %s has %d names but the labels go up to %d", classes_file,
                     K, maxl);
            goto done;
        }
    } else {
        K = maxl + 1;
    }
    int cw = 1, iw = 1;
    for (int v = K - 1; v >= 10; v /= 10) cw++;
    for (int v = n - 1; v >= 10; v /= 10) iw++;
    if (names && cw < 2) cw = 2;
    cw = cw > 10 ? 10 : cw; /* bounded for the format-length check */
    iw = iw > 10 ? 10 : iw;
    struct stat st;
    if (stat(out_dir, &st) == 0) {
        sf_error("%s already exists", out_dir);
        sf_hint("remove it first (rm -r %s) to import again", out_dir);
        goto done;
    }
    char partial[SF_PATH_MAX + 16];
    snprintf(partial, sizeof(partial), "%s.partial", out_dir);
    if (stat(partial, &st) == 0) {
        sf_error("%s exists (an interrupted import)", partial);
        sf_hint("remove it first (rm -r %s)", partial);
        goto done;
    }
    char (*folder)[SF_PATH_MAX + 64] = sf_malloc(sizeof(*folder) * K);
    for (int k = 0; k < K; k++) {
        if (names)
            snprintf(folder[k], SF_PATH_MAX + 64, "%s/%0*d_%s", partial, cw, k, names[k]);
        else
            snprintf(folder[k], SF_PATH_MAX + 64, "%s/%0*d", partial, cw, k);
        if (sf_mkdir_p(folder[k]) != 0) {
            sf_error("cannot create folder %s: %s", folder[k], strerror(errno));
            free(folder);
            goto done;
        }
    }
    int *per_class = sf_calloc((size_t)K, sizeof(int));
    for (long i = first; i < end; i++) per_class[labels[i]]++;
    for (int k = 0; k < K; k++)
        if (!per_class[k])
            sf_warn("%s: class %d has no image in records %ld:%ld; its folder stays empty (a dataset needs "
                    "an image in every class folder)", out_dir, k, first, end);
    free(per_class);
    int failed = 0;
    size_t plane = (size_t)rows * cols;
#pragma omp parallel for schedule(dynamic, 256) reduction(+ : failed)
    for (int i = (int)first; i < (int)end; i++) {
        char path[SF_PATH_MAX + 96];
        snprintf(path, sizeof(path), "%s/%0*d.png", folder[labels[i]], iw, i);
        sf_image img = {.w = cols, .h = rows, .c = 1, .px = images + (size_t)i * plane};
        uint8_t *png;
        size_t len;
        if (sf_image_encode_png(&img, 1, &png, &len) != 0) {
            failed++;
            continue;
        }
        if (sf_write_file(path, png, len) != 0) failed++;
        free(png);
    }
    free(folder);
    if (failed) {
        sf_error("%d of %ld images could not be written to %s", failed, end - first, partial);
        goto done;
    }
    if (rename(partial, out_dir) != 0) {
        sf_error("cannot rename %s to %s: %s", partial, out_dir, strerror(errno));
        goto done;
    }
    printf("wrote %ld images (%dx%d gray PNG, records %ld:%ld of %d) in %d classes to %s in %.2f s\n", end - first,
           cols, rows, first, end, n, K, out_dir, sf_now() - t0);
    rc = 0;
done:
    for (int k = 0; names && k < K; k++) free(names[k]);
    free(names);
    free(images);
    free(labels);
    return rc;
}
