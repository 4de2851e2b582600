/* process_methods: the JSON-RPC handlers process/start, read, write and terminate
 * (the terminal and stdin extensions are in process_tty.c). They decode params,
 * pass the lifecycle gate, and drive the model in proc.c; the process record and
 * its event log live there (PROTOCOL.md section 5). */
#include "process/process.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "process/env_policy.h"
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
    if (proc_find(t, id)) {
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
    struct spawn_result sr;
    int sberr = 0;
    int err = spawn_child(&rq, &sr, &sberr);
    if (err == SPAWN_ERR_SANDBOX) {
        log_warn("process %s: the sandbox could not be set up: %s", id, strerror(sberr));
        rpc_reply_error(req, RPC_INVALID_PARAMS, "sandbox intent cannot be enforced on this "
                                                 "executor");
        goto out;
    }
    if (err < 0) {
        char text[256];
        oserr_format(-err, text, sizeof text);
        if (log_threshold >= LOG_DEBUG) {
            /* The reply carries only the errno text; the operator also gets which
             * program and directory it was about, and the errno's name. */
            char idv[160], a0[200], cv[300];
            const char *ename = strerrorname_np(-err);
            log_debug("event=process_start_failed session=%s process_id=%s argv0=%s cwd=%s "
                      "errno=%s error=%s",
                      s->id, log_value(id, idv, sizeof idv), log_value(program, a0, sizeof a0),
                      log_value(cwd_path, cv, sizeof cv), ename ? ename : "?", text);
        }
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", text);
        goto out;
    }

    struct proc *p = proc_add(t, id, tty, sandboxed, &sr, req->loop);
    p->argv = xcalloc(argc + 1, sizeof *p->argv);
    json_array_foreach(argv, i, v) p->argv[i] = xstrdup(json_string_value(v));
    p->cwd = xstrdup(cwd_path);
    p->placeholders = ph;
    ph = NULL;
    {
        char idv[160], a0[200];
        log_event("event=process_start session=%s process_id=%s pid=%d argv0=%s tty=%s "
                  "sandboxed=%s",
                  s->id, log_value(id, idv, sizeof idv), (int)sr.pid,
                  log_value(program, a0, sizeof a0), tty ? "true" : "false",
                  sandboxed ? "true" : "false");
    }
    /* The response goes out before any notification of the new process. */
    rpc_reply_json(req, json_pack("{s:s,s:s}", "processId", id, "sandboxType",
                                  sandboxed ? "linuxSeccomp" : "none"));
    proc_watch(p);
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
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
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
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    if (wid && !*wid) return rpc_reply_error(req, RPC_INVALID_PARAMS, "writeId must not be empty");
    struct wq_item *it = xmalloc(sizeof *it + base64_decoded_max(clen));
    char err[96];
    if (base64_decode(chunk, clen, it->data, &it->len, err, sizeof err) < 0) {
        free(it);
        return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
    }
    struct proc *p = proc_find(t, id);
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
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    struct proc *p = proc_find(t, id);
    bool running = p && p->state == PROC_RUNNING;
    if (running) proc_kill(p);
    rpc_reply_json(req, json_pack("{s:b}", "running", running));
}

struct proc_table *proc_request_table(struct rpc_req *req, const char *session_id)
{
    struct session *own = session_of(req->conn);
    if (!session_id || strcmp(session_id, own->id) == 0) return own->procs;
    struct session *s = session_visible(req->conn, session_id);
    if (s) return s->procs;
    rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown session id %s", session_id);
    return NULL;
}

struct proc *proc_request_proc(struct rpc_req *req, const char *session_id, const char *id)
{
    struct proc_table *t = proc_request_table(req, session_id);
    struct proc *p = t ? proc_find(t, id) : NULL;
    if (t && !p) rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown process id %s", id);
    return p;
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
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    json_t *list = json_array();
    for (struct proc *p = t->head; p; p = p->next) {
        json_t *argv = json_array();
        for (char **a = p->argv; a && *a; a++) json_array_append_new(argv, json_string(*a));
        char *cwd = p->cwd ? uri_from_path(p->cwd, strlen(p->cwd)) : NULL;
        json_t *o = json_pack("{s:s,s:o,s:o,s:b,s:i,s:s,s:I,s:o,s:I}", "processId", p->id,
                              "argv", argv, "cwd", cwd ? json_string(cwd) : json_null(), "tty",
                              p->tty, "pid", (int)p->pid, "state", state_name(p->state),
                              "startedAtMs", (json_int_t)p->started_ms, "exitCode",
                              p->state >= PROC_EXITED ? json_integer(p->exit_code) : json_null(),
                              "nextSeq", (json_int_t)p->log.next_seq);
        free(cwd);
        json_array_append_new(list, o);
    }
    rpc_reply_json(req, json_pack("{s:s,s:o}", "sessionId",
                                  t->session->id, "processes", list));
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
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
    struct conn *c = req->conn;
    bool other = p->table != session_of(c)->procs;
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
