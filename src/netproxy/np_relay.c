/* np_relay: an allowed connection from its decision on (np_decision.c allows it):
 * the local-address check and the limited-mode guard, the route (direct, or through
 * the server's upstream proxy), resolution (uv_getaddrinfo on libuv's thread pool;
 * the addresses checked are the ones connected to), the upstream connection (the
 * addresses tried in order), then the relay both ways.
 *
 * The relay passes each buffer libuv read on to the other socket's write queue
 * without copying it, and stops reading a side while the other side's queue is over
 * NP_HIGH_WATER (so a slow reader bounds the memory a connection holds). An HTTP
 * request that is not CONNECT is forwarded alone: its head without hop-by-hop
 * headers and with "Connection: close", then exactly its body (np_body), then
 * nothing more from the client; the response head gets "Connection: close" too, and
 * the rest of the response is relayed as is until the upstream closes. So a
 * connection carries one request the policy decided, never a second one piggy-backed
 * on it (limited mode could not see its method otherwise). An intercepted tunnel's
 * bytes go through its TLS sessions (np_mitm.c) and its one request inside is
 * handled here the same way. */
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/log.h"
#include "netproxy/np_http.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"
#include "util/mem.h"

static void connect_next(struct np_client *c);
static void tunnel_ready(struct np_client *c);
static void upstream_ready(struct np_client *c);
static void up_input(struct np_client *c, char *base, ssize_t n);
static void inner_plain(struct np_client *c, char *data, size_t n);

/* Allowed by the policy or the client: the limited-mode guard, then the connection
 * (np_internal.h). */
void np_proceed_allowed(struct np_client *c)
{
    struct netproxy *np = c->np;
    c->stage = NP_STAGE_CONNECT;
    np_report_client(c, "domain", "allow", c->decider_allowed ? "decider" : "baseline_policy",
                     c->decider_allowed ? np_reason_name(c->baseline) : "allow",
                     c->decider_allowed);
    if (np->params.limited && c->kind == NP_KIND_HTTP) {
        if (c->is_connect && !np_interception_wanted(c)) {
            np_refuse(c, "non_domain", "deny", "mode_guard", "mitm_required");
            return;
        }
        if (!c->is_connect && !np_method_allowed_limited(c->method)) {
            np_refuse(c, "non_domain", "deny", "mode_guard", "method_not_allowed");
            return;
        }
    }
    np_resolve(c);
}

/* allowUpstreamProxy: whether this connection goes through the server's upstream
 * proxy. Loopback destinations never do; other non-public ones only with
 * --proxy-private-ips-via-upstream; a name the proxy could not np_resolve does (the
 * upstream may know it). When it does, the socket's target becomes the upstream
 * proxy, being resolved when this returns true. */
static bool route_upstream(struct np_client *c)
{
    struct netproxy *np = c->np;
    bool forward = c->kind == NP_KIND_HTTP && !c->is_connect;
    const char *uh = forward ? np->up_http_host : np->up_connect_host;
    uint16_t up = forward ? np->up_http_port : np->up_connect_port;
    if (!np->params.allow_upstream_proxy || !uh[0]) return false;
    if (np_host_is_loopback(c->host)) return false;
    if (!c->resolve_err) {
        bool any_private = false;
        for (int i = 0; i < c->naddrs; i++) {
            const struct sockaddr *sa = (struct sockaddr *)&c->addrs[i];
            bool loop = sa->sa_family == AF_INET
                            ? (ntohl(((struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127
                            : IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)sa)->sin6_addr);
            if (loop) return false;
            if (np_addr_non_public(sa)) any_private = true;
        }
        if (any_private && !np_private_via_upstream()) return false;
    }
    c->via_upstream = true;
    snprintf(c->conn_host, sizeof c->conn_host, "%s", uh);
    c->conn_port = up;
    c->have_addrs = false;
    c->resolve_err = 0;
    np_resolve(c);
    return true;
}

/* A private address literal (RFC 1918, IPv6 unique local): what
 * --proxy-private-ips-via-upstream lets through --tcp-upstream-proxy (0.171.0 sends
 * 10.1.2.3 there with the flag, and never 192.0.2.2 or a loopback address). */
static bool private_literal(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        uint32_t ip = ntohl(a4.s_addr);
        return (ip >> 24) == 10 || (ip >> 20) == 0xAC1 || (ip >> 16) == 0xC0A8;
    }
    return inet_pton(AF_INET6, host, &a6) == 1 && (a6.s6_addr[0] & 0xFE) == 0xFC;
}

