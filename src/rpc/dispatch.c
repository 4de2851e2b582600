/* dispatch: envelope classification, lifecycle gate, method lookup and the reply
 * writers (see dispatch.h and rpc.h).
 *
 * Every handler runs synchronously on the loop thread in arrival order up to its
 * first asynchronous step, so the gate and the effects of initialize/initialized
 * are ordered exactly as the messages arrived even though the requests themselves
 * complete concurrently (PROTOCOL.md section 3.4). */
#include "rpc/dispatch.h"
#include "proto/json_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "transport/conn.h"
#include "util/mem.h"
#include "util/oserr.h"

#define RPC_MAX_TABLES 16
static const struct rpc_method *method_tables[RPC_MAX_TABLES];
static size_t n_method_tables;

void rpc_register_methods(const struct rpc_method *table)
{
    for (size_t t = 0; t < n_method_tables; t++)
        if (method_tables[t] == table) return;
    if (n_method_tables == RPC_MAX_TABLES) abort(); /* a build-time mistake */
    method_tables[n_method_tables++] = table;
}

static const struct rpc_payload *payload_tables[RPC_MAX_TABLES];
static size_t n_payload_tables;

void rpc_register_payloads(const struct rpc_payload *table)
{
    for (size_t t = 0; t < n_payload_tables; t++)
        if (payload_tables[t] == table) return;
    if (n_payload_tables == RPC_MAX_TABLES) abort();
    payload_tables[n_payload_tables++] = table;
}

/* The payload member of method name, or NULL. */
static const char *payload_member(const char *name)
{
    for (size_t t = 0; t < n_payload_tables; t++)
        for (const struct rpc_payload *p = payload_tables[t]; p->method; p++)
            if (strcmp(p->method, name) == 0) return p->member;
    return NULL;
}

static const struct rpc_method *find_method(const char *name)
{
    for (size_t t = 0; t < n_method_tables; t++)
        for (const struct rpc_method *m = method_tables[t]; m->name; m++)
            if (strcmp(m->name, name) == 0) return m;
    return NULL;
}

/* The lifecycle gate's per-connection state (CONN_SLOT_RPC), allocated when
 * initialize succeeds: no slot means not initialized. */
struct rpc_gate {
    bool initialized; /* initialize succeeded on this connection */
    bool ready;       /* the initialized notification arrived */
};

static struct rpc_gate *gate_of(const struct conn *c)
{
    return conn_slot_get(c, CONN_SLOT_RPC);
}

bool rpc_conn_initialized(const struct conn *c)
{
    struct rpc_gate *g = gate_of(c);
    return g && g->initialized;
}

void rpc_conn_set_initialized(struct conn *c)
{
    struct rpc_gate *g = gate_of(c);
    if (!g) {
        g = xcalloc(1, sizeof *g);
        conn_slot_set(c, CONN_SLOT_RPC, g, free);
    }
    g->initialized = true;
}

static void put_id(struct buf *b, const json_t *id)
{
    if (json_is_string(id)) buf_put_json_str(b, json_string_value(id), json_string_length(id));
    else if (json_is_integer(id)) buf_put_i64(b, json_integer_value(id));
    else buf_puts(b, "-1");
}

static void send_error(struct conn *c, const json_t *id, int code, const char *msg)
{
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_put_i64(&b, code);
    buf_puts(&b, ",\"message\":");
    buf_put_json_str(&b, msg, strlen(msg));
    buf_puts(&b, "},\"id\":");
    put_id(&b, id);
    buf_putc(&b, '}');
    conn_send(c, &b);
}

void rpc_req_free(struct rpc_req *req)
{
    if (req->payload_bigbuf) conn_release_message(req->conn, req->payload_store);
    else free(req->payload_store);
    json_decref(req->id);
    json_decref(req->params);
    json_decref(req->trace);
    conn_unref(req->conn);
    free(req);
}

void rpc_result_begin(struct rpc_req *req, struct buf *b)
{
    buf_init_msg(b);
    buf_puts(b, "{\"id\":");
    put_id(b, req->id);
    buf_puts(b, ",\"result\":");
}

void rpc_result_finish(struct rpc_req *req, struct buf *b)
{
    metrics_request_done(req->method->name, true, metrics_now_ns() - req->start_ns);
    buf_putc(b, '}');
    conn_send(req->conn, b);
    rpc_req_free(req);
}

