/* Unit tests of remote mode's pure parts: the harness relay stream (ec_relay) against
 * an executor played here with the same shared modules (noise_ik responder,
 * relay_frame, relay_order, relay_framing), the connect-bundle checks and the registry
 * retry policy. Frames in, frames and messages out; no sockets. */
#include "ec_registry.h"
#include "ec_relay.h"

#include "proto/noise_key.h"
#include "proto/relay_frame.h"
#include "proto/relay_framing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"

/* ---- a captured frame list and message list ---- */

struct blob {
    uint8_t *p;
    size_t n;
};

struct sink {
    struct blob frames[256];
    size_t nframes;
    struct blob msgs[16];
    size_t nmsgs;
    int fail_emit; /* emit returns this when non-zero */
};

static int sink_emit(void *ud, const uint8_t *frame, size_t len)
{
    struct sink *s = ud;
    if (s->fail_emit) return s->fail_emit;
    if (s->nframes < 256) {
        s->frames[s->nframes].p = malloc(len);
        memcpy(s->frames[s->nframes].p, frame, len);
        s->frames[s->nframes++].n = len;
    }
    return 0;
}

static void sink_msg(void *ud, const char *text, size_t len)
{
    struct sink *s = ud;
    if (s->nmsgs < 16) {
        s->msgs[s->nmsgs].p = malloc(len + 1);
        memcpy(s->msgs[s->nmsgs].p, text, len);
        s->msgs[s->nmsgs].p[len] = 0;
        s->msgs[s->nmsgs++].n = len;
    }
}

static void sink_clear(struct sink *s)
{
    for (size_t i = 0; i < s->nframes; i++)
        free(s->frames[i].p);
    for (size_t i = 0; i < s->nmsgs; i++)
        free(s->msgs[i].p);
    memset(s, 0, sizeof *s);
}

/* ---- the executor side, built from the shared modules ---- */

struct exec_side {
    struct noise_ik_static_key key;
    struct noise_ik_handshake *hs;
    struct noise_ik_transport *tx;
    struct relay_reasm rx;
    uint32_t send_seq;
    char got[1 << 20]; /* the last message received */
    size_t got_len;
    int got_count;
};

static int exec_on_msg(void *ctx, const uint8_t *msg, size_t len)
{
    struct exec_side *e = ctx;
    if (len < sizeof e->got) {
        memcpy(e->got, msg, len);
        e->got_len = len;
    }
    e->got_count++;
    return 0;
}

/* One data frame of the client's, decrypted and reassembled in order. */
static void exec_take_data(struct exec_side *e, const struct relay_frame *f)
{
    static uint8_t plain[NOISE_IK_MAX_MESSAGE];
    size_t n = 0;
    CHECK(noise_ik_transport_decrypt(e->tx, f->payload, f->payload_len, plain, sizeof plain, &n) ==
          0);
    CHECK(relay_reasm_push(&e->rx, plain, n, exec_on_msg, e) == 0);
}

/* Encrypts text as one framed message from the executor; returns the data frames
 * (caller frees each .p), at most max. */
static size_t exec_send(struct exec_side *e, const char *stream, const char *text, struct blob *out,
                        size_t max)
{
    struct relay_framer fr;
    CHECK(relay_framer_init(&fr, text, strlen(text)) == 0);
    struct relay_chunk ch;
    size_t k = 0;
    static uint8_t plain[NOISE_IK_MAX_MESSAGE], ct[NOISE_IK_MAX_MESSAGE + 16];
    while (relay_framer_next(&fr, &ch) && k < max) {
        if (ch.head_len) memcpy(plain, ch.head, ch.head_len);
        memcpy(plain + ch.head_len, ch.body, ch.body_len);
        size_t clen = 0;
        CHECK(noise_ik_transport_encrypt(e->tx, plain, ch.head_len + ch.body_len, ct, sizeof ct,
                                         &clen) == 0);
        struct relay_frame f = {.version = 1,
                                .stream_id = {stream, strlen(stream)},
                                .body = RELAY_BODY_DATA,
                                .seq = e->send_seq++,
                                .payload = ct,
                                .payload_len = clen};
        CHECK(relay_frame_encode_alloc(&f, &out[k].p, &out[k].n) == 0);
        k++;
    }
    return k;
}

