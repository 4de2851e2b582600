/* netproxy: the policy proxy of one managed-network process, on the event loop
 * (see netproxy.h for the life cycle and np_policy.h for the policy).
 *
 * A proxied connection (struct np_client) goes through: the request (an HTTP head,
 * or the SOCKS5 greeting and request) -> the decision (baseline policy, perhaps the
 * client's answer to a network/policyRequest, the resolved addresses when local
 * destinations are forbidden, the limited-mode guard) -> the upstream connection
 * (the addresses tried in order) -> the relay. Nothing blocks: names are resolved
 * with uv_getaddrinfo (libuv's thread pool), sockets are libuv streams.
 *
 * The relay passes each buffer libuv read on to the other socket's write queue
 * without copying it, and stops reading a side while the other side's queue is over
 * NP_HIGH_WATER (so a slow reader bounds the memory a connection holds). An HTTP
 * request that is not CONNECT is forwarded alone: its head without hop-by-hop
 * headers and with "Connection: close", then exactly its body (np_body), then
 * nothing more from the client; the response head gets "Connection: close" too, and
 * the rest of the response is relayed as is until the upstream closes. So a
 * connection carries one request the policy decided, never a second one piggy-backed
 * on it (limited mode could not see its method otherwise).
 *
 * A client structure is reference counted: one reference for being open, one per
 * open libuv handle and one per request in flight (resolution, connect, write,
 * shutdown); it is freed when the last goes, whatever order libuv reports in.
 *
 * Below this file: np_decision.c (the decision: the baseline policy, asking the
 * client, reporting, refusing),
 * np_resolve.c (names resolved at once), and the layers it runs on a connection,
 * TLS interception (np_mitm.c) and the SOCKS5 UDP relay (np_udp.c), which reach back
 * only through np->relay (np_internal.h). */
#include "netproxy/netproxy.h"
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/own_ports.h"
#include "netproxy/np_http.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"
#include "util/fdframe.h"
#include "util/mem.h"

#define NP_PENDING_IN_MAX (256u * 1024) /* client bytes held while deciding */
#define NP_MAX_CLIENTS 1024             /* proxied connections per proxy */

/* Used before their definitions: the upstream's readiness (from the connect path) and
 * the table of calls the layers below reach (at the end of the file). */
static void np_upstream_ready(struct np_client *c);
static const struct np_relay relay;

/* Read buffers are recycled: a fresh 64 KiB malloc per read came back from the kernel
 * as new pages every time (glibc trims the heap top after each free), which cost the
 * relay more CPU than the copying itself. A few dozen are kept (2 MiB at most). */
#define NP_POOL_MAX 32
static char *pool[NP_POOL_MAX];
static int pool_n;

static char *pool_get(void)
{
    return pool_n ? pool[--pool_n] : xmalloc(NP_READ_SIZE);
}

static void pool_put(char *p)
{
    if (!p) return;
    if (pool_n < NP_POOL_MAX)
        pool[pool_n++] = p;
    else
        free(p);
}

/* ---------------------------------------------------------------------------------- */
/* The client's side: a socket, or a transparent TCP flow (np_stack.c) */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_down_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void down_read_start(struct np_client *c)
{
    if (c->tflow)
        np_tflow_read(c->tflow, true);
    else
        uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read);
}

static void down_read_stop(struct np_client *c)
{
    if (c->tflow)
        np_tflow_read(c->tflow, false);
    else
        uv_read_stop((uv_stream_t *)&c->down);
}

/* Bytes written towards the client and not yet taken by it. */
static size_t down_queued(const struct np_client *c)
{
    return c->tflow ? np_tflow_queued(c->tflow)
                    : uv_stream_get_write_queue_size((const uv_stream_t *)&c->down);
}

/* ---------------------------------------------------------------------------------- */
/* Small helpers */

static void np_addr_text(const struct sockaddr *sa, char *out, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        port = ntohs(s4->sin_port);
        snprintf(out, n, "%s:%u", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        port = ntohs(s6->sin6_port);
        snprintf(out, n, "[%s]:%u", ip, port);
    } else {
        snprintf(out, n, "unknown");
    }
}

/* ---------------------------------------------------------------------------------- */
/* The proxy */

static void client_start(struct netproxy *np, enum np_kind kind, uv_tcp_t *accepted_from, int fd);

