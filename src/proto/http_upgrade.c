/* http_upgrade: strict request-head parser and the listener's HTTP answers, and
 * the clients' check of the upgrade response; one head tokenizer for both.
 *
 * The request rules and their order follow the reference listener (PROTOCOL.md
 * 1.2): the Origin refusal comes first so no browser page gets any further, then
 * routing (/readyz, 404), then the WebSocket handshake checks with the rejection
 * texts of the reference's WebSocket extractor. The response rules are RFC 6455
 * 4.1's. Everything is recomputed from the start of data on each call; heads are
 * at most HTTP_MAX_HEAD bytes, so that stays cheap and keeps the parsers free of
 * state. */
#include "proto/http_upgrade.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/readiness.h"
#include "proto/base64.h"
#include "proto/http_head.h"
#include "proto/sha1.h"

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* A header field the caller wants; the first occurrence counts (the reference
 * looks headers up with a single-value get, and so does an RFC 6455 client). */
struct field {
    const char *name; /* lower case */
    bool seen;
    struct http_span value;
};

/* The wanted fields of one scan, for the tokenizer's field function. */
struct wanted {
    struct field *f;
    size_t n;
};

static int want_field(void *ctx, struct http_span name, struct http_span value)
{
    struct wanted *w = ctx;
    for (size_t i = 0; i < w->n; i++) {
        if (!http_span_eq_ci(name, w->f[i].name)) continue;
        if (!w->f[i].seen) w->f[i].value = value;
        w->f[i].seen = true;
        break;
    }
    return 0;
}

/* Tokenizes data[0..len) (proto/http_head), filling want[]. */
static void head_scan(const char *data, size_t len, struct field *want, size_t nwant,
                      struct http_head *h)
{
    struct wanted w = {want, nwant};
    http_head_scan(data, len, HTTP_MAX_HEAD, want_field, &w, h);
}

/* ---- requests (the listener) ---------------------------------------------------- */

/* The request fields the rules read, in want[] order. */
enum { F_ORIGIN, F_CONNECTION, F_UPGRADE, F_VERSION, F_KEY, F_AUTH, F_REQUEST_COUNT };

