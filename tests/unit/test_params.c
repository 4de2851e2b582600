/* Unit tests for rpc/params: the serde-worded decode errors clients match on.
 *
 * The exact texts come from PROTOCOL.md section 2.4 and serde's Display impls;
 * a change in wording here is a protocol change, so the tests pin them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/json_load.h"
#include "rpc/params.h"

/* Through the server's loader, which reads integers past int64 (json_load.h). */
static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_load_message(text, strlen(text), JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    assert_non_null(v);
    return v;
}

static void describe_is(const char *json, const char *want)
{
    json_t *v = parse(json);
    char out[256];
    pdec_describe(v, out, sizeof out);
    assert_string_equal(out, want);
    json_decref(v);
}

static void test_describe(void **state)
{
    (void)state;
    describe_is("null", "null");
    describe_is("true", "boolean `true`");
    describe_is("false", "boolean `false`");
    describe_is("5", "integer `5`");
    describe_is("-5", "integer `-5`");
    describe_is("1.5", "floating point `1.5`");
    describe_is("1.0", "floating point `1.0`");
    describe_is("1e3", "floating point `1000.0`");
    describe_is("0.1", "floating point `0.1`");
    describe_is("\"abc\"", "string \"abc\"");
    describe_is("\"a\\\"b\\\\c\\n\"", "string \"a\\\"b\\\\c\\n\"");
    describe_is("[1]", "sequence");
    describe_is("{}", "map");
    char out[256];
    pdec_describe(NULL, out, sizeof out);
    assert_string_equal(out, "null");
    /* A tiny buffer truncates instead of overflowing. */
    json_t *s = json_string("a long string value");
    char small[8];
    pdec_describe(s, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
    json_decref(s);
}

static void begin_fails(const char *json, const char *want)
{
    json_t *v = json ? parse(json) : NULL;
    struct pdec d;
    assert_false(pdec_begin(&d, v, "ReadParams"));
    assert_true(d.failed);
    assert_string_equal(d.err, want);
    /* Later calls return defaults and keep the first error. */
    assert_null(pdec_string(&d, "processId", PDEC_REQUIRED));
    assert_int_equal(pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 7, NULL), 7);
    assert_string_equal(d.err, want);
    json_decref(v);
}

static void test_begin(void **state)
{
    (void)state;
    begin_fails(NULL, "invalid type: null, expected struct ReadParams");
    begin_fails("null", "invalid type: null, expected struct ReadParams");
    begin_fails("5", "invalid type: integer `5`, expected struct ReadParams");
    begin_fails("\"x\"", "invalid type: string \"x\", expected struct ReadParams");
    begin_fails("[1]", "invalid type: sequence, expected struct ReadParams");
    json_t *v = parse("{}");
    struct pdec d;
    assert_true(pdec_begin(&d, v, "ReadParams"));
    assert_false(d.failed);
    json_decref(v);
}

static void unit_is(const char *json, const char *want)
{
    json_t *v = json ? parse(json) : NULL;
    struct pdec d;
    bool ok = pdec_unit(&d, v);
    if (want) {
        assert_false(ok);
        assert_string_equal(d.err, want);
    } else {
        assert_true(ok);
        assert_false(d.failed);
    }
    json_decref(v);
}

static void test_unit(void **state)
{
    (void)state;
    unit_is(NULL, NULL);
    unit_is("null", NULL);
    unit_is("{}", NULL);
    unit_is("{\"a\":1}", "invalid type: map, expected unit");
    unit_is("[]", "invalid type: sequence, expected unit");
    unit_is("[1]", "invalid type: sequence, expected unit");
    unit_is("5", "invalid type: integer `5`, expected unit");
    unit_is("\"s\"", "invalid type: string \"s\", expected unit");
}

/* Decodes one field of `json` with fn and checks the error text (NULL: success). */
#define ONE_FIELD(json, call, want)                                                                \
    do {                                                                                           \
        json_t *v_ = parse(json);                                                                  \
        struct pdec d;                                                                             \
        assert_true(pdec_begin(&d, v_, "S"));                                                      \
        (void)(call);                                                                              \
        if (want) {                                                                                \
            assert_true(d.failed);                                                                 \
            assert_string_equal(d.err, (const char *)(want));                                      \
        } else {                                                                                   \
            assert_false(d.failed);                                                                \
        }                                                                                          \
        json_decref(v_);                                                                           \
    } while (0)