/* --tcp-upstream-proxy: a SOCKS5 (or transparent) connection the policy allowed must
 * leave through that CONNECT proxy, its name unresolved here; where it may not (the
 * request does not allow upstream proxies, a loopback destination, a non-public
 * literal other than a private one with --proxy-private-ips-via-upstream) it fails as
 * an unreachable upstream does: never a direct connection. */
static void route_tcp_upstream(struct np_client *c, const struct limits_endpoint *ep)
{
    bool non_public = false;
    bool literal = np_host_is_ip_literal(c->host, &non_public);
    if (!c->np->params.allow_upstream_proxy || np_host_is_loopback(c->host) ||
        (literal && non_public && !(np_private_via_upstream() && private_literal(c->host)))) {
        np_upstream_failed(c, UV_ECONNREFUSED);
        return;
    }
    c->via_upstream = true;
    c->check_resolved = false; /* the destination was checked; the proxy is not it */
    snprintf(c->conn_host, sizeof c->conn_host, "%s", ep->host);
    c->conn_port = ep->port;
    c->have_addrs = false;
    c->resolve_err = 0;
    np_resolve(c);
}

/* After the addresses are known (c->resolved): the local check when it applies. */
static void resolved(struct np_client *c)
{
    if (c->check_resolved && !c->resolve_err) {
        for (int i = 0; i < c->naddrs; i++)
            if (np_addr_non_public((struct sockaddr *)&c->addrs[i])) {
                np_refuse(c, "domain", "deny", "baseline_policy", "not_allowed_local");
                return;
            }
    }
    if (c->stage == NP_STAGE_CHECK) {
        np_proceed_allowed(c);
        return;
    }
    if (!c->route_decided) {
        c->route_decided = true;
        if (route_upstream(c)) return; /* resolving the upstream proxy now */
    }
    if (c->resolve_err) {
        np_upstream_failed(c, c->resolve_err);
        return;
    }
    c->addr_i = 0;
    connect_next(c);
}

static void on_gai(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct np_client *c = req->data;
    c->gai_busy = false;
    if (!c->closed) {
        c->naddrs = 0;
        c->resolve_err = status < 0 ? status : 0;
        for (struct addrinfo *a = res; a && c->naddrs < NP_MAX_ADDRS; a = a->ai_next) {
            if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
            memcpy(&c->addrs[c->naddrs++], a->ai_addr, a->ai_addrlen);
        }
        if (!c->resolve_err && c->naddrs == 0) c->resolve_err = UV_EAI_NONAME;
        c->have_addrs = true;
        resolved(c);
    }
    uv_freeaddrinfo(res);
    np_client_unref(c);
}

/* Resolves c->host: an IP literal or a test override at once, a name on the
 * thread pool. */
void np_resolve(struct np_client *c)
{
    const struct limits_endpoint *tcp_up = c->kind == NP_KIND_SOCKS ? np_tcp_upstream() : NULL;
    if (tcp_up && c->stage == NP_STAGE_CONNECT && !c->route_decided) {
        c->route_decided = true;
        route_tcp_upstream(c, tcp_up);
        return;
    }
    if (c->have_addrs) {
        resolved(c);
        return;
    }
    if (!c->conn_host[0]) {
        snprintf(c->conn_host, sizeof c->conn_host, "%s", c->host);
        c->conn_port = c->port;
    }
    if (np_resolve_now(c->conn_host, c->conn_port, &c->addrs[0])) {
        c->naddrs = 1;
        c->resolve_err = 0;
        c->have_addrs = true;
        resolved(c);
        return;
    }
    c->gai.data = c;
    np_client_ref(c);
    int rc =
        np_resolve_start(c->np->loop, &c->gai, on_gai, c->conn_host, c->conn_port, SOCK_STREAM);
    if (rc < 0) {
        np_client_unref(c);
        c->resolve_err = rc;
        c->have_addrs = true;
        resolved(c);
        return;
    }
    c->gai_busy = true;
}

