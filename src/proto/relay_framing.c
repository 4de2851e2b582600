/* relay_framing: length-prefixed JSON-RPC messages over plaintext records (see
 * relay_framing.h). */
#include "proto/relay_framing.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

/* ---- outbound ------------------------------------------------------------------ */

int relay_framer_init(struct relay_framer *f, const void *msg, size_t len)
{
    memset(f, 0, sizeof *f);
    if (len == 0 || len > RELAY_MESSAGE_MAX) return RELAY_E_MSG_LEN;
    f->msg = msg;
    f->len = len;
    f->prefix[0] = (uint8_t)(len >> 24);
    f->prefix[1] = (uint8_t)(len >> 16);
    f->prefix[2] = (uint8_t)(len >> 8);
    f->prefix[3] = (uint8_t)len;
    return 0;
}

bool relay_framer_next(struct relay_framer *f, struct relay_chunk *c)
{
    size_t room = RELAY_RECORD_PLAINTEXT_MAX;
    c->head = f->prefix;
    c->head_len = 0;
    if (!f->started) {
        if (!f->len) return false; /* init failed */
        f->started = true;
        c->head_len = RELAY_LENGTH_PREFIX;
        room -= RELAY_LENGTH_PREFIX;
    } else if (f->off == f->len) {
        return false;
    }
    size_t n = f->len - f->off;
    if (n > room) n = room;
    c->body = f->msg + f->off;
    c->body_len = n;
    f->off += n;
    return true;
}

size_t relay_framer_record_count(size_t len)
{
    size_t total = RELAY_LENGTH_PREFIX + len;
    return (total + RELAY_RECORD_PLAINTEXT_MAX - 1) / RELAY_RECORD_PLAINTEXT_MAX;
}

/* ---- inbound ------------------------------------------------------------------- */

void relay_reasm_init(struct relay_reasm *r)
{
    memset(r, 0, sizeof *r);
}

void relay_reasm_free(struct relay_reasm *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

/* Partial messages keep at most this much buffer between messages; a larger one is
 * given back so one big transfer does not pin its memory for the stream's lifetime. */
#define REASM_KEEP (256 * 1024)

/* Makes room for `need` more bytes of the current message. Grows geometrically but
 * never beyond the declared length, and only as bytes actually arrive: a peer that
 * declares 64 MiB and sends one record holds one record's worth, not 64 MiB. */
static void reasm_reserve(struct relay_reasm *r, size_t need)
{
    if (r->cap - r->have >= need) return;
    size_t cap = r->cap ? r->cap * 2 : 64 * 1024;
    if (cap < r->have + need) cap = r->have + need;
    if (cap > r->msg_len) cap = r->msg_len;
    r->buf = xrealloc(r->buf, cap);
    r->cap = cap;
}

/* The current message is complete: forget it (keeping a modest buffer for the next). */
static void reasm_next_message(struct relay_reasm *r)
{
    r->prefix_have = 0;
    r->msg_len = 0;
    r->have = 0;
    if (r->cap > REASM_KEEP) {
        free(r->buf);
        r->buf = NULL;
        r->cap = 0;
    }
}

int relay_reasm_push(struct relay_reasm *r, const uint8_t *rec, size_t len,
                     relay_reasm_msg_fn on_msg, void *ctx)
{
    if (r->err) return r->err;
    if (len > RELAY_RECORD_PLAINTEXT_MAX) return r->err = RELAY_E_RECORD_LEN;
    while (len > 0) {
        if (r->prefix_have < RELAY_LENGTH_PREFIX) {
            size_t n = RELAY_LENGTH_PREFIX - r->prefix_have;
            if (n > len) n = len;
            memcpy(r->prefix + r->prefix_have, rec, n);
            r->prefix_have += n;
            rec += n;
            len -= n;
            if (r->prefix_have < RELAY_LENGTH_PREFIX) break;
            /* Judge the length before any of its payload arrives. */
            size_t m = (size_t)r->prefix[0] << 24 | (size_t)r->prefix[1] << 16 |
                       (size_t)r->prefix[2] << 8 | r->prefix[3];
            if (m == 0 || m > RELAY_MESSAGE_MAX) return r->err = RELAY_E_MSG_LEN;
            r->msg_len = m;
            continue;
        }
        size_t missing = r->msg_len - r->have;
        size_t n = len < missing ? len : missing;
        const uint8_t *msg = rec; /* the whole message is in this record: no copy */
        if (r->have > 0 || n < missing) {
            /* It spans records: collect it. */
            reasm_reserve(r, n);
            memcpy(r->buf + r->have, rec, n);
            r->have += n;
            msg = r->buf;
        }
        rec += n;
        len -= n;
        if (n < missing) break;
        int rc = on_msg(ctx, msg, r->msg_len);
        reasm_next_message(r);
        if (rc) return r->err = rc;
    }
    return 0;
}
