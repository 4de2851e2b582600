/* Unit tests for netproxy/np_tunpkt: the packets of transparent TCP. A SYN shaped
 * as Linux sends it is parsed, translated both
 * ways with checksums a receiver accepts (verified by summing the result), its MSS
 * read; resets answer as RFC 793 says; what is not TCP or UDP over plain IPv4/IPv6
 * is refused. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "netproxy/np_tunpkt.h"

/* 192.0.2.1:45678 -> 192.0.2.2:18080, a SYN as Linux sends it: MSS 1460, SACK,
 * timestamps, wscale 7 (the IP checksum left 0). */
static const uint8_t syn4[] = {
    0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xc0, 0x00, 0x02,
    0x01, 0xc0, 0x00, 0x02, 0x02, 0xb2, 0x6e, 0x46, 0xa0, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00,
    0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
    0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07};

/* Whether the TCP checksum of a parsed packet verifies (the sum over the pseudo
 * header and the segment folds to 0xFFFF). */
static int tcp_ok(const struct np_pkt *pk)
{
    uint64_t sum = np_csum_add(0, pk->src, pk->alen);
    sum = np_csum_add(sum, pk->dst, pk->alen);
    sum += pk->proto + (pk->len - pk->l3);
    return np_csum_fold(np_csum_add(sum, pk->p + pk->l3, pk->len - pk->l3)) == 0xFFFF;
}

static int ip4_ok(const uint8_t *p)
{
    return np_csum_fold(np_csum_add(0, p, 20)) == 0xFFFF;
}

static void test_parse_and_rewrite_v4(void **state)
{
    uint8_t p[sizeof syn4];
    memcpy(p, syn4, sizeof p);
    struct np_pkt pk;
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), 0);
    assert_int_equal(pk.family, AF_INET);
    assert_int_equal(pk.proto, IPPROTO_TCP);
    assert_int_equal(pk.sport, 45678);
    assert_int_equal(pk.dport, 18080);
    assert_int_equal(pk.l4, 40);
    assert_int_equal(pk.flags, NP_TCP_SYN);
    assert_int_equal(pk.seq, 0x11223344u);
    assert_int_equal(pk.payload, 0);
    assert_int_equal(np_pkt_mss(&pk), 1460);
    const uint8_t src[4] = {100, 64, 0, 1}, dst[4] = {10, 0, 0, 1};
    np_pkt_rewrite(&pk, src, 7, dst, 1, true);
    struct np_pkt again;
    assert_int_equal(np_pkt_parse(p, sizeof p, &again), 0);
    assert_memory_equal(again.src, src, 4);
    assert_memory_equal(again.dst, dst, 4);
    assert_int_equal(again.sport, 7);
    assert_int_equal(again.dport, 1);
    assert_true(ip4_ok(p));
    assert_true(tcp_ok(&again));
    /* a partial checksum holds the pseudo header's sum, not complemented */
    np_pkt_rewrite(&again, syn4 + 12, 45678, syn4 + 16, 18080, false);
    uint64_t ph = np_csum_add(np_csum_add(0, syn4 + 12, 4), syn4 + 16, 4) + IPPROTO_TCP + 40;
    assert_int_equal(p[36] << 8 | p[37], np_csum_fold(ph));
    assert_true(ip4_ok(p));
}

static void test_v6_and_payload(void **state)
{
    /* 2001:db8::1 -> fdc0:de00::5, an ACK with 5 bytes of payload, odd length */
    uint8_t p[40 + 20 + 5];
    memset(p, 0, sizeof p);
    p[0] = 0x60;
    p[5] = 25;
    p[6] = IPPROTO_TCP;
    p[7] = 64;
    inet_pton(AF_INET6, "2001:db8::1", p + 8);
    inet_pton(AF_INET6, "fdc0:de00::5", p + 24);
    p[40] = 0x9c, p[41] = 0x40, p[42] = 0x01, p[43] = 0xbb;
    p[52] = 5 << 4;
    p[53] = NP_TCP_ACK;
    memcpy(p + 60, "hello", 5);
    struct np_pkt pk;
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), 0);
    assert_int_equal(pk.family, AF_INET6);
    assert_int_equal(pk.payload, 5);
    assert_int_equal(pk.dport, 443);
    assert_int_equal(np_pkt_mss(&pk), 0);
    uint8_t a[16], b[16];
    inet_pton(AF_INET6, "fd00:0:0:1::1", a);
    inet_pton(AF_INET6, "fd00::1", b);
    np_pkt_rewrite(&pk, a, 1234, b, 1, true);
    assert_true(tcp_ok(&pk));
    assert_memory_equal(p + 60, "hello", 5);
}

