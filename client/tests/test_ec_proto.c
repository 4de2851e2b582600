/* Unit tests of the client's sans-I/O core: WebSocket frames, JSON-RPC messages and the
 * per-process event tracker, with byte strings and JSON in and structs out. */
#include "ec_internal.h" /* EC_MAX_MESSAGE, the client's limit */
#include "proto/uri.h"
#include "proto/ws_reader.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Feeds buf to a reader in the given role, one byte at a time after the first k
 * bytes (split points matter), until an event other than NONE. */
static struct ws_event feed_split(struct ws_reader *r, uint8_t *buf, size_t n, size_t k)
{
    struct ws_event ev = {.kind = WS_EV_NONE};
    size_t off = 0;
    while (off < n && ev.kind == WS_EV_NONE) {
        size_t step = off == 0 && k ? k : 1;
        if (step > n - off) step = n - off;
        off += ws_reader_feed(r, buf + off, step, &ev);
    }
    return ev;
}

static void test_ws_roundtrip(void **state)
{
    /* What the client sends (masked) is what a server-role reader receives. */
    size_t sizes[] = {0, 5, 125, 126, 65535, 65536, 200000};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        uint8_t *payload = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            payload[i] = (uint8_t)('a' + i % 26);
        uint8_t *out = NULL;
        size_t len = 0, cap = 0;
        const uint8_t mask[4] = {1, 2, 3, 4};
        ec_ws_encode(&out, &len, &cap, WS_OP_TEXT, payload, n, mask);
        struct ws_frame f;
        assert_true(ws_frame_decode(out, len, &f) == 1);
        assert_true(f.fin && f.opcode == WS_OP_TEXT && f.masked && f.payload_len == n);
        assert_true(f.header_len + n == len);
        size_t splits[] = {len, len > 3 ? len - 3 : 0, 1};
        for (size_t s = 0; s < 3; s++) {
            uint8_t *copy = malloc(len);
            memcpy(copy, out, len);
            struct ws_reader r;
            ws_reader_init(&r, WS_ROLE_SERVER, 1u << 30, 1u << 30);
            struct ws_event ev = feed_split(&r, copy, len, splits[s]);
            assert_int_equal(ev.kind, WS_EV_MESSAGE);
            assert_int_equal(ev.len, n);
            assert_true(n == 0 || memcmp(ev.data, payload, n) == 0);
            ws_reader_free(&r);
            free(copy);
        }
        free(out);
        free(payload);
    }
}

/* The client's side of the rules: the client-role reader with the client's limit. */
static void test_ws_client_receive(void **state)
{
    struct ws_reader r;
    struct ws_event ev;
    uint8_t srv[] = {0x81, 0x02, 'h', 'i'};
    ws_reader_init(&r, WS_ROLE_CLIENT, EC_MAX_MESSAGE, EC_MAX_MESSAGE);
    ev = feed_split(&r, srv, sizeof srv, 1);
    assert_true(ev.kind == WS_EV_MESSAGE && ev.len == 2 && memcmp(ev.data, "hi", 2) == 0);
    ws_reader_free(&r);
    /* A masked frame from a server, RSV bits, an oversized ping, an undefined opcode:
     * each is a violation with 1002. */
    uint8_t masked[] = {0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2};
    uint8_t rsv[] = {0xC1, 0x00};
    uint8_t bigping[] = {0x89, 126, 0, 200};
    uint8_t badop[] = {0x83, 0};
    struct {
        uint8_t *p;
        size_t n;
    } bad[] = {{masked, sizeof masked},
               {rsv, sizeof rsv},
               {bigping, sizeof bigping},
               {badop, sizeof badop}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ws_reader_init(&r, WS_ROLE_CLIENT, 1000, 1000);
        ev = feed_split(&r, bad[i].p, bad[i].n, 0);
        assert_int_equal(ev.kind, WS_EV_ERROR);
        assert_int_equal(ev.code, WS_CLOSE_PROTOCOL);
        ws_reader_free(&r);
    }
    /* Over the limit: 1009 on the header, before the payload. */
    uint8_t big[] = {0x82, 127, 0, 0, 0, 0, 0x04, 0, 0, 1};
    ws_reader_init(&r, WS_ROLE_CLIENT, EC_MAX_MESSAGE, EC_MAX_MESSAGE);
    ev = feed_split(&r, big, sizeof big, 0);
    assert_int_equal(ev.kind, WS_EV_ERROR);
    assert_int_equal(ev.code, WS_CLOSE_TOO_BIG);
    ws_reader_free(&r);
}

