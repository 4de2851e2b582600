/* Unit tests for netproxy/np_http (heads, targets, the forwarded head, body framing
 * at every split point) and netproxy/np_socks (the SOCKS5 messages). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netproxy/np_http.h"
#include "netproxy/np_socks.h"

static int parse(const char *s, struct np_http_head *h)
{
    return np_http_parse_request(s, strlen(s), h);
}

static void test_request_head(void **state)
{
    (void)state;
    struct np_http_head h;
    const char *req = "GET http://a.com/x?y HTTP/1.1\r\nHost: a.com\r\nX-Y:  v \r\n\r\nBODY";
    assert_int_equal(parse(req, &h), (int)(strlen(req) - 4));
    assert_int_equal(h.method_len, 3);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.h[1].value_len, 1);
    assert_memory_equal(h.h[1].value, "v", 1);
    /* incomplete at every prefix */
    for (size_t i = 0; i < strlen(req) - 4; i++)
        assert_int_equal(np_http_parse_request(req, i, &h), 0);
    assert_int_equal(parse("GET / HTTP/1.1\n\n", &h), 16); /* bare LF accepted */
    assert_int_equal(parse("GARBAGE\r\n\r\n", &h), -EINVAL);
    assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n", &h), -EINVAL);
    assert_int_equal(parse("GET / HTTP/1.1\r\n folded\r\n\r\n", &h), -EINVAL);
    assert_int_equal(parse("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", &h), -EINVAL);
    assert_int_equal(parse("G(T / HTTP/1.1\r\n\r\n", &h), -EINVAL);
    char *big = malloc(NP_HTTP_HEAD_MAX + 10);
    memset(big, 'a', NP_HTTP_HEAD_MAX + 10);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    assert_int_equal(np_http_parse_request(big, NP_HTTP_HEAD_MAX + 10, &h), -E2BIG);
    free(big);
}

static int target(const char *req, struct np_http_target *t, const char **why)
{
    struct np_http_head h;
    if (parse(req, &h) <= 0) fail_msg("parse %s", req);
    return np_http_target(&h, 80, t, why);
}

