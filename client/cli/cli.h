/* cli: what the exec-client command modules share (exec_client.c: options and rpc;
 * cli_run.c: run and shell; cli_fs.c: fs; cli_env.c: --environment; cli_session.c:
 * sessions, ps and attach; cli_forward.c: forward; cli_help.c: help and usage errors). */
#ifndef EXEC_CLIENT_CLI_H
#define EXEC_CLIENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "execclient.h"

#define EXIT_REMOTE 1 /* a server-side error in fs/rpc */
#define EXIT_USAGE 2
#define EXIT_AUTH 3   /* the server refused our credentials (HTTP 401) */
#define EXIT_CONN 255 /* unreachable, or the connection was lost (like ssh) */

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
    ec_env_file *env_file;
    const ec_client_options *env; /* borrowed from env_file */
};

/* cli_help.c: the whole --help; one command's (argv[0] the command, then its
 * arguments); whether a command's own options ask for it; usage errors: one line
 * and a pointer to the right --help, then exit 2. */
void cli_usage(FILE *f);
void cli_command_help(FILE *f, int argc, char **argv);
bool cli_help_requested(int argc, char **argv);
bool cli_is_command(const char *cmd);
void cli_usage_error(const char *cmd, const char *sub, const char *msg) __attribute__((noreturn));
void cli_bad_option(const char *cmd, const char *sub, const char *opt) __attribute__((noreturn));

void die_usage(const char *fmt, const char *arg) __attribute__((noreturn));
int err_exit_code(const ec_error *e);
void die_err(const char *what, const ec_error *e) __attribute__((noreturn));
/* raw: no initialize; resume: reconnect and resume when the connection drops. */
void connect_or_die(struct cli *cli, bool raw, bool resume);
const char *remote_cwd(struct cli *cli);
char *remote_path(struct cli *cli, const char *arg);
int cli_write_all(int fd, const void *p, size_t n);
int slurp_max(int fd, size_t max, uint8_t **out, size_t *len, bool *eof);
int slurp(int fd, uint8_t **out, size_t *len);

/* cli_env.c: resolves --environment (exits with a message when it cannot). */
void cli_use_environment(struct cli *cli, bool token_given, bool ca_given);
void cli_env_done(struct cli *cli);

int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_shell(struct cli *cli, int argc, char **argv);
int cmd_fs(struct cli *cli, int argc, char **argv);
int cmd_forward(struct cli *cli, int argc, char **argv);
int cmd_sessions(struct cli *cli, int argc, char **argv);
int cmd_ps(struct cli *cli, int argc, char **argv);
int cmd_attach(struct cli *cli, int argc, char **argv);

#endif
