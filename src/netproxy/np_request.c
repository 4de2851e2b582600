/* np_request: what a proxied client sends. First its request, read up to where it
 * can be decided: an HTTP head (the destination, the method, the forwarded head and
 * the body's framing; a unix-socket request is refused as the reference does) or the
 * SOCKS5 greeting and request (CONNECT, or UDP ASSOCIATE with enableSocks5Udp);
 * then the decision (np_decision.c) while what follows the request is held (at most
 * NP_PENDING_IN_MAX bytes). Once the upstream is connected its bytes go to the relay
 * (np_relay.c), through the TLS session of an intercepted tunnel. Bytes come from
 * the client's socket or its transparent TCP flow (np_down_input). */
#include "netproxy/np_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netproxy/np_http.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"
#include "util/mem.h"

#define NP_PENDING_IN_MAX (256u * 1024) /* client bytes held while deciding */

static void http_request(struct np_client *c)
{
    struct np_http_head h;
    int rc = np_http_parse_request(c->in.data, c->in.len, &h);
    if (rc == 0) return;
    c->stage = NP_STAGE_DECIDE;
    if (rc < 0) {
        np_reply_simple(c, rc == -E2BIG ? 431 : 400,
                        rc == -E2BIG ? "Request Header Fields Too Large" : "Bad Request", NULL,
                        NULL, "");
        return;
    }
    snprintf(c->method, sizeof c->method, "%.*s", (int)(h.method_len < 23 ? h.method_len : 23),
             h.method);
    c->is_connect = strcmp(c->method, "CONNECT") == 0;
    c->protocol = c->is_connect ? "https_connect" : "http";
    if (np_http_find(&h, "x-unix-socket")) {
        snprintf(c->host, sizeof c->host, "unix-socket");
        c->port = 0;
        np_report_client(c, "non_domain", "deny", "proxy_state", "unix_socket_unsupported", false);
        np_reply_simple(c, 501, "Not Implemented", "text/plain", NULL, "unix sockets unsupported");
        return;
    }
    struct np_http_target t;
    const char *why;
    if (np_http_target(&h, c->mitm_port ? c->mitm_port : 80, &t, &why) < 0) {
        np_reply_simple(c, 400, "Bad Request", "text/plain", NULL, why);
        return;
    }
    snprintf(c->host, sizeof c->host, "%s", t.host);
    c->port = t.port;
    if (!c->is_connect) {
        if (np_body_init(&c->body, &h) < 0) {
            np_reply_simple(c, 400, "Bad Request", "text/plain", NULL,
                            "invalid request body framing");
            return;
        }
        c->upgrade = np_http_find(&h, "Upgrade") && np_http_lists(&h, "Connection", "upgrade");
        free(c->forward_path);
        c->forward_path = xstrndup(t.path, t.path_len);
        buf_init(&c->head_out);
        np_http_forward_head(&h, &t, np_cred_rewrite_fn(c), c, &c->head_out);
    }
    /* what follows the head is body (or, for CONNECT, the tunnel's first bytes) */
    size_t rest = c->in.len - (size_t)rc;
    memmove(c->in.data, c->in.data + rc, rest);
    c->in.len = rest;
    np_decide(c);
}

