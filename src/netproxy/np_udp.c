/* np_udp: SOCKS5 UDP ASSOCIATE (RFC 1928 section 7) for proxies started with
 * enableSocks5Udp.
 *
 * The association is a relay socket on 127.0.0.1 that only the client may use (the
 * address its request named, or else the first sender from the control connection's
 * IP) and two outbound sockets (IPv4, IPv6). Each destination is decided once per
 * association, the way a TCP connection is (baseline policy, the client's decider,
 * the resolved addresses when local destinations are forbidden; limited mode refuses
 * UDP like SOCKS TCP), reported once as protocol socks5_udp, and remembered for the
 * association's life (at most 64 destinations); datagrams to a destination still
 * being decided wait (4 at most) and go out once it is allowed. Replies are relayed
 * back only from an allowed destination's address. The association ends with its
 * control connection. Fragmented datagrams are dropped (FRAG != 0). A sandboxed
 * child handing connections over by fd has no UDP path to this relay.
 *
 * The reference (0.169.0) decides every datagram anew and sent nothing back to the
 * client in our tests; deciding per destination is our choice (one notification,
 * one question per destination instead of one per datagram). */
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "util/mem.h"

#define UDP_MAX_DESTS 64
#define UDP_QUEUE 4
#define UDP_MAX 65536

enum dstate { D_PENDING, D_ALLOWED, D_DENIED };

struct np_udp;

struct udp_dest {
    struct np_udp *u;
    char host[NP_HOST_MAX];
    uint16_t port;
    enum dstate st;
    struct sockaddr_storage addr;
    bool check, by_decider;
    enum np_reason baseline;
    struct netproxy_ask *call; /* the policy question in flight */
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    bool gai_busy;
    char *q[UDP_QUEUE];
    size_t qn[UDP_QUEUE];
    int nq;
};

struct np_udp {
    struct np_client *c;
    uv_udp_t relay, out4, out6;
    bool have6;
    bool init_relay, init_out4, init_out6; /* initialised handles, to close */
    int refs;
    bool closing;
    struct sockaddr_storage client;
    bool client_known;
    struct sockaddr_storage peer; /* the control connection's peer */
    struct udp_dest *dests[UDP_MAX_DESTS];
    int ndests;
};

static void udp_unref(struct np_udp *u)
{
    if (--u->refs > 0) return;
    for (int i = 0; i < u->ndests; i++) {
        for (int k = 0; k < u->dests[i]->nq; k++)
            free(u->dests[i]->q[k]);
        free(u->dests[i]);
    }
    free(u);
}

static void handle_closed(uv_handle_t *h)
{
    udp_unref(h->data);
}

static void dest_timer_closed(uv_handle_t *h)
{
    struct udp_dest *d = h->data;
    udp_unref(d->u);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b, bool port)
{
    if (a->ss_family != b->sa_family) return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a, *y = (const void *)b;
        return x->sin_addr.s_addr == y->sin_addr.s_addr && (!port || x->sin_port == y->sin_port);
    }
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a, *y = (const void *)b;
    return memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 && (!port || x->sin6_port == y->sin6_port);
}

static void send_out(struct udp_dest *d, const char *data, size_t n)
{
    struct np_udp *u = d->u;
    uv_udp_t *s = d->addr.ss_family == AF_INET6 ? (u->have6 ? &u->out6 : NULL) : &u->out4;
    if (!s) return;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)n);
    uv_udp_try_send(s, &b, 1, (struct sockaddr *)&d->addr); /* UDP: a full buffer drops */
}

static void report(struct udp_dest *d, const char *scope, const char *decision, const char *source,
                   const char *reason, bool override)
{
    struct np_client *c = d->u->c;
    np_report(c->np, scope, decision, source, reason, "socks5_udp", d->host, d->port, NULL, c->peer,
              override);
}

static void deny(struct udp_dest *d, const char *scope, const char *decision, const char *source,
                 const char *reason)
{
    d->st = D_DENIED;
    for (int k = 0; k < d->nq; k++)
        free(d->q[k]);
    d->nq = 0;
    report(d, scope, decision, source, reason, false);
}

static void allow(struct udp_dest *d)
{
    if (d->check && np_addr_non_public((struct sockaddr *)&d->addr)) {
        deny(d, "domain", "deny", "baseline_policy", "not_allowed_local");
        return;
    }
    d->st = D_ALLOWED;
    report(d, "domain", "allow", d->by_decider ? "decider" : "baseline_policy",
           d->by_decider ? np_reason_name(d->baseline) : "allow", d->by_decider);
    for (int k = 0; k < d->nq; k++) {
        send_out(d, d->q[k], d->qn[k]);
        free(d->q[k]);
    }
    d->nq = 0;
}

