/* relay_order: the reorder window in front of the Noise decryptor (see relay_order.h).
 *
 * A 64-slot ring rather than a sorted map: the window is exactly 64 sequence numbers
 * wide, so seq % 64 is a perfect index and a push is O(1) with one allocation only
 * for a record that arrives early (never, on the TCP path rendezvous provides). */
#include "proto/relay_order.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

void relay_order_init(struct relay_order *o)
{
    memset(o, 0, sizeof *o);
}

void relay_order_free(struct relay_order *o)
{
    for (unsigned i = 0; i < RELAY_ORDER_MAX_DISTANCE; i++)
        free(o->slot[i].data);
    memset(o, 0, sizeof *o);
}

static struct relay_order_slot *slot_of(struct relay_order *o, uint32_t seq)
{
    return &o->slot[seq % RELAY_ORDER_MAX_DISTANCE];
}

/* Hands next_seq's record over and moves past it. The record with seq UINT32_MAX can
 * never be handed over: next_seq could not move past it without wrapping. */
static int deliver_next(struct relay_order *o, const uint8_t *rec, size_t len,
                        relay_order_deliver_fn deliver, void *ctx)
{
    if (o->next_seq == UINT32_MAX) return RELAY_E_SEQ_EXHAUSTED;
    uint32_t seq = o->next_seq++;
    return deliver(ctx, seq, rec, len);
}

int relay_order_push(struct relay_order *o, uint32_t seq, const uint8_t *rec, size_t len,
                     relay_order_deliver_fn deliver, void *ctx)
{
    if (o->err) return o->err;
    struct relay_order_slot *s = slot_of(o, seq);
    if (seq < o->next_seq || (s->used && s->seq == seq)) return 0; /* duplicate */
    if (seq > o->next_seq) {
        int rc = 0;
        if (seq - o->next_seq > RELAY_ORDER_MAX_DISTANCE)
            rc = RELAY_E_REORDER_WINDOW;
        else if (o->pending >= RELAY_ORDER_MAX_PENDING ||
                 len > RELAY_ORDER_MAX_PENDING_BYTES - o->pending_bytes)
            rc = RELAY_E_REORDER_FULL;
        if (rc) return o->err = rc;
        s->data = len ? xmemdup(rec, len) : NULL;
        s->len = len;
        s->seq = seq;
        s->used = true;
        o->pending++;
        o->pending_bytes += len;
        return 0;
    }

    int rc = deliver_next(o, rec, len, deliver, ctx);
    while (rc == 0) {
        s = slot_of(o, o->next_seq);
        if (!s->used) break;
        /* Take it out of the ring before delivering, so the slot is consistent even if
         * deliver fails. */
        uint8_t *data = s->data;
        size_t n = s->len;
        *s = (struct relay_order_slot){NULL, 0, 0, false};
        o->pending--;
        o->pending_bytes -= n;
        rc = deliver_next(o, data, n, deliver, ctx);
        free(data);
    }
    if (rc < 0) o->err = rc;
    return rc;
}
