/* cli_help: what exec-client says about itself: the whole --help, one command's
 * --help (which needs no server), and usage errors, which are one line naming what is
 * wrong plus one line pointing at the right --help, never the whole text.
 *
 * The per-command texts live in one table (tmux's cmd_entry: name, usage, what it
 * does), which `COMMAND --help`, the usage errors and the bash completion
 * (packaging/exec-client.bash) follow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* --help, in two literals: one of 5,000+ characters is past what ISO C promises a
 * compiler takes (4095; -Woverlength-strings). */
static const char usage_commands[] =
    "usage: exec-client [--url URL] [--token TOKEN] [--timeout-ms N] [--reconnect-ms N]\n"
    "                   COMMAND ...\n"
    "       exec-client --remote REGISTRY_URL --environment-id ID [--token TOKEN] ...\n"
    "                   COMMAND ...\n"
    "       exec-client --environment NAME [--environments FILE] ... COMMAND ...\n"
    "\n"
    "Commands:\n"
    "  run [--tty] [-n] [--cwd DIR] [--env K=V]... 'SHELL COMMAND'\n"
    "  run [--tty] [-n] [--cwd DIR] [--env K=V]... -- CMD [ARGS...]\n"
    "  run -d|--keep[=SECONDS] ...\n"
    "        run a command remotely: one argument with shell syntax goes to the remote\n"
    "        user's shell (like ssh); after -- argv is run as given (no shell).\n"
    "        stdout/stderr stream back, the exit status is the remote\n"
    "        one (128+N for signal N). stdin is sent to CMD as it comes and its end\n"
    "        is passed on (-n: send none); Ctrl-C, SIGTERM and SIGHUP are forwarded;\n"
    "        --tty: a remote PTY sized like this window, resized with it;\n"
    "        --keep: the command outlives this client (its session is kept for\n"
    "        SECONDS, default until ended; a lost terminal (SIGHUP) or ~. detaches);\n"
    "        -d: start it kept and return at once, printing SESSION PROCESS\n"
    "  shell [--cwd DIR] [--env K=V]...\n"
    "        login shell on a remote PTY in the remote home (Ctrl-C goes to the\n"
    "        remote side; end of input ends it)\n"
    "  fs cat PATH...         print remote files\n"
    "  fs get [-r] [-p] [-q] PATH... LOCAL|-\n"
    "                         download (keeps the mode; progress on a tty); into\n"
    "                         LOCAL/NAME when LOCAL is a directory, like scp; several\n"
    "                         sources need a directory; '*.log' (quoted) is matched\n"
    "                         on the remote side\n"
    "  fs put [-r] [-p] [-q] LOCAL...|- PATH\n"
    "                         upload files or stdin (keeps the local mode); into\n"
    "                         PATH/NAME when PATH is a remote directory, like scp\n"
    "                         (-p: keep modification times too; -q: no progress)\n"
    "  fs ls [-l] [PATH...]   list directories and files like ls (directories end\n"
    "                         in /; -l: long form)\n"
    "  fs stat PATH...        show metadata (type, size, mode, owner, times)\n"
    "  fs rm [-r] [-f] PATH...  remove (-r: recursive, -f: no error if missing)\n"
    "  fs cp [-r] SRC DST     copy on the remote side (into DST/NAME when DST is a\n"
    "                         directory, like cp)\n"
    "  fs mkdir [-p] PATH...  create directories (-p: with parents)\n"
    "  fs walk [--max-depth N] PATH   list a tree breadth-first\n"
    "  rpc [--raw]            send JSON-RPC lines from stdin, print every message back\n"
    "                         (--raw: skip the initialize handshake)\n"
    "  sessions [--json] [--end SESSION]  the sessions the server keeps for you\n"
    "                         (exited: every process has ended; --end: end one,\n"
    "                         killing its processes)\n"
    "  ps [--json] [SESSION]  their processes (SESSION: any unique prefix of its id)\n"
    "  attach [--detach-key ^B] [SESSION [PROCESS]]\n"
    "                         step into a running process like tmux attach: its retained\n"
    "                         output, then live; raw terminal, resized with this one;\n"
    "                         ^B d detaches and leaves it running. A session another\n"
    "                         client holds is watched as a second viewer\n"
    "  forward -L [BIND:]LPORT:HOST:PORT [-L ...]\n"
    "                         like ssh -L: connections to BIND:LPORT here (default\n"
    "                         127.0.0.1; LPORT 0: any free port, printed) are made to\n"
    "                         HOST:PORT from the server (needs --allow-tcp-forwarding\n"
    "                         there); runs until interrupted\n"
    "\n";

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
    "Escapes (run --tty and shell, at the start of a line, as in ssh): ~. disconnects,\n"
    "~~ sends one ~, ~? lists them.\n"
    "Exit status: 2 usage error, 1 remote error (fs, rpc), 3 authentication refused,\n"
    "255 server unreachable or connection lost; run/shell otherwise exit with the\n"
    "remote command's status (128+N for signal N).\n"
    "Every command takes --help (e.g. exec-client fs put --help).\n"
    "More: man exec-client; the protocol: docs/PROTOCOL.md in the exec-server sources.\n";

void cli_usage(FILE *f)
{
    fputs(usage_commands, f);
    fputs(usage_options, f);
}

struct cmd_help {
    const char *name; /* "run", "fs put" */
    const char *usage;
    const char *text;
};

