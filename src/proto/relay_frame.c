/* relay_frame: hand-written protobuf codec for RelayMessageFrame (see relay_frame.h).
 *
 * Why by hand and not protoc-c output linked against libprotobuf-c:
 * - Zero copy and no allocation on the hot path. protobuf_c_message_unpack() mallocs
 *   the message tree and copies every bytes field, i.e. each ~60 KiB ciphertext record
 *   once more per frame, and needs a matching free; here the payload is a pointer into
 *   the WebSocket message and goes straight to the decryptor.
 * - One pass does parsing and the section 2.2 checks, and the rules are prost's (the
 *   peer's decoder), not protobuf-c's: strings must be UTF-8 (protobuf-c does not check),
 *   and a repeated oneof member is merged or replaced as prost does.
 * - Fuzzing sees it: libFuzzer instruments our library, not the Debian .so, so a fuzzer
 *   over a protobuf-c decoder would be blind to the code that parses untrusted bytes.
 * - The schema is fixed at 12 fields plus 6 tiny sub-messages; the whole codec is
 *   smaller than protoc-c's generated descriptors, and needs no build-time generator.
 * protobuf-c is still used, as an independent oracle in the tests: test_relay_frame
 * and fuzz_relay_frame compare our bytes with protoc-c's for the same schema.
 *
 * Wire format reminders: a field is a varint key (field number << 3 | wire type) and
 * a value; wire types 0 varint, 1 fixed64, 2 length-delimited, 3/4 group start/end
 * (only ever skipped), 5 fixed32. All our field numbers are below 16, so every key we
 * write is one byte. */
#include "proto/relay_frame.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto/utf8.h"
#include "util/mem.h"

enum wire_type {
    WT_VARINT = 0,
    WT_I64 = 1,
    WT_LEN = 2,
    WT_SGROUP = 3,
    WT_EGROUP = 4,
    WT_I32 = 5,
};

/* Field numbers of RelayMessageFrame; the body members are 5..10 in relay_body order. */
enum {
    F_VERSION = 1,
    F_STREAM_ID = 2,
    F_ACK = 3,
    F_ACK_BITS = 4,
    F_BODY_FIRST = 5, /* data */
    F_BODY_LAST = 10, /* handshake */
    F_TRACEPARENT = 11,
    F_TRACESTATE = 12,
};

/* prost stops at 100 nested messages/groups; only skipped groups can nest here. */
#define MAX_DEPTH 100

static bool str_utf8(struct relay_str s)
{
    return utf8_valid(s.ptr, s.len);
}

/* ---- checks -------------------------------------------------------------------- */

int relay_frame_check(const struct relay_frame *f)
{
    if (!str_utf8(f->stream_id)) return RELAY_E_UTF8;
    bool blank = utf8_all_white_space(f->stream_id.ptr, f->stream_id.len);
    if (!str_utf8(f->traceparent) || !str_utf8(f->tracestate)) return RELAY_E_UTF8;
    if (f->body == RELAY_BODY_RESET && !str_utf8(f->reason)) return RELAY_E_UTF8;
    if (f->version != RELAY_FRAME_VERSION) return RELAY_E_VERSION;
    if (blank) return RELAY_E_STREAM_ID;
    switch (f->body) {
    case RELAY_BODY_DATA: return f->payload_len ? 0 : RELAY_E_DATA;
    case RELAY_BODY_RESET: return f->reason.len ? 0 : RELAY_E_RESET;
    case RELAY_BODY_HANDSHAKE: return f->payload_len ? 0 : RELAY_E_HANDSHAKE;
    case RELAY_BODY_ACK:
    case RELAY_BODY_RESUME:
    case RELAY_BODY_HEARTBEAT: return 0;
    default: return RELAY_E_NO_BODY;
    }
}

/* ---- decoding ------------------------------------------------------------------ */

/* Unread input [p, end). */
struct cur {
    const uint8_t *p;
    const uint8_t *end;
};

/* A base-128 varint of at most 10 bytes whose 10th byte is 0 or 1, as prost accepts. */
static int get_varint(struct cur *c, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < 10 && c->p < c->end; i++) {
        uint8_t b = *c->p++;
        if (i == 9 && b > 1) break;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (b < 0x80) {
            *v = r;
            return 0;
        }
    }
    return RELAY_E_MALFORMED;
}

