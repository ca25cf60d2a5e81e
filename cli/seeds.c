/* seeds.c — the seeds of a variant: <variant>/seed<S>/ folders read for one number each, and
 * the statistics over seeds (seeds.h). The t quantile is computed here, not tabulated, so a
 * study with any number of seeds gets its exact interval. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "seeds.h"

/* ---- Student's t ---- */

/* P(|T| < t) for t >= 0 and integer df: the closed form in θ = atan(t / √df),
 *   odd df:  (2/π) (θ + sin θ (cos θ + 2/3 cos³θ + 2·4/(3·5) cos⁵θ + ... up to cos^(df-2) θ))
 *   even df: sin θ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + ... up to cos^(df-2) θ)
 * (every term positive, so no cancellation for any df). */
static double t_central(double t, int df) {
    const double pi = 3.14159265358979323846;
    const double th = atan(t / sqrt((double)df)), s = sin(th), c = cos(th), c2 = c * c;
    double sum = 0, term;
    if (df % 2) {
        term = c;
        for (int k = 3; k <= df; k += 2) {
            sum += term;
            term *= c2 * (k - 1) / k;
        }
        return 2 / pi * (th + s * sum);
    }
    term = 1;
    for (int k = 2; k <= df; k += 2) {
        sum += term;
        term *= c2 * (k - 1) / k;
    }
    return s * sum;
}

double t_quantile(double q, int df) {
    if (!(q > 0 && q < 1) || df < 1) return NAN;
    if (q < 0.5) return -t_quantile(1 - q, df);
    const double want = 2 * q - 1;  // P(|T| < t)
    double lo = 0, hi = 1;
    while (t_central(hi, df) < want && hi < 1e300) lo = hi, hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-14 * hi; i++) {
        const double mid = 0.5 * (lo + hi);
        if (t_central(mid, df) < want) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

seed_stats seed_stats_of(const double *v, int n) {
    seed_stats s = {n, NAN, NAN, NAN, NAN};
    if (n < 1) return s;
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.mean = sum / n;
    if (n < 2) return s;
    for (int i = 0; i < n; i++) ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.std = sqrt(ss / (n - 1));
    const double half = t_quantile(0.975, n - 1) * s.std / sqrt((double)n);
    s.lo = s.mean - half;
    s.hi = s.mean + half;
    return s;
}

/* ---- seed folders ---- */

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int seed_dirs_list(const char *dir, long **seeds) {
    *seeds = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *p = e->d_name;
        if (strncmp(p, "seed", 4) || !p[4] || strspn(p + 4, "0123456789") != strlen(p + 4)) continue;
        char path[SF_PATH_MAX + 300];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, p);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (n == cap) *seeds = sf_realloc(*seeds, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(long));
        (*seeds)[n++] = strtol(p + 4, NULL, 10);
    }
    closedir(d);
    if (n > 1) qsort(*seeds, (size_t)n, sizeof(long), cmp_long);
    return n;
}

/* The JSON text with bare NaN, Infinity and -Infinity (as Python's json writes them) turned
 * into null, which cJSON reads. */
