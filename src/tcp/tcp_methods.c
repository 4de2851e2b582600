/* tcp_methods: tcp/connect, tcp/data, tcp/ack and tcp/close (see tcp_methods.h;
 * the wire rules are docs/PROTOCOL.md §11 (i)).
 *
 * A stream is one outbound TCP connection, named by the client's `streamId` and
 * owned by the JSON-RPC connection that opened it (the tcp_slot table): it
 * ends with that connection, like an http/request body stream, and is not resumed.
 * The host is resolved on the thread pool (uv_getaddrinfo: the loop never blocks)
 * and every address is tried in order until one accepts, within
 * TCP_CONNECT_TIMEOUT_MS. The connect reply comes before the stream's first data.
 *
 * Bytes from the peer go out as `tcp/data` notifications (at most 64 KiB raw each,
 * base64 written straight into the outgoing frame). Flow control, both ways:
 *  - towards the client, a window: the client names how many bytes it buffers
 *    (`window`) and returns credit with tcp/ack as it consumes them; the stream stops
 *    reading its socket when the unacknowledged bytes reach the window, or when the
 *    connection's queue is above its high-water mark, until the credit or the drain
 *    comes (so the peer is held back by TCP itself, and memory stays bounded);
 *  - towards the peer, the replies: a tcp/data request is answered once its bytes
 *    are written to the socket, so a client that keeps a bounded amount unanswered
 *    bounds what we queue; past TCP_MAX_WRITE_QUEUE a request is refused.
 * Half-close is passed through: the peer's FIN is a tcp/data with `eof:true`, and a
 * client's `eof:true` shuts down our sending side after its bytes. When both sides
 * have ended (or on an error) the socket is closed and `tcp/closed` says so, once;
 * tcp/close aborts a stream without that notification. */
#include "tcp/tcp_methods.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/limits.h"
#include "core/log.h"
#include "proto/base64.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"
#include "transport/conn.h"
#include "util/buf.h"
#include "util/mem.h"

/* This module's per-connection state: tcp/connect streams. */
static struct conn_slot tcp_slot;

#define TCP_READ_MAX (64u << 10)

enum tcp_state { TCP_RESOLVING, TCP_CONNECTING, TCP_OPEN, TCP_DONE };

struct tcp_table;

struct tcp_stream {
    struct tcp_stream *next, *prev;
    struct tcp_table *table; /* NULL once the stream left it (ended, or the conn closed) */
    char *id;
    struct buf id_json; /* the streamId as a JSON string */
    char host[256];
    unsigned port;
    enum tcp_state state;
    struct rpc_req *connect_req; /* tcp/connect, answered once connected or failed */
    uv_getaddrinfo_t gai;
    struct addrinfo *ai, *ai_next; /* the resolved addresses, tried in order */
    uv_tcp_t sock;
    bool sock_live; /* sock is initialized and not closing */
    uv_connect_t creq;
    uv_shutdown_t sreq;
    uv_timer_t timer; /* the connect deadline */
    uint64_t window, unacked;
    bool reading;
    bool remote_eof; /* the peer sent FIN (tcp/data eof sent) */
    bool eof_asked;  /* the client sent eof: shut down after its bytes */
    bool shut_done;
    size_t write_queued; /* bytes in uv_write requests not completed */
    int last_error;      /* of the last connect attempt */
    int refs;            /* table membership, open handles, a getaddrinfo in flight */
};

struct tcp_table {
    struct conn *conn; /* not counted: the table dies with the connection */
    struct tcp_stream *head;
    unsigned count;
};

struct tcp_write {
    uv_write_t w;
    struct tcp_stream *st;
    struct rpc_req *req;
    size_t len;
    uint8_t data[];
};

static uint8_t scratch[TCP_READ_MAX];

static void stream_unref(struct tcp_stream *st)
{
    if (--st->refs > 0) return;
    if (st->ai) uv_freeaddrinfo(st->ai);
    buf_free(&st->id_json);
    free(st->id);
    free(st);
}

static void handle_closed(uv_handle_t *h)
{
    stream_unref(h->data);
}

static struct conn *stream_conn(const struct tcp_stream *st)
{
    return st->table ? st->table->conn : NULL;
}

/* ---- notifications ------------------------------------------------------------- */

