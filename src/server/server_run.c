/* server_run: signals, listeners, remote mode and the loop (see server_run.h). */
#include "server/server_run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "core/log.h"
#include "process/guardian.h"
#include "remote/remote.h"
#include "rpc/dispatch.h"
#include "server/config.h"
#include "server/server_methods.h"
#include "session/session.h"
#include "transport/auth.h"
#include "transport/stdio.h"
#include "transport/tls.h"
#include "transport/ws.h"

#define C server_config

static uv_loop_t *loop;
static struct ws_listener *listener;
static uv_signal_t sig_term, sig_int;
static uv_signal_t sig_hup; /* wss only: certificate reload */
static uv_poll_t stdin_poll;
static int exit_status;

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void close_signal(uv_signal_t *s)
{
    uv_signal_stop(s);
    if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, NULL);
}

static void shutdown_server(void)
{
    if (listener) ws_shutdown(listener);
    listener = NULL;
    if (C.remote_mode) remote_stop();
    session_destroy_all();
    close_signal(&sig_term);
    close_signal(&sig_int);
    if (tls_server_enabled()) close_signal(&sig_hup);
}

static void on_signal(uv_signal_t *s, int signum)
{
    log_info("received %s; shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    shutdown_server();
}

/* --exit-on-stdin-close: the parent that owns our stdin pipe is gone (or closed it),
 * so stop as on SIGTERM. Bytes on the pipe mean nothing and are discarded. */
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

static void start_signals(void)
{
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    if (tls_server_enabled()) {
        uv_signal_init(loop, &sig_hup);
        uv_signal_start(&sig_hup, on_sighup, SIGHUP);
    }
}

/* --exit-on-stdin-close outside stdio mode (over stdio, stdin is the transport and
 * its end already stops the server). */
static void watch_stdin(void)
{
    if (!C.exit_on_stdin_close || C.stdio_mode) return;
    int fl = fcntl(STDIN_FILENO, F_GETFL);
    if (fl >= 0) fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
    if (uv_poll_init(loop, &stdin_poll, STDIN_FILENO) == 0)
        uv_poll_start(&stdin_poll, UV_READABLE | UV_DISCONNECT, on_stdin);
    else
        log_warn("--exit-on-stdin-close: standard input cannot be watched; ignoring");
}

static int start_remote(void)
{
    struct remote_opts ro = {.base_url = C.remote_url,
                             .environment_id = C.environment_id,
                             .name = C.remote_name,
                             .bearer = C.bearer,
                             .chatgpt_account_id = C.chatgpt_account,
                             .on_message = rpc_dispatch,
                             .forward_url = C.connect_url,
                             .direct = C.direct,
                             .aws_access_key = C.aws_access,
                             .aws_secret_key = C.aws_secret,
                             .aws_session_token = C.aws_token,
                             .aws_region = C.aws_region,
                             .aws_service = C.aws_service};
    /* Test knobs (undocumented): shorter liveness and backoff timers. */
    if (getenv("EXEC_SERVER_REMOTE_PING_MS"))
        ro.ping_ms = strtoull(getenv("EXEC_SERVER_REMOTE_PING_MS"), NULL, 10);
    if (getenv("EXEC_SERVER_REMOTE_PONG_MS"))
        ro.pong_deadline_ms = strtoull(getenv("EXEC_SERVER_REMOTE_PONG_MS"), NULL, 10);
    if (getenv("EXEC_SERVER_REMOTE_BACKOFF_MS"))
        ro.backoff_ms = strtoull(getenv("EXEC_SERVER_REMOTE_BACKOFF_MS"), NULL, 10);
    int rr = remote_start(loop, &ro, on_remote_fatal);
    config_free(); /* the bearer: remote_start copied what it needs */
    if (rr < 0) {
        fprintf(stderr, "exec-server: cannot start remote mode: %s\n", strerror(-rr));
        return 1;
    }
    return 0;
}

/* The local listener: none (remote only), stdio or WebSocket. */
static int start_listener(void)
{
    if (C.remote_mode && !config_given("listen")) return 0;
    if (C.stdio_mode) {
        if (stdio_serve(loop, rpc_dispatch, on_stdio_eof) != 0) exit_status = 1;
        return 0;
    }
    char url[128];
    int r = ws_listen(loop, C.host, C.port, rpc_dispatch, &listener, url, sizeof url);
    if (r != 0) {
        fprintf(stderr, "exec-server: cannot listen on %s: %s\n", C.listen_url, uv_strerror(r));
        return 1;
    }
    if (!auth_enabled() && !is_loopback(C.host))
        fprintf(stderr,
                "exec-server: WARNING: listening on %s without --ws-auth: anyone who can "
                "reach this address can run processes and read and write files as this "
                "user. Use --ws-auth capability-token, or listen on 127.0.0.1.\n",
                url);
    printf("%s\n", url);
    fflush(stdout);
    log_info("listening on %s", url);
    return 0;
}

int server_run(void)
{
    /* Before the loop exists (no threads yet): the watchdog that kills our
     * process groups if this process dies without cleaning up. */
    int gr = guardian_start();
    if (gr < 0) log_warn("cannot start the guardian process (%s); children may outlive a "
                         "crashed server", strerror(-gr));
    /* A vanished peer must be an error code on write, not a process-wide kill. */
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    session_configure(loop, C.session_ttl_ms);
    server_methods_register();
    start_signals();
    watch_stdin();
    if (C.remote_mode && start_remote() != 0) return 1;
    if (start_listener() != 0) return 1;
    uv_run(loop, UV_RUN_DEFAULT);
    /* Everything is closed by now unless shutdown raced a close: finish the rest. */
    uv_walk(loop, close_walk_cb, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    if (C.remote_mode) remote_cleanup();
    return exit_status;
}
