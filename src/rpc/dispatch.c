/* dispatch: envelope classification, lifecycle gate, method lookup and the reply
 * writers (see dispatch.h and rpc.h).
 *
 * Every handler runs synchronously on the loop thread in arrival order up to its
 * first asynchronous step, so the gate and the effects of initialize/initialized
 * are ordered exactly as the messages arrived even though the requests themselves
 * complete concurrently (PROTOCOL.md section 3.4).
 *
 * --concurrent-requests N (server_limits.max_concurrent_requests) caps the requests
 * of one connection that run at once: a request is counted from its dispatch until
 * its reply. Past the cap, requests wait in arrival order and start as slots free
 * up; an `initialized` that arrives behind waiting requests waits with them, so the
 * gate still sees the messages in the order they came. process/terminate and
 * fs/close of a ready connection never wait (the reference's "control lane"). What
 * waits is bounded (RPC_MAX_HELD messages, --max-queued-bytes of them): past that
 * the client is closed. No cap (0): every request starts at once, as before. */
#include "rpc/dispatch.h"
#include "proto/json_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "transport/conn.h"
#include "util/mem.h"
#include "util/oserr.h"

/* This module's per-connection state: the lifecycle gate. */
static struct conn_slot gate_slot;

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

#define RPC_MAX_HELD 65536

/* A message waiting for a --concurrent-requests slot. */
struct rpc_held {
    struct rpc_held *next;
    struct rpc_req *req; /* NULL: an `initialized` notification */
    size_t bytes;
};

/* rpc's per-connection state (gate_slot): the lifecycle gate, allocated when
 * initialize succeeds or, with a request cap, at the first request; no slot means
 * not initialized. */
/* A request the server sent on a connection and whose response it waits for. */
struct rpc_call {
    struct rpc_call *next, *prev;
    struct rpc_gate *gate;
    int64_t id;
    rpc_call_fn fn;
    void *ctx;
};

struct rpc_gate {
    bool initialized; /* initialize succeeded on this connection */
    bool ready;       /* the initialized notification arrived */
    bool pumping;     /* pump() is on the stack */
    uint64_t running; /* counted requests not yet answered */
    struct rpc_held *head, *tail;
    size_t held, held_bytes;
    int64_t last_call_id;  /* ids of the requests the server sent: 1..last_call_id */
    struct rpc_call calls; /* list head of those still waiting for their response */
};

static struct rpc_gate *gate_of(const struct conn *c)
{
    return conn_slot_get(c, &gate_slot);
}

static void call_unlink(struct rpc_call *call)
{
    call->prev->next = call->next;
    call->next->prev = call->prev;
}

/* The connection closed: every call still waiting is answered "closed", then the
 * gate goes. A callback may not start calls on this connection (it is closing). */
static void gate_free(void *p)
{
    struct rpc_gate *g = p;
    while (g->head) {
        struct rpc_held *h = g->head;
        g->head = h->next;
        if (h->req) rpc_req_free(h->req);
        free(h);
    }
    while (g->calls.next != &g->calls) {
        struct rpc_call *call = g->calls.next;
        call_unlink(call);
        call->fn(call->ctx, RPC_CALL_CLOSED, NULL);
        free(call);
    }
    free(g);
}

static struct rpc_gate *gate_get(struct conn *c)
{
    struct rpc_gate *g = gate_of(c);
    if (!g) {
        g = xcalloc(1, sizeof *g);
        g->calls.next = g->calls.prev = &g->calls;
        conn_slot_set(c, &gate_slot, g, gate_free);
    }
    return g;
}

struct rpc_call *rpc_call_start(struct conn *c, const char *method, json_t *params, rpc_call_fn fn,
                                void *ctx)
{
    struct rpc_gate *g = gate_of(c);
    if (!g || !g->initialized || !conn_is_open(c)) {
        json_decref(params);
        return NULL;
    }
    struct rpc_call *call = xcalloc(1, sizeof *call);
    call->gate = g;
    call->id = ++g->last_call_id;
    call->fn = fn;
    call->ctx = ctx;
    call->next = &g->calls;
    call->prev = g->calls.prev;
    g->calls.prev->next = call;
    g->calls.prev = call;
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"id\":");
    buf_put_i64(&b, call->id);
    buf_puts(&b, ",\"method\":");
    buf_put_json_str(&b, method, strlen(method));
    buf_puts(&b, ",\"params\":");
    char *text = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    buf_puts(&b, text ? text : "null");
    free(text);
    json_decref(params);
    buf_putc(&b, '}');
    conn_send(c, &b);
    return call;
}

