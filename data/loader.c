/* loader.c — the threaded batch loader: worker threads decode and transform samples into a
 * ring of `prefetch` batches while the trainer consumes the previous one.
 *
 * Order: training epochs are a permutation seeded by (seed, epoch); eval is in file order.
 * Sharding follows torch DistributedSampler: the order is padded to a multiple of world by
 * repeating from its start and rank r takes positions r, r+world, ... `fraction` keeps the
 * first part of the shard. Training drops the last partial batch; eval keeps it.
 * Repeated augmentation (`repeats` k > 1, DeiT's RASampler, timm RepeatAugSampler with
 * selected_round=0): each index of the permutation appears k times in a row, the k-fold
 * order is sharded as above (so with world >= k the copies go to different ranks), and each
 * rank keeps ceil(N / world) positions, the epoch length without repetition. Every copy is
 * a distinct position, so it gets its own augmentation.
 * Determinism: work is handed out per sample, but every sample's transform draws from a
 * generator seeded by (seed, epoch, position in the global order) and every batch's
 * mixup/cutmix from (seed, epoch, batch index), so the batches do not depend on the worker
 * count or on scheduling.
 * Bad files (corrupt, truncated, empty, not an image) are warned about once by name, counted,
 * and remembered. In training the slot is filled by the next positions of the order (the same
 * deterministic walk whatever the workers), so the batch size stays constant; in eval the
 * sample is left out of its batch (an evaluation must not count an image twice).
 * Deliberately not done: a per-process decode cache, GPU pinned memory.
 * Dimension legend: B batch, C channels, S image side, K classes.
 */
#include "sfvit/data.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY };

typedef struct ring_slot {
    int batch;            /* batch index this slot holds */
    int state;
    int done;             /* samples finished */
    float *images;        /* (B, C, S, S) */
    int *labels;          /* (B) */
    uint8_t *ok;          /* (B) eval: sample decoded */
    float *soft;          /* (B, K) or NULL */
} ring_slot;

struct sf_loader {
    const sf_dataset *ds;
    sf_loader_opts o;
    sf_aug_cfg aug;
    sf_randaug ra;
    int C, S, K, soft_on;
    size_t sample_floats;

    int *order;           /* (n) dataset indices of this rank's epoch order */
    int n;                /* positions used (after sharding and fraction) */
    int *global_pos;      /* (n) position in the global (unsharded) order, for seeding */
    int steps;
    int epoch;

    atomic_uchar *bad;    /* (count) 1 = known bad file */
    atomic_int *counted;  /* (count) gen + 1 when already counted in this epoch */
    atomic_int skipped;   /* distinct bad files met this epoch */
    atomic_int failed;    /* a worker found no readable image: sf_loader_next returns -1 */

    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv, idle_cv;
    pthread_t *threads;
    int nthreads, stop, inflight;
    int gen;              /* bumped by start_epoch: work of an older epoch is dropped */
    int assign_batch, assign_sample, consumed, holding;
    ring_slot *ring;
    int prefetch;
    double stall;
};

/* ---- seeding ---- */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* purpose: 1 epoch order, 2 sample transform, 3 batch mixup */
static void seed_for(sf_rng *r, uint64_t seed, int purpose, int epoch, uint64_t index) {
    uint64_t h = mix64(seed ^ mix64((uint64_t)purpose));
    h = mix64(h ^ mix64((uint64_t)(uint32_t)epoch + 0x1000));
    h = mix64(h ^ mix64(index + 0x2000000));
    sf_rng_seed(r, h);
}

