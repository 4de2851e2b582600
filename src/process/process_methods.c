/* process_methods: the JSON-RPC handlers process/start, read, write and terminate
 * (the terminal and stdin extensions are in tty_methods.c). They decode params,
 * pass the lifecycle gate, and drive the model in proc.c; the process record and
 * its event log live there (PROTOCOL.md section 5). */
#include "process/process_rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "audit/audit.h"
#include "core/limits.h"
#include "core/log.h"
#include "netproxy/netproxy.h"
#include "netproxy/netproxy_rpc.h"
#include "process/env_policy.h"
#include "process/proc_internal.h"
#include "process/shell_snapshot.h"
#include "process/spawn.h"
#include "proto/base64.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/hold.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_host.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "util/mem.h"
#include "util/oserr.h"

static void free_strv(char **v)
{
    if (!v) return;
    for (char **s = v; *s; s++)
        free(*s);
    free(v);
}

/* argv items and env values are strings (serde's Vec<String> / map of String). */
static bool require_string(struct pdec *d, json_t *v)
{
    if (json_is_string(v)) return true;
    char what[128];
    pdec_describe(v, what, sizeof what);
    pdec_fail(d, "invalid type: %s, expected a string", what);
    return false;
}

/* A process/start that passed its checks: what the spawn needs, kept while a
 * shell snapshot is captured (the strings are borrowed from req's params). */
struct start_job {
    struct rpc_req *req;
    struct proc_table *t;
    const char *id, *program;
    json_t *env;
    bool tty, pipe_stdin, sandboxed, have_pol;
    unsigned short rows, cols;
    char **cargv, **cenv;
    char *cwd_path;
    struct sandbox_policy pol;
    enum proc_snapshot_shell shell;
    struct netproxy_params netp; /* networkProxy and enforceManagedNetwork, decoded */
    struct netproxy *proxy;      /* the child's policy proxy, until the process owns it */
    bool transparent;            /* transparent TCP (sandbox/tun.h, netproxy/np_tun.c) */
};

static void job_free(struct start_job *j)
{
    netproxy_release(j->proxy);
    netproxy_params_free(&j->netp);
    if (j->have_pol) sandbox_policy_free(&j->pol);
    free_strv(j->cargv);
    env_free(j->cenv);
    free(j->cwd_path);
    free(j);
}

