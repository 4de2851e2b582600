/* ec_tcp: TCP streams the server opens for this client (tcp/connect and friends, our
 * server's extension, docs/PROTOCOL.md §11 (i); capability tcpForward). The API is
 * in execclient.h; `exec-client forward -L` is built on it.
 *
 * Nothing here blocks: every request is sent as an EC_PENDING_FEATURE pending entry
 * whose reply ec_client.c hands back to tcp_on_reply() (tcp_feature), and the server's
 * tcp/data and tcp/closed notifications arrive through tcp_on_notification(). A
 * stream keeps its events in a queue the caller drains with ec_tcp_next_event().
 * Flow control:
 *  - from the server: we announce a window (EC_TCP_WINDOW) in tcp/connect; the data
 *    of an event counts as consumed when the caller asks for the next event, and
 *    once a quarter of the window is consumed one tcp/ack returns that credit. So at
 *    most a window of data waits here, and a caller that stops taking events stops
 *    the peer (through the server's socket) instead of filling memory;
 *  - to the server: a tcp/data reply means its bytes reached the peer's socket;
 *    ec_tcp_write_room() is EC_TCP_WRITE_WINDOW minus the bytes not yet answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_internal.h"
#include "proto/base64.h"
#include "util/mem.h"

#define EC_TCP_WINDOW (2u << 20)        /* what the server may send ahead of our acks */
#define EC_TCP_WRITE_WINDOW (1u << 20)  /* tcp/data bytes we keep unanswered */
#define EC_TCP_WRITE_CHUNK (256u << 10) /* one tcp/data request at most */

enum { TCP_OP_CONNECT = 1, TCP_OP_DATA, TCP_OP_OTHER };

struct ec_tcp_ev {
    struct ec_tcp_ev *next;
    ec_tcp_event_type type;
    uint8_t *data; /* owned */
    size_t len;
    char *error; /* owned */
};

struct ec_tcp {
    ec_tcp *next;
    ec_client *c;
    char *id;
    bool connected;
    bool ended; /* the server is done with the stream (closed, failed, lost) */
    bool closed_queued;
    bool closed_taken; /* EC_TCP_CLOSED was returned */
    bool eof_sent;
    struct ec_tcp_ev *q_head, *q_tail;
    struct ec_tcp_ev *cur; /* the event last returned (its data is still the caller's) */
    uint64_t consumed;     /* bytes taken by the caller and not yet acked */
    size_t inflight;       /* tcp/data bytes sent and not yet answered */
};

static void ev_free(struct ec_tcp_ev *e)
{
    if (!e) return;
    free(e->data);
    free(e->error);
    free(e);
}

static void push(ec_tcp *t, struct ec_tcp_ev *e)
{
    if (t->closed_queued) { /* nothing follows the end */
        ev_free(e);
        return;
    }
    if (e->type == EC_TCP_CLOSED) t->closed_queued = true;
    if (t->q_tail)
        t->q_tail->next = e;
    else
        t->q_head = e;
    t->q_tail = e;
}

static void push_closed(ec_tcp *t, const char *error)
{
    t->ended = true;
    struct ec_tcp_ev *e = xcalloc(1, sizeof *e);
    e->type = EC_TCP_CLOSED;
    e->error = error ? xstrdup(error) : NULL;
    push(t, e);
}

static ec_tcp *find(ec_client *c, const char *id)
{
    for (ec_tcp *t = c->tcps; t; t = t->next)
        if (strcmp(t->id, id) == 0) return t;
    return NULL;
}

static const struct ec_feature tcp_feature;

/* A request nobody waits for; the params are not kept once sent (never replayed). */
static void send_async(ec_tcp *t, int op, const char *method, json_t *params, size_t bytes)
{
    ec_client *c = t->c;
    struct ec_pending *pd = ec_pending_new(c, EC_PENDING_FEATURE, method, params);
    pd->owner = &tcp_feature;
    pd->tcp = t;
    pd->tcp_op = op;
    pd->tcp_bytes = bytes;
    ec_pending_send(c, pd);
    json_decref(pd->params);
    pd->params = NULL;
}

static void tcp_on_reply(ec_client *c, struct ec_pending *pd, struct ec_msg *m)
{
    ec_tcp *t = pd->tcp;
    if (!t) return;
    bool ok = m->kind == EC_MSG_RESPONSE;
    if (pd->tcp_op == TCP_OP_CONNECT) {
        if (ok) {
            t->connected = true;
            struct ec_tcp_ev *e = xcalloc(1, sizeof *e);
            e->type = EC_TCP_CONNECTED;
            push(t, e);
        } else {
            push_closed(t, m->err_message ? m->err_message : "tcp/connect failed");
        }
    } else if (pd->tcp_op == TCP_OP_DATA) {
        t->inflight -= pd->tcp_bytes < t->inflight ? pd->tcp_bytes : t->inflight;
        if (!ok && !t->ended) push_closed(t, m->err_message ? m->err_message : "tcp/data failed");
    }
}