static struct blob frame_of(const char *stream, enum relay_body body, const uint8_t *payload,
                            size_t len, uint32_t seq)
{
    struct relay_frame f = {.version = 1, .stream_id = {stream, strlen(stream)}, .body = body};
    f.seq = seq;
    f.payload = payload;
    f.payload_len = len;
    if (body == RELAY_BODY_RESET) f.reason = (struct relay_str){"noise_relay_protocol_error", 26};
    struct blob b = {0};
    CHECK(relay_frame_encode_alloc(&f, &b.p, &b.n) == 0);
    return b;
}

/* Starts a client stream toward e; leaves the client in HANDSHAKE with its two frames
 * in s and e's responder having read msg 1. */
static void open_stream(struct ec_relay *r, struct sink *s, struct exec_side *e,
                        const struct noise_ik_static_key *harness,
                        const struct noise_ik_public_key *pinned)
{
    struct ec_relay_params p = {.self = harness,
                                .executor = pinned,
                                .environment_id = "env-1",
                                .registration_id = "reg-1",
                                .authorization = "hka-secret"};
    CHECK(ec_relay_start(r, &p, sink_emit, sink_msg, s) == 0);
    CHECK(r->state == EC_RELAY_HANDSHAKE);
    CHECK(s->nframes == 2);
    /* UUIDv4 text. */
    CHECK(strlen(r->stream_id) == 36 && r->stream_id[14] == '4' && r->stream_id[8] == '-');
    struct relay_frame f;
    CHECK(relay_frame_decode(s->frames[0].p, s->frames[0].n, &f) == 0);
    CHECK(f.body == RELAY_BODY_RESUME && f.next_seq == 0);
    CHECK(f.stream_id.len == 36 && memcmp(f.stream_id.ptr, r->stream_id, 36) == 0);
    CHECK(relay_frame_decode(s->frames[1].p, s->frames[1].n, &f) == 0);
    CHECK(f.body == RELAY_BODY_HANDSHAKE);
    CHECK(f.payload_len == NOISE_IK_MSG1_OVERHEAD + strlen("hka-secret"));
    size_t plen = 0;
    uint8_t *pro = noise_ik_prologue("env-1", "reg-1", r->stream_id, &plen);
    CHECK(noise_ik_responder_new(&e->hs, &e->key, pro, plen, NULL, NULL) == 0);
    free(pro);
    const uint8_t *payload = NULL;
    size_t pl = 0;
    CHECK(e->hs && noise_ik_read_message1(e->hs, f.payload, f.payload_len, &payload, &pl) == 0);
    CHECK(pl == strlen("hka-secret") && memcmp(payload, "hka-secret", pl) == 0);
    /* The executor learns exactly our static key. */
    const struct noise_ik_public_key *who = noise_ik_remote_static(e->hs);
    CHECK(who && memcmp(who, &harness->pub, sizeof *who) == 0);
}

