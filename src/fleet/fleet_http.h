/* fleet_http: the registry's sockets. One listener (http:// or https://) serves the
 * registry's JSON endpoints and the rendezvous WebSockets on one port, the way the
 * hosted service and our test double do.
 *
 * A connection starts as HTTP/1.1: heads through proto/http_upgrade's tokenizer
 * (http_request_scan), bodies by Content-Length (at most FLEET_HTTP_MAX_BODY),
 * keep-alive, one request at a time (the next is not read until this one is
 * answered, so a slow database answer holds only its own connection). The server's
 * on_request decides; it answers at once (fleet_conn_reply) or later, after a
 * database job, holding the connection meanwhile (fleet_conn_hold). A request and
 * everything it points to stay valid until it is answered.
 *
 * Answering with fleet_conn_upgrade switches the connection to WebSocket: the
 * proto/ws_reader state machine (server role, masked frames) with the caller's
 * message cap, Pongs to Pings, a Ping every ping interval with no new one while a
 * Pong is outstanding, and a close when the Pong deadline passes. Whole messages go
 * to the owner's ops; frames out are written with uv_try_write first, so an idle
 * socket takes a relayed frame with no copy, and the rest is queued (counted, with
 * a drained callback below the low-water mark for back-pressure). TLS
 * (transport/tls.c server sessions over memory BIOs) sits under both. */
#ifndef EXEC_FLEET_HTTP_H
#define EXEC_FLEET_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "fleet/fleet_metrics.h"
#include "proto/http_upgrade.h"

#define FLEET_HTTP_MAX_BODY (64u * 1024u)
#define FLEET_CONN_HIGH_WATER (4u << 20) /* queued bytes: the owner stops its sources */
#define FLEET_CONN_LOW_WATER (1u << 20)  /* ...and is told to resume below this */

struct fleet_http;
struct fleet_conn;

/* One request, valid until answered. */
struct fleet_request {
    struct http_request_head head;
    const char *body;
    size_t body_len;
    const char *authorization; /* header value, NULL when absent */
    size_t authorization_len;
    const char *content_type;
    size_t content_type_len;
    bool upgrade;       /* Connection: upgrade and Upgrade: websocket */
    bool ws_ok;         /* ...with Sec-WebSocket-Version 13 and a valid key */
    const char *ws_key; /* Sec-WebSocket-Key when ws_ok */
    size_t ws_key_len;
    const char *origin; /* Origin header (browsers), NULL when absent */
    uint64_t started_ns;
};

typedef void (*fleet_request_fn)(struct fleet_conn *c, const struct fleet_request *req);

/* Why a WebSocket ended (fleet_conn_close_reason). */
enum fleet_close_reason {
    FLEET_CLOSE_PEER,     /* the peer closed (Close frame or EOF) */
    FLEET_CLOSE_ERROR,    /* a read or write error */
    FLEET_CLOSE_PONG,     /* no Pong within the deadline */
    FLEET_CLOSE_PROTOCOL, /* a WebSocket violation, or a message over the cap (1009) */
    FLEET_CLOSE_LOCAL,    /* we closed it (fleet_conn_close, shutdown) */
};

/* The owner of an upgraded connection. Every callback runs on the loop. */
struct fleet_ws_ops {
    /* One whole message (data writable, valid during the call only). */
    void (*message)(void *owner, struct fleet_conn *c, uint8_t *data, size_t len, bool binary);
    /* The connection is closing (once; c stays valid during the call, and no
     * callback follows): drop every reference to it. */
    void (*closed)(void *owner, struct fleet_conn *c);
    /* The write queue fell below FLEET_CONN_LOW_WATER after passing the high mark. */
    void (*drained)(void *owner, struct fleet_conn *c);
    /* The time set with fleet_conn_set_deadline has come. */
    void (*deadline)(void *owner, struct fleet_conn *c);
};

struct fleet_http_opts {
    const char *host; /* numeric IPv4 or IPv6 */
    int port;         /* 0: any free port */
    bool tls;         /* https://: tls_server_configure() was called */
    unsigned max_connections;
    uint64_t ping_ms, pong_ms; /* WebSocket liveness */
    fleet_request_fn on_request;
};

/* Binds and listens; *bound_port gets the port. 0 or a libuv error. */
int fleet_http_listen(uv_loop_t *loop, const struct fleet_http_opts *o, struct fleet_http **out,
                      int *bound_port);
/* Stops accepting and closes every connection (their owners hear closed). */
void fleet_http_shutdown(struct fleet_http *h);

/* ---- answering ---- */
/* Answers with status and body (content_type may be NULL for no body); extra is
 * more header lines ("Name: value\r\n"...) or NULL. */
void fleet_conn_reply(struct fleet_conn *c, int status, const char *content_type, const char *body,
                      size_t len, const char *extra);
/* Answers {"error":{"code":code,"message":message}} (the registry's error shape). */
void fleet_conn_reply_error(struct fleet_conn *c, int status, const char *code, const char *message,
                            const char *extra);
/* Which endpoint the request is, for metrics (default FLEET_EP_OTHER). */
void fleet_conn_set_endpoint(struct fleet_conn *c, enum fleet_endpoint ep);
/* Answers 101 and switches to WebSocket with owner/ops; messages above max_message
 * bytes end the connection with 1009. */
void fleet_conn_upgrade(struct fleet_conn *c, size_t max_message, const struct fleet_ws_ops *ops,
                        void *owner);

/* Keeps c (and its unanswered request) alive past on_request; release when done.
 * A held connection that closes meanwhile stays allocated but answers nothing. */
void fleet_conn_hold(struct fleet_conn *c);
void fleet_conn_release(struct fleet_conn *c);
bool fleet_conn_is_open(const struct fleet_conn *c);
/* "IP:PORT" of the peer. */
const char *fleet_conn_peer(const struct fleet_conn *c);

/* ---- WebSocket ---- */
/* Sends one whole message (binary or text). Dropped when c is closing. */
void fleet_conn_send(struct fleet_conn *c, bool binary, const void *data, size_t len);
/* Sends a Close with code and reason and ends the connection (owner hears closed). */
void fleet_conn_ws_close(struct fleet_conn *c, int code, const char *reason);
/* Ends the connection at once (owner hears closed). */
void fleet_conn_close(struct fleet_conn *c);
enum fleet_close_reason fleet_conn_close_reason(const struct fleet_conn *c);
size_t fleet_conn_queued(const struct fleet_conn *c);
bool fleet_conn_congested(const struct fleet_conn *c);
/* Stops or resumes reading (back-pressure from the other side of a relay). */
void fleet_conn_set_reading(struct fleet_conn *c, bool on);
/* Calls ops->deadline at loop time at_ms (uv_now), once; 0 cancels. */
void fleet_conn_set_deadline(struct fleet_conn *c, uint64_t at_ms);

#endif