static void tcp_on_data(ec_client *c, const char *id, size_t id_len, const char *b64, size_t n,
                        bool eof)
{
    ec_tcp *t = NULL;
    for (ec_tcp *s = c->tcps; s && !t; s = s->next)
        if (strlen(s->id) == id_len && memcmp(s->id, id, id_len) == 0) t = s;
    if (!t || t->ended) return;
    if (n > 0) {
        struct ec_tcp_ev *e = xcalloc(1, sizeof *e);
        e->type = EC_TCP_DATA;
        e->data = xmalloc(base64_decoded_max(n) + 1);
        char detail[64];
        if (base64_decode(b64, n, e->data, &e->len, detail, sizeof detail) != 0) {
            ev_free(e);
            push_closed(t, "the server sent bad base64 in tcp/data");
            return;
        }
        push(t, e);
    }
    if (eof) {
        struct ec_tcp_ev *e = xcalloc(1, sizeof *e);
        e->type = EC_TCP_EOF;
        push(t, e);
    }
}

/* A tcp/ notification (true: taken, whether or not its stream is still known). */
static bool tcp_on_notification(ec_client *c, struct ec_msg *m)
{
    if (strncmp(m->method, "tcp/", 4) != 0) return false;
    const char *id = json_string_value(json_object_get(m->params, "streamId"));
    if (!id) return true;
    if (strcmp(m->method, "tcp/data") == 0) {
        const char *b64 = json_string_value(json_object_get(m->params, "dataBase64"));
        tcp_on_data(c, id, strlen(id), b64 ? b64 : "", b64 ? strlen(b64) : 0,
                    json_is_true(json_object_get(m->params, "eof")));
        return true;
    }
    ec_tcp *t = find(c, id);
    if (t && !t->ended && strcmp(m->method, "tcp/closed") == 0)
        push_closed(t, json_string_value(json_object_get(m->params, "error")));
    return true;
}

static void tcp_on_loss(ec_client *c)
{
    for (ec_tcp *t = c->tcps; t; t = t->next) {
        t->inflight = 0;
        if (!t->ended) push_closed(t, "the connection to the server was lost");
    }
}

static void tcp_free(ec_tcp *t)
{
    ec_client *c = t->c;
    for (ec_tcp **pp = &c->tcps; *pp; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    for (struct ec_pending *pd = c->pending; pd; pd = pd->next)
        if (pd->tcp == t) pd->tcp = NULL; /* its reply is then dropped */
    while (t->q_head) {
        struct ec_tcp_ev *e = t->q_head;
        t->q_head = e->next;
        ev_free(e);
    }
    ev_free(t->cur);
    free(t->id);
    free(t);
}

static void tcp_free_all(ec_client *c)
{
    while (c->tcps)
        tcp_free(c->tcps);
}

/* tcp/data's fast path: the notification read without a JSON tree. */
static bool tcp_on_raw(ec_client *c, const char *text, size_t len)
{
    struct ec_tcp_data_view tv;
    if (!ec_msg_tcp_data_view(text, len, &tv)) return false;
    tcp_on_data(c, tv.id, tv.id_len, tv.b64, tv.b64_len, tv.eof);
    return true;
}

static const struct ec_feature tcp_feature = {
    .on_raw = tcp_on_raw,
    .on_reply = tcp_on_reply,
    .on_notification = tcp_on_notification,
    .on_loss = tcp_on_loss,
    .free_all = tcp_free_all,
};

int ec_tcp_open(ec_client *c, const char *host, unsigned port, ec_tcp **out, ec_error *err)
{
    *out = NULL;
    if (!host || !*host || port < 1 || port > 65535)
        return ec_fail(err, EC_ERR_USAGE, 0, "tcp: a host and a port 1-65535 are needed");
    if (!ec_client_has_capability(c, "tcpForward"))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "the server does not allow TCP forwarding (no tcpForward capability; "
                       "it needs --allow-tcp-forwarding)");
    if (c->dead) {
        if (err) *err = c->dead_err;
        return -(int)c->dead_err.kind;
    }
    ec_client_use_feature(c, &tcp_feature);
    ec_tcp *t = xcalloc(1, sizeof *t);
    t->c = c;
    char id[32];
    snprintf(id, sizeof id, "t%u", ++c->tcp_counter);
    t->id = xstrdup(id);
    t->next = c->tcps;
    c->tcps = t;
    json_t *params = json_pack("{s:s, s:s, s:i, s:i}", "streamId", id, "host", host, "port",
                               (int)port, "window", (int)EC_TCP_WINDOW);
    if (!params) {
        tcp_free(t);
        return ec_fail(err, EC_ERR_USAGE, 0, "tcp: the host is not valid UTF-8");
    }
    send_async(t, TCP_OP_CONNECT, "tcp/connect", params, 0);
    *out = t;
    return 0;
}

