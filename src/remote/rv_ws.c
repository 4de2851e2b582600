/* rv_ws: the rendezvous WebSocket client (see rv_ws.h).
 *
 * States run resolve -> connect -> (TLS) -> upgrade -> open -> closing. Receiving
 * goes through proto/ws_reader in the client role (the server's own state machine),
 * whose events this file acts on: Pings are answered, a Close is echoed, the
 * message cap and protocol violations close with the reader's code, Pongs clear
 * the deadline.
 *
 * Sending, as the local transport does it (transport/conn.c's cork): every frame of a
 * loop turn is built into the same reused block, one after the other, and the turn's
 * frames leave in one write (uv_write of the block's span: one writev), from a
 * prepare handle, before the loop next waits, or at once when a batch reaches 1 MiB.
 * The remote path used to make one write(2) per frame: 32,912 of them per 256 MiB of
 * process output, half the executor's time. A frame is built once, in place: the
 * caller reserves room for its payload (rv_ws_reserve) and writes it there (the relay
 * encrypts straight into it), the header goes in front and the mask is applied where
 * the bytes lie. Blocks return to a small free list when their writes complete, so a
 * stream reuses the same warm memory instead of fresh pages. Frames of one message are
 * queued back to back and frames never interleave. Every frame may carry a completion
 * callback, run when its write completes, which is how a relay virtual stream accounts
 * its queued bytes. */
#include "remote/rv_ws.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "crypto/random.h"
#include "transport/tls.h"
#include "proto/base64.h"
#include "proto/http_upgrade.h"
#include "util/buf.h"
#include "util/mem.h"
#include "proto/ws_frame.h"
#include "proto/ws_reader.h"

enum rv_state { RV_RESOLVING, RV_CONNECTING, RV_UPGRADING, RV_OPEN, RV_CLOSING };

#define RV_BLOCK_SIZE (1u << 20)  /* frames are built into blocks of this size */
#define RV_FREE_BLOCKS 4          /* blocks kept for reuse once written */
#define RV_BATCH_BUFS 64          /* spans in one batch at most */
#define RV_FLUSH_BYTES (1u << 20) /* a batch this large leaves at once */
#define RV_DRAINED (512u << 10)   /* below this much queued, on_drained is called */

/* Memory frames are built in: the socket's current block (its `tail`), batched spans
 * and write requests each hold a reference. */
struct rv_block {
    struct rv_block *next; /* on the free list */
    unsigned refs;
    size_t cap, used;
    uint8_t data[];
};

/* A frame's completion callback, with the length it reports. */
struct rv_done {
    rv_ws_sent_fn fn;
    void *arg;
    size_t len;
};

/* The frames of this loop turn, not yet handed to the socket. */
struct rv_batch {
    uv_buf_t bufs[RV_BATCH_BUFS];
    struct rv_block *blk[RV_BATCH_BUFS]; /* each span's block (one reference each) */
    unsigned nbufs;
    struct rv_done *dones; /* owned; handed to the write request at the flush */
    unsigned ndones, cap_dones;
    size_t bytes;
};