void rpc_reply_json(struct rpc_req *req, json_t *result)
{
    struct buf b;
    rpc_result_begin(req, &b);
    char *text = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    buf_puts(&b, text ? text : "null");
    free(text);
    json_decref(result);
    rpc_result_finish(req, &b);
}

void rpc_reply_error(struct rpc_req *req, int code, const char *fmt, ...)
{
    struct buf msg;
    buf_init(&msg);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    buf_putc(&msg, '\0');
    metrics_request_done(req->method->name, false, metrics_now_ns() - req->start_ns);
    send_error(req->conn, req->id, code, msg.data);
    buf_free(&msg);
    rpc_req_free(req);
}

int rpc_errno_code(int errnum)
{
    switch (errnum) {
    case ENOENT: return RPC_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EINVAL: return RPC_INVALID_REQUEST;
    default: return RPC_INTERNAL_ERROR;
    }
}

int rpc_uri_error_code(const struct uri_error *e)
{
    return e->kind == URI_ERR_HOST ? RPC_INVALID_REQUEST : RPC_INVALID_PARAMS;
}

void rpc_reply_errno(struct rpc_req *req, int errnum)
{
    char text[256];
    oserr_format(errnum, text, sizeof text);
    rpc_reply_error(req, rpc_errno_code(errnum), "%s", text);
}

bool rpc_dry_run;

bool rpc_check_ready(struct rpc_req *req)
{
    struct rpc_gate *g = gate_of(req->conn);
    if (!g || !g->initialized) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "client must call initialize before using %s methods",
                        req->method->family);
        return false;
    }
    if (!g->ready) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "client must send initialized before using %s methods",
                        req->method->family);
        return false;
    }
    if (rpc_dry_run) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "dry run: %s stops after the gate",
                        req->method->name);
        return false;
    }
    return true;
}

static void malformed(struct conn *c, const char *detail)
{
    struct buf m;
    buf_init(&m);
    if (conn_flags(c) & CONN_F_ANON_PEER)
        buf_printf(&m, "failed to parse JSON-RPC message from exec-server stdio: %s", detail);
    else
        buf_printf(&m, "failed to parse websocket JSON-RPC message from exec-server websocket %s: %s",
                   conn_peer(c), detail);
    buf_putc(&m, '\0');
    send_error(c, NULL, RPC_INVALID_REQUEST, m.data);
    buf_free(&m);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "map";
    case JSON_ARRAY: return "sequence";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "floating point";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* Returns NULL when `trace` is absent or well formed, else the serde-style detail. */
static const char *check_trace(const json_t *trace, char *detail, size_t n)
{
    if (!trace || json_is_null(trace)) return NULL;
    if (!json_is_object(trace)) {
        snprintf(detail, n, "invalid type: %s, expected struct W3cTraceContext", type_name(trace));
        return detail;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)trace, k, v)
    {
        if ((strcmp(k, "traceparent") == 0 || strcmp(k, "tracestate") == 0) && !json_is_null(v) &&
            !json_is_string(v)) {
            snprintf(detail, n, "invalid type: %s, expected a string", type_name(v));
            return detail;
        }
    }
    return NULL;
}

const char *rpc_param_payload(struct rpc_req *req, struct pdec *d, const char *key,
                              enum pdec_presence presence, size_t *len, bool *writable)
{
    *writable = false;
    if (req->payload && !d->failed && strcmp(key, req->payload_member) == 0) {
        *len = req->payload_len;
        *writable = true;
        return req->payload;
    }
    return pdec_string_len(d, key, presence, len);
}

/* The borrowing method's payload member, a placeholder for slice `big` of the
 * message: keeps it as a slice of the message, taking the message's storage
 * from the transport when it can give it, else copying the slice. */
static void keep_payload(struct conn *c, const char *data, const struct json_load_bigs *bigs,
                         int big, struct rpc_req *req)
{
    char *store = conn_take_message(c, data);
    if (store) {
        req->payload_bigbuf = true;
        req->payload = store + (bigs->v[big].p - data);
    } else {
        store = xmemdup(bigs->v[big].p, bigs->v[big].n);
        req->payload = store;
    }
    req->payload_store = store;
    req->payload_len = bigs->v[big].n;
}

