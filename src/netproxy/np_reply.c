/* np_reply: what the proxy answers a client itself, in its protocol's way: a refusal
 * after reporting it (a SOCKS5 reply, a plain-text 403 for CONNECT, a JSON 403 for a
 * forwarded request), a short HTTP response, an unreachable upstream (a SOCKS5 error
 * or a 502); then the connection ends. Also whether a CONNECT tunnel is to be
 * intercepted. Over the connection's sockets (np_conn.c). */
#include "netproxy/np_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "netproxy/np_policy.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"

void np_http_date(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void put_field(struct buf *b, const char *k, const char *v, bool first)
{
    if (!first) buf_putc(b, ',');
    buf_put_json_str(b, k, strlen(k));
    buf_putc(b, ':');
    buf_put_json_str(b, v, strlen(v));
}

/* Refuses the connection in its protocol's way after reporting the decision. */
void np_refuse(struct np_client *c, const char *scope, const char *decision, const char *source,
               const char *reason)
{
    np_report_client(c, scope, decision, source, reason, false);
    if (c->kind == NP_KIND_SOCKS) {
        uint8_t r[32];
        size_t n = np_socks_reply(r, NP_SOCKS_NOT_ALLOWED, NULL);
        np_write_copy(c, false, r, n);
        np_finish(c);
        return;
    }
    if (c->is_connect) {
        /* CONNECT refusals carry the message as plain text (verified) */
        np_reply_simple(c, 403, "Forbidden", "text/plain", np_reason_header(reason),
                        np_reason_message(reason));
        return;
    }
    struct buf body;
    buf_init(&body);
    buf_puts(&body, "{\"status\":\"blocked\"");
    put_field(&body, "host", c->host, false);
    put_field(&body, "reason", reason, false);
    put_field(&body, "decision", decision, false);
    put_field(&body, "source", source, false);
    put_field(&body, "protocol", c->protocol, false);
    buf_printf(&body, ",\"port\":%u", c->port);
    put_field(&body, "message", np_reason_message(reason), false);
    buf_putc(&body, '}');
    buf_putc(&body, '\0');
    np_reply_simple(c, 403, "Forbidden", "application/json", np_reason_header(reason), body.data);
    buf_free(&body);
}

void np_reply_simple(struct np_client *c, int status, const char *reason, const char *content_type,
                     const char *proxy_error, const char *body)
{
    char date[64];
    np_http_date(date, sizeof date);
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "HTTP/1.1 %d %s\r\n", status, reason);
    if (content_type) buf_printf(&b, "content-type: %s\r\n", content_type);
    if (proxy_error) buf_printf(&b, "x-proxy-error: %s\r\n", proxy_error);
    buf_printf(&b, "content-length: %zu\r\nconnection: close\r\ndate: %s\r\n\r\n%s", strlen(body),
               date, body);
    np_send(c, false, b.data, b.len);
    buf_free(&b);
    np_finish(c);
}

/* Whether a CONNECT tunnel is intercepted (np_internal.h): there is a CA, and limited
 * mode or credential masking needs to see inside. */
bool np_interception_wanted(const struct np_client *c)
{
    if (!c->np->mitm || !c->is_connect) return false;
    return c->np->params.limited || np_cred_wants(c);
}

void np_upstream_failed(struct np_client *c, int err)
{
    char hv[NP_HOST_MAX * 2];
    log_info("network proxy: %s:%u unreachable: %s", log_value(c->host, hv, sizeof hv), c->port,
             uv_strerror(err));
    if (c->kind == NP_KIND_SOCKS) {
        uint8_t r[32];
        int rep = err == UV_ECONNREFUSED                           ? NP_SOCKS_REFUSED
                  : err == UV_EAI_NONAME || err == UV_EHOSTUNREACH ? NP_SOCKS_HOST_UNREACHABLE
                  : err == UV_ENETUNREACH                          ? NP_SOCKS_NET_UNREACHABLE
                                                                   : NP_SOCKS_FAILURE;
        size_t n = np_socks_reply(r, rep, NULL);
        np_write_copy(c, false, r, n);
        np_finish(c);
        return;
    }
    np_reply_simple(c, 502, "Bad Gateway", "text/plain", NULL, "upstream failure");
}
