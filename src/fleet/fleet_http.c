/* fleet_http: the registry's listener and connections (see fleet_http.h). */
#include "fleet/fleet_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "proto/ws_frame.h"
#include "proto/ws_reader.h"
#include "transport/tls.h"
#include "util/buf.h"
#include "util/mem.h"

#define HTTP_REQUEST_MS 30000 /* a request must arrive whole within this of the last answer */
#define CLOSE_LINGER_MS 5000  /* a graceful close waits this long for queued bytes at most */

struct fleet_http {
    uv_tcp_t tcp;
    uv_loop_t *loop;
    struct fleet_http_opts o;
    struct fleet_conn *conns; /* every open connection */
    unsigned nconns;
};

/* The HTTP half of a connection; freed at the upgrade. */
struct fleet_rq {
    struct buf in;   /* received bytes, starting with the current request */
    struct buf more; /* bytes that arrived while a request was being answered */
    struct fleet_request req;
    size_t req_len; /* head + body of the current request, once complete */
    bool pending;   /* handed to on_request and not answered yet */
    bool close_after;
    enum fleet_endpoint ep;
    uint64_t deadline; /* loop ms by which the next request must be complete */
};

struct fleet_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    struct fleet_http *srv; /* NULL once the listener shut down */
    struct fleet_conn *prev, *next;
    struct tls_session *tls;
    struct fleet_rq *rq; /* HTTP state; NULL once upgraded */
    struct ws_reader rd; /* WebSocket state, after the upgrade */
    const struct fleet_ws_ops *ops;
    void *owner;
    size_t queued;     /* bytes in uv_write requests not yet done */
    uint64_t deadline; /* owner's deadline (loop ms), 0 = none */
    uint64_t next_ping, ping_sent;
    int refs; /* 1 until both handles closed, + holds */
    int handles;
    uint8_t reason; /* enum fleet_close_reason */
    bool open, upgraded, reading, congested, ping_out, in_dispatch, lingering;
    bool failing;  /* a write failed: closing on the next loop turn, nothing more is sent */
    bool gathered; /* on the gather list: frames wait for the read's end */
    struct fleet_conn *gather_next; /* the gather list */
    struct fleet_gather *g;         /* the frames gathered for it (owned, kept for reuse) */
    char peer[64];
};

/* Frames relayed while one read of another socket is being handed out (ws_feed): each
 * frame's header here, its payload borrowed from the read's buffer where it lies
 * there (valid until the read is done), else copied (a frame the reader gathered
 * across reads). At the read's end each socket that got frames writes them all with
 * one writev. Relaying a frame at a time cost one writev per frame (32,895 per 256 MiB
 * of process output, 59-77% of the rendezvous's CPU in the kernel). */
#define GATHER_FRAMES 64
struct fleet_gather {
    uv_buf_t bufs[2 * GATHER_FRAMES]; /* header, payload, header, payload... */
    unsigned nbufs, nframes;
    uint8_t hdr[GATHER_FRAMES][WS_FRAME_MAX_HEADER];
    char *spill[GATHER_FRAMES]; /* copied payloads, freed after the write */
    unsigned nspill;
};

/* The read being fed, and the sockets that got frames during it. */
static struct {
    const uint8_t *lo, *hi;
    int depth;
    struct fleet_conn *list;
} feed;

struct fleet_wreq {
    uv_write_t req;
    struct fleet_conn *c;
    size_t len;
    char *mem; /* freed after the write */
    bool rest; /* mem came from rest_alloc */
};

static void conn_close_now(struct fleet_conn *c, enum fleet_close_reason reason);
static void conn_fail_later(struct fleet_conn *c);
static void conn_finish(struct fleet_conn *c, enum fleet_close_reason reason);
static void http_process(struct fleet_conn *c);
static void arm(struct fleet_conn *c);

/* ---- lifetime ---- */

void fleet_conn_hold(struct fleet_conn *c)
{
    c->refs++;
}

static void conn_free(struct fleet_conn *c)
{
    free(c->g);
    if (c->rq) {
        buf_free(&c->rq->in);
        buf_free(&c->rq->more);
        free(c->rq);
    }
    ws_reader_free(&c->rd);
    if (c->tls) tls_session_free(c->tls);
    free(c);
}

