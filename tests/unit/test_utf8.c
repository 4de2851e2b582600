/* Unit tests for proto/utf8: the strict checker, and the lossy conversion of file
 * names checked against the replacement rules of Rust's String::from_utf8_lossy
 * (one U+FFFD per maximal invalid subpart). The two must agree: a string is valid
 * exactly when the lossy conversion leaves it unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/utf8.h"

static void check(const char *in, size_t n, const char *want)
{
    struct buf b;
    buf_init(&b);
    utf8_lossy(&b, in, n);
    bool same = b.len == n && (n == 0 || memcmp(b.data, in, n) == 0);
    assert_int_equal(utf8_valid(in, n), same);
    buf_putc(&b, '\0');
    assert_string_equal(b.data, want);
    buf_free(&b);
}

#define R "\xEF\xBF\xBD"

static void test_valid(void **state)
{
    (void)state;
    check("", 0, "");
    check("abc", 3, "abc");
    check("\xC3\xA9", 2, "\xC3\xA9");
    check("\xE2\x82\xAC", 3, "\xE2\x82\xAC");
    check("\xF0\x9F\x98\x80", 4, "\xF0\x9F\x98\x80");
}

static void test_invalid(void **state)
{
    (void)state;
    check("a\xFF\xFE"
          "b",
          4, "a" R R "b");
    check("\x80", 1, R);
    check("\xC0\x80", 2, R R); /* overlong lead bytes are invalid */
    check("\xE2\x82", 2, R);   /* truncated: one replacement */
    check("\xE2\x82x", 3, R "x");
    check("\xED\xA0\x80", 3, R R R); /* surrogates */
    check("\xF0\x9F\x98", 3, R);
    check("\xF4\x90\x80\x80", 4, R R R R); /* above U+10FFFF */
    check("\xF5", 1, R);
}

/* The eight-byte ASCII skip must not hide a bad byte at any position. */
/* utf8_check agrees with utf8_valid and places errors as Rust's Utf8Error does. */
static void test_check_position(void **state)
{
    (void)state;
    size_t at = 99, len = 99;
    assert_true(utf8_check("h\xC3\xA9", 3, &at, &len));
    assert_int_equal(at, 99); /* untouched on success */
    assert_false(utf8_check("ab\xE2\x82", 4, &at, &len));
    assert_int_equal(at, 2);
    assert_int_equal(len, 0); /* may still complete */
    assert_false(utf8_check("ab\xFF", 3, &at, &len));
    assert_int_equal(len, 1); /* never a lead byte, even at the end */
    assert_false(utf8_check("\xF0\x9F\x98x", 4, &at, &len));
    assert_int_equal(at, 0);
    assert_int_equal(len, 3);
}

static void test_white_space(void **state)
{
    (void)state;
    assert_true(utf8_all_white_space("", 0));
    assert_true(utf8_all_white_space(" \t\r\n\xC2\xA0\xE3\x80\x80", 9)); /* NBSP, U+3000 */
    assert_false(utf8_all_white_space(" s1 ", 4));
    assert_false(utf8_all_white_space("\xE2\x80\x8B", 3)); /* U+200B is not White_Space */
}

static void test_valid_long(void **state)
{
    (void)state;
    char s[40];
    for (size_t pos = 0; pos < sizeof s; pos++) {
        memset(s, 'a', sizeof s);
        assert_true(utf8_valid(s, sizeof s));
        s[pos] = (char)0xFF;
        assert_false(utf8_valid(s, sizeof s));
        s[pos] = (char)0xC3; /* truncated two-byte form, or followed by 'a' */
        assert_false(utf8_valid(s, sizeof s));
        if (pos + 1 < sizeof s) {
            s[pos + 1] = (char)0xA9;
            assert_true(utf8_valid(s, sizeof s));
        }
    }
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("\xEF\xBF\xBF", 3));      /* U+FFFF */
    assert_true(utf8_valid("\xF4\x8F\xBF\xBF", 4));  /* U+10FFFF */
    assert_false(utf8_valid("\xE0\x9F\xBF", 3));     /* overlong */
    assert_false(utf8_valid("\xF0\x8F\xBF\xBF", 4)); /* overlong */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),       cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_valid_long),  cmocka_unit_test(test_check_position),
        cmocka_unit_test(test_white_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
