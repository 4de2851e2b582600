/* server_run: signals, listeners, remote mode and the loop (see server_run.h). */
#include "server/server_run.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "audit/audit.h"
#include "core/env_vars.h"
#include "core/host_env.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/own_ports.h"
#include "fs/fs_budget.h"
#include "helpers/spawner.h"
#include "netproxy/netproxy.h"
#include "helpers/guardian.h"
#include "remote/remote.h"
#include "rpc/dispatch.h"
#include "sandbox/cgroup_caps.h"
#include "sandbox/sandbox_host.h"
#include "server/config.h"
#include "server/reload.h"
#include "server/server_methods.h"
#include "session/process_path.h"
#include "session/session.h"
#include "transport/auth.h"
#include "transport/conn.h"
#include "transport/stdio.h"
#include "transport/tls.h"
#include "transport/ws.h"
#include "util/bigbuf.h"

#define C server_config

static uv_loop_t *loop;
static struct ws_listener *listener;
static uv_signal_t sig_term, sig_int;
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
    fs_budget_stop(); /* before the sessions go: their reads must not run again */
    session_destroy_all();
    close_signal(&sig_term);
    close_signal(&sig_int);
    reload_stop();
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

static void on_stdio_eof(void)
{
    shutdown_server();
}

static void on_remote_fatal(void)
{
    exit_status = 1;
    shutdown_server();
}

/* Memory a request frees is kept for the next one, and handed back to the kernel
 * once the server is quiet: on the virtual machines we run on, a page touched for
 * the first time costs 30-60 us (util/bigbuf.h), so glibc trimming its heap after
 * every burst and unmapping every chunk above 128 KiB made each streamed chunk,
 * delta and walk answer fault its pages in again. glibc keeps chunks of up to 32
 * MiB in its heaps and trims only above MEM_TRIM_THRESHOLD; larger buffers are
 * bigbufs, cached on their own. Once MEM_QUIET_BYTES or more have moved since the
 * last trim, a timer looks every MEM_IDLE_MS at how much moved since its last look:
 * less than MEM_QUIET_BYTES is quiet, and then it empties the bigbuf cache, trims
 * the heaps and stops. "Quiet" is measured in bytes, not loop iterations: a timer
 * restarted on every iteration never fired while anything at all happened (a
 * process printing once a second), and after a soak 273 MB stayed resident with
 * 0.6 MB in use. Both handles are unreferenced: they never keep the
 * loop alive. */
#define MEM_IDLE_MS 2000
#define MEM_QUIET_BYTES (1u << 20)
#define MEM_TRIM_THRESHOLD (16 << 20)
static uv_check_t mem_check;
static uv_timer_t mem_timer;
static uint64_t mem_seen;    /* conn_traffic_bytes() at the timer's last look */
static uint64_t mem_trimmed; /* ... at the last trim */

static void mem_timer_cb(uv_timer_t *t)
{
    uint64_t now = conn_traffic_bytes();
    bool quiet = now - mem_seen < MEM_QUIET_BYTES;
    mem_seen = now;
    if (!quiet) return; /* busy: what it uses now it will use again; look later */
    bigbuf_trim(0);
    malloc_trim(0);
    mem_trimmed = now;
    uv_timer_stop(t);
}

static void mem_check_cb(uv_check_t *c)
{
    if (uv_is_active((uv_handle_t *)&mem_timer) ||
        conn_traffic_bytes() - mem_trimmed < MEM_QUIET_BYTES)
        return;
    mem_seen = conn_traffic_bytes();
    uv_timer_start(&mem_timer, mem_timer_cb, MEM_IDLE_MS, MEM_IDLE_MS);
}

static void mem_tune(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, MEM_TRIM_THRESHOLD);
    uv_check_init(loop, &mem_check);
    uv_timer_init(loop, &mem_timer);
    uv_check_start(&mem_check, mem_check_cb);
    uv_unref((uv_handle_t *)&mem_check);
    uv_unref((uv_handle_t *)&mem_timer);
}

/* The soft descriptor limit up to the hard one, as nginx (worker_rlimit_nofile) and
 * systemd do for themselves: every connection, pipe, pty and pidfd is a descriptor,
 * and with the usual soft 1024 the server ran out after ~185 processes while the
 * hard limit allowed far more. Called after the spawner has started, so the spawner
 * and every child keep the soft limit we were given (a child using select() must
 * not see descriptors past FD_SETSIZE), as the reference's children do. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    /* An unlimited hard limit cannot be the soft one: the kernel's ceiling can. */
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    unsigned long long nr_open = 0;
    if (f && fscanf(f, "%llu", &nr_open) == 1 && nr_open && rl.rlim_cur > nr_open)
        rl.rlim_cur = (rlim_t)nr_open;
    if (f) fclose(f);
    if (rl.rlim_cur <= was) return;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        log_warn("cannot raise the descriptor limit from %llu to %llu: %s", (unsigned long long)was,
                 (unsigned long long)rl.rlim_cur, strerror(errno));
    else
        log_info("descriptor limit raised from %llu to %llu (the hard limit)",
                 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
}

