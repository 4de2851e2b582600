/* http_audit: http/request's audit record (see http_audit.c). Loop thread. */
#ifndef EXEC_HTTP_HTTP_AUDIT_H
#define EXEC_HTTP_HTTP_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_audit_call {
    const char *session, *method, *url;
    long status; /* 0: no response */
    uint64_t request_bytes, response_bytes;
    bool stream;
    const char *error; /* NULL: it succeeded */
};

/* Writes the record of a finished (or abandoned) call. */
void http_audit_done(const struct http_audit_call *c);
/* The host[:port] of url (*host points into it; userinfo left out): its length. */
size_t http_audit_host(const char *url, const char **host);

#endif
