/* Unit tests for fs/fs_util: lossy UTF-8 conversion of file names, checked against
 * the replacement rules of Rust's String::from_utf8_lossy (one U+FFFD per maximal
 * invalid subpart). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fs/fs_util.h"

static void check(const char *in, size_t n, const char *want)
{
    struct buf b;
    buf_init(&b);
    fs_utf8_lossy(&b, in, n);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
