/* precision.c — train.precision and train.precision_fallback for every command (train, eval,
 * bench, dump, ablate through train): what the machine can do, said before any work starts.
 *
 * bf16 needs native bf16 products (oneDNN on AVX512_BF16 or AMX_BF16). Without them it is an
 * error naming the missing instructions, or with train.precision_fallback: fp32 a warning and
 * fp32; never a silently slow emulation. bf16_emulated (operands rounded, OpenBLAS fp32
 * products) runs everywhere and says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/precision.h"
#include "sfvit/train.h"

void sf_kernels_describe(char *buf, size_t size) {
    char dnnl[256], gemm[256];
    sf_dnnl_describe(dnnl, sizeof dnnl);
    sf_gemm_describe(gemm, sizeof gemm);
    snprintf(buf, size, "fp32 products: %s; %s", gemm, dnnl);
}

/* bf16 pays only where its products outrun fp32's: with AMX_BF16 by several times, with
 * AVX512_BF16 alone (vdpbf16ps) by up to 2x on Zen 4/5 and Cooper Lake, and not at all on a
 * Xeon whose AMX is hidden (a virtual machine): there oneDNN's bf16 matmul ran at half its
 * f32 rate. Both rates, measured on one product of a transformer's size (about 0.1 s), and a
 * warning when bf16 is the slower. */
static void bf16_rate_report(void) {
    enum { M = 1024, N = 1024, K = 512, ROUNDS = 3 };
    /* Alternated, the best of each: a start-up transient or another process then hits both. */
    double bf16 = 0, fp32 = 0;
    for (int r = 0; r < ROUNDS; r++) {
        const double b = sf_gemm_rate(1, M, N, K), f = sf_gemm_rate(0, M, N, K);
        bf16 = b > bf16 ? b : bf16;
        fp32 = f > fp32 ? f : fp32;
    }
    sf_dnnl_cache_reset(); /* the probe's primitives are not the model's */
    printf("products measured here (%d x %d x %d): bf16 %.0f GFLOP/s, fp32 %.0f GFLOP/s\n", M, N, K, bf16, fp32);
    if ((long)(bf16 + 0.5) < (long)(fp32 + 0.5)) /* as printed */
        sf_warn("bf16 products run slower than fp32 ones on this CPU (%.0f against %.0f GFLOP/s): "
                "train.precision=fp32 is faster here. bf16 is fast with AMX_BF16, and with AVX512_BF16 on "
                "Zen 4/5 and Cooper Lake",
                bf16, fp32);
}

int sf_precision_setup(sf_config *cfg, int verbose) {
    int p = sf_precision_parse(cfg->train.precision);
    if (p < 0) return sf_error("train.precision: '%s' is not one of fp32, bf16, bf16_emulated", cfg->train.precision);
    const char *why = NULL;
    if (p == SF_PREC_BF16 && !sf_dnnl_bf16_native(&why)) {
        if (strcmp(cfg->train.precision_fallback, "fp32") != 0) {
            sf_error("train.precision: bf16 needs native bf16 products (AVX512_BF16 or AMX_BF16 through oneDNN): %s",
                     why);
            sf_hint("train.precision_fallback=fp32 trains in fp32 instead; train.precision=bf16_emulated gives bf16 "
                    "numerics through slow fp32 products (a reference)");
            return -1;
        }
        sf_warn("train.precision: bf16 is not native here (%s); train.precision_fallback: fp32, so training in fp32",
                why);
        p = SF_PREC_FP32;
        snprintf(cfg->train.precision, sizeof cfg->train.precision, "fp32");
    }
    sf_precision_set((sf_precision)p);
    if (verbose) {
        char k[768];
        sf_kernels_describe(k, sizeof k);
        static const char *const what[] = {
            "fp32 products",
            "bf16 operands, fp32 accumulation (oneDNN)",
            "EMULATED bf16: operands rounded to bf16, products by OpenBLAS in fp32 (a reference, not faster)",
        };
        printf("precision: %s (%s)\nkernels: %s\n", sf_precision_name((sf_precision)p), what[p], k);
        if (p == SF_PREC_BF16) bf16_rate_report();
        fflush(stdout);
    }
    return 0;
}

void sf_precision_weights_refresh(sf_params *ps) {
    if (sf_precision_get() == SF_PREC_FP32) return;
    sf_tensor **list = sf_malloc((size_t)(ps->count > 0 ? ps->count : 1) * sizeof *list);
    for (int i = 0; i < ps->count; i++) list[i] = ps->list[i].t;
    sf_bf16_weights_refresh(list, ps->count);
    free(list);
}
