/* relay_frame: codec for codex.exec_server.relay.v1.RelayMessageFrame, the protobuf
 * message every binary WebSocket message to and from rendezvous carries in remote
 * mode (REMOTE.md section 2.1), plus the frame checks of section 2.2.
 *
 * Sans-I/O and allocation-free: decoding fills a plain struct whose strings and
 * payload point into the caller's input (zero copy: a data frame carries up to
 * ~60 KiB of ciphertext that goes straight to the decryptor), and encoding writes
 * into a caller buffer sized with relay_frame_encoded_len() (or into one it
 * allocates). The schema is small and fixed, so the codec is written by hand rather
 * than generated; relay_frame.c says why, and tests/unit/test_relay_frame.c checks it
 * byte for byte against protobuf-c's generated code for the same schema
 * (relay_v1.proto beside this file). */
#ifndef EXEC_PROTO_RELAY_FRAME_H
#define EXEC_PROTO_RELAY_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto/relay_err.h"

/* The only frame version there is. */
#define RELAY_FRAME_VERSION 1
/* Rendezvous and both endpoints cap every relay WebSocket message at 256 KiB
 * (MAX_NOISE_RELAY_WEBSOCKET_MESSAGE_SIZE); decode and encode enforce it too. */
#define RELAY_FRAME_MAX_LEN (256 * 1024)

/* Which member of the `body` oneof a frame carries (field numbers 5..10). */
enum relay_body {
    RELAY_BODY_NONE = 0,  /* no body: invalid, never decoded or encoded */
    RELAY_BODY_DATA,      /* 5  RelayData: one Noise transport record */
    RELAY_BODY_ACK,       /* 6  RelayAck (empty; accepted and ignored on main) */
    RELAY_BODY_RESUME,    /* 7  RelayResume: the harness's initial claim, next_seq 0 */
    RELAY_BODY_RESET,     /* 8  RelayReset: tears down one virtual stream */
    RELAY_BODY_HEARTBEAT, /* 9  RelayHeartbeat (empty; never sent on main) */
    RELAY_BODY_HANDSHAKE, /* 10 RelayHandshake: one Noise handshake message */
};

/* A string field: len bytes at ptr, not NUL-terminated, valid UTF-8 once checked.
 * ptr == NULL means absent; that only matters for the trace fields, which are
 * proto3 `optional` upstream (present-but-empty is sent as a zero-length field). */
struct relay_str {
    const char *ptr;
    size_t len;
};

/* One frame. After relay_frame_decode every pointer borrows from the decoded input;
 * for relay_frame_encode they borrow from the caller. Fields that the body kind does
 * not use are ignored by encode and zero after decode. */
struct relay_frame {
    uint32_t version;             /* RELAY_FRAME_VERSION */
    struct relay_str stream_id;   /* virtual stream id (the harness's UUIDv4 text) */
    uint32_t ack;                 /* cumulative ack: always 0 on upstream main */
    uint32_t ack_bits;            /* selective-ack bitmap: always 0 on upstream main */
    enum relay_body body;         /* which body member is present */
    uint32_t seq;                 /* DATA: record sequence number, from 0 per direction */
    const uint8_t *payload;       /* DATA: ciphertext record; HANDSHAKE: Noise message */
    size_t payload_len;           /* bytes at payload; both kinds require > 0 */
    uint32_t next_seq;            /* RESUME */
    struct relay_str reason;      /* RESET: non-empty */
    struct relay_str traceparent; /* field 11, W3C traceparent; ptr NULL = absent */
    struct relay_str tracestate;  /* field 12, W3C tracestate; ptr NULL = absent */
};

/* Parses one frame from buf[0..len) into *out and applies the REMOTE.md section 2.2
 * checks: version 1, stream_id not empty nor white space only, a body present; data
 * with segment_index 0, segment_count 1 and a non-empty payload; a reset with a
 * reason; a handshake with a payload; at most RELAY_FRAME_MAX_LEN bytes; every string
 * valid UTF-8 (prost rejects invalid strings). Protobuf rules as prost applies them:
 * unknown fields (including groups) are skipped, a repeated scalar field keeps the
 * last value, a repeated body member of the same kind is merged into the earlier one
 * and a different kind replaces it. Returns 0, or a negative RELAY_E_* code (*out is
 * then unspecified). *out borrows from buf: it stays valid while buf does. */
int relay_frame_decode(const uint8_t *buf, size_t len, struct relay_frame *out);

/* The section 2.2 checks alone, on a frame about to be encoded or just parsed.
 * Returns 0 or the RELAY_E_* code of the first rule broken. */
int relay_frame_check(const struct relay_frame *f);

/* Exact number of bytes relay_frame_encode writes for f (f need not be valid; the
 * result is then meaningless but well-defined as long as the lengths in f are below
 * RELAY_FRAME_MAX_LEN). */
size_t relay_frame_encoded_len(const struct relay_frame *f);

/* Encodes f (proto3 canonical form, the same bytes prost and protobuf-c produce:
 * zero scalars omitted, an empty body member still emitted as a zero-length field,
 * fields in number order) into out[0..cap). Checks f with relay_frame_check first, so
 * we never send what the peer would reject. Returns 0 and sets *out_len, or a
 * RELAY_E_* code: RELAY_E_TOO_BIG above 256 KiB, RELAY_E_NOSPC when cap is short.
 * Writes nothing to out on error. */
int relay_frame_encode(const struct relay_frame *f, uint8_t *out, size_t cap, size_t *out_len);

/* For a frame built in place (the executor's data frames, encrypted straight into the
 * socket's buffer): writes the bytes of f's encoding that come before its payload,
 * which must be the last field (a data or handshake frame without trace fields),
 * into out: *head_len = relay_frame_encoded_len(f) - f->payload_len bytes.
 * f->payload_len counts, f->payload is not read. With the payload's bytes at
 * out + *head_len the whole is what relay_frame_encode writes. The same checks as
 * relay_frame_encode; RELAY_E_MALFORMED for another kind of frame. */
int relay_frame_encode_head(const struct relay_frame *f, uint8_t *out, size_t *head_len);

/* Like relay_frame_encode into a buffer it allocates: on 0, *out is owned by the
 * caller (free() it) and holds *out_len bytes; on error *out is NULL. */
int relay_frame_encode_alloc(const struct relay_frame *f, uint8_t **out, size_t *out_len);

#endif
