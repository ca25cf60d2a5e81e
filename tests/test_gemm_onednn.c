/* test_gemm_onednn.c — oneDNN's f32 matmul (SFVIT_GEMM=onednn) against OpenBLAS for every
 * transpose pair, alpha and beta: both sum the same exact fp32 products in different orders,
 * so |difference| <= 2K 2^-24 sum|a||b| (+ a few roundings of alpha and beta). And the
 * primitive cache: a second round of the same products creates no primitive. And the kernel
 * table (sf_dnnl_kernels): it accounts for every primitive and product, none of these products
 * runs on oneDNN's reference kernel, and a primitive on a kernel counted as slow prints a
 * warning naming its product. And which of OpenBLAS's kernel sets SFVIT_GEMM=auto replaces
 * by oneDNN (sf_openblas_core_fallback). And sf_dnnl_release_code: oneDNN's code leaves the
 * resident set, and the next product faults it in again. And sf_dnnl_cache_reset: the calling
 * thread's next product creates its primitive anew. And sf_gemm_core_rate (auto's kernels
 * probe): it measures, and gives the run its threads back.
 * Skipped (exit 77) in a build without oneDNN. */
#include "test_gemm_dnnl_common.h"

#include <cblas.h>
#include <unistd.h>
#ifdef SFVIT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* OpenBLAS itself, not sf_gemm: auto sends products to oneDNN where OpenBLAS lacks kernels
 * for the CPU. */
static int openblas(int ta, int tb, int M, int N, int K, float alpha, const float *A, const float *B, float beta,
                    float *C) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                ta ? M : K, B, tb ? K : N, beta, C, N);
    return 0;
}

/* Which OpenBLAS kernel sets auto replaces by oneDNN, and the OPENBLAS_CORETYPE it suggests. */
static void openblas_fallback_cases(void) {
    static const struct {
        const char *core;
        int avx2, avx512, bf16, amd;
        const char *hint;
    } cases[] = {
        {"Prescott", 1, 1, 1, 0, "Cooperlake"}, /* Debian's 0.3.21 on an Emerald Rapids Xeon */
        {"Prescott", 1, 1, 0, 0, "SkylakeX"},   {"Core2", 1, 0, 0, 0, "Haswell"},
        {"Sandybridge", 1, 0, 0, 1, "Zen"},     {"Prescott", 0, 0, 0, 0, NULL}, /* an old CPU: its kernels fit */
        {"Haswell", 1, 0, 0, 0, NULL},          {"Zen", 1, 1, 1, 1, NULL},
        {"SkylakeX", 1, 1, 0, 0, NULL},         {"cooperlake", 1, 1, 1, 0, NULL},
        {"SapphireRapids", 1, 1, 1, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *h =
            sf_openblas_core_fallback(cases[i].core, cases[i].avx2, cases[i].avx512, cases[i].bf16, cases[i].amd);
        CHECK((h == NULL) == (cases[i].hint == NULL) && (!h || !strcmp(h, cases[i].hint)),
              "OpenBLAS %s kernels on a CPU with avx2 %d avx512 %d bf16 %d amd %d: hint %s, expected %s", cases[i].core,
              cases[i].avx2, cases[i].avx512, cases[i].bf16, cases[i].amd, h ? h : "none",
              cases[i].hint ? cases[i].hint : "none");
    }
}

/* The first f32 product with every kernel name counted as slow: its warning, read back from
 * stderr, names the product. Runs before any other product, so the kernel's row is new. */
static void slow_kernel_warns(void) {
    sf_dnnl_set_slow_pattern(""); /* every name contains "" */
    FILE *cap = tmpfile();
    fflush(stderr);
    const int saved = dup(2);
    dup2(fileno(cap), 2);
    float a[12 * 5] = {0}, b[5 * 7] = {0}, c[12 * 7];
    const int rc = sf_dnnl_gemm_f32(0, 1, 12, 7, 5, 1.0f, a, b, 0.0f, c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[512] = {0};
    rewind(cap);
    size_t n = fread(text, 1, sizeof text - 1, cap);
    fclose(cap);
    text[n] = 0;
    CHECK(rc == 0 && strstr(text, "no optimized kernel for the f32 product 12 x 7 x 5 (A B^T): it runs "),
          "the warning of a slow kernel: got \"%s\"", text);
    sf_dnnl_kernel k[SF_DNNL_MAX_KERNELS];
    int nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    CHECK(nk == 1 && k[0].slow && !k[0].bf16 && k[0].prims == 1 && k[0].runs == 1 && k[0].macs == 12 * 7 * 5,
          "kernel table after one product: %d rows, slow %d, %ld primitives, %ld products, %ld MACs", nk,
          nk ? k[0].slow : -1, nk ? k[0].prims : -1, nk ? k[0].runs : -1, nk ? k[0].macs : -1);
    sf_dnnl_set_slow_pattern("ref");
    nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    CHECK(nk == 1 && k[0].slow == (strstr(k[0].impl, "ref") != NULL), "the pattern back to \"ref\": %s slow %d",
          nk ? k[0].impl : "?", nk ? k[0].slow : -1);
}

/* Resident kB of libdnnl's executable mappings (/proc/self/smaps), -1 if none is found. */
static long dnnl_code_rss_kb(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512], perm[8];
    long kb = -1, v;
    int in_code = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3) /* a mapping's first line */
            in_code = perm[2] == 'x' && strstr(line, "/libdnnl.") != NULL;
        else if (in_code && sscanf(line, "Rss: %ld kB", &v) == 1)
            kb = (kb < 0 ? 0 : kb) + v;
    }
    fclose(f);
    return kb;
}

