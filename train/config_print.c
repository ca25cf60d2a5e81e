/* config_print.c — the config as text, all driven by the key table (config.c): the resolved
 * YAML (sf_config_yaml, sf_config_write: atomic), the boxed settings table printed at the
 * start of a run, the markdown key table of docs/configs.md and the difference of two
 * configs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"


static void fmt_float(char *buf, size_t n, float x) {
    /* The shortest of %.6g .. %.9g that reads back to the same float (%.9g always does). */
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    /* Keep it a float for every YAML reader: YAML 1.1 resolvers (PyYAML) read a float only
     * with a '.' in its mantissa, so "1" -> "1.0" and "1e-08" -> "1.0e-08". */
    if (strpbrk(buf, "n")) return; /* nan/inf are refused when read; never written */
    char *e = strpbrk(buf, "eE");
    if (!e && !strchr(buf, '.')) {
        strncat(buf, ".0", n - strlen(buf) - 1);
    } else if (e && !memchr(buf, '.', (size_t)(e - buf)) && strlen(buf) + 3 < n) {
        memmove(e + 2, e, strlen(e) + 1);
        e[0] = '.', e[1] = '0';
    }
}

static void yaml_quote(char *out, size_t n, const char *s) {
    size_t j = 0;
    if (n < 3) return;
    out[j++] = '"';
    for (; *s && j + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') out[j++] = '\\', out[j++] = (char)c;
        else if (c < 0x20) j += (size_t)snprintf(out + j, n - j, "\\x%02x", c);
        else out[j++] = (char)c;
    }
    out[j++] = '"';
    out[j] = 0;
}

/* The value of key k as text; quote: YAML-quote strings. */
static void fmt_value(const sf_config *cfg, const key_def *k, char *buf, size_t n, int quote) {
    const char *p = (const char *)cfg + k->off;
    char tmp[64];
    buf[0] = 0;
    switch (k->type) {
    case K_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case K_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_FLOAT: fmt_float(buf, n, *(const float *)p); break;
    case K_BOOL: snprintf(buf, n, "%s", *(const int *)p ? "true" : "false"); break;
    case K_ENUM: {
        int e = *(const int *)p, cnt = 0;
        while (k->names[cnt]) cnt++;
        snprintf(buf, n, "%s", e >= 0 && e < cnt ? k->names[e] : "?");
        break;
    }
    case K_STR: case K_SENUM: case K_NAME:
        if (quote) yaml_quote(buf, n, p);
        else snprintf(buf, n, "%s", p);
        break;
    case K_INT_LIST: case K_FLOAT_LIST: case K_ENUM_LIST: {
        size_t cnt = k->size;
        if (k->lm == L_COUNTED) cnt = (size_t) * (const int *)((const char *)cfg + k->count_off);
        if (k->lm == L_ZEROPAD) {
            cnt = 0;
            while (cnt < k->size && ((const int *)p)[cnt] != 0) cnt++;
        }
        if (cnt > k->size) cnt = k->size;
        size_t used = (size_t)snprintf(buf, n, "[");
        for (size_t i = 0; i < cnt && used < n; i++) {
            if (k->type == K_FLOAT_LIST) fmt_float(tmp, sizeof tmp, ((const float *)p)[i]);
            else if (k->type == K_INT_LIST) snprintf(tmp, sizeof tmp, "%d", ((const int *)p)[i]);
            else snprintf(tmp, sizeof tmp, "%s", k->names[((const int *)p)[i]]);
            used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", tmp);
        }
        if (used < n) snprintf(buf + used, n - used, "]");
        break;
    }
    }
}

void sf_config_yaml(const sf_config *cfg, FILE *f) {
    fprintf(f, "# sfvit resolved config: every key, loads back to the same settings.\n");
    const char *cur = "";
    char buf[4 * SF_PATH_MAX];
    for (int i = 0; i < config_n_keys; i++) {
        const key_def *k = &config_keys[i];
        const char *dot = strchr(k->key, '.');
        size_t sl = (size_t)(dot - k->key);
        /* One mapping per section: a section written twice is a duplicate key, which YAML
         * readers other than ours resolve by keeping only the last one. */
        if (!cur[0] || strncmp(cur, k->key, sl + 1) != 0) {
            fprintf(f, "%.*s:\n", (int)sl, k->key);
            cur = k->key;
        }
        fmt_value(cfg, k, buf, sizeof buf, 1);
        fprintf(f, "  %s: %s\n", dot + 1, buf);
    }
}

