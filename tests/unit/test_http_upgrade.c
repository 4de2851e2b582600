/* Unit tests for proto/http_upgrade: the listener's HTTP answers.
 *
 * Each rule of PROTOCOL.md 1.2 gets a case, in the order the parser applies
 * them, plus the RFC 6455 handshake example and byte-by-byte feeding (a client
 * may send its head in any number of TCP segments). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/http_upgrade.h"

#define UPGRADE_HEADERS                                                                            \
    "Host: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"                             \
    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

static const char RFC_101[] = "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\n"
                              "upgrade: websocket\r\n"
                              "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

/* Runs the parser over a whole request; returns the reply as a NUL-terminated
 * string in *out (caller frees with buf_free). */
static enum http_outcome run(const char *req, struct http_request_info *info, struct buf *out)
{
    buf_init(out);
    enum http_outcome o = http_upgrade_parse(req, strlen(req), info, out);
    buf_putc(out, '\0');
    return o;
}

static void expect_reply(const char *req, int status, const char *want)
{
    struct http_request_info info;
    struct buf out;
    enum http_outcome o = run(req, &info, &out);
    assert_int_equal(o, HTTP_REPLY);
    assert_int_equal(info.status, status);
    if (want) assert_string_equal(out.data, want);
    buf_free(&out);
}

static void test_rfc_example(void **state)
{
    (void)state;
    const char *req = "GET / HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n";
    struct http_request_info info;
    struct buf out;
    assert_int_equal(run(req, &info, &out), HTTP_WEBSOCKET);
    assert_int_equal(info.status, 101);
    assert_int_equal(info.consumed, strlen(req));
    assert_string_equal(out.data, RFC_101);
    assert_string_equal(info.authorization, "");
    buf_free(&out);
}

static void test_bytes_after_head_not_consumed(void **state)
{
    (void)state;
    const char *head = "GET /?token=1 HTTP/1.1\n" UPGRADE_HEADERS "\n";
    char req[1024];
    snprintf(req, sizeof req, "%s\x81\x85", head);
    struct http_request_info info;
    struct buf out;
    assert_int_equal(run(req, &info, &out), HTTP_WEBSOCKET);
    assert_int_equal(info.consumed, strlen(head));
    buf_free(&out);
}

static void test_byte_by_byte(void **state)
{
    (void)state;
    const char *req = "GET / HTTP/1.1\r\nAuthorization: Bearer abc\r\n" UPGRADE_HEADERS "\r\n";
    size_t n = strlen(req);
    for (size_t i = 0; i < n; i++) {
        struct http_request_info info;
        struct buf out;
        buf_init(&out);
        assert_int_equal(http_upgrade_parse(req, i, &info, &out), HTTP_INCOMPLETE);
        assert_int_equal(out.len, 0);
        buf_free(&out);
    }
    struct http_request_info info;
    struct buf out;
    assert_int_equal(run(req, &info, &out), HTTP_WEBSOCKET);
    assert_int_equal(info.consumed, n);
    assert_string_equal(info.authorization, "Bearer abc");
    assert_string_equal(out.data, RFC_101);
    buf_free(&out);
}

static void test_bare_lf_and_case(void **state)
{
    (void)state;
    const char *req = "GET / HTTP/1.1\nconnection: keep-alive, UPGRADE\nUPGRADE: WebSocket\n"
                      "sec-websocket-version:13\nSEC-WEBSOCKET-KEY:   dGhlIHNhbXBsZSBub25jZQ==  \n"
                      "\n";
    struct http_request_info info;
    struct buf out;
    assert_int_equal(run(req, &info, &out), HTTP_WEBSOCKET);
    assert_string_equal(out.data, RFC_101);
    buf_free(&out);
}

static void test_readyz(void **state)
{
    (void)state;
    expect_reply("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", 200,
                 "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    expect_reply("GET /readyz HTTP/1.0\r\n\r\n", 200, NULL);
    expect_reply("GET /readyz?x=1 HTTP/1.1\r\n\r\n", 200, NULL);
    expect_reply("POST /readyz HTTP/1.1\r\ncontent-length: 0\r\n\r\n", 405,
                 "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: "
                 "close\r\n\r\n");
}

static void test_origin_forbidden(void **state)
{
    (void)state;
    const char *want = "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    expect_reply("GET / HTTP/1.1\r\nOrigin: http://evil.example\r\n" UPGRADE_HEADERS "\r\n", 403,
                 want);
    expect_reply("GET / HTTP/1.1\r\norigin:\r\n" UPGRADE_HEADERS "\r\n", 403, want);
    expect_reply("GET /readyz HTTP/1.1\r\nOrigin: null\r\n\r\n", 403, want);
    expect_reply("POST /other HTTP/1.1\r\nORIGIN: x\r\n\r\n", 403, want);
}