struct rv_ws {
    uv_loop_t *loop;
    const struct rv_ws_ops *ops;
    void *arg;
    enum rv_state state;
    struct rv_ws_url url;
    char **headers; /* owned copies of the extra header lines */
    uint64_t ping_ms, pong_deadline_ms;
    size_t max_message, fragment;
    bool text, no_ping;
    bool reading; /* uv_read_start is in effect */
    uv_getaddrinfo_t gai;
    uv_connect_t connect_req;
    uv_tcp_t tcp;
    uv_timer_t timer;             /* connect deadline, then the Ping / Pong timer */
    int pending;                  /* handles and requests whose callbacks are still due */
    bool resolving;               /* gai is in flight */
    struct addrinfo *addrs;       /* resolved addresses (owned), tried in order */
    struct addrinfo *next_addr;   /* the next one to try after a failed connect */
    bool recycling;               /* tcp is closing to be re-initialised for the next address */
    struct tls_session *tls;      /* wss only */
    bool request_sent;            /* the upgrade request is out */
    char key[25];                 /* Sec-WebSocket-Key (base64 of 16 random bytes) */
    struct buf head;              /* response head received so far */
    struct ws_reader rd;          /* frames from the rendezvous, once open */
    bool close_sent;              /* our Close is out: nothing may follow it */
    uint64_t ping_sent_at;        /* uv_now of the outstanding Ping, 0 if none */
    size_t queued;                /* bytes batched or in uv_write requests not yet completed */
    int http_status;              /* a refused upgrade's status */
    const char *reason;           /* why it closed (first reason wins) */
    uv_prepare_t flusher;         /* sends the batch before the loop waits */
    struct rv_batch batch;        /* this loop turn's frames */
    struct rv_block *tail;        /* the block frames are built into (one reference) */
    struct rv_block *free_blocks; /* written blocks kept for reuse */
    unsigned nfree;
    size_t resv_at, resv_len; /* the reserved frame: its offset in tail, payload bytes */
    bool reserved;
};

struct rv_wreq {
    uv_write_t req;
    struct rv_ws *ws;
    size_t wire_len;       /* bytes on the socket (ciphertext for wss) */
    char *mem;             /* a write of its own (the upgrade, TLS records), or NULL */
    struct rv_done *dones; /* the completions of the frames it carries (owned) */
    unsigned ndones, nblk;
    struct rv_block *blk[RV_BATCH_BUFS]; /* the blocks it spans (one reference each) */
};

int rv_ws_parse_url(const char *url, struct rv_ws_url *u)
{
    memset(u, 0, sizeof *u);
    const char *p;
    if (strncmp(url, "ws://", 5) == 0) {
        p = url + 5;
    } else if (strncmp(url, "wss://", 6) == 0) {
        p = url + 6;
        u->tls = 1;
    } else {
        return -EINVAL;
    }
    const char *host_end, *rest;
    if (*p == '[') {
        host_end = strchr(p, ']');
        if (!host_end) return -EINVAL;
        p++;
        rest = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/?#");
        rest = host_end;
    }
    size_t hn = (size_t)(host_end - p);
    if (hn == 0 || hn >= sizeof u->host || memchr(p, '@', hn)) return -EINVAL;
    memcpy(u->host, p, hn);
    u->port = u->tls ? 443 : 80;
    if (*rest == ':') {
        long v = 0;
        const char *d = rest + 1;
        if (!isdigit((unsigned char)*d)) return -EINVAL;
        for (; isdigit((unsigned char)*d); d++) {
            v = v * 10 + (*d - '0');
            if (v > 65535) return -EINVAL;
        }
        if (v == 0) return -EINVAL;
        u->port = (int)v;
        rest = d;
    }
    if (*rest && *rest != '/' && *rest != '?') return -EINVAL;
    size_t tn = strcspn(rest, "#");
    if (tn + 2 > sizeof u->target) return -EINVAL;
    if (*rest != '/') u->target[0] = '/';
    strncat(u->target, rest, tn);
    for (const char *c = u->target; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) return -EINVAL;
    return 0;
}

void rv_ws_url_redacted(const char *url, char *out, size_t n)
{
    size_t k = strcspn(url, "?#");
    snprintf(out, n, "%.*s%s", (int)k, url, url[k] ? "?<redacted>" : "");
}

size_t rv_ws_queued(const struct rv_ws *ws)
{
    return ws->queued;
}

static void handle_closed(uv_handle_t *h);
static void rv_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void rv_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void batch_flush(struct rv_ws *ws);

/* Ends the connection once; on_closed runs after the last handle closed. */
static void finish(struct rv_ws *ws, const char *reason)
{
    if (!ws->reason) ws->reason = reason;
    if (ws->state == RV_CLOSING) return;
    ws->state = RV_CLOSING;
    batch_flush(ws); /* a Close just queued goes out before the socket closes */
    if (ws->resolving) uv_cancel((uv_req_t *)&ws->gai);
    uv_close((uv_handle_t *)&ws->timer, handle_closed);
    uv_close((uv_handle_t *)&ws->flusher, handle_closed);
    /* A tcp handle being recycled is already closing; its callback finishes it. */
    if (!ws->recycling) uv_close((uv_handle_t *)&ws->tcp, handle_closed);
}

