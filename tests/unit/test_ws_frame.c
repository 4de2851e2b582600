/* Unit tests for proto/ws_frame: RFC 6455 examples (section 5.7), every length
 * form at its boundaries, masking as an involution, and the validity rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ws_frame.h"

static void test_rfc_examples(void **state)
{
    /* A single-frame unmasked text message "Hello". */
    const uint8_t unmasked[] = {0x81, 0x05, 'H', 'e', 'l', 'l', 'o'};
    struct ws_frame f;
    assert_int_equal(ws_frame_decode(unmasked, 1, &f), 0);
    assert_int_equal(ws_frame_decode(unmasked, sizeof unmasked, &f), 1);
    assert_true(f.fin && !f.masked && f.opcode == WS_OP_TEXT && f.rsv == 0);
    assert_int_equal(f.header_len, 2);
    assert_int_equal(f.payload_len, 5);
    assert_true(ws_frame_valid(&f));
    /* The same, masked with 37 fa 21 3d. */
    uint8_t masked[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
    for (size_t n = 0; n < 6; n++)
        assert_int_equal(ws_frame_decode(masked, n, &f), 0);
    assert_int_equal(ws_frame_decode(masked, 6, &f), 1);
    assert_true(f.masked);
    assert_int_equal(f.header_len, 6);
    ws_frame_unmask(masked + 6, 5, f.mask);
    assert_memory_equal(masked + 6, "Hello", 5);
    /* Re-encoding gives the same header bytes. */
    uint8_t h[WS_FRAME_MAX_HEADER];
    assert_int_equal(ws_frame_encode(h, true, WS_OP_TEXT, 5, f.mask), 6);
    assert_memory_equal(h, masked, 6);
    /* 256 bytes binary in one unmasked frame: the 16-bit length form. */
    assert_int_equal(ws_frame_encode(h, true, WS_OP_BINARY, 256, NULL), 4);
    const uint8_t want[] = {0x82, 0x7E, 0x01, 0x00};
    assert_memory_equal(h, want, 4);
    /* 64 KiB: the 64-bit form. */
    assert_int_equal(ws_frame_encode(h, true, WS_OP_BINARY, 65536, NULL), 10);
    const uint8_t want64[] = {0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0};
    assert_memory_equal(h, want64, 10);
}

static void test_length_boundaries(void **state)
{
    const uint64_t lens[] = {0, 125, 126, 65535, 65536, (uint64_t)1 << 40};
    const uint8_t key[4] = {1, 2, 3, 4};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (int m = 0; m < 2; m++) {
            uint8_t h[WS_FRAME_MAX_HEADER];
            size_t hl = ws_frame_encode(h, i & 1, WS_OP_BINARY, lens[i], m ? key : NULL);
            assert_int_equal(hl, ws_frame_header_len(lens[i], m));
            assert_int_equal(ws_frame_header_size(h[1]), hl);
            struct ws_frame f;
            assert_int_equal(ws_frame_decode(h, hl - 1, &f), 0);
            assert_int_equal(ws_frame_decode(h, hl, &f), 1);
            assert_int_equal(f.payload_len, lens[i]);
            assert_int_equal(f.header_len, hl);
            assert_int_equal(f.fin, (bool)(i & 1));
            assert_int_equal(f.masked, (bool)m);
        }
    }
}

static void test_unmask_any_length(void **state)
{
    const uint8_t key[4] = {0xde, 0xad, 0xbe, 0xef};
    uint8_t a[37], b[37];
    for (size_t n = 0; n <= sizeof a; n++) {
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = (uint8_t)(i * 7);
        ws_frame_unmask(a, n, key);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(a[i], (uint8_t)(b[i] ^ key[i & 3]));
        ws_frame_unmask(a, n, key);
        assert_memory_equal(a, b, n);
    }
}

static void test_validity(void **state)
{
    struct ws_frame f;
    const uint8_t rsv[] = {0xC1, 0x00};
    ws_frame_decode(rsv, sizeof rsv, &f);
    assert_false(ws_frame_valid(&f));
    const uint8_t badop[] = {0x83, 0x00};
    ws_frame_decode(badop, sizeof badop, &f);
    assert_false(ws_frame_valid(&f));
    const uint8_t bigping[] = {0x89, 126, 0, 126};
    ws_frame_decode(bigping, sizeof bigping, &f);
    assert_false(ws_frame_valid(&f));
    const uint8_t fragclose[] = {0x08, 0x00};
    ws_frame_decode(fragclose, sizeof fragclose, &f);
    assert_false(ws_frame_valid(&f));
    const uint8_t ping[] = {0x89, 125};
    ws_frame_decode(ping, sizeof ping, &f);
    assert_true(ws_frame_valid(&f));
    const uint8_t cont[] = {0x00, 0x03};
    ws_frame_decode(cont, sizeof cont, &f);
    assert_true(ws_frame_valid(&f));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_examples),
        cmocka_unit_test(test_length_boundaries),
        cmocka_unit_test(test_unmask_any_length),
        cmocka_unit_test(test_validity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
