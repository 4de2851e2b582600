/* cli_help: what exec-client says about itself: the whole --help, one command's
 * --help (which needs no server), and usage errors, which are one line naming what is
 * wrong plus one line pointing at the right --help, never the whole text.
 *
 * The texts come from the command table (cli_cmd.c, each entry in its command's
 * module): the command list of --help, `COMMAND --help`, and the names the usage
 * errors point at; the bash completion (packaging/exec-client.bash) follows them.
 * `exec-client help [COMMAND [SUBCOMMAND]]` prints the same texts, as git, kubectl,
 * systemctl and go take `help`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* --help: this head, the commands from the table, then the options. */
static const char usage_head[] =
    "usage: exec-client [--url URL] [--token TOKEN] [--timeout-ms N] [--reconnect-ms N]\n"
    "                   COMMAND ...\n"
    "       exec-client --remote REGISTRY_URL --environment-id ID [--token TOKEN] ...\n"
    "                   COMMAND ...\n"
    "       exec-client --environment NAME [--environments FILE] ... COMMAND ...\n"
    "\n"
    "Commands:\n";

static const char usage_options[] =
    "Options:\n"
    "  --url URL        server URL, ws://HOST:PORT or wss://HOST:PORT (default:\n"
    "                   $EXEC_SERVER_URL)\n"
    "  --ca-file FILE   wss://: trust the CA(s) in FILE instead of the system store\n"
    "                   (the server's name or IP must be in its certificate)\n"
    "  --token TOKEN    send Authorization: Bearer TOKEN (default: $EXEC_SERVER_TOKEN);\n"
    "                   with --remote it goes to the registry only\n"
    "  --token-file FILE  the token is FILE's content (white space trimmed); keeps it\n"
    "                   out of the process list, which shows --token's argument\n"
    "  --remote URL     remote mode: reach the executor registered at this environment\n"
    "                   registry (http:// or https:// base URL) through its rendezvous,\n"
    "                   end-to-end encrypted (Noise) and pinned to the executor's key\n"
    "  --environment-id ID  the environment to reach (with --remote)\n"
    "  --environment NAME   reach environment NAME of an environments.toml (codex's\n"
    "                   file: a url, a program spoken to over its stdin/stdout, or a\n"
    "                   remote registry + environment id), instead of --url/--remote\n"
    "  --environments FILE  that file (default: $CODEX_HOME/environments.toml,\n"
    "                   CODEX_HOME defaulting to ~/.codex)\n"
    "  --liveness-ms N  remote mode: ask a quiet process for news after N ms, so a\n"
    "                   stream lost at the executor's end is resumed (default 30000;\n"
    "                   -1: never)\n"
    "  --timeout-ms N   connect/call timeout (default 10000 / 60000)\n"
    "  --connect-timeout SECONDS  give up reaching a server that refuses connections\n"
    "                   (also when reconnecting) after this long (default 5)\n"
    "  --reconnect-ms N run/shell: resume the session for up to N ms when the\n"
    "                   connection drops (default 30000; 0: never)\n"
    "  --keepalive-ms N ping a server silent for N ms: run/shell give up (exit 255)\n"
    "                   when it stays silent for 3N ms; in remote mode a rendezvous\n"
    "                   without a Pong for 2N ms is dropped and resumed (default 5000;\n"
    "                   0: never)\n"
    "  -v, --verbose    report the session id and reconnects on stderr\n"
    "  -V, --version    print the version\n"
    "  -h, --help       this text\n"
    "Remote paths: relative ones (and ~/...) start in the remote home directory, and\n"
    "run starts there unless --cwd says otherwise, as with ssh and scp.\n"
    "Escapes (run --tty and shell, at the start of a line, as in ssh): ~. disconnects\n"
    "and hangs up on the command (SIGHUP; it runs on with --keep),\n"
    "~~ sends one ~, ~? lists them.\n"
    "Exit status, the same in every command: 1 what was asked failed (a file or request\n"
    "error, local or remote), 2 the command line or configuration is wrong, 3\n"
    "credentials refused, 255 server unreachable or connection lost; run/shell otherwise\n"
    "exit with the remote command's status (128+N for signal N, 127: cannot start).\n"
    "Every command takes --help (e.g. exec-client fs put --help, or exec-client help fs\n"
    "put).\n"
    "More: man exec-client; the protocol: docs/PROTOCOL.md in the exec-server sources.\n";

