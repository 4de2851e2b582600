/* ws: WebSocket transport on libuv + wslay.
 *
 * Incoming bytes go first through the sans-I/O upgrade parser, then through a frame
 * splitter (ws_feed): ordinary data frames and fragmented messages are unmasked and
 * dispatched here (wslay's receive path copies in 4 KiB steps and unmasks byte by
 * byte, which dominated large requests); control frames and anything unusual go to
 * wslay, which answers pings, performs the close handshake and rejects protocol
 * violations. Text must be UTF-8 on both paths. Outgoing data messages bypass wslay: its
 * queue copies every message, while ours already has room for the frame header in
 * front of the payload (BUF_MSG_HEADROOM), so a server frame (never masked) is
 * written in place with no copy. wslay's own frames (pong, close, ping) are small
 * and are flushed synchronously, so the two never interleave mid-frame. */
#include "transport/ws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "proto/utf8.h"
#include "proto/ws_frame.h"
#include "transport/auth.h"
#include "transport/conn_internal.h"
#include "transport/tls.h"
#include "proto/http_upgrade.h"
#include "util/mem.h"

#define WS_PING_INTERVAL_MS 30000
#define WS_HANDSHAKE_MS 10000 /* a peer that never finishes its request head is dropped */
#define WS_LINGER_MS 30000    /* how long a slow client's socket drains after its close */

struct ws_listener {
    uv_tcp_t tcp;
    uv_loop_t *loop;
    conn_message_fn on_message; /* every connection's message reader */
    struct ws_conn *conns; /* every live connection, for shutdown */
    unsigned nconns;       /* length of conns, for --max-connections */
    struct ws_linger *lingers; /* sockets of closed slow clients still draining */
};

/* A slow client closed for its backlog (conn.c) must still receive what the
 * kernel already holds for it: only our own queue may be dropped, because only
 * that is known to be in the retained logs. A plain close() with unread requests
 * in the receive queue (we stopped reading them) would send a RST, and a RST
 * discards the peer's unread receive queue. So the socket is kept open through a
 * dup: FIN after the buffered data, incoming bytes read and discarded, closed at
 * the peer's EOF or after WS_LINGER_MS. */
struct ws_linger {
    uv_poll_t poll;
    uv_timer_t timer;
    int fd;
    int handles_open;
    struct ws_listener *listener;
    struct ws_linger *prev, *next;
};

struct ws_conn {
    struct conn base;
    uv_tcp_t tcp;
    uv_timer_t ping;
    struct ws_listener *listener;
    struct ws_conn *prev, *next;
    bool upgraded;          /* the 101 was sent; bytes are WebSocket frames */
    bool close_after_write; /* an HTTP reply is out; close once written */
    struct buf head;        /* HTTP request head received so far */
    wslay_event_context_ptr ws;
    const uint8_t *in;      /* bytes being fed to wslay by the recv callback */
    size_t in_len;
    /* Frame splitter in front of wslay (ws_feed): whole, final, masked data frames
     * are unmasked and dispatched here; every other frame goes to wslay as is. */
    uint8_t fh[14];         /* header of the frame being received */
    size_t fh_len, fh_need; /* bytes of it so far / its full size once known */
    uint64_t payload_left;  /* payload bytes of the current frame still to come */
    bool to_wslay;          /* the current frame is being forwarded to wslay */
    bool in_fragmented;     /* wslay is reassembling a fragmented message */
    uint8_t *frame;         /* fast-path frame: header + payload gathered */
    size_t frame_len;
    /* A fragmented message reassembled here (fragments of a fast-path message). */
    bool reasm;             /* between its first fragment and its final one */
    bool to_msg;            /* the current frame's payload goes to msg */
    uint8_t msg_op;         /* text or binary */
    uint8_t msg_key[4];     /* mask key of the current fragment */
    uint8_t *msg;
    size_t msg_len, frag_start;
    int handles_open;       /* tcp + ping timer, counted down by close callbacks */
    bool over_limit;        /* accepted past --max-connections: the upgrade gets a 503 */
    bool reading;           /* uv_read_start is in effect */
    bool told_too_big;      /* the 1009 close was logged */
};