/* Drops one of the things the proxy waits for (a handle, a client, the release
 * itself); the last one after release frees it. */
static void proxy_unhold(struct netproxy *np)
{
    if (--np->handles > 0 || !np->released) return;
    np_mitm_free(np);
    np_cred_free(np->cred);
    np_policy_free(&np->policy);
    netproxy_params_free(&np->params);
    free(np->process_id);
    free(np);
}

static void handle_closed(uv_handle_t *h)
{
    struct netproxy *np = h->data;
    free(h);
    proxy_unhold(np);
}

static void on_listen_conn(uv_stream_t *server, int status)
{
    struct netproxy *np = server->data;
    if (status < 0 || np->released) return;
    enum np_kind kind = (uv_tcp_t *)server == np->socks_l ? NP_KIND_SOCKS : NP_KIND_HTTP;
    client_start(np, kind, (uv_tcp_t *)server, -1);
}

static int listen_on(struct netproxy *np, uv_tcp_t **out, uint16_t *port)
{
    uv_tcp_t *t = xcalloc(1, sizeof *t);
    uv_tcp_init(np->loop, t);
    t->data = np;
    np->handles++;
    *out = t;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    int rc = uv_tcp_bind(t, (const struct sockaddr *)&a, 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (rc == 0) rc = uv_tcp_getsockname(t, (struct sockaddr *)&ss, &len);
    if (rc < 0) return rc;
    /* Another sandbox with the network enabled may not use this one's proxy
     * (its credentials, its client's decisions): counted before it listens. */
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    own_ports_add(*port);
    return uv_listen((uv_stream_t *)t, 128, on_listen_conn);
}

int netproxy_start(uv_loop_t *loop, struct netproxy_params *p, const struct netproxy_client *client,
                   const char *process_id, struct netproxy **out, char *err, size_t n)
{
    np_resolve_load_overrides();
    struct netproxy *np = xcalloc(1, sizeof *np);
    np->loop = loop;
    np->relay = &relay;
    np->params = *p;
    p->domains = p->providers = p->review = NULL; /* taken */
    if (client) np->client = *client;
    np->process_id = xstrdup(process_id);
    np->clients.next = np->clients.prev = &np->clients;
    const char *k;
    json_t *v;
    char why[400];
    json_object_foreach(np->params.domains, k, v)
    {
        const char *s =
            json_is_string(v) ? json_string_value(v) : json_object_iter_key(json_object_iter(v));
        enum np_perm perm = s && strcmp(s, "allow") == 0  ? NP_PERM_ALLOW
                            : s && strcmp(s, "deny") == 0 ? NP_PERM_DENY
                                                          : NP_PERM_NONE;
        np_policy_add(&np->policy, k, perm, why, sizeof why); /* validated before */
    }
    size_t ri;
    json_array_foreach(np->params.review, ri, v)
        np_policy_add(&np->policy, json_string_value(v), NP_PERM_REVIEW, why, sizeof why);
    np->policy.allow_local_binding = np->params.allow_local_binding;
    if (np->params.allow_upstream_proxy) np_upstream_from_env(np);
    int rc = listen_on(np, &np->http_l, &np->http_port);
    if (rc == 0 && np->params.enable_socks5) rc = listen_on(np, &np->socks_l, &np->socks_port);
    if (rc < 0) {
        snprintf(err, n, "cannot listen for the network proxy: %s", uv_strerror(rc));
        netproxy_release(np);
        return rc;
    }
    if (np->params.credential_masking) {
        np->cred = np_cred_new(np->params.providers);
        rc = np_mitm_init(np, err, n);
        if (rc < 0) {
            netproxy_release(np);
            return rc;
        }
    }
    char idv[160];
    log_info("network proxy for process %s: http 127.0.0.1:%u%s%s mode %s",
             log_value(process_id, idv, sizeof idv), np->http_port,
             np->socks_port ? ", socks5 127.0.0.1:" : "",
             np->socks_port ? (snprintf(why, sizeof why, "%u", np->socks_port), why) : "",
             np->params.limited ? "limited" : "full");
    *out = np;
    return 0;
}

void netproxy_ports(const struct netproxy *np, uint16_t *http_port, uint16_t *socks_port)
{
    if (http_port) *http_port = np->http_port;
    if (socks_port) *socks_port = np->socks_port;
}

/* ---------------------------------------------------------------------------------- */
/* Clients: life cycle */

static void client_ref(struct np_client *c)
{
    c->refs++;
}

static void client_unref(struct np_client *c)
{
    if (--c->refs > 0) return;
    struct netproxy *np = c->np;
    buf_free(&c->in);
    buf_free(&c->head_out);
    buf_free(&c->resp);
    free(c->forward_path);
    np_mitm_client_free(c);
    free(c);
    proxy_unhold(np);
}

static void on_client_handle_closed(uv_handle_t *h)
{
    struct np_client *c = h->data;
    if (h != (uv_handle_t *)&c->down && h != (uv_handle_t *)&c->timer) free(h);
    client_unref(c);
}

/* Ends the client: closes its sockets, drops a pending policy request and a pending
 * resolution (their callbacks see `closed`). Idempotent. */
static void np_client_close(struct np_client *c)
{
    if (c->closed) return;
    c->closed = true;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->np->n_clients--;
    if (c->call) {
        np_ask_cancel(c->np, c->call);
        c->call = NULL;
        c->np->n_asks--;
    }
    if (c->gai_busy) uv_cancel((uv_req_t *)&c->gai);
    if (c->tflow) {
        np_tflow_close(c->tflow); /* gracefully once its FIN is queued, else a reset */
        c->tflow = NULL;
        client_unref(c); /* the flow's reference */
    } else {
        uv_close((uv_handle_t *)&c->down, on_client_handle_closed);
    }
    uv_close((uv_handle_t *)&c->timer, on_client_handle_closed);
    if (c->up) uv_close((uv_handle_t *)c->up, on_client_handle_closed);
    c->up = NULL;
    np_udp_close(c);
    client_unref(c);
}

/* ---------------------------------------------------------------------------------- */
/* Writing */

struct np_wreq {
    uv_write_t w;
    struct np_client *c;
    bool to_up;
    bool pooled; /* data is a read buffer, back to the pool when written */
    char *data;
};

static void read_resume(struct np_client *c, bool up_side);

static void on_written(uv_write_t *w, int status)
{
    struct np_wreq *r = (struct np_wreq *)w;
    struct np_client *c = r->c;
    if (r->pooled)
        pool_put(r->data);
    else
        free(r->data);
    free(r);
    if (status < 0 && status != UV_ECANCELED) {
        np_client_close(c);
    } else if (!c->closed) {
        /* the side we wrote to may have drained: the other side may read again */
        read_resume(c, false);
        read_resume(c, true);
    }
    client_unref(c);
}

static void write_buf(struct np_client *c, bool to_up, char *data, size_t len, bool pooled)
{
    if (!to_up && c->tflow && !c->closed && len) {
        np_tflow_write(c->tflow, data, len, pooled); /* takes the buffer */
        return;
    }
    uv_stream_t *s = to_up ? (uv_stream_t *)c->up : (uv_stream_t *)&c->down;
    if (c->closed || !s || len == 0) {
        if (pooled)
            pool_put(data);
        else
            free(data);
        return;
    }
    struct np_wreq *r = xmalloc(sizeof *r);
    r->c = c;
    r->to_up = to_up;
    r->pooled = pooled;
    r->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    client_ref(c);
    int rc = uv_write(&r->w, s, &b, 1, on_written);
    if (rc < 0) {
        if (pooled)
            pool_put(data);
        else
            free(data);
        free(r);
        client_unref(c);
        np_client_close(c);
    }
}

/* Queues data (taking ownership of the malloc'd block) on the client side (to_up
 * false) or the upstream side. */
static void np_write_owned(struct np_client *c, bool to_up, char *data, size_t len)
{
    write_buf(c, to_up, data, len, false);
}

static void np_write_copy(struct np_client *c, bool to_up, const void *data, size_t len)
{
    if (!len) return;
    np_write_owned(c, to_up, xmemdup(data, len), len);
}

/* Plaintext towards a side: through its TLS session when the connection is
 * intercepted, as is otherwise. */
static void np_send(struct np_client *c, bool to_up, const void *data, size_t len)
{
    if (np_mitm_active(c, to_up))
        np_mitm_send(c, to_up, data, len);
    else
        np_write_copy(c, to_up, data, len);
}

/* A side's half-close is done (its queue written): the connection ends when it was
 * finishing or both sides are at EOF. Drops the reference shutdown_side took. */
static void np_shutdown_done(struct np_client *c)
{
    if (!c->closed && (c->finish_on_shutdown || (c->down_eof && c->up_eof))) np_client_close(c);
    client_unref(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct np_client *c = req->data;
    free(req);
    np_shutdown_done(c);
}

/* Half-closes the write side towards `to_up` once its queue is written. */
static void shutdown_side(struct np_client *c, bool to_up)
{
    if (!to_up && c->tflow && !c->closed) {
        client_ref(c);
        np_tflow_shutdown(c->tflow); /* np_shutdown_done once the FIN is queued */
        return;
    }
    uv_stream_t *s = to_up ? (uv_stream_t *)c->up : (uv_stream_t *)&c->down;
    if (!s || c->closed) return;
    uv_shutdown_t *req = xmalloc(sizeof *req);
    req->data = c;
    client_ref(c);
    if (uv_shutdown(req, s, on_shutdown) < 0) {
        free(req);
        client_unref(c);
        np_client_close(c);
    }
}

/* Sends the last bytes to the client, then ends the connection. */
static void np_finish(struct np_client *c)
{
    if (c->closed || c->finishing) return;
    c->finishing = true;
    c->finish_on_shutdown = true;
    down_read_stop(c);
    if (c->up) uv_read_stop((uv_stream_t *)c->up);
    if (np_mitm_active(c, false)) np_mitm_close_notify(c);
    shutdown_side(c, false);
}

/* ---------------------------------------------------------------------------------- */
/* Resolution and the upstream connection */

static void connect_next(struct np_client *c);
static void resolve(struct np_client *c);
static void tunnel_ready(struct np_client *c);

static void upstream_failed(struct np_client *c, int err)
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

/* allowUpstreamProxy: whether this connection goes through the server's upstream
 * proxy. Loopback destinations never do; other non-public ones only with
 * --proxy-private-ips-via-upstream; a name the proxy could not resolve does (the
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
    resolve(c);
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
        upstream_failed(c, UV_ECONNREFUSED);
        return;
    }
    c->via_upstream = true;
    c->check_resolved = false; /* the destination was checked; the proxy is not it */
    snprintf(c->conn_host, sizeof c->conn_host, "%s", ep->host);
    c->conn_port = ep->port;
    c->have_addrs = false;
    c->resolve_err = 0;
    resolve(c);
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
        upstream_failed(c, c->resolve_err);
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
    client_unref(c);
}

/* Resolves c->host: an IP literal or a test override at once, a name on the
 * thread pool. */
static void resolve(struct np_client *c)
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
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char port[8];
    snprintf(port, sizeof port, "%u", c->conn_port);
    c->gai.data = c;
    client_ref(c);
    int rc = uv_getaddrinfo(c->np->loop, &c->gai, on_gai, c->conn_host, port, &hints);
    if (rc < 0) {
        client_unref(c);
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
        client_unref(c);
        return;
    }
    if (status < 0) {
        c->last_err = status;
        uv_close((uv_handle_t *)c->up, on_client_handle_closed); /* unrefs */
        c->up = NULL;
        c->addr_i++;
        connect_next(c);
        client_unref(c);
        return;
    }
    np_upstream_ready(c);
    client_unref(c);
}