static int get_key(struct cur *c, uint32_t *field, unsigned *wt)
{
    uint64_t k;
    if (get_varint(c, &k) < 0 || k > UINT32_MAX || (k & 7) > WT_I32 || (k >> 3) == 0)
        return RELAY_E_MALFORMED;
    *field = (uint32_t)(k >> 3);
    *wt = (unsigned)(k & 7);
    return 0;
}

/* A length-delimited value: its bytes stay in the input, *sub covers them. */
static int get_len(struct cur *c, struct cur *sub)
{
    uint64_t n;
    if (get_varint(c, &n) < 0 || n > (uint64_t)(c->end - c->p)) return RELAY_E_MALFORMED;
    sub->p = c->p;
    sub->end = c->p + n;
    c->p = sub->end;
    return 0;
}

/* A uint32 field: prost reads a 64-bit varint and keeps the low 32 bits. */
static int get_u32(struct cur *c, unsigned wt, uint32_t *out)
{
    uint64_t v;
    if (wt != WT_VARINT || get_varint(c, &v) < 0) return RELAY_E_MALFORMED;
    *out = (uint32_t)v;
    return 0;
}

static int get_bytes(struct cur *c, unsigned wt, const uint8_t **ptr, size_t *len)
{
    struct cur sub;
    if (wt != WT_LEN || get_len(c, &sub) < 0) return RELAY_E_MALFORMED;
    *ptr = sub.p;
    *len = (size_t)(sub.end - sub.p);
    return 0;
}

static int get_str(struct cur *c, unsigned wt, struct relay_str *s)
{
    const uint8_t *p;
    size_t n;
    if (get_bytes(c, wt, &p, &n) < 0) return RELAY_E_MALFORMED;
    if (!utf8_valid(p, n)) return RELAY_E_UTF8;
    s->ptr = (const char *)p;
    s->len = n;
    return 0;
}

/* Skips one unknown field whose key has been read. */
static int skip_field(struct cur *c, uint32_t field, unsigned wt, unsigned depth)
{
    struct cur sub;
    uint64_t v;
    switch (wt) {
    case WT_VARINT: return get_varint(c, &v);
    case WT_LEN: return get_len(c, &sub);
    case WT_I64:
    case WT_I32: {
        size_t n = wt == WT_I64 ? 8 : 4;
        if ((size_t)(c->end - c->p) < n) return RELAY_E_MALFORMED;
        c->p += n;
        return 0;
    }
    case WT_SGROUP:
        if (depth >= MAX_DEPTH) return RELAY_E_MALFORMED;
        for (;;) {
            uint32_t f2;
            unsigned wt2;
            if (get_key(c, &f2, &wt2) < 0) return RELAY_E_MALFORMED;
            if (wt2 == WT_EGROUP) return f2 == field ? 0 : RELAY_E_MALFORMED;
            if (skip_field(c, f2, wt2, depth + 1) < 0) return RELAY_E_MALFORMED;
        }
    default: /* an end-group tag without its start */ return RELAY_E_MALFORMED;
    }
}

/* RelayData's segment fields, kept across merged occurrences of the data member but
 * not part of struct relay_frame: main never segments, so they only feed the check. */
struct segments {
    uint32_t index;
    uint32_t count;
};

/* Merges one occurrence of body member `kind` (its bytes in *c) into f. */
static int decode_body(struct cur *c, struct relay_frame *f, struct segments *seg)
{
    while (c->p < c->end) {
        uint32_t field;
        unsigned wt;
        int rc = get_key(c, &field, &wt);
        if (rc < 0) return rc;
        switch (f->body) {
        case RELAY_BODY_DATA:
            if (field == 1)
                rc = get_u32(c, wt, &f->seq);
            else if (field == 2)
                rc = get_u32(c, wt, &seg->index);
            else if (field == 3)
                rc = get_u32(c, wt, &seg->count);
            else if (field == 4)
                rc = get_bytes(c, wt, &f->payload, &f->payload_len);
            else
                rc = skip_field(c, field, wt, 1);
            break;
        case RELAY_BODY_RESUME:
            rc = field == 1 ? get_u32(c, wt, &f->next_seq) : skip_field(c, field, wt, 1);
            break;
        case RELAY_BODY_RESET:
            rc = field == 1 ? get_str(c, wt, &f->reason) : skip_field(c, field, wt, 1);
            break;
        case RELAY_BODY_HANDSHAKE:
            rc = field == 1 ? get_bytes(c, wt, &f->payload, &f->payload_len)
                            : skip_field(c, field, wt, 1);
            break;
        default: /* ack and heartbeat have no fields */ rc = skip_field(c, field, wt, 1); break;
        }
        if (rc < 0) return rc;
    }
    return 0;
}

