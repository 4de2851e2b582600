/* Unit tests for proto/json_load: json_load_message must give exactly what json_loadb
 * gives (same tree, same error text) whatever the message, with or without big
 * strings to splice, except for integers outside int64, which it reads where jansson
 * gives up. */
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
    for (size_t i = 0; i < n; i++)
        s[i] = (char)("ABCDEFGHabcdefgh0123456789+/"[i % 28]);
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
    check_with("{\"%s\":1,\"k\":\"%s\"}", 0);        /* a big key is not spliced */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", '\\'); /* escapes: plain jansson */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", '\x01');
    check_with("{\"a\":\"%s\",\"b\":\"%s\"}", (char)0xc3); /* invalid UTF-8 alone */
    check_with("{\"a\":\"%s\",\"a\":\"%s\"}", 0);          /* duplicate key error */
    check_with("{\"a\":\"%s\",\"b\":\"%s\"", 0);           /* truncated */
    check_with("{\"a\":\"%s\" \"b\":\"%s\"}", 0);          /* missing comma */
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

/* Integers outside int64: jansson fails the whole message ("too big integer"); the
 * loader reads each as a real instead, and one in [2^63, 2^64) keeps its exact value
 * for json_load_u64 (issue 21: the request's id was lost). */
static json_t *load(const char *msg)
{
    json_error_t e;
    return json_load_message(msg, strlen(msg), JSON_REJECT_DUPLICATES, &e);
}

static void test_integers_past_int64(void **state)
{
    (void)state;
    json_t *m = load("{\"id\":7,\"p\":{\"a\":18446744073709551615,\"b\":9223372036854775808,"
                     "\"c\":[18446744073709551616,-9223372036854775809,5,-1],"
                     "\"s\":\"18446744073709551615\",\"r\":1e19}}");
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "id")), 7);
    json_t *p = json_object_get(m, "p");
    uint64_t u = 0;
    assert_true(json_load_u64(json_object_get(p, "a"), &u));
    assert_true(u == UINT64_MAX);
    assert_true(json_load_u64(json_object_get(p, "b"), &u));
    assert_true(u == 9223372036854775808ull);
    json_t *c = json_object_get(p, "c");
    assert_true(json_is_real(json_array_get(c, 0))); /* past u64: a float, as serde_json */
    assert_false(json_load_u64(json_array_get(c, 0), &u));
    assert_true(json_is_real(json_array_get(c, 1)));
    assert_false(json_load_u64(json_array_get(c, 1), &u));
    assert_true(json_load_u64(json_array_get(c, 2), &u) && u == 5);
    assert_false(json_load_u64(json_array_get(c, 3), &u));
    assert_string_equal(json_string_value(json_object_get(p, "s")), "18446744073709551615");
    assert_false(json_load_u64(json_object_get(p, "r"), &u)); /* written as a real */
    /* A copy of the value is just a real: only the loaded node carries the integer. */
    json_t *copy = json_real(json_real_value(json_object_get(p, "a")));
    assert_false(json_load_u64(copy, &u));
    json_decref(copy);
    json_decref(m);
    /* Other errors keep jansson's text; a literal past any double stays an error. */
    json_error_t e;
    const char *bad = "{\"a\":18446744073709551615,}";
    assert_null(json_load_message(bad, strlen(bad), 0, &e));
    assert_null(load("{\"a\":1"
                     "000000000000000000000000000000000000000000000000000000000000"
                     "0000000000000000000000000000000000000000000000000000000000000000000000"
                     "0000000000000000000000000000000000000000000000000000000000000000000000"
                     "0000000000000000000000000000000000000000000000000000000000000000000000"
                     "0000000000000000000000000000000000000000000000000000000000000000000000"
                     "00000000000000000000000000000000000000000000000000000000000000000000}"));
    /* Many messages: entries of freed messages are dropped, live ones stay exact. */
    json_t *keep = load("[18446744073709551614]");
    for (int i = 0; i < 100; i++)
        json_decref(load("[18446744073709551615]"));
    assert_true(json_load_u64(json_array_get(keep, 0), &u) && u == UINT64_MAX - 1);
    json_decref(keep);
    /* A big integer inside a message with a big spliced string. */
    char *s = big(100000, 0);
    size_t n = strlen(s) + 100;
    char *msg = malloc(n);
    snprintf(msg, n, "{\"d\":\"%s\",\"o\":18446744073709551615}", s);
    m = load(msg);
    assert_non_null(m);
    assert_int_equal(json_string_length(json_object_get(m, "d")), 100000);
    assert_true(json_load_u64(json_object_get(m, "o"), &u) && u == UINT64_MAX);
    json_decref(m);
    free(msg);
    free(s);
}

/* The two-step form: each large value is a placeholder that names its slice of
 * the message; splicing all but one leaves exactly that one a placeholder, and the
 * tree is otherwise what json_loadb gives. */
