/* main.c — the sfvit command: dispatches to subcommands (train/commands.c and friends). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/train.h"

/* Every command with its usage: `sfvit --help` lists the first lines, `sfvit CMD --help` (or
 * `sfvit help CMD`) prints the command's whole text. */
static const struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
} commands[] = {
    {"train", sf_cmd_train,
     "train CONFIG.yaml [key=value ...]     train (or: train --resume RUN_DIR [key=value ...])\n"
     "    Writes <train.out>/<train.name>/: config.yaml, log.jsonl, metrics.csv, last.safetensors,\n"
     "    best.safetensors (and ema.safetensors with train.ema_decay > 0).\n"
     "    --resume RUN_DIR continues the run from its last.safetensors with its config.yaml;\n"
     "    overrides apply on top (e.g. train.epochs=400). Keys: docs/configs.md.\n"
     "    Exit status: 0 done, 1 bad config/data/checkpoint or nothing to do, 3 NaN/Inf stop.\n"},
    {"eval", sf_cmd_eval,
     "eval CKPT --data DIR                  evaluate a checkpoint (top-1, top-5)\n"
     "    [--config FILE.yaml] [--split val] [key=value ...]; the config defaults to the one\n"
     "    stored in the checkpoint.\n"},
    {"info", sf_cmd_info,
     "info MODEL|CONFIG [key=value ...]     params, MACs, exp() counts, block table\n"
     "    With a model name, bare keys are model keys: `sfvit info deit_small attn=sima`.\n"},
    {"config", sf_cmd_config,
     "config CONFIG.yaml [key=value ...]    print the resolved config as YAML\n"
     "    config --keys: every key as the markdown table of docs/configs.md.\n"},
    {"ablate", sf_cmd_ablate,
     "ablate BASE.yaml key=a,b [...] [--seeds N]   a grid of variants x seeds, ablation.md/.csv\n"
     "    Each key=a,b[,c] is an axis; key=value fixes a key for every variant; BASE1.yaml,BASE2.yaml\n"
     "    is an axis of configs. --seeds N trains each variant with train.seed + 0..N-1. Cells run\n"
     "    round by round; the same command again continues an interrupted study (finished cells\n"
     "    are not re-run). Tables: ablation.md, ablation.csv (mean ± std over seeds), runs.csv.\n"},
    {"plot", sf_cmd_plot,
     "plot RUN_DIR... -o curves.png         loss and top-1 per epoch of runs (PNG)\n"
     "  plot ABLATION_DIR -o bars.png         an ablation's variants, mean ± std error bars\n"},
    {"bench", sf_cmd_bench,
     "bench CONFIG [key=value ...]          time training and inference steps\n"
     "    [--steps N] [--warmup N] [--no-infer]\n"},
    {"dump", sf_cmd_dump,
     "dump CONFIG --weights W --input IN --out OUT   one forward+backward, for golden checks\n"},
    {"predict", sf_cmd_predict,
     "predict CKPT IMAGE|DIR... [--topk K]  top-K classes of images, with names and probabilities\n"
     "    [--json] one JSON object per image; [--config FILE.yaml] for a checkpoint without one.\n"
     "    Uses the checkpoint's eval transform (img_size, crop_pct, interpolation, mean/std).\n"},
    {"export", sf_cmd_export,
     "export CKPT -o model.onnx             the model as ONNX (opset 17, dynamic batch)\n"
     "    DeiT/ViT, XCiT (any attention kind), SOFT/SOFT++; prints node counts incl. Exp/Softmax/Erf/Tanh.\n"
     "    [--config FILE.yaml] for a checkpoint without one.\n"},
    {"viz", sf_cmd_viz,
     "viz CKPT IMAGE -o heat.png            SimA token-norm heatmap\n"
     "    [--config FILE.yaml]\n"},
    {"convert", sf_cmd_convert,
     "convert IN.pth -o OUT.safetensors [--model NAME]   a torch.save file to safetensors\n"
     "    [--model NAME|CONFIG.yaml [key=value ...]] loads it strictly into that model and stores\n"
     "    the config; [--key K] [--ema] choose the dict of a training checkpoint.\n"},
    {"data", sf_cmd_data,
     "data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt]\n"
     "  data check ROOT                       counts per class, sizes, bad files\n"
     "  data check-image FILE                 decode one image\n"},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *f) {
    fprintf(f, "usage: sfvit <command> ...   (sfvit <command> --help for one command)\n");
    /* The summary lines: those not indented by four spaces (the details). */
    for (int i = 0; i < N_COMMANDS; i++)
        for (const char *l = commands[i].usage, *nl; *l; l = nl + 1) {
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

int main(int argc, char **argv) {
    choose_omp_wait_policy(argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    /* `sfvit help CMD` is `sfvit CMD --help`. */
    const int help = !strcmp(argv[1], "help");
    const char *name = help ? argv[2] : argv[1];
    for (int i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, commands[i].name) != 0) continue;
        if (help || wants_help(argc - 2, argv + 2)) {
            printf("usage: sfvit %s", commands[i].usage);
            return 0;
        }
        return commands[i].fn(argc - 2, argv + 2);
    }
    sf_error("unknown command '%s'", name);
    usage(stderr);
    return 2;
}
