/* http_upgrade: strict request-head parser and the listener's HTTP answers.
 *
 * The rules and their order follow the reference listener (PROTOCOL.md 1.2): the
 * Origin refusal comes first so no browser page gets any further, then routing
 * (/readyz, 404), then the WebSocket handshake checks with the rejection texts of
 * the reference's WebSocket extractor. Everything is recomputed from the start of
 * data on each call; heads are at most HTTP_MAX_HEAD bytes, so that stays cheap
 * and keeps the parser free of state. */
#include "proto/http_upgrade.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/readiness.h"
#include "proto/base64.h"
#include "proto/sha1.h"

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* A byte range of the request. */
struct span {
    const char *p;
    size_t n;
};

/* What the rules need from a parsed head. For repeated headers the first one
 * counts, as in the reference (it looks headers up with a single-value get). */
struct head {
    struct span method, target;
    bool http10;
    bool has_origin;
    bool has_connection, has_upgrade, has_version, has_key, has_auth;
    struct span connection, upgrade, version, key, auth;
};

static bool is_tchar(unsigned char c)
{
    /* RFC 9110 token characters. */
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool span_eq_ci(struct span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

static struct span trim(struct span s)
{
    while (s.n && (s.p[0] == ' ' || s.p[0] == '\t')) s.p++, s.n--;
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t')) s.n--;
    return s;
}

/* Parses "METHOD SP target SP HTTP/1.x". Returns 0 or -EINVAL when malformed. */
static int parse_request_line(struct span line, struct head *h)
{
    const char *p = line.p, *end = line.p + line.n;
    const char *m = p;
    while (p < end && is_tchar((unsigned char)*p)) p++;
    if (p == m || p == end || *p != ' ') return -EINVAL;
    h->method = (struct span){m, (size_t)(p - m)};
    const char *t = ++p;
    while (p < end && (unsigned char)*p > 0x20 && *p != 0x7f) p++;
    if (p == t || p == end || *p != ' ') return -EINVAL;
    h->target = (struct span){t, (size_t)(p - t)};
    struct span ver = {p + 1, (size_t)(end - p - 1)};
    if (ver.n == 8 && memcmp(ver.p, "HTTP/1.1", 8) == 0) h->http10 = false;
    else if (ver.n == 8 && memcmp(ver.p, "HTTP/1.0", 8) == 0) h->http10 = true;
    else return -EINVAL;
    return 0;
}

/* Parses one "Name: value" line into h. Returns 0 or -EINVAL when malformed. */
static int parse_header(struct span line, struct head *h)
{
    const char *p = line.p, *end = line.p + line.n;
    while (p < end && is_tchar((unsigned char)*p)) p++;
    /* No whitespace before the colon (RFC 9112 5.1), and no obsolete line folding:
     * both are request-smuggling vectors, so a strict server refuses them. */
    if (p == line.p || p == end || *p != ':') return -EINVAL;
    struct span name = {line.p, (size_t)(p - line.p)};
    struct span value = {p + 1, (size_t)(end - p - 1)};
    for (size_t i = 0; i < value.n; i++) {
        unsigned char c = (unsigned char)value.p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) return -EINVAL;
    }
    value = trim(value);

    struct {
        const char *name;
        bool *seen;
        struct span *val;
    } wanted[] = {
        {"origin", &h->has_origin, NULL},
        {"connection", &h->has_connection, &h->connection},
        {"upgrade", &h->has_upgrade, &h->upgrade},
        {"sec-websocket-version", &h->has_version, &h->version},
        {"sec-websocket-key", &h->has_key, &h->key},
        {"authorization", &h->has_auth, &h->auth},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        if (!span_eq_ci(name, wanted[i].name)) continue;
        if (!*wanted[i].seen && wanted[i].val) *wanted[i].val = value;
        *wanted[i].seen = true;
        break;
    }
    return 0;
}

static const char *reason(int status)
{
    switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
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
               reason(status), blen);
    if (blen) buf_puts(out, "content-type: text/plain; charset=utf-8\r\n");
    if (extra_header) buf_puts(out, extra_header);
    buf_puts(out, "\r\n");
    if (blen) buf_append(out, body, blen);
    return HTTP_REPLY;
}

/* The path of a request target: without a query, and without the scheme and
 * authority of an absolute-form target. */
