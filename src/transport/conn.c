/* conn: reference counting, flow-controlled writes, the owner interface and
 * teardown shared by the WebSocket and stdio transports (see conn.h and
 * conn_impl.h). */
#include "transport/conn_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/inflight.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "transport/tls.h"
#include "util/bigbuf.h"
#include "util/mem.h"

struct conn_wreq {
    uv_write_t req;
    struct conn *conn;
    size_t len;
    unsigned nmsg; /* messages it ends, each an entry of conn->wq */
    unsigned nmem;
    char *mem[]; /* storage freed once written */
};

/* Messages gathered while corked: frames as slices of their own storage. */
#define CONN_BATCH_BUFS 64
struct conn_batch {
    uv_stream_t *stream;
    unsigned nbufs, nmem;
    size_t len;
    uv_buf_t bufs[CONN_BATCH_BUFS];
    char *mem[CONN_BATCH_BUFS];      /* one block per message */
    size_t msg_len[CONN_BATCH_BUFS]; /* ...and its length */
};

void conn_init(struct conn *c, const struct conn_ops *ops, uv_loop_t *loop,
               conn_message_fn on_message)
{
    memset(c, 0, sizeof *c);
    c->ops = ops;
    c->loop = loop;
    c->refs = 1;
    c->open = true;
    c->on_message = on_message;
    c->transport = ops->kind;
    metrics_connection_opened(c->transport);
}

void conn_set_transport(struct conn *c, const char *word)
{
    metrics_connection_retag(c->transport, word);
    c->transport = word;
}

/* Bytes received and sent on every connection (conn_traffic_bytes). Loop thread. */
static uint64_t traffic;

uint64_t conn_traffic_bytes(void)
{
    return traffic;
}

void conn_deliver(struct conn *c, const char *data, size_t len)
{
    traffic += len;
    if (!c->on_message) return;
    c->delivering = data;
    c->on_message(c, data, len);
    c->delivering = NULL;
}

/* Reading is on unless the backlog or the held input stopped it. */
static void update_reading(struct conn *c)
{
    bool on = !c->backlogged && !c->held_paused;
    if (c->ops->set_reading && c->open) c->ops->set_reading(c, on);
}

void *conn_take_message(struct conn *c, const char *data)
{
    if (!c->delivering || c->delivering != data || !c->ops->take_message) return NULL;
    void *m = c->ops->take_message(c);
    if (!m) return NULL;
    c->delivering = NULL;
    c->held += bigbuf_cap(m);
    if (!c->held_paused && c->held > CONN_HELD_PAUSE) {
        c->held_paused = true;
        update_reading(c);
    }
    return m;
}

void conn_release_message(struct conn *c, void *m)
{
    if (!m) return;
    size_t n = bigbuf_cap(m);
    bigbuf_free(m);
    c->held -= n < c->held ? n : c->held;
    if (c->held_paused && c->held <= CONN_HELD_RESUME) {
        c->held_paused = false;
        update_reading(c);
    }
}

unsigned conn_flags(const struct conn *c)
{
    return c->ops->flags;
}

void conn_set_owner(struct conn *c, const struct conn_owner_ops *ops, void *owner)
{
    c->owner_ops = ops;
    c->owner = ops ? owner : NULL;
}

void *conn_owner(const struct conn *c, const struct conn_owner_ops *ops)
{
    return c->owner_ops == ops ? c->owner : NULL;
}

void conn_send(struct conn *c, struct buf *msg)
{
    if (!c->open) {
        buf_free(msg);
        return;
    }
    c->ops->send(c, msg);
}

bool conn_is_open(const struct conn *c)
{
    return c->open;
}

uv_loop_t *conn_loop(const struct conn *c)
{
    return c->loop;
}

void conn_ref(struct conn *c)
{
    c->refs++;
}

void conn_unref(struct conn *c)
{
    if (--c->refs == 0) {
        conn_budget_forget(c);
        free(c->wq);
        c->ops->destroy(c);
    }
}

const char *conn_peer(const struct conn *c)
{
    return c->peer;
}

const char *conn_identity(const struct conn *c)
{
    return c->identity;
}

