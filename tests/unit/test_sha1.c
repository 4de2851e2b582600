/* Unit tests for proto/sha1: the FIPS 180 vectors, every padding boundary against
 * OpenSSL's SHA1, and the RFC 6455 accept-key example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "proto/base64.h"
#include "proto/sha1.h"

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < SHA1_LEN; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void check(const char *msg, const char *want)
{
    uint8_t d[SHA1_LEN];
    char h[41];
    sha1(msg, strlen(msg), d);
    hex(d, h);
    assert_string_equal(h, want);
}

static void test_vectors(void **state)
{
    (void)state;
    check("", "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    check("abc", "a9993e364706816aba3e25717850c26c9cd0d89d");
    check("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

static void test_all_lengths_match_openssl(void **state)
{
    (void)state;
    uint8_t msg[300], a[SHA1_LEN], b[SHA1_LEN];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 31 + 7);
    for (size_t n = 0; n <= sizeof msg; n++) {
        sha1(msg, n, a);
        SHA1(msg, n, b);
        assert_memory_equal(a, b, SHA1_LEN);
    }
}

static void test_websocket_accept(void **state)
{
    (void)state;
    const char *m = "dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t d[SHA1_LEN];
    char acc[32];
    sha1(m, strlen(m), d);
    acc[base64_encode(d, SHA1_LEN, acc)] = 0;
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_all_lengths_match_openssl),
        cmocka_unit_test(test_websocket_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