static void test_missing_and_null(void **state)
{
    (void)state;
    ONE_FIELD("{}", pdec_string(&d, "processId", PDEC_REQUIRED), "missing field `processId`");
    ONE_FIELD("{}", pdec_string(&d, "processId", PDEC_OPTIONAL), NULL);
    ONE_FIELD("{}", pdec_string(&d, "processId", PDEC_OPTIONAL_NONNULL), NULL);
    ONE_FIELD("{\"processId\":null}", pdec_string(&d, "processId", PDEC_REQUIRED),
              "invalid type: null, expected a string");
    ONE_FIELD("{\"processId\":null}", pdec_string(&d, "processId", PDEC_OPTIONAL), NULL);
    ONE_FIELD("{\"tty\":null}", pdec_bool(&d, "tty", PDEC_OPTIONAL_NONNULL, false),
              "invalid type: null, expected a boolean");
    ONE_FIELD("{\"n\":null}", pdec_u64(&d, "n", PDEC_REQUIRED, 0, NULL),
              "invalid type: null, expected u64");
    ONE_FIELD("{\"n\":null}", pdec_i64(&d, "n", PDEC_OPTIONAL_NONNULL, 0, NULL),
              "invalid type: null, expected i64");
    ONE_FIELD("{\"env\":null}", pdec_object(&d, "env", PDEC_OPTIONAL_NONNULL),
              "invalid type: null, expected a map");
    ONE_FIELD("{\"argv\":null}", pdec_array(&d, "argv", PDEC_REQUIRED),
              "invalid type: null, expected a sequence");
}

static void test_strings(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"a\":\"hello\",\"nul\":\"x\\u0000y\",\"n\":5}");
        struct pdec d;
        pdec_begin(&d, v, "S");
        assert_string_equal(pdec_string(&d, "a", PDEC_REQUIRED), "hello");
        size_t len = 0;
        const char *s = pdec_string_len(&d, "nul", PDEC_REQUIRED, &len);
        assert_int_equal(len, 3);
        assert_memory_equal(s, "x\0y", 3);
        assert_false(d.failed);
        assert_null(pdec_string(&d, "n", PDEC_REQUIRED));
        assert_string_equal(d.err, "invalid type: integer `5`, expected a string");
        json_decref(v);
    }

    ONE_FIELD("{\"a\":true}", pdec_string(&d, "a", PDEC_OPTIONAL),
              "invalid type: boolean `true`, expected a string");
    ONE_FIELD("{\"a\":[]}", pdec_string(&d, "a", PDEC_OPTIONAL),
              "invalid type: sequence, expected a string");
}

static void test_bool(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"t\":true,\"f\":false}");
        struct pdec d;
        pdec_begin(&d, v, "S");
        assert_true(pdec_bool(&d, "t", PDEC_REQUIRED, false));
        assert_false(pdec_bool(&d, "f", PDEC_REQUIRED, true));
        assert_true(pdec_bool(&d, "absent", PDEC_OPTIONAL, true));
        assert_false(d.failed);
        json_decref(v);
    }
    ONE_FIELD("{\"t\":1}", pdec_bool(&d, "t", PDEC_OPTIONAL, false),
              "invalid type: integer `1`, expected a boolean");
    ONE_FIELD("{\"t\":\"true\"}", pdec_bool(&d, "t", PDEC_OPTIONAL, false),
              "invalid type: string \"true\", expected a boolean");
}

