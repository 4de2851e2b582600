/* Unit tests for proto/relay_framing: JSON-RPC messages over plaintext records.
 *
 * Mirrors upstream's message_framing_tests (fragments and reassembles a large message;
 * rejects a declared length above the limit before any payload; rejects an oversized
 * plaintext record; reassembles many messages from one record) and adds the edges:
 * the exact record split, zero-copy delivery, the 64 MiB maximum, bounded buffering
 * and sticky errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/relay_framing.h"

/* Messages the reassembler handed out, copied. */
struct sink {
    uint8_t *msg[16];
    size_t len[16];
    const uint8_t *ptr[16]; /* where each one was delivered from */
    unsigned count;
    int fail; /* returned by on_msg when non-zero */
};

static int on_msg(void *ctx, const uint8_t *msg, size_t len)
{
    struct sink *s = ctx;
    if (s->fail) return s->fail;
    assert_true(s->count < 16);
    s->msg[s->count] = malloc(len);
    memcpy(s->msg[s->count], msg, len);
    s->len[s->count] = len;
    s->ptr[s->count] = msg;
    s->count++;
    return 0;
}

static void sink_free(struct sink *s)
{
    for (unsigned i = 0; i < s->count; i++)
        free(s->msg[i]);
    memset(s, 0, sizeof *s);
}

/* Frames msg, checks every chunk's shape, feeds the records to r. Returns the number
 * of records. */
static size_t frame_and_feed(struct relay_reasm *r, const uint8_t *msg, size_t len, struct sink *s)
{
    struct relay_framer f;
    struct relay_chunk c;
    uint8_t *rec = malloc(RELAY_RECORD_PLAINTEXT_MAX);
    size_t records = 0, off = 0;
    assert_int_equal(relay_framer_init(&f, msg, len), 0);
    while (relay_framer_next(&f, &c)) {
        size_t n = c.head_len + c.body_len;
        assert_true(n > 0 && n <= RELAY_RECORD_PLAINTEXT_MAX);
        assert_int_equal(c.head_len, records == 0 ? RELAY_LENGTH_PREFIX : 0);
        assert_ptr_equal(c.body, msg + off); /* a slice of the caller's text, not a copy */
        /* every record but the last is full */
        if (off + c.body_len < len) assert_int_equal(n, RELAY_RECORD_PLAINTEXT_MAX);
        off += c.body_len;
        memcpy(rec, c.head, c.head_len);
        memcpy(rec + c.head_len, c.body, c.body_len);
        assert_int_equal(relay_reasm_push(r, rec, n, on_msg, s), 0);
        records++;
    }
    assert_false(relay_framer_next(&f, &c)); /* stays finished */
    assert_int_equal(off, len);
    assert_int_equal(records, relay_framer_record_count(len));
    free(rec);
    return records;
}

static void test_fragments_and_reassembles_large_message(void **state)
{
    size_t xs = 128 * 1024;
    const char *pre = "{\"method\":\"large/test\",\"params\":{\"data\":\"";
    const char *post = "\"}}";
    size_t len = strlen(pre) + xs + strlen(post);
    char *msg = malloc(len);
    memcpy(msg, pre, strlen(pre));
    memset(msg + strlen(pre), 'x', xs);
    memcpy(msg + strlen(pre) + xs, post, strlen(post));

    struct relay_reasm r;
    struct sink s = {0};
    relay_reasm_init(&r);
    assert_int_equal(frame_and_feed(&r, (const uint8_t *)msg, len, &s), 3);
    assert_int_equal(s.count, 1);
    assert_int_equal(s.len[0], len);
    assert_memory_equal(s.msg[0], msg, len);
    assert_int_equal(r.prefix_have, 0); /* ready for the next message */
    relay_reasm_free(&r);
    sink_free(&s);
    free(msg);
}