/* ---- epoch order ---- */
static void build_order(sf_loader *l, int epoch) {
    int N = l->ds->count, world = l->o.world, rank = l->o.rank;
    const int k = l->o.train && l->o.repeats > 1 ? l->o.repeats : 1;
    int *perm = sf_malloc(sizeof(int) * N); // (N)
    for (int i = 0; i < N; i++) perm[i] = i;
    if (l->o.train) {
        sf_rng r;
        seed_for(&r, l->o.seed, 1, epoch, 0);
        for (int i = N - 1; i > 0; i--) {
            int j = (int)sf_rng_below(&r, (uint32_t)(i + 1));
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    /* DistributedSampler: total = ceil(N / world) * world, padded from the start */
    int per = (N + world - 1) / world;
    int use = per;
    if (l->o.fraction > 0 && l->o.fraction < 1) {
        use = (int)((double)per * l->o.fraction);
        if (use < 1) use = 1;
    }
    for (int p = 0; p < use; p++) {
        int g = rank + p * world;
        l->order[p] = perm[(int)(((long)g % ((long)N * k)) / k)];
        l->global_pos[p] = g;
    }
    l->n = use;
    l->steps = l->o.train ? use / l->o.batch_size : (use + l->o.batch_size - 1) / l->o.batch_size;
    free(perm);
}

/* ---- one sample ---- */
/* Decodes and transforms the sample at position pos into out. Training walks forward in the
 * order past bad files; eval reports them (returns 0). */
static void count_bad(sf_loader *l, int idx, int gen) {
    if (atomic_exchange(&l->counted[idx], gen + 1) != gen + 1) atomic_fetch_add(&l->skipped, 1);
}

static int load_sample(sf_loader *l, int pos, int gen, float *out, int *label, uint8_t **buf,
                       size_t *cap) {
    int tries = l->o.train ? l->n : 1;
    for (int t = 0; t < tries; t++) {
        int p = (pos + t) % l->n;
        int idx = l->order[p];
        if (atomic_load(&l->bad[idx])) {
            count_bad(l, idx, gen);
            continue;
        }
        char err[256];
        size_t len = 0;
        sf_image img;
        int rc = sf_read_file(l->ds->paths[idx], buf, cap, &len, err, sizeof(err));
        if (rc == 0) rc = sf_image_decode(*buf, len, l->C, &img, err, sizeof(err));
        if (rc != 0) {
            unsigned char expect = 0;
            if (atomic_compare_exchange_strong(&l->bad[idx], &expect, 1))
                sf_warn("skipping bad image %s: %s", l->ds->paths[idx], err);
            count_bad(l, idx, gen);
            continue;
        }
        /* the generator belongs to the slot's own position, so a replacement is drawn the
         * same way whichever worker finds the bad file */
        sf_rng r;
        seed_for(&r, l->o.seed, 2, l->epoch, (uint64_t)l->global_pos[pos]);
        if (l->o.train)
            sf_transform_train(&img, l->S, &l->aug, &l->ra, &r, out);
        else
            sf_transform_eval(&img, l->S, l->aug.crop_pct, sf_interp_pick(l->aug.interpolation, NULL),
                              l->aug.mean, l->aug.std, out);
        sf_image_free(&img);
        *label = l->ds->labels[idx];
        return 1;
    }
    return 0;
}

static int batch_len(const sf_loader *l, int b) {
    int B = l->o.batch_size;
    int rest = l->n - b * B;
    return rest < B ? rest : B;
}

/* Called by the worker that finished the last sample of a batch (outside the lock). */
static void finish_batch(sf_loader *l, ring_slot *s) {
    int size = batch_len(l, s->batch);
    if (!l->o.train) {
        /* eval: compact the samples that decoded */
        int k = 0;
        for (int i = 0; i < size; i++) {
            if (!s->ok[i]) continue;
            if (k != i) {
                memcpy(s->images + (size_t)k * l->sample_floats,
                       s->images + (size_t)i * l->sample_floats, sizeof(float) * l->sample_floats);
                s->labels[k] = s->labels[i];
            }
            k++;
        }
        s->done = k;
        return;
    }
    s->done = size;
    if (l->soft_on) {
        sf_rng r;
        seed_for(&r, l->o.seed, 3, l->epoch, (uint64_t)s->batch);
        sf_mixup_batch(s->images, size, l->C, l->S, l->S, s->labels, l->K, &l->aug, &r, s->soft,
                       NULL);
    }
}

static void *worker_main(void *arg) {
    sf_loader *l = arg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !(l->assign_batch < l->steps && l->assign_batch < l->consumed + l->prefetch))
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->stop) break;
        int b = l->assign_batch, i = l->assign_sample, gen = l->gen;
        ring_slot *s = &l->ring[b % l->prefetch];
        if (i == 0) {
            s->batch = b;
            s->state = SLOT_FILLING;
            s->done = 0;
        }
        if (++l->assign_sample == batch_len(l, b)) {
            l->assign_batch++;
            l->assign_sample = 0;
        }
        l->inflight++;
        pthread_mutex_unlock(&l->mu);

        int pos = b * l->o.batch_size + i;
        int good = load_sample(l, pos, gen, s->images + (size_t)i * l->sample_floats, &s->labels[i],
                               &buf, &cap);
        s->ok[i] = (uint8_t)good;
        if (!good && l->o.train && atomic_exchange(&l->failed, 1) == 0)
            sf_error("no readable image left in %s/%s", l->ds->root, l->ds->split);

        pthread_mutex_lock(&l->mu);
        /* a failed loader hands out nothing more; the consumer wakes up to return -1 */
        if (atomic_load(&l->failed)) {
            l->assign_batch = l->steps;
            pthread_cond_broadcast(&l->ready_cv);
        }
        /* an epoch restarted meanwhile drops the work; start_epoch waits for inflight == 0,
         * so nobody touches a slot (finish_batch included) while it resets them */
        else if (gen == l->gen && ++s->done == batch_len(l, b)) {
            pthread_mutex_unlock(&l->mu);
            finish_batch(l, s);
            pthread_mutex_lock(&l->mu);
            if (gen == l->gen) {
                s->state = SLOT_READY;
                pthread_cond_broadcast(&l->ready_cv);
            }
        }
        if (--l->inflight == 0) pthread_cond_broadcast(&l->idle_cv);
    }
    pthread_mutex_unlock(&l->mu);
    free(buf);
    return NULL;
}

