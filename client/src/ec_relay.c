/* ec_relay: the harness end of one relay virtual stream; see ec_relay.h. Sans I/O:
 * frames leave through the emit callback and messages through on_message. */
#include "ec_relay.h"

#include "crypto/random.h"
#include "proto/relay_frame.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One record's ciphertext (at most a Noise message); with its frame it stays far
 * below the 256 KiB WebSocket cap. */
#define EC_RELAY_SCRATCH (NOISE_IK_MAX_MESSAGE + 64)

static int fail(struct ec_relay *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ec_relay *r, int code, const char *fmt, ...)
{
    if (r->state != EC_RELAY_FAILED) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->error, sizeof r->error, fmt, ap);
        va_end(ap);
        r->state = EC_RELAY_FAILED;
    }
    return code < 0 ? code : -EPROTO;
}

/* The kernel's CSPRNG when the caller gives none (the Noise engine draws its own). */
static int rng_default(void *ctx, uint8_t *out, size_t n)
{
    (void)ctx;
    crypto_random_bytes(out, n);
    return 0;
}

int ec_relay_uuid4(char out[37], noise_ik_rng_fn rng, void *rng_ctx)
{
    uint8_t b[16];
    int rc = (rng ? rng : rng_default)(rng_ctx, b, sizeof b);
    if (rc) return rc;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

static int emit_frame(struct ec_relay *r, const struct relay_frame *f)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = relay_frame_encode_alloc(f, &buf, &n);
    if (rc) return fail(r, rc, "cannot encode a relay frame: %s", relay_strerror(rc));
    rc = r->emit(r->ud, buf, n);
    free(buf);
    return rc;
}

static void frame_init(struct ec_relay *r, struct relay_frame *f, enum relay_body body)
{
    memset(f, 0, sizeof *f);
    f->version = RELAY_FRAME_VERSION;
    f->stream_id.ptr = r->stream_id;
    f->stream_id.len = strlen(r->stream_id);
    f->body = body;
}

int ec_relay_start(struct ec_relay *r, const struct ec_relay_params *p, ec_relay_emit_fn emit,
                   ec_relay_message_fn on_message, void *ud)
{
    memset(r, 0, sizeof *r);
    relay_order_init(&r->order);
    relay_reasm_init(&r->rx);
    r->emit = emit;
    r->on_message = on_message;
    r->ud = ud;
    r->scratch = malloc(EC_RELAY_SCRATCH);
    if (!r->scratch) return fail(r, -ENOMEM, "out of memory");
    int rc;
    if (p->stream_id) {
        snprintf(r->stream_id, sizeof r->stream_id, "%s", p->stream_id);
    } else if ((rc = ec_relay_uuid4(r->stream_id, p->rng, p->rng_ctx)) != 0) {
        return fail(r, rc, "no randomness for the stream id");
    }
    size_t auth_len = strlen(p->authorization);
    if (auth_len > NOISE_IK_MAX_MSG1_PAYLOAD)
        return fail(r, -EMSGSIZE, "the registry's authorization is too long");
    size_t plen = 0;
    uint8_t *prologue =
        noise_ik_prologue(p->environment_id, p->registration_id, r->stream_id, &plen);
    if (!prologue) return fail(r, -ENOMEM, "out of memory");
    rc = noise_ik_initiator_new(&r->hs, p->self, p->executor, prologue, plen, p->rng, p->rng_ctx);
    free(prologue);
    if (rc) return fail(r, rc, "cannot start the Noise handshake");
    size_t mlen = 0;
    rc = noise_ik_write_message1(r->hs, (const uint8_t *)p->authorization, auth_len, r->scratch,
                                 EC_RELAY_SCRATCH, &mlen);
    if (rc) return fail(r, rc, "cannot write Noise message 1");
    r->state = EC_RELAY_HANDSHAKE;
    /* resume{next_seq 0} claims the stream id at the rendezvous before anything else. */
    struct relay_frame f;
    frame_init(r, &f, RELAY_BODY_RESUME);
    rc = emit_frame(r, &f);
    if (rc) return fail(r, rc, "cannot send the resume frame");
    frame_init(r, &f, RELAY_BODY_HANDSHAKE);
    f.payload = r->scratch;
    f.payload_len = mlen;
    rc = emit_frame(r, &f);
    if (rc) return fail(r, rc, "cannot send the handshake frame");
    return 0;
}

