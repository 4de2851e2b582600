/* conn_budget: every connection's queued output counted against the server-wide
 * in-flight budget (core/inflight.h), and the choice of the clients that stopped
 * reading. What to do with them (log, stop reading, close) is conn.c's watchdog.
 *
 * A connection with output queued is on the busy list, with the loop time its
 * kernel socket last took a byte (progress_ms). conn.c's watchdog asks every
 * CONN_BUDGET_WATCH_MS:
 *   - conn_budget_sample: progress is sampled from libuv's write queue of the
 *     connection's stream, so a single 500 MB reply that the client reads slowly
 *     counts as moving, although its write completes only at the end;
 *   - conn_budget_idle: a connection holding more than --max-queued-bytes (the
 *     message being written included) that took no byte for CONN_BUDGET_IDLE_MS is
 *     not reading. So a client that never reads costs at most --max-queued-bytes for
 *     long;
 *   - conn_budget_slowest: while the bytes in flight and the bytes a waiting read
 *     wants pass --max-inflight-bytes, the connection that has gone longest without
 *     taking a byte (at least CONN_BUDGET_STALL_MS), those whose backlog can be
 *     dropped without losing process output first: the slowest reader goes first,
 *     and a client that reads, however large its reply, is left alone.
 * redis's client-output-buffer-limit is the model; progress rather than time over a
 * soft limit decides, because one reply may be larger than the limit. Loop thread. */
#include "transport/conn_impl.h"

#include "core/inflight.h"
#include "core/limits.h"

static struct conn *busy; /* connections with output queued (busy_next/busy_prev) */

static void busy_insert(struct conn *c)
{
    c->busy = true;
    c->busy_prev = NULL;
    c->busy_next = busy;
    if (busy) busy->busy_prev = c;
    busy = c;
}

static void busy_remove(struct conn *c)
{
    if (c->busy_prev)
        c->busy_prev->busy_next = c->busy_next;
    else
        busy = c->busy_next;
    if (c->busy_next) c->busy_next->busy_prev = c->busy_prev;
    c->busy_next = c->busy_prev = NULL;
    c->busy = false;
}

bool conn_budget_busy(void)
{
    return busy != NULL;
}

void conn_budget_add(struct conn *c, size_t n)
{
    if (n == 0) return;
    if (!c->busy) {
        c->progress_ms = uv_now(c->loop); /* the stall clock starts now */
        busy_insert(c);
    }
    c->queued += n;
    inflight_queued_add(n);
}

void conn_budget_sub(struct conn *c, size_t n, bool written)
{
    if (n > c->queued) n = c->queued;
    c->queued -= n;
    inflight_queued_sub(n);
    if (written && n) c->progress_ms = uv_now(c->loop);
    if (c->queued == 0 && c->busy) busy_remove(c);
    if (n) inflight_room();
}

void conn_budget_forget(struct conn *c)
{
    if (c->queued) inflight_queued_sub(c->queued);
    c->queued = 0;
    if (c->busy) busy_remove(c);
}

bool conn_backlog_safe(struct conn *c)
{
    return !c->owner_ops || c->owner_ops->output_safe(c->owner, c, c->written_total);
}

/* Did the kernel take bytes of c's stream since the last look? libuv's write queue
 * shrinks as it writes, in the middle of one large write too. */
static void sample_progress(struct conn *c, uint64_t now)
{
    if (!c->stream || !c->open) return;
    size_t q = uv_stream_get_write_queue_size(c->stream);
    if (q < c->stream_seen + c->stream_added) c->progress_ms = now;
    c->stream_seen = q;
    c->stream_added = 0;
}

void conn_budget_sample(uint64_t now)
{
    for (struct conn *c = busy; c; c = c->busy_next)
        sample_progress(c, now);
}

struct conn *conn_budget_idle(uint64_t now)
{
    for (struct conn *c = busy; c; c = c->busy_next)
        if (c->open && c->queued > server_limits.max_queued &&
            now - c->progress_ms >= CONN_BUDGET_IDLE_MS)
            return c;
    return NULL;
}

struct conn *conn_budget_slowest(uint64_t now)
{
    if (!inflight_over()) return NULL;
    struct conn *best = NULL;
    bool best_safe = false;
    for (struct conn *c = busy; c; c = c->busy_next) {
        if (!c->open || now - c->progress_ms < CONN_BUDGET_STALL_MS) continue;
        bool safe = conn_backlog_safe(c);
        if (!best || (safe && !best_safe) ||
            (safe == best_safe && c->progress_ms < best->progress_ms)) {
            best = c;
            best_safe = safe;
        }
    }
    return best;
}
