/* http_methods: `http/request`, an HTTP(S) call made by the executor for its client
 * (PROTOCOL.md §7), with buffered or streamed response bodies.
 *
 * The call itself (curl, headers, redirects, the body collected or handed over) is
 * http_client.c; this file decodes the request and writes the result and the deltas
 * from the call's events. Buffered: the whole body is collected (bounded:
 * HTTP_BUFFERED_MAX) and returned in the result. Streamed: the result (status and
 * headers, empty body) goes out as soon as the final response's headers are in,
 * always before the first `http/request/bodyDelta`; each curl write becomes one
 * delta (well under the 1 MiB limit), encoded straight into the outgoing frame (no
 * JSON tree per chunk), and the deltas of one round of curl's work leave together in
 * one writev; the last delta has `done:true` and the `error` if the body was cut
 * short. When the client's connection stops draining (above its high-water mark)
 * the call is paused, so the server holds at most one curl buffer per stream, and it
 * resumes when the queue drains. Streams belong to the connection: they are aborted
 * when it closes, and a streamed requestId is reserved on it until its terminal
 * delta. */
#include "http/http_methods.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_audit.h"
#include "http/http_client.h"
#include "outbound/curl_loop.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "session/session.h"
#include "transport/conn.h"
#include "proto/base64.h"
#include "util/buf.h"
#include "util/mem.h"

/* This module's per-connection state: http/request streams. */
static struct conn_slot http_slot;

struct http_table;

struct http_req {
    struct http_call call; /* first: the call's events get a struct http_call * */
    struct http_table *tab;
    struct http_req *next;
    struct rpc_req *req; /* the pending reply, NULL once answered */
    char *request_id;
    struct buf id_json;
    char *url;
    char *method;
    char session[40];    /* for its audit record */
    uint64_t resp_bytes; /* streamed body bytes handed over */
    uint64_t seq;
    bool result_sent;
    unsigned round; /* the last table_unblocked round that resumed it */
};

struct http_table {
    struct conn *conn; /* not counted: the table dies with the connection */
    struct http_req *head;
    unsigned round;
};

static void req_free(struct http_req *r)
{
    http_call_free(&r->call);
    free(r->request_id);
    free(r->url);
    free(r->method);
    buf_free(&r->id_json);
    free(r);
}

/* The call's audit record (http_audit.h). */
static void audit_call(struct http_req *r, const char *error)
{
    struct http_audit_call a = {.session = r->session,
                                .method = r->method,
                                .url = r->url,
                                .status = r->call.status,
                                .request_bytes = r->call.body_len,
                                .response_bytes =
                                    r->call.stream ? r->resp_bytes : r->call.body_buf.len,
                                .stream = r->call.stream,
                                .error = error};
    http_audit_done(&a);
}

static void unlink_req(struct http_req *r)
{
    for (struct http_req **pp = &r->tab->head; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            return;
        }
    }
}

/* ---- the connection's table --------------------------------------------------------- */

static void table_free(void *state)
{
    struct http_table *t = state;
    while (t->head) {
        struct http_req *r = t->head;
        t->head = r->next;
        http_call_abort(&r->call);
        audit_call(r, "connection closed");
        if (r->req) rpc_reply_error(r->req, RPC_INTERNAL_ERROR, "connection closed");
        req_free(r);
    }
    free(t);
}

static void table_unblocked(void *state)
{
    struct http_table *t = state;
    unsigned round = ++t->round;
    /* Unpausing runs curl, which may finish (and free) any transfer or pause this
     * one again: walk from the head after each, visiting each transfer once. */
    for (struct http_req *r = t->head; r;) {
        if (!r->call.paused || r->round == round) {
            r = r->next;
            continue;
        }
        r->round = round;
        http_call_resume(&r->call);
        r = t->head;
    }
}

static struct http_table *table_of(struct conn *c)
{
    struct http_table *t = conn_slot_get(c, &http_slot);
    if (!t) {
        t = xcalloc(1, sizeof *t);
        t->conn = c;
        conn_slot_set(c, &http_slot, t, table_free);
        conn_slot_on_unblocked(c, &http_slot, table_unblocked);
    }
    return t;
}

/* ---- wire output -------------------------------------------------------------------- */

/* Connections whose deltas of this curl round are gathered (conn_cork, referenced):
 * curl hands a 512 KiB read to the write callback 16 KiB at a time, and a write(2)
 * per delta cost a third of the stream's system time; the round's deltas leave in
 * one writev when it ends (curl_loop_on_round_end). */
static struct conn **round_conns;
static size_t round_n, round_cap;

static void round_end(void)
{
    for (size_t i = 0; i < round_n; i++) {
        conn_uncork(round_conns[i]);
        conn_unref(round_conns[i]);
    }
    round_n = 0;
}

