/* relay_demux: virtual streams over one rendezvous socket (see relay_demux.h).
 *
 * Streams live in one list (at most 160 entries, so a linear search is fine).
 * Each has a unique instance number: a validation answer for a stream that was
 * reset and reopened under the same id meanwhile finds a different instance and
 * is ignored. While a stream's inbound records are being delivered (a dispatch may
 * close its own connection, which resets the stream), the stream is marked busy
 * and its memory is released only when the delivery unwinds.
 *
 * Outbound, each record is encrypted straight into the socket's batch (ops->reserve
 * and ops->commit: the frame's protobuf head, then the ciphertext, then the WebSocket
 * header and mask in place): one copy of the bytes, the encryption's, where there were
 * three. Records are made only while the socket has less than RELAY_SEND_HIGH queued:
 * the rest of a message waits in its stream's queue (the caller's storage, taken, not
 * copied) and goes on when the socket drains (relay_demux_drained), a record per
 * waiting stream in turn. A 32 MiB file read no longer becomes 43 MB of frames in
 * freshly faulted memory before the first byte leaves. The sink accounts a message as
 * a whole: queued when it is handed over, sent when its last frame is written. */
#include "remote/relay_demux.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/noise_key.h"
#include "proto/relay_frame.h"
#include "proto/relay_framing.h"
#include "proto/relay_order.h"
#include "proto/utf8.h"
#include "remote/relay_audit.h"
#include "util/bigbuf.h"
#include "util/mem.h"

enum stream_state { ST_PENDING, ST_LIVE };

/* Records are made while the socket has less than this queued. */
#define RELAY_SEND_HIGH (2u << 20)

/* A message of a live stream not yet made into records, whole or in part. */
struct out_msg {
    struct out_msg *next;
    char *mem;              /* its storage, owned (bigbuf_free_any) */
    struct relay_framer fr; /* where it stands; borrows from mem */
    size_t len;             /* as the sink accounted it */
    bool handed;            /* its last frame, with the sink's completion, is queued */
};

struct relay_stream {
    struct relay_demux *d;
    struct relay_stream *next;
    char *id;          /* stream_id (owned) */
    uint64_t instance; /* unique per demux, for stale validations */
    enum stream_state state;
    struct noise_ik_handshake *hs;    /* pending: msg 1 read, awaiting validation */
    struct registry_call *validation; /* pending: the /validate call in flight */
    struct noise_ik_transport *tx;    /* live */
    struct relay_order order;         /* live: inbound ciphertext in seq order */
    struct relay_reasm reasm;         /* live: inbound messages from records */
    uint32_t send_seq;                /* live: seq of the next outbound data frame */
    bool send_exhausted;              /* send_seq reached UINT32_MAX */
    void *sink;                       /* live: where its messages go (held until detach) */
    struct out_msg *out, **out_tail;  /* live: messages waiting for room on the socket */
    int busy;                         /* deliveries in progress */
    bool dead;                        /* unlinked; free once not busy */
};

struct relay_demux {
    uv_loop_t *loop;
    const struct relay_sink_kind *sinks; /* makes each live stream's sink */
    const struct noise_ik_static_key *identity;
    char *env_id, *reg_id;
    const struct relay_demux_ops *ops;
    void *arg;
    struct relay_stream *streams;
    unsigned live, pending, failures;
    unsigned streak;       /* failures since the last pause ended */
    uint64_t paused_until; /* loop time (ms) until which handshakes are refused */
    uint64_t next_instance;
    uint64_t served; /* instance of the stream the socket's room went to last */
};

/* Scratch for one record's plaintext / ciphertext (the loop is single-threaded). */
static uint8_t rec_buf[NOISE_IK_MAX_MESSAGE];

unsigned relay_demux_live(const struct relay_demux *d)
{
    return d->live;
}

unsigned relay_demux_pending(const struct relay_demux *d)
{
    return d->pending;
}

unsigned relay_demux_failures(const struct relay_demux *d)
{
    return d->failures;
}

bool relay_demux_paused(const struct relay_demux *d)
{
    return uv_now(d->loop) < d->paused_until;
}

