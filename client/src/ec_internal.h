/* ec_internal: the private structs shared by the connection layer (ec_client.c) and the
 * typed method wrappers (ec_fs.c). Not installed. */
#ifndef EC_INTERNAL_H
#define EC_INTERNAL_H

#include "ec_proto.h"
#include "ec_util.h"
#include "proto/ws_reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest message (and frame) taken from the server: the server's own limit. */
#define EC_MAX_MESSAGE (64u << 20)

enum {
    EC_PENDING_CALL,    /* a blocking call; fails if the connection drops */
    EC_PENDING_RETRY,   /* a blocking call re-sent after resume (process/write: same writeId) */
    EC_PENDING_READ,    /* a catch-up process/read owned by a process tracker */
    EC_PENDING_FEATURE, /* a feature's request nobody waits for (its owner takes the reply) */
};

struct ec_pending {
    struct ec_pending *next;
    int64_t id;
    int kind;
    char *method;                   /* owned */
    json_t *params;                 /* owned; kept so a retry can re-send it */
    ec_process *reader;             /* EC_PENDING_READ: the process (NULL once freed) */
    const struct ec_feature *owner; /* EC_PENDING_FEATURE: who takes the reply */
    ec_tcp *tcp;                    /* ec_tcp.c's request: the stream (NULL once freed) */
    int tcp_op;                     /* ec_tcp.c's request: what was asked */
    size_t tcp_bytes;               /* ec_tcp.c's request: tcp/data bytes in flight */
    struct ec_xfer *xfer;           /* ec_xfer.c's block request: the transfer (NULL once over) */
    unsigned xfer_slot;             /* ...and the block's slot in it */
    bool sent;                      /* the whole request went out on the current connection */
    bool done;
    json_t *result; /* owned until handed to the caller */
    ec_error err;
};

struct ec_msg;

/* A feature of the client that owns part of the traffic (ec_http.c's streamed bodies,
 * ec_tcp.c's streams). It enrols itself on a client when first used
 * (ec_client_use_feature), so the core routes to it without knowing it, and the
 * features sit above the core like any user of the public calls. Any hook may be
 * NULL. */
struct ec_feature {
    /* A message before it is parsed (a fast path); true when taken. */
    bool (*on_raw)(ec_client *c, const char *text, size_t len);
    /* The reply (result or error) to one of its EC_PENDING_FEATURE requests, which is
     * freed after. */
    void (*on_reply)(ec_client *c, struct ec_pending *pd, struct ec_msg *m);
    /* A notification; true when taken. */
    bool (*on_notification)(ec_client *c, struct ec_msg *m);
    /* The connection is gone: what belonged to it ends (nothing of a feature is
     * resumed). */
    void (*on_loss)(ec_client *c);
    /* The client closes: everything of the feature is freed. */
    void (*free_all)(ec_client *c);
};
#define EC_FEATURES_MAX 4

/* Enrols f on c (once; idempotent). */
void ec_client_use_feature(ec_client *c, const struct ec_feature *f);

struct ec_process {
    ec_process *next;
    ec_client *c;
    char *id;         /* owned */
    char *session_id; /* owned: another session's process (a viewer), or NULL */
    struct ec_track t;
    struct ec_pevent *cur; /* the event last returned to the user, with the rest of its
                              merged run chained on `next` (owned) */
    bool merge_output;     /* ec_process_set_merge_output */
    struct ec_pending *read_pending;
    uint64_t next_write_id;
    char wid_prefix[20]; /* "" for a process this handle started; for an attached one a
                            random tag, since the server remembers writeIds per process
                            and other clients numbered theirs from 1 too */
    int64_t last_progress_ms;
    bool broken; /* a catch-up read was refused; see broken_err */
    ec_error broken_err;
};

/* The message layer: how one JSON-RPC message crosses a physical connection. Everything
 * above it (initialize and resume, calls, process tracking, fs) is the same whichever
 * layer runs; below it both layers share the socket, TLS and WebSocket code of
 * ec_client.c. The plain layer (ec_client.c) sends each message as one text message on
 * a ws:// or wss:// URL; the relay layer (ec_remote.c) asks an environment registry for a
 * connect bundle, then carries Noise-encrypted records in relay frames (REMOTE.md). */