void conn_set_identity(struct conn *c, const char *identity)
{
    snprintf(c->identity, sizeof c->identity, "%s", identity);
}

const char *conn_kind(const struct conn *c)
{
    return c->ops->kind;
}

uint64_t conn_sent_total(const struct conn *c)
{
    return c->sent_total;
}

uint64_t conn_written_total(const struct conn *c)
{
    return c->written_total;
}

size_t conn_queued_bytes(const struct conn *c)
{
    return c->queued;
}

bool conn_is_congested(const struct conn *c)
{
    return c->congested;
}

/* The slot's index, handed out on its first use. */
static int slot_index(struct conn_slot *slot)
{
    static _Atomic int given;
    int i = atomic_load_explicit(&slot->index, memory_order_acquire);
    if (i) return i - 1;
    int mine = atomic_fetch_add(&given, 1) + 1;
    if (mine > CONN_SLOTS_MAX) abort(); /* one module more: raise CONN_SLOTS_MAX */
    int none = 0;
    if (!atomic_compare_exchange_strong(&slot->index, &none, mine)) return none - 1;
    return mine - 1;
}

void *conn_slot_get(const struct conn *c, struct conn_slot *slot)
{
    return c->slots[slot_index(slot)];
}

void conn_slot_on_unblocked(struct conn *c, struct conn_slot *slot, void (*fn)(void *))
{
    c->slot_unblocked[slot_index(slot)] = fn;
}

void conn_slot_set(struct conn *c, struct conn_slot *slot, void *state, void (*free_fn)(void *))
{
    int i = slot_index(slot);
    c->slots[i] = state;
    c->slot_free[i] = free_fn;
}

/* ---- the backlog ------------------------------------------------------------------
 * Writes complete in the order they were queued, so a ring of the queued messages'
 * lengths (what of each is still queued) tells which message the kernel is taking
 * now. The limit (--max-queued-bytes) is on what is queued behind that one message:
 * a single reply larger than the limit (a 256 MiB fs/readFile) is delivered to a
 * client that reads it, and the requests answered after it are not lost; a client
 * that stops reading still piles messages up behind it and is closed. (A relay
 * stream accounts frames, not messages: there the head is one frame.) */

static void wq_push(struct conn *c, size_t len)
{
    if (c->wq_n == c->wq_cap) {
        unsigned cap = c->wq_cap ? 2 * c->wq_cap : 16;
        size_t *q = xmalloc(cap * sizeof *q);
        for (unsigned i = 0; i < c->wq_n; i++)
            q[i] = c->wq[(c->wq_head + i) % c->wq_cap];
        free(c->wq);
        c->wq = q;
        c->wq_cap = cap;
        c->wq_head = 0;
    }
    c->wq[(c->wq_head + c->wq_n) % c->wq_cap] = len;
    c->wq_n++;
}

static void wq_pop(struct conn *c, unsigned n)
{
    if (n > c->wq_n) n = c->wq_n;
    if (n == 0) return;
    c->wq_head = (c->wq_head + n) % c->wq_cap;
    c->wq_n -= n;
}

/* Bytes queued behind the message being written (what --max-queued-bytes bounds). */
static size_t conn_backlog(const struct conn *c)
{
    size_t head = c->wq_n ? c->wq[c->wq_head] : 0;
    return c->queued > head ? c->queued - head : 0;
}

void *conn_slot_ensure(struct conn *c, struct conn_slot *slot, size_t size, void (*free_fn)(void *),
                       void (*unblocked)(void *))
{
    int i = slot_index(slot);
    if (!c->slots[i]) {
        c->slots[i] = xcalloc(1, size);
        c->slot_free[i] = free_fn;
        c->slot_unblocked[i] = unblocked;
    }
    return c->slots[i];
}

/* The backlog passed the hard limit: the client is not reading. Close it if that
 * loses nothing; otherwise stop reading its requests (no new replies) and let
 * write_done close it once the queued output is safe. */
