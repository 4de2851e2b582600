/* Unit tests for proto/ws_reader: every rule of ws_reader.h for both roles, each
 * input fed whole and at every split point (one and two cuts), which must give the
 * same events; messages reassembled across continuations with control frames in
 * between; the limits; in-place unmasking of a whole frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ws_reader.h"
#include "util/bigbuf.h"

/* A wire image being built. */
struct wire {
    uint8_t b[1 << 16];
    size_t n;
};

static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};

/* Appends a frame; masked when `mask`, with raw first-byte bits `rsv`. */
static void frame(struct wire *w, bool fin, int op, const void *p, size_t n, bool mask, uint8_t rsv)
{
    size_t h = ws_frame_encode(w->b + w->n, fin, op, n, mask ? key : NULL);
    w->b[w->n] |= rsv;
    memcpy(w->b + w->n + h, p, n);
    if (mask) ws_frame_unmask(w->b + w->n + h, n, key);
    w->n += h + n;
}

/* The events of a whole feed, flattened into text for comparison. */
struct trace {
    char s[8192];
    size_t n;
};

static void put(struct trace *t, const struct ws_event *ev)
{
    static const char *names[] = {"none", "msg", "ping", "pong", "close", "error"};
    t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, "%s:%d:%d:", names[ev->kind],
                             ev->opcode, ev->code);
    for (size_t i = 0; i < ev->len && t->n + 3 < sizeof t->s; i++)
        t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, "%02x", ev->data[i]);
    t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, ";");
}

/* Feeds in[0..n) cut at a and b (a <= b <= n) into a fresh reader. */
static void run(enum ws_role role, const uint8_t *in, size_t n, size_t a, size_t b,
                uint64_t max_frame, size_t max_msg, struct trace *t)
{
    struct ws_reader r;
    ws_reader_init(&r, role, max_frame, max_msg);
    uint8_t *copy = malloc(n + 1);
    memcpy(copy, in, n);
    t->n = 0;
    t->s[0] = '\0';
    size_t cuts[] = {0, a, b, n};
    for (int i = 0; i < 3; i++) {
        uint8_t *p = copy + cuts[i];
        size_t left = cuts[i + 1] - cuts[i];
        /* Each piece goes through a separate allocation: nothing may point past it. */
        uint8_t *piece = malloc(left + 1);
        memcpy(piece, p, left);
        uint8_t *q = piece;
        while (left) {
            struct ws_event ev;
            size_t k = ws_reader_feed(&r, q, left, &ev);
            assert_true(k > 0 && k <= left);
            q += k;
            left -= k;
            if (ev.kind != WS_EV_NONE)
                put(t, &ev);
            else
                assert_int_equal(left, 0);
        }
        free(piece);
    }
    ws_reader_free(&r);
    free(copy);
}

/* Checks that every one- and two-cut split gives `want`. */
static void expect_lim(enum ws_role role, const struct wire *w, const char *want,
                       uint64_t max_frame, size_t max_msg)
{
    struct trace t;
    run(role, w->b, w->n, w->n, w->n, max_frame, max_msg, &t);
    if (strcmp(t.s, want) != 0) fail_msg("whole: got %s want %s", t.s, want);
    size_t step = w->n > 400 ? w->n / 97 + 1 : 1;
    for (size_t a = 0; a <= w->n; a += step)
        for (size_t b = a; b <= w->n; b += step) {
            run(role, w->b, w->n, a, b, max_frame, max_msg, &t);
            if (strcmp(t.s, want) != 0) fail_msg("cut %zu,%zu: got %s want %s", a, b, t.s, want);
        }
}

static void expect(enum ws_role role, const struct wire *w, const char *want)
{
    expect_lim(role, w, want, 1 << 20, 1 << 20);
}