static void socks_input(struct np_client *c)
{
    const uint8_t *d = (const uint8_t *)c->in.data;
    if (c->stage == NP_STAGE_SOCKS_GREETING) {
        bool no_auth = false;
        int rc = np_socks_greeting(d, c->in.len, &no_auth);
        if (rc == 0) return;
        if (rc < 0) {
            np_client_close(c);
            return;
        }
        uint8_t r[2] = {5, no_auth ? 0 : 0xFF};
        np_write_copy(c, false, r, 2);
        if (!no_auth) {
            np_finish(c);
            return;
        }
        memmove(c->in.data, c->in.data + rc, c->in.len - (size_t)rc);
        c->in.len -= (size_t)rc;
        c->stage = NP_STAGE_SOCKS_REQUEST;
        d = (const uint8_t *)c->in.data;
    }
    if (c->stage != NP_STAGE_SOCKS_REQUEST) return;
    int cmd = 0;
    struct np_socks_addr a;
    int rc = np_socks_request(d, c->in.len, &cmd, &a);
    if (rc == 0) return;
    uint8_t r[32];
    if (rc < 0) {
        size_t n = np_socks_reply(
            r, rc == -EAFNOSUPPORT ? NP_SOCKS_ATYP_UNSUPPORTED : NP_SOCKS_FAILURE, NULL);
        np_write_copy(c, false, r, n);
        np_finish(c);
        return;
    }
    memmove(c->in.data, c->in.data + rc, c->in.len - (size_t)rc);
    c->in.len -= (size_t)rc;
    snprintf(c->host, sizeof c->host, "%s", a.host);
    c->port = a.port;
    if (cmd == NP_SOCKS_UDP && c->np->params.enable_socks5_udp) {
        c->stage = NP_STAGE_UDP;
        size_t n = 0;
        int urc = np_udp_start(c, &a, r, &n);
        np_write_copy(c, false, r, n);
        if (urc < 0) np_finish(c);
        return;
    }
    if (cmd != NP_SOCKS_CONNECT) {
        size_t n = np_socks_reply(r, NP_SOCKS_CMD_UNSUPPORTED, NULL);
        np_write_copy(c, false, r, n);
        np_finish(c);
        return;
    }
    c->protocol = "socks5_tcp";
    np_decide(c);
}

/* Client bytes while the request is being read or decided. */
static void np_request_bytes(struct np_client *c, const char *data, size_t n)
{
    if (c->in.len + n > NP_PENDING_IN_MAX) {
        /* a head too large, or a body sent too far ahead of the decision */
        if (c->stage == NP_STAGE_HEAD)
            np_reply_simple(c, 431, "Request Header Fields Too Large", NULL, NULL, "");
        else
            np_client_close(c);
        return;
    }
    buf_append(&c->in, data, n);
    if (c->stage == NP_STAGE_HEAD)
        http_request(c);
    else if (c->stage == NP_STAGE_SOCKS_GREETING || c->stage == NP_STAGE_SOCKS_REQUEST)
        socks_input(c);
}

/* What the client sent: n bytes in base (a pool buffer, taken), or n < 0 for its EOF
 * (UV_EOF) or an error. From its socket (on_down_read) or its transparent TCP flow. */
void np_down_input(struct np_client *c, char *base, ssize_t n)
{
    if (n > 0) {
        if (np_mitm_active(c, false)) {
            np_tls_input(c, false, base, (size_t)n);
            np_buf_put(base);
        } else if (c->stage == NP_STAGE_CONNECT && c->up && c->mode == NP_MODE_RAW) {
            np_relay_buf(c, true, base, (size_t)n, true);
        } else if (c->stage == NP_STAGE_CONNECT && c->up && c->mode != NP_MODE_NONE) {
            np_from_client(c, xmemdup(base, (size_t)n), (size_t)n);
            np_buf_put(base);
        } else {
            np_request_bytes(c, base, (size_t)n);
            np_buf_put(base);
        }
        return;
    }
    np_buf_put(base);
    if (n == 0 || c->closed) return;
    c->down_eof = true;
    c->reading_down = false;
    np_down_read_stop(c);
    if (n != UV_EOF) {
        np_client_close(c);
        return;
    }
    if (c->stage == NP_STAGE_UDP) {
        np_client_close(c);
        return;
    }
    if (c->stage != NP_STAGE_CONNECT || !c->up || c->mode == NP_MODE_NONE) {
        /* gone before its request was served (while asking, say) */
        if (c->stage == NP_STAGE_HEAD || c->stage == NP_STAGE_SOCKS_GREETING ||
            c->stage == NP_STAGE_SOCKS_REQUEST || c->stage == NP_STAGE_ASK ||
            c->stage == NP_STAGE_DECIDE || c->stage == NP_STAGE_CHECK)
            np_client_close(c);
        return;
    }
    if (c->mode == NP_MODE_RAW) {
        if (np_mitm_active(c, true)) {
            np_mitm_close_notify(c, true);
            np_tls_flush(c);
        }
        np_shutdown_side(c, true);
        if (c->up_eof) c->finish_on_shutdown = true;
    } else if (c->mode == NP_MODE_HTTP_BODY) {
        np_client_close(c); /* the body was cut short */
    }
}
