/* http_methods: `http/request`, an HTTP(S) call made by the executor for its client
 * (PROTOCOL.md §7), with buffered or streamed response bodies.
 *
 * Transfers run on libcurl's multi interface on the loop (curl_loop.c). Buffered:
 * the whole body is collected (bounded: HTTP_BUFFERED_MAX) and returned in the
 * result. Streamed: the result (status and headers, empty body) goes out as soon as
 * the final response's headers are in, always before the first
 * `http/request/bodyDelta`; each curl write becomes one delta (curl reads up to its
 * 512 KiB buffer and hands it over 16 KiB at a time, so well under the 1 MiB
 * limit), encoded straight into the outgoing frame (no JSON tree per chunk), and the
 * deltas of one round of curl's work leave together in one writev; the last delta
 * has `done:true` and the `error` if the body was cut short. When the client's
 * connection stops draining (above its high-water mark) the write callback pauses the
 * transfer (CURL_WRITEFUNC_PAUSE), so the server holds at most one curl buffer per
 * stream, and it resumes when the queue drains. Streams belong to the connection: they are
 * aborted when it closes, and a streamed requestId is reserved on it until its
 * terminal delta. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "transport/curl_loop.h"
#include "http/http_methods.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "transport/conn.h"
#include "proto/base64.h"
#include "util/buf.h"
#include "util/mem.h"

/* This module's per-connection state: http/request streams. */
static struct conn_slot http_slot;

#define HTTP_BUFFERED_MAX (64u << 20) /* a buffered body beyond this: use streamResponse */
#define HTTP_CURL_BUFFER (512 * 1024) /* one write callback, one delta, at most this */
#define HTTP_MAX_REDIRECTS 10

struct http_table;

struct http_req {
    struct curl_loop_job job;
    struct http_table *tab;
    struct http_req *next;
    struct rpc_req *req; /* the pending reply, NULL once answered */
    char *request_id;
    struct buf id_json;
    char *url;
    bool stream, follow;
    struct curl_slist *hdrs;
    uint8_t *body;
    size_t body_len;
    long status;
    json_t *resp_headers; /* [{name,value}] of the response being received */
    struct buf body_buf;  /* buffered mode */
    bool too_big;
    uint64_t seq;
    bool result_sent;
    bool paused;
    unsigned round; /* the last table_unblocked round that resumed it */
};

struct http_table {
    struct conn *conn; /* not counted: the table dies with the connection */
    struct http_req *head;
    unsigned round;
};

static void req_free(struct http_req *r)
{
    if (r->job.easy) curl_dl_fns.easy_cleanup(r->job.easy);
    curl_dl_fns.slist_free_all(r->hdrs);
    free(r->body);
    free(r->request_id);
    free(r->url);
    buf_free(&r->id_json);
    buf_free(&r->body_buf);
    json_decref(r->resp_headers);
    free(r);
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
        curl_loop_remove(&r->job);
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
        if (!r->paused || r->round == round) {
            r = r->next;
            continue;
        }
        r->round = round;
        r->paused = false;
        curl_loop_unpause(&r->job);
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
    json_object_set_new(res, "status", json_integer(r->status));
    json_object_set_new(res, "headers",
                        r->resp_headers ? json_incref(r->resp_headers) : json_array());
    if (with_body) {
        struct buf b;
        buf_init(&b);
        base64_append(&b, r->body_buf.data, r->body_buf.len);
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

/* ---- curl callbacks ------------------------------------------------------------------- */

static bool visible_header_value(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) continue;
        return false;
    }
    return true;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
    struct http_req *r = ud;
    size_t n = size * nitems;
    size_t len = n;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (1xx, a redirect hop, or the final one) starts afresh. */
        json_decref(r->resp_headers);
        r->resp_headers = json_array();
        return n;
    }
    if (len == 0) {
        long code = 0;
        curl_dl_fns.easy_getinfo(r->job.easy, CURLINFO_RESPONSE_CODE, &code);
        r->status = code;
        char *redirect = NULL;
        if (r->follow) curl_dl_fns.easy_getinfo(r->job.easy, CURLINFO_REDIRECT_URL, &redirect);
        bool final = code >= 200 && !(code >= 300 && code < 400 && redirect);
        if (final && r->stream) send_result(r, false);
        return n;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon || !r->resp_headers) return n;
    size_t nl = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (!visible_header_value(v, vl)) return n; /* dropped, as the reference does */
    char *name = xstrndup(line, nl);
    for (char *p = name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_array_append_new(r->resp_headers, json_pack("{s:s, s:s%}", "name", name, "value", v, vl));
    free(name);
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct http_req *r = ud;
    size_t n = size * nmemb;
    if (!r->stream) {
        if (r->body_buf.len + n > HTTP_BUFFERED_MAX) {
            r->too_big = true;
            return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        }
        buf_append(&r->body_buf, data, n);
        return n;
    }
    if (!r->result_sent) send_result(r, false);
    if (conn_is_congested(r->tab->conn)) {
        r->paused = true;
        return CURL_WRITEFUNC_PAUSE; /* curl keeps these bytes and offers them again */
    }
    round_gather(r->tab->conn);
    send_delta(r, data, n, false, NULL);
    return n;
}

