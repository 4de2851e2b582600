/* Unit tests for proto/relay_order: the ciphertext reorder window.
 *
 * Mirrors upstream's ordered_ciphertext_tests (release only in nonce order; duplicates
 * dropped without replacing the held copy; unbounded reordering rejected) with the
 * upstream-main numbers (seq from 0, 64 records / 1 MiB), plus the window edges, the
 * sequence exhaustion rule and sticky errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/relay_order.h"

/* What deliver saw, concatenated as "seq:text " so a test compares one string. */
struct log {
    char text[8192];
    size_t len;
    unsigned count;
    int fail_at; /* deliver fails on this seq (-1: never) */
};

static int deliver(void *ctx, uint32_t seq, const uint8_t *rec, size_t len)
{
    struct log *l = ctx;
    if (l->fail_at >= 0 && (uint32_t)l->fail_at == seq) return -5;
    l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "%u:%.*s ", seq, (int)len,
                               rec ? (const char *)rec : "");
    l->count++;
    return 0;
}

static int push(struct relay_order *o, struct log *l, uint32_t seq, const char *text)
{
    return relay_order_push(o, seq, (const uint8_t *)text, strlen(text), deliver, l);
}

static void test_releases_only_in_nonce_order(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};
    relay_order_init(&o);
    assert_int_equal(push(&o, &l, 2, "third"), 0);
    assert_int_equal(push(&o, &l, 1, "second"), 0);
    assert_int_equal(l.count, 0);
    assert_int_equal(o.pending, 2);
    assert_int_equal(push(&o, &l, 0, "first"), 0);
    assert_string_equal(l.text, "0:first 1:second 2:third ");
    assert_int_equal(o.next_seq, 3);
    assert_int_equal(o.pending, 0);
    assert_int_equal(o.pending_bytes, 0);
    /* in-order records go straight through */
    assert_int_equal(push(&o, &l, 3, "fourth"), 0);
    assert_string_equal(l.text, "0:first 1:second 2:third 3:fourth ");
    /* a gap holds everything behind it, then one record releases the run */
    assert_int_equal(push(&o, &l, 5, "six"), 0);
    assert_int_equal(push(&o, &l, 7, "eight"), 0);
    assert_int_equal(push(&o, &l, 4, "five"), 0);
    assert_string_equal(l.text + 34, "4:five 5:six ");
    assert_int_equal(o.next_seq, 6);
    assert_int_equal(o.pending, 1);
    assert_int_equal(push(&o, &l, 6, "seven"), 0);
    assert_string_equal(l.text + 34, "4:five 5:six 6:seven 7:eight ");
    relay_order_free(&o);
}

static void test_duplicates_ignored_without_replacing(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};
    relay_order_init(&o);
    assert_int_equal(push(&o, &l, 1, "first copy"), 0);
    assert_int_equal(push(&o, &l, 1, "replacement"), 0);
    assert_int_equal(o.pending, 1);
    assert_int_equal(o.pending_bytes, 10);
    assert_int_equal(push(&o, &l, 0, "zero"), 0);
    assert_string_equal(l.text, "0:zero 1:first copy ");
    /* already released: dropped, no error */
    assert_int_equal(push(&o, &l, 0, "again"), 0);
    assert_int_equal(push(&o, &l, 1, "again"), 0);
    assert_int_equal(l.count, 2);
    relay_order_free(&o);
}

static void test_rejects_unbounded_reordering(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};

    /* 64 ahead is the last seq that may wait; 65 is a protocol error */
    relay_order_init(&o);
    assert_int_equal(push(&o, &l, 64, "x"), 0);
    assert_int_equal(push(&o, &l, 65, "x"), RELAY_E_REORDER_WINDOW);
    assert_int_equal(push(&o, &l, 0, "x"), RELAY_E_REORDER_WINDOW); /* sticky */
    assert_int_equal(l.count, 0);
    relay_order_free(&o);

    /* all 64 slots of the window can be held at once, and all come out */
    relay_order_init(&o);
    for (uint32_t seq = 1; seq <= 64; seq++)
        assert_int_equal(push(&o, &l, seq, "r"), 0);
    assert_int_equal(o.pending, 64);
    assert_int_equal(push(&o, &l, 0, "r"), 0);
    assert_int_equal(l.count, 65);
    assert_int_equal(o.next_seq, 65);
    relay_order_free(&o);

    /* 1 MiB of held ciphertext is the limit, one byte more is an error */
    relay_order_init(&o);
    uint8_t *big = calloc(1, RELAY_ORDER_MAX_PENDING_BYTES + 1);
    assert_int_equal(relay_order_push(&o, 2, big, RELAY_ORDER_MAX_PENDING_BYTES + 1, deliver, &l),
                     RELAY_E_REORDER_FULL);
    relay_order_free(&o);
    relay_order_init(&o);
    assert_int_equal(relay_order_push(&o, 2, big, RELAY_ORDER_MAX_PENDING_BYTES - 1, deliver, &l),
                     0);
    assert_int_equal(relay_order_push(&o, 3, big, 1, deliver, &l), 0);
    assert_int_equal(relay_order_push(&o, 4, big, 1, deliver, &l), RELAY_E_REORDER_FULL);
    relay_order_free(&o);
    free(big);
}

