/* process: process/start, read, write, signal, terminate, and the pushed
 * process/output, process/exited and process/closed notifications (see
 * process.h; rules in PROTOCOL.md section 5).
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
#include <unistd.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "proto/uri.h"
#include "process/env_policy.h"
#include "process/event_log.h"
#include "process/guardian.h"
#include "process/proc_internal.h"
#include "process/spawn.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/denied.h"
#include "sandbox/enforce.h"
#include "sandbox/policy.h"
#include "session/session.h"
#include "transport/conn.h"
#include "proto/base64.h"
#include "util/mem.h"
#include "util/oserr.h"

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
    for (size_t i = 0; i < p->nwrite_ids; i++) free(p->write_ids[i]);
    free(p->write_ids);
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

static void close_stdin(struct proc *p)
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

/* A killed child that we will no longer track must still be reaped. */
struct reaper {
    uv_poll_t poll;
    int pidfd;
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
}

static void reap_later(uv_loop_t *loop, int pidfd)
{
    struct reaper *r = xmalloc(sizeof *r);
    r->pidfd = pidfd;
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
    if (w->prev) w->prev->next = w->next;
    else w->p->waiters = w->next;
    if (w->next) w->next->prev = w->prev;
    uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

static void proc_free(struct proc *p)
{
    if (p->freeing) return;
    p->freeing = true;
    if (p->table) {
        if (p->prev) p->prev->next = p->next;
        else p->table->head = p->next;
        if (p->next) p->next->prev = p->prev;
    }
    p->table = NULL;
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
        reap_later(p->pid_poll.loop, p->pidfd);
        p->pid_open = false;
    }
    for (int i = 0; i < p->nout; i++) close_out(&p->out[i]);
    close_stdin(p);
    uv_close((uv_handle_t *)&p->timer, handle_closed);
}

void proc_table_destroy(struct proc_table *t)
{
    while (t->head) proc_free(t->head);
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
        for (struct log_chunk *ch = p->log.head; ch; ch = ch->next) ch->wire_end = 0;
        p->log.evicted_wire_end = 0;
    }
    /* Detached output is recorded in the retained log, never held back. */
    proc_table_resume_output(t);
}

void proc_table_attached(struct proc_table *t, struct conn *c)
{
}

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
    buf_put_base64(b, c->data, c->len);
    buf_putc(b, '"');
}

static void notify_output(struct proc *p, struct log_chunk *c)
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

static void notify_event(struct proc *p, const char *method, uint64_t seq, bool with_exit)
{
    struct conn *conn = proc_conn(p);
    if (!conn) return;
    struct buf b;
    buf_init_msg(&b);
    buf_printf(&b, "{\"method\":\"%s\",\"params\":{\"processId\":", method);
    buf_append(&b, p->id_json.data, p->id_json.len);
    buf_puts(&b, ",\"seq\":");
    buf_put_u64(&b, seq);
    if (with_exit) {
        buf_puts(&b, ",\"exitCode\":");
        buf_put_i64(&b, p->exit_code);
        buf_puts(&b, p->sandbox_denied ? ",\"sandboxDenied\":true" : ",\"sandboxDenied\":false");
    }
    buf_puts(&b, "}}");
    conn_send(conn, &b);
}

static bool read_ready(const struct proc *p, uint64_t after)
{
    return event_log_after(&p->log, after) != NULL || p->closed ||
           (p->exited && after < p->exit_seq);
}

static void reply_read(struct rpc_req *req, struct proc *p, uint64_t after, bool has_max,
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
    buf_puts(&b, p->exited ? ",\"exited\":true,\"exitCode\":" : ",\"exited\":false,\"exitCode\":null");
    if (p->exited) buf_put_i64(&b, p->exit_code);
    buf_puts(&b, p->closed ? ",\"closed\":true" : ",\"closed\":false");
    buf_puts(&b, p->exited && p->sandbox_denied ? ",\"failure\":null,\"sandboxDenied\":true}"
                                                : ",\"failure\":null,\"sandboxDenied\":false}");
    rpc_result_finish(req, &b);
}

static void wake_waiters(struct proc *p)
{
    struct waiter *w = p->waiters;
    while (w) {
        struct waiter *n = w->next;
        if (read_ready(p, w->after)) {
            reply_read(w->req, p, w->after, w->has_max, w->max_bytes);
            waiter_remove(w);
        }
        w = n;
    }
}

static void waiter_timeout(uv_timer_t *t)
{
    struct waiter *w = t->data;
    reply_read(w->req, w->p, w->after, w->has_max, w->max_bytes);
    waiter_remove(w);
}

