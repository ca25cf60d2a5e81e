/* test_checkpoint.c — the parameter store through safetensors: exact round trip (F32, the
 * I64 BatchNorm counter, AdamW moments, metadata), missing / unexpected / mismatched keys
 * reported by name, strict vs non-strict loads, skipped prefixes, and atomic writes: no
 * temporary file left, a failed write (missing folder, file-size limit hit mid-write, a
 * writer killed at random moments) keeps the previous checkpoint loadable.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradcheck.h"
#include "sfvit/checkpoint.h"

static char tmpdir[256];

/* A small model-like store. head_out changes the head's shape; extra adds a parameter the
 * checkpoint will not have; no_rm drops bn.running_mean. */
static void build(sf_params *ps, int head_out, int extra, int no_rm, int nbt_ndim) {
    sf_params_init(ps);
    const int T = SF_PARAM_TRAINABLE, D = SF_PARAM_DECAY;
    sf_param_add(ps, "patch_embed.proj.weight", 4, (int[]){4, 3, 2, 2}, T | D, SF_INIT_TRUNC_NORMAL, 0.02f);
    sf_param_add(ps, "patch_embed.proj.bias", 1, (int[]){4}, T, SF_INIT_ZEROS, 0);
    if (!no_rm) sf_param_add(ps, "bn.running_mean", 1, (int[]){4}, 0, SF_INIT_ZEROS, 0);
    sf_param_add(ps, "bn.num_batches_tracked", nbt_ndim, (int[]){1}, SF_PARAM_I64, SF_INIT_ZEROS, 0);
    if (extra) sf_param_add(ps, "extra.weight", 1, (int[]){3}, T, SF_INIT_ONES, 0);
    sf_param_add(ps, "head.weight", 2, (int[]){head_out, 4}, T | D, SF_INIT_TRUNC_NORMAL, 0.02f);
    sf_param_add(ps, "head.bias", 1, (int[]){head_out}, T, SF_INIT_ZEROS, 0);
    sf_params_alloc(ps);
}

static void fill(sf_params *ps, uint64_t seed) {
    sf_rng r;
    sf_rng_seed(&r, seed);
    for (size_t i = 0; i < ps->total; i++) {
        ps->data[i] = sf_rng_normal(&r);
        ps->m[i] = sf_rng_normal(&r);
        ps->v[i] = sf_rng_uniform(&r);
    }
    sf_param *nbt = sf_params_find(ps, "bn.num_batches_tracked");
    if (nbt) nbt->t->data[0] = (float)(seed % 100000);
}

static int view_equal(const sf_params *a, const sf_params *b, const float *ba, const float *bb, int i) {
    const sf_param *p = &a->list[i], *q = &b->list[i];
    return memcmp(ba + p->offset, bb + q->offset, p->t->numel * sizeof(float)) == 0;
}

