/* Unit tests for the executor side of remote mode: rv_ws URL parsing and redaction,
 * the registry's JSON bodies and answer checks, the API-key host rule, and the
 * relay demux's handshake rules (REMOTE.md §2.6) against a real Noise initiator with
 * fake socket and registry callbacks: validation gates msg 2, the 4096-byte
 * authorization cap, the 32-pending limit, early data, duplicate handshakes, the
 * 8-failure budget, unknown streams and malformed frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/noise_ik.h"
#include "proto/noise_key.h"
#include "proto/relay_frame.h"
#include "remote/registry.h"
#include "remote/relay_demux.h"
#include "remote/remote.h"
#include "remote/rv_ws.h"
#include "rpc/dispatch.h"
#include "remote/relay_conn.h"

static void test_url_parse(void **state)
{
    struct rv_ws_url u;
    assert_int_equal(rv_ws_parse_url("ws://127.0.0.1:8080/a/b?role=environment&sig=x", &u), 0);
    assert_false(u.tls);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 8080);
    assert_string_equal(u.target, "/a/b?role=environment&sig=x");
    assert_int_equal(rv_ws_parse_url("wss://relay.example.com?x=1", &u), 0);
    assert_true(u.tls);
    assert_int_equal(u.port, 443);
    assert_string_equal(u.target, "/?x=1");
    assert_int_equal(rv_ws_parse_url("ws://[::1]:9/p#frag", &u), 0);
    assert_string_equal(u.host, "::1");
    assert_string_equal(u.target, "/p");
    assert_int_equal(rv_ws_parse_url("http://h/", &u), -EINVAL);
    assert_int_equal(rv_ws_parse_url("ws://user@h/", &u), -EINVAL);
    assert_int_equal(rv_ws_parse_url("ws://h:0/", &u), -EINVAL);
    assert_int_equal(rv_ws_parse_url("ws://h:70000/", &u), -EINVAL);
    assert_int_equal(rv_ws_parse_url("ws://h/a b", &u), -EINVAL);
    char out[128];
    rv_ws_url_redacted("wss://h/ws/environment/e?role=environment&sig=secret", out, sizeof out);
    assert_string_equal(out, "wss://h/ws/environment/e?<redacted>");
}

static const char KEY[] =
    "{\"suite\":\"S\",\"x25519_public_key\":\"A\",\"mlkem768_public_key\":\"B\"}";

static void test_registry_bodies(void **state)
{
    char *b = registry_register_body(KEY);
    assert_string_equal(b, "{\"security_profile\":\"noise_hybrid_ik_v1\",\"executor_public_key\":"
                           "{\"suite\":\"S\",\"x25519_public_key\":\"A\",\"mlkem768_public_key\":"
                           "\"B\"}}");
    free(b);
    b = registry_validate_body("reg-1", KEY, "hka-x");
    assert_string_equal(b,
                        "{\"executor_registration_id\":\"reg-1\",\"harness_public_key\":{\"suite\":"
                        "\"S\",\"x25519_public_key\":\"A\",\"mlkem768_public_key\":\"B\"},"
                        "\"harness_key_authorization\":\"hka-x\"}");
    free(b);
    assert_null(registry_register_body("[1]"));
}

static void test_registry_answers(void **state)
{
    struct registry_registration r;
    const char *why = NULL;
    const char *ok = "{\"environment_id\":\"e\",\"url\":\"ws://h/x\",\"security_profile\":"
                     "\"noise_hybrid_ik_v1\",\"executor_registration_id\":\"reg\",\"extra\":1}";
    assert_int_equal(registry_parse_register(ok, strlen(ok), "e", &r, &why), 0);
    assert_string_equal(r.url, "ws://h/x");
    assert_string_equal(r.registration_id, "reg");
    registry_registration_clear(&r);
    assert_int_equal(registry_parse_register(ok, strlen(ok), "other", &r, &why), -EPROTO);
    const char *prof = "{\"environment_id\":\"e\",\"url\":\"ws://h/x\",\"security_profile\":\"x\","
                       "\"executor_registration_id\":\"reg\"}";
    assert_int_equal(registry_parse_register(prof, strlen(prof), "e", &r, &why), -EPROTO);
    const char *blank = "{\"environment_id\":\"e\",\"url\":\" \",\"security_profile\":"
                        "\"noise_hybrid_ik_v1\",\"executor_registration_id\":\"reg\"}";
    assert_int_equal(registry_parse_register(blank, strlen(blank), "e", &r, &why), -EPROTO);
    assert_true(registry_parse_validate("{\"valid\":true}", 14));
    assert_false(registry_parse_validate("{\"valid\":false}", 15));
    assert_false(registry_parse_validate("{\"valid\":1}", 11));
    assert_false(registry_parse_validate("{}", 2));
    assert_false(registry_parse_validate("nope", 4));
}

/* REMOTE.md §8.6: the direct answer's checks. */
static void check_direct(const char *tr, const char *url, const char *env, int want)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"environment_id\":\"e\",\"transport\":\"%s\",\"registration_id\":\"r\","
             "\"url\":\"%s\"}",
             tr, url);
    struct registry_registration r;
    const char *why = NULL;
    assert_int_equal(registry_parse_direct_register(body, strlen(body), env, &r, &why), want);
    if (want == 0) assert_string_equal(r.url, url);
    registry_registration_clear(&r);
}

