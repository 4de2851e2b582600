/* http_head: the one HTTP/1.x head tokenizer, shared by every HTTP/1 reader in the
 * server (the WebSocket listener and its clients in proto/http_upgrade, the fleet
 * registry through http_request_scan, the managed-network proxy's requests and
 * responses in netproxy/np_http), as h2o's picohttpparser serves requests and
 * responses alike.
 *
 * One pass over the lines of a head finds its end, hands out the start line (the
 * caller parses it: http_parse_request_line, http_parse_status_line) and gives each
 * header field to the caller's function. The rules are the strict ones a proxy and a
 * server both need against request smuggling: lines end in LF or CRLF; empty lines
 * before the start line are skipped (RFC 9112 2.2); a field is a token, a colon with
 * no whitespace before it, and a value without control characters other than HTAB;
 * obsolete line folding is malformed; only HTTP/1.0 and HTTP/1.1 are spoken.
 * Sans-I/O: everything is recomputed from the start of the data on each call and
 * points into it; no state, no allocation. */
#ifndef EXEC_PROTO_HTTP_HEAD_H
#define EXEC_PROTO_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>

/* A byte range of the head. */
struct http_span {
    const char *p;
    size_t n;
};

/* Called for each well-formed header field in order, with the value trimmed of
 * surrounding SP/HTAB. A nonzero return ends the calls (kept in http_head.stopped);
 * the scan still looks for the head's end. */
typedef int (*http_field_fn)(void *ctx, struct http_span name, struct http_span value);

struct http_head {
    struct http_span start; /* the first non-empty line, once has_start */
    bool has_start;
    bool bad_field; /* a header line that is not `name: value` (no calls after it) */
    int stopped;    /* what the field function returned when it ended the calls, or 0 */
    size_t end;     /* bytes of the head with its blank line; 0 while incomplete */
};

/* Tokenizes data[0..len). A head longer than max bytes (with its blank line) is
 * never complete: the caller answers "too large" once len passes its limit. fn may be
 * NULL. */
void http_head_scan(const char *data, size_t len, size_t max, http_field_fn fn, void *ctx,
                    struct http_head *h);

/* "METHOD SP target SP HTTP/1.x": the method a token, the target visible ASCII.
 * Returns 0 or -EINVAL. */
int http_parse_request_line(struct http_span line, struct http_span *method,
                            struct http_span *target, bool *http10);
/* "HTTP/1.x SP 3DIGIT [SP reason]": returns the status or -EINVAL; *reason (may be
 * empty) and *http10 are set on success (either may be NULL). */
int http_parse_status_line(struct http_span line, bool *http10, struct http_span *reason);

/* RFC 9110 token characters. */
bool http_is_tchar(unsigned char c);
/* Whether s is lit, case-insensitively. */
bool http_span_eq_ci(struct http_span s, const char *lit);
/* s without leading and trailing SP/HTAB. */
struct http_span http_trim(struct http_span s);
/* Whether a comma-separated header value lists token (case-insensitively). */
bool http_list_has(const char *value, size_t len, const char *token);

#endif
