/* relay_err: the error codes of the remote-mode relay codecs (relay_frame,
 * relay_order, relay_framing) and their texts.
 *
 * Every one of them means "the peer broke the relay protocol" and ends in the same
 * action (the virtual stream is reset with reason noise_relay_protocol_error,
 * REMOTE.md section 2.3), but each rule has its own code so tests can tell which rule
 * fired and logs can say it. The codes are negative like libuv's, and sit far below
 * the kernel's errno range (-4095..-1) so they never collide with a UV_E* code that
 * travels through the same int. */
#ifndef EXEC_PROTO_RELAY_ERR_H
#define EXEC_PROTO_RELAY_ERR_H

enum relay_err {
    /* relay_frame: decoding and the REMOTE.md section 2.2 checks */
    RELAY_E_MALFORMED = -7001, /* not well-formed protobuf for this schema */
    RELAY_E_TOO_BIG = -7002,   /* frame above RELAY_FRAME_MAX_LEN (256 KiB) */
    RELAY_E_UTF8 = -7003,      /* a string field is not valid UTF-8 */
    RELAY_E_VERSION = -7004,   /* version != 1 */
    RELAY_E_STREAM_ID = -7005, /* stream_id empty or only white space */
    RELAY_E_NO_BODY = -7006,   /* none of the body oneof members is present */
    RELAY_E_DATA = -7007,      /* data: segment_index != 0, segment_count != 1 or no payload */
    RELAY_E_RESET = -7008,     /* reset without a reason */
    RELAY_E_HANDSHAKE = -7009, /* handshake without a payload */
    RELAY_E_NOSPC = -7010,     /* encode: the caller's buffer is too small */

    /* relay_order: ciphertext ordering before decryption */
    RELAY_E_REORDER_WINDOW = -7101, /* seq more than 64 ahead of the next expected one */
    RELAY_E_REORDER_FULL = -7102,   /* 64 records or 1 MiB already waiting */
    RELAY_E_SEQ_EXHAUSTED = -7103,  /* the record with seq UINT32_MAX would be needed */

    /* relay_framing: JSON-RPC messages over plaintext records */
    RELAY_E_MSG_LEN = -7201,    /* declared (or given) message length 0 or above 64 MiB */
    RELAY_E_RECORD_LEN = -7202, /* plaintext record above 61,440 bytes */
};

/* A static English text for a relay_err code (or "unknown relay error"); never NULL,
 * owned by the module. */
const char *relay_strerror(int err);

#endif
