/* sigv4: AWS Signature Version 4 request signing (header form, HMAC-SHA256), pure.
 *
 * `--remote-transport direct` signs its /direct/register POST and the WebSocket
 * upgrade that follows the way 0.169.0 does (docs/REMOTE.md §8.6): headers
 * content-type (when given), host, x-amz-date and x-amz-security-token (with a
 * session token) are signed, the payload is hashed into the canonical request
 * (no x-amz-content-sha256 header, as for any non-S3 service), the path is
 * URI-encoded once more (so an already-encoded path is double-encoded, the non-S3
 * rule) and the query is decoded, re-encoded and sorted. Checked against AWS's
 * published test-suite vectors (tests/unit/test_sigv4.c). No I/O, no clock: the
 * caller passes the time. */
#ifndef EXEC_REMOTE_SIGV4_H
#define EXEC_REMOTE_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The credentials and scope (borrowed strings). session_token may be NULL. */
struct sigv4_key {
    const char *access_key;
    const char *secret_key;
    const char *session_token;
    const char *region;
    const char *service;
};

/* The request as it goes on the wire (borrowed). */
struct sigv4_request {
    const char *method;       /* "GET", "POST" */
    const char *host;         /* the Host header value (host[:port]) */
    const char *target;       /* path and query as sent, "/" at least */
    const char *content_type; /* signed when non-NULL */
    const uint8_t *body;      /* may be NULL when body_len is 0 */
    size_t body_len;
};

#define SIGV4_DATE_LEN 16 /* YYYYMMDDTHHMMSSZ */

/* Signs r at time t: amz_date gets the x-amz-date value (NUL-terminated) and auth
 * the Authorization value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=<64 hex>"). Both are caller buffers. Returns 0, -EINVAL for a missing
 * field or a target not starting with '/', -ENOSPC when auth is too small. */
int sigv4_sign(const struct sigv4_key *k, const struct sigv4_request *r, time_t t,
               char amz_date[SIGV4_DATE_LEN + 1], char *auth, size_t auth_n);

#endif
