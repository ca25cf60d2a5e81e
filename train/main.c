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
            "  ablate BASE.yaml key=a,b [...] [--seeds N]   a grid of variants x seeds, ablation.md/csv\n"
            "  plot RUN_DIR... -o curves.png         loss and top-1 per epoch of runs (PNG)\n"
            "  plot ABLATION_DIR -o bars.png         an ablation's variants with error bars (PNG)\n"
            "  bench CONFIG [key=value ...]          time training and inference steps\n"
            "  dump CONFIG --weights W --input IN --out OUT   one forward+backward, for golden checks\n"
            "  viz CKPT IMAGE -o heat.png            SimA token-norm heatmap\n"
            "  convert IN.pth -o OUT.safetensors [--model NAME]   a torch.save file to safetensors\n"
            "  data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt]\n"
            "  data check ROOT\n"
            "Threads: train.threads or SFVIT_THREADS (default: all cores) for OpenMP and OpenBLAS.\n");
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

int main(int argc, char **argv) {
    choose_omp_wait_policy(argv);
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
        {"plot", sf_cmd_plot}, {"convert", sf_cmd_convert},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 2, argv + 2);
    sf_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