void rpc_call_cancel(struct rpc_call *call)
{
    if (!call) return;
    call_unlink(call);
    free(call);
}

/* A response object from the client. Only responses to ids this server sent on c
 * are expected: one still pending goes to its callback; a late or repeated one (the
 * call timed out or was answered) is dropped. Anything else (an id never sent, a
 * string id, any response before initialize) is a protocol violation, and the
 * connection closes like the reference does (PROTOCOL.md section 3.3). */
static void client_response(struct conn *c, json_t *msg, json_t *id)
{
    struct rpc_gate *g = gate_of(c);
    if (!g || !json_is_integer(id) || json_integer_value(id) < 1 ||
        json_integer_value(id) > g->last_call_id) {
        log_info("%s sent a response to a request it was never sent; closing", conn_peer(c));
        conn_close(c);
        return;
    }
    int64_t n = json_integer_value(id);
    for (struct rpc_call *call = g->calls.next; call != &g->calls; call = call->next) {
        if (call->id != n) continue;
        call_unlink(call);
        json_t *result = json_object_get(msg, "result");
        if (result)
            call->fn(call->ctx, RPC_CALL_RESULT, result);
        else
            call->fn(call->ctx, RPC_CALL_ERROR, json_object_get(msg, "error"));
        free(call);
        return;
    }
    log_debug("%s answered request %lld late or twice; ignored", conn_peer(c), (long long)n);
}

bool rpc_conn_initialized(const struct conn *c)
{
    struct rpc_gate *g = gate_of(c);
    return g && g->initialized;
}

void rpc_conn_set_initialized(struct conn *c)
{
    gate_get(c)->initialized = true;
}

/* The `initialized` notification: opens the gate, or closes a connection that has
 * not initialized (the reference does). */
static void on_initialized(struct conn *c)
{
    struct rpc_gate *g = gate_of(c);
    if (!g || !g->initialized) {
        log_info("%s sent initialized before initialize; closing", conn_peer(c));
        conn_close(c);
    } else {
        g->ready = true;
    }
}

/* Starts a request, counting it against the cap when there is one. */
static void run(struct rpc_gate *g, struct rpc_req *req)
{
    if (g) {
        g->running++;
        req->counted = true;
    }
    req->method->handler(req);
}

/* Starts what waits, in order, while slots are free. A handler may answer at once
 * (rpc_req_free calls back here: the flag keeps that flat) or close the connection
 * (its slot, g, is then freed: checked before every use). */
static void pump(struct conn *c, struct rpc_gate *g)
{
    if (g->pumping) return;
    g->pumping = true;
    conn_ref(c);
    uint64_t cap = server_limits.max_concurrent_requests;
    while (gate_of(c) == g && conn_is_open(c) && g->head && (!g->head->req || g->running < cap)) {
        struct rpc_held *h = g->head;
        g->head = h->next;
        if (!g->head) g->tail = NULL;
        g->held--;
        g->held_bytes -= h->bytes;
        struct rpc_req *req = h->req;
        free(h);
        if (req)
            run(g, req);
        else
            on_initialized(c);
    }
    if (gate_of(c) == g) g->pumping = false;
    conn_unref(c);
}

/* Queues a message behind the waiting ones (req NULL: `initialized`). */
static void hold(struct conn *c, struct rpc_gate *g, struct rpc_req *req, size_t bytes)
{
    if (g->held >= RPC_MAX_HELD || g->held_bytes + bytes > server_limits.max_queued) {
        log_warn("%s: %zu messages (%zu bytes) already wait for a --concurrent-requests slot "
                 "(at most %d and --max-queued-bytes); closing the connection",
                 conn_peer(c), g->held, g->held_bytes, RPC_MAX_HELD);
        if (req) rpc_req_free(req);
        conn_close(c);
        return;
    }
    struct rpc_held *h = xcalloc(1, sizeof *h);
    h->req = req;
    h->bytes = bytes;
    if (g->tail)
        g->tail->next = h;
    else
        g->head = h;
    g->tail = h;
    g->held++;
    g->held_bytes += bytes;
}