static void test_messages(void **state)
{
    json_t *params = json_pack("{s:s}", "clientName", "t");
    char *s = ec_msg_request(7, "initialize", params);
    assert_true(
        strcmp(s, "{\"id\":7,\"method\":\"initialize\",\"params\":{\"clientName\":\"t\"}}") == 0);
    free(s);
    json_decref(params);

    struct ec_msg m;
    const char *r = "{\"id\":3,\"result\":{\"running\":true}}";
    assert_true(ec_msg_parse(r, strlen(r), &m) == 0);
    assert_true(m.kind == EC_MSG_RESPONSE && m.id_is_int && m.id == 3);
    assert_true(json_is_true(json_object_get(m.result, "running")));
    ec_msg_clear(&m);

    const char *e = "{\"error\":{\"code\":-32600,\"message\":\"unknown process id x\"},\"id\":4}";
    assert_true(ec_msg_parse(e, strlen(e), &m) == 0);
    assert_true(m.kind == EC_MSG_ERROR && m.id == 4 && m.err_code == -32600);
    assert_true(strcmp(m.err_message, "unknown process id x") == 0);
    ec_msg_clear(&m);

    const char *n = "{\"method\":\"process/closed\",\"params\":{\"processId\":\"p\",\"seq\":4}}";
    assert_true(ec_msg_parse(n, strlen(n), &m) == 0);
    assert_true(m.kind == EC_MSG_NOTIFICATION && strcmp(m.method, "process/closed") == 0);
    ec_msg_clear(&m);

    const char *sid = "{\"id\":\"s-1\",\"result\":{}}";
    assert_true(ec_msg_parse(sid, strlen(sid), &m) == 0 && m.kind == EC_MSG_RESPONSE &&
                !m.id_is_int);
    ec_msg_clear(&m);
    assert_true(ec_msg_parse("[1]", 3, &m) == -1);
    assert_true(ec_msg_parse("not json", 8, &m) == -1);
}

/* Feeds a notification given as JSON text of its params. */
static void feed(struct ec_track *t, const char *method, const char *params)
{
    json_t *p = json_loads(params, 0, NULL);
    assert_true(p != NULL);
    assert_true(ec_track_on_notification(t, method, p) == 0);
    json_decref(p);
}

/* Pops every ready event into a compact string like "o1:hi x2:3 o3:oops c4". */
static void drain(struct ec_track *t, char *out, size_t cap)
{
    out[0] = 0;
    struct ec_pevent *e;
    while ((e = ec_track_pop(t))) {
        char one[64];
        switch (e->type) {
        case EC_EVENT_OUTPUT:
            snprintf(one, sizeof one, "o%llu:%.*s ", (unsigned long long)e->seq, (int)e->len,
                     (const char *)e->data);
            break;
        case EC_EVENT_EXITED:
            snprintf(one, sizeof one, "x%llu:%d ", (unsigned long long)e->seq, e->exit_code);
            break;
        case EC_EVENT_CLOSED:
            snprintf(one, sizeof one, "c%llu ", (unsigned long long)e->seq);
            break;
        case EC_EVENT_RESYNC: snprintf(one, sizeof one, "R "); break;
        }
        strncat(out, one, cap - strlen(out) - 1);
        ec_pevent_free(e);
    }
}

static void test_track_in_order_needs_no_read(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"aGk=\"}");
    feed(&t, "process/exited", "{\"seq\":2,\"exitCode\":3,\"sandboxDenied\":false}");
    feed(&t, "process/output", "{\"seq\":3,\"stream\":\"stderr\",\"chunk\":\"b29wcw==\"}");
    feed(&t, "process/closed", "{\"seq\":4}");
    assert_true(!ec_track_wants_read(&t));
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:hi x2:3 o3:oops c4 ") == 0);
    assert_true(t.reads_sent == 0 && t.gaps_detected == 0);
    /* Late duplicates after close are dropped. */
    feed(&t, "process/output", "{\"seq\":3,\"stream\":\"stderr\",\"chunk\":\"b29wcw==\"}");
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "") == 0 && t.duplicates_dropped == 1);
    ec_track_free(&t);
}

