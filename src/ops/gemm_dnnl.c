/* gemm_dnnl.c — matrix products through oneDNN's matmul primitive (f32 and bf16 operands,
 * fp32 output), for sf_gemm (SFVIT_GEMM=onednn) and the bf16 precision (sf_gemm_prec).
 *
 * Primitives are created once per (transposes, M, N, K, data type, alpha, beta, bias or not:
 * a linear layer's bias is the product's epilogue on the bf16 kernels) and kept in
 * a small per-thread cache (products also run inside the attention ops' OpenMP regions, and a
 * oneDNN stream or memory object must not be shared between threads). sf_dnnl_stats counts
 * creations: after the first training step it stops growing. oneDNN (Debian: OpenMP runtime)
 * threads a product over the same OpenMP team as the rest of sfvit; inside a parallel region
 * it runs on the calling thread, so the cores are never oversubscribed.
 *
 * A linear layer's product reads its weight packed straight from fp32 into the kernel's own
 * layout (sf_dnnl_gemm_bf16_weight), in a buffer of the calling thread, instead of from a bf16
 * copy that the kernel then copies into that layout itself (docs/precision.md).
 *
 * Which kernel oneDNN picked is counted per implementation name and data type (sf_dnnl_kernels):
 * a product that lands on oneDNN's reference kernel ("ref:any", 10-100x slower than a jit one,
 * taken when no optimized kernel supports a shape, layout or post-op) is reported by name when
 * its primitive is created, and sfvit bench lists the kernels its steps ran, so a slow
 * product is seen rather than guessed from the step time.
 *
 * Native bf16 means AVX512_BF16 (vdpbf16ps: Zen 4/5, Cooper Lake) or AMX_BF16 (Sapphire
 * Rapids and later). oneDNN also "runs" bf16 on AVX-512 without BF16 by emulating it slower
 * than fp32, and has no bf16 matmul at all on AVX2: both count as not native here.
 */
#include "ops_internal.h"
#include "sfvit/precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SFVIT_HAVE_DNNL
#include <link.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

static dnnl_engine_t engine;
static int engine_ok;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static long n_created, n_executed; /* atomics: updated from several threads */

/* Kernels in use: one row per (implementation, data type), shared by all threads. A row is
 * added under the lock when a primitive is created; its counters are atomics. */
static sf_dnnl_kernel kernels[SF_DNNL_MAX_KERNELS];
static int n_kernels;
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static char slow_pattern[32] = "ref";

static void engine_init(void) {
    engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
}

int sf_dnnl_available(void) {
    pthread_once(&engine_once, engine_init);
    return engine_ok;
}

typedef struct {
    int ta, tb, M, N, K;
    dnnl_data_type_t dt;
    float alpha, beta;
    int bias; /* a (1 x N) bias added to every row in the product's epilogue */
    dnnl_data_type_t cdt; /* C's type: f32, or bf16 for an output kept in bf16 alone */
    int packed_b; /* B is a weight in fp32 (e->b), packed into the kernel's layout (e->bp) */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, scratch, bm; /* scratch, bm: NULL when the primitive needs none */
    size_t scratch_bytes;
    sf_dnnl_kernel *kernel; /* the row counting this primitive's products */
    dnnl_primitive_t pack;  /* packed_b: the reorder fp32 B -> bf16 in the kernel's layout */
    dnnl_memory_t bp;       /* packed_b: B so packed, in the thread's pack buffer */
    size_t packed_bytes;
} entry;

static long n_packed; /* atomic */

#define CACHE_SIZE 128 /* per thread; a model uses a few dozen distinct products */
/* Allocated on first use: a large static thread-local array would move the heap of every
 * build that links oneDNN and with it the alignment, and so the last bits, of fp32 products. */
static __thread entry *cache;
static __thread int cache_n, cache_next;
static __thread dnnl_stream_t stream;
/* One scratchpad per thread for all its primitives (they run one at a time), instead of one
 * each: oneDNN's default keeps a buffer per primitive, 12 MiB over the Fashion-MNIST model's
 * 64 products, more than its whole bf16 saving on activations. */
