/* Unit tests for util/buf: growth and the hand-written JSON writers.
 *
 * The JSON writers bypass jansson on the hot path, so their output is checked
 * both literally and by parsing it back with jansson. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proto/base64.h"
#include "util/buf.h"

/* The buffer's contents as a NUL-terminated string (appends the NUL). */
static const char *cstr(struct buf *b)
{
    buf_putc(b, '\0');
    b->len--;
    return b->data;
}

static void test_growth(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    for (int i = 0; i < 10000; i++)
        buf_putc(&b, (char)('a' + i % 26));
    assert_int_equal(b.len, 10000);
    assert_true(b.cap >= b.len);
    assert_int_equal(b.data[9999], 'a' + 9999 % 26);
    buf_append(&b, NULL, 0);
    assert_int_equal(b.len, 10000);
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    buf_puts(&b, "xyz");
    assert_string_equal(cstr(&b), "xyz");
    char *p = buf_steal(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_memory_equal(p, "xyz", 3);
    free(p);
    buf_free(&b);
}

static void test_msg_headroom(void **state)
{
    (void)state;
    struct buf b;
    buf_init_msg(&b);
    assert_int_equal(b.len, BUF_MSG_HEADROOM);
    buf_puts(&b, "{}");
    assert_int_equal(b.len, BUF_MSG_HEADROOM + 2);
    assert_memory_equal(b.data + BUF_MSG_HEADROOM, "{}", 2);
    buf_free(&b);
}

static void test_printf(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "%s=%d", "a", 42);
    buf_printf(&b, "%s", ""); /* nothing appended */
    char big[1000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_printf(&b, ";%s", big);
    assert_int_equal(b.len, 4 + 1 + 999);
    assert_memory_equal(b.data, "a=42;qqq", 8);
    buf_free(&b);
}

static void test_integers(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    buf_put_u64(&b, 0);
    buf_putc(&b, ' ');
    buf_put_u64(&b, 7);
    buf_putc(&b, ' ');
    buf_put_u64(&b, UINT64_MAX);
    buf_putc(&b, ' ');
    buf_put_i64(&b, 0);
    buf_putc(&b, ' ');
    buf_put_i64(&b, -1);
    buf_putc(&b, ' ');
    buf_put_i64(&b, INT64_MAX);
    buf_putc(&b, ' ');
    buf_put_i64(&b, INT64_MIN);
    assert_string_equal(cstr(&b), "0 7 18446744073709551615 0 -1 9223372036854775807 "
                                  "-9223372036854775808");
    buf_free(&b);
}

static void json_str_is(const char *s, size_t n, const char *want)
{
    struct buf b;
    buf_init(&b);
    buf_put_json_str(&b, s, n);
    assert_string_equal(cstr(&b), want);
    /* jansson reads it back to the same bytes. */
    json_error_t e;
    json_t *v = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    assert_non_null(v);
    assert_true(json_is_string(v));
    assert_int_equal(json_string_length(v), n);
    if (n) assert_memory_equal(json_string_value(v), s, n);
    json_decref(v);
    buf_free(&b);
}

static void test_json_str(void **state)
{
    (void)state;
    json_str_is("", 0, "\"\"");
    json_str_is("plain", 5, "\"plain\"");
    json_str_is("a\"b", 3, "\"a\\\"b\"");
    json_str_is("a\\b", 3, "\"a\\\\b\"");
    json_str_is("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    json_str_is("\x01\x1f", 2, "\"\\u0001\\u001f\"");
    json_str_is("x\0y", 3, "\"x\\u0000y\"");
    json_str_is("/ \x7f", 3, "\"/ \x7f\"");
    json_str_is("caf\xc3\xa9 \xe2\x82\xac", 9, "\"caf\xc3\xa9 \xe2\x82\xac\"");
    /* Every control character round-trips. */
    char ctl[32];
    for (int i = 0; i < 32; i++)
        ctl[i] = (char)i;
    struct buf b;
    buf_init(&b);
    buf_put_json_str(&b, ctl, sizeof ctl);
    json_error_t e;
    json_t *v = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    assert_non_null(v);
    assert_int_equal(json_string_length(v), 32);
    assert_memory_equal(json_string_value(v), ctl, 32);
    json_decref(v);
    buf_free(&b);
}

static void test_base64(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b);
    base64_append(&b, "", 0);
    assert_int_equal(b.len, 0);
    buf_puts(&b, "[");
    base64_append(&b, "foobar", 6);
    base64_append(&b, "f", 1);
    buf_puts(&b, "]");
    assert_string_equal(cstr(&b), "[Zm9vYmFyZg==]");
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth),   cmocka_unit_test(test_msg_headroom),
        cmocka_unit_test(test_printf),   cmocka_unit_test(test_integers),
        cmocka_unit_test(test_json_str), cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
