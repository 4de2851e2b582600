/* conn_budget: every connection's queued output counted against the server-wide
 * in-flight budget (core/inflight.h), and the watchdog that closes clients that
 * stopped reading.
 *
 * A connection with output queued is on the busy list, with the loop time its
 * kernel socket last took a byte (progress_ms). While the list is not empty a timer
 * looks at it every CONN_WATCH_MS:
 *   - progress is sampled from libuv's write queue of the connection's stream, so a
 *     single 500 MB reply that the client reads slowly counts as moving, although
 *     its write completes only at the end;
 *   - a connection holding more than --max-queued-bytes (the message being written
 *     included) that took no byte for CONN_STALL_CLOSE_MS is not reading: it is
 *     treated like one whose backlog passed the limit (its requests are no longer
 *     read, and it is closed once its queued process output is safe in the retained
 *     logs). So a client that never reads costs at most --max-queued-bytes for long;
 *   - while the bytes in flight and the bytes a waiting read wants pass
 *     --max-inflight-bytes, the connection that has gone longest without taking a
 *     byte (at least CONN_STALL_MS) is closed, one a tick, those whose backlog can
 *     be dropped without losing process output first: the slowest reader goes
 *     first, and a client that reads, however large its reply, is left alone.
 * redis's client-output-buffer-limit is the model; progress rather than time over a
 * soft limit decides, because one reply may be larger than the limit. Loop thread. */
#include "transport/conn_impl.h"

#include "core/inflight.h"
#include "core/limits.h"
#include "core/log.h"

#define CONN_WATCH_MS 500
#define CONN_STALL_MS 1000
#define CONN_STALL_CLOSE_MS 10000

static struct conn *busy; /* connections with output queued (busy_next/busy_prev) */
static uv_timer_t watch_timer;
static bool watch_init;

static void watch_tick(uv_timer_t *t);

static void busy_insert(struct conn *c)
{
    c->busy = true;
    c->busy_prev = NULL;
    c->busy_next = busy;
    if (busy) busy->busy_prev = c;
    busy = c;
    if (!watch_init) {
        uv_timer_init(c->loop, &watch_timer);
        uv_unref((uv_handle_t *)&watch_timer); /* never what keeps the loop alive */
        watch_init = true;
    }
    if (!uv_is_active((uv_handle_t *)&watch_timer) && !uv_is_closing((uv_handle_t *)&watch_timer))
        uv_timer_start(&watch_timer, watch_tick, CONN_WATCH_MS, CONN_WATCH_MS);
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

/* The connection to close for the budget: the one stalled longest, at least
 * CONN_STALL_MS, preferring one whose backlog loses nothing when dropped. */
static struct conn *slowest_reader(uint64_t now)
{
    struct conn *best = NULL;
    bool best_safe = false;
    for (struct conn *c = busy; c; c = c->busy_next) {
        if (!c->open || now - c->progress_ms < CONN_STALL_MS) continue;
        bool safe = conn_backlog_safe(c);
        if (!best || (safe && !best_safe) ||
            (safe == best_safe && c->progress_ms < best->progress_ms)) {
            best = c;
            best_safe = safe;
        }
    }
    return best;
}

static void watch_tick(uv_timer_t *t)
{
    uint64_t now = uv_now(t->loop);
    struct conn *idle = NULL; /* over --max-queued-bytes and stalled */
    for (struct conn *c = busy; c; c = c->busy_next) {
        sample_progress(c, now);
        if (c->open && !idle && c->queued > server_limits.max_queued &&
            now - c->progress_ms >= CONN_STALL_CLOSE_MS)
            idle = c;
    }
    if (idle) {
        conn_ref(idle);
        log_warn("connection %s: %zu bytes of output queued (over --max-queued-bytes %zu) and "
                 "none taken for %llu s; the client is not reading",
                 idle->peer, idle->queued, server_limits.max_queued,
                 (unsigned long long)(now - idle->progress_ms) / 1000);
        conn_not_reading(idle);
        conn_unref(idle);
    }
    if (inflight_over()) {
        struct conn *c = slowest_reader(now);
        if (c) {
            log_warn("connection %s: closed: %zu bytes in flight server-wide and %zu more "
                     "wanted pass --max-inflight-bytes %zu; it is the slowest reader (no "
                     "byte taken for %llu ms, %zu bytes queued)",
                     c->peer, inflight_total(), inflight_wanted(), server_limits.max_inflight,
                     (unsigned long long)(now - c->progress_ms), c->queued);
            conn_close(c);
        }
    }
    if (!busy) uv_timer_stop(t);
}
