/* relay_framing: JSON-RPC messages over Noise transport records (REMOTE.md section
 * 2.3, "Segmentation"; upstream message_framing.rs).
 *
 * A Noise record holds at most 65,535 bytes but a message can be up to 64 MiB, so
 * each message travels as a byte stream: a 4-byte big-endian length, then the JSON
 * text, cut into plaintext records of at most 61,440 bytes (the prefix is inside the
 * encryption). A sender never puts two messages in one record; a receiver accepts
 * records that end one message and start the next, and messages spread over many
 * records.
 *
 * Outbound, relay_framer yields each record's plaintext as a (head, body) pair: the
 * 4-byte prefix in the first record and a slice of the caller's JSON, so the caller
 * encrypts the pieces in place (AES-GCM takes them as two updates) and the JSON is
 * never copied into a staging buffer. Inbound, relay_reasm is fed decrypted records
 * and hands out complete messages: straight from the record when a message lies
 * inside it, from its own buffer (bounded by the declared length, at most 64 MiB)
 * when it spans records. Pure (no I/O). */
#ifndef EXEC_PROTO_RELAY_FRAMING_H
#define EXEC_PROTO_RELAY_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/relay_err.h"

#define RELAY_LENGTH_PREFIX 4                  /* bytes of the big-endian length */
#define RELAY_RECORD_PLAINTEXT_MAX (60 * 1024) /* NOISE_RECORD_PLAINTEXT_LEN: 61,440 */
#define RELAY_MESSAGE_MAX (64u * 1024 * 1024)  /* MAX_NOISE_JSONRPC_MESSAGE_LEN */

/* ---- outbound ---- */

/* One record's plaintext: head[0..head_len) followed by body[0..body_len), together
 * at most RELAY_RECORD_PLAINTEXT_MAX bytes and never empty. Both borrow from the
 * framer (head) and the caller's message (body). */
struct relay_chunk {
    const uint8_t *head;
    size_t head_len; /* RELAY_LENGTH_PREFIX in the first record, else 0 */
    const uint8_t *body;
    size_t body_len;
};

/* Cuts one message into records. Holds no allocation. */
struct relay_framer {
    const uint8_t *msg;                  /* the caller's JSON text, borrowed */
    size_t len;                          /* its length, 1 .. RELAY_MESSAGE_MAX */
    size_t off;                          /* bytes of msg already handed out */
    bool started;                        /* the first record (with the prefix) is out */
    uint8_t prefix[RELAY_LENGTH_PREFIX]; /* len, big-endian */
};

/* Prepares to frame msg[0..len), which must stay valid and unchanged until the last
 * chunk is used. Returns 0, or RELAY_E_MSG_LEN for an empty message or one above
 * RELAY_MESSAGE_MAX (the receiver would reject it). */
int relay_framer_init(struct relay_framer *f, const void *msg, size_t len);

/* The next record's plaintext into *c. Returns true while there is one, false once
 * the whole message has been handed out. */
bool relay_framer_next(struct relay_framer *f, struct relay_chunk *c);

/* How many records a message of len bytes takes (what relay_framer_next yields). */
size_t relay_framer_record_count(size_t len);

/* ---- inbound ---- */

/* Receives one complete message. msg is borrowed for the call only. A non-zero
 * return stops relay_reasm_push, which returns it (e.g. the message is not JSON). */
typedef int (*relay_reasm_msg_fn)(void *ctx, const uint8_t *msg, size_t len);

struct relay_reasm {
    uint8_t prefix[RELAY_LENGTH_PREFIX]; /* the current message's length prefix so far */
    size_t prefix_have;                  /* bytes of it seen (0..4) */
    size_t msg_len;                      /* declared length, once prefix_have == 4 */
    uint8_t *buf;                        /* owned: the message's bytes so far, or NULL */
    size_t have;                         /* bytes in buf */
    size_t cap;                          /* bytes allocated at buf, never above msg_len */
    int err;                             /* first error, repeated by later pushes */
};

void relay_reasm_init(struct relay_reasm *r);

/* Frees the partial message. r can be initialised again afterwards. */
void relay_reasm_free(struct relay_reasm *r);

/* Feeds one decrypted record (rec[0..len), borrowed) and calls on_msg for each message
 * it completes, in order. Returns 0; RELAY_E_RECORD_LEN for a record above
 * RELAY_RECORD_PLAINTEXT_MAX; RELAY_E_MSG_LEN as soon as a prefix declares 0 or more
 * than RELAY_MESSAGE_MAX bytes; or on_msg's non-zero result. Errors are sticky. */
int relay_reasm_push(struct relay_reasm *r, const uint8_t *rec, size_t len,
                     relay_reasm_msg_fn on_msg, void *ctx);

#endif