static bool body_error(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_WRITE_ERROR ||
           rc == CURLE_BAD_CONTENT_ENCODING || rc == CURLE_HTTP2_STREAM || rc == CURLE_HTTP2 ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING;
}

static void on_done(struct curl_loop_job *job, CURLcode rc)
{
    struct http_req *r = (struct http_req *)job;
    unlink_req(r);
    if (rc == CURLE_OK) {
        if (r->stream) {
            if (!r->result_sent) send_result(r, false);
            send_delta(r, "", 0, true, NULL);
        } else {
            send_result(r, true);
        }
    } else if (r->stream && r->result_sent) {
        send_delta(r, "", 0, true,
                   rc == CURLE_OPERATION_TIMEDOUT ? "operation timed out"
                                                  : "error decoding response body");
    } else if (r->req) {
        if (r->too_big)
            rpc_reply_error(r->req, RPC_INTERNAL_ERROR,
                            "failed to read http/request response body: the body exceeds %u "
                            "MiB; use streamResponse",
                            HTTP_BUFFERED_MAX >> 20);
        else if (r->status >= 200 && body_error(rc))
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

/* ---- validation ------------------------------------------------------------------------ */

static bool is_token(const char *s)
{
    if (!*s) return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch)) continue;
        return false;
    }
    return true;
}

static bool valid_header_value(const char *v)
{
    for (; *v; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) continue;
        return false;
    }
    return true;
}

/* The URL's scheme (lowercased into out), or false for a relative URL. */
static bool url_scheme(const char *url, char *out, size_t n)
{
    const char *p = url;
    if (!isalpha((unsigned char)*p)) return false;
    while (*p && (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.'))
        p++;
    if (*p != ':' || (size_t)(p - url) >= n) return false;
    for (size_t i = 0; url + i < p; i++)
        out[i] = (char)tolower((unsigned char)url[i]);
    out[p - url] = 0;
    return true;
}

/* The reference's (WHATWG URL parser) words for the common cases. */
static const char *url_error_text(CURLUcode uc)
{
    switch (uc) {
    case CURLUE_NO_HOST: return "empty host";
    case CURLUE_BAD_PORT_NUMBER: return "invalid port number";
    case CURLUE_BAD_IPV6: return "invalid IPv6 address";
    case CURLUE_BAD_HOSTNAME: return "invalid domain character";
    default: return curl_dl_fns.url_strerror(uc);
    }
}

/* The hosts that go direct whatever the proxy variables say: literal loopback always,
 * plus the environment's NO_PROXY (read before no_proxy, and set-but-empty counts, as
 * the reference reads them). Setting CURLOPT_NOPROXY replaces libcurl's own reading
 * of those variables, so they must be folded in here or a NO_PROXY host would go
 * through the proxy. A `*` entry anywhere means no proxy at all, which libcurl only
 * understands as the whole list. Returns a heap string the caller frees. */
static char *noproxy_list(void)
{
    const char *env = getenv("NO_PROXY");
    if (!env) env = getenv("no_proxy");
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "localhost,127.0.0.0/8,::1");
    for (const char *p = env ? env : ""; *p;) {
        size_t n = strcspn(p, ",");
        const char *s = p, *e = p + n;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (e - s == 1 && *s == '*') {
            buf_reset(&b);
            buf_puts(&b, "*");
            break;
        }
        if (e > s) {
            buf_putc(&b, ',');
            buf_append(&b, s, (size_t)(e - s));
        }
        p += n;
        if (*p == ',') p++;
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

/* Checks what the transfer needs before anything is allocated: libcurl loaded, a
 * method token, an absolute http(s) URL that libcurl parses. False after replying. */
static bool check_method_and_url(struct rpc_req *req, const char *method, const char *url)
{
    const char *why = NULL;
    if (curl_dl_load(&why) < 0) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "failed to build http/request client: %s", why);
        return false;
    }
    if (!is_token(method)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "http/request method is invalid: invalid HTTP method");
        return false;
    }
    char scheme[32];
    if (!url_scheme(url, scheme, sizeof scheme)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "http/request url is invalid: relative URL without a base");
        return false;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "http/request only supports http and https URLs, got %s", scheme);
        return false;
    }
    CURLU *cu = curl_dl_fns.url();
    CURLUcode uc = curl_dl_fns.url_set(cu, CURLUPART_URL, url, 0);
    curl_dl_fns.url_cleanup(cu);
    if (uc != CURLUE_OK) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "http/request url is invalid: %s",
                        url_error_text(uc));
        return false;
    }
    return true;
}

/* One header of the request (decoded already) as curl's "name: value" line into
 * r->hdrs. False after replying. */