static void test_not_found(void **state)
{
    (void)state;
    const char *want = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    expect_reply("GET /other HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", 404, want);
    expect_reply("GET /some/path HTTP/1.1\r\n\r\n", 404, want);
    expect_reply("POST /x HTTP/1.1\r\n\r\n", 404, want);
    expect_reply("GET /readyz/ HTTP/1.1\r\n\r\n", 404, want);
}

static void test_method_not_get(void **state)
{
    (void)state;
    const char *want = "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 28\r\n"
                       "connection: close\r\ncontent-type: text/plain; charset=utf-8\r\n\r\n"
                       "Request method must be `GET`";
    expect_reply("POST / HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", 405, want);
    expect_reply("get / HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", 405, want);
}

static void test_connection_header(void **state)
{
    (void)state;
    const char *want = "HTTP/1.1 400 Bad Request\r\ncontent-length: 43\r\nconnection: close\r\n"
                       "content-type: text/plain; charset=utf-8\r\n\r\n"
                       "Connection header did not include 'upgrade'";
    expect_reply("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, want);
    expect_reply("GET / HTTP/1.1\r\nConnection: keep-alive\r\nUpgrade: websocket\r\n\r\n", 400,
                 want);
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrades\r\n\r\n", 400, want);
}

static void test_upgrade_header(void **state)
{
    (void)state;
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n", 400, NULL);
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", 400,
                 "HTTP/1.1 400 Bad Request\r\ncontent-length: 44\r\nconnection: close\r\n"
                 "content-type: text/plain; charset=utf-8\r\n\r\n"
                 "`Upgrade` header did not include 'websocket'");
}

static void test_version_header(void **state)
{
    (void)state;
    const char *want = "HTTP/1.1 400 Bad Request\r\ncontent-length: 51\r\nconnection: close\r\n"
                       "content-type: text/plain; charset=utf-8\r\n"
                       "sec-websocket-version: 13\r\n\r\n"
                       "`Sec-WebSocket-Version` header did not include '13'";
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                 "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                 400, want);
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                 400, want);
}

static void test_key_header(void **state)
{
    (void)state;
    const char *base = "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                       "Sec-WebSocket-Version: 13\r\n";
    const char *bad_keys[] = {
        NULL,                           /* missing */
        "",                             /* empty */
        "abc",                          /* too short */
        "dGhlIHNhbXBsZSBub25jZQ",       /* unpadded */
        "dGhlIHNhbXBsZSBub25jZQ!=",     /* bad symbol */
        "dGhlIHNhbXBsZSBub25jZQ==AAAA", /* 20 bytes */
        "dGhlIHNhbXBsZSBub25jZR==",     /* non-canonical last symbol */
    };
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        char req[512];
        if (bad_keys[i])
            snprintf(req, sizeof req, "%sSec-WebSocket-Key: %s\r\n\r\n", base, bad_keys[i]);
        else
            snprintf(req, sizeof req, "%s\r\n", base);
        expect_reply(req, 400, NULL);
    }
    expect_reply("GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n",
                 400,
                 "HTTP/1.1 400 Bad Request\r\ncontent-length: 34\r\nconnection: close\r\n"
                 "content-type: text/plain; charset=utf-8\r\n\r\n"
                 "`Sec-WebSocket-Key` header missing");
}

static void test_http10_upgrade_refused(void **state)
{
    (void)state;
    expect_reply("GET / HTTP/1.0\r\n" UPGRADE_HEADERS "\r\n", 400, NULL);
}

