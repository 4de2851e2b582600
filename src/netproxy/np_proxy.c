/* np_proxy: the policy proxy of one managed-network process, on the event loop
 * (see netproxy.h for the life cycle and np_policy.h for the policy): its listeners,
 * the connections handed in by fd (a sandboxed child's init) and the transparent TCP
 * ones (np_tun.c), each made a proxied connection (np_conn.c) whose bytes go to
 * np_request.c; its release.
 *
 * A proxied connection goes through: the request (np_request.c: an HTTP head, or the
 * SOCKS5 greeting and request) -> the decision (np_decision.c: baseline policy,
 * perhaps the client's answer to the policy question) -> the local-address check and
 * the limited-mode guard, the upstream connection and the relay (np_relay.c). Nothing
 * blocks: names are resolved with uv_getaddrinfo (libuv's thread pool), sockets are
 * libuv streams. Each file calls only files below it: what comes back up (bytes read,
 * a write queue drained, a transparent connection accepted) arrives through the
 * function its owner handed down, as libuv's callbacks do. */
#include "netproxy/netproxy.h"
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/own_ports.h"
#include "util/fdframe.h"
#include "util/mem.h"

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

static void client_start(struct netproxy *np, enum np_kind kind, uv_tcp_t *accepted_from, int fd);

static void handle_closed(uv_handle_t *h)
{
    struct netproxy *np = h->data;
    free(h);
    np_proxy_unhold(np);
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
    np->params = *p;
    p->domains = p->providers = p->review = NULL; /* taken */
    if (client) np->client = *client;
    np->process_id = xstrdup(process_id);
    np->clients.next = np->clients.prev = &np->clients;
    np_budget_init(&np->budget, np_budget_all(), NP_BUDGET_BYTES, NP_BUDGET_FLOWS);
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

/* A connection refused for the flow budget: said once per proxy. */
static void budget_refused(struct netproxy *np)
{
    if (np->budget_told) return;
    np->budget_told = true;
    const struct np_budget *all = np_budget_all();
    char idv[160];
    log_warn("network proxy for process %s: refusing connections past the flow budget "
             "(%u open of %u for this process, %u of %u in all)",
             log_value(np->process_id, idv, sizeof idv), np->budget.flows, np->budget.max_flows,
             all->flows, all->max_flows);
}

/* The transparent flow took what was queued towards the child below the low-water
 * mark: the upstream may be read again. */
static void tflow_drained(struct np_client *c)
{
    np_read_resume(c, true);
}

/* A transparent TCP connection the stack accepted (np_stack.c): decided as a SOCKS5
 * CONNECT to host:port would be, its client reported as peer. NULL when the proxy is
 * full (the stack resets the connection). */
static struct np_client *np_transparent_client(struct netproxy *np, struct np_tflow *f,
                                               const char *host, uint16_t port, const char *peer)
{
    if (np->released) return NULL;
    if (!np_budget_flow_room(&np->budget, 0)) {
        budget_refused(np);
        return NULL;
    }
    struct np_client *c = np_client_new(np, NP_KIND_SOCKS);
    c->tflow = f;
    np_client_ref(c); /* the flow's, like a socket handle's */
    c->down_input = np_down_input;
    np_tflow_bind(f, c, np_tflow_input, np_tflow_fits, tflow_drained, np_shutdown_done);
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
    if (!np_budget_flow_room(&np->budget, 0)) {
        /* over the flow budget: accept and close at once */
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
        budget_refused(np);
        return;
    }
    struct np_client *c = np_client_new(np, kind);
    uv_tcp_init(np->loop, &c->down);
    c->down.data = c;
    np_client_ref(c);
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
    c->down_input = np_down_input;
    np_down_read_start(c);
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
    np_proxy_unhold(np);
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
            np_tun_attach(s->np, fds, np_transparent_client);
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
    np_proxy_unhold(np);
}