static void release(struct rv_ws *ws)
{
    ws->ops->on_closed(ws->arg, ws->http_status, ws->reason ? ws->reason : "local_shutdown");
    if (ws->tail && --ws->tail->refs == 0) free(ws->tail);
    while (ws->free_blocks) {
        struct rv_block *b = ws->free_blocks;
        ws->free_blocks = b->next;
        free(b);
    }
    free(ws->batch.dones);
    if (ws->addrs) uv_freeaddrinfo(ws->addrs);
    ws_reader_free(&ws->rd);
    tls_session_free(ws->tls);
    buf_free(&ws->head);
    for (char **h = ws->headers; h && *h; h++)
        free(*h);
    free(ws->headers);
    free(ws);
}

static void handle_closed(uv_handle_t *h)
{
    struct rv_ws *ws = h->data;
    if (--ws->pending == 0) release(ws);
}

void rv_ws_close(struct rv_ws *ws, const char *reason)
{
    finish(ws, reason);
}

/* Lets go of a block: kept for reuse once nothing holds it, up to RV_FREE_BLOCKS. */
static void block_unref(struct rv_ws *ws, struct rv_block *b)
{
    if (--b->refs) return;
    if (b->cap != RV_BLOCK_SIZE || ws->nfree >= RV_FREE_BLOCKS) {
        free(b);
        return;
    }
    b->next = ws->free_blocks;
    ws->free_blocks = b;
    ws->nfree++;
}

/* A write is over: its frames' completions run, its memory goes. */
static void wreq_finish(struct rv_ws *ws, struct rv_wreq *w, int status)
{
    ws->queued -= w->wire_len;
    for (unsigned i = 0; i < w->ndones; i++)
        w->dones[i].fn(w->dones[i].arg, w->dones[i].len, status);
    for (unsigned i = 0; i < w->nblk; i++)
        block_unref(ws, w->blk[i]);
    free(w->dones);
    free(w->mem);
    free(w);
}

static void write_done(uv_write_t *req, int status)
{
    struct rv_wreq *w = (struct rv_wreq *)req;
    struct rv_ws *ws = w->ws;
    wreq_finish(ws, w, status);
    if (status < 0) finish(ws, "write_error");
    if (ws->state == RV_OPEN && ws->queued < RV_DRAINED && ws->ops->on_drained)
        ws->ops->on_drained(ws->arg);
    if (--ws->pending == 0) release(ws);
}

/* Queues plaintext bytes on the socket (encrypting them for wss), outside the batch:
 * the upgrade request, before any frame. Takes mem. */
static int raw_write(struct rv_ws *ws, char *mem, size_t len)
{
    if (ws->state == RV_CLOSING) {
        free(mem);
        return -ENOTCONN;
    }
    char *wire = mem;
    size_t wire_len = len;
    if (ws->tls) {
        int r = len ? tls_write(ws->tls, mem, len) : 0;
        free(mem);
        if (r < 0) {
            finish(ws, "write_error");
            return -EIO;
        }
        wire_len = tls_take_output(ws->tls, &wire);
        if (wire_len == 0) {
            /* Nothing to put on the wire (cannot happen for len > 0): complete now
             * through the same path so done stays asynchronous. */
            wire = xmalloc(1);
        }
    }
    struct rv_wreq *w = xcalloc(1, sizeof *w);
    w->ws = ws;
    w->wire_len = wire_len;
    w->mem = wire;
    uv_buf_t b = uv_buf_init(wire, (unsigned)wire_len);
    int r = uv_write(&w->req, (uv_stream_t *)&ws->tcp, &b, 1, write_done);
    if (r < 0) {
        free(wire);
        free(w);
        finish(ws, "write_error");
        return r;
    }
    ws->queued += wire_len;
    ws->pending++;
    return 0;
}