static void on_gai(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct udp_dest *d = req->data;
    d->gai_busy = false;
    if (!d->u->closing) {
        struct addrinfo *a = res;
        while (a && a->ai_family != AF_INET && a->ai_family != AF_INET6)
            a = a->ai_next;
        if (status < 0 || !a) {
            d->st = D_DENIED; /* nowhere to send: dropped like an unreachable host */
            for (int k = 0; k < d->nq; k++)
                free(d->q[k]);
            d->nq = 0;
        } else {
            memcpy(&d->addr, a->ai_addr, a->ai_addrlen);
            allow(d);
        }
    }
    uv_freeaddrinfo(res);
    udp_unref(d->u);
}

static void resolve_then_allow(struct udp_dest *d, bool by_decider)
{
    d->by_decider = by_decider;
    if (np_resolve_now(d->host, d->port, &d->addr)) {
        allow(d);
        return;
    }
    d->gai.data = d;
    d->u->refs++;
    if (np_resolve_start(d->u->c->np->loop, &d->gai, on_gai, d->host, d->port, SOCK_DGRAM) < 0) {
        udp_unref(d->u);
        deny(d, "domain", "deny", "baseline_policy", "not_allowed");
        return;
    }
    d->gai_busy = true;
}

static void on_answer(void *ctx, enum netproxy_answer answer, const char *reason)
{
    struct udp_dest *d = ctx;
    d->call = NULL;
    uv_timer_stop(&d->timer);
    if (answer == NETPROXY_ALLOW)
        resolve_then_allow(d, true);
    else if (answer == NETPROXY_DENY || answer == NETPROXY_ASK)
        deny(d, "domain", answer == NETPROXY_ASK ? "ask" : "deny", "decider", reason);
    else
        deny(d, "domain", "deny", "decider", "not_allowed");
}

static void on_timeout(uv_timer_t *t)
{
    struct udp_dest *d = t->data;
    np_ask_cancel(d->u->c->np, d->call);
    d->call = NULL;
    deny(d, "domain", "deny", "decider", "not_allowed");
}

static void decide(struct udp_dest *d)
{
    struct netproxy *np = d->u->c->np;
    if (np->params.limited) {
        deny(d, "non_domain", "deny", "mode_guard", "method_not_allowed");
        return;
    }
    bool check = false;
    d->baseline = np_policy_baseline(&np->policy, d->host, &check);
    d->check = check;
    if (d->baseline == NP_REASON_ALLOW) {
        resolve_then_allow(d, false);
        return;
    }
    if (d->baseline != NP_REASON_NOT_ALLOWED) {
        deny(d, "domain", "deny", "baseline_policy", np_reason_name(d->baseline));
        return;
    }
    if (!np->params.has_timeout) {
        deny(d, "domain", "deny", "baseline_policy", "not_allowed");
        return;
    }
    d->call = np_ask(np, "socks5_udp", d->host, d->port, on_answer, d);
    if (!d->call) {
        deny(d, "domain", "deny", "decider", "not_allowed");
        return;
    }
    uv_timer_start(&d->timer, on_timeout, np->params.timeout_ms, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    b->base = xmalloc(UDP_MAX);
    b->len = UDP_MAX;
}

/* A datagram from the client: header, destination, decision, out. */
static void on_relay(uv_udp_t *h, ssize_t n, const uv_buf_t *b, const struct sockaddr *from,
                     unsigned flags)
{
    struct np_udp *u = h->data;
    (void)flags;
    if (n <= 0 || !from || u->closing) goto out;
    if (u->client_known) {
        if (!same_addr(&u->client, from, true)) goto out;
    } else {
        if (!same_addr(&u->peer, from, false)) goto out; /* only the control peer's host */
        memcpy(&u->client, from,
               from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in));
        u->client_known = true;
    }
    struct np_socks_addr a;
    size_t at = 0;
    if (np_socks_udp_parse((const uint8_t *)b->base, (size_t)n, &a, &at) < 0) goto out;
    struct udp_dest *d = NULL;
    for (int i = 0; i < u->ndests; i++)
        if (u->dests[i]->port == a.port && strcmp(u->dests[i]->host, a.host) == 0) d = u->dests[i];
    if (!d) {
        if (u->ndests == UDP_MAX_DESTS) goto out;
        d = xcalloc(1, sizeof *d);
        d->u = u;
        snprintf(d->host, sizeof d->host, "%s", a.host);
        d->port = a.port;
        d->st = D_PENDING;
        uv_timer_init(u->c->np->loop, &d->timer);
        d->timer.data = d;
        u->refs++;
        u->dests[u->ndests++] = d;
        if (d->nq < UDP_QUEUE) {
            d->q[d->nq] = xmemdup(b->base + at, (size_t)n - at);
            d->qn[d->nq++] = (size_t)n - at;
        }
        decide(d);
        goto out;
    }
    if (d->st == D_ALLOWED) {
        send_out(d, b->base + at, (size_t)n - at);
    } else if (d->st == D_PENDING && d->nq < UDP_QUEUE) {
        d->q[d->nq] = xmemdup(b->base + at, (size_t)n - at);
        d->qn[d->nq++] = (size_t)n - at;
    }
out:
    free(b->base);
}