static void test_stream_roundtrip(void)
{
    struct noise_ik_static_key harness;
    struct exec_side *e = calloc(1, sizeof *e);
    CHECK(noise_ik_static_key_generate(&harness, NULL, NULL) == 0);
    CHECK(noise_ik_static_key_generate(&e->key, NULL, NULL) == 0);
    relay_reasm_init(&e->rx);
    struct ec_relay r;
    struct sink s = {0};
    open_stream(&r, &s, e, &harness, &e->key.pub);
    char sid[37];
    memcpy(sid, r.stream_id, sizeof sid);

    /* Frames of other streams and control frames are ignored. */
    struct blob other = frame_of("someone-else", RELAY_BODY_RESET, NULL, 0, 0);
    CHECK(ec_relay_on_frame(&r, other.p, other.n) == 0 && r.state == EC_RELAY_HANDSHAKE);
    free(other.p);
    struct blob ack = frame_of(sid, RELAY_BODY_ACK, NULL, 0, 0);
    CHECK(ec_relay_on_frame(&r, ack.p, ack.n) == 0 && r.state == EC_RELAY_HANDSHAKE);
    /* Sending before the handshake completes is refused without spending anything. */
    CHECK(ec_relay_send(&r, "{}", 2) == -ENOTCONN);

    uint8_t m2[NOISE_IK_MSG2_BYTES];
    CHECK(noise_ik_write_message2(e->hs, m2) == 0);
    CHECK(noise_ik_transport_new(e->hs, &e->tx) == 0);
    struct blob hs2 = frame_of(sid, RELAY_BODY_HANDSHAKE, m2, sizeof m2, 0);
    CHECK(ec_relay_on_frame(&r, hs2.p, hs2.n) == 0);
    CHECK(r.state == EC_RELAY_OPEN);
    /* A second handshake on an open stream is fatal... checked on a copy below. */

    /* Client -> executor: a message spanning several records, with a trace. */
    size_t big = 150000;
    char *text = malloc(big + 200);
    int hdr = snprintf(text, 200,
                       "{\"id\":3,\"method\":\"process/start\",\"trace\":{\"traceparent\":"
                       "\"00-0123456789abcdef0123456789abcdef-0123456789abcdef-01\"},"
                       "\"params\":{\"x\":\"");
    memset(text + hdr, 'a', big);
    strcpy(text + hdr + big, "\"}}");
    size_t tlen = strlen(text);
    size_t before = s.nframes;
    CHECK(ec_relay_send(&r, text, tlen) == 0);
    size_t sent = s.nframes - before;
    CHECK(sent == relay_framer_record_count(tlen));
    CHECK(sent == 3);
    for (size_t i = 0; i < sent; i++) {
        struct relay_frame f;
        CHECK(relay_frame_decode(s.frames[before + i].p, s.frames[before + i].n, &f) == 0);
        CHECK(f.body == RELAY_BODY_DATA && f.seq == i);
        CHECK(f.payload_len <= RELAY_RECORD_PLAINTEXT_MAX + NOISE_IK_TAG_BYTES);
        /* §5.1: only the first frame of a request carries its trace. */
        CHECK((f.traceparent.ptr != NULL) == (i == 0));
        /* Nothing of the JSON in clear. */
        CHECK(!memmem(s.frames[before + i].p, s.frames[before + i].n, "process/start", 13));
        exec_take_data(e, &f);
    }
    CHECK(e->got_count == 1 && e->got_len == tlen && memcmp(e->got, text, tlen) == 0);
    /* A response (no trace fields whatever its body says). */
    before = s.nframes;
    const char *resp = "{\"id\":3,\"result\":{},\"trace\":{\"traceparent\":\"x\"}}";
    CHECK(ec_relay_send(&r, resp, strlen(resp)) == 0);
    struct relay_frame f1;
    CHECK(relay_frame_decode(s.frames[before].p, s.frames[before].n, &f1) == 0);
    CHECK(f1.seq == 3 && f1.traceparent.ptr == NULL);
    exec_take_data(e, &f1);
    free(text);

    /* Executor -> client: two messages, their frames delivered out of order and one
     * duplicated; the client hands them out in order, each once. */
    struct blob d[8];
    size_t n1 = exec_send(e, sid, "{\"method\":\"process/output\",\"params\":{\"seq\":1}}", d, 4);
    size_t n2 =
        exec_send(e, sid, "{\"method\":\"process/exited\",\"params\":{\"seq\":2}}", d + n1, 4);
    CHECK(n1 == 1 && n2 == 1);
    CHECK(ec_relay_on_frame(&r, d[1].p, d[1].n) == 0);
    CHECK(s.nmsgs == 0); /* held: seq 1 waits for seq 0 */
    CHECK(ec_relay_on_frame(&r, d[0].p, d[0].n) == 0);
    CHECK(ec_relay_on_frame(&r, d[0].p, d[0].n) == 0); /* duplicate: dropped */
    CHECK(s.nmsgs == 2);
    CHECK(s.nmsgs == 2 && strstr((char *)s.msgs[0].p, "process/output") &&
          strstr((char *)s.msgs[1].p, "process/exited"));
    for (size_t i = 0; i < n1 + n2; i++)
        free(d[i].p);

    /* A large executor message over several records. */
    char *big2 = malloc(200000);
    memset(big2, 'b', 199990);
    memcpy(big2, "{\"v\":\"", 6);
    strcpy(big2 + 199990 - 3, "\"}");
    struct blob dd[8];
    size_t nd = exec_send(e, sid, big2, dd, 8);
    CHECK(nd == 4);
    for (size_t i = 0; i < nd; i++) {
        CHECK(ec_relay_on_frame(&r, dd[i].p, dd[i].n) == 0);
        free(dd[i].p);
    }
    CHECK(s.nmsgs == 3 && s.msgs[2].n == strlen(big2) &&
          memcmp(s.msgs[2].p, big2, s.msgs[2].n) == 0);
    free(big2);

    /* A second handshake on the open stream fails it. */
    CHECK(ec_relay_on_frame(&r, hs2.p, hs2.n) < 0);
    CHECK(r.state == EC_RELAY_FAILED && strstr(r.error, "second handshake"));
    CHECK(ec_relay_send(&r, "{}", 2) == -ENOTCONN);
    free(hs2.p);
    free(ack.p);

    ec_relay_free(&r);
    CHECK(strstr(r.error, "second handshake")); /* the reason outlives the stream */
    sink_clear(&s);
    noise_ik_handshake_free(e->hs);
    noise_ik_transport_free(e->tx);
    relay_reasm_free(&e->rx);
    noise_ik_static_key_wipe(&e->key);
    noise_ik_static_key_wipe(&harness);
    free(e);
}