static void ws_drain(struct ws_conn *w);

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *data, size_t len, int flags,
                          void *user)
{
    struct ws_conn *w = user;
    if (w->in_len == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < w->in_len ? len : w->in_len;
    memcpy(data, w->in, n);
    w->in += n;
    w->in_len -= n;
    return (ssize_t)n;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                          void *user)
{
    struct ws_conn *w = user;
    if (uv_is_closing((uv_handle_t *)&w->tcp)) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    char *mem = xmemdup(data, len);
    uv_buf_t b = uv_buf_init(mem, (unsigned)len);
    conn_write(&w->base, (uv_stream_t *)&w->tcp, mem, &b, 1);
    return (ssize_t)len;
}

static void ws_frame_start_cb(wslay_event_context_ptr ctx,
                              const struct wslay_event_on_frame_recv_start_arg *arg, void *user)
{
    /* A single frame above 16 MiB is refused like the reference does. */
    struct ws_conn *w = user;
    size_t max = server_limits.max_message < LIMITS_MAX_FRAME ? server_limits.max_message
                                                              : LIMITS_MAX_FRAME;
    if (arg->payload_length > max) {
        log_warn("connection %s: frame of %llu bytes exceeds the limit of %zu; closing (1009)",
                 w->base.peer, (unsigned long long)arg->payload_length, max);
        w->told_too_big = true;
        wslay_event_queue_close(ctx, WSLAY_CODE_MESSAGE_TOO_BIG, NULL, 0);
    }
}

static void ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                      void *user)
{
    struct ws_conn *w = user;
    if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME) return;
    if (!w->base.open || wslay_event_get_close_sent(ctx)) return;
    conn_deliver(&w->base, (const char *)arg->msg, arg->msg_length);
}

static const struct wslay_event_callbacks ws_callbacks = {
    .recv_callback = ws_recv_cb,
    .send_callback = ws_send_cb,
    .on_frame_recv_start_callback = ws_frame_start_cb,
    .on_msg_recv_callback = ws_msg_cb,
};

static void ws_handle_closed(uv_handle_t *h)
{
    struct ws_conn *w = h->data;
    if (--w->handles_open > 0) return;
    conn_closed(&w->base);
}

static void linger_handle_closed(uv_handle_t *h)
{
    struct ws_linger *lg = h->data;
    if (--lg->handles_open > 0) return;
    close(lg->fd);
    free(lg);
}

static void linger_end(struct ws_linger *lg)
{
    if (uv_is_closing((uv_handle_t *)&lg->timer)) return;
    if (lg->prev) lg->prev->next = lg->next;
    else lg->listener->lingers = lg->next;
    if (lg->next) lg->next->prev = lg->prev;
    uv_close((uv_handle_t *)&lg->poll, linger_handle_closed);
    uv_close((uv_handle_t *)&lg->timer, linger_handle_closed);
}

/* After a bounded read burst: ends the linger unless input is merely pending. */
static void linger_end_if_eof(struct ws_linger *lg)
{
    char c;
    ssize_t n = recv(lg->fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) linger_end(lg);
}