static void test_targets(void **state)
{
    (void)state;
    struct np_http_target t;
    const char *why;
    assert_int_equal(target("GET http://Ex.COM:8080/p HTTP/1.1\r\n\r\n", &t, &why), 0);
    assert_string_equal(t.host, "ex.com");
    assert_int_equal(t.port, 8080);
    assert_int_equal(t.path_len, 2);
    assert_int_equal(target("GET http://a.com HTTP/1.1\r\n\r\n", &t, &why), 0);
    assert_int_equal(t.port, 80);
    assert_memory_equal(t.path, "/", 1);
    assert_int_equal(target("GET http://[::1]:81/ HTTP/1.1\r\n\r\n", &t, &why), 0);
    assert_string_equal(t.host, "::1");
    assert_int_equal(t.port, 81);
    assert_int_equal(target("CONNECT a.com:443 HTTP/1.1\r\n\r\n", &t, &why), 0);
    assert_int_equal(t.port, 443);
    assert_int_equal(target("CONNECT a.com HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
    assert_int_equal(target("GET / HTTP/1.1\r\nHost: b.org:9\r\n\r\n", &t, &why), 0);
    assert_string_equal(t.host, "b.org");
    assert_int_equal(t.port, 9);
    assert_int_equal(target("GET / HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
    assert_string_equal(why, "missing host");
    assert_int_equal(target("GET http://a.com/ HTTP/1.1\r\nHost: vm\r\n\r\n", &t, &why), -EINVAL);
    assert_string_equal(why, "Host header does not match request target");
    assert_int_equal(target("GET http://a.com/ HTTP/1.1\r\nHost: a.com:80\r\n\r\n", &t, &why), 0);
    assert_int_equal(target("GET https://a.com/ HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
    assert_int_equal(target("GET http://u@a.com/ HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
    assert_int_equal(target("GET http://a.com:0/ HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
    assert_int_equal(target("GET http://a.com:99999/ HTTP/1.1\r\n\r\n", &t, &why), -EINVAL);
}

static void test_forward_head(void **state)
{
    (void)state;
    const char *req = "POST http://a.com:8/up?q HTTP/1.1\r\nHost: a.com:8\r\nProxy-Connection: "
                      "keep-alive\r\nProxy-Authorization: x\r\nConnection: keep-alive, X-Hop\r\n"
                      "X-Hop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nContent-Length: 3\r\n"
                      "X-Keep: 2\r\n\r\n";
    struct np_http_head h;
    assert_true(parse(req, &h) > 0);
    struct np_http_target t;
    const char *why;
    assert_int_equal(np_http_target(&h, 80, &t, &why), 0);
    struct buf out;
    buf_init(&out);
    np_http_forward_head(&h, &t, NULL, NULL, &out);
    buf_putc(&out, '\0');
    assert_string_equal(out.data, "POST /up?q HTTP/1.1\r\nHost: a.com:8\r\nContent-Length: 3\r\n"
                                  "X-Keep: 2\r\nConnection: close\r\n\r\n");
    buf_free(&out);
    /* no Host: one is added; an upgrade keeps its headers */
    const char *up =
        "GET http://b.com/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    assert_true(parse(up, &h) > 0);
    assert_int_equal(np_http_target(&h, 80, &t, &why), 0);
    buf_init(&out);
    np_http_forward_head(&h, &t, NULL, NULL, &out);
    buf_putc(&out, '\0');
    assert_string_equal(out.data, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nHost: b.com\r\n"
                                  "Connection: upgrade\r\n\r\n");
    buf_free(&out);
}

static void test_response_head(void **state)
{
    (void)state;
    const char *resp = "HTTP/1.0 200 OK\r\nServer: x\r\nConnection: keep-alive\r\nContent-Length: "
                       "6\r\n\r\nhello\n";
    struct np_http_head h;
    int rc = np_http_parse_response(resp, strlen(resp), &h);
    assert_int_equal(rc, (int)(strlen(resp) - 6));
    assert_int_equal(h.status, 200);
    struct buf out;
    buf_init(&out);
    np_http_response_head(&h, &out);
    buf_putc(&out, '\0');
    assert_string_equal(out.data, "HTTP/1.0 200 OK\r\nServer: x\r\nContent-Length: 6\r\n"
                                  "Connection: close\r\n\r\n");
    buf_free(&out);
    assert_int_equal(np_http_parse_response("HTTP/1.1 20x OK\r\n\r\n", 19, &h), -EINVAL);
    assert_int_equal(np_http_parse_response("HTTP/1.1 204\r\n\r\n", 16, &h), 16);
    assert_int_equal(h.status, 204);
}

/* Feeds body bytes split at `split`, returning how many were taken in total. */
static long feed_split(struct np_body *b, const char *s, size_t len, size_t split)
{
    long a = np_body_feed(b, s, split);
    if (a < 0) return a;
    if (b->done) return a;
    if ((size_t)a != split) fail_msg("took %ld of %zu before the end", a, split);
    long c = np_body_feed(b, s + split, len - split);
    return c < 0 ? c : a + c;
}

static void test_body_framing(void **state)
{
    (void)state;
    struct np_http_head h;
    struct np_body b;
    assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", &h) > 0);
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_int_equal(np_body_feed(&b, "abcdeNEXT", 9), 5);
    assert_true(b.done);
    assert_true(parse("POST / HTTP/1.1\r\nHost: a\r\n\r\n", &h) > 0);
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_true(b.done);
    assert_true(parse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &h) > 0);
    assert_int_equal(np_body_init(&b, &h), -EINVAL);
    assert_true(parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &h) > 0);
    assert_int_equal(np_body_init(&b, &h), -EINVAL);
    assert_true(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", &h) > 0);
    assert_int_equal(np_body_init(&b, &h), -EINVAL);
    assert_true(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                      &h) > 0);
    assert_int_equal(np_body_init(&b, &h), -EINVAL);
    /* chunked, at every split point, with an extension and a trailer */
    const char *ch = "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";
    size_t len = strlen(ch);
    const char *tail = "GET /next HTTP/1.1\r\n";
    char both[256];
    snprintf(both, sizeof both, "%s%s", ch, tail);
    assert_true(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h) > 0);
    for (size_t split = 0; split <= len; split++) {
        assert_int_equal(np_body_init(&b, &h), 0);
        long took = feed_split(&b, both, strlen(both), split);
        if (took != (long)len) fail_msg("split %zu: took %ld of %zu", split, took, len);
        assert_true(b.done);
    }
    /* bare LFs and no trailer */
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_int_equal(np_body_feed(&b, "3\nabc\n0\n\nX", 10), 9);
    assert_true(b.done);
    /* malformed */
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_int_equal(np_body_feed(&b, "zz\r\n", 4), -EINVAL);
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_int_equal(np_body_feed(&b, "3\r\nabcX", 7), -EINVAL);
    assert_int_equal(np_body_init(&b, &h), 0);
    assert_int_equal(np_body_feed(&b, "FFFFFFFFFFFFFFFFF\r\n", 19), -EINVAL);
}

static void test_socks(void **state)
{
    (void)state;
    bool no_auth = false;
    const uint8_t g[] = {5, 2, 2, 0};
    assert_int_equal(np_socks_greeting(g, 1, &no_auth), 0);
    assert_int_equal(np_socks_greeting(g, 4, &no_auth), 4);
    assert_true(no_auth);
    const uint8_t g2[] = {5, 1, 2};
    assert_int_equal(np_socks_greeting(g2, 3, &no_auth), 3);
    assert_false(no_auth);
    const uint8_t g4[] = {4, 1, 0};
    assert_int_equal(np_socks_greeting(g4, 3, &no_auth), -EPROTO);

    int cmd = 0;
    struct np_socks_addr a;
    const uint8_t r1[] = {5, 1, 0, 3, 5, 'R', 'u', 'n', 's', 'C', 0x1F, 0x90};
    for (size_t i = 0; i < sizeof r1; i++)
        assert_int_equal(np_socks_request(r1, i, &cmd, &a), 0);
    assert_int_equal(np_socks_request(r1, sizeof r1, &cmd, &a), (int)sizeof r1);
    assert_int_equal(cmd, NP_SOCKS_CONNECT);
    assert_string_equal(a.host, "runsc");
    assert_int_equal(a.port, 8080);
    assert_true(a.is_name);
    const uint8_t r4[] = {5, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 53};
    assert_int_equal(np_socks_request(r4, sizeof r4, &cmd, &a), (int)sizeof r4);
    assert_int_equal(cmd, NP_SOCKS_UDP);
    assert_string_equal(a.host, "::1");
    const uint8_t rbad[] = {5, 1, 0, 9, 1, 2};
    assert_int_equal(np_socks_request(rbad, sizeof rbad, &cmd, &a), -EAFNOSUPPORT);

    uint8_t out[32];
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(1080)};
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    assert_int_equal(np_socks_reply(out, 0, (struct sockaddr *)&sin), 10);
    const uint8_t want[] = {5, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x38};
    assert_memory_equal(out, want, 10);
    assert_int_equal(np_socks_reply(out, NP_SOCKS_NOT_ALLOWED, NULL), 10);
    assert_int_equal(out[1], 2);

    const uint8_t dg[] = {0, 0, 0, 1, 10, 0, 0, 1, 0, 53, 'p', 'i', 'n', 'g'};
    size_t at = 0;
    assert_int_equal(np_socks_udp_parse(dg, sizeof dg, &a, &at), 0);
    assert_int_equal(at, 10);
    assert_string_equal(a.host, "10.0.0.1");
    const uint8_t frag[] = {0, 0, 1, 1, 10, 0, 0, 1, 0, 53};
    assert_int_equal(np_socks_udp_parse(frag, sizeof frag, &a, &at), -EPROTO);
    assert_int_equal(np_socks_udp_header(out, (struct sockaddr *)&sin), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_head), cmocka_unit_test(test_targets),
        cmocka_unit_test(test_forward_head), cmocka_unit_test(test_response_head),
        cmocka_unit_test(test_body_framing), cmocka_unit_test(test_socks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
