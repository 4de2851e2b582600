/* proc: the process model: the per-session table, the output pump with the pushed
 * process/output, process/exited and process/closed notifications, the long-poll
 * readers of the event log, the stdin queue and reaping (see process.h and
 * proc_internal.h; rules in PROTOCOL.md section 5). The JSON-RPC handlers that
 * drive it are in process_methods.c.
 *
 * The output path: read() into one scratch buffer, one copy into the event log,
 * then base64 straight into the outgoing frame's buffer, written in place by the
 * transport. No JSON tree is built per chunk. When the attached connection's
 * write queue is above its high-water mark, readers stop (the child then blocks
 * on a full pipe) until it drains: memory stays bounded and nothing is lost. */
#include "process/process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "process/event_log.h"
#include "process/guardian.h"
#include "process/proc_internal.h"
#include "process/shell_snapshot.h"
#include "process/spawn.h"
#include "rpc/dispatch.h"
#include "process/denied.h"
#include "sandbox/hold.h"
#include "netproxy/netproxy.h"
#include "session/session.h"
#include "transport/conn.h"
#include "proto/base64.h"
#include "util/mem.h"

/* Per-connection state: the processes of other sessions it watches (process/attach). */
static struct conn_slot view_slot;

static uint8_t scratch[READ_BATCH];

/* ---- table ---------------------------------------------------------------- */

struct proc_table *proc_table_new(struct session *s)
{
    struct proc_table *t = xcalloc(1, sizeof *t);
    t->session = s;
    return t;
}

struct proc *proc_find(struct proc_table *t, const char *id)
{
    for (struct proc *p = t->head; p; p = p->next)
        if (strcmp(p->id, id) == 0) return p;
    return NULL;
}

struct proc_start *proc_starting(struct proc_table *t, const char *id)
{
    for (struct proc_start *ps = t->starting; ps; ps = ps->next)
        if (strcmp(ps->id, id) == 0) return ps;
    return NULL;
}

static struct conn *proc_conn(struct proc *p)
{
    return p->table ? p->table->session->conn : NULL;
}

/* ---- teardown ------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    struct proc *p = h->data;
    if (--p->handles > 0) return;
    event_log_free(&p->log);
    buf_free(&p->id_json);
    for (size_t i = 0; i < p->nwrite_ids; i++)
        free(p->write_ids[i]);
    free(p->write_ids);
    for (char **a = p->argv; a && *a; a++)
        free(*a);
    free(p->argv);
    free(p->cwd);
    while (p->wq_head) {
        struct wq_item *n = p->wq_head->next;
        free(p->wq_head);
        p->wq_head = n;
    }
    free(p->id);
    free(p);
}

static void close_out(struct out_src *o)
{
    if (o->fd < 0) return;
    uv_close((uv_handle_t *)&o->poll, handle_closed);
    close(o->fd);
    o->fd = -1;
    o->polling = false;
}

void proc_close_stdin(struct proc *p)
{
    if (p->in_fd < 0) return;
    uv_close((uv_handle_t *)&p->in_poll, handle_closed);
    p->in_init = false;
    close(p->in_fd);
    p->in_fd = -1;
    while (p->wq_head) {
        struct wq_item *n = p->wq_head->next;
        free(p->wq_head);
        p->wq_head = n;
    }
    p->wq_tail = NULL;
}

/* A killed child that we will no longer track must still be reaped; a sandbox's
 * hold is let go only then, when nothing is left in it to exploit the removal of its
 * placeholders (sandbox/hold.h). */
struct reaper {
    uv_poll_t poll;
    int pidfd;
    struct sandbox_hold *hold;
};

static void reaper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void reaper_cb(uv_poll_t *h, int status, int events)
{
    struct reaper *r = h->data;
    siginfo_t si = {0};
    if (spawn_wait(r->pidfd, &si) == 0 && si.si_pid == 0) return;
    uv_close((uv_handle_t *)&r->poll, reaper_closed);
    close(r->pidfd);
    sandbox_hold_release(r->hold);
}

static void reap_later(uv_loop_t *loop, int pidfd, struct sandbox_hold *hold)
{
    struct reaper *r = xmalloc(sizeof *r);
    r->pidfd = pidfd;
    r->hold = hold;
    uv_poll_init(loop, &r->poll, pidfd);
    r->poll.data = r;
    uv_poll_start(&r->poll, UV_READABLE, reaper_cb);
}

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

/* Processes not yet closed, over every session (--max-total-processes). */
static unsigned live_total;

unsigned proc_live_total(void)
{
    return live_total;
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
               p->table->session->id);
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