static void linger_read(uv_poll_t *h, int status, int events)
{
    struct ws_linger *lg = h->data;
    char sink[16384];
    for (int i = 0; status == 0 && i < 64; i++) { /* bounded: the poll fires again */
        ssize_t n = recv(lg->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        if (n < 0 && errno == EAGAIN) return;
        break; /* EOF or error: the peer is done with it */
    }
    if (status < 0 || !(events & UV_READABLE) || (events & UV_DISCONNECT)) linger_end(lg);
    else linger_end_if_eof(lg);
}

static void linger_timeout(uv_timer_t *t)
{
    linger_end(t->data);
}

static void ws_linger_start(struct ws_conn *w)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&w->tcp, &fd) != 0) return;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (d < 0) return;
    struct ws_linger *lg = xcalloc(1, sizeof *lg);
    lg->fd = d;
    lg->listener = w->listener;
    uv_poll_init_socket(w->base.loop, &lg->poll, d);
    uv_timer_init(w->base.loop, &lg->timer);
    lg->poll.data = lg->timer.data = lg;
    lg->handles_open = 2;
    lg->next = w->listener->lingers;
    if (lg->next) lg->next->prev = lg;
    w->listener->lingers = lg;
    uv_poll_start(&lg->poll, UV_READABLE | UV_DISCONNECT, linger_read);
    uv_timer_start(&lg->timer, linger_timeout, WS_LINGER_MS, 0);
}

static void ws_close(struct conn *c)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (uv_is_closing((uv_handle_t *)&w->tcp)) return;
    /* The fuzz target's connection has no listener. */
    struct ws_linger *lg_before = w->listener ? w->listener->lingers : NULL;
    if (w->base.backlogged && w->listener) ws_linger_start(w);
    w->base.open = false;
    if (w->prev) w->prev->next = w->next;
    else if (w->listener) w->listener->conns = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    if (w->listener) w->listener->nconns--;
    uv_close((uv_handle_t *)&w->ping, ws_handle_closed);
    uv_close((uv_handle_t *)&w->tcp, ws_handle_closed);
    /* The dup keeps the socket: FIN goes out after what the kernel holds. */
    if (w->listener && w->listener->lingers != lg_before) shutdown(w->listener->lingers->fd, SHUT_WR);
}

static void ws_destroy(struct conn *c)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (w->ws) wslay_event_context_free(w->ws);
    free(w->frame);
    free(w->msg);
    buf_free(&w->head);
    free(w);
}

static void ws_send(struct conn *c, struct buf *msg)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (!w->upgraded || wslay_event_get_close_sent(w->ws) ||
        uv_is_closing((uv_handle_t *)&w->tcp)) {
        buf_free(msg);
        return;
    }
    size_t len = msg->len - BUF_MSG_HEADROOM;
    uint8_t *payload = (uint8_t *)msg->data + BUF_MSG_HEADROOM;
    size_t hlen = ws_frame_header_len(len, false); /* servers never mask */
    uint8_t *h = payload - hlen;
    ws_frame_encode(h, true, WS_OP_TEXT, len, NULL);
    char *mem = buf_steal(msg);
    uv_buf_t b = uv_buf_init((char *)h, (unsigned)(hlen + len));
    conn_write(c, (uv_stream_t *)&w->tcp, mem, &b, 1);
}

static void ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void ws_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void ws_set_reading(struct conn *c, bool on)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (uv_is_closing((uv_handle_t *)&w->tcp) || on == w->reading) return;
    w->reading = on;
    if (on) uv_read_start((uv_stream_t *)&w->tcp, ws_alloc, ws_read_cb);
    else uv_read_stop((uv_stream_t *)&w->tcp);
}

static const struct conn_ops ws_ops = {
    .kind = "websocket",
    .send = ws_send,
    .close = ws_close,
    .destroy = ws_destroy,
    .set_reading = ws_set_reading,
};

static void ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char slab[65536]; /* one loop thread: a single receive slab suffices */
    b->base = slab;
    b->len = sizeof slab;
}

/* Sends whatever wslay has queued and closes once the close handshake is over. */
static void ws_drain(struct ws_conn *w)
{
    if (uv_is_closing((uv_handle_t *)&w->tcp)) return;
    if (wslay_event_want_write(w->ws) && wslay_event_send(w->ws) != 0) {
        conn_close(&w->base);
        return;
    }
    if (!wslay_event_want_read(w->ws) && !wslay_event_want_write(w->ws)) conn_close(&w->base);
}