static void test_u64(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"a\":0,\"b\":9223372036854775807}");
        struct pdec d;
        bool present = true;
        pdec_begin(&d, v, "S");
        assert_int_equal(pdec_u64(&d, "a", PDEC_REQUIRED, 9, &present), 0);
        assert_true(present);
        assert_true(pdec_u64(&d, "b", PDEC_REQUIRED, 9, NULL) == INT64_MAX);
        assert_int_equal(pdec_u64(&d, "c", PDEC_OPTIONAL, 9, &present), 9);
        assert_false(present);
        assert_false(d.failed);
        json_decref(v);
    }
    ONE_FIELD("{\"afterSeq\":-1}", pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL),
              "invalid number");
    ONE_FIELD("{\"afterSeq\":1e3}", pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL),
              "invalid number");
    ONE_FIELD("{\"afterSeq\":1.0}", pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL),
              "invalid number");
    ONE_FIELD("{\"afterSeq\":\"1\"}", pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL),
              "invalid type: string \"1\", expected u64");
    ONE_FIELD("{\"afterSeq\":false}", pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0, NULL),
              "invalid type: boolean `false`, expected u64");
    /* The full u64 range, as serde reads it; past it, a float: "invalid number". */
    {
        json_t *v = parse("{\"a\":18446744073709551615,\"b\":9223372036854775808,"
                          "\"c\":9223372036854775807}");
        struct pdec d;
        bool present = false;
        pdec_begin(&d, v, "S");
        assert_true(pdec_u64(&d, "a", PDEC_REQUIRED, 9, &present) == UINT64_MAX);
        assert_true(present);
        assert_true(pdec_u64(&d, "b", PDEC_REQUIRED, 9, NULL) == (uint64_t)INT64_MAX + 1);
        assert_true(pdec_u64(&d, "c", PDEC_REQUIRED, 9, NULL) == (uint64_t)INT64_MAX);
        assert_false(d.failed);
        json_decref(v);
    }
    ONE_FIELD("{\"n\":18446744073709551616}", pdec_u64(&d, "n", PDEC_OPTIONAL, 0, NULL),
              "invalid number");
    ONE_FIELD("{\"n\":-9223372036854775809}", pdec_u64(&d, "n", PDEC_OPTIONAL, 0, NULL),
              "invalid number");
    ONE_FIELD("{\"n\":18446744073709551615}", pdec_string(&d, "n", PDEC_OPTIONAL),
              "invalid type: integer `18446744073709551615`, expected a string");
    ONE_FIELD("{\"n\":18446744073709551615}", pdec_bool(&d, "n", PDEC_OPTIONAL, false),
              "invalid type: integer `18446744073709551615`, expected a boolean");
}

static void test_i64(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"a\":-9223372036854775808,\"b\":9223372036854775807}");
        struct pdec d;
        bool present = false;
        pdec_begin(&d, v, "S");
        assert_true(pdec_i64(&d, "a", PDEC_REQUIRED, 0, &present) == INT64_MIN);
        assert_true(present);
        assert_true(pdec_i64(&d, "b", PDEC_REQUIRED, 0, NULL) == INT64_MAX);
        assert_int_equal(pdec_i64(&d, "c", PDEC_OPTIONAL, -3, &present), -3);
        assert_false(present);
        assert_false(d.failed);
        json_decref(v);
    }
    ONE_FIELD("{\"a\":1.5}", pdec_i64(&d, "a", PDEC_OPTIONAL, 0, NULL),
              "invalid type: floating point `1.5`, expected i64");
    ONE_FIELD("{\"a\":\"x\"}", pdec_i64(&d, "a", PDEC_OPTIONAL, 0, NULL),
              "invalid type: string \"x\", expected i64");
    ONE_FIELD("{\"a\":9223372036854775808}", pdec_i64(&d, "a", PDEC_OPTIONAL, 0, NULL),
              "invalid value: integer `9223372036854775808`, expected i64");
}

static void test_object_array(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"o\":{\"k\":1},\"a\":[1,2]}");
        struct pdec d;
        pdec_begin(&d, v, "S");
        json_t *o = pdec_object(&d, "o", PDEC_REQUIRED);
        json_t *a = pdec_array(&d, "a", PDEC_REQUIRED);
        assert_ptr_equal(o, json_object_get(v, "o"));
        assert_ptr_equal(a, json_object_get(v, "a"));
        assert_null(pdec_object(&d, "none", PDEC_OPTIONAL));
        assert_false(d.failed);
        json_decref(v);
    }
    ONE_FIELD("{\"env\":[]}", pdec_object(&d, "env", PDEC_OPTIONAL),
              "invalid type: sequence, expected a map");
    ONE_FIELD("{\"argv\":{}}", pdec_array(&d, "argv", PDEC_OPTIONAL),
              "invalid type: map, expected a sequence");
    ONE_FIELD("{\"argv\":\"ls\"}", pdec_array(&d, "argv", PDEC_OPTIONAL),
              "invalid type: string \"ls\", expected a sequence");
}

