/* np_tun: one transparent-TCP sandbox on the server's side (PROTOCOL.md section
 * 5.11): the TUN device its init made (src/sandbox/tun.c) and the resolver sockets it
 * bound on 127.0.0.53:53, all three handed over on the proxy socket and served here
 * on the event loop until the process's proxy is released.
 *
 * Frames read from the device (a virtio header, then an IP packet; up to 64 KiB with
 * segmentation offload) go to the stack (np_stack.c), which writes its answers to the
 * device itself (struct np_stack_tun). The resolver answers over UDP and TCP from the sandbox's
 * synthetic names (np_dns.c), which the stack consults to decide a connection on the
 * name a program asked for. */
#include "netproxy/np_internal.h"
#include "netproxy/np_stack.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_net.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "netproxy/np_dns.h"
#include "util/mem.h"

#define VNET_HDR sizeof(struct virtio_net_hdr)
#define FRAME_MAX (VNET_HDR + 65535)
#define READS_PER_WAKE 64    /* frames taken per readiness, so the loop stays fair */
#define DNS_TCP_CONNS 16     /* resolver connections open at once, per sandbox */
#define DNS_TCP_MSG_MAX 512u /* a longer query over TCP ends its connection */
/* Answers queued towards a resolver client that does not read them: past this the
 * connection stops being read until they drain (a query of 21 bytes is answered with
 * a buffer of about 700, so reading on regardless let one sandbox grow the server by
 * a gigabyte in half a minute). */
#define DNS_TCP_QUEUE_MAX (16u * 1024)

struct dns_conn {
    uv_tcp_t h;
    struct np_tun *t;
    struct dns_conn *next;
    uint8_t in[2 + DNS_TCP_MSG_MAX];
    size_t have;
    bool paused; /* not read while its answers wait (DNS_TCP_QUEUE_MAX) */
};

struct np_tun {
    struct np_stack_tun st; /* what the stack knows of it: the proxy, the TUN device
                               (owned; closed at release), the names, the count */
    uv_poll_t poll;
    uv_udp_t udp; /* 127.0.0.53:53 in the sandbox */
    uv_tcp_t tcp; /* ... and its TCP listener */
    struct dns_conn *conns;
    int nconns;
    struct np_dns names;
    int handles; /* open handles; the structure goes with the last */
    bool released;
    uint8_t frame[FRAME_MAX];
    uint8_t dns_in[DNS_TCP_MSG_MAX];
};

static void tun_unhold(struct np_tun *t)
{
    if (--t->handles > 0 || !t->released) return;
    np_dns_free(&t->names);
    free(t);
}

static void on_tun_handle_closed(uv_handle_t *h)
{
    tun_unhold(h->data);
}

/* ---- the device ---------------------------------------------------------------------- */

static void on_tun_readable(uv_poll_t *h, int status, int events)
{
    struct np_tun *t = h->data;
    for (int i = 0; i < READS_PER_WAKE && status == 0 && !t->released; i++) {
        ssize_t n = read(t->st.fd, t->frame, sizeof t->frame);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n < 0) {
            status = -errno;
            break;
        }
        t->st.frames_in++;
        if ((size_t)n > VNET_HDR) np_stack_input(&t->st, t->frame + VNET_HDR, (size_t)n - VNET_HDR);
    }
    if (status < 0) {
        /* the sandbox's namespace is gone: nothing more will come */
        log_debug("transparent TCP: the TUN device failed: %s", uv_strerror(status));
        uv_poll_stop(h);
    }
}

/* ---- the resolver ------------------------------------------------------------------- */

static void dns_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct np_tun *t = h->data;
    *b = uv_buf_init((char *)t->dns_in, sizeof t->dns_in);
}

static void on_dns_udp(uv_udp_t *h, ssize_t n, const uv_buf_t *b, const struct sockaddr *from,
                       unsigned flags)
{
    struct np_tun *t = h->data;
    if (n <= 0 || !from || (flags & UV_UDP_PARTIAL)) return;
    uint8_t out[NP_DNS_MAX_REPLY];
    size_t len = np_dns_answer(&t->names, (const uint8_t *)b->base, (size_t)n, out);
    uv_buf_t reply = uv_buf_init((char *)out, (unsigned)len);
    if (len) (void)uv_udp_try_send(h, &reply, 1, from);
}

static void dns_conn_closed(uv_handle_t *h)
{
    struct dns_conn *c = h->data;
    struct np_tun *t = c->t;
    free(c);
    tun_unhold(t);
}

static void dns_conn_close(struct dns_conn *c)
{
    struct np_tun *t = c->t;
    for (struct dns_conn **pp = &t->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    t->nconns--;
    uv_close((uv_handle_t *)&c->h, dns_conn_closed);
}

static void dns_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct dns_conn *c = h->data;
    *b = uv_buf_init((char *)c->in + c->have, (unsigned)(sizeof c->in - c->have));
}

struct dns_write {
    uv_write_t w;
    uint8_t data[2 + NP_DNS_MAX_REPLY];
};

static void dns_conn_answer(struct dns_conn *c);
static void on_dns_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void dns_written(uv_write_t *w, int status)
{
    struct dns_conn *c = w->handle->data;
    free(w);
    if (status < 0 || !c->paused || uv_is_closing((uv_handle_t *)&c->h) ||
        uv_stream_get_write_queue_size((uv_stream_t *)&c->h) > DNS_TCP_QUEUE_MAX / 2)
        return;
    /* drained: the queries already read first, then the socket again */
    c->paused = false;
    dns_conn_answer(c);
    if (!c->paused && !uv_is_closing((uv_handle_t *)&c->h))
        uv_read_start((uv_stream_t *)&c->h, dns_conn_alloc, on_dns_conn_read);
}

