/* ws_frame: the one RFC 6455 frame header codec (section 5.2), shared by the
 * server's WebSocket transport, the client library and the bench. Pure: bytes in,
 * fields out and back; what a peer does with a frame (limits, which side masks,
 * control frames) is the caller's policy. */
#ifndef EXEC_PROTO_WS_FRAME_H
#define EXEC_PROTO_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
    WS_OP_CONT = 0,
    WS_OP_TEXT = 1,
    WS_OP_BINARY = 2,
    WS_OP_CLOSE = 8,
    WS_OP_PING = 9,
    WS_OP_PONG = 10,
};

/* Longest header: 2 bytes, an 8-byte length, a 4-byte mask key. */
#define WS_FRAME_MAX_HEADER 14

struct ws_frame {
    bool fin;             /* the last frame of its message */
    uint8_t rsv;          /* the three RSV bits (0x70 of the first byte) */
    int opcode;           /* enum ws_opcode, or an undefined value as received */
    bool masked;          /* a mask key follows the length (client frames) */
    uint8_t mask[4];      /* the mask key when masked */
    size_t header_len;    /* bytes before the payload (2..14) */
    uint64_t payload_len; /* as announced; not checked against any limit */
};

/* Header size announced by a frame's second byte (length form and mask bit). */
size_t ws_frame_header_size(uint8_t second_byte);

/* Decodes the header at buf[0..n): returns 1 with f filled once the whole header
 * is there (the payload may still be missing), 0 when more bytes are needed. */
int ws_frame_decode(const uint8_t *buf, size_t n, struct ws_frame *f);

/* RFC 6455 sections 5.2 and 5.5: RSV bits clear (no extension is negotiated), a
 * defined opcode, and a control frame final with at most 125 payload bytes. */
bool ws_frame_valid(const struct ws_frame *f);

/* Header size for a payload of len bytes, masked or not. */
size_t ws_frame_header_len(uint64_t len, bool masked);

/* Writes the header of a frame with a len-byte payload into out (room for
 * ws_frame_header_len bytes), masked with `mask` when it is not NULL; returns its
 * length. The caller masks the payload itself (ws_frame_unmask). */
size_t ws_frame_encode(uint8_t *out, bool fin, int opcode, uint64_t len, const uint8_t *mask);

/* XORs n payload bytes with the mask key in place, the key's phase starting at
 * the payload's first byte (masking and unmasking are the same operation).
 * Returns the OR of the resulting bytes (bit 7 clear: all of them are ASCII). */
uint8_t ws_frame_unmask(uint8_t *p, size_t n, const uint8_t mask[4]);

/* The OR of n bytes, read only: what ws_frame_unmask returns, for a payload that
 * came without a mask. */
uint8_t ws_frame_or(const uint8_t *p, size_t n);

#endif
