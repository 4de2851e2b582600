/* rpc: the JSON-RPC request as seen by method handlers, and the method tables.
 *
 * A handler is called on the loop thread with a struct rpc_req it owns. It answers
 * exactly once, now or later (after thread-pool work or a long poll), with one of
 * the rpc_reply_* functions, which send the response (if the connection is still
 * there) and free the request. Envelope parsing, the lifecycle gate and dispatch
 * live in dispatch.c; handlers never see a request that failed them. */
#ifndef EXEC_RPC_RPC_H
#define EXEC_RPC_RPC_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

struct conn;
struct uri_error;

enum rpc_code {
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    RPC_NOT_FOUND = -32004,
    RPC_SESSION_ATTACHED = -32010,
};

struct rpc_req {
    struct conn *conn;              /* counted reference, released by the reply;
                                       its owner (session_of) is the session */
    json_t *id;                     /* owned: string or integer, echoed as given */
    json_t *params;                 /* owned: NULL when absent */
    json_t *trace;                  /* owned: the W3C trace context object, or NULL */
    const struct rpc_method *method;
    uv_loop_t *loop;
    uint64_t start_ns;              /* arrival, for the request duration metric */
    bool counted;                   /* holds one of its connection's
                                       --concurrent-requests slots until freed */
};

typedef void (*rpc_handler_fn)(struct rpc_req *req);

struct rpc_method {
    const char *name;     /* e.g. "fs/readFile" */
    const char *family;   /* lifecycle-gate wording, e.g. "filesystem" */
    rpc_handler_fn handler;
};

/* Method tables are NULL-name-terminated, one per method module, declared in the
 * module's header and registered with rpc_register_methods (dispatch.h). */

/* Sends {"id":..,"result":result}; steals result; frees req. */
void rpc_reply_json(struct rpc_req *req, json_t *result);
/* Sends {"error":{"code":..,"message":..},"id":..}; frees req. */
void rpc_reply_error(struct rpc_req *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Replies with an OS error the way fs methods report it: ENOENT -> -32004,
 * EACCES/EPERM/EINVAL -> -32600, anything else -> -32603, message
 * "<musl text> (os error N)". Frees req. */
void rpc_reply_errno(struct rpc_req *req, int errnum);
/* The fs error code for an errno (see rpc_reply_errno). */
int rpc_errno_code(int errnum);
/* The code the reference gives a file: URI error (proto/uri.h): -32600 for a
 * foreign host, -32602 for everything else. */
int rpc_uri_error_code(const struct uri_error *e);

/* Hand-written results for hot paths: rpc_result_begin starts b as a message and
 * writes `{"id":<id>,"result":`; the caller appends the result JSON text; then
 * rpc_result_finish closes the object, sends it and frees req. */
void rpc_result_begin(struct rpc_req *req, struct buf *b);
void rpc_result_finish(struct rpc_req *req, struct buf *b);

/* Frees a request without replying (only for teardown of unanswerable requests). */
void rpc_req_free(struct rpc_req *req);

#endif