static void test_single_messages(void **state)
{
    struct wire w = {.n = 0};
    frame(&w, true, WS_OP_TEXT, "Hello", 5, true, 0);
    frame(&w, true, WS_OP_BINARY, "\x00\xff", 2, true, 0);
    frame(&w, true, WS_OP_TEXT, "", 0, true, 0);
    expect(WS_ROLE_SERVER, &w, "msg:1:0:48656c6c6f;msg:2:0:00ff;msg:1:0:;");
    /* The client role wants them unmasked. */
    w.n = 0;
    frame(&w, true, WS_OP_BINARY, "ab", 2, false, 0);
    expect(WS_ROLE_CLIENT, &w, "msg:2:0:6162;");
    /* Lengths in the 16-bit form. */
    static uint8_t big[300];
    memset(big, 'x', sizeof big);
    w.n = 0;
    frame(&w, true, WS_OP_TEXT, big, sizeof big, true, 0);
    struct trace t;
    run(WS_ROLE_SERVER, w.b, w.n, 150, 151, 1 << 20, 1 << 20, &t);
    assert_int_equal(strncmp(t.s, "msg:1:0:787878", 14), 0);
    assert_int_equal(strlen(t.s), strlen("msg:1:0:;") + 600);
}

static void test_in_place_unmask(void **state)
{
    uint8_t f[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
    struct ws_reader r;
    ws_reader_init(&r, WS_ROLE_SERVER, 100, 100);
    struct ws_event ev;
    assert_int_equal(ws_reader_feed(&r, f, sizeof f, &ev), sizeof f);
    assert_int_equal(ev.kind, WS_EV_MESSAGE);
    assert_ptr_equal(ev.data, f + 6); /* no copy */
    assert_memory_equal(f + 6, "Hello", 5);
    ws_reader_free(&r);
}

static void test_fragments_and_interleaved_control(void **state)
{
    struct wire w = {.n = 0};
    frame(&w, false, WS_OP_TEXT, "He", 2, true, 0);
    frame(&w, true, WS_OP_PING, "pi", 2, true, 0);
    frame(&w, false, WS_OP_CONT, "", 0, true, 0);
    frame(&w, true, WS_OP_PONG, "", 0, true, 0);
    frame(&w, true, WS_OP_CONT, "llo", 3, true, 0);
    frame(&w, true, WS_OP_BINARY, "z", 1, true, 0);
    expect(WS_ROLE_SERVER, &w, "ping:0:0:7069;pong:0:0:;msg:1:0:48656c6c6f;msg:2:0:7a;");
    /* Client role, binary in three pieces. */
    w.n = 0;
    frame(&w, false, WS_OP_BINARY, "a", 1, false, 0);
    frame(&w, false, WS_OP_CONT, "b", 1, false, 0);
    frame(&w, true, WS_OP_CONT, "c", 1, false, 0);
    expect(WS_ROLE_CLIENT, &w, "msg:2:0:616263;");
}

static void test_protocol_errors(void **state)
{
    struct wire w;
    const char *e1002 = "error:0:1002:;";
#define CASE(role, build)                                                                          \
    do {                                                                                           \
        w.n = 0;                                                                                   \
        build;                                                                                     \
        frame(&w, true, WS_OP_TEXT, "after", 5, role == WS_ROLE_SERVER, 0);                        \
        expect(role, &w, e1002);                                                                   \
    } while (0)
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_TEXT, "x", 1, false, 0));   /* unmasked */
    CASE(WS_ROLE_CLIENT, frame(&w, true, WS_OP_TEXT, "x", 1, true, 0));    /* masked to a client */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_TEXT, "x", 1, true, 0x40)); /* RSV1 */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_TEXT, "x", 1, true, 0x10)); /* RSV3 */
    CASE(WS_ROLE_SERVER, frame(&w, true, 3, "x", 1, true, 0));             /* opcode 3 */
    CASE(WS_ROLE_SERVER, frame(&w, true, 0x0b, "x", 1, true, 0));          /* opcode 11 */
    static uint8_t p126[126];
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_PING, p126, 126, true, 0)); /* ping > 125 */
    CASE(WS_ROLE_SERVER, frame(&w, false, WS_OP_PING, "x", 1, true, 0));   /* fragmented ping */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CONT, "x", 1, true, 0));    /* no start */
    CASE(WS_ROLE_SERVER, (frame(&w, false, WS_OP_TEXT, "{", 1, true, 0),
                          frame(&w, true, WS_OP_TEXT, "}", 1, true, 0)));       /* text in text */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x03", 1, true, 0));     /* 1-byte close */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x03\xe7", 2, true, 0)); /* 999 */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x03\xed", 2, true, 0)); /* 1005 */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x03\xee", 2, true, 0)); /* 1006 */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x03\xf7", 2, true, 0)); /* 1015 */
    CASE(WS_ROLE_SERVER, frame(&w, true, WS_OP_CLOSE, "\x13\x88", 2, true, 0)); /* 5000 */
