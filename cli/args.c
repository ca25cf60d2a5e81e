/* args.c — the one argument parser of the command layer (cli.h): flags and their values,
 * config overrides and positional arguments, read against a command's row of the table in
 * cli/table.c. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static int usage_line_hint(const cli_command *c) {
    const char *nl = strchr(c->usage, '\n');
    sf_hint("usage: sfvit %.*s", nl ? (int)(nl - c->usage) : (int)strlen(c->usage), c->usage);
    char opts[512] = "";
    for (int k = 0; k < CLI_MAX_OPTS && c->opts[k].flag; k++)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "%s%s%s%s", k ? ", " : "", c->opts[k].flag,
                 c->opts[k].value ? " " : "", c->opts[k].value ? c->opts[k].value : "");
    if (opts[0]) sf_hint("options: %s", opts);
    sf_hint("sfvit %s --help for the whole usage", c->name);
    return 2;
}

int cli_usage_error(const char *command, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sf_error("%s: %s", command, msg);
    const cli_command *c = cli_find(command);
    return c ? usage_line_hint(c) : 2;
}

/* key=value with a key of letters, digits, '_' and '.', and not the name of an existing file:
 * a path into an ablation's variant folders (runs/grid/attn_norm=l1/seed0/last.safetensors,
 * or attn_norm=l1/seed0/last.safetensors from inside the grid) is a positional argument. */
static int is_override(const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return 0;
    for (const char *p = arg; p < eq; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.') return 0;
    struct stat st;
    return stat(arg, &st) != 0;
}

int cli_parse(const char *command, int argc, char **argv, cli_args *a) {
    const cli_command *c = cli_find(command);
    SF_ASSERT(c, "no command %s in the table", command);
    memset(a, 0, sizeof *a);
    a->pos = sf_malloc((size_t)(argc > 0 ? argc : 1) * sizeof(char *));
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] == '-') {
            int k = 0;
            while (k < CLI_MAX_OPTS && c->opts[k].flag && strcmp(c->opts[k].flag, arg)) k++;
            if (k == CLI_MAX_OPTS || !c->opts[k].flag || (c->opts[k].value && i + 1 >= argc)) {
                cli_args_free(a);
                return cli_usage_error(command, "unexpected argument '%s'", arg);
            }
            a->val[k] = c->opts[k].value ? argv[++i] : "";
        } else if (c->overrides && is_override(arg)) {
            if (a->n_over == CLI_MAX_OVERRIDES) {
                cli_args_free(a);
                return cli_usage_error(command, "more than %d key=value overrides", CLI_MAX_OVERRIDES);
            }
            a->over[a->n_over++] = argv[i];
        } else if (c->max_pos >= 0 && a->n_pos == c->max_pos) {
            cli_args_free(a);
            return cli_usage_error(command, "unexpected argument '%s'", arg);
        } else {
            a->pos[a->n_pos++] = argv[i];
        }
    }
    return 0;
}

void cli_args_free(cli_args *a) {
    free(a->pos);
    a->pos = NULL;
}

const char *cli_get(const cli_args *a, const char *command, const char *flag) {
    const cli_command *c = cli_find(command);
    for (int k = 0; c && k < CLI_MAX_OPTS && c->opts[k].flag; k++)
        if (!strcmp(c->opts[k].flag, flag)) return a->val[k];
    SF_ASSERT(0, "%s has no option %s in its row", command, flag);
    return NULL;
}