/* The state for /dev/fd/3: a memfd whose first line closes it again. */
static int snapshot_fd(const struct proc_snapshot *snap)
{
    int fd = memfd_create("exec-server-shell-snapshot", MFD_CLOEXEC);
    if (fd < 0) return -1;
    static const char head[] = "exec 3<&-\n";
    if (write(fd, head, sizeof head - 1) != (ssize_t)(sizeof head - 1) ||
        write(fd, snap->state, snap->state_len) != (ssize_t)snap->state_len) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the spawn window ------------------------------------------------------ */

/* Starts in their spawn window over every session (counted by --max-total-processes
 * beside the processes). */
static unsigned starts_in_flight;

static void start_abandon(struct proc_start *ps);

static void start_link(struct proc_table *t, struct proc_start *ps)
{
    t->abandon_start = start_abandon;
    ps->table = t;
    ps->next = t->starting;
    if (ps->next) ps->next->prev = ps;
    t->starting = ps;
    starts_in_flight++;
}

static void start_unlink(struct proc_start *ps)
{
    if (!ps->table) return;
    if (ps->prev)
        ps->prev->next = ps->next;
    else
        ps->table->starting = ps->next;
    if (ps->next) ps->next->prev = ps->prev;
    ps->table = NULL;
    ps->next = ps->prev = NULL;
    starts_in_flight--;
}

static void start_free(struct proc_start *ps)
{
    sandbox_hold_release(ps->hold);
    netproxy_release(ps->netproxy);
    if (ps->bridge_fd >= 0) close(ps->bridge_fd);
    free_strv(ps->argv);
    free(ps->cwd);
    free(ps->id);
    free(ps->argv0);
    buf_free(&ps->audit_desc);
    free(ps);
}

/* The kind 0.171.0 puts in a spawn failure's error.data (verified for a missing
 * program or cwd, a program without the execute bit, a directory, a bad format). */
static const char *spawn_error_kind(int errnum)
{
    if (errnum == ENOENT) return "spawnNotFound";
    if (errnum == EACCES || errnum == EPERM) return "spawnPermissionDenied";
    return "spawnFailed";
}

/* The outcome of a start (spawn_done_fn): the process joins the table and the
 * reply goes out before its first notification; or the error; or, when a
 * process/terminate came during the spawn window, the cancellation. */
static void start_done(void *arg, int err, const struct spawn_result *sr, int sberr)
{
    struct proc_start *ps = arg;
    struct rpc_req *req = ps->req;
    struct proc_table *t = ps->table;
    start_unlink(ps);
    if (err == 0 && (ps->cancelled || !t)) {
        /* It never became a process of ours: stopped, and its hold ends once reaped. */
        spawn_discard(req->loop, sr, ps->hold);
        ps->hold = NULL;
    }
    if (ps->cancelled || !t) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s start was cancelled", ps->id);
    } else if (err == SPAWN_ERR_SANDBOX) {
        log_warn("process %s: the sandbox could not be set up: %s", ps->id, strerror(sberr));
        proc_audit_failed(ps, t->owner_id, "sandbox intent cannot be enforced on this executor");
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor%s",
                        sandbox_host_refusal());
    } else if (err < 0) {
        char text[256];
        oserr_format(-err, text, sizeof text);
        if (log_threshold >= LOG_DEBUG) {
            /* The reply carries only the errno text; the operator also gets which
             * program and directory it was about, and the errno's name. */
            char idv[160], a0[200], cv[300];
            const char *ename = strerrorname_np(-err);
            log_debug("event=process_start_failed session=%s process_id=%s argv0=%s cwd=%s "
                      "errno=%s error=%s",
                      t->owner_id, log_value(ps->id, idv, sizeof idv),
                      log_value(ps->argv0, a0, sizeof a0),
                      log_value(ps->cwd ? ps->cwd : "", cv, sizeof cv), ename ? ename : "?", text);
        }
        proc_audit_failed(ps, t->owner_id, text);
        rpc_reply_error_kind(req, RPC_INTERNAL_ERROR, spawn_error_kind(-err), text);
    } else {
        if (ps->bridge_fd >= 0) {
            if (netproxy_attach_fd_source(ps->netproxy, ps->bridge_fd) < 0) close(ps->bridge_fd);
            ps->bridge_fd = -1;
        }
        struct proc *p = proc_add(t, ps->id, ps->tty, ps->sandboxed, sr, req->loop);
        p->argv = ps->argv;
        ps->argv = NULL;
        p->cwd = ps->cwd;
        ps->cwd = NULL;
        p->hold = ps->hold;
        ps->hold = NULL;
        p->netproxy = ps->netproxy;
        ps->netproxy = NULL;
        proc_audit_started(p, ps, t->owner_id); /* before its first output */
        char idv[160], a0[200];
        log_event(
            "event=process_start session=%s process_id=%s pid=%d argv0=%s tty=%s "
            "sandboxed=%s sandbox=%s",
            t->owner_id, log_value(ps->id, idv, sizeof idv), (int)sr->pid,
            log_value(ps->argv0, a0, sizeof a0), ps->tty ? "true" : "false",
            ps->sandboxed ? "true" : "false",
            sandbox_mode_name(ps->sandboxed ? (enum sandbox_mode)ps->mode : SANDBOX_MODE_NONE));
        /* The response goes out before any notification of the new process. */
        json_t *result = json_pack("{s:s,s:s}", "processId", ps->id, "sandboxType",
                                   ps->sandboxed ? "linuxSeccomp" : "none");
        /* Ours: which sandbox it runs in (sandbox_host.h) */
        if (ps->sandboxed)
            json_object_set_new(result, "sandboxMode",
                                json_string(sandbox_mode_name((enum sandbox_mode)ps->mode)));
        rpc_reply_json(req, result);
        proc_watch(p);
    }
    start_free(ps);
}

/* A start whose table is being destroyed (the session ends): the child, if any, is
 * stopped and the request answered (the table's abandon_start). */
