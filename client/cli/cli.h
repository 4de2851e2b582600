/* cli: what the exec-client modules share. From the top down: exec_client.c (main:
 * the options before the command); cli_help.c (the help texts) over cli_cmd.c (the
 * command table) over the commands: cli_run.c (run, shell), cli_fs.c and cli_xfer.c
 * (fs), cli_session.c (sessions, ps, attach), cli_forward.c (forward), cli_rpc.c
 * (rpc); under them cli_conn.c (connecting, remote paths, errors), cli_env.c
 * (--environment) and cli_args.c (the argument parser and usage errors). */
#ifndef EXEC_CLIENT_CLI_H
#define EXEC_CLIENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "execclient.h"

/* exec-client's exit statuses: one per class of failure, the same in every command
 * (exec-client(1), EXIT STATUS; run and shell otherwise exit with the remote
 * command's status). Which side a file is on does not change its class: a missing
 * local target directory is 1, as a missing remote one is.
 *   EXIT_FAILED  what was asked failed: a file or request error on either side, a
 *                JSON-RPC error reply, a capability the server lacks
 *   EXIT_USAGE   the command line or configuration is wrong: nothing was tried
 *   EXIT_AUTH    the server or registry refused the credentials
 *   EXIT_CONN    unreachable, the connection lost, ~., a silent server (like ssh) */
#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_AUTH 3
#define EXIT_CONN 255

struct cli {
    const char *url;
    const char *token;
    const char *ca_file;        /* wss:// trust, --ca-file */
    const char *remote;         /* --remote: registry base URL (remote mode) */
    const char *environment_id; /* --environment-id, with --remote */
    bool verbose;               /* -v: connection milestones on stderr */
    int liveness_ms;            /* --liveness-ms, remote mode (0: the library's) */
    int timeout_ms;
    int connect_timeout_s; /* --connect-timeout: a refusing server is given up after this */
    bool json;             /* sessions/ps --json */
    int reconnect_ms;
    int keepalive_ms;           /* run/shell: ping after this much silence; give up at 3x */
    const char *resume_session; /* connect by resuming this session (attach, sessions --end) */
    bool resume_quiet;          /* ...and if another client holds it, return with c NULL */
    ec_client *c;
    /* --environment NAME (cli_env.c): the environments file and NAME's options */
    const char *environment;
    const char *environments_file; /* --environments FILE; NULL: CODEX_HOME's */
    /* Which server, checked when a command first connects (cli_connect_or_die): */
    bool url_given;      /* --url, not just $EXEC_SERVER_URL */
    bool token_given;    /* --token or --token-file */
    bool ca_given;       /* --ca-file */
    bool target_checked; /* ...and found to name one server */
    ec_env_file *env_file;
    const ec_client_options *env; /* borrowed from env_file */
};

/* ---- the command table (cli_cmd.c; tmux's cmd_entry is the model) ----------------- */

/* One option as given to a command, in command-line order. */
struct cli_opt {
    int ch;            /* the short letter, or the code its long option returns */
    const char *value; /* its value, NULL when it takes none (or an optional one absent) */
};

/* A command's arguments once the table's flags have parsed them. */
struct cli_args {
    const struct cli_cmd_entry *entry;
    struct cli_opt *opts; /* every option given, in order */
    int nopts;
    char **argv; /* the operands, between entry->lower and entry->upper of them */
    int argc;
    bool dashdash; /* the options ended with `--` */
    bool help;     /* -h or --help: print the entry's help instead */
};

/* One command: everything the dispatcher, the usage errors and the help texts know
 * of it. A group (exec NULL: `fs`) only names its subcommands, whose entries are
 * named "fs cat", "fs get", ... */