/* Whether a request may pass waiting ones: PROTOCOL.md 3.4 rule 5. */
static bool control_lane(const struct rpc_req *req)
{
    return strcmp(req->method->name, "process/terminate") == 0 ||
           strcmp(req->method->name, "fs/close") == 0;
}

/* A request that passed envelope checks: runs now, or waits for a slot. */
static void start_request(struct conn *c, struct rpc_req *req, size_t bytes)
{
    uint64_t cap = server_limits.max_concurrent_requests;
    if (!cap) {
        run(NULL, req);
        return;
    }
    struct rpc_gate *g = gate_get(c);
    if ((g->head || g->running >= cap) && !(control_lane(req) && g->ready))
        hold(c, g, req, bytes);
    else
        run(g, req);
}

static void put_id(struct buf *b, const json_t *id)
{
    if (json_is_string(id))
        buf_put_json_str(b, json_string_value(id), json_string_length(id));
    else if (json_is_integer(id))
        buf_put_i64(b, json_integer_value(id));
    else
        buf_puts(b, "-1");
}

/* An error reply whose message is msg_len bytes (it may hold NUL: a method name). */
static void send_error_n(struct conn *c, const json_t *id, int code, const char *msg,
                         size_t msg_len)
{
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_put_i64(&b, code);
    buf_puts(&b, ",\"message\":");
    buf_put_json_str(&b, msg, msg_len);
    buf_puts(&b, "},\"id\":");
    put_id(&b, id);
    buf_putc(&b, '}');
    conn_send(c, &b);
}

static void send_error(struct conn *c, const json_t *id, int code, const char *msg)
{
    send_error_n(c, id, code, msg, strlen(msg));
}

/* A request id as a log value (strings quoted when they need it). */
static const char *id_text(const json_t *id, char *out, size_t n)
{
    if (json_is_integer(id))
        snprintf(out, n, "%lld", (long long)json_integer_value(id));
    else if (json_is_string(id))
        log_value(json_string_value(id), out, n);
    else
        snprintf(out, n, "null");
    return out;
}

/* --log-level debug: one line per answered request (method, id, time, outcome). */
static void log_request(const struct rpc_req *req, int code, const char *error)
{
    if (log_threshold < LOG_DEBUG) return;
    char idv[96], errv[320];
    unsigned long long us = (metrics_now_ns() - req->start_ns) / 1000;
    if (!error) {
        log_debug("event=request peer=%s method=%s id=%s duration_us=%llu result=ok",
                  conn_peer(req->conn), req->method->name, id_text(req->id, idv, sizeof idv), us);
        return;
    }
    log_debug("event=request peer=%s method=%s id=%s duration_us=%llu result=error code=%d "
              "error=%s",
              conn_peer(req->conn), req->method->name, id_text(req->id, idv, sizeof idv), us, code,
              log_value(error, errv, sizeof errv));
}

void rpc_req_free(struct rpc_req *req)
{
    struct conn *c = req->conn;
    bool counted = req->counted;
    if (req->payload_bigbuf)
        conn_release_message(c, req->payload_store);
    else
        free(req->payload_store);
    json_decref(req->id);
    json_decref(req->params);
    json_decref(req->trace);
    free(req);
    /* Its slot is free: what waits may start (unless the connection is gone). */
    struct rpc_gate *g = counted ? gate_of(c) : NULL;
    if (g) {
        g->running--;
        pump(c, g);
    }
    conn_unref(c);
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
    log_request(req, 0, NULL);
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
    log_request(req, code, msg.data);
    send_error(req->conn, req->id, code, msg.data);
    buf_free(&msg);
    rpc_req_free(req);
}

bool rpc_reply_if_invalid(struct rpc_req *req, const struct pdec *d)
{
    if (!d->failed) return false;
    rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d->err);
    return true;
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
static const char *(*work_gate)(const char *method);

void rpc_set_work_gate(const char *(*gate)(const char *method))
{
    work_gate = gate;
}

bool rpc_check_ready(struct rpc_req *req)
{
    struct rpc_gate *g = gate_of(req->conn);
    if (!g || !g->initialized) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "client must call initialize before using %s methods", req->method->family);
        return false;
    }
    if (!g->ready) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "client must send initialized before using %s methods",
                        req->method->family);
        return false;
    }
    if (rpc_dry_run) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "dry run: %s stops after the gate",
                        req->method->name);
        return false;
    }
    const char *why = work_gate ? work_gate(req->method->name) : NULL;
    if (why) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s refused: %s", req->method->name, why);
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
        buf_printf(&m,
                   "failed to parse websocket JSON-RPC message from exec-server websocket %s: %s",
                   conn_peer(c), detail);
    buf_putc(&m, '\0');
    if (log_threshold >= LOG_DEBUG) {
        char dv[320];
        log_debug("event=parse_error peer=%s error=%s", conn_peer(c),
                  log_value(detail, dv, sizeof dv));
    }
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