/* sf_dnnl_release_code: the code pages a product paged in leave the resident set, and the
 * next product faults them in again and gives the same bits. */
static void release_code(void) {
    enum { M = 96, N = 80, K = 72 };
    float *A = malloc(M * K * 4), *B = malloc(N * K * 4), *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
    for (int i = 0; i < M * K; i++) A[i] = (float)(i % 13) - 6.0f;
    for (int i = 0; i < N * K; i++) B[i] = (float)(i % 7) * 0.5f;
    int rc = sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C1);
    const long before = dnnl_code_rss_kb();
    const size_t advised = sf_dnnl_release_code();
    const long after = dnnl_code_rss_kb();
    CHECK(rc == 0 && before > 64 && advised >= (size_t)before * 1024 && after >= 0 && after < before / 4,
          "release_code: oneDNN's code %ld kB resident after a product, %ld kB after the release (%zu bytes advised)",
          before, after, advised);
    rc = sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C2);
    CHECK(rc == 0 && memcmp(C1, C2, M * N * 4) == 0 && dnnl_code_rss_kb() > after,
          "release_code: a product after the release runs (rc %d), faults code in again, and gives the same bits", rc);
    free(A), free(B), free(C1), free(C2);
}

/* sf_dnnl_cache_reset empties the calling thread's cache at once: the same product again
 * creates a primitive (a cache left as it was would serve the old one) with the same bits. */
static void cache_reset(void) {
    enum { M = 40, N = 24, K = 16 };
    float A[M * K], B[N * K], C1[M * N], C2[M * N];
    for (int i = 0; i < M * K; i++) A[i] = (float)(i % 11) - 5.0f;
    for (int i = 0; i < N * K; i++) B[i] = (float)(i % 5) * 0.25f;
    long c0, c1, c2, c3;
    int rc = sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C1);
    sf_dnnl_stats(&c0, NULL);
    rc |= sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C1);
    sf_dnnl_stats(&c1, NULL);
    sf_dnnl_cache_reset();
    rc |= sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C2);
    sf_dnnl_stats(&c2, NULL);
    rc |= sf_dnnl_gemm_f32(0, 1, M, N, K, 1.0f, A, B, 0.0f, C2);
    sf_dnnl_stats(&c3, NULL);
    CHECK(rc == 0 && c1 == c0 && c2 == c1 + 1 && c3 == c2 && memcmp(C1, C2, sizeof C1) == 0,
          "cache_reset: primitives created %ld before, %ld after the reset, %ld the time after (rc %d)", c1 - c0,
          c2 - c1, c3 - c2, rc);
}

