/* cli_cmd: exec-client's command table (tmux's cmd_table is the model).
 *
 * Each command's module declares its entry (name, usage, help texts, getopt flags,
 * how many operands, the function that runs it); this file lists them and finds the
 * one the command line names. The parser (cli_args.c) and the help texts
 * (cli_help.c) follow the same entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* In the order the whole --help lists them; a group before its subcommands. */
const struct cli_cmd_entry *const cli_cmd_table[] = {
    &cli_run_entry,
    &cli_shell_entry,
    &cli_fs_entry,
    &cli_fs_cat_entry,
    &cli_fs_get_entry,
    &cli_fs_put_entry,
    &cli_fs_ls_entry,
    &cli_fs_stat_entry,
    &cli_fs_rm_entry,
    &cli_fs_cp_entry,
    &cli_fs_mkdir_entry,
    &cli_fs_walk_entry,
    &cli_rpc_entry,
    &cli_sessions_entry,
    &cli_ps_entry,
    &cli_attach_entry,
    &cli_forward_entry,
    &cli_help_entry,
    NULL,
};

/* The entry called `prefix word` ("fs" + "put"), or `word` with no prefix, by its
 * name or its alias (one word: "fs put" is no command). */
static const struct cli_cmd_entry *lookup(const char *prefix, const char *word)
{
    char name[96];
    if (strchr(word, ' ')) return NULL;
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

const struct cli_cmd_entry *cli_cmd_named(int argc, char **argv)
{
    const struct cli_cmd_entry *e = argc >= 1 ? lookup(NULL, argv[0]) : NULL;
    if (!e || argc == 1) return e;
    return argc == 2 && !e->exec ? lookup(e->name, argv[1]) : NULL;
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
    /* A group: its subcommand comes next, unless its help is asked for. */
    if (help_first(argc, argv)) return e;
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
