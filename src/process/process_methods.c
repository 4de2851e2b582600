/* process_methods: the JSON-RPC handlers process/read, write, terminate, list and
 * attach, and the process room's method table (process/start is start_methods.c's,
 * the terminal and stdin extensions tty_methods.c's). They decode params, pass the
 * lifecycle gate, and drive the model in proc.c; the process record and its event
 * log live there (PROTOCOL.md section 5). */
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
    {"process/start", "exec", proc_handle_start},
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
