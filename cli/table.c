/* table.c — the table of subcommands: name, function, usage (what `sfvit CMD --help`
 * prints; its first line is the summary of `sfvit --help`) and the options that cli_parse
 * (args.c) reads. A new subcommand is a row here and a file cli/<command>.c. */
#include <string.h>

#include "cli.h"

/* Every command with its usage: `sfvit --help` lists the first lines, `sfvit CMD --help` (or
 * `sfvit help CMD`) prints the command's whole text. After the usage: whether key=value
 * arguments are config overrides, how many positional arguments it takes (-1: any), and its
 * flags with the name of their value (NULL: a switch). */
const cli_command cli_commands[] = {
    {"train", sf_cmd_train,
     "train CONFIG.yaml [key=value ...]     train (or: train --resume RUN_DIR [key=value ...])\n"
     "    Writes <train.out>/<train.name>/: config.yaml, log.jsonl, metrics.csv, last.safetensors,\n"
     "    best.safetensors (and ema.safetensors with train.ema_decay > 0).\n"
     "    --resume RUN_DIR continues the run from its last.safetensors with its config.yaml;\n"
     "    overrides apply on top (e.g. train.epochs=400). Keys: docs/configs.md.\n"
     "    Exit status: 0 done, 1 bad config/data/checkpoint or nothing to do, 3 NaN/Inf stop.\n", 1, 1, {{"--resume", "RUN_DIR"}}},
    {"eval", sf_cmd_eval,
     "eval CKPT --data DIR                  evaluate a checkpoint (top-1, top-5)\n"
     "    [--config FILE.yaml] [--split val] [key=value ...]; the config defaults to the one\n"
     "    stored in the checkpoint. Overrides change the evaluated model, e.g. model.nr_iters=1\n"
     "    (SOFT) or model.img_size=64 (another test resolution; a ViT pos_embed is resized).\n"
     "    [--save-preds preds.csv] one row per image in the dataset's order (class folders, then\n"
     "    files, by name): index,path,label,pred,prob,correct,top5.\n"
     "    [--json result.json] {top1, top5, images, loss, checkpoint, split}.\n", 1, 1,
     {{"--data", "DIR"}, {"--config", "FILE.yaml"}, {"--split", "NAME"}, {"--save-preds", "FILE.csv"}, {"--json", "FILE.json"}}},
    {"info", sf_cmd_info,
     "info MODEL|CONFIG [key=value ...]     params, MACs, exp() counts, block table\n"
     "    With a model name, bare keys are model keys: `sfvit info deit_small attn=sima`.\n", 0, -1, {{NULL, NULL}}},
    {"config", sf_cmd_config,
     "config CONFIG.yaml [key=value ...]    print the resolved config as YAML\n"
     "    config --keys: every key as the markdown table of docs/configs.md.\n", 1, 1, {{"--keys", NULL}}},
    {"ablate", sf_cmd_ablate,
     "ablate BASE.yaml key=a,b [...] [--seeds N]   a grid of variants x seeds, ablation.md/.csv\n"
     "    Each key=a,b[,c] is an axis; key=value fixes a key for every variant; BASE1.yaml,BASE2.yaml\n"
     "    is an axis of configs. --seeds N trains each variant with train.seed + 0..N-1 (one config\n"
     "    without an axis is a grid of one variant, config=<name>, when N > 1). Cells run\n"
     "    round by round; the same command again continues an interrupted study (finished cells\n"
     "    are not re-run). Tables: ablation.md, ablation.csv (mean ± std and the 95 % interval of\n"
     "    the mean over seeds), runs.csv.\n", 1, 1, {{"--seeds", "N"}}},
    {"compare", sf_cmd_compare,
     "compare BASE_DIR OTHER_DIR... [--margin M]   variants vs a base, paired by seed, with verdicts\n"
     "    Each DIR is a variant folder of `sfvit ablate` (<grid>/<variant>/, holding seed<S>/). Reads\n"
     "    the number --metric KEY (final_top1) of --file NAME (result.json) in every seed folder, e.g.\n"
     "    --file test.json --metric top1. Only seeds with a value in both folders pair (the count is\n"
     "    shown). Per OTHER: differences other - base per seed, their mean, its 95 % Student-t\n"
     "    interval, wins/ties/losses, and a verdict with the equivalence margin --margin M (0.5):\n"
     "      better / worse          the interval lies above / below 0\n"
     "      ..., within margin      added when it also lies inside ±M (real but smaller than M)\n"
     "      equivalent              the interval contains 0 and lies inside ±M\n"
     "      inconclusive            the interval contains 0 and reaches past ±M\n"
     "      too few pairs           fewer than 2 pairs\n"
     "    Diverged seeds (status not ok, null/NaN value) and missing files are counted and named.\n"
     "    Prints a markdown table; -o OUT.md writes it, -o OUT.csv writes one CSV row per OTHER.\n"
     "    --base-file BASE_NAME --file NAME: two evaluations of the same runs, paired by seed. The base\n"
     "    is the first DIR's BASE_NAME files and every DIR, the first included, is a variant read from\n"
     "    NAME, e.g. `compare RUNS --base-file saliency_init.json --file saliency.json --metric auc_q`.\n",
     0, -1,
     {{"--metric", "KEY"}, {"--file", "NAME"}, {"--base-file", "BASE_NAME"}, {"--margin", "M"},
      {"-o", "OUT.md|OUT.csv"}}},
    {"plot", sf_cmd_plot,
     "plot DIR... -o curves.png             loss and top-1 per epoch of runs or variants (PNG)\n"
     "    A DIR holding seed<S>/ runs is a variant: the mean over its seeds and a band from their\n"
     "    min to max (val); seeds that diverged are left out and named in the legend.\n"
     "  plot ABLATION_DIR -o dots.png         an ablation's variants: the mean as a dot, its 95 % t\n"
     "    interval and a mark per seed, on an axis spanning the values; --bars: bars from 0.\n"
     "  plot --dots VARIANT_DIR... -o dots.png   the same chart for variant folders of any grids.\n"
     "  plot SWEEP.csv -o scaling.png         a bench --token-sweep: log-log time and memory vs N\n"
     "    --metric KEY (final_top1) of --file NAME (result.json) in each seed folder, for the charts.\n"
     "  plot --series PATTERN --x LIST VARIANT_DIR... -o out.png   one evaluation over a setting: PATTERN\n"
     "    names each x's file with {x} (nr_iters_{x}.json), LIST the x values (1,2,3,5,10); per folder\n"
     "    the mean of --metric (top1) over seeds, its 95 % interval as a band, a mark per seed;\n"
     "    --logx: x on a log scale; --xlabel TEXT.\n", 0, 64,
     {{"-o", "OUT.png"}, {"--bars", NULL}, {"--dots", NULL}, {"--metric", "KEY"}, {"--file", "NAME"},
      {"--series", "PATTERN"}, {"--x", "LIST"}, {"--logx", NULL}, {"--xlabel", "TEXT"}}},
    {"bench", sf_cmd_bench,
     "bench CONFIG [key=value ...]          time training and inference steps\n"
     "    [--steps N] [--warmup N] [--no-infer]\n"
     "    [--no-products]: every product kernel skipped (the values meaningless): what the rest of a\n"
     "    step costs, and what its products would add at the sgemm and bf16 rates measured here.\n"
     "    [--alternate KEY=VALUE]: the run as configured (A) and with KEY=VALUE (B), training steps\n"
     "    timed in pairs AB, BA, ... in this process; the median ratio B / A with its 95 % interval.\n"
     "    KEY: train.precision, train.bf16_products, model.sima_order, SFVIT_PACK_WEIGHTS,\n"
     "    SFVIT_BF16_SMALL_MACS, SFVIT_GEMM (auto | onednn), SFVIT_CONV_BANDS (0 | 1). --steps N\n"
     "    pairs (6 or more for the interval).\n"
     "  bench --token-sweep [-o sweep.csv]    time and memory vs token count N per attention kind\n"
     "    [--kinds LIST] [--tokens MIN:MAX] [--dh D] [--heads H] [key=value ...]: a one-block model per\n"
     "    kind and N (two per octave, default 64:8192), batch 1, inference forward and training step\n"
     "    (with AdamW); kinds msa, sima_qk_first, sima_kv_first, sima_auto, xca, soft (m = 49\n"
     "    fixed landmarks; default all);\n"
     "    D_h default 64, heads 2.\n"
     "    [--steps N] [--min-time S] reps per point: the median of >= N (3) and >= S seconds (0.3);\n"
     "    [--warmup N] (1); [--mem-cap GIB] points estimated above it (8) are written as skipped.\n"
     "    CSV kind,N,phase,ms,peak_bytes,macs,status,...; prints the log-log slopes. sfvit plot draws it.\n",
     1, 1, {{"--steps", "N"}, {"--warmup", "N"}, {"--no-infer", NULL}, {"--no-products", NULL}, {"--token-sweep", NULL}, {"-o", "OUT.csv"},
            {"--kinds", "LIST"}, {"--tokens", "MIN:MAX"}, {"--dh", "D"}, {"--heads", "H"}, {"--mem-cap", "GIB"},
            {"--min-time", "S"}, {"--alternate", "KEY=VALUE"}}},
    {"dump", sf_cmd_dump,
     "dump CONFIG --weights W --input IN --out OUT   one forward+backward, for golden checks\n", 1, 1, {{"--weights", "W"}, {"--input", "IN"}, {"--out", "OUT"}}},
    {"predict", sf_cmd_predict,
     "predict CKPT IMAGE|DIR... [--topk K]  top-K classes of images, with names and probabilities\n"
     "    [--json] one JSON object per image; [--config FILE.yaml] for a checkpoint without one.\n"
     "    Uses the checkpoint's eval transform (img_size, crop_pct, interpolation, mean/std).\n", 0, -1, {{"--topk", "K"}, {"--json", NULL}, {"--config", "FILE.yaml"}}},
    {"export", sf_cmd_export,
     "export CKPT -o model.onnx             the model as ONNX (opset 17, dynamic batch)\n"
     "    DeiT/ViT, XCiT, CvT (any of their attention kinds), SOFT/SOFT++; prints node counts incl.\n"
     "    Exp/Softmax/Erf/Tanh/Sigmoid.\n"
     "    [--config FILE.yaml] for a checkpoint without one.\n", 0, 1, {{"-o", "OUT.onnx"}, {"--config", "FILE.yaml"}}},
    {"viz", sf_cmd_viz,
     "viz CKPT IMAGE -o heat.png            SimA token-norm heatmap\n"
     "    [--config FILE.yaml]\n"
     "  viz CKPT --score DIR [--split val]     how well the token norms mark the foreground (pixels > 0)\n"
     "    per image of a split: ROC AUC of Q-hat/K-hat norms for tokens >= 50% foreground, Spearman\n"
     "    with the foreground fraction; all-foreground/all-background images skipped and counted.\n"
     "    [--json F.json] the averages; [--per-image F.csv] one row per image with its token lists;\n"
     "    [--random-init] the same model freshly initialized (the untrained baseline).\n", 0, 2,
     {{"-o", "OUT.png"}, {"--config", "FILE.yaml"}, {"--score", "DIR"}, {"--split", "NAME"}, {"--json", "F.json"},
      {"--per-image", "F.csv"}, {"--random-init", NULL}}},
    {"convert", sf_cmd_convert,
     "convert IN.pth -o OUT.safetensors [--model NAME]   a torch.save file to safetensors\n"
     "    [--model NAME|CONFIG.yaml [key=value ...]] loads it strictly into that model and stores\n"
     "    the config; [--key K] [--ema] choose the dict of a training checkpoint.\n", 1, 1, {{"-o", "OUT.safetensors"}, {"--model", "NAME|CONFIG.yaml"}, {"--key", "K"}, {"--ema", NULL}}},
    {"data", sf_cmd_data,
     "data import-idx IMAGES.gz LABELS.gz OUT/split [--classes names.txt] [--range FIRST:END]\n"
     "    --range: only records FIRST..END-1 (0-based; FIRST: to the end), each named by its index\n"
     "    in the whole file, e.g. train 0:50000 and val 50000: of one file.\n"
     "  data check ROOT                       counts per class, sizes, bad files\n"
     "  data check-image FILE                 decode one image\n", 0, -1, {{"--classes", "FILE"}, {"--range", "FIRST:END"}}},
};
const int cli_n_commands = sizeof cli_commands / sizeof cli_commands[0];

const cli_command *cli_find(const char *name) {
    for (int i = 0; i < cli_n_commands; i++)
        if (!strcmp(cli_commands[i].name, name)) return &cli_commands[i];
    return NULL;
}
