/* main: command line, signals and the event loop of the exec-server daemon.
 *
 *   exec-server [--listen URL] [--session-ttl SECONDS] [--log-level LEVEL]
 *               [--ws-auth capability-token (--ws-token-file PATH | --ws-token-sha256 HEX)]
 *               [--max-connections N] [--max-processes N] [--max-message-bytes N]
 *               [--max-queued-bytes N] [--max-detached-sessions N] [--help] [--version]
 *   exec-server --remote URL --environment-id ID [--registration-bearer-stdin]
 *               [--remote-transport noise] [--name NAME] [--listen ws://IP:PORT] ...
 *   exec-server --remote URL --environment-id ID --remote-transport direct --aws-sigv4
 *               [--aws-region REGION] [--aws-service SERVICE] ...
 *   exec-server forward --connect ws://HOST:PORT --remote URL --environment-id ID ...
 *
 * Remote mode (src/remote) registers with an environment registry and serves
 * harnesses through its rendezvous relay; a --listen beside it is a local endpoint.
 * `forward` registers the same way but relays each harness stream to the
 * destination exec-server at --connect instead of serving it here.
 * In WebSocket mode the bound URL is printed as one line on stdout once listening;
 * everything else goes to stderr. SIGTERM/SIGINT stop accepting, kill every
 * managed process group and exit 0. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "process/guardian.h"
#include "process/spawner.h"
#include "fs/fs_sandboxed.h"
#include "remote/remote.h"
#include "remote/rv_ws.h"
#include "rpc/dispatch.h"
#include "server/server_methods.h"
#include "session/session.h"
#include "transport/auth.h"
#include "transport/stdio.h"
#include "transport/tls.h"
#include "transport/ws.h"
#include "util/bigbuf.h"
#include "util/mem.h"

#include <malloc.h>

static uv_loop_t *loop;
static struct ws_listener *listener;
static uv_signal_t sig_term, sig_int;
static int exit_status;
static bool remote_mode;

static const char usage[] =
    "Usage: exec-server [OPTIONS]\n"
    "\n"
    "Runs and drives processes and files on this machine for a remote client, over\n"
    "one WebSocket (or stdin/stdout) speaking JSON-RPC.\n"
    "\n"
    "Options:\n"
    "  --listen URL            ws://IP:PORT (IPv4 or [IPv6]) or stdio\n"
    "                          (default ws://127.0.0.1:0, any free loopback port)\n"
    "  --session-ttl SECONDS   how long a disconnected session and its processes\n"
    "                          wait to be resumed (default 80)\n"
    "  --log-level LEVEL       error, warn, info or debug (default warn)\n"
    "  --tls-cert FILE, --tls-key FILE  with --listen wss://IP:PORT: the PEM certificate\n"
    "                          chain and key (TLS 1.2+ AEAD or 1.3; re-read on SIGHUP)\n"
    "  --exit-on-stdin-close   exit when the parent-owned standard input pipe closes\n"
    "                          (also CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE=1)\n"
    "  --ws-auth MODE          capability-token: every WebSocket upgrade must carry\n"
    "                          `Authorization: Bearer <token>` (401 otherwise;\n"
    "                          /readyz stays open). Off by default\n"
    "  --ws-token-file PATH    file holding the token (surrounding whitespace trimmed)\n"
    "  --ws-token-sha256 HEX   the token's SHA-256 as 64 hex digits, instead of the file\n"
    "  --ws-auth signed-bearer-token: the bearer is an HS256 JWT signed with the secret\n"
    "                          in --ws-shared-secret-file PATH (at least 32 bytes); exp is\n"
    "                          required; --ws-issuer ISS and --ws-audience AUD must match\n"
    "                          when given; --ws-max-clock-skew-seconds N (default 30)\n"
    "\n"
    "Limits (BYTES may end in K, M or G, powers of 1024):\n"
    "  --max-connections N     open connections; one more gets HTTP 503 (default 1024)\n"
    "  --max-processes N       unfinished processes per session; one more process/start\n"
    "                          fails with a JSON-RPC error (default 1024)\n"
    "  --max-message-bytes BYTES\n"
    "                          largest incoming message; a larger one closes the\n"
    "                          connection with WebSocket status 1009 (default 64M;\n"
    "                          one frame is further capped at 16M)\n"
    "  --max-queued-bytes BYTES\n"
    "                          unsent output backlog of a connection that stops reading\n"
    "                          before it is closed; its process output stays resumable\n"
    "                          (default 256M)\n"
    "  --max-detached-sessions N\n"
    "                          disconnected sessions kept for resume; past it the one\n"
    "                          detached longest ago expires at once (default 64)\n"
    "\n"
    "Remote mode (an environment registry and its rendezvous relay, Noise encrypted):\n"
    "  --remote URL            register this exec-server as a remote environment with\n"
    "                          the registry at URL and serve harnesses through its\n"
    "                          rendezvous (no local listener unless --listen is given,\n"
    "                          which then serves /readyz, /metrics and WebSocket\n"
    "                          clients locally; /readyz is 200 only while registered\n"
    "                          and connected)\n"
    "  --environment-id ID     environment to register (required with --remote)\n"
    "  --remote-transport noise|direct\n"
    "                          noise (default): harnesses through the rendezvous relay,\n"
    "                          Noise encrypted. direct: POST .../direct/register, then\n"
    "                          serve one plain JSON-RPC WebSocket at the URL it returns\n"
    "                          (wss://, or ws:// to a loopback host; requires\n"
    "                          --aws-sigv4)\n"
    "  --aws-sigv4             sign the direct registration and WebSocket upgrade with\n"
    "                          AWS SigV4; credentials from AWS_ACCESS_KEY_ID,\n"
    "                          AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN\n"
    "  --aws-region REGION     signing region (default AWS_REGION, AWS_DEFAULT_REGION)\n"
    "  --aws-service SERVICE   signing service (default execute-api)\n"
    "  --name NAME             human-readable environment name (kept, not sent)\n"
    "  --registration-bearer-stdin\n"
    "                          read one registration bearer token line from stdin\n"
    "                          (otherwise CODEX_API_KEY, allowed only for https to\n"
    "                          openai.com / openai.org or a loopback registry)\n"
    "\n"
    "Usage: exec-server forward --connect ws://HOST:PORT --remote URL --environment-id ID\n"
    "                           [remote-mode options]\n"
    "  Registers like --remote, but relays every harness stream, once its Noise\n"
    "  handshake is done, to the exec-server WebSocket at --connect (one connection\n"
    "  per stream, JSON-RPC messages unchanged) instead of serving it here. A\n"
    "  destination that refuses or closes resets the stream.\n"
    "  --connect URL           the destination exec-server (ws://HOST:PORT[/PATH])\n"
    "\n"
    "  --help                  print this help\n"
    "  --version               print the version\n";

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static uv_signal_t sig_hup; /* wss only: certificate reload */