/* Hands bytes to wslay (control frames, fragments, anything unusual). */
static void wslay_feed(struct ws_conn *w, const uint8_t *data, size_t len)
{
    w->in = data;
    w->in_len = len;
    while (w->in_len > 0 && !uv_is_closing((uv_handle_t *)&w->tcp)) {
        if (wslay_event_recv(w->ws) != 0) {
            conn_close(&w->base);
            break;
        }
        if (!wslay_event_want_read(w->ws)) break;
    }
    w->in_len = 0;
}

static bool all_ascii(const uint8_t *p, size_t n)
{
    uint64_t high = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        high |= v;
    }
    for (; i < n; i++) high |= p[i];
    return (high & 0x8080808080808080ull) == 0;
}

/* A whole fast-path frame (header h of hlen bytes, masked payload p): unmask and
 * dispatch. Text with non-ASCII bytes goes to wslay instead (re-masked), which
 * validates its UTF-8 and closes on bad input like before. */
static void fast_frame(struct ws_conn *w, const uint8_t *h, size_t hlen, uint8_t *p, size_t n)
{
    const uint8_t *key = h + hlen - 4;
    ws_frame_unmask(p, n, key);
    if ((h[0] & 0x0f) == WSLAY_TEXT_FRAME && !all_ascii(p, n)) {
        ws_frame_unmask(p, n, key);
        wslay_feed(w, h, hlen);
        wslay_feed(w, p, n);
        return;
    }
    if (!w->base.open || wslay_event_get_close_sent(w->ws)) return;
    conn_deliver(&w->base, (const char *)p, n);
}

/* The final fragment of a reassembled message arrived: dispatch it. Text that is
 * not UTF-8 drops the connection, as wslay's validation did. */
static void msg_complete(struct ws_conn *w)
{
    uint8_t *m = w->msg;
    size_t n = w->msg_len;
    w->msg = NULL;
    w->msg_len = 0;
    w->reasm = false;
    if (w->msg_op == WSLAY_TEXT_FRAME && !utf8_valid(m, n)) {
        free(m);
        conn_close(&w->base);
        return;
    }
    if (w->base.open && !wslay_event_get_close_sent(w->ws))
        conn_deliver(&w->base, (const char *)m, n);
    free(m);
}

/* Splits incoming bytes into frames. The common frame (final, masked, text or
 * binary, within the frame limit, outside a fragmented message) skips wslay, whose
 * receive path copies in 4 KiB steps and unmasks a byte at a time (perf: 70% of
 * the server's time on a 1 MiB fs/writeBlock). Frames wholly inside this read are
 * unmasked in place (the read slab is ours); larger ones are gathered first. */