static char *json_nan_to_null(const char *text) {
    char *out = sf_malloc(2 * strlen(text) + 1), *w = out;
    int quoted = 0;
    for (const char *r = text; *r;) {
        if (*r == '"' && (r == text || r[-1] != '\\')) quoted = !quoted;
        const char *word = !quoted && *r == '-' && !strncmp(r, "-Infinity", 9) ? "-Infinity"
                           : !quoted && !strncmp(r, "Infinity", 8)              ? "Infinity"
                           : !quoted && !strncmp(r, "NaN", 3)                   ? "NaN"
                                                                                : NULL;
        if (word) {
            memcpy(w, "null", 4);
            w += 4;
            r += strlen(word);
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
    return out;
}

/* dir/seed<S>/name parsed (NULL with *exists = 0 when there is no such file; NULL with
 * *exists = 1 after an error message when it is not JSON). */
static cJSON *read_json(const char *path, int *exists) {
    struct stat st;
    *exists = stat(path, &st) == 0;
    if (!*exists) return NULL;
    char *text = sf_read_text_file(path);
    if (!text) {
        sf_error("cannot read %s", path);
        return NULL;
    }
    char *clean = json_nan_to_null(text);
    cJSON *o = cJSON_Parse(clean);
    free(text);
    free(clean);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        sf_error("%s is not a JSON object", path);
    }
    return o;
}

/* One seed folder. Returns 0, or -1 after a message. */
static int seed_read(const char *dir, long seed, const char *file, const char *key, seed_value *sv) {
    char path[SF_PATH_MAX + 400];
    int exists;
    sv->seed = seed;
    sv->state = SEED_OK;
    sv->value = NAN;
    sv->why[0] = 0;
    snprintf(path, sizeof path, "%s/seed%ld/result.json", dir, seed);
    cJSON *result = read_json(path, &exists);
    if (exists && !result) return -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(result, "status");
    if (cJSON_IsString(st) && strcmp(st->valuestring, "ok")) {
        sv->state = SEED_DIVERGED;
        snprintf(sv->why, sizeof sv->why, "status %s", st->valuestring);
    }
    cJSON *o = result;
    if (strcmp(file, "result.json")) {
        snprintf(path, sizeof path, "%s/seed%ld/%s", dir, seed, file);
        o = read_json(path, &exists);
        if (exists && !o) {
            cJSON_Delete(result);
            return -1;
        }
    }
    int rc = 0;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (sv->state == SEED_DIVERGED) {
        // the status says it all; its file may lack the value
    } else if (!exists) {
        sv->state = SEED_MISSING;
        snprintf(sv->why, sizeof sv->why, "no %s", file);
    } else if (!j) {
        rc = sf_error("%s has no key '%s'", path, key);
    } else if (cJSON_IsNull(j)) {
        sv->state = SEED_DIVERGED;
        snprintf(sv->why, sizeof sv->why, "%s is NaN", key);
    } else if (!cJSON_IsNumber(j)) {
        rc = sf_error("%s: '%s' is not a number", path, key);
    } else {
        sv->value = j->valuedouble;
    }
    if (o != result) cJSON_Delete(o);
    cJSON_Delete(result);
    return rc;
}

int seed_set_read(const char *dir, const char *file, const char *key, int require_value, seed_set *out) {
    memset(out, 0, sizeof *out);
    long *seeds;
    const int n = seed_dirs_list(dir, &seeds);
    if (n == 0) {
        struct stat st;
        if (stat(dir, &st) != 0) sf_error("cannot read %s: %s", dir, strerror(errno));
        else sf_error("%s has no seed<S>/ folders", dir);
        sf_hint("give variant folders of `sfvit ablate` (<grid>/<variant>/, holding seed0/, seed1/, ...)");
        return -1;
    }
    out->v = sf_calloc((size_t)n, sizeof(seed_value));
    out->n = n;
    for (int i = 0; i < n; i++) {
        if (seed_read(dir, seeds[i], file, key, &out->v[i]) != 0) {
            free(seeds);
            seed_set_free(out);
            return -1;
        }
        out->n_ok += out->v[i].state == SEED_OK;
        out->n_diverged += out->v[i].state == SEED_DIVERGED;
        out->n_missing += out->v[i].state == SEED_MISSING;
    }
    free(seeds);
    if (require_value && out->n_missing == n) {
        sf_error("no seed folder of %s has %s (seed%ld/%s, ...)", dir, file, out->v[0].seed, file);
        seed_set_free(out);
        return -1;
    }
    return 0;
}

void seed_set_free(seed_set *s) {
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

void seed_set_values(const seed_set *s, double *v) {
    int k = 0;
    for (int i = 0; i < s->n; i++)
        if (s->v[i].state == SEED_OK) v[k++] = s->v[i].value;
}

void dir_label(const char *dir, int parents, char *out, size_t size) {
    char d[SF_PATH_MAX];
    snprintf(d, sizeof d, "%s", dir);
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') d[--n] = 0;
    const char *start = d;
    int seen = 0;
    for (size_t i = n; i > 0; i--)
        if (d[i - 1] == '/' && seen++ == parents) {
            start = d + i;
            break;
        }
    snprintf(out, size, "%s", start);
}
