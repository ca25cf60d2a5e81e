/* cli.h — the command layer: one function per subcommand (one file each, or a few small ones
 * in commands.c) and the one argument parser they all use. Not a public header: the library
 * API is include/sfvit/.
 *
 * A command is one row of the table in cli/table.c: its name, its function, its usage text (what
 * `sfvit CMD --help` prints) and its options. cli_parse reads argv against that row, so a
 * flag, whether it takes a value, and its help live in one place; tests/test_help.sh checks
 * that every option appears in its command's usage.
 */
#ifndef SFVIT_CLI_H
#define SFVIT_CLI_H

#include "sfvit/train.h"

#define CLI_MAX_OPTS 16
#define CLI_MAX_OVERRIDES 128

typedef struct cli_opt {
    const char *flag;   /* "--data", "-o" */
    const char *value;  /* the value's name in the usage ("DIR"), or NULL for a switch */
} cli_opt;

typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;  /* first line: the summary in `sfvit --help`; indented lines: details */
    int overrides;      /* arguments key=value are config overrides */
    int max_pos;        /* positional arguments accepted (-1: any number) */
    cli_opt opts[CLI_MAX_OPTS];
} cli_command;

/* What cli_parse found. */
typedef struct cli_args {
    char **pos;         /* positional arguments, in order (argv's own strings) */
    int n_pos;
    char *over[CLI_MAX_OVERRIDES];
    int n_over;
    const char *val[CLI_MAX_OPTS];  /* per option of the row: its value, "" for a given switch, or NULL */
} cli_args;

/* The table (cli/table.c). */
extern const cli_command cli_commands[];
extern const int cli_n_commands;
/* The command of that name, or NULL. */
const cli_command *cli_find(const char *name);
/* Reads argv (without the command word) against the command's row. An unknown flag, a flag
 * without its value or one positional argument too many is an error naming it, followed by
 * the usage line; returns 0 or 2 (the status for a usage error). Free with cli_args_free. */
int cli_parse(const char *command, int argc, char **argv, cli_args *a);
void cli_args_free(cli_args *a);
/* The value of flag (as written in the row), "" for a given switch, or NULL. */
const char *cli_get(const cli_args *a, const char *command, const char *flag);
/* Prints "sfvit: error: COMMAND: MESSAGE" and the usage hint; returns 2. */
int cli_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes o as indented JSON ending in a newline to path, atomically, and deletes o; 0 or -1
 * (cli/eval.c). */
struct cJSON;
int cli_write_json(const char *path, struct cJSON *o);
/* Writes s as one CSV field, quoted when it holds a comma, a quote or a line break (cli/eval.c). */
void cli_csv_field(FILE *f, const char *s);

/* Subcommands (argv without the command word). */
int sf_cmd_train(int argc, char **argv);
int sf_cmd_eval(int argc, char **argv);
int sf_cmd_info(int argc, char **argv);
int sf_cmd_config(int argc, char **argv);
int sf_cmd_dump(int argc, char **argv);
int sf_cmd_viz(int argc, char **argv);
int sf_cmd_convert(int argc, char **argv);
int sf_cmd_data(int argc, char **argv);
int sf_cmd_ablate(int argc, char **argv);
int sf_cmd_compare(int argc, char **argv);
int sf_cmd_bench(int argc, char **argv);
int sf_cmd_plot(int argc, char **argv);
int sf_cmd_predict(int argc, char **argv);
int sf_cmd_export(int argc, char **argv);

/* A field of /proc/self/status in MiB (VmRSS: now, VmHWM: peak), 0 when unavailable
 * (cli/bench.c; the sweep's peak memory too). */
double cli_proc_status_mib(const char *field);
/* `sfvit plot --series PATTERN --x LIST DIR...` (cli/plot_series.c): 0, 1 (error) or 2 (usage). */
int plot_series(char **dirs, int n_dirs, const char *pattern, const char *x_list, const char *metric, int logx,
                const char *xlabel, const char *out);
/* The median of v[0..n) (sorts v; cli/bench.c). */
double cli_median(double *v, int n);
/* One training step of sfvit bench, as the trainer runs it: forward, loss, backward, then the
 * update (the finite-gradient check, AdamW, zeroing the gradients); resets g. copies_current:
 * the last update wrote the weights' bf16 copies (else they are refreshed first, timed). t:
 * forward, backward and update in seconds. Returns whether this update wrote the copies. */
int cli_bench_step(sf_ctx *g, const sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels,
                   long step, int copies_current, double t[3]);
/* `sfvit bench CONFIG --alternate KEY=VALUE` (cli/bench_alternate.c): the run as configured
 * (A) and with KEY=VALUE (B), timed step by step in this process; 0, 1 (error) or 2 (usage). */
int cli_bench_alternate(sf_config *cfg, sf_model *m, sf_params *ps, sf_tensor *x, const int *labels, int warmup,
                        int steps, const char *spec, int threads);
/* `sfvit bench --token-sweep` (cli/sweep.c), after bench's cli_parse; frees args. */
int cli_bench_token_sweep(cli_args *args);
/* Least-squares slope of log y on log x over the points with x, y > 0 (NaN below two). */
double sweep_loglog_slope(const double *x, const double *y, int n);
/* `sfvit plot SWEEP.csv` (cli/plot_scaling.c): 1 when path is a sweep CSV, 0 when it is not
 * a .csv file, -1 (with a message) for a .csv file without the sweep's header; the figure. */
int plot_is_sweep_csv(const char *path);
int plot_scaling(const char *csv, const char *out);
/* CSV reading shared by the plot files (cli/plot.c): a line split in place at commas outside
 * double quotes, a column by name and a field as a number (NaN when empty or not a number). */
int csv_split(char *line, char **fields, int max);
/* The index of the column named want among a header's n names, or -1. */
int column(char **names, int n, const char *want);
double field_number(char **f, int n, int col);

#endif
