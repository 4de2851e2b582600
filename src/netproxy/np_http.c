/* np_http: HTTP/1.x heads, targets and body framing for the policy proxy (see
 * np_http.h). Pure; the heads are tokenized by proto/http_head, the server's one
 * HTTP/1 tokenizer. */
#include "netproxy/np_http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netproxy/np_policy.h"
#include "proto/http_head.h"

/* The tokenizer's field function: every field into r->h, at most
 * NP_HTTP_MAX_HEADERS. */
static int keep_field(void *ctx, struct http_span name, struct http_span value)
{
    struct np_http_head *r = ctx;
    if (r->n == NP_HTTP_MAX_HEADERS) return -E2BIG;
    r->h[r->n++] = (struct np_http_header){name.p, value.p, name.n, value.n};
    return 0;
}

/* Tokenizes the head at the start of buf into r (proto/http_head). Returns 1 when
 * it is complete (*h then holds the start line), 0 when more bytes are needed, or
 * -E2BIG. */
static int scan(const char *buf, size_t len, struct np_http_head *r, struct http_head *h)
{
    memset(r, 0, sizeof *r);
    http_head_scan(buf, len, NP_HTTP_HEAD_MAX, keep_field, r, h);
    if (!h->end) return len >= NP_HTTP_HEAD_MAX ? -E2BIG : 0;
    return 1;
}

/* After a well-formed start line: the fields' verdict (too many headers, a malformed
 * one), else the head's length. */
static int complete(const struct http_head *h, bool http10, struct np_http_head *r)
{
    if (h->stopped) return h->stopped;
    if (h->bad_field) return -EINVAL;
    r->minor = http10 ? 0 : 1;
    r->head_len = h->end;
    return (int)h->end;
}

int np_http_parse_request(const char *buf, size_t len, struct np_http_head *r)
{
    struct http_head h;
    int rc = scan(buf, len, r, &h);
    if (rc <= 0) return rc;
    struct http_span method, target;
    bool http10 = false;
    if (http_parse_request_line(h.start, &method, &target, &http10) < 0) return -EINVAL;
    r->method = method.p;
    r->method_len = method.n;
    r->target = target.p;
    r->target_len = target.n;
    return complete(&h, http10, r);
}

int np_http_parse_response(const char *buf, size_t len, struct np_http_head *r)
{
    struct http_head h;
    int rc = scan(buf, len, r, &h);
    if (rc <= 0) return rc;
    struct http_span reason;
    bool http10 = false;
    int status = http_parse_status_line(h.start, &http10, &reason);
    if (status < 0) return -EINVAL;
    r->status = status;
    r->target = reason.p;
    r->target_len = reason.n;
    return complete(&h, http10, r);
}

