/* np_conn: a proxied connection's life and its two sockets, below everything the
 * proxy does with it (np_internal.h: struct np_client).
 *
 * A client structure is reference counted: one reference for being open, one per
 * open libuv handle and one per request in flight (resolution, connect, write,
 * shutdown); it is freed when the last goes, whatever order libuv reports in.
 * Closing it lets go of everything attached to it (a pending policy question, a
 * resolution, a transparent TCP flow, a SOCKS5 UDP association, the TLS sessions of
 * an intercepted tunnel).
 *
 * Writes take buffers as they are (a read buffer goes back to the pool once
 * written); a side's bytes go through its TLS session when the tunnel is
 * intercepted. Reading stops on a side while the other side's queue is over
 * NP_HIGH_WATER and starts again below NP_LOW_WATER; what is read goes to the
 * function the connection's owner set for that side (down_input, up_input). The
 * client's side is a socket, or a transparent TCP flow (np_stack.c). */
#include "netproxy/np_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "util/buf.h"
#include "util/mem.h"

/* The size of a side's next read: twice the last when it filled its buffer (a fast
 * sender: fewer, larger reads and writes, as the reference's relay grows its own),
 * half when it took less than a quarter. */
static uint32_t read_next(uint32_t size, ssize_t n)
{
    if ((size_t)n == size && size < NP_READ_MAX) return size * 2;
    if ((size_t)n < size / 4 && size > NP_READ_SIZE) return size / 2;
    return size;
}

/* Room given back while sides wait: they are woken on the next turn of the loop
 * (an idle handle, so the loop does not block first), outside whatever gave it. */
static uv_idle_t room_idle;

static void on_room_idle(uv_idle_t *h)
{
    uv_idle_stop(h);
    np_budget_wake(NP_READ_SIZE);
}

static void on_room(void)
{
    uv_idle_start(&room_idle, on_room_idle);
}

/* A side that found no room in the flow budget for its next read: it stops reading
 * (its bytes wait in the kernel, TCP's window holds the sender) until room is given
 * back. */
static void budget_stop(struct np_client *c, bool up_side)
{
    if (!room_idle.loop) {
        uv_idle_init(c->np->loop, &room_idle);
        uv_unref((uv_handle_t *)&room_idle);
        np_budget_on_room(on_room);
    }
    if (up_side) {
        if (c->up) uv_read_stop((uv_stream_t *)c->up);
        c->budget_up = true;
    } else {
        np_down_read_stop(c);
        c->budget_down = true;
    }
    np_budget_wait(&c->wait);
}

/* What the connection holds towards a side: its write queue, or what its transparent
 * flow holds towards the child. */
static size_t side_held(const struct np_client *c, bool to_up)
{
    if (to_up) return c->up ? uv_stream_get_write_queue_size((const uv_stream_t *)c->up) : 0;
    return c->tflow ? np_tflow_held(c->tflow)
                    : uv_stream_get_write_queue_size((const uv_stream_t *)&c->down);
}

/* Whether a side may read n bytes more: where the flow budget has room for them, or,
 * NP_READ_FLOOR at a time, where less than that of what it read before still waits on
 * the other side (two in flight: the next is read while the last is taken). The floor
 * keeps one connection's bytes from waiting for another's to be read: a program that
 * opens many and reads them one after the other waited for good on the one whose turn
 * it was, the budget full of the others'. It costs at most twice NP_READ_FLOOR per
 * connection past the budget. */
static bool read_fits(const struct np_client *c, bool up_side, size_t n)
{
    return np_budget_room(&c->np->budget, n) ||
           (n <= NP_READ_FLOOR && side_held(c, !up_side) < NP_READ_FLOOR);
}

/* The same for a transparent flow's bytes from the child, already in lwIP's buffers
 * (at most a window, 64 KiB): delivered where they fit, or past the budget where the
 * upstream's queue is under the floor. */
bool np_tflow_fits(struct np_client *c, size_t n)
{
    return np_budget_room(&c->np->budget, n) || side_held(c, true) < NP_READ_FLOOR;
}