static void msg_begin(struct buf *b, const struct tcp_stream *st, const char *method, size_t extra)
{
    buf_init_msg(b);
    buf_reserve(b, 64 + st->id_json.len + extra);
    buf_printf(b, "{\"method\":\"%s\",\"params\":{\"streamId\":", method);
    buf_append(b, st->id_json.data, st->id_json.len);
}

static void notify_data(struct tcp_stream *st, const uint8_t *data, size_t len, bool eof)
{
    struct conn *c = stream_conn(st);
    if (!c) return;
    struct buf b;
    msg_begin(&b, st, "tcp/data", base64_encoded_len(len));
    buf_puts(&b, ",\"dataBase64\":\"");
    base64_append(&b, data, len);
    buf_puts(&b, eof ? "\",\"eof\":true}}" : "\",\"eof\":false}}");
    conn_send(c, &b);
}

static void notify_closed(struct tcp_stream *st, const char *error)
{
    struct conn *c = stream_conn(st);
    if (!c) return;
    struct buf b;
    msg_begin(&b, st, "tcp/closed", error ? strlen(error) + 8 : 0);
    buf_puts(&b, ",\"error\":");
    if (error)
        buf_put_json_str(&b, error, strlen(error));
    else
        buf_puts(&b, "null");
    buf_puts(&b, "}}");
    conn_send(c, &b);
}

/* ---- ending ---------------------------------------------------------------------- */

/* Takes st out of its table; returns whether it was there (the table's reference is
 * then the caller's to drop). */
static bool table_unlink(struct tcp_stream *st)
{
    struct tcp_table *t = st->table;
    if (!t) return false;
    if (st->prev)
        st->prev->next = st->next;
    else
        t->head = st->next;
    if (st->next) st->next->prev = st->prev;
    t->count--;
    st->table = NULL;
    return true;
}

/* Ends the stream: answers a pending tcp/connect with `error`, tells the client with
 * tcp/closed when `notify`, closes the socket (pending writes then complete with
 * ECANCELED and are answered) and leaves the table. Idempotent. The timer's
 * reference, dropped only by its close callback, keeps st valid to the end. */
static void stream_end(struct tcp_stream *st, const char *error, bool notify)
{
    if (st->state == TCP_DONE) return;
    st->state = TCP_DONE;
    if (st->connect_req) {
        char hv[300], ev[160];
        log_event("event=tcp_connect stream_host=%s port=%u result=error error=%s",
                  log_value(st->host, hv, sizeof hv), st->port,
                  log_value(error ? error : "closed", ev, sizeof ev));
        struct rpc_req *req = st->connect_req;
        st->connect_req = NULL;
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "tcp/connect to %s:%u failed: %s", st->host,
                        st->port, error ? error : "stream closed");
        notify = false; /* the client never had the stream */
    }
    if (notify) notify_closed(st, error);
    if (st->sock_live) {
        st->sock_live = false;
        uv_close((uv_handle_t *)&st->sock, handle_closed);
    }
    bool listed = table_unlink(st);
    uv_close((uv_handle_t *)&st->timer, handle_closed);
    if (listed) stream_unref(st);
}

/* Both directions have ended and every byte is written: a clean close. */
static void maybe_finished(struct tcp_stream *st)
{
    if (st->state == TCP_OPEN && st->remote_eof && st->shut_done && st->write_queued == 0)
        stream_end(st, NULL, true);
}

/* ---- reading from the peer ---------------------------------------------------------- */

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct tcp_stream *st = h->data;
    uint64_t room = st->window > st->unacked ? st->window - st->unacked : 0;
    *b = uv_buf_init((char *)scratch, (unsigned)(room < sizeof scratch ? room : sizeof scratch));
}

/* Reads exactly while the client has room and its connection drains. */
static void update_reading(struct tcp_stream *st)
{
    struct conn *c = stream_conn(st);
    bool want = st->state == TCP_OPEN && c && !st->remote_eof && st->unacked < st->window &&
                !conn_is_congested(c);
    if (want && !st->reading) uv_read_start((uv_stream_t *)&st->sock, alloc_cb, read_cb);
    if (!want && st->reading) uv_read_stop((uv_stream_t *)&st->sock);
    st->reading = want;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct tcp_stream *st = s->data;
    if (nread == 0 || st->state != TCP_OPEN) return;
    if (nread > 0) {
        notify_data(st, (const uint8_t *)b->base, (size_t)nread, false);
        st->unacked += (uint64_t)nread;
        update_reading(st);
        return;
    }
    if (nread == UV_ENOBUFS) { /* no window left: update_reading stops */
        update_reading(st);
        return;
    }
    if (nread == UV_EOF) {
        st->remote_eof = true;
        notify_data(st, NULL, 0, true);
        update_reading(st);
        maybe_finished(st);
        return;
    }
    stream_end(st, uv_strerror((int)nread), true);
}

