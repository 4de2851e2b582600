/* ws: WebSocket transport on libuv.
 *
 * Incoming bytes go first through the sans-I/O upgrade parser, then through the
 * receive state machine proto/ws_reader, which unmasks a frame that sits wholly in
 * the read slab in place and hands it up with no copy, gathers split frames and
 * fragmented messages, and reports pings, closes and violations; this file only
 * acts on its events (deliver, Pong, echo the Close, Close with the reader's code).
 * Outgoing data messages already have room for the frame header in front of the
 * payload (BUF_MSG_HEADROOM), so a server frame (never masked) is written in place
 * with no copy. Control frames (ping, pong, close) are small and written whole, so
 * nothing interleaves mid-frame. */
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

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/own_ports.h"
#include "proto/ws_frame.h"
#include "proto/ws_reader.h"
#include "transport/auth.h"
#include "transport/conn_impl.h"
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
    struct ws_conn *conns;      /* every live connection, for shutdown */
    unsigned nconns;            /* length of conns, for --max-connections */
    struct ws_linger *lingers;  /* sockets of closed slow clients still draining */
    uint16_t port;              /* the bound port, counted in core/own_ports */
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
    bool upgraded;             /* the 101 was sent; bytes are WebSocket frames */
    bool close_after_write;    /* an HTTP reply is out; close once written */
    struct buf head;           /* HTTP request head received so far */
    struct ws_reader rd;       /* frames and messages from the peer (after the upgrade) */
    bool close_sent;           /* our Close is out: nothing else may follow it */
    int handles_open;          /* tcp + ping timer, counted down by close callbacks */
    bool over_limit;           /* accepted past --max-connections: the upgrade gets a 503 */
    bool over_peer_limit;      /* ...or past --max-connections-per-peer */
    char ip[INET6_ADDRSTRLEN]; /* the peer's address without the port */
    bool reading;              /* uv_read_start is in effect */
};

/* Live connections from w's peer address, w included. */
static unsigned peer_count(const struct ws_conn *w)
{
    unsigned n = 0;
    for (const struct ws_conn *o = w->listener->conns; o; o = o->next)
        n += strcmp(o->ip, w->ip) == 0;
    return n;
}

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
    if (lg->prev)
        lg->prev->next = lg->next;
    else
        lg->listener->lingers = lg->next;
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
    if (status < 0 || !(events & UV_READABLE) || (events & UV_DISCONNECT))
        linger_end(lg);
    else
        linger_end_if_eof(lg);
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
    if (w->prev)
        w->prev->next = w->next;
    else if (w->listener)
        w->listener->conns = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    if (w->listener) w->listener->nconns--;
    uv_close((uv_handle_t *)&w->ping, ws_handle_closed);
    uv_close((uv_handle_t *)&w->tcp, ws_handle_closed);
    /* The dup keeps the socket: FIN goes out after what the kernel holds. */
    if (w->listener && w->listener->lingers != lg_before)
        shutdown(w->listener->lingers->fd, SHUT_WR);
}

static void ws_destroy(struct conn *c)
{
    struct ws_conn *w = (struct ws_conn *)c;
    ws_reader_free(&w->rd);
    buf_free(&w->head);
    free(w);
}

static void ws_send(struct conn *c, struct buf *msg)
{
    struct ws_conn *w = (struct ws_conn *)c;
    if (!w->upgraded || w->close_sent || uv_is_closing((uv_handle_t *)&w->tcp)) {
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
    if (on)
        uv_read_start((uv_stream_t *)&w->tcp, ws_alloc, ws_read_cb);
    else
        uv_read_stop((uv_stream_t *)&w->tcp);
}

static void *ws_take_message(struct conn *c)
{
    return ws_reader_take(&((struct ws_conn *)c)->rd);
}

static const struct conn_ops ws_ops = {
    .kind = "websocket",
    .send = ws_send,
    .close = ws_close,
    .destroy = ws_destroy,
    .set_reading = ws_set_reading,
    .take_message = ws_take_message,
};

static void ws_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char slab[65536]; /* one loop thread: a single receive slab suffices */
    struct ws_conn *w = h->data;
    (void)suggested;
    /* The rest of a large frame goes from the socket straight into the message
     * buffer: no copy out of the slab (plaintext only: TLS records are read here). */
    size_t n;
    uint8_t *area = w->upgraded && !w->base.tls ? ws_reader_recv_area(&w->rd, &n) : NULL;
    if (area) {
        b->base = (char *)area;
        b->len = n;
        return;
    }
    b->base = slab;
    b->len = sizeof slab;
}