static void round_gather(struct conn *c)
{
    for (size_t i = 0; i < round_n; i++)
        if (round_conns[i] == c) return;
    if (round_n == round_cap) {
        round_cap = round_cap ? 2 * round_cap : 4;
        round_conns = xrealloc(round_conns, round_cap * sizeof *round_conns);
    }
    if (round_n == 0) curl_loop_on_round_end(round_end);
    conn_ref(c);
    conn_cork(c);
    round_conns[round_n++] = c;
}

static json_t *result_json(struct http_req *r, bool with_body)
{
    json_t *res = json_object();
    json_object_set_new(res, "status", json_integer(r->call.status));
    json_object_set_new(res, "headers",
                        r->call.resp_headers ? json_incref(r->call.resp_headers) : json_array());
    if (with_body) {
        struct buf b;
        buf_init(&b);
        base64_append(&b, r->call.body_buf.data, r->call.body_buf.len);
        json_object_set_new(res, "bodyBase64", json_stringn(b.len ? b.data : "", b.len));
        buf_free(&b);
    } else {
        json_object_set_new(res, "bodyBase64", json_string(""));
    }
    return res;
}

static void send_result(struct http_req *r, bool with_body)
{
    if (!r->req) return;
    struct rpc_req *req = r->req;
    r->req = NULL;
    r->result_sent = true;
    rpc_reply_json(req, result_json(r, with_body));
}

static void send_delta(struct http_req *r, const void *data, size_t n, bool done, const char *error)
{
    struct buf b;
    buf_init_msg(&b);
    buf_reserve(&b, 160 + r->id_json.len + base64_encoded_len(n));
    buf_puts(&b, "{\"method\":\"http/request/bodyDelta\",\"params\":{\"requestId\":");
    buf_append(&b, r->id_json.data, r->id_json.len);
    buf_puts(&b, ",\"seq\":");
    buf_put_u64(&b, ++r->seq);
    buf_puts(&b, ",\"deltaBase64\":\"");
    base64_append(&b, data, n);
    buf_puts(&b, done ? "\",\"done\":true,\"error\":" : "\",\"done\":false,\"error\":");
    if (error)
        buf_put_json_str(&b, error, strlen(error));
    else
        buf_puts(&b, "null");
    buf_puts(&b, "}}");
    conn_send(r->tab->conn, &b);
}

/* ---- the call's events ---------------------------------------------------------------- */

static void on_response(struct http_call *c)
{
    send_result((struct http_req *)c, false);
}

/* A streamed chunk becomes one delta, gathered with the round's others; a
 * congested connection pauses the call until it drains (table_unblocked). */
static bool on_body(struct http_call *c, const void *data, size_t n)
{
    struct http_req *r = (struct http_req *)c;
    if (!r->result_sent) send_result(r, false);
    if (conn_is_congested(r->tab->conn)) return false;
    round_gather(r->tab->conn);
    r->resp_bytes += n;
    send_delta(r, data, n, false, NULL);
    return true;
}

static void on_done(struct http_call *c, enum http_outcome o)
{
    struct http_req *r = (struct http_req *)c;
    unlink_req(r);
    audit_call(r, o == HTTP_OK             ? NULL
                  : o == HTTP_TOO_BIG      ? "the body exceeds the buffered limit"
                  : o == HTTP_BODY_TIMEOUT ? "operation timed out"
                  : o == HTTP_BODY_BROKEN  ? "error decoding response body"
                                           : "error sending request");
    if (o == HTTP_OK) {
        if (c->stream) {
            if (!r->result_sent) send_result(r, false);
            send_delta(r, "", 0, true, NULL);
        } else {
            send_result(r, true);
        }
    } else if (c->stream && r->result_sent) {
        send_delta(r, "", 0, true,
                   o == HTTP_BODY_TIMEOUT ? "operation timed out" : "error decoding response body");
    } else if (r->req) {
        if (o == HTTP_TOO_BIG)
            rpc_reply_error(r->req, RPC_INTERNAL_ERROR,
                            "failed to read http/request response body: the body exceeds %u "
                            "MiB; use streamResponse",
                            HTTP_BUFFERED_MAX >> 20);
        else if (o == HTTP_BODY_TIMEOUT || o == HTTP_BODY_BROKEN)
            rpc_reply_error(r->req, RPC_INTERNAL_ERROR,
                            "failed to read http/request response body: error decoding "
                            "response body");
        else
            rpc_reply_error(r->req, RPC_INTERNAL_ERROR,
                            "http/request failed: error sending request for url (%s)", r->url);
        r->req = NULL;
    }
    req_free(r);
}

static const struct http_call_events call_events = {
    .response = on_response,
    .body = on_body,
    .done = on_done,
};