static int count_tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void test_round_trip(void) {
    sf_params a, b;
    build(&a, 10, 0, 0, 0);
    build(&b, 10, 0, 0, 0);
    fill(&a, 12345);
    fill(&b, 999);
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
    const sf_kv meta[] = {{"epoch", "7"}, {"config", "model:\n  name: \"\"\n"}, {"rng_data", "1 2 3 4"}};
    CHECK(sf_checkpoint_save(path, &a, 1, meta, 3) == 0, "save");
    CHECK(count_tmp_files() == 0, "temporary file left after a successful save");

    /* The file itself: dtypes and the moment keys of trainable parameters only. */
    sf_st_file f;
    CHECK(sf_st_open(&f, path) == 0, "reopen");
    CHECK(f.n_entries == 6 + 2 * 4, "entries %d (6 params + 2 moments x 4 trainable)", f.n_entries);
    const sf_st_entry *e = sf_st_find(&f, "bn.num_batches_tracked");
    CHECK(e && e->dtype == SF_DTYPE_I64 && e->ndim == 0, "num_batches_tracked saved as I64 []");
    int64_t nbt = 0;
    CHECK(e && sf_st_read_i64(&f, e, &nbt, 1) == 0 && nbt == 12345, "I64 value %lld", (long long)nbt);
    CHECK(sf_st_find(&f, "optim.exp_avg.head.weight") && sf_st_find(&f, "optim.exp_avg_sq.patch_embed.proj.bias"),
          "moment keys");
    CHECK(!sf_st_find(&f, "optim.exp_avg.bn.running_mean"), "no moments for non-trainable");
    CHECK(f.crc_checked, "crc present and verified");
    sf_st_close(&f);

    sf_ckpt_report rep;
    sf_ckpt_opts o = {.strict = 1, .load_optim = 1};
    CHECK(sf_checkpoint_load(path, &b, &o, &rep) == 0, "strict load");
    CHECK(rep.n_loaded == 6 && rep.n_missing == 0 && rep.n_unexpected == 0 && rep.n_mismatch == 0,
          "report %d %d %d %d", rep.n_loaded, rep.n_missing, rep.n_unexpected, rep.n_mismatch);
    for (int i = 0; i < a.count; i++) {
        CHECK(view_equal(&a, &b, a.data, b.data, i), "%s differs after load", a.list[i].t->name);
        CHECK(rep.loaded[i] == 1, "%s not flagged loaded", a.list[i].t->name);
        if (a.list[i].flags & SF_PARAM_TRAINABLE) {
            CHECK(view_equal(&a, &b, a.m, b.m, i), "m of %s differs", a.list[i].t->name);
            CHECK(view_equal(&a, &b, a.v, b.v, i), "v of %s differs", a.list[i].t->name);
        }
    }
    CHECK(sf_ckpt_meta_get(&rep, "epoch") && !strcmp(sf_ckpt_meta_get(&rep, "epoch"), "7"), "meta epoch");
    CHECK(sf_ckpt_meta_get(&rep, "config") && !strcmp(sf_ckpt_meta_get(&rep, "config"), meta[1].value), "meta config");
    CHECK(sf_ckpt_meta_get(&rep, "missing") == NULL, "absent meta");
    sf_ckpt_report_free(&rep);

    /* Without load_optim the moments stay as they are and the optim keys are not "unexpected". */
    sf_params c;
    build(&c, 10, 0, 0, 0);
    fill(&c, 5);
    float m0 = c.m[c.list[0].offset];
    CHECK(sf_checkpoint_load(path, &c, &(sf_ckpt_opts){.strict = 1}, NULL) == 0, "strict load without moments");
    CHECK(c.m[c.list[0].offset] == m0, "moments untouched when not requested");
    CHECK(view_equal(&a, &c, a.data, c.data, 0), "values loaded");
    sf_params_free(&c);

    /* PyTorch stores the counter as []; a store that registered it as [1] loads it too. */
    build(&c, 10, 0, 0, 1);
    CHECK(sf_checkpoint_load(path, &c, &(sf_ckpt_opts){.strict = 1}, NULL) == 0, "[] loads into [1]");
    CHECK(sf_params_find(&c, "bn.num_batches_tracked")->t->data[0] == 12345.0f, "counter value");
    sf_params_free(&c);

    /* Saved without moments, loaded asking for them: strict fails naming the moment keys. */
    char path2[512];
    snprintf(path2, sizeof path2, "%s/nooptim.safetensors", tmpdir);
    CHECK(sf_checkpoint_save(path2, &a, 0, NULL, 0) == 0, "save without optimizer");
    fill(&b, 4242);
    float before = b.data[0];
    int saved = capture_begin();
    int rc = sf_checkpoint_load(path2, &b, &(sf_ckpt_opts){.strict = 1, .load_optim = 1}, &rep);
    capture_end(saved);
    CHECK(rc == -1, "strict load_optim on a file without moments fails");
    CHECK(strstr(errbuf, "optim.exp_avg.head.weight") != NULL, "names the missing moment: %s", errbuf);
    CHECK(rep.n_missing == 8 && rep.n_loaded == 0, "missing %d loaded %d", rep.n_missing, rep.n_loaded);
    CHECK(b.data[0] == before, "strict failure leaves the parameters unchanged");
    sf_ckpt_report_free(&rep);
    sf_params_free(&a);
    sf_params_free(&b);
}

