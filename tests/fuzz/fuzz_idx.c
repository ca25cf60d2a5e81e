/* fuzz_idx.c — the IDX importer (sf_data_import_idx) on arbitrary gzip or plain bytes.
 * Input layout: byte 0 flags (bit 0: pass the Fashion-MNIST class names file), bytes 1-2 the
 * labels file length L (little-endian, clamped to what is left), then L bytes of the labels
 * file, then the images file. Both are written to a scratch folder; the output folder is
 * removed after every run. Headers claiming more than 64 images or sides over 256 are skipped
 * (checked here by reading the header through zlib as the importer does) so one input writes
 * at most 64 small PNGs; the importer's own limits are exercised up to that size.
 * Invariant: after a successful import OUT exists and OUT.partial does not; after a failed one
 * OUT does not exist (the import is atomic as a whole).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "sfvit/data.h"
#include "fuzz_util.h"

#define MAX_IMAGES 64
#define MAX_SIDE 256

static char p_img[512], p_lab[512], p_names[512], p_out[512], p_partial[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *d = fuzz_scratch("idx");
    snprintf(p_img, sizeof p_img, "%s/images", d);
    snprintf(p_lab, sizeof p_lab, "%s/labels", d);
    snprintf(p_names, sizeof p_names, "%s/names.txt", d);
    snprintf(p_out, sizeof p_out, "%s/out/train", d);
    snprintf(p_partial, sizeof p_partial, "%s/out/train.partial", d);
    static const char names[] = "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\nBag\nAnkle boot\n";
    fuzz_write(p_names, names, sizeof names - 1);
    char out_parent[512];
    snprintf(out_parent, sizeof out_parent, "%s/out", d);
    mkdir(out_parent, 0700);
    return 0;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Whether the images header (as gzread sees it) stays within the per-input budget. */
static int images_small(void) {
    gzFile f = gzopen(p_img, "rb");
    if (!f) return 0;
    uint8_t h[16];
    int n = gzread(f, h, sizeof h);
    gzclose(f);
    if (n < 8) return 1; /* too short: the importer rejects it without allocating */
    if (be32(h + 4) > MAX_IMAGES) return 0;
    if (n < 16) return 1;
    return be32(h + 8) <= MAX_SIDE && be32(h + 12) <= MAX_SIDE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int with_names = data[0] & 1, with_range = data[0] & 2;
    size_t L = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (L > size) L = size;
    fuzz_write(p_lab, data, L);
    fuzz_write(p_img, data + L, size - L);
    if (!images_small()) return 0;
    /* bit 1: a range from record 1 to the end (an error for a one-record file) */
    int rc = sf_data_import_idx(p_img, p_lab, p_out, with_names ? p_names : NULL, with_range ? 1 : 0, -1);
    struct stat st;
    if (rc == 0) {
        FUZZ_CHECK(stat(p_out, &st) == 0 && S_ISDIR(st.st_mode), "import succeeded without OUT");
        FUZZ_CHECK(stat(p_partial, &st) != 0, "import succeeded but left OUT.partial");
    } else {
        FUZZ_CHECK(stat(p_out, &st) != 0, "failed import left OUT");
    }
    fuzz_rm_rf(p_out);
    fuzz_rm_rf(p_partial);
    return 0;
}
