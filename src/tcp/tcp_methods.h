/* tcp_methods: TCP forwarding (ours, docs/PROTOCOL.md §11 (i)): tcp/connect opens an
 * outbound TCP connection from this host on the client's behalf, what ssh's
 * direct-tcpip channel does for `ssh -L`, and carries its bytes over the JSON-RPC
 * connection. Off unless the server runs with --allow-tcp-forwarding (capability
 * tcpForward); refused for a request whose sandbox restricts the network. Its
 * method table, registered with rpc. */
#ifndef EXEC_TCP_TCP_METHODS_H
#define EXEC_TCP_TCP_METHODS_H

#include "rpc/rpc.h"

/* Streams per connection, and the receive window bounds (bytes a client lets the
 * server send ahead of its tcp/ack). */
#define TCP_MAX_STREAMS 1024
#define TCP_DEFAULT_WINDOW (1u << 20)
#define TCP_MIN_WINDOW (4u << 10)
#define TCP_MAX_WINDOW (16u << 20)
/* Bytes of tcp/data a stream may have queued towards its peer before more are
 * refused: a client waits for the replies of what it sent (its window). */
#define TCP_MAX_WRITE_QUEUE (16u << 20)
#define TCP_CONNECT_TIMEOUT_MS 30000

/* tcp/connect, tcp/data, tcp/ack, tcp/close. */
extern const struct rpc_method tcp_methods[];

/* The tcp domain's record (rpc.h): tcp_methods and tcpForward. */
extern const struct rpc_domain tcp_domain;

#endif
