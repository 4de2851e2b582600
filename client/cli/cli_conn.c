/* cli_conn: what every exec-client command does with the server: connect (the target
 * the options name, checked once; reconnect reports; what a failed connect most
 * likely means), name remote paths as ssh and scp do, and report errors with the
 * client's exit codes (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_err_exit_code(const ec_error *e)
{
    /* Refused by the server, or by the library at work (a capability the server lacks,
     * local I/O): what was asked failed. The rest is the connection's. */
    return e->kind == EC_ERR_SERVER || e->kind == EC_ERR_USAGE ? EXIT_FAILED : EXIT_CONN;
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

/* Which server the options name, one way only: --environment (from a file), or
 * --remote with --environment-id, or --url / $EXEC_SERVER_URL. Returns 0, or -1 after
 * saying what is wrong. */
static int check_target(struct cli *cli)
{
    if (cli->environments_file && !cli->environment) {
        fprintf(stderr, "exec-client: --environments needs --environment NAME\n");
        return -1;
    }
    if (cli->environment && (cli->url_given || cli->remote || cli->environment_id)) {
        fprintf(stderr, "exec-client: --environment excludes --url, --remote and "
                        "--environment-id\n");
        return -1;
    }
    if (cli->environment) cli_use_environment(cli, cli->token_given, cli->ca_given);
    if (cli->remote && (!cli->environment_id || !*cli->environment_id)) {
        fprintf(stderr, "exec-client: --remote needs --environment-id ID\n");
        return -1;
    }
    if (cli->remote && cli->url_given) {
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

/* resume: run/shell survive a dropped connection by resuming the session. */
void cli_connect_or_die(struct cli *cli, bool raw, bool resume)
{
    if (!cli->target_checked) {
        cli->target_checked = true;
        if (check_target(cli) != 0) exit(EXIT_USAGE);
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
            exit(EXIT_FAILED);
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