/* The process is going away (evicted, or its session ended): its viewers hear of
 * it, since a session that ends kills without an exit event. */
static void viewers_end(struct proc *p)
{
    if (!p->viewers) return;
    if (p->table) {
        struct buf b;
        viewer_msg_begin(&b, p, "process/attachEnded");
        buf_puts(&b, p->state == PROC_CLOSED ? ",\"reason\":\"evicted\"}}"
                                             : ",\"reason\":\"sessionEnded\"}}");
        viewers_send(p, &b);
    }
    while (p->viewers)
        viewer_unlink_free(p->viewers);
}

static void proc_free(struct proc *p)
{
    if (p->freeing) return;
    p->freeing = true;
    if (p->state != PROC_CLOSED) live_total--; /* killed with its session */
    viewers_end(p);
    if (p->table) {
        if (p->prev)
            p->prev->next = p->next;
        else
            p->table->head = p->next;
        if (p->next) p->next->prev = p->prev;
    }
    p->table = NULL;
    netproxy_release(p->netproxy);
    p->netproxy = NULL;
    while (p->waiters) {
        struct waiter *w = p->waiters;
        rpc_req_free(w->req);
        waiter_remove(w);
    }
    /* Also after the leader exited: background grandchildren may still be in its
     * group, and a group never outlives its entry (nor the guardian's record). */
    kill(-p->pid, SIGKILL);
    guardian_untrack(p->pid);
    if (p->pid_open) {
        uv_close((uv_handle_t *)&p->pid_poll, handle_closed);
        reap_later(p->pid_poll.loop, p->pidfd, p->hold);
        p->pid_open = false;
    } else {
        sandbox_hold_release(p->hold);
    }
    p->hold = NULL;
    for (int i = 0; i < p->nout; i++)
        close_out(&p->out[i]);
    proc_close_stdin(p);
    uv_close((uv_handle_t *)&p->timer, handle_closed);
}

void proc_table_destroy(struct proc_table *t)
{
    proc_snapshot_cancel_table(t); /* starts still waiting for a shell snapshot */
    while (t->starting)
        t->abandon_start(t->starting); /* starts in their spawn window */
    while (t->head)
        proc_free(t->head);
    free(t);
}

void proc_table_detached(struct proc_table *t, struct conn *c)
{
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
    /* The old connection's queue is gone: nothing of the logs is in flight. */
    for (struct proc *p = t->head; p; p = p->next) {
        for (struct log_chunk *ch = p->log.head; ch; ch = ch->next)
            ch->wire_end = 0;
        p->log.evicted_wire_end = 0;
    }
    /* Detached output is recorded in the retained log, never held back. */
    proc_table_resume_output(t);
}

void proc_table_attached(struct proc_table *t, struct conn *c) {}

bool proc_table_output_safe(const struct proc_table *t, uint64_t written_total)
{
    /* A process's notifications are queued in seq order and its log keeps the
     * newest chunks: if the newest evicted chunk has left the queue, every chunk
     * still queued is retained. */
    for (const struct proc *p = t->head; p; p = p->next)
        if (p->log.evicted_wire_end > written_total) return false;
    return true;
}

/* ---- notifications and reads -------------------------------------------- */

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

static void notify_output(struct proc *p, struct log_chunk *c)
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

bool proc_read_ready(const struct proc *p, uint64_t after)
{
    return event_log_after(&p->log, after) != NULL || p->state == PROC_CLOSED ||
           (p->state >= PROC_EXITED && after < p->exit_seq);
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

/* ---- child events ------------------------------------------------------- */

static void evict_cb(uv_timer_t *t)
{
    proc_free(t->data);
}

static void check_closed(struct proc *p)
{
    if (p->state != PROC_EXITED) return;
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].fd >= 0) return;
    p->state = PROC_CLOSED;
    netproxy_release(p->netproxy); /* its proxy ends with it, as the reference's does */
    p->netproxy = NULL;
    live_total--;
    p->close_seq = event_log_take_seq(&p->log);
    proc_close_stdin(p);
    notify_event(p, "process/closed", p->close_seq, false);
    wake_waiters(p);
    uv_timer_stop(&p->timer);
    uv_timer_start(&p->timer, evict_cb, PROC_RETAIN_MS, 0);
}

static void out_cb(uv_poll_t *h, int status, int events);

static void out_start(struct out_src *o)
{
    if (o->fd < 0 || o->polling) return;
    uv_poll_start(&o->poll, UV_READABLE, out_cb);
    o->polling = true;
}

static void out_drain_reads(struct out_src *o);

