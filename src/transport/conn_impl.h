/* conn_impl: the connection object, for the code that implements a transport (ws.c,
 * stdio.c and tls.c here; remote/relay_conn.c and remote/direct_conn.c above).
 * Everything that only uses connections uses conn.h. */
#ifndef EXEC_TRANSPORT_CONN_IMPL_H
#define EXEC_TRANSPORT_CONN_IMPL_H

#include <stdbool.h>
#include <uv.h>

#include "transport/conn.h"

struct conn_ops {
    const char *kind; /* "websocket" or "stdio": metrics label and log texts */
    unsigned flags;   /* enum conn_flag */
    /* Writes one message (payload at msg->data + BUF_MSG_HEADROOM). Takes msg. */
    void (*send)(struct conn *c, struct buf *msg);
    /* Starts closing the transport; conn_closed() is called once it is closed. */
    void (*close)(struct conn *c);
    /* Frees the transport object (refcount reached zero after close). */
    void (*destroy)(struct conn *c);
    /* Stops (false) or resumes (true) reading requests: a client over the queued
     * output limit gets no new replies (optional). */
    void (*set_reading)(struct conn *c, bool on);
    /* Hands over the storage of the message being delivered, or NULL (optional;
     * see conn_take_message). */
    void *(*take_message)(struct conn *c);
};

struct conn {
    const struct conn_ops *ops;
    uv_loop_t *loop;
    int refs;                   /* the transport holds one until closed; requests hold one each */
    bool open;                  /* false once closing started: sends are dropped */
    char peer[64];              /* "IP:PORT" or "stdio" */
    char identity[65];          /* conn_identity: hex digest, or "" */
    const char *transport;      /* log word and metrics label: ops->kind, or "http" for a
                                   listener connection not (yet) upgraded (static) */
    conn_message_fn on_message; /* where complete incoming messages go */
    size_t queued;              /* bytes in uv_write requests not yet completed */
    bool congested;             /* queued crossed CONN_HIGH_WATER and not yet below LOW */
    bool backlogged;            /* the backlog (what is queued behind the message being
                                   written) passed server_limits.max_queued: input
                                   stopped, closed once its queued process output is safe */
    size_t *wq;                 /* queued bytes of each queued message, oldest first: a */
    unsigned wq_cap, wq_head, wq_n;         /* ring of wq_cap slots, wq_n used from wq_head */
    uint64_t sent_total;                    /* bytes ever handed to the kernel-facing write path */
    uint64_t written_total;                 /* of those, bytes the kernel has taken */
    const struct conn_owner_ops *owner_ops; /* the bound owner (a session) or NULL */
    void *owner;                            /* not owned */
    int corked;                             /* conn_cork depth */
    struct conn_batch *batch;               /* messages gathered while corked (lazily allocated) */
    void *slots[CONN_SLOTS_MAX];
    void (*slot_free[CONN_SLOTS_MAX])(void *);
    void (*slot_unblocked[CONN_SLOTS_MAX])(void *);
    struct tls_session *tls; /* wss: every byte out is encrypted first (tls.c) */
    const char *delivering;  /* the message conn_deliver is handing up, or NULL */
    size_t held;             /* bytes of taken messages not yet released */
    bool held_paused;        /* held passed CONN_HELD_PAUSE: reading stopped */
    /* The in-flight budget and its watchdog (conn_budget.c): */
    bool busy;                          /* queued > 0: on the busy list */
    struct conn *busy_next, *busy_prev; /* the busy list (not owned) */
    uint64_t progress_ms;               /* loop time the kernel last took a byte of the
                                           queue, or the queue began */
    uv_stream_t *stream;                /* what conn_write writes to, or NULL (relay) */
    size_t stream_seen;                 /* its libuv write queue at the last look */
    size_t stream_added;                /* bytes handed to uv_write since then */
};

void conn_init(struct conn *c, const struct conn_ops *ops, uv_loop_t *loop,
               conn_message_fn on_message);
/* Renames what the connection is (metrics and logs): the WebSocket listener's
 * connections are "http" until they upgrade. word must be static. */
void conn_set_transport(struct conn *c, const char *word);
/* Records who authenticated the connection (auth_identity's digest). */
void conn_set_identity(struct conn *c, const char *identity);
/* Hands one complete incoming message to the reader (transports call it). */
void conn_deliver(struct conn *c, const char *data, size_t len);
/* Queues bufs on stream with flow accounting; `mem` is freed when written. */
void conn_write(struct conn *c, uv_stream_t *stream, char *mem, const uv_buf_t *bufs,
                unsigned nbufs);
/* wss: queues the ciphertext the TLS session has produced by itself (handshake
 * records); counts as no payload. */
void conn_tls_flush(struct conn *c, uv_stream_t *stream);
/* For a transport that queues its bytes elsewhere (a relay virtual stream shares
 * one physical socket): len payload bytes were handed to its write path. Returns
 * false when the backlog limit closed the connection instead (drop the bytes). */
bool conn_account_queued(struct conn *c, size_t len);
/* ...and len of them were taken by the kernel (status 0) or dropped (< 0): the
 * same back-pressure, backlog and unblock logic as conn_write's completions. */
void conn_account_written(struct conn *c, size_t len, int status);
/* conn_budget.c: c's queued output grew by n, or shrank by n (written: the kernel
 * took them, else they were dropped); counted against --max-inflight-bytes. */
void conn_budget_add(struct conn *c, size_t n);
void conn_budget_sub(struct conn *c, size_t n, bool written);
/* c goes away with bytes still counted (a transport that queues elsewhere). */
void conn_budget_forget(struct conn *c);
/* Whether dropping c's queued output loses nothing a resuming client cannot read
 * back: every process output notification still queued is also in its retained log. */
bool conn_backlog_safe(struct conn *c);
/* For conn.c's watchdog, every CONN_BUDGET_WATCH_MS while conn_budget_busy(): sample
 * the connections' progress, then the one to treat as not reading (over
 * --max-queued-bytes, nothing taken for CONN_BUDGET_IDLE_MS) and the one to close
 * for the in-flight budget (the slowest reader, while it is exceeded), or NULL. */
#define CONN_BUDGET_WATCH_MS 500
#define CONN_BUDGET_STALL_MS 1000
#define CONN_BUDGET_IDLE_MS 10000
bool conn_budget_busy(void);
void conn_budget_sample(uint64_t now);
struct conn *conn_budget_idle(uint64_t now);
struct conn *conn_budget_slowest(uint64_t now);

/* Transport calls this once the connection is fully closed: tells the owner,
 * frees module slots and drops the transport's reference. */
void conn_closed(struct conn *c);

#endif