#undef CASE
}

static void test_utf8(void **state)
{
    struct wire w = {.n = 0};
    frame(&w, true, WS_OP_TEXT, "\xff\xfe", 2, true, 0);
    frame(&w, true, WS_OP_TEXT, "x", 1, true, 0);
    expect(WS_ROLE_SERVER, &w, "error:0:1007:;");
    /* Split in the middle of a code point across fragments: valid as a whole. */
    w.n = 0;
    frame(&w, false, WS_OP_TEXT, "\xc3", 1, true, 0);
    frame(&w, true, WS_OP_CONT, "\xa9", 1, true, 0);
    expect(WS_ROLE_SERVER, &w, "msg:1:0:c3a9;");
    /* Invalid only when reassembled. */
    w.n = 0;
    frame(&w, false, WS_OP_TEXT, "abc", 3, true, 0);
    frame(&w, true, WS_OP_CONT, "\xed\xa0\x80", 3, true, 0); /* a surrogate */
    expect(WS_ROLE_SERVER, &w, "error:0:1007:;");
    /* Binary is not checked. */
    w.n = 0;
    frame(&w, true, WS_OP_BINARY, "\xff", 1, true, 0);
    expect(WS_ROLE_SERVER, &w, "msg:2:0:ff;");
    /* A close reason must be UTF-8. */
    w.n = 0;
    frame(&w, true, WS_OP_CLOSE, "\x03\xe8\xff", 3, true, 0);
    expect(WS_ROLE_SERVER, &w, "error:0:1007:;");
}

static void test_close(void **state)
{
    struct wire w = {.n = 0};
    frame(&w, true, WS_OP_CLOSE,
          "\x03\xe8"
          "bye",
          5, true, 0);
    frame(&w, true, WS_OP_TEXT, "ignored", 7, true, 0);
    expect(WS_ROLE_SERVER, &w, "close:0:1000:627965;");
    w.n = 0;
    frame(&w, true, WS_OP_CLOSE, "", 0, false, 0);
    expect(WS_ROLE_CLIENT, &w, "close:0:1005:;");
    w.n = 0;
    frame(&w, true, WS_OP_CLOSE, "\x0f\xa0", 2, true, 0); /* 4000: private use */
    expect(WS_ROLE_SERVER, &w, "close:0:4000:;");
    /* A close in the middle of a fragmented message ends it there. */
    w.n = 0;
    frame(&w, false, WS_OP_BINARY, "a", 1, true, 0);
    frame(&w, true, WS_OP_CLOSE, "\x03\xe9", 2, true, 0);
    expect(WS_ROLE_SERVER, &w, "close:0:1001:;");
    uint8_t out[2];
    assert_int_equal(ws_close_payload(1009, out), 2);
    assert_memory_equal(out, "\x03\xf1", 2);
    assert_int_equal(ws_close_payload(WS_CLOSE_NO_STATUS, out), 0);
}