/* Answers every whole message in c->in (2-byte length, then the query), until the
 * answers queued reach DNS_TCP_QUEUE_MAX: then reading stops (dns_written resumes). */
static void dns_conn_answer(struct dns_conn *c)
{
    for (;;) {
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->h) > DNS_TCP_QUEUE_MAX) {
            c->paused = true;
            uv_read_stop((uv_stream_t *)&c->h);
            return;
        }
        if (c->have < 2) return;
        size_t len = (size_t)c->in[0] << 8 | c->in[1];
        if (len > DNS_TCP_MSG_MAX) {
            dns_conn_close(c);
            return;
        }
        if (c->have < 2 + len) return;
        struct dns_write *w = xmalloc(sizeof *w);
        size_t r = np_dns_answer(&c->t->names, c->in + 2, len, w->data + 2);
        memmove(c->in, c->in + 2 + len, c->have - 2 - len);
        c->have -= 2 + len;
        if (!r) {
            free(w);
            continue;
        }
        w->data[0] = (uint8_t)(r >> 8);
        w->data[1] = (uint8_t)r;
        uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(r + 2));
        if (uv_write(&w->w, (uv_stream_t *)&c->h, &b, 1, dns_written) < 0) {
            free(w);
            dns_conn_close(c);
            return;
        }
    }
}

static void on_dns_conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct dns_conn *c = s->data;
    if (n < 0) {
        dns_conn_close(c);
        return;
    }
    c->have += (size_t)n;
    dns_conn_answer(c);
}

static void on_dns_conn(uv_stream_t *server, int status)
{
    struct np_tun *t = server->data;
    if (status < 0 || t->released) return;
    struct dns_conn *c = xcalloc(1, sizeof *c);
    c->t = t;
    uv_tcp_init(t->st.np->loop, &c->h);
    c->h.data = c;
    t->handles++;
    if (uv_accept(server, (uv_stream_t *)&c->h) < 0 || t->nconns >= DNS_TCP_CONNS) {
        uv_close((uv_handle_t *)&c->h, dns_conn_closed);
        return;
    }
    c->next = t->conns;
    t->conns = c;
    t->nconns++;
    uv_read_start((uv_stream_t *)&c->h, dns_conn_alloc, on_dns_conn_read);
}

/* ---- attach and release ---------------------------------------------------------------- */

/* Starts serving; the handles own the sockets from here on (also on failure, when
 * np_tun_release closes them). */
static int tun_serve(struct np_tun *t, const int fds[3])
{
    uv_loop_t *loop = t->st.np->loop;
    uv_udp_init(loop, &t->udp);
    t->udp.data = t;
    t->handles++;
    uv_tcp_init(loop, &t->tcp);
    t->tcp.data = t;
    t->handles++;
    int rc = uv_udp_open(&t->udp, fds[1]);
    if (rc < 0) close(fds[1]);
    int rc2 = uv_tcp_open(&t->tcp, fds[2]);
    if (rc2 < 0) close(fds[2]);
    if (rc < 0 || rc2 < 0) return rc < 0 ? rc : rc2;
    int fl = fcntl(t->st.fd, F_GETFL);
    if (fl < 0 || fcntl(t->st.fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
    if ((rc = uv_poll_init(loop, &t->poll, t->st.fd)) < 0) return rc;
    t->poll.data = t;
    t->handles++;
    if ((rc = uv_listen((uv_stream_t *)&t->tcp, 16, on_dns_conn)) < 0 ||
        (rc = uv_udp_recv_start(&t->udp, dns_alloc, on_dns_udp)) < 0 ||
        (rc = uv_poll_start(&t->poll, UV_READABLE, on_tun_readable)) < 0)
        return rc;
    return 0;
}

void np_tun_attach(struct netproxy *np, const int fds[3], np_accept_fn accept)
{
    int rc = np->tun || np->released ? -EALREADY : np_stack_init(np->loop);
    if (rc < 0) {
        log_warn("transparent TCP for process %s not served: %s", np->process_id, uv_strerror(rc));
        for (int i = 0; i < 3; i++)
            close(fds[i]);
        return;
    }
    struct np_tun *t = xcalloc(1, sizeof *t);
    t->st = (struct np_stack_tun){
        .np = np, .accept = accept, .fd = fds[0], .names = &t->names, .budget = &np->budget};
    np->tun = t;
    rc = tun_serve(t, fds);
    if (rc < 0) {
        log_warn("transparent TCP for process %s not served: %s", np->process_id, uv_strerror(rc));
        np_tun_release(np);
    }
}

void np_tun_release(struct netproxy *np)
{
    struct np_tun *t = np->tun;
    if (!t) return;
    np->tun = NULL;
    log_debug("transparent TCP for process %s: %llu frames in, %llu frames (%llu bytes) out",
              np->process_id, (unsigned long long)t->st.frames_in,
              (unsigned long long)t->st.frames_out, (unsigned long long)t->st.bytes_out);
    np_stack_tun_gone(&t->st);
    t->released = true;
    t->handles++; /* held while closing */
    while (t->conns)
        dns_conn_close(t->conns);
    uv_handle_t *hs[] = {(uv_handle_t *)&t->poll, (uv_handle_t *)&t->udp, (uv_handle_t *)&t->tcp};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (hs[i]->loop && !uv_is_closing(hs[i])) uv_close(hs[i], on_tun_handle_closed);
    close(t->st.fd);
    t->st.fd = -1;
    tun_unhold(t);
}