static void start_abandon(struct proc_start *ps)
{
    start_unlink(ps);
    spawn_cancel(ps->op, ps->hold); /* the child, if one starts, is stopped then */
    ps->hold = NULL;
    rpc_reply_error(ps->req, RPC_INVALID_REQUEST, "process %s start was cancelled", ps->id);
    start_free(ps);
}

/* Transparent TCP's own reasons not to run the command, in the reference's words
 * (its sandbox wrapper exits 101 with them), or NULL with *tun_fd an O_PATH
 * descriptor of /dev/net/tun for the sandbox's init (the private /dev has none). */
static const char *start_transparent_refusal(const struct start_job *j, int *tun_fd, char *why,
                                             size_t n)
{
    if (!j->netp.enable_socks5)
        return "exec-server sandbox: failed to prepare transparent TCP: transparent TCP "
               "requires managed SOCKS5";
    *tun_fd = open("/dev/net/tun", O_PATH | O_CLOEXEC);
    if (*tun_fd >= 0) return NULL;
    snprintf(why, n, "exec-server sandbox: failed to prepare transparent TCP: /dev/net/tun: %s",
             strerror(errno));
    return why;
}

/* The next sandboxes' cgroups, made on a pool thread while this one starts: one
 * refill at a time, only once a start took cgroups (an idle server makes none), and
 * only when none is left ready (a finished sandbox's usually is: sandbox/hold.h). */
static uv_work_t cgroup_refill;
static bool cgroup_refilling;

static void cgroup_refill_run(uv_work_t *w)
{
    sandbox_hold_prepare(server_limits.sandbox_max_processes, server_limits.sandbox_max_memory);
}

static void cgroup_refill_done(uv_work_t *w, int status)
{
    cgroup_refilling = false;
}

/* The sandbox's hold (sandbox/hold.h) with the server's caps; what its init joins
 * its cgroups by into fds. *err < 0 when the memory cap cannot be made. */
static struct sandbox_hold *hold_sandbox(uv_loop_t *loop, const struct sandbox_policy *pol,
                                         int fds[2], int *err)
{
    struct sandbox_hold *h = sandbox_hold_acquire(pol, server_limits.sandbox_max_processes,
                                                  server_limits.sandbox_max_memory, err);
    sandbox_hold_cgroup_fds(h, fds);
    if (fds[0] >= 0 && !cgroup_refilling && sandbox_hold_prepare_wanted())
        cgroup_refilling =
            uv_queue_work(loop, &cgroup_refill, cgroup_refill_run, cgroup_refill_done) == 0;
    return h;
}

/* The error reply of a start that failed before its process existed (err < 0). */
static void reply_start_failed(struct rpc_req *req, int err, bool memory_cap)
{
    char text[256];
    size_t at = memory_cap ? (size_t)snprintf(text, sizeof text,
                                              "the sandbox's memory cap (--sandbox-max-memory) "
                                              "cannot be made: ")
                           : 0;
    oserr_format(-err, text + at, sizeof text - at);
    rpc_reply_error_kind(req, RPC_INTERNAL_ERROR, spawn_error_kind(-err), text);
}

/* Spawns the job's command (with the snapshot restored when snap is given), replies,
 * then watches it. Frees the job. */
