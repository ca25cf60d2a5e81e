/* seeds.h — the seeds of a variant (cli/seeds.c): reading <variant>/seed<S>/ folders and the
 * statistics over seeds (mean, sample std, Student-t 95 % interval of the mean). Used by
 * `sfvit ablate` (its tables), `sfvit compare` and `sfvit plot`. Part of the command layer. */
#ifndef SFVIT_CLI_SEEDS_H
#define SFVIT_CLI_SEEDS_H

/* The q quantile (0 < q < 1) of Student's t distribution with df >= 1 degrees of freedom,
 * exact to about 1e-12 (the closed-form distribution function for integer df, inverted by
 * bisection). t_quantile(0.975, 4) = 2.7764451. */
double t_quantile(double q, int df);

/* Mean, sample standard deviation (n - 1) and the 95 % interval of the mean,
 * mean ± t(0.975, n - 1) · std / √n. std, lo and hi are NaN below two values, mean below one. */
typedef struct seed_stats {
    int n;
    double mean, std, lo, hi;
} seed_stats;
seed_stats seed_stats_of(const double *v, int n);

/* One seed folder's value: ok, diverged (its result.json status is not "ok", or the value is
 * null/NaN) or missing (no such file: a run not finished, or not evaluated). */
typedef enum seed_state { SEED_OK, SEED_DIVERGED, SEED_MISSING } seed_state;

typedef struct seed_value {
    long seed;
    seed_state state;
    double value;                  // NaN unless SEED_OK
    char why[128];                 // for a diverged or missing seed: "status diverged", "no test.json"
} seed_value;

typedef struct seed_set {
    seed_value *v;                 // sorted by seed number
    int n, n_ok, n_diverged, n_missing;
} seed_set;

/* The seed numbers S of dir's seed<S>/ subfolders, sorted (*seeds: free it); the count, 0 if none. */
int seed_dirs_list(const char *dir, long **seeds);

/* The number `key` of dir/seed<S>/`file` for every seed folder. A seed is diverged when its
 * result.json says a status other than "ok" or the value is null or NaN. Errors (-1, after a
 * message naming the folder, file or key): no seed folders, no seed with that file (when
 * require_value: a study in progress may have none yet), a file that is not JSON, a finished
 * seed's file without that key or with a non-number there. */
int seed_set_read(const char *dir, const char *file, const char *key, int require_value, seed_set *out);
void seed_set_free(seed_set *s);

/* The values of the ok seeds (n_ok of them, in seed order) into v. */
void seed_set_values(const seed_set *s, double *v);

/* "attn_norm=l1" for "runs/grid/attn_norm=l1/" (with `parents` = 1: "grid/attn_norm=l1"). */
void dir_label(const char *dir, int parents, char *out, size_t size);

#endif