static void start_signals(void)
{
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    reload_start(loop); /* SIGHUP: re-read certificates and keys, never exit */
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

static void audit_metrics(struct buf *out)
{
    audit_metrics_render(out, "exec_server");
}

/* --audit-log and --record-dir: after the spawner (never forked with the writer
 * thread's locks), before the first client. */
static int start_audit(void)
{
    struct audit_options o = {.log_path = C.audit_log,
                              .record_dir = C.record_dir,
                              .required = C.audit_required,
                              .record_input = C.record_input,
                              .fs_reads = C.audit_fs_reads,
                              .program = "exec-server"};
    char err[600];
    if (audit_start(loop, &o, err, sizeof err) < 0) {
        fprintf(stderr, "exec-server: %s\n", err);
        return 1;
    }
    metrics_set_extra(audit_metrics);
    if (C.audit_required) server_methods_gate_audit();
    return 0;
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
    /* Test knobs (docs/FLAGS.md): shorter liveness and backoff timers. */
    if (env_vars.remote_ping_ms) ro.ping_ms = strtoull(env_vars.remote_ping_ms, NULL, 10);
    if (env_vars.remote_pong_ms) ro.pong_deadline_ms = strtoull(env_vars.remote_pong_ms, NULL, 10);
    if (env_vars.remote_backoff_ms) ro.backoff_ms = strtoull(env_vars.remote_backoff_ms, NULL, 10);
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
    if (!auth_enabled() && !config_host_is_loopback(C.host))
        log_warn("WARNING: listening on %s without --ws-auth (--allow-unauthenticated): "
                 "anyone who can reach this address can run processes and read and write "
                 "files as this user",
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
    if (gr < 0)
        log_warn("cannot start the guardian process (%s); children may outlive a "
                 "crashed server",
                 strerror(-gr));
    /* A vanished peer must be an error code on write, not a process-wide kill. */
    signal(SIGPIPE, SIG_IGN);
    /* A write past RLIMIT_FSIZE must fail with EFBIG, not kill the server. */
    signal(SIGXFSZ, SIG_IGN);
    process_path_init(); /* `rg` first on the PATH children inherit (before any thread) */
    /* The password entry (shell, home) is read now, not by the loop on the first
     * environment/info: NSS may ask a directory server. After process_path_init, whose
     * PATH the shell fallback searches. */
    (void)host_env_shell_path();
    loop = uv_default_loop();
    guardian_watch(loop);
    session_configure(loop, C.session_ttl_ms);
    server_methods_register();
    start_signals();
    mem_tune();
    /* Every child is started from the spawner, a small process made now while this
     * one holds almost nothing (after the signal handlers: a SIGTERM during its start
     * must be an orderly exit, not a kill). */
    sandbox_pid_namespace_inherit = limits_sandbox_pid_namespace() == LIMITS_PID_NS_INHERIT;
    /* Which sandbox this host allows (a throwaway child makes a sandbox's namespaces
     * and mounts), said once: an operator in a container sees why its sandboxes run
     * without namespaces, or are refused. */
    char sbline[512];
    int choice = server_limits.sandbox_mode;
    sandbox_host_probe(choice < 0 ? SANDBOX_CHOICE_AUTO : (enum sandbox_mode_choice)choice, sbline,
                       sizeof sbline);
    if (sandbox_host_mode_for(false) == SANDBOX_MODE_NONE)
        log_warn("%s", sbline);
    else
        log_notice("%s", sbline);
    netproxy_configure(limits_proxy_private_ips_via_upstream(), limits_tcp_upstream_proxy());
    /* Before any listener and the spawner: the table of this server's ports, which
     * sandboxed commands may not reach (core/own_ports.h). */
    int op = own_ports_init();
    if (op < 0) {
        fprintf(stderr, "exec-server: cannot make the table of listening ports: %s\n",
                strerror(-op));
        return 1;
    }
    /* Root's sandboxes are capped by a pids cgroup (RLIMIT_NPROC never applies to
     * uid 0): say so once where none can be made. A memory cap has nothing else to
     * rest on: asked for where no memory cgroup can be made, the server does not
     * start rather than run every sandbox without it. */
    int mem_err = 0, swept = 0;
    int cg = cgroup_caps_init(&mem_err, &swept);
    /* info, not notice: housekeeping, and a start's standard error stays what the
     * reference's is (test_flags compares them) */
    if (swept > 0)
        log_info("removed %d empty cgroup director%s left by exec-servers no longer running", swept,
                 swept == 1 ? "y" : "ies");
    if (cg < 0 && geteuid() == 0)
        log_warn("no pids cgroup can be made here (%s): --sandbox-max-processes does not hold "
                 "for sandboxed commands of a server running as root",
                 strerror(-cg));
    if (server_limits.sandbox_max_memory && mem_err < 0) {
        fprintf(stderr,
                "exec-server: --sandbox-max-memory needs a memory cgroup this server can make "
                "(cgroup v1's memory hierarchy, or cgroup v2 delegating \"memory\"): %s\n",
                strerror(-mem_err));
        cgroup_caps_shutdown();
        return 2;
    }
    int sp = spawner_start();
    if (sp < 0) {
        fprintf(stderr, "exec-server: cannot start the spawner process: %s\n", strerror(-sp));
        return 1;
    }
    raise_fd_limit();
    if (start_audit() != 0) return 1;
    watch_stdin();
    if (C.remote_mode && start_remote() != 0) return 1;
    if (start_listener() != 0) return 1;
    uv_run(loop, UV_RUN_DEFAULT);
    /* Everything is closed by now unless shutdown raced a close: finish the rest. */
    uv_walk(loop, close_walk_cb, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    audit_stop(); /* what the shutdown recorded (sessions, processes) is written first */
    bigbuf_trim(0);
    if (C.remote_mode) remote_cleanup();
    spawner_stop();
    cgroup_caps_shutdown();
    return exit_status;
}
