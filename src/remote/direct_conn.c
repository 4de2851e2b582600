/* direct_conn: conn_ops over the direct transport's WebSocket (direct_conn.h).
 *
 * Outgoing messages are accounted with conn_account_queued/written so the usual
 * high/low water marks and backlog limit apply; set_reading(false) stops reading
 * the socket (unlike a relay stream, this connection has its socket to itself).
 * close closes the socket and finishes on the next loop turn through a uv_idle
 * handle's close callback, never inside the caller's stack. */
#include "remote/direct_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/conn_impl.h"
#include "util/mem.h"

struct direct_conn {
    struct conn base;
    struct rv_ws *ws; /* NULL once detached */
    uv_idle_t closer; /* closed to finish a close */
};

static void direct_closer_closed(uv_handle_t *h)
{
    struct direct_conn *dc = h->data;
    conn_closed(&dc->base);
}

static void direct_close(struct conn *c)
{
    struct direct_conn *dc = (struct direct_conn *)c;
    if (dc->ws) rv_ws_close(dc->ws, "local_shutdown");
    if (!uv_is_closing((uv_handle_t *)&dc->closer))
        uv_close((uv_handle_t *)&dc->closer, direct_closer_closed);
}

static void direct_destroy(struct conn *c)
{
    free(c);
}

static void direct_sent(void *arg, size_t n, int status)
{
    struct conn *c = arg;
    conn_account_written(c, n, status);
    conn_unref(c);
}

static void direct_send(struct conn *c, struct buf *msg)
{
    struct direct_conn *dc = (struct direct_conn *)c;
    size_t len = msg->len - BUF_MSG_HEADROOM;
    if (dc->ws && conn_account_queued(c, len)) {
        conn_ref(c);
        if (rv_ws_send(dc->ws, (const uint8_t *)msg->data + BUF_MSG_HEADROOM, len, direct_sent, c) <
            0)
            direct_sent(c, len, -ENOTCONN);
    }
    buf_free(msg);
}

static void direct_set_reading(struct conn *c, bool on)
{
    struct direct_conn *dc = (struct direct_conn *)c;
    if (dc->ws) rv_ws_set_reading(dc->ws, on);
}

/* A direct socket is resumable and has a peer name: no kind flags. */
static const struct conn_ops direct_ops = {
    .kind = "direct",
    .send = direct_send,
    .close = direct_close,
    .destroy = direct_destroy,
    .set_reading = direct_set_reading,
};

struct conn *direct_conn_new(uv_loop_t *loop, struct rv_ws *ws, conn_message_fn on_message)
{
    struct direct_conn *dc = xcalloc(1, sizeof *dc);
    conn_init(&dc->base, &direct_ops, loop, on_message);
    snprintf(dc->base.peer, sizeof dc->base.peer, "direct");
    dc->ws = ws;
    uv_idle_init(loop, &dc->closer);
    dc->closer.data = dc;
    conn_ref(&dc->base); /* the caller's reference */
    return &dc->base;
}

void direct_conn_deliver(struct conn *c, const uint8_t *msg, size_t len)
{
    if (c->open) conn_deliver(c, (const char *)msg, len);
}

void direct_conn_detach(struct conn *c)
{
    struct direct_conn *dc = (struct direct_conn *)c;
    dc->ws = NULL;
    conn_close(c);
    conn_unref(c);
}