static void test_direct_answers(void **state)
{
    check_direct("direct_jsonrpc_v1", "wss://relay.example.com/d?x=1", "e", 0);
    check_direct("direct_jsonrpc_v1", "ws://127.0.0.1:9/d", "e", 0);
    check_direct("direct_jsonrpc_v1", "ws://localhost:9/d", "e", 0);
    check_direct("direct_jsonrpc_v1", "ws://relay.example.com/d", "e", -EPROTO);
    check_direct("direct_jsonrpc_v1", "https://relay.example.com/d", "e", -EPROTO);
    check_direct("direct_jsonrpc_v1", " ", "e", -EPROTO);
    check_direct("noise", "wss://relay.example.com/d", "e", -EPROTO);
    check_direct("direct_jsonrpc_v1", "wss://relay.example.com/d", "other", -EPROTO);
}

static void test_api_key_hosts(void **state)
{
    assert_true(remote_api_key_url_allowed("https://api.openai.com"));
    assert_true(remote_api_key_url_allowed("https://openai.org/x"));
    assert_true(remote_api_key_url_allowed("http://127.0.0.1:9"));
    assert_true(remote_api_key_url_allowed("http://localhost:9/"));
    assert_true(remote_api_key_url_allowed("https://[::1]:9"));
    assert_false(remote_api_key_url_allowed("http://api.openai.com"));
    assert_false(remote_api_key_url_allowed("https://evilopenai.com"));
    assert_false(remote_api_key_url_allowed("https://openai.com.evil.net"));
    assert_false(remote_api_key_url_allowed("https://user@openai.com"));
    assert_false(remote_api_key_url_allowed("http://127.0.0.1.evil.net"));
}

/* ---- the demux against fakes ---- */

#define MAX_SENT 256
struct fake {
    struct relay_frame sent[MAX_SENT];
    uint8_t *raw[MAX_SENT];
    int nsent;
    int validations;
    registry_validate_cb cb[64];
    void *cb_arg[64];
    char last_auth[8192];
};
static struct fake F;
static struct registry_call *const FAKE_CALL = (struct registry_call *)&F;

static int fake_send(void *arg, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg)
{
    assert_true(F.nsent < MAX_SENT);
    uint8_t *copy = malloc(n);
    memcpy(copy, p, n);
    F.raw[F.nsent] = copy;
    assert_int_equal(relay_frame_decode(copy, n, &F.sent[F.nsent]), 0);
    F.nsent++;
    if (done) done(done_arg, n, 0);
    return 0;
}

static struct registry_call *fake_validate(void *arg, const char *sid, const char *key_json,
                                           const char *auth, registry_validate_cb cb, void *cb_arg)
{
    struct noise_ik_public_key k;
    assert_int_equal(noise_ik_public_key_parse(key_json, strlen(key_json), &k), 0);
    snprintf(F.last_auth, sizeof F.last_auth, "%s", auth);
    F.cb[F.validations] = cb;
    F.cb_arg[F.validations] = cb_arg;
    F.validations++;
    return FAKE_CALL;
}

static void fake_cancel(void *arg, struct registry_call *call)
{
    assert_ptr_equal(call, FAKE_CALL);
}

static const struct relay_demux_ops fake_ops = {
    .send = fake_send, .validate = fake_validate, .cancel = fake_cancel};

static struct noise_ik_static_key exec_key, harness_key;
static struct relay_conn_kind serve_kind; /* streams served by rpc_dispatch */

static void reset_fake(void)
{
    for (int i = 0; i < F.nsent; i++)
        free(F.raw[i]);
    memset(&F, 0, sizeof F);
}

