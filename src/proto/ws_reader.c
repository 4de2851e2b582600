/* ws_reader: see ws_reader.h. */
#include "proto/ws_reader.h"

#include <stdlib.h>
#include <string.h>

#include "proto/utf8.h"
#include "util/bigbuf.h"
#include "util/mem.h"

enum { RD_HEADER, RD_PAYLOAD, RD_DONE };

/* A gathered message buffer above this is freed once handed out rather than kept
 * for the next one: a connection should not hold a 16 MiB buffer while idle. */
#define WS_READER_KEEP 65536

void ws_reader_init(struct ws_reader *r, enum ws_role role, uint64_t max_frame, size_t max_message)
{
    memset(r, 0, sizeof *r);
    r->server = role == WS_ROLE_SERVER;
    r->max_frame = max_frame;
    r->max_message = max_message;
    r->state = RD_HEADER;
}

static bool is_control(int op)
{
    return op >= WS_OP_CLOSE && op <= WS_OP_PONG;
}

void ws_reader_free(struct ws_reader *r)
{
    if (r->msg_big)
        bigbuf_free(r->msg);
    else
        free(r->msg);
    r->msg = NULL;
    r->msg_len = r->msg_cap = 0;
    r->msg_big = false;
}

uint8_t *ws_reader_take(struct ws_reader *r)
{
    if (!r->msg_out || !r->msg_big) return NULL;
    uint8_t *m = r->msg;
    r->msg = NULL;
    r->msg_len = r->msg_cap = 0;
    r->msg_big = false;
    return m;
}

uint8_t *ws_reader_recv_area(const struct ws_reader *r, size_t *n)
{
    if (r->state != RD_PAYLOAD || r->msg_out || !r->msg || is_control(r->f.opcode) ||
        r->left < WS_READER_DIRECT_MIN)
        return NULL;
    *n = (size_t)r->left;
    return r->msg + r->msg_len;
}

/* Room for want bytes of gathered message, keeping what is there: a small one on
 * the heap (kept between messages), a large one from bigbuf (cached, huge pages:
 * see util/bigbuf.h) so a multi-megabyte request does not fault in fresh pages. */
static void msg_reserve(struct ws_reader *r, size_t want, bool more)
{
    if (want <= r->msg_cap && r->msg) return;
    if (want < BIGBUF_MIN) {
        r->msg = xrealloc(r->msg, want ? want : 1);
        r->msg_cap = want;
    } else if (r->msg_big) {
        r->msg = bigbuf_grow(r->msg, want, &r->msg_cap);
    } else {
        size_t cap;
        /* More fragments to come: the message will grow (see bigbuf_alloc_growable). */
        uint8_t *m = more ? bigbuf_alloc_growable(want, &cap) : bigbuf_alloc(want, &cap);
        if (r->msg_len) memcpy(m, r->msg, r->msg_len);
        free(r->msg);
        r->msg = m;
        r->msg_cap = cap;
        r->msg_big = true;
    }
}

bool ws_reader_done(const struct ws_reader *r)
{
    return r->state == RD_DONE;
}

size_t ws_close_payload(int code, uint8_t out[2])
{
    if (code == WS_CLOSE_NO_STATUS) return 0;
    out[0] = (uint8_t)(code >> 8);
    out[1] = (uint8_t)code;
    return 2;
}

static size_t fail(struct ws_reader *r, struct ws_event *ev, int code, size_t consumed)
{
    r->state = RD_DONE;
    ev->kind = WS_EV_ERROR;
    ev->code = code;
    ev->data = NULL;
    ev->len = 0;
    return consumed;
}

/* The header rules of ws_reader.h; 0 when the frame may be received. */
static int header_error(const struct ws_reader *r, const struct ws_frame *f)
{
    int op = f->opcode;
    if (f->rsv) return WS_CLOSE_PROTOCOL;
    if (!(op <= WS_OP_BINARY || is_control(op))) return WS_CLOSE_PROTOCOL;
    if (f->masked != r->server) return WS_CLOSE_PROTOCOL;
    if (is_control(op)) return f->fin && f->payload_len <= 125 ? 0 : WS_CLOSE_PROTOCOL;
    if (op == WS_OP_CONT && !r->in_msg) return WS_CLOSE_PROTOCOL;
    if (op != WS_OP_CONT && r->in_msg) return WS_CLOSE_PROTOCOL;
    if (f->payload_len > r->max_frame) return WS_CLOSE_TOO_BIG;
    if (f->payload_len > r->max_message - r->msg_len) return WS_CLOSE_TOO_BIG;
    return 0;
}