static void start_launch(struct start_job *j, const struct proc_snapshot *snap)
{
    struct rpc_req *req = j->req;
    struct proc_table *t = j->t;
    const char *id = j->id;
    struct sandbox_hold *hold = NULL;
    char **argv = j->cargv, **envp = j->cenv, **snap_argv = NULL, **snap_env = NULL;
    char *snap_script = NULL;
    int state_fd = -1;
    if (snap) {
        const char *flag;
        char **extra = NULL;
        size_t nextra = 0;
        proc_snapshot_command(j->shell, snap, j->cargv[2], &flag, &snap_script, &extra, &nextra);
        size_t argc = 0;
        while (j->cargv[argc])
            argc++;
        snap_argv = xcalloc(argc + 1, sizeof *snap_argv);
        memcpy(snap_argv, j->cargv, argc * sizeof *snap_argv);
        snap_argv[1] = (char *)flag;
        snap_argv[2] = snap_script;
        snap_env = proc_snapshot_env(j->cenv, j->env, snap, extra, nextra);
        argv = snap_argv;
        envp = snap_env;
        if (snap->fd_source && (state_fd = snapshot_fd(snap)) < 0) {
            /* Without the state the prelude would fail: run the plain command. */
            argv = j->cargv;
            envp = j->cenv;
        }
    }
    /* The managed network inside a sandbox (enforceManagedNetwork): the child's own
     * network namespace reaches the proxy only, through its init, which listens on
     * the proxy's ports on loopback in there and hands each connection over. */
    int bridge[2] = {-1, -1}, tun_fd = -1;
    bool bridged = j->sandboxed && j->pol.net_restricted &&
                   (j->netp.enforce_managed_network || j->transparent);
    const char *refusal = j->sandboxed ? j->pol.refusal : NULL;
    int refusal_code = 0;
    char tun_why[200];
    if (bridged && !j->proxy && !refusal) {
        refusal = "exec-server sandbox: failed to prepare host proxy routing bridge: managed "
                  "proxy mode requires proxy environment variables";
        refusal_code = 101; /* the reference's sandbox wrapper panics with 101 */
    } else if (j->transparent && !refusal &&
               (refusal = start_transparent_refusal(j, &tun_fd, tun_why, sizeof tun_why))) {
        refusal_code = 101; /* as the reference's, with its words */
    } else if (bridged && j->proxy &&
               socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bridge) < 0) {
        char text[256];
        oserr_format(errno, text, sizeof text);
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", text);
        if (state_fd >= 0) close(state_fd);
        if (tun_fd >= 0) close(tun_fd);
        goto out;
    }
    uint16_t ports[2] = {0, 0};
    if (bridge[0] >= 0) netproxy_ports(j->proxy, &ports[0], &ports[1]);
    struct spawn_request rq = {
        .program = j->program,
        .argv = argv,
        .envp = envp,
        .path_env = env_get(envp, "PATH"),
        .cwd = j->cwd_path,
        .tty = j->tty,
        .rows = j->rows,
        .cols = j->cols,
        .pipe_stdin = j->pipe_stdin,
        .sandbox = j->sandboxed ? &j->pol : NULL,
        .pid_inherit = sandbox_pid_namespace_inherit,
        .extra_fds = state_fd >= 0 ? &state_fd : NULL,
        .n_extra_fds = state_fd >= 0 ? 1 : 0,
        .proxy_fd = bridge[1],
        .proxy_ports = {ports[0], ports[1]},
        .transparent = tun_fd >= 0,
        .tun_fd = tun_fd,
        .refusal = refusal,
        .refusal_code = refusal_code,
        .cgroup_fds = {-1, -1},
    };
    int herr = 0;
    if (j->sandboxed && !refusal) hold = hold_sandbox(req->loop, &j->pol, rq.cgroup_fds, &herr);
    /* The spawn window: the request goes to the spawner now and the reply when the
     * outcome arrives (start_done); the loop serves other requests meanwhile. What
     * the outcome needs moves from the job to the start. */
    struct proc_start *ps = xcalloc(1, sizeof *ps);
    ps->id = xstrdup(id);
    ps->argv0 = xstrdup(j->program);
    ps->req = req;
    ps->tty = j->tty;
    ps->sandboxed = j->sandboxed;
    ps->mode = j->sandboxed ? (int)sandbox_host_mode_for(j->pol.legacy_landlock) : 0;
    ps->bridge_fd = -1;
    ps->rows = j->rows;
    ps->cols = j->cols;
    buf_init(&ps->audit_desc);
    proc_audit_describe(&ps->audit_desc, j->env, j->sandboxed ? &j->pol : NULL, j->proxy != NULL);
    int err = herr < 0 ? herr : spawn_child_async(req->loop, &rq, start_done, ps, &ps->op);
    if (state_fd >= 0) close(state_fd);
    if (tun_fd >= 0) close(tun_fd);
    if (bridge[1] >= 0) close(bridge[1]);
    if (err < 0) {
        if (bridge[0] >= 0) close(bridge[0]);
        start_free(ps);
        reply_start_failed(req, err, herr < 0);
        goto out;
    }
    ps->hold = hold;
    hold = NULL;
    ps->bridge_fd = bridge[0];
    ps->netproxy = j->proxy;
    j->proxy = NULL;
    ps->argv = j->cargv;
    j->cargv = NULL;
    ps->cwd = j->cwd_path;
    j->cwd_path = NULL;
    start_link(t, ps);
