/* relay_order: puts a virtual stream's inbound ciphertext records back into sequence
 * order before they reach the Noise decryptor (REMOTE.md section 2.3, "Ordering
 * before decryption"; upstream ordered_ciphertext.rs).
 *
 * Noise transport nonces are implicit (a counter), so records must be decrypted
 * exactly in seq order, each once. The window: next_seq starts at 0; a record with
 * seq < next_seq, or one already waiting, is a duplicate and is dropped (the first
 * copy wins); one up to 64 ahead is copied and held while at most 64 records and
 * 1 MiB wait; anything further is a protocol error. The record at next_seq goes to
 * the caller's deliver function at once, without a copy, followed by every held
 * record that is now contiguous. The sequence never wraps: needing the record with
 * seq UINT32_MAX is fatal. Pure (no I/O); every error is sticky, since the stream
 * is reset after one. */
#ifndef EXEC_PROTO_RELAY_ORDER_H
#define EXEC_PROTO_RELAY_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/relay_err.h"

#define RELAY_ORDER_MAX_DISTANCE 64             /* seq - next_seq allowed while buffering */
#define RELAY_ORDER_MAX_PENDING 64              /* records held at once */
#define RELAY_ORDER_MAX_PENDING_BYTES (1 << 20) /* ciphertext bytes held at once */

/* Receives one record in seq order. rec is borrowed for the call only. A negative
 * return stops the run and is returned by relay_order_push (and stays its result);
 * e.g. a decryption failure. */
typedef int (*relay_order_deliver_fn)(void *ctx, uint32_t seq, const uint8_t *rec, size_t len);

/* A record held until the gap before it closes. */
struct relay_order_slot {
    uint8_t *data; /* owned copy of the ciphertext (NULL for an empty record) */
    size_t len;    /* bytes at data */
    uint32_t seq;  /* its sequence number */
    bool used;     /* the slot holds a record */
};

struct relay_order {
    uint32_t next_seq;    /* seq of the record the decryptor needs next */
    unsigned pending;     /* records held */
    size_t pending_bytes; /* their total length */
    int err;              /* first error, repeated by every later push; 0 = none */
    /* Held records, indexed by seq % 64: held seqs lie in next_seq+1 .. next_seq+64,
     * 64 consecutive numbers, so they never share a slot. */
    struct relay_order_slot slot[RELAY_ORDER_MAX_DISTANCE];
};

/* An empty window expecting seq 0. */
void relay_order_init(struct relay_order *o);

/* Frees the held copies. o can be initialised again afterwards. */
void relay_order_free(struct relay_order *o);

/* Accepts the record `seq` (rec[0..len), borrowed: copied only when it has to wait).
 * Returns 0 when it was delivered (together with any records it made contiguous),
 * held, or dropped as a duplicate; RELAY_E_REORDER_WINDOW, RELAY_E_REORDER_FULL or
 * RELAY_E_SEQ_EXHAUSTED on a protocol error; or deliver's own negative result. */
int relay_order_push(struct relay_order *o, uint32_t seq, const uint8_t *rec, size_t len,
                     relay_order_deliver_fn deliver, void *ctx);

#endif