/* Memory a request frees is kept for the next one, and handed back to the kernel
 * once the server has been idle for MEM_IDLE_MS: on the virtual machines we run
 * on, a page touched for the first time costs 30-60 us (util/bigbuf.h), so glibc
 * trimming its heap after every burst and unmapping every chunk above 128 KiB made
 * each streamed chunk, delta and walk answer fault its pages in again. glibc keeps
 * chunks of up to 32 MiB in its heaps and trims only above MEM_TRIM_THRESHOLD;
 * larger buffers are bigbufs, cached on their own. The check handle restarts the
 * timer on every loop iteration, so it fires only after MEM_IDLE_MS without one;
 * it then trims the heaps and empties the bigbuf cache. Both handles are
 * unreferenced: they never keep the loop alive. */
#define MEM_IDLE_MS 2000
#define MEM_TRIM_THRESHOLD (16 << 20)
static uv_check_t mem_check;
static uv_timer_t mem_timer;
static bool mem_trimmed; /* the iteration that ran the trim is not activity */

static void mem_timer_cb(uv_timer_t *t)
{
    bigbuf_trim(0);
    malloc_trim(0);
    mem_trimmed = true;
}

static void mem_check_cb(uv_check_t *c)
{
    if (mem_trimmed) {
        mem_trimmed = false;
        return;
    }
    uv_timer_start(&mem_timer, mem_timer_cb, MEM_IDLE_MS, 0);
}

static void mem_tune(uv_loop_t *l)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, MEM_TRIM_THRESHOLD);
    uv_check_init(l, &mem_check);
    uv_timer_init(l, &mem_timer);
    uv_check_start(&mem_check, mem_check_cb);
    uv_unref((uv_handle_t *)&mem_check);
    uv_unref((uv_handle_t *)&mem_timer);
}

static void shutdown_server(void)
{
    if (listener) ws_shutdown(listener);
    listener = NULL;
    if (remote_mode) remote_stop();
    session_destroy_all();
    uv_signal_stop(&sig_term);
    uv_signal_stop(&sig_int);
    if (!uv_is_closing((uv_handle_t *)&sig_term)) uv_close((uv_handle_t *)&sig_term, NULL);
    if (!uv_is_closing((uv_handle_t *)&sig_int)) uv_close((uv_handle_t *)&sig_int, NULL);
    if (tls_server_enabled() && !uv_is_closing((uv_handle_t *)&sig_hup)) {
        uv_signal_stop(&sig_hup);
        uv_close((uv_handle_t *)&sig_hup, NULL);
    }
}