static bool add_header(struct rpc_req *req, struct http_req *r, json_t *h)
{
    const char *name = json_string_value(json_object_get(h, "name"));
    const char *value = json_string_value(json_object_get(h, "value"));
    const char *var = json_string_value(json_object_get(h, "valueEnvVar"));
    if (!is_token(name)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "http/request header name is invalid: invalid HTTP header name");
        return false;
    }
    const char *env = NULL;
    if (var) {
        env = getenv(var);
        if (!env) {
            rpc_reply_error(req, RPC_INVALID_PARAMS,
                            "http/request header %s requires executor environment variable %s",
                            name, var);
            return false;
        }
    }
    struct buf val;
    buf_init(&val);
    if (value) buf_puts(&val, value);
    if (env) buf_puts(&val, env);
    buf_putc(&val, '\0');
    if (!valid_header_value(val.data)) {
        buf_free(&val);
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "http/request header value is invalid for %s: failed to parse "
                        "header value",
                        name);
        return false;
    }
    struct buf line;
    buf_init(&line);
    for (const char *p = name; *p; p++)
        buf_putc(&line, (char)tolower((unsigned char)*p));
    /* curl drops "name:" with no value; "name;" sends it empty. */
    if (val.len > 1)
        buf_printf(&line, ": %s", val.data);
    else
        buf_putc(&line, ';');
    buf_putc(&line, '\0');
    r->hdrs = curl_dl_fns.slist_append(r->hdrs, line.data);
    buf_free(&val);
    buf_free(&line);
    return true;
}

static bool add_headers(struct rpc_req *req, struct http_req *r, json_t *headers)
{
    size_t i;
    json_t *h;
    json_array_foreach(headers, i, h)
    {
        if (!add_header(req, r, h)) return false;
    }
    return true;
}

/* The curl handle for r: method, URL, headers and body, redirects, proxies, trust,
 * the callbacks; timeout_ms < 0 for none. */
static CURL *easy_for(struct http_req *r, const char *method, const char *url, long timeout_ms)
{
    CURL *e = curl_dl_fns.easy_init();
    curl_dl_fns.easy_setopt(e, CURLOPT_URL, url);
    curl_dl_fns.easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0) curl_dl_fns.easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_dl_fns.easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    if (r->body) {
        curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDS, (char *)r->body);
        curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    }
    curl_dl_fns.easy_setopt(e, CURLOPT_FOLLOWLOCATION, r->follow ? 1L : 0L);
    curl_dl_fns.easy_setopt(e, CURLOPT_MAXREDIRS, (long)HTTP_MAX_REDIRECTS);
    curl_dl_fns.easy_setopt(e, CURLOPT_AUTOREFERER, 1L);
    /* A followed redirect keeps the method (the reference does not turn POST into GET). */
    curl_dl_fns.easy_setopt(e, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    curl_dl_fns.easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
    char *noproxy = noproxy_list();
    curl_dl_fns.easy_setopt(e, CURLOPT_NOPROXY, noproxy); /* libcurl keeps its own copy */
    free(noproxy);
    curl_dl_fns.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_dl_fns.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_dl_fns.easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_dl_fns.easy_setopt(e, CURLOPT_BUFFERSIZE, (long)HTTP_CURL_BUFFER);
    if (timeout_ms >= 0) curl_dl_fns.easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    /* The standard curl / OpenSSL variables name extra trust (a private CA): libcurl
     * itself reads none of them, only its built-in bundle path. */
    const char *ca = getenv("CURL_CA_BUNDLE");
    if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
    if (ca && *ca) curl_dl_fns.easy_setopt(e, CURLOPT_CAINFO, ca);
    const char *cadir = getenv("SSL_CERT_DIR");
    if (cadir && *cadir) curl_dl_fns.easy_setopt(e, CURLOPT_CAPATH, cadir);
    curl_dl_fns.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_dl_fns.easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEDATA, r);
    return e;
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
    if (!rpc_check_ready(req) || !check_method_and_url(req, method, url)) return;

    struct http_req *r = xcalloc(1, sizeof *r);
    buf_init(&r->id_json);
    buf_init(&r->body_buf);
    r->follow = policy != 1;
    r->stream = stream;
    if (!add_headers(req, r, headers)) {
        req_free(r);
        return;
    }
    if (b64) {
        r->body = xmalloc(base64_decoded_max(blen) + 1);
        char err[96];
        if (base64_decode(b64, blen, r->body, &r->body_len, err, sizeof err) < 0) {
            req_free(r);
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            return;
        }
    }
    struct http_table *t = table_of(req->conn);
    if (stream) {
        for (struct http_req *o = t->head; o; o = o->next) {
            if (o->stream && strcmp(o->request_id, request_id) == 0) {
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
    r->tab = t;
    r->req = req;
    r->hdrs = curl_dl_fns.slist_append(r->hdrs, "Expect:"); /* no 100-continue round trip */
    r->job.easy = easy_for(r, method, url, has_timeout ? (long)timeout_ms : -1);
    r->job.done = on_done;
    r->next = t->head;
    t->head = r;
    if (curl_loop_add(req->loop, &r->job) < 0) {
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