/* A reassembled message from the framing layer. */
static int on_plain_message(void *ctx, const uint8_t *msg, size_t len)
{
    struct ec_relay *r = ctx;
    r->on_message(r->ud, (const char *)msg, len);
    return 0;
}

/* The next ciphertext record in seq order: decrypt and feed the reassembler. */
static int on_record(void *ctx, uint32_t seq, const uint8_t *rec, size_t len)
{
    struct ec_relay *r = ctx;
    (void)seq;
    size_t n = 0;
    int rc = noise_ik_transport_decrypt(r->tx, rec, len, r->scratch, EC_RELAY_SCRATCH, &n);
    if (rc) return fail(r, rc, "a relay record did not decrypt");
    rc = relay_reasm_push(&r->rx, r->scratch, n, on_plain_message, r);
    if (rc) return fail(r, rc, "bad message framing: %s", relay_strerror(rc));
    return 0;
}

int ec_relay_on_frame(struct ec_relay *r, const uint8_t *buf, size_t len)
{
    if (r->state == EC_RELAY_FAILED) return -EPROTO;
    struct relay_frame f;
    int rc = relay_frame_decode(buf, len, &f);
    if (rc) return fail(r, rc, "bad relay frame from the rendezvous: %s", relay_strerror(rc));
    /* Only our stream matters; the socket carries nothing else for us. */
    if (f.stream_id.len != strlen(r->stream_id) ||
        memcmp(f.stream_id.ptr, r->stream_id, f.stream_id.len) != 0)
        return 0;
    switch (f.body) {
    case RELAY_BODY_RESET:
        /* The reason is unauthenticated: reported, never acted on beyond the drop. */
        return fail(r, -ECONNRESET, "the executor reset the relay stream (%.*s)",
                    (int)(f.reason.len > 64 ? 64 : f.reason.len), f.reason.ptr);
    case RELAY_BODY_HANDSHAKE:
        if (r->state != EC_RELAY_HANDSHAKE)
            return fail(r, -EPROTO, "a second handshake frame on an open relay stream");
        {
            /* An authenticated msg 2 may carry one payload: the executor's word that
             * the registry refused its credentials (0.169.0). Not a stream to use, and
             * nothing a retry would change. */
            uint8_t said[64];
            size_t said_len = 0;
            rc = noise_ik_read_message2_payload(r->hs, f.payload, f.payload_len, said, sizeof said,
                                                &said_len);
            if (rc)
                return fail(r, rc,
                            "the executor failed the Noise handshake (not the pinned "
                            "key, or altered bytes)");
            if (said_len == strlen(NOISE_IK_REGISTRY_REJECTED) &&
                memcmp(said, NOISE_IK_REGISTRY_REJECTED, said_len) == 0) {
                r->credentials_rejected = true;
                return fail(r, -EACCES,
                            "environment registry authentication error: executor "
                            "credentials rejected");
            }
            if (said_len)
                return fail(r, -EPROTO, "the executor's handshake carried an unknown payload");
        }
        rc = noise_ik_transport_new(r->hs, &r->tx);
        if (rc) return fail(r, rc, "cannot split the Noise handshake");
        noise_ik_handshake_free(r->hs);
        r->hs = NULL;
        r->state = EC_RELAY_OPEN;
        return 0;
    case RELAY_BODY_DATA:
        if (r->state != EC_RELAY_OPEN)
            return fail(r, -EPROTO, "data before the relay handshake completed");
        rc = relay_order_push(&r->order, f.seq, f.payload, f.payload_len, on_record, r);
        if (rc) return fail(r, rc, "relay ordering failed: %s", relay_strerror(rc));
        return 0;
    default: return 0; /* ack, resume, heartbeat: ignored (REMOTE.md §2.3) */
    }
}

