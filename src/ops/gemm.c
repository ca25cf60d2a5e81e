/* gemm.c — the single entry to cblas_sgemm for row-major contiguous operands, and the way
 * products use the cores.
 *
 * Threading: one pool for everything. OpenBLAS runs single-threaded (sf_threads_init) and a
 * product large enough to share splits the rows of C (or its columns when C has few rows)
 * over the OpenMP team, one cblas_sgemm per thread on its block. OpenBLAS's own pthread pool
 * would otherwise spin after each product (up to ~2^28 cycles by default) on the cores where
 * the OpenMP team runs the element-wise kernels in between, and two pools of busy threads on
 * two cores cost more than the split (each thread packs the shared operand once: ~1/M of the
 * product). SFVIT_GEMM=openblas restores OpenBLAS's threading for comparison.
 *
 * Backends (SFVIT_GEMM): auto (the default) and openblas use OpenBLAS as above; onednn sends
 * every fp32 product to oneDNN's f32 matmul (src/ops/gemm_dnnl.c). auto keeps OpenBLAS for
 * every shape: on AVX2 oneDNN's f32 matmul wins most products in a loop and the 224-pixel
 * models' training steps by up to 11 %, but loses the Fashion-MNIST model's by 30-45 % (its
 * thousands of small products), and a rule drawn from that would change every CPU's fp32
 * products (docs/precision.md, "oneDNN and SFVIT_GEMM"). One exception: OpenBLAS
 * picks its kernels from a table of CPU models, and a model newer than the library (Debian's
 * 0.3.21 on an Emerald Rapids Xeon) gets its generic Prescott (SSE3) kernels, 3-5x slower
 * than its AVX-512 ones. auto then sends fp32 products to oneDNN, which goes by the CPU's
 * feature bits, and says so (sf_gemm_describe). Products that follow
 * train.precision go through sf_gemm_prec (src/ops/bf16.c) and end here in fp32 or in oneDNN
 * in bf16.
 *
 * Deliberately not here: our own GEMM kernels (OpenBLAS's are faster), batching of small
 * per-head products (attention.c spreads those over threads itself).
 */
#include "ops_internal.h"
#include "sfvit/precision.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many multiply-adds one thread is faster than waking the team. */
#define GEMM_SPLIT_MIN_MACS (1 << 20)

static void gemm_one(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* OpenBLAS's kernel sets that use AVX2 or wider (openblas_get_corename). */
static const char *const openblas_avx2_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids",
                                                  "Excavator"};

const char *sf_openblas_core_fallback(const char *core, int cpu_avx2, int cpu_avx512, int cpu_bf16, int cpu_amd) {
    if (!cpu_avx2 || !core) return NULL;
    for (size_t i = 0; i < sizeof openblas_avx2_cores / sizeof *openblas_avx2_cores; i++)
        if (!strcasecmp(core, openblas_avx2_cores[i])) return NULL;
    return cpu_avx512 ? (cpu_bf16 ? "Cooperlake" : "SkylakeX") : cpu_amd ? "Zen" : "Haswell";
}

/* The OPENBLAS_CORETYPE this CPU should have, when OpenBLAS runs pre-AVX2 kernels on a CPU
 * with AVX2 and FMA; NULL when its kernels fit. */
static const char *openblas_core_hint(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return sf_openblas_core_fallback(openblas_get_corename(), avx2, __builtin_cpu_supports("avx512f"),
                                     __builtin_cpu_supports("avx512bf16"), __builtin_cpu_is("amd"));
#else
    return NULL;
#endif
}

static int backend, auto_onednn; /* auto_onednn: auto sends fp32 products to oneDNN */
static pthread_once_t backend_once = PTHREAD_ONCE_INIT;

/* Once per process: the first product may come from several threads of an attention op at
 * the same time, and none may see the backend before auto_onednn is set. */
