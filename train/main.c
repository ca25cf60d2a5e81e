/* main.c — the sfvit command: dispatches to subcommands (train/commands.c and friends). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/train.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sfvit <command> ...\n"
            "  train CONFIG.yaml [key=value ...]     train (or: train --resume RUN_DIR)\n"
            "  eval CKPT --data DIR                  evaluate a checkpoint (top-1, top-5)\n"
            "  info MODEL|CONFIG [key=value ...]     params, MACs, exp() counts, block table\n"
            "  ablate BASE.yaml key=a,b [...]        run a grid of variants, write ablation.md\n"
            "  bench CONFIG [key=value ...]          time training and inference steps\n"
            "  dump CONFIG --weights W --input IN --out OUT   one forward+backward, for golden checks\n"
            "  viz CKPT IMAGE -o heat.png            SimA token-norm heatmap\n"
            "  data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt]\n"
            "  data check ROOT\n"
            "Threads: train.threads or SFVIT_THREADS (default: all cores) for OpenMP and OpenBLAS.\n");
}

/* OpenMP threads that spin after a parallel region steal the cores OpenBLAS's own threads
 * need for the next GEMM (measured: a 17x slowdown of the op tests on 2 busy cores). The
 * runtime reads OMP_WAIT_POLICY only at start-up, so when the user has not chosen one we
 * choose "passive" and re-execute once. A user's own setting is always kept. */
static void ensure_passive_omp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("SFVIT_NO_REEXEC")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("SFVIT_NO_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the default policy. */
}

int main(int argc, char **argv) {
    ensure_passive_omp_wait(argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"train", sf_cmd_train}, {"eval", sf_cmd_eval}, {"info", sf_cmd_info},   {"ablate", sf_cmd_ablate},
        {"bench", sf_cmd_bench}, {"dump", sf_cmd_dump}, {"viz", sf_cmd_viz},     {"data", sf_cmd_data},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 2, argv + 2);
    sf_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