static void not_reading(struct conn *c)
{
    if (!c->backlogged) {
        c->backlogged = true;
        log_warn("connection %s: %zu bytes of output queued behind the message being "
                 "written, over the limit of %zu (--max-queued-bytes); the client is not "
                 "reading",
                 c->peer, conn_backlog(c), server_limits.max_queued);
        update_reading(c);
    }
    if (conn_backlog_safe(c)) {
        log_warn("connection %s: closing the slow client (its process output is kept for "
                 "resume)",
                 c->peer);
        conn_close(c);
    }
}

/* The watchdog of the in-flight budget (conn_budget.c chooses, this acts): runs
 * every CONN_BUDGET_WATCH_MS while any connection has output queued. */
static uv_timer_t watch_timer;
static bool watch_init;

static void watch_tick(uv_timer_t *t)
{
    uint64_t now = uv_now(t->loop);
    conn_budget_sample(now);
    struct conn *c = conn_budget_idle(now);
    if (c) {
        conn_ref(c);
        log_warn("connection %s: %zu bytes of output queued (over --max-queued-bytes %zu) and "
                 "none taken for %llu s; the client is not reading",
                 c->peer, c->queued, server_limits.max_queued,
                 (unsigned long long)(now - c->progress_ms) / 1000);
        not_reading(c);
        conn_unref(c);
    }
    c = conn_budget_slowest(now);
    if (c) {
        log_warn("connection %s: closed: %zu bytes in flight server-wide and %zu more wanted "
                 "pass --max-inflight-bytes %zu; it is the slowest reader (no byte taken for "
                 "%llu ms, %zu bytes queued)",
                 c->peer, inflight_total(), inflight_wanted(), server_limits.max_inflight,
                 (unsigned long long)(now - c->progress_ms), c->queued);
        conn_close(c);
    }
    if (!conn_budget_busy()) uv_timer_stop(t);
}

/* c's queue grew by n: counted, and watched. */
static void budget_add(struct conn *c, size_t n)
{
    conn_budget_add(c, n);
    if (!watch_init) {
        uv_timer_init(c->loop, &watch_timer);
        uv_unref((uv_handle_t *)&watch_timer); /* never what keeps the loop alive */
        watch_init = true;
    }
    if (n && !uv_is_active((uv_handle_t *)&watch_timer) &&
        !uv_is_closing((uv_handle_t *)&watch_timer))
        uv_timer_start(&watch_timer, watch_tick, CONN_BUDGET_WATCH_MS, CONN_BUDGET_WATCH_MS);
}

/* len bytes ending nmsg queued messages were written (status 0) or dropped. */
static void account_written(struct conn *c, size_t len, unsigned nmsg, int status)
{
    conn_budget_sub(c, len, status == 0);
    wq_pop(c, nmsg);
    if (status == 0) c->written_total += len;
    if (status < 0 && c->open) conn_close(c);
    if (c->backlogged && c->open) {
        if (conn_backlog(c) <= server_limits.max_queued) {
            /* It reads after all: back under the limit, serve it again. */
            c->backlogged = false;
            update_reading(c);
        } else if (conn_backlog_safe(c)) {
            not_reading(c);
        }
    }
    if (c->congested && c->queued < CONN_LOW_WATER) {
        c->congested = false;
        if (c->owner_ops) c->owner_ops->unblocked(c->owner, c);
        for (int i = 0; i < CONN_SLOTS_MAX; i++)
            if (c->slots[i] && c->slot_unblocked[i]) c->slot_unblocked[i](c->slots[i]);
    }
}

void conn_account_written(struct conn *c, size_t len, int status)
{
    account_written(c, len, 1, status);
}

static void write_done(uv_write_t *req, int status)
{
    struct conn_wreq *w = (struct conn_wreq *)req;
    struct conn *c = w->conn;
    size_t len = w->len;
    unsigned nmsg = w->nmsg;
    for (unsigned i = 0; i < w->nmem; i++)
        bigbuf_free_any(w->mem[i]);
    free(w);
    account_written(c, len, nmsg, status);
    conn_unref(c);
}