/* Pinning: an executor that does not own the pinned key cannot finish the handshake. */
static void test_pinning_and_failures(void)
{
    struct noise_ik_static_key harness, real;
    CHECK(noise_ik_static_key_generate(&harness, NULL, NULL) == 0);
    CHECK(noise_ik_static_key_generate(&real, NULL, NULL) == 0);
    struct exec_side *e = calloc(1, sizeof *e);
    CHECK(noise_ik_static_key_generate(&e->key, NULL, NULL) == 0);
    /* The client pins `real`; the responder holding another key fails msg 1 already. */
    struct ec_relay r;
    struct sink s = {0};
    struct ec_relay_params p = {.self = &harness,
                                .executor = &real.pub,
                                .environment_id = "env-1",
                                .registration_id = "reg-1",
                                .authorization = "a"};
    CHECK(ec_relay_start(&r, &p, sink_emit, sink_msg, &s) == 0);
    struct relay_frame f;
    CHECK(relay_frame_decode(s.frames[1].p, s.frames[1].n, &f) == 0);
    size_t plen = 0;
    uint8_t *pro = noise_ik_prologue("env-1", "reg-1", r.stream_id, &plen);
    CHECK(noise_ik_responder_new(&e->hs, &e->key, pro, plen, NULL, NULL) == 0);
    const uint8_t *pay;
    size_t pl;
    CHECK(noise_ik_read_message1(e->hs, f.payload, f.payload_len, &pay, &pl) != 0);
    noise_ik_handshake_free(e->hs);
    e->hs = NULL;
    /* A forged msg 2 (random bytes of the right size) is refused by the client. */
    uint8_t junk[NOISE_IK_MSG2_BYTES];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 31 + 7);
    struct blob fake = frame_of(r.stream_id, RELAY_BODY_HANDSHAKE, junk, sizeof junk, 0);
    CHECK(ec_relay_on_frame(&r, fake.p, fake.n) < 0 && r.state == EC_RELAY_FAILED);
    CHECK(strstr(r.error, "pinned") != NULL);
    free(fake.p);
    free(pro);
    ec_relay_free(&r);
    sink_clear(&s);

    /* Data before the handshake completes is fatal; so is a reset. */
    CHECK(ec_relay_start(&r, &p, sink_emit, sink_msg, &s) == 0);
    uint8_t one = 1;
    struct blob early = frame_of(r.stream_id, RELAY_BODY_DATA, &one, 1, 0);
    CHECK(ec_relay_on_frame(&r, early.p, early.n) < 0 && strstr(r.error, "before"));
    free(early.p);
    ec_relay_free(&r);
    sink_clear(&s);
    CHECK(ec_relay_start(&r, &p, sink_emit, sink_msg, &s) == 0);
    struct blob rst = frame_of(r.stream_id, RELAY_BODY_RESET, NULL, 0, 0);
    CHECK(ec_relay_on_frame(&r, rst.p, rst.n) == -ECONNRESET && strstr(r.error, "reset"));
    free(rst.p);
    ec_relay_free(&r);
    sink_clear(&s);
    /* Garbage is a protocol error, not a crash. */
    CHECK(ec_relay_start(&r, &p, sink_emit, sink_msg, &s) == 0);
    uint8_t garbage[] = {0xff, 0xff, 0xff};
    CHECK(ec_relay_on_frame(&r, garbage, sizeof garbage) < 0 && r.state == EC_RELAY_FAILED);
    ec_relay_free(&r);
    sink_clear(&s);
    /* A failing emit fails the start. */
    s.fail_emit = -EPIPE;
    CHECK(ec_relay_start(&r, &p, sink_emit, sink_msg, &s) < 0 && r.state == EC_RELAY_FAILED);
    ec_relay_free(&r);
    sink_clear(&s);

    /* The reset frame for an abandoned stream. */
    uint8_t *rb = NULL;
    size_t rl = 0;
    CHECK(ec_relay_reset_frame("s1", "x", &rb, &rl) == 0);
    static const uint8_t want[] = {0x08, 0x01, 0x12, 0x02, 0x73, 0x31,
                                   0x42, 0x03, 0x0a, 0x01, 0x78};
    CHECK(rl == sizeof want && memcmp(rb, want, rl) == 0);
    free(rb);
    noise_ik_static_key_wipe(&harness);
    noise_ik_static_key_wipe(&real);
    noise_ik_static_key_wipe(&e->key);
    free(e);
}