/* ---- connecting ---------------------------------------------------------------------- */

static void start_attempt(struct tcp_stream *st);

static void connected(struct tcp_stream *st)
{
    uv_timer_stop(&st->timer);
    st->state = TCP_OPEN;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char addr[INET6_ADDRSTRLEN] = "";
    int port = 0;
    if (uv_tcp_getpeername(&st->sock, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a6, addr, sizeof addr);
            port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            uv_ip4_name(a4, addr, sizeof addr);
            port = ntohs(a4->sin_port);
        }
    }
    uv_tcp_nodelay(&st->sock, 1);
    struct conn *c = stream_conn(st);
    char hv[300], iv[160];
    log_event("event=tcp_connect peer=%s stream=%s host=%s port=%u address=%s result=ok",
              c ? conn_peer(c) : "-", log_value(st->id, iv, sizeof iv),
              log_value(st->host, hv, sizeof hv), st->port, addr);
    struct rpc_req *req = st->connect_req;
    st->connect_req = NULL;
    /* The reply goes out before the stream's first tcp/data. */
    rpc_reply_json(req,
                   json_pack("{s:s,s:s,s:i}", "streamId", st->id, "address", addr, "port", port));
    update_reading(st);
}

/* The failed attempt's socket is closed: the next address gets a fresh one (the
 * handle's memory may be reused only now). */
static void retry_after_close(uv_handle_t *h)
{
    struct tcp_stream *st = h->data;
    if (st->state == TCP_CONNECTING) start_attempt(st);
    stream_unref(st);
}

static void connect_cb(uv_connect_t *cr, int status)
{
    struct tcp_stream *st = cr->data;
    if (st->state != TCP_CONNECTING) return; /* ended meanwhile: the close cancelled it */
    if (status == 0) {
        connected(st);
        return;
    }
    st->last_error = status;
    st->sock_live = false;
    uv_close((uv_handle_t *)&st->sock, retry_after_close);
}

/* Connects to the next resolved address, or fails with the last error. */
static void start_attempt(struct tcp_stream *st)
{
    struct addrinfo *a = st->ai_next;
    int rc = st->last_error;
    if (a) {
        st->ai_next = a->ai_next;
        rc = uv_tcp_init(st->timer.loop, &st->sock);
    }
    if (!a || rc < 0) {
        stream_end(st, rc < 0 ? uv_strerror(rc) : "no address to connect to", false);
        return;
    }
    st->sock.data = st;
    st->sock_live = true;
    st->refs++; /* the socket handle, until its close callback */
    st->creq.data = st;
    rc = uv_tcp_connect(&st->creq, &st->sock, a->ai_addr, connect_cb);
    if (rc == 0) return;
    st->last_error = rc;
    st->sock_live = false;
    uv_close((uv_handle_t *)&st->sock, retry_after_close);
}

static void resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    struct tcp_stream *st = g->data;
    st->ai = res; /* freed with the stream */
    if (st->state == TCP_RESOLVING) {
        if (status < 0) {
            stream_end(st, uv_strerror(status), false);
        } else {
            st->state = TCP_CONNECTING;
            st->ai_next = res;
            start_attempt(st);
        }
    }
    stream_unref(st); /* the lookup's reference */
}

static void connect_timeout(uv_timer_t *t)
{
    stream_end(t->data, "connection timed out", false);
}

/* ---- the connection's table --------------------------------------------------------- */

static void table_free(void *state)
{
    struct tcp_table *t = state;
    while (t->head)
        stream_end(t->head, "connection closed", false);
    free(t);
}

static void table_unblocked(void *state)
{
    struct tcp_table *t = state;
    for (struct tcp_stream *st = t->head; st; st = st->next)
        update_reading(st);
}

static struct tcp_table *table_of(struct conn *c)
{
    struct tcp_table *t = conn_slot_ensure(c, &tcp_slot, sizeof *t, table_free, table_unblocked);
    t->conn = c;
    return t;
}

