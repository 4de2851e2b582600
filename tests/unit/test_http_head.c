/* Unit tests for proto/http_head, the one HTTP/1.x head tokenizer: where a head
 * ends (LF or CRLF lines, every split point, the size limit), the start-line
 * parsers, the field rules (token names, no space before the colon, no folding, no
 * control characters), the field function and its early stop, and the list helper. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/http_head.h"

/* Collects fields as "name=value;" into a buffer; stops after `limit` fields. */
struct collect {
    char text[512];
    int n, limit;
};

static int collect(void *ctx, struct http_span name, struct http_span value)
{
    struct collect *c = ctx;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "%.*s=%.*s;", (int)name.n, name.p, (int)value.n,
             value.p);
    return ++c->n == c->limit ? -E2BIG : 0;
}

static void scan(const char *s, struct collect *c, struct http_head *h)
{
    memset(c, 0, sizeof *c);
    c->limit = 100;
    http_head_scan(s, strlen(s), 1024, collect, c, h);
}

static void test_head_end(void **state)
{
    (void)state;
    struct collect c;
    struct http_head h;
    const char *req = "GET / HTTP/1.1\r\nHost: a\r\nX-Y:  v w \t\r\n\r\nBODY";
    scan(req, &c, &h);
    assert_int_equal(h.end, strlen(req) - 4);
    assert_true(h.has_start);
    assert_int_equal(h.start.n, 14);
    assert_false(h.bad_field);
    assert_string_equal(c.text, "Host=a;X-Y=v w;");
    /* incomplete at every split point before the blank line */
    for (size_t i = 0; i < strlen(req) - 4; i++) {
        http_head_scan(req, i, 1024, NULL, NULL, &h);
        assert_int_equal(h.end, 0);
    }
    /* bare LF lines, and empty lines before the start line are skipped */
    scan("\r\n\nGET / HTTP/1.0\nA:b\n\n", &c, &h);
    assert_int_equal(h.end, 23);
    assert_int_equal(h.start.n, 14);
    assert_string_equal(c.text, "A=b;");
    /* nothing but blank lines is never a head */
    scan("\r\n\r\n\r\n", &c, &h);
    assert_int_equal(h.end, 0);
    assert_false(h.has_start);
}

static void test_limit(void **state)
{
    (void)state;
    const char *req = "GET / HTTP/1.1\r\nA: b\r\n\r\n"; /* 24 bytes */
    struct http_head h;
    http_head_scan(req, strlen(req), 24, NULL, NULL, &h);
    assert_int_equal(h.end, 24);
    http_head_scan(req, strlen(req), 23, NULL, NULL, &h);
    assert_int_equal(h.end, 0); /* one byte over: never complete */
}

static void test_bad_fields(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",     "GET / HTTP/1.1\r\nName : x\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "GET / HTTP/1.1\r\n: x\r\n\r\n",
        "GET / HTTP/1.1\r\nnocolon\r\n\r\n",         "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n",        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct collect c;
        struct http_head h;
        scan(bad[i], &c, &h);
        assert_true(h.bad_field);
        assert_true(h.end > 0); /* the end is still found */
    }
    /* no calls after a malformed line */
    struct collect c;
    struct http_head h;
    scan("GET / HTTP/1.1\r\nA: 1\r\nB C: 2\r\nD: 3\r\n\r\n", &c, &h);
    assert_string_equal(c.text, "A=1;");
    /* HTAB and obs-text are allowed in values */
    scan("GET / HTTP/1.1\r\nA: x\ty\xc3\xa9\r\n\r\n", &c, &h);
    assert_false(h.bad_field);
    assert_string_equal(c.text, "A=x\ty\xc3\xa9;");
}

static void test_stop(void **state)
{
    (void)state;
    struct collect c = {.limit = 2};
    struct http_head h;
    const char *req = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    http_head_scan(req, strlen(req), 1024, collect, &c, &h);
    assert_int_equal(h.stopped, -E2BIG);
    assert_string_equal(c.text, "A=1;B=2;");
    assert_int_equal(h.end, strlen(req)); /* the scan went on to the end */
}

static struct http_span sp(const char *s)
{
    return (struct http_span){s, strlen(s)};
}

static void test_request_line(void **state)
{
    (void)state;
    struct http_span m, t;
    bool http10 = true;
    assert_int_equal(http_parse_request_line(sp("GET /x?y HTTP/1.1"), &m, &t, &http10), 0);
    assert_int_equal(m.n, 3);
    assert_memory_equal(t.p, "/x?y", 4);
    assert_false(http10);
    assert_int_equal(http_parse_request_line(sp("CONNECT a:443 HTTP/1.0"), &m, &t, &http10), 0);
    assert_true(http10);
    static const char *const bad[] = {
        "GET / HTTP/2.0", "GET / HTTP/1.2",  "G(T / HTTP/1.1", "GET  / HTTP/1.1",
        "GET /",          "GET / HTTP/1.1 ", "/ HTTP/1.1",     "GET /\x7f HTTP/1.1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(http_parse_request_line(sp(bad[i]), &m, &t, &http10), -EINVAL);
}

static void test_status_line(void **state)
{
    (void)state;
    struct http_span r;
    bool http10 = true;
    assert_int_equal(http_parse_status_line(sp("HTTP/1.1 200 OK fine"), &http10, &r), 200);
    assert_false(http10);
    assert_int_equal(r.n, 7);
    assert_int_equal(http_parse_status_line(sp("HTTP/1.0 204"), &http10, &r), 204);
    assert_true(http10);
    assert_int_equal(r.n, 0);
    static const char *const bad[] = {"HTTP/1.1 20x OK", "HTTP/2 200 OK",   "HTTP/1.1 2000",
                                      "HTTP/1.1  200",   "HTTP/1.3 200 OK", "HTTP/1.1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(http_parse_status_line(sp(bad[i]), NULL, NULL), -EINVAL);
}

static void test_list(void **state)
{
    (void)state;
    assert_true(http_list_has("keep-alive, Upgrade", 19, "upgrade"));
    assert_true(http_list_has(" upgrade ", 9, "upgrade"));
    assert_false(http_list_has("upgrades", 8, "upgrade"));
    assert_false(http_list_has("", 0, "upgrade"));
    assert_false(http_list_has(NULL, 0, "upgrade"));
    assert_true(http_span_eq_ci(sp("WebSocket"), "websocket"));
    struct http_span t = http_trim(sp(" \t a b\t "));
    assert_int_equal(t.n, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_end),     cmocka_unit_test(test_limit),
        cmocka_unit_test(test_bad_fields),   cmocka_unit_test(test_stop),
        cmocka_unit_test(test_request_line), cmocka_unit_test(test_status_line),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