static void test_track_duplicates(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"pty\",\"chunk\":\"YQ==\"}");
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"pty\",\"chunk\":\"YQ==\"}");
    feed(&t, "process/output", "{\"seq\":2,\"stream\":\"pty\",\"chunk\":\"Yg==\"}");
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:a o2:b ") == 0);
    assert_true(t.duplicates_dropped == 1 && !ec_track_wants_read(&t));
    ec_track_free(&t);
}

static void test_track_gap_one_read(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"YQ==\"}");
    /* seq 2 is lost on the way. */
    feed(&t, "process/output", "{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Yw==\"}");
    feed(&t, "process/exited", "{\"seq\":4,\"exitCode\":0,\"sandboxDenied\":false}");
    assert_true(ec_track_wants_read(&t));
    assert_true(t.gaps_detected == 1);
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:a ") == 0); /* nothing past the gap leaks out of order */
    json_t *rp = ec_track_read_params(&t, "p");
    assert_true(json_integer_value(json_object_get(rp, "afterSeq")) == 1);
    json_decref(rp);
    assert_true(!ec_track_wants_read(&t)); /* exactly one read in flight */
    feed(&t, "process/closed", "{\"seq\":5}");
    assert_true(!ec_track_wants_read(&t));
    json_t *res = json_loads("{\"chunks\":[{\"seq\":2,\"stream\":\"stdout\",\"chunk\":\"Yg==\"},"
                             "{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Yw==\"}],"
                             "\"nextSeq\":6,\"exited\":true,\"exitCode\":0,\"closed\":true,"
                             "\"failure\":null,\"sandboxDenied\":false}",
                             0, NULL);
    assert_true(ec_track_on_read_result(&t, res) == 0);
    json_decref(res);
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o2:b o3:c x0:0 c5 ") == 0);
    assert_true(t.reads_sent == 1 && !ec_track_wants_read(&t));
    ec_track_free(&t);
}

static void test_track_old_server_exit(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/exited", "{\"seq\":1,\"exitCode\":2}");
    assert_true(ec_track_wants_read(&t));
    json_t *rp = ec_track_read_params(&t, "p");
    json_decref(rp);
    json_t *res = json_loads("{\"chunks\":[],\"nextSeq\":2,\"exited\":true,\"exitCode\":2,"
                             "\"closed\":false,\"sandboxDenied\":true}",
                             0, NULL);
    assert_true(ec_track_on_read_result(&t, res) == 0);
    json_decref(res);
    assert_true(!ec_track_wants_read(&t));
    feed(&t, "process/closed", "{\"seq\":2}");
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "x1:2 c2 ") == 0);
    assert_true(t.reads_sent == 1);
    ec_track_free(&t);
}

static void test_track_old_server_close_waits_for_the_read(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"YQ==\"}");
    feed(&t, "process/exited", "{\"seq\":2,\"exitCode\":1}");
    feed(&t, "process/closed", "{\"seq\":3}");
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:a ") == 0); /* exit and close wait for the read */
    assert_true(ec_track_wants_read(&t));
    json_t *rp = ec_track_read_params(&t, "p");
    assert_true(json_integer_value(json_object_get(rp, "afterSeq")) == 3);
    json_decref(rp);
    json_t *res = json_loads("{\"chunks\":[],\"nextSeq\":4,\"exited\":true,\"exitCode\":1,"
                             "\"closed\":true,\"sandboxDenied\":true}",
                             0, NULL);
    assert_true(ec_track_on_read_result(&t, res) == 0);
    json_decref(res);
    struct ec_pevent *e = ec_track_pop(&t);
    assert_true(e && e->type == EC_EVENT_EXITED && e->seq == 2 && e->sandbox_denied);
    ec_pevent_free(e);
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "c3 ") == 0);
    assert_true(t.reads_sent == 1 && !ec_track_wants_read(&t));
    ec_track_free(&t);
}