struct cli_cmd_entry {
    const char *name;           /* "run", "fs put" */
    const char *alias;          /* another full name it answers to ("fs dir"), or NULL */
    const char *usage;          /* synopsis after "exec-client ", lines split by '\n' */
    const char *summary;        /* what it does, for the whole --help (wrapped when printed) */
    const char *text;           /* what it does, for `COMMAND --help` */
    const char *flags;          /* getopt's short options ('+' first: options end at the first
                                 * operand, else they may follow operands); -h is every entry's */
    const struct option *longs; /* its long options, {0} ended; --help is every entry's */
    int lower, upper;           /* operands after the options: at least, at most (-1: any) */
    /* Usage errors in the command's own words (printf formats, %s the argument, then
     * "Try 'exec-client --help'."); NULL: "unknown option `X`" and "wrong number of
     * arguments" with a pointer to `exec-client COMMAND --help`. */
    const char *bad_option;
    const char *too_few;
    const char *too_many; /* %s: the first operand too many (NULL: bad_option's words) */
    int (*exec)(struct cli *cli, const struct cli_args *args);
};

/* Each command's module defines its entries; cli_cmd.c lists them in help order. */
extern const struct cli_cmd_entry cli_run_entry, cli_shell_entry, cli_fs_entry, cli_fs_cat_entry,
    cli_fs_get_entry, cli_fs_put_entry, cli_fs_ls_entry, cli_fs_stat_entry, cli_fs_rm_entry,
    cli_fs_cp_entry, cli_fs_mkdir_entry, cli_fs_walk_entry, cli_rpc_entry, cli_sessions_entry,
    cli_ps_entry, cli_attach_entry, cli_forward_entry, cli_help_entry;
extern const struct cli_cmd_entry *const cli_cmd_table[]; /* NULL ended */

/* cli_cmd.c: the entry named by argv (a group's subcommand included: argv[0] "fs",
 * argv[1] "put"); *used is how many words named it. Exits with a usage error for an
 * unknown command or subcommand; returns the group itself when its help is asked for. */
const struct cli_cmd_entry *cli_cmd_find(int argc, char **argv, int *used);
/* The entry argv's one or two words name exactly ("fs", "fs put", "run"), or NULL. */
const struct cli_cmd_entry *cli_cmd_named(int argc, char **argv);

/* cli_args.c: parses a command's options and operands by its entry (argv[0] is the
 * command word) into *a, which cli_args_free releases; -h/--help stops at a->help;
 * arguments that do not fit exit 2 with a usage error. */
void cli_args_parse(const struct cli_cmd_entry *e, int argc, char **argv, struct cli_args *a);
void cli_args_free(struct cli_args *a);
/* Whether option ch was given; the value of its last occurrence (or NULL). */
bool cli_args_has(const struct cli_args *a, int ch);
const char *cli_args_get(const struct cli_args *a, int ch);
/* Usage errors: "exec-client: NAME: MSG" and "Try 'exec-client NAME --help'." (no
 * NAME: the whole --help), or in a command's own words (cli_die_usage: a printf format
 * and its one argument, pointing at the whole --help); then exit 2. */
void cli_usage_error(const char *name, const char *msg) __attribute__((noreturn));
void cli_bad_option(const char *name, const char *opt) __attribute__((noreturn));
void cli_die_usage(const char *fmt, const char *arg) __attribute__((noreturn));

/* cli_help.c: the whole --help (its command list from the table); one entry's (a
 * group's lists its subcommands). */
void cli_usage(FILE *f);
void cli_command_help(FILE *f, const struct cli_cmd_entry *e);

/* cli_conn.c */
int cli_err_exit_code(const ec_error *e);
void cli_die_err(const char *what, const ec_error *e) __attribute__((noreturn));
/* raw: no initialize; resume: reconnect and resume when the connection drops. */
void cli_connect_or_die(struct cli *cli, bool raw, bool resume);
const char *cli_remote_cwd(struct cli *cli);
char *cli_remote_path(struct cli *cli, const char *arg);
int cli_write_all(int fd, const void *p, size_t n);
int cli_slurp_max(int fd, size_t max, uint8_t **out, size_t *len, bool *eof);
int cli_slurp(int fd, uint8_t **out, size_t *len);

/* cli_env.c: resolves --environment (exits with a message when it cannot). */
void cli_use_environment(struct cli *cli, bool token_given, bool ca_given);
void cli_env_done(struct cli *cli);

#endif
