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

void cli_die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "exec-client: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'exec-client --help'.\n");
    exit(EXIT_USAGE);
}

int cli_err_exit_code(const ec_error *e)
{
    switch (e->kind) {
    case EC_ERR_USAGE: return EXIT_USAGE;
    case EC_ERR_SERVER: return EXIT_REMOTE;
    default: return EXIT_CONN;
    }
}

void cli_die_err(const char *what, const ec_error *e)
{
    if (e->kind == EC_ERR_SERVER)
        fprintf(stderr, "exec-client: %s: %s (code %lld)\n", what, e->message, (long long)e->code);
    else
        fprintf(stderr, "exec-client: %s: %s\n", what, e->message);
    exit(cli_err_exit_code(e));
}

/* A terminal user sees the connection drop and come back instead of a silent
 * pause (stderr only, and only when it is a terminal). */
static void on_reconnect(void *ud, int phase)
{
    struct cli *cli = ud;
    bool tty = isatty(STDERR_FILENO);
    /* A failed resume is reported once, by whoever sees the error. */
    if ((!tty && !cli->verbose) || phase == EC_RECONNECT_FAILED) return;
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

/* What a failed connect most likely means, and what to pass instead: the scheme that
 * does not match the port (a plain server answers a TLS hello with an HTTP error, a
 * TLS server closes a plain request), a certificate for another name, or a CA that
 * is not trusted. */
static void connect_hint(const struct cli *cli, const char *msg)
{
    const char *url = cli->url ? cli->url : "";
    bool tls = strncmp(url, "wss://", 6) == 0;
    const char *rest = url + (tls ? 6 : strncmp(url, "ws://", 5) == 0 ? 5 : 0);
    if (cli->remote || !*rest) return;
    if (tls && (strstr(msg, "wrong version number") || strstr(msg, "packet length too long") ||
                strstr(msg, "record layer failure")))
        fprintf(stderr, "hint: the server does not speak TLS on that port: use ws://%s\n", rest);
    else if (!tls && strstr(msg, "closed the connection during the upgrade"))
        fprintf(stderr,
                "hint: a TLS server closes a plain ws:// connection like this: if it listens "
                "with TLS, use wss://%s (and --ca-file FILE for a CA of your own)\n",
                rest);
    else if (strstr(msg, "hostname mismatch") || strstr(msg, "IP address mismatch"))
        fprintf(stderr, "hint: the certificate names another host: connect with a name or "
                        "address it lists (its subjectAltName: openssl x509 -noout -ext "
                        "subjectAltName -in CERT)\n");
    else if (strstr(msg, "certificate verify failed"))
        fprintf(stderr, "hint: %s\n",
                cli->ca_file ? "the certificate is not signed by a CA in the --ca-file given"
                             : "a server with its own CA needs --ca-file FILE (the CA's PEM "
                               "certificate)");
}

static int check_target(struct cli *cli, bool url_given, bool token_given, bool ca_given);
static struct {
    bool url, token, ca, checked;
} target_given;

/* resume: run/shell survive a dropped connection by resuming the session. */
void cli_connect_or_die(struct cli *cli, bool raw, bool resume)
{
    if (!target_given.checked) {
        target_given.checked = true;
        if (check_target(cli, target_given.url, target_given.token, target_given.ca) != 0)
            exit(EXIT_USAGE);
    }
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
        .refused_timeout_ms = (cli->connect_timeout_s > 0 ? cli->connect_timeout_s : 5) * 1000,
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
                    cli->token ? "check the token given with --token, --token-file or "
                                 "EXEC_SERVER_TOKEN"
                               : "this server needs a token: pass --token-file FILE (or --token "
                                 "TOKEN, or set EXEC_SERVER_TOKEN)");
            exit(EXIT_AUTH);
        }
        if (cli->remote)
            fprintf(stderr, "exec-client: cannot reach environment %s through %s: %s\n",
                    cli->environment_id, cli->remote, e.message);
        else
            fprintf(stderr, "exec-client: cannot reach server at %s: %s\n",
                    cli->url ? cli->url : "(none)", e.message);
        connect_hint(cli, e.message);
        exit(EXIT_CONN);
    }
    if (cli->verbose && ec_client_session_id(cli->c))
        fprintf(stderr, "exec-client: connected, session %s\n", ec_client_session_id(cli->c));
}

/* Where relative remote paths start, for every command alike: the remote user's
 * home (environmentInfo.userHomeDir), as ssh and scp do; the server's working
 * directory when it does not say, then "/". A native path (static storage). */
