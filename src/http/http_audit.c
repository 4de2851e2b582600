/* http_audit: the audit record of an http/request (audit/audit.h, docs/AUDIT.md):
 * method, host (the URL's host and port only: never its user, password, path or
 * query, where tokens travel), status, the bytes each way, and the error. Never a
 * header or a body. */
#include "http/http_audit.h"

#include <string.h>

#include "audit/audit.h"

size_t http_audit_host(const char *url, const char **host)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    /* userinfo@host: the part after the last '@' of the authority */
    for (size_t i = n; i > 0; i--)
        if (p[i - 1] == '@') {
            p += i;
            n -= i;
            break;
        }
    *host = p;
    return n;
}

void http_audit_done(const struct http_audit_call *c)
{
    struct buf *b = audit_begin("http.request");
    if (!b) return;
    const char *host;
    size_t n = http_audit_host(c->url, &host);
    audit_put_str(b, "session", c->session);
    audit_put_str(b, "method", c->method);
    audit_put_strn(b, "host", host, n);
    if (c->status > 0)
        audit_put_i64(b, "status", c->status);
    else
        audit_put_null(b, "status");
    audit_put_u64(b, "requestBytes", c->request_bytes);
    audit_put_u64(b, "responseBytes", c->response_bytes);
    audit_put_bool(b, "stream", c->stream);
    if (c->error) audit_put_str(b, "error", c->error);
    audit_commit(b);
}
