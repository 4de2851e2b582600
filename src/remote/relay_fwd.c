/* relay_fwd: one relay stream forwarded to a destination exec-server (relay_fwd.h).
 *
 * A forwarder is referenced by the demux (until detach or release), by its
 * destination socket (until rv_ws's on_closed) and by each of its data frames in
 * flight on the rendezvous socket (queued until sent); it is freed when the last
 * goes. Messages the harness sends before the destination's upgrade completed wait
 * in a bounded queue and go out in order once it opens. */
#include "remote/relay_fwd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "remote/rv_ws.h"
#include "util/mem.h"

struct fwd_msg {
    struct fwd_msg *next;
    size_t len;
    uint8_t data[];
};

struct relay_fwd {
    struct relay_stream *st; /* NULL once the stream is gone */
    struct rv_ws *ws;        /* the destination, NULL once closed */
    bool open;               /* the destination's upgrade completed */
    bool paused;             /* the destination is not being read */
    int refs;
    size_t backlog;                    /* our frames on the rendezvous socket, unwritten */
    struct fwd_msg *held, **held_tail; /* harness messages before the destination opened */
    unsigned nheld;
    size_t held_bytes;
    char id[48]; /* stream id prefix, for log lines */
};

static unsigned open_count;

unsigned relay_fwd_open_count(void)
{
    return open_count;
}

static void fwd_unref(struct relay_fwd *f)
{
    if (--f->refs > 0) return;
    while (f->held) {
        struct fwd_msg *m = f->held;
        f->held = m->next;
        free(m);
    }
    free(f);
}

static void drop_held(struct relay_fwd *f)
{
    while (f->held) {
        struct fwd_msg *m = f->held;
        f->held = m->next;
        free(m);
    }
    f->held_tail = &f->held;
    f->nheld = 0;
    f->held_bytes = 0;
}

/* The forwarder cannot go on: reset the stream (the demux then releases us) and
 * close the destination. */
static void fwd_fail(struct relay_fwd *f, const char *why)
{
    char idv[64];
    log_event("event=relay_forward noise_outcome=error noise_reason=%s stream=%s", why,
              log_value(f->id, idv, sizeof idv));
    drop_held(f);
    struct relay_stream *st = f->st;
    f->st = NULL;
    if (f->ws) rv_ws_close(f->ws, "local_shutdown");
    if (st) relay_stream_sink_closed(st);
}

/* One harness message to the destination, or fail when it does not keep up. */
static void to_destination(struct relay_fwd *f, const uint8_t *msg, size_t len)
{
    if (rv_ws_queued(f->ws) + len > RELAY_FWD_MAX_PENDING) {
        fwd_fail(f, "destination_backlog");
        return;
    }
    if (rv_ws_send(f->ws, msg, len, NULL, NULL) < 0) fwd_fail(f, "destination_write");
}

/* ---- the destination socket ---- */

static void dest_opened(void *arg)
{
    struct relay_fwd *f = arg;
    f->open = true;
    f->refs++; /* the loop below may fail the stream */
    while (f->held && f->ws && f->st) {
        struct fwd_msg *m = f->held;
        f->held = m->next;
        if (!f->held) f->held_tail = &f->held;
        f->nheld--;
        f->held_bytes -= m->len;
        to_destination(f, m->data, m->len);
        free(m);
    }
    fwd_unref(f);
}

static void dest_message(void *arg, const uint8_t *p, size_t n)
{
    struct relay_fwd *f = arg;
    if (!f->st) return;
    /* relay_stream_send accounts every frame through fwd_queued. */
    f->refs++;
    relay_stream_send(f->st, p, n);
    if (f->st && f->ws && !f->paused && f->backlog > RELAY_FWD_HIGH_WATER) {
        f->paused = true;
        rv_ws_set_reading(f->ws, false);
    }
    fwd_unref(f);
}