/* Writes one control frame whole (a server's frames are never masked). */
static void ws_send_control(struct ws_conn *w, int op, const uint8_t *p, size_t n)
{
    if (w->close_sent || uv_is_closing((uv_handle_t *)&w->tcp)) return;
    size_t h = ws_frame_header_len(n, false);
    char *mem = xmalloc(h + n);
    ws_frame_encode((uint8_t *)mem, true, op, n, NULL);
    if (n) memcpy(mem + h, p, n);
    uv_buf_t b = uv_buf_init(mem, (unsigned)(h + n));
    conn_write(&w->base, (uv_stream_t *)&w->tcp, mem, &b, 1);
}

/* Sends our Close (code, or an empty one for WS_CLOSE_NO_STATUS) and ends the
 * connection: the server never waits for a reply, because it only closes first on
 * a violation, and after a peer's Close ours is the reply. The frame is queued
 * before the handle closes, as the reply to a 1009 relies on. */
static void ws_close_with(struct ws_conn *w, int code)
{
    uint8_t p[2];
    ws_send_control(w, WS_OP_CLOSE, p, ws_close_payload(code, p));
    w->close_sent = true;
    conn_close(&w->base);
}

/* Runs incoming bytes through the reader and acts on its events. data is the read
 * slab (or a copy of ours): frames are unmasked in it in place. */
static void ws_feed(struct ws_conn *w, char *data, size_t len)
{
    uint8_t *p = (uint8_t *)data, *e = p + len;
    conn_ref(&w->base); /* dispatch may close us; keep the object alive */
    while (p < e && !uv_is_closing((uv_handle_t *)&w->tcp)) {
        struct ws_event ev;
        p += ws_reader_feed(&w->rd, p, (size_t)(e - p), &ev);
        switch (ev.kind) {
        case WS_EV_MESSAGE:
            if (w->base.open && !w->close_sent)
                conn_deliver(&w->base, (const char *)ev.data, ev.len);
            break;
        case WS_EV_PING: ws_send_control(w, WS_OP_PONG, ev.data, ev.len); break;
        case WS_EV_CLOSE:
            ws_close_with(w, ev.code); /* the echo */
            break;
        case WS_EV_ERROR:
            if (ev.code == WS_CLOSE_TOO_BIG)
                log_warn("connection %s: message over the limit of %zu bytes "
                         "(--max-message-bytes; one frame at most %llu); closing (1009)",
                         w->base.peer, w->rd.max_message, (unsigned long long)w->rd.max_frame);
            else
                log_info("connection %s: WebSocket protocol violation; closing (%d)", w->base.peer,
                         ev.code);
            ws_close_with(w, ev.code);
            break;
        case WS_EV_PONG:
        case WS_EV_NONE: break;
        }
    }
    conn_unref(&w->base);
}

static void ws_ping_cb(uv_timer_t *t)
{
    struct ws_conn *w = t->data;
    ws_send_control(w, WS_OP_PING, NULL, 0);
}

static void ws_upgrade(struct ws_conn *w, size_t consumed)
{
    /* A single frame above 16 MiB is refused like the reference does. */
    size_t max_frame =
        server_limits.max_message < LIMITS_MAX_FRAME ? server_limits.max_message : LIMITS_MAX_FRAME;
    ws_reader_init(&w->rd, WS_ROLE_SERVER, max_frame, server_limits.max_message);
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
    if (w->base.tls)
        ws_on_tls(w, s, b->base, (size_t)nread);
    else
        ws_on_bytes(w, s, b->base, (size_t)nread);
}

/* A refused login: the reason the client is told, in the log (info) and the
 * metrics, never the presented token. */