static void feed(struct relay_demux *d, const struct relay_frame *f)
{
    uint8_t *out;
    size_t n;
    assert_int_equal(relay_frame_encode_alloc(f, &out, &n), 0);
    relay_demux_on_message(d, out, n);
    free(out);
}

/* Sends msg 1 for stream `sid` with `auth`; returns the initiator (caller frees). */
static struct noise_ik_handshake *handshake(struct relay_demux *d, const char *sid,
                                            const char *auth, size_t auth_len)
{
    size_t plen;
    uint8_t *pro = noise_ik_prologue("env", "reg", sid, &plen);
    struct noise_ik_handshake *hs;
    assert_int_equal(
        noise_ik_initiator_new(&hs, &harness_key, &exec_key.pub, pro, plen, NULL, NULL), 0);
    free(pro);
    static uint8_t m1[NOISE_IK_MAX_MESSAGE];
    size_t n;
    assert_int_equal(
        noise_ik_write_message1(hs, (const uint8_t *)auth, auth_len, m1, sizeof m1, &n), 0);
    struct relay_frame f = {.version = 1,
                            .stream_id = {sid, strlen(sid)},
                            .body = RELAY_BODY_HANDSHAKE,
                            .payload = m1,
                            .payload_len = n};
    feed(d, &f);
    return hs;
}

static int last_body(void)
{
    return F.nsent ? (int)F.sent[F.nsent - 1].body : -1;
}

static void test_demux_validation_gates_msg2(void **state)
{
    reset_fake();
    struct relay_demux *d = relay_demux_new(uv_default_loop(), &exec_key, "env", "reg", &fake_ops,
                                            NULL, &serve_kind.base);
    struct noise_ik_handshake *hs = handshake(d, "s-1", "hka-1", 5);
    assert_int_equal(F.validations, 1);
    assert_string_equal(F.last_auth, "hka-1");
    assert_int_equal(F.nsent, 0); /* nothing before the registry's answer */
    assert_int_equal(relay_demux_pending(d), 1);
    F.cb[0](F.cb_arg[0], true);
    assert_int_equal(last_body(), RELAY_BODY_HANDSHAKE);
    assert_int_equal(F.sent[0].payload_len, NOISE_IK_MSG2_BYTES);
    assert_int_equal(noise_ik_read_message2(hs, F.sent[0].payload, F.sent[0].payload_len), 0);
    assert_int_equal(relay_demux_live(d), 1);
    assert_int_equal(relay_demux_pending(d), 0);
    /* A rejected one: reset, counted. */
    struct noise_ik_handshake *hs2 = handshake(d, "s-2", "hka-2", 5);
    F.cb[1](F.cb_arg[1], false);
    assert_int_equal(last_body(), RELAY_BODY_RESET);
    assert_int_equal(relay_demux_failures(d), 1);
    /* /validate answered 401: a msg 2 that carries the rejection, no reset, no stream. */
    struct noise_ik_handshake *hs3 = handshake(d, "s-3", "hka-3", 5);
    unsigned before = F.nsent;
    F.cb[2](F.cb_arg[2], REGISTRY_CREDENTIALS_REJECTED);
    assert_int_equal(F.nsent, before + 1);
    assert_int_equal(last_body(), RELAY_BODY_HANDSHAKE);
    const struct relay_frame *m2 = &F.sent[F.nsent - 1];
    assert_int_equal(m2->payload_len, NOISE_IK_MSG2_BYTES + strlen(NOISE_IK_REGISTRY_REJECTED));
    uint8_t why[64];
    size_t wl;
    assert_int_equal(noise_ik_read_message2(hs3, m2->payload, m2->payload_len), -EBADMSG);
    noise_ik_handshake_free(hs3);
    hs3 = handshake(d, "s-4", "hka-4", 5);
    F.cb[3](F.cb_arg[3], REGISTRY_CREDENTIALS_REJECTED);
    m2 = &F.sent[F.nsent - 1];
    assert_int_equal(
        noise_ik_read_message2_payload(hs3, m2->payload, m2->payload_len, why, sizeof why, &wl), 0);
    assert_int_equal(wl, strlen(NOISE_IK_REGISTRY_REJECTED));
    assert_memory_equal(why, NOISE_IK_REGISTRY_REJECTED, wl);
    assert_int_equal(relay_demux_live(d), 1);
    assert_int_equal(relay_demux_pending(d), 0);
    noise_ik_handshake_free(hs);
    noise_ik_handshake_free(hs2);
    noise_ik_handshake_free(hs3);
    relay_demux_free(d);
    uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    reset_fake();
}