/* ---- child events ------------------------------------------------------- */

static void evict_cb(uv_timer_t *t)
{
    proc_free(t->data);
}

static void check_closed(struct proc *p)
{
    if (p->closed || !p->exited) return;
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].fd >= 0) return;
    p->closed = true;
    p->close_seq = event_log_take_seq(&p->log);
    close_stdin(p);
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
        for (int i = 0; i < p->nout; i++) out_start(&p->out[i]);
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
        /* 128+N in both modes, as a shell reports it (PROTOCOL.md §5.9 "Ours"; the
         * reference says 1 for any signal death on a PTY, which a terminal client
         * cannot turn back into the signal). */
        p->exit_code = 128 + si.si_status;
    }
    metrics_process_exited(p->exit_code == 0, metrics_now_ns() - p->start_ns);
    {
        char idv[160];
        log_event("event=process_exit session=%s process_id=%s pid=%d exit_code=%d "
                  "duration_ms=%llu",
                  p->table->session->id, log_value(p->id, idv, sizeof idv), (int)p->pid,
                  p->exit_code,
                  (unsigned long long)((metrics_now_ns() - p->start_ns) / 1000000));
    }
    uv_close((uv_handle_t *)&p->pid_poll, handle_closed);
    close(p->pidfd);
    p->pid_open = false;
    /* Output already in the pipes belongs before the exit when we can see it. */
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].polling) out_drain(&p->out[i]);
    p->exited = true;
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
            close_stdin(p);
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
        close_stdin(p); /* every byte written first, then the child sees EOF */
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

