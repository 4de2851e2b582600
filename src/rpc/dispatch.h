/* dispatch: classifies each incoming message (PROTOCOL.md sections 2-3), applies
 * the lifecycle gate in arrival order and hands requests to method handlers. */
#ifndef EXEC_RPC_DISPATCH_H
#define EXEC_RPC_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "rpc/rpc.h"

struct conn;

/* Handles one complete message received on c (a conn_message_fn: transports are
 * started with it). */
void rpc_dispatch(struct conn *c, const char *data, size_t len);

/* Adds a NULL-name-terminated method table (static storage, not copied) to those
 * rpc_dispatch looks names up in. Registering a table again does nothing. The
 * executables register theirs at start (server/server_methods.c), so rpc never
 * names a method module. */
void rpc_register_methods(const struct rpc_method *table);
/* Adds a table of payload members (struct rpc_payload), the same way. */
void rpc_register_payloads(const struct rpc_payload *table);

/* The lifecycle gate's state, which rpc keeps per connection: whether initialize
 * succeeded on c. The initialize handler sets it; `initialized` needs it. */
bool rpc_conn_initialized(const struct conn *c);
void rpc_conn_set_initialized(struct conn *c);

/* The lifecycle gate: returns true when req's connection may use its method's
 * family; otherwise replies with the documented -32600 and returns false.
 * Handlers call it after decoding their params (params are decoded first). */
bool rpc_check_ready(struct rpc_req *req);

/* Fuzzing switch, false in the daemon: when set, a request that passes the gate is
 * answered with a -32600 "dry run" error instead of running, so every handler stops
 * after decoding its params and the gate: no process is spawned, no file touched. */
extern bool rpc_dry_run;

#endif