static void dest_closed(void *arg, int http_status, const char *reason)
{
    struct relay_fwd *f = arg;
    f->ws = NULL;
    open_count--;
    if (f->st) {
        char why[64];
        if (http_status)
            snprintf(why, sizeof why, "destination_refused_%d", http_status);
        else
            snprintf(why, sizeof why, "destination_%s", f->open ? "closed" : reason);
        fwd_fail(f, why);
    }
    fwd_unref(f); /* the socket's reference */
}

static const struct rv_ws_ops dest_ops = {
    .on_open = dest_opened,
    .on_binary = dest_message,
    .on_closed = dest_closed,
};

/* ---- the sink ops the demux drives ---- */

static void fwd_deliver(void *sink, const uint8_t *msg, size_t len)
{
    struct relay_fwd *f = sink;
    if (!f->st || !f->ws) return;
    if (f->open) {
        to_destination(f, msg, len);
        return;
    }
    if (f->nheld >= RELAY_FWD_MAX_HELD || f->held_bytes + len > RELAY_FWD_MAX_PENDING) {
        fwd_fail(f, "destination_not_open");
        return;
    }
    struct fwd_msg *m = xmalloc(sizeof *m + len);
    m->next = NULL;
    m->len = len;
    memcpy(m->data, msg, len);
    *f->held_tail = m;
    f->held_tail = &m->next;
    f->nheld++;
    f->held_bytes += len;
}

static bool fwd_queued(void *sink, size_t n)
{
    struct relay_fwd *f = sink;
    f->backlog += n;
    f->refs++;
    return true;
}

static void fwd_sent(void *arg, size_t n, int status)
{
    struct relay_fwd *f = arg;
    f->backlog -= n;
    if (f->paused && f->backlog <= RELAY_FWD_LOW_WATER && f->ws) {
        f->paused = false;
        rv_ws_set_reading(f->ws, true);
    }
    fwd_unref(f);
}

static void fwd_detach(void *sink)
{
    struct relay_fwd *f = sink;
    f->st = NULL;
    drop_held(f);
    if (f->ws) rv_ws_close(f->ws, "local_shutdown");
    fwd_unref(f);
}

static void fwd_release(void *sink)
{
    struct relay_fwd *f = sink;
    f->st = NULL;
    fwd_unref(f);
}

static const struct relay_sink_ops fwd_sink_ops = {
    .deliver = fwd_deliver,
    .queued = fwd_queued,
    .sent = fwd_sent,
    .detach = fwd_detach,
    .release = fwd_release,
};

static void *fwd_open(const struct relay_sink_kind *kind, uv_loop_t *loop, struct relay_stream *st,
                      const char *stream_id)
{
    const struct relay_fwd_kind *k = (const struct relay_fwd_kind *)kind;
    struct relay_fwd *f = xcalloc(1, sizeof *f);
    f->st = st;
    f->held_tail = &f->held;
    snprintf(f->id, sizeof f->id, "%.40s", stream_id);
    /* 0.169.0's bare upgrade: no extra headers; no Ping (the destination is local
     * and the harness does liveness end to end). */
    struct rv_ws_opts o = {.url = k->url,
                           .connect_timeout_ms = 10000,
                           .max_message = RELAY_FWD_MAX_MESSAGE,
                           .fragment = RELAY_FWD_FRAGMENT,
                           .text = true,
                           .no_ping = true};
    if (rv_ws_open(loop, &o, &dest_ops, f, &f->ws) < 0) {
        free(f);
        return NULL;
    }
    open_count++;
    f->refs = 2; /* the demux's and the socket's */
    return f;
}

int relay_fwd_kind_init(struct relay_fwd_kind *k, const char *url)
{
    struct rv_ws_url u;
    if (strlen(url) >= sizeof k->url || rv_ws_parse_url(url, &u) < 0) return -EINVAL;
    memset(k, 0, sizeof *k);
    k->base.open = fwd_open;
    k->base.ops = &fwd_sink_ops;
    snprintf(k->url, sizeof k->url, "%s", url);
    return 0;
}
