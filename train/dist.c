/* dist.c — the MPI layer of data-parallel training: init/finalize, rank and world, the
 * in-place gradient all-reduce, parameter broadcast, BatchNorm statistic reduction (the hook
 * src/ops/norm.c calls) and small collective agreements (sums, all-ok).
 *
 * Built without MPI (no SFVIT_HAVE_MPI) or started without a launcher, everything is the
 * single-process identity: rank 0, world 1, sums and broadcasts leave buffers unchanged.
 * Deliberately not here: overlapping the reduction with backward (no per-parameter hook on
 * the tape), gradient compression, any collective other than MPI_COMM_WORLD.
 */
#include "dist_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef SFVIT_HAVE_MPI
#include <mpi.h>
#endif


static int g_rank = 0, g_world = 1, g_local_world = 1, g_inited = 0;
static double g_allreduce_seconds = 0;
static long g_allreduce_calls = 0;

/* Gradients are reduced in buckets of this many floats (16 MiB): large enough that the
 * per-message latency is negligible, small enough that the transport need not stage the
 * whole buffer at once. */
enum { BUCKET_FLOATS = 1 << 22 };

#ifdef SFVIT_HAVE_MPI
static void dist_finalize(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

static void bn_allreduce_mpi(double *buf, int n) {
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
#endif

/* A launcher (Open MPI's mpirun, PMI/PMIx-based srun or hydra) sets one of these. */
static int under_launcher(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

int sf_dist_init(void) {
    if (g_inited) return g_world;
    g_inited = 1;
    if (!under_launcher()) return g_world;
#ifdef SFVIT_HAVE_MPI
    int provided = 0;
    /* Loader threads never call MPI: only the main thread does. */
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    atexit(dist_finalize);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &g_local_world);
    MPI_Comm_free(&node);
#else
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    if (v && atoi(v) > 1) {
        sf_error("started by an MPI launcher with %s ranks, but this sfvit was built without MPI", v);
        sf_hint("apt-get install libopenmpi-dev, then `meson setup --reconfigure -Dmpi=enabled BUILD`");
        g_world = -1; /* every rank would train alone on the same run folder: refuse */
    }
#endif
    return g_world;
}

int sf_dist_rank(void) { return g_rank; }
int sf_dist_local_world(void) { return g_local_world; }

void sf_dist_sum(double *buf, int n) {
    if (g_world == 1) return;
#ifdef SFVIT_HAVE_MPI
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)buf;
    (void)n;
#endif
}

int sf_dist_all_ok(int ok) {
    if (g_world == 1) return ok != 0;
#ifdef SFVIT_HAVE_MPI
    int v = ok != 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
#else
    return ok != 0;
#endif
}

void sf_dist_broadcast(float *buf, size_t n) {
    if (g_world == 1) return;
#ifdef SFVIT_HAVE_MPI
    for (size_t at = 0; at < n; at += BUCKET_FLOATS) {
        size_t len = n - at < BUCKET_FLOATS ? n - at : BUCKET_FLOATS;
        MPI_Bcast(buf + at, (int)len, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
#else
    (void)buf;
    (void)n;
#endif
}

/* The whole contiguous gradient buffer is reduced (views without a gradient hold zeros, and
 * one span is cheaper than a message per view). Sum, then scale: each rank's gradient is the
 * mean over its B/P samples, so the average over ranks is the mean over the global batch. */
void sf_dist_allreduce_grads(sf_params *ps) {
    if (g_world == 1) return;
#ifdef SFVIT_HAVE_MPI
    const double t0 = MPI_Wtime();
    float *g = ps->grad;  // (total)
    const size_t n = ps->total;
    for (size_t at = 0; at < n; at += BUCKET_FLOATS) {
        size_t len = n - at < BUCKET_FLOATS ? n - at : BUCKET_FLOATS;
        MPI_Allreduce(MPI_IN_PLACE, g + at, (int)len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    const float inv = 1.0f / (float)g_world;
#pragma omp parallel for if (n > 65536)
    for (size_t i = 0; i < n; i++) g[i] *= inv;
    g_allreduce_seconds += MPI_Wtime() - t0;
    g_allreduce_calls++;
#else
    (void)ps;
#endif
}

void sf_dist_allreduce_stats(double *seconds, long *calls) {
    *seconds = g_allreduce_seconds;
    *calls = g_allreduce_calls;
}

void sf_dist_broadcast_params(sf_params *ps, int with_optim) {
    if (g_world == 1) return;
    sf_dist_broadcast(ps->data, ps->total);
    if (with_optim) {
        sf_dist_broadcast(ps->m, ps->total);
        sf_dist_broadcast(ps->v, ps->total);
    }
}

void sf_dist_broadcast_buffers(sf_params *ps) {
    if (g_world == 1) return;
    for (int i = 0; i < ps->count; i++)
        if (!(ps->list[i].flags & SF_PARAM_TRAINABLE))
            sf_dist_broadcast(ps->data + ps->list[i].offset, ps->list[i].t->numel);
}

/* FNV-1a over the bytes of the parameter buffer. */
static uint64_t params_checksum(const sf_params *ps) {
    const unsigned char *p = (const unsigned char *)ps->data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < ps->total * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int sf_dist_params_in_sync(const sf_params *ps) {
    if (g_world == 1) return 1;
#ifdef SFVIT_HAVE_MPI
    uint64_t h = params_checksum(ps), lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
#else
    (void)params_checksum;
    (void)ps;
    return 1;
#endif
}

void (*sf_dist_batchnorm_hook(int on))(double *, int) {
#ifdef SFVIT_HAVE_MPI
    return on && g_world > 1 ? bn_allreduce_mpi : NULL;
#else
    (void)on;
    return NULL;
#endif
}
