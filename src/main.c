/* main: command line, signals and the event loop of the exec-server daemon.
 *
 *   exec-server [--listen URL] [--session-ttl SECONDS] [--log-level LEVEL]
 *               [--help] [--version]
 *
 * In WebSocket mode the bound URL is printed as one line on stdout once listening;
 * everything else goes to stderr. SIGTERM/SIGINT stop accepting, kill every
 * managed process group and exit 0. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/log.h"
#include "session/session.h"
#include "transport/stdio.h"
#include "transport/ws.h"

static uv_loop_t *loop;
static struct ws_listener *listener;
static uv_signal_t sig_term, sig_int;
static int exit_status;

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
    "  --help                  print this help\n"
    "  --version               print the version\n";

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void shutdown_server(void)
{
    if (listener) ws_shutdown(listener);
    listener = NULL;
    session_destroy_all();
    uv_signal_stop(&sig_term);
    uv_signal_stop(&sig_int);
    if (!uv_is_closing((uv_handle_t *)&sig_term)) uv_close((uv_handle_t *)&sig_term, NULL);
    if (!uv_is_closing((uv_handle_t *)&sig_int)) uv_close((uv_handle_t *)&sig_int, NULL);
}

static void on_signal(uv_signal_t *s, int signum)
{
    log_info("received %s; shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    shutdown_server();
}

static void on_stdio_eof(void)
{
    shutdown_server();
}

/* Parses ws://IP:PORT. Returns 0 and fills host/port, or -1. */
static int parse_ws_url(const char *url, char *host, size_t hostlen, int *port)
{
    const char *p = url + 5; /* after "ws://" */
    const char *colon;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close || close[1] != ':') return -1;
        size_t n = (size_t)(close - p - 1);
        if (n == 0 || n >= hostlen) return -1;
        memcpy(host, p + 1, n);
        host[n] = '\0';
        colon = close + 1;
        struct sockaddr_in6 a6;
        if (uv_ip6_addr(host, 0, &a6) != 0) return -1;
    } else {
        colon = strrchr(p, ':');
        if (!colon) return -1;
        size_t n = (size_t)(colon - p);
        if (n == 0 || n >= hostlen) return -1;
        memcpy(host, p, n);
        host[n] = '\0';
        struct sockaddr_in a4;
        if (uv_ip4_addr(host, 0, &a4) != 0 || strchr(host, ':')) return -1;
        /* uv_ip4_addr (inet_pton) accepts only dotted quads: host names fail. */
    }
    const char *d = colon + 1;
    if (!*d) return -1;
    long v = 0;
    for (; *d; d++) {
        if (!isdigit((unsigned char)*d)) return -1;
        v = v * 10 + (*d - '0');
        if (v > 65535) return -1;
    }
    *port = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *listen_url = "ws://127.0.0.1:0";
    uint64_t ttl_ms = 80000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("exec-server %s\n", EXEC_SERVER_VERSION);
            return 0;
        }
        const char *names[] = {"--listen", "--session-ttl", "--log-level"};
        int which = -1;
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(names[k]);
            if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
                which = k;
                if (a[n] == '=') val = a + n + 1;
                else if (i + 1 < argc) val = argv[++i];
                else {
                    fprintf(stderr, "exec-server: %s needs a value (see --help)\n", names[k]);
                    return 2;
                }
            }
        }
        if (which < 0) {
            fprintf(stderr, "exec-server: unknown argument `%s` (see --help)\n", a);
            return 2;
        }
        if (which == 0) {
            listen_url = val;
        } else if (which == 1) {
            char *end;
            errno = 0;
            double secs = strtod(val, &end);
            if (errno || *end || secs < 0 || secs > 86400 * 365) {
                fprintf(stderr, "exec-server: invalid --session-ttl `%s`; expected seconds\n", val);
                return 2;
            }
            ttl_ms = (uint64_t)(secs * 1000);
        } else {
            if (log_level_parse(val, &log_threshold) < 0) {
                fprintf(stderr,
                        "exec-server: invalid --log-level `%s`; expected error, warn, info or debug\n",
                        val);
                return 2;
            }
        }
    }

    bool stdio_mode = strcmp(listen_url, "stdio") == 0 || strcmp(listen_url, "stdio://") == 0;
    char host[64];
    int port = 0;
    if (!stdio_mode) {
        if (strncmp(listen_url, "ws://", 5) != 0) {
            fprintf(stderr,
                    "exec-server: unsupported --listen URL `%s`; expected `ws://IP:PORT` or `stdio`\n",
                    listen_url);
            return 2;
        }
        if (parse_ws_url(listen_url, host, sizeof host, &port) < 0) {
            fprintf(stderr,
                    "exec-server: invalid websocket --listen URL `%s`; expected `ws://IP:PORT`\n",
                    listen_url);
            return 2;
        }
    }

    /* A vanished peer must be an error code on write, not a process-wide kill. */
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    session_configure(loop, ttl_ms);
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);

    if (stdio_mode) {
        if (stdio_serve(loop, on_stdio_eof) != 0) exit_status = 1;
    } else {
        char url[128];
        int r = ws_listen(loop, host, port, &listener, url, sizeof url);
        if (r != 0) {
            fprintf(stderr, "exec-server: cannot listen on %s: %s\n", listen_url, uv_strerror(r));
            return 1;
        }
        printf("%s\n", url);
        fflush(stdout);
        log_info("listening on %s", url);
    }

    uv_run(loop, UV_RUN_DEFAULT);
    /* Everything is closed by now unless shutdown raced a close: finish the rest. */
    uv_walk(loop, close_walk_cb, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return exit_status;
}
