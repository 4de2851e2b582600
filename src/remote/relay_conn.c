/* relay_conn: conn_ops for relay virtual streams (see relay_conn.h).
 *
 * send hands the message (its storage too) to the demux (frame, encrypt, data frames
 * on the shared socket as it has room), which accounts each message here with
 * conn_account_queued/written so the usual high/low water marks and backlog limit
 * apply per stream. close resets the
 * stream at the demux and finishes on the next loop turn (a uv_idle handle's
 * close callback), never inside the caller's stack, like the other transports.
 * set_reading(false) (a client over the backlog limit) cannot stop the shared
 * socket, so the stream's incoming messages wait in a bounded queue instead (more
 * than RELAY_CONN_MAX_HELD closes the stream, as the reference resets a stream whose
 * inbound queue is full) and are dispatched from the same idle handle once reading
 * resumes. */
#include "remote/relay_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/relay_demux.h"
#include "transport/conn_impl.h"
#include "util/mem.h"

#define RELAY_CONN_MAX_HELD 128

struct held_msg {
    struct held_msg *next;
    size_t len;
    char data[];
};

struct relay_conn {
    struct conn base;
    struct relay_stream *st;            /* NULL once detached */
    uv_idle_t idle;                     /* drains held messages; closed to finish a close */
    bool paused;                        /* set_reading(false) is in effect */
    struct held_msg *held, **held_tail; /* messages received while paused */
    unsigned nheld;
};

static void drain_held(uv_idle_t *h)
{
    struct relay_conn *rc = h->data;
    conn_ref(&rc->base);
    while (rc->held && !rc->paused && rc->base.open) {
        struct held_msg *m = rc->held;
        rc->held = m->next;
        if (!rc->held) rc->held_tail = &rc->held;
        rc->nheld--;
        conn_deliver(&rc->base, m->data, m->len);
        free(m);
    }
    if (!rc->held || rc->paused || !rc->base.open) uv_idle_stop(h);
    conn_unref(&rc->base);
}

static void relay_set_reading(struct conn *c, bool on)
{
    struct relay_conn *rc = (struct relay_conn *)c;
    rc->paused = !on;
    if (on && rc->held && !uv_is_closing((uv_handle_t *)&rc->idle))
        uv_idle_start(&rc->idle, drain_held);
}

static void relay_closer_closed(uv_handle_t *h)
{
    struct relay_conn *rc = h->data;
    conn_closed(&rc->base);
}

static void relay_close(struct conn *c)
{
    struct relay_conn *rc = (struct relay_conn *)c;
    struct relay_stream *st = rc->st;
    rc->st = NULL;
    if (st) relay_stream_sink_closed(st);
    if (!uv_is_closing((uv_handle_t *)&rc->idle))
        uv_close((uv_handle_t *)&rc->idle, relay_closer_closed);
}

static void relay_destroy(struct conn *c)
{
    struct relay_conn *rc = (struct relay_conn *)c;
    while (rc->held) {
        struct held_msg *m = rc->held;
        rc->held = m->next;
        free(m);
    }
    free(c);
}

static void relay_send(struct conn *c, struct buf *msg)
{
    struct relay_conn *rc = (struct relay_conn *)c;
    if (!rc->st) {
        buf_free(msg);
        return;
    }
    /* The stream takes the storage: a large reply waits there for room on the socket
     * instead of being copied. */
    size_t len = msg->len - BUF_MSG_HEADROOM;
    char *mem = buf_steal(msg);
    relay_stream_send_owned(rc->st, mem, (const uint8_t *)mem + BUF_MSG_HEADROOM, len);
}

/* A relay stream is resumable and has a peer name: no kind flags. */
static const struct conn_ops relay_ops = {
    .kind = "relay",
    .send = relay_send,
    .close = relay_close,
    .destroy = relay_destroy,
    .set_reading = relay_set_reading,
};

/* A new open connection bound to st; the demux owns one reference until
 * detach or release. */
static struct conn *relay_conn_new(uv_loop_t *loop, struct relay_stream *st, const char *stream_id,
                                   conn_message_fn on_message)
{
    struct relay_conn *rc = xcalloc(1, sizeof *rc);
    conn_init(&rc->base, &relay_ops, loop, on_message);
    snprintf(rc->base.peer, sizeof rc->base.peer, "relay:%.40s", stream_id);
    rc->st = st;
    uv_idle_init(loop, &rc->idle);
    rc->idle.data = rc;
    rc->held_tail = &rc->held;
    conn_ref(&rc->base); /* the demux's reference */
    return &rc->base;
}

/* The stream is gone (reset, socket lost): unbinds it and closes the connection;
 * the session detaches and stays resumable. Drops the demux's reference. */
static void relay_conn_detach(void *sink)
{
    struct conn *c = sink;
    struct relay_conn *rc = (struct relay_conn *)c;
    rc->st = NULL;
    conn_close(c);
    conn_unref(c);
}

/* One complete inbound JSON-RPC message. */
static void relay_conn_deliver(void *sink, const uint8_t *msg, size_t len)
{
    struct conn *c = sink;
    struct relay_conn *rc = (struct relay_conn *)c;
    if (!c->open) return;
    if (!rc->paused && !rc->held) {
        conn_deliver(c, (const char *)msg, len);
        return;
    }
    if (rc->nheld >= RELAY_CONN_MAX_HELD) {
        conn_close(c);
        return;
    }
    struct held_msg *m = xmalloc(sizeof *m + len);
    m->next = NULL;
    m->len = len;
    memcpy(m->data, msg, len);
    *rc->held_tail = m;
    rc->held_tail = &m->next;
    rc->nheld++;
}

/* Accounting for a message of n bytes about to be sent for c: false when the
 * connection is over its backlog limit and closed instead. */
static bool relay_conn_queued(void *sink, size_t n)
{
    struct conn *c = sink;
    if (!conn_account_queued(c, n)) return false;
    conn_ref(c);
    return true;
}

/* rv_ws_sent_fn for those frames (arg = the conn, referenced by relay_conn_queued). */
static void relay_conn_sent(void *arg, size_t n, int status)
{
    struct conn *c = arg;
    conn_account_written(c, n, status);
    conn_unref(c);
}

/* The connection closed itself and reset the stream: the demux's reference goes. */
static void relay_conn_release(void *sink)
{
    conn_unref(sink);
}

static const struct relay_sink_ops relay_conn_sink_ops = {
    .deliver = relay_conn_deliver,
    .queued = relay_conn_queued,
    .sent = relay_conn_sent,
    .detach = relay_conn_detach,
    .release = relay_conn_release,
};

static void *relay_conn_open(const struct relay_sink_kind *kind, uv_loop_t *loop,
                             struct relay_stream *st, const char *stream_id)
{
    const struct relay_conn_kind *k = (const struct relay_conn_kind *)kind;
    return relay_conn_new(loop, st, stream_id, k->on_message);
}

void relay_conn_kind_init(struct relay_conn_kind *k, conn_message_fn on_message)
{
    k->base.open = relay_conn_open;
    k->base.ops = &relay_conn_sink_ops;
    k->on_message = on_message;
}