static bool name_is(const struct np_http_header *h, const char *name)
{
    return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

const struct np_http_header *np_http_find(const struct np_http_head *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (name_is(&r->h[i], name)) return &r->h[i];
    return NULL;
}

bool np_http_lists(const struct np_http_head *r, const char *name, const char *token)
{
    for (size_t i = 0; i < r->n; i++)
        if (name_is(&r->h[i], name) && http_list_has(r->h[i].value, r->h[i].value_len, token))
            return true;
    return false;
}

/* Splits "host:port" / "[v6]:port" / "host" (port optional when def_port != 0). */
static int split_authority(const char *a, size_t n, uint16_t def_port, char *host, size_t hn,
                           uint16_t *port)
{
    const char *hs = a, *he;
    const char *ps = NULL;
    if (n && a[0] == '[') {
        const char *rb = memchr(a, ']', n);
        if (!rb) return -EINVAL;
        hs = a + 1;
        he = rb;
        if (rb + 1 < a + n) {
            if (rb[1] != ':') return -EINVAL;
            ps = rb + 2;
        }
    } else {
        const char *colon = NULL;
        for (size_t i = 0; i < n; i++)
            if (a[i] == ':') {
                if (colon) return -EINVAL; /* a bare IPv6 literal needs brackets */
                colon = a + i;
            }
        he = colon ? colon : a + n;
        if (colon) ps = colon + 1;
    }
    if (he == hs || (size_t)(he - hs) >= hn) return -EINVAL;
    for (const char *q = hs; q < he; q++)
        if ((unsigned char)*q <= ' ' || strchr("/?#@\\", *q)) return -EINVAL;
    char raw[NP_HOST_MAX];
    snprintf(raw, sizeof raw, "%.*s", (int)(he - hs), hs);
    np_host_normalize(raw, host, hn);
    if (!*host) return -EINVAL;
    if (ps) {
        size_t pl = (size_t)(a + n - ps);
        if (pl == 0 || pl > 5) return -EINVAL;
        unsigned long v = 0;
        for (size_t i = 0; i < pl; i++) {
            if (!isdigit((unsigned char)ps[i])) return -EINVAL;
            v = v * 10 + (unsigned long)(ps[i] - '0');
        }
        if (v == 0 || v > 65535) return -EINVAL;
        *port = (uint16_t)v;
    } else {
        if (!def_port) return -EINVAL;
        *port = def_port;
    }
    return 0;
}

int np_http_target(const struct np_http_head *r, uint16_t default_port, struct np_http_target *t,
                   const char **why)
{
    memset(t, 0, sizeof *t);
    *why = "invalid request target";
    const char *tg = r->target;
    size_t tl = r->target_len;
    const struct np_http_header *host_h = np_http_find(r, "Host");
    if (r->method_len == 7 && memcmp(r->method, "CONNECT", 7) == 0) {
        if (split_authority(tg, tl, 0, t->host, sizeof t->host, &t->port) < 0) return -EINVAL;
        t->path = "";
        return 0;
    }
    if (tl && tg[0] == '/') {
        if (!host_h) {
            *why = "missing host";
            return -EINVAL;
        }
        if (split_authority(host_h->value, host_h->value_len, default_port, t->host, sizeof t->host,
                            &t->port) < 0)
            return -EINVAL;
        t->path = tg;
        t->path_len = tl;
        return 0;
    }
    size_t sl;
    if (tl > 7 && strncasecmp(tg, "http://", 7) == 0) {
        snprintf(t->scheme, sizeof t->scheme, "http");
        sl = 7;
    } else {
        return -EINVAL;
    }
    const char *auth = tg + sl;
    size_t al = 0;
    while (sl + al < tl && !strchr("/?#", auth[al]))
        al++;
    if (memchr(auth, '@', al)) return -EINVAL; /* no userinfo */
    if (split_authority(auth, al, 80, t->host, sizeof t->host, &t->port) < 0) return -EINVAL;
    if (sl + al < tl && auth[al] == '/') {
        t->path = auth + al;
        t->path_len = tl - sl - al;
    } else if (sl + al < tl) {
        /* "http://host?q": the path is empty; keep the query after a "/" */
        t->path = auth + al;
        t->path_len = tl - sl - al;
    } else {
        t->path = "/";
        t->path_len = 1;
    }
    if (host_h) {
        char hh[NP_HOST_MAX];
        uint16_t hp;
        if (split_authority(host_h->value, host_h->value_len, 80, hh, sizeof hh, &hp) < 0 ||
            strcmp(hh, t->host) != 0 || hp != t->port) {
            *why = "Host header does not match request target";
            return -EINVAL;
        }
    }
    return 0;
}

static bool hop_by_hop(const struct np_http_head *r, const struct np_http_header *h,
                       bool keep_upgrade)
{
    static const char *const names[] = {
        "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate",
        "TE",         "Trailer",          NULL};
    for (const char *const *n = names; *n; n++)
        if (name_is(h, *n)) return true;
    if (name_is(h, "Upgrade")) return !keep_upgrade;
    /* headers the Connection header names are hop-by-hop too (but never the ones
     * that frame the body) */
    if (name_is(h, "Content-Length") || name_is(h, "Transfer-Encoding") || name_is(h, "Host"))
        return false;
    char name[128];
    if (h->name_len >= sizeof name) return false;
    memcpy(name, h->name, h->name_len);
    name[h->name_len] = '\0';
    if (keep_upgrade && strcasecmp(name, "upgrade") == 0) return false;
    return np_http_lists(r, "Connection", name);
}

static bool wants_upgrade(const struct np_http_head *r)
{
    return np_http_find(r, "Upgrade") && np_http_lists(r, "Connection", "upgrade");
}

static void put_header(struct buf *out, const struct np_http_header *h)
{
    buf_append(out, h->name, h->name_len);
    buf_puts(out, ": ");
    buf_append(out, h->value, h->value_len);
    buf_puts(out, "\r\n");
}

void np_http_forward_head(const struct np_http_head *r, const struct np_http_target *t,
                          np_http_rewrite_fn rewrite, void *ctx, struct buf *out)
{
    bool upgrade = wants_upgrade(r);
    buf_append(out, r->method, r->method_len);
    buf_putc(out, ' ');
    buf_append(out, t->path, t->path_len);
    buf_puts(out, " HTTP/1.1\r\n");
    bool have_host = false;
    for (size_t i = 0; i < r->n; i++) {
        const struct np_http_header *h = &r->h[i];
        if (hop_by_hop(r, h, upgrade)) continue;
        if (name_is(h, "Host")) have_host = true;
        if (rewrite) {
            struct buf v;
            buf_init(&v);
            if (rewrite(ctx, h, &v)) {
                buf_append(out, h->name, h->name_len);
                buf_puts(out, ": ");
                buf_append(out, v.data, v.len);
                buf_puts(out, "\r\n");
                buf_free(&v);
                continue;
            }
            buf_free(&v);
        }
        put_header(out, h);
    }
    if (!have_host) {
        bool v6 = strchr(t->host, ':') != NULL;
        buf_printf(out, "Host: %s%s%s", v6 ? "[" : "", t->host, v6 ? "]" : "");
        if (t->port != 80) buf_printf(out, ":%u", t->port);
        buf_puts(out, "\r\n");
    }
    buf_puts(out, upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: close\r\n\r\n");
}

void np_http_response_head(const struct np_http_head *r, struct buf *out)
{
    bool upgrade = r->status == 101;
    buf_printf(out, "HTTP/1.%d %03d", r->minor, r->status);
    if (r->target_len) {
        buf_putc(out, ' ');
        buf_append(out, r->target, r->target_len);
    }
    buf_puts(out, "\r\n");
    for (size_t i = 0; i < r->n; i++)
        if (!hop_by_hop(r, &r->h[i], upgrade)) put_header(out, &r->h[i]);
    buf_puts(out, upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: close\r\n\r\n");
}

int np_body_init(struct np_body *b, const struct np_http_head *r)
{
    memset(b, 0, sizeof *b);
    const struct np_http_header *te = NULL;
    const struct np_http_header *cl = NULL;
    for (size_t i = 0; i < r->n; i++) {
        if (name_is(&r->h[i], "Transfer-Encoding")) {
            if (te) return -EINVAL;
            te = &r->h[i];
        } else if (name_is(&r->h[i], "Content-Length")) {
            if (cl && (cl->value_len != r->h[i].value_len ||
                       memcmp(cl->value, r->h[i].value, cl->value_len) != 0))
                return -EINVAL;
            cl = &r->h[i];
        }
    }
    if (te) {
        /* chunked must be the last coding; a request with both is refused, the
         * safe reading of RFC 9112 section 6.1 for a proxy */
        size_t n = te->value_len;
        while (n && (te->value[n - 1] == ' ' || te->value[n - 1] == '\t'))
            n--;
        if (cl || n < 7 || strncasecmp(te->value + n - 7, "chunked", 7) != 0 ||
            (n > 7 && te->value[n - 8] != ',' && te->value[n - 8] != ' '))
            return -EINVAL;
        b->kind = NP_BODY_CHUNKED;
        return 0;
    }
    if (cl) {
        if (cl->value_len == 0 || cl->value_len > 19) return -EINVAL;
        uint64_t v = 0;
        for (size_t i = 0; i < cl->value_len; i++) {
            if (!isdigit((unsigned char)cl->value[i])) return -EINVAL;
            v = v * 10 + (uint64_t)(cl->value[i] - '0');
        }
        b->kind = NP_BODY_LENGTH;
        b->remaining = v;
        b->done = v == 0;
        return 0;
    }
    b->kind = NP_BODY_NONE;
    b->done = true;
    return 0;
}

/* chunked states */
enum {
    CH_SIZE0,
    CH_SIZE,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER0,
    CH_TRAILER,
    CH_TRAILER_LF,
    CH_END_LF
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long np_body_feed(struct np_body *b, const char *data, size_t len)
{
    if (b->done) return 0;
    if (b->kind == NP_BODY_LENGTH) {
        size_t take = len < b->remaining ? len : (size_t)b->remaining;
        b->remaining -= take;
        if (b->remaining == 0) b->done = true;
        return (long)take;
    }
    if (b->kind != NP_BODY_CHUNKED) {
        b->done = true;
        return 0;
    }
    size_t i = 0;
    while (i < len && !b->done) {
        char c = data[i];
        switch (b->state) {
        case CH_SIZE0:
        case CH_SIZE: {
            int h = hexval(c);
            if (h >= 0) {
                if (b->remaining > (UINT64_MAX >> 4)) return -EINVAL;
                b->remaining = b->remaining * 16 + (uint64_t)h;
                b->state = CH_SIZE;
            } else if (b->state == CH_SIZE && (c == ';' || c == ' ' || c == '\t')) {
                b->state = CH_EXT;
            } else if (b->state == CH_SIZE && c == '\r') {
                b->state = CH_SIZE_LF;
            } else if (b->state == CH_SIZE && c == '\n') {
                b->state = b->remaining ? CH_DATA : CH_TRAILER0;
            } else {
                return -EINVAL;
            }
            i++;
            break;
        }
        case CH_EXT:
            if (c == '\n')
                b->state = b->remaining ? CH_DATA : CH_TRAILER0;
            else if (c == '\r')
                b->state = CH_SIZE_LF;
            i++;
            break;
        case CH_SIZE_LF:
            if (c != '\n') return -EINVAL;
            b->state = b->remaining ? CH_DATA : CH_TRAILER0;
            i++;
            break;
        case CH_DATA: {
            size_t take = len - i < b->remaining ? len - i : (size_t)b->remaining;
            i += take;
            b->remaining -= take;
            if (b->remaining == 0) b->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (c == '\r')
                b->state = CH_DATA_LF;
            else if (c == '\n')
                b->state = CH_SIZE0;
            else
                return -EINVAL;
            i++;
            break;
        case CH_DATA_LF:
            if (c != '\n') return -EINVAL;
            b->state = CH_SIZE0;
            i++;
            break;
        case CH_TRAILER0: /* start of a trailer line, or the final blank line */
            if (c == '\r')
                b->state = CH_END_LF;
            else if (c == '\n')
                b->done = true;
            else
                b->state = CH_TRAILER;
            i++;
            break;
        case CH_TRAILER:
            if (c == '\n')
                b->state = CH_TRAILER0;
            else if (c == '\r')
                b->state = CH_TRAILER_LF;
            i++;
            break;
        case CH_TRAILER_LF:
            if (c != '\n') return -EINVAL;
            b->state = CH_TRAILER0;
            i++;
            break;
        case CH_END_LF:
            if (c != '\n') return -EINVAL;
            b->done = true;
            i++;
            break;
        }
    }
    return (long)i;
}
