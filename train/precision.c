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
    char dnnl[256];
    sf_dnnl_describe(dnnl, sizeof dnnl);
    const sf_gemm_backend b = sf_gemm_backend_get();
    snprintf(buf, size, "fp32 products: %s (SFVIT_GEMM=%s); %s",
             b == SF_GEMM_ONEDNN ? "oneDNN f32 matmul" : "OpenBLAS sgemm", sf_gemm_backend_name(b), dnnl);
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
        char k[512];
        sf_kernels_describe(k, sizeof k);
        static const char *const what[] = {
            "fp32 products",
            "bf16 operands, fp32 accumulation (oneDNN)",
            "EMULATED bf16: operands rounded to bf16, products by OpenBLAS in fp32 (a reference, not faster)",
        };
        printf("precision: %s (%s)\nkernels: %s\n", sf_precision_name((sf_precision)p), what[p], k);
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