static void test_limits(void **state)
{
    static uint8_t p[64];
    memset(p, 'a', sizeof p);
    struct wire w = {.n = 0};
    /* A frame exactly at the frame limit passes; one byte more is refused. */
    frame(&w, true, WS_OP_BINARY, p, 16, true, 0);
    frame(&w, true, WS_OP_BINARY, p, 17, true, 0);
    struct trace t;
    run(WS_ROLE_SERVER, w.b, w.n, w.n, w.n, 16, 40, &t);
    assert_int_equal(strncmp(t.s, "msg:2:0:", 8), 0);
    assert_non_null(strstr(t.s, ";error:0:1009:;"));
    /* Fragments within the frame limit whose sum passes the message limit. */
    w.n = 0;
    frame(&w, false, WS_OP_BINARY, p, 16, true, 0);
    frame(&w, false, WS_OP_CONT, p, 16, true, 0);
    frame(&w, true, WS_OP_CONT, p, 9, true, 0);
    expect_lim(WS_ROLE_SERVER, &w, "error:0:1009:;", 16, 40);
    /* Exactly at the message limit passes. */
    w.n = 0;
    frame(&w, false, WS_OP_BINARY, p, 16, true, 0);
    frame(&w, false, WS_OP_CONT, p, 16, true, 0);
    frame(&w, true, WS_OP_CONT, p, 8, true, 0);
    run(WS_ROLE_SERVER, w.b, w.n, 5, 30, 16, 40, &t);
    assert_int_equal(strncmp(t.s, "msg:2:0:", 8), 0);
    assert_int_equal(strlen(t.s), 9 + 80);
    /* A huge announced length is refused on the header, before any payload. */
    uint8_t h[] = {0x82, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4};
    struct ws_reader r;
    ws_reader_init(&r, WS_ROLE_SERVER, 1 << 24, 1 << 26);
    struct ws_event ev;
    assert_int_equal(ws_reader_feed(&r, h, sizeof h, &ev), sizeof h);
    assert_int_equal(ev.kind, WS_EV_ERROR);
    assert_int_equal(ev.code, WS_CLOSE_TOO_BIG);
    assert_true(ws_reader_done(&r));
    ws_reader_free(&r);
    /* Control frames are not bound by the data limits (125 bytes is theirs). */
    w.n = 0;
    frame(&w, true, WS_OP_PING, p, 20, true, 0);
    run(WS_ROLE_SERVER, w.b, w.n, 3, 9, 16, 16, &t);
    assert_int_equal(strncmp(t.s, "ping:0:0:6161", 13), 0);
}

/* A large message (bigbuf-backed) in fragments: fed piece by piece it arrives
 * whole, and so it does when the transport reads straight into
 * ws_reader_recv_area; ws_reader_take then hands over the buffer the event
 * points at, and only then. */
static uint8_t *big_wire(size_t total, size_t frag, size_t *wn, uint8_t **want)
{
    *want = malloc(total);
    for (size_t i = 0; i < total; i++)
        (*want)[i] = (uint8_t)('A' + i % 26);
    uint8_t *wb = malloc(total + (total / frag + 1) * 14);
    size_t n = 0;
    for (size_t off = 0; off < total; off += frag) {
        size_t k = total - off < frag ? total - off : frag;
        size_t h = ws_frame_encode(wb + n, off + k == total, off ? WS_OP_CONT : WS_OP_TEXT, k, key);
        memcpy(wb + n + h, *want + off, k);
        ws_frame_unmask(wb + n + h, k, key);
        n += h + k;
    }
    *wn = n;
    return wb;
}