/* A datagram from outside: relayed to the client only from an allowed destination. */
static void on_out(uv_udp_t *h, ssize_t n, const uv_buf_t *b, const struct sockaddr *from,
                   unsigned flags)
{
    struct np_udp *u = h->data;
    (void)flags;
    if (n <= 0 || !from || u->closing || !u->client_known) goto out;
    bool ok = false;
    for (int i = 0; i < u->ndests && !ok; i++)
        ok = u->dests[i]->st == D_ALLOWED && same_addr(&u->dests[i]->addr, from, true);
    if (!ok) goto out;
    uint8_t hdr[32];
    size_t hl = np_socks_udp_header(hdr, from);
    uv_buf_t parts[2] = {uv_buf_init((char *)hdr, (unsigned)hl), uv_buf_init(b->base, (unsigned)n)};
    uv_udp_try_send(&u->relay, parts, 2, (struct sockaddr *)&u->client);
out:
    free(b->base);
}

static int open_udp(uv_loop_t *loop, uv_udp_t *h, bool *inited, const char *ip, struct np_udp *u,
                    uv_udp_recv_cb cb)
{
    uv_udp_init(loop, h);
    *inited = true;
    h->data = u;
    u->refs++;
    struct sockaddr_storage ss;
    if (strchr(ip, ':'))
        uv_ip6_addr(ip, 0, (struct sockaddr_in6 *)&ss);
    else
        uv_ip4_addr(ip, 0, (struct sockaddr_in *)&ss);
    int rc = uv_udp_bind(h, (struct sockaddr *)&ss, 0);
    if (rc == 0) rc = uv_udp_recv_start(h, on_alloc, cb);
    return rc;
}

int np_udp_start(struct np_client *c, const struct np_socks_addr *client_addr, uint8_t reply[32],
                 size_t *reply_len)
{
    struct np_udp *u = xcalloc(1, sizeof *u);
    u->c = c;
    u->refs = 1;
    c->udp = u;
    c->protocol = "socks5_udp";
    uv_loop_t *loop = c->np->loop;
    int len = sizeof u->peer;
    uv_tcp_getpeername(&c->down, (struct sockaddr *)&u->peer, &len);
    /* a client that named its address (not 0.0.0.0:0) is held to it */
    struct sockaddr_storage named;
    if (client_addr->port && np_resolve_now(client_addr->host, client_addr->port, &named) &&
        !(named.ss_family == AF_INET &&
          ((struct sockaddr_in *)&named)->sin_addr.s_addr == htonl(INADDR_ANY))) {
        u->client = named;
        u->client_known = true;
    }
    int rc = open_udp(loop, &u->relay, &u->init_relay, "127.0.0.1", u, on_relay);
    if (rc == 0) rc = open_udp(loop, &u->out4, &u->init_out4, "0.0.0.0", u, on_out);
    u->have6 = rc == 0 && open_udp(loop, &u->out6, &u->init_out6, "::", u, on_out) == 0;
    if (rc < 0) {
        *reply_len = np_socks_reply(reply, NP_SOCKS_FAILURE, NULL);
        return rc;
    }
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    uv_udp_getsockname(&u->relay, (struct sockaddr *)&ss, &sl);
    *reply_len = np_socks_reply(reply, NP_SOCKS_OK, (struct sockaddr *)&ss);
    return 0;
}

void np_udp_close(struct np_client *c)
{
    struct np_udp *u = c->udp;
    if (!u) return;
    c->udp = NULL;
    u->closing = true;
    for (int i = 0; i < u->ndests; i++) {
        struct udp_dest *d = u->dests[i];
        np_ask_cancel(c->np, d->call);
        d->call = NULL;
        if (d->gai_busy) uv_cancel((uv_req_t *)&d->gai);
        uv_close((uv_handle_t *)&d->timer, dest_timer_closed);
    }
    if (u->init_relay) uv_close((uv_handle_t *)&u->relay, handle_closed);
    if (u->init_out4) uv_close((uv_handle_t *)&u->out4, handle_closed);
    if (u->init_out6) uv_close((uv_handle_t *)&u->out6, handle_closed);
    udp_unref(u);
}