out:
    sandbox_hold_release(hold);
    free(snap_argv);
    free(snap_script);
    env_free(snap_env);
    job_free(j);
}

/* A start that waited for its shell snapshot. */
static void on_snapshot(void *job, enum proc_snapshot_outcome outcome,
                        const struct proc_snapshot *snap)
{
    struct start_job *j = job;
    if (outcome == SNAP_CANCELLED) {
        rpc_req_free(j->req);
        job_free(j);
        return;
    }
    start_launch(j, outcome == SNAP_READY ? snap : NULL);
}

/* The working directory, and the sandbox policy: parsed, then prepared here
 * (allocations, the Landlock ruleset) so the child only makes system calls.
 * Whatever cannot be enforced is refused. False after replying. */
static bool start_prepare_cwd_sandbox(struct start_job *j, const char *cwd, json_t *sandbox)
{
    struct rpc_req *req = j->req;
    size_t cwd_len;
    struct uri_error uerr;
    if (uri_to_path(cwd, strlen(cwd), true, &j->cwd_path, &cwd_len, &uerr) < 0) {
        if (uerr.kind == URI_ERR_HOST || uerr.kind == URI_ERR_DRIVE ||
            uerr.kind == URI_ERR_PLATFORM)
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "cwd URI `%s` is not valid on this exec-server host: %s", cwd,
                            uerr.message);
        else
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", uerr.message);
        return false;
    }
    struct sandbox_error serr;
    if (sandbox_policy_parse(sandbox, j->cwd_path, &j->pol, &serr) < 0) {
        rpc_reply_error(req, sandbox_error_code(&serr), "%s", serr.message);
        return false;
    }
    j->have_pol = true;
    if (sandbox_policy_needs_process(&j->pol)) {
        if (sandbox_policy_check(&j->pol) < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "sandbox intent cannot be enforced on this executor%s",
                            sandbox_host_refusal());
            return false;
        }
        j->sandboxed = true;
    }
    return true;
}

/* Transparent TCP: asked for by proxy.transparentTcp (with any sandbox: validated),
 * or by --linux-sandbox-transparent-tcp for a sandboxed start with
 * enforceManagedNetwork. The child then gets its own network namespace with the TUN
 * device, whatever the sandbox says of the network and even when it needs no other
 * confinement (as the reference's). False after replying. */
static bool start_prepare_transparent(struct start_job *j)
{
    bool flag = limits_sandbox_transparent_tcp() && j->netp.enforce_managed_network;
    if (!j->netp.present || !j->have_pol || !j->pol.sandboxed || !(j->netp.transparent_tcp || flag))
        return true;
    j->transparent = true;
    j->pol.net_restricted = true;
    if (!j->sandboxed && sandbox_policy_check(&j->pol) < 0) {
        rpc_reply_error(j->req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor%s",
                        sandbox_host_refusal());
        return false;
    }
    /* A TUN device lives in a network namespace of the sandbox's own. */
    if (sandbox_host_mode_for(j->pol.legacy_landlock) != SANDBOX_MODE_NAMESPACES) {
        rpc_reply_error(j->req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor (transparentTcp "
                        "needs a network namespace, and this sandbox has none: %s)",
                        sandbox_host.why_not[0] ? sandbox_host.why_not
                                                : "useLegacyLandlock or --sandbox-mode landlock");
        return false;
    }
    j->sandboxed = true;
    return true;
}

/* May this start join j->t? In the reference's order: the network proxy's settings
 * (before argv, like its prepare_exec_request), a non-empty argv, a free id, the
 * session's and the server's process caps, a program. False after replying. */
static bool start_check_table(struct start_job *j, size_t argc)
{
    struct rpc_req *req = j->req;
    struct proc_table *t = j->t;
    /* Starts waiting for a shell snapshot hold their id and count as running. */
    unsigned live = proc_table_live(t) + proc_snapshot_waiting(t, NULL);
    char nerr[512];
    if (netproxy_validate(&j->netp, j->have_pol && j->pol.sandboxed, nerr, sizeof nerr) < 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", nerr);
        return false;
    }
    if (argc == 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "argv must not be empty");
        return false;
    }
    if (proc_find(t, j->id) || proc_snapshot_waiting(t, j->id) || proc_starting(t, j->id)) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s already exists", j->id);
        return false;
    }
    if (live >= server_limits.max_processes) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "process limit reached: this session already has %u running "
                        "processes (--max-processes %u); wait for one to exit or "
                        "terminate one",
                        live, server_limits.max_processes);
        return false;
    }
    if (proc_live_total() + starts_in_flight >= server_limits.max_total_processes) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "process limit reached: this server already has %u running "
                        "processes (--max-total-processes %u); wait for one to exit or "
                        "terminate one",
                        proc_live_total() + starts_in_flight, server_limits.max_total_processes);
        return false;
    }
    if (!*j->program) {
        rpc_reply_error_kind(req, RPC_INTERNAL_ERROR, "spawnFailed",
                             "missing program for pipe spawn");
        return false;
    }
    return true;
}