const char *http_reason(int status)
{
    switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/* Writes a complete non-101 response; a non-empty body is plain text. */
static enum http_outcome reply(struct http_request_info *info, struct buf *out, int status,
                               const char *body, const char *extra_header)
{
    info->status = status;
    size_t blen = body ? strlen(body) : 0;
    buf_printf(out, "HTTP/1.1 %d %s\r\ncontent-length: %zu\r\nconnection: close\r\n", status,
               http_reason(status), blen);
    if (blen) buf_puts(out, "content-type: text/plain; charset=utf-8\r\n");
    if (extra_header) buf_puts(out, extra_header);
    buf_puts(out, "\r\n");
    if (blen) buf_append(out, body, blen);
    return HTTP_REPLY;
}

/* The path of a request target: without a query, and without the scheme and
 * authority of an absolute-form target. */
static struct http_span target_path(struct http_span t)
{
    static const char *const schemes[] = {"http://", "https://"};
    for (size_t i = 0; i < 2; i++) {
        size_t sl = strlen(schemes[i]);
        if (t.n >= sl && strncasecmp(t.p, schemes[i], sl) == 0) {
            const char *slash = memchr(t.p + sl, '/', t.n - sl);
            if (!slash) return (struct http_span){"/", 1};
            t.n -= (size_t)(slash - t.p);
            t.p = slash;
            break;
        }
    }
    const char *q = memchr(t.p, '?', t.n);
    if (q) t.n = (size_t)(q - t.p);
    const char *hash = memchr(t.p, '#', t.n);
    if (hash) t.n = (size_t)(hash - t.p);
    return t;
}

/* A Sec-WebSocket-Key must be the base64 of 16 bytes (RFC 6455 4.1). */
static bool key_valid(struct http_span key)
{
    if (key.n != 24) return false;
    uint8_t raw[32];
    size_t n = 0;
    char err[64];
    return base64_decode(key.p, key.n, raw, &n, err, sizeof err) == 0 && n == 16;
}

void http_ws_accept_key(const char *key, size_t key_len, char out[HTTP_WS_ACCEPT_LEN + 1])
{
    char material[64 + sizeof WS_GUID];
    out[0] = '\0';
    if (key_len > 64) return;
    memcpy(material, key, key_len);
    memcpy(material + key_len, WS_GUID, sizeof WS_GUID - 1);
    uint8_t digest[SHA1_LEN];
    sha1(material, key_len + sizeof WS_GUID - 1, digest);
    out[base64_encode(digest, sizeof digest, out)] = '\0';
}

void http_write_101(struct buf *out, const char *key, size_t len)
{
    char accept[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(key, len, accept);
    buf_printf(out,
               "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: "
               "websocket\r\nsec-websocket-accept: %s\r\n\r\n",
               accept);
}

static enum http_outcome accept_upgrade(struct http_request_info *info, struct buf *out,
                                        struct http_span key)
{
    info->status = 101;
    http_write_101(out, key.p, key.n);
    return HTTP_WEBSOCKET;
}

bool http_ws_key_ok(const char *key, size_t len)
{
    return key_valid((struct http_span){key, len});
}

enum http_scan_result http_request_scan(const char *data, size_t len, struct http_field *want,
                                        size_t nwant, struct http_request_head *head)
{
    struct field f[HTTP_SCAN_MAX_FIELDS];
    if (nwant > HTTP_SCAN_MAX_FIELDS) nwant = HTTP_SCAN_MAX_FIELDS;
    for (size_t i = 0; i < nwant; i++)
        f[i] = (struct field){want[i].name, false, {0}};
    memset(head, 0, sizeof *head);
    struct http_head h;
    head_scan(data, len, f, nwant, &h);
    struct http_span method = {0}, target = {0};
    bool bad = h.bad_field;
    if (h.has_start && http_parse_request_line(h.start, &method, &target, &head->http10) < 0)
        bad = true;
    if (bad) return HTTP_SCAN_BAD;
    if (!h.end) return len > HTTP_MAX_HEAD ? HTTP_SCAN_TOO_BIG : HTTP_SCAN_INCOMPLETE;
    head->consumed = h.end;
    head->method = method.p, head->method_len = method.n;
    head->target = target.p, head->target_len = target.n;
    struct http_span path = target_path(target);
    head->path = path.p, head->path_len = path.n;
    const char *q = memchr(target.p, '?', target.n);
    if (q) {
        head->query = q + 1;
        head->query_len = (size_t)(target.p + target.n - q - 1);
        const char *hash = memchr(head->query, '#', head->query_len);
        if (hash) head->query_len = (size_t)(hash - head->query);
    }
    for (size_t i = 0; i < nwant; i++) {
        want[i].seen = f[i].seen;
        want[i].value = f[i].value.p;
        want[i].len = f[i].value.n;
    }
    return HTTP_SCAN_OK;
}

enum http_outcome http_upgrade_parse(const char *data, size_t len, struct http_request_info *info,
                                     struct buf *out)
{
    info->consumed = 0;
    info->status = 0;
    info->authorization[0] = '\0';
    info->method[0] = info->path[0] = '\0';

    if (len == 0) return HTTP_INCOMPLETE; /* data may be NULL then */

    struct field f[F_REQUEST_COUNT] = {
        [F_ORIGIN] = {"origin", false, {0}},
        [F_CONNECTION] = {"connection", false, {0}},
        [F_UPGRADE] = {"upgrade", false, {0}},
        [F_VERSION] = {"sec-websocket-version", false, {0}},
        [F_KEY] = {"sec-websocket-key", false, {0}},
        [F_AUTH] = {"authorization", false, {0}},
    };
    struct http_head h;
    head_scan(data, len, f, F_REQUEST_COUNT, &h);
    struct http_span method = {0}, target = {0};
    bool http10 = false;
    bool malformed = h.bad_field;
    if (h.has_start && http_parse_request_line(h.start, &method, &target, &http10) < 0)
        malformed = true;
    if (!h.end) {
        /* A malformed line is answered at once; otherwise wait for the blank line,
         * but not beyond the head limit. */
        if (malformed) return reply(info, out, 400, NULL, NULL);
        if (len > HTTP_MAX_HEAD) return reply(info, out, 431, NULL, NULL);
        return HTTP_INCOMPLETE;
    }
    info->consumed = h.end;
    if (malformed) return reply(info, out, 400, NULL, NULL);

    struct http_span auth = f[F_AUTH].value;
    if (f[F_AUTH].seen && auth.n < sizeof info->authorization) {
        memcpy(info->authorization, auth.p, auth.n);
        info->authorization[auth.n] = '\0';
    }

    struct http_span path = target_path(target);
    snprintf(info->method, sizeof info->method, "%.*s", (int)method.n, method.p);
    snprintf(info->path, sizeof info->path, "%.*s", (int)path.n, path.p);
    if (f[F_ORIGIN].seen) return reply(info, out, 403, NULL, NULL);
    /* Methods are case-sensitive (RFC 9110 9.1). */
    bool get = method.n == 3 && memcmp(method.p, "GET", 3) == 0;
    bool head_method = method.n == 4 && memcmp(method.p, "HEAD", 4) == 0;
    if (path.n == 7 && memcmp(path.p, "/readyz", 7) == 0) {
        if (!get && !head_method) return reply(info, out, 405, NULL, NULL);
        return reply(info, out, readiness_ok() ? 200 : 503, NULL, NULL);
    }
    if (path.n == 8 && memcmp(path.p, "/metrics", 8) == 0) {
        if (!get && !head_method) return reply(info, out, 405, NULL, NULL);
        info->head_only = head_method;
        return HTTP_METRICS;
    }
    if (!(path.n == 1 && path.p[0] == '/')) return reply(info, out, 404, NULL, NULL);
    if (!get) return reply(info, out, 405, "Request method must be `GET`", NULL);
    if (!f[F_CONNECTION].seen ||
        !http_list_has(f[F_CONNECTION].value.p, f[F_CONNECTION].value.n, "upgrade")) {
        return reply(info, out, 400, "Connection header did not include 'upgrade'", NULL);
    }
    if (!f[F_UPGRADE].seen || !http_span_eq_ci(f[F_UPGRADE].value, "websocket")) {
        return reply(info, out, 400, "`Upgrade` header did not include 'websocket'", NULL);
    }
    struct http_span version = f[F_VERSION].value;
    if (!f[F_VERSION].seen || !(version.n == 2 && memcmp(version.p, "13", 2) == 0)) {
        return reply(info, out, 400, "`Sec-WebSocket-Version` header did not include '13'",
                     "sec-websocket-version: 13\r\n");
    }
    if (!f[F_KEY].seen) return reply(info, out, 400, "`Sec-WebSocket-Key` header missing", NULL);
    if (!key_valid(f[F_KEY].value)) {
        return reply(info, out, 400, "`Sec-WebSocket-Key` header is invalid", NULL);
    }
    /* HTTP/1.0 has no Upgrade mechanism; it may only use the plain endpoints. */
    if (http10) return reply(info, out, 400, NULL, NULL);
    return accept_upgrade(info, out, f[F_KEY].value);
}

/* ---- responses (the clients) ----------------------------------------------------- */

static enum http_response_outcome bad_response(struct http_response_info *info, const char *why)
{
    info->error = why;
    return HTTP_RESPONSE_BAD;
}

enum http_response_outcome http_upgrade_response_parse(const char *data, size_t len,
                                                       const char *key,
                                                       struct http_response_info *info)
{
    memset(info, 0, sizeof *info);
    if (len == 0) return HTTP_RESPONSE_INCOMPLETE;

    enum { R_CONNECTION, R_UPGRADE, R_ACCEPT, R_COUNT };
    struct field f[R_COUNT] = {
        [R_CONNECTION] = {"connection", false, {0}},
        [R_UPGRADE] = {"upgrade", false, {0}},
        [R_ACCEPT] = {"sec-websocket-accept", false, {0}},
    };
    struct http_head h;
    head_scan(data, len, f, R_COUNT, &h);
    int status = h.has_start ? http_parse_status_line(h.start, NULL, NULL) : 0;
    if (status < 0) return bad_response(info, "malformed status line");
    if (!h.end) {
        if (len > HTTP_MAX_HEAD) return bad_response(info, "oversized upgrade response");
        return HTTP_RESPONSE_INCOMPLETE;
    }
    info->consumed = h.end;
    info->status = status;
    info->status_line = h.start.p;
    info->status_line_len = h.start.n;
    if (h.bad_field) return bad_response(info, "malformed header in the upgrade response");
    if (status != 101) return HTTP_RESPONSE_REFUSED;
    /* RFC 6455 4.1, the client's checks of a 101, in its order. */
    if (!f[R_UPGRADE].seen || !http_span_eq_ci(f[R_UPGRADE].value, "websocket"))
        return bad_response(info, "101 without `Upgrade: websocket`");
    if (!f[R_CONNECTION].seen ||
        !http_list_has(f[R_CONNECTION].value.p, f[R_CONNECTION].value.n, "upgrade"))
        return bad_response(info, "101 without `Connection: upgrade`");
    char want[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(key, strlen(key), want);
    struct http_span got = f[R_ACCEPT].value;
    bool accept_ok = f[R_ACCEPT].seen && want[0] && got.n == strlen(want) &&
                     memcmp(got.p, want, got.n) == 0; /* base64: case matters */
    if (!accept_ok) return bad_response(info, "bad Sec-WebSocket-Accept from the server");
    return HTTP_RESPONSE_UPGRADED;
}
