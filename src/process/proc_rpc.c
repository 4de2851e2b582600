/* proc_rpc: the process table seen from JSON-RPC. The table (proc.c) reports what
 * happens to its processes through struct proc_events; this file is that sink for a
 * session's table: it writes process/output, process/exited and process/closed to
 * the session's connection and to the viewers of other sessions (process/attach),
 * answers long-poll process/read requests from the event log, and makes the table a
 * session part (created, attached, detached and ended with its session).
 *
 * The output path stays what it was: each chunk's notification is written straight
 * into the outgoing frame's buffer (base64 from the event log, no JSON tree, no copy
 * of the bytes besides the encoding), the connection is corked for a read batch, and
 * the table pauses its readers while the connection is congested. */
#include "process/process_rpc.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "process/event_log.h"
#include "process/proc_internal.h"
#include "process/shell_snapshot.h"
#include "proto/base64.h"
#include "rpc/dispatch.h"
#include "session/session.h"
#include "transport/conn.h"
#include "util/mem.h"

/* A connection watching a process of another session (process/attach, ours):
 * linked into the process's list and into the connection's set (view_slot), so
 * either end going away unlinks it. */
struct proc_viewer {
    struct proc_viewer *next_p, *prev_p; /* in proc.viewers */
    struct proc_viewer *next_c, *prev_c; /* in the connection's view set */
    struct proc *p;
    struct proc_view_set *set;
};

struct proc_view_set {
    struct conn *conn;
    struct proc_viewer *head;
};

/* A parked process/read (proc_wait_read), answered when its process has something
 * after `after` or its timer fires. */
struct waiter {
    struct waiter *next, *prev;
    struct proc *p;
    struct rpc_req *req;
    uint64_t after;
    uint64_t max_bytes;
    bool has_max;
    uv_timer_t timer;
};

/* Per-connection state: the processes of other sessions it watches (process/attach). */
static struct conn_slot view_slot;

static struct session *table_session(const struct proc_table *t)
{
    return t->owner;
}

/* The connection the process's own session is attached to, or NULL. */
static struct conn *proc_conn(const struct proc *p)
{
    return p->table ? table_session(p->table)->conn : NULL;
}

/* ---- long-poll readers ---------------------------------------------------- */

static void waiter_closed(uv_handle_t *h)
{
    free(h->data);
}