static __thread void *scratchpad;
static __thread size_t scratchpad_bytes;
/* The same for the packed weights: a weight is packed for its product and read by it alone
 * (the weights change after every step), so one buffer, the size of the largest, serves all. */
static __thread void *pack_buffer;
static __thread size_t pack_buffer_bytes;
/* sf_dnnl_cache_reset counts up; a thread whose cache is older empties it at its next lookup
 * (the caches are per thread, so no thread can empty another's). */
static long generation;
static __thread long cache_generation;

static void entry_destroy(entry *e) {
    dnnl_primitive_destroy(e->prim);
    dnnl_memory_destroy(e->a);
    dnnl_memory_destroy(e->b);
    dnnl_memory_destroy(e->c);
    if (e->scratch) dnnl_memory_destroy(e->scratch);
    if (e->bm) dnnl_memory_destroy(e->bm);
    if (e->pack) dnnl_primitive_destroy(e->pack);
    if (e->bp) dnnl_memory_destroy(e->bp);
}

long sf_dnnl_weights_packed(void) { return __atomic_load_n(&n_packed, __ATOMIC_RELAXED); }

/* The calling thread empties its own cache at once, with its scratchpad: after the kernels
 * probe, a run on fp32 kernels never looks up again, and the probe's primitives and buffers
 * would stay for the whole run. oneDNN's own primitive cache (the kernels' generated code)
 * is emptied by setting its capacity to 0 and back. */
void sf_dnnl_cache_reset(void) {
    cache_generation = __atomic_add_fetch(&generation, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < cache_n; i++) entry_destroy(&cache[i]);
    cache_n = cache_next = 0;
    free(scratchpad);
    scratchpad = NULL;
    scratchpad_bytes = 0;
    free(pack_buffer);
    pack_buffer = NULL;
    pack_buffer_bytes = 0;
    int capacity;
    if (dnnl_get_primitive_cache_capacity(&capacity) == dnnl_success && capacity > 0) {
        dnnl_set_primitive_cache_capacity(0);
        dnnl_set_primitive_cache_capacity(capacity);
    }
}

/* The row of implementation impl for data type dt, added on first sight (then, for a slow
 * kernel, with a warning naming the product that needed it). */
static sf_dnnl_kernel *kernel_row(const char *impl, dnnl_data_type_t dt, int ta, int tb, int M, int N, int K) {
    const int bf16 = dt == dnnl_bf16;
    pthread_mutex_lock(&kernels_lock);
    sf_dnnl_kernel *row = NULL;
    for (int i = 0; i < n_kernels && !row; i++)
        if (kernels[i].bf16 == bf16 && !strcmp(kernels[i].impl, impl)) row = &kernels[i];
    int added = 0;
    if (!row) {
        /* More kinds than rows never happens (a model uses two or three); the last row then
         * collects the rest. */
        row = &kernels[n_kernels < SF_DNNL_MAX_KERNELS ? n_kernels++ : SF_DNNL_MAX_KERNELS - 1];
        snprintf(row->impl, sizeof row->impl, "%s", impl);
        row->bf16 = bf16;
        row->slow = strstr(impl, slow_pattern) != NULL;
        added = 1;
    }
    row->prims++;
    pthread_mutex_unlock(&kernels_lock);
    if (added && row->slow)
        sf_warn("oneDNN has no optimized kernel for the %s product %d x %d x %d (%s %s): it runs %s, "
                "many times slower (sfvit bench lists the products on each kernel)",
                bf16 ? "bf16" : "f32", M, N, K, ta ? "A^T" : "A", tb ? "B^T" : "B", impl);
    return row;
}