struct relay_demux *relay_demux_new(uv_loop_t *loop, const struct noise_ik_static_key *identity,
                                    const char *environment_id, const char *registration_id,
                                    const struct relay_demux_ops *ops, void *arg,
                                    const struct relay_sink_kind *sinks)
{
    struct relay_demux *d = xcalloc(1, sizeof *d);
    d->loop = loop;
    d->sinks = sinks;
    d->identity = identity;
    d->env_id = xstrdup(environment_id);
    d->reg_id = xstrdup(registration_id);
    d->ops = ops;
    d->arg = arg;
    return d;
}

static struct relay_stream *find(struct relay_demux *d, const char *id, size_t n)
{
    for (struct relay_stream *s = d->streams; s; s = s->next)
        if (strlen(s->id) == n && memcmp(s->id, id, n) == 0) return s;
    return NULL;
}

/* Sends one control or handshake frame (no accounting: not a sink's message). */
static void send_frame(struct relay_demux *d, const struct relay_frame *f)
{
    uint8_t *out;
    size_t n;
    if (relay_frame_encode_alloc(f, &out, &n) < 0) return;
    d->ops->send(d->arg, out, n, NULL, NULL);
    free(out);
}

static void send_reset_id(struct relay_demux *d, const char *id, size_t n)
{
    struct relay_frame f = {.version = RELAY_FRAME_VERSION,
                            .stream_id = {id, n},
                            .body = RELAY_BODY_RESET,
                            .reason = {RELAY_RESET_REASON, strlen(RELAY_RESET_REASON)}};
    send_frame(d, &f);
}

/* Drops the messages s still had to send: the sink hears that each failed. */
static void out_drop(struct relay_stream *s, void *sink)
{
    while (s->out) {
        struct out_msg *m = s->out;
        s->out = m->next;
        if (sink) s->d->sinks->ops->sent(sink, m->len, -ECONNRESET);
        bigbuf_free_any(m->mem);
        free(m);
    }
    s->out_tail = &s->out;
}

static void stream_release(struct relay_stream *s)
{
    noise_ik_handshake_free(s->hs);
    noise_ik_transport_free(s->tx);
    relay_order_free(&s->order);
    relay_reasm_free(&s->reasm);
    free(s->id);
    free(s);
}

/* Unlinks s and tears it down. notify_sink: close its sink (false when the sink
 * is the one closing). */
