/* main.c — the sfvit command: `sfvit --help` and the dispatch to a subcommand of the table
 * (cli/table.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "sfvit/precision.h"


static void usage(FILE *f) {
    fprintf(f, "usage: sfvit <command> ...   (sfvit <command> --help for one command)\n");
    /* The summary lines: those not indented by four spaces (the details). */
    for (int i = 0; i < cli_n_commands; i++)
        for (const char *l = cli_commands[i].usage, *nl; *l; l = nl + 1) {
            nl = strchr(l, '\n');
            if (strncmp(l, "    ", 4) != 0) fprintf(f, "  %.*s\n", (int)(nl - l - strspn(l, " ")), l + strspn(l, " "));
        }
    fprintf(f, "Threads: train.threads or SFVIT_THREADS (default: all cores) for OpenMP and OpenBLAS.\n");
}

static int wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

/* OMP_WAIT_POLICY. By default OpenBLAS runs single-threaded inside OpenMP regions
 * (src/ops/gemm.c), so the runtime's default (spin briefly, then sleep) is the fastest here:
 * measured on 2 cores, the Fashion-MNIST model trains at 814 img/s with it and 552 img/s with
 * "passive", which pays a futex wake-up for every small parallel region. With
 * SFVIT_GEMM=openblas, OpenBLAS's own pthreads share the cores with the OpenMP team, and
 * OpenMP threads spinning after a region steal them from the next GEMM; only then, and only
 * when the user has not chosen a policy, sfvit sets "passive" and re-executes once (the
 * runtime reads the variable at start-up). A user's own setting is always kept. */
static void choose_omp_wait_policy(char **argv) {
    const char *gemm = getenv("SFVIT_GEMM");
    if (!gemm || strcmp(gemm, "openblas") || getenv("OMP_WAIT_POLICY") || getenv("SFVIT_NO_REEXEC"))
        return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("SFVIT_NO_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the default policy. */
}

/* SFVIT_GEMM is read by the ops layer when the first product runs, where a bad value can
 * only be warned about; the command refuses it before doing anything. */
static int check_gemm_env(void) {
    const char *e = getenv("SFVIT_GEMM");
    if (!e || !*e || !strcmp(e, "auto") || !strcmp(e, "openblas") || !strcmp(e, "onednn")) return 0;
    sf_error("SFVIT_GEMM=%s: expected auto, openblas or onednn (or unset)", e);
    return -1;
}

static int check_pack_env(void) {
    const char *e = getenv("SFVIT_PACK_WEIGHTS");
    if (sf_bf16_pack_weights_parse(e) >= 0) return 0;
    sf_error("SFVIT_PACK_WEIGHTS=%s: expected 1 (pack, the default) or 0 (read bf16 copies), or unset", e);
    return -1;
}

static int check_small_env(void) {
    const char *e = getenv("SFVIT_BF16_SMALL_MACS");
    if (sf_bf16_small_macs_parse(e) >= 0) return 0;
    sf_error("SFVIT_BF16_SMALL_MACS=%s: expected a number of multiply-adds (0: every bf16 product on oneDNN), or unset", e);
    return -1;
}

static int check_bands_env(void) {
    const char *e = getenv("SFVIT_CONV_BANDS");
    if (sf_conv2d_bands_parse(e) >= 0) return 0;
    sf_error("SFVIT_CONV_BANDS=%s: expected 1 (large im2col columns in bands, the default) or 0 (whole), or unset", e);
    return -1;
}

int main(int argc, char **argv) {
    if (check_gemm_env() != 0 || check_pack_env() != 0 || check_small_env() != 0 || check_bands_env() != 0) return 2;
    choose_omp_wait_policy(argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    /* `sfvit help CMD` is `sfvit CMD --help`. */
    const int help = !strcmp(argv[1], "help");
    const char *name = help ? argv[2] : argv[1];
    for (int i = 0; i < cli_n_commands; i++) {
        if (strcmp(name, cli_commands[i].name) != 0) continue;
        if (help || wants_help(argc - 2, argv + 2)) {
            printf("usage: sfvit %s", cli_commands[i].usage);
            return 0;
        }
        return cli_commands[i].fn(argc - 2, argv + 2);
    }
    sf_error("unknown command '%s'", name);
    usage(stderr);
    return 2;
}