static void test_track_resume(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"YQ==\"}");
    ec_track_on_resume(&t);
    assert_true(ec_track_wants_read(&t) && t.resyncs == 1);
    json_t *rp = ec_track_read_params(&t, "p");
    assert_true(json_integer_value(json_object_get(rp, "afterSeq")) == 1);
    json_decref(rp);
    /* Live notifications may come before the catch-up read's reply. */
    feed(&t, "process/output", "{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Yw==\"}");
    json_t *res = json_loads("{\"chunks\":[{\"seq\":2,\"stream\":\"stdout\",\"chunk\":\"Yg==\"},"
                             "{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Yw==\"}],"
                             "\"nextSeq\":4,\"exited\":false,\"exitCode\":null,\"closed\":false}",
                             0, NULL);
    assert_true(ec_track_on_read_result(&t, res) == 0);
    json_decref(res);
    feed(&t, "process/exited", "{\"seq\":4,\"exitCode\":0,\"sandboxDenied\":false}");
    feed(&t, "process/closed", "{\"seq\":5}");
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:a R o2:b o3:c x4:0 c5 ") == 0);
    assert_true(t.reads_sent == 1 && t.duplicates_dropped == 1);
    ec_track_free(&t);
}

static void test_track_lag_bounds_memory_and_reads_once(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    t.max_queued = 4; /* bytes */
    feed(&t, "process/output", "{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"YWE=\"}");
    feed(&t, "process/output", "{\"seq\":2,\"stream\":\"stdout\",\"chunk\":\"YmI=\"}");
    /* The consumer is 4 bytes behind: seq 3 and everything after it is dropped. */
    feed(&t, "process/output", "{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Y2M=\"}");
    feed(&t, "process/exited", "{\"seq\":4,\"exitCode\":0,\"sandboxDenied\":false}");
    assert_true(t.lagged && t.lags == 1 && !ec_track_wants_read(&t));
    char s[256];
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o1:aa o2:bb ") == 0);
    assert_true(!t.lagged && ec_track_wants_read(&t)); /* caught up: exactly one read */
    json_t *rp = ec_track_read_params(&t, "p");
    assert_true(json_integer_value(json_object_get(rp, "afterSeq")) == 2);
    json_decref(rp);
    json_t *res = json_loads("{\"chunks\":[{\"seq\":3,\"stream\":\"stdout\",\"chunk\":\"Y2M=\"}],"
                             "\"nextSeq\":5,\"exited\":true,\"exitCode\":0,\"closed\":false}",
                             0, NULL);
    assert_true(ec_track_on_read_result(&t, res) == 0);
    json_decref(res);
    feed(&t, "process/closed", "{\"seq\":5}");
    drain(&t, s, sizeof s);
    assert_true(strcmp(s, "o3:cc x0:0 c5 ") == 0);
    assert_true(t.reads_sent == 1 && t.queued_bytes == 0);
    ec_track_free(&t);
}

static void test_track_malformed(void **state)
{
    struct ec_track t;
    ec_track_init(&t);
    json_t *p = json_loads("{\"seq\":1,\"stream\":\"bogus\",\"chunk\":\"YQ==\"}", 0, NULL);
    assert_true(ec_track_on_notification(&t, "process/output", p) == -1);
    json_decref(p);
    p = json_loads("{\"seq\":1,\"stream\":\"stdout\",\"chunk\":\"!!\"}", 0, NULL);
    assert_true(ec_track_on_notification(&t, "process/output", p) == -1);
    json_decref(p);
    p = json_loads("{\"stream\":\"stdout\",\"chunk\":\"YQ==\"}", 0, NULL);
    assert_true(ec_track_on_notification(&t, "process/output", p) == -1);
    json_decref(p);
    assert_true(ec_track_pop(&t) == NULL);
    ec_track_free(&t);
}

/* The client's encoder before it used proto/uri's (kept here as the reference): every
 * byte outside the unreserved set, the sub-delims, ':', '@' and '/' percent-encoded,
 * dot segments sent as they are (the server's parser resolved them). */
static char *old_path_to_uri(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(7 + 3 * strlen(path) + 1), *o = out;
    memcpy(o, "file://", 7);
    o += 7;
    for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
        bool plain = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                     (*s >= '0' && *s <= '9') || strchr("/-._~!$&'()*+,;=:@", *s);
        if (plain) {
            *o++ = (char)*s;
        } else {
            *o++ = '%';
            *o++ = hex[*s >> 4];
            *o++ = hex[*s & 15];
        }
    }
    *o = 0;
    return out;
}