void fleet_conn_release(struct fleet_conn *c)
{
    if (--c->refs == 0) conn_free(c);
}

static void handle_closed(uv_handle_t *h)
{
    struct fleet_conn *c = h->data;
    if (--c->handles == 0) fleet_conn_release(c);
}

bool fleet_conn_is_open(const struct fleet_conn *c)
{
    return c->open;
}

const char *fleet_conn_peer(const struct fleet_conn *c)
{
    return c->peer;
}

enum fleet_close_reason fleet_conn_close_reason(const struct fleet_conn *c)
{
    return (enum fleet_close_reason)c->reason;
}

size_t fleet_conn_queued(const struct fleet_conn *c)
{
    return c->queued;
}

bool fleet_conn_congested(const struct fleet_conn *c)
{
    return c->congested;
}

/* ---- writing ---- */

/* What a socket did not take at once is copied and queued; copies up to a read's size
 * (the common case when a harness reads slower than its executor sends) come from a
 * few reused blocks: a fresh 100-250 KB malloc is a mapping of its own, and its page
 * faults cost more than the copy (16% of the rendezvous's CPU in a 256 MiB fs get). */
#define REST_BLOCK (256u << 10)
#define REST_SPARE 8
static char *rest_spare[REST_SPARE];
static unsigned rest_nspare;

static char *rest_alloc(size_t n)
{
    if (n > REST_BLOCK) return xmalloc(n);
    return rest_nspare ? rest_spare[--rest_nspare] : xmalloc(REST_BLOCK);
}

/* Frees mem of a write of len bytes (from rest_alloc when a rest, else malloc). */
static void rest_free(char *mem, size_t len, bool rest)
{
    if (rest && len <= REST_BLOCK && rest_nspare < REST_SPARE)
        rest_spare[rest_nspare++] = mem;
    else
        free(mem);
}

static void write_done(uv_write_t *req, int status)
{
    struct fleet_wreq *w = (struct fleet_wreq *)req;
    struct fleet_conn *c = w->c;
    c->queued -= w->len;
    rest_free(w->mem, w->len, w->rest);
    free(w);
    if (status < 0) {
        conn_close_now(c, FLEET_CLOSE_ERROR);
    } else if (c->congested && c->queued < FLEET_CONN_LOW_WATER) {
        c->congested = false;
        if (c->open && c->ops && c->ops->drained) c->ops->drained(c->owner, c);
    }
    fleet_conn_release(c);
}

/* Queues len bytes of mem (malloc'd, or from rest_alloc when rest; taken). */
static void queue_write_mem(struct fleet_conn *c, char *mem, size_t len, bool rest)
{
    if (len == 0) {
        rest_free(mem, len, rest);
        return;
    }
    struct fleet_wreq *w = xmalloc(sizeof *w);
    w->c = c;
    w->len = len;
    w->mem = mem;
    w->rest = rest;
    uv_buf_t b = uv_buf_init(mem, (unsigned)len);
    fleet_conn_hold(c);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done) < 0) {
        rest_free(w->mem, len, rest);
        free(w);
        fleet_conn_release(c);
        conn_fail_later(c);
        return;
    }
    c->queued += len;
    if (c->queued > FLEET_CONN_HIGH_WATER) c->congested = true;
}

static void queue_write(struct fleet_conn *c, char *mem, size_t len)
{
    queue_write_mem(c, mem, len, false);
}

static void flush_tls(struct fleet_conn *c)
{
    char *ct = NULL;
    size_t n = tls_take_output(c->tls, &ct);
    if (n)
        queue_write(c, ct, n);
    else
        free(ct);
}

/* Writes bufs in order: through TLS, or straight to the socket when nothing is
 * queued (no copy, one writev), the rest copied into one queued write. */
