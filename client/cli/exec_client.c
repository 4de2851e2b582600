/* exec-client: the command-line client of exec-server, built on libexecclient.
 *
 *   exec-client [--url URL] run [--tty] [--cwd DIR] [--env K=V]... -- CMD ARGS...
 *   exec-client [--url URL] shell
 *   exec-client [--url URL] fs cat|put|ls|stat|rm|cp|mkdir|walk ...
 *   exec-client [--url URL] rpc [--raw]
 *   exec-client --remote REGISTRY_URL --environment-id ID COMMAND ...   (remote mode)
 *   exec-client --environment NAME COMMAND ...   (NAME from environments.toml)
 *
 * `run` behaves like `ssh host cmd` and `shell` like `ssh host` (cli_run.c says how,
 * and how it falls back against a server without our terminal extensions). Exit codes
 * of the client itself: 2 for usage errors, 1 for a server-side error in fs/rpc, 3 when
 * the server refuses the credentials, 255 when the server cannot be reached or
 * the connection is lost (also for `run`, like ssh). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

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
    "  fs cat PATH            print a remote file\n"
    "  fs get [-r] PATH LOCAL|-  download (keeps the mode; progress on a tty); into\n"
    "                         LOCAL/NAME when LOCAL is a directory, like scp\n"
    "  fs put [-r] LOCAL|- PATH  upload a file or stdin (keeps the local mode); into\n"
    "                         PATH/NAME when PATH is a remote directory, like scp\n"
    "  fs ls [-l] PATH        list a directory (directories end in /; -l: long form)\n"
    "  fs stat PATH           show metadata (type, size, mode, owner, times)\n"
    "  fs rm [-r] [-f] PATH   remove (-r: recursive, -f: no error if missing)\n"
    "  fs cp [-r] SRC DST     copy on the remote side (into DST/NAME when DST is a\n"
    "                         directory, like cp)\n"
    "  fs mkdir [-p] PATH     create a directory (-p: with parents)\n"
    "  fs walk [--max-depth N] PATH   list a tree breadth-first\n"
    "  rpc [--raw]            send JSON-RPC lines from stdin, print every message back\n"
    "                         (--raw: skip the initialize handshake)\n"
    "  sessions [--end SESSION]  the sessions the server keeps for you (--end: end one,\n"
    "                         killing its processes)\n"
    "  ps [SESSION]           their processes (SESSION: any unique prefix of its id)\n"
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
    "More: man exec-client; the protocol: docs/PROTOCOL.md in the exec-server sources.\n";

void cli_usage(FILE *f)
{
    fputs(usage_commands, f);
    fputs(usage_options, f);
}

void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "exec-client: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see exec-client --help)\n");
    exit(EXIT_USAGE);
}

int err_exit_code(const ec_error *e)
{
    switch (e->kind) {
    case EC_ERR_USAGE: return EXIT_USAGE;
    case EC_ERR_SERVER: return EXIT_REMOTE;
    default: return EXIT_CONN;
    }
}

void die_err(const char *what, const ec_error *e)
{
    if (e->kind == EC_ERR_SERVER)
        fprintf(stderr, "exec-client: %s: %s (code %lld)\n", what, e->message, (long long)e->code);
    else
        fprintf(stderr, "exec-client: %s: %s\n", what, e->message);
    exit(err_exit_code(e));
}

/* A terminal user sees the connection drop and come back instead of a silent
 * pause (stderr only, and only when it is a terminal). */
static void on_reconnect(void *ud, int phase)
{
    struct cli *cli = ud;
    bool tty = isatty(STDERR_FILENO);
    if (!tty && !cli->verbose) return;
    const char *text = phase == EC_RECONNECTING  ? "connection lost; reconnecting..."
                       : phase == EC_RECONNECTED ? "reconnected"
                                                 : "could not reconnect";
    /* \r\n: the terminal may be in raw mode during `run --tty` / `shell`. */
    if (phase == EC_RECONNECTED && cli->verbose && cli->c)
        fprintf(stderr, "%sexec-client: %s, session %s resumed\r\n", tty ? "\r\n" : "", text,
                ec_client_session_id(cli->c));
    else
        fprintf(stderr, "%sexec-client: %s\r\n", tty ? "\r\n" : "", text);
}