static void test_demux_limits(void **state)
{
    reset_fake();
    struct relay_demux *d = relay_demux_new(uv_default_loop(), &exec_key, "env", "reg", &fake_ops,
                                            NULL, &serve_kind.base);
    /* Authorization over 4096 bytes: never reaches the registry. */
    static char big[4097];
    memset(big, 'a', sizeof big);
    noise_ik_handshake_free(handshake(d, "big", big, sizeof big));
    assert_int_equal(F.validations, 0);
    assert_int_equal(last_body(), RELAY_BODY_RESET);
    assert_int_equal(relay_demux_failures(d), 1);
    /* 32 pending validations, then the 33rd is reset without a validation. */
    char sid[32];
    for (int i = 0; i < RELAY_MAX_PENDING_STREAMS; i++) {
        snprintf(sid, sizeof sid, "p-%d", i);
        noise_ik_handshake_free(handshake(d, sid, "hka", 3));
    }
    assert_int_equal(F.validations, RELAY_MAX_PENDING_STREAMS);
    int before = F.nsent;
    noise_ik_handshake_free(handshake(d, "p-extra", "hka", 3));
    assert_int_equal(F.validations, RELAY_MAX_PENDING_STREAMS);
    assert_int_equal(F.nsent, before + 1);
    assert_int_equal(last_body(), RELAY_BODY_RESET);
    assert_int_equal(relay_demux_failures(d), 1); /* a full table is not the peer's fault */
    /* Early data on a pending stream: reset + failure. */
    uint8_t junk[32] = {1};
    struct relay_frame data = {.version = 1,
                               .stream_id = {"p-0", 3},
                               .body = RELAY_BODY_DATA,
                               .payload = junk,
                               .payload_len = sizeof junk};
    feed(d, &data);
    assert_int_equal(relay_demux_failures(d), 2);
    assert_int_equal(relay_demux_pending(d), RELAY_MAX_PENDING_STREAMS - 1);
    /* A second handshake for a pending stream: both gone, a failure. */
    noise_ik_handshake_free(handshake(d, "p-1", "hka", 3));
    assert_int_equal(relay_demux_failures(d), 3);
    /* Data for an unknown stream: a reset, not a failure. */
    data.stream_id = (struct relay_str){"nobody", 6};
    before = F.nsent;
    feed(d, &data);
    assert_int_equal(F.nsent, before + 1);
    assert_int_equal(relay_demux_failures(d), 3);
    /* Malformed bytes: dropped silently. */
    relay_demux_on_message(d, (const uint8_t *)"\xff\xff", 2);
    assert_int_equal(relay_demux_failures(d), 3);
    /* Garbage msg 1 until the budget of 8 pauses handshakes (the socket stays). */
    assert_false(relay_demux_paused(d));
    uint8_t garbage[3600] = {0};
    for (int i = 0; i < 5; i++) {
        snprintf(sid, sizeof sid, "g-%d", i);
        struct relay_frame g = {.version = 1,
                                .stream_id = {sid, strlen(sid)},
                                .body = RELAY_BODY_HANDSHAKE,
                                .payload = garbage,
                                .payload_len = sizeof garbage};
        feed(d, &g);
    }
    assert_int_equal(relay_demux_failures(d), RELAY_MAX_FAILED_HANDSHAKES);
    assert_true(relay_demux_paused(d));
    /* Paused: even a genuine handshake is reset at once, without a validation, and it
     * is not counted. */
    unsigned vals = F.validations;
    before = F.nsent;
    noise_ik_handshake_free(handshake(d, "during-pause", "hka", 12));
    assert_int_equal(F.validations, vals);
    assert_int_equal(F.nsent, before + 1);
    assert_int_equal(F.sent[F.nsent - 1].body, RELAY_BODY_RESET);
    assert_int_equal(relay_demux_failures(d), RELAY_MAX_FAILED_HANDSHAKES);
    relay_demux_free(d);
    uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    reset_fake();
}

int main(void)
{
    noise_ik_static_key_generate(&exec_key, NULL, NULL);
    noise_ik_static_key_generate(&harness_key, NULL, NULL);
    relay_conn_kind_init(&serve_kind, rpc_dispatch);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_parse),        cmocka_unit_test(test_registry_bodies),
        cmocka_unit_test(test_registry_answers), cmocka_unit_test(test_api_key_hosts),
        cmocka_unit_test(test_direct_answers),   cmocka_unit_test(test_demux_validation_gates_msg2),
        cmocka_unit_test(test_demux_limits),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    uv_loop_close(uv_default_loop());
    return r;
}