static void on_connected(uv_connect_t *req, int status)
{
    struct np_client *c = req->data;
    free(req);
    if (c->closed) {
        np_client_unref(c);
        return;
    }
    if (status < 0) {
        c->last_err = status;
        uv_close((uv_handle_t *)c->up, np_client_handle_closed); /* unrefs */
        c->up = NULL;
        c->addr_i++;
        connect_next(c);
        np_client_unref(c);
        return;
    }
    upstream_ready(c);
    np_client_unref(c);
}

static void connect_next(struct np_client *c)
{
    if (c->addr_i >= c->naddrs) {
        np_upstream_failed(c, c->last_err ? c->last_err : UV_ECONNREFUSED);
        return;
    }
    c->up = xcalloc(1, sizeof *c->up);
    uv_tcp_init(c->np->loop, c->up);
    c->up->data = c;
    c->up_input = up_input;
    np_client_ref(c); /* the handle */
    uv_tcp_nodelay(c->up, 1);
    uv_connect_t *req = xmalloc(sizeof *req);
    req->data = c;
    np_client_ref(c);
    int rc = uv_tcp_connect(req, c->up, (struct sockaddr *)&c->addrs[c->addr_i], on_connected);
    if (rc < 0) {
        free(req);
        np_client_unref(c);
        c->last_err = rc;
        uv_close((uv_handle_t *)c->up, np_client_handle_closed);
        c->up = NULL;
        c->addr_i++;
        connect_next(c);
    }
}

/* Forwards n bytes read from one side to the other (raw relay), taking the buffer
 * (a read buffer from the pool when pooled, else a malloc'd one). */
void np_relay_buf(struct np_client *c, bool to_up, char *data, size_t n, bool pooled)
{
    if (np_mitm_active(c, to_up)) {
        np_send(c, to_up, data, n);
        np_buf_release(data, pooled);
    } else {
        np_write_buf(c, to_up, data, n, pooled);
    }
    size_t queued = c->closed ? 0
                    : !to_up  ? np_down_queued(c)
                    : c->up   ? uv_stream_get_write_queue_size((uv_stream_t *)c->up)
                              : 0;
    if (queued > NP_HIGH_WATER) {
        if (to_up) {
            np_down_read_stop(c);
            c->down_paused = true;
        } else if (c->up) {
            uv_read_stop((uv_stream_t *)c->up);
            c->up_paused = true;
        }
    }
}

static void relay_bytes(struct np_client *c, bool to_up, char *data, size_t n)
{
    np_relay_buf(c, to_up, data, n, false);
}

/* Client bytes (plaintext) once the upstream is connected. */
void np_from_client(struct np_client *c, char *data, size_t n)
{
    if (c->mode == NP_MODE_RAW) {
        relay_bytes(c, true, data, n);
        return;
    }
    if (c->mode == NP_MODE_HTTP_BODY) {
        long take = np_body_feed(&c->body, data, n);
        if (take < 0) {
            free(data);
            np_client_close(c);
            return;
        }
        if (take > 0)
            relay_bytes(c, true, data, (size_t)take);
        else
            free(data);
        if (c->body.done) {
            /* one request per connection: nothing after it goes anywhere */
            c->mode = c->upgrade ? NP_MODE_HOLD : NP_MODE_DISCARD;
            c->down_wanted = false;
            np_down_read_stop(c);
        }
        return;
    }
    if (c->mode == NP_MODE_HOLD) {
        /* an upgrade request: bytes after it wait for the 101 */
        buf_append(&c->in, data, n);
        free(data);
        return;
    }
    free(data);
}