/* TLS handshake records produced by the session itself. */
static void tls_flush(struct rv_ws *ws)
{
    char *ct;
    size_t n = tls_take_output(ws->tls, &ct);
    if (n == 0) return;
    struct rv_wreq *w = xcalloc(1, sizeof *w);
    w->ws = ws;
    w->wire_len = n;
    w->mem = ct;
    uv_buf_t b = uv_buf_init(ct, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&ws->tcp, &b, 1, write_done) < 0) {
        free(ct);
        free(w);
        finish(ws, "write_error");
        return;
    }
    ws->queued += n;
    ws->pending++;
}

/* Random bytes for masking keys, drawn from OpenSSL in batches. */
static void mask_bytes(uint8_t *out, size_t n)
{
    static uint8_t pool[4096];
    static size_t left;
    while (n) {
        if (left == 0) {
            crypto_random_bytes(pool, sizeof pool);
            left = sizeof pool;
        }
        size_t k = n < left ? n : left;
        memcpy(out, pool + sizeof pool - left, k);
        left -= k;
        out += k;
        n -= k;
    }
}

/* ---- the batch ---- */

/* Hands this turn's frames to the socket: one uv_write of every span (for wss one
 * TLS write of them all), which libuv tries at once with one writev. */
static void batch_flush(struct rv_ws *ws)
{
    struct rv_batch *b = &ws->batch;
    if (uv_is_active((uv_handle_t *)&ws->flusher)) uv_prepare_stop(&ws->flusher);
    if (b->nbufs == 0) return;
    struct rv_wreq *w = xcalloc(1, sizeof *w);
    w->ws = ws;
    w->dones = b->dones;
    w->ndones = b->ndones;
    size_t n = b->bytes;
    uv_buf_t one, *bufs = b->bufs;
    unsigned nbufs = b->nbufs;
    bool tls_failed = false;
    if (ws->tls) {
        for (unsigned i = 0; i < nbufs && !tls_failed; i++)
            tls_failed = tls_write(ws->tls, b->bufs[i].base, b->bufs[i].len) < 0;
        for (unsigned i = 0; i < nbufs; i++)
            block_unref(ws, b->blk[i]);
        size_t wire = tls_take_output(ws->tls, &w->mem);
        if (!w->mem) w->mem = xmalloc(1);
        ws->queued = ws->queued - n + wire;
        n = wire;
        one = uv_buf_init(w->mem, (unsigned)wire);
        bufs = &one;
        nbufs = 1;
    } else {
        w->nblk = nbufs;
        memcpy(w->blk, b->blk, nbufs * sizeof *b->blk);
    }
    w->wire_len = n;
    b->dones = NULL;
    b->ndones = b->cap_dones = 0;
    b->nbufs = 0;
    b->bytes = 0;
    ws->pending++;
    /* A write libuv refuses at once (the socket is going) fails its frames here, as
     * a refused write of one frame did before batching. */
    int r = uv_write(&w->req, (uv_stream_t *)&ws->tcp, bufs, nbufs, write_done);
    if (r == 0 && tls_failed) {
        finish(ws, "write_error"); /* TLS refused the bytes: the frames fail at the close */
        return;
    }
    if (r < 0) {
        ws->pending--;
        wreq_finish(ws, w, UV_ECANCELED);
        finish(ws, "write_error");
    }
}

static void flusher_cb(uv_prepare_t *h)
{
    batch_flush(h->data);
}

/* A block with room for n bytes: the free list's, or a new one (of its own size when
 * larger than a block). */
static struct rv_block *block_get(struct rv_ws *ws, size_t n)
{
    struct rv_block *b;
    if (n <= RV_BLOCK_SIZE && ws->free_blocks) {
        b = ws->free_blocks;
        ws->free_blocks = b->next;
        ws->nfree--;
    } else {
        size_t cap = n > RV_BLOCK_SIZE ? n : RV_BLOCK_SIZE;
        b = xmalloc(sizeof *b + cap);
        b->cap = cap;
    }
    b->refs = 1;
    b->used = 0;
    return b;
}

