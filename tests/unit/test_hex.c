/* Unit tests for proto/hex: digit values, decode, encode and the lower-case check. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/hex.h"

static void test_value(void **state)
{
    assert_int_equal(hex_value('0'), 0);
    assert_int_equal(hex_value('9'), 9);
    assert_int_equal(hex_value('a'), 10);
    assert_int_equal(hex_value('F'), 15);
    assert_int_equal(hex_value('g'), -1);
    assert_int_equal(hex_value('G'), -1);
    assert_int_equal(hex_value('/'), -1);
    assert_int_equal(hex_value(':'), -1);
    assert_int_equal(hex_value('@'), -1);
    assert_int_equal(hex_value('`'), -1);
    assert_int_equal(hex_value(0), -1);
    assert_int_equal(hex_value(0xe9), -1);
}

static void test_decode(void **state)
{
    uint8_t out[4] = {0};
    assert_int_equal(hex_decode("00ff7Fa0", 8, out), 0);
    assert_memory_equal(out, "\x00\xff\x7f\xa0", 4);
    assert_int_equal(hex_decode("abc", 3, out), -EINVAL);
    assert_int_equal(hex_decode("zz", 2, out), -EINVAL);
    assert_int_equal(hex_decode("0g", 2, out), -EINVAL);
    assert_int_equal(hex_decode("", 0, out), 0);
}

static void test_encode_round_trip(void **state)
{
    uint8_t in[256], back[256];
    char text[513];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    hex_encode(in, sizeof in, text);
    assert_int_equal(strlen(text), 512);
    assert_memory_equal(text, "000102", 6);
    assert_string_equal(text + 500, "fafbfcfdfeff");
    assert_true(hex_is_lower(text, 512));
    assert_int_equal(hex_decode(text, 512, back), 0);
    assert_memory_equal(in, back, sizeof in);
}

static void test_is_lower(void **state)
{
    assert_true(hex_is_lower("0af9", 4));
    assert_false(hex_is_lower("0aF9", 4));
    assert_false(hex_is_lower("0ag9", 4));
    assert_true(hex_is_lower("xyz", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_encode_round_trip),
        cmocka_unit_test(test_is_lower),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