static void conn_writev(struct fleet_conn *c, const uv_buf_t *bufs, unsigned n)
{
    if (c->tls) {
        for (unsigned i = 0; i < n; i++) {
            if (bufs[i].len && tls_write(c->tls, bufs[i].base, bufs[i].len) < 0) {
                conn_fail_later(c);
                return;
            }
        }
        flush_tls(c);
        return;
    }
    size_t done = 0, total = 0;
    for (unsigned i = 0; i < n; i++)
        total += bufs[i].len;
    if (c->queued == 0) {
        int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (r < 0 && r != UV_EAGAIN) {
            conn_fail_later(c);
            return;
        }
        done = r > 0 ? (size_t)r : 0;
        if (done == total) return;
    }
    char *rest = rest_alloc(total - done);
    size_t k = 0, skip = done;
    for (unsigned i = 0; i < n; i++) {
        size_t off = skip < bufs[i].len ? skip : bufs[i].len;
        skip -= off;
        memcpy(rest + k, bufs[i].base + off, bufs[i].len - off);
        k += bufs[i].len - off;
    }
    queue_write_mem(c, rest, total - done, true);
}

/* Writes a then b (b may be empty). */
static void conn_write(struct fleet_conn *c, const void *a, size_t an, const void *b, size_t bn)
{
    uv_buf_t bufs[2] = {uv_buf_init((char *)a, (unsigned)an), uv_buf_init((char *)b, (unsigned)bn)};
    conn_writev(c, bufs, bn ? 2 : 1);
}

/* ---- gathering (struct fleet_gather) ---- */

/* Writes what was gathered for c (dropped when c can no longer write). */
static void gather_flush(struct fleet_conn *c)
{
    struct fleet_gather *g = c->g;
    if (!g || !g->nbufs) return;
    if (!c->failing && !uv_is_closing((uv_handle_t *)&c->tcp)) conn_writev(c, g->bufs, g->nbufs);
    for (unsigned i = 0; i < g->nspill; i++)
        free(g->spill[i]);
    g->nbufs = g->nframes = g->nspill = 0;
}

/* Queues a frame of c's for the end of the read being fed. */
static void gather_frame(struct fleet_conn *c, int op, const void *data, size_t len)
{
    struct fleet_gather *g = c->g ? c->g : (c->g = xcalloc(1, sizeof *c->g));
    if (g->nframes == GATHER_FRAMES) gather_flush(c);
    uint8_t *h = g->hdr[g->nframes++];
    g->bufs[g->nbufs++] = uv_buf_init((char *)h, (unsigned)ws_frame_encode(h, true, op, len, NULL));
    if (len) {
        const uint8_t *d = data;
        if (d < feed.lo || d + len > feed.hi) /* not in the read's buffer: it may not last */
            d = (const uint8_t *)(g->spill[g->nspill++] = xmemdup(data, len));
        g->bufs[g->nbufs++] = uv_buf_init((char *)d, (unsigned)len);
    }
    if (!c->gathered) {
        c->gathered = true;
        fleet_conn_hold(c);
        c->gather_next = feed.list;
        feed.list = c;
    }
}

/* The read is done: every socket writes what it got. */
static void gather_flush_all(void)
{
    while (feed.list) {
        struct fleet_conn *c = feed.list;
        feed.list = c->gather_next;
        c->gathered = false;
        gather_flush(c);
        fleet_conn_release(c);
    }
}

/* ---- closing ---- */

static void unlink_conn(struct fleet_conn *c)
{
    if (!c->srv) return;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->srv->nconns--;
    c->srv = NULL;
}

/* Marks c closed and tells its owner (once). */
static bool mark_closed(struct fleet_conn *c, enum fleet_close_reason reason)
{
    if (!c->open) return false;
    c->open = false;
    c->reason = (uint8_t)reason;
    unlink_conn(c);
    const struct fleet_ws_ops *ops = c->ops;
    void *owner = c->owner;
    c->ops = NULL;
    c->owner = NULL;
    if (ops && ops->closed) ops->closed(owner, c);
    return true;
}