static void ws_feed(struct ws_conn *w, const char *data, size_t len)
{
    uint8_t *p = (uint8_t *)data, *e = p + len;
    conn_ref(&w->base); /* dispatch may close us; keep the object alive */
    while (p < e && !uv_is_closing((uv_handle_t *)&w->tcp) && wslay_event_want_read(w->ws)) {
        if (w->to_wslay) {
            size_t n = (size_t)(e - p) < w->payload_left ? (size_t)(e - p) : w->payload_left;
            wslay_feed(w, p, n);
            p += n;
            w->payload_left -= n;
            if (w->payload_left == 0) w->to_wslay = false;
            continue;
        }
        if (w->to_msg) {
            size_t n = (size_t)(e - p) < w->payload_left ? (size_t)(e - p) : w->payload_left;
            memcpy(w->msg + w->msg_len, p, n);
            w->msg_len += n;
            p += n;
            w->payload_left -= n;
            if (w->payload_left == 0) {
                w->to_msg = false;
                ws_frame_unmask(w->msg + w->frag_start, w->msg_len - w->frag_start, w->msg_key);
                if (!w->reasm) msg_complete(w);
            }
            continue;
        }
        if (w->frame) {
            size_t n = (size_t)(e - p) < w->payload_left ? (size_t)(e - p) : w->payload_left;
            memcpy(w->frame + w->frame_len, p, n);
            w->frame_len += n;
            p += n;
            w->payload_left -= n;
            if (w->payload_left == 0) {
                uint8_t *f = w->frame;
                w->frame = NULL;
                fast_frame(w, w->fh, w->fh_need, f + w->fh_need, w->frame_len - w->fh_need);
                free(f);
            }
            continue;
        }
        /* Header: 2 bytes, then the extended length and the mask key. */
        if (w->fh_len < 2) {
            w->fh[w->fh_len++] = *p++;
            if (w->fh_len == 2) w->fh_need = ws_frame_header_size(w->fh[1]);
            if (w->fh_len < 2 || w->fh_len < w->fh_need) continue;
        } else if (w->fh_len < w->fh_need) {
            size_t n = w->fh_need - w->fh_len < (size_t)(e - p) ? w->fh_need - w->fh_len
                                                               : (size_t)(e - p);
            memcpy(w->fh + w->fh_len, p, n);
            w->fh_len += n;
            p += n;
            if (w->fh_len < w->fh_need) continue;
        }
        struct ws_frame fr;
        ws_frame_decode(w->fh, w->fh_need, &fr);
        uint64_t plen = fr.payload_len;
        int op = fr.opcode;
        bool is_data = op == WSLAY_TEXT_FRAME || op == WSLAY_BINARY_FRAME;
        /* Anything over the limits goes to wslay, which closes with 1009 (frame_start_cb). */
        size_t max_frame = server_limits.max_message < LIMITS_MAX_FRAME ? server_limits.max_message
                                                                        : LIMITS_MAX_FRAME;
        bool sane = fr.rsv == 0 && fr.masked && plen <= max_frame;
        bool fin = fr.fin;
        w->fh_len = 0;
        /* Fragments: the first of a message, and every continuation of one we are
         * reassembling, are gathered into msg (unmasked per fragment). */
        if (sane && !w->in_fragmented &&
            ((is_data && !fin && !w->reasm) || (op == WSLAY_CONTINUATION_FRAME && w->reasm))) {
            if (w->msg_len + plen > server_limits.max_message) {
                /* Same answer as wslay gives an oversized single frame: close 1009. */
                log_warn("connection %s: message exceeds %zu bytes (--max-message-bytes); "
                         "closing (1009)", w->base.peer, server_limits.max_message);
                w->told_too_big = true;
                wslay_event_queue_close(w->ws, WSLAY_CODE_MESSAGE_TOO_BIG, NULL, 0);
                wslay_event_shutdown_read(w->ws); /* the rest of the input is not framed */
                ws_drain(w);
                break;
            }
            if (is_data) {
                w->reasm = true;
                w->msg_op = (uint8_t)op;
            }
            if (fin) w->reasm = false;
            memcpy(w->msg_key, fr.mask, 4);
            w->msg = xrealloc(w->msg, w->msg_len + (size_t)plen + 1);
            w->frag_start = w->msg_len;
            w->payload_left = plen;
            if (plen > 0) w->to_msg = true;
            else if (!w->reasm) msg_complete(w);
            continue;
        }
        if (w->reasm && is_data) {
            conn_close(&w->base); /* a new message inside a fragmented one */
            break;
        }
        bool fast = !w->in_fragmented && !w->reasm && sane && fin && is_data;
        if (!fast) {
            if (op == WSLAY_TEXT_FRAME || op == WSLAY_BINARY_FRAME)
                w->in_fragmented = !fin;
            else if (op == WSLAY_CONTINUATION_FRAME && fin)
                w->in_fragmented = false;
            wslay_feed(w, w->fh, w->fh_need);
            w->payload_left = plen;
            w->to_wslay = plen > 0;
            continue;
        }
        if ((uint64_t)(e - p) >= plen) {
            fast_frame(w, w->fh, w->fh_need, p, (size_t)plen);
            p += plen;
            continue;
        }
        w->frame = xmalloc(w->fh_need + (size_t)plen);
        memcpy(w->frame, w->fh, w->fh_need);
        w->frame_len = w->fh_need;
        w->payload_left = plen;
    }
    ws_drain(w);
    /* wslay closed a too-long fragmented message itself; say why. */
    if (!w->told_too_big && wslay_event_get_close_sent(w->ws) &&
        wslay_event_get_status_code_sent(w->ws) == WSLAY_CODE_MESSAGE_TOO_BIG) {
        w->told_too_big = true;
        log_warn("connection %s: message over the limit of %zu bytes (--max-message-bytes); "
                 "closing (1009)", w->base.peer, server_limits.max_message);
    }
    conn_unref(&w->base);
}

