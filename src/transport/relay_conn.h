/* relay_conn: a relay virtual stream as a `struct conn` (the third transport beside
 * WebSocket and stdio). The only remote-mode file that knows conn_internal.h, so
 * porting onto a refactored transport interface touches this file alone; it lives
 * in transport/ because *_internal.h headers stay inside their folder. */
#ifndef EXEC_TRANSPORT_RELAY_CONN_H
#define EXEC_TRANSPORT_RELAY_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "transport/conn.h"

struct relay_stream;

/* A new open connection (kind "relay", peer "relay:<stream id prefix>") bound to
 * st, its messages going to on_message. The demux owns one reference until
 * relay_conn_detach. */
struct conn *relay_conn_new(uv_loop_t *loop, struct relay_stream *st, const char *stream_id,
                            conn_message_fn on_message);
/* The stream is gone (reset, socket lost): unbinds it and closes the connection;
 * the session detaches and stays resumable. Drops the demux's reference. */
void relay_conn_detach(struct conn *c);
/* One complete inbound JSON-RPC message. */
void relay_conn_deliver(struct conn *c, const uint8_t *msg, size_t len);
/* Accounting for a data frame of n bytes about to be sent for c: returns false when
 * the connection is over its backlog limit and closed instead. */
bool relay_conn_queued(struct conn *c, size_t n);
/* rv_ws_sent_fn for those frames (arg = the conn, referenced by relay_conn_queued). */
void relay_conn_sent(void *arg, size_t n, int status);

#endif