static void connect_next(struct np_client *c)
{
    if (c->addr_i >= c->naddrs) {
        upstream_failed(c, c->last_err ? c->last_err : UV_ECONNREFUSED);
        return;
    }
    c->up = xcalloc(1, sizeof *c->up);
    uv_tcp_init(c->np->loop, c->up);
    c->up->data = c;
    client_ref(c); /* the handle */
    uv_tcp_nodelay(c->up, 1);
    uv_connect_t *req = xmalloc(sizeof *req);
    req->data = c;
    client_ref(c);
    int rc = uv_tcp_connect(req, c->up, (struct sockaddr *)&c->addrs[c->addr_i], on_connected);
    if (rc < 0) {
        free(req);
        client_unref(c);
        c->last_err = rc;
        uv_close((uv_handle_t *)c->up, on_client_handle_closed);
        c->up = NULL;
        c->addr_i++;
        connect_next(c);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Reading */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    b->base = pool_get();
    b->len = NP_READ_SIZE;
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void read_resume(struct np_client *c, bool up_side)
{
    if (c->closed || c->finishing) return;
    if (up_side) {
        if (!c->up || !c->up_paused || c->up_eof) return;
        if (down_queued(c) > NP_LOW_WATER) return;
        c->up_paused = false;
        uv_read_start((uv_stream_t *)c->up, on_alloc, on_up_read);
    } else {
        if (!c->down_paused || c->down_eof || !c->down_wanted) return;
        if (c->up && uv_stream_get_write_queue_size((uv_stream_t *)c->up) > NP_LOW_WATER) return;
        c->down_paused = false;
        down_read_start(c);
    }
}

/* Forwards n bytes read from one side to the other (raw relay), taking the buffer
 * (a read buffer from the pool when pooled, else a malloc'd one). */
static void relay_buf(struct np_client *c, bool to_up, char *data, size_t n, bool pooled)
{
    if (np_mitm_active(c, to_up)) {
        np_mitm_send(c, to_up, data, n);
        if (pooled)
            pool_put(data);
        else
            free(data);
    } else {
        write_buf(c, to_up, data, n, pooled);
    }
    size_t queued = c->closed ? 0
                    : !to_up  ? down_queued(c)
                    : c->up   ? uv_stream_get_write_queue_size((uv_stream_t *)c->up)
                              : 0;
    if (queued > NP_HIGH_WATER) {
        if (to_up) {
            down_read_stop(c);
            c->down_paused = true;
        } else if (c->up) {
            uv_read_stop((uv_stream_t *)c->up);
            c->up_paused = true;
        }
    }
}

static void relay_bytes(struct np_client *c, bool to_up, char *data, size_t n)
{
    relay_buf(c, to_up, data, n, false);
}

/* Client bytes (plaintext) once the upstream is connected. */
static void np_from_client(struct np_client *c, char *data, size_t n)
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
            down_read_stop(c);
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
            upstream_failed(c, UV_ECONNREFUSED);
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
                down_read_start(c);
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

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct np_client *c = s->data;
    if (n > 0) {
        if (np_mitm_active(c, true)) {
            np_mitm_feed(c, true, b->base, (size_t)n);
            pool_put(b->base);
        } else if (c->mode_up == NP_MODE_RAW) {
            relay_buf(c, false, b->base, (size_t)n, true); /* the fast path: no copy */
        } else {
            np_from_upstream(c, xmemdup(b->base, (size_t)n), (size_t)n);
            pool_put(b->base);
        }
        return;
    }
    pool_put(b->base);
    if (n == 0) return;
    uv_read_stop(s);
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
    if (np_mitm_active(c, false)) np_mitm_close_notify(c);
    shutdown_side(c, false);
    if (c->down_eof) c->finish_on_shutdown = true;
}

/* The upstream connection is up: answer the client and start relaying (through an
 * upstream proxy: first its CONNECT, or the request in absolute form). */
static void np_upstream_ready(struct np_client *c)
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
        uv_read_start((uv_stream_t *)c->up, on_alloc, on_up_read);
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
    uv_read_start((uv_stream_t *)c->up, on_alloc, on_up_read);
    if (c->down_wanted && !c->reading_down && !c->down_eof) {
        c->reading_down = true;
        down_read_start(c);
    }
    if (c->down_eof && c->mode == NP_MODE_RAW) shutdown_side(c, true);
}