static void stream_remove(struct relay_stream *s, bool notify_sink)
{
    struct relay_demux *d = s->d;
    if (s->dead) return;
    s->dead = true;
    for (struct relay_stream **pp = &d->streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    if (s->state == ST_PENDING)
        d->pending--;
    else
        d->live--;
    if (s->validation) d->ops->cancel(d->arg, s->validation);
    s->validation = NULL;
    void *sink = s->sink;
    s->sink = NULL;
    out_drop(s, sink);
    if (sink) {
        if (notify_sink)
            d->sinks->ops->detach(sink);
        else
            d->sinks->ops->release(sink);
    }
    if (!s->busy) stream_release(s);
}

/* A protocol error on s: reset it at the peer and drop it. */
static void stream_fail(struct relay_stream *s, const char *why)
{
    if (s->dead) return;
    char idv[64], whyv[80];
    log_event("event=relay_stream noise_event=stream noise_outcome=error noise_reason=%s "
              "stream=%s",
              log_value(why, whyv, sizeof whyv), log_value(s->id, idv, sizeof idv));
    send_reset_id(s->d, s->id, strlen(s->id));
    stream_remove(s, true);
}

/* The failure budget, as 0.169.0 spends it (docs/REMOTE.md §8.5a): the 8th
 * failed handshake pauses every handshake for RELAY_PAUSE_MS (refused with a reset,
 * valid ones too); the socket stays open and live streams are untouched. */
static void count_failure(struct relay_demux *d)
{
    d->failures++;
    if (relay_demux_paused(d)) return;
    if (++d->streak >= RELAY_MAX_FAILED_HANDSHAKES) {
        d->streak = 0;
        d->paused_until = uv_now(d->loop) + RELAY_PAUSE_MS;
        log_warn("remote: pausing Noise relay handshakes for %u s after %u failures",
                 RELAY_PAUSE_MS / 1000, RELAY_MAX_FAILED_HANDSHAKES);
    }
}

/* A refused handshake for stream id (n bytes, not NUL-terminated): logged, reset. */
static void handshake_refused(struct relay_demux *d, const char *id, size_t n, const char *why)
{
    char idv[64], tmp[130];
    size_t k = n < sizeof tmp - 1 ? n : sizeof tmp - 1;
    memcpy(tmp, id, k);
    tmp[k] = '\0';
    log_event("event=relay_handshake noise_event=handshake noise_outcome=error noise_reason=%s "
              "stream=%s",
              why, log_value(tmp, idv, sizeof idv));
    send_reset_id(d, id, n);
}

static void handshake_failed(struct relay_demux *d, const char *id, size_t n, const char *why)
{
    handshake_refused(d, id, n, why);
    count_failure(d);
}

/* Drops a busy mark; frees the stream if it died meanwhile. Returns true if it did. */
static bool unbusy(struct relay_stream *s)
{
    if (--s->busy == 0 && s->dead) {
        stream_release(s);
        return true;
    }
    return false;
}

/* Whether the socket takes another record now. */
static bool socket_room(const struct relay_demux *d)
{
    return !d->ops->queued || d->ops->queued(d->arg) < RELAY_SEND_HIGH;
}

/* One record of m's on the socket; its last carries the sink's completion for the
 * whole message (m->handed). 0, or negative with the stream failed (a record whose
 * nonce is spent cannot be sent again), which completes every queued message. */
static int send_record(struct relay_stream *st, struct out_msg *m, const struct relay_chunk *ch)
{
    struct relay_demux *d = st->d;
    if (st->send_exhausted) {
        stream_fail(st, "sequence_exhausted");
        return -EOVERFLOW;
    }
    bool last = m->fr.started && m->fr.off == m->fr.len;
    rv_ws_sent_fn done = last ? d->sinks->ops->sent : NULL;
    void *done_arg = last ? st->sink : NULL;
    struct relay_frame f = {.version = RELAY_FRAME_VERSION,
                            .stream_id = {st->id, strlen(st->id)},
                            .body = RELAY_BODY_DATA,
                            .seq = st->send_seq,
                            .payload_len = ch->head_len + ch->body_len + NOISE_IK_TAG_BYTES};
    size_t ct_len, head = relay_frame_encoded_len(&f) - f.payload_len;
    uint8_t *out = NULL;
    if (d->ops->reserve && !(out = d->ops->reserve(d->arg, head + f.payload_len))) {
        stream_fail(st, "socket_closed");
        return -ENOTCONN;
    }
    int r = out ? relay_frame_encode_head(&f, out, &head) : 0;
    if (r == 0)
        r = noise_ik_transport_encrypt2(st->tx, ch->head, ch->head_len, ch->body, ch->body_len,
                                        out ? out + head : rec_buf,
                                        out ? f.payload_len : sizeof rec_buf, &ct_len);
    if (r < 0) {
        stream_fail(st, "encrypt_failed");
        return r;
    }
    if (st->send_seq == UINT32_MAX)
        st->send_exhausted = true;
    else
        st->send_seq++;
    if (out) {
        r = d->ops->commit(d->arg, done, done_arg, m->len);
    } else {
        /* An owner without in-place frames: encoded, then copied by its send. */
        uint8_t *enc;
        size_t n;
        f.payload = rec_buf;
        r = relay_frame_encode_alloc(&f, &enc, &n);
        if (r == 0) {
            r = d->ops->send(d->arg, enc, n, done, done_arg);
            free(enc);
        }
    }
    if (r < 0) {
        stream_fail(st, "send_failed");
        return r;
    }
    m->handed = last;
    return 0;
}

/* Makes records of m while the socket has room (one at most when `one`). true once
 * all of m is out; false also when the stream failed (m may be gone then). */
static bool out_pump(struct relay_stream *st, struct out_msg *m, bool one)
{
    struct relay_chunk ch;
    while (socket_room(st->d) && relay_framer_next(&m->fr, &ch)) {
        if (send_record(st, m, &ch) < 0) return false;
        if (one) break;
    }
    return m->handed;
}

/* Takes msg (a live stream's, accounted on its sink) to the socket: at once while
 * there is room, the rest into the stream's queue (mem, the storage, is kept there;
 * without one the rest is copied). Frees mem when done with it. */
static void stream_send(struct relay_stream *st, char *mem, const uint8_t *msg, size_t len,
                        const struct relay_framer *fr)
{
    void *sink = st->sink;
    struct out_msg m = {.mem = mem, .fr = *fr, .len = len};
    if (!st->out && out_pump(st, &m, false)) {
        bigbuf_free_any(mem);
        return;
    }
    if (st->dead) {
        /* It failed midway: its completion is this send's to give. */
        if (!m.handed) st->d->sinks->ops->sent(sink, len, -ECONNRESET);
        bigbuf_free_any(mem);
        return;
    }
    struct out_msg *q = xmalloc(sizeof *q);
    *q = m;
    q->next = NULL;
    if (!mem) {
        q->mem = xmemdup(msg, len);
        q->fr.msg = (const uint8_t *)q->mem; /* the framer's place stays the same */
    }
    *st->out_tail = q;
    st->out_tail = &q->next;
}

/* The stream's queue, while the socket has room: the head message's records, one at a
 * time when `one` (turns among streams). */
static void stream_pump(struct relay_stream *st, bool one)
{
    while (st->out && !st->dead && socket_room(st->d)) {
        struct out_msg *m = st->out;
        bool done = out_pump(st, m, one);
        if (st->dead) return; /* m went with the queue */
        if (done) {
            st->out = m->next;
            if (!st->out) st->out_tail = &st->out;
            bigbuf_free_any(m->mem);
            free(m);
        }
        if (one) return;
    }
}

/* Shared by both sends: checks, accounts, and sends or queues. */
static int send_msg(struct relay_stream *st, char *mem, const uint8_t *msg, size_t len)
{
    if (st->dead || st->state != ST_LIVE) {
        bigbuf_free_any(mem);
        return -ENOTCONN;
    }
    struct relay_framer fr;
    if (relay_framer_init(&fr, msg, len) < 0) {
        bigbuf_free_any(mem);
        stream_fail(st, "message_too_large");
        return -EMSGSIZE;
    }
    /* Accounting may close the connection (backlog limit), which resets and unlinks
     * the stream: keep it allocated until this send is done with it. */
    st->busy++;
    void *sink = st->sink;
    if (!st->d->sinks->ops->queued(sink, len)) {
        bigbuf_free_any(mem);
    } else if (st->dead) {
        st->d->sinks->ops->sent(sink, len, -ECONNRESET);
        bigbuf_free_any(mem);
    } else {
        stream_send(st, mem, msg, len, &fr);
    }
    int r = st->dead ? -ENOTCONN : 0;
    unbusy(st);
    return r;
}

int relay_stream_send(struct relay_stream *st, const uint8_t *msg, size_t len)
{
    return send_msg(st, NULL, msg, len);
}

int relay_stream_send_owned(struct relay_stream *st, char *mem, const uint8_t *msg, size_t len)
{
    return send_msg(st, mem, msg, len);
}

/* The waiting stream after the one served last (by instance, round robin), or NULL.
 * Looked up afresh for every record: a record's send may end other streams. */
static struct relay_stream *next_waiting(struct relay_demux *d)
{
    struct relay_stream *first = NULL, *after = NULL;
    for (struct relay_stream *s = d->streams; s; s = s->next) {
        if (!s->out || s->dead) continue;
        if (!first || s->instance < first->instance) first = s;
        if (s->instance > d->served && (!after || s->instance < after->instance)) after = s;
    }
    return after ? after : first;
}

void relay_demux_drained(struct relay_demux *d)
{
    /* A record of each waiting stream in turn, so one large reply does not hold the
     * others back. */
    struct relay_stream *s;
    while (socket_room(d) && (s = next_waiting(d))) {
        d->served = s->instance;
        s->busy++;
        stream_pump(s, true);
        unbusy(s);
    }
}

void relay_stream_sink_closed(struct relay_stream *st)
{
    /* The stream's processor ended: the reference resets the stream then. */
    if (st->dead) return;
    send_reset_id(st->d, st->id, strlen(st->id));
    stream_remove(st, false);
}

static int on_message(void *ctx, const uint8_t *msg, size_t len)
{
    struct relay_stream *s = ctx;
    if (s->dead || !s->sink) return -ENOTCONN;
    s->d->sinks->ops->deliver(s->sink, msg, len);
    return s->dead ? -ENOTCONN : 0;
}

static int on_record(void *ctx, uint32_t seq, const uint8_t *rec, size_t len)
{
    struct relay_stream *s = ctx;
    static uint8_t plain[NOISE_IK_MAX_MESSAGE];
    size_t n;
    int r = noise_ik_transport_decrypt(s->tx, rec, len, plain, sizeof plain, &n);
    if (r < 0) return r;
    return relay_reasm_push(&s->reasm, plain, n, on_message, s);
}

static void on_data(struct relay_demux *d, const struct relay_frame *f)
{
    struct relay_stream *s = find(d, f->stream_id.ptr, f->stream_id.len);
    if (!s || s->state == ST_PENDING) {
        /* Unknown stream, or early data during validation (counts as a failure). */
        if (s) {
            stream_remove(s, true);
            handshake_failed(d, f->stream_id.ptr, f->stream_id.len, "early_data");
        } else {
            send_reset_id(d, f->stream_id.ptr, f->stream_id.len);
        }
        return;
    }
    s->busy++;
    int r = relay_order_push(&s->order, f->seq, f->payload, f->payload_len, on_record, s);
    if (unbusy(s) || s->dead) return;
    if (r < 0) stream_fail(s, r == -EBADMSG ? "decrypt_failed" : relay_strerror(r));
}

/* The registry answered /validate 401: our own credentials were refused. 0.169.0
 * completes the handshake with a msg 2 that says so (an authenticated signal the
 * harness reports as "executor credentials rejected" and does not retry), then
 * forgets the stream: no reset, no live stream. */
static void reject_credentials(struct relay_stream *s)
{
    struct relay_demux *d = s->d;
    static const char why[] = NOISE_IK_REGISTRY_REJECTED;
    uint8_t msg2[NOISE_IK_MSG2_BYTES + sizeof why - 1];
    size_t n;
    char idv[64];
    log_warn("remote: the registry rejected our credentials (/validate answered 401); "
             "telling the harness on stream %s",
             log_value(s->id, idv, sizeof idv));
    if (noise_ik_write_message2_payload(s->hs, (const uint8_t *)why, sizeof why - 1, msg2,
                                        sizeof msg2, &n) < 0) {
        stream_fail(s, "handshake_failed");
        count_failure(d);
        return;
    }
    struct relay_frame f = {.version = RELAY_FRAME_VERSION,
                            .stream_id = {s->id, strlen(s->id)},
                            .body = RELAY_BODY_HANDSHAKE,
                            .payload = msg2,
                            .payload_len = n};
    send_frame(d, &f);
    stream_remove(s, true);
    count_failure(d);
}

static void on_validated(void *arg, enum registry_verdict verdict)
{
    struct relay_stream *s = arg;
    struct relay_demux *d = s->d;
    s->validation = NULL; /* the call freed itself */
    relay_audit_login(s->id, d->reg_id, noise_ik_remote_static(s->hs), verdict);
    char idv[64];
    if (verdict == REGISTRY_CREDENTIALS_REJECTED) {
        reject_credentials(s);
        return;
    }
    if (verdict != REGISTRY_VALID) {
        log_event("event=relay_handshake noise_event=authorization noise_outcome=error "
                  "noise_reason=rejected stream=%s",
                  log_value(s->id, idv, sizeof idv));
        send_reset_id(d, s->id, strlen(s->id));
        stream_remove(s, true);
        count_failure(d);
        return;
    }
    uint8_t msg2[NOISE_IK_MSG2_BYTES];
    if (noise_ik_write_message2(s->hs, msg2) < 0 || noise_ik_transport_new(s->hs, &s->tx) < 0) {
        stream_fail(s, "handshake_failed");
        count_failure(d);
        return;
    }
    noise_ik_handshake_free(s->hs);
    s->hs = NULL;
    struct relay_frame f = {.version = RELAY_FRAME_VERSION,
                            .stream_id = {s->id, strlen(s->id)},
                            .body = RELAY_BODY_HANDSHAKE,
                            .payload = msg2,
                            .payload_len = sizeof msg2};
    send_frame(d, &f);
    if (s->dead) return;
    d->pending--;
    d->live++;
    s->state = ST_LIVE;
    s->out_tail = &s->out;
    relay_order_init(&s->order);
    relay_reasm_init(&s->reasm);
    s->sink = d->sinks->open(d->sinks, d->loop, s, s->id);
    if (!s->sink) {
        stream_fail(s, "sink_refused");
        return;
    }
    log_event("event=relay_stream noise_event=handshake noise_outcome=ok stream=%s live=%u",
              log_value(s->id, idv, sizeof idv), d->live);
}

static void on_handshake(struct relay_demux *d, const struct relay_frame *f)
{
    const char *id = f->stream_id.ptr;
    size_t idn = f->stream_id.len;
    struct relay_stream *old = find(d, id, idn);
    if (old) {
        bool was_pending = old->state == ST_PENDING;
        stream_remove(old, true);
        if (was_pending)
            handshake_failed(d, id, idn, "duplicate_handshake");
        else
            send_reset_id(d, id, idn);
        return;
    }
    if (d->live >= RELAY_MAX_LIVE_STREAMS || d->pending >= RELAY_MAX_PENDING_STREAMS) {
        send_reset_id(d, id, idn);
        return;
    }
    if (relay_demux_paused(d)) {
        handshake_refused(d, id, idn, "cooldown"); /* not counted */
        return;
    }
    if (idn > 128) {
        handshake_failed(d, id, idn, "stream_id_too_long");
        return;
    }
    /* The id travels in an HTTP header of /validate: visible ASCII only (a harness's
     * UUIDv4 always is), so nothing can be injected into the request. */
    for (size_t i = 0; i < idn; i++) {
        if (id[i] <= 0x20 || id[i] >= 0x7f) {
            handshake_failed(d, id, idn, "stream_id_not_ascii");
            return;
        }
    }
    char *sid = xstrndup(id, idn);
    size_t plen;
    uint8_t *prologue = noise_ik_prologue(d->env_id, d->reg_id, sid, &plen);
    struct noise_ik_handshake *hs = NULL;
    int r = noise_ik_responder_new(&hs, d->identity, prologue, plen, NULL, NULL);
    free(prologue);
    const uint8_t *payload = NULL;
    size_t payload_len = 0;
    if (r == 0) r = noise_ik_read_message1(hs, f->payload, f->payload_len, &payload, &payload_len);
    const char *why = NULL;
    if (r < 0)
        why = "bad_message1";
    else if (payload_len == 0 || payload_len > RELAY_MAX_AUTHORIZATION)
        why = "authorization_size";
    else if (!utf8_valid(payload, payload_len) || memchr(payload, 0, payload_len))
        why = "authorization_not_utf8";
    if (why) {
        noise_ik_handshake_free(hs);
        free(sid);
        handshake_failed(d, id, idn, why);
        return;
    }
    struct relay_stream *s = xcalloc(1, sizeof *s);
    s->d = d;
    s->id = sid;
    s->instance = ++d->next_instance;
    s->state = ST_PENDING;
    s->hs = hs;
    s->next = d->streams;
    d->streams = s;
    d->pending++;
    json_t *kj = noise_ik_public_key_to_json(noise_ik_remote_static(hs));
    char *key_json = json_dumps(kj, JSON_COMPACT);
    json_decref(kj);
    char *auth = xstrndup((const char *)payload, payload_len);
    s->validation = d->ops->validate(d->arg, s->id, key_json, auth, on_validated, s);
    memset(auth, 0, payload_len);
    free(auth);
    free(key_json);
    if (!s->validation) {
        stream_remove(s, true);
        handshake_failed(d, id, idn, "validation_unavailable");
    }
}

void relay_demux_on_message(struct relay_demux *d, const uint8_t *p, size_t n)
{
    struct relay_frame f;
    int r = relay_frame_decode(p, n, &f);
    if (r < 0) {
        /* Not a frame we can route: dropped, never answered and never fatal to the
         * socket (what 0.169.0 does, REMOTE.md §8.3). */
        log_debug("remote: dropping an invalid relay frame (%s)", relay_strerror(r));
        return;
    }
    switch (f.body) {
    case RELAY_BODY_HANDSHAKE: on_handshake(d, &f); break;
    case RELAY_BODY_DATA: on_data(d, &f); break;
    case RELAY_BODY_RESET: {
        /* Unauthenticated: drop the stream silently, log nothing of the reason. */
        struct relay_stream *s = find(d, f.stream_id.ptr, f.stream_id.len);
        if (s) stream_remove(s, true);
        break;
    }
    default: break; /* ack, resume, heartbeat: ignored */
    }
}

void relay_demux_free(struct relay_demux *d)
{
    if (!d) return;
    while (d->streams)
        stream_remove(d->streams, true);
    free(d->env_id);
    free(d->reg_id);
    free(d);
}