static void test_mismatch(void) {
    sf_params a, b;
    build(&a, 10, 0, 0, 0);
    fill(&a, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/mm.safetensors", tmpdir);
    CHECK(sf_checkpoint_save(path, &a, 0, NULL, 0) == 0, "save");
    /* b: head of 5 classes, an extra parameter, and no bn.running_mean. */
    build(&b, 5, 1, 1, 0);
    fill(&b, 2);
    float head0 = sf_params_find(&b, "head.weight")->t->data[0];
    float pe0 = sf_params_find(&b, "patch_embed.proj.weight")->t->data[0];

    sf_ckpt_report rep;
    int saved = capture_begin();
    int rc = sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 1}, &rep);
    capture_end(saved);
    printf("strict load of a mismatched checkpoint:\n%s", errbuf);
    CHECK(rc == -1, "strict load must fail");
    CHECK(strstr(errbuf, "1 keys missing") && strstr(errbuf, "extra.weight"), "missing listed by name");
    CHECK(strstr(errbuf, "1 unexpected") && strstr(errbuf, "bn.running_mean"), "unexpected listed by name");
    CHECK(strstr(errbuf, "2 keys with a different shape") && strstr(errbuf, "head.weight (model (5, 4), file F32 [10, 4])"),
          "mismatch listed with both shapes");
    CHECK(rep.n_missing == 1 && rep.n_unexpected == 1 && rep.n_mismatch == 2 && rep.n_loaded == 0, "strict report");
    CHECK(sf_params_find(&b, "patch_embed.proj.weight")->t->data[0] == pe0, "strict failure loads nothing");
    sf_ckpt_report_free(&rep);

    saved = capture_begin();
    rc = sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 0}, &rep);
    capture_end(saved);
    CHECK(rc == 0, "non-strict load succeeds");
    CHECK(strstr(errbuf, "warning") && strstr(errbuf, "head.bias"), "non-strict still lists: %s", errbuf);
    CHECK(rep.n_loaded == 3, "loaded %d (patch_embed x2 + num_batches_tracked)", rep.n_loaded);
    for (int i = 0; i < b.count; i++) {
        const char *n = b.list[i].t->name;
        int expect = !strncmp(n, "patch_embed", 11) || !strcmp(n, "bn.num_batches_tracked");
        CHECK(rep.loaded[i] == expect, "%s loaded flag %d", n, rep.loaded[i]);
    }
    CHECK(sf_params_find(&b, "head.weight")->t->data[0] == head0, "mismatched param keeps its value");
    CHECK(view_equal(&a, &b, a.data, b.data, 0), "matching param loaded");
    sf_ckpt_report_free(&rep);

    /* Fine-tuning: skip the head; it is then neither loaded nor reported. */
    const char *skip[] = {"head."};
    saved = capture_begin();
    rc = sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 0, .skip_prefixes = skip, .n_skip = 1}, &rep);
    capture_end(saved);
    CHECK(rc == 0 && rep.n_skipped == 2 && rep.n_mismatch == 0, "skip head: skipped %d mismatch %d", rep.n_skipped,
          rep.n_mismatch);
    CHECK(!strstr(errbuf, "head.weight"), "skipped prefix not reported: %s", errbuf);
    sf_ckpt_report_free(&rep);
    sf_params_free(&b);

    /* Many missing names: at most 20 printed, then "... and N more". */
    sf_params big;
    sf_params_init(&big);
    for (int i = 0; i < 30; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "blocks.%d.weight", i);
        sf_param_add(&big, nm, 1, (int[]){2}, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    }
    sf_params_alloc(&big);
    saved = capture_begin();
    rc = sf_checkpoint_load(path, &big, &(sf_ckpt_opts){.strict = 1}, &rep);
    capture_end(saved);
    CHECK(rc == -1 && rep.n_missing == 30 && rep.n_unexpected == 6, "30 missing, 6 unexpected");
    CHECK(strstr(errbuf, "blocks.19.weight") && !strstr(errbuf, "blocks.20.weight") && strstr(errbuf, "... and 10 more"),
          "list capped at 20: %s", errbuf);
    sf_ckpt_report_free(&rep);
    sf_params_free(&big);

    /* A corrupt checkpoint is an error, not a partial load. */
    size_t n;
    FILE *fp = fopen(path, "r+b");
    fseek(fp, 0, SEEK_END);
    n = (size_t)ftell(fp);
    fseek(fp, (long)n - 2, SEEK_SET);
    fputc(0x55, fp);
    fclose(fp);
    build(&b, 10, 0, 0, 0);
    saved = capture_begin();
    rc = sf_checkpoint_load(path, &b, NULL, &rep);
    capture_end(saved);
    CHECK(rc == -1 && strstr(errbuf, "CRC32 mismatch"), "corrupt checkpoint refused: %s", errbuf);
    sf_ckpt_report_free(&rep);
    sf_params_free(&b);
    sf_params_free(&a);
}