static void backend_init(void) {
    const char *e = getenv("SFVIT_GEMM");
    if (!e || !*e || !strcmp(e, "auto")) backend = SF_GEMM_AUTO;
    else if (!strcmp(e, "openblas")) backend = SF_GEMM_OPENBLAS;
    else if (!strcmp(e, "onednn")) backend = SF_GEMM_ONEDNN;
    else {
        sf_warn("SFVIT_GEMM=%s is not one of auto, openblas, onednn: using auto", e);
        backend = SF_GEMM_AUTO;
    }
    if (backend == SF_GEMM_ONEDNN && !sf_dnnl_available()) {
        sf_warn("SFVIT_GEMM=onednn: sfvit was built without oneDNN; using OpenBLAS");
        backend = SF_GEMM_AUTO;
    }
    /* what auto would take, whichever backend is set now (sfvit bench --alternate switches) */
    auto_onednn = openblas_core_hint() && sf_dnnl_available();
    if (backend == SF_GEMM_AUTO && openblas_core_hint()) {
        if (!auto_onednn)
            sf_warn("OpenBLAS runs its generic %s kernels on this CPU, which has AVX2: products run several "
                    "times slower than they could; OPENBLAS_CORETYPE=%s selects its fast ones",
                    openblas_get_corename(), openblas_core_hint());
    }
}

sf_gemm_backend sf_gemm_backend_get(void) {
    pthread_once(&backend_once, backend_init);
    return (sf_gemm_backend)backend;
}

/* after backend_init (auto_onednn known) */
static int uses_onednn(sf_gemm_backend b) { return b == SF_GEMM_ONEDNN || (b == SF_GEMM_AUTO && auto_onednn); }

int sf_gemm_backend_uses_onednn(sf_gemm_backend b) {
    sf_gemm_backend_get();
    return uses_onednn(b);
}

/* every product asks: one pthread_once, not two */
int sf_gemm_fp32_on_onednn(void) { return uses_onednn(sf_gemm_backend_get()); }

void sf_gemm_backend_set(sf_gemm_backend b) {
    SF_ASSERT(b != SF_GEMM_OPENBLAS && sf_gemm_backend_get() != SF_GEMM_OPENBLAS,
              "SFVIT_GEMM=openblas sets OpenBLAS's threads when the process starts; it cannot be switched to or from");
    SF_ASSERT(b != SF_GEMM_ONEDNN || sf_dnnl_available(), "SFVIT_GEMM=onednn: sfvit was built without oneDNN");
    backend = b;
}

void sf_gemm_describe(char *buf, size_t size) {
    const sf_gemm_backend b = sf_gemm_backend_get();
    if (b == SF_GEMM_ONEDNN)
        snprintf(buf, size, "oneDNN f32 matmul (SFVIT_GEMM=onednn)");
    else if (b == SF_GEMM_AUTO && auto_onednn)
        snprintf(buf, size,
                 "oneDNN f32 matmul (SFVIT_GEMM=auto: OpenBLAS has only its generic %s kernels for this CPU; "
                 "OPENBLAS_CORETYPE=%s gives it its fast ones)",
                 openblas_get_corename(), openblas_core_hint());
    else
        snprintf(buf, size, "OpenBLAS sgemm, %s kernels (SFVIT_GEMM=%s)", openblas_get_corename(),
                 sf_gemm_backend_name(b));
}

const char *sf_gemm_backend_name(sf_gemm_backend b) {
    return b == SF_GEMM_ONEDNN ? "onednn" : b == SF_GEMM_OPENBLAS ? "openblas" : "auto";
}