sf_loader *sf_loader_create(const sf_dataset *ds, const sf_loader_opts *o) {
    SF_ASSERT(o->batch_size > 0 && o->img_size > 0);
    SF_ASSERT(o->in_chans == 1 || o->in_chans == 3, "in_chans=%d", o->in_chans);
    SF_ASSERT(o->aug != NULL);
    SF_ASSERT(o->world >= 1 && o->rank >= 0 && o->rank < o->world);
    if (ds->count == 0) {
        sf_error("dataset %s/%s is empty", ds->root, ds->split);
        return NULL;
    }
    sf_loader *l = sf_calloc(1, sizeof(*l));
    l->ds = ds;
    l->o = *o;
    l->aug = *o->aug;
    l->o.aug = &l->aug;
    if (sf_randaug_parse(o->train ? l->aug.randaugment : "", &l->ra) != 0) {
        free(l);
        return NULL;
    }
    l->C = o->in_chans;
    l->S = o->img_size;
    l->K = o->num_classes > 0 ? o->num_classes : ds->num_classes;
    l->soft_on = o->train && (l->aug.mixup > 0 || l->aug.cutmix > 0);
    l->sample_floats = (size_t)l->C * l->S * l->S;
    int per = (ds->count + o->world - 1) / o->world;
    l->order = sf_malloc(sizeof(int) * per);
    l->global_pos = sf_malloc(sizeof(int) * per);
    l->bad = sf_calloc((size_t)ds->count, sizeof(atomic_uchar));
    l->counted = sf_calloc((size_t)ds->count, sizeof(atomic_int));
    l->prefetch = o->prefetch > 0 ? o->prefetch : 1;
    l->ring = sf_calloc(l->prefetch, sizeof(ring_slot));
    for (int i = 0; i < l->prefetch; i++) {
        ring_slot *s = &l->ring[i];
        s->images = sf_aligned_alloc(sizeof(float) * l->sample_floats * o->batch_size);
        s->labels = sf_malloc(sizeof(int) * o->batch_size);
        s->ok = sf_malloc(o->batch_size);
        s->soft = l->soft_on ? sf_malloc(sizeof(float) * o->batch_size * l->K) : NULL;
        s->batch = -1;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    pthread_cond_init(&l->idle_cv, NULL);
    build_order(l, 0);
    l->assign_batch = l->consumed = l->steps; /* nothing to do until start_epoch */
    l->nthreads = o->workers > 0 ? o->workers : 1;
    l->threads = sf_malloc(sizeof(pthread_t) * l->nthreads);
    for (int i = 0; i < l->nthreads; i++) {
        int rc = pthread_create(&l->threads[i], NULL, worker_main, l);
        SF_ASSERT(rc == 0, "pthread_create failed (%d)", rc);
    }
    return l;
}

void sf_loader_start_epoch(sf_loader *l, int epoch, int start_step) {
    pthread_mutex_lock(&l->mu);
    l->gen++;
    l->assign_batch = l->consumed = l->steps; /* stop handing out work */
    while (l->inflight > 0) pthread_cond_wait(&l->idle_cv, &l->mu);
    l->epoch = epoch;
    build_order(l, epoch);
    atomic_store(&l->skipped, 0);
    for (int i = 0; i < l->prefetch; i++) {
        l->ring[i].state = SLOT_FREE;
        l->ring[i].batch = -1;
    }
    if (start_step < 0) start_step = 0;
    if (start_step > l->steps) start_step = l->steps;
    l->assign_batch = l->consumed = start_step;
    l->assign_sample = 0;
    l->holding = 0;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
}

int sf_loader_next(sf_loader *l, sf_batch *b) {
    pthread_mutex_lock(&l->mu);
    if (l->holding) { /* release the batch returned by the previous call */
        l->ring[l->consumed % l->prefetch].state = SLOT_FREE;
        l->consumed++;
        l->holding = 0;
        pthread_cond_broadcast(&l->work_cv);
    }
    if (l->consumed >= l->steps) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    ring_slot *s = &l->ring[l->consumed % l->prefetch];
    if (!(s->state == SLOT_READY && s->batch == l->consumed) && !atomic_load(&l->failed)) {
        double t0 = sf_now();
        while (!(s->state == SLOT_READY && s->batch == l->consumed) && !atomic_load(&l->failed))
            pthread_cond_wait(&l->ready_cv, &l->mu);
        l->stall += sf_now() - t0;
    }
    if (atomic_load(&l->failed)) {
        pthread_mutex_unlock(&l->mu);
        return -1;
    }
    l->holding = 1;
    b->size = s->done;
    b->images = s->images;
    b->labels = s->labels;
    b->soft_targets = s->soft;
    pthread_mutex_unlock(&l->mu);
    return 1;
}

int sf_loader_steps_per_epoch(const sf_loader *l) { return l->steps; }

int sf_loader_img_size(const sf_loader *l) { return l->S; }

int sf_loader_skipped(const sf_loader *l) {
    return atomic_load(&((sf_loader *)l)->skipped);
}

double sf_loader_stall_seconds(sf_loader *l) {
    pthread_mutex_lock(&l->mu);
    double s = l->stall;
    l->stall = 0;
    pthread_mutex_unlock(&l->mu);
    return s;
}

void sf_loader_free(sf_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
    for (int i = 0; i < l->prefetch; i++) {
        free(l->ring[i].images);
        free(l->ring[i].labels);
        free(l->ring[i].ok);
        free(l->ring[i].soft);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->idle_cv);
    free(l->ring);
    free(l->threads);
    free((void *)l->bad);
    free((void *)l->counted);
    free(l->order);
    free(l->global_pos);
    free(l);
}
