/* direct_conn: the `--remote-transport direct` WebSocket as a `struct conn`
 * (docs/REMOTE.md §8.6). On that socket the executor is a plain JSON-RPC
 * exec-server, the same dialect and dispatch as --listen: one socket = one
 * connection, messages as text. The socket is the remote/rv_ws client the
 * executor dialed; this file only adapts it (send with the usual back-pressure
 * accounting, set_reading stops reading the socket, close closes it). */
#ifndef EXEC_REMOTE_DIRECT_CONN_H
#define EXEC_REMOTE_DIRECT_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "remote/rv_ws.h"
#include "transport/conn.h"

/* A new open connection (kind "direct", peer "direct") over the open socket ws,
 * its messages going to on_message. The caller owns one reference until
 * direct_conn_detach. */
struct conn *direct_conn_new(uv_loop_t *loop, struct rv_ws *ws, conn_message_fn on_message);
/* One complete incoming message from the socket. */
void direct_conn_deliver(struct conn *c, const uint8_t *msg, size_t len);
/* The socket is gone: closes the connection (its session detaches and stays
 * resumable) and drops the caller's reference. */
void direct_conn_detach(struct conn *c);

#endif
