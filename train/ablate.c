/* ablate.c — `sfvit ablate`: a grid of config overrides trained one after another, with a
 * table of the results. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfvit/train.h"

/* ---- sfvit ablate BASE.yaml key=a,b[,c] [key=x,y ...] [key=value ...] ----
 * Each key with several comma-separated values (outside brackets) is an axis of the grid;
 * the variants run one after another, each in <train.out>/<train.name>/<variant>/, and the
 * table goes to <train.out>/<train.name>/ablation.{md,csv}. */
#define MAX_AXES 8
#define MAX_VALUES 16

typedef struct axis {
    char key[128];
    char values[MAX_VALUES][128];
    int n;
} axis;

static int split_values(const char *s, axis *a) {
    int depth = 0;
    char cur[128];
    size_t len = 0;
    a->n = 0;
    for (const char *p = s;; p++) {
        if (*p == '[') depth++;
        if (*p == ']') depth--;
        if ((*p == ',' && depth == 0) || *p == 0) {
            if (a->n >= MAX_VALUES) return -1;
            cur[len] = 0;
            snprintf(a->values[a->n++], sizeof a->values[0], "%s", cur);
            len = 0;
            if (*p == 0) break;
            continue;
        }
        if (len + 1 < sizeof cur) cur[len++] = *p;
    }
    return 0;
}

int sf_cmd_ablate(int argc, char **argv) {
    if (argc < 2) {
        sf_error("ablate: need a base config and at least one key=v1,v2 axis");
        sf_hint("example: sfvit ablate train/configs/fmnist_sima.yaml model.attn_norm=l1,l2,none");
        return 2;
    }
    const char *base = argv[0];
    axis axes[MAX_AXES];
    int n_axes = 0;
    char *fixed[64];
    int n_fixed = 0;
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq) {
            sf_error("ablate: expected key=values, got '%s'", argv[i]);
            return 2;
        }
        axis a;
        snprintf(a.key, sizeof a.key, "%.*s", (int)(eq - argv[i]), argv[i]);
        if (split_values(eq + 1, &a) != 0) {
            sf_error("ablate: too many values for %s (at most %d)", a.key, MAX_VALUES);
            return 2;
        }
        if (a.n > 1) {
            if (n_axes == MAX_AXES) return sf_error("ablate: at most %d axes", MAX_AXES) ? 2 : 2;
            axes[n_axes++] = a;
        } else if (n_fixed < 64) {
            fixed[n_fixed++] = argv[i];
        }
    }
    if (n_axes == 0) {
        sf_error("ablate: no axis with several values (write key=a,b)");
        return 2;
    }
    /* Validate every variant's config before running any of them. */
    sf_config base_cfg;
    if (sf_config_load(&base_cfg, base, n_fixed, fixed) != 0) return 1;
    int total = 1;
    for (int a = 0; a < n_axes; a++) total *= axes[a].n;

    char dir[SF_PATH_MAX + 300];
    snprintf(dir, sizeof dir, "%s/%s", base_cfg.train.out, base_cfg.train.name);
    char md_path[SF_PATH_MAX + 340], csv_path[SF_PATH_MAX + 340];
    snprintf(md_path, sizeof md_path, "%s/ablation.md", dir);
    snprintf(csv_path, sizeof csv_path, "%s/ablation.csv", dir);

    typedef struct row {
        char variant[512];
        sf_train_result r;
    } row;
    row *rows = sf_calloc((size_t)total, sizeof(row));
    sf_config *cfgs = sf_calloc((size_t)total, sizeof(sf_config));
    for (int v = 0; v < total; v++) {
        char *over[64 + MAX_AXES];
        char buf[MAX_AXES][300];
        int n = 0, rem = v;
        for (int i = 0; i < n_fixed; i++) over[n++] = fixed[i];
        rows[v].variant[0] = 0;
        for (int a = n_axes - 1; a >= 0; a--) {
            int idx = rem % axes[a].n;
            rem /= axes[a].n;
            snprintf(buf[a], sizeof buf[a], "%s=%s", axes[a].key, axes[a].values[idx]);
        }
        for (int a = 0; a < n_axes; a++) {
            over[n++] = buf[a];
            const char *short_key = strrchr(axes[a].key, '.');
            short_key = short_key ? short_key + 1 : axes[a].key;
            size_t used = strlen(rows[v].variant);
            snprintf(rows[v].variant + used, sizeof rows[v].variant - used, "%s%s=%s", a ? "," : "", short_key,
                     strchr(buf[a], '=') + 1);
        }
        if (sf_config_load(&cfgs[v], base, n, over) != 0 || sf_config_validate(&cfgs[v]) != 0) {
            sf_error("ablate: variant %s has an invalid config", rows[v].variant);
            free(rows);
            free(cfgs);
            return 1;
        }
        if (snprintf(cfgs[v].train.out, sizeof cfgs[v].train.out, "%s", dir) >= (int)sizeof cfgs[v].train.out ||
            snprintf(cfgs[v].train.name, sizeof cfgs[v].train.name, "%s", rows[v].variant) >=
                (int)sizeof cfgs[v].train.name) {
            sf_error("ablate: run folder name too long for variant %s", rows[v].variant);
            free(rows);
            free(cfgs);
            return 1;
        }
    }
    int worst = 0;
    for (int v = 0; v < total; v++) {
        printf("\n=== ablation variant %d/%d: %s ===\n", v + 1, total, rows[v].variant);
        fflush(stdout);
        int st = sf_train(&cfgs[v], NULL, &rows[v].r);
        if (st == SF_TRAIN_ERROR) worst = 1;
    }
    FILE *md = fopen(md_path, "w"), *csv = fopen(csv_path, "w");
    if (!md || !csv) {
        sf_error("cannot write %s: %s", md ? csv_path : md_path, strerror(errno));
        free(rows);
        free(cfgs);
        return 1;
    }
    fprintf(md, "# Ablation of %s\n\n| variant | final top-1 | best top-1 | time (s) | status |\n|---|---|---|---|---|\n",
            base);
    fprintf(csv, "variant,final_top1,best_top1,seconds,status\n");
    for (int v = 0; v < total; v++) {
        const sf_train_result *r = &rows[v].r;
        char status[64];
        if (r->status == SF_TRAIN_DIVERGED) snprintf(status, sizeof status, "diverged at step %ld", r->diverged_step);
        else if (r->status == SF_TRAIN_OK) snprintf(status, sizeof status, "ok");
        else snprintf(status, sizeof status, "error");
        fprintf(md, "| %s | %.2f | %.2f | %.0f | %s |\n", rows[v].variant, r->final_top1, r->best_top1, r->seconds,
                status);
        fprintf(csv, "\"%s\",%.4f,%.4f,%.1f,%s\n", rows[v].variant, r->final_top1, r->best_top1, r->seconds, status);
    }
    fclose(md);
    fclose(csv);
    printf("\nablation table: %s\n", md_path);
    FILE *show = fopen(md_path, "r");
    if (show) {
        char line[1024];
        while (fgets(line, sizeof line, show)) fputs(line, stdout);
        fclose(show);
    }
    free(rows);
    free(cfgs);
    return worst;
}