static void ws_ping_cb(uv_timer_t *t)
{
    struct ws_conn *w = t->data;
    struct wslay_event_msg ping = {.opcode = WSLAY_PING, .msg = NULL, .msg_length = 0};
    wslay_event_queue_msg(w->ws, &ping);
    ws_drain(w);
}

static void ws_upgrade(struct ws_conn *w, size_t consumed)
{
    wslay_event_context_server_init(&w->ws, &ws_callbacks, w);
    wslay_event_config_set_max_recv_msg_length(w->ws, server_limits.max_message);
    w->upgraded = true;
    uv_timer_start(&w->ping, ws_ping_cb, WS_PING_INTERVAL_MS, WS_PING_INTERVAL_MS);
    size_t rest = w->head.len - consumed;
    if (rest) {
        char *extra = xmemdup(w->head.data + consumed, rest);
        buf_free(&w->head);
        ws_feed(w, extra, rest);
        free(extra);
    } else {
        buf_free(&w->head);
    }
}

static void ws_shutdown_cb(uv_shutdown_t *sd, int status)
{
    struct ws_conn *w = sd->data;
    free(sd);
    conn_close(&w->base);
    conn_unref(&w->base);
}

static void ws_on_bytes(struct ws_conn *w, uv_stream_t *s, char *data, size_t n);

/* wss: ciphertext in, plaintext to ws_on_bytes; the handshake's own records out. */
static void ws_on_tls(struct ws_conn *w, uv_stream_t *s, const char *data, size_t n)
{
    if (tls_feed(w->base.tls, data, n) < 0) {
        conn_close(&w->base);
        return;
    }
    char plain[16384];
    for (;;) {
        long r = tls_read(w->base.tls, plain, sizeof plain);
        if (r < 0) {
            conn_tls_flush(&w->base, s); /* an alert, if any, goes out first */
            conn_close(&w->base);
            return;
        }
        if (r == 0) break;
        ws_on_bytes(w, s, plain, (size_t)r);
        if (!w->base.open || w->close_after_write || !w->base.tls) return;
    }
    conn_tls_flush(&w->base, s);
}

static void ws_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct ws_conn *w = s->data;
    if (nread < 0) {
        conn_close(&w->base);
        return;
    }
    if (nread == 0) return;
    if (w->base.tls) ws_on_tls(w, s, b->base, (size_t)nread);
    else ws_on_bytes(w, s, b->base, (size_t)nread);
}