static void test_record_split_edges(void **state)
{
    /* 4 + 61,436 bytes fill exactly one record; one byte more takes two */
    assert_int_equal(relay_framer_record_count(1), 1);
    assert_int_equal(relay_framer_record_count(RELAY_RECORD_PLAINTEXT_MAX - 4), 1);
    assert_int_equal(relay_framer_record_count(RELAY_RECORD_PLAINTEXT_MAX - 3), 2);
    assert_int_equal(relay_framer_record_count(2 * RELAY_RECORD_PLAINTEXT_MAX - 4), 2);
    uint8_t *msg = malloc(RELAY_RECORD_PLAINTEXT_MAX);
    memset(msg, '7', RELAY_RECORD_PLAINTEXT_MAX);
    for (size_t len = RELAY_RECORD_PLAINTEXT_MAX - 5; len <= RELAY_RECORD_PLAINTEXT_MAX; len++) {
        struct relay_reasm r;
        struct sink s = {0};
        relay_reasm_init(&r);
        frame_and_feed(&r, msg, len, &s);
        assert_int_equal(s.count, 1);
        assert_int_equal(s.len[0], len);
        relay_reasm_free(&r);
        sink_free(&s);
    }
    free(msg);

    /* the prefix is big-endian */
    struct relay_framer f;
    struct relay_chunk c;
    assert_int_equal(relay_framer_init(&f, "x", 0x1), 0);
    assert_true(relay_framer_next(&f, &c));
    assert_memory_equal(c.head, "\0\0\0\1", 4);
    static const uint8_t big[0x010203];
    assert_int_equal(relay_framer_init(&f, big, sizeof big), 0);
    assert_true(relay_framer_next(&f, &c));
    assert_memory_equal(c.head, "\0\1\2\3", 4);
}

static void test_framer_rejects_bad_lengths(void **state)
{
    struct relay_framer f;
    struct relay_chunk c;
    static const uint8_t one[1];
    assert_int_equal(relay_framer_init(&f, one, 0), RELAY_E_MSG_LEN);
    assert_false(relay_framer_next(&f, &c));
    /* init never reads the text, so a bogus length is safe to pass */
    assert_int_equal(relay_framer_init(&f, one, (size_t)RELAY_MESSAGE_MAX + 1), RELAY_E_MSG_LEN);
    assert_false(relay_framer_next(&f, &c));
    assert_int_equal(relay_framer_init(&f, one, (size_t)RELAY_MESSAGE_MAX), 0);
}

static void test_rejects_declared_length_above_limit_without_payload(void **state)
{
    struct relay_reasm r;
    struct sink s = {0};
    uint32_t too_big = RELAY_MESSAGE_MAX + 1;
    uint8_t prefix[4] = {(uint8_t)(too_big >> 24), (uint8_t)(too_big >> 16),
                         (uint8_t)(too_big >> 8), (uint8_t)too_big};
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, prefix, 4, on_msg, &s), RELAY_E_MSG_LEN);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"{}", 2, on_msg, &s), RELAY_E_MSG_LEN);
    relay_reasm_free(&r);

    /* length 0, split across two records: judged when the fourth byte arrives */
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0\0", 2, on_msg, &s), 0);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0\0", 2, on_msg, &s), RELAY_E_MSG_LEN);
    relay_reasm_free(&r);

    /* exactly 64 MiB is accepted, and only what arrives is buffered */
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\4\0\0\0", 4, on_msg, &s), 0);
    assert_int_equal(r.msg_len, RELAY_MESSAGE_MAX);
    assert_int_equal(r.cap, 0);
    uint8_t *rec = calloc(1, RELAY_RECORD_PLAINTEXT_MAX);
    assert_int_equal(relay_reasm_push(&r, rec, RELAY_RECORD_PLAINTEXT_MAX, on_msg, &s), 0);
    assert_true(r.cap <= 64 * 1024);
    free(rec);
    relay_reasm_free(&r);
    assert_int_equal(s.count, 0);
}

static void test_rejects_oversized_plaintext_record(void **state)
{
    struct relay_reasm r;
    struct sink s = {0};
    uint8_t *rec = calloc(1, RELAY_RECORD_PLAINTEXT_MAX + 1);
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, rec, RELAY_RECORD_PLAINTEXT_MAX + 1, on_msg, &s),
                     RELAY_E_RECORD_LEN);
    assert_int_equal(r.prefix_have, 0); /* nothing of it was taken */
    relay_reasm_free(&r);
    free(rec);
}

