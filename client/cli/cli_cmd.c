/* cli_cmd: exec-client's command table and the one parser every command's arguments
 * go through (tmux's cmd_table and args_parse are the model).
 *
 * Each command's module declares its entry (name, usage, help texts, getopt flags,
 * how many operands, the function that runs it); this file lists them, finds the one
 * the command line names, parses its options in command-line order with getopt_long
 * and checks the operand count, so a command's function starts from arguments that
 * fit. The help texts (cli_help.c) and the usage errors follow the same entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* In the order the whole --help lists them; a group before its subcommands. */
const struct cli_cmd_entry *const cli_cmd_table[] = {
    &cli_run_entry,    &cli_shell_entry,    &cli_fs_entry,
    &cli_fs_cat_entry, &cli_fs_get_entry,   &cli_fs_put_entry,
    &cli_fs_ls_entry,  &cli_fs_stat_entry,  &cli_fs_rm_entry,
    &cli_fs_cp_entry,  &cli_fs_mkdir_entry, &cli_fs_walk_entry,
    &cli_rpc_entry,    &cli_sessions_entry, &cli_ps_entry,
    &cli_attach_entry, &cli_forward_entry,  NULL,
};

/* The entry called `prefix word` ("fs" + "put"), or `word` with no prefix, by its
 * name or its alias. */
static const struct cli_cmd_entry *lookup(const char *prefix, const char *word)
{
    char name[96];
    snprintf(name, sizeof name, "%s%s%s", prefix ? prefix : "", prefix ? " " : "", word);
    for (size_t i = 0; cli_cmd_table[i]; i++) {
        const struct cli_cmd_entry *e = cli_cmd_table[i];
        if (strcmp(e->name, name) == 0 || (e->alias && strcmp(e->alias, name) == 0)) return e;
    }
    return NULL;
}

/* Whether -h or --help comes among the options before the first operand (argv[0] is
 * the command word). */
static bool help_first(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0 || argv[i][0] != '-') return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    }
    return false;
}

/* "cat, get, put, ...": a group's subcommands, for its usage errors. */
static void sub_names(const struct cli_cmd_entry *group, char *out, size_t n)
{
    size_t len = strlen(group->name), k = 0;
    out[0] = '\0';
    for (size_t i = 0; cli_cmd_table[i] && k < n; i++) {
        const char *name = cli_cmd_table[i]->name;
        if (strncmp(name, group->name, len) == 0 && name[len] == ' ')
            k += (size_t)snprintf(out + k, n - k, "%s%s", k ? ", " : "", name + len + 1);
    }
}

const struct cli_cmd_entry *cli_cmd_find(int argc, char **argv, int *used)
{
    const struct cli_cmd_entry *e = lookup(NULL, argv[0]);
    char m[256];
    if (!e) {
        snprintf(m, sizeof m, "unknown command `%.100s`", argv[0]);
        cli_usage_error(NULL, m);
    }
    *used = 1;
    if (e->exec) return e;
    /* A group: its subcommand comes next. */
    if (help_first(argc, argv)) {
        cli_command_help(stdout, e);
        exit(0);
    }
    char subs[160];
    sub_names(e, subs, sizeof subs);
    if (argc < 2) {
        snprintf(m, sizeof m, "missing subcommand (%s)", subs);
        cli_usage_error(e->name, m);
    }
    const struct cli_cmd_entry *sub = lookup(e->name, argv[1]);
    if (!sub) {
        snprintf(m, sizeof m, "unknown subcommand `%.60s`", argv[1]);
        cli_usage_error(e->name, m);
    }
    *used = 2;
    return sub;
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
            cli_command_help(stdout, e);
            exit(0);
        }
        if (ch == '?' || ch == ':') arg_error(e, e->bad_option, argv[optind - 1], NULL);
        a->opts[a->nopts++] = (struct cli_opt){ch, optarg};
    }
    free(longs);
    a->dashdash = optind > 1 && strcmp(argv[optind - 1], "--") == 0;
    a->argv = argv + optind;
    a->argc = argc - optind;
    if (a->argc < e->lower) arg_error(e, e->too_few, NULL, "wrong number of arguments");
    if (e->upper >= 0 && a->argc > e->upper) {
        if (e->too_many) cli_die_usage(e->too_many, a->argv[e->upper]);
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