static const struct cmd_help helps[] = {
    {"run",
     "run [--tty] [-n] [-d|--keep[=SECONDS]] [--cwd DIR] [--env K=V]... 'SHELL COMMAND'\n"
     "       exec-client run [options] -- CMD [ARGS...]",
     "Runs a command remotely, like ssh HOST CMD: one argument with shell syntax goes to\n"
     "the remote user's shell; after -- argv is run as given. stdout, stderr and the exit\n"
     "status are the remote command's; stdin is sent as it comes (-n: none). --tty: a\n"
     "remote PTY sized like this window; --keep: the command outlives this client; -d:\n"
     "start it kept and return at once, printing SESSION PROCESS.\n"},
    {"shell", "shell [--cwd DIR] [--env K=V]...",
     "A login shell on a remote PTY in the remote home, like ssh HOST.\n"},
    {"fs", "fs SUBCOMMAND ...   (cat get put ls stat rm cp mkdir walk)",
     "The remote file system. `exec-client fs SUBCOMMAND --help` says more of each.\n"},
    {"fs cat", "fs cat PATH...",
     "Prints remote files (patterns such as '*.txt' are matched remotely).\n"},
    {"fs get", "fs get [-r] [-p] [-q] PATH... LOCAL|-",
     "Downloads like scp: into LOCAL/NAME when LOCAL is a directory (several sources need\n"
     "one); - writes one file to stdout. Quoted patterns ('/logs/*.log') are matched on\n"
     "the remote side. The mode is kept; -p keeps the modification time too; -r copies\n"
     "directories; -q: no progress line. An interrupted download leaves no file behind.\n"},
    {"fs put", "fs put [-r] [-p] [-q] LOCAL...|- PATH",
     "Uploads like scp: into PATH/NAME when PATH is a remote directory (several sources\n"
     "need one); - reads stdin. The mode is kept; -p keeps the modification time too;\n"
     "-r copies directories; -q: no progress line.\n"},
    {"fs ls", "fs ls [-l] [PATH...]",
     "Lists like ls(1): files as named, directories' entries (directories end in /),\n"
     "a header per directory when there are several operands; -l: long form.\n"},
    {"fs stat", "fs stat PATH...", "Shows type, size, mode, owner and times.\n"},
    {"fs rm", "fs rm [-r] [-f] PATH...",
     "Removes (-r: directories too; -f: no error if missing).\n"},
    {"fs cp", "fs cp [-r] SRC DST",
     "Copies on the remote side (into DST/NAME when DST is a directory).\n"},
    {"fs mkdir", "fs mkdir [-p] PATH...",
     "Creates directories (-p: with parents, no error if there).\n"},
    {"fs walk", "fs walk [--max-depth N] PATH", "Lists a tree breadth-first.\n"},
    {"rpc", "rpc [--raw]",
     "Sends JSON-RPC lines from stdin and prints every message back; exits 1 when a reply\n"
     "was an error (--raw: skip the initialize handshake).\n"},
    {"sessions", "sessions [--json] [--end SESSION]",
     "The sessions the server keeps for you; STATE is attached, detached or exited (every\n"
     "process has ended; EXIT then shows the status). --end ends one, killing its\n"
     "processes; --json prints the server's objects.\n"},
    {"ps", "ps [--json] [SESSION]",
     "The processes of your sessions (SESSION: a unique prefix of its id).\n"},
    {"attach", "attach [--detach-key ^B] [SESSION [PROCESS]]",
     "Steps into a running process like tmux attach (^B d detaches).\n"},
    {"forward", "forward -L [BIND:]LPORT:HOST:PORT [-L ...]",
     "Like ssh -L: connections to BIND:LPORT here are made to HOST:PORT from the server.\n"},
};

static const struct cmd_help *find_help(const char *cmd, const char *sub)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", cmd, sub ? " " : "", sub ? sub : "");
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
        if (strcmp(helps[i].name, name) == 0) return &helps[i];
    return NULL;
}

bool cli_is_command(const char *cmd)
{
    return find_help(cmd, NULL) != NULL;
}

bool cli_help_requested(int argc, char **argv)
{
    /* argv[0] is the command; fs's subcommand is skipped. Only the options before the
     * first operand count: `run ls --help` runs `ls --help`. */
    int i = 1;
    if (strcmp(argv[0], "fs") == 0 && argc > 1 && argv[1][0] != '-') i = 2;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0 || argv[i][0] != '-') return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    }
    return false;
}

void cli_command_help(FILE *f, int argc, char **argv)
{
    const char *sub = strcmp(argv[0], "fs") == 0 && argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    const struct cmd_help *h = find_help(argv[0], sub);
    if (!h) h = find_help(argv[0], NULL);
    if (!h) {
        cli_usage(f);
        return;
    }
    fprintf(f, "usage: exec-client [OPTIONS] %s\n\n%s", h->usage, h->text);
    if (strcmp(h->name, "fs") == 0)
        for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
            if (strncmp(helps[i].name, "fs ", 3) == 0)
                fprintf(f, "  exec-client %s\n", helps[i].usage);
    fprintf(f, "\nOPTIONS (--url, --token, ...): exec-client --help; more: man exec-client\n");
}

static void __attribute__((noreturn)) pointer(const char *cmd, const char *sub)
{
    fprintf(stderr, "Try 'exec-client%s%s%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "",
            sub && cmd ? " " : "", sub && cmd ? sub : "");
    exit(EXIT_USAGE);
}

void cli_usage_error(const char *cmd, const char *sub, const char *msg)
{
    fprintf(stderr, "exec-client: %s%s%s%s%s\n", cmd ? cmd : "", sub ? " " : "", sub ? sub : "",
            cmd ? ": " : "", msg);
    pointer(cmd, sub);
}

void cli_bad_option(const char *cmd, const char *sub, const char *opt)
{
    char m[200];
    snprintf(m, sizeof m, "unknown option `%.120s`", opt);
    cli_usage_error(cmd, sub, m);
}