bool conn_account_queued(struct conn *c, size_t len)
{
    c->sent_total += len;
    traffic += len;
    if (conn_backlog(c) > server_limits.max_queued && c->open) {
        not_reading(c);
        if (!c->open) return false;
    }
    budget_add(c, len);
    wq_push(c, len);
    if (!c->congested && c->queued >= CONN_HIGH_WATER) c->congested = true;
    return true;
}

/* Queues bufs (slices of the nmem blocks of mem) behind whatever is already queued;
 * the blocks are freed once written. They hold what is left of nmsg messages, of
 * msg_left[i] bytes each. */
static void queue_write(struct conn *c, uv_stream_t *stream, char *const *mem, unsigned nmem,
                        const uv_buf_t *bufs, unsigned nbufs, size_t len, const size_t *msg_left,
                        unsigned nmsg)
{
    if (conn_backlog(c) > server_limits.max_queued && c->open) {
        not_reading(c);
        if (!c->open) {
            for (unsigned i = 0; i < nmem; i++)
                bigbuf_free_any(mem[i]);
            return;
        }
    }
    struct conn_wreq *w = xmalloc(sizeof *w + nmem * sizeof *mem);
    w->conn = c;
    w->len = len;
    w->nmsg = nmsg;
    w->nmem = nmem;
    memcpy(w->mem, mem, nmem * sizeof *mem);
    budget_add(c, len);
    for (unsigned i = 0; i < nmsg; i++)
        wq_push(c, msg_left[i]);
    conn_ref(c);
    c->stream = stream;
    for (unsigned i = 0; i < nbufs; i++)
        c->stream_added += bufs[i].len;
    if (uv_write(&w->req, stream, bufs, nbufs, write_done) < 0) {
        conn_budget_sub(c, len, false);
        c->wq_n -= nmsg; /* the entries just pushed */
        for (unsigned i = 0; i < nmem; i++)
            bigbuf_free_any(mem[i]);
        free(w);
        conn_unref(c);
        conn_close(c);
        return;
    }
    if (!c->congested && c->queued >= CONN_HIGH_WATER) c->congested = true;
}

/* Writes bufs, the nmem messages of msg_len[i] bytes each (one block of mem each):
 * straight to the kernel when nothing is queued (most messages leave at once with
 * no queue entry), and queues only what it did not take (no copy: slices of mem). */
