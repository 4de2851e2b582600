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

#include "rpc/params.h"
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
    struct conn *conn; /* counted reference, released by the reply;
                          its owner (session_of) is the session */
    json_t *id;        /* owned: string or integer, echoed as given */
    json_t *params;    /* owned: NULL when absent */
    json_t *trace;     /* owned: the W3C trace context object, or NULL */
    const struct rpc_method *method;
    uv_loop_t *loop;
    uint64_t start_ns; /* arrival, for the request duration metric */
    bool counted;      /* holds one of its connection's
                          --concurrent-requests slots until freed */
    /* The method's payload member (struct rpc_payload) when it came as a large
     * plain string: its text, borrowed from the message instead of copied into
     * params (where a placeholder stands). Read it with rpc_param_payload. */
    const char *payload_member; /* its name (static), or NULL */
    char *payload;
    size_t payload_len;
    void *payload_store; /* owned: the storage payload points into */
    bool payload_bigbuf; /* payload_store is a util/bigbuf buffer (else malloc) */
};

typedef void (*rpc_handler_fn)(struct rpc_req *req);

struct rpc_method {
    const char *name;   /* e.g. "fs/readFile" */
    const char *family; /* lifecycle-gate wording, e.g. "filesystem" */
    rpc_handler_fn handler;
};

/* A params member that may carry megabytes of base64 (fs/writeFile's
 * dataBase64): when large, it is kept as a slice of the received message rather
 * than copied into the params tree, and the handler reads it with
 * rpc_param_payload. Tables end with a NULL method; registered with
 * rpc_register_payloads (dispatch.h) like the method tables. */
struct rpc_payload {
    const char *method;
    const char *member;
};

/* Method tables are NULL-name-terminated, one per method module, declared in the
 * module's header and registered with rpc_register_methods (dispatch.h). */

/* A capability a domain announces in environment/info's `capabilities` (initialize's
 * environmentInfo too): `value`, or what on() says when it is set (a feature a setting
 * turns off). */
struct rpc_capability {
    const char *name; /* "fsRename" */
    bool value;
    bool (*on)(void);
};

/* Everything one domain (process, fs, http, ...) registers, in one record declared in
 * its own folder, as nginx keeps one module record per module: its method tables, the
 * payload members kept out of params, the capabilities it announces and what it adds
 * to environment/info. server/server_methods.c lists the records once;
 * session_register_domain (session.h) registers the methods and payloads with rpc and
 * builds initialize's and environment/info's capabilities from them. */
struct rpc_domain {
    const char *name;                          /* "fs" */
    const struct rpc_method *const *methods;   /* NULL-terminated list of tables, or NULL */
    const struct rpc_payload *payloads;        /* or NULL */
    const struct rpc_capability *capabilities; /* NULL-name-terminated, or NULL */
    void (*info)(json_t *info);                /* members of environment/info, or NULL */
};

/* Sends {"id":..,"result":result}; steals result; frees req. */
void rpc_reply_json(struct rpc_req *req, json_t *result);
/* Sends {"error":{"code":..,"message":..},"id":..}; frees req. */
void rpc_reply_error(struct rpc_req *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with error.data = {"kind": kind} between code and message, as 0.171.0
 * sends process/start's spawn failures ("spawnNotFound"...); frees req. */
void rpc_reply_error_kind(struct rpc_req *req, int code, const char *kind, const char *message);
/* When d recorded a decode failure: replies -32602 with its text (freeing req) and
 * returns true, so a handler writes `if (rpc_reply_if_invalid(req, &d)) return;`. */
bool rpc_reply_if_invalid(struct rpc_req *req, const struct pdec *d);
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

/* Reads the method's payload member key (struct rpc_payload) like
 * pdec_string_len does, also when it was kept out of params: returns the text and
 * its length, or NULL (absent, or the decoder failed). The text belongs to req and
 * lives until the reply; when *writable comes back true it is req's alone and the
 * handler may overwrite it in place (decode base64 into it). Not NUL-terminated
 * when borrowed. */
const char *rpc_param_payload(struct rpc_req *req, struct pdec *d, const char *key,
                              enum pdec_presence presence, size_t *len, bool *writable);

/* Frees a request without replying (only for teardown of unanswerable requests). */
void rpc_req_free(struct rpc_req *req);

#endif
