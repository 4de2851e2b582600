/* ws: the WebSocket listener: TCP accept, the HTTP upgrade, then RFC 6455 frames
 * carrying one JSON-RPC message each (PROTOCOL.md section 1). */
#ifndef EXEC_TRANSPORT_WS_H
#define EXEC_TRANSPORT_WS_H

#include <uv.h>

#include "transport/conn.h"

struct ws_listener;

/* Binds host:port (numeric IPv4/IPv6) and starts accepting; every connection's
 * messages go to on_message. On success returns 0, stores the listener and writes
 * the bound URL ("ws://127.0.0.1:43567") into url. */
int ws_listen(uv_loop_t *loop, const char *host, int port, conn_message_fn on_message,
              struct ws_listener **out, char *url, size_t urllen);
/* Stops accepting and closes every connection. */
void ws_shutdown(struct ws_listener *l);

/* Sans-I/O entry for the fuzzer: serves an already-connected stream socket fd (owned
 * from then on) as an accepted connection that is not read from; ws_conn_receive then
 * hands it bytes exactly as the read callback would (HTTP head, then frames). Replies
 * go to fd. Close with conn_close() and run the loop to free it. Returns NULL (fd
 * left to the caller) when libuv refuses the fd. */
struct conn *ws_conn_open_fd(uv_loop_t *loop, uv_os_sock_t fd, conn_message_fn on_message);
void ws_conn_receive(struct conn *c, const char *data, size_t len);

#endif