/* What the server makes of a URI: its path, or "error" when it refuses it. */
static char *server_path(const char *uri)
{
    char *path;
    size_t len;
    struct uri_error err;
    if (uri_to_path(uri, strlen(uri), false, &path, &len, &err) < 0) return strdup("error");
    return path;
}

/* Switching to the server's encoder must not change which path the server acts on:
 * the old URI and the new one parse to the same path (dot segments included, which
 * the client now resolves itself), and where the old one was refused (a first
 * component like "C:", read as a Windows drive) the new one names the path itself. */
/* fs/readBlock's reply read around its base64 (ec_xfer.c's fast path): the value cut
 * out, the rest a small object the parser still reads; an escape, a missing member or
 * a rest too large leave the text to jansson. */
static void test_cut_b64(void **state)
{
    (void)state;
    char rest[128];
    struct ec_b64_cut cut;
    const char *ours = "{\"id\":7,\"result\":{\"chunk\":\"aGVsbG8=\",\"eof\":true}}";
    assert_int_equal(ec_msg_cut_b64(ours, strlen(ours), "chunk", rest, sizeof rest, &cut), 1);
    assert_int_equal(cut.b64_len, 8);
    assert_memory_equal(cut.b64, "aGVsbG8=", 8);
    assert_string_equal(rest, "{\"id\":7,\"result\":{\"chunk\":\"\",\"eof\":true}}");
    assert_int_equal(cut.rest_len, strlen(rest));
    struct ec_msg m;
    assert_int_equal(ec_msg_parse(rest, cut.rest_len, &m), 0);
    assert_int_equal(m.kind, EC_MSG_RESPONSE);
    assert_int_equal(m.id, 7);
    assert_true(json_is_true(json_object_get(m.result, "eof")));
    ec_msg_clear(&m);
    /* The reference's member order and envelope work the same. */
    const char *ref =
        "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"eof\":false,\"chunk\":\"QQ==\"}}";
    assert_int_equal(ec_msg_cut_b64(ref, strlen(ref), "chunk", rest, sizeof rest, &cut), 1);
    assert_memory_equal(cut.b64, "QQ==", 4);
    const char *esc = "{\"id\":7,\"result\":{\"chunk\":\"aG\\/8\",\"eof\":true}}";
    assert_int_equal(ec_msg_cut_b64(esc, strlen(esc), "chunk", rest, sizeof rest, &cut), 0);
    const char *none = "{\"id\":7,\"error\":{\"code\":-32004,\"message\":\"gone\"}}";
    assert_int_equal(ec_msg_cut_b64(none, strlen(none), "chunk", rest, sizeof rest, &cut), 0);
    char small[8];
    assert_int_equal(ec_msg_cut_b64(ours, strlen(ours), "chunk", small, sizeof small, &cut), 0);
    /* Unterminated: no closing quote. */
    assert_int_equal(ec_msg_cut_b64(ours, 30, "chunk", rest, sizeof rest, &cut), 0);
}

/* fs/writeBlock written by hand parses back to the same request. */
static void test_write_block_request(void **state)
{
    (void)state;
    const uint8_t data[] = {0, 1, 2, 0xff, 0xfe};
    char *out = malloc(ec_msg_write_block_max(6, sizeof data));
    size_t n = ec_msg_write_block(out, 42, "ec-x-1", 1u << 20, data, sizeof data);
    assert_true(n <= ec_msg_write_block_max(6, sizeof data));
    struct ec_msg m;
    assert_int_equal(ec_msg_parse(out, n, &m), 0);
    assert_int_equal(m.kind, EC_MSG_REQUEST);
    assert_int_equal(m.id, 42);
    assert_string_equal(m.method, "fs/writeBlock");
    assert_string_equal(json_string_value(json_object_get(m.params, "handleId")), "ec-x-1");
    assert_int_equal(json_integer_value(json_object_get(m.params, "offset")), 1 << 20);
    assert_string_equal(json_string_value(json_object_get(m.params, "chunk")), "AAEC//4=");
    ec_msg_clear(&m);
    free(out);
}

/* Both fast views as one shape: 1 when the text is the message they read. */
static int tcp_view(const char *text, size_t len)
{
    struct ec_tcp_data_view v;
    return ec_msg_tcp_data_view(text, len, &v);
}

static int output_view(const char *text, size_t len)
{
    struct ec_output_view v;
    return ec_msg_output_view(text, len, &v);
}