static void test_split_keep_one(void **state)
{
    (void)state;
    char *a = big(40000, 0), *b = big(20000, 0);
    size_t n = strlen(a) + strlen(b) + 200;
    char *msg = malloc(n);
    snprintf(msg, n, "{\"id\":1,\"params\":{\"chunk\":\"%s\",\"x\":[\"%s\",2]}}", a, b);
    struct json_load_bigs bigs;
    json_error_t e;
    json_t *t = json_load_message_split(msg, strlen(msg), 0, &e, &bigs, 0);
    assert_non_null(t);
    assert_int_equal(bigs.n, 2);
    json_t *chunk = json_object_get(json_object_get(t, "params"), "chunk");
    int i = json_load_big_index(chunk, &bigs);
    assert_int_equal(i, 0);
    assert_int_equal(bigs.v[i].n, strlen(a));
    assert_memory_equal(bigs.v[i].p, a, strlen(a));
    assert_ptr_equal(bigs.v[i].p, strstr(msg, a)); /* a slice, not a copy */
    assert_int_equal(json_load_big_index(json_object_get(t, "id"), &bigs), -1);
    assert_true(json_load_splice(t, &bigs, chunk));
    /* The kept one is still a placeholder; the other one is in. */
    assert_int_equal(json_load_big_index(chunk, &bigs), 0);
    json_t *x0 = json_array_get(json_object_get(json_object_get(t, "params"), "x"), 0);
    assert_string_equal(json_string_value(x0), b);
    json_decref(t);
    /* No large value: no placeholders, an ordinary tree. */
    t = json_load_message_split("{\"a\":1}", 7, 0, &e, &bigs, 0);
    assert_non_null(t);
    assert_int_equal(bigs.n, 0);
    assert_true(json_load_splice(t, &bigs, NULL));
    json_decref(t);
    free(msg);
    free(a);
    free(b);
}

/* "[v,v,...,v]" with n values inside (n + 1 with the array), sep between them. */
static char *array_of(size_t n, const char *v, const char *sep)
{
    struct {
        char *p;
        size_t len, cap;
    } b = {malloc(16), 0, 16};
    size_t need = 2 + n * (strlen(v) + strlen(sep)) + 1;
    b.p = realloc(b.p, need);
    b.p[b.len++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (i) {
            memcpy(b.p + b.len, sep, strlen(sep));
            b.len += strlen(sep);
        }
        memcpy(b.p + b.len, v, strlen(v));
        b.len += strlen(v);
    }
    b.p[b.len++] = ']';
    b.p[b.len] = 0;
    return b.p;
}

static json_t *load_limited(const char *msg, json_error_t *e)
{
    struct json_load_bigs bigs;
    return json_load_message_split(msg, strlen(msg), 0, e, &bigs, JSON_LOAD_MAX_VALUES);
}

/* The reference's 262,144 values: every kind of value counts, keys do not; the
 * error sits at the byte before the first value too many. */
static void test_value_limit(void **state)
{
    (void)state;
    json_error_t e;
    const char *kinds[] = {"0", "-1.5e3", "true", "null", "\"s\"", "[]", "{}", "{\"k\":1}"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        /* {"k":1} is two values: half as many fit */
        size_t per = strcmp(kinds[k], "{\"k\":1}") == 0 ? 2 : 1;
        size_t fit = (JSON_LOAD_MAX_VALUES - 1) / per;
        char *ok = array_of(fit, kinds[k], ",");
        json_t *t = load_limited(ok, &e);
        assert_non_null(t);
        assert_int_equal(json_array_size(t), fit);
        json_decref(t);
        free(ok);
        char *over = array_of(fit + 1, kinds[k], ",");
        assert_null(load_limited(over, &e));
        assert_string_equal(e.text, "JSON-RPC message exceeds the limit of 262144 JSON values");
        assert_int_equal(e.line, 1);
        if (per == 1) /* the offset of the last element: the column of the comma */
            assert_int_equal(e.column, 1 + fit * (strlen(kinds[k]) + 1));
        free(over);
    }
    /* One value a line: serde's column after a newline is 0. */
    char *lines = array_of(JSON_LOAD_MAX_VALUES, "0", ",\n");
    assert_null(load_limited(lines, &e));
    assert_int_equal(e.line, JSON_LOAD_MAX_VALUES);
    assert_int_equal(e.column, 0);
    /* No limit asked for: the same message loads. */
    struct json_load_bigs bigs;
    json_t *t = json_load_message_split(lines, strlen(lines), 0, &e, &bigs, 0);
    assert_non_null(t);
    json_decref(t);
    free(lines);
    /* Large plain strings are counted and still spliced. */
    char *bs = big(1000, 0);
    size_t n = 3 * 1010;
    char *msg = malloc(n);
    snprintf(msg, n, "[\"%s\",\"%s\",\"%s\"]", bs, bs, bs);
    t = load_limited(msg, &e);
    assert_non_null(t);
    free(msg);
    free(bs);
    json_decref(t);
}

/* A NUL in a key: jansson refuses it; json_load_nul_keys reads it as U+0001 and
 * leaves values and escaped backslashes alone. */
static void test_nul_keys(void **state)
{
    (void)state;
    const char *msg = "{\"id\":5,\"params\":{\"a\\u0000b\":\"v\\u0000\",\"c\\\\u0000\":1}}";
    json_error_t e;
    assert_null(json_loadb(msg, strlen(msg), JSON_ALLOW_NUL, &e));
    assert_int_equal(json_error_code(&e), json_error_null_byte_in_key);
    json_t *t = json_load_nul_keys(msg, strlen(msg), JSON_ALLOW_NUL, &e);
    assert_non_null(t);
    assert_int_equal(json_integer_value(json_object_get(t, "id")), 5);
    json_t *p = json_object_get(t, "params");
    json_t *v = json_object_get(p, "a\001b");
    assert_non_null(v);
    assert_int_equal(json_string_length(v), 2); /* the value keeps its NUL */
    assert_memory_equal(json_string_value(v), "v\0", 2);
    assert_non_null(json_object_get(p, "c\\u0000"));
    json_decref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_to_jansson),
        cmocka_unit_test(test_many_big_strings_fall_back),
        cmocka_unit_test(test_integers_past_int64),
        cmocka_unit_test(test_split_keep_one),
        cmocka_unit_test(test_value_limit),
        cmocka_unit_test(test_nul_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