static void out_drain(struct out_src *o)
{
    struct proc *p = o->p;
    /* Gather this turn's notifications into one socket write (see conn_cork). */
    struct conn *corked = proc_conn(p);
    if (corked) {
        conn_ref(corked);
        conn_cork(corked);
    }
    out_drain_reads(o);
    if (corked) {
        conn_uncork(corked);
        conn_unref(corked);
    }
}

static void out_drain_reads(struct out_src *o)
{
    struct proc *p = o->p;
    for (int i = 0; i < READS_PER_WAKEUP && o->fd >= 0; i++) {
        /* Large reads (one syscall, one wakeup of a writer blocked on a full pipe),
         * cut into protocol-sized chunks. */
        ssize_t n = read(o->fd, scratch, sizeof scratch);
        if (n > 0) {
            for (ssize_t off = 0; off < n; off += READ_CHUNK) {
                size_t len = (size_t)(n - off) < READ_CHUNK ? (size_t)(n - off) : READ_CHUNK;
                struct log_chunk *c = event_log_append(&p->log, o->stream, scratch + off, len);
                notify_output(p, c);
            }
            wake_waiters(p);
            struct conn *conn = proc_conn(p);
            if (conn && conn_is_congested(conn)) {
                /* Stop reading: the child blocks on its full pipe until the
                 * client catches up (proc_table_resume_output). */
                for (int k = 0; k < p->nout; k++) {
                    if (p->out[k].polling) uv_poll_stop(&p->out[k].poll);
                    p->out[k].polling = false;
                }
                p->paused = true;
                return;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        /* EOF, or EIO from a PTY master whose last slave fd closed. */
        close_out(o);
        check_closed(p);
        return;
    }
}

static void out_cb(uv_poll_t *h, int status, int events)
{
    struct proc *p = h->data;
    out_drain(h == &p->out[0].poll ? &p->out[0] : &p->out[1]);
}

void proc_table_resume_output(struct proc_table *t)
{
    for (struct proc *p = t->head; p; p = p->next) {
        if (!p->paused) continue;
        p->paused = false;
        for (int i = 0; i < p->nout; i++)
            out_start(&p->out[i]);
    }
}

static void pty_drain_deadline(uv_timer_t *t)
{
    struct proc *p = t->data;
    /* A grandchild still holds the terminal: take what is buffered and close. */
    if (p->out[0].fd >= 0) {
        out_drain(&p->out[0]);
        close_out(&p->out[0]);
    }
    check_closed(p);
}

static void pid_cb(uv_poll_t *h, int status, int events)
{
    struct proc *p = h->data;
    siginfo_t si = {0};
    if (spawn_wait(p->pidfd, &si) < 0) {
        p->exit_code = -1;
    } else if (si.si_pid == 0) {
        return;
    } else if (si.si_code == CLD_EXITED) {
        p->exit_code = si.si_status;
    } else {
        /* 128+N in both modes, as a shell reports it (PROTOCOL.md §5.9 and §11 (e)
         * 11: the reference says 1 for any signal death on a PTY, which a terminal
         * client cannot turn back into the signal). */
        p->exit_code = 128 + si.si_status;
    }
    metrics_process_exited(p->exit_code == 0, metrics_now_ns() - p->start_ns);
    {
        char idv[160];
        log_event("event=process_exit session=%s process_id=%s pid=%d exit_code=%d "
                  "duration_ms=%llu",
                  p->table->session->id, log_value(p->id, idv, sizeof idv), (int)p->pid,
                  p->exit_code, (unsigned long long)((metrics_now_ns() - p->start_ns) / 1000000));
    }
    uv_close((uv_handle_t *)&p->pid_poll, handle_closed);
    close(p->pidfd);
    p->pid_open = false;
    /* The sandbox (its namespaces) ended with its init. */
    sandbox_hold_release(p->hold);
    p->hold = NULL;
    /* Output already in the pipes belongs before the exit when we can see it. */
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].polling) out_drain(&p->out[i]);
    p->state = PROC_EXITED;
    p->sandbox_denied = sandbox_denied_verdict(p->sandboxed, p->exit_code, &p->log);
    p->exit_seq = event_log_take_seq(&p->log);
    notify_event(p, "process/exited", p->exit_seq, true);
    wake_waiters(p);
    if (p->tty && p->out[0].fd >= 0) uv_timer_start(&p->timer, pty_drain_deadline, PTY_DRAIN_MS, 0);
    check_closed(p);
}

/* ---- stdin ---------------------------------------------------------------- */

static void in_cb(uv_poll_t *h, int status, int events);