/* Plaintext from the peer: the HTTP head until the upgrade, then WebSocket frames. */
static void ws_on_bytes(struct ws_conn *w, uv_stream_t *s, char *data, size_t nread)
{
    if (w->upgraded) {
        ws_feed(w, data, nread);
        return;
    }
    if (w->close_after_write) return;
    buf_append(&w->head, data, nread);
    struct http_request_info info;
    struct buf reply;
    buf_init(&reply);
    enum http_outcome o = http_upgrade_parse(w->head.data, w->head.len, &info, &reply);
    if (o == HTTP_INCOMPLETE) {
        buf_free(&reply);
        return;
    }
    if (o == HTTP_METRICS) {
        /* The metrics are behind the same authentication as the upgrade. */
        if (auth_admit(info.authorization, &reply)) {
            struct buf body;
            buf_init(&body);
            metrics_render(&body);
            buf_printf(&reply,
                       "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; "
                       "charset=utf-8\r\ncontent-length: %zu\r\nconnection: close\r\n\r\n",
                       body.len);
            if (!info.head_only) buf_append(&reply, body.data, body.len);
            buf_free(&body);
        } else {
            log_event("event=auth result=refused peer=%s target=/metrics", conn_peer(&w->base));
        }
        o = HTTP_REPLY;
    } else if (o == HTTP_WEBSOCKET && !auth_admit(info.authorization, &reply)) {
        log_event("event=auth result=refused peer=%s target=websocket", conn_peer(&w->base));
        metrics_connection_rejected("websocket", "unauthorized");
        o = HTTP_REPLY;
    } else if (o == HTTP_WEBSOCKET && w->over_limit) {
        /* Past --max-connections: say so instead of upgrading. */
        metrics_connection_rejected("websocket", "over_limit");
        log_warn("connection %s refused: %u connections open (--max-connections %u)",
                 w->base.peer, w->listener->nconns, server_limits.max_connections);
        buf_free(&reply);
        buf_init(&reply);
        char body[160];
        int bl = snprintf(body, sizeof body,
                          "too many connections: this server allows %u (--max-connections)\n",
                          server_limits.max_connections);
        buf_printf(&reply,
                   "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; "
                   "charset=utf-8\r\ncontent-length: %d\r\nretry-after: 1\r\n"
                   "connection: close\r\n\r\n%s",
                   bl, body);
        o = HTTP_REPLY;
    }
    uv_buf_t ub = uv_buf_init(reply.data, (unsigned)reply.len);
    char *mem = buf_steal(&reply);
    conn_write(&w->base, s, mem, &ub, 1);
    if (o == HTTP_REPLY) {
        w->close_after_write = true;
        w->reading = false;
        uv_read_stop(s);
        /* uv_close waits for queued writes? No: it cancels them. Shut down first. */
        /* uv_close would cancel the queued reply: shut down, then close. */
        uv_shutdown_t *sd = xmalloc(sizeof *sd);
        sd->data = w;
        conn_ref(&w->base);
        if (uv_shutdown(sd, s, ws_shutdown_cb) != 0) {
            free(sd);
            conn_close(&w->base);
            conn_unref(&w->base);
        }
        return;
    }
    if (auth_enabled()) log_event("event=auth result=ok peer=%s", conn_peer(&w->base));
    ws_upgrade(w, info.consumed);
}

static void ws_handshake_timeout(uv_timer_t *t)
{
    struct ws_conn *w = t->data;
    if (w->upgraded) return;
    log_info("connection %s: no complete request within %d ms; closing", w->base.peer,
             WS_HANDSHAKE_MS);
    conn_close(&w->base);
}

