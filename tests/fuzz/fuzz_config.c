/* fuzz_config.c — the YAML config loader (sf_config_load) on arbitrary bytes, written to a file
 * in a scratch folder that also holds copies of the .yaml files in configs, so `base:` chains to
 * the real configs resolve. A first line "#= key=value" is also applied as a command-line
 * override. Invariants for every config that loads and validates: it prints, and what
 * sf_config_write writes loads back to the same settings (the resume path reads that file).
 * Inputs that name device or proc files are skipped: `base: /dev/stdin` would block, which is
 * a property of the file named, not of the parser.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sfvit/config.h"
#include "sfvit/core.h"
#include "fuzz_util.h"

#ifndef SFVIT_FUZZ_CONFIG_DIR
#define SFVIT_FUZZ_CONFIG_DIR "configs"
#endif

static char path_in[512], path_out[512];
static FILE *devnull;

static void copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb");
    if (!a) return;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, a);
    fclose(a);
    fuzz_write(dst, buf, n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *d = fuzz_scratch("config");
    snprintf(path_in, sizeof path_in, "%s/fuzz.yaml", d);
    snprintf(path_out, sizeof path_out, "%s/written.yaml", d);
    DIR *dir = opendir(SFVIT_FUZZ_CONFIG_DIR);
    if (dir) {
        struct dirent *de;
        while ((de = readdir(dir))) {
            size_t L = strlen(de->d_name);
            if (L < 6 || strcmp(de->d_name + L - 5, ".yaml") != 0) continue;
            char src[1024], dst[1024];
            snprintf(src, sizeof src, "%s/%s", SFVIT_FUZZ_CONFIG_DIR, de->d_name);
            snprintf(dst, sizeof dst, "%s/%s", d, de->d_name);
            copy_file(src, dst);
        }
        closedir(dir);
    }
    devnull = fopen("/dev/null", "w");
    return 0;
}

static int mentions_special_files(const uint8_t *data, size_t size) {
    static const char *const words[] = {"dev", "proc", "sys", "fd/"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (memmem(data, size, words[w], strlen(words[w]))) return 1;
    /* An escaped path in a quoted base: could spell them too. */
    return memmem(data, size, "base", 4) && memchr(data, '\\', size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (mentions_special_files(data, size)) return 0;
    fuzz_write(path_in, data, size);
    char ov[256];
    char *ovs[1] = {ov};
    int n_ov = 0;
    if (size > 3 && memcmp(data, "#= ", 3) == 0) {
        size_t L = 0;
        while (3 + L < size && L < sizeof ov - 1 && data[3 + L] != '\n' && data[3 + L] != 0) L++;
        memcpy(ov, data + 3, L);
        ov[L] = 0;
        n_ov = 1;
    }
    sf_config cfg;
    if (sf_config_load(&cfg, path_in, n_ov, ovs) != 0) return 0;
    if (sf_config_validate(&cfg) != 0) return 0;
    sf_config_print(&cfg, devnull);
    FUZZ_CHECK(sf_config_write(&cfg, path_out) == 0, "cannot write the resolved config");
    sf_config back;
    FUZZ_CHECK(sf_config_load(&back, path_out, 0, NULL) == 0, "the written config does not load");
    if (sf_config_diff(&cfg, &back, NULL) != 0) {
        sf_config_diff(&cfg, &back, stderr);
        FUZZ_CHECK(0, "the written config loads to different settings");
    }
    FUZZ_CHECK(sf_config_validate(&back) == 0, "the written config does not validate");
    return 0;
}
