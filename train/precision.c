/* precision.c — train.precision and train.precision_fallback for every command (train, eval,
 * bench, dump, ablate through train): what the machine can do, said before any work starts.
 *
 * bf16 needs native bf16 products (oneDNN on AVX512_BF16 or AMX_BF16). Without them it is an
 * error naming the missing instructions, or with train.precision_fallback: fp32 a warning and
 * fp32; never a silently slow emulation. bf16_emulated (operands rounded, OpenBLAS fp32
 * products) runs everywhere and says so. */
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "sfvit/precision.h"
#include "sfvit/train.h"
#include "dist_internal.h"

void sf_kernels_describe(char *buf, size_t size) {
    char dnnl[256], gemm[256];
    sf_dnnl_describe(dnnl, sizeof dnnl);
    sf_gemm_describe(gemm, sizeof gemm);
    snprintf(buf, size, "fp32 products: %s; %s", gemm, dnnl);
}

/* bf16 pays only where its products outrun fp32's: with AMX_BF16 by several times, with
 * AVX512_BF16 alone (vdpbf16ps) by up to 2x on Zen 4/5, and not at all on a Xeon whose AMX
 * is hidden (a virtual machine): there oneDNN's bf16 matmul ran at half its f32 rate. Both
 * rates on one product of a transformer's size (a DeiT-S projection over 1024 tokens, about
 * 0.25 s in all), alternated, the best of each. On one core, timed by the thread's CPU time
 * (sf_gemm_core_rate): the kernels' ratio is a property of the core, and another process
 * on the machine takes wall time from both kernels but no CPU time from either. Timed on
 * the team by the wall clock, two busy processes made 2 of 34 runs take oneDNN's kernels on
 * the Xeon without AMX. Not a larger product: OpenBLAS keeps the pages its packing touched,
 * and 1024 x 1024 x 512 left 3 MiB more in the Fashion-MNIST model's peak than this one. */
enum { PROBE_M = 1024, PROBE_N = 384, PROBE_K = 384, PROBE_ROUNDS = 5 };

static void measure_rates(double *bf16, double *fp32) {
    *bf16 = *fp32 = 0;
    for (int r = 0; r < PROBE_ROUNDS; r++) {
        const double b = sf_gemm_core_rate(1, PROBE_M, PROBE_N, PROBE_K);
        const double f = sf_gemm_core_rate(0, PROBE_M, PROBE_N, PROBE_K);
        *bf16 = b > *bf16 ? b : *bf16;
        *fp32 = f > *fp32 ? f : *fp32;
    }
    sf_dnnl_cache_reset(); /* the probe's primitives are not the model's */
#ifdef __GLIBC__
    /* The probe's freed buffers stay in the heap (glibc raises its mmap threshold on the
     * first large free), 15 MiB of the Fashion-MNIST model's 60 for the whole run: returned. */
    malloc_trim(0);
#endif
}

/* auto takes fp32 kernels only when they win by a margin no run-to-run noise crosses, so that
 * every run on a machine takes the same kernels (and their sums): 159 against 86 GFLOP/s a
 * core on the Xeon without AMX, bf16 ahead by 2x or more with AVX512_BF16 on Zen 4/5 and
 * with AMX. */
#define FP32_PRODUCTS_MARGIN 1.25

int sf_bf16_products_choose(double bf16_rate, double fp32_rate) {
    return fp32_rate > FP32_PRODUCTS_MARGIN * bf16_rate ? SF_BF16_PRODUCTS_FP32 : SF_BF16_PRODUCTS_ONEDNN;
}

/* train.bf16_products for a bf16 run: the kernels, chosen (auto) or as given, written back
 * into cfg so that the run's config, and a resume from it, say which. Under MPI every rank
 * takes fp32 kernels only if all measured them faster (a rank that cannot run bf16 takes part
 * in the vote too, voting no). measure: also when oneDNN's kernels are given (to warn when
 * they are the slower); not when fp32 kernels are, since the probe costs memory (OpenBLAS's
 * packing pages of its product, oneDNN's data: 0.6 MiB of the Fashion-MNIST model's 50). */
static int products_chosen_by_auto;

static void bf16_products_setup(sf_config *cfg, int native, int measure, double *bf16, double *fp32) {
    const int automatic = products_chosen_by_auto = !strcmp(cfg->train.bf16_products, "auto");
    *bf16 = *fp32 = 0;
    const int given = automatic ? -1 : sf_bf16_products_parse(cfg->train.bf16_products);
    if (native && (automatic || (measure && given == SF_BF16_PRODUCTS_ONEDNN))) measure_rates(bf16, fp32);
    int k = automatic ? sf_bf16_products_choose(*bf16, *fp32) : given;
    if (automatic && !sf_dist_all_ok(native && k == SF_BF16_PRODUCTS_FP32)) k = SF_BF16_PRODUCTS_ONEDNN;
    if (!native) return;
    sf_bf16_products_set((sf_bf16_products)k);
    if (automatic)
        snprintf(cfg->train.bf16_products, sizeof cfg->train.bf16_products, "%s", sf_bf16_products_name(k));
}

