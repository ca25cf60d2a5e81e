/* convert.c — `sfvit convert IN -o OUT.safetensors [--model NAME|CONFIG.yaml] [key=value ...]
 * [--key K] [--ema]`: a torch.save file (or a safetensors file) to safetensors.
 *
 * Without --model the weights inside IN are written under their own names (a state_dict's
 * keys; --key / --ema choose which dict of a training checkpoint). With --model they are
 * loaded strictly into that model, through the layout detection of every checkpoint load
 * (timm XCiT names, DDP prefix), and written as an sfvit checkpoint whose metadata carries
 * the resolved config, so `sfvit eval OUT` needs no --config. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfvit/checkpoint.h"
#include "cli.h"

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* --model NAME [key=value ...] (bare keys are model keys) or --model CONFIG.yaml [a.b=v ...]. */
static int model_config(sf_config *cfg, const char *model, int n_over, char **over) {
    if (ends_with(model, ".yaml") || ends_with(model, ".yml")) return sf_config_load(cfg, model, n_over, over);
    sf_config_defaults(cfg);
    if (sf_config_set(cfg, "model.name", model, "--model") != 0) return -1;
    for (int i = 0; i < n_over; i++) {
        char key[256];
        const char *eq = strchr(over[i], '=');
        int bare = memchr(over[i], '.', (size_t)(eq - over[i])) == NULL;
        if ((size_t)(eq - over[i]) + 7 > sizeof key) return sf_error("convert: key too long in '%s'", over[i]);
        snprintf(key, sizeof key, "%s%.*s", bare ? "model." : "", (int)(eq - over[i]), over[i]);
        if (sf_config_set(cfg, key, eq + 1, "command line") != 0) return -1;
    }
    return 0;
}

/* The tensors of IN, as chosen, under their own names. */
static int write_plain(const char *in, const char *out, const sf_pth_opts *po) {
    unsigned char head[512] = {0};
    FILE *fp = fopen(in, "rb");
    size_t n = fp ? fread(head, 1, sizeof head, fp) : 0;
    if (fp) fclose(fp);
    sf_ckpt_format fmt = sf_ckpt_sniff(head, n);
    sf_st_file f;
    int is_pth = fmt == SF_CKPT_PTH_ZIP || fmt == SF_CKPT_PTH_LEGACY || fmt == SF_CKPT_PTH_TAR;
    if ((is_pth ? sf_pth_open(&f, in, po) : sf_st_open(&f, in)) != 0) return -1;
    sf_st_writer w;
    sf_st_writer_init(&w);
    int rc = 0;
    for (int i = 0; i < f.n_entries && rc == 0; i++)
        rc = sf_st_writer_add(&w, f.entries[i].name, f.entries[i].dtype, f.entries[i].ndim, f.entries[i].shape,
                              f.entries[i].data);
    const char *source = sf_st_meta_get(&f, "pth.source");
    if (rc == 0) rc = sf_st_writer_set_meta(&w, "converted_from", in);
    if (rc == 0 && source && *source) rc = sf_st_writer_set_meta(&w, "pth.source", source);
    if (rc == 0) rc = sf_st_writer_write(&w, out);
    if (rc == 0)
        printf("%s: %d tensors%s%s%s written to %s\n", in, f.n_entries, source && *source ? " (under '" : "",
               source && *source ? source : "", source && *source ? "')" : "", out);
    sf_st_writer_free(&w);
    sf_st_close(&f);
    return rc;
}

/* Loads the plain file into the model (layouts detected) and rewrites it as an sfvit checkpoint. */
static int write_for_model(const char *in, const char *out, sf_config *cfg) {
    if (sf_config_validate(cfg) != 0) return -1;
    char tmp[] = "/tmp/sfvit-convert-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return sf_error("convert: cannot create a temporary file");
    close(fd);
    char *text = NULL;
    size_t len = 0;
    if (sf_config_write(cfg, tmp) == 0) {
        FILE *fp = fopen(tmp, "rb");
        if (fp) {
            fseek(fp, 0, SEEK_END);
            len = (size_t)ftell(fp);
            fseek(fp, 0, SEEK_SET);
            text = calloc(len + 1, 1);
            if (text && fread(text, 1, len, fp) != len) text[0] = 0;
            fclose(fp);
        }
    }
    unlink(tmp);
    sf_params ps;
    sf_params_init(&ps);
    sf_model *m = sf_model_build(&cfg->model, &ps);
    int rc = -1;
    if (m && text) {
        sf_params_alloc(&ps);
        if (sf_checkpoint_load(out, &ps, &(sf_ckpt_opts){.strict = 1}, NULL) == 0) {
            const sf_kv meta[] = {{"format", "sfvit-1"}, {"config", text}, {"converted_from", in}};
            rc = sf_checkpoint_save(out, &ps, 0, meta, 3);
            if (rc == 0) printf("%s: %d parameters of %s written to %s with sfvit names and the config\n", in, ps.count,
                                cfg->model.name[0] ? cfg->model.name : "the model", out);
        }
    }
    if (rc != 0) unlink(out);
    if (m) sf_model_free(m);
    sf_params_free(&ps);
    free(text);
    return rc;
}

int sf_cmd_convert(int argc, char **argv) {
    cli_args args;
    if (cli_parse("convert", argc, argv, &args)) return 2;
    const char *in = args.n_pos ? args.pos[0] : NULL, *out = cli_get(&args, "convert", "-o"),
               *model = cli_get(&args, "convert", "--model");
    sf_pth_opts po = {.key = cli_get(&args, "convert", "--key"), .prefer_ema = cli_get(&args, "convert", "--ema") != NULL};
    char **over = args.over;
    const int n_over = args.n_over;
    cli_args_free(&args);
    if (!in || !out || (n_over && !model)) {
        sf_error("convert: %s", !in || !out ? "name the input and the output" : "key=value needs --model");
        sf_hint("usage: sfvit convert IN.pth -o OUT.safetensors [--model NAME|CONFIG.yaml [key=value ...]] "
                "[--key K] [--ema]");
        return 2;
    }
    sf_config cfg;
    if (model && model_config(&cfg, model, n_over, over) != 0) return 1;
    if (write_plain(in, out, &po) != 0) return 1;
    return model && write_for_model(in, out, &cfg) != 0 ? 1 : 0;
}