/* A fast view takes none of ok's strict prefixes, nor ok with anything after it, nor
 * any of the n others (left to jansson). */
static void view_rejects(int (*view)(const char *, size_t), const char *ok,
                         const char *const *others, size_t n)
{
    for (size_t k = 0; k < strlen(ok); k++)
        assert_int_equal(view(ok, k), 0);
    char longer[256];
    snprintf(longer, sizeof longer, "%s ", ok);
    assert_int_equal(view(longer, strlen(longer)), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(view(others[i], strlen(others[i])), 0);
}

/* The fast reading of the server's tcp/data, and everything it must leave to jansson. */
static void test_tcp_data_view(void **state)
{
    struct ec_tcp_data_view v;
    const char *ok = "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t12\","
                     "\"dataBase64\":\"aGVsbG8=\",\"eof\":false}}";
    assert_int_equal(ec_msg_tcp_data_view(ok, strlen(ok), &v), 1);
    assert_int_equal(v.id_len, 3);
    assert_memory_equal(v.id, "t12", 3);
    assert_int_equal(v.b64_len, 8);
    assert_memory_equal(v.b64, "aGVsbG8=", 8);
    assert_false(v.eof);
    const char *eof = "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t1\","
                      "\"dataBase64\":\"\",\"eof\":true}}";
    assert_int_equal(ec_msg_tcp_data_view(eof, strlen(eof), &v), 1);
    assert_true(v.eof);
    assert_int_equal(v.b64_len, 0);
    const char *others[] = {
        /* an escape in the id or the data, another order, another member, another method */
        "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t\\u0031\",\"dataBase64\":\"\","
        "\"eof\":false}}",
        "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t1\",\"dataBase64\":\"aG\\/8\","
        "\"eof\":false}}",
        "{\"method\":\"tcp/data\",\"params\":{\"dataBase64\":\"\",\"streamId\":\"t1\","
        "\"eof\":false}}",
        "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t1\",\"dataBase64\":\"\","
        "\"eof\":false,\"x\":1}}",
        "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"t1\",\"dataBase64\":\"\","
        "\"eof\":null}}",
        "{\"method\":\"tcp/closed\",\"params\":{\"streamId\":\"t1\",\"error\":null}}",
    };
    view_rejects(tcp_view, ok, others, sizeof others / sizeof *others);
}

/* The fast reading of process/output (ours and the reference write the same text),
 * and everything it must leave to jansson. */
static void test_output_view(void **state)
{
    (void)state;
    struct ec_output_view v;
    const char *ok = "{\"method\":\"process/output\",\"params\":{\"processId\":\"p-1\","
                     "\"seq\":42,\"stream\":\"stderr\",\"chunk\":\"aGVsbG8=\"}}";
    assert_int_equal(ec_msg_output_view(ok, strlen(ok), &v), 1);
    assert_null(v.session_id);
    assert_int_equal(v.process_id_len, 3);
    assert_memory_equal(v.process_id, "p-1", 3);
    assert_int_equal(v.seq, 42);
    assert_int_equal(v.stream, EC_STREAM_STDERR);
    assert_int_equal(v.b64_len, 8);
    assert_memory_equal(v.b64, "aGVsbG8=", 8);
    const char *viewer = "{\"method\":\"process/output\",\"params\":{\"sessionId\":\"s9\","
                         "\"processId\":\"p\",\"seq\":1,\"stream\":\"pty\",\"chunk\":\"\"}}";
    assert_int_equal(ec_msg_output_view(viewer, strlen(viewer), &v), 1);
    assert_int_equal(v.session_id_len, 2);
    assert_memory_equal(v.session_id, "s9", 2);
    assert_int_equal(v.stream, EC_STREAM_PTY);
    assert_int_equal(v.b64_len, 0);
    const char *others[] = {
        /* an escape in the id, in the chunk; a control byte in the id */
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\\\"1\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"aG\\/8\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\t\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        /* seq 0, a leading zero, a negative, a fraction, too many digits */
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":0,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":01,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":-1,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":1.5,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\","
        "\"seq\":1234567890123456789,\"stream\":\"stdout\",\"chunk\":\"\"}}",
        /* an unknown stream, another order, another member, another method, spaces */
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":1,"
        "\"stream\":\"stdin\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"seq\":1,\"processId\":\"p\","
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\":\"process/output\",\"params\":{\"processId\":\"p\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"\",\"x\":1}}",
        "{\"method\":\"process/outputs\",\"params\":{\"processId\":\"p\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
        "{\"method\": \"process/output\",\"params\":{\"processId\":\"p\",\"seq\":1,"
        "\"stream\":\"stdout\",\"chunk\":\"\"}}",
    };
    view_rejects(output_view, ok, others, sizeof others / sizeof *others);
}

/* Output decoded chunk after chunk lies back to back: a merged pop is one span of one
 * stream, broken by another stream and by bytes that arrived out of order; a block
 * nobody holds any more is written again from its start. */
static void test_track_runs(void **state)
{
    (void)state;
    struct ec_track t;
    ec_track_init(&t);
    assert_int_equal(ec_track_on_output(&t, 1, EC_STREAM_STDOUT, "YWE=", 4), 0); /* aa */
    assert_int_equal(ec_track_on_output(&t, 2, EC_STREAM_STDOUT, "YmI=", 4), 0); /* bb */
    assert_int_equal(ec_track_on_output(&t, 3, EC_STREAM_STDERR, "Y2M=", 4), 0); /* cc */
    assert_int_equal(ec_track_on_output(&t, 4, EC_STREAM_STDOUT, "ZGQ=", 4), 0); /* dd */
    assert_int_equal(ec_track_on_output(&t, 5, EC_STREAM_STDOUT, "!!", 2), -1);
    size_t len = 0;
    struct ec_pevent *e = ec_track_pop_run(&t, &len);
    assert_true(e && e->stream == EC_STREAM_STDOUT && len == 4 && e->next && !e->next->next);
    assert_memory_equal(e->data, "aabb", 4);
    assert_int_equal(e->next->seq, 2);
    const uint8_t *first = e->data;
    ec_pevent_free_list(e);
    e = ec_track_pop_run(&t, &len);
    assert_true(e && e->stream == EC_STREAM_STDERR && len == 2 && !e->next);
    ec_pevent_free_list(e);
    e = ec_track_pop_run(&t, &len);
    assert_true(e && e->seq == 4 && len == 2 && !e->next);
    ec_pevent_free_list(e);
    assert_null(ec_track_pop_run(&t, &len));
    assert_int_equal(t.queued_bytes, 0);
    /* Nothing holds the block: the next chunk goes to its start again. */
    assert_int_equal(ec_track_on_output(&t, 5, EC_STREAM_STDOUT, "ZWU=", 4), 0);
    e = ec_track_pop(&t);
    assert_ptr_equal(e->data, first);
    /* ...but not while an event returned to the caller still holds it. */
    assert_int_equal(ec_track_on_output(&t, 6, EC_STREAM_STDOUT, "ZmY=", 4), 0);
    struct ec_pevent *f = ec_track_pop(&t);
    assert_memory_equal(e->data, "ee", 2);
    assert_ptr_equal(f->data, e->data + 2);
    ec_pevent_free(e);
    ec_pevent_free(f);
    /* A gap: 8 decoded before 7, so 7 and 8 are not one span, and the bytes are right. */
    assert_int_equal(ec_track_on_output(&t, 8, EC_STREAM_STDOUT, "aWk=", 4), 0);
    assert_true(ec_track_wants_read(&t));
    json_decref(ec_track_read_params(&t, "p"));
    json_t *res = json_loads("{\"chunks\":[{\"seq\":7,\"stream\":\"stdout\",\"chunk\":\"aGg=\"}],"
                             "\"nextSeq\":8,\"exited\":false,\"exitCode\":null,\"closed\":false}",
                             0, NULL);
    assert_int_equal(ec_track_on_read_result(&t, res), 0);
    json_decref(res);
    char got[8] = {0};
    size_t k = 0;
    while ((e = ec_track_pop_run(&t, &len))) {
        memcpy(got + k, e->data, len);
        k += len;
        assert_null(e->next);
        ec_pevent_free_list(e);
    }
    assert_string_equal(got, "hhii");
    ec_track_free(&t);
}

/* A consumer that keeps up keeps one block, whatever the volume. */
static void test_track_blocks_bounded(void **state)
{
    (void)state;
    struct ec_track t;
    ec_track_init(&t);
    static char b64[10924 + 1];
    memset(b64, 'A', 10924); /* 8193 zero bytes */
    size_t first_run = 0, total = 0;
    for (uint64_t seq = 1; seq <= 4096; seq++) {
        assert_int_equal(ec_track_on_output(&t, seq, EC_STREAM_STDOUT, b64, 10924), 0);
        if (seq % 64) continue;
        size_t len;
        struct ec_pevent *e;
        for (first_run = 0; (e = ec_track_pop_run(&t, &len)); total += len) {
            if (!first_run) first_run = len;
            ec_pevent_free_list(e);
        }
    }
    assert_int_equal(total, 4096 * 8193);
    /* The block grew while chunks waited, then each round fits in it: one span. */
    assert_int_equal(first_run, 64 * 8193);
    assert_true(t.tail && t.tail->cap <= (1u << 20) && t.tail->refs == 1);
    ec_track_free(&t);
}

static void test_uri_same_path_for_server(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/",
        "/tmp",
        "/tmp/",
        "/tmp/a b/%\xc3\xa9",
        "/a/../b",
        "/a/b/..",
        "/a/b/../",
        "/a/./b",
        "/a/.",
        "/.",
        "/..",
        "/../..",
        "/../x",
        "/a//b/../c",
        "/a//..",
        "/x/..y/.z/...",
        "/q?x#f",
        "/[v6]^|\\`{}<>\"",
        "/%2e%2E/x",
        "/tab\there",
        "/\x7f\x01\xff",
        "/a/.%2e/b",
        "//srv/share",
        "/a|b/c:d",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char *o = old_path_to_uri(paths[i]), *n = ec_path_to_uri(paths[i]);
        char *po = server_path(o), *pn = server_path(n);
        if (strcmp(po, pn) != 0) fail_msg("%s: old %s -> %s, new %s -> %s", paths[i], o, po, n, pn);
        free(o);
        free(n);
        free(po);
        free(pn);
    }
    /* Old: refused as a Windows drive; new: the opaque form, parsed back literally. */
    static const char *const drives[] = {"/C:", "/C:/x", "/c|/y", "/x/../C:/z"};
    for (size_t i = 0; i < sizeof drives / sizeof drives[0]; i++) {
        char *o = old_path_to_uri(drives[i]), *n = ec_path_to_uri(drives[i]);
        char *po = server_path(o), *pn = server_path(n);
        const char *want = strncmp(drives[i], "/x/../", 6) == 0 ? drives[i] + 5 : drives[i];
        if (strcmp(pn, want) != 0) fail_msg("%s: new %s -> %s", drives[i], n, pn);
        free(o);
        free(n);
        free(po);
        free(pn);
    }
}