/* Room for a frame of n payload bytes at the end of the tail block; the payload's
 * place. The tail is written from its start again when nothing else holds it (a block
 * made for one large message is let go then). */
static uint8_t *frame_reserve(struct rv_ws *ws, size_t n)
{
    size_t need = ws_frame_header_len(n, true) + n;
    struct rv_block *t = ws->tail;
    if (t && t->refs == 1 && t->cap != RV_BLOCK_SIZE) {
        block_unref(ws, t); /* a large message's own block is not kept for small ones */
        t = ws->tail = NULL;
    }
    if (t && t->refs == 1) t->used = 0;
    if (!t || t->cap - t->used < need) {
        if (t) block_unref(ws, t);
        t = ws->tail = block_get(ws, need);
    }
    ws->resv_at = t->used;
    ws->resv_len = n;
    ws->reserved = true;
    return t->data + t->used + ws_frame_header_len(n, true);
}

/* Frames the reserved payload (header in front, masked in place) into the batch. */
static void frame_commit(struct rv_ws *ws, int op, bool fin, rv_ws_sent_fn done, void *done_arg,
                         size_t done_len)
{
    struct rv_block *t = ws->tail;
    size_t n = ws->resv_len, hl = ws_frame_header_len(n, true);
    uint8_t *f = t->data + ws->resv_at;
    uint8_t key[4];
    mask_bytes(key, 4);
    ws_frame_encode(f, fin, op, n, key);
    ws_frame_unmask(f + hl, n, key); /* word-wise: a byte loop was a quarter of our CPU */
    t->used = ws->resv_at + hl + n;
    ws->reserved = false;
    struct rv_batch *b = &ws->batch;
    if (b->nbufs == RV_BATCH_BUFS) batch_flush(ws);
    uv_buf_t *last = b->nbufs ? &b->bufs[b->nbufs - 1] : NULL;
    if (last && b->blk[b->nbufs - 1] == t && (uint8_t *)last->base + last->len == f) {
        last->len += hl + n; /* frames of one turn lie back to back: one span */
    } else {
        b->bufs[b->nbufs] = uv_buf_init((char *)f, (unsigned)(hl + n));
        b->blk[b->nbufs++] = t;
        t->refs++;
    }
    if (done) {
        if (b->ndones == b->cap_dones) {
            b->cap_dones = b->cap_dones ? 2 * b->cap_dones : 8;
            b->dones = xrealloc(b->dones, b->cap_dones * sizeof *b->dones);
        }
        b->dones[b->ndones++] = (struct rv_done){done, done_arg, done_len};
    }
    b->bytes += hl + n;
    ws->queued += hl + n;
    if (b->bytes >= RV_FLUSH_BYTES)
        batch_flush(ws);
    else if (!uv_is_active((uv_handle_t *)&ws->flusher))
        uv_prepare_start(&ws->flusher, flusher_cb);
}

uint8_t *rv_ws_reserve(struct rv_ws *ws, size_t n)
{
    if (ws->state != RV_OPEN || ws->close_sent) return NULL;
    return frame_reserve(ws, n);
}

int rv_ws_commit(struct rv_ws *ws, rv_ws_sent_fn done, void *done_arg, size_t done_len)
{
    if (!ws->reserved) return -EINVAL;
    if (ws->state != RV_OPEN || ws->close_sent) {
        ws->reserved = false;
        return -ENOTCONN;
    }
    frame_commit(ws, ws->text ? WS_OP_TEXT : WS_OP_BINARY, true, done, done_arg, done_len);
    return 0;
}

int rv_ws_send(struct rv_ws *ws, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg)
{
    if (ws->state != RV_OPEN || ws->close_sent) return -ENOTCONN;
    /* Client frames: masked, headers from the shared codec (proto/ws_frame). Frames
     * of one message are queued back to back, so nothing interleaves with them;
     * done rides on the last one. */
    size_t off = 0;
    int op = ws->text ? WS_OP_TEXT : WS_OP_BINARY;
    do {
        size_t k = n - off;
        if (ws->fragment && k > ws->fragment) k = ws->fragment;
        bool fin = off + k == n;
        uint8_t *dst = frame_reserve(ws, k);
        if (k) memcpy(dst, p + off, k);
        frame_commit(ws, off == 0 ? op : WS_OP_CONT, fin, fin ? done : NULL, done_arg, n);
        off += k;
    } while (off < n);
    return 0;
}

