/* np_http: the HTTP/1.x the policy proxy needs, pure (no I/O): a request-head and a
 * response-head parser, the request target (absolute-form, authority-form for
 * CONNECT, origin-form with Host), the forwarded head without hop-by-hop headers,
 * and the body framer that tells where a request's body ends (Content-Length or
 * chunked), so exactly one request is forwarded per upstream connection: a second,
 * pipelined request can never ride on a connection the policy approved for the
 * first one.
 *
 * Parsing is over a complete head in a buffer (the proxy gathers up to
 * NP_HTTP_HEAD_MAX bytes), with the server's one HTTP/1 tokenizer
 * (proto/http_head: its rules, HTTP/1.0 and 1.1 only); values point into that
 * buffer. */
#ifndef EXEC_NETPROXY_NP_HTTP_H
#define EXEC_NETPROXY_NP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define NP_HTTP_HEAD_MAX (64 * 1024)
#define NP_HTTP_MAX_HEADERS 128

struct np_http_header {
    const char *name, *value;
    size_t name_len, value_len;
};

struct np_http_head {
    /* request: method and target; response: status and reason */
    const char *method, *target;
    size_t method_len, target_len;
    int status;
    int minor; /* HTTP/1.<minor> */
    struct np_http_header h[NP_HTTP_MAX_HEADERS];
    size_t n;
    size_t head_len; /* bytes up to and including the blank line */
};

/* Parses a request head at the start of buf. Returns head_len (> 0) when complete,
 * 0 when more bytes are needed, -EINVAL on a malformed head, -E2BIG past
 * NP_HTTP_HEAD_MAX or NP_HTTP_MAX_HEADERS. */
int np_http_parse_request(const char *buf, size_t len, struct np_http_head *r);
/* The same for a response head ("HTTP/1.x NNN reason"). */
int np_http_parse_response(const char *buf, size_t len, struct np_http_head *r);

/* The first header called name (case-insensitive), or NULL. */
const struct np_http_header *np_http_find(const struct np_http_head *r, const char *name);
/* Whether a comma-separated header (Connection, Transfer-Encoding) lists token. */
bool np_http_lists(const struct np_http_head *r, const char *name, const char *token);

/* Where a request goes. scheme "http" or "https" (absolute-form), or "" for
 * authority-form (CONNECT) and origin-form; host normalised without brackets. */
struct np_http_target {
    char scheme[8];
    char host[256];
    uint16_t port;
    const char *path; /* origin-form path (into the head), "/" if none */
    size_t path_len;
};
/* Resolves the request's destination. Returns 0, or -EINVAL with *why set to the
 * reference's 400 body: "missing host", "Host header does not match request
 * target", "invalid request target". CONNECT needs host:port; absolute-form needs
 * http:// (https:// and others are refused); origin-form takes the Host header with
 * default_port. */
int np_http_target(const struct np_http_head *r, uint16_t default_port, struct np_http_target *t,
                   const char **why);

/* Appends the head to forward upstream: "METHOD path HTTP/1.1", the headers without
 * the hop-by-hop ones (Connection and those it names, Keep-Alive, Proxy-*, TE,
 * Trailer, Upgrade unless upgrading), then "Connection: close" (or "Connection:
 * upgrade" with the Upgrade header when the client asked to upgrade). rewrite, when
 * given, may replace a header's value: it returns true and fills out. */
typedef bool (*np_http_rewrite_fn)(void *ctx, const struct np_http_header *h, struct buf *out);
void np_http_forward_head(const struct np_http_head *r, const struct np_http_target *t,
                          np_http_rewrite_fn rewrite, void *ctx, struct buf *out);
/* The response head to pass back: the status line as received, the headers without
 * the hop-by-hop ones, then "Connection: close" (101 keeps its Upgrade and
 * "Connection: upgrade"). */
void np_http_response_head(const struct np_http_head *r, struct buf *out);

/* Request body framing (RFC 9112 section 6): none, Content-Length, or chunked. */
enum np_body_kind { NP_BODY_NONE, NP_BODY_LENGTH, NP_BODY_CHUNKED };
struct np_body {
    enum np_body_kind kind;
    uint64_t remaining; /* LENGTH: bytes left; CHUNKED: of the current chunk */
    int state;          /* chunked parser state */
    bool done;
};
/* From the request head. Returns 0, or -EINVAL (a bad or repeated Content-Length,
 * a transfer coding other than chunked last). */
int np_body_init(struct np_body *b, const struct np_http_head *r);
/* Consumes body bytes from data: returns how many of len belong to the body (the
 * rest is the next message), or -EINVAL on malformed chunked framing. b->done is
 * set once the body ended. */
long np_body_feed(struct np_body *b, const char *data, size_t len);

#endif