static void on_signal(uv_signal_t *s, int signum)
{
    log_info("received %s; shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    shutdown_server();
}

/* --exit-on-stdin-close: the parent that owns our stdin pipe is gone (or closed it),
 * so stop as on SIGTERM. Bytes on the pipe mean nothing and are discarded. */
static bool exit_on_stdin_close;
static uv_poll_t stdin_poll;

static void on_stdin(uv_poll_t *h, int status, int events)
{
    char buf[4096];
    ssize_t n = status < 0 ? -1 : read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return;
    log_info("standard input closed; shutting down (--exit-on-stdin-close)");
    uv_poll_stop(h);
    uv_close((uv_handle_t *)h, NULL);
    shutdown_server();
}

/* SIGHUP: re-read the TLS certificate and key (new connections use them). */
static void on_sighup(uv_signal_t *s, int signum)
{
    tls_server_reload();
}

static void on_stdio_eof(void)
{
    shutdown_server();
}

static void on_remote_fatal(void)
{
    exit_status = 1;
    shutdown_server();
}

/* --registration-bearer-stdin: one LF-terminated line of at most 16 KiB (a CR
 * before the LF is dropped), read before the loop starts; no blank or padded
 * value. The reference's rules and texts (docs/REMOTE_NOTES.md §1). Returns a
 * malloc'd token or NULL after printing why. */
static char *read_bearer_line(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n <= 0 || line[n - 1] != '\n' || n - 1 > 16384) {
        free(line);
        fprintf(stderr, "exec-server: expected a newline-terminated registration bearer of at "
                        "most 16 KiB\n");
        return NULL;
    }
    line[--n] = '\0';
    if (n && line[n - 1] == '\r') line[--n] = '\0';
    bool bad = n == 0 || line[0] == ' ' || line[0] == '\t' || line[n - 1] == ' ' ||
               line[n - 1] == '\t';
    for (ssize_t i = 0; i < n && !bad; i++)
        bad = (unsigned char)line[i] < 0x20 || line[i] == 0x7f;
    if (bad) {
        memset(line, 0, (size_t)n);
        free(line);
        fprintf(stderr, "exec-server: invalid registration bearer\n");
        return NULL;
    }
    return line;
}

/* --environment-id: what goes into the registry's URL path. 0.169.0 interpolates it
 * raw; ours keeps the older upstream rule that stops path injection. */
static bool environment_id_ok(const char *id)
{
    size_t n = strlen(id);
    return n >= 1 && n <= 256 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* Parses a count, or with `bytes` a size with an optional K/M/G suffix. Returns 0 or
 * -EINVAL. */
static int parse_limit(const char *val, bool bytes, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)val[0])) return -EINVAL;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno) return -EINVAL;
    if (bytes && *end) {
        int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                  : *end == 'G' || *end == 'g' ? 30 : -1;
        if (shift < 0 || end[1] || v > (max >> shift)) return -EINVAL;
        v <<= shift;
        end++;
    }
    if (*end || v > max) return -EINVAL;
    *out = v;
    return 0;
}

/* Parses ws://IP:PORT. Returns 0 and fills host/port, or -EINVAL. */
static int parse_ws_url(const char *url, char *host, size_t hostlen, int *port)
{
    const char *p = strchr(url, ':') + 3; /* after "ws://" or "wss://" */
    const char *colon;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close || close[1] != ':') return -EINVAL;
        size_t n = (size_t)(close - p - 1);
        if (n == 0 || n >= hostlen) return -EINVAL;
        memcpy(host, p + 1, n);
        host[n] = '\0';
        colon = close + 1;
        struct sockaddr_in6 a6;
        if (uv_ip6_addr(host, 0, &a6) != 0) return -EINVAL;
    } else {
        colon = strrchr(p, ':');
        if (!colon) return -EINVAL;
        size_t n = (size_t)(colon - p);
        if (n == 0 || n >= hostlen) return -EINVAL;
        memcpy(host, p, n);
        host[n] = '\0';
        struct sockaddr_in a4;
        if (uv_ip4_addr(host, 0, &a4) != 0 || strchr(host, ':')) return -EINVAL;
        /* uv_ip4_addr (inet_pton) accepts only dotted quads: host names fail. */
    }
    const char *d = colon + 1;
    if (!*d) return -EINVAL;
    long v = 0;
    for (; *d; d++) {
        if (!isdigit((unsigned char)*d)) return -EINVAL;
        v = v * 10 + (*d - '0');
        if (v > 65535) return -EINVAL;
    }
    *port = (int)v;
    return 0;
}

/* Validates the --ws-auth flags (the reference's wording) and turns the check on.
 * Returns 0, or -EINVAL after printing why. */
struct jwt_opts {
    const char *secret_file, *issuer, *audience;
    int64_t skew;
    bool skew_set;
};

/* A flag value trimmed of blanks, or NULL when nothing is left (as the reference). */
static const char *trimmed(const char *v, char *buf, size_t n)
{
    if (!v) return NULL;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(buf, n, "%s", v);
    size_t len = strlen(buf);
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t')) buf[--len] = 0;
    return len ? buf : NULL;
}