static void waiter_remove(struct waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        w->p->waiters = w->next;
    if (w->next) w->next->prev = w->prev;
    uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

static void put_chunk_fields(struct buf *b, const struct log_chunk *c)
{
    buf_puts(b, "\"seq\":");
    buf_put_u64(b, c->seq);
    buf_puts(b, ",\"stream\":\"");
    buf_puts(b, event_log_stream_name((enum log_stream)c->stream));
    buf_puts(b, "\",\"chunk\":\"");
    base64_append(b, c->data, c->len);
    buf_putc(b, '"');
}

void proc_reply_read(struct rpc_req *req, struct proc *p, uint64_t after, bool has_max,
                     uint64_t max_bytes)
{
    struct buf b;
    rpc_result_begin(req, &b);
    buf_puts(&b, "{\"chunks\":[");
    uint64_t total = 0, last = 0;
    int n = 0;
    for (struct log_chunk *c = event_log_after(&p->log, after); c; c = c->next) {
        if (has_max && n > 0 && total + c->len > max_bytes) break;
        if (n++) buf_putc(&b, ',');
        buf_putc(&b, '{');
        put_chunk_fields(&b, c);
        buf_putc(&b, '}');
        total += c->len;
        last = c->seq;
    }
    uint64_t next = has_max && n > 0 ? last + 1 : p->log.next_seq;
    buf_puts(&b, "],\"nextSeq\":");
    buf_put_u64(&b, next);
    bool exited = p->state >= PROC_EXITED;
    buf_puts(&b, exited ? ",\"exited\":true,\"exitCode\":" : ",\"exited\":false,\"exitCode\":null");
    if (exited) buf_put_i64(&b, p->exit_code);
    buf_puts(&b, p->state == PROC_CLOSED ? ",\"closed\":true" : ",\"closed\":false");
    buf_puts(&b, exited && p->sandbox_denied ? ",\"failure\":null,\"sandboxDenied\":true}"
                                             : ",\"failure\":null,\"sandboxDenied\":false}");
    rpc_result_finish(req, &b);
}

static void wake_waiters(struct proc *p)
{
    struct waiter *w = p->waiters;
    while (w) {
        struct waiter *n = w->next;
        if (proc_read_ready(p, w->after)) {
            proc_reply_read(w->req, p, w->after, w->has_max, w->max_bytes);
            waiter_remove(w);
        }
        w = n;
    }
}

static void waiter_timeout(uv_timer_t *t)
{
    struct waiter *w = t->data;
    proc_reply_read(w->req, w->p, w->after, w->has_max, w->max_bytes);
    waiter_remove(w);
}

void proc_wait_read(struct rpc_req *req, struct proc *p, uint64_t after, bool has_max,
                    uint64_t max_bytes, uint64_t wait_ms)
{
    struct waiter *w = xcalloc(1, sizeof *w);
    w->p = p;
    w->req = req;
    w->after = after;
    w->has_max = has_max;
    w->max_bytes = max_bytes;
    uv_timer_init(req->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, waiter_timeout, wait_ms, 0);
    w->next = p->waiters;
    if (p->waiters) p->waiters->prev = w;
    p->waiters = w;
}

/* ---- viewers (process/attach) ------------------------------------------------ */

static void viewer_unlink_free(struct proc_viewer *v)
{
    if (v->prev_p)
        v->prev_p->next_p = v->next_p;
    else
        v->p->viewers = v->next_p;
    if (v->next_p) v->next_p->prev_p = v->prev_p;
    if (v->prev_c)
        v->prev_c->next_c = v->next_c;
    else
        v->set->head = v->next_c;
    if (v->next_c) v->next_c->prev_c = v->prev_c;
    free(v);
}

/* The viewing connection closed (its view_slot state is freed). */
static void view_set_free(void *state)
{
    struct proc_view_set *set = state;
    while (set->head)
        viewer_unlink_free(set->head);
    free(set);
}

void proc_view_add(struct proc *p, struct conn *c)
{
    struct proc_view_set *set = conn_slot_ensure(c, &view_slot, sizeof *set, view_set_free, NULL);
    set->conn = c;
    for (struct proc_viewer *v = p->viewers; v; v = v->next_p)
        if (v->set == set) return;
    struct proc_viewer *v = xcalloc(1, sizeof *v);
    v->p = p;
    v->set = set;
    v->next_p = p->viewers;
    if (p->viewers) p->viewers->prev_p = v;
    p->viewers = v;
    v->next_c = set->head;
    if (set->head) set->head->prev_c = v;
    set->head = v;
}

/* The start of a viewer's copy of an event: like the session's own, with the
 * session's id first, since the viewer's own processes may share the processId. */
static void viewer_msg_begin(struct buf *b, const struct proc *p, const char *method)
{
    buf_init_msg(b);
    buf_printf(b, "{\"method\":\"%s\",\"params\":{\"sessionId\":\"%s\",\"processId\":", method,
               table_session(p->table)->id);
    buf_append(b, p->id_json.data, p->id_json.len);
}

/* Sends b (a whole message) to every viewer and frees it. A viewer whose queue is
 * congested misses the event: it sees the seq gap and reads it back
 * (process/read with sessionId), so a slow viewer never holds the process up. */
static void viewers_send(struct proc *p, struct buf *b)
{
    for (struct proc_viewer *v = p->viewers; v; v = v->next_p) {
        struct conn *c = v->set->conn;
        if (conn_is_congested(c)) continue;
        struct buf copy;
        buf_init_msg(&copy);
        buf_append(&copy, b->data + BUF_MSG_HEADROOM, b->len - BUF_MSG_HEADROOM);
        conn_send(c, &copy);
    }
    buf_free(b);
}

/* ---- the table's events --------------------------------------------------- */

static void notify_output_owner(struct proc *p, struct log_chunk *c)
{
    struct conn *conn = proc_conn(p);
    if (!conn) return;
    struct buf b;
    buf_init_msg(&b);
    buf_reserve(&b, 96 + p->id_json.len + base64_encoded_len(c->len));
    buf_puts(&b, "{\"method\":\"process/output\",\"params\":{\"processId\":");
    buf_append(&b, p->id_json.data, p->id_json.len);
    buf_putc(&b, ',');
    put_chunk_fields(&b, c);
    buf_puts(&b, "}}");
    conn_send(conn, &b);
    c->wire_end = conn_sent_total(conn);
}

static void on_output(struct proc *p, struct log_chunk *c)
{
    notify_output_owner(p, c);
    if (!p->viewers) return;
    struct buf b;
    viewer_msg_begin(&b, p, "process/output");
    buf_putc(&b, ',');
    put_chunk_fields(&b, c);
    buf_puts(&b, "}}");
    viewers_send(p, &b);
}

static void put_event_fields(struct buf *b, const struct proc *p, uint64_t seq, bool with_exit)
{
    buf_puts(b, ",\"seq\":");
    buf_put_u64(b, seq);
    if (with_exit) {
        buf_puts(b, ",\"exitCode\":");
        buf_put_i64(b, p->exit_code);
        buf_puts(b, p->sandbox_denied ? ",\"sandboxDenied\":true" : ",\"sandboxDenied\":false");
    }
    buf_puts(b, "}}");
}

static void notify_event(struct proc *p, const char *method, uint64_t seq, bool with_exit)
{
    struct conn *conn = proc_conn(p);
    struct buf b;
    if (conn) {
        buf_init_msg(&b);
        buf_printf(&b, "{\"method\":\"%s\",\"params\":{\"processId\":", method);
        buf_append(&b, p->id_json.data, p->id_json.len);
        put_event_fields(&b, p, seq, with_exit);
        conn_send(conn, &b);
    }
    if (!p->viewers) return;
    viewer_msg_begin(&b, p, method);
    put_event_fields(&b, p, seq, with_exit);
    viewers_send(p, &b);
}

static void on_exited(struct proc *p)
{
    notify_event(p, "process/exited", p->exit_seq, true);
    wake_waiters(p);
}

static void on_closed(struct proc *p)
{
    notify_event(p, "process/closed", p->close_seq, false);
    wake_waiters(p);
}

/* p leaves its table: its viewers hear of it (a session that ends kills without
 * an exit event) and its parked reads are dropped unanswered. */
static void on_leaving(struct proc *p)
{
    if (p->viewers) {
        struct buf b;
        viewer_msg_begin(&b, p, "process/attachEnded");
        buf_puts(&b, p->state == PROC_CLOSED ? ",\"reason\":\"evicted\"}}"
                                             : ",\"reason\":\"sessionEnded\"}}");
        viewers_send(p, &b);
        while (p->viewers)
            viewer_unlink_free(p->viewers);
    }
    while (p->waiters) {
        struct waiter *w = p->waiters;
        rpc_req_free(w->req);
        waiter_remove(w);
    }
}

/* A read batch gathers its notifications into one socket write (see conn_cork);
 * the connection is held for the batch, since a failed send may close it. */
static void *on_batch_begin(struct proc_table *t)
{
    struct conn *c = table_session(t)->conn;
    if (c) {
        conn_ref(c);
        conn_cork(c);
    }
    return c;
}

static void on_batch_end(void *token)
{
    struct conn *c = token;
    if (!c) return;
    conn_uncork(c);
    conn_unref(c);
}

static bool on_congested(const struct proc_table *t)
{
    struct conn *c = table_session(t)->conn;
    return c && conn_is_congested(c);
}

static const struct proc_events session_events = {
    .output = on_output,
    .progressed = wake_waiters,
    .exited = on_exited,
    .closed = on_closed,
    .leaving = on_leaving,
    .batch_begin = on_batch_begin,
    .batch_end = on_batch_end,
    .congested = on_congested,
};

/* ---- the session part ----------------------------------------------------- */

static void part_created(struct session *s)
{
    session_set_part(s, &proc_session_part, proc_table_new(&session_events, s, s->id));
}

static void part_attached(struct session *s, struct conn *c) {}

/* The session lost connection c: its parked reads are dropped, and nothing of
 * the logs is in flight any more. */
static void part_detached(struct session *s, struct conn *c)
{
    struct proc_table *t = proc_table_of(s);
    for (struct proc *p = t->head; p; p = p->next) {
        struct waiter *w = p->waiters;
        while (w) {
            struct waiter *n = w->next;
            if (w->req->conn == c) {
                rpc_req_free(w->req);
                waiter_remove(w);
            }
            w = n;
        }
    }
    proc_table_unsent(t);
}

static void part_ended(struct session *s)
{
    proc_table_destroy(proc_table_of(s));
    session_set_part(s, &proc_session_part, NULL);
}

static void part_unblocked(struct session *s)
{
    proc_table_resume_output(proc_table_of(s));
}

static bool part_output_safe(struct session *s, uint64_t written_total)
{
    return proc_table_output_safe(proc_table_of(s), written_total);
}

static void part_list(const struct session *s, json_t *o)
{
    unsigned running = 0, total = 0;
    proc_table_count(proc_table_of(s), &running, &total);
    json_object_set_new(o, "processes", json_integer(total));
    json_object_set_new(o, "running", json_integer(running));
}

const struct session_part_ops proc_session_part = {
    .created = part_created,
    .attached = part_attached,
    .detached = part_detached,
    .ended = part_ended,
    .unblocked = part_unblocked,
    .output_safe = part_output_safe,
    .list = part_list,
    .shutdown = proc_snapshot_shutdown,
};

struct proc_table *proc_table_of(const struct session *s)
{
    return session_part(s, &proc_session_part);
}

/* ---- addressing a request's process --------------------------------------- */

struct proc_table *proc_request_table(struct rpc_req *req, const char *session_id)
{
    struct session *own = session_of(req->conn);
    if (!session_id || strcmp(session_id, own->id) == 0) return proc_table_of(own);
    struct session *s = session_visible(req->conn, session_id);
    if (s) return proc_table_of(s);
    rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown session id %s", session_id);
    return NULL;
}

struct proc *proc_request_proc(struct rpc_req *req, const char *session_id, const char *id)
{
    struct proc_table *t = proc_request_table(req, session_id);
    struct proc *p = t ? proc_find(t, id) : NULL;
    if (t && !p && proc_starting(t, id))
        rpc_reply_error(req, RPC_INVALID_REQUEST, "process id %s is starting", id);
    else if (t && !p)
        rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown process id %s", id);
    return p;
}

static const struct rpc_method *const process_tables[] = {process_methods, NULL};

/* shellSnapshotV2: process/start's `shellSnapshot` (shell_snapshot.c). Ours
 * (PROTOCOL.md §11 (g), (i)): the terminal and stdin controls (processStartSize,
 * processResize, processCloseStdin, processSignalAny) and work that outlives its
 * client (processList, processAttach), which a client uses once it sees them. */
static const struct rpc_capability process_capabilities[] = {
    {"shellSnapshotV2", true, NULL},  {"processStartSize", true, NULL},
    {"processResize", true, NULL},    {"processCloseStdin", true, NULL},
    {"processSignalAny", true, NULL}, {"processList", true, NULL},
    {"processAttach", true, NULL},    {NULL, false, NULL},
};

const struct rpc_domain process_domain = {
    .name = "process",
    .methods = process_tables,
    .capabilities = process_capabilities,
};