/* A waiting side may be woken past the budget where its floor applies. */
static bool budget_floor(struct np_budget_waiter *w)
{
    const struct np_client *c =
        (const struct np_client *)((const char *)w - offsetof(struct np_client, wait));
    return (c->budget_up && read_fits(c, true, NP_READ_FLOOR)) ||
           (c->budget_down && read_fits(c, false, NP_READ_FLOOR));
}

/* Room again: each side the budget stopped reads again, unless something else has
 * stopped it since (the other side's queue, its EOF, the end). */
static void budget_wake(struct np_budget_waiter *w)
{
    struct np_client *c = (struct np_client *)((char *)w - offsetof(struct np_client, wait));
    bool up = c->budget_up, down = c->budget_down;
    c->budget_up = c->budget_down = false;
    if (c->closed || c->finishing) return;
    if (up && c->up && !c->up_paused && !c->up_eof) np_up_read_start(c);
    if (down && c->reading_down && c->down_wanted && !c->down_paused && !c->down_eof)
        np_down_read_start(c);
}

static void on_down_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct np_client *c = s->data;
    if (n == UV_ENOBUFS) {
        budget_stop(c, false);
        return;
    }
    if (n > 0) c->read_down = read_next(c->read_down, n);
    c->down_input(c, b->base, n);
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct np_client *c = s->data;
    if (n == UV_ENOBUFS) {
        budget_stop(c, true);
        return;
    }
    if (n > 0) c->read_up = read_next(c->read_up, n);
    c->up_input(c, b->base, n);
}

/* A read buffer where the side may read (read_fits: the flow budget's room, else
 * its floor), else none: libuv reports UV_ENOBUFS, and the side waits. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    struct np_client *c = h->data;
    bool up_side = h != (uv_handle_t *)&c->down;
    uint32_t size = up_side ? c->read_up : c->read_down;
    if (!np_budget_room(&c->np->budget, size)) {
        if (!read_fits(c, up_side, NP_READ_FLOOR)) {
            *b = uv_buf_init(NULL, 0);
            return;
        }
        size = NP_READ_FLOOR;
    }
    *b = uv_buf_init(np_buf_get(size), size);
}

void np_tflow_input(struct np_client *c, char *buf, ssize_t n)
{
    if (n == UV_ENOBUFS)
        budget_stop(c, false);
    else
        c->down_input(c, buf, n);
}

void np_down_read_start(struct np_client *c)
{
    if (c->tflow)
        np_tflow_read(c->tflow, true);
    else
        uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read);
}

void np_down_read_stop(struct np_client *c)
{
    if (c->tflow)
        np_tflow_read(c->tflow, false);
    else
        uv_read_stop((uv_stream_t *)&c->down);
}

/* Bytes written towards the client and not yet taken by it. */
size_t np_down_queued(const struct np_client *c)
{
    return c->tflow ? np_tflow_queued(c->tflow)
                    : uv_stream_get_write_queue_size((const uv_stream_t *)&c->down);
}

void np_up_read_start(struct np_client *c)
{
    uv_read_start((uv_stream_t *)c->up, on_alloc, on_up_read);
}

void np_read_resume(struct np_client *c, bool up_side)
{
    if (c->closed || c->finishing) return;
    if (up_side) {
        if (!c->up || !c->up_paused || c->up_eof) return;
        if (np_down_queued(c) > NP_LOW_WATER) return;
        c->up_paused = false;
        np_up_read_start(c);
    } else {
        if (!c->down_paused || c->down_eof || !c->down_wanted) return;
        if (c->up && uv_stream_get_write_queue_size((uv_stream_t *)c->up) > NP_LOW_WATER) return;
        c->down_paused = false;
        np_down_read_start(c);
    }
}

/* Drops one of the things the proxy waits for (a handle, a client, the release
 * itself); the last one after release frees it. */
