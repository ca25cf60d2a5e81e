/* memory.c — does a training step fit in this machine's memory? Answered before anything
 * runs, so that a batch too large for the machine is an error naming train.batch_size and the
 * micro-batch that fits, instead of a process the kernel kills minutes into its first step.
 *
 * The activation arena of a step grows linearly with the micro-batch: fixed + B · per_image.
 * Both come from two probe steps (forward, loss, backward) of four and eight images (fewer
 * for a smaller micro-batch) in a context of their own; the same for an evaluation forward,
 * of two and four. The probe changes nothing the run sees: the buffers (BatchNorm's running
 * statistics) are copied back, the gradients zeroed, and oneDNN's cached primitives for the
 * probe's shapes dropped (they would crowd the run's out of the cache). Everything else the
 * process will hold is counted by the caller: parameters with gradients and moments, the EMA
 * copy, the loaders' rings.
 *
 * What the process may use: SFVIT_MEMORY_MIB when set (off: no probe, no check); otherwise
 * what it holds now plus the kernel's MemAvailable (no more than a cgroup v2 memory.max
 * leaves), shared evenly by the ranks of a node. Memory the kernel could still reclaim or swap
 * is not counted: the check is for the gross case (a 1024-image recipe batch on a
 * workstation), where it is never close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/dist.h"
#include "sfvit/precision.h"
#include "sfvit/train.h"

/* Peak bytes of the activation arena over one training step (train) or one evaluation
 * forward (!train) of n random images. */
static double probe_peak(sf_model *m, sf_params *ps, const sf_model_cfg *mc, int n, int train) {
    /* bf16: only the weights' copies a step of n images asks for, as the run's step would
     * (those of a smaller step's products would stay, next to this step's activations) */
    sf_bf16_weights_clear();
    sf_precision_weights_refresh(ps);
    sf_ctx g;
    sf_ctx_init(&g, 0);
    g.training = train;
    g.grad_enabled = train;
    sf_tensor x = {.ndim = 4, .shape = {n, mc->in_chans, mc->img_size, mc->img_size}};
    x.numel = (size_t)n * mc->in_chans * mc->img_size * mc->img_size;
    x.data = sf_aligned_alloc(x.numel * sizeof(float));
    sf_rng rng;
    sf_rng_seed(&rng, 0x6d656d);
    for (size_t i = 0; i < x.numel; i++) x.data[i] = sf_rng_normal(&rng);
    int *labels = sf_calloc((size_t)n, sizeof *labels);
    sf_tensor *logits = sf_model_forward(&g, m, &x);
    if (train) sf_backward(&g, sf_cross_entropy(&g, logits, labels, NULL, 0.0f));
    const double peak = (double)sf_ctx_arena_peak(&g);
    sf_ctx_free(&g);
    free(x.data);
    free(labels);
    return peak;
}

/* fixed + n * per_image through the peaks at n and 2n images. Small steps are shaped
 * differently: at one image some ops' work is (the Fashion-MNIST model's peak is 1.3, 2.9,
 * 4.8, 8.6 MiB at 1, 2, 4, 8 images; a line through 1 and 2 overestimated its 32-image step by
 * 60 %), and up to a few images the scratch an op gives back can hold the next activations
 * whole, which larger steps' cannot (the Fashion-MNIST SOFT model: 9.8, 17.2, 32.3, 64.5,
 * 96.7 MiB at 2, 4, 8, 16, 24 images; through 2 and 4 its 24-image step came out 5 % low,
 * the CvT model's 10 % low). Through 4 and 8, at 32 images, the SOFT model's is 4.2 % low,
 * the other Fashion-MNIST models' 0 to 1.7 %, and at 16 images DeiT-S's, XCiT-S12's,
 * SOFT-Tiny's and CvT-13's within 0.4 %. */
static void add_line(sf_memory_need *need, int n, double at_n, double at_2n) {
    const double per_image = at_2n > at_n ? (at_2n - at_n) / n : at_n / n;
    need->per_image += per_image;
    need->fixed += at_n > n * per_image ? at_n - n * per_image : 0.0;
}

/* The probe's image counts for a step of micro_batch images: 4 and 8, or for a smaller step
 * half of it and itself (1 and 2 for a step of one image), so a probe holds no more than the
 * run's own step, or two images. */
static int probe_images(int micro_batch) {
    const int top = micro_batch >= 8 ? 8 : micro_batch >= 2 ? micro_batch : 2;
    return top / 2;
}