/* The reference's rules and texts for the --ws-* flags. */
static int configure_auth(const char *mode, const char *file, const char *hex,
                          const struct jwt_opts *jwt)
{
    bool jwt_flags = jwt->secret_file || jwt->issuer || jwt->audience || jwt->skew_set;
    if (!mode) {
        if (!file && !hex && !jwt_flags) return 0;
        fprintf(stderr, "exec-server: websocket auth flags require `--ws-auth capability-token` "
                        "or `--ws-auth signed-bearer-token`\n");
        return -EINVAL;
    }
    if (strcmp(mode, "signed-bearer-token") == 0) {
        if (file || hex) {
            fprintf(stderr, "exec-server: `--ws-token-file` and `--ws-token-sha256` require "
                            "`--ws-auth capability-token`, not `signed-bearer-token`\n");
            return -EINVAL;
        }
        if (!jwt->secret_file) {
            fprintf(stderr, "exec-server: `--ws-shared-secret-file` is required when `--ws-auth "
                            "signed-bearer-token` is set\n");
            return -EINVAL;
        }
        if (jwt->secret_file[0] != '/') {
            fprintf(stderr, "exec-server: --ws-shared-secret-file must be an absolute path\n");
            return -EINVAL;
        }
        char ib[512], ab[512], err[600];
        if (auth_configure_jwt(jwt->secret_file, trimmed(jwt->issuer, ib, sizeof ib),
                               trimmed(jwt->audience, ab, sizeof ab), jwt->skew, err,
                               sizeof err) < 0) {
            fprintf(stderr, "exec-server: %s\n", err);
            return -EINVAL;
        }
        return 0;
    }
    if (strcmp(mode, "capability-token") != 0) {
        fprintf(stderr, "exec-server: invalid value '%s' for '--ws-auth <MODE>'; expected "
                        "capability-token or signed-bearer-token\n", mode);
        return -EINVAL;
    }
    if (jwt_flags) {
        fprintf(stderr, "exec-server: `--ws-shared-secret-file`, `--ws-issuer`, `--ws-audience`, "
                        "and `--ws-max-clock-skew-seconds` require `--ws-auth "
                        "signed-bearer-token`\n");
        return -EINVAL;
    }
    if (file && hex) {
        fprintf(stderr,
                "exec-server: `--ws-token-file` and `--ws-token-sha256` are mutually exclusive\n");
        return -EINVAL;
    }
    struct auth_key key;
    if (file) {
        char err[512];
        if (auth_key_from_file(file, &key, err, sizeof err) < 0) {
            fprintf(stderr, "exec-server: %s\n", err);
            return -EINVAL;
        }
    } else if (hex) {
        if (auth_key_from_hex(hex, &key) < 0) {
            fprintf(stderr,
                    "exec-server: --ws-token-sha256 must be a 64-character hex SHA-256 digest\n");
            return -EINVAL;
        }
    } else {
        fprintf(stderr, "exec-server: `--ws-token-file` or `--ws-token-sha256` is required when "
                        "`--ws-auth capability-token` is set\n");
        return -EINVAL;
    }
    auth_configure(&key);
    return 0;
}

/* Whether a numeric listen host is a loopback address (127.0.0.0/8 or ::1). */
static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return false;
}