/* The caller is done with the last event: its bytes are consumed, and a quarter of
 * the window consumed goes back to the server as credit. */
static void release_cur(ec_tcp *t)
{
    if (!t->cur) return;
    t->consumed += t->cur->len;
    ev_free(t->cur);
    t->cur = NULL;
    if (t->consumed >= EC_TCP_WINDOW / 4 && !t->ended && t->c->fd >= 0) {
        json_t *params =
            json_pack("{s:s, s:I}", "streamId", t->id, "bytes", (json_int_t)t->consumed);
        send_async(t, TCP_OP_OTHER, "tcp/ack", params, 0);
        t->consumed = 0;
    }
}

int ec_tcp_next_event(ec_tcp *t, int timeout_ms, ec_tcp_event *ev, ec_error *err)
{
    memset(ev, 0, sizeof *ev);
    release_cur(t);
    if (t->closed_taken) return ec_fail(err, EC_ERR_USAGE, 0, "tcp stream %s is closed", t->id);
    int64_t deadline = ec_deadline(timeout_ms);
    for (;;) {
        struct ec_tcp_ev *e = t->q_head;
        if (e) {
            t->q_head = e->next;
            if (!t->q_head) t->q_tail = NULL;
            t->cur = e;
            ev->type = e->type;
            ev->data = e->data;
            ev->len = e->len;
            ev->error = e->error;
            if (e->type == EC_TCP_CLOSED) t->closed_taken = true;
            return 0;
        }
        int left = ec_remaining(deadline);
        if (left == 0) return ec_fail(err, EC_ERR_TIMEOUT, 0, "no event on tcp stream %s", t->id);
        int rc = ec_pump(t->c, left, err);
        if (rc && !t->q_head) return rc;
    }
}

size_t ec_tcp_write_room(const ec_tcp *t)
{
    if (!t->connected || t->ended || t->eof_sent) return 0;
    return t->inflight < EC_TCP_WRITE_WINDOW ? EC_TCP_WRITE_WINDOW - t->inflight : 0;
}

static int check_writable(ec_tcp *t, ec_error *err)
{
    if (!t->connected)
        return ec_fail(err, EC_ERR_USAGE, 0, "tcp stream %s is not connected", t->id);
    if (t->ended) return ec_fail(err, EC_ERR_USAGE, 0, "tcp stream %s has ended", t->id);
    if (t->eof_sent)
        return ec_fail(err, EC_ERR_USAGE, 0, "tcp stream %s: write after shutdown", t->id);
    if (t->c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    return 0;
}

int ec_tcp_write(ec_tcp *t, const void *data, size_t len, ec_error *err)
{
    int rc = check_writable(t, err);
    if (rc) return rc;
    const uint8_t *p = data;
    while (len > 0) {
        size_t n = len < EC_TCP_WRITE_CHUNK ? len : EC_TCP_WRITE_CHUNK;
        char *b64 = xmalloc(base64_encoded_len(n) + 1);
        b64[base64_encode(p, n, b64)] = 0;
        json_t *params = json_pack("{s:s, s:s}", "streamId", t->id, "dataBase64", b64);
        free(b64);
        t->inflight += n;
        send_async(t, TCP_OP_DATA, "tcp/data", params, n);
        p += n;
        len -= n;
    }
    return 0;
}

int ec_tcp_shutdown(ec_tcp *t, ec_error *err)
{
    int rc = check_writable(t, err);
    if (rc) return rc;
    t->eof_sent = true;
    json_t *params = json_pack("{s:s, s:s, s:b}", "streamId", t->id, "dataBase64", "", "eof", 1);
    send_async(t, TCP_OP_OTHER, "tcp/data", params, 0);
    return 0;
}

void ec_tcp_close(ec_tcp *t)
{
    if (!t) return;
    /* Still known to the server: abort it there too (the reply is dropped). */
    if (!t->ended && t->c->fd >= 0)
        send_async(t, TCP_OP_OTHER, "tcp/close", json_pack("{s:s}", "streamId", t->id), 0);
    tcp_free(t);
}