static void test_uri(void **state)
{
    char *u = ec_path_to_uri("/tmp/a b/%é");
    assert_true(strcmp(u, "file:///tmp/a%20b/%25%C3%A9") == 0);
    char *p = ec_uri_to_path(u);
    assert_true(strcmp(p, "/tmp/a b/%é") == 0);
    free(u);
    free(p);
    assert_true(ec_path_to_uri("rel/x") == NULL);
    p = ec_uri_to_path("file://localhost/etc");
    assert_true(p && strcmp(p, "/etc") == 0);
    free(p);
    assert_true(ec_uri_to_path("file://server/share") == NULL);
    assert_true(ec_uri_to_path("http://x/") == NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ws_roundtrip),
        cmocka_unit_test(test_ws_client_receive),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_track_in_order_needs_no_read),
        cmocka_unit_test(test_track_duplicates),
        cmocka_unit_test(test_track_gap_one_read),
        cmocka_unit_test(test_track_old_server_exit),
        cmocka_unit_test(test_track_old_server_close_waits_for_the_read),
        cmocka_unit_test(test_track_resume),
        cmocka_unit_test(test_track_lag_bounds_memory_and_reads_once),
        cmocka_unit_test(test_track_malformed),
        cmocka_unit_test(test_uri),
        cmocka_unit_test(test_tcp_data_view),
        cmocka_unit_test(test_output_view),
        cmocka_unit_test(test_track_runs),
        cmocka_unit_test(test_track_blocks_bounded),
        cmocka_unit_test(test_cut_b64),
        cmocka_unit_test(test_write_block_request),
        cmocka_unit_test(test_uri_same_path_for_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