static void ws_on_connection(uv_stream_t *server, int status)
{
    struct ws_listener *l = server->data;
    if (status < 0) {
        /* libuv already accepted and closed the peer (its EMFILE reserve fd), so
         * the backlog drains instead of waking us forever. */
        static uint64_t last_ms; /* once a second: an fd shortage must not flood the log */
        uint64_t now = uv_now(l->loop);
        if (last_ms == 0 || now - last_ms >= 1000) {
            last_ms = now;
            log_warn("accept failed: %s (connections are refused meanwhile)", uv_strerror(status));
        }
        return;
    }
    struct ws_conn *w = xcalloc(1, sizeof *w);
    conn_init(&w->base, &ws_ops, l->loop, l->on_message);
    w->listener = l;
    uv_tcp_init(l->loop, &w->tcp);
    uv_timer_init(l->loop, &w->ping);
    w->tcp.data = w->ping.data = w;
    w->handles_open = 2;
    if (uv_accept(server, (uv_stream_t *)&w->tcp) != 0) {
        ws_close(&w->base);
        return;
    }
    w->next = l->conns;
    if (l->conns) l->conns->prev = w;
    l->conns = w;
    l->nconns++;
    if (l->nconns > 2 * server_limits.max_connections) {
        /* A flood: not even a 503, the fd bound comes first. */
        log_warn("connection refused: %u connections open (--max-connections %u)", l->nconns - 1,
                 server_limits.max_connections);
        conn_close(&w->base);
        return;
    }
    w->over_limit = l->nconns > server_limits.max_connections;
    uv_timer_start(&w->ping, ws_handshake_timeout, WS_HANDSHAKE_MS, 0);
    uv_tcp_nodelay(&w->tcp, 1);
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&w->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof ip);
            port = ntohs(a->sin_port);
            snprintf(w->base.peer, sizeof w->base.peer, "%s:%d", ip, port);
        } else {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof ip);
            port = ntohs(a->sin6_port);
            snprintf(w->base.peer, sizeof w->base.peer, "[%s]:%d", ip, port);
        }
    }
    if (tls_server_enabled()) w->base.tls = tls_session_new();
    log_event("event=connection_open transport=websocket peer=%s tls=%s", w->base.peer,
              w->base.tls ? "true" : "false");
    w->reading = true;
    uv_read_start((uv_stream_t *)&w->tcp, ws_alloc, ws_read_cb);
}

struct conn *ws_conn_open_fd(uv_loop_t *loop, uv_os_sock_t fd, conn_message_fn on_message)
{
    struct ws_conn *w = xcalloc(1, sizeof *w);
    conn_init(&w->base, &ws_ops, loop, on_message);
    uv_tcp_init(loop, &w->tcp);
    uv_timer_init(loop, &w->ping);
    w->tcp.data = w->ping.data = w;
    w->handles_open = 2;
    snprintf(w->base.peer, sizeof w->base.peer, "fd:%d", (int)fd);
    if (uv_tcp_open(&w->tcp, fd) != 0) {
        ws_close(&w->base);
        return NULL;
    }
    return &w->base;
}

void ws_conn_receive(struct conn *c, const char *data, size_t len)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (!w->base.open || len == 0) return;
    /* The read path unmasks frames in place, so it gets a writable copy. */
    char *copy = xmalloc(len);
    memcpy(copy, data, len);
    uv_buf_t b = uv_buf_init(copy, (unsigned)len);
    ws_read_cb((uv_stream_t *)&w->tcp, (ssize_t)len, &b);
    free(copy);
}

int ws_listen(uv_loop_t *loop, const char *host, int port, conn_message_fn on_message,
              struct ws_listener **out, char *url, size_t urllen)
{
    struct sockaddr_storage ss;
    bool v6 = strchr(host, ':') != NULL;
    int r = v6 ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss)
               : uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (r != 0) return r;
    struct ws_listener *l = xcalloc(1, sizeof *l);
    l->loop = loop;
    l->on_message = on_message;
    uv_tcp_init(loop, &l->tcp);
    l->tcp.data = l;
    r = uv_tcp_bind(&l->tcp, (struct sockaddr *)&ss, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&l->tcp, 511, ws_on_connection);
    if (r != 0) {
        uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
        return r;
    }
    int sl = sizeof ss;
    uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &sl);
    int bound = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                         : ((struct sockaddr_in *)&ss)->sin_port);
    const char *scheme = tls_server_enabled() ? "wss" : "ws";
    snprintf(url, urllen, v6 ? "%s://[%s]:%d" : "%s://%s:%d", scheme, host, bound);
    *out = l;
    return 0;
}

void ws_shutdown(struct ws_listener *l)
{
    while (l->conns) conn_close(&l->conns->base);
    while (l->lingers) linger_end(l->lingers);
    uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
}