/* ---------------------------------------------------------------------------------- */
/* The request: HTTP head or SOCKS5 */

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
        np_udp_start(c, &a);
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
static void np_down_input(struct np_client *c, char *base, ssize_t n)
{
    if (n > 0) {
        if (np_mitm_active(c, false)) {
            np_mitm_feed(c, false, base, (size_t)n);
            pool_put(base);
        } else if (c->stage == NP_STAGE_CONNECT && c->up && c->mode == NP_MODE_RAW) {
            relay_buf(c, true, base, (size_t)n, true);
        } else if (c->stage == NP_STAGE_CONNECT && c->up && c->mode != NP_MODE_NONE) {
            np_from_client(c, xmemdup(base, (size_t)n), (size_t)n);
            pool_put(base);
        } else {
            np_request_bytes(c, base, (size_t)n);
            pool_put(base);
        }
        return;
    }
    pool_put(base);
    if (n == 0 || c->closed) return;
    c->down_eof = true;
    c->reading_down = false;
    down_read_stop(c);
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
        if (np_mitm_active(c, true)) np_mitm_close_notify_up(c);
        shutdown_side(c, true);
        if (c->up_eof) c->finish_on_shutdown = true;
    } else if (c->mode == NP_MODE_HTTP_BODY) {
        np_client_close(c); /* the body was cut short */
    }
}

