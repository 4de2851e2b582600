/* process_methods: the JSON-RPC handlers process/start, read, write and terminate
 * (the terminal and stdin extensions are in process_tty.c). They decode params,
 * pass the lifecycle gate, and drive the model in proc.c; the process record and
 * its event log live there (PROTOCOL.md section 5). */
#include "process/process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "process/env_policy.h"
#include "process/guardian.h"
#include "process/proc_internal.h"
#include "process/spawn.h"
#include "proto/base64.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/enforce.h"
#include "sandbox/placeholders.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "util/mem.h"
#include "util/oserr.h"

static void free_strv(char **v)
{
    if (!v) return;
    for (char **s = v; *s; s++) free(*s);
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

static void start_unlink(struct proc_start *ps)
{
    if (!ps->table) return;
    if (ps->prev) ps->prev->next = ps->next;
    else ps->table->starting = ps->next;
    if (ps->next) ps->next->prev = ps->prev;
    ps->table = NULL;
    ps->next = ps->prev = NULL;
}

static void start_free(struct proc_start *ps)
{
    sandbox_placeholders_release(ps->placeholders);
    free(ps->id);
    free(ps->argv0);
    free(ps);
}

/* Stops a child whose start was cancelled (it never became a process of ours). */
static void start_discard_child(const struct spawn_result *sr)
{
    kill(-sr->pid, SIGKILL);
    kill(sr->pid, SIGKILL);
    while (waitpid(sr->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    guardian_untrack(sr->pid);
    int fds[] = {sr->pidfd, sr->out_fd, sr->err_fd, sr->in_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
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
    if (err == 0 && (ps->cancelled || !t)) start_discard_child(sr);
    if (ps->cancelled || !t) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s start was cancelled", ps->id);
    } else if (err == SPAWN_ERR_SANDBOX) {
        log_warn("process %s: the sandbox could not be set up: %s", ps->id, strerror(sberr));
        rpc_reply_error(req, RPC_INVALID_PARAMS, "sandbox intent cannot be enforced on this "
                                                 "executor");
    } else if (err < 0) {
        char text[256];
        oserr_format(-err, text, sizeof text);
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", text);
    } else {
        struct proc *p = proc_add(t, ps->id, ps->tty, ps->sandboxed, sr, req->loop);
        p->placeholders = ps->placeholders;
        ps->placeholders = NULL;
        char idv[160], a0[200];
        log_event("event=process_start session=%s process_id=%s pid=%d argv0=%s tty=%s "
                  "sandboxed=%s",
                  t->session->id, log_value(ps->id, idv, sizeof idv), (int)sr->pid,
                  log_value(ps->argv0, a0, sizeof a0), ps->tty ? "true" : "false",
                  ps->sandboxed ? "true" : "false");
        /* The response goes out before any notification of the new process. */
        rpc_reply_json(req, json_pack("{s:s,s:s}", "processId", ps->id, "sandboxType",
                                      ps->sandboxed ? "linuxSeccomp" : "none"));
        proc_watch(p);
    }
    start_free(ps);
}

void proc_start_abandon(struct proc_start *ps)
{
    start_unlink(ps);
    spawn_cancel(ps->op);
    rpc_reply_error(ps->req, RPC_INVALID_REQUEST, "process %s start was cancelled", ps->id);
    start_free(ps);
}

/* process/start: decode, gate, resolve cwd, prepare the sandbox, check the table,
 * spawn, then reply before the first notification. Every failure replies once and
 * leaves through `out`, which frees whatever was built so far. */
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
    unsigned short rows = 0, cols = 0;
    proc_decode_size(&d, &rows, &cols);
    size_t i;
    json_t *v;
    if (!d.failed) {
        json_array_foreach(argv, i, v) if (!require_string(&d, v)) break;
        const char *k;
        json_object_foreach(env, k, v) if (!require_string(&d, v)) break;
    }
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;

    char *cwd_path = NULL;
    char **cargv = NULL, **cenv = NULL;
    bool have_pol = false, sandboxed = false;
    struct sandbox_policy pol;
    struct sb_placeholders *ph = NULL;

    size_t cwd_len;
    struct uri_error uerr;
    if (uri_to_path(cwd, strlen(cwd), true, &cwd_path, &cwd_len, &uerr) < 0) {
        if (uerr.kind == URI_ERR_HOST || uerr.kind == URI_ERR_DRIVE ||
            uerr.kind == URI_ERR_PLATFORM)
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "cwd URI `%s` is not valid on this exec-server host: %s", cwd,
                            uerr.message);
        else
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", uerr.message);
        goto out;
    }
    /* The sandbox: parsed, then prepared here (allocations, the Landlock ruleset)
     * so the child only makes system calls. Whatever cannot be enforced is refused. */
    struct sandbox_error serr;
    if (sandbox_policy_parse(sandbox, cwd_path, &pol, &serr) < 0) {
        rpc_reply_error(req, sandbox_error_code(&serr), "%s", serr.message);
        goto out;
    }
    have_pol = true;
    if (sandbox_policy_needs_process(&pol)) {
        if (sandbox_policy_check(&pol) < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "sandbox intent cannot be enforced on this executor");
            goto out;
        }
        sandboxed = true;
    }

    size_t argc = json_array_size(argv);
    struct session *s = session_of(req->conn);
    struct proc_table *t = s->procs;
    const char *program = argc ? json_string_value(json_array_get(argv, 0)) : "";
    unsigned live = proc_table_live(t);
    if (argc == 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "argv must not be empty");
        goto out;
    }
    if (proc_find(t, id) || proc_starting(t, id)) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s already exists", id);
        goto out;
    }
    if (live >= server_limits.max_processes) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "process limit reached: this session already has %u running "
                        "processes (--max-processes %u); wait for one to exit or "
                        "terminate one",
                        live, server_limits.max_processes);
        goto out;
    }
    if (!*program) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "missing program for pipe spawn");
        goto out;
    }

    cargv = xcalloc(argc + 1, sizeof *cargv);
    json_array_foreach(argv, i, v) cargv[i] = xstrdup(json_string_value(v));
    if (arg0) {
        free(cargv[0]);
        cargv[0] = xstrdup(arg0);
    }
    extern char **environ;
    cenv = env_build(environ, has_env_pol ? &env_pol : NULL, env);
    if (req->trace) cenv = env_add_trace(cenv, req->trace);
    struct spawn_request rq = {
        .program = program,
        .argv = cargv,
        .envp = cenv,
        .path_env = env_get(cenv, "PATH"),
        .cwd = cwd_path,
        .tty = tty,
        .rows = rows,
        .cols = cols,
        .pipe_stdin = pipe_stdin,
        .sandbox = sandboxed ? &pol : NULL,
        .pid_inherit = sandbox_pid_namespace_inherit,
        .proxy_fd = -1,
        .refusal = sandboxed ? pol.refusal : NULL,
    };
    if (sandboxed && !pol.refusal) ph = sandbox_placeholders_acquire(&pol.placeholders);
    /* The spawn window: the request goes to the spawner now and the reply when the
     * outcome arrives (start_done); the loop serves other requests meanwhile. */
    struct proc_start *ps = xcalloc(1, sizeof *ps);
    ps->table = t;
    ps->id = xstrdup(id);
    ps->argv0 = xstrdup(program);
    ps->req = req;
    ps->tty = tty;
    ps->sandboxed = sandboxed;
    ps->placeholders = ph;
    int err = spawn_child_async(req->loop, &rq, start_done, ps, &ps->op);
    if (err < 0) {
        free(ps->id);
        free(ps->argv0);
        free(ps);
        char text[256];
        oserr_format(-err, text, sizeof text);
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", text);
        goto out;
    }
    ph = NULL;
    ps->next = t->starting;
    if (ps->next) ps->next->prev = ps;
    t->starting = ps;