static void test_reassembles_many_messages_from_one_record(void **state)
{
    /* one record: three whole messages and the start of a fourth */
    static const uint8_t rec1[] = "\0\0\0\2{}\0\0\0\3[1]\0\0\0\1"
                                  "7\0\0\0\7{\"a\"";
    static const uint8_t rec2[] = ":1}";
    struct relay_reasm r;
    struct sink s = {0};
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, rec1, sizeof rec1 - 1, on_msg, &s), 0);
    assert_int_equal(s.count, 3);
    assert_int_equal(s.len[0], 2);
    assert_memory_equal(s.msg[0], "{}", 2);
    assert_memory_equal(s.msg[1], "[1]", 3);
    assert_memory_equal(s.msg[2], "7", 1);
    /* whole messages came straight out of the record */
    assert_ptr_equal(s.ptr[0], rec1 + 4);
    assert_ptr_equal(s.ptr[2], rec1 + 17);
    assert_int_equal(relay_reasm_push(&r, rec2, sizeof rec2 - 1, on_msg, &s), 0);
    assert_int_equal(s.count, 4);
    assert_int_equal(s.len[3], 7);
    assert_memory_equal(s.msg[3], "{\"a\":1}", 7);
    /* empty records are harmless */
    assert_int_equal(relay_reasm_push(&r, NULL, 0, on_msg, &s), 0);
    /* a prefix split 1+3 over records, then the body in the second */
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0", 1, on_msg, &s), 0);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0\0\2ok", 5, on_msg, &s), 0);
    assert_int_equal(s.count, 5);
    assert_memory_equal(s.msg[4], "ok", 2);
    relay_reasm_free(&r);
    sink_free(&s);
}

/* A failing consumer (say, the text is not JSON) stops the record; the error sticks. */
static void test_consumer_error_sticks(void **state)
{
    struct relay_reasm r;
    struct sink s = {.fail = -42};
    relay_reasm_init(&r);
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0\0\0\1a\0\0\0\1b", 10, on_msg, &s),
                     -42);
    s.fail = 0;
    assert_int_equal(relay_reasm_push(&r, (const uint8_t *)"\0\0\0\1c", 5, on_msg, &s), -42);
    assert_int_equal(s.count, 0);
    relay_reasm_free(&r);
}

/* Checks the one expected message in place instead of copying 64 MiB. */
struct expect {
    const uint8_t *msg;
    size_t len;
    unsigned seen;
};

static int on_expected(void *ctx, const uint8_t *msg, size_t len)
{
    struct expect *e = ctx;
    assert_int_equal(len, e->len);
    assert_int_equal(memcmp(msg, e->msg, len), 0);
    e->seen++;
    return 0;
}

/* The largest message there can be, end to end. */
static void test_max_message_round_trip(void **state)
{
    size_t len = RELAY_MESSAGE_MAX;
    uint8_t *msg = malloc(len);
    for (size_t i = 0; i < len; i++)
        msg[i] = (uint8_t)(i * 131 >> 7);
    struct relay_framer f;
    struct relay_chunk c;
    struct relay_reasm r;
    struct expect e = {msg, len, 0};
    uint8_t *rec = malloc(RELAY_RECORD_PLAINTEXT_MAX);
    size_t records = 0;
    relay_reasm_init(&r);
    assert_int_equal(relay_framer_init(&f, msg, len), 0);
    while (relay_framer_next(&f, &c)) {
        memcpy(rec, c.head, c.head_len);
        memcpy(rec + c.head_len, c.body, c.body_len);
        assert_int_equal(relay_reasm_push(&r, rec, c.head_len + c.body_len, on_expected, &e), 0);
        assert_true(r.cap <= RELAY_MESSAGE_MAX);
        records++;
    }
    assert_int_equal(records, relay_framer_record_count(len));
    assert_int_equal(records, 1093); /* ceil((4 + 64 MiB) / 61,440) */
    assert_int_equal(e.seen, 1);
    assert_null(r.buf); /* a 64 MiB buffer is not kept for the next message */
    relay_reasm_free(&r);
    free(rec);
    free(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fragments_and_reassembles_large_message),
        cmocka_unit_test(test_record_split_edges),
        cmocka_unit_test(test_framer_rejects_bad_lengths),
        cmocka_unit_test(test_rejects_declared_length_above_limit_without_payload),
        cmocka_unit_test(test_rejects_oversized_plaintext_record),
        cmocka_unit_test(test_reassembles_many_messages_from_one_record),
        cmocka_unit_test(test_consumer_error_sticks),
        cmocka_unit_test(test_max_message_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