/* resume: run/shell survive a dropped connection by resuming the session. */
void connect_or_die(struct cli *cli, bool raw, bool resume)
{
    ec_client_options o = {
        .url = cli->url,
        .bearer_token = cli->token,
        .client_name = "exec-client",
        .connect_timeout_ms = cli->timeout_ms > 0 ? cli->timeout_ms : 10000,
        /* run/shell: a hung server is given up on at the keep-alive's pace rather
         * than after a minute's silence inside one call. */
        .call_timeout_ms = cli->timeout_ms > 0               ? cli->timeout_ms
                           : resume && cli->keepalive_ms > 0 ? 3 * cli->keepalive_ms
                                                             : 60000,
        .reconnect_timeout_ms = resume ? cli->reconnect_ms : 0,
        .skip_initialize = raw,
        .on_reconnect = on_reconnect,
        .on_reconnect_ud = cli,
        .ca_file = cli->ca_file,
        .remote_url = cli->remote,
        .environment_id = cli->environment_id,
        .liveness_ms = cli->liveness_ms,
        .keepalive_ms = cli->keepalive_ms > 0 ? cli->keepalive_ms : -1,
        .resume_session_id = cli->resume_session,
    };
    if (cli->env) { /* --environment: its program and connect timeout too */
        o.program_argv = cli->env->program_argv;
        o.program_env = cli->env->program_env;
        o.program_cwd = cli->env->program_cwd;
        if (cli->timeout_ms <= 0) o.connect_timeout_ms = cli->env->connect_timeout_ms;
    }
    ec_error e = {0};
    if (ec_client_connect(&o, &cli->c, &e) != 0) {
        if (cli->resume_session && e.kind == EC_ERR_SERVER) {
            if (cli->resume_quiet && e.code == -32010) {
                cli->c = NULL; /* another client holds it: the caller decides */
                return;
            }
            fprintf(stderr, "exec-client: cannot resume session %s: %s\n", cli->resume_session,
                    e.message);
            exit(EXIT_REMOTE);
        }
        if (e.kind == EC_ERR_USAGE) {
            fprintf(stderr, "exec-client: %s\n", e.message);
            exit(EXIT_USAGE);
        }
        if (cli->env && o.program_argv) {
            fprintf(stderr, "exec-client: cannot reach environment `%s`: %s\n", cli->environment,
                    e.message);
            exit(EXIT_CONN);
        }
        if (e.kind == EC_ERR_TRANSPORT && (e.code == 401 || e.code == 403) && cli->remote) {
            fprintf(stderr, "exec-client: the registry %s refused the credentials: %s\n",
                    cli->remote, e.message);
            exit(EXIT_AUTH);
        }
        if (e.kind == EC_ERR_TRANSPORT && e.code == 401) {
            const char *why = strstr(e.message, "Unauthorized: ");
            fprintf(stderr,
                    "exec-client: %s refused the connection: authentication failed%s%s\n"
                    "hint: %s\n",
                    cli->url, why ? ": " : "", why ? why + strlen("Unauthorized: ") : "",
                    cli->token ? "check the token given with --token or EXEC_SERVER_TOKEN"
                               : "this server needs a token: pass --token TOKEN or set "
                                 "EXEC_SERVER_TOKEN");
            exit(EXIT_AUTH);
        }
        if (cli->remote)
            fprintf(stderr, "exec-client: cannot reach environment %s through %s: %s\n",
                    cli->environment_id, cli->remote, e.message);
        else
            fprintf(stderr, "exec-client: cannot reach server at %s: %s\n",
                    cli->url ? cli->url : "(none)", e.message);
        if (strstr(e.message, "certificate verify failed"))
            fprintf(stderr, "hint: %s\n",
                    cli->ca_file ? "the certificate is not signed by a CA in the --ca-file given"
                                 : "a server with its own CA needs --ca-file FILE (the CA's PEM "
                                   "certificate)");
        exit(EXIT_CONN);
    }
    if (cli->verbose && ec_client_session_id(cli->c))
        fprintf(stderr, "exec-client: connected, session %s\n", ec_client_session_id(cli->c));
}

/* Where relative remote paths start, for every command alike: the remote user's
 * home (environmentInfo.userHomeDir), as ssh and scp do; the server's working
 * directory when it does not say, then "/". A native path (static storage). */
const char *remote_cwd(struct cli *cli)
{
    static char *cached;
    if (cached) return cached;
    json_t *info = ec_client_environment_info(cli->c);
    const char *uri = json_string_value(json_object_get(info, "userHomeDir"));
    if (!uri) uri = json_string_value(json_object_get(info, "cwd"));
    cached = uri ? ec_uri_to_path(uri) : NULL;
    if (!cached) cached = strdup("/");
    return cached;
}

/* Remote path for a user argument (caller frees): absolute as given; "~" and "~/..."
 * and anything relative start in the remote home. */