static void write_bufs(struct conn *c, uv_stream_t *stream, char *const *mem, unsigned nmem,
                       const size_t *msg_len, const uv_buf_t *bufs, unsigned nbufs, size_t len)
{
    if (c->tls) {
        /* wss: encrypt, then queue the ciphertext; the flow accounting stays in
         * payload bytes (sent_total is counted in them), so a write completes
         * `len` payload bytes whatever its ciphertext size. */
        bool ok = true;
        for (unsigned i = 0; i < nbufs && ok; i++)
            ok = tls_write(c->tls, bufs[i].base, bufs[i].len) == 0;
        for (unsigned i = 0; i < nmem; i++)
            bigbuf_free_any(mem[i]);
        if (!ok) {
            conn_close(c);
            return;
        }
        char *ct;
        size_t n = tls_take_output(c->tls, &ct);
        uv_buf_t ub = uv_buf_init(ct, (unsigned)n);
        if (n)
            queue_write(c, stream, &ct, 1, &ub, 1, len, msg_len, nmem);
        else
            c->written_total += len;
        return;
    }
    if (c->queued > 0) {
        queue_write(c, stream, mem, nmem, bufs, nbufs, len, msg_len, nmem);
        return;
    }
    int n = uv_try_write(stream, bufs, nbufs);
    if (n < 0 && n != UV_EAGAIN) {
        for (unsigned i = 0; i < nmem; i++)
            bigbuf_free_any(mem[i]);
        conn_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    c->written_total += done;
    if (done == len) {
        for (unsigned i = 0; i < nmem; i++)
            bigbuf_free_any(mem[i]);
        return;
    }
    /* What is left of each message: the first ones the kernel took are gone. */
    size_t left[CONN_BATCH_BUFS];
    unsigned nleft = 0;
    size_t taken = done;
    for (unsigned i = 0; i < nmem; i++) {
        if (taken >= msg_len[i]) {
            taken -= msg_len[i];
            continue;
        }
        left[nleft++] = msg_len[i] - taken;
        taken = 0;
    }
    uv_buf_t rest[CONN_BATCH_BUFS];
    unsigned k = 0;
    size_t skip = done;
    for (unsigned i = 0; i < nbufs && k < CONN_BATCH_BUFS; i++) {
        if (skip >= bufs[i].len) {
            skip -= bufs[i].len;
            continue;
        }
        rest[k++] = uv_buf_init(bufs[i].base + skip, (unsigned)(bufs[i].len - skip));
        skip = 0;
    }
    queue_write(c, stream, mem, nmem, rest, k, len - done, left, nleft);
}

void conn_tls_flush(struct conn *c, uv_stream_t *stream)
{
    char *ct;
    size_t n = tls_take_output(c->tls, &ct);
    if (n == 0) return;
    uv_buf_t ub = uv_buf_init(ct, (unsigned)n);
    queue_write(c, stream, &ct, 1, &ub, 1, 0, NULL, 0);
}

static void batch_flush(struct conn *c)
{
    struct conn_batch *b = c->batch;
    if (!b || b->nbufs == 0) return;
    unsigned nbufs = b->nbufs, nmem = b->nmem;
    b->nbufs = b->nmem = 0;
    b->len = 0;
    size_t len = 0;
    for (unsigned i = 0; i < nbufs; i++)
        len += b->bufs[i].len;
    if (!c->open) {
        for (unsigned i = 0; i < nmem; i++)
            bigbuf_free_any(b->mem[i]);
        return;
    }
    write_bufs(c, b->stream, b->mem, nmem, b->msg_len, b->bufs, nbufs, len);
}

void conn_write(struct conn *c, uv_stream_t *stream, char *mem, const uv_buf_t *bufs,
                unsigned nbufs)
{
    size_t len = 0;
    for (unsigned i = 0; i < nbufs; i++)
        len += bufs[i].len;
    /* Counted when handed over, batched or not, so a notification's wire end
     * (process.c) is never below the bytes that precede it. */
    c->sent_total += len;
    traffic += len;
    if (c->corked && nbufs <= CONN_BATCH_BUFS) {
        struct conn_batch *b = c->batch;
        if (!b) {
            b = c->batch = xmalloc(sizeof *b);
            b->nbufs = b->nmem = 0;
            b->len = 0;
        }
        if (b->nbufs + nbufs > CONN_BATCH_BUFS || b->nmem == CONN_BATCH_BUFS) batch_flush(c);
        b->stream = stream;
        memcpy(b->bufs + b->nbufs, bufs, nbufs * sizeof *bufs);
        b->nbufs += nbufs;
        b->msg_len[b->nmem] = len;
        b->mem[b->nmem++] = mem;
        b->len += len;
        return;
    }
    batch_flush(c); /* keep order if a message is too big for the batch */
    write_bufs(c, stream, &mem, 1, &len, bufs, nbufs, len);
}

void conn_cork(struct conn *c)
{
    c->corked++;
}

void conn_uncork(struct conn *c)
{
    if (--c->corked == 0) batch_flush(c);
}

void conn_close(struct conn *c)
{
    if (!c->open) return;
    c->open = false;
    c->ops->close(c);
}

void conn_closed(struct conn *c)
{
    c->open = false;
    metrics_connection_closed(c->transport);
    log_event("event=connection_close transport=%s peer=%s", c->transport, c->peer);
    const struct conn_owner_ops *owner_ops = c->owner_ops;
    void *owner = c->owner;
    conn_set_owner(c, NULL, NULL);
    if (owner_ops) owner_ops->closed(owner, c);
    batch_flush(c); /* not open any more: frees whatever was gathered */
    free(c->batch);
    c->batch = NULL;
    for (int i = 0; i < CONN_SLOTS_MAX; i++) {
        if (c->slots[i] && c->slot_free[i]) c->slot_free[i](c->slots[i]);
        c->slots[i] = NULL;
    }
    tls_session_free(c->tls);
    c->tls = NULL;
    conn_unref(c);
}