int relay_frame_decode(const uint8_t *buf, size_t len, struct relay_frame *out)
{
    memset(out, 0, sizeof *out);
    if (len > RELAY_FRAME_MAX_LEN) return RELAY_E_TOO_BIG;
    struct segments seg = {0, 0};
    struct cur c = {buf, len ? buf + len : buf}; /* NULL + 0 is undefined */
    while (c.p < c.end) {
        uint32_t field;
        unsigned wt;
        int rc = get_key(&c, &field, &wt);
        if (rc < 0) return rc;
        if (field >= F_BODY_FIRST && field <= F_BODY_LAST) {
            struct cur sub;
            if (wt != WT_LEN || get_len(&c, &sub) < 0) return RELAY_E_MALFORMED;
            enum relay_body kind = (enum relay_body)(RELAY_BODY_DATA + (field - F_BODY_FIRST));
            if (out->body != kind) {
                /* prost: another member replaces the oneof with a fresh default one. */
                out->body = kind;
                out->seq = out->next_seq = 0;
                out->payload = NULL;
                out->payload_len = 0;
                out->reason = (struct relay_str){NULL, 0};
                seg = (struct segments){0, 0};
            }
            rc = decode_body(&sub, out, &seg);
        } else {
            switch (field) {
            case F_VERSION: rc = get_u32(&c, wt, &out->version); break;
            case F_STREAM_ID: rc = get_str(&c, wt, &out->stream_id); break;
            case F_ACK: rc = get_u32(&c, wt, &out->ack); break;
            case F_ACK_BITS: rc = get_u32(&c, wt, &out->ack_bits); break;
            case F_TRACEPARENT: rc = get_str(&c, wt, &out->traceparent); break;
            case F_TRACESTATE: rc = get_str(&c, wt, &out->tracestate); break;
            default: rc = skip_field(&c, field, wt, 0); break;
            }
        }
        if (rc < 0) return rc;
    }
    int rc = relay_frame_check(out);
    if (rc == 0 && out->body == RELAY_BODY_DATA && (seg.index != 0 || seg.count != 1))
        rc = RELAY_E_DATA;
    return rc;
}

/* ---- encoding ------------------------------------------------------------------ */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Key byte + length varint + n bytes. */
static size_t len_field_len(size_t n)
{
    return 1 + varint_len(n) + n;
}

static size_t u32_field_len(uint32_t v)
{
    return v ? 1 + varint_len(v) : 0;
}

static size_t body_len(const struct relay_frame *f)
{
    switch (f->body) {
    case RELAY_BODY_DATA: /* segment_index 0 is omitted; segment_count 1 is `18 01` */
        return u32_field_len(f->seq) + 2 + (f->payload_len ? len_field_len(f->payload_len) : 0);
    case RELAY_BODY_RESUME: return u32_field_len(f->next_seq);
    case RELAY_BODY_RESET: return f->reason.len ? len_field_len(f->reason.len) : 0;
    case RELAY_BODY_HANDSHAKE: return f->payload_len ? len_field_len(f->payload_len) : 0;
    default: return 0;
    }
}