#define HELP_COL 25 /* where a command's summary starts in the whole --help */
#define HELP_WIDTH 80

/* Writes text from column col (the cursor at column at), its words wrapped at
 * HELP_WIDTH. */
static void wrap(FILE *f, const char *text, int col, int at)
{
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, " ");
        if (at > col && at + 1 + (int)n > HELP_WIDTH) {
            fprintf(f, "\n%*s", col, "");
            at = col;
        }
        if (at > col) {
            fputc(' ', f);
            at++;
        }
        for (; at < col; at++)
            fputc(' ', f);
        fwrite(p, 1, n, f);
        at += (int)n;
        p += n;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

/* One entry in the whole --help: its synopsis lines, then the summary beside the last
 * one when it fits there, else under it. */
static void list_entry(FILE *f, const struct cli_cmd_entry *e)
{
    const char *u = e->usage;
    int at = 0;
    for (;;) {
        size_t n = strcspn(u, "\n");
        at = fprintf(f, "  %.*s", (int)n, u);
        if (!u[n]) break;
        fputc('\n', f);
        u += n + 1;
    }
    if (at > HELP_COL - 2) {
        fputc('\n', f);
        at = 0;
    }
    wrap(f, e->summary, HELP_COL, at);
}

void cli_usage(FILE *f)
{
    fputs(usage_head, f);
    for (size_t i = 0; cli_cmd_table[i]; i++)
        if (cli_cmd_table[i]->exec) list_entry(f, cli_cmd_table[i]);
    fputc('\n', f);
    fputs(usage_options, f);
}

/* The synopsis, every line after "exec-client [OPTIONS] ". */
static void synopsis(FILE *f, const char *first, const char *usage)
{
    const char *u = usage;
    for (bool one = true;; one = false) {
        size_t n = strcspn(u, "\n");
        fprintf(f, "%s exec-client [OPTIONS] %.*s\n", one ? first : "      ", (int)n, u);
        if (!u[n]) break;
        u += n + 1;
    }
}

void cli_command_help(FILE *f, const struct cli_cmd_entry *e)
{
    synopsis(f, "usage:", e->usage);
    fprintf(f, "\n%s", e->text);
    size_t len = strlen(e->name);
    if (!e->exec) /* a group: its subcommands' synopses */
        for (size_t i = 0; cli_cmd_table[i]; i++)
            if (strncmp(cli_cmd_table[i]->name, e->name, len) == 0 &&
                cli_cmd_table[i]->name[len] == ' ')
                fprintf(f, "  exec-client %s\n", cli_cmd_table[i]->usage);
    fprintf(f, "\nOPTIONS (--url, --token, ...): exec-client --help; more: man exec-client\n");
}

/* `help [COMMAND [SUBCOMMAND]]`: the whole --help, or the command's (a group's lists
 * its subcommands). */
static int cmd_help(struct cli *cli, const struct cli_args *a)
{
    (void)cli;
    if (a->argc == 0) {
        cli_usage(stdout);
        return 0;
    }
    const struct cli_cmd_entry *e = cli_cmd_named(a->argc, a->argv);
    if (!e) {
        char m[200];
        snprintf(m, sizeof m, "no command `%.60s%s%.60s`", a->argv[0], a->argc > 1 ? " " : "",
                 a->argc > 1 ? a->argv[1] : "");
        cli_usage_error("help", m);
    }
    cli_command_help(stdout, e);
    return 0;
}

const struct cli_cmd_entry cli_help_entry = {
    .name = "help",
    .usage = "help [COMMAND [SUBCOMMAND]]",
    .summary = "this text, or a command's (as COMMAND --help)",
    .text = "Prints the whole --help, or a command's (help fs put is fs put --help).\n",
    .flags = "+",
    .upper = 2,
    .exec = cmd_help,
};