struct ec_msg_layer {
    /* Opens a new physical connection and makes it ready for messages (for the relay:
     * bundle, upgrade, handshake). On failure the connection is dropped. */
    int (*open)(ec_client *c, int64_t deadline, ec_error *err);
    /* Sends one JSON-RPC message. On failure the connection is dropped. */
    int (*send)(ec_client *c, const char *text, size_t len, ec_error *err);
    /* One whole WebSocket data message (opcode WS_OP_TEXT or WS_OP_BINARY); it hands
     * each JSON-RPC message it yields to c->deliver. Returns -1 when the connection
     * must be dropped. */
    int (*on_ws_message)(ec_client *c, int opcode, const uint8_t *p, size_t n);
    /* The client is closing a live connection (before the WebSocket Close). May be
     * NULL. */
    void (*on_close)(ec_client *c);
    /* The physical connection is gone: forget what belonged to it. May be NULL. */
    void (*on_drop)(ec_client *c);
    /* Frees ml_state. May be NULL. */
    void (*destroy)(ec_client *c);
    /* Takes the raw bytes read into c->rbuf instead of the WebSocket frame parser
     * (the stdio layer's JSON lines); returns -1 when the connection must be dropped.
     * May be NULL. */
    int (*on_input)(ec_client *c);
    /* Why the connection was lost, when the layer knows better than "lost" (a program
     * that exited: its status). May be NULL, or return NULL. */
    const char *(*loss_reason)(ec_client *c);
    /* The transport cannot resume a session (stdio): a loss is terminal. */
    bool no_resume;
};

struct ec_client {
    const struct ec_msg_layer *ml; /* static; never NULL */
    /* Where a layer hands each JSON-RPC message it decoded: the request table, the
     * process trackers, the features, the hook (set by ec_client.c at connect). */
    void (*deliver)(ec_client *c, const char *text, size_t len);
    void *ml_state; /* the layer's own state, owned through ml->destroy */
    char *host, *port, *path, *token, *client_name; /* owned */
    int call_timeout_ms, reconnect_timeout_ms, lag_ms;
    int refused_timeout_ms; /* reconnect gives up after this long of refusals */
    bool last_refused;      /* the last connect attempt was refused (ECONNREFUSED) */
    int liveness_ms;        /* >0: probe a quiet process this often (remote mode) */
    int keepalive_ms;       /* >0: Ping the peer this often (remote mode's rendezvous) */
    int64_t ping_due;       /* when the next Ping goes (0: no connection yet) */
    int64_t ping_sent;      /* when the unanswered Ping went, or 0 */
    int fd;
    int64_t last_rx_ms; /* ec_now_ms() of the last byte from the server (or the connect) */
    uint8_t *rbuf;      /* raw bytes from the socket */
    size_t rlen, rcap;
    bool rx_short;       /* the last read took less than it had room for: the socket is
                            likely drained, and another read now would say EAGAIN */
    struct ws_reader rd; /* frames from the server (proto/ws_reader, client role) */
    uint8_t *wbuf;       /* scratch for outgoing frames */
    size_t wlen, wcap;
    int64_t next_id;
    struct ec_pending *pending;
    ec_process *procs;
    unsigned proc_counter;
    ec_tcp *tcps;
    unsigned tcp_counter;
    char *session_id; /* owned */
    json_t *env_info; /* owned reference */
    bool dead;        /* terminal: dead_err says why */
    ec_error dead_err;
    bool reconnecting;
    unsigned reconnects;
    ec_message_fn hook;
    void *hook_ud;
    void (*on_reconnect)(void *ud, int phase);
    void *on_reconnect_ud;
    bool tls;      /* wss:// */
    char *ca_file; /* owned, or NULL: the system store */
    struct ssl_ctx_st *ssl_ctx;
    struct ssl_st *ssl; /* the connection's TLS session, NULL for ws:// */
    /* Set (atomically, after dead_err) when the client is dead: ec_envs reads it from
     * other threads to find a handle lost for good without touching the client. */
    int gone;
    const struct ec_feature *features[EC_FEATURES_MAX]; /* enrolled, in order */
    int n_features;
    struct ec_http_stream *http_streams; /* streamed http/request bodies (ec_http.c) */
    unsigned http_counter;
    struct ec_xfer *xfer; /* the file transfer under way (ec_xfer.c), or NULL; not owned */
    unsigned xfer_counter;
};