void np_proxy_unhold(struct netproxy *np)
{
    if (--np->handles > 0 || !np->released) return;
    if (np->budget.bytes || np->budget.flows) {
        /* every write and flow has let go by now: what is left was never given back,
         * and would shrink every sandbox's room for good */
        char idv[160];
        log_warn("network proxy for process %s: %zu bytes and %u connections left in the "
                 "flow budget at its end",
                 log_value(np->process_id, idv, sizeof idv), np->budget.bytes, np->budget.flows);
        np_budget_give(&np->budget, np->budget.bytes);
        while (np->budget.flows)
            np_budget_flow_drop(&np->budget);
    }
    np_mitm_free(np);
    np_cred_free(np->cred);
    np_policy_free(&np->policy);
    netproxy_params_free(&np->params);
    free(np->process_id);
    free(np);
}

/* A new client structure in the proxy's list (the caller sets its side up). */
struct np_client *np_client_new(struct netproxy *np, enum np_kind kind)
{
    struct np_client *c = xcalloc(1, sizeof *c);
    c->np = np;
    c->kind = kind;
    c->refs = 1;
    c->read_down = c->read_up = NP_READ_SIZE;
    c->wait.budget = &np->budget;
    c->wait.wake = budget_wake;
    c->wait.floor = budget_floor;
    np_budget_flow_take(&np->budget); /* the caller saw room for it */
    buf_init(&c->in);
    buf_init(&c->head_out);
    buf_init(&c->resp);
    uv_timer_init(np->loop, &c->timer);
    c->timer.data = c;
    np_client_ref(c);
    np->handles++; /* the proxy waits for every client before it frees itself */
    c->next = &np->clients;
    c->prev = np->clients.prev;
    np->clients.prev->next = c;
    np->clients.prev = c;
    return c;
}

void np_client_ref(struct np_client *c)
{
    c->refs++;
}

void np_client_unref(struct np_client *c)
{
    if (--c->refs > 0) return;
    struct netproxy *np = c->np;
    buf_free(&c->in);
    buf_free(&c->head_out);
    buf_free(&c->resp);
    free(c->forward_path);
    np_mitm_client_free(c);
    free(c);
    np_proxy_unhold(np);
}

void np_client_handle_closed(uv_handle_t *h)
{
    struct np_client *c = h->data;
    if (h != (uv_handle_t *)&c->down && h != (uv_handle_t *)&c->timer) free(h);
    np_client_unref(c);
}

/* Ends the client: closes its sockets, drops a pending policy request and a pending
 * resolution (their callbacks see `closed`). Idempotent. */
void np_client_close(struct np_client *c)
{
    if (c->closed) return;
    c->closed = true;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    np_budget_flow_drop(&c->np->budget);
    np_budget_unwait(&c->wait);
    if (c->call) {
        np_ask_cancel(c->np, c->call);
        c->call = NULL;
        c->np->n_asks--;
    }
    if (c->gai_busy) uv_cancel((uv_req_t *)&c->gai);
    if (c->tflow) {
        np_tflow_close(c->tflow); /* gracefully once its FIN is queued, else a reset */
        c->tflow = NULL;
        np_client_unref(c); /* the flow's reference */
    } else {
        uv_close((uv_handle_t *)&c->down, np_client_handle_closed);
    }
    uv_close((uv_handle_t *)&c->timer, np_client_handle_closed);
    if (c->up) uv_close((uv_handle_t *)c->up, np_client_handle_closed);
    c->up = NULL;
    np_udp_close(c);
    np_client_unref(c);
}

struct np_wreq {
    uv_write_t w;
    struct np_client *c;
    bool to_up;
    bool pooled; /* data is a read buffer, back to the pool when written */
    char *data;
    size_t len; /* held in the flow budget until written */
};

static void on_written(uv_write_t *w, int status)
{
    struct np_wreq *r = (struct np_wreq *)w;
    struct np_client *c = r->c;
    np_buf_release(r->data, r->pooled);
    np_budget_give(&c->np->budget, r->len);
    free(r);
    if (status < 0 && status != UV_ECANCELED) {
        np_client_close(c);
    } else if (!c->closed) {
        /* the side we wrote to may have drained: the other side may read again */
        np_read_resume(c, false);
        np_read_resume(c, true);
    }
    np_client_unref(c);
}

