/* rv_ws: the executor's one physical WebSocket client connection to the rendezvous
 * (remote mode, REMOTE.md §2.5, §4.3), on the libuv loop.
 *
 * ws:// or wss:// (OpenSSL over memory BIOs, transport/tls.c), an HTTP/1.1 upgrade
 * with the caller's extra headers, masked client frames, binary messages only
 * (text is dropped), 256 KiB message cap, TCP_NODELAY, a Ping every ping interval
 * with no new Ping while a Pong is outstanding, and a Pong deadline after which
 * the socket closes with reason "pong_timeout". Nothing here knows about relay
 * frames: whole binary messages go up, whole binary messages go down.
 *
 * The same client also dials a plain JSON-RPC exec-server (`exec-server forward`,
 * relay_fwd.c): opts.text sends text messages and delivers text as well as binary
 * ones, opts.max_message raises the cap, opts.fragment splits large outgoing
 * messages, opts.no_ping turns the Ping timer off, and rv_ws_set_reading stops and
 * resumes reading for back-pressure. */
#ifndef EXEC_REMOTE_RV_WS_H
#define EXEC_REMOTE_RV_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define RV_WS_MAX_MESSAGE (256u * 1024u)

struct rv_ws;

struct rv_ws_ops {
    /* The upgrade succeeded (101 with the right accept key). */
    void (*on_open)(void *arg);
    /* One whole binary message (or text, with opts.text); p is valid only during
     * the call. */
    void (*on_binary)(void *arg, const uint8_t *p, size_t n);
    /* Called once when the connection is over and every handle is closed; the
     * rv_ws is freed right after it returns. http_status: the status of a refused
     * upgrade (e.g. 401), 0 otherwise. reason: a static metric label (peer_close,
     * read_error, write_error, pong_timeout, local_shutdown, connect_failed). */
    void (*on_closed)(void *arg, int http_status, const char *reason);
    /* Optional: a write completed and less than 512 KiB is left queued (rv_ws_queued):
     * a producer that held back (rv_ws_queued above its mark) may go on. */
    void (*on_drained)(void *arg);
};

struct rv_ws_opts {
    const char *url;             /* ws://HOST[:PORT]/PATH?QUERY or wss://... (copied) */
    const char *const *headers;  /* extra "Name: value" lines, NULL-terminated, or NULL */
    uint64_t ping_ms;            /* 30 000 */
    uint64_t pong_deadline_ms;   /* 60 000 */
    uint64_t connect_timeout_ms; /* DNS + TCP + TLS + upgrade, 10 000 */
    size_t max_message;          /* largest incoming message, 0 = RV_WS_MAX_MESSAGE */
    size_t fragment;             /* largest outgoing frame payload, 0 = no fragmenting */
    bool text;                   /* send text messages; deliver text ones too */
    bool no_ping;                /* no Ping timer (the socket's peer does liveness) */
};

/* Starts connecting. Returns 0 (ops->on_closed will be called exactly once), or a
 * negative errno-style code for a URL it cannot use (nothing was started). The
 * rv_ws is owned by itself until on_closed. */
int rv_ws_open(uv_loop_t *loop, const struct rv_ws_opts *opts, const struct rv_ws_ops *ops,
               void *arg, struct rv_ws **out);

/* Called when a message queued by rv_ws_send has been taken by the kernel
 * (status 0) or dropped (status < 0); len is the message length. */
typedef void (*rv_ws_sent_fn)(void *arg, size_t len, int status);

/* Queues one binary message (copied and masked). done (optional) runs once,
 * always asynchronously. Returns 0, or -ENOTCONN when the socket is not open (done
 * is not called then). Messages queued in one loop turn leave in one write, before
 * the loop next waits (or once 1 MiB is batched). */
int rv_ws_send(struct rv_ws *ws, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg);

/* The same without the copy, for a message built in place: room for its n payload
 * bytes (a frame's header goes in front later), valid until rv_ws_commit, which
 * must come before anything else is sent on ws; NULL when the socket is not open.
 * rv_ws_commit frames, masks and queues it (as a binary message, or text with
 * opts.text, never fragmented); done (optional) then runs once with done_len, as for
 * rv_ws_send. Returns 0, or -ENOTCONN (done is not called then). */
uint8_t *rv_ws_reserve(struct rv_ws *ws, size_t n);
int rv_ws_commit(struct rv_ws *ws, rv_ws_sent_fn done, void *done_arg, size_t done_len);

/* Stops (false) or resumes (true) reading the socket once it is open; frames
 * already received are still delivered (for wss every record a read brought is
 * decrypted and delivered at once, so nothing waits inside the TLS session). */
void rv_ws_set_reading(struct rv_ws *ws, bool on);

/* Starts closing (idempotent); reason as for on_closed. */
void rv_ws_close(struct rv_ws *ws, const char *reason);

/* Bytes handed to the socket (or batched for it) and not yet written. */
size_t rv_ws_queued(const struct rv_ws *ws);

/* Parses ws[s]://host[:port][/path][?query] into its parts (pure; for tests).
 * host gets no brackets for IPv6. Returns 0 or -EINVAL. */
struct rv_ws_url {
    int tls;
    char host[256];
    int port;
    char target[4096]; /* path and query, "/" at least */
};
int rv_ws_parse_url(const char *url, struct rv_ws_url *u);

/* The URL without its query (which holds the signature), for log lines. */
void rv_ws_url_redacted(const char *url, char *out, size_t n);

#endif