void proc_stdin_flush(struct proc *p)
{
    while (p->wq_head && p->in_fd >= 0) {
        struct wq_item *it = p->wq_head;
        ssize_t n = write(p->in_fd, it->data + it->off, it->len - it->off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n < 0) {
            /* EPIPE and friends: the child stopped reading; the bytes go nowhere. */
            proc_close_stdin(p);
            return;
        }
        it->off += (size_t)n;
        if (it->off == it->len) {
            p->wq_head = it->next;
            if (!p->wq_head) p->wq_tail = NULL;
            free(it);
        }
    }
    if (p->in_fd < 0) return;
    if (!p->wq_head && p->eof_requested && !p->tty) {
        proc_close_stdin(p); /* every byte written first, then the child sees EOF */
        return;
    }
    bool want = p->wq_head != NULL;
    if (want && !p->in_polling) uv_poll_start(&p->in_poll, UV_WRITABLE, in_cb);
    if (!want && p->in_polling) uv_poll_stop(&p->in_poll);
    p->in_polling = want;
}

static void in_cb(uv_poll_t *h, int status, int events)
{
    proc_stdin_flush(h->data);
}

void proc_stdin_push(struct proc *p, struct wq_item *it)
{
    if (p->in_fd < 0 || it->len == 0) {
        free(it); /* nowhere to write, or nothing: accepted all the same */
        return;
    }
    it->off = 0;
    it->next = NULL;
    if (p->wq_tail)
        p->wq_tail->next = it;
    else
        p->wq_head = it;
    p->wq_tail = it;
    proc_stdin_flush(p);
}

/* ---- lifecycle ------------------------------------------------------------ */

void proc_table_count(const struct proc_table *t, unsigned *running, unsigned *total)
{
    *running = *total = 0;
    for (const struct proc *q = t->head; q; q = q->next) {
        ++*total;
        *running += q->state == PROC_RUNNING;
    }
}

unsigned proc_table_live(const struct proc_table *t)
{
    unsigned live = 0;
    for (const struct proc *q = t->head; q; q = q->next)
        live += q->state != PROC_CLOSED;
    for (const struct proc_start *ps = t->starting; ps; ps = ps->next)
        live++;
    return live;
}

struct proc *proc_add(struct proc_table *t, const char *id, bool tty, bool sandboxed,
                      const struct spawn_result *sr, uv_loop_t *loop)
{
    struct proc *p = xcalloc(1, sizeof *p);
    p->table = t;
    p->id = xstrdup(id);
    buf_init(&p->id_json);
    buf_put_json_str(&p->id_json, id, strlen(id));
    p->tty = tty;
    p->sandboxed = sandboxed;
    p->pid = sr->pid;
    p->pidfd = sr->pidfd;
    p->start_ns = metrics_now_ns();
    live_total++;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->started_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
    metrics_process_started();
    event_log_init(&p->log);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->handles = 1;
    uv_poll_init(loop, &p->pid_poll, sr->pidfd);
    p->pid_poll.data = p;
    p->pid_open = true;
    p->handles++;
    int fds[2] = {sr->out_fd, sr->err_fd};
    for (int s = 0; s < 2; s++) {
        if (fds[s] < 0) continue;
        struct out_src *o = &p->out[p->nout++];
        o->p = p;
        o->fd = fds[s];
        o->stream = tty ? STREAM_PTY : (s == 0 ? STREAM_STDOUT : STREAM_STDERR);
        uv_poll_init(loop, &o->poll, o->fd);
        o->poll.data = p; /* every handle points at the proc (see handle_closed) */
        p->handles++;
    }
    p->in_fd = sr->in_fd;
    p->had_stdin = sr->in_fd >= 0;
    if (p->in_fd >= 0) {
        uv_poll_init(loop, &p->in_poll, p->in_fd);
        p->in_poll.data = p;
        p->in_init = true;
        p->handles++;
    }
    p->next = t->head;
    if (t->head) t->head->prev = p;
    t->head = p;
    return p;
}

void proc_watch(struct proc *p)
{
    uv_poll_start(&p->pid_poll, UV_READABLE, pid_cb);
    for (int s = 0; s < p->nout; s++)
        out_start(&p->out[s]);
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

void proc_kill(struct proc *p)
{
    kill(-p->pid, SIGKILL);
    p->terminated = true;
    proc_close_stdin(p);
}

/* ---- the session part ----------------------------------------------------- */

static void part_created(struct session *s)
{
    session_set_part(s, &proc_session_part, proc_table_new(s));
}

static void part_attached(struct session *s, struct conn *c)
{
    proc_table_attached(proc_table_of(s), c);
}

static void part_detached(struct session *s, struct conn *c)
{
    proc_table_detached(proc_table_of(s), c);
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

struct proc_table *proc_table_of(const struct session *s)
{
    return session_part(s, &proc_session_part);
}