static void fill_yaml(FILE *f, const void *cfg) { sf_config_yaml(cfg, f); }

int sf_config_write(const sf_config *cfg, const char *path) {
    return sf_write_stream_atomic(path, fill_yaml, cfg);
}

static void rule(FILE *f, int w1, int w2) {
    fputc('+', f);
    for (int i = 0; i < w1 + 2; i++) fputc('-', f);
    fputc('+', f);
    for (int i = 0; i < w2 + 2; i++) fputc('-', f);
    fputs("+\n", f);
}

void sf_config_print(const sf_config *cfg, FILE *f) {
    enum { VMAX = 60 };
    char buf[4 * SF_PATH_MAX];
    int w1 = 3, w2 = 5;
    for (int i = 0; i < config_n_keys; i++) {
        fmt_value(cfg, &config_keys[i], buf, sizeof buf, 0);
        int l1 = (int)strlen(config_keys[i].key), l2 = (int)strlen(buf);
        if (l1 > w1) w1 = l1;
        if (l2 > w2) w2 = l2 > VMAX ? VMAX : l2;
    }
    rule(f, w1, w2);
    fprintf(f, "| %-*s | %-*s |\n", w1, "key", w2, "value");
    rule(f, w1, w2);
    const char *cur = "";
    for (int i = 0; i < config_n_keys; i++) {
        const char *dot = strchr(config_keys[i].key, '.');
        size_t sl = (size_t)(dot - config_keys[i].key);
        if (i && (strlen(cur) < sl || strncmp(cur, config_keys[i].key, sl + 1) != 0)) rule(f, w1, w2);
        cur = config_keys[i].key;
        fmt_value(cfg, &config_keys[i], buf, sizeof buf, 0);
        if ((int)strlen(buf) > w2) strcpy(buf + w2 - 3, "...");
        fprintf(f, "| %-*s | %-*s |\n", w1, config_keys[i].key, w2, buf);
    }
    rule(f, w1, w2);
}

static const char *type_name(const key_def *k) {
    switch (k->type) {
    case K_INT: return "int";
    case K_U64: return "uint64";
    case K_FLOAT: return "float";
    case K_BOOL: return "bool";
    case K_STR: case K_NAME: return "string";
    case K_ENUM: case K_SENUM: return "enum";
    case K_INT_LIST: return "int list";
    case K_FLOAT_LIST: return "float list";
    case K_ENUM_LIST: return "enum list";
    }
    return "?";
}

void sf_config_doc(FILE *f) {
    sf_config d;
    sf_config_defaults(&d);
    char buf[4 * SF_PATH_MAX], a[64], b[64];
    fprintf(f, "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < config_n_keys; i++) {
        const key_def *k = &config_keys[i];
        fmt_value(&d, k, buf, sizeof buf, 1);
        char allowed[256] = "";
        if (k->names) {
            for (int j = 0; k->names[j]; j++) {
                strncat(allowed, j ? " \\| " : "", sizeof allowed - strlen(allowed) - 1);
                strncat(allowed, k->names[j], sizeof allowed - strlen(allowed) - 1);
            }
        } else if (k->type == K_INT || k->type == K_FLOAT || k->type == K_INT_LIST || k->type == K_FLOAT_LIST) {
            config_fmt_range(a, sizeof a, k->min);
            config_fmt_range(b, sizeof b, k->max);
            snprintf(allowed, sizeof allowed, "%s .. %s", a, b);
        } else if (k->type == K_STR || k->type == K_NAME) {
            snprintf(allowed, sizeof allowed, "< %zu chars", k->size);
        }
        const char *len = "";
        if (k->lm == L_FIXED) len = " (3 values)";
        else if (k->type >= K_INT_LIST) snprintf(a, sizeof a, " (<= %zu values)", k->size), len = a;
        fprintf(f, "| `%s` | %s%s | `%s` | %s | %s |\n", k->key, type_name(k), len, buf, allowed, k->help);
    }
}

int sf_config_diff(const sf_config *a, const sf_config *b, FILE *f) {
    char va[4 * SF_PATH_MAX], vb[4 * SF_PATH_MAX];
    int n = 0;
    for (int i = 0; i < config_n_keys; i++) {
        fmt_value(a, &config_keys[i], va, sizeof va, 1);
        fmt_value(b, &config_keys[i], vb, sizeof vb, 1);
        if (strcmp(va, vb) != 0) {
            n++;
            if (f) fprintf(f, "  %s: %s -> %s\n", config_keys[i].key, va, vb);
        }
    }
    return n;
}