static void big_feed(bool direct, size_t total, size_t frag, size_t piece, bool gathered)
{
    size_t wn;
    uint8_t *want, *wb = big_wire(total, frag, &wn, &want);
    struct ws_reader r;
    ws_reader_init(&r, WS_ROLE_SERVER, 16u << 20, 64u << 20);
    uint8_t *slab = malloc(piece);
    size_t pos = 0, got = 0;
    uint8_t *data = NULL;
    while (pos < wn) {
        size_t n, area_n = 0;
        uint8_t *area = direct ? ws_reader_recv_area(&r, &area_n) : NULL;
        uint8_t *in = area ? area : slab;
        n = wn - pos < piece ? wn - pos : piece;
        if (area && n > area_n) n = area_n;
        memcpy(in, wb + pos, n); /* the "socket read" */
        pos += n;
        size_t off = 0;
        while (off < n) {
            struct ws_event ev;
            off += ws_reader_feed(&r, in + off, n - off, &ev);
            if (ev.kind == WS_EV_MESSAGE) {
                assert_int_equal(ev.len, total);
                assert_memory_equal(ev.data, want, total);
                data = ev.data;
                got++;
                uint8_t *m = ws_reader_take(&r);
                if (!gathered) {
                    /* Whole in one input: handed out in place, the caller's. */
                    assert_null(m);
                    continue;
                }
                assert_ptr_equal(m, data);
                assert_null(ws_reader_take(&r)); /* once */
                assert_true(bigbuf_cap(m) >= total);
                bigbuf_free(m);
            } else {
                assert_int_equal(ev.kind, WS_EV_NONE);
            }
        }
    }
    assert_int_equal(got, 1);
    ws_reader_free(&r);
    free(slab);
    free(wb);
    free(want);
}

static void test_large_messages(void **state)
{
    (void)state;
    big_feed(false, 1u << 20, 300000, 65536, true);
    big_feed(true, 1u << 20, 300000, 65536, true);
    big_feed(true, 3u << 20, 1u << 20, 100000, true);
    big_feed(true, 700000, 700000, 4096, true); /* one frame, odd pieces */
    big_feed(false, 700000, 700000, 700000 + 14, false);
    /* A small message is not handed over: it stays the reader's. */
    struct wire w = {.n = 0};
    frame(&w, true, WS_OP_TEXT, "hi", 2, true, 0);
    struct ws_reader r;
    ws_reader_init(&r, WS_ROLE_SERVER, 1 << 20, 1 << 20);
    struct ws_event ev;
    ws_reader_feed(&r, w.b, w.n, &ev);
    assert_int_equal(ev.kind, WS_EV_MESSAGE);
    assert_null(ws_reader_take(&r));
    size_t an;
    assert_null(ws_reader_recv_area(&r, &an));
    ws_reader_free(&r);
}

/* The UTF-8 check of a large gathered text message rides on the unmasking: an
 * invalid byte anywhere in it is still a 1007, a valid multi-byte one is not. */
static void test_large_utf8(void **state)
{
    (void)state;
    size_t total = 600000;
    for (int bad = 0; bad < 2; bad++) {
        uint8_t *p = malloc(total);
        memset(p, 'a', total);
        if (bad)
            p[total - 3] = 0xff;
        else
            memcpy(p + total / 2, "\xc3\xa9", 2);
        uint8_t *wb = malloc(total + 64);
        size_t h = ws_frame_encode(wb, true, WS_OP_TEXT, total, key);
        memcpy(wb + h, p, total);
        ws_frame_unmask(wb + h, total, key);
        struct ws_reader r;
        ws_reader_init(&r, WS_ROLE_SERVER, 1 << 20, 1 << 20);
        size_t off = 0, n = h + total;
        struct ws_event ev = {.kind = WS_EV_NONE};
        while (off < n && ev.kind == WS_EV_NONE) {
            size_t k = n - off < 65536 ? n - off : 65536;
            off += ws_reader_feed(&r, wb + off, k, &ev);
        }
        if (bad) {
            assert_int_equal(ev.kind, WS_EV_ERROR);
            assert_int_equal(ev.code, WS_CLOSE_INVALID_DATA);
        } else {
            assert_int_equal(ev.kind, WS_EV_MESSAGE);
            assert_memory_equal(ev.data, p, total);
        }
        ws_reader_free(&r);
        free(wb);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_messages),
        cmocka_unit_test(test_in_place_unmask),
        cmocka_unit_test(test_fragments_and_interleaved_control),
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_close),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_large_messages),
        cmocka_unit_test(test_large_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