void rpc_dispatch(struct conn *c, const char *data, size_t len)
{
    json_error_t jerr;
    struct json_load_bigs bigs;
    json_t *msg = json_load_message_split(data, len, JSON_REJECT_DUPLICATES, &jerr, &bigs);
    char detail[256];
    /* Every large value goes into the tree now, before anything looks at the
     * message, except a method's payload member (struct rpc_payload). */
    int big = -1;
    const char *member = NULL;
    if (msg && bigs.n) {
        json_t *m = json_is_object(msg) ? json_object_get(msg, "method") : NULL;
        member = json_is_string(m) && json_object_get(msg, "id")
                     ? payload_member(json_string_value(m))
                     : NULL;
        json_t *params = json_is_object(msg) ? json_object_get(msg, "params") : NULL;
        json_t *keep = member && json_is_object(params) ? json_object_get(params, member) : NULL;
        big = json_load_big_index(keep, &bigs);
        if (!json_load_splice(msg, &bigs, big >= 0 ? keep : NULL)) {
            /* Not what the scan expected: parse it as jansson alone would. */
            json_decref(msg);
            msg = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
            big = -1;
        }
    }
    if (!msg) {
        snprintf(detail, sizeof detail, "%s at line %d column %d", jerr.text, jerr.line,
                 jerr.column);
        /* jansson quotes the input near the error, which may be invalid UTF-8 (or cut
         * mid-character); the reply must stay valid JSON in a text frame (fuzz find). */
        struct buf clean;
        buf_init(&clean);
        utf8_lossy(&clean, detail, strlen(detail));
        buf_putc(&clean, '\0');
        malformed(c, clean.data);
        buf_free(&clean);
        return;
    }
    if (!json_is_object(msg)) {
        malformed(c, "expected a JSON-RPC object");
        goto out;
    }
    json_t *method = json_object_get(msg, "method");
    json_t *id = json_object_get(msg, "id");
    if (id && !json_is_string(id) && !json_is_integer(id)) {
        malformed(c, "data did not match any variant of untagged enum RequestId");
        goto out;
    }
    if (method && !json_is_string(method)) {
        snprintf(detail, sizeof detail, "invalid type: %s, expected a string", type_name(method));
        malformed(c, detail);
        goto out;
    }
    if (check_trace(json_object_get(msg, "trace"), detail, sizeof detail)) {
        malformed(c, detail);
        goto out;
    }
    if (!method) {
        if (json_object_get(msg, "result") || (json_object_get(msg, "error") && id)) {
            /* We never send requests, so a response from the client is a protocol
             * violation: close like the reference does. */
            log_info("%s sent a response object; closing", conn_peer(c));
            conn_close(c);
        } else {
            malformed(c, json_object_get(msg, "error") ? "missing field `id`"
                                                      : "missing field `error`");
        }
        goto out;
    }
    const char *name = json_string_value(method);
    if (!id) {
        if (strcmp(name, "initialized") == 0) {
            struct rpc_gate *g = gate_of(c);
            if (!g || !g->initialized) {
                log_info("%s sent initialized before initialize; closing", conn_peer(c));
                conn_close(c);
            } else {
                g->ready = true;
            }
        } else {
            char m[300];
            snprintf(m, sizeof m, "unexpected notification `%s`", name);
            send_error(c, NULL, RPC_INVALID_REQUEST, m);
        }
        goto out;
    }
    const struct rpc_method *mt = find_method(name);
    if (!mt) {
        char m[300];
        snprintf(m, sizeof m, "exec-server stub does not implement `%s` yet", name);
        send_error(c, id, RPC_METHOD_NOT_FOUND, m);
        goto out;
    }
    struct rpc_req *req = xcalloc(1, sizeof *req);
    req->conn = c;
    conn_ref(c);
    req->id = json_incref(id);
    json_t *params = json_object_get(msg, "params");
    req->params = params ? json_incref(params) : NULL;
    json_t *trace = json_object_get(msg, "trace");
    req->trace = json_is_object(trace) ? json_incref(trace) : NULL;
    if (req->trace && log_threshold >= LOG_DEBUG) {
        const char *tp = json_string_value(json_object_get(req->trace, "traceparent"));
        if (tp) log_debug("%s: %s traceparent=%.60s", conn_peer(c), name, tp);
    }
    req->method = mt;
    req->start_ns = metrics_now_ns();
    req->loop = conn_loop(c);
    if (big >= 0) {
        req->payload_member = member;
        keep_payload(c, data, &bigs, big, req);
    }
    mt->handler(req);
out:
    json_decref(msg);
}