static struct span target_path(struct span t)
{
    static const char *const schemes[] = {"http://", "https://"};
    for (size_t i = 0; i < 2; i++) {
        size_t sl = strlen(schemes[i]);
        if (t.n >= sl && strncasecmp(t.p, schemes[i], sl) == 0) {
            const char *slash = memchr(t.p + sl, '/', t.n - sl);
            if (!slash) return (struct span){"/", 1};
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

/* Whether a comma-separated header value lists token (case-insensitively). */
static bool list_contains(struct span v, const char *token)
{
    const char *p = v.p, *end = v.p + v.n;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (span_eq_ci(trim((struct span){p, (size_t)(stop - p)}), token)) return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}

/* A Sec-WebSocket-Key must be the base64 of 16 bytes (RFC 6455 4.1). */
static bool key_valid(struct span key)
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

static enum http_outcome accept_upgrade(struct http_request_info *info, struct buf *out,
                                        struct span key)
{
    char accept[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key(key.p, key.n, accept);
    size_t alen = strlen(accept);
    info->status = 101;
    buf_printf(out,
               "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: "
               "websocket\r\nsec-websocket-accept: %.*s\r\n\r\n",
               (int)alen, accept);
    return HTTP_WEBSOCKET;
}

enum http_outcome http_upgrade_parse(const char *data, size_t len, struct http_request_info *info,
                                     struct buf *out)
{
    info->consumed = 0;
    info->status = 0;
    info->authorization[0] = '\0';
    info->method[0] = info->path[0] = '\0';

    if (len == 0) return HTTP_INCOMPLETE; /* data may be NULL then */

    struct head h;
    memset(&h, 0, sizeof h);
    bool have_request_line = false, malformed = false;
    size_t pos = 0, head_end = 0;
    for (;;) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        if (!nl) break;
        struct span line = {data + pos, (size_t)(nl - (data + pos))};
        if (line.n && line.p[line.n - 1] == '\r') line.n--;
        pos = (size_t)(nl - data) + 1;
        if (pos > HTTP_MAX_HEAD) break;
        if (!have_request_line) {
            /* Like common servers, tolerate empty lines before the request line. */
            if (line.n == 0) continue;
            if (parse_request_line(line, &h) < 0) malformed = true;
            have_request_line = true;
            continue;
        }
        if (line.n == 0) {
            head_end = pos;
            break;
        }
        if (!malformed && parse_header(line, &h) < 0) malformed = true;
    }
    if (!head_end) {
        /* A malformed request line is answered at once; otherwise wait for the
         * blank line, but not beyond the head limit. */
        if (malformed) return reply(info, out, 400, NULL, NULL);
        if (len > HTTP_MAX_HEAD) return reply(info, out, 431, NULL, NULL);
        return HTTP_INCOMPLETE;
    }
    info->consumed = head_end;
    if (malformed) return reply(info, out, 400, NULL, NULL);

    if (h.has_auth && h.auth.n < sizeof info->authorization) {
        memcpy(info->authorization, h.auth.p, h.auth.n);
        info->authorization[h.auth.n] = '\0';
    }

    struct span path = target_path(h.target);
    snprintf(info->method, sizeof info->method, "%.*s", (int)h.method.n, h.method.p);
    snprintf(info->path, sizeof info->path, "%.*s", (int)path.n, path.p);
    if (h.has_origin) return reply(info, out, 403, NULL, NULL);
    /* Methods are case-sensitive (RFC 9110 9.1). */
    bool get = h.method.n == 3 && memcmp(h.method.p, "GET", 3) == 0;
    bool head_method = h.method.n == 4 && memcmp(h.method.p, "HEAD", 4) == 0;
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
    if (!h.has_connection || !list_contains(h.connection, "upgrade")) {
        return reply(info, out, 400, "Connection header did not include 'upgrade'", NULL);
    }
    if (!h.has_upgrade || !span_eq_ci(h.upgrade, "websocket")) {
        return reply(info, out, 400, "`Upgrade` header did not include 'websocket'", NULL);
    }
    if (!h.has_version || !(h.version.n == 2 && memcmp(h.version.p, "13", 2) == 0)) {
        return reply(info, out, 400, "`Sec-WebSocket-Version` header did not include '13'",
                     "sec-websocket-version: 13\r\n");
    }
    if (!h.has_key) return reply(info, out, 400, "`Sec-WebSocket-Key` header missing", NULL);
    if (!key_valid(h.key)) {
        return reply(info, out, 400, "`Sec-WebSocket-Key` header is invalid", NULL);
    }
    /* HTTP/1.0 has no Upgrade mechanism; it may only use the plain endpoints. */
    if (h.http10) return reply(info, out, 400, NULL, NULL);
    return accept_upgrade(info, out, h.key);
}
