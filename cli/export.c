/* export.c — `sfvit export CKPT -o model.onnx`: the checkpoint's model as an ONNX graph
 * (models/onnx.c), then its node counts, with the exp-type nodes (Exp, Softmax, Erf, Tanh,
 * Sigmoid) counted apart: a SimA model keeps none of the softmax kind. */
#include <stdlib.h>
#include <string.h>

#include "sfvit/checkpoint.h"
#include "cli.h"

int sf_cmd_export(int argc, char **argv) {
    cli_args args;
    if (cli_parse("export", argc, argv, &args)) return 2;
    const char *ckpt = args.n_pos ? args.pos[0] : NULL, *out = cli_get(&args, "export", "-o"),
               *config_path = cli_get(&args, "export", "--config");
    cli_args_free(&args);
    if (!ckpt || !out) {
        sf_error("export: give a checkpoint and -o OUT.onnx");
        sf_hint("usage: sfvit export CKPT.safetensors -o model.onnx [--config FILE.yaml]");
        return 2;
    }
    sf_config cfg;
    if (sf_checkpoint_config(ckpt, config_path, &cfg) != 0 || sf_config_validate(&cfg) != 0) return 1;
    sf_params ps;
    sf_params_init(&ps);
    int status = 1;
    sf_onnx_stats st;
    sf_model *m = sf_model_build(&cfg.model, &ps);
    if (!m) goto done;
    sf_params_alloc(&ps);
    if (sf_checkpoint_load(ckpt, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) != 0) goto done;
    if (sf_model_export_onnx(&cfg.model, &ps, out, &st) != 0) goto done;
    printf("wrote %s: opset 17, %d nodes, %d initializers, %.1f MB; input images (batch, %d, %d, %d), output logits "
           "(batch, %d)\n",
           out, st.nodes, st.initializers, st.bytes / 1e6, cfg.model.in_chans, cfg.model.img_size,
           cfg.model.img_size, cfg.model.num_classes);
    printf("nodes by op:");
    for (int i = 0; i < st.n_op_types; i++) printf(" %s %d%s", st.op_types[i], st.op_counts[i], i + 1 < st.n_op_types ? "," : "");
    printf("\nexp-type nodes: Exp %d, Softmax %d, Erf %d, Tanh %d, Sigmoid %d\n", sf_onnx_stats_count(&st, "Exp"),
           sf_onnx_stats_count(&st, "Softmax"), sf_onnx_stats_count(&st, "Erf"), sf_onnx_stats_count(&st, "Tanh"),
           sf_onnx_stats_count(&st, "Sigmoid"));
    status = 0;
done:
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    return status;
}