char *remote_path(struct cli *cli, const char *arg)
{
    if (arg[0] == '/') return strdup(arg);
    const char *cwd = remote_cwd(cli);
    if (strcmp(arg, "~") == 0 || strcmp(arg, ".") == 0) return strdup(cwd);
    if (strncmp(arg, "~/", 2) == 0) arg += 2;
    size_t n = strlen(cwd) + strlen(arg) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s%s%s", cwd, cwd[strlen(cwd) - 1] == '/' ? "" : "/", arg);
    return p;
}

int cli_write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads all of fd into memory (caller frees). */
/* Reads fd until EOF or `max` bytes (caller frees *out); *eof tells which. */
int slurp_max(int fd, size_t max, uint8_t **out, size_t *len, bool *eof)
{
    size_t cap = 65536, n = 0;
    uint8_t *buf = malloc(cap);
    *eof = false;
    while (n < max) {
        if (n == cap) {
            cap = cap * 2 < max ? cap * 2 : max;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return -1;
        }
        if (r == 0) {
            *eof = true;
            break;
        }
        n += (size_t)r;
    }
    *out = buf;
    *len = n;
    return 0;
}

int slurp(int fd, uint8_t **out, size_t *len)
{
    size_t cap = 65536, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* --token-file: the token is the file's content, surrounding white space trimmed
 * (so it stays out of argv, which ps shows). Returns 0, or prints why and -1. */
static int read_token_file(const char *path, const char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *data = NULL;
    size_t n = 0;
    bool eof;
    if (fd < 0 || slurp_max(fd, 65536, &data, &n, &eof) != 0) {
        fprintf(stderr, "exec-client: --token-file %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    size_t a = 0;
    while (a < n && (data[a] == ' ' || data[a] == '\t' || data[a] == '\n' || data[a] == '\r'))
        a++;
    while (n > a && (data[n - 1] == ' ' || data[n - 1] == '\t' || data[n - 1] == '\n' ||
                     data[n - 1] == '\r'))
        n--;
    if (n == a) {
        fprintf(stderr, "exec-client: --token-file %s: the file holds no token\n", path);
        free(data);
        return -1;
    }
    static char *tok; /* lives as long as the process */
    tok = strndup((const char *)data + a, n - a);
    memset(data, 0, n);
    free(data);
    *out = tok;
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- rpc ----------------------------------------------------------------------- */

struct rpc_state {
    long outstanding; /* requests sent whose reply has not been printed yet */
};

static void rpc_print(void *ud, const char *text, size_t len)
{
    struct rpc_state *st = ud;
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    json_t *m = json_loadb(text, len, 0, NULL);
    if (m && json_object_get(m, "id") && !json_object_get(m, "method")) st->outstanding--;
    json_decref(m);
}

static int cmd_rpc(struct cli *cli, int argc, char **argv)
{
    bool raw = argc > 1 && strcmp(argv[1], "--raw") == 0;
    if (argc > (raw ? 2 : 1)) die_usage("rpc: unexpected argument `%s`", argv[raw ? 2 : 1]);
    connect_or_die(cli, raw, false);
    struct rpc_state st = {0};
    ec_client_set_message_hook(cli->c, rpc_print, &st);
    if (!raw) fprintf(stderr, "exec-client: session %s\n", ec_client_session_id(cli->c));
    char *line = NULL;
    size_t cap = 0;
    ec_error e = {0};
    bool in_open = true;
    int64_t drain_deadline = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = ec_client_fd(cli->c), .events = POLLIN},
                                {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
        if (pfd[0].fd < 0) break;
        int timeout = -1;
        if (!in_open) {
            if (st.outstanding <= 0) break;
            timeout = (int)(drain_deadline - mono_ms());
            if (timeout <= 0) break;
        }
        int pr = poll(pfd, 2, timeout);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && pfd[0].revents) {
            if (ec_client_process_ready(cli->c, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                return st.outstanding > 0 ? EXIT_CONN : 0;
            }
        }
        if (pr > 0 && pfd[1].revents) {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) {
                in_open = false;
                drain_deadline = mono_ms() + (cli->timeout_ms > 0 ? cli->timeout_ms : 10000);
                continue;
            }
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = 0;
            if (n == 0) continue;
            json_t *m = json_loadb(line, (size_t)n, 0, NULL);
            if (m && json_object_get(m, "id") && json_object_get(m, "method")) st.outstanding++;
            json_decref(m);
            if (ec_client_send_text(cli->c, line, (size_t)n, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                free(line);
                return EXIT_CONN;
            }
        }
    }
    free(line);
    return 0;
}

/* Which server the options name, one way only: --environment (from a file), or
 * --remote with --environment-id, or --url / $EXEC_SERVER_URL. Returns 0, or -1 after
 * saying what is wrong. */
static int check_target(struct cli *cli, bool url_given, bool token_given, bool ca_given)
{
    if (cli->environments_file && !cli->environment) {
        fprintf(stderr, "exec-client: --environments needs --environment NAME\n");
        return -1;
    }
    if (cli->environment && (url_given || cli->remote || cli->environment_id)) {
        fprintf(stderr, "exec-client: --environment excludes --url, --remote and "
                        "--environment-id\n");
        return -1;
    }
    if (cli->environment) cli_use_environment(cli, token_given, ca_given);
    if (cli->remote && (!cli->environment_id || !*cli->environment_id)) {
        fprintf(stderr, "exec-client: --remote needs --environment-id ID\n");
        return -1;
    }
    if (cli->remote && url_given) {
        fprintf(stderr, "exec-client: --url and --remote exclude each other\n");
        return -1;
    }
    if (cli->environment_id && !cli->remote) {
        fprintf(stderr, "exec-client: --environment-id needs --remote REGISTRY_URL\n");
        return -1;
    }
    if (!cli->env && !cli->remote && (!cli->url || !*cli->url)) {
        fprintf(stderr, "exec-client: no server URL: pass --url ws://HOST:PORT or set "
                        "EXEC_SERVER_URL\n");
        return -1;
    }
    return 0;
}

static const struct {
    const char *name;
    int (*run)(struct cli *cli, int argc, char **argv);
} commands[] = {
    {"run", cmd_run},         {"shell", cmd_shell},       {"fs", cmd_fs}, {"rpc", cmd_rpc},
    {"forward", cmd_forward}, {"sessions", cmd_sessions}, {"ps", cmd_ps}, {"attach", cmd_attach},
};

int main(int argc, char **argv)
{
    struct cli cli = {.url = getenv("EXEC_SERVER_URL"),
                      .token = getenv("EXEC_SERVER_TOKEN"),
                      .reconnect_ms = 30000,
                      .keepalive_ms = 5000};
    static const struct option longs[] = {{"url", required_argument, 0, 'u'},
                                          {"token", required_argument, 0, 'T'},
                                          {"timeout-ms", required_argument, 0, 'm'},
                                          {"reconnect-ms", required_argument, 0, 'R'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {"verbose", no_argument, 0, 'v'},
                                          {"ca-file", required_argument, 0, 'A'},
                                          {"remote", required_argument, 0, 'r'},
                                          {"environment-id", required_argument, 0, 'E'},
                                          {"liveness-ms", required_argument, 0, 'L'},
                                          {"token-file", required_argument, 0, 'F'},
                                          {"keepalive-ms", required_argument, 0, 'K'},
                                          {"environment", required_argument, 0, 'N'},
                                          {"environments", required_argument, 0, 'X'},
                                          {0, 0, 0, 0}};
    const char *token_file = NULL;
    int ch;
    bool url_given = false; /* --url, not just $EXEC_SERVER_URL */
    bool token_given = false, ca_given = false;
    while ((ch = getopt_long(argc, argv, "+hVv", longs, NULL)) != -1) {
        switch (ch) {
        case 'v': cli.verbose = true; break;
        case 'V': printf("exec-client %s (libexecclient)\n", EXEC_SERVER_VERSION); return 0;
        case 'A':
            cli.ca_file = optarg;
            ca_given = true;
            break;
        case 'N': cli.environment = optarg; break;
        case 'X': cli.environments_file = optarg; break;
        case 'r': cli.remote = optarg; break;
        case 'E': cli.environment_id = optarg; break;
        case 'L': cli.liveness_ms = atoi(optarg); break;
        case 'K': cli.keepalive_ms = atoi(optarg); break;
        case 'u':
            cli.url = optarg;
            url_given = true;
            break;
        case 'T':
            cli.token = optarg;
            token_file = NULL;
            token_given = true;
            break;
        case 'F':
            token_file = optarg;
            token_given = true;
            break;
        case 'm': cli.timeout_ms = atoi(optarg); break;
        case 'R': cli.reconnect_ms = atoi(optarg); break;
        case 'h': cli_usage(stdout); return 0;
        default: cli_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        cli_usage(stderr);
        return EXIT_USAGE;
    }
    if (token_file && read_token_file(token_file, &cli.token) != 0) return EXIT_USAGE;
    if (check_target(&cli, url_given, token_given, ca_given) != 0) return EXIT_USAGE;
    const char *cmd = argv[optind];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) != 0) continue;
        int rc = commands[i].run(&cli, argc - optind, argv + optind);
        ec_client_close(cli.c);
        cli_env_done(&cli);
        return rc;
    }
    fprintf(stderr, "exec-client: unknown command `%s`\n(see exec-client --help)\n", cmd);
    return EXIT_USAGE;
}