void rv_ws_set_reading(struct rv_ws *ws, bool on)
{
    if (ws->state != RV_OPEN || on == ws->reading) return;
    ws->reading = on;
    if (on)
        uv_read_start((uv_stream_t *)&ws->tcp, rv_alloc, rv_read);
    else
        uv_read_stop((uv_stream_t *)&ws->tcp);
}

/* Writes one control frame, masked like every client frame, in turn with the data
 * frames of the batch; nothing after a Close. */
static void send_control(struct rv_ws *ws, int op, const uint8_t *p, size_t n)
{
    if (ws->close_sent || ws->state != RV_OPEN) return;
    if (op == WS_OP_CLOSE) ws->close_sent = true;
    uint8_t *dst = frame_reserve(ws, n);
    if (n) memcpy(dst, p, n);
    frame_commit(ws, op, true, NULL, NULL, 0);
}

/* Sends our Close with code (the echo of the peer's, or the reader's verdict on
 * a violation) and ends: the write is queued before the handle closes. */
static void close_with(struct rv_ws *ws, int code, const char *reason)
{
    uint8_t p[2];
    send_control(ws, WS_OP_CLOSE, p, ws_close_payload(code, p));
    finish(ws, reason);
}

/* Frames from the rendezvous (buf is unmasked in place, so it must be writable). */
static void feed_frames(struct rv_ws *ws, uint8_t *p, size_t n)
{
    uint8_t *e = p + n;
    while (p < e && ws->state == RV_OPEN) {
        struct ws_event ev;
        p += ws_reader_feed(&ws->rd, p, (size_t)(e - p), &ev);
        switch (ev.kind) {
        case WS_EV_MESSAGE:
            /* Text is not part of the relay protocol: the executor drops it (a
             * JSON-RPC destination speaks text, opts.text). */
            if ((ev.opcode == WS_OP_BINARY || (ws->text && ev.opcode == WS_OP_TEXT)) &&
                !ws->close_sent)
                ws->ops->on_binary(ws->arg, ev.data, ev.len);
            break;
        case WS_EV_PING: send_control(ws, WS_OP_PONG, ev.data, ev.len); break;
        case WS_EV_PONG: ws->ping_sent_at = 0; break;
        case WS_EV_CLOSE: close_with(ws, ev.code, "peer_close"); break;
        case WS_EV_ERROR:
            /* Over the message cap (1009) or a protocol violation. */
            close_with(ws, ev.code, "read_error");
            break;
        case WS_EV_NONE: break;
        }
    }
}

static void on_timer(uv_timer_t *t);

/* The upgrade response: wait for its whole head, check it (proto/http_upgrade, the
 * clients' one 101 parser), then go open; bytes after the head are frames. */
static void on_plaintext(struct rv_ws *ws, uint8_t *p, size_t n)
{
    if (ws->state == RV_OPEN) {
        feed_frames(ws, p, n);
        return;
    }
    if (ws->state != RV_UPGRADING) return;
    buf_append(&ws->head, p, n);
    struct http_response_info info;
    switch (http_upgrade_response_parse(ws->head.data, ws->head.len, ws->key, &info)) {
    case HTTP_RESPONSE_INCOMPLETE: return;
    case HTTP_RESPONSE_UPGRADED: break;
    case HTTP_RESPONSE_REFUSED:
        ws->http_status = info.status;
        finish(ws, "connect_failed");
        return;
    case HTTP_RESPONSE_BAD: finish(ws, "connect_failed"); return;
    }
    ws_reader_init(&ws->rd, WS_ROLE_CLIENT, ws->max_message, ws->max_message);
    ws->state = RV_OPEN;
    ws->reading = true;
    if (ws->no_ping)
        uv_timer_stop(&ws->timer);
    else
        uv_timer_start(&ws->timer, on_timer, ws->ping_ms, ws->ping_ms);
    ws->ops->on_open(ws->arg);
    if (ws->state != RV_OPEN) return;
    size_t rest = ws->head.len - info.consumed;
    if (rest) {
        uint8_t *copy = xmemdup(ws->head.data + info.consumed, rest);
        buf_free(&ws->head);
        feed_frames(ws, copy, rest);
        free(copy);
    } else {
        buf_free(&ws->head);
    }
}