int sf_dnnl_kernels(sf_dnnl_kernel *out, int max) {
    pthread_mutex_lock(&kernels_lock);
    int n = n_kernels < max ? n_kernels : max;
    for (int i = 0; i < n; i++) {
        out[i] = kernels[i];
        out[i].runs = __atomic_load_n(&kernels[i].runs, __ATOMIC_RELAXED);
        out[i].macs = __atomic_load_n(&kernels[i].macs, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&kernels_lock);
    return n;
}

void sf_dnnl_set_slow_pattern(const char *pattern) {
    pthread_mutex_lock(&kernels_lock);
    snprintf(slow_pattern, sizeof slow_pattern, "%s", pattern);
    for (int i = 0; i < n_kernels; i++) kernels[i].slow = strstr(kernels[i].impl, slow_pattern) != NULL;
    pthread_mutex_unlock(&kernels_lock);
}

/* Logical A (M, K), B (K, N), C (M, N) over row-major storage; a transposed operand is
 * stored the other way round, which the strides say. */
static entry *lookup(int ta, int tb, int M, int N, int K, dnnl_data_type_t dt, float alpha,
                     float beta, int bias, dnnl_data_type_t cdt, int packed_b) {
    const long gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
    if (cache_generation != gen) {
        for (int i = 0; i < cache_n; i++) entry_destroy(&cache[i]);
        cache_n = cache_next = 0;
        cache_generation = gen;
    }
    for (int i = 0; i < cache_n; i++) {
        entry *e = &cache[i];
        if (e->ta == ta && e->tb == tb && e->M == M && e->N == N && e->K == K && e->dt == dt &&
            e->alpha == alpha && e->beta == beta && e->bias == bias && e->cdt == cdt && e->packed_b == packed_b)
            return e;
    }
    if (!sf_dnnl_available()) return NULL;
    if (!cache) cache = sf_calloc(CACHE_SIZE, sizeof *cache);
    if (!stream && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
        return NULL;
    dnnl_memory_desc_t ad, bd, cd, biasd;
    dnnl_dims_t adims = {M, K}, bdims = {K, N}, cdims = {M, N}, biasdims = {1, N};
    dnnl_dims_t as = {ta ? 1 : K, ta ? M : 1}, bs = {tb ? 1 : N, tb ? K : 1}, cs = {N, 1};
    /* a packed B comes in fp32: the pack reorder's source */
    if (dnnl_memory_desc_init_by_strides(&ad, 2, adims, dt, as) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&bd, 2, bdims, packed_b ? dnnl_f32 : dt, bs) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&cd, 2, cdims, cdt, cs) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&biasd, 2, biasdims, dnnl_f32, cs) != dnnl_success)
        return NULL;
    /* a packed B: the kernel picks its layout (format any) */
    dnnl_memory_desc_t bany;
    if (packed_b && dnnl_memory_desc_init_by_tag(&bany, 2, bdims, dt, dnnl_format_tag_any) != dnnl_success) return NULL;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &ad, packed_b ? &bany : &bd, bias ? &biasd : NULL, &cd) != dnnl_success)
        return NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    int ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && alpha != 1.0f) ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
    if (ok && beta != 0.0f) {
        ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    }
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&prim, pd) == dnnl_success;
    const char *impl = NULL;
    if (ok && (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl))
        impl = "?";
    sf_dnnl_kernel *kernel = ok ? kernel_row(impl, dt, ta, tb, M, N, K) : NULL;
    dnnl_memory_desc_t sd = {0}, packed_md = {0};
    dnnl_primitive_t pack = NULL;
    if (ok && packed_b) { /* B's layout as the kernel chose it, and the reorder from fp32 into it */
        const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        dnnl_primitive_desc_t rpd = NULL;
        if (q) packed_md = *q;
        ok = q && dnnl_reorder_primitive_desc_create(&rpd, &bd, engine, &packed_md, engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&pack, rpd) == dnnl_success;
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        if (!ok) dnnl_primitive_destroy(prim);
    }
    size_t scratch_bytes = 0;
    if (ok) {
        const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (q) {
            sd = *q;
            scratch_bytes = dnnl_memory_desc_get_size(&sd);
        }
    }
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (!ok) return NULL;
    __atomic_add_fetch(&n_created, 1, __ATOMIC_RELAXED);

    entry *e;
    if (cache_n < CACHE_SIZE) {
        e = &cache[cache_n++];
    } else { /* full: replace in turn (a model never gets here) */
        e = &cache[cache_next];
        cache_next = (cache_next + 1) % CACHE_SIZE;
        entry_destroy(e);
    }
    *e = (entry){.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .dt = dt, .alpha = alpha, .beta = beta, .bias = bias,
                 .cdt = cdt, .packed_b = packed_b, .prim = prim, .scratch_bytes = scratch_bytes, .kernel = kernel,
                 .pack = pack, .packed_bytes = packed_b ? dnnl_memory_desc_get_size(&packed_md) : 0};
    if (dnnl_memory_create(&e->a, &ad, engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&e->b, &bd, engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&e->c, &cd, engine, DNNL_MEMORY_NONE) != dnnl_success ||
        (scratch_bytes && dnnl_memory_create(&e->scratch, &sd, engine, DNNL_MEMORY_NONE) != dnnl_success) ||
        (bias && dnnl_memory_create(&e->bm, &biasd, engine, DNNL_MEMORY_NONE) != dnnl_success) ||
        (packed_b && dnnl_memory_create(&e->bp, &packed_md, engine, DNNL_MEMORY_NONE) != dnnl_success))
        SF_ASSERT(0, "oneDNN: cannot create memory objects");
    return e;
}

