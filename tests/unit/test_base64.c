/* Unit tests for proto/base64: round trips and the reference decoder's error texts.
 *
 * The error strings reach clients verbatim (bad base64 in process/http params is
 * a -32602 with this text), so they are pinned here. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/base64.h"

static void roundtrip(const uint8_t *src, size_t n)
{
    char enc[512];
    uint8_t dec[512];
    char err[64];
    size_t elen = base64_encode(src, n, enc);
    assert_int_equal(elen, base64_encoded_len(n));
    assert_int_equal(elen % 4, 0);
    size_t dlen = 12345;
    assert_int_equal(base64_decode(enc, elen, dec, &dlen, err, sizeof err), 0);
    assert_true(dlen <= base64_decoded_max(elen));
    assert_int_equal(dlen, n);
    if (n) assert_memory_equal(dec, src, n);
}

static void test_roundtrip_all_bytes(void **state)
{
    (void)state;
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    roundtrip(all, sizeof all);
    /* Every byte value in every position of a quad. */
    for (int shift = 0; shift < 3; shift++)
        roundtrip(all + shift, sizeof all - (size_t)shift);
    for (int i = 0; i < 256; i++) {
        uint8_t one[3] = {(uint8_t)i, (uint8_t)(255 - i), (uint8_t)(i * 7)};
        for (size_t n = 1; n <= 3; n++)
            roundtrip(one, n);
    }
}

static void test_roundtrip_lengths(void **state)
{
    (void)state;
    uint8_t data[10] = {0x00, 0xff, 0x10, 0x80, 0x7f, 0x01, 0xfe, 0x3e, 0x3f, 0xaa};
    for (size_t n = 0; n <= 10; n++)
        roundtrip(data, n);
}

static void encodes_to(const char *src, const char *want)
{
    char enc[64];
    size_t n = base64_encode(src, strlen(src), enc);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(enc, want, n);
}

static void test_known_vectors(void **state)
{
    (void)state;
    /* RFC 4648 section 10. */
    encodes_to("", "");
    encodes_to("f", "Zg==");
    encodes_to("fo", "Zm8=");
    encodes_to("foo", "Zm9v");
    encodes_to("foob", "Zm9vYg==");
    encodes_to("fooba", "Zm9vYmE=");
    encodes_to("foobar", "Zm9vYmFy");
    const uint8_t hi[3] = {0xfb, 0xff, 0xbf};
    char enc[8];
    base64_encode(hi, 3, enc);
    assert_memory_equal(enc, "+/+/", 4);
}

static void decodes_to(const char *src, const char *want)
{
    uint8_t dec[64];
    size_t n = 0;
    char err[64] = "";
    assert_int_equal(base64_decode(src, strlen(src), dec, &n, err, sizeof err), 0);
    assert_int_equal(n, strlen(want));
    if (n) assert_memory_equal(dec, want, n);
}

static void fails_with(const char *src, const char *want)
{
    uint8_t dec[64];
    size_t n = 0;
    char err[64] = "";
    assert_int_equal(base64_decode(src, strlen(src), dec, &n, err, sizeof err), -EINVAL);
    assert_string_equal(err, want);
}

static void test_decode(void **state)
{
    (void)state;
    decodes_to("", "");
    decodes_to("YQ==", "a");
    decodes_to("YWI=", "ab");
    decodes_to("YWJj", "abc");
    decodes_to("Zm9vYmFy", "foobar");
}

static void test_decode_errors(void **state)
{
    (void)state;
    fails_with("YQ", "Invalid padding");
    fails_with("YWI", "Invalid padding");
    fails_with("YQ=", "Invalid padding");
    fails_with("YWJj=", "Invalid symbol 61, offset 4.");
    fails_with("!!!", "Invalid symbol 33, offset 0.");
    fails_with("YW!j", "Invalid symbol 33, offset 2.");
    fails_with("YWJj\n", "Invalid symbol 10, offset 4.");
    fails_with("Y", "Invalid input length: 1");
    fails_with("YWJjZ", "Invalid input length: 5");
    /* Data after padding: the first '=' is the culprit. */
    fails_with("YQ==YQ==", "Invalid symbol 61, offset 2.");
    fails_with("YQ=a", "Invalid symbol 61, offset 2.");
    /* Padding where a quad cannot have it. */
    fails_with("====", "Invalid symbol 61, offset 0.");
    fails_with("Y===", "Invalid symbol 61, offset 1.");
    /* Non-canonical: unused low bits of the last symbol must be zero. */
    fails_with("YR==", "Invalid last symbol 82, offset 1.");
    fails_with("YWJ=", "Invalid last symbol 74, offset 2.");
}

/* The fast paths (6 bytes per step on encode, table-OR quads on decode) against
 * a plain reference, on every length around the step sizes and on a large buffer;
 * an invalid symbol deep in a long input still gets the strict decoder's offset. */