size_t relay_frame_encoded_len(const struct relay_frame *f)
{
    size_t n = u32_field_len(f->version) + u32_field_len(f->ack) + u32_field_len(f->ack_bits);
    if (f->stream_id.len) n += len_field_len(f->stream_id.len);
    if (f->body != RELAY_BODY_NONE) n += len_field_len(body_len(f));
    if (f->traceparent.ptr) n += len_field_len(f->traceparent.len);
    if (f->tracestate.ptr) n += len_field_len(f->tracestate.len);
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_key(uint8_t *p, unsigned field, unsigned wt)
{
    *p++ = (uint8_t)(field << 3 | wt);
    return p;
}

static uint8_t *put_u32(uint8_t *p, unsigned field, uint32_t v)
{
    if (!v) return p; /* proto3: defaults are not written */
    return put_varint(put_key(p, field, WT_VARINT), v);
}

static uint8_t *put_bytes(uint8_t *p, unsigned field, const void *src, size_t n)
{
    p = put_varint(put_key(p, field, WT_LEN), n);
    if (n) memcpy(p, src, n);
    return p + n;
}

/* Each length at most the frame cap, so that summing them in relay_frame_encoded_len
 * cannot overflow. */
static bool lengths_bounded(const struct relay_frame *f)
{
    return f->stream_id.len <= RELAY_FRAME_MAX_LEN && f->payload_len <= RELAY_FRAME_MAX_LEN &&
           f->reason.len <= RELAY_FRAME_MAX_LEN && f->traceparent.len <= RELAY_FRAME_MAX_LEN &&
           f->tracestate.len <= RELAY_FRAME_MAX_LEN;
}

/* The checks of both encoders; the frame's length in *total. */
static int encode_check(const struct relay_frame *f, size_t *total)
{
    if (!lengths_bounded(f)) return RELAY_E_TOO_BIG;
    int rc = relay_frame_check(f);
    if (rc < 0) return rc;
    *total = relay_frame_encoded_len(f);
    return *total > RELAY_FRAME_MAX_LEN ? RELAY_E_TOO_BIG : 0;
}

/* The fields before the body's members, and the body's key and length. */
static uint8_t *put_prefix(const struct relay_frame *f, uint8_t *p)
{
    p = put_u32(p, F_VERSION, f->version);
    p = put_bytes(p, F_STREAM_ID, f->stream_id.ptr, f->stream_id.len); /* never empty */
    p = put_u32(p, F_ACK, f->ack);
    p = put_u32(p, F_ACK_BITS, f->ack_bits);
    /* The body member is written even when empty: its presence is the oneof case. */
    return put_varint(put_key(p, F_BODY_FIRST + (f->body - RELAY_BODY_DATA), WT_LEN), body_len(f));
}

int relay_frame_encode_head(const struct relay_frame *f, uint8_t *out, size_t *head_len)
{
    if ((f->body != RELAY_BODY_DATA && f->body != RELAY_BODY_HANDSHAKE) || f->traceparent.ptr ||
        f->tracestate.ptr)
        return RELAY_E_MALFORMED; /* the payload would not be last */
    size_t total;
    int rc = encode_check(f, &total);
    if (rc < 0) return rc;
    uint8_t *p = put_prefix(f, out);
    if (f->body == RELAY_BODY_DATA) {
        p = put_u32(p, 1, f->seq);
        p = put_u32(p, 3, 1); /* segment_count; segment_index 0 is omitted */
    }
    p = put_varint(put_key(p, f->body == RELAY_BODY_DATA ? 4 : 1, WT_LEN), f->payload_len);
    *head_len = (size_t)(p - out);
    return 0;
}

int relay_frame_encode(const struct relay_frame *f, uint8_t *out, size_t cap, size_t *out_len)
{
    size_t total;
    int rc = encode_check(f, &total);
    if (rc < 0) return rc;
    if (total > cap) return RELAY_E_NOSPC;

    uint8_t *p = put_prefix(f, out);
    switch (f->body) {
    case RELAY_BODY_DATA:
        p = put_u32(p, 1, f->seq);
        p = put_u32(p, 3, 1); /* segment_count; segment_index 0 is omitted */
        p = put_bytes(p, 4, f->payload, f->payload_len);
        break;
    case RELAY_BODY_RESUME: p = put_u32(p, 1, f->next_seq); break;
    case RELAY_BODY_RESET: p = put_bytes(p, 1, f->reason.ptr, f->reason.len); break;
    case RELAY_BODY_HANDSHAKE: p = put_bytes(p, 1, f->payload, f->payload_len); break;
    default: break;
    }
    if (f->traceparent.ptr) p = put_bytes(p, F_TRACEPARENT, f->traceparent.ptr, f->traceparent.len);
    if (f->tracestate.ptr) p = put_bytes(p, F_TRACESTATE, f->tracestate.ptr, f->tracestate.len);
    *out_len = (size_t)(p - out);
    return 0;
}

int relay_frame_encode_alloc(const struct relay_frame *f, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    /* Before sizing the allocation from them (relay_frame_encode checks again). */
    if (!lengths_bounded(f)) return RELAY_E_TOO_BIG;
    size_t cap = relay_frame_encoded_len(f);
    uint8_t *buf = xmalloc(cap ? cap : 1);
    int rc = relay_frame_encode(f, buf, cap, out_len);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}