static void forward_pending_in(struct np_client *c)
{
    if (!c->in.len) return;
    char *d = xmemdup(c->in.data, c->in.len);
    size_t n = c->in.len;
    buf_reset(&c->in);
    np_from_client(c, d, n);
}

/* Upstream bytes (plaintext). */
static void np_from_upstream(struct np_client *c, char *data, size_t n)
{
    if (c->mode_up == NP_MODE_RAW) {
        relay_bytes(c, false, data, n);
        return;
    }
    if (c->mode_up == NP_MODE_UPCONNECT) {
        /* the upstream proxy's answer to our CONNECT */
        buf_append(&c->resp, data, n);
        free(data);
        struct np_http_head h;
        int rc = np_http_parse_response(c->resp.data, c->resp.len, &h);
        if (rc == 0) return;
        if (rc < 0 || h.status / 100 != 2) {
            buf_reset(&c->resp);
            np_upstream_failed(c, UV_ECONNREFUSED);
            return;
        }
        size_t rest = c->resp.len - (size_t)rc;
        char *early = rest ? xmemdup(c->resp.data + rc, rest) : NULL;
        buf_reset(&c->resp);
        c->mode_up = NP_MODE_NONE;
        tunnel_ready(c);
        if (early) np_from_upstream(c, early, rest);
        return;
    }
    /* the response head: gather, rewrite, pass */
    buf_append(&c->resp, data, n);
    free(data);
    for (;;) {
        struct np_http_head h;
        int rc = np_http_parse_response(c->resp.data, c->resp.len, &h);
        if (rc == 0) return;
        if (rc < 0) {
            np_reply_simple(c, 502, "Bad Gateway", "text/plain", NULL, "upstream failure");
            return;
        }
        struct buf out;
        buf_init(&out);
        bool interim = h.status >= 100 && h.status < 200 && h.status != 101;
        if (interim)
            buf_append(&out, c->resp.data, (size_t)rc);
        else
            np_http_response_head(&h, &out);
        np_send(c, false, out.data, out.len);
        buf_free(&out);
        size_t rest = c->resp.len - (size_t)rc;
        memmove(c->resp.data, c->resp.data + rc, rest);
        c->resp.len = rest;
        if (interim) continue;
        c->mode_up = NP_MODE_RAW;
        if (h.status == 101 && c->upgrade) {
            c->mode = NP_MODE_RAW;
            c->down_wanted = true;
            forward_pending_in(c);
            if (c->down_paused || !c->reading_down) {
                c->down_paused = false;
                c->reading_down = true;
                np_down_read_start(c);
            }
        }
        if (c->resp.len) {
            char *d = xmemdup(c->resp.data, c->resp.len);
            size_t len = c->resp.len;
            buf_reset(&c->resp);
            relay_bytes(c, false, d, len);
        }
        return;
    }
}

/* What the upstream sent: n bytes in base (a pool buffer, taken), or n < 0 for its
 * EOF (UV_EOF) or an error (np_conn.c reads it). */
static void up_input(struct np_client *c, char *base, ssize_t n)
{
    if (n > 0) {
        if (np_mitm_active(c, true)) {
            np_tls_input(c, true, base, (size_t)n);
            np_buf_put(base);
        } else if (c->mode_up == NP_MODE_RAW) {
            np_relay_buf(c, false, base, (size_t)n, true); /* the fast path: no copy */
        } else {
            np_from_upstream(c, xmemdup(base, (size_t)n), (size_t)n);
            np_buf_put(base);
        }
        return;
    }
    np_buf_put(base);
    if (n == 0) return;
    uv_read_stop((uv_stream_t *)c->up);
    c->up_eof = true;
    if (n != UV_EOF) {
        np_client_close(c);
        return;
    }
    if (c->mode_up != NP_MODE_RAW && c->kind == NP_KIND_HTTP && !c->is_connect) {
        /* closed before a whole response head */
        np_reply_simple(c, 502, "Bad Gateway", "text/plain", NULL, "upstream failure");
        return;
    }
    if (c->is_forward) {
        np_finish(c);
        return;
    }
    if (np_mitm_active(c, false)) {
        np_mitm_close_notify(c, false);
        np_tls_flush(c);
    }
    np_shutdown_side(c, false);
    if (c->down_eof) c->finish_on_shutdown = true;
}