/* The child's argv (arg0 in place of argv[0] when given) and environment: the
 * server's filtered by the env policy, the request's on top, then the trace
 * context and the managed network's proxy variables. */
static void start_build_command(struct start_job *j, json_t *argv, const char *arg0,
                                const struct env_policy *env_pol)
{
    size_t i;
    json_t *v;
    j->cargv = xcalloc(json_array_size(argv) + 1, sizeof *j->cargv);
    json_array_foreach(argv, i, v) j->cargv[i] = xstrdup(json_string_value(v));
    if (arg0) {
        free(j->cargv[0]);
        j->cargv[0] = xstrdup(arg0);
    }
    extern char **environ;
    j->cenv = env_build(environ, env_pol, j->env);
    if (j->req->trace) j->cenv = env_add_trace(j->cenv, j->req->trace);
    if (j->proxy) j->cenv = netproxy_child_env(j->proxy, j->cenv);
}

/* process/start: decode, gate, resolve cwd, prepare the sandbox, check the table,
 * then spawn (after the shell snapshot, when one applies), then reply before the
 * first notification. Every failure replies once and leaves through `out`, which
 * frees whatever was built so far. */
static void handle_start(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "ExecParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    json_t *argv = pdec_array(&d, "argv", PDEC_REQUIRED);
    const char *cwd = pdec_string(&d, "cwd", PDEC_REQUIRED);
    json_t *env = pdec_object(&d, "env", PDEC_REQUIRED);
    bool tty = pdec_bool(&d, "tty", PDEC_REQUIRED, false);
    bool pipe_stdin = pdec_bool(&d, "pipeStdin", PDEC_OPTIONAL_NONNULL, false);
    const char *arg0 = pdec_string(&d, "arg0", PDEC_OPTIONAL);
    json_t *sandbox = pdec_object(&d, "sandbox", PDEC_OPTIONAL);
    struct env_policy env_pol;
    bool has_env_pol;
    env_policy_decode(&d, &env_pol, &has_env_pol);
    struct proc_snapshot_req snap_req;
    bool has_snap;
    proc_snapshot_decode(&d, &snap_req, &has_snap);
    unsigned short rows = 0, cols = 0;
    proc_decode_size(&d, &rows, &cols);
    struct netproxy_params netp;
    netproxy_params_decode(&d, &netp);
    size_t i;
    json_t *v;
    if (!d.failed) {
        json_array_foreach(argv, i, v) if (!require_string(&d, v)) break;
        const char *k;
        json_object_foreach(env, k, v) if (!require_string(&d, v)) break;
    }
    if (d.failed) {
        netproxy_params_free(&netp);
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
        return;
    }
    if (!rpc_check_ready(req)) {
        netproxy_params_free(&netp);
        return;
    }

    struct start_job *j = xcalloc(1, sizeof *j);
    j->netp = netp; /* the job owns it now */
    j->req = req;
    j->id = id;
    j->env = env;
    j->tty = tty;
    j->pipe_stdin = pipe_stdin;
    j->rows = rows;
    j->cols = cols;

    if (!start_prepare_cwd_sandbox(j, cwd, sandbox)) goto out;
    size_t argc = json_array_size(argv);
    struct session *s = session_of(req->conn);
    struct proc_table *t = proc_table_of(s);
    j->t = t;
    const char *program = argc ? json_string_value(json_array_get(argv, 0)) : "";
    j->program = program;
    if (!start_check_table(j, argc) || !start_prepare_transparent(j)) goto out;
    char nerr[512];
    struct netproxy_client client = netproxy_session_client(s);
    if (j->netp.present &&
        netproxy_start(req->loop, &j->netp, &client, id, &j->proxy, nerr, sizeof nerr) < 0) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", nerr);
        goto out;
    }
    int snap_applies = 0;
    if (has_snap) {
        char err[320];
        snap_req.cwd = cwd;
        snap_req.env_policy = has_env_pol ? json_object_get(req->params, "envPolicy") : NULL;
        snap_req.sandbox = sandbox;
        snap_applies = proc_snapshot_check(&snap_req, argv, err, sizeof err);
        if (snap_applies < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            goto out;
        }
        j->shell = snap_req.shell;
    }

    start_build_command(j, argv, arg0, has_env_pol ? &env_pol : NULL);
    if (snap_applies && !(j->sandboxed && j->pol.refusal)) {
        /* The capture runs what the command would run, with its own script. */
        struct spawn_request capture = {
            .program = program,
            .argv = j->cargv,
            .envp = j->cenv,
            .path_env = env_get(j->cenv, "PATH"),
            .cwd = j->cwd_path,
            .sandbox = j->sandboxed ? &j->pol : NULL,
            .pid_inherit = sandbox_pid_namespace_inherit,
            .proxy_fd = -1,
            .cgroup_fds = {-1, -1},
        };
        proc_snapshot_get(req->loop, t, id, &snap_req, &capture, on_snapshot, j);
        return;
    }
    start_launch(j, NULL);
    return;
