/* tcp_stream: one outbound TCP connection, its lifecycle and flow control (see
 * tcp_stream.h). The host is resolved on the thread pool (uv_getaddrinfo: the loop
 * never blocks) and every address is tried in order until one accepts, within the
 * deadline. Reading stops when the unacknowledged bytes reach the window, or while
 * the owner is paused, so the peer is held back by TCP itself and memory stays
 * bounded. Half-close is passed through both ways; when both sides have ended and
 * every write is done, the stream ends cleanly. */
#include "tcp/tcp_stream.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

#define TCP_READ_MAX (64u << 10)

static uint8_t scratch[TCP_READ_MAX];

void tcp_stream_unref(struct tcp_stream *st)
{
    if (--st->refs > 0) return;
    if (st->ai) uv_freeaddrinfo(st->ai);
    buf_free(&st->id_json);
    free(st->id);
    free(st);
}

static void handle_closed(uv_handle_t *h)
{
    tcp_stream_unref(h->data);
}

/* The timer's reference, dropped only by its close callback, keeps st valid to
 * the end of this function whatever `ended` lets go of. */
void tcp_stream_end(struct tcp_stream *st, const char *error, bool notify)
{
    if (st->state == TCP_DONE) return;
    st->state = TCP_DONE;
    void *token = st->connect_token;
    st->connect_token = NULL;
    st->events->ended(st, token, error, token ? false : notify);
    if (st->sock_live) {
        st->sock_live = false;
        uv_close((uv_handle_t *)&st->sock, handle_closed);
    }
    uv_close((uv_handle_t *)&st->timer, handle_closed);
}

/* Both directions have ended and every byte is written: a clean close. */
static void maybe_finished(struct tcp_stream *st)
{
    if (st->state == TCP_OPEN && st->remote_eof && st->shut_done && st->write_queued == 0)
        tcp_stream_end(st, NULL, true);
}

/* ---- reading from the peer ---------------------------------------------------------- */

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct tcp_stream *st = h->data;
    uint64_t room = st->window > st->unacked ? st->window - st->unacked : 0;
    *b = uv_buf_init((char *)scratch, (unsigned)(room < sizeof scratch ? room : sizeof scratch));
}

/* Reads exactly while the owner has room and is not paused. */
void tcp_stream_resume(struct tcp_stream *st)
{
    bool want = st->state == TCP_OPEN && !st->remote_eof && st->unacked < st->window &&
                !st->events->paused(st);
    if (want && !st->reading) uv_read_start((uv_stream_t *)&st->sock, alloc_cb, read_cb);
    if (!want && st->reading) uv_read_stop((uv_stream_t *)&st->sock);
    st->reading = want;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct tcp_stream *st = s->data;
    if (nread == 0 || st->state != TCP_OPEN) return;
    if (nread > 0) {
        st->events->data(st, (const uint8_t *)b->base, (size_t)nread, false);
        st->unacked += (uint64_t)nread;
        tcp_stream_resume(st);
        return;
    }
    if (nread == UV_ENOBUFS) { /* no window left: tcp_stream_resume stops */
        tcp_stream_resume(st);
        return;
    }
    if (nread == UV_EOF) {
        st->remote_eof = true;
        st->events->data(st, NULL, 0, true);
        tcp_stream_resume(st);
        maybe_finished(st);
        return;
    }
    tcp_stream_end(st, uv_strerror((int)nread), true);
}

void tcp_stream_ack(struct tcp_stream *st, uint64_t n)
{
    st->unacked -= n < st->unacked ? n : st->unacked;
    tcp_stream_resume(st);
}

/* ---- connecting ---------------------------------------------------------------------- */

static void start_attempt(struct tcp_stream *st);

static void connected(struct tcp_stream *st)
{
    uv_timer_stop(&st->timer);
    st->state = TCP_OPEN;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char addr[INET6_ADDRSTRLEN] = "";
    int port = 0;
    if (uv_tcp_getpeername(&st->sock, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a6, addr, sizeof addr);
            port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            uv_ip4_name(a4, addr, sizeof addr);
            port = ntohs(a4->sin_port);
        }
    }
    uv_tcp_nodelay(&st->sock, 1);
    void *token = st->connect_token;
    st->connect_token = NULL;
    /* The owner's reply goes out before the stream's first data. */
    st->events->connected(st, token, addr, port);
    tcp_stream_resume(st);
}

/* The failed attempt's socket is closed: the next address gets a fresh one (the
 * handle's memory may be reused only now). */
static void retry_after_close(uv_handle_t *h)
{
    struct tcp_stream *st = h->data;
    if (st->state == TCP_CONNECTING) start_attempt(st);
    tcp_stream_unref(st);
}

static void connect_cb(uv_connect_t *cr, int status)
{
    struct tcp_stream *st = cr->data;
    if (st->state != TCP_CONNECTING) return; /* ended meanwhile: the close cancelled it */
    if (status == 0) {
        connected(st);
        return;
    }
    st->last_error = status;
    st->sock_live = false;
    uv_close((uv_handle_t *)&st->sock, retry_after_close);
}

