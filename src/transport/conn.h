/* conn: one client connection, whatever carries it (WebSocket or stdio lines;
 * relay streams in remote mode).
 *
 * The layers above see only this interface and never the transports, and the
 * transport never names them: complete incoming messages go to the conn_message_fn
 * its listener was started with (rpc's), and once a session binds the connection
 * it installs itself as the owner (struct conn_owner_ops) to hear about the close
 * and the output flow. How transport kinds differ is a set of flags. A connection is
 * reference counted: an in-flight request holds a reference, so a reply computed
 * on the thread pool after the peer went away is simply dropped. Outgoing messages
 * are handed over whole (one JSON-RPC message each) in a buf started with
 * buf_init_msg(), whose headroom lets the WebSocket transport write its frame
 * header in place instead of copying the payload. */
#ifndef EXEC_TRANSPORT_CONN_H
#define EXEC_TRANSPORT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

struct conn;

/* Receives each complete incoming message (data is valid during the call only).
 * The transport holds a reference on c for the call; the callee may close c. */
typedef void (*conn_message_fn)(struct conn *c, const char *data, size_t len);

/* During the conn_message_fn call for data, takes the message's storage when the
 * transport can give it away: a large message gathered in a util/bigbuf buffer
 * that starts at data. The caller then owns it and may keep data past the call,
 * or modify it, until conn_release_message. NULL otherwise (data stays the
 * transport's).
 *
 * Taken messages count against the connection's input: while they hold more than
 * CONN_HELD_PAUSE bytes, no more is read from the peer (a client pipelining
 * hundreds of 1 MiB writes waits instead of the server holding them all), until
 * they are down to CONN_HELD_RESUME. */
#define CONN_HELD_PAUSE (16u << 20)
#define CONN_HELD_RESUME (8u << 20)
void *conn_take_message(struct conn *c, const char *data);
/* Frees a message taken from c (NULL: nothing) and credits c's input. Loop thread. */
void conn_release_message(struct conn *c, void *m);

/* How a transport kind differs (conn_flags), so nobody compares kind names. */
enum conn_flag {
    /* The only connection there will be (stdio): there is no resume, so whatever
     * is bound to it ends with it. */
    CONN_F_NO_RESUME = 1u << 0,
    /* No peer address to name (stdio): error texts name the transport only. */
    CONN_F_ANON_PEER = 1u << 1,
};
unsigned conn_flags(const struct conn *c);

/* Queues one complete message. Takes ownership of msg's storage (msg is left
 * empty). Dropped silently when the connection is closing or closed. */
void conn_send(struct conn *c, struct buf *msg);

/* Batching: between conn_cork and conn_uncork (nestable) the messages sent are
 * gathered and leave in one writev at the last uncork, in order. Producers that
 * emit many messages in one loop turn (process output) use it to pay one syscall
 * and one peer wakeup per turn instead of one per message. */
void conn_cork(struct conn *c);
void conn_uncork(struct conn *c);

/* Asks the transport to close (idempotent); the owner hears of it once closed. */
void conn_close(struct conn *c);
bool conn_is_open(const struct conn *c);
/* The loop c runs on. */
uv_loop_t *conn_loop(const struct conn *c);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);

/* "IP:PORT" of the peer for WebSocket connections, "stdio" otherwise. Owned by c. */
const char *conn_peer(const struct conn *c);
/* Transport name used in protocol texts: "websocket" or "stdio". */
const char *conn_kind(const struct conn *c);
/* Who authenticated the connection: a digest of the bearer token (capability
 * tokens) or of the JWT's issuer and subject (auth.h, auth_identity), or "" when
 * the listener has no authentication. Sessions remember their creator's identity;
 * only the same identity may list or view them (session/list, process/attach). */
const char *conn_identity(const struct conn *c);

/* Bytes of messages received and sent on all connections since start: how busy
 * the server is (server_run gives memory back once it is quiet). Loop thread. */
uint64_t conn_traffic_bytes(void);

/* Bytes handed to the kernel-facing write queue and not yet written. */
size_t conn_queued_bytes(const struct conn *c);

/* Running byte offset of the outgoing stream just after the last queued message,
 * and how far of it the kernel has taken: a message ending at offset E has left
 * the queue once conn_written_total() >= E. */
uint64_t conn_sent_total(const struct conn *c);
uint64_t conn_written_total(const struct conn *c);

/* The owner of a bound connection (the session): the transport calls these and
 * knows nothing else about it. All three run on the loop thread. */
struct conn_owner_ops {
    /* c has closed (it stays valid during the call): drop the binding. The owner
     * is uninstalled before the call. */
    void (*closed)(void *owner, struct conn *c);
    /* c's write queue drained below CONN_LOW_WATER after being congested: resume
     * the producers that paused. */
    void (*unblocked)(void *owner, struct conn *c);
    /* Whether dropping every byte queued past written_total (a slow client's
     * backlog) loses nothing the client cannot read back after a resume. */
    bool (*output_safe)(void *owner, const struct conn *c, uint64_t written_total);
};
/* Installs (or with ops NULL removes) c's owner; owner is not owned by c. */
void conn_set_owner(struct conn *c, const struct conn_owner_ops *ops, void *owner);
/* c's owner if it was installed with these ops, else NULL (a typed lookup). */
void *conn_owner(const struct conn *c, const struct conn_owner_ops *ops);

/* Per-connection state owned by the modules above (the rpc lifecycle gate, open file
 * handles, HTTP and TCP streams, watched processes). The transport names none of
 * them: each module keeps one `static struct conn_slot` and passes it, and the slot's
 * index is handed out on its first use (at most CONN_SLOTS_MAX modules). free_fn
 * runs once when the connection closes. */
#define CONN_SLOTS_MAX 8
struct conn_slot {
    _Atomic int index; /* 1 + the index, 0 until first use */
};
void *conn_slot_get(const struct conn *c, struct conn_slot *slot);
void conn_slot_set(struct conn *c, struct conn_slot *slot, void *state, void (*free_fn)(void *));
/* The slot's state, created on first use: size zeroed bytes, freed with free_fn,
 * with unblocked (may be NULL) as its conn_slot_on_unblocked callback. */
void *conn_slot_ensure(struct conn *c, struct conn_slot *slot, size_t size, void (*free_fn)(void *),
                       void (*unblocked)(void *));
/* fn(state) runs when the connection's write queue drains below CONN_LOW_WATER
 * after being congested: a slot's producer that paused itself resumes. */
void conn_slot_on_unblocked(struct conn *c, struct conn_slot *slot, void (*fn)(void *));

/* Output flow control: above CONN_HIGH_WATER the producers (the owner's processes,
 * the slots' streams) stop reading their sources; below CONN_LOW_WATER they are
 * told to resume (conn_owner_ops.unblocked, conn_slot_on_unblocked). */
#define CONN_HIGH_WATER (4u << 20)
#define CONN_LOW_WATER (1u << 20)
bool conn_is_congested(const struct conn *c);

#endif
