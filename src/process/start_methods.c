/* start_methods: process/start, from its params to its process (PROTOCOL.md 5.1).
 *
 * One start is one struct proc_start (proc_start.h), filled once as the request is
 * decoded and checked, and carried through: the shell snapshot it may wait for, the
 * spawner's request (spawn.h), the spawn window, and the process it becomes (proc.c),
 * which takes over what outlives the start. The reply goes out before the process's
 * first notification. */
#include "process/proc_start.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "netproxy/netproxy.h"
#include "netproxy/netproxy_rpc.h"
#include "process/env_policy.h"
#include "process/proc_internal.h"
#include "process/process_rpc.h"
#include "process/shell_snapshot.h"
#include "process/spawn.h"
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

/* What only the launch needs (the environment, the policy, the network's params):
 * let go once the request is with the spawner, which copied what it needs. */
static void start_drop_launch(struct proc_start *ps)
{
    netproxy_params_free(&ps->netp);
    if (ps->have_pol) sandbox_policy_free(&ps->pol);
    ps->have_pol = false;
    env_free(ps->envp);
    ps->envp = NULL;
    ps->env = NULL;
}

static void start_free(struct proc_start *ps)
{
    start_drop_launch(ps);
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

static void start_link(struct proc_start *ps)
{
    struct proc_table *t = ps->table;
    t->abandon_start = start_abandon;
    ps->linked = true;
    ps->next = t->starting;
    if (ps->next) ps->next->prev = ps;
    t->starting = ps;
    starts_in_flight++;
}

static void start_unlink(struct proc_start *ps)
{
    if (!ps->linked) return;
    if (ps->prev)
        ps->prev->next = ps->next;
    else
        ps->table->starting = ps->next;
    if (ps->next) ps->next->prev = ps->prev;
    ps->table = NULL;
    ps->linked = false;
    ps->next = ps->prev = NULL;
    starts_in_flight--;
}

/* The kind 0.171.0 puts in a spawn failure's error.data (verified for a missing
 * program or cwd, a program without the execute bit, a directory, a bad format). */
static const char *spawn_error_kind(int errnum)
{
    if (errnum == ENOENT) return "spawnNotFound";
    if (errnum == EACCES || errnum == EPERM) return "spawnPermissionDenied";
    return "spawnFailed";
}

/* The start failed when the spawner tried it (err < 0): the reply and the audit
 * record say why. */
static void start_failed(struct proc_start *ps, struct proc_table *t, int err, int sberr)
{
    struct rpc_req *req = ps->req;
    if (err == SPAWN_ERR_SANDBOX) {
        log_warn("process %s: the sandbox could not be set up: %s", ps->id, strerror(sberr));
        proc_audit_failed(ps, t->owner_id, "sandbox intent cannot be enforced on this executor");
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor%s",
                        sandbox_host_refusal());
        return;
    }
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
}

/* The child runs: the process joins the table, takes over what outlives the start,
 * and the reply goes out before its first notification. */
