/* tcp_stream: one outbound TCP connection made for a client (TCP forwarding, ours,
 * docs/PROTOCOL.md §11 (i)), without the protocol: resolving on the thread pool,
 * trying every address in order within a deadline, reading while the owner has
 * window and is not congested, writing with a completion per write, half-close both
 * ways, and one end. What happens is reported through the struct tcp_stream_events
 * the owner gives (tcp_methods.c turns them into replies and notifications). */
#ifndef EXEC_TCP_TCP_STREAM_H
#define EXEC_TCP_TCP_STREAM_H

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

enum tcp_state { TCP_RESOLVING, TCP_CONNECTING, TCP_OPEN, TCP_DONE };

struct tcp_stream;

/* What a stream tells its owner, on the loop thread, as it happens. */
struct tcp_stream_events {
    /* Connected to addr:port (the peer's address as text); token is the one
     * tcp_stream_new took. */
    void (*connected)(struct tcp_stream *st, void *token, const char *addr, int port);
    /* Bytes from the peer, or its FIN (len 0, eof true). */
    void (*data)(struct tcp_stream *st, const uint8_t *data, size_t len, bool eof);
    /* The stream ends (once): error is NULL for a clean close. connect_token is
     * tcp_stream_new's token when the connection never came up (then error says
     * why), else NULL; notify is what tcp_stream_end was told (the stream's own
     * errors and a clean close: true). The owner lets go of the stream here
     * (tcp_stream_unref for its reference). */
    void (*ended)(struct tcp_stream *st, void *connect_token, const char *error, bool notify);
    /* A write (tcp_stream_write) is done: status 0, or a libuv error (UV_ECANCELED
     * when the stream closed first). The stream then ends on any other error. */
    void (*written)(struct tcp_stream *st, void *token, int status);
    /* Whether reading must pause (the owner's queue is congested or gone). */
    bool (*paused)(const struct tcp_stream *st);
};

struct tcp_stream {
    struct tcp_stream *next, *prev; /* the owner's list */
    void *owner;                    /* the owner's, untouched here */
    const struct tcp_stream_events *events;
    void *connect_token; /* until connected or ended */
    char *id;
    struct buf id_json; /* the id as a JSON string */
    char host[256];
    unsigned port;
    enum tcp_state state;
    uv_getaddrinfo_t gai;
    struct addrinfo *ai, *ai_next; /* the resolved addresses, tried in order */
    uv_tcp_t sock;
    bool sock_live; /* sock is initialized and not closing */
    uv_connect_t creq;
    uv_shutdown_t sreq;
    uv_timer_t timer; /* the connect deadline */
    uint64_t window, unacked;
    bool reading;
    bool remote_eof; /* the peer sent FIN */
    bool eof_asked;  /* the owner asked for our FIN (tcp_stream_shutdown) */
    bool shut_done;
    size_t write_queued; /* bytes in writes not completed */
    int last_error;      /* of the last connect attempt */
    int refs;            /* the owner, open handles, a getaddrinfo in flight */
};

/* One write: its bytes follow the header (tcp_write_new). */
struct tcp_write {
    uv_write_t w;
    struct tcp_stream *st;
    void *token; /* the owner's, handed back to `written` */
    size_t len;
    uint8_t data[];
};

/* A stream named id to host:port, holding one reference for its owner, not yet
 * started: the owner lists it, then calls tcp_stream_start. connect_token comes
 * back with `connected` or `ended`. */
struct tcp_stream *tcp_stream_new(const char *id, const char *host, unsigned port, uint64_t window,
                                  const struct tcp_stream_events *events, void *owner,
                                  void *connect_token);
/* Starts resolving and the connect deadline; may end the stream at once. */
void tcp_stream_start(struct tcp_stream *st, uv_loop_t *loop, uint64_t timeout_ms);
void tcp_stream_unref(struct tcp_stream *st);
/* Ends the stream (idempotent): `ended` with error and notify, the socket closed
 * (pending writes then complete with UV_ECANCELED). */
void tcp_stream_end(struct tcp_stream *st, const char *error, bool notify);
/* A write with room for cap bytes (set len); free it if it is not written. */
struct tcp_write *tcp_write_new(size_t cap);
/* Queues tw (len > 0) on an open stream; `written` follows. Returns 0, or a libuv
 * error (tw is then still the caller's). */
int tcp_stream_write(struct tcp_stream *st, struct tcp_write *tw, void *token);
/* Our FIN after the queued writes. */
void tcp_stream_shutdown(struct tcp_stream *st);
/* The owner consumed n bytes of data: the window has room again. */
void tcp_stream_ack(struct tcp_stream *st, uint64_t n);
/* Reads again if it may (the owner's queue drained). */
void tcp_stream_resume(struct tcp_stream *st);

#endif