static void on_down_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    np_down_input(s->data, b->base, n);
}

/* A new client structure in the proxy's list (the caller sets its side up). */
static struct np_client *client_new(struct netproxy *np, enum np_kind kind)
{
    struct np_client *c = xcalloc(1, sizeof *c);
    c->np = np;
    c->kind = kind;
    c->refs = 1;
    buf_init(&c->in);
    buf_init(&c->head_out);
    buf_init(&c->resp);
    uv_timer_init(np->loop, &c->timer);
    c->timer.data = c;
    client_ref(c);
    np->handles++; /* the proxy waits for every client before it frees itself */
    c->next = &np->clients;
    c->prev = np->clients.prev;
    np->clients.prev->next = c;
    np->clients.prev = c;
    np->n_clients++;
    return c;
}

/* A transparent TCP connection the stack accepted (np_stack.c): decided as a SOCKS5
 * CONNECT to host:port would be, its client reported as peer. NULL when the proxy is
 * full (the stack resets the connection). */
static struct np_client *np_transparent_client(struct netproxy *np, struct np_tflow *f,
                                               const char *host, uint16_t port, const char *peer)
{
    if (np->released || np->n_clients >= NP_MAX_CLIENTS) {
        log_warn("network proxy: %d connections open; refusing another", NP_MAX_CLIENTS);
        return NULL;
    }
    struct np_client *c = client_new(np, NP_KIND_SOCKS);
    c->tflow = f;
    client_ref(c); /* the flow's, like a socket handle's */
    np_tflow_bind(f, c);
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    c->protocol = "socks5_tcp";
    c->down_wanted = true;
    c->reading_down = true;
    np_decide(c);
    return c;
}