static void start_became_process(struct proc_start *ps, struct proc_table *t,
                                 const struct spawn_result *sr)
{
    struct rpc_req *req = ps->req;
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
    log_event("event=process_start session=%s process_id=%s pid=%d argv0=%s tty=%s "
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

/* The outcome of a start (spawn_done_fn): the process joins the table and the
 * reply goes out before its first notification; or the error; or, when a
 * process/terminate came during the spawn window, the cancellation. */
static void start_done(void *arg, int err, const struct spawn_result *sr, int sberr)
{
    struct proc_start *ps = arg;
    struct rpc_req *req = ps->req;
    struct proc_table *t = ps->linked ? ps->table : NULL;
    start_unlink(ps);
    if (err == 0 && (ps->cancelled || !t)) {
        /* It never became a process of ours: stopped, and its hold ends once reaped. */
        spawn_discard(req->loop, sr, ps->hold);
        ps->hold = NULL;
    }
    if (ps->cancelled || !t)
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s start was cancelled", ps->id);
    else if (err < 0)
        start_failed(ps, t, err, sberr);
    else
        start_became_process(ps, t, sr);
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

/* ---- the launch --------------------------------------------------------------- */

/* Transparent TCP's own reasons not to run the command, in the reference's words
 * (its sandbox wrapper exits 101 with them), or NULL with *tun_fd an O_PATH
 * descriptor of /dev/net/tun for the sandbox's init (the private /dev has none). */
static const char *start_transparent_refusal(const struct proc_start *ps, int *tun_fd, char *why,
                                             size_t n)
{
    if (!ps->netp.enable_socks5)
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

/* The command wrapped to restore a shell snapshot: its own argv and environment, and
 * the state on /dev/fd/3 (freed by snapshot_command_free). */
struct snapshot_command {
    char **argv, **envp;
    char *script;
    int state_fd; /* -1: none */
    bool use;     /* false: the state could not be made, run the plain command */
};

static void snapshot_command_build(const struct proc_start *ps, const struct proc_snapshot *snap,
                                   struct snapshot_command *c)
{
    const char *flag;
    char **extra = NULL;
    size_t nextra = 0;
    proc_snapshot_command(ps->shell, snap, ps->argv[2], &flag, &c->script, &extra, &nextra);
    size_t argc = 0;
    while (ps->argv[argc])
        argc++;
    c->argv = xcalloc(argc + 1, sizeof *c->argv);
    memcpy(c->argv, ps->argv, argc * sizeof *c->argv);
    c->argv[1] = (char *)flag;
    c->argv[2] = c->script;
    c->envp = proc_snapshot_env(ps->envp, ps->env, snap, extra, nextra);
    /* Without the state the prelude would fail: run the plain command. */
    c->use = !snap->fd_source || (c->state_fd = snapshot_fd(snap)) >= 0;
}

static void snapshot_command_free(struct snapshot_command *c)
{
    if (c->state_fd >= 0) close(c->state_fd);
    free(c->argv); /* its strings are the start's and the script */
    free(c->script);
    env_free(c->envp);
}

/* The spawner's request for the start's command (with c's, when it is used). */
static struct spawn_request start_request(const struct proc_start *ps,
                                          const struct snapshot_command *c)
{
    char **envp = c->use ? c->envp : ps->envp;
    return (struct spawn_request){
        .program = ps->argv0,
        .argv = c->use ? c->argv : ps->argv,
        .envp = envp,
        .path_env = env_get(envp, "PATH"),
        .cwd = ps->cwd,
        .tty = ps->tty,
        .rows = ps->rows,
        .cols = ps->cols,
        .pipe_stdin = ps->pipe_stdin,
        .sandbox = ps->sandboxed ? &ps->pol : NULL,
        .pid_inherit = sandbox_pid_namespace_inherit,
        .extra_fds = c->state_fd >= 0 ? &c->state_fd : NULL,
        .n_extra_fds = c->state_fd >= 0 ? 1 : 0,
        .proxy_fd = -1,
        .tun_fd = -1,
        .refusal = ps->sandboxed ? ps->pol.refusal : NULL,
        .cgroup_fds = {-1, -1},
    };
}

/* The managed network inside a sandbox (enforceManagedNetwork): the child's own
 * network namespace reaches the proxy only, through its init, which listens on the
 * proxy's ports on loopback in there and hands each connection over. Fills rq's
 * network part (or a refusal, in why when it must be written), and bridge with the
 * socketpair when there is one. Returns 0, or -errno of the socketpair. */
static int start_network(const struct proc_start *ps, struct spawn_request *rq, int bridge[2],
                         char *why, size_t n)
{
    bool bridged = ps->sandboxed && ps->pol.net_restricted &&
                   (ps->netp.enforce_managed_network || ps->transparent);
    if (bridged && !ps->netproxy && !rq->refusal) {
        rq->refusal = "exec-server sandbox: failed to prepare host proxy routing bridge: "
                      "managed proxy mode requires proxy environment variables";
        rq->refusal_code = 101; /* the reference's sandbox wrapper panics with 101 */
    } else if (ps->transparent && !rq->refusal &&
               (rq->refusal = start_transparent_refusal(ps, &rq->tun_fd, why, n))) {
        rq->refusal_code = 101; /* as the reference's, with its words */
    } else if (bridged && ps->netproxy &&
               socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bridge) < 0) {
        return -errno;
    }
    rq->transparent = rq->tun_fd >= 0;
    rq->proxy_fd = bridge[1];
    if (bridge[0] >= 0) netproxy_ports(ps->netproxy, &rq->proxy_ports[0], &rq->proxy_ports[1]);
    return 0;
}

/* Sends the request to the spawner: the spawn window opens, and the reply comes with
 * the outcome (start_done); the loop serves other requests meanwhile. Takes bridge;
 * false after replying (the start is the caller's to free then). */
static bool start_spawn(struct proc_start *ps, struct spawn_request *rq, int bridge[2])
{
    struct rpc_req *req = ps->req;
    int herr = 0;
    struct sandbox_hold *hold = NULL;
    if (ps->sandboxed && !rq->refusal)
        hold = hold_sandbox(req->loop, &ps->pol, rq->cgroup_fds, &herr);
    ps->mode = ps->sandboxed ? (int)sandbox_host_mode_for(ps->pol.legacy_landlock) : 0;
    proc_audit_describe(&ps->audit_desc, ps->env, ps->sandboxed ? &ps->pol : NULL,
                        ps->netproxy != NULL);
    int err = herr < 0 ? herr : spawn_child_async(req->loop, rq, start_done, ps, &ps->op);
    if (bridge[1] >= 0) close(bridge[1]);
    if (err < 0) {
        if (bridge[0] >= 0) close(bridge[0]);
        sandbox_hold_release(hold);
        reply_start_failed(req, err, herr < 0);
        return false;
    }
    ps->hold = hold;
    ps->bridge_fd = bridge[0];
    start_link(ps);
    return true;
}

/* Spawns the start's command (with the snapshot restored when snap is given); the
 * reply comes with the outcome (start_done). Frees the start when it fails first. */
static void start_launch(struct proc_start *ps, const struct proc_snapshot *snap)
{
    struct snapshot_command sc = {.state_fd = -1};
    if (snap) snapshot_command_build(ps, snap, &sc);
    struct spawn_request rq = start_request(ps, &sc);
    int bridge[2] = {-1, -1};
    char why[200];
    int err = start_network(ps, &rq, bridge, why, sizeof why);
    bool spawned = false;
    if (err < 0) {
        char text[256];
        oserr_format(-err, text, sizeof text);
        rpc_reply_error(ps->req, RPC_INTERNAL_ERROR, "%s", text);
    } else {
        spawned = start_spawn(ps, &rq, bridge);
    }
    if (rq.tun_fd >= 0) close(rq.tun_fd);
    snapshot_command_free(&sc);
    if (spawned)
        start_drop_launch(ps);
    else
        start_free(ps);
}

/* A start that waited for its shell snapshot. */
static void on_snapshot(void *arg, enum proc_snapshot_outcome outcome,
                        const struct proc_snapshot *snap)
{
    struct proc_start *ps = arg;
    if (outcome == SNAP_CANCELLED) {
        rpc_req_free(ps->req);
        start_free(ps);
        return;
    }
    start_launch(ps, outcome == SNAP_READY ? snap : NULL);
}

/* ---- the checks ------------------------------------------------------------------ */

/* The working directory, and the sandbox policy: parsed, then prepared here
 * (allocations, the Landlock ruleset) so the child only makes system calls.
 * Whatever cannot be enforced is refused. False after replying. */
static bool start_prepare_cwd_sandbox(struct proc_start *ps, const char *cwd, json_t *sandbox)
{
    struct rpc_req *req = ps->req;
    size_t cwd_len;
    struct uri_error uerr;
    if (uri_to_path(cwd, strlen(cwd), true, &ps->cwd, &cwd_len, &uerr) < 0) {
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
    if (sandbox_policy_parse(sandbox, ps->cwd, &ps->pol, &serr) < 0) {
        rpc_reply_error(req, sandbox_error_code(&serr), "%s", serr.message);
        return false;
    }
    ps->have_pol = true;
    if (sandbox_policy_needs_process(&ps->pol)) {
        if (sandbox_policy_check(&ps->pol) < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "sandbox intent cannot be enforced on this executor%s",
                            sandbox_host_refusal());
            return false;
        }
        ps->sandboxed = true;
    }
    return true;
}

/* Transparent TCP: asked for by proxy.transparentTcp (with any sandbox: validated),
 * or by --linux-sandbox-transparent-tcp for a sandboxed start with
 * enforceManagedNetwork. The child then gets its own network namespace with the TUN
 * device, whatever the sandbox says of the network and even when it needs no other
 * confinement (as the reference's). False after replying. */
static bool start_prepare_transparent(struct proc_start *ps)
{
    bool flag = limits_sandbox_transparent_tcp() && ps->netp.enforce_managed_network;
    if (!ps->netp.present || !ps->have_pol || !ps->pol.sandboxed ||
        !(ps->netp.transparent_tcp || flag))
        return true;
    ps->transparent = true;
    ps->pol.net_restricted = true;
    if (!ps->sandboxed && sandbox_policy_check(&ps->pol) < 0) {
        rpc_reply_error(ps->req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor%s",
                        sandbox_host_refusal());
        return false;
    }
    /* A TUN device lives in a network namespace of the sandbox's own. */
    if (sandbox_host_mode_for(ps->pol.legacy_landlock) != SANDBOX_MODE_NAMESPACES) {
        rpc_reply_error(ps->req, RPC_INVALID_PARAMS,
                        "sandbox intent cannot be enforced on this executor (transparentTcp "
                        "needs a network namespace, and this sandbox has none: %s)",
                        sandbox_host.why_not[0] ? sandbox_host.why_not
                                                : "useLegacyLandlock or --sandbox-mode landlock");
        return false;
    }
    ps->sandboxed = true;
    return true;
}

/* May this start join ps->table? In the reference's order: the network proxy's settings
 * (before argv, like its prepare_exec_request), a non-empty argv, a free id, the
 * session's and the server's process caps, a program. False after replying. */
static bool start_check_table(struct proc_start *ps, size_t argc)
{
    struct rpc_req *req = ps->req;
    struct proc_table *t = ps->table;
    /* Starts waiting for a shell snapshot hold their id and count as running. */
    unsigned live = proc_table_live(t) + proc_snapshot_waiting(t, NULL);
    char nerr[512];
    if (netproxy_validate(&ps->netp, ps->have_pol && ps->pol.sandboxed, nerr, sizeof nerr) < 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", nerr);
        return false;
    }
    if (argc == 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "argv must not be empty");
        return false;
    }
    if (proc_find(t, ps->id) || proc_snapshot_waiting(t, ps->id) || proc_starting(t, ps->id)) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s already exists", ps->id);
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
    if (!*ps->argv0) {
        rpc_reply_error_kind(req, RPC_INTERNAL_ERROR, "spawnFailed",
                             "missing program for pipe spawn");
        return false;
    }
    return true;
}

/* The child's argv (arg0 in place of argv[0] when given) and environment: the
 * server's filtered by the env policy, the request's on top, then the trace
 * context and the managed network's proxy variables. */
static void start_build_command(struct proc_start *ps, json_t *argv, const char *arg0,
                                const struct env_policy *env_pol)
{
    size_t i;
    json_t *v;
    ps->argv = xcalloc(json_array_size(argv) + 1, sizeof *ps->argv);
    json_array_foreach(argv, i, v) ps->argv[i] = xstrdup(json_string_value(v));
    if (arg0) {
        free(ps->argv[0]);
        ps->argv[0] = xstrdup(arg0);
    }
    extern char **environ;
    ps->envp = env_build(environ, env_pol, ps->env);
    if (ps->req->trace) ps->envp = env_add_trace(ps->envp, ps->req->trace);
    if (ps->netproxy) ps->envp = netproxy_child_env(ps->netproxy, ps->envp);
}

/* The start, decoded: resolve cwd, prepare the sandbox, check the table, start the
 * network proxy, build the command, then spawn (after the shell snapshot, when one
 * applies). False after replying (the caller frees ps). */
static bool start_prepare(struct proc_start *ps, const char *cwd, json_t *sandbox, json_t *argv,
                          const char *arg0, const struct env_policy *env_pol,
                          struct proc_snapshot_req *snap)
{
    struct rpc_req *req = ps->req;
    if (!start_prepare_cwd_sandbox(ps, cwd, sandbox)) return false;
    if (!start_check_table(ps, json_array_size(argv)) || !start_prepare_transparent(ps))
        return false;
    char nerr[512];
    struct netproxy_client client = netproxy_session_client(session_of(req->conn));
    if (ps->netp.present && netproxy_start(req->loop, &ps->netp, &client, ps->id, &ps->netproxy,
                                           nerr, sizeof nerr) < 0) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", nerr);
        return false;
    }
    int snap_applies = 0;
    if (snap) {
        char err[320];
        snap->cwd = cwd;
        snap->env_policy = env_pol ? json_object_get(req->params, "envPolicy") : NULL;
        snap->sandbox = sandbox;
        snap_applies = proc_snapshot_check(snap, argv, err, sizeof err);
        if (snap_applies < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            return false;
        }
        ps->shell = snap->shell;
    }
    start_build_command(ps, argv, arg0, env_pol);
    if (snap_applies && !(ps->sandboxed && ps->pol.refusal)) {
        /* The capture runs what the command would run, with its own script. */
        struct spawn_request capture = {
            .program = ps->argv0,
            .argv = ps->argv,
            .envp = ps->envp,
            .path_env = env_get(ps->envp, "PATH"),
            .cwd = ps->cwd,
            .sandbox = ps->sandboxed ? &ps->pol : NULL,
            .pid_inherit = sandbox_pid_namespace_inherit,
            .proxy_fd = -1,
            .cgroup_fds = {-1, -1},
        };
        proc_snapshot_get(req->loop, ps->table, ps->id, snap, &capture, on_snapshot, ps);
        return true;
    }
    start_launch(ps, NULL);
    return true;
}

/* process/start: decode and gate, then one struct proc_start for the rest of the
 * start (start_prepare). Every failure replies once. */
void proc_handle_start(struct rpc_req *req)
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

    size_t argc = json_array_size(argv);
    struct proc_start *ps = xmalloc(sizeof *ps);
    *ps = (struct proc_start){
        .req = req,
        .table = proc_table_of(session_of(req->conn)),
        .id = xstrdup(id),
        .argv0 = xstrdup(argc ? json_string_value(json_array_get(argv, 0)) : ""),
        .env = env,
        .tty = tty,
        .pipe_stdin = pipe_stdin,
        .rows = rows,
        .cols = cols,
        .netp = netp, /* the start owns it now */
        .bridge_fd = -1,
    };
    buf_init(&ps->audit_desc);
    if (!start_prepare(ps, cwd, sandbox, argv, arg0, has_env_pol ? &env_pol : NULL,
                       has_snap ? &snap_req : NULL))
        start_free(ps);
}