static struct tcp_stream *stream_find(struct conn *c, const char *id)
{
    struct tcp_table *t = conn_slot_get(c, &tcp_slot);
    for (struct tcp_stream *st = t ? t->head : NULL; st; st = st->next)
        if (strcmp(st->id, id) == 0) return st;
    return NULL;
}

/* ---- methods ------------------------------------------------------------------------- */

/* tcp/connect {streamId, host, port, window?, sandbox?} -> {streamId, address, port} */
static void handle_connect(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TcpConnectParams");
    const char *id = pdec_string(&d, "streamId", PDEC_REQUIRED);
    const char *host = pdec_string(&d, "host", PDEC_REQUIRED);
    uint64_t port = pdec_u64(&d, "port", PDEC_REQUIRED, 0, NULL);
    bool has_window = false;
    uint64_t window = pdec_u64(&d, "window", PDEC_OPTIONAL, TCP_DEFAULT_WINDOW, &has_window);
    json_t *sandbox = pdec_object(&d, "sandbox", PDEC_OPTIONAL);
    if (!d.failed && (port < 1 || port > 65535)) pdec_fail(&d, "port must be between 1 and 65535");
    if (!d.failed && (!*host || strlen(host) > 253 ||
                      strlen(host) != json_string_length(json_object_get(req->params, "host"))))
        pdec_fail(&d, "host must be a name or address of 1 to 253 characters");
    if (!d.failed && !*id) pdec_fail(&d, "streamId must not be empty");
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    if (!server_limits.tcp_forwarding) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "TCP forwarding is disabled on this server (start it with "
                        "--allow-tcp-forwarding)");
        return;
    }
    /* The sandbox's network policy: a restricted network gets no stream. (A managed
     * network proxy's domain rules are not consulted yet: restricted is refused.) */
    if (sandbox) {
        struct sandbox_policy pol;
        struct sandbox_error serr;
        if (sandbox_policy_parse(sandbox, "/", &pol, &serr) < 0) {
            rpc_reply_error(req, sandbox_error_code(&serr), "%s", serr.message);
            return;
        }
        bool restricted = pol.net_restricted;
        sandbox_policy_free(&pol);
        if (restricted) {
            rpc_reply_error(req, RPC_INVALID_REQUEST,
                            "tcp/connect refused: the sandbox restricts network access");
            return;
        }
    }
    struct conn *c = req->conn;
    if (stream_find(c, id)) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "stream %s already exists", id);
        return;
    }
    struct tcp_table *t = table_of(c);
    if (t->count >= TCP_MAX_STREAMS) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "too many TCP streams on this connection (%u); close some first",
                        TCP_MAX_STREAMS);
        return;
    }
    if (window < TCP_MIN_WINDOW) window = TCP_MIN_WINDOW;
    if (window > TCP_MAX_WINDOW) window = TCP_MAX_WINDOW;

    struct tcp_stream *st = xcalloc(1, sizeof *st);
    st->id = xstrdup(id);
    buf_init(&st->id_json);
    buf_put_json_str(&st->id_json, id, strlen(id));
    snprintf(st->host, sizeof st->host, "%s", host);
    st->port = (unsigned)port;
    st->window = window;
    st->state = TCP_RESOLVING;
    st->connect_req = req;
    st->refs = 3; /* the table, the timer handle, the lookup */
    st->table = t;
    st->next = t->head;
    if (t->head) t->head->prev = st;
    t->head = st;
    t->count++;
    uv_loop_t *loop = conn_loop(c);
    uv_timer_init(loop, &st->timer);
    st->timer.data = st;
    uv_timer_start(&st->timer, connect_timeout, TCP_CONNECT_TIMEOUT_MS, 0);
    char service[8];
    snprintf(service, sizeof service, "%u", st->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_protocol = IPPROTO_TCP,
                             .ai_flags = AI_NUMERICSERV};
    st->gai.data = st;
    int rc = uv_getaddrinfo(loop, &st->gai, resolved, st->host, service, &hints);
    if (rc < 0) {
        st->refs--; /* no lookup runs */
        stream_end(st, uv_strerror(rc), false);
    }
}