static void test_failed_writes(void) {
    sf_params a, big;
    build(&a, 10, 0, 0, 0);
    fill(&a, 77);
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", tmpdir);
    int saved = capture_begin();
    int rc = sf_checkpoint_save(path, &a, 1, NULL, 0);
    capture_end(saved);
    CHECK(rc == -1 && strstr(errbuf, path) && strstr(errbuf, "No such file"), "missing folder: %s", errbuf);

    /* A write that runs out of space half way (file-size limit stands in for a full disk):
     * the error names the path, the temp file is removed and the old checkpoint survives. */
    snprintf(path, sizeof path, "%s/keep.safetensors", tmpdir);
    CHECK(sf_checkpoint_save(path, &a, 1, NULL, 0) == 0, "first save");
    sf_params_init(&big);
    sf_param_add(&big, "huge", 1, (int[]){1 << 18}, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_params_alloc(&big);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    saved = capture_begin();
    rc = sf_checkpoint_save(path, &big, 1, NULL, 0);
    capture_end(saved);
    setrlimit(RLIMIT_FSIZE, &old);
    printf("  disk-full stand-in -> %s", errbuf);
    CHECK(rc == -1 && strstr(errbuf, path) && strstr(errbuf, "File too large"), "size-limited write fails: %s", errbuf);
    CHECK(count_tmp_files() == 0, "temporary file removed after the failed write");
    sf_params b;
    build(&b, 10, 0, 0, 0);
    CHECK(sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 1, .load_optim = 1}, NULL) == 0,
          "old checkpoint still loads");
    CHECK(view_equal(&a, &b, a.data, b.data, 0), "old checkpoint intact");

    /* A read-only folder (only meaningful when not root: root ignores permissions). */
    char ro[300];
    snprintf(ro, sizeof ro, "%s/ro", tmpdir);
    mkdir(ro, 0755);
    snprintf(path, sizeof path, "%s/x.safetensors", ro);
    CHECK(sf_checkpoint_save(path, &a, 0, NULL, 0) == 0, "save into the folder");
    if (geteuid() != 0) {
        chmod(ro, 0555);
        saved = capture_begin();
        rc = sf_checkpoint_save(path, &big, 0, NULL, 0);
        capture_end(saved);
        chmod(ro, 0755);
        CHECK(rc == -1 && strstr(errbuf, "Permission denied"), "read-only folder: %s", errbuf);
        CHECK(sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 1}, NULL) == 0, "old file kept");
    } else {
        printf("  (running as root: the read-only folder case is covered by the size-limit case above)\n");
    }
    sf_params_free(&b);
    sf_params_free(&big);
    sf_params_free(&a);
}

/* Reads from fd until the text `want` has arrived (or end of file): 1 when it has. */
static int read_until(int fd, const char *want) {
    char buf[4096];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0) return 0;
        n += (size_t)r;
        buf[n] = 0;
        if (strstr(buf, want)) return 1;
        if (n > sizeof buf / 2) {  // keep the tail, where a split `want` may start
            memmove(buf, buf + n - sizeof buf / 4, sizeof buf / 4);
            n = sizeof buf / 4;
        }
    }
}