/* traceparent/tracestate of a request's top-level "trace" object (§5.1), copied into
 * tp/ts (empty when absent). Responses and notifications never carry one. */
static void request_trace(const char *text, size_t len, char *tp, size_t tpcap, char *ts,
                          size_t tscap)
{
    tp[0] = ts[0] = 0;
    if (!memmem(text, len, "\"trace\"", 7)) return; /* skip the parse on the hot path */
    json_t *doc = json_loadb(text, len, 0, NULL);
    json_t *tr = json_object_get(doc, "trace");
    if (json_is_object(tr) && json_object_get(doc, "method") && json_object_get(doc, "id")) {
        const char *a = json_string_value(json_object_get(tr, "traceparent"));
        const char *b = json_string_value(json_object_get(tr, "tracestate"));
        if (a && strlen(a) < tpcap) snprintf(tp, tpcap, "%s", a);
        if (b && strlen(b) < tscap) snprintf(ts, tscap, "%s", b);
    }
    json_decref(doc);
}

int ec_relay_send(struct ec_relay *r, const char *text, size_t len)
{
    if (r->state != EC_RELAY_OPEN) return -ENOTCONN;
    struct relay_framer fr;
    if (relay_framer_init(&fr, text, len) != 0)
        return -EMSGSIZE; /* refused before any nonce is spent: the stream lives on */
    char tp[256], ts[1024];
    request_trace(text, len, tp, sizeof tp, ts, sizeof ts);
    int rc = 0;
    bool first = true;
    struct relay_chunk ch;
    while (relay_framer_next(&fr, &ch)) {
        if (r->send_seq == UINT32_MAX) {
            rc = fail(r, -EOVERFLOW, "relay sequence numbers exhausted");
            break;
        }
        size_t clen = 0;
        rc = noise_ik_transport_encrypt2(r->tx, ch.head, ch.head_len, ch.body, ch.body_len,
                                         r->scratch, EC_RELAY_SCRATCH, &clen);
        if (rc) {
            fail(r, rc, "cannot encrypt a relay record");
            break;
        }
        struct relay_frame f;
        frame_init(r, &f, RELAY_BODY_DATA);
        f.seq = r->send_seq++;
        f.payload = r->scratch;
        f.payload_len = clen;
        if (first && tp[0]) {
            f.traceparent.ptr = tp;
            f.traceparent.len = strlen(tp);
        }
        if (first && ts[0]) {
            f.tracestate.ptr = ts;
            f.tracestate.len = strlen(ts);
        }
        first = false;
        rc = emit_frame(r, &f);
        if (rc) {
            fail(r, rc, "cannot send a relay data frame");
            break;
        }
    }
    return rc;
}

int ec_relay_reset_frame(const char *stream_id, const char *reason, uint8_t **out, size_t *len)
{
    struct relay_frame f;
    memset(&f, 0, sizeof f);
    f.version = RELAY_FRAME_VERSION;
    f.stream_id.ptr = stream_id;
    f.stream_id.len = strlen(stream_id);
    f.body = RELAY_BODY_RESET;
    f.reason.ptr = reason;
    f.reason.len = strlen(reason);
    return relay_frame_encode_alloc(&f, out, len);
}

void ec_relay_free(struct ec_relay *r)
{
    noise_ik_handshake_free(r->hs);
    noise_ik_transport_free(r->tx);
    relay_order_free(&r->order);
    relay_reasm_free(&r->rx);
    free(r->scratch);
    char keep[sizeof r->error];
    memcpy(keep, r->error, sizeof keep);
    memset(r, 0, sizeof *r);
    memcpy(r->error, keep, sizeof keep); /* the reason outlives the stream */
}