int ec_call_kind(ec_client *c, int kind, const char *method, json_t *params, json_t **result,
                 ec_error *err);
int ec_url_parse(const char *url, char **host, char **port, char **path, bool *tls, ec_error *err);

/* For message layers (ec_client.c): the shared physical connection. */
/* Replaces the target (host, port, path, TLS) with url's. */
int ec_conn_set_url(ec_client *c, const char *url, ec_error *err);
/* TCP connect, TLS for wss, WebSocket upgrade (with the bearer token when c->token is
 * set). A refused upgrade fails with EC_ERR_TRANSPORT and code = the HTTP status. */
int ec_conn_open_ws(ec_client *c, int64_t deadline, ec_error *err);
/* One WebSocket message (opcode WS_OP_TEXT / WS_OP_BINARY / control). */
int ec_conn_send_ws(ec_client *c, int opcode, const void *payload, size_t n, ec_error *err);
/* Waits up to timeout_ms for input and handles what came (through ml->on_ws_message).
 * Returns 0, or -EC_ERR_TRANSPORT once the connection is gone. */
int ec_conn_read(ec_client *c, int timeout_ms, ec_error *err);
/* The input in c->rbuf: to the layer's on_input, or as WebSocket frames (data messages
 * to ml->on_ws_message; Ping, Pong and Close answered here). -1 when the connection
 * was dropped. */
int ec_conn_handle_input(ec_client *c);
/* Remote mode's keepalive Pings (see ec_conn.c); returns how long the caller may wait
 * (at most timeout_ms). */
int ec_conn_keepalive(ec_client *c, int timeout_ms);
void ec_conn_drop(ec_client *c);
/* Reads what the socket has into the client's input buffer (ec_conn.c); < 0 when the
 * connection was lost (and dropped). */
ssize_t ec_conn_read_some(ec_client *c);

/* For the typed wrappers (ec_tcp.c): requests answered through c->deliver. */
struct ec_pending *ec_pending_new(ec_client *c, int kind, const char *method, json_t *params);
/* Sends pd on the current connection; a failure shows up as a loss later. */
int ec_pending_send(ec_client *c, struct ec_pending *pd);
void ec_pending_unlink_free(ec_client *c, struct ec_pending *pd);
/* One pump step (waits at most timeout_ms): 0, or a negative kind once lost for good. */
int ec_pump(ec_client *c, int timeout_ms, ec_error *err);
/* {"processId": id} and, for a viewer's handle, "sessionId" (new reference). */
json_t *ec_process_params(const ec_process *p);

/* ec_remote.c: switch c to the relay layer for remote_url + environment_id. */
int ec_remote_init(ec_client *c, const ec_client_options *o, ec_error *err);

/* ec_codec.c: base64 of the wire. Decoding fails with EC_ERR_PROTOCOL; *data is
 * NUL-terminated (not counted). Both results: caller frees. */
int ec_b64_decode(const char *s, uint8_t **data, size_t *len, ec_error *err);
char *ec_b64_encode(const void *data, size_t len);

/* ec_stdio.c: switch c to the stdio layer for program_argv (program mode). */
int ec_program_init(ec_client *c, const ec_client_options *o, ec_error *err);

/* ec_conn.c: one WebSocket message whose payload is masked in place (no copy): the
 * EC_WS_HEADROOM bytes before payload must be writable (the header goes there), and
 * the payload is scrambled by the mask afterwards. On failure the connection is
 * dropped. */
#define EC_WS_HEADROOM 14
int ec_conn_send_ws_inplace(ec_client *c, int opcode, uint8_t *payload, size_t n, ec_error *err);
/* ec_client.c: one JSON-RPC message through the message layer, framed in place when
 * the layer is plain WebSocket (text then scrambled, EC_WS_HEADROOM bytes before it
 * writable), else sent as ml->send does. */
int ec_send_text_inplace(ec_client *c, char *text, size_t n, ec_error *err);

/* ec_conn.c: bytes as they are (no WebSocket frame) on the connection; on failure the
 * connection is dropped. */
int ec_conn_send_raw(ec_client *c, const void *buf, size_t n, ec_error *err);

/* ec_client.c: whether the client is dead (lost for good), safe to call from another
 * thread than the one using it; *why (may be NULL) gets the reason then. */
bool ec_client_lost(const ec_client *c, ec_error *why);

#endif
