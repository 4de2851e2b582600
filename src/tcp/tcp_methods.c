/* tcp_methods: tcp/connect, tcp/data, tcp/ack and tcp/close (see tcp_methods.h;
 * the wire rules are docs/PROTOCOL.md §11 (i)).
 *
 * A stream (tcp_stream.c: resolving, connecting, reading, writing) is named by the
 * client's `streamId` and owned by the JSON-RPC connection that opened it (the
 * tcp_slot table): it ends with that connection, like an http/request body stream,
 * and is not resumed. This file decodes the requests and turns the stream's events
 * into replies and notifications. The connect reply comes before the stream's
 * first data.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "audit/audit.h"
#include "core/limits.h"
#include "core/log.h"
#include "proto/base64.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "tcp/tcp_stream.h"
#include "transport/conn.h"
#include "util/buf.h"
#include "util/mem.h"

/* This module's per-connection state: tcp/connect streams. */
static struct conn_slot tcp_slot;

struct tcp_table {
    struct conn *conn; /* not counted: the table dies with the connection */
    struct tcp_stream *head;
    unsigned count;
};

static struct conn *stream_conn(const struct tcp_stream *st)
{
    return st->owner ? ((struct tcp_table *)st->owner)->conn : NULL;
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

/* ---- the stream's events ----------------------------------------------------------- */

/* Takes st out of its table; returns whether it was there (the table's reference is
 * then the caller's to drop). */
static bool table_unlink(struct tcp_stream *st)
{
    struct tcp_table *t = st->owner;
    if (!t) return false;
    if (st->prev)
        st->prev->next = st->next;
    else
        t->head = st->next;
    if (st->next) st->next->prev = st->prev;
    t->count--;
    st->owner = NULL;
    return true;
}

/* The tcp.connect audit record (audit/audit.h): where to, and how it went. */
static void audit_connect(const struct tcp_stream *st, const char *addr, const char *error)
{
    struct buf *b = audit_begin("tcp.connect");
    if (!b) return;
    struct conn *c = stream_conn(st);
    struct session *s = c ? session_of(c) : NULL;
    audit_put_str(b, "session", s ? s->id : NULL);
    audit_put_str(b, "stream", st->id);
    audit_put_str(b, "host", st->host);
    audit_put_u64(b, "port", st->port);
    if (addr) audit_put_str(b, "address", addr);
    if (error) audit_put_str(b, "error", error);
    audit_commit(b);
}

static void on_connected(struct tcp_stream *st, void *token, const char *addr, int port)
{
    audit_connect(st, addr, NULL);
    struct conn *c = stream_conn(st);
    char hv[300], iv[160];
    log_event("event=tcp_connect peer=%s stream=%s host=%s port=%u address=%s result=ok",
              c ? conn_peer(c) : "-", log_value(st->id, iv, sizeof iv),
              log_value(st->host, hv, sizeof hv), st->port, addr);
    rpc_reply_json(token,
                   json_pack("{s:s,s:s,s:i}", "streamId", st->id, "address", addr, "port", port));
}

/* A pending tcp/connect is answered with the error (the client never had the
 * stream); else tcp/closed says so when notify. */
static void on_ended(struct tcp_stream *st, void *connect_token, const char *error, bool notify)
{
    if (connect_token) {
        audit_connect(st, NULL, error ? error : "stream closed");
        char hv[300], ev[160];
        log_event("event=tcp_connect stream_host=%s port=%u result=error error=%s",
                  log_value(st->host, hv, sizeof hv), st->port,
                  log_value(error ? error : "closed", ev, sizeof ev));
        rpc_reply_error(connect_token, RPC_INTERNAL_ERROR, "tcp/connect to %s:%u failed: %s",
                        st->host, st->port, error ? error : "stream closed");
    } else if (notify) {
        notify_closed(st, error);
    }
    if (table_unlink(st)) tcp_stream_unref(st);
}

static void on_written(struct tcp_stream *st, void *token, int status)
{
    if (status == 0)
        rpc_reply_json(token, json_object());
    else
        rpc_reply_error(token, RPC_INTERNAL_ERROR, "tcp/data on stream %s failed: %s", st->id,
                        status == UV_ECANCELED ? "the stream was closed" : uv_strerror(status));
}

static bool on_paused(const struct tcp_stream *st)
{
    struct conn *c = stream_conn(st);
    return !c || conn_is_congested(c);
}

static const struct tcp_stream_events stream_events = {
    .connected = on_connected,
    .data = notify_data,
    .ended = on_ended,
    .written = on_written,
    .paused = on_paused,
};

/* ---- the connection's table --------------------------------------------------------- */

static void table_free(void *state)
{
    struct tcp_table *t = state;
    while (t->head)
        tcp_stream_end(t->head, "connection closed", false);
    free(t);
}

static void table_unblocked(void *state)
{
    struct tcp_table *t = state;
    for (struct tcp_stream *st = t->head; st; st = st->next)
        tcp_stream_resume(st);
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

    struct tcp_stream *st =
        tcp_stream_new(id, host, (unsigned)port, window, &stream_events, t, req);
    st->next = t->head;
    if (t->head) t->head->prev = st;
    t->head = st;
    t->count++;
    tcp_stream_start(st, conn_loop(c), TCP_CONNECT_TIMEOUT_MS);
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
    struct tcp_write *tw = tcp_write_new(base64_decoded_max(blen));
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
        int rc = tcp_stream_write(st, tw, req);
        if (rc < 0) {
            free(tw);
            rpc_reply_error(req, RPC_INTERNAL_ERROR, "tcp/data on stream %s failed: %s", id,
                            uv_strerror(rc));
            tcp_stream_end(st, uv_strerror(rc), true);
            return;
        }
    } else {
        free(tw);
        rpc_reply_json(req, json_object());
    }
    if (eof) tcp_stream_shutdown(st);
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
    if (st) tcp_stream_ack(st, n);
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
    if (st) tcp_stream_end(st, "closed by the client", false);
    rpc_reply_json(req, json_object());
}

const struct rpc_method tcp_methods[] = {
    {"tcp/connect", "tcp", handle_connect},
    {"tcp/data", "tcp", handle_data},
    {"tcp/ack", "tcp", handle_ack},
    {"tcp/close", "tcp", handle_close},
    {NULL, NULL, NULL},
};

static bool forward_on(void)
{
    return server_limits.tcp_forwarding;
}

static const struct rpc_method *const tcp_tables[] = {tcp_methods, NULL};

/* tcpForward (ours, PROTOCOL.md §11 (i)): tcp/connect, while --allow-tcp-forwarding
 * is given. */
static const struct rpc_capability tcp_capabilities[] = {
    {"tcpForward", false, forward_on},
    {NULL, false, NULL},
};

const struct rpc_domain tcp_domain = {
    .name = "tcp",
    .methods = tcp_tables,
    .capabilities = tcp_capabilities,
};