/* Whether oneDNN's effective ISA (DNNL_MAX_CPU_ISA may hold it below the host's) has AVX-512:
 * there it has a bf16 matmul, native with BF16 or AMX, emulated without. */
static int onednn_has_avx512(void) {
#ifdef SFVIT_HAVE_DNNL
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
#else
    return 0;
#endif
}

static int team_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* sf_gemm_core_rate runs its products on one thread and restores the team after: a probe
 * that left the run on one thread would halve its speed and say nothing. */
static void core_rate(void) {
    sf_threads_init(3);
    const int blas = openblas_get_num_threads();
    const double f = sf_gemm_core_rate(0, 256, 128, 96);
    CHECK(f > 0 && team_threads() == 3 && openblas_get_num_threads() == blas,
          "core_rate fp32: %.1f GFLOP/s; threads after: OpenMP %d (want 3), OpenBLAS %d (want %d)", f, team_threads(),
          openblas_get_num_threads(), blas);
    /* bf16: a rate wherever oneDNN has a bf16 matmul; 0 below AVX-512, where it has none */
    const double b = sf_gemm_core_rate(1, 256, 128, 96);
    const int has_bf16_matmul = onednn_has_avx512();
    CHECK((has_bf16_matmul ? b > 0 : b == 0) && team_threads() == 3 && openblas_get_num_threads() == blas,
          "core_rate bf16: %.1f GFLOP/s (oneDNN has a bf16 matmul: %d, native: %d); threads after: OpenMP %d, "
          "OpenBLAS %d",
          b, has_bf16_matmul, sf_dnnl_bf16_native(NULL), team_threads(), openblas_get_num_threads());
    sf_threads_init(0);
}

int main(void) {
    if (!sf_dnnl_available()) {
        printf("SKIP: sfvit was built without oneDNN (-Ddnnl=disabled or libdnnl-dev missing)\n");
        return 77;
    }
    sf_threads_init(0);
    slow_kernel_warns();
    openblas_fallback_cases();
    compare_products("oneDNN f32 vs OpenBLAS", sf_dnnl_gemm_f32, openblas, 2 * 0x1p-24, 8 * 0x1p-24);
    long created1, created2, run1, run2;
    sf_dnnl_stats(&created1, &run1);
    compare_products("oneDNN f32 vs OpenBLAS (again)", sf_dnnl_gemm_f32, openblas, 2 * 0x1p-24, 8 * 0x1p-24);
    sf_dnnl_stats(&created2, &run2);
    CHECK(created1 > 0 && created2 == created1, "second round created %ld primitives (first %ld)", created2 - created1,
          created1);
    CHECK(run2 - run1 == run1 - 1, "second round ran %ld products, first %ld", run2 - run1, run1 - 1);
    sf_dnnl_kernel k[SF_DNNL_MAX_KERNELS];
    const int nk = sf_dnnl_kernels(k, SF_DNNL_MAX_KERNELS);
    long prims = 0, runs = 0;
    for (int i = 0; i < nk; i++) {
        prims += k[i].prims, runs += k[i].runs;
        CHECK(!k[i].slow && !k[i].bf16, "kernel %s (%s): %ld products on a slow kernel", k[i].impl,
              k[i].bf16 ? "bf16" : "f32", k[i].runs);
    }
    CHECK(prims == created2 && runs == run2, "the kernel table counts %ld primitives and %ld products, the totals %ld and %ld",
          prims, runs, created2, run2);
    release_code();
    cache_reset();
    core_rate();
    return test_summary("gemm_onednn");
}