static void test_bundle(void)
{
    struct noise_ik_static_key k;
    CHECK(noise_ik_static_key_generate(&k, NULL, NULL) == 0);
    json_t *key = noise_ik_public_key_to_json(&k.pub);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s}", "environment_id", "env-1", "url",
                            "ws://127.0.0.1:1/x?role=harness&sig=s", "security_profile",
                            "noise_hybrid_ik_v1", "executor_registration_id", "reg-1",
                            "executor_public_key", key, "harness_key_authorization", "hka");
    char *text = json_dumps(doc, 0);
    struct ec_bundle b;
    ec_error err = {0};
    CHECK(ec_bundle_parse(text, strlen(text), "env-1", &b, &err) == 0);
    CHECK(b.url && strcmp(b.registration_id, "reg-1") == 0 && strcmp(b.authorization, "hka") == 0);
    CHECK(memcmp(&b.executor_key, &k.pub, sizeof k.pub) == 0);
    ec_bundle_clear(&b);
    free(text);
    /* Another environment, another profile, a blank field, a bad key: all refused. */
    CHECK(ec_bundle_parse("{}", 2, "env-1", &b, &err) != 0);
    struct {
        const char *member;
        json_t *value;
    } bad[] = {{"environment_id", json_string("env-2")},
               {"security_profile", json_string("plain")},
               {"harness_key_authorization", json_string("  ")},
               {"url", json_string("")},
               {"executor_public_key", json_pack("{s:s}", "suite", "x")}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *d2 = json_deep_copy(doc);
        json_object_set_new(d2, bad[i].member, bad[i].value);
        char *t2 = json_dumps(d2, 0);
        CHECK(ec_bundle_parse(t2, strlen(t2), "env-1", &b, &err) == -EC_ERR_PROTOCOL);
        free(t2);
        json_decref(d2);
    }
    CHECK(ec_bundle_parse("not json", 8, "env-1", &b, &err) == -EC_ERR_PROTOCOL);
    json_decref(doc);
    json_decref(key);
    noise_ik_static_key_wipe(&k);
}