static void ws_log_refusal(struct ws_conn *w, const char *target, const struct auth_refusal *why)
{
    metrics_auth_refused(why->reason);
    auth_audit_login(conn_peer(&w->base), target, NULL, NULL, why);
    char tv[96];
    log_event("event=auth result=refused peer=%s target=%s reason=%s detail=%s",
              conn_peer(&w->base), target, why->reason, log_value(why->text, tv, sizeof tv));
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
    struct auth_refusal why = {0};
    if (o == HTTP_METRICS) {
        /* The metrics are behind the same authentication as the upgrade. */
        if (auth_admit(info.authorization, &reply, &why)) {
            struct buf body;
            buf_init(&body);
            metrics_render(&body);
            buf_printf(&reply,
                       "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; "
                       "charset=utf-8\r\ncontent-length: %zu\r\nconnection: close\r\n\r\n",
                       body.len);
            if (!info.head_only) buf_append(&reply, body.data, body.len);
            buf_free(&body);
            info.status = 200;
        } else {
            ws_log_refusal(w, "/metrics", &why);
            info.status = 401;
        }
        o = HTTP_REPLY;
    } else if (o == HTTP_WEBSOCKET && !auth_admit(info.authorization, &reply, &why)) {
        ws_log_refusal(w, "websocket", &why);
        metrics_connection_rejected("websocket", "unauthorized");
        info.status = 401;
        o = HTTP_REPLY;
    } else if (o == HTTP_WEBSOCKET && (w->over_limit || w->over_peer_limit)) {
        /* Past --max-connections (or its per-peer share): say so instead of upgrading. */
        metrics_connection_rejected("websocket", "over_limit");
        char body[200];
        int bl;
        if (w->over_limit) {
            log_warn("connection %s refused: %u connections open (--max-connections %u)",
                     w->base.peer, w->listener->nconns, server_limits.max_connections);
            bl = snprintf(body, sizeof body,
                          "too many connections: this server allows %u (--max-connections)\n",
                          server_limits.max_connections);
        } else {
            log_warn("connection %s refused: %u connections open from %s "
                     "(--max-connections-per-peer %u)",
                     w->base.peer, peer_count(w), w->ip, server_limits.max_connections_per_peer);
            bl = snprintf(body, sizeof body,
                          "too many connections from %s: this server allows %u per address "
                          "(--max-connections-per-peer)\n",
                          w->ip, server_limits.max_connections_per_peer);
        }
        buf_free(&reply);
        buf_init(&reply);
        buf_printf(&reply,
                   "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; "
                   "charset=utf-8\r\ncontent-length: %d\r\nretry-after: 1\r\n"
                   "connection: close\r\n\r\n%s",
                   bl, body);
        info.status = 503;
        o = HTTP_REPLY;
    }
    if (o == HTTP_REPLY && log_threshold >= LOG_INFO) {
        char mv[32], pv[96];
        log_event("event=http_request transport=http peer=%s method=%s path=%s status=%d",
                  conn_peer(&w->base), log_value(info.method, mv, sizeof mv),
                  log_value(info.path, pv, sizeof pv), info.status);
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
    if (auth_enabled()) {
        char who[AUTH_IDENTITY_LEN];
        auth_identity(info.authorization, who);
        conn_set_identity(&w->base, who);
        log_event("event=auth result=ok peer=%s", conn_peer(&w->base));
    }
    auth_audit_login(conn_peer(&w->base), "websocket", info.authorization, conn_identity(&w->base),
                     NULL);
    conn_set_transport(&w->base, "websocket");
    log_event("event=websocket_upgrade transport=websocket peer=%s", conn_peer(&w->base));
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
    memcpy(w->ip, ip, sizeof w->ip);
    w->over_peer_limit = peer_count(w) > server_limits.max_connections_per_peer;
    if (tls_server_enabled()) w->base.tls = tls_session_new();
    /* HTTP until it upgrades: /readyz and /metrics are not WebSocket connections. */
    conn_set_transport(&w->base, "http");
    log_event("event=connection_open transport=http peer=%s tls=%s", w->base.peer,
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
    int sl = sizeof ss;
    if (r == 0) r = uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &sl);
    int bound =
        ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    /* Closed to sandboxed commands before it accepts anything (core/own_ports.h). */
    if (r == 0) {
        l->port = (uint16_t)bound;
        own_ports_add(l->port);
        r = uv_listen((uv_stream_t *)&l->tcp, 511, ws_on_connection);
    }
    if (r != 0) {
        own_ports_remove(l->port);
        uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
        return r;
    }
    const char *scheme = tls_server_enabled() ? "wss" : "ws";
    snprintf(url, urllen, v6 ? "%s://[%s]:%d" : "%s://%s:%d", scheme, host, bound);
    *out = l;
    return 0;
}

void ws_shutdown(struct ws_listener *l)
{
    own_ports_remove(l->port);
    while (l->conns)
        conn_close(&l->conns->base);
    while (l->lingers)
        linger_end(l->lingers);
    uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
}