/* ---- NUL bytes --------------------------------------------------------------------
 * Strings may hold NUL (`\u0000`); the reference carries them until the OS refuses
 * them (process/start's argv: -32603 "nul byte found in provided data"). Ours keeps
 * strings as C strings past the params decoder, where a NUL would cut "a\0b" to
 * "a" without a word, so a request with a NUL in its params or trace is answered
 * with that error and its own id before its handler runs (PROTOCOL.md §2.3). A NUL
 * in the id is echoed back; in the method name, the name is unknown (-32601). */

/* Whether the message text may hold a NUL escape: only outside its large plain
 * values (they have no backslash), so a 40 MB payload is not scanned for it. */
static bool text_may_hold_nul(const char *data, size_t len, const struct json_load_bigs *bigs)
{
    const char *p = data, *e = data + len;
    for (int i = 0; i <= bigs->n; i++) {
        const char *stop = i < bigs->n ? bigs->v[i].p : e;
        if (stop > p && memmem(p, (size_t)(stop - p), "\\u0000", 6)) return true;
        if (i < bigs->n) p = bigs->v[i].p + bigs->v[i].n;
    }
    return false;
}

/* Whether a string value under v holds a NUL byte (keys cannot: jansson refuses). */
static bool holds_nul(const json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_string(v)) return memchr(json_string_value(v), 0, json_string_length(v)) != NULL;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x)
        {
            if (holds_nul(x)) return true;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            if (holds_nul(x)) return true;
        }
    }
    return false;
}

/* ---- parsing and classifying one message ------------------------------------------ */

/* The parsed message, its large values spliced in but the payload member's (big:
 * its index in bigs, member its name). NULL after answering a malformed message.
 * *nul: a key held a NUL (read as U+0001, so the id is known for the answer). */
static json_t *parse_message(struct conn *c, const char *data, size_t len,
                             struct json_load_bigs *bigs, int *big, const char **member, bool *nul)
{
    const size_t flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    json_error_t jerr;
    json_t *msg = json_load_message_split(data, len, flags, &jerr, bigs, JSON_LOAD_MAX_VALUES);
    *big = -1;
    *member = NULL;
    *nul = false;
    if (!msg && json_error_code(&jerr) == json_error_null_byte_in_key) {
        json_error_t e2;
        if ((msg = json_load_nul_keys(data, len, flags, &e2))) *nul = true;
    }
    /* Every large value goes into the tree now, before anything looks at the
     * message, except a method's payload member (struct rpc_payload). */
    if (msg && bigs->n) {
        json_t *m = json_is_object(msg) ? json_object_get(msg, "method") : NULL;
        *member = json_is_string(m) && json_object_get(msg, "id")
                      ? payload_member(json_string_value(m))
                      : NULL;
        json_t *params = json_is_object(msg) ? json_object_get(msg, "params") : NULL;
        json_t *keep = *member && json_is_object(params) ? json_object_get(params, *member) : NULL;
        *big = json_load_big_index(keep, bigs);
        if (!json_load_splice(msg, bigs, *big >= 0 ? keep : NULL)) {
            /* Not what the scan expected: parse it as jansson alone would. */
            json_decref(msg);
            msg = json_loadb(data, len, flags, &jerr);
            *big = -1;
        }
    }
    if (!msg) {
        char detail[256];
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
    }
    return msg;
}

/* A notification (no id): `initialized`, or an error naming it. */
static void on_notification(struct conn *c, const char *name, size_t name_len)
{
    if (name_len == strlen(name) && strcmp(name, "initialized") == 0) {
        struct rpc_gate *g = gate_of(c);
        if (g && g->head)
            hold(c, g, NULL, 0); /* after the requests before it */
        else
            on_initialized(c);
        return;
    }
    struct buf m;
    buf_init(&m);
    buf_puts(&m, "unexpected notification `");
    buf_append(&m, name, name_len);
    buf_putc(&m, '`');
    char nv[128];
    log_debug("event=notification peer=%s method=%s result=error code=%d", conn_peer(c),
              log_value(name, nv, sizeof nv), RPC_INVALID_REQUEST);
    send_error_n(c, NULL, RPC_INVALID_REQUEST, m.data, m.len);
    buf_free(&m);
}

