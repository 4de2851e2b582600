/* proc: the process model: the per-session table, the output pump, exit and
 * close, the stdin queue and reaping (see process.h and proc_internal.h; rules in
 * PROTOCOL.md section 5). Every event goes to the table's struct proc_events: the
 * session's sink (proc_rpc.c) writes the notifications and answers long-poll
 * reads; the JSON-RPC handlers that drive the table are in process_methods.c
 * and start_methods.c.
 *
 * The output path: read() into one scratch buffer, one copy into the event log,
 * then the sink encodes the chunk from the log straight into the outgoing frame's
 * buffer (base64, no JSON tree per chunk). When the sink says it is congested,
 * readers stop (the child then blocks on a full pipe) until it drains:
 * memory stays bounded and nothing is lost. */
#include "process/process.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
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
#include "helpers/guardian.h"
#include "sandbox/sandbox_init.h"
#include "process/proc_internal.h"
#include "process/shell_snapshot.h"
#include "process/spawn.h"
#include "process/proc_denied.h"
#include "sandbox/hold.h"
#include "netproxy/netproxy.h"
#include "util/mem.h"

static uint8_t scratch[READ_BATCH];

/* ---- table ---------------------------------------------------------------- */

struct proc_table *proc_table_new(const struct proc_events *events, void *owner,
                                  const char *owner_id)
{
    struct proc_table *t = xcalloc(1, sizeof *t);
    t->events = events;
    t->owner = owner;
    t->owner_id = owner_id;
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

/* Processes not yet closed, over every session (--max-total-processes). */
static unsigned live_total;

unsigned proc_live_total(void)
{
    return live_total;
}

/* SIGKILL to the child's group, or, for a sandbox without namespaces, the signal
 * its init ends everything by (spawn.h: ends_itself); the group kill after its
 * reaping still reaches what is left of the group. */
static void proc_end(struct proc *p)
{
    if (p->ends_itself && p->pid_open &&
        syscall(SYS_pidfd_send_signal, p->pidfd, SANDBOX_END_SIGNAL, NULL, 0) == 0)
        return;
    kill(-p->pid, SIGKILL);
}

static void proc_free(struct proc *p)
{
    if (p->freeing) return;
    p->freeing = true;
    if (p->state != PROC_CLOSED) live_total--;        /* killed with its session */
    if (p->table) proc_audit_end(p, "session ended"); /* nothing when it closed before */
    if (p->table) p->table->events->leaving(p);
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
    /* Also after the leader exited: background grandchildren may still be in its
     * group, and a group never outlives its entry (nor the guardian's record). While
     * the leader is unreaped its pid is still the group's number; once reaped, that
     * number may be a stranger's (80 s of retention is long enough for pids to wrap
     * on a busy host), so the group is reached through the leader's pidfd. */
    if (p->pid_open) {
        proc_end(p);
        guardian_untrack(p->pid);
        uv_close((uv_handle_t *)&p->pid_poll, handle_closed);
        spawn_reap_later(p->pid_poll.loop, p->pidfd, p->hold);
        p->pid_open = false;
    } else {
        if (p->group_fd >= 0) { /* pid_cb left the group listed with the guardian */
            spawn_group_signal(p->group_fd, SIGKILL);
            close(p->group_fd);
            p->group_fd = -1;
            guardian_untrack(p->pid);
        }
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

void proc_table_unsent(struct proc_table *t)
{
    for (struct proc *p = t->head; p; p = p->next) {
        for (struct log_chunk *ch = p->log.head; ch; ch = ch->next)
            ch->wire_end = 0;
        p->log.evicted_wire_end = 0;
    }
    /* Detached output is recorded in the retained log, never held back. */
    proc_table_resume_output(t);
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

bool proc_read_ready(const struct proc *p, uint64_t after)
{
    return event_log_after(&p->log, after) != NULL || p->state == PROC_CLOSED ||
           (p->state >= PROC_EXITED && after < p->exit_seq);
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
    proc_audit_end(p, "exited");
    netproxy_release(p->netproxy); /* its proxy ends with it, as the reference's does */
    p->netproxy = NULL;
    live_total--;
    p->close_seq = event_log_take_seq(&p->log);
    proc_close_stdin(p);
    p->table->events->closed(p);
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
    const struct proc_events *ev = o->p->table->events;
    void *batch = ev->batch_begin(o->p->table);
    out_drain_reads(o);
    ev->batch_end(batch);
}

static void out_drain_reads(struct out_src *o)
{
    struct proc *p = o->p;
    const struct proc_events *ev = p->table->events;
    for (int i = 0; i < READS_PER_WAKEUP && o->fd >= 0; i++) {
        /* Large reads (one syscall, one wakeup of a writer blocked on a full pipe),
         * cut into protocol-sized chunks. */
        ssize_t n = read(o->fd, scratch, sizeof scratch);
        if (n > 0) {
            p->out_bytes += (uint64_t)n;
            for (ssize_t off = 0; off < n; off += READ_CHUNK) {
                size_t len = (size_t)(n - off) < READ_CHUNK ? (size_t)(n - off) : READ_CHUNK;
                struct log_chunk *c = event_log_append(&p->log, o->stream, scratch + off, len);
                if (p->tty_rec) proc_audit_output(p, c);
                ev->output(p, c);
            }
            ev->progressed(p);
            if (ev->congested(p->table)) {
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
        p->exit_signal = si.si_status;
    }
    p->exit_ns = metrics_now_ns();
    metrics_process_exited(p->exit_code == 0, metrics_now_ns() - p->start_ns);
    {
        char idv[160];
        log_event("event=process_exit session=%s process_id=%s pid=%d exit_code=%d "
                  "duration_ms=%llu",
                  p->table->owner_id, log_value(p->id, idv, sizeof idv), (int)p->pid, p->exit_code,
                  (unsigned long long)((metrics_now_ns() - p->start_ns) / 1000000));
    }
    uv_close((uv_handle_t *)&p->pid_poll, handle_closed);
    p->pid_open = false;
    /* Reaped: kill(-pid) may now reach a stranger (proc_free). Background members of
     * the group keep the pidfd open for the group's end; an empty group cannot be
     * joined again, so it needs neither the pidfd nor the guardian's record. */
    if (spawn_group_signal(p->pidfd, 0) == 0) {
        p->group_fd = p->pidfd;
    } else {
        close(p->pidfd);
        guardian_untrack(p->pid);
    }
    /* The sandbox (its namespaces) ended with its init. Its placeholders go now (a
     * client that sees process/closed finds none left on the host); its cgroups once
     * this process's notifications are out, on a pool thread (spawn_release_later),
     * so that neither the thread's wakeup nor its work comes before them. */
    struct sandbox_hold *hold = p->hold;
    p->hold = NULL;
    sandbox_hold_release_placeholders(hold);
    /* Output already in the pipes belongs before the exit when we can see it. */
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].polling) out_drain(&p->out[i]);
    p->state = PROC_EXITED;
    p->sandbox_denied = proc_denied_verdict(p->sandboxed, p->exit_code, &p->log);
    p->exit_seq = event_log_take_seq(&p->log);
    p->table->events->exited(p);
    if (p->tty && p->out[0].fd >= 0) uv_timer_start(&p->timer, pty_drain_deadline, PTY_DRAIN_MS, 0);
    check_closed(p);
    spawn_release_later(h->loop, hold);
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
    p->ends_itself = sr->ends_itself;
    p->group_fd = -1;
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

void proc_kill(struct proc *p)
{
    proc_end(p);
    p->terminated = true;
    proc_close_stdin(p);
}
