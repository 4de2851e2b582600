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
 * rpc_dispatch looks names up in, in the order registered. Registering a table again
 * does nothing. The executables register the domains' records at start
 * (server/server_methods.c, through session_register_domain), so rpc never names a
 * method module. */
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
/* A second gate, after the lifecycle one, that the layer above installs (the
 * server's --audit-required, server_methods.c): it returns why a method may not run
 * now (the request is then refused with -32603 and that text), or NULL. */
void rpc_set_work_gate(const char *(*gate)(const char *method));

/* Requests the server sends to the client (network/policyRequest). Each connection
 * numbers them with integer ids from 1. The callback runs once, on the loop thread:
 * with the response's `result` (RPC_CALL_RESULT) or `error` object (RPC_CALL_ERROR),
 * both borrowed for the call, or with NULL when the connection closed first
 * (RPC_CALL_CLOSED, from inside the close). */
enum rpc_call_outcome { RPC_CALL_RESULT, RPC_CALL_ERROR, RPC_CALL_CLOSED };
typedef void (*rpc_call_fn)(void *ctx, enum rpc_call_outcome outcome, json_t *value);
struct rpc_call;
/* Sends {"id":N,"method":method,"params":params} on c (steals params). Returns the
 * pending call, or NULL (callback never runs) when c is not initialized or is
 * closing. */
struct rpc_call *rpc_call_start(struct conn *c, const char *method, json_t *params, rpc_call_fn fn,
                                void *ctx);
/* Forgets a pending call: its callback will not run and a late response to its id
 * is ignored. NULL is allowed. */
void rpc_call_cancel(struct rpc_call *call);

/* Fuzzing switch, false in the daemon: when set, a request that passes the gate is
 * answered with a -32600 "dry run" error instead of running, so every handler stops
 * after decoding its params and the gate: no process is spawned, no file touched. */
extern bool rpc_dry_run;

#endif
