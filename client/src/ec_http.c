/* ec_http: the typed http/request helper (PROTOCOL.md §7): the server makes an
 * HTTP(S) request for the client, and answers with the status, the headers and the
 * body, buffered in the result or streamed in http/request/bodyDelta notifications.
 *
 * A streamed body is queued on its ec_http_stream as the notifications arrive
 * (the client routes them here by requestId), in seq order (a gap is a protocol
 * error: the server sends them in order on one connection), at most
 * EC_HTTP_MAX_QUEUED bytes ahead of the reader, after which the stream fails rather
 * than grow without bound (there is nothing to re-fetch the body from). Streams belong
 * to the connection: a loss fails them, a resume does not bring them back. */
#include "ec_internal.h"

#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EC_HTTP_MAX_QUEUED (64u << 20)

struct hdelta {
    struct hdelta *next;
    uint8_t *data;
    size_t len;
};

struct ec_http_stream {
    ec_http_stream *next; /* in c->http_streams */
    ec_client *c;
    char *id;
    uint64_t next_seq; /* the seq the next delta must carry (from 1) */
    struct hdelta *head, *tail;
    size_t queued;
    bool done_seen;     /* the terminal delta came (everything before it is queued) */
    bool done_returned; /* ...and was handed to the caller */
    bool failed;
    ec_error err;
    uint8_t *cur; /* the piece last returned (owned) */
};

/* ---- request / response JSON -------------------------------------------------------- */

static json_t *request_params(ec_client *c, const ec_http_req *rq, bool stream, ec_error *err)
{
    if (!rq || !rq->url || !*rq->url) {
        ec_fail(err, EC_ERR_USAGE, 0, "http/request needs a URL");
        return NULL;
    }
    char idbuf[32];
    const char *id = rq->request_id;
    if (!id) {
        snprintf(idbuf, sizeof idbuf, "ec-http-%u", ++c->http_counter);
        id = idbuf;
    }
    json_t *headers = json_array();
    for (size_t i = 0; i < rq->n_headers; i++) {
        json_t *h = json_pack("{s:s, s:s}", "name", rq->headers[i].name ? rq->headers[i].name : "",
                              "value", rq->headers[i].value ? rq->headers[i].value : "");
        if (!h) {
            json_decref(headers);
            ec_fail(err, EC_ERR_USAGE, 0, "http/request header %zu is not valid UTF-8", i);
            return NULL;
        }
        json_array_append_new(headers, h);
    }
    json_t *p =
        json_pack("{s:s, s:s, s:o, s:s, s:b}", "method", rq->method ? rq->method : "GET", "url",
                  rq->url, "headers", headers, "requestId", id, "streamResponse", stream);
    if (!p) {
        ec_fail(err, EC_ERR_USAGE, 0, "http/request method, URL or request id is not valid UTF-8");
        return NULL;
    }
    if (rq->body) {
        char *b64 = ec_b64_encode(rq->body, rq->body_len);
        json_object_set_new(p, "bodyBase64", json_string(b64));
        free(b64);
    }
    if (rq->timeout_ms > 0) json_object_set_new(p, "timeoutMs", json_integer(rq->timeout_ms));
    if (rq->no_redirects) json_object_set_new(p, "redirectPolicy", json_string("stop"));
    return p;
}