/* The weight B (fp32) packed into e's layout, rounded to bf16 on the way, in the thread's pack
 * buffer. */
static dnnl_memory_t pack_weight(entry *e, const float *B) {
    if (pack_buffer_bytes < e->packed_bytes) {
        free(pack_buffer);
        pack_buffer = sf_aligned_alloc(e->packed_bytes);
        pack_buffer_bytes = e->packed_bytes;
    }
    dnnl_memory_set_data_handle(e->b, (void *)B);
    dnnl_memory_set_data_handle(e->bp, pack_buffer);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, e->b}, {DNNL_ARG_TO, e->bp}};
    if (dnnl_primitive_execute(e->pack, stream, 2, args) != dnnl_success)
        SF_ASSERT(0, "oneDNN: packing a weight (%d x %d) failed", e->K, e->N);
    __atomic_add_fetch(&n_packed, 1, __ATOMIC_RELAXED);
    return e->bp;
}

static int run(int ta, int tb, int M, int N, int K, float alpha, dnnl_data_type_t dt, const void *A, const void *B,
               int b_weight, const float *bias, float beta, void *C, dnnl_data_type_t cdt) {
    if (M <= 0 || N <= 0) return 0;
    entry *e = lookup(ta, tb, M, N, K, dt, alpha, beta, bias != NULL, cdt, b_weight);
    if (!e) return -1;
    dnnl_memory_set_data_handle(e->a, (void *)A);
    dnnl_memory_t b = e->b;
    if (e->packed_b)
        b = pack_weight(e, B);
    else
        dnnl_memory_set_data_handle(e->b, (void *)B);
    dnnl_memory_set_data_handle(e->c, C);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, e->c}};
    int n_args = 3;
    if (bias) {
        dnnl_memory_set_data_handle(e->bm, (void *)bias);
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->bm};
    }
    if (e->scratch) {
        if (scratchpad_bytes < e->scratch_bytes) {
            free(scratchpad);
            scratchpad = sf_aligned_alloc(e->scratch_bytes);
            scratchpad_bytes = e->scratch_bytes;
        }
        dnnl_memory_set_data_handle(e->scratch, scratchpad);
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    }
    if (dnnl_primitive_execute(e->prim, stream, n_args, args) != dnnl_success ||
        dnnl_stream_wait(stream) != dnnl_success)
        SF_ASSERT(0, "oneDNN: matmul (%d x %d x %d) failed", M, N, K);
    __atomic_add_fetch(&n_executed, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->kernel->runs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->kernel->macs, (long)M * N * K, __ATOMIC_RELAXED);
    return 0;
}