static void bf16_products_report(double bf16, double fp32) {
    if (bf16 > 0)
        printf("products measured on one core (%d x %d x %d): bf16 %.0f GFLOP/s, fp32 %.0f GFLOP/s\n", PROBE_M, PROBE_N,
               PROBE_K, bf16, fp32);
    const char *chosen = products_chosen_by_auto ? ", chosen by auto" : "";
    if (sf_bf16_products_get() == SF_BF16_PRODUCTS_FP32) {
        printf("bf16 products: fp32 kernels on the bf16 values (train.bf16_products=fp32%s): the same exact "
               "products as bf16 kernels give, another order of sums\n",
               chosen);
        return;
    }
    const long small = sf_bf16_small_macs_get();
    char small_s[192] = ", every product on them (SFVIT_BF16_SMALL_MACS=0)";
    if (small > 0)
        snprintf(small_s, sizeof small_s, ", products of fewer than %ld multiply-adds split over the team (%ld on one thread) on fp32 kernels",
                 small, small < SF_BF16_SMALL_MACS_PER_THREAD ? small : SF_BF16_SMALL_MACS_PER_THREAD);
    printf("bf16 products: oneDNN's bf16 kernels (train.bf16_products=onednn%s)%s%s\n", chosen,
           sf_bf16_pack_weights_get() ? ", linear weights packed from fp32 for products of 1024 rows or more"
                                      : ", linear weights read from bf16 copies (SFVIT_PACK_WEIGHTS=0)",
           small_s);
    if ((long)(bf16 + 0.5) < (long)(fp32 + 0.5)) /* as printed */
        sf_warn("bf16 products run slower than fp32 ones on this CPU (%.0f against %.0f GFLOP/s): "
                "train.bf16_products=fp32 (or auto) computes them on fp32 kernels",
                bf16, fp32);
}

static char kernels_line[768]; /* sf_precision_setup's, for sf_precision_kernels */

const char *sf_precision_kernels(void) { return kernels_line; }

int sf_precision_setup(sf_config *cfg, int verbose) {
    int p = sf_precision_parse(cfg->train.precision);
    if (p < 0) return sf_error("train.precision: '%s' is not one of fp32, bf16, bf16_emulated", cfg->train.precision);
    const char *why = NULL;
    const int native = p == SF_PREC_BF16 && sf_dnnl_bf16_native(&why);
    double bf16_rate = 0, fp32_rate = 0;
    if (p == SF_PREC_BF16) bf16_products_setup(cfg, native, verbose, &bf16_rate, &fp32_rate);
    if (p == SF_PREC_BF16 && !native) {
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
    sf_kernels_describe(kernels_line, sizeof kernels_line); /* before oneDNN's code is given back */
    if (verbose) {
        static const char *const what[] = {
            "fp32 products",
            "bf16 operands, fp32 accumulation",
            "EMULATED bf16: operands rounded to bf16, products by OpenBLAS in fp32 (a reference, not faster)",
        };
        printf("precision: %s (%s)\nkernels: %s\n", sf_precision_name((sf_precision)p), what[p], kernels_line);
        if (p == SF_PREC_BF16) bf16_products_report(bf16_rate, fp32_rate);
        fflush(stdout);
    }
    /* The kernels line and the probe ran oneDNN's code; a run whose products all go to
     * OpenBLAS gives those pages back (the Fashion-MNIST model's bf16 peak: 52.3 -> 50.0 MiB,
     * its fp32 peak 51.9 -> 50.1). */
    const int onednn_products = (p == SF_PREC_BF16 && sf_bf16_products_get() == SF_BF16_PRODUCTS_ONEDNN) ||
                                sf_gemm_fp32_on_onednn();
    if (!onednn_products) sf_dnnl_release_code();
    return 0;
}

int sf_precision_adamw_step(sf_params *ps, const sf_optim_cfg *o, float lr, long t) {
    uint16_t **copies = sf_calloc((size_t)(ps->count > 0 ? ps->count : 1), sizeof *copies);
    int wanted = 0, registered = 0;
    for (int i = 0; i < ps->count; i++) {
        if (ps->list[i].t->ndim < 2) continue; /* the tensors sf_bf16_weights_refresh registers */
        wanted++;
        registered += sf_bf16_weight_registered(ps->list[i].t);
        copies[i] = sf_bf16_weight_slot(ps->list[i].t);
    }
    sf_adamw_step_copies(ps, o, lr, t, copies);
    free(copies);
    /* every copy made is written; one not made yet will be made from the new weights */
    return wanted > 0 && registered == wanted;
}

void sf_precision_weights_refresh(sf_params *ps) {
    if (sf_precision_get() == SF_PREC_FP32) return;
    sf_tensor **list = sf_malloc((size_t)(ps->count > 0 ? ps->count : 1) * sizeof *list);
    for (int i = 0; i < ps->count; i++) list[i] = ps->list[i].t;
    sf_bf16_weights_refresh(list, ps->count);
    free(list);
}