/* A request for a method this server does not have (its name may hold NUL). */
static void unknown_method(struct conn *c, const json_t *id, const char *name, size_t name_len)
{
    struct buf m;
    buf_init(&m);
    buf_puts(&m, "exec-server stub does not implement `");
    buf_append(&m, name, name_len);
    buf_puts(&m, "` yet");
    if (log_threshold >= LOG_DEBUG) {
        char nv[128], idv[96];
        log_debug("event=request peer=%s method=%s id=%s result=error code=%d "
                  "error=unknown_method",
                  conn_peer(c), log_value(name, nv, sizeof nv), id_text(id, idv, sizeof idv),
                  RPC_METHOD_NOT_FOUND);
    }
    send_error_n(c, id, RPC_METHOD_NOT_FOUND, m.data, m.len);
    buf_free(&m);
}

/* Envelope checks of an object message: false after answering it. */
static bool envelope_ok(struct conn *c, json_t *msg)
{
    char detail[256];
    json_t *method = json_object_get(msg, "method");
    json_t *id = json_object_get(msg, "id");
    if (id && !json_is_string(id) && !json_is_integer(id)) {
        malformed(c, "data did not match any variant of untagged enum RequestId");
        return false;
    }
    if (method && !json_is_string(method)) {
        snprintf(detail, sizeof detail, "invalid type: %s, expected a string", type_name(method));
        malformed(c, detail);
        return false;
    }
    if (check_trace(json_object_get(msg, "trace"), detail, sizeof detail)) {
        malformed(c, detail);
        return false;
    }
    return true;
}

void rpc_dispatch(struct conn *c, const char *data, size_t len)
{
    struct json_load_bigs bigs;
    int big;
    const char *member;
    bool nul;
    json_t *msg = parse_message(c, data, len, &bigs, &big, &member, &nul);
    if (!msg) return;
    if (!json_is_object(msg)) {
        malformed(c, "expected a JSON-RPC object");
        goto out;
    }
    if (!envelope_ok(c, msg)) goto out;
    json_t *method = json_object_get(msg, "method");
    json_t *id = json_object_get(msg, "id");
    if (!method) {
        if (json_object_get(msg, "result") || (json_object_get(msg, "error") && id)) {
            client_response(c, msg, id);
        } else {
            malformed(c, json_object_get(msg, "error") ? "missing field `id`"
                                                       : "missing field `error`");
        }
        goto out;
    }
    const char *name = json_string_value(method);
    size_t name_len = json_string_length(method);
    if (!id) {
        on_notification(c, name, name_len);
        goto out;
    }
    const struct rpc_method *mt = name_len == strlen(name) ? find_method(name) : NULL;
    if (!mt) {
        unknown_method(c, id, name, name_len);
        goto out;
    }
    json_t *params = json_object_get(msg, "params");
    json_t *trace = json_object_get(msg, "trace");
    if (nul || (text_may_hold_nul(data, len, &bigs) &&
                ((params && holds_nul(params)) || (trace && holds_nul(trace))))) {
        send_error(c, id, RPC_INTERNAL_ERROR, "nul byte found in provided data");
        goto out;
    }
    struct rpc_req *req = xcalloc(1, sizeof *req);
    req->conn = c;
    conn_ref(c);
    req->id = json_incref(id);
    req->params = params ? json_incref(params) : NULL;
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
    start_request(c, req, len);
out:
    json_decref(msg);
}

void rpc_reply_error_kind(struct rpc_req *req, int code, const char *kind, const char *message)
{
    metrics_request_done(req->method->name, false, metrics_now_ns() - req->start_ns);
    log_request(req, code, message);
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_put_i64(&b, code);
    buf_puts(&b, ",\"data\":{\"kind\":");
    buf_put_json_str(&b, kind, strlen(kind));
    buf_puts(&b, "},\"message\":");
    buf_put_json_str(&b, message, strlen(message));
    buf_puts(&b, "},\"id\":");
    put_id(&b, req->id);
    buf_putc(&b, '}');
    conn_send(req->conn, &b);
    rpc_req_free(req);
}
