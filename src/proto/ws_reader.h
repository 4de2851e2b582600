/* ws_reader: the one RFC 6455 receive state machine, for both roles (the server's
 * transport/ws and the rendezvous client remote/rv_ws). Sans-I/O: the caller hands
 * it whatever bytes arrived, at any split point, and gets events back (a whole
 * message, a ping, a pong, a close, or a protocol error with the close code to send).
 * Writing anything (pongs, close replies) is the caller's job; so is deciding what
 * to do with text versus binary.
 *
 * Frames are unmasked in place: a frame wholly inside the caller's buffer is handed
 * back pointing into that buffer with no copy (the common case, and the reason this
 * is ours and not a library's: see docs/ARCHITECTURE.md, "WebSocket framing").
 * Frames split across reads and fragmented messages are gathered in the reader's
 * own buffer. Rules (each violation ends the reader; the code is what the caller
 * sends in its Close):
 *   1002: RSV bits, undefined opcodes, a server receiving an unmasked frame or a
 *         client a masked one, control frames over 125 bytes or not final, a
 *         continuation with no message started, a new data frame inside a
 *         fragmented message, a close payload of 1 byte or with an invalid code;
 *   1007: a text message or a close reason that is not UTF-8 (proto/utf8);
 *   1009: a frame over max_frame or a message over max_message (checked on the
 *         header, before any of the payload is held). */
#ifndef EXEC_PROTO_WS_READER_H
#define EXEC_PROTO_WS_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/ws_frame.h"

#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_NO_STATUS 1005 /* a Close with no payload (never sent on the wire) */
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_TOO_BIG 1009

enum ws_role { WS_ROLE_SERVER, WS_ROLE_CLIENT };

enum ws_event_kind {
    WS_EV_NONE,    /* all input consumed, nothing complete yet */
    WS_EV_MESSAGE, /* a whole text or binary message */
    WS_EV_PING,    /* the caller answers with a Pong carrying the same payload */
    WS_EV_PONG,
    WS_EV_CLOSE, /* the peer's Close: the caller echoes the code and ends */
    WS_EV_ERROR, /* a violation: the caller sends Close(code) and ends */
};

struct ws_event {
    enum ws_event_kind kind;
    int opcode;    /* MESSAGE: WS_OP_TEXT or WS_OP_BINARY */
    uint8_t *data; /* MESSAGE: the payload; PING/PONG: theirs; CLOSE: the reason */
    size_t len;
    int code; /* CLOSE: the peer's status (WS_CLOSE_NO_STATUS if none);
               * ERROR: the close code to send */
};

struct ws_reader {
    bool server;                      /* peer frames must be masked */
    uint64_t max_frame;               /* payload bytes of one data frame */
    size_t max_message;               /* bytes of one (reassembled) message */
    int state;                        /* internal: header, payload, done */
    uint8_t hdr[WS_FRAME_MAX_HEADER]; /* a header split across inputs */
    size_t hdr_len;
    struct ws_frame f; /* the frame being received */
    uint64_t left;     /* its payload bytes still to come */
    bool in_msg;       /* between a message's first frame and its final one */
    int msg_op;        /* that message's opcode */
    uint8_t *msg;      /* gathered payload (owned; from util/bigbuf when msg_big) */
    size_t msg_len, msg_cap, frag_start;
    bool msg_big;     /* msg is a bigbuf (a large message) */
    uint8_t msg_or;   /* OR of the gathered message's bytes (ASCII test) */
    bool msg_out;     /* msg was handed out; reset on the next call */
    uint8_t ctl[125]; /* a control frame's payload split across inputs */
    size_t ctl_len;
};

/* Sets up a reader for `role`'s side of a connection. Data frames above max_frame
 * payload bytes and messages above max_message bytes are refused with 1009. */
void ws_reader_init(struct ws_reader *r, enum ws_role role, uint64_t max_frame, size_t max_message);

/* Frees what the reader holds (any event data it handed out is invalid after). */
void ws_reader_free(struct ws_reader *r);

/* Consumes bytes of buf[0..n) up to and including the next complete event and
 * returns how many; ev->kind is WS_EV_NONE when all n were consumed without one.
 * Call again with the rest. buf is modified (unmasked in place). ev->data points
 * into buf or into the reader and stays valid until the next call or
 * ws_reader_free; the caller may modify it. After WS_EV_CLOSE or WS_EV_ERROR the
 * reader is done: it consumes everything and reports nothing. */
size_t ws_reader_feed(struct ws_reader *r, uint8_t *buf, size_t n, struct ws_event *ev);

/* After a WS_EV_MESSAGE gathered into a large buffer (one from util/bigbuf: a
 * message of BIGBUF_MIN bytes or more that did not sit whole in one input), hands
 * that buffer over: the event's data pointer is its start, and the caller frees it
 * with bigbuf_free. NULL when the last event was not such a message (the data then
 * stays the reader's, valid until the next call). Lets a request keep a large
 * payload without copying it. */
uint8_t *ws_reader_take(struct ws_reader *r);

/* Where the payload of the data frame being gathered continues, when at least
 * WS_READER_DIRECT_MIN bytes of it are still to come: the caller may read up to *n
 * bytes from its socket straight there and then pass that same pointer to
 * ws_reader_feed, which then copies nothing. NULL otherwise. */
#define WS_READER_DIRECT_MIN 65536
uint8_t *ws_reader_recv_area(const struct ws_reader *r, size_t *n);

/* Whether the reader has ended (a Close was received or a violation seen). */
bool ws_reader_done(const struct ws_reader *r);

/* Writes a Close payload (2-byte code) for code into out; returns its length, 0
 * for WS_CLOSE_NO_STATUS (whose echo is an empty Close). */
size_t ws_close_payload(int code, uint8_t out[2]);

#endif