static void close_handles(struct fleet_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

static void fail_timer(uv_timer_t *t)
{
    conn_close_now(t->data, FLEET_CLOSE_ERROR);
}

/* A write failed while the caller may be in the middle of its own bookkeeping (a
 * relay resetting every stream of a departed executor): the close and its owner
 * callback wait for the next loop turn, as redis frees a client asynchronously. */
static void conn_fail_later(struct fleet_conn *c)
{
    if (!c->open || c->failing) return;
    c->failing = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    uv_timer_start(&c->timer, fail_timer, 0, 0);
}

static void conn_close_now(struct fleet_conn *c, enum fleet_close_reason reason)
{
    mark_closed(c, reason);
    close_handles(c);
}

static void shutdown_done(uv_shutdown_t *sd, int status)
{
    struct fleet_conn *c = sd->data;
    free(sd);
    close_handles(c);
    fleet_conn_release(c);
}

static void linger_timeout(uv_timer_t *t)
{
    close_handles(t->data);
}

/* Ends c after what is queued has gone out (bounded by CLOSE_LINGER_MS). */
static void conn_finish(struct fleet_conn *c, enum fleet_close_reason reason)
{
    if (c->open) gather_flush(c); /* its last frames (a Close) go before the shutdown */
    if (!mark_closed(c, reason)) return;
    if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    if (c->tls) {
        tls_close_notify(c->tls);
        flush_tls(c);
    }
    c->lingering = true;
    uv_timer_start(&c->timer, linger_timeout, CLOSE_LINGER_MS, 0);
    uv_shutdown_t *sd = xmalloc(sizeof *sd);
    sd->data = c;
    fleet_conn_hold(c);
    if (uv_shutdown(sd, (uv_stream_t *)&c->tcp, shutdown_done) < 0) {
        free(sd);
        fleet_conn_release(c);
        close_handles(c);
    }
}

void fleet_conn_close(struct fleet_conn *c)
{
    conn_close_now(c, FLEET_CLOSE_LOCAL);
}

/* ---- WebSocket ---- */

static void send_frame(struct fleet_conn *c, int op, const void *data, size_t len)
{
    if (!c->open || c->failing) return;
    if (feed.depth && !c->tls) {
        gather_frame(c, op, data, len);
        return;
    }
    uint8_t h[WS_FRAME_MAX_HEADER];
    size_t hl = ws_frame_encode(h, true, op, len, NULL);
    conn_write(c, h, hl, data, len);
}

void fleet_conn_send(struct fleet_conn *c, bool binary, const void *data, size_t len)
{
    send_frame(c, binary ? WS_OP_BINARY : WS_OP_TEXT, data, len);
}

void fleet_conn_ws_close(struct fleet_conn *c, int code, const char *reason)
{
    if (!c->open) return;
    uint8_t p[125];
    size_t n = ws_close_payload(code, p);
    size_t rl = reason ? strlen(reason) : 0;
    if (n && rl > sizeof p - n) rl = sizeof p - n;
    if (n && rl) memcpy(p + n, reason, rl);
    send_frame(c, WS_OP_CLOSE, p, n ? n + rl : 0);
    conn_finish(c, FLEET_CLOSE_LOCAL);
}

static void ws_feed(struct fleet_conn *c, uint8_t *p, size_t n)
{
    if (feed.depth++ == 0) {
        feed.lo = p;
        feed.hi = p + n;
    }
    fleet_conn_hold(c);
    while (n && c->open) {
        struct ws_event ev;
        size_t used = ws_reader_feed(&c->rd, p, n, &ev);
        p += used;
        n -= used;
        switch (ev.kind) {
        case WS_EV_MESSAGE:
            c->ops->message(c->owner, c, ev.data, ev.len, ev.opcode == WS_OP_BINARY);
            break;
        case WS_EV_PING: send_frame(c, WS_OP_PONG, ev.data, ev.len); break;
        case WS_EV_PONG: c->ping_out = false; break;
        case WS_EV_CLOSE: {
            uint8_t cp[2];
            send_frame(c, WS_OP_CLOSE, cp, ws_close_payload(ev.code, cp));
            conn_finish(c, FLEET_CLOSE_PEER);
            break;
        }
        case WS_EV_ERROR: {
            uint8_t cp[2];
            send_frame(c, WS_OP_CLOSE, cp, ws_close_payload(ev.code, cp));
            conn_finish(c, FLEET_CLOSE_PROTOCOL);
            break;
        }
        case WS_EV_NONE: break;
        }
    }
    if (--feed.depth == 0) gather_flush_all();
    fleet_conn_release(c);
}

void fleet_conn_set_deadline(struct fleet_conn *c, uint64_t at_ms)
{
    c->deadline = at_ms;
    if (c->open) arm(c);
}

/* The WebSocket timer: the owner's deadline, then the Ping schedule. */
static void ws_tick(struct fleet_conn *c, uint64_t now)
{
    if (c->deadline && now >= c->deadline) {
        c->deadline = 0;
        if (c->ops && c->ops->deadline) c->ops->deadline(c->owner, c);
        if (!c->open) return;
    }
    if (now >= c->next_ping) {
        uint64_t ping_ms = c->srv ? c->srv->o.ping_ms : 30000;
        uint64_t pong_ms = c->srv ? c->srv->o.pong_ms : 60000;
        if (c->ping_out && now - c->ping_sent >= pong_ms) {
            conn_close_now(c, FLEET_CLOSE_PONG);
            return;
        }
        if (!c->ping_out) {
            send_frame(c, WS_OP_PING, NULL, 0);
            c->ping_out = true;
            c->ping_sent = now;
        }
        c->next_ping = now + ping_ms;
    }
}

static void timer_cb(uv_timer_t *t)
{
    struct fleet_conn *c = t->data;
    if (!c->open) return;
    uint64_t now = uv_now(t->loop);
    if (c->upgraded) {
        ws_tick(c, now);
    } else if (c->rq && !c->rq->pending && now >= c->rq->deadline) {
        log_info("connection %s: no complete request within %d ms; closing", c->peer,
                 HTTP_REQUEST_MS);
        conn_close_now(c, FLEET_CLOSE_LOCAL);
        return;
    }
    if (c->open) arm(c);
}

static void arm(struct fleet_conn *c)
{
    if (c->lingering || c->failing || uv_is_closing((uv_handle_t *)&c->timer)) return;
    uint64_t now = uv_now(c->tcp.loop), due;
    if (c->upgraded)
        due = c->deadline && c->deadline < c->next_ping ? c->deadline : c->next_ping;
    else if (c->rq && !c->rq->pending)
        due = c->rq->deadline;
    else
        return;
    uv_timer_start(&c->timer, timer_cb, due > now ? due - now : 0, 0);
}

void fleet_conn_set_reading(struct fleet_conn *c, bool on);

void fleet_conn_upgrade(struct fleet_conn *c, size_t max_message, const struct fleet_ws_ops *ops,
                        void *owner)
{
    struct fleet_rq *rq = c->rq;
    if (!c->open || !rq || !rq->pending) return;
    struct buf out;
    buf_init(&out);
    const struct fleet_request *r = &rq->req;
    http_write_101(&out, r->ws_key, r->ws_key_len); /* validated (ws_ok) by the caller */
    conn_write(c, out.data, out.len, NULL, 0);
    buf_free(&out);
    fleet_metrics_request(rq->ep, 101, metrics_now_ns() - r->started_ns);
    /* Bytes after the request head (a client may pipeline its first frames). */
    struct buf rest;
    buf_init(&rest);
    buf_append(&rest, rq->in.data + rq->req_len, rq->in.len - rq->req_len);
    buf_append(&rest, rq->more.data, rq->more.len);
    buf_free(&rq->in);
    buf_free(&rq->more);
    free(rq);
    c->rq = NULL;
    ws_reader_init(&c->rd, WS_ROLE_SERVER, max_message, max_message);
    c->upgraded = true;
    c->ops = ops;
    c->owner = owner;
    c->next_ping = uv_now(c->tcp.loop) + (c->srv ? c->srv->o.ping_ms : 30000);
    arm(c);
    if (rest.len) ws_feed(c, (uint8_t *)rest.data, rest.len);
    buf_free(&rest);
    if (c->open) fleet_conn_set_reading(c, true);
}

/* ---- HTTP ---- */

void fleet_conn_set_endpoint(struct fleet_conn *c, enum fleet_endpoint ep)
{
    if (c->rq) c->rq->ep = ep;
}

/* The current request is answered: drop its bytes and go on with the next. */
static void request_done(struct fleet_conn *c)
{
    struct fleet_rq *rq = c->rq;
    size_t keep = rq->in.len - rq->req_len;
    memmove(rq->in.data, rq->in.data + rq->req_len, keep);
    rq->in.len = keep;
    buf_append(&rq->in, rq->more.data, rq->more.len);
    buf_reset(&rq->more);
    rq->req_len = 0;
    rq->pending = false;
    rq->deadline = uv_now(c->tcp.loop) + HTTP_REQUEST_MS;
    if (rq->close_after) {
        conn_finish(c, FLEET_CLOSE_LOCAL);
        return;
    }
    arm(c);
    if (!c->in_dispatch) http_process(c);
}

void fleet_conn_reply(struct fleet_conn *c, int status, const char *content_type, const char *body,
                      size_t len, const char *extra)
{
    struct fleet_rq *rq = c->rq;
    if (!c->open || !rq || !rq->pending) return;
    const struct fleet_request *r = &rq->req;
    bool head_only = r->head.method_len == 4 && memcmp(r->head.method, "HEAD", 4) == 0;
    if (r->head.http10) rq->close_after = true;
    struct buf out;
    buf_init(&out);
    buf_printf(&out, "HTTP/1.1 %d %s\r\n", status, http_reason(status));
    if (content_type) buf_printf(&out, "content-type: %s\r\n", content_type);
    buf_printf(&out, "content-length: %zu\r\n", content_type ? len : 0);
    if (extra) buf_puts(&out, extra);
    if (rq->close_after) buf_puts(&out, "connection: close\r\n");
    buf_puts(&out, "\r\n");
    if (content_type && !head_only) buf_append(&out, body, len);
    conn_write(c, out.data, out.len, NULL, 0);
    buf_free(&out);
    fleet_metrics_request(rq->ep, status, metrics_now_ns() - r->started_ns);
    if (log_threshold >= LOG_INFO) {
        char mv[16], pv[160];
        char method[8], path[200];
        snprintf(method, sizeof method, "%.*s", (int)r->head.method_len, r->head.method);
        snprintf(path, sizeof path, "%.*s", (int)r->head.path_len, r->head.path);
        log_event("event=http_request peer=%s method=%s path=%s status=%d", c->peer,
                  log_value(method, mv, sizeof mv), log_value(path, pv, sizeof pv), status);
    }
    if (c->open) request_done(c);
}

void fleet_conn_reply_error(struct fleet_conn *c, int status, const char *code, const char *message,
                            const char *extra)
{
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_put_json_str(&b, code, strlen(code));
    buf_puts(&b, ",\"message\":");
    buf_put_json_str(&b, message, strlen(message));
    buf_puts(&b, "}}");
    fleet_conn_reply(c, status, "application/json", b.data, b.len, extra);
    buf_free(&b);
}

/* Answers a request that cannot be framed, then closes. */
static void refuse_framing(struct fleet_conn *c, int status, const char *code, const char *msg)
{
    c->rq->pending = true;
    c->rq->close_after = true;
    c->rq->req.started_ns = metrics_now_ns();
    c->rq->req_len = c->rq->in.len;
    fleet_metrics_refusal("bad_request");
    fleet_conn_reply_error(c, status, code, msg, NULL);
}

static bool field_has(const struct http_field *f, const char *token)
{
    return f->seen && http_list_has(f->value, f->len, token);
}

enum { F_LENGTH, F_AUTH, F_TYPE, F_CONNECTION, F_UPGRADE, F_VERSION, F_KEY, F_TE, F_ORIGIN, F_N };

/* Fills the request from its scanned head; false after refusing it. */
static bool request_fill(struct fleet_conn *c, struct http_field *f, size_t *body_len)
{
    struct fleet_request *r = &c->rq->req;
    *body_len = 0;
    if (f[F_TE].seen) {
        refuse_framing(c, 411, "length_required", "send the body with Content-Length");
        return false;
    }
    if (f[F_LENGTH].seen) {
        unsigned long long v = 0;
        bool ok = f[F_LENGTH].len > 0 && f[F_LENGTH].len <= 12;
        for (size_t i = 0; ok && i < f[F_LENGTH].len; i++) {
            char d = f[F_LENGTH].value[i];
            ok = d >= '0' && d <= '9';
            v = v * 10 + (unsigned)(d - '0');
        }
        if (!ok) {
            refuse_framing(c, 400, "bad_request", "malformed Content-Length");
            return false;
        }
        if (v > FLEET_HTTP_MAX_BODY) {
            refuse_framing(c, 413, "payload_too_large", "request bodies are limited to 64 KiB");
            return false;
        }
        *body_len = (size_t)v;
    }
    r->authorization = f[F_AUTH].seen ? f[F_AUTH].value : NULL;
    r->authorization_len = f[F_AUTH].len;
    r->content_type = f[F_TYPE].seen ? f[F_TYPE].value : NULL;
    r->content_type_len = f[F_TYPE].len;
    r->origin = f[F_ORIGIN].seen ? f[F_ORIGIN].value : NULL;
    r->upgrade = field_has(&f[F_CONNECTION], "upgrade") && field_has(&f[F_UPGRADE], "websocket");
    r->ws_ok = r->upgrade && f[F_VERSION].seen && f[F_VERSION].len == 2 &&
               memcmp(f[F_VERSION].value, "13", 2) == 0 && f[F_KEY].seen &&
               http_ws_key_ok(f[F_KEY].value, f[F_KEY].len) && !r->head.http10;
    r->ws_key = f[F_KEY].value;
    r->ws_key_len = f[F_KEY].len;
    c->rq->close_after = field_has(&f[F_CONNECTION], "close");
    return true;
}

/* Whether a whole request is in rq->in: 1 yes (req filled), 0 not yet, -1 refused. */
static int request_parse(struct fleet_conn *c)
{
    struct fleet_rq *rq = c->rq;
    struct http_field f[F_N] = {
        [F_LENGTH] = {"content-length", false, NULL, 0},
        [F_AUTH] = {"authorization", false, NULL, 0},
        [F_TYPE] = {"content-type", false, NULL, 0},
        [F_CONNECTION] = {"connection", false, NULL, 0},
        [F_UPGRADE] = {"upgrade", false, NULL, 0},
        [F_VERSION] = {"sec-websocket-version", false, NULL, 0},
        [F_KEY] = {"sec-websocket-key", false, NULL, 0},
        [F_TE] = {"transfer-encoding", false, NULL, 0},
        [F_ORIGIN] = {"origin", false, NULL, 0},
    };
    memset(&rq->req, 0, sizeof rq->req);
    switch (http_request_scan(rq->in.data, rq->in.len, f, F_N, &rq->req.head)) {
    case HTTP_SCAN_INCOMPLETE: return 0;
    case HTTP_SCAN_BAD: refuse_framing(c, 400, "bad_request", "malformed request head"); return -1;
    case HTTP_SCAN_TOO_BIG:
        refuse_framing(c, 431, "bad_request", "request head over 16 KiB");
        return -1;
    case HTTP_SCAN_OK: break;
    }
    size_t body_len;
    if (!request_fill(c, f, &body_len)) return -1;
    if (rq->in.len < rq->req.head.consumed + body_len) {
        buf_reserve(&rq->in, rq->req.head.consumed + body_len - rq->in.len);
        return 0;
    }
    rq->req.body = rq->in.data + rq->req.head.consumed;
    rq->req.body_len = body_len;
    rq->req_len = rq->req.head.consumed + body_len;
    return 1;
}

/* Parses and dispatches requests while whole ones are buffered and none is pending. */
static void http_process(struct fleet_conn *c)
{
    fleet_conn_hold(c);
    while (c->open && c->rq && !c->rq->pending) {
        int r = c->rq->in.len ? request_parse(c) : 0;
        if (r <= 0) {
            if (r == 0) fleet_conn_set_reading(c, true);
            break;
        }
        c->rq->pending = true;
        c->rq->ep = FLEET_EP_OTHER;
        c->rq->req.started_ns = metrics_now_ns();
        fleet_conn_set_reading(c, false);
        c->in_dispatch = true;
        c->srv->o.on_request(c, &c->rq->req);
        c->in_dispatch = false;
    }
    fleet_conn_release(c);
}

/* Plaintext from the peer. */
static void on_plain(struct fleet_conn *c, char *data, size_t n)
{
    if (c->upgraded) {
        ws_feed(c, (uint8_t *)data, n);
        return;
    }
    if (!c->rq) return;
    if (c->rq->pending) {
        if (c->rq->more.len + n > FLEET_HTTP_MAX_BODY + HTTP_MAX_HEAD) {
            conn_close_now(c, FLEET_CLOSE_PROTOCOL);
            return;
        }
        buf_append(&c->rq->more, data, n);
        return;
    }
    buf_append(&c->rq->in, data, n);
    http_process(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    /* One loop thread: one receive slab for every socket. Large, so a read hands out
     * many frames at once (and they leave in one write per socket). */
    static char slab[256 << 10];
    b->base = slab;
    b->len = sizeof slab;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct fleet_conn *c = s->data;
    if (nread < 0) {
        conn_close_now(c, nread == UV_EOF ? FLEET_CLOSE_PEER : FLEET_CLOSE_ERROR);
        return;
    }
    if (nread == 0 || !c->open) return;
    if (!c->tls) {
        on_plain(c, b->base, (size_t)nread);
        return;
    }
    fleet_conn_hold(c);
    if (tls_feed(c->tls, b->base, (size_t)nread) < 0) conn_close_now(c, FLEET_CLOSE_ERROR);
    char plain[16384];
    while (c->open) {
        long r = tls_read(c->tls, plain, sizeof plain);
        if (r < 0) {
            flush_tls(c);
            conn_close_now(c, r == -ESHUTDOWN ? FLEET_CLOSE_PEER : FLEET_CLOSE_ERROR);
        }
        if (r <= 0) break;
        on_plain(c, plain, (size_t)r);
    }
    if (c->open) flush_tls(c);
    fleet_conn_release(c);
}

void fleet_conn_set_reading(struct fleet_conn *c, bool on)
{
    if (!c->open || c->failing || c->reading == on || uv_is_closing((uv_handle_t *)&c->tcp)) return;
    c->reading = on;
    if (on)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    else
        uv_read_stop((uv_stream_t *)&c->tcp);
}

/* ---- the listener ---- */

static void peer_name(struct fleet_conn *c)
{
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(c->peer, sizeof c->peer, "?");
    } else if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%d", ip,
                 ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "[%s]:%d", ip,
                 ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    struct fleet_http *h = server->data;
    if (status < 0) {
        log_warn("accept failed: %s", uv_strerror(status));
        return;
    }
    struct fleet_conn *c = xcalloc(1, sizeof *c);
    c->refs = 1;
    c->handles = 2;
    c->open = true;
    uv_tcp_init(h->loop, &c->tcp);
    uv_timer_init(h->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        c->open = false;
        close_handles(c);
        return;
    }
    if (h->nconns >= h->o.max_connections) {
        fleet_metrics_refusal("too_many_connections");
        log_warn("connection refused: %u connections open (--max-connections)", h->nconns);
        c->open = false;
        close_handles(c);
        return;
    }
    c->srv = h;
    c->next = h->conns;
    if (h->conns) h->conns->prev = c;
    h->conns = c;
    h->nconns++;
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    if (h->o.tls) c->tls = tls_session_new();
    c->rq = xcalloc(1, sizeof *c->rq);
    c->rq->deadline = uv_now(h->loop) + HTTP_REQUEST_MS;
    arm(c);
    fleet_conn_set_reading(c, true);
}

int fleet_http_listen(uv_loop_t *loop, const struct fleet_http_opts *o, struct fleet_http **out,
                      int *bound_port)
{
    struct sockaddr_storage ss;
    bool v6 = strchr(o->host, ':') != NULL;
    int r = v6 ? uv_ip6_addr(o->host, o->port, (struct sockaddr_in6 *)&ss)
               : uv_ip4_addr(o->host, o->port, (struct sockaddr_in *)&ss);
    if (r != 0) return r;
    struct fleet_http *h = xcalloc(1, sizeof *h);
    h->loop = loop;
    h->o = *o;
    uv_tcp_init(loop, &h->tcp);
    h->tcp.data = h;
    r = uv_tcp_bind(&h->tcp, (struct sockaddr *)&ss, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&h->tcp, 4096, on_connection);
    if (r != 0) {
        uv_close((uv_handle_t *)&h->tcp, (uv_close_cb)free);
        return r;
    }
    int sl = sizeof ss;
    uv_tcp_getsockname(&h->tcp, (struct sockaddr *)&ss, &sl);
    *bound_port =
        ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    *out = h;
    return 0;
}

void fleet_http_shutdown(struct fleet_http *h)
{
    while (h->conns)
        conn_close_now(h->conns, FLEET_CLOSE_LOCAL);
    uv_close((uv_handle_t *)&h->tcp, (uv_close_cb)free);
}