static void test_resets(void **state)
{
    uint8_t p[sizeof syn4], out[NP_PKT_RESET_MAX];
    memcpy(p, syn4, sizeof p);
    struct np_pkt pk, r;
    np_pkt_parse(p, sizeof p, &pk);
    /* to a SYN: RST+ACK acknowledging it, seq 0, addresses and ports swapped */
    size_t n = np_pkt_reset(&pk, out);
    assert_int_equal(n, 40);
    assert_int_equal(np_pkt_parse(out, n, &r), 0);
    assert_int_equal(r.flags, NP_TCP_RST | NP_TCP_ACK);
    assert_int_equal(r.ack, 0x11223345u);
    assert_int_equal(r.seq, 0);
    assert_memory_equal(r.src, syn4 + 16, 4);
    assert_int_equal(r.sport, 18080);
    assert_int_equal(r.dport, 45678);
    assert_true(ip4_ok(out));
    assert_true(tcp_ok(&r));
    /* to an ACK: a bare RST whose seq is that ACK's number */
    p[33] = NP_TCP_ACK;
    p[28] = 0xde, p[29] = 0xad, p[30] = 0xbe, p[31] = 0xef;
    np_pkt_parse(p, sizeof p, &pk);
    n = np_pkt_reset(&pk, out);
    np_pkt_parse(out, n, &r);
    assert_int_equal(r.flags, NP_TCP_RST);
    assert_int_equal(r.seq, 0xdeadbeefu);
    assert_true(tcp_ok(&r));
}

static void test_refused(void **state)
{
    uint8_t p[sizeof syn4];
    struct np_pkt pk;
    memcpy(p, syn4, sizeof p);
    p[6] = 0x20; /* more fragments */
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), -1);
    memcpy(p, syn4, sizeof p);
    p[9] = IPPROTO_ICMP;
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), -1);
    memcpy(p, syn4, sizeof p);
    p[3] = 0x40; /* longer than what was read */
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), -1);
    memcpy(p, syn4, sizeof p);
    p[32] = 0x10; /* a TCP header shorter than 20 bytes */
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), -1);
    assert_int_equal(np_pkt_parse(p, 19, &pk), -1);
    /* IPv6 with a hop-by-hop header first */
    uint8_t v6[48] = {0x60, 0, 0, 0, 0, 8, 0 /* hop-by-hop */, 64};
    assert_int_equal(np_pkt_parse(v6, sizeof v6, &pk), -1);
    /* UDP parses (the caller drops it) */
    memcpy(p, syn4, sizeof p);
    p[9] = IPPROTO_UDP;
    assert_int_equal(np_pkt_parse(p, sizeof p, &pk), 0);
    assert_int_equal(pk.proto, IPPROTO_UDP);
    assert_int_equal(pk.l4, 8);
}

/* np_stack.c's lwip_standard_chksum, which takes the place of lwIP's own: the same
 * result as the library's for every length and alignment (the library's definition is
 * found through its own handle). */
uint16_t lwip_standard_chksum(const void *dataptr, int len);

static void test_lwip_checksum_is_lwips(void **state)
{
    void *lib = dlopen("liblwip.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("liblwip.so.0", RTLD_NOW);
    assert_non_null(lib);
    uint16_t (*theirs)(const void *, int);
    void *sym = dlsym(lib, "lwip_standard_chksum");
    memcpy(&theirs, &sym, sizeof theirs); /* POSIX: a function's address as data */
    assert_non_null(theirs);
    assert_true(theirs != lwip_standard_chksum);
    static uint8_t buf[65600];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
    for (int off = 0; off < 8; off++)
        for (int len = 0; len < 300; len++)
            assert_int_equal(lwip_standard_chksum(buf + off, len), theirs(buf + off, len));
    memset(buf, 0xFF, sizeof buf); /* the carries' worst case */
    for (int len = 65500; len <= 65535; len++)
        assert_int_equal(lwip_standard_chksum(buf + 1, len), theirs(buf + 1, len));
    dlclose(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_rewrite_v4),
        cmocka_unit_test(test_v6_and_payload),
        cmocka_unit_test(test_resets),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_lwip_checksum_is_lwips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