static void test_fast_paths(void **state)
{
    (void)state;
    static uint8_t src[70000], dec[70000];
    static char enc[100000];
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof src; i++) {
        x = x * 1103515245 + 12345;
        src[i] = (uint8_t)(x >> 16);
    }
    char err[64];
    for (size_t n = 0; n < 40; n++)
        roundtrip(src + 7, n);
    size_t n = sizeof src - 1;
    size_t elen = base64_encode(src, n, enc);
    for (size_t i = 0; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        char q[4] = {alpha[v >> 18], alpha[(v >> 12) & 63], alpha[(v >> 6) & 63], alpha[v & 63]};
        assert_memory_equal(enc + i / 3 * 4, q, 4);
    }
    size_t dlen;
    assert_int_equal(base64_decode(enc, elen, dec, &dlen, err, sizeof err), 0);
    assert_int_equal(dlen, n);
    assert_memory_equal(dec, src, n);
    /* Every byte outside the alphabet, at every position of a 32-byte vector step
     * (and in the scalar tail), is refused with its offset. */
    for (int c = 0; c < 256; c++) {
        if (memchr(alpha, c, 64)) continue;
        for (size_t pos = 1000; pos < 1000 + 33; pos++) {
            char saved = enc[pos];
            enc[pos] = (char)c;
            char want[64];
            snprintf(want, sizeof want, "Invalid symbol %d, offset %zu.", c, pos);
            assert_int_equal(base64_decode(enc, elen, dec, &dlen, err, sizeof err), -EINVAL);
            assert_string_equal(err, want);
            enc[pos] = saved;
        }
    }
    enc[50001] = '!';
    assert_int_equal(base64_decode(enc, elen, dec, &dlen, err, sizeof err), -EINVAL);
    assert_string_equal(err, "Invalid symbol 33, offset 50001.");
}

/* The textbook encoder, padding included, to hold the vector loops to. */
static size_t naive_encode(const uint8_t *s, size_t n, char *d)
{
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) v |= s[i + 2];
        d[o++] = alpha[v >> 18];
        d[o++] = alpha[(v >> 12) & 63];
        d[o++] = i + 1 < n ? alpha[(v >> 6) & 63] : '=';
        d[o++] = i + 2 < n ? alpha[v & 63] : '=';
    }
    return o;
}

/* Every length where the loops hand over (AVX-512 VBMI 48 bytes a step, AVX2 24,
 * then 6 and 3 bytes), at every alignment: the same text as the textbook encoder. */
static void test_encode_every_length_and_offset(void **state)
{
    (void)state;
    static uint8_t src[1200];
    static char got[1700], want[1700];
    uint32_t x = 777;
    for (size_t i = 0; i < sizeof src; i++) {
        x = x * 1103515245 + 12345;
        src[i] = (uint8_t)(x >> 16);
    }
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off <= sizeof src; n++) {
            size_t g = base64_encode(src + off, n, got);
            size_t w = naive_encode(src + off, n, want);
            assert_int_equal(g, w);
            if (w) assert_memory_equal(got, want, w);
        }
    }
}

/* Decoding in place (dst == src, as fs/writeFile does with a request's own
 * copy) gives the same bytes and the same error texts as into another buffer,
 * whatever the length and wherever the error is: in a vector step, in the scalar
 * loop, in the last quad, in the padding of a long input. */
static void in_place_same(const char *src, size_t n)
{
    static uint8_t want[100000];
    static char buf[100000];
    char e1[64] = "", e2[64] = "";
    size_t l1 = 0, l2 = 0;
    int r1 = base64_decode(src, n, want, &l1, e1, sizeof e1);
    memcpy(buf, src, n);
    int r2 = base64_decode(buf, n, (uint8_t *)buf, &l2, e2, sizeof e2);
    assert_int_equal(r1, r2);
    if (r1 == 0) {
        assert_int_equal(l1, l2);
        if (l1) assert_memory_equal(want, buf, l1);
    } else {
        assert_string_equal(e1, e2);
    }
}

static void test_in_place(void **state)
{
    (void)state;
    static uint8_t src[60000];
    static char enc[90000];
    uint32_t x = 777;
    for (size_t i = 0; i < sizeof src; i++) {
        x = x * 1103515245 + 12345;
        src[i] = (uint8_t)(x >> 16);
    }
    static const char *const small[] = {
        "", "YQ==", "YWI=", "YWJj", "YQ", "YQ=", "!!!", "YW!j", "Y", "====", "YR==", "YQ==YQ=="};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        in_place_same(small[i], strlen(small[i]));
    for (size_t n = 0; n < 200; n++) {
        size_t el = base64_encode(src, n, enc);
        in_place_same(enc, el);
    }
    size_t n = sizeof src - 2; /* leaves padding */
    size_t el = base64_encode(src, n, enc);
    in_place_same(enc, el);
    /* Errors at many places: vector steps, the scalar tail, the last quad. */
    static const size_t at[] = {0, 1, 5, 31, 32, 33, 47, 48, 1000, 1017, 40000};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        char saved = enc[at[i]];
        enc[at[i]] = '*';
        in_place_same(enc, el);
        enc[at[i]] = '=';
        in_place_same(enc, el);
        enc[at[i]] = saved;
    }
    for (size_t back = 1; back <= 8; back++) {
        char saved = enc[el - back];
        enc[el - back] = '!';
        in_place_same(enc, el);
        enc[el - back] = 'A';
        in_place_same(enc, el);
        enc[el - back] = saved;
    }
    in_place_same(enc, el - 1); /* bad length */
    in_place_same(enc, el - 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_bytes),
        cmocka_unit_test(test_fast_paths),
        cmocka_unit_test(test_roundtrip_lengths),
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_encode_every_length_and_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
