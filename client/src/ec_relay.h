/* ec_relay: the harness end of one relay virtual stream (REMOTE.md §1-§3), sans I/O.
 *
 * Bytes in, bytes out: ec_relay_start() emits the two opening frames (resume{0} on a
 * fresh UUIDv4 stream id, then handshake{Noise msg 1 carrying the registry's
 * authorization}); ec_relay_on_frame() takes every binary message the rendezvous
 * sends, completes the handshake on msg 2 (which authenticates the pinned executor
 * key), then orders, decrypts and reassembles data records into JSON-RPC messages;
 * ec_relay_send() frames one message (4-byte big-endian length inside the
 * encryption), cuts it into records of at most 61,440 plaintext bytes and emits one
 * data frame per record with seq counting from 0. The frame codec, the ordering
 * window, the message framing and the Noise engine are the shared src/proto and
 * src/crypto modules; this file only sequences them for the initiator.
 *
 * One ec_relay serves one physical connection: a reconnect is a new stream, new
 * handshake and new counters (ec_relay_free + ec_relay_start again). */
#ifndef EC_RELAY_H
#define EC_RELAY_H

#include "crypto/noise_ik.h"
#include "proto/relay_framing.h"
#include "proto/relay_order.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sends one binary WebSocket message (frame borrowed for the call). 0 or negative. */
typedef int (*ec_relay_emit_fn)(void *ud, const uint8_t *frame, size_t len);
/* One decrypted JSON-RPC message (text borrowed for the call). */
typedef void (*ec_relay_message_fn)(void *ud, const char *text, size_t len);

enum ec_relay_state {
    EC_RELAY_IDLE = 0,  /* not started */
    EC_RELAY_HANDSHAKE, /* msg 1 sent, waiting for msg 2 */
    EC_RELAY_OPEN,      /* transport mode */
    EC_RELAY_FAILED,    /* reset, protocol error or failed authentication: see error */
};

struct ec_relay {
    enum ec_relay_state state;
    char stream_id[37];            /* UUIDv4 text */
    struct noise_ik_handshake *hs; /* owned, until msg 2 */
    struct noise_ik_transport *tx; /* owned, once open */
    uint32_t send_seq;             /* seq of our next data frame */
    struct relay_order order;      /* inbound ciphertext, back in seq order */
    struct relay_reasm rx;         /* inbound plaintext -> messages */
    ec_relay_emit_fn emit;
    ec_relay_message_fn on_message;
    void *ud;                  /* for emit and on_message */
    uint8_t *scratch;          /* one record's plaintext or ciphertext (owned) */
    char error[160];           /* why it failed (no secrets), NUL-terminated */
    bool credentials_rejected; /* msg 2 said the registry refused the executor's
                                  own credentials (NOISE_IK_REGISTRY_REJECTED) */
};

/* Inputs of one stream: all borrowed for the ec_relay_start call. */
struct ec_relay_params {
    const struct noise_ik_static_key *self;     /* the harness's static key */
    const struct noise_ik_public_key *executor; /* the pinned key from the bundle */
    const char *environment_id;
    const char *registration_id;
    const char *authorization; /* msg-1 payload */
    const char *stream_id;     /* NULL: a fresh UUIDv4 */
    noise_ik_rng_fn rng;       /* NULL: getrandom */
    void *rng_ctx;
};

/* Starts the stream and emits resume{next_seq 0} and handshake{msg 1}. emit,
 * on_message and ud stay in use until ec_relay_free. Returns 0 or negative (then
 * r->error says why); r must be freed either way. */
int ec_relay_start(struct ec_relay *r, const struct ec_relay_params *p, ec_relay_emit_fn emit,
                   ec_relay_message_fn on_message, void *ud);

/* One binary message from the rendezvous. Frames of other streams and control frames
 * are ignored; a reset, a data frame before the handshake completes, a second
 * handshake, or any decoding/decryption/ordering/framing error fails the stream
 * (returns negative, state EC_RELAY_FAILED, r->error set). Complete messages go to
 * on_message, in order, before it returns. */
int ec_relay_on_frame(struct ec_relay *r, const uint8_t *buf, size_t len);

/* Encrypts and emits one JSON-RPC message (needs EC_RELAY_OPEN). A request whose
 * top-level "trace" object carries traceparent/tracestate copies them into the first
 * data frame only (§5.1). 0 or negative (the stream is then failed: a record whose
 * nonce was spent cannot be sent again). */
int ec_relay_send(struct ec_relay *r, const char *text, size_t len);

/* A reset frame for stream_id with reason (e.g. a stream this harness abandoned when
 * its socket dropped: the executor learns it is gone and lets the session go, instead
 * of holding it attached to a dead stream). *out is the caller's (free()). 0 or a
 * RELAY_E_* code. */
int ec_relay_reset_frame(const char *stream_id, const char *reason, uint8_t **out, size_t *len);

/* Frees everything and wipes the keys; r can be started again. */
void ec_relay_free(struct ec_relay *r);

/* A fresh random UUIDv4 in out (36 chars + NUL). 0 or negative. */
int ec_relay_uuid4(char out[37], noise_ik_rng_fn rng, void *rng_ctx);

#endif