static void test_retry_policy(void)
{
    CHECK(ec_registry_transient(0, NULL));
    CHECK(ec_registry_transient(500, NULL) && ec_registry_transient(503, "x"));
    CHECK(ec_registry_transient(408, NULL) && ec_registry_transient(429, NULL));
    CHECK(ec_registry_transient(409, "environment_offline"));
    CHECK(!ec_registry_transient(409, "conflict") && !ec_registry_transient(409, NULL));
    CHECK(!ec_registry_transient(400, NULL) && !ec_registry_transient(401, NULL));
    CHECK(!ec_registry_transient(403, NULL) && !ec_registry_transient(404, NULL));
    int base[] = {500, 1000, 2000, 4000, 5000, 5000};
    for (unsigned a = 0; a < 6; a++) {
        int d = ec_registry_backoff_ms(a);
        CHECK(d >= base[a] && d <= base[a] + base[a] / 2);
        CHECK(d == ec_registry_backoff_ms(a)); /* deterministic */
    }
}

static void test_uuid(void)
{
    char a[37], b[37];
    CHECK(ec_relay_uuid4(a, NULL, NULL) == 0 && ec_relay_uuid4(b, NULL, NULL) == 0);
    CHECK(strcmp(a, b) != 0 && strlen(a) == 36);
    CHECK(a[14] == '4' && strchr("89ab", a[19]) != NULL);
}

/* The executor's msg 2 may carry its word that the registry refused its credentials:
 * the stream fails with that reason, marked so the client stops retrying. */
static void test_credentials_rejected(void)
{
    struct noise_ik_static_key harness;
    struct exec_side *e = calloc(1, sizeof *e);
    CHECK(noise_ik_static_key_generate(&harness, NULL, NULL) == 0);
    CHECK(noise_ik_static_key_generate(&e->key, NULL, NULL) == 0);
    relay_reasm_init(&e->rx);
    for (int unknown = 0; unknown < 2; unknown++) {
        struct ec_relay r;
        struct sink s = {0};
        open_stream(&r, &s, e, &harness, &e->key.pub);
        const char *said = unknown ? "something else" : NOISE_IK_REGISTRY_REJECTED;
        uint8_t m2[NOISE_IK_MSG2_BYTES + 64];
        size_t n = 0;
        CHECK(noise_ik_write_message2_payload(e->hs, (const uint8_t *)said, strlen(said), m2,
                                              sizeof m2, &n) == 0);
        struct blob hs2 = frame_of(r.stream_id, RELAY_BODY_HANDSHAKE, m2, n, 0);
        CHECK(ec_relay_on_frame(&r, hs2.p, hs2.n) < 0 && r.state == EC_RELAY_FAILED);
        CHECK(r.credentials_rejected == !unknown);
        CHECK(strstr(r.error, unknown ? "unknown payload" : "executor credentials rejected"));
        free(hs2.p);
        noise_ik_handshake_free(e->hs);
        e->hs = NULL;
        ec_relay_free(&r);
        sink_clear(&s);
    }
    free(e);
}

int main(void)
{
    test_credentials_rejected();
    test_stream_roundtrip();
    test_pinning_and_failures();
    test_bundle();
    test_retry_policy();
    test_uuid();
    EC_CHECK_EXIT("test_ec_remote");
}
