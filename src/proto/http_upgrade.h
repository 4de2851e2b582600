/* http_upgrade: both sides of the HTTP/1.1 upgrade to WebSocket, over one head
 * tokenizer (as h2o's picohttpparser shares one between requests and responses).
 *
 * The request parser is the listener's: given the bytes received so far it decides
 * what the listener does (PROTOCOL.md section 1.2): wait for more, answer and close
 * (readyz, 403 for any Origin header, 400/404/405 and malformed requests), or
 * switch to WebSocket with the 101 response it wrote. The response parser is every
 * client's (the client library, the bench, remote mode's rendezvous socket): it
 * checks the server's answer to an upgrade request (RFC 6455 4.1). Both read heads
 * with proto/http_head's tokenizer. Sans-I/O, unit-tested and fuzzed. */
#ifndef EXEC_PROTO_HTTP_UPGRADE_H
#define EXEC_PROTO_HTTP_UPGRADE_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/http_head.h" /* http_list_has, for the callers */
#include "util/buf.h"

/* Requests whose head (request line + headers) exceeds this get 431 and a close. */
#define HTTP_MAX_HEAD 16384

enum http_outcome {
    HTTP_INCOMPLETE, /* the head has not ended yet; call again with more bytes */
    HTTP_WEBSOCKET,  /* a valid upgrade: send *reply (the 101), then speak WebSocket */
    HTTP_REPLY,      /* send *reply, then close the connection */
    HTTP_METRICS,    /* GET or HEAD /metrics: the caller answers (auth, then the text) */
};

struct http_request_info {
    size_t consumed;         /* bytes of the head (incl. the blank line), for HTTP_WEBSOCKET */
    int status;              /* status code written into the reply */
    char authorization[512]; /* the Authorization header value, "" when absent or too long */
    bool head_only;          /* HTTP_METRICS: a HEAD request (headers, no body) */
    char method[8];          /* the request method, cut to 7 bytes ("" if malformed) */
    char path[64];           /* the target's path, cut to 63 bytes, for logs */
};

/* Length of a Sec-WebSocket-Accept value (base64 of a SHA-1 digest). */
#define HTTP_WS_ACCEPT_LEN 28

/* Writes the Sec-WebSocket-Accept value for a Sec-WebSocket-Key (key_len bytes):
 * base64(SHA-1(key + the RFC 6455 GUID)), HTTP_WS_ACCEPT_LEN chars and a NUL. The
 * server answers with it; the client checks the server's answer against it. Keys
 * longer than 64 bytes (never valid) give an empty string. */
void http_ws_accept_key(const char *key, size_t key_len, char out[HTTP_WS_ACCEPT_LEN + 1]);

/* Parses data[0..len). Appends the complete response to *reply (a plain buf, no
 * message headroom) for HTTP_WEBSOCKET and HTTP_REPLY. */
enum http_outcome http_upgrade_parse(const char *data, size_t len, struct http_request_info *info,
                                     struct buf *reply);

/* ---- any request head, for other HTTP servers (the fleet registry) ----
 * The same tokenizer and request-line rules as http_upgrade_parse, without its
 * routing: the caller gets the method, the target split into path and query, and the
 * header fields it asks for, and decides the answer itself. */

/* A header field the caller wants; after the scan, the first occurrence's trimmed
 * value (pointing into the data) when seen. */
struct http_field {
    const char *name; /* lower case */
    bool seen;
    const char *value;
    size_t len;
};
#define HTTP_SCAN_MAX_FIELDS 16

struct http_request_head {
    size_t consumed; /* bytes of the head with its blank line (HTTP_SCAN_OK) */
    const char *method, *target, *path, *query; /* into data; query without '?' */
    size_t method_len, target_len, path_len, query_len;
    bool http10; /* HTTP/1.0 (else 1.1) */
};

enum http_scan_result {
    HTTP_SCAN_INCOMPLETE, /* no blank line yet: call again with more bytes */
    HTTP_SCAN_OK,         /* *head and want[] are filled */
    HTTP_SCAN_BAD,        /* a malformed request line or header field: answer 400 */
    HTTP_SCAN_TOO_BIG,    /* no end within HTTP_MAX_HEAD bytes: answer 431 */
};

/* Scans the request head at data[0..len); want[] (at most HTTP_SCAN_MAX_FIELDS) is
 * reset and filled. */
enum http_scan_result http_request_scan(const char *data, size_t len, struct http_field *want,
                                        size_t nwant, struct http_request_head *head);
/* Whether a Sec-WebSocket-Key is the base64 of 16 bytes (RFC 6455 4.1). */
bool http_ws_key_ok(const char *key, size_t len);
/* Appends the 101 answer to an upgrade request with this Sec-WebSocket-Key. */
void http_write_101(struct buf *out, const char *key, size_t len);
/* The reason phrase of the statuses our servers send ("Error" for others). */
const char *http_reason(int status);

enum http_response_outcome {
    HTTP_RESPONSE_INCOMPLETE, /* the head has not ended yet; call again with more bytes */
    HTTP_RESPONSE_UPGRADED,   /* a 101 with Upgrade: websocket, Connection: upgrade and
                               * the accept value of the key: speak WebSocket */
    HTTP_RESPONSE_REFUSED,    /* a well-formed head with another status (info->status) */
    HTTP_RESPONSE_BAD,        /* a malformed or oversized head, or a 101 that fails a
                               * check: info->error says which */
};

struct http_response_info {
    size_t consumed;         /* bytes of the head (incl. the blank line); what follows
                              * is WebSocket data (UPGRADED) or the body (REFUSED) */
    int status;              /* the status code, once the head is complete */
    const char *status_line; /* points into data (no line end), once complete */
    size_t status_line_len;
    const char *error; /* HTTP_RESPONSE_BAD: a static text */
};

/* Parses the response in data[0..len) to an upgrade request sent with the
 * Sec-WebSocket-Key `key` (a NUL-terminated string). */
enum http_response_outcome http_upgrade_response_parse(const char *data, size_t len,
                                                       const char *key,
                                                       struct http_response_info *info);

#endif