out:
    job_free(j);
}

static void handle_read(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "ReadParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    uint64_t after = pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL);
    bool has_max = false;
    uint64_t max_bytes = pdec_u64(&d, "maxBytes", PDEC_OPTIONAL, 0, &has_max);
    uint64_t wait_ms = pdec_u64(&d, "waitMs", PDEC_OPTIONAL, 0, NULL);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
    if (wait_ms == 0 || proc_read_ready(p, after)) {
        proc_reply_read(req, p, after, has_max, max_bytes);
        return;
    }
    proc_wait_read(req, p, after, has_max, max_bytes, wait_ms);
}

static bool write_id_seen(struct proc *p, const char *wid)
{
    for (size_t i = 0; i < p->nwrite_ids; i++)
        if (strcmp(p->write_ids[i], wid) == 0) return true;
    return false;
}

static void write_id_remember(struct proc *p, const char *wid)
{
    if (!p->write_ids) p->write_ids = xcalloc(MAX_WRITE_IDS, sizeof *p->write_ids);
    if (p->nwrite_ids < MAX_WRITE_IDS) {
        p->write_ids[p->nwrite_ids++] = xstrdup(wid);
        return;
    }
    free(p->write_ids[p->write_ids_next]);
    p->write_ids[p->write_ids_next] = xstrdup(wid);
    p->write_ids_next = (p->write_ids_next + 1) % MAX_WRITE_IDS;
}

static void handle_write(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WriteParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    size_t clen = 0;
    const char *chunk = pdec_string_len(&d, "chunk", PDEC_REQUIRED, &clen);
    const char *wid = pdec_string(&d, "writeId", PDEC_OPTIONAL);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    if (wid && !*wid) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "writeId must not be empty");
        return;
    }
    struct wq_item *it = xmalloc(sizeof *it + base64_decoded_max(clen));
    char err[96];
    if (base64_decode(chunk, clen, it->data, &it->len, err, sizeof err) < 0) {
        free(it);
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
        return;
    }
    struct proc *p = proc_find(t, id);
    if (!p && proc_starting(t, id)) {
        free(it);
        rpc_reply_json(req, json_pack("{s:s}", "status", "starting"));
        return;
    }
    const char *fail = NULL;
    /* Statuses, not errors (PROTOCOL.md §5.3): codex's client maps these results
     * to its own errors and treats a JSON-RPC error here as a broken connection. */
    if (!p || !p->had_stdin || p->eof_requested) {
        free(it);
        rpc_reply_json(req, json_pack("{s:s}", "status", p ? "stdinClosed" : "unknownProcess"));
        return;
    }
    if (p->terminated && p->state == PROC_RUNNING) fail = "failed to write to process stdin";
    if (fail) {
        free(it);
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", fail);
        return;
    }
    if (wid && write_id_seen(p, wid)) {
        free(it);
        rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
        return;
    }
    if (wid) write_id_remember(p, wid);
    if (p->tty_rec) audit_tty_input(p->tty_rec, it->data, it->len);
    proc_stdin_push(p, it);
    rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
}

