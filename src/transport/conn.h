/* conn: one client connection, whatever carries it (WebSocket or stdio lines).
 *
 * The rpc layer and the method modules see only this interface. A connection is
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

#include "util/buf.h"

struct conn;
struct session;

/* Queues one complete message. Takes ownership of msg's storage (msg is left
 * empty). Dropped silently when the connection is closing or closed. */
void conn_send(struct conn *c, struct buf *msg);

/* Batching: between conn_cork and conn_uncork (nestable) the messages sent are
 * gathered and leave in one writev at the last uncork, in order. Producers that
 * emit many messages in one loop turn (process output) use it to pay one syscall
 * and one peer wakeup per turn instead of one per message. */
void conn_cork(struct conn *c);
void conn_uncork(struct conn *c);

bool conn_is_open(const struct conn *c);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);

/* "IP:PORT" of the peer for WebSocket connections, "stdio" otherwise. */
const char *conn_peer(const struct conn *c);
/* Transport name used in protocol texts: "websocket" or "stdio". */
const char *conn_kind(const struct conn *c);

/* Bytes handed to the kernel-facing write queue and not yet written. */
size_t conn_queued_bytes(const struct conn *c);

/* Running byte offset of the outgoing stream just after the last queued message,
 * and how far of it the kernel has taken: a message ending at offset E has left
 * the queue once conn_written_total() >= E. */
uint64_t conn_sent_total(const struct conn *c);
uint64_t conn_written_total(const struct conn *c);

/* The session attached to this connection, or NULL before initialize. */
struct session *conn_session(const struct conn *c);

/* Per-connection state owned by other modules (open file handles, HTTP streams).
 * free_fn runs once when the connection closes. */
enum conn_slot { CONN_SLOT_FS, CONN_SLOT_HTTP, CONN_SLOT_COUNT };
void *conn_slot_get(const struct conn *c, enum conn_slot slot);
void conn_slot_set(struct conn *c, enum conn_slot slot, void *state, void (*free_fn)(void *));
/* fn(state) runs when the connection's write queue drains below CONN_LOW_WATER
 * after being congested: a slot's producer that paused itself resumes. */
void conn_slot_on_unblocked(struct conn *c, enum conn_slot slot, void (*fn)(void *));

/* Output flow control: called by the transport when the queue crosses the marks.
 * Above CONN_HIGH_WATER the session's producers stop reading their children;
 * below CONN_LOW_WATER they resume. */
#define CONN_HIGH_WATER (4u << 20)
#define CONN_LOW_WATER (1u << 20)
bool conn_is_congested(const struct conn *c);

#endif