/* The upstream connection is up: answer the client and start relaying (through an
 * upstream proxy: first its CONNECT, or the request in absolute form). */
static void upstream_ready(struct np_client *c)
{
    c->up->data = c;
    if (c->via_upstream && (c->kind == NP_KIND_SOCKS || c->is_connect)) {
        char req[2 * NP_HOST_MAX + 96];
        bool v6 = strchr(c->host, ':') != NULL;
        int n = snprintf(req, sizeof req, "CONNECT %s%s%s:%u HTTP/1.1\r\nhost: %s%s%s:%u\r\n\r\n",
                         v6 ? "[" : "", c->host, v6 ? "]" : "", c->port, v6 ? "[" : "", c->host,
                         v6 ? "]" : "", c->port);
        np_write_copy(c, true, req, (size_t)n);
        c->mode_up = NP_MODE_UPCONNECT;
        np_up_read_start(c);
        return;
    }
    if (c->via_upstream && c->head_out.len) {
        /* absolute-form for the upstream proxy: "GET http://host:port/path ..." */
        char *sp = memchr(c->head_out.data, ' ', c->head_out.len);
        if (sp) {
            struct buf h;
            buf_init(&h);
            bool v6 = strchr(c->host, ':') != NULL;
            buf_append(&h, c->head_out.data, (size_t)(sp - c->head_out.data) + 1);
            buf_printf(&h, "http://%s%s%s:%u", v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
            buf_append(&h, sp + 1, c->head_out.len - (size_t)(sp - c->head_out.data) - 1);
            buf_free(&c->head_out);
            c->head_out = h;
        }
    }
    tunnel_ready(c);
}

static void tunnel_ready(struct np_client *c)
{
    if (c->kind == NP_KIND_SOCKS) {
        struct sockaddr_storage ss;
        int len = sizeof ss;
        uv_tcp_getsockname(c->up, (struct sockaddr *)&ss, &len);
        uint8_t r[32];
        size_t n = np_socks_reply(r, NP_SOCKS_OK, (struct sockaddr *)&ss);
        np_write_copy(c, false, r, n);
        c->mode = c->mode_up = NP_MODE_RAW;
    } else if (c->is_connect) {
        char date[64];
        np_http_date(date, sizeof date);
        char head[128];
        int hn = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\ndate: %s\r\n\r\n", date);
        np_write_copy(c, false, head, (size_t)hn);
        c->mode = c->mode_up = NP_MODE_RAW;
        if (np_interception_wanted(c)) {
            if (np_mitm_start(c) < 0) {
                np_client_close(c);
                return;
            }
            np_tls_flush(c); /* the ClientHello */
            if (c->in.len) {
                /* the client's ClientHello may have come right behind its CONNECT */
                char *d = xmemdup(c->in.data, c->in.len);
                size_t n = c->in.len;
                buf_reset(&c->in);
                np_tls_input(c, false, d, n);
                free(d);
            }
        }
    } else {
        np_write_owned(c, true, c->head_out.data, c->head_out.len);
        buf_init(&c->head_out);
        c->mode = c->body.done ? (c->upgrade ? NP_MODE_HOLD : NP_MODE_DISCARD) : NP_MODE_HTTP_BODY;
        c->mode_up = NP_MODE_HEAD;
        c->is_forward = true;
    }
    c->down_wanted = c->mode != NP_MODE_DISCARD && c->mode != NP_MODE_HOLD;
    forward_pending_in(c);
    np_up_read_start(c);
    if (c->down_wanted && !c->reading_down && !c->down_eof) {
        c->reading_down = true;
        np_down_read_start(c);
    }
    if (c->down_eof && c->mode == NP_MODE_RAW) np_shutdown_side(c, true);
}

/* The request inside the tunnel: its head once, then its body. Takes data
 * (malloc'd). */
static void inner_plain(struct np_client *c, char *data, size_t n)
{
    if (c->inner_head) {
        np_from_client(c, data, n);
        return;
    }
    buf_append(&c->in, data, n);
    free(data);
    if (c->in.len > NP_HTTP_HEAD_MAX) {
        np_client_close(c);
        return;
    }
    struct np_http_head h;
    int rc = np_http_parse_request(c->in.data, c->in.len, &h);
    if (rc == 0) return;
    c->inner_head = true;
    static const char bad[] =
        "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    if (rc < 0) {
        np_send(c, false, bad, sizeof bad - 1);
        np_finish(c);
        return;
    }
    struct np_http_target t;
    const char *why;
    char tunnel_host[NP_HOST_MAX];
    snprintf(tunnel_host, sizeof tunnel_host, "%s", c->host);
    if (np_http_target(&h, c->mitm_port, &t, &why) < 0 || t.scheme[0] ||
        strcmp(t.host, tunnel_host) != 0 || t.port != c->mitm_port) {
        /* the request must be for the host the tunnel was allowed to */
        np_send(c, false, bad, sizeof bad - 1);
        np_finish(c);
        return;
    }
    snprintf(c->method, sizeof c->method, "%.*s", (int)(h.method_len < 23 ? h.method_len : 23),
             h.method);
    c->is_connect = false; /* from here on an ordinary request, refused as one */
    if (c->np->params.limited && !np_method_allowed_limited(c->method)) {
        np_refuse(c, "non_domain", "deny", "mode_guard", "method_not_allowed");
        return;
    }
    if (np_body_init(&c->body, &h) < 0) {
        np_send(c, false, bad, sizeof bad - 1);
        np_finish(c);
        return;
    }
    c->upgrade = false;
    free(c->forward_path);
    c->forward_path = xstrndup(t.path, t.path_len);
    struct buf head;
    buf_init(&head);
    np_http_forward_head(&h, &t, np_cred_rewrite_fn(c), c, &head);
    np_send(c, true, head.data, head.len);
    if (head.data) explicit_bzero(head.data, head.len);
    buf_free(&head);
    c->is_forward = true;
    c->mode_up = NP_MODE_HEAD;
    c->mode = c->body.done ? NP_MODE_DISCARD : NP_MODE_HTTP_BODY;
    size_t rest = c->in.len - (size_t)rc;
    char *d = rest ? xmemdup(c->in.data + rc, rest) : NULL;
    buf_reset(&c->in);
    if (d) np_from_client(c, d, rest);
}

/* Ciphertext from a side of an intercepted tunnel: through its TLS session (which
 * holds no socket: what it has to send is written here), then its plaintext on into
 * the HTTP path. The server's close_notify ends a forwarded response; any other end
 * or failure of TLS closes the connection. */
void np_tls_input(struct np_client *c, bool from_up, const char *data, size_t n)
{
    struct buf plain;
    buf_init(&plain);
    int rc = np_mitm_feed(c, from_up, data, n, &plain);
    np_tls_flush(c);
    if (plain.len && !c->closed && c->mitm) {
        char *d = plain.data; /* taken by what it goes to */
        size_t len = plain.len;
        buf_init(&plain);
        if (from_up)
            np_from_upstream(c, d, len);
        else
            inner_plain(c, d, len);
    }
    buf_free(&plain);
    if (rc == 0 || c->closed || c->finishing) return;
    if (rc == -ESHUTDOWN && from_up && c->is_forward)
        np_finish(c);
    else
        np_client_close(c);
}