out:
    sandbox_placeholders_release(ph);
    if (have_pol) sandbox_policy_free(&pol);
    free_strv(cargv);
    env_free(cenv);
    free(cwd_path);
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
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = session_of(req->conn)->procs;
    struct proc *p = proc_find(t, id);
    if (!p && proc_starting(t, id))
        return rpc_reply_error(req, RPC_INVALID_REQUEST, "process id %s is starting", id);
    if (!p) return rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown process id %s", id);
    if (wait_ms == 0 || proc_read_ready(p, after))
        return proc_reply_read(req, p, after, has_max, max_bytes);
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
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    if (wid && !*wid) return rpc_reply_error(req, RPC_INVALID_PARAMS, "writeId must not be empty");
    struct wq_item *it = xmalloc(sizeof *it + base64_decoded_max(clen));
    char err[96];
    if (base64_decode(chunk, clen, it->data, &it->len, err, sizeof err) < 0) {
        free(it);
        return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
    }
    struct proc_table *t = session_of(req->conn)->procs;
    struct proc *p = proc_find(t, id);
    if (!p && proc_starting(t, id)) {
        free(it);
        return rpc_reply_json(req, json_pack("{s:s}", "status", "starting"));
    }
    const char *fail = NULL;
    /* Statuses, not errors (PROTOCOL.md §5.3): codex's client maps these results
     * to its own errors and treats a JSON-RPC error here as a broken connection. */
    if (!p || !p->had_stdin || p->eof_requested) {
        free(it);
        return rpc_reply_json(req, json_pack("{s:s}", "status", p ? "stdinClosed" : "unknownProcess"));
    }
    if (p->terminated && p->state == PROC_RUNNING) fail = "failed to write to process stdin";
    if (fail) {
        free(it);
        return rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", fail);
    }
    if (wid && write_id_seen(p, wid)) {
        free(it);
        return rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
    }
    if (wid) write_id_remember(p, wid);
    proc_stdin_push(p, it);
    rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
}

static void handle_terminate(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TerminateParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = session_of(req->conn)->procs;
    struct proc *p = proc_find(t, id);
    struct proc_start *ps = p ? NULL : proc_starting(t, id);
    /* In the spawn window the start is cancelled: it fails, and the child, if it
     * starts, is stopped (PROTOCOL.md 5.4). */
    if (ps && !ps->cancelled) {
        ps->cancelled = true;
        return rpc_reply_json(req, json_pack("{s:b}", "running", true));
    }
    bool running = p && p->state == PROC_RUNNING;
    if (running) proc_kill(p);
    rpc_reply_json(req, json_pack("{s:b}", "running", running));
}

const struct rpc_method process_methods[] = {
    {"process/start", "exec", handle_start},
    {"process/read", "exec", handle_read},
    {"process/write", "exec", handle_write},
    {"process/terminate", "exec", handle_terminate},
    {"process/signal", "exec", proc_handle_signal},
    {"process/resize", "exec", proc_handle_resize},
    {"process/closeStdin", "exec", proc_handle_close_stdin},
    {NULL, NULL, NULL},
};