/* Copies the buffers (parameters without gradients: BatchNorm's running statistics, the
 * only values a training forward writes into the store) into saved, or back from it. Not
 * the trainable parameters, which a forward and backward only read: a copy of all of them
 * was held next to the probe's step, and for DeiT-S (84 MiB of parameters) it made the
 * probe, not the run, the process's peak (927 against 845 MiB at 8 images). */
static size_t buffers_copy(sf_params *ps, float *saved, int back) {
    size_t at = 0;
    for (int i = 0; i < ps->count; i++) {
        const sf_param *p = &ps->list[i];
        if (p->flags & SF_PARAM_TRAINABLE) continue;
        float *data = ps->data + p->offset;
        if (saved) memcpy(back ? data : saved + at, back ? saved + at : data, p->t->numel * sizeof(float));
        at += p->t->numel;
    }
    return at;
}

void sf_memory_probe(sf_model *m, sf_params *ps, const sf_model_cfg *mc, int micro_batch, sf_memory_need *train,
                     sf_memory_need *eval) {
    float *saved = sf_malloc((buffers_copy(ps, NULL, 0) + 1) * sizeof(float));
    buffers_copy(ps, saved, 0);
    const int n = probe_images(micro_batch);
    const double at_n = probe_peak(m, ps, mc, n, 1), at_2n = probe_peak(m, ps, mc, 2 * n, 1);
    add_line(train, n, at_n, at_2n);
    if (eval) {
        const double at_2 = probe_peak(m, ps, mc, 2, 0), at_4 = probe_peak(m, ps, mc, 4, 0);
        add_line(eval, 2, at_2, at_4);
    }
    buffers_copy(ps, saved, 1);
    free(saved);
    sf_params_zero_grad(ps);
    /* the run makes its own copies (kept, a probe's would be updated by the optimizer all run) */
    sf_bf16_weights_clear();
    sf_dnnl_cache_reset();
    sf_profile_reset();
}

double sf_proc_value(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1.0;
    char line[256];
    const size_t n = strlen(key);
    double v = -1.0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = atof(line + n + 1) * 1024.0;
            break;
        }
    fclose(f);
    return v;
}

/* A cgroup v2 file holding one number ("max" = no limit); -1 if absent or unlimited. */
static double cgroup_value(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
    FILE *f = fopen(path, "r");
    if (!f) return -1.0;
    char s[64] = "";
    const int ok = fgets(s, sizeof s, f) != NULL;
    fclose(f);
    return ok && s[0] >= '0' && s[0] <= '9' ? atof(s) : -1.0;
}

double sf_memory_held(void) {
    const double rss = sf_proc_value("/proc/self/status", "VmRSS");
    return rss > 0 ? rss : 0.0;
}

double sf_memory_available(const char **source) {
    const char *env = getenv("SFVIT_MEMORY_MIB");
    if (env && *env) {
        if (source) *source = strcmp(env, "off") ? "SFVIT_MEMORY_MIB" : "SFVIT_MEMORY_MIB=off";
        if (!strcmp(env, "off")) return -1.0;
        char *end;
        const double mib = strtod(env, &end);
        if (*end || !(mib > 0))
            return sf_error("SFVIT_MEMORY_MIB='%s' is neither a number of MiB above 0 nor off", env), -2.0;
        return mib * 1048576.0;
    }
    double free_bytes = sf_proc_value("/proc/meminfo", "MemAvailable");
    const double max = cgroup_value("memory.max"), cur = cgroup_value("memory.current");
    if (max > 0 && cur >= 0 && (free_bytes < 0 || max - cur < free_bytes)) free_bytes = max > cur ? max - cur : 0.0;
    if (source) *source = free_bytes < 0 ? "no /proc/meminfo" : "MemAvailable";
    if (free_bytes < 0) return -1.0; /* not Linux: nothing to check against */
    const int ranks = sf_dist_local_world() > 1 ? sf_dist_local_world() : 1;
    return sf_memory_held() + free_bytes / ranks;
}

double sf_memory_at(const sf_memory_need *need, int micro_batch) {
    return need->fixed + micro_batch * need->per_image;
}

int sf_memory_fit(const sf_memory_need *need, double available) {
    if (need->per_image <= 0 || available <= need->fixed) return 0;
    const double b = (available - need->fixed) / need->per_image;
    return b > 1e9 ? 1000000000 : (int)b;
}

const char *sf_memory_str(double bytes, char buf[32]) {
    if (bytes >= 1073741824.0)
        snprintf(buf, 32, "%.1f GiB", bytes / 1073741824.0);
    else
        snprintf(buf, 32, "%.0f MiB", bytes / 1048576.0);
    return buf;
}