static void client_start(struct netproxy *np, enum np_kind kind, uv_tcp_t *server, int fd)
{
    if (np->n_clients >= NP_MAX_CLIENTS) {
        /* over the bound: accept and close at once */
        if (server) {
            uv_tcp_t *tmp = xcalloc(1, sizeof *tmp);
            uv_tcp_init(np->loop, tmp);
            tmp->data = np;
            np->handles++;
            uv_accept((uv_stream_t *)server, (uv_stream_t *)tmp);
            uv_close((uv_handle_t *)tmp, handle_closed);
        } else if (fd >= 0) {
            close(fd);
        }
        log_warn("network proxy: %d connections open; refusing another", NP_MAX_CLIENTS);
        return;
    }
    struct np_client *c = client_new(np, kind);
    uv_tcp_init(np->loop, &c->down);
    c->down.data = c;
    client_ref(c);
    int rc = server ? uv_accept((uv_stream_t *)server, (uv_stream_t *)&c->down)
                    : uv_tcp_open(&c->down, fd);
    if (rc < 0) {
        if (fd >= 0) close(fd);
        np_client_close(c);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->down, (struct sockaddr *)&ss, &len) == 0)
        np_addr_text((struct sockaddr *)&ss, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "unknown");
    uv_tcp_nodelay(&c->down, 1);
    c->stage = kind == NP_KIND_SOCKS ? NP_STAGE_SOCKS_GREETING : NP_STAGE_HEAD;
    c->protocol = kind == NP_KIND_SOCKS ? "socks5_tcp" : "http";
    c->down_wanted = true;
    c->reading_down = true;
    uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read);
}

/* ---------------------------------------------------------------------------------- */
/* Connections handed in by fd (a sandboxed child's init) */

struct np_fdsrc {
    uv_poll_t poll;
    struct netproxy *np;
    int fd;
    struct np_fdsrc *next;
};

static void fdsrc_closed(uv_handle_t *h)
{
    struct np_fdsrc *s = h->data;
    close(s->fd);
    struct netproxy *np = s->np;
    free(s);
    proxy_unhold(np);
}