/* A whole, unmasked control payload: the event it makes. */
static size_t control_event(struct ws_reader *r, uint8_t *p, size_t n, struct ws_event *ev,
                            size_t consumed)
{
    r->state = RD_HEADER;
    ev->data = p;
    ev->len = n;
    if (r->f.opcode == WS_OP_PING) {
        ev->kind = WS_EV_PING;
        return consumed;
    }
    if (r->f.opcode == WS_OP_PONG) {
        ev->kind = WS_EV_PONG;
        return consumed;
    }
    /* Close (RFC 6455 section 7.4): a 2-byte status, then a UTF-8 reason. */
    int code = WS_CLOSE_NO_STATUS;
    if (n == 1) return fail(r, ev, WS_CLOSE_PROTOCOL, consumed);
    if (n >= 2) {
        code = p[0] << 8 | p[1];
        bool ok = (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
                  (code >= 3000 && code <= 4999);
        if (!ok) return fail(r, ev, WS_CLOSE_PROTOCOL, consumed);
        if (!utf8_valid(p + 2, n - 2)) return fail(r, ev, WS_CLOSE_INVALID_DATA, consumed);
        ev->data = p + 2;
        ev->len = n - 2;
    }
    r->state = RD_DONE;
    ev->kind = WS_EV_CLOSE;
    ev->code = code;
    return consumed;
}

/* A whole message at p: check text, then hand it out. or is the OR of its bytes
 * (from unmasking): without bit 7 the text is ASCII and needs no UTF-8 check. */
static size_t message_event(struct ws_reader *r, uint8_t *p, size_t n, uint8_t or,
                            struct ws_event *ev, size_t consumed)
{
    r->state = RD_HEADER;
    if (r->msg_op == WS_OP_TEXT && (or &0x80) && !utf8_valid(p, n))
        return fail(r, ev, WS_CLOSE_INVALID_DATA, consumed);
    ev->kind = WS_EV_MESSAGE;
    ev->opcode = r->msg_op;
    ev->data = p;
    ev->len = n;
    return consumed;
}

/* A data frame's payload p[0..n) made plain: unmasked in place, and the OR of its
 * bytes for a text message's ASCII test. A server's frames to a client carry no mask,
 * so there is nothing to undo, and a binary message needs no OR: no pass over its
 * bytes at all (a client's relay frames, 256 MiB of them per big download). */
static uint8_t payload_plain(const struct ws_reader *r, uint8_t *p, size_t n)
{
    if (r->f.masked) return ws_frame_unmask(p, n, r->f.mask);
    return r->msg_op == WS_OP_TEXT ? ws_frame_or(p, n) : 0;
}

/* The current data frame's payload is all in msg: unmask it; true when it was
 * the final frame (the message is complete). */
static bool data_frame_done(struct ws_reader *r)
{
    r->msg_or |= payload_plain(r, r->msg + r->frag_start, r->msg_len - r->frag_start);
    r->state = RD_HEADER;
    if (!r->f.fin) return false;
    r->in_msg = false;
    r->msg_out = true;
    return true;
}

size_t ws_reader_feed(struct ws_reader *r, uint8_t *buf, size_t n, struct ws_event *ev)
{
    ev->kind = WS_EV_NONE;
    ev->opcode = 0;
    ev->data = NULL;
    ev->len = 0;
    ev->code = 0;
    if (r->msg_out) {
        r->msg_out = false;
        r->msg_len = 0;
        if (r->msg_cap > WS_READER_KEEP) ws_reader_free(r);
    }
    size_t p = 0;
    while (p < n) {
        if (r->state == RD_DONE) return n;
        if (r->state == RD_HEADER) {
            /* The whole header in this input: decode it where it is. */
            if (r->hdr_len == 0 && n - p >= 2 && n - p >= ws_frame_header_size(buf[p + 1])) {
                ws_frame_decode(buf + p, n - p, &r->f);
                p += r->f.header_len;
            } else {
                size_t need = r->hdr_len < 2 ? 2 : ws_frame_header_size(r->hdr[1]);
                while (p < n && r->hdr_len < need) {
                    r->hdr[r->hdr_len++] = buf[p++];
                    if (r->hdr_len == 2) need = ws_frame_header_size(r->hdr[1]);
                }
                if (r->hdr_len < need) return p;
                ws_frame_decode(r->hdr, r->hdr_len, &r->f);
                r->hdr_len = 0;
            }
            int err = header_error(r, &r->f);
            if (err) return fail(r, ev, err, p);
            r->left = r->f.payload_len;
            size_t avail = n - p;
            if (is_control(r->f.opcode)) {
                if (r->left <= avail) { /* whole: unmask where it is */
                    uint8_t *pl = buf + p;
                    size_t len = (size_t)r->left;
                    ws_frame_unmask(pl, len, r->f.mask);
                    return control_event(r, pl, len, ev, p + len);
                }
                r->ctl_len = 0;
                r->state = RD_PAYLOAD;
                continue;
            }
            if (r->f.opcode != WS_OP_CONT) r->msg_op = r->f.opcode;
            if (r->f.fin && !r->in_msg && r->left <= avail) {
                /* The common frame: a whole message in this input, no copy. */
                uint8_t *pl = buf + p;
                size_t len = (size_t)r->left;
                uint8_t or = payload_plain(r, pl, len);
                return message_event(r, pl, len, or, ev, p + len);
            }
            /* Gathered: room for this frame's whole payload (bounded by the limits
             * just checked), appended to what earlier fragments left. */
            if (!r->in_msg) r->msg_or = 0;
            r->in_msg = true;
            msg_reserve(r, r->msg_len + (size_t)r->left, !r->f.fin);
            r->frag_start = r->msg_len;
            r->state = RD_PAYLOAD;
            if (r->left == 0 && data_frame_done(r))
                return message_event(r, r->msg, r->msg_len, r->msg_or, ev, p);
            continue;
        }
        /* RD_PAYLOAD: copy what there is of the current frame. */
        size_t k = n - p < r->left ? n - p : (size_t)r->left;
        if (is_control(r->f.opcode)) {
            memcpy(r->ctl + r->ctl_len, buf + p, k);
            r->ctl_len += k;
        } else {
            /* Bytes the caller read straight into ws_reader_recv_area are in place. */
            if (buf + p != r->msg + r->msg_len) memcpy(r->msg + r->msg_len, buf + p, k);
            r->msg_len += k;
        }
        p += k;
        r->left -= k;
        if (r->left > 0) return p;
        if (is_control(r->f.opcode)) {
            ws_frame_unmask(r->ctl, r->ctl_len, r->f.mask);
            return control_event(r, r->ctl, r->ctl_len, ev, p);
        }
        if (data_frame_done(r)) return message_event(r, r->msg, r->msg_len, r->msg_or, ev, p);
    }
    return p;
}