void sf_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
             const float *B, float beta, float *C) {
    if (sf_gemm_fp32_on_onednn() &&
        sf_dnnl_gemm_f32(trans_a, trans_b, M, N, K, alpha, A, B, beta, C) == 0)
        return;
    int lda = trans_a ? M : K;
    int ldb = trans_b ? K : N;
#ifdef _OPENMP
    int t = omp_get_max_threads();
    if (t > 1 && sf_gemm_split_enabled() && !omp_in_parallel() &&
        (double)M * N * K >= GEMM_SPLIT_MIN_MACS && (M >= 32 * t || N >= 64 * t)) {
        /* Each thread packs the whole operand that is not split: splitting the rows of C
         * shares op(B) (K x N), splitting its columns shares op(A) (M x K). Split the longer
         * side of C, so the shared operand is the smaller one (rows in blocks of 16, columns
         * in blocks of 64). */
        const int by_rows = M >= 32 * t && (M >= N || N < 64 * t);
        const int ext = by_rows ? M : N, unit = by_rows ? 16 : 64;
#pragma omp parallel num_threads(t)
        {
            int i = omp_get_thread_num(), n = omp_get_num_threads();
            int blocks = (ext + unit - 1) / unit;
            int b0 = (int)((long)blocks * i / n), b1 = (int)((long)blocks * (i + 1) / n);
            int lo = b0 * unit, hi = b1 * unit < ext ? b1 * unit : ext;
            if (hi > lo) {
                if (by_rows) /* op(A) rows lo..hi: A (M, K) rows, or A (K, M) columns */
                    gemm_one(trans_a, trans_b, hi - lo, N, K, alpha,
                             trans_a ? A + lo : A + (size_t)lo * K, lda, B, ldb, beta,
                             C + (size_t)lo * N, N);
                else /* op(B) columns lo..hi: B (K, N) columns, or B (N, K) rows */
                    gemm_one(trans_a, trans_b, M, hi - lo, K, alpha, A, lda,
                             trans_b ? B + (size_t)lo * K : B + lo, ldb, beta, C + lo, N);
            }
        }
        return;
    }
#endif
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* clock: sf_now (the team's wall time) or thread_cpu_seconds (one core's work, in a product
 * that runs in the calling thread). */
static double gemm_rate_on(double (*clock)(void), int bf16, int M, int N, int K) {
    const size_t na = (size_t)M * K, nb = (size_t)K * N;
    float *a = sf_aligned_alloc(na * sizeof *a), *b = sf_aligned_alloc(nb * sizeof *b);
    float *c = sf_aligned_alloc((size_t)M * N * sizeof *c);
    uint16_t *a16 = sf_aligned_alloc(na * sizeof *a16), *b16 = sf_aligned_alloc(nb * sizeof *b16);
    for (size_t i = 0; i < na; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 5) * 0.1f;
    sf_bf16_convert(a, a16, na);
    sf_bf16_convert(b, b16, nb);
    enum { RUNS = 7 };
    double t[RUNS];
    int ok = 1;
    for (int r = -1; r < RUNS && ok; r++) { /* r = -1: warm-up (primitive creation, caches) */
        const double t0 = clock();
        if (bf16)
            ok = sf_dnnl_gemm_bf16(0, 1, M, N, K, 1.0f, a16, b16, 0.0f, c) == 0;
        else
            sf_gemm(0, 1, M, N, K, 1.0f, a, b, 0.0f, c); /* the engine's entry: its backend, its threading */
        if (r >= 0) t[r] = clock() - t0;
    }
    free(a), free(b), free(c), free(a16), free(b16);
    if (!ok) return 0.0;
    qsort(t, RUNS, sizeof *t, cmp_double);
    return 2.0 * M * N * K / t[RUNS / 2] * 1e-9;
}

double sf_gemm_rate(int bf16, int M, int N, int K) { return gemm_rate_on(sf_now, bf16, M, N, K); }

/* One thread for OpenMP, OpenBLAS and oneDNN alike (oneDNN's runtime is OpenMP), so the
 * product runs in this thread and its CPU time is its work: time another process takes
 * from the cores is not counted. */
double sf_gemm_core_rate(int bf16, int M, int N, int K) {
#ifdef _OPENMP
    const int team = omp_get_max_threads();
#else
    const int team = 1;
#endif
    sf_threads_init(1);
    const double rate = gemm_rate_on(thread_cpu_seconds, bf16, M, N, K);
    sf_threads_init(team);
    return rate;
}