/* The request's headers (decoded already) into the call. False after replying. */
static bool add_headers(struct rpc_req *req, struct http_req *r, json_t *headers)
{
    size_t i;
    json_t *h;
    json_array_foreach(headers, i, h)
    {
        char err[512];
        if (http_call_add_header(&r->call, json_string_value(json_object_get(h, "name")),
                                 json_string_value(json_object_get(h, "value")),
                                 json_string_value(json_object_get(h, "valueEnvVar")), err,
                                 sizeof err) < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            return false;
        }
    }
    return true;
}

static void handle_http_request(struct rpc_req *req)
{
    static const char *const policies[] = {"follow", "stop", NULL};
    struct pdec d;
    pdec_begin(&d, req->params, "HttpRequestParams");
    const char *method = pdec_string(&d, "method", PDEC_REQUIRED);
    const char *url = pdec_string(&d, "url", PDEC_REQUIRED);
    json_t *headers = pdec_array(&d, "headers", PDEC_OPTIONAL);
    size_t blen = 0;
    const char *b64 = pdec_string_len(&d, "bodyBase64", PDEC_OPTIONAL, &blen);
    bool has_timeout = false;
    uint64_t timeout_ms = pdec_u64(&d, "timeoutMs", PDEC_OPTIONAL, 0, &has_timeout);
    const char *request_id = pdec_string(&d, "requestId", PDEC_REQUIRED);
    bool stream = pdec_bool(&d, "streamResponse", PDEC_OPTIONAL, false);
    int policy = pdec_enum(&d, "redirectPolicy", PDEC_OPTIONAL, policies, 0);
    size_t i;
    json_t *h;
    json_array_foreach(headers, i, h)
    {
        if (d.failed) break;
        struct pdec hd;
        if (!pdec_begin(&hd, h, "HttpHeader")) {
            pdec_fail(&d, "%s", hd.err);
            break;
        }
        pdec_string(&hd, "name", PDEC_REQUIRED);
        pdec_string(&hd, "value", PDEC_REQUIRED);
        pdec_string(&hd, "valueEnvVar", PDEC_OPTIONAL);
        if (hd.failed) pdec_fail(&d, "%s", hd.err);
    }
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    char err[512];
    int rc = http_call_check(method, url, err, sizeof err);
    if (rc < 0) {
        rpc_reply_error(req, rc == -EINVAL ? RPC_INVALID_PARAMS : RPC_INTERNAL_ERROR, "%s", err);
        return;
    }

    struct http_req *r = xcalloc(1, sizeof *r);
    buf_init(&r->id_json);
    http_call_init(&r->call, &call_events, stream, policy != 1);
    if (!add_headers(req, r, headers)) {
        req_free(r);
        return;
    }
    if (b64) {
        r->call.body = xmalloc(base64_decoded_max(blen) + 1);
        if (base64_decode(b64, blen, r->call.body, &r->call.body_len, err, sizeof err) < 0) {
            req_free(r);
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            return;
        }
    }
    struct http_table *t = table_of(req->conn);
    if (stream) {
        for (struct http_req *o = t->head; o; o = o->next) {
            if (o->call.stream && strcmp(o->request_id, request_id) == 0) {
                req_free(r);
                rpc_reply_error(req, RPC_INVALID_PARAMS,
                                "http/request streamResponse requestId `%s` is already "
                                "active",
                                request_id);
                return;
            }
        }
    }
    r->request_id = xstrdup(request_id);
    buf_put_json_str(&r->id_json, request_id, strlen(request_id));
    r->url = xstrdup(url);
    r->method = xstrdup(method);
    struct session *s = session_of(req->conn);
    snprintf(r->session, sizeof r->session, "%s", s ? s->id : "");
    r->tab = t;
    r->req = req;
    r->next = t->head;
    t->head = r;
    if (http_call_start(&r->call, req->loop, method, url, has_timeout ? (long)timeout_ms : -1) <
        0) {
        unlink_req(r);
        r->req = NULL;
        req_free(r);
        rpc_reply_error(req, RPC_INTERNAL_ERROR,
                        "failed to build http/request client: curl refused the transfer");
        return;
    }
}
const struct rpc_method http_methods[] = {
    {"http/request", "http", handle_http_request},
    {NULL, NULL, NULL},
};

static const struct rpc_method *const http_tables[] = {http_methods, NULL};

/* httpHeaderEnvVars: a header's valueEnvVar is expanded from the server's
 * environment, as the reference does. */
static const struct rpc_capability http_capabilities[] = {
    {"httpHeaderEnvVars", true, NULL},
    {NULL, false, NULL},
};

const struct rpc_domain http_domain = {
    .name = "http",
    .methods = http_tables,
    .capabilities = http_capabilities,
};
