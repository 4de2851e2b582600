/* Unit tests for proto/json_load: json_load_message must give exactly what json_loadb
 * gives (same tree, same error text) whatever the message, with or without big
 * strings to splice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/json_load.h"

static char *big(size_t n, char fill)
{
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = (char)("ABCDEFGHabcdefgh0123456789+/"[i % 28]);
    if (fill) s[n / 2] = fill;
    s[n] = 0;
    return s;
}

/* Both loaders on msg: equal trees, or both NULL with the same error. */
static void same(const char *msg)
{
    json_error_t e1, e2;
    json_t *a = json_loadb(msg, strlen(msg), JSON_REJECT_DUPLICATES, &e1);
    json_t *b = json_load_message(msg, strlen(msg), JSON_REJECT_DUPLICATES, &e2);
    if (!a) {
        assert_null(b);
        assert_string_equal(e1.text, e2.text);
        assert_int_equal(e1.line, e2.line);
        assert_int_equal(e1.column, e2.column);
        return;
    }
    assert_non_null(b);
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
}

static void check_with(const char *fmt, char fill)
{
    char *s = big(100000, fill);
    size_t n = strlen(fmt) + 2 * strlen(s) + 16;
    char *msg = malloc(n);
    snprintf(msg, n, fmt, s, s);
    same(msg);
    free(msg);
    free(s);
}

static void test_equal_to_jansson(void **state)
{
    (void)state;
    same("{\"id\":1,\"method\":\"x\"}");
    check_with("{\"id\":1,\"method\":\"fs/writeFile\",\"params\":{\"path\":\"file:///a\","
               "\"dataBase64\":\"%s\"},\"x\":\"%s\"}",
               0);
    check_with("{\"a\":[\"%s\",{\"b\":\"%s\"}], \"c\" : \"small\"}", 0);
    check_with("{\"%s\":1,\"k\":\"%s\"}", 0);      /* a big key is not spliced */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", '\\'); /* escapes: plain jansson */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", '\x01');
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", (char)0xc3); /* invalid UTF-8 alone */
    check_with("{\"a\":\"%s\",\"a\":\"%s\"}", 0);  /* duplicate key error */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"", 0);   /* truncated */
    check_with("{\"a\":\"%s\" \"b\":\"%s\"}", 0);  /* missing comma */
    check_with("[\"%s\",\"%s\"]", 0);
}

static void test_many_big_strings_fall_back(void **state)
{
    (void)state;
    char *s = big(20000, 0);
    size_t n = 40 * (strlen(s) + 16) + 16;
    char *msg = malloc(n);
    size_t len = 0;
    msg[len++] = '[';
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(msg + len, n - len, "%s\"%s\"", i ? "," : "", s);
    msg[len++] = ']';
    msg[len] = 0;
    same(msg);
    free(msg);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_to_jansson),
        cmocka_unit_test(test_many_big_strings_fall_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