void ec_http_resp_clear(ec_http_resp *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_headers; i++) {
        free((char *)r->headers[i].name);
        free((char *)r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* status and headers (and the buffered body unless streamed) from a result. */
static int parse_result(json_t *res, bool stream, ec_http_resp *out, ec_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *status = json_object_get(res, "status");
    json_t *headers = json_object_get(res, "headers");
    if (!json_is_integer(status) || (headers && !json_is_array(headers)))
        return ec_fail(err, EC_ERR_PROTOCOL, 0, "http/request: malformed result");
    out->status = (int)json_integer_value(status);
    out->headers = xcalloc(json_array_size(headers) + 1, sizeof *out->headers);
    for (size_t i = 0; i < json_array_size(headers); i++) {
        json_t *h = json_array_get(headers, i);
        const char *name = json_string_value(json_object_get(h, "name"));
        const char *value = json_string_value(json_object_get(h, "value"));
        if (!name || !value) {
            ec_http_resp_clear(out);
            return ec_fail(err, EC_ERR_PROTOCOL, 0, "http/request: malformed header in result");
        }
        out->headers[out->n_headers].name = xstrdup(name);
        out->headers[out->n_headers++].value = xstrdup(value);
    }
    if (stream) return 0;
    int rc = ec_b64_decode(json_string_value(json_object_get(res, "bodyBase64")), &out->body,
                           &out->body_len, err);
    if (rc) ec_http_resp_clear(out);
    return rc;
}

int ec_http_request(ec_client *c, const ec_http_req *rq, ec_http_resp *out, ec_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *params = request_params(c, rq, false, err);
    if (!params) return -EC_ERR_USAGE;
    json_t *res = NULL;
    int rc = ec_client_call(c, "http/request", params, &res, err);
    if (rc == 0) rc = parse_result(res, false, out, err);
    json_decref(res);
    return rc;
}

/* ---- streams ------------------------------------------------------------------------ */

static void stream_unlink(ec_http_stream *s)
{
    if (!s->c) return;
    for (ec_http_stream **pp = &s->c->http_streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    s->c = NULL;
}

static void stream_fail(ec_http_stream *s, ec_err_kind kind, const char *msg)
{
    if (s->failed || s->done_seen) return;
    s->failed = true;
    ec_fail(&s->err, kind, 0, "%s", msg);
}

void ec_http_stream_free(ec_http_stream *s)
{
    if (!s) return;
    stream_unlink(s);
    while (s->head) {
        struct hdelta *d = s->head;
        s->head = d->next;
        free(d->data);
        free(d);
    }
    free(s->cur);
    free(s->id);
    free(s);
}

static const struct ec_feature http_feature;

int ec_http_request_stream(ec_client *c, const ec_http_req *rq, ec_http_resp *head,
                           ec_http_stream **out, ec_error *err)
{
    *out = NULL;
    memset(head, 0, sizeof *head);
    json_t *params = request_params(c, rq, true, err);
    if (!params) return -EC_ERR_USAGE;
    /* Registered before the request goes: nothing of it can arrive unclaimed. */
    ec_client_use_feature(c, &http_feature);
    ec_http_stream *s = xcalloc(1, sizeof *s);
    s->c = c;
    s->id = xstrdup(json_string_value(json_object_get(params, "requestId")));
    s->next_seq = 1;
    s->next = c->http_streams;
    c->http_streams = s;
    json_t *res = NULL;
    int rc = ec_client_call(c, "http/request", params, &res, err);
    if (rc == 0) rc = parse_result(res, true, head, err);
    json_decref(res);
    if (rc) {
        ec_http_stream_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static bool http_on_delta(ec_client *c, json_t *params)
{
    const char *id = json_string_value(json_object_get(params, "requestId"));
    if (!id) return false;
    ec_http_stream *s = c->http_streams;
    for (; s; s = s->next)
        if (!s->done_seen && !s->failed && strcmp(s->id, id) == 0) break;
    if (!s) return false;
    json_t *seq = json_object_get(params, "seq");
    json_t *done = json_object_get(params, "done");
    json_t *error = json_object_get(params, "error");
    if (!json_is_integer(seq) || (done && !json_is_boolean(done))) {
        stream_fail(s, EC_ERR_PROTOCOL, "http/request: malformed body delta");
        return true;
    }
    if ((uint64_t)json_integer_value(seq) != s->next_seq) {
        char msg[120];
        snprintf(msg, sizeof msg, "http/request: body delta %lld arrived where %llu was due",
                 (long long)json_integer_value(seq), (unsigned long long)s->next_seq);
        stream_fail(s, EC_ERR_PROTOCOL, msg);
        return true;
    }
    s->next_seq++;
    uint8_t *data = NULL;
    size_t len = 0;
    ec_error e = {0};
    if (ec_b64_decode(json_string_value(json_object_get(params, "deltaBase64")), &data, &len, &e)) {
        stream_fail(s, e.kind, e.message);
        return true;
    }
    if (len) {
        if (s->queued + len > EC_HTTP_MAX_QUEUED) {
            free(data);
            stream_fail(s, EC_ERR_PROTOCOL,
                        "http/request: the body came faster than it was read (over 64 MiB "
                        "queued)");
            return true;
        }
        struct hdelta *d = xcalloc(1, sizeof *d);
        d->data = data;
        d->len = len;
        if (s->tail)
            s->tail->next = d;
        else
            s->head = d;
        s->tail = d;
        s->queued += len;
    } else {
        free(data);
    }
    if (json_is_string(error)) {
        char msg[400];
        snprintf(msg, sizeof msg, "http/request body: %s", json_string_value(error));
        stream_fail(s, EC_ERR_SERVER, msg);
    } else if (json_is_true(done)) {
        s->done_seen = true;
    }
    return true;
}

static void http_on_loss(ec_client *c)
{
    for (ec_http_stream *s = c->http_streams; s; s = s->next)
        stream_fail(s, EC_ERR_TRANSPORT,
                    "connection lost: an http/request body stream is not "
                    "resumed");
}

static void http_free_all(ec_client *c)
{
    while (c->http_streams)
        ec_http_stream_free(c->http_streams);
}

static bool http_on_notification(ec_client *c, struct ec_msg *m)
{
    return strcmp(m->method, "http/request/bodyDelta") == 0 && http_on_delta(c, m->params);
}

static const struct ec_feature http_feature = {
    .on_notification = http_on_notification,
    .on_loss = http_on_loss,
    .free_all = http_free_all,
};

int ec_http_stream_next(ec_http_stream *s, int timeout_ms, const uint8_t **data, size_t *len,
                        bool *done, ec_error *err)
{
    *data = NULL;
    *len = 0;
    *done = false;
    free(s->cur);
    s->cur = NULL;
    int64_t deadline = ec_deadline(timeout_ms);
    bool polled = false;
    for (;;) {
        if (s->head) { /* what came before a failure is still delivered first */
            struct hdelta *d = s->head;
            s->head = d->next;
            if (!s->head) s->tail = NULL;
            s->queued -= d->len;
            s->cur = d->data;
            *data = d->data;
            *len = d->len;
            free(d);
            return 0;
        }
        if (s->failed) {
            if (err) *err = s->err;
            return -(int)s->err.kind;
        }
        if (s->done_seen) {
            if (s->done_returned) return ec_fail(err, EC_ERR_USAGE, 0, "http/request body ended");
            s->done_returned = true;
            *done = true;
            return 0;
        }
        if (!s->c) return ec_fail(err, EC_ERR_USAGE, 0, "the client of this stream is closed");
        int left = ec_remaining(deadline);
        if (left == 0 && polled)
            return ec_fail(err, EC_ERR_TIMEOUT, 0, "no body data from http/request %s", s->id);
        int rc = ec_client_poll(s->c, left, err);
        polled = true;
        if (rc && !s->head && !s->failed && !s->done_seen) return rc;
    }
}