static void send_upgrade_request(struct rv_ws *ws)
{
    ws->request_sent = true;
    uint8_t nonce[16];
    mask_bytes(nonce, sizeof nonce);
    ws->key[base64_encode(nonce, sizeof nonce, ws->key)] = '\0';
    struct buf r;
    buf_init(&r);
    bool v6 = strchr(ws->url.host, ':') != NULL;
    bool default_port = ws->url.port == (ws->url.tls ? 443 : 80);
    buf_printf(&r, "GET %s HTTP/1.1\r\nHost: %s%s%s", ws->url.target, v6 ? "[" : "", ws->url.host,
               v6 ? "]" : "");
    if (!default_port) buf_printf(&r, ":%d", ws->url.port);
    /* The reference's header order (docs/REMOTE.md §8.3). */
    buf_printf(&r,
               "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: %s\r\n",
               ws->key);
    for (char **h = ws->headers; h && *h; h++)
        buf_printf(&r, "%s\r\n", *h);
    buf_puts(&r, "\r\n");
    size_t len = r.len;
    raw_write(ws, buf_steal(&r), len);
}

static void rv_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char slab[65536];
    b->base = slab;
    b->len = sizeof slab;
}

static void rv_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct rv_ws *ws = s->data;
    if (nread == 0) return;
    if (nread < 0) {
        finish(ws, ws->state == RV_OPEN ? (nread == UV_EOF ? "peer_close" : "read_error")
                                        : "connect_failed");
        return;
    }
    if (!ws->tls) {
        on_plaintext(ws, (uint8_t *)b->base, (size_t)nread);
        return;
    }
    if (tls_feed(ws->tls, b->base, (size_t)nread) < 0) {
        finish(ws, "read_error");
        return;
    }
    static uint8_t pt[65536];
    for (;;) {
        long k = tls_read(ws->tls, pt, sizeof pt);
        tls_flush(ws); /* handshake records, alerts */
        if (ws->state == RV_CLOSING) return;
        if (k < 0) {
            finish(ws, ws->state == RV_OPEN ? "read_error" : "connect_failed");
            return;
        }
        if (!ws->request_sent && tls_is_established(ws->tls)) send_upgrade_request(ws);
        if (k == 0) return;
        on_plaintext(ws, pt, (size_t)k);
        if (ws->state == RV_CLOSING) return;
    }
}

static void connect_next(struct rv_ws *ws);

/* The recycled tcp handle is closed: a fresh one for the next address. */
static void tcp_recycled(uv_handle_t *h)
{
    struct rv_ws *ws = h->data;
    ws->recycling = false;
    if (ws->state == RV_CLOSING) {
        if (--ws->pending == 0) release(ws);
        return;
    }
    uv_tcp_init(ws->loop, &ws->tcp);
    ws->tcp.data = ws;
    connect_next(ws);
}

static void on_connected(uv_connect_t *req, int status)
{
    struct rv_ws *ws = req->data;
    ws->pending--;
    if (ws->state == RV_CLOSING) {
        if (ws->pending == 0) release(ws);
        return;
    }
    if (status < 0) {
        if (!ws->next_addr) {
            finish(ws, "connect_failed");
            return;
        }
        /* Another address of the name (say IPv4 after IPv6): a failed handle cannot
         * connect again, so close it and start over with a new one. */
        ws->recycling = true;
        uv_close((uv_handle_t *)&ws->tcp, tcp_recycled);
        return;
    }
    uv_tcp_nodelay(&ws->tcp, 1);
    ws->state = RV_UPGRADING;
    uv_read_start((uv_stream_t *)&ws->tcp, rv_alloc, rv_read);
    if (ws->url.tls) {
        char err[256];
        ws->tls = tls_client_session_new(ws->url.host, err, sizeof err);
        if (!ws->tls) {
            log_warn("remote: %s", err);
            finish(ws, "connect_failed");
            return;
        }
        tls_flush(ws); /* ClientHello */
    } else {
        send_upgrade_request(ws);
    }
}