/* Kill a process that saves in a loop: the checkpoint at the path must always load, holding
 * one of the complete versions (never a torn file), and the newest one finished before the
 * kill or the one being written. The child reports each finished save on a pipe; in every
 * other round it is killed half-way through writing the next one (SFVIT_TEST_HOLD), in the
 * others just after its k-th save, wherever the next one has got to. No timing is assumed. */
static void test_kill_writer(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/kill.safetensors", tmpdir);
    sf_params a;
    sf_params_init(&a);
    sf_param_add(&a, "w", 1, (int[]){1 << 19}, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
    sf_params_alloc(&a);
    for (size_t i = 0; i < a.total; i++) a.data[i] = -1.0f;
    CHECK(sf_checkpoint_save(path, &a, 1, NULL, 0) == 0, "initial save");
    sf_rng r;
    sf_rng_seed(&r, (uint64_t)time(NULL));
    int ok = 0, mid_write = 0;
    for (int round = 0; round < 8; round++) {
        const int k = 1 + (int)sf_rng_below(&r, 3), hold = round % 2 == 0;
        int saved[2], err[2];
        SF_ASSERT(pipe(saved) == 0 && pipe(err) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(saved[0]);
            close(err[0]);
            dup2(err[1], 2);
            /* the k finished saves pass; the next one holds in its write */
            char spec[256] = "";
            for (int i = 0; i < k; i++) strcat(spec, "pass write kill.safetensors;");
            strcat(spec, "write kill.safetensors");
            if (hold) setenv("SFVIT_TEST_HOLD", spec, 1);
            for (int v = 0;; v++) {
                for (size_t i = 0; i < a.total; i++) a.data[i] = (float)v;
                if (sf_checkpoint_save(path, &a, 1, NULL, 0) != 0) _exit(3);
                if (write(saved[1], "s", 1) != 1) _exit(4);
            }
        }
        close(saved[1]);
        close(err[1]);
        char byte;
        int finished = 0;
        while (finished < k && read(saved[0], &byte, 1) == 1) finished++;
        if (hold) mid_write += read_until(err[0], "sfvit test hook: held at write kill.safetensors");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(saved[0]);
        close(err[0]);
        sf_params b;
        sf_params_init(&b);
        sf_param_add(&b, "w", 1, (int[]){1 << 19}, SF_PARAM_TRAINABLE, SF_INIT_ZEROS, 0);
        sf_params_alloc(&b);
        int rc = sf_checkpoint_load(path, &b, &(sf_ckpt_opts){.strict = 1, .load_optim = 1}, NULL);
        int uniform = 1;
        for (size_t i = 1; i < b.total; i++) uniform &= b.data[i] == b.data[0];
        /* saves 0..k-1 finished: version k-1, or k when the next one also finished */
        const float v = b.data[0];
        const int expected = hold ? v == (float)(k - 1) : (v == (float)(k - 1) || v == (float)k);
        CHECK(rc == 0 && uniform && finished == k && expected,
              "round %d (%s after %d saves): loaded %d, whole %d, version %g", round,
              hold ? "killed mid-write" : "killed", finished, rc == 0, uniform, (double)v);
        ok += rc == 0 && uniform && expected;
        sf_params_free(&b);
    }
    CHECK(ok == 8, "after killing the writer the checkpoint held the right whole version %d of 8 times", ok);
    CHECK(mid_write == 4, "4 of the kills landed half-way through a write (%d)", mid_write);
    printf("  kill test: 8 kills (%d half-way through a write), checkpoint whole and newest every time\n", mid_write);
    sf_params_free(&a);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sfvit_test_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(errpath, sizeof errpath, "/tmp/sfvit_test_ckpt_stderr_%ld.txt", (long)getpid());
    test_round_trip();
    test_mismatch();
    test_failed_writes();
    test_kill_writer();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", tmpdir, errpath);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_checkpoint");
}
