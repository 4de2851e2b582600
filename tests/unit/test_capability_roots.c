/* Unit tests for the pure parts of capabilities/capability_roots: the UTF-8 check whose
 * positions the "is not UTF-8" warnings quote (Rust's Utf8Error: valid_up_to and
 * error_len, None at a truncated end), and the rules for paths a plugin manifest
 * declares ("./" prefix, no "..", not empty). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/caproots_scan.h"
#include "proto/utf8.h"

static void bad(const char *s, size_t n, size_t at, size_t len)
{
    size_t got_at = 99, got_len = 99;
    assert_false(utf8_check(s, n, &got_at, &got_len));
    assert_int_equal(got_at, at);
    assert_int_equal(got_len, len);
}

static void test_utf8(void **state)
{
    (void)state;
    size_t a, l;
    assert_true(utf8_check("", 0, &a, &l));
    assert_true(utf8_check("h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 10, &a, &l));
    bad("ok\xFF\xFE", 4, 2, 1);       /* never a lead byte */
    bad("ab\xE2\x82", 4, 2, 0);       /* ends inside a sequence */
    bad("\xE2\x82x", 3, 0, 2);        /* third byte not a continuation */
    bad("\xF0\x9F\x98x", 4, 0, 3);    /* fourth byte not a continuation */
    bad("\xE0\x80\x80", 3, 0, 1);     /* overlong */
    bad("\xED\xA0\x80", 3, 0, 1);     /* surrogate */
    bad("\xF4\x90\x80\x80", 4, 0, 1); /* above U+10FFFF */
    bad("\xC0\xAF", 2, 0, 1);         /* C0/C1 never lead */
    bad("x\xC3", 2, 1, 0);
}

static void test_declared_path(void **state)
{
    (void)state;
    const char *rel = NULL;
    assert_int_equal(caproots_declared_path("./conf/mcp.json", &rel), 0);
    assert_string_equal(rel, "conf/mcp.json");
    assert_int_equal(caproots_declared_path("./a/./b", &rel), 0);
    assert_int_equal(caproots_declared_path("mcp.json", &rel), 1);
    assert_int_equal(caproots_declared_path("/etc/passwd", &rel), 1);
    assert_int_equal(caproots_declared_path(".\\x", &rel), 1);
    assert_int_equal(caproots_declared_path("./", &rel), 2);
    assert_int_equal(caproots_declared_path("./../x", &rel), 2);
    assert_int_equal(caproots_declared_path("./a/../../x", &rel), 2);
    assert_int_equal(caproots_declared_path("./a\\..\\x", &rel), 2);
    assert_int_equal(caproots_declared_path(".//etc/passwd", &rel), 2);
    assert_int_equal(caproots_declared_path("./..a/b", &rel), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_declared_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