int sf_dnnl_gemm_f32(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                     const float *B, float beta, float *C) {
    return run(ta, tb, M, N, K, alpha, dnnl_f32, A, B, 0, NULL, beta, C, dnnl_f32);
}

int sf_dnnl_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                      const uint16_t *B16, float beta, float *C) {
    return run(ta, tb, M, N, K, alpha, dnnl_bf16, A16, B16, 0, NULL, beta, C, dnnl_f32);
}

int sf_dnnl_gemm_bf16_bias(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                           const float *bias, float *C) {
    return run(ta, tb, M, N, K, 1.0f, dnnl_bf16, A16, B16, 0, bias, 0.0f, C, dnnl_f32);
}

int sf_dnnl_gemm_bf16_bias_to_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                                   const float *bias, uint16_t *C16) {
    return run(ta, tb, M, N, K, 1.0f, dnnl_bf16, A16, B16, 0, bias, 0.0f, C16, dnnl_bf16);
}

int sf_dnnl_gemm_bf16_weight(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                             const float *W, const float *bias, float beta, float *C, uint16_t *C16) {
    return run(ta, tb, M, N, K, alpha, dnnl_bf16, A16, W, 1, bias, beta, C16 ? (void *)C16 : (void *)C,
               C16 ? dnnl_bf16 : dnnl_f32);
}

int sf_dnnl_pack_weight_only(int ta, int tb, int M, int N, int K, float alpha, const float *W, int bias, float beta,
                             int c16) {
    if (M <= 0 || N <= 0) return 0;
    entry *e = lookup(ta, tb, M, N, K, dnnl_bf16, alpha, beta, bias, c16 ? dnnl_bf16 : dnnl_f32, 1);
    if (!e) return -1;
    pack_weight(e, W);
    return dnnl_stream_wait(stream) == dnnl_success ? 0 : -1;
}

void sf_dnnl_stats(long *created, long *executed) {
    if (created) *created = __atomic_load_n(&n_created, __ATOMIC_RELAXED);
    if (executed) *executed = __atomic_load_n(&n_executed, __ATOMIC_RELAXED);
}

/* The implementation oneDNN picks for a 64x64x64 matmul of type dt, or NULL (none). */
static const char *probe_impl(dnnl_data_type_t dt) {
    if (!sf_dnnl_available()) return NULL;
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t d = {64, 64};
    dnnl_memory_desc_init_by_tag(&ad, 2, d, dt, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bd, 2, d, dt, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&cd, 2, d, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL) != dnnl_success)
        return NULL;
    static char names[2][64];
    char *out = names[dt == dnnl_bf16];
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(out, 64, "%s", impl);
    else
        snprintf(out, 64, "?");
    dnnl_primitive_desc_destroy(pd);
    return out;
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "AMX";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX512_BF16";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX512_VNNI (no BF16)";
    case dnnl_cpu_isa_avx512_core: return "AVX512 (no BF16)";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2_VNNI (no AVX-512)";
    case dnnl_cpu_isa_avx2: return "AVX2 (no AVX-512)";
    default: return "older than AVX2";
    }
}

int sf_dnnl_bf16_native(const char **why) {
    static const char *no_build = "sfvit was built without oneDNN (-Ddnnl=disabled or libdnnl-dev missing)";
    static const char *no_isa = "the CPU has neither AVX512_BF16 nor AMX_BF16 (oneDNN ISA here: %s)";
    static char msg[160];
    if (!sf_dnnl_available()) {
        if (why) *why = no_build;
        return 0;
    }
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* avx512_core_bf16 and amx both contain the avx512_core_bf16 bits. */
    int native = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    const char *impl = native ? probe_impl(dnnl_bf16) : NULL;
    if (native && (!impl || strstr(impl, "ref"))) native = 0; /* a reference kernel is not native */
    if (!native && why) {
        snprintf(msg, sizeof msg, no_isa, isa_name(isa));
        *why = msg;
    }
    return native;
}