static const char *const two[] = {"read", "replace", NULL};
static const char *const three[] = {"a", "b", "c", NULL};
static const char *const one[] = {"interrupt", NULL};

static void test_enum(void **state)
{
    (void)state;
    {
        json_t *v = parse("{\"m\":\"replace\",\"t\":{\"read\":null}}");
        struct pdec d;
        pdec_begin(&d, v, "S");
        assert_int_equal(pdec_enum(&d, "m", PDEC_REQUIRED, two, -1), 1);
        assert_int_equal(pdec_enum(&d, "t", PDEC_REQUIRED, two, -1), 0);
        assert_int_equal(pdec_enum(&d, "x", PDEC_OPTIONAL, two, 5), 5);
        assert_false(d.failed);
        assert_int_equal(pdec_enum(&d, "x", PDEC_REQUIRED, two, 5), -1);
        assert_string_equal(d.err, "missing field `x`");
        json_decref(v);
    }

    ONE_FIELD("{\"m\":\"bogus\"}", pdec_enum(&d, "m", PDEC_REQUIRED, two, 0),
              "unknown variant `bogus`, expected `read` or `replace`");
    ONE_FIELD("{\"m\":\"bogus\"}", pdec_enum(&d, "m", PDEC_REQUIRED, three, 0),
              "unknown variant `bogus`, expected one of `a`, `b`, `c`");
    ONE_FIELD("{\"m\":\"kill\"}", pdec_enum(&d, "m", PDEC_REQUIRED, one, 0),
              "unknown variant `kill`, expected `interrupt`");
    ONE_FIELD("{\"m\":\"\"}", pdec_enum(&d, "m", PDEC_REQUIRED, one, 0),
              "unknown variant ``, expected `interrupt`");
    /* A prefix of a variant is not that variant. */
    ONE_FIELD("{\"m\":\"rea\"}", pdec_enum(&d, "m", PDEC_REQUIRED, two, 0),
              "unknown variant `rea`, expected `read` or `replace`");
    ONE_FIELD("{\"m\":5}", pdec_enum(&d, "m", PDEC_REQUIRED, two, 0),
              "invalid type: integer `5`, expected string or map");
    ONE_FIELD("{\"m\":null}", pdec_enum(&d, "m", PDEC_OPTIONAL_NONNULL, two, 0),
              "invalid type: null, expected string or map");
    ONE_FIELD("{\"m\":null}", pdec_enum(&d, "m", PDEC_OPTIONAL, two, 0), NULL);
    ONE_FIELD("{\"m\":{}}", pdec_enum(&d, "m", PDEC_REQUIRED, two, 0),
              "invalid value: map, expected map with a single key");
}

static void test_first_failure_wins(void **state)
{
    (void)state;
    json_t *v = parse("{\"a\":1,\"b\":\"x\"}");
    struct pdec d;
    pdec_begin(&d, v, "S");
    assert_null(pdec_string(&d, "a", PDEC_REQUIRED));
    assert_int_equal(pdec_u64(&d, "b", PDEC_REQUIRED, 4, NULL), 4);
    assert_null(pdec_string(&d, "c", PDEC_REQUIRED));
    assert_string_equal(d.err, "invalid type: integer `1`, expected a string");
    pdec_fail(&d, "other %d", 1);
    assert_string_equal(d.err, "invalid type: integer `1`, expected a string");
    json_decref(v);

    pdec_begin(&d, NULL, "S");
    d.failed = false; /* pdec_fail on a fresh decoder records the text */
    pdec_fail(&d, "custom %s %d", "error", 42);
    assert_string_equal(d.err, "custom error 42");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_begin),
        cmocka_unit_test(test_unit),
        cmocka_unit_test(test_missing_and_null),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_i64),
        cmocka_unit_test(test_object_array),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_first_failure_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