static void connect_next(struct rv_ws *ws)
{
    struct addrinfo *ai = ws->next_addr;
    ws->next_addr = ai->ai_next;
    ws->connect_req.data = ws;
    int r = uv_tcp_connect(&ws->connect_req, &ws->tcp, ai->ai_addr, on_connected);
    if (r < 0) {
        finish(ws, "connect_failed");
        return;
    }
    ws->pending++;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct rv_ws *ws = req->data;
    ws->resolving = false;
    ws->pending--;
    if (ws->state == RV_CLOSING || status < 0 || !res) {
        if (res) uv_freeaddrinfo(res);
        if (ws->state != RV_CLOSING)
            finish(ws, "connect_failed");
        else if (ws->pending == 0)
            release(ws);
        return;
    }
    ws->state = RV_CONNECTING;
    ws->addrs = ws->next_addr = res;
    connect_next(ws);
}

static void on_timer(uv_timer_t *t)
{
    struct rv_ws *ws = t->data;
    if (ws->state != RV_OPEN) {
        finish(ws, "connect_failed"); /* the connect deadline */
        return;
    }
    uint64_t now = uv_now(ws->loop);
    if (ws->ping_sent_at) {
        if (now - ws->ping_sent_at >= ws->pong_deadline_ms) finish(ws, "pong_timeout");
        return; /* no new Ping while one is outstanding */
    }
    if (ws->close_sent) return;
    ws->ping_sent_at = now ? now : 1;
    send_control(ws, WS_OP_PING, NULL, 0);
}

int rv_ws_open(uv_loop_t *loop, const struct rv_ws_opts *opts, const struct rv_ws_ops *ops,
               void *arg, struct rv_ws **out)
{
    struct rv_ws *ws = xcalloc(1, sizeof *ws);
    if (rv_ws_parse_url(opts->url, &ws->url) < 0) {
        free(ws);
        return -EINVAL;
    }
    ws->loop = loop;
    ws->ops = ops;
    ws->arg = arg;
    ws->ping_ms = opts->ping_ms ? opts->ping_ms : 30000;
    ws->pong_deadline_ms = opts->pong_deadline_ms ? opts->pong_deadline_ms : 60000;
    ws->max_message = opts->max_message ? opts->max_message : RV_WS_MAX_MESSAGE;
    ws->fragment = opts->fragment;
    ws->text = opts->text;
    ws->no_ping = opts->no_ping;
    size_t nh = 0;
    for (const char *const *h = opts->headers; h && *h; h++)
        nh++;
    ws->headers = xcalloc(nh + 1, sizeof *ws->headers);
    for (size_t i = 0; i < nh; i++)
        ws->headers[i] = xstrdup(opts->headers[i]);
    buf_init(&ws->head);
    uv_tcp_init(loop, &ws->tcp);
    uv_timer_init(loop, &ws->timer);
    uv_prepare_init(loop, &ws->flusher);
    ws->tcp.data = ws->timer.data = ws->flusher.data = ws;
    ws->pending = 3; /* tcp + timer + flusher */
    uv_timer_start(&ws->timer, on_timer,
                   opts->connect_timeout_ms ? opts->connect_timeout_ms : 10000, 0);
    ws->gai.data = ws;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char port[8];
    snprintf(port, sizeof port, "%d", ws->url.port);
    ws->state = RV_RESOLVING;
    int r = uv_getaddrinfo(loop, &ws->gai, on_resolved, ws->url.host, port, &hints);
    if (r < 0) {
        finish(ws, "connect_failed");
    } else {
        ws->resolving = true;
        ws->pending++;
    }
    *out = ws;
    return 0;
}
