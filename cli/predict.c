/* predict.c — `sfvit predict CKPT IMAGE|DIR... [--topk K] [--json]`: the top-K classes of
 * each image with their probabilities, through the C inference API (include/sfvit.h), so
 * the command and an embedding program see the same preprocessing and numbers.
 *
 * A folder argument stands for every PNG/JPEG below it (recursively, sorted by path). An
 * image that does not decode is reported by name and counted; the others are still
 * classified, and the exit status is 1.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sfvit.h"
#include "cli.h"

#define PREDICT_BATCH 32

typedef struct path_list {
    char **v;
    int n, cap;
} path_list;

static void paths_add(path_list *l, const char *p) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = sf_realloc(l->v, (size_t)l->cap * sizeof(char *));
    }
    l->v[l->n] = sf_malloc(strlen(p) + 1);
    strcpy(l->v[l->n++], p);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every image file below dir, appended to l. */
static int collect_dir(const char *dir, path_list *l) {
    DIR *d = opendir(dir);
    if (!d) return sf_error("%s: cannot open folder", dir);
    struct dirent *e;
    char p[SF_PATH_MAX];
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (collect_dir(p, l) != 0) {
                closedir(d);
                return -1;
            }
        } else if (S_ISREG(st.st_mode) && sf_image_has_ext(e->d_name)) {
            paths_add(l, p);
        }
    }
    closedir(d);
    return 0;
}

static int collect(char *const *args, int n, path_list *l) {
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0) return sf_error("%s: no such file or folder", args[i]);
        if (S_ISDIR(st.st_mode)) {
            const int first = l->n;
            if (collect_dir(args[i], l) != 0) return -1;
            if (l->n == first) return sf_error("%s: no .png/.jpg/.jpeg files in this folder", args[i]);
            qsort(l->v + first, (size_t)(l->n - first), sizeof(char *), cmp_str);
        } else {
            paths_add(l, args[i]);
        }
    }
    return 0;
}

/* JSON string body with the characters JSON requires escaped. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void print_result(FILE *f, const sfvit_classifier *c, const char *path, const float *probs, int topk, int json) {
    int top[64];
    const int k = sfvit_topk(probs, sfvit_classifier_num_classes(c), topk, top);
    if (json) {
        fputs("{\"image\":", f);
        json_str(f, path);
        fputs(",\"top\":[", f);
        for (int j = 0; j < k; j++) {
            const char *name = sfvit_classifier_class_name(c, top[j]);
            fprintf(f, "%s{\"class\":%d,\"name\":", j ? "," : "", top[j]);
            if (name) json_str(f, name);
            else fputs("null", f);
            fprintf(f, ",\"prob\":%.6f}", probs[top[j]]);
        }
        fputs("]}\n", f);
        return;
    }
    fprintf(f, "%s\n", path);
    for (int j = 0; j < k; j++) {
        const char *name = sfvit_classifier_class_name(c, top[j]);
        if (name) fprintf(f, "  %2d. %-24s %7.3f%%  (class %d)\n", j + 1, name, 100.0 * probs[top[j]], top[j]);
        else fprintf(f, "  %2d. class %-18d %7.3f%%\n", j + 1, top[j], 100.0 * probs[top[j]]);
    }
}

int sf_cmd_predict(int argc, char **argv) {
    cli_args args;
    if (cli_parse("predict", argc, argv, &args)) return 2;
    const char *ckpt = args.n_pos ? args.pos[0] : NULL, *config_path = cli_get(&args, "predict", "--config"),
               *s_topk = cli_get(&args, "predict", "--topk");
    int topk = 5, json = cli_get(&args, "predict", "--json") != NULL, n_inputs = args.n_pos > 1 ? args.n_pos - 1 : 0;
    char **inputs = sf_malloc((size_t)(argc > 0 ? argc : 1) * sizeof(char *));
    if (n_inputs) memcpy(inputs, args.pos + 1, sizeof(char *) * (size_t)n_inputs);
    cli_args_free(&args);
    if (s_topk) {
        char *end;
        long k = strtol(s_topk, &end, 10);
        if (*end || k < 1 || k > 64) {
            sf_error("predict: --topk takes a number from 1 to 64, got '%s'", s_topk);
            free(inputs);
            return 2;
        }
        topk = (int)k;
    }
    if (!ckpt || n_inputs == 0) {
        sf_error("predict: give a checkpoint and at least one image or folder");
        sf_hint("usage: sfvit predict CKPT.safetensors IMAGE|DIR... [--topk K] [--json]");
        free(inputs);
        return 2;
    }
    path_list paths = {0};
    int status = 1, bad = 0;
    float *x = NULL, *probs = NULL;
    sfvit_classifier *c = NULL;
    int *slot = NULL;
    if (collect(inputs, n_inputs, &paths) != 0) goto done;
    if (!(c = sfvit_classifier_load(ckpt, config_path))) goto done;
    const int K = sfvit_classifier_num_classes(c);
    int C, S;
    sfvit_classifier_input_shape(c, &C, &S);
    if (!sfvit_classifier_class_name(c, 0))
        fprintf(stderr, "sfvit: %s stores no class names (written before sfvit kept them): printing class ids; "
                        "retrain or fine-tune to store the class folder names\n", ckpt);
    const size_t img = (size_t)C * S * S;
    x = sf_malloc(PREDICT_BATCH * img * sizeof(float));      // (PREDICT_BATCH, C, S, S)
    probs = sf_malloc(PREDICT_BATCH * (size_t)K * sizeof(float));  // (PREDICT_BATCH, K)
    slot = sf_malloc(PREDICT_BATCH * sizeof(int));           // batch row -> path index
    for (int start = 0; start < paths.n; start += PREDICT_BATCH) {
        int b = 0;
        for (int i = start; i < paths.n && i < start + PREDICT_BATCH; i++) {
            if (sfvit_classifier_preprocess(c, paths.v[i], x + (size_t)b * img) != 0) {
                bad++;
                continue;
            }
            slot[b++] = i;
        }
        if (b > 0 && sfvit_classifier_predict(c, x, b, probs) != 0) goto done;
        for (int j = 0; j < b; j++) print_result(stdout, c, paths.v[slot[j]], probs + (size_t)j * K, topk, json);
    }
    if (bad) sf_error("%d of %d images could not be decoded (named above)", bad, paths.n);
    status = bad ? 1 : 0;
done:
    for (int i = 0; i < paths.n; i++) free(paths.v[i]);
    free(paths.v);
    free(inputs);
    free(x);
    free(probs);
    free(slot);
    sfvit_classifier_free(c);
    return status;
}
