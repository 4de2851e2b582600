/* cli_args: the one parser of exec-client's command arguments (tmux's args_parse is
 * the model) and the usage errors every command reports.
 *
 * A command's entry (cli.h) gives its getopt flags, long options and how many
 * operands it takes; cli_args_parse reads them in command-line order, so a command's
 * function starts from arguments that fit and walks its options as given. A usage
 * error is one line naming what is wrong plus one pointing at the right --help, never
 * the whole text, and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_usage_error(const char *name, const char *msg)
{
    fprintf(stderr, "exec-client: %s%s%s\n", name ? name : "", name ? ": " : "", msg);
    fprintf(stderr, "Try 'exec-client%s%s --help'.\n", name ? " " : "", name ? name : "");
    exit(EXIT_USAGE);
}

void cli_bad_option(const char *name, const char *opt)
{
    char m[200];
    snprintf(m, sizeof m, "unknown option `%.120s`", opt);
    cli_usage_error(name, m);
}

void cli_die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "exec-client: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'exec-client --help'.\n");
    exit(EXIT_USAGE);
}

/* A usage error in the entry's own words when it has them, else the house's. */
static void __attribute__((noreturn))
arg_error(const struct cli_cmd_entry *e, const char *fmt, const char *arg, const char *house)
{
    if (fmt) cli_die_usage(fmt, arg);
    if (arg) cli_bad_option(e->name, arg);
    cli_usage_error(e->name, house);
}

/* getopt_long's tables for an entry: its own, plus -h and --help. */
static struct option *entry_longs(const struct cli_cmd_entry *e, char *shorts, size_t n)
{
    bool in_order = e->flags[0] == '+';
    snprintf(shorts, n, "%s:h%s", in_order ? "+" : "", e->flags + in_order);
    size_t k = 0;
    while (e->longs && e->longs[k].name)
        k++;
    struct option *longs = calloc(k + 2, sizeof *longs);
    if (k) memcpy(longs, e->longs, k * sizeof *longs);
    longs[k] = (struct option){"help", no_argument, NULL, 'h'};
    return longs;
}

void cli_args_parse(const struct cli_cmd_entry *e, int argc, char **argv, struct cli_args *a)
{
    char shorts[64];
    struct option *longs = entry_longs(e, shorts, sizeof shorts);
    *a = (struct cli_args){.entry = e, .opts = calloc((size_t)argc + 1, sizeof *a->opts)};
    optind = 0; /* a full reinitialisation: each entry has its own tables */
    opterr = 0; /* our one-line messages instead of getopt's */
    int ch;
    while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (ch == 'h') {
            a->help = true; /* the caller prints it: the help texts sit above */
            break;
        }
        if (ch == '?' || ch == ':') arg_error(e, e->bad_option, argv[optind - 1], NULL);
        a->opts[a->nopts++] = (struct cli_opt){ch, optarg};
    }
    free(longs);
    if (a->help) return;
    a->dashdash = optind > 1 && strcmp(argv[optind - 1], "--") == 0;
    a->argv = argv + optind;
    a->argc = argc - optind;
    if (a->argc < e->lower) arg_error(e, e->too_few, NULL, "wrong number of arguments");
    if (e->upper >= 0 && a->argc > e->upper) {
        const char *words = e->too_many ? e->too_many : e->bad_option;
        if (words) cli_die_usage(words, a->argv[e->upper]);
        cli_usage_error(e->name, "wrong number of arguments");
    }
}

void cli_args_free(struct cli_args *a)
{
    free(a->opts);
    a->opts = NULL;
}

bool cli_args_has(const struct cli_args *a, int ch)
{
    for (int i = 0; i < a->nopts; i++)
        if (a->opts[i].ch == ch) return true;
    return false;
}

const char *cli_args_get(const struct cli_args *a, int ch)
{
    const char *v = NULL;
    for (int i = 0; i < a->nopts; i++)
        if (a->opts[i].ch == ch) v = a->opts[i].value;
    return v;
}