static void write_done(uv_write_t *w, int status)
{
    struct tcp_write *tw = (struct tcp_write *)w;
    struct tcp_stream *st = tw->st;
    st->write_queued -= tw->len;
    if (status == 0) {
        rpc_reply_json(tw->req, json_object());
    } else {
        rpc_reply_error(tw->req, RPC_INTERNAL_ERROR, "tcp/data on stream %s failed: %s", st->id,
                        status == UV_ECANCELED ? "the stream was closed" : uv_strerror(status));
        if (status != UV_ECANCELED) stream_end(st, uv_strerror(status), true);
    }
    free(tw);
    maybe_finished(st);
    stream_unref(st);
}

static void shutdown_done(uv_shutdown_t *sr, int status)
{
    struct tcp_stream *st = sr->data;
    st->shut_done = true;
    if (status < 0 && status != UV_ECANCELED) stream_end(st, uv_strerror(status), true);
    maybe_finished(st);
    stream_unref(st);
}

/* tcp/data {streamId, dataBase64, eof?} -> {} once the bytes are written. */
static void handle_data(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TcpDataParams");
    const char *id = pdec_string(&d, "streamId", PDEC_REQUIRED);
    size_t blen = 0;
    const char *b64 = pdec_string_len(&d, "dataBase64", PDEC_REQUIRED, &blen);
    bool eof = pdec_bool(&d, "eof", PDEC_OPTIONAL, false);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct tcp_stream *st = stream_find(req->conn, id);
    if (!st) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown stream id %s", id);
        return;
    }
    if (st->state != TCP_OPEN) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "stream %s is not connected yet", id);
        return;
    }
    if (st->eof_asked) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "stream %s: tcp/data after eof", id);
        return;
    }
    struct tcp_write *tw = xmalloc(sizeof *tw + base64_decoded_max(blen));
    char err[96];
    if (base64_decode(b64, blen, tw->data, &tw->len, err, sizeof err) < 0) {
        free(tw);
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
        return;
    }
    if (st->write_queued + tw->len > TCP_MAX_WRITE_QUEUE) {
        size_t queued = st->write_queued;
        free(tw);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "stream %s has %zu bytes queued (at most %u): wait for the "
                        "replies to earlier tcp/data",
                        id, queued, TCP_MAX_WRITE_QUEUE);
        return;
    }
    if (tw->len > 0) {
        tw->st = st;
        tw->req = req;
        uv_buf_t ub = uv_buf_init((char *)tw->data, (unsigned)tw->len);
        int rc = uv_write(&tw->w, (uv_stream_t *)&st->sock, &ub, 1, write_done);
        if (rc < 0) {
            free(tw);
            rpc_reply_error(req, RPC_INTERNAL_ERROR, "tcp/data on stream %s failed: %s", id,
                            uv_strerror(rc));
            stream_end(st, uv_strerror(rc), true);
            return;
        }
        st->write_queued += tw->len;
        st->refs++;
    } else {
        free(tw);
        rpc_reply_json(req, json_object());
    }
    if (eof) {
        /* libuv shuts down once the writes queued before it are done. */
        st->eof_asked = true;
        st->sreq.data = st;
        if (uv_shutdown(&st->sreq, (uv_stream_t *)&st->sock, shutdown_done) == 0)
            st->refs++;
        else
            st->shut_done = true;
        maybe_finished(st);
    }
}

/* tcp/ack {streamId, bytes} -> {}: the client consumed that many bytes of tcp/data. */
static void handle_ack(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TcpAckParams");
    const char *id = pdec_string(&d, "streamId", PDEC_REQUIRED);
    uint64_t n = pdec_u64(&d, "bytes", PDEC_REQUIRED, 0, NULL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct tcp_stream *st = stream_find(req->conn, id);
    if (st) {
        st->unacked -= n < st->unacked ? n : st->unacked;
        update_reading(st);
    }
    /* An ack racing the stream's end is harmless. */
    rpc_reply_json(req, json_object());
}

/* tcp/close {streamId} -> {}: aborts the stream; no tcp/closed follows. */
static void handle_close(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "TcpCloseParams");
    const char *id = pdec_string(&d, "streamId", PDEC_REQUIRED);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct tcp_stream *st = stream_find(req->conn, id);
    if (st) stream_end(st, "closed by the client", false);
    rpc_reply_json(req, json_object());
}

const struct rpc_method tcp_methods[] = {
    {"tcp/connect", "tcp", handle_connect},
    {"tcp/data", "tcp", handle_data},
    {"tcp/ack", "tcp", handle_ack},
    {"tcp/close", "tcp", handle_close},
    {NULL, NULL, NULL},
};