static void test_malformed(void **state)
{
    (void)state;
    const char *cases[] = {
        "GET / HTTP/1.1 extra\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET / http/1.1\r\n\r\n",
        "GET /\r\n\r\n",
        "GET\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
        "GET / HTTP/1.1\r\nName : value\r\n\r\n",
        "GET / HTTP/1.1\r\n: value\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\x01b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_reply(cases[i], 400,
                     "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    }
    /* A NUL byte inside a header value. */
    static const char nul[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
    struct http_request_info info;
    struct buf out;
    buf_init(&out);
    assert_int_equal(http_upgrade_parse(nul, sizeof nul - 1, &info, &out), HTTP_REPLY);
    assert_int_equal(info.status, 400);
    buf_free(&out);
}

static void test_too_large(void **state)
{
    (void)state;
    size_t n = HTTP_MAX_HEAD + 100;
    char *req = malloc(n);
    assert_non_null(req);
    const char *start = "GET / HTTP/1.1\r\nX-Big: ";
    memset(req, 'a', n);
    memcpy(req, start, strlen(start));
    struct http_request_info info;
    struct buf out;
    buf_init(&out);
    assert_int_equal(http_upgrade_parse(req, HTTP_MAX_HEAD, &info, &out), HTTP_INCOMPLETE);
    assert_int_equal(http_upgrade_parse(req, HTTP_MAX_HEAD + 1, &info, &out), HTTP_REPLY);
    assert_int_equal(info.status, 431);
    buf_putc(&out, '\0');
    assert_string_equal(out.data, "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                  "content-length: 0\r\nconnection: close\r\n\r\n");
    buf_free(&out);

    /* Many short header lines also count towards the limit. */
    size_t off = strlen("GET / HTTP/1.1\r\n");
    memcpy(req, "GET / HTTP/1.1\r\n", off);
    for (; off + 6 <= n; off += 6)
        memcpy(req + off, "A: b\r\n", 6);
    buf_init(&out);
    assert_int_equal(http_upgrade_parse(req, off, &info, &out), HTTP_REPLY);
    assert_int_equal(info.status, 431);
    buf_free(&out);
    free(req);
}

static void test_authorization(void **state)
{
    (void)state;
    struct http_request_info info;
    struct buf out;
    run("GET /readyz HTTP/1.1\r\nauthorization:  Bearer t0k  \r\n\r\n", &info, &out);
    assert_string_equal(info.authorization, "Bearer t0k");
    buf_free(&out);

    char req[2048];
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nAuthorization: %s\r\n" UPGRADE_HEADERS "\r\n",
             big);
    assert_int_equal(run(req, &info, &out), HTTP_WEBSOCKET);
    assert_string_equal(info.authorization, "");
    buf_free(&out);
}

static void test_query_and_absolute_target(void **state)
{
    (void)state;
    struct http_request_info info;
    struct buf out;
    assert_int_equal(run("GET /?x=1 HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", &info, &out),
                     HTTP_WEBSOCKET);
    buf_free(&out);
    assert_int_equal(
        run("GET http://127.0.0.1:9/ HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", &info, &out),
        HTTP_WEBSOCKET);
    buf_free(&out);
}

/* The accept key alone (the client checks the server's with it): RFC 6455 1.3. */
static void test_accept_key(void **state)
{
    char out[HTTP_WS_ACCEPT_LEN + 1];
    http_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    char longkey[65];
    memset(longkey, 'a', sizeof longkey);
    http_ws_accept_key(longkey, sizeof longkey, out);
    assert_string_equal(out, "");
}

/* ---- the response parser (the clients' side) ---- */

static const char RFC_KEY[] = "dGhlIHNhbXBsZSBub25jZQ==";

static enum http_response_outcome resp(const char *r, struct http_response_info *info)
{
    return http_upgrade_response_parse(r, strlen(r), RFC_KEY, info);
}

static void test_response_rfc_example(void **state)
{
    (void)state;
    /* Our own listener's answer to the RFC's request is what the clients accept. */
    struct http_response_info info;
    assert_int_equal(resp(RFC_101, &info), HTTP_RESPONSE_UPGRADED);
    assert_int_equal(info.status, 101);
    assert_int_equal(info.consumed, strlen(RFC_101));
    assert_int_equal(info.status_line_len, strlen("HTTP/1.1 101 Switching Protocols"));
    assert_memory_equal(info.status_line, "HTTP/1.1 101 Switching Protocols", info.status_line_len);
    /* Frames right behind the head are not part of it. */
    char more[512];
    snprintf(more, sizeof more, "%s\x81\x02hi", RFC_101);
    assert_int_equal(resp(more, &info), HTTP_RESPONSE_UPGRADED);
    assert_int_equal(info.consumed, strlen(RFC_101));
}

static void test_response_byte_by_byte(void **state)
{
    (void)state;
    const char *r = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\n"
                    "Connection: keep-alive, Upgrade\r\n"
                    "Sec-WebSocket-Accept:s3pPLMBiTxaQ9kYGzzhZRbK+xOo=  \r\n\r\n";
    size_t n = strlen(r);
    struct http_response_info info;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(http_upgrade_response_parse(r, i, RFC_KEY, &info),
                         HTTP_RESPONSE_INCOMPLETE);
    assert_int_equal(http_upgrade_response_parse(r, n, RFC_KEY, &info), HTTP_RESPONSE_UPGRADED);
    assert_int_equal(info.consumed, n);
}

static void test_response_refused(void **state)
{
    (void)state;
    struct http_response_info info;
    const char *r = "HTTP/1.1 401 Unauthorized\r\ncontent-length: 5\r\n\r\nnope!";
    assert_int_equal(resp(r, &info), HTTP_RESPONSE_REFUSED);
    assert_int_equal(info.status, 401);
    assert_string_equal(r + info.consumed, "nope!");
    assert_int_equal(resp("HTTP/1.0 200\n\n", &info), HTTP_RESPONSE_REFUSED);
    assert_int_equal(info.status, 200);
}

static void test_response_checks(void **state)
{
    (void)state;
    struct http_response_info info;
    static const char *const bad[] = {
        /* each fails one RFC 6455 4.1 check */
        "HTTP/1.1 101 x\r\nconnection: upgrade\r\n"
        "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        "HTTP/1.1 101 x\r\nupgrade: h2c\r\nconnection: upgrade\r\n"
        "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        "HTTP/1.1 101 x\r\nupgrade: websocket\r\n"
        "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        "HTTP/1.1 101 x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        /* the accept value is base64: its case matters */
        "HTTP/1.1 101 x\r\nupgrade: websocket\r\nconnection: upgrade\r\n"
        "sec-websocket-accept: S3PPLMBITXAQ9KYGZZHZRBK+XOO=\r\n\r\n",
        /* the first accept header counts */
        "HTTP/1.1 101 x\r\nupgrade: websocket\r\nconnection: upgrade\r\n"
        "sec-websocket-accept: x\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        /* malformed heads */
        "HTTP/1.1 101 x\r\nupgrade : websocket\r\n\r\n",
        "HTTP/1.1 101 x\r\n folded\r\n\r\n",
        "HTTP/2 101\r\n\r\n",
        "HTTP/1.1 1O1 x\r\n\r\n",
        "HTTP/1.1 1010\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(resp(bad[i], &info), HTTP_RESPONSE_BAD);
        assert_non_null(info.error);
    }
    /* A malformed status line is refused before the head ends. */
    assert_int_equal(resp("SSH-2.0-OpenSSH_9.6\r\n", &info), HTTP_RESPONSE_BAD);
}

static void test_response_too_large(void **state)
{
    (void)state;
    size_t n = HTTP_MAX_HEAD + 100;
    char *r = malloc(n);
    assert_non_null(r);
    memset(r, 'a', n);
    memcpy(r, "HTTP/1.1 101 x\r\nx: ", 20);
    struct http_response_info info;
    assert_int_equal(http_upgrade_response_parse(r, HTTP_MAX_HEAD, RFC_KEY, &info),
                     HTTP_RESPONSE_INCOMPLETE);
    assert_int_equal(http_upgrade_response_parse(r, n, RFC_KEY, &info), HTTP_RESPONSE_BAD);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key),
        cmocka_unit_test(test_rfc_example),
        cmocka_unit_test(test_bytes_after_head_not_consumed),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_bare_lf_and_case),
        cmocka_unit_test(test_readyz),
        cmocka_unit_test(test_origin_forbidden),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_method_not_get),
        cmocka_unit_test(test_connection_header),
        cmocka_unit_test(test_upgrade_header),
        cmocka_unit_test(test_version_header),
        cmocka_unit_test(test_key_header),
        cmocka_unit_test(test_http10_upgrade_refused),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_authorization),
        cmocka_unit_test(test_query_and_absolute_target),
        cmocka_unit_test(test_response_rfc_example),
        cmocka_unit_test(test_response_byte_by_byte),
        cmocka_unit_test(test_response_refused),
        cmocka_unit_test(test_response_checks),
        cmocka_unit_test(test_response_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