/* Connects to the next resolved address, or fails with the last error. */
static void start_attempt(struct tcp_stream *st)
{
    struct addrinfo *a = st->ai_next;
    int rc = st->last_error;
    if (a) {
        st->ai_next = a->ai_next;
        rc = uv_tcp_init(st->timer.loop, &st->sock);
    }
    if (!a || rc < 0) {
        tcp_stream_end(st, rc < 0 ? uv_strerror(rc) : "no address to connect to", false);
        return;
    }
    st->sock.data = st;
    st->sock_live = true;
    st->refs++; /* the socket handle, until its close callback */
    st->creq.data = st;
    rc = uv_tcp_connect(&st->creq, &st->sock, a->ai_addr, connect_cb);
    if (rc == 0) return;
    st->last_error = rc;
    st->sock_live = false;
    uv_close((uv_handle_t *)&st->sock, retry_after_close);
}

static void resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    struct tcp_stream *st = g->data;
    st->ai = res; /* freed with the stream */
    if (st->state == TCP_RESOLVING) {
        if (status < 0) {
            tcp_stream_end(st, uv_strerror(status), false);
        } else {
            st->state = TCP_CONNECTING;
            st->ai_next = res;
            start_attempt(st);
        }
    }
    tcp_stream_unref(st); /* the lookup's reference */
}

static void connect_timeout(uv_timer_t *t)
{
    tcp_stream_end(t->data, "connection timed out", false);
}

struct tcp_stream *tcp_stream_new(const char *id, const char *host, unsigned port, uint64_t window,
                                  const struct tcp_stream_events *events, void *owner,
                                  void *connect_token)
{
    struct tcp_stream *st = xcalloc(1, sizeof *st);
    st->id = xstrdup(id);
    buf_init(&st->id_json);
    buf_put_json_str(&st->id_json, id, strlen(id));
    snprintf(st->host, sizeof st->host, "%s", host);
    st->port = port;
    st->window = window;
    st->state = TCP_RESOLVING;
    st->events = events;
    st->owner = owner;
    st->connect_token = connect_token;
    st->refs = 3; /* the owner, the timer handle, the lookup */
    return st;
}

void tcp_stream_start(struct tcp_stream *st, uv_loop_t *loop, uint64_t timeout_ms)
{
    uv_timer_init(loop, &st->timer);
    st->timer.data = st;
    uv_timer_start(&st->timer, connect_timeout, timeout_ms, 0);
    char service[8];
    snprintf(service, sizeof service, "%u", st->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_protocol = IPPROTO_TCP,
                             .ai_flags = AI_NUMERICSERV};
    st->gai.data = st;
    int rc = uv_getaddrinfo(loop, &st->gai, resolved, st->host, service, &hints);
    if (rc < 0) {
        st->refs--; /* no lookup runs */
        tcp_stream_end(st, uv_strerror(rc), false);
    }
}

/* ---- writing to the peer -------------------------------------------------------------- */

struct tcp_write *tcp_write_new(size_t cap)
{
    struct tcp_write *tw = xmalloc(sizeof *tw + cap);
    tw->len = 0;
    return tw;
}

static void write_done(uv_write_t *w, int status)
{
    struct tcp_write *tw = (struct tcp_write *)w;
    struct tcp_stream *st = tw->st;
    st->write_queued -= tw->len;
    st->events->written(st, tw->token, status);
    if (status < 0 && status != UV_ECANCELED) tcp_stream_end(st, uv_strerror(status), true);
    free(tw);
    maybe_finished(st);
    tcp_stream_unref(st);
}

int tcp_stream_write(struct tcp_stream *st, struct tcp_write *tw, void *token)
{
    tw->st = st;
    tw->token = token;
    uv_buf_t ub = uv_buf_init((char *)tw->data, (unsigned)tw->len);
    int rc = uv_write(&tw->w, (uv_stream_t *)&st->sock, &ub, 1, write_done);
    if (rc < 0) return rc;
    st->write_queued += tw->len;
    st->refs++;
    return 0;
}

static void shutdown_done(uv_shutdown_t *sr, int status)
{
    struct tcp_stream *st = sr->data;
    st->shut_done = true;
    if (status < 0 && status != UV_ECANCELED) tcp_stream_end(st, uv_strerror(status), true);
    maybe_finished(st);
    tcp_stream_unref(st);
}

void tcp_stream_shutdown(struct tcp_stream *st)
{
    /* libuv shuts down once the writes queued before it are done. */
    st->eof_asked = true;
    st->sreq.data = st;
    if (uv_shutdown(&st->sreq, (uv_stream_t *)&st->sock, shutdown_done) == 0)
        st->refs++;
    else
        st->shut_done = true;
    maybe_finished(st);
}