int main(int argc, char **argv)
{
    /* The spawner is this same program, started once by the daemon (spawner.h). */
    if (argc == 2 && strcmp(argv[1], SPAWNER_ARG) == 0)
        return spawner_main(SPAWNER_SOCK_FD, fs_helper_run);
    const char *listen_url = "ws://127.0.0.1:0";
    uint64_t ttl_ms = 80000;
    const char *ws_auth = NULL, *token_file = NULL, *token_sha256 = NULL;
    struct jwt_opts jwt = {.skew = 30};
    const char *tls_cert = NULL, *tls_key = NULL;
    enum {
        OPT_LISTEN = 256, OPT_TTL, OPT_LOG, OPT_MAX_CONN, OPT_MAX_PROC, OPT_MAX_MSG, OPT_MAX_QUEUED,
        OPT_MAX_DETACHED, OPT_WS_AUTH, OPT_TOKEN_FILE, OPT_TOKEN_SHA, OPT_SECRET_FILE, OPT_ISSUER,
        OPT_AUDIENCE, OPT_SKEW, OPT_TLS_CERT, OPT_TLS_KEY, OPT_EXIT_STDIN, OPT_REMOTE,
        OPT_ENV_ID, OPT_REMOTE_TRANSPORT, OPT_NAME, OPT_BEARER_STDIN, OPT_CREDENTIAL_STDIN,
        OPT_AGENT_IDENTITY, OPT_CONNECT, OPT_AWS_SIGV4, OPT_AWS_PROFILE, OPT_AWS_REGION,
        OPT_AWS_SERVICE,
    };
    bool direct = false, aws_sigv4 = false;
    const char *aws_region = NULL, *aws_service = "execute-api";
    /* `exec-server forward ...`: the same options plus --connect. */
    bool forward_mode = argc > 1 && strcmp(argv[1], "forward") == 0;
    const char *connect_url = NULL;
    if (forward_mode) {
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    const char *remote_url = NULL, *environment_id = NULL, *remote_name = NULL;
    bool bearer_stdin = false, listen_given = false;
    static const struct option longs[] = {
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {"listen", required_argument, 0, OPT_LISTEN},
        {"session-ttl", required_argument, 0, OPT_TTL},
        {"log-level", required_argument, 0, OPT_LOG},
        {"max-connections", required_argument, 0, OPT_MAX_CONN},
        {"max-processes", required_argument, 0, OPT_MAX_PROC},
        {"max-message-bytes", required_argument, 0, OPT_MAX_MSG},
        {"max-queued-bytes", required_argument, 0, OPT_MAX_QUEUED},
        {"max-detached-sessions", required_argument, 0, OPT_MAX_DETACHED},
        {"ws-auth", required_argument, 0, OPT_WS_AUTH},
        {"ws-token-file", required_argument, 0, OPT_TOKEN_FILE},
        {"ws-token-sha256", required_argument, 0, OPT_TOKEN_SHA},
        {"ws-shared-secret-file", required_argument, 0, OPT_SECRET_FILE},
        {"ws-issuer", required_argument, 0, OPT_ISSUER},
        {"ws-audience", required_argument, 0, OPT_AUDIENCE},
        {"ws-max-clock-skew-seconds", required_argument, 0, OPT_SKEW},
        {"tls-cert", required_argument, 0, OPT_TLS_CERT},
        {"tls-key", required_argument, 0, OPT_TLS_KEY},
        {"exit-on-stdin-close", no_argument, 0, OPT_EXIT_STDIN},
        {"remote", required_argument, 0, OPT_REMOTE},
        {"environment-id", required_argument, 0, OPT_ENV_ID},
        {"remote-transport", required_argument, 0, OPT_REMOTE_TRANSPORT},
        {"name", required_argument, 0, OPT_NAME},
        {"registration-bearer-stdin", no_argument, 0, OPT_BEARER_STDIN},
        {"executor-credential-stdin", no_argument, 0, OPT_CREDENTIAL_STDIN},
        {"use-agent-identity-auth", no_argument, 0, OPT_AGENT_IDENTITY},
        {"connect", required_argument, 0, OPT_CONNECT},
        {"aws-sigv4", no_argument, 0, OPT_AWS_SIGV4},
        {"aws-profile", required_argument, 0, OPT_AWS_PROFILE},
        {"aws-region", required_argument, 0, OPT_AWS_REGION},
        {"aws-service", required_argument, 0, OPT_AWS_SERVICE},
        {0, 0, 0, 0},
    };
    opterr = 0; /* our own messages, in the words the tests and users know */
    int ch, li = 0;
    while ((ch = getopt_long(argc, argv, "+:hV", longs, &li)) != -1) {
        const char *val = optarg;
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("exec-server %s\n", EXEC_SERVER_VERSION);
            return 0;
        case ':':
            fprintf(stderr, "exec-server: %s needs a value (see --help)\n", argv[optind - 1]);
            return 2;
        case '?':
            fprintf(stderr, "exec-server: unknown argument `%s` (see --help)\n", argv[optind - 1]);
            return 2;
        case OPT_LISTEN:
            listen_url = val;
            listen_given = true;
            break;
        case OPT_REMOTE:
            remote_url = val;
            break;
        case OPT_CONNECT:
            if (!forward_mode) {
                fprintf(stderr, "exec-server: --connect is an option of `exec-server forward`\n");
                return 2;
            }
            connect_url = val;
            break;
        case OPT_ENV_ID:
            environment_id = val;
            break;
        case OPT_NAME:
            remote_name = val;
            break;
        case OPT_REMOTE_TRANSPORT:
            if (strcmp(val, "noise") != 0 && strcmp(val, "direct") != 0) {
                fprintf(stderr, "exec-server: unsupported --remote-transport `%s`; expected "
                                "`noise` or `direct`\n", val);
                return 2;
            }
            direct = strcmp(val, "direct") == 0;
            break;
        case OPT_AWS_SIGV4:
            aws_sigv4 = true;
            break;
        case OPT_AWS_PROFILE:
            fprintf(stderr, "exec-server: --aws-profile is not supported by this exec-server; "
                            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\n");
            return 2;
        case OPT_AWS_REGION:
            aws_region = val;
            break;
        case OPT_AWS_SERVICE:
            aws_service = val;
            break;
        case OPT_BEARER_STDIN:
            bearer_stdin = true;
            break;
        case OPT_CREDENTIAL_STDIN:
        case OPT_AGENT_IDENTITY:
            fprintf(stderr, "exec-server: %s is not supported by this exec-server; use "
                            "--registration-bearer-stdin or CODEX_API_KEY\n", argv[optind - 1]);
            return 2;
        case OPT_TTL: {
            char *end;
            errno = 0;
            double secs = strtod(val, &end);
            if (errno || *end || secs < 0 || secs > 86400 * 365) {
                fprintf(stderr, "exec-server: invalid --session-ttl `%s`; expected seconds\n", val);
                return 2;
            }
            ttl_ms = (uint64_t)(secs * 1000);
            break;
        }
        case OPT_LOG:
            if (log_level_parse(val, &log_threshold) < 0) {
                fprintf(stderr,
                        "exec-server: invalid --log-level `%s`; expected error, warn, info or debug\n",
                        val);
                return 2;
            }
            break;
        case OPT_MAX_CONN:
        case OPT_MAX_PROC:
        case OPT_MAX_MSG:
        case OPT_MAX_QUEUED:
        case OPT_MAX_DETACHED: {
            bool bytes = ch == OPT_MAX_MSG || ch == OPT_MAX_QUEUED;
            unsigned long long v, max = bytes ? (1ull << 40) : 1000000;
            if (parse_limit(val, bytes, max, &v) < 0 || (ch != OPT_MAX_DETACHED && v == 0)) {
                fprintf(stderr, "exec-server: invalid --%s `%s`; expected %s\n", longs[li].name,
                        val,
                        bytes                     ? "a positive byte count (K, M, G allowed)"
                        : ch == OPT_MAX_DETACHED ? "a count"
                                                  : "a positive count");
                return 2;
            }
            if (ch == OPT_MAX_CONN) server_limits.max_connections = (unsigned)v;
            else if (ch == OPT_MAX_PROC) server_limits.max_processes = (unsigned)v;
            else if (ch == OPT_MAX_MSG) server_limits.max_message = (size_t)v;
            else if (ch == OPT_MAX_QUEUED) server_limits.max_queued = (size_t)v;
            else server_limits.max_detached = (unsigned)v;
            break;
        }
        case OPT_WS_AUTH:
            ws_auth = val;
            break;
        case OPT_TOKEN_FILE:
            token_file = val;
            break;
        case OPT_TOKEN_SHA:
            token_sha256 = val;
            break;
        case OPT_SECRET_FILE:
            jwt.secret_file = val;
            break;
        case OPT_ISSUER:
            jwt.issuer = val;
            break;
        case OPT_AUDIENCE:
            jwt.audience = val;
            break;
        case OPT_SKEW: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno || *end || !*val || val[0] == '-' || v > (unsigned long long)INT64_MAX) {
                fprintf(stderr, "exec-server: invalid --ws-max-clock-skew-seconds `%s`; expected "
                                "seconds\n", val);
                return 2;
            }
            jwt.skew = (int64_t)v;
            jwt.skew_set = true;
            break;
        }
        case OPT_TLS_CERT:
            tls_cert = val;
            break;
        case OPT_TLS_KEY:
            tls_key = val;
            break;
        case OPT_EXIT_STDIN:
            exit_on_stdin_close = true;
            break;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "exec-server: unknown argument `%s` (see --help)\n", argv[optind]);
        return 2;
    }

    if (forward_mode) {
        struct rv_ws_url cu;
        if (!connect_url) {
            fprintf(stderr, "exec-server: forward requires --connect ws://HOST:PORT\n");
            return 2;
        }
        if (rv_ws_parse_url(connect_url, &cu) < 0 || cu.tls) {
            fprintf(stderr, "exec-server: invalid --connect URL `%s`; expected "
                            "ws://HOST:PORT\n", connect_url);
            return 2;
        }
        if (!remote_url) {
            fprintf(stderr, "exec-server: forward requires --remote URL and --environment-id ID\n");
            return 2;
        }
    }

    /* --remote-transport direct: SigV4 credentials from the environment, as the
     * AWS SDK's environment provider reads them (0.169.0 requires --aws-sigv4). */
    const char *aws_access = NULL, *aws_secret = NULL, *aws_token = NULL;
    if (aws_sigv4 && bearer_stdin) {
        fprintf(stderr, "exec-server: --aws-sigv4 cannot be used with "
                        "--registration-bearer-stdin\n");
        return 2;
    }
    if (direct || aws_sigv4) {
        if (!direct) {
            fprintf(stderr, "exec-server: --aws-sigv4 signs `--remote-transport direct` "
                            "requests only\n");
            return 2;
        }
        if (!aws_sigv4) {
            fprintf(stderr, "exec-server: --remote-transport direct requires --aws-sigv4\n");
            return 2;
        }
        if (forward_mode) {
            fprintf(stderr, "exec-server: forward supports the noise transport only\n");
            return 2;
        }
        aws_access = getenv("AWS_ACCESS_KEY_ID");
        aws_secret = getenv("AWS_SECRET_ACCESS_KEY");
        aws_token = getenv("AWS_SESSION_TOKEN");
        if (!aws_region || !*aws_region) aws_region = getenv("AWS_REGION");
        if (!aws_region || !*aws_region) aws_region = getenv("AWS_DEFAULT_REGION");
        if (!aws_access || !*aws_access || !aws_secret || !*aws_secret) {
            fprintf(stderr, "exec-server: --aws-sigv4 needs AWS credentials: set "
                            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                            "AWS_SESSION_TOKEN for temporary ones)\n");
            return 1;
        }
        if (!aws_region || !*aws_region) {
            fprintf(stderr, "exec-server: --aws-sigv4 needs a region: --aws-region, AWS_REGION "
                            "or AWS_DEFAULT_REGION\n");
            return 1;
        }
        if (!*aws_service) {
            fprintf(stderr, "exec-server: --aws-service must not be empty\n");
            return 2;
        }
    }

    char *bearer = NULL;
    char env_id_buf[512], remote_buf[2048];
    if (remote_url || environment_id || bearer_stdin || remote_name) {
        const char *u = trimmed(remote_url, remote_buf, sizeof remote_buf);
        const char *e = trimmed(environment_id, env_id_buf, sizeof env_id_buf);
        if (!u) {
            fprintf(stderr, "exec-server: --environment-id, --name and "
                            "--registration-bearer-stdin require --remote URL\n");
            return 2;
        }
        if (!e) {
            fprintf(stderr, "exec-server: --remote requires a non-empty --environment-id\n");
            return 2;
        }
        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            fprintf(stderr, "exec-server: invalid --remote URL `%s`; expected http:// or "
                            "https://\n", u);
            return 2;
        }
        if (listen_given && strncmp(listen_url, "ws://", 5) != 0) {
            fprintf(stderr, "exec-server: with --remote, --listen may only be a local "
                            "ws://IP:PORT endpoint\n");
            return 2;
        }
        if (!environment_id_ok(e)) {
            fprintf(stderr, "exec-server: invalid --environment-id `%s`; expected 1 to 256 "
                            "characters of A-Z, a-z, 0-9, `_` and `-`\n", e);
            return 2;
        }
        if (direct) {
            /* SigV4 instead of a bearer; the base must be https or loopback http. */
            if (strncmp(u, "http://", 7) == 0 && !remote_api_key_url_allowed(u)) {
                fprintf(stderr, "exec-server: --remote-transport direct needs an https:// "
                                "registry URL (or http:// to a loopback host)\n");
                return 2;
            }
        } else if (bearer_stdin) {
            bearer = read_bearer_line();
            if (!bearer) return 1;
        } else if (getenv("CODEX_API_KEY") && *getenv("CODEX_API_KEY")) {
            if (!remote_api_key_url_allowed(u)) {
                fprintf(stderr, "exec-server: remote exec-server API-key authentication is "
                                "restricted to HTTPS openai.com and openai.org hosts and "
                                "subdomains or loopback hosts\n");
                return 1;
            }
            bearer = xstrdup(getenv("CODEX_API_KEY"));
        } else {
            fprintf(stderr, "exec-server: remote exec-server registration requires a bearer: "
                            "use --registration-bearer-stdin or set CODEX_API_KEY\n");
            return 1;
        }
        remote_mode = true;
        remote_url = u;
        environment_id = e;
    }

    bool stdio_mode = strcmp(listen_url, "stdio") == 0 || strcmp(listen_url, "stdio://") == 0;
    char host[64];
    int port = 0;
    if (!stdio_mode) {
        bool wss = strncmp(listen_url, "wss://", 6) == 0;
        if (strncmp(listen_url, "ws://", 5) != 0 && !wss) {
            fprintf(stderr,
                    "exec-server: unsupported --listen URL `%s`; expected `ws://IP:PORT`, "
                    "`wss://IP:PORT` or `stdio`\n",
                    listen_url);
            return 2;
        }
        if (wss != (tls_cert != NULL || tls_key != NULL) || (wss && !(tls_cert && tls_key))) {
            fprintf(stderr, wss ? "exec-server: `wss://` needs --tls-cert FILE and --tls-key FILE\n"
                                : "exec-server: --tls-cert and --tls-key need a `wss://` --listen "
                                  "URL\n");
            return 2;
        }
        if (wss) {
            char err[800];
            if (tls_server_configure(tls_cert, tls_key, err, sizeof err) < 0) {
                fprintf(stderr, "exec-server: %s\n", err);
                return 2;
            }
        }
        if (parse_ws_url(listen_url, host, sizeof host, &port) < 0) {
            fprintf(stderr,
                    "exec-server: invalid websocket --listen URL `%s`; expected `ws://IP:PORT`\n",
                    listen_url);
            return 2;
        }
    } else if (tls_cert || tls_key) {
        fprintf(stderr, "exec-server: --tls-cert and --tls-key need a `wss://` --listen URL\n");
        return 2;
    }

    if (configure_auth(ws_auth, token_file, token_sha256, &jwt) < 0) return 2;

    /* Before the loop exists (no threads yet): the watchdog that kills our
     * process groups if this process dies without cleaning up. */
    int gr = guardian_start();
    if (gr < 0) log_warn("cannot start the guardian process (%s); children may outlive a "
                         "crashed server", strerror(-gr));
    /* A vanished peer must be an error code on write, not a process-wide kill. */
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    session_configure(loop, ttl_ms);
    server_methods_register();
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    mem_tune(loop);
    /* Every child is started from the spawner, a small process made now while this
     * one holds almost nothing (after the signal handlers: a SIGTERM during its start
     * must be an orderly exit, not a kill). */
    int sp = spawner_start();
    if (sp < 0) {
        fprintf(stderr, "exec-server: cannot start the spawner process: %s\n", strerror(-sp));
        return 1;
    }
    if (tls_server_enabled()) {
        uv_signal_init(loop, &sig_hup);
        uv_signal_start(&sig_hup, on_sighup, SIGHUP);
    }

    if (getenv("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE") &&
        strcmp(getenv("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE"), "") != 0 &&
        strcmp(getenv("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE"), "0") != 0 &&
        strcmp(getenv("CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE"), "false") != 0)
        exit_on_stdin_close = true;
    /* Over stdio, stdin is the transport and its end already stops the server. */
    if (exit_on_stdin_close && !stdio_mode) {
        int fl = fcntl(STDIN_FILENO, F_GETFL);
        if (fl >= 0) fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
        if (uv_poll_init(loop, &stdin_poll, STDIN_FILENO) == 0)
            uv_poll_start(&stdin_poll, UV_READABLE | UV_DISCONNECT, on_stdin);
        else
            log_warn("--exit-on-stdin-close: standard input cannot be watched; ignoring");
    }
    if (remote_mode) {
        struct remote_opts ro = {.base_url = remote_url,
                                 .environment_id = environment_id,
                                 .name = remote_name,
                                 .bearer = bearer,
                                 .on_message = rpc_dispatch,
                                 .forward_url = connect_url,
                                 .direct = direct,
                                 .aws_access_key = aws_access,
                                 .aws_secret_key = aws_secret,
                                 .aws_session_token = aws_token,
                                 .aws_region = aws_region,
                                 .aws_service = aws_service};
        /* Test knobs (undocumented): shorter liveness and backoff timers. */
        if (getenv("EXEC_SERVER_REMOTE_PING_MS"))
            ro.ping_ms = strtoull(getenv("EXEC_SERVER_REMOTE_PING_MS"), NULL, 10);
        if (getenv("EXEC_SERVER_REMOTE_PONG_MS"))
            ro.pong_deadline_ms = strtoull(getenv("EXEC_SERVER_REMOTE_PONG_MS"), NULL, 10);
        if (getenv("EXEC_SERVER_REMOTE_BACKOFF_MS"))
            ro.backoff_ms = strtoull(getenv("EXEC_SERVER_REMOTE_BACKOFF_MS"), NULL, 10);
        int rr = remote_start(loop, &ro, on_remote_fatal);
        if (bearer) {
            memset(bearer, 0, strlen(bearer));
            free(bearer);
        }
        if (rr < 0) {
            fprintf(stderr, "exec-server: cannot start remote mode: %s\n", strerror(-rr));
            return 1;
        }
    }
    if (remote_mode && !listen_given) {
        /* Remote only: no local listener. */
    } else if (stdio_mode) {
        if (stdio_serve(loop, rpc_dispatch, on_stdio_eof) != 0) exit_status = 1;
    } else {
        char url[128];
        int r = ws_listen(loop, host, port, rpc_dispatch, &listener, url, sizeof url);
        if (r != 0) {
            fprintf(stderr, "exec-server: cannot listen on %s: %s\n", listen_url, uv_strerror(r));
            return 1;
        }
        if (!auth_enabled() && !is_loopback(host))
            fprintf(stderr,
                    "exec-server: WARNING: listening on %s without --ws-auth: anyone who can "
                    "reach this address can run processes and read and write files as this "
                    "user. Use --ws-auth capability-token, or listen on 127.0.0.1.\n",
                    url);
        printf("%s\n", url);
        fflush(stdout);
        log_info("listening on %s", url);
    }

    uv_run(loop, UV_RUN_DEFAULT);
    /* Everything is closed by now unless shutdown raced a close: finish the rest. */
    uv_walk(loop, close_walk_cb, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    bigbuf_trim(0);
    if (remote_mode) remote_cleanup();
    spawner_stop();
    return exit_status;
}
