/* to_linear.c — an op feeding a linear layer's last use, in bf16, made the plain way (fp32
 * output, converted by the linear layer) and by its *_to_linear form (bf16 output alone), on
 * DeiT-S's shapes at batch 8: GELU -> fc2, LayerNorm -> fc1 and the head merge -> proj, and
 * as a control the LayerNorm -> fc1 pair the plain way both ways (so "saved" shows the
 * noise). Forward with the tape recording, as in training; the two forms alternate call by
 * call.
 *
 *   SFVIT_THREADS=2 build/bench/to_linear [CALLS]
 *
 * Prints the median and the smallest time of each form over CALLS calls (default 41) and
 * the difference. Native bf16 where oneDNN has it, else bf16_emulated (said in the header). */
#include <stdio.h>
#include <stdlib.h>

#include "sfvit/core.h"
#include "sfvit/ops.h"
#include "sfvit/precision.h"

/* An input of the timed ops: in `keep`, a context never reset, with N(0, 0.1²) values. */
static sf_tensor *input(sf_ctx *keep, int ndim, const int *shape, sf_rng *r) {
    sf_tensor *t = sf_tensor_new(keep, ndim, shape);
    for (size_t i = 0; i < t->numel; i++) t->data[i] = 0.1f * sf_rng_normal(r);
    t->requires_grad = 1;
    return t;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int calls = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 41;
    const int threads = sf_threads_init(0);
    const char *why = NULL;
    const sf_precision prec = sf_dnnl_bf16_native(&why) ? SF_PREC_BF16 : SF_PREC_BF16_EMULATED;
    printf("threads %d, precision %s, %d calls of each form, alternating; ms per call\n", threads,
           sf_precision_name(prec), calls);
    sf_rng r;
    sf_rng_seed(&r, 1);
    sf_ctx keep;
    sf_ctx_init(&keep, 0);
    sf_tensor *h = input(&keep, 2, (int[]){1576, 1536}, &r), *fc2 = input(&keep, 2, (int[]){384, 1536}, &r);
    sf_tensor *x = input(&keep, 2, (int[]){1576, 384}, &r), *fc1 = input(&keep, 2, (int[]){1536, 384}, &r);
    sf_tensor *ln_w = input(&keep, 1, (int[]){384}, &r), *ln_b = input(&keep, 1, (int[]){384}, &r);
    sf_tensor *bias = input(&keep, 1, (int[]){384}, &r);
    sf_tensor *o = input(&keep, 4, (int[]){8, 6, 197, 64}, &r), *proj = input(&keep, 2, (int[]){384, 384}, &r);
    sf_precision_set(prec);
    sf_tensor *weights[3] = {fc2, fc1, proj};
    sf_bf16_weights_refresh(weights, 3);
    sf_ctx g;
    sf_ctx_init(&g, (size_t)256 << 20);
    g.grad_enabled = 1;
    enum { PAIRS = 4 };
    const char *names[PAIRS] = {"GELU -> fc2 (1576x1536 -> 384)", "LayerNorm -> fc1 (1576x384 -> 1536)",
                                "heads merge -> proj ((8,6,197,64) -> 384)", "control: LayerNorm -> fc1, plain both ways"};
    double *t = sf_calloc((size_t)2 * PAIRS * calls, sizeof *t);
    printf("%-44s %18s %18s %8s\n", "op -> linear layer", "plain (med / min)", "to_linear", "saved");
    for (int pair = 0; pair < PAIRS; pair++) {
        for (int c = 0; c < calls; c++)
            for (int form = 0; form < 2; form++) {
                const double t0 = sf_now();
                if (pair == 0)
                    sf_linear_last_use(&g, form ? sf_gelu_to_linear(&g, h) : sf_gelu(&g, h), fc2, bias);
                else if (pair == 1)
                    sf_linear_last_use(&g, form ? sf_layernorm_to_linear(&g, x, ln_w, ln_b, 1e-6f)
                                                : sf_layernorm(&g, x, ln_w, ln_b, 1e-6f), fc1, NULL);
                else if (pair == 2)
                    sf_linear_last_use(&g, form ? sf_heads_merge_to_linear(&g, o) : sf_heads_merge(&g, o), proj, bias);
                else /* control: the same code both ways */
                    sf_linear_last_use(&g, sf_layernorm(&g, x, ln_w, ln_b, 1e-6f), fc1, NULL);
                t[(size_t)(2 * pair + form) * calls + c] = (sf_now() - t0) * 1e3;
                sf_ctx_reset(&g);
            }
        double med[2], min[2];
        for (int form = 0; form < 2; form++) {
            double *v = t + (size_t)(2 * pair + form) * calls;
            qsort(v, (size_t)calls, sizeof *v, cmp_double);
            med[form] = v[calls / 2];
            min[form] = v[0];
        }
        printf("%-44s %8.3f / %7.3f %8.3f / %7.3f %8.3f\n", names[pair], med[0], min[0], med[1], min[1],
               med[0] - med[1]);
    }
    free(t);
    sf_ctx_free(&g);
    sf_ctx_free(&keep);
    return 0;
}