static void handle_terminate(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TerminateParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    struct proc *p = proc_find(t, id);
    struct proc_start *ps = p ? NULL : proc_starting(t, id);
    /* In the spawn window the start is cancelled: it fails, and the child, if it
     * starts, is stopped (PROTOCOL.md 5.4). */
    if (ps && !ps->cancelled) {
        ps->cancelled = true;
        rpc_reply_json(req, json_pack("{s:b}", "running", true));
        return;
    }
    bool running = p && p->state == PROC_RUNNING;
    if (running) {
        proc_kill(p);
        proc_audit_signal(p, "process.terminate", SIGKILL);
    }
    rpc_reply_json(req, json_pack("{s:b}", "running", running));
}

static const char *state_name(enum proc_state st)
{
    return st == PROC_RUNNING ? "running" : st == PROC_EXITED ? "exited" : "closed";
}

/* process/list {sessionId?} (ours, capability processList): what ps shows, for this
 * session or another one the client may see; newest first. */
static void handle_list(struct rpc_req *req)
{
    struct pdec d = {0};
    const char *sid = NULL;
    /* Absent or null params list this session, like `{}`. */
    if (req->params && !json_is_null(req->params) && pdec_begin(&d, req->params, "ListParams"))
        sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    json_t *list = json_array();
    for (struct proc *p = t->head; p; p = p->next) {
        json_t *argv = json_array();
        for (char **a = p->argv; a && *a; a++)
            json_array_append_new(argv, json_string(*a));
        char *cwd = p->cwd ? uri_from_path(p->cwd, strlen(p->cwd)) : NULL;
        json_t *o = json_pack("{s:s,s:o,s:o,s:b,s:i,s:s,s:I,s:o,s:I}", "processId", p->id, "argv",
                              argv, "cwd", cwd ? json_string(cwd) : json_null(), "tty", p->tty,
                              "pid", (int)p->pid, "state", state_name(p->state), "startedAtMs",
                              (json_int_t)p->started_ms, "exitCode",
                              p->state >= PROC_EXITED ? json_integer(p->exit_code) : json_null(),
                              "nextSeq", (json_int_t)p->log.next_seq);
        free(cwd);
        json_array_append_new(list, o);
    }
    rpc_reply_json(req, json_pack("{s:s,s:o}", "sessionId", t->owner_id, "processes", list));
}

/* process/attach {sessionId, processId, afterSeq?} (ours, capability processAttach):
 * a second viewer. Answers like process/read (the retained output after afterSeq,
 * default 0, and the state), and from then on pushes every event of the process to
 * this connection too, carrying `sessionId`. The reply and the subscription happen
 * in one step, so the viewer sees the output with no gap and no repeat. The process
 * may belong to this client's own session (then only the reply matters) or to
 * another one it may see, attached to someone else or not. */
static void handle_attach(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "AttachParams");
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    uint64_t after = pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
    struct conn *c = req->conn;
    bool other = p->table != proc_table_of(session_of(c));
    proc_reply_read(req, p, after, false, 0);
    if (other) proc_view_add(p, c);
}

const struct rpc_method process_methods[] = {
    {"process/start", "exec", handle_start},
    {"process/read", "exec", handle_read},
    {"process/write", "exec", handle_write},
    {"process/terminate", "exec", handle_terminate},
    {"process/signal", "exec", proc_handle_signal},
    {"process/resize", "exec", proc_handle_resize},
    {"process/closeStdin", "exec", proc_handle_close_stdin},
    {"process/list", "exec", handle_list},
    {"process/attach", "exec", handle_attach},
    {NULL, NULL, NULL},
};