const char *cli_remote_cwd(struct cli *cli)
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
char *cli_remote_path(struct cli *cli, const char *arg)
{
    if (arg[0] == '/') return strdup(arg);
    const char *cwd = cli_remote_cwd(cli);
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

/* Reads fd until EOF or `max` bytes (caller frees *out); *eof tells which. */
int cli_slurp_max(int fd, size_t max, uint8_t **out, size_t *len, bool *eof)
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

int cli_slurp(int fd, uint8_t **out, size_t *len)
{
    bool eof;
    return cli_slurp_max(fd, SIZE_MAX, out, len, &eof);
}

/* --token-file: the token is the file's content, surrounding white space trimmed
 * (so it stays out of argv, which ps shows). Returns 0, or prints why and -1. */
static int read_token_file(const char *path, const char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *data = NULL;
    size_t n = 0;
    bool eof;
    if (fd < 0 || cli_slurp_max(fd, 65536, &data, &n, &eof) != 0) {
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
    bool error_seen;  /* a reply was a JSON-RPC error: exit 1, as documented */
};

static void rpc_print(void *ud, const char *text, size_t len)
{
    struct rpc_state *st = ud;
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    json_t *m = json_loadb(text, len, 0, NULL);
    if (m && json_object_get(m, "id") && !json_object_get(m, "method")) {
        st->outstanding--;
        if (json_object_get(m, "error")) st->error_seen = true;
    }
    json_decref(m);
}

static int cmd_rpc(struct cli *cli, const struct cli_args *a)
{
    bool raw = cli_args_has(a, 'r');
    cli_connect_or_die(cli, raw, false);
    struct rpc_state st = {0};
    ec_client_set_message_hook(cli->c, rpc_print, &st);
    /* The session id is for -v (cli_connect_or_die prints it): every line on stderr of
     * a scripted call is one more to filter. */
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
                return st.outstanding > 0 ? EXIT_CONN : st.error_seen ? EXIT_REMOTE : 0;
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
    return st.error_seen ? EXIT_REMOTE : 0;
}

static const struct option rpc_longs[] = {{"raw", no_argument, 0, 'r'}, {0, 0, 0, 0}};
const struct cli_cmd_entry cli_rpc_entry = {
    .name = "rpc",
    .usage = "rpc [--raw]",
    .summary = "send JSON-RPC lines from stdin, print every message back (--raw: skip the "
               "initialize handshake)",
    .text = "Sends JSON-RPC lines from stdin and prints every message back; exits 1 when a "
            "reply\nwas an error (--raw: skip the initialize handshake).\n",
    .flags = "+",
    .longs = rpc_longs,
    .upper = 0,
    .bad_option = "rpc: unexpected argument `%s`",
    .too_many = "rpc: unexpected argument `%s`",
    .exec = cmd_rpc,
};

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
                                          {"connect-timeout", required_argument, 0, 'C'},
                                          {0, 0, 0, 0}};
    const char *token_file = NULL;
    int ch;
    bool url_given = false; /* --url, not just $EXEC_SERVER_URL */
    bool token_given = false, ca_given = false;
    opterr = 0; /* our one-line messages instead of getopt's */
    while ((ch = getopt_long(argc, argv, "+:hVv", longs, NULL)) != -1) {
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
        case 'C': {
            char *end = NULL;
            double s = strtod(optarg, &end);
            if (end == optarg || *end || s < 0 || s > 86400)
                cli_usage_error(NULL, "--connect-timeout wants seconds (0-86400)");
            cli.connect_timeout_s = s > 0 && s < 1 ? 1 : (int)s;
            break;
        }
        case 'h': cli_usage(stdout); return 0;
        case ':': {
            char m[160];
            snprintf(m, sizeof m, "option `%.100s` needs a value", argv[optind - 1]);
            cli_usage_error(NULL, m);
        }
        default: cli_bad_option(NULL, argv[optind - 1]);
        }
    }
    if (optind >= argc) cli_usage_error(NULL, "no command given (run, shell, fs, ...)");
    /* The command and its arguments first: COMMAND --help and usage errors need no
     * server and no token. */
    int used;
    const struct cli_cmd_entry *e = cli_cmd_find(argc - optind, argv + optind, &used);
    struct cli_args args;
    cli_args_parse(e, argc - optind - used + 1, argv + optind + used - 1, &args);
    if (token_file && read_token_file(token_file, &cli.token) != 0) {
        cli_args_free(&args);
        return EXIT_USAGE;
    }
    /* Which server is checked when a command first connects. */
    target_given.url = url_given;
    target_given.token = token_given;
    target_given.ca = ca_given;
    int rc = e->exec(&cli, &args);
    cli_args_free(&args);
    ec_client_close(cli.c);
    cli_env_done(&cli);
    return rc;
}