/* The window moves with next_seq: after 100 in-order records, 164 may wait, 165 not,
 * and slot reuse across the ring does not mix records up. */
static void test_window_slides(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};
    relay_order_init(&o);
    for (uint32_t seq = 0; seq < 100; seq++)
        assert_int_equal(push(&o, &l, seq, "a"), 0);
    assert_int_equal(push(&o, &l, 164, "last"), 0);
    assert_int_equal(push(&o, &l, 165, "x"), RELAY_E_REORDER_WINDOW);
    relay_order_free(&o);

    relay_order_init(&o);
    memset(&l, 0, sizeof l);
    l.fail_at = -1;
    char text[16];
    /* deliver 0..199 in reversed blocks of 50 (each block held and then released) */
    for (uint32_t block = 0; block < 200; block += 50) {
        for (uint32_t i = 50; i-- > 0;) {
            snprintf(text, sizeof text, "%u", block + i);
            assert_int_equal(push(&o, &l, block + i, text), 0);
        }
    }
    assert_int_equal(l.count, 200);
    char *p = l.text;
    for (uint32_t seq = 0; seq < 200; seq++) {
        unsigned a, b;
        int n = 0;
        assert_int_equal(sscanf(p, "%u:%u %n", &a, &b, &n), 2);
        assert_int_equal(a, seq);
        assert_int_equal(b, seq);
        p += n;
    }
    relay_order_free(&o);
}

/* Releasing the record with seq UINT32_MAX would wrap next_seq: fatal, and the record
 * before it is still delivered. */
static void test_sequence_exhaustion(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};
    relay_order_init(&o);
    o.next_seq = UINT32_MAX - 1;
    assert_int_equal(push(&o, &l, UINT32_MAX, "last"), 0); /* may wait */
    assert_int_equal(push(&o, &l, UINT32_MAX - 1, "penultimate"), RELAY_E_SEQ_EXHAUSTED);
    assert_string_equal(l.text, "4294967294:penultimate ");
    assert_int_equal(push(&o, &l, 0, "x"), RELAY_E_SEQ_EXHAUSTED);
    relay_order_free(&o);

    relay_order_init(&o);
    memset(&l, 0, sizeof l);
    l.fail_at = -1;
    o.next_seq = UINT32_MAX;
    assert_int_equal(push(&o, &l, UINT32_MAX, "x"), RELAY_E_SEQ_EXHAUSTED);
    assert_int_equal(l.count, 0);
    relay_order_free(&o);
}

/* A failing deliver (say, decryption) stops the run; its code sticks, and held
 * records are freed by relay_order_free (ASan checks). */
static void test_deliver_error_sticks(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = 2};
    relay_order_init(&o);
    assert_int_equal(push(&o, &l, 3, "d"), 0);
    assert_int_equal(push(&o, &l, 2, "c"), 0);
    assert_int_equal(push(&o, &l, 1, "b"), 0);
    assert_int_equal(push(&o, &l, 0, "a"), -5);
    assert_string_equal(l.text, "0:a 1:b ");
    assert_int_equal(push(&o, &l, 4, "e"), -5);
    assert_int_equal(o.pending, 1); /* seq 3 is still held */
    relay_order_free(&o);
}

/* Empty records are legal to the window (the frame codec rejects empty data payloads
 * before they get here). */
static void test_empty_records(void **state)
{
    struct relay_order o;
    struct log l = {.fail_at = -1};
    relay_order_init(&o);
    assert_int_equal(relay_order_push(&o, 1, NULL, 0, deliver, &l), 0);
    assert_int_equal(relay_order_push(&o, 0, NULL, 0, deliver, &l), 0);
    assert_int_equal(l.count, 2);
    relay_order_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_releases_only_in_nonce_order),
        cmocka_unit_test(test_duplicates_ignored_without_replacing),
        cmocka_unit_test(test_rejects_unbounded_reordering),
        cmocka_unit_test(test_window_slides),
        cmocka_unit_test(test_sequence_exhaustion),
        cmocka_unit_test(test_deliver_error_sticks),
        cmocka_unit_test(test_empty_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