void sf_dnnl_describe(char *buf, size_t size) {
    if (!sf_dnnl_available()) {
        snprintf(buf, size, "oneDNN: not built in");
        return;
    }
    const dnnl_version_t *v = dnnl_version();
    const char *f32 = probe_impl(dnnl_f32), *bf16 = probe_impl(dnnl_bf16);
    const char *why = NULL;
    int native = sf_dnnl_bf16_native(&why);
    snprintf(buf, size, "oneDNN %d.%d.%d, ISA %s; f32 matmul: %s; bf16 matmul: %s%s", v->major,
             v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()), f32 ? f32 : "none",
             bf16 ? bf16 : "none", native ? " (native)" : " (no native bf16)");
}

/* The executable segments of the loaded libdnnl (the program headers of each loaded object,
 * as the dynamic linker has them), advised MADV_DONTNEED: their pages leave this process's
 * resident set, and a later call faults them in from the file again. That loses nothing only
 * where the code was never written: not in a library with text relocations (then it is left
 * alone), and only over whole pages inside the segment (a page shared with a writable
 * segment is not touched). */
static int has_text_relocations(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
             d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL))) return 1;
    }
    return 0;
}

static int release_object_code(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    if (strncmp(slash ? slash + 1 : info->dlpi_name, "libdnnl.", 8) != 0) return 0;
    if (has_text_relocations(info)) return 1;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || (ph->p_flags & PF_W)) continue;
        const uintptr_t lo = (info->dlpi_addr + ph->p_vaddr + page - 1) & ~(page - 1);
        const uintptr_t hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0) *(size_t *)data += hi - lo;
    }
    return 1;
}

size_t sf_dnnl_release_code(void) {
    size_t bytes = 0;
    dl_iterate_phdr(release_object_code, &bytes);
    return bytes;
}

#else /* built without oneDNN */

int sf_dnnl_available(void) { return 0; }
int sf_dnnl_bf16_native(const char **why) {
    if (why) *why = "sfvit was built without oneDNN (-Ddnnl=disabled or libdnnl-dev missing)";
    return 0;
}
void sf_dnnl_describe(char *buf, size_t size) { snprintf(buf, size, "oneDNN: not built in"); }
int sf_dnnl_gemm_f32(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                     const float *B, float beta, float *C) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)B, (void)beta, (void)C;
    return -1;
}
int sf_dnnl_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                      const uint16_t *B16, float beta, float *C) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A16, (void)B16, (void)beta, (void)C;
    return -1;
}
int sf_dnnl_gemm_bf16_bias(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                           const float *bias, float *C) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A16, (void)B16, (void)bias, (void)C;
    return -1;
}
int sf_dnnl_gemm_bf16_bias_to_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                                   const float *bias, uint16_t *C16) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)A16, (void)B16, (void)bias, (void)C16;
    return -1;
}
int sf_dnnl_gemm_bf16_weight(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A16,
                             const float *W, const float *bias, float beta, float *C, uint16_t *C16) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A16, (void)W, (void)bias, (void)beta,
        (void)C, (void)C16;
    return -1;
}
long sf_dnnl_weights_packed(void) { return 0; }
int sf_dnnl_pack_weight_only(int ta, int tb, int M, int N, int K, float alpha, const float *W, int bias, float beta,
                             int c16) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)W, (void)bias, (void)beta, (void)c16;
    return -1;
}
void sf_dnnl_cache_reset(void) {}
size_t sf_dnnl_release_code(void) { return 0; }
int sf_dnnl_kernels(sf_dnnl_kernel *out, int max) {
    (void)out, (void)max;
    return 0;
}
void sf_dnnl_set_slow_pattern(const char *pattern) { (void)pattern; }
void sf_dnnl_stats(long *created, long *executed) {
    if (created) *created = 0;
    if (executed) *executed = 0;
}
#endif