/* ---- methods -------------------------------------------------------------- */

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
    size_t cwd_len;
    struct uri_error uerr;
    if (uri_to_path(cwd, strlen(cwd), true, &cwd_path, &cwd_len, &uerr) < 0) {
        if (uerr.kind == URI_ERR_HOST || uerr.kind == URI_ERR_PLATFORM)
            return rpc_reply_error(req, RPC_INVALID_PARAMS,
                                   "cwd URI `%s` is not valid on this exec-server host: %s", cwd,
                                   uerr.message);
        return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", uerr.message);
    }
    /* The sandbox: parsed, then prepared here (allocations, the Landlock ruleset)
     * so the child only makes system calls. Whatever cannot be enforced is refused. */
    struct sandbox_policy pol;
    struct sandbox_error serr;
    if (sandbox_policy_parse(sandbox, cwd_path, &pol, &serr) < 0) {
        free(cwd_path);
        return rpc_reply_error(req, serr.code, "%s", serr.message);
    }
    struct sandbox_prepared prep;
    bool sandboxed = sandbox_policy_needs_process(&pol);
    if (sandboxed && sandbox_prepare(&pol, &prep) < 0) {
        sandbox_policy_free(&pol);
        free(cwd_path);
        return rpc_reply_error(req, RPC_INVALID_PARAMS,
                               "sandbox intent cannot be enforced on this executor");
    }
    size_t argc = json_array_size(argv);
    struct proc_table *t = session_of(req->conn)->procs;
    const char *program = argc ? json_string_value(json_array_get(argv, 0)) : "";
    unsigned live = 0;
    for (struct proc *q = t->head; q; q = q->next) live += !q->closed;
    bool over_limit = live >= server_limits.max_processes;
    if (argc == 0 || proc_find(t, id) || !*program || over_limit) {
        if (sandboxed) sandbox_prepared_free(&prep);
        sandbox_policy_free(&pol);
        free(cwd_path);
        if (argc == 0) return rpc_reply_error(req, RPC_INVALID_PARAMS, "argv must not be empty");
        if (proc_find(t, id))
            return rpc_reply_error(req, RPC_INVALID_REQUEST, "process %s already exists", id);
        if (over_limit)
            return rpc_reply_error(req, RPC_INVALID_REQUEST,
                                   "process limit reached: this session already has %u running "
                                   "processes (--max-processes %u); wait for one to exit or "
                                   "terminate one",
                                   live, server_limits.max_processes);
        return rpc_reply_error(req, RPC_INTERNAL_ERROR, "missing program for pipe spawn");
    }

    char **cargv = xcalloc(argc + 1, sizeof *cargv);
    json_array_foreach(argv, i, v) cargv[i] = xstrdup(json_string_value(v));
    if (arg0) {
        free(cargv[0]);
        cargv[0] = xstrdup(arg0);
    }
    extern char **environ;
    char **cenv = env_build(environ, has_env_pol ? &env_pol : NULL, env);
    if (req->trace) cenv = env_add_trace(cenv, req->trace);
    const char *path_env = env_get(cenv, "PATH");

    struct spawn_request rq = {
        .program = program,
        .argv = cargv,
        .envp = cenv,
        .path_env = path_env,
        .cwd = cwd_path,
        .tty = tty,
        .rows = rows,
        .cols = cols,
        .pipe_stdin = pipe_stdin,
        .sandbox = sandboxed ? &prep : NULL,
    };
    struct spawn_result sr;
    int err = spawn_child(&rq, &sr);
    if (sandboxed) sandbox_prepared_free(&prep);
    sandbox_policy_free(&pol);
    free_strv(cargv);
    env_free(cenv);
    free(cwd_path);
    if (err) {
        char text[256];
        oserr_format(err, text, sizeof text);
        return rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", text);
    }

    struct proc *p = xcalloc(1, sizeof *p);
    p->table = t;
    p->id = xstrdup(id);
    buf_init(&p->id_json);
    buf_put_json_str(&p->id_json, id, strlen(id));
    p->tty = tty;
    p->sandboxed = sandboxed;
    p->pid = sr.pid;
    p->pidfd = sr.pidfd;
    p->start_ns = metrics_now_ns();
    metrics_process_started();
    {
        char idv[160], a0[200];
        log_event("event=process_start session=%s process_id=%s pid=%d argv0=%s tty=%s "
                  "sandboxed=%s",
                  session_of(req->conn)->id, log_value(id, idv, sizeof idv), (int)sr.pid,
                  log_value(program, a0, sizeof a0), tty ? "true" : "false",
                  sandboxed ? "true" : "false");
    }
    event_log_init(&p->log);
    uv_loop_t *loop = req->loop;
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->handles = 1;
    uv_poll_init(loop, &p->pid_poll, sr.pidfd);
    p->pid_poll.data = p;
    p->pid_open = true;
    p->handles++;
    int fds[2] = {sr.out_fd, sr.err_fd};
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
    p->in_fd = sr.in_fd;
    p->had_stdin = sr.in_fd >= 0;
    if (p->in_fd >= 0) {
        uv_poll_init(loop, &p->in_poll, p->in_fd);
        p->in_poll.data = p;
        p->in_init = true;
        p->handles++;
    }
    p->next = t->head;
    if (t->head) t->head->prev = p;
    t->head = p;

    /* The response goes out before any notification of the new process. */
    json_t *res = json_pack("{s:s,s:s}", "processId", id, "sandboxType",
                            sandboxed ? "linuxSeccomp" : "none");
    rpc_reply_json(req, res);

    uv_poll_start(&p->pid_poll, UV_READABLE, pid_cb);
    for (int s = 0; s < p->nout; s++) out_start(&p->out[s]);
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
    struct proc *p = proc_find(session_of(req->conn)->procs, id);
    if (!p) return rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown process id %s", id);
    if (wait_ms == 0 || read_ready(p, after)) return reply_read(req, p, after, has_max, max_bytes);
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
    it->off = 0;
    it->next = NULL;
    struct proc *p = proc_find(session_of(req->conn)->procs, id);
    const char *fail = NULL;
    /* Statuses, not errors (PROTOCOL.md §5.3): codex's client maps these results
     * to its own errors and treats a JSON-RPC error here as a broken connection. */
    if (!p || !p->had_stdin || p->eof_requested) {
        free(it);
        return rpc_reply_json(req, json_pack("{s:s}", "status", p ? "stdinClosed" : "unknownProcess"));
    }
    if (p->terminated && !p->exited) fail = "failed to write to process stdin";
    if (fail) {
        free(it);
        return rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", fail);
    }
    if (wid && write_id_seen(p, wid)) {
        free(it);
        return rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
    }
    if (wid) write_id_remember(p, wid);
    if (p->in_fd >= 0 && it->len > 0) {
        if (p->wq_tail) p->wq_tail->next = it;
        else p->wq_head = it;
        p->wq_tail = it;
        proc_stdin_flush(p);
    } else {
        free(it);
    }
    rpc_reply_json(req, json_pack("{s:s}", "status", "accepted"));
}

static void handle_terminate(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TerminateParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_find(session_of(req->conn)->procs, id);
    bool running = p && !p->exited;
    if (running) {
        kill(-p->pid, SIGKILL);
        p->terminated = true;
        close_stdin(p);
    }
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