static void fdsrc_stop(struct np_fdsrc *s)
{
    struct netproxy *np = s->np;
    for (struct np_fdsrc **p = &np->fdsrcs; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    uv_close((uv_handle_t *)&s->poll, fdsrc_closed);
}

static void on_fdsrc(uv_poll_t *h, int status, int events)
{
    struct np_fdsrc *s = h->data;
    (void)events;
    if (status < 0) {
        fdsrc_stop(s);
        return;
    }
    for (int i = 0; i < 64; i++) {
        char tag = 0;
        int fds[FDFRAME_TAGGED_MAX], nfds = 0;
        int n = fdframe_recv_tagged(s->fd, MSG_DONTWAIT, &tag, fds, FDFRAME_TAGGED_MAX, &nfds);
        if (n == -EAGAIN || n == -EWOULDBLOCK) return;
        if (n <= 0) {
            fdsrc_stop(s);
            return;
        }
        if (tag == 'T' && nfds == 3) {
            /* transparent TCP: the TUN device and the resolver's two sockets */
            np_tun_attach(s->np, fds);
            continue;
        }
        /* else one socket per message, with a known tag */
        bool ok = nfds == 1 && (tag == 'H' || (tag == 'S' && s->np->socks_port));
        for (int k = ok ? 1 : 0; k < nfds; k++)
            close(fds[k]);
        if (!ok) continue;
        int fl = fcntl(fds[0], F_GETFL);
        if (fl >= 0) fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
        client_start(s->np, tag == 'S' ? NP_KIND_SOCKS : NP_KIND_HTTP, NULL, fds[0]);
    }
}

int netproxy_attach_fd_source(struct netproxy *np, int sockpair_fd)
{
    if (np->released) {
        close(sockpair_fd);
        return -EINVAL;
    }
    struct np_fdsrc *s = xcalloc(1, sizeof *s);
    s->np = np;
    s->fd = sockpair_fd;
    int fl = fcntl(sockpair_fd, F_GETFL);
    if (fl >= 0) fcntl(sockpair_fd, F_SETFL, fl | O_NONBLOCK);
    int rc = uv_poll_init(np->loop, &s->poll, sockpair_fd);
    if (rc < 0) {
        close(sockpair_fd);
        free(s);
        return rc;
    }
    s->poll.data = s;
    np->handles++;
    s->next = np->fdsrcs;
    np->fdsrcs = s;
    uv_poll_start(&s->poll, UV_READABLE | UV_DISCONNECT, on_fdsrc);
    return 0;
}

/* ---------------------------------------------------------------------------------- */

void netproxy_release(struct netproxy *np)
{
    if (!np || np->released) return;
    np->released = true;
    np->handles++; /* held while closing everything below */
    own_ports_remove(np->http_port);
    own_ports_remove(np->socks_port);
    if (np->http_l) uv_close((uv_handle_t *)np->http_l, handle_closed);
    if (np->socks_l) uv_close((uv_handle_t *)np->socks_l, handle_closed);
    np->http_l = np->socks_l = NULL;
    while (np->fdsrcs)
        fdsrc_stop(np->fdsrcs);
    while (np->clients.next != &np->clients)
        np_client_close(np->clients.next);
    np_tun_release(np);
    memset(&np->client, 0, sizeof np->client); /* nobody is asked or told any more */
    proxy_unhold(np);
}

/* The transparent flow took what was queued towards the child below the low-water
 * mark: the upstream may be read again. */
static void np_down_drained(struct np_client *c)
{
    read_resume(c, true);
}

/* A buffer write_buf handed over, back to where it came from. */
static void np_release_buf(char *data, bool pooled)
{
    if (pooled)
        pool_put(data);
    else
        free(data);
}

/* What the layers below reach of this file (np_internal.h). */
static const struct np_relay relay = {
    .close = np_client_close,
    .finish = np_finish,
    .send = np_send,
    .write_owned = np_write_owned,
    .write_copy = np_write_copy,
    .from_client = np_from_client,
    .from_upstream = np_from_upstream,
    .resolve = resolve,
    .down_input = np_down_input,
    .down_drained = np_down_drained,
    .shutdown_done = np_shutdown_done,
    .transparent_client = np_transparent_client,
    .get_buf = pool_get,
    .release_buf = np_release_buf,
};