void np_write_buf(struct np_client *c, bool to_up, char *data, size_t len, bool pooled)
{
    if (!to_up && c->tflow && !c->closed && len) {
        np_tflow_write(c->tflow, data, len, pooled); /* takes the buffer */
        return;
    }
    uv_stream_t *s = to_up ? (uv_stream_t *)c->up : (uv_stream_t *)&c->down;
    if (c->closed || !s || len == 0) {
        np_buf_release(data, pooled);
        return;
    }
    struct np_wreq *r = xmalloc(sizeof *r);
    r->c = c;
    r->to_up = to_up;
    r->pooled = pooled;
    r->data = data;
    r->len = len;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    np_client_ref(c);
    int rc = uv_write(&r->w, s, &b, 1, on_written);
    if (rc < 0) {
        np_buf_release(data, pooled);
        free(r);
        np_client_unref(c);
        np_client_close(c);
        return;
    }
    np_budget_hold(&c->np->budget, len);
}

/* Queues data (taking ownership of the malloc'd block) on the client side (to_up
 * false) or the upstream side. */
void np_write_owned(struct np_client *c, bool to_up, char *data, size_t len)
{
    np_write_buf(c, to_up, data, len, false);
}

void np_write_copy(struct np_client *c, bool to_up, const void *data, size_t len)
{
    if (!len) return;
    np_write_owned(c, to_up, xmemdup(data, len), len);
}

/* Writes what the connection's TLS sessions have for their sockets (np_mitm.c). */
void np_tls_flush(struct np_client *c)
{
    for (int side = 0; side < 2; side++) {
        char *out = NULL;
        size_t n = np_mitm_take(c, side == 1, &out);
        if (n)
            np_write_owned(c, side == 1, out, n);
        else
            free(out);
    }
}

/* Plaintext towards a side: through its TLS session when the connection is
 * intercepted, as is otherwise. */
void np_send(struct np_client *c, bool to_up, const void *data, size_t len)
{
    if (!np_mitm_active(c, to_up)) {
        np_write_copy(c, to_up, data, len);
    } else if (np_mitm_send(c, to_up, data, len) < 0) {
        np_client_close(c);
    } else {
        np_tls_flush(c);
    }
}

/* A side's half-close is done (its queue written): the connection ends when it was
 * finishing or both sides are at EOF. Drops the reference np_shutdown_side took. */
void np_shutdown_done(struct np_client *c)
{
    if (!c->closed && (c->finish_on_shutdown || (c->down_eof && c->up_eof))) np_client_close(c);
    np_client_unref(c);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct np_client *c = req->data;
    free(req);
    np_shutdown_done(c);
}

/* Half-closes the write side towards `to_up` once its queue is written. */
void np_shutdown_side(struct np_client *c, bool to_up)
{
    if (!to_up && c->tflow && !c->closed) {
        np_client_ref(c);
        np_tflow_shutdown(c->tflow); /* np_shutdown_done once the FIN is queued */
        return;
    }
    uv_stream_t *s = to_up ? (uv_stream_t *)c->up : (uv_stream_t *)&c->down;
    if (!s || c->closed) return;
    uv_shutdown_t *req = xmalloc(sizeof *req);
    req->data = c;
    np_client_ref(c);
    if (uv_shutdown(req, s, on_shutdown) < 0) {
        free(req);
        np_client_unref(c);
        np_client_close(c);
    }
}

/* Sends the last bytes to the client, then ends the connection. */
void np_finish(struct np_client *c)
{
    if (c->closed || c->finishing) return;
    c->finishing = true;
    c->finish_on_shutdown = true;
    np_down_read_stop(c);
    if (c->up) uv_read_stop((uv_stream_t *)c->up);
    if (np_mitm_active(c, false)) {
        np_mitm_close_notify(c, false);
        np_tls_flush(c);
    }
    np_shutdown_side(c, false);
}
