/* Unit tests for netproxy/np_dns: the synthetic-name resolver of transparent TCP,
 * byte for byte as codex 0.171.0 answered (the replies below were read off its
 * resolver at 127.0.0.53 inside a sandbox), the numbering, the lookup back from an
 * address, and what gets no answer. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netproxy/np_dns.h"

/* A query for name (dotted) of qtype, id 0x1234, flags given. */
static size_t query(uint8_t *q, const char *name, unsigned qtype, unsigned flags)
{
    uint8_t *p = q;
    *p++ = 0x12, *p++ = 0x34, *p++ = (uint8_t)(flags >> 8), *p++ = (uint8_t)flags;
    *p++ = 0, *p++ = 1, *p++ = 0, *p++ = 0, *p++ = 0, *p++ = 0, *p++ = 0, *p++ = 0;
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t l = dot ? (size_t)(dot - name) : strlen(name);
        *p++ = (uint8_t)l;
        memcpy(p, name, l);
        p += l;
        name += l + (dot ? 1 : 0);
    }
    *p++ = 0;
    *p++ = (uint8_t)(qtype >> 8), *p++ = (uint8_t)qtype, *p++ = 0, *p++ = 1;
    return (size_t)(p - q);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void expect(struct np_dns *d, const char *name, unsigned qtype, const char *want)
{
    uint8_t q[300], r[NP_DNS_MAX_REPLY];
    char got[2 * NP_DNS_MAX_REPLY + 1] = "";
    size_t n = np_dns_answer(d, q, query(q, name, qtype, 0x0100), r);
    hex(r, n, got);
    assert_string_equal(got, want);
}

static void test_reference_replies(void **state)
{
    struct np_dns d = {0};
    /* A, AAAA, the question echoed as asked, the same N for any case */
    expect(&d, "example.com", 1,
           "123481800001000100000000076578616d706c6503636f6d0000010001c00c0001000100"
           "00003c0004c6120001");
    expect(&d, "example.com", 28,
           "123481800001000100000000076578616d706c6503636f6d00001c0001c00c001c000100"
           "00003c0010fdc0de00000000000000000000000001");
    expect(&d, "Example.COM", 1,
           "123481800001000100000000074578616d706c6503434f4d0000010001c00c0001000100"
           "00003c0004c6120001");
    /* other types: NOERROR, no answer */
    expect(&d, "example.com", 15, "123481800001000000000000076578616d706c6503636f6d00000f0001");
    expect(&d, "example.com", 255, "123481800001000000000000076578616d706c6503636f6d0000ff0001");
    /* the root: no answer; localhost gets an address like any name */
    expect(&d, "", 1, "1234818000010000000000000000010001");
    expect(&d, "localhost", 1,
           "123481800001000100000000096c6f63616c686f73740000010001c00c00010001000000"
           "3c0004c6120002");
    expect(&d, "a.b.c.d.e.f.example", 28,
           "123481800001000100000000016101620163016401650166076578616d706c6500001c00"
           "01c00c001c00010000003c0010fdc0de00000000000000000000000003");
    np_dns_free(&d);
}

static void test_no_answer(void **state)
{
    struct np_dns d = {0};
    uint8_t q[300], r[NP_DNS_MAX_REPLY];
    /* a response, another opcode, two questions, garbage, a truncated question */
    assert_int_equal(np_dns_answer(&d, q, query(q, "a", 1, 0x8100), r), 0);
    assert_int_equal(np_dns_answer(&d, q, query(q, "a", 1, 0x1100), r), 0);
    size_t n = query(q, "a", 1, 0x0100);
    q[5] = 2;
    assert_int_equal(np_dns_answer(&d, q, n, r), 0);
    assert_int_equal(np_dns_answer(&d, (const uint8_t *)"\x00\x01", 2, r), 0);
    n = query(q, "abc", 1, 0x0100);
    assert_int_equal(np_dns_answer(&d, q, n - 3, r), 0);
    /* a compression pointer in a query */
    n = query(q, "a", 1, 0x0100);
    q[12] = 0xC0;
    assert_int_equal(np_dns_answer(&d, q, n, r), 0);
    assert_int_equal(d.n, 0); /* and nothing was numbered */
    np_dns_free(&d);
}

static void test_edns_and_class(void **state)
{
    struct np_dns d = {0};
    uint8_t q[300], r[NP_DNS_MAX_REPLY];
    char got[2 * NP_DNS_MAX_REPLY + 1];
    /* an OPT record is answered without echoing it (0.171.0's id 8 query) */
    static const uint8_t edns[] = {0, 8, 1, 0, 0, 1, 0,    0,    0, 0, 0, 1, 1, 'a', 0,
                                   0, 1, 0, 1, 0, 0, 0x29, 0x10, 0, 0, 0, 0, 0, 0,   0};
    hex(r, np_dns_answer(&d, edns, sizeof edns, r), got);
    assert_string_equal(got, "00088180000100010000000001610000010001c00c000100010000003c0004c612"
                             "0001");
    /* class CH: no answer */
    size_t n = query(q, "b", 1, 0x0100);
    q[n - 1] = 3;
    hex(r, np_dns_answer(&d, q, n, r), got);
    assert_string_equal(got, "123481800001000000000000016200000100"
                             "03");
    /* without RD the reply has none either */
    n = query(q, "a", 1, 0x0000);
    np_dns_answer(&d, q, n, r);
    assert_int_equal(r[2], 0x80);
    np_dns_free(&d);
}

static void test_lookup_and_odd_names(void **state)
{
    struct np_dns d = {0};
    uint8_t q[300], r[NP_DNS_MAX_REPLY];
    np_dns_answer(&d, q, query(q, "One.Example", 1, 0x0100), r);
    np_dns_answer(&d, q, query(q, "two.example", 28, 0x0100), r);
    struct sockaddr_in s4 = {.sin_family = AF_INET};
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    const char *name = NULL;
    inet_pton(AF_INET, "198.18.0.1", &s4.sin_addr);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s4, &name), 1);
    assert_string_equal(name, "one.example");
    inet_pton(AF_INET6, "fdc0:de00::2", &s6.sin6_addr);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s6, &name), 1);
    assert_string_equal(name, "two.example");
    inet_pton(AF_INET, "198.19.0.1", &s4.sin_addr); /* in the range, never given */
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s4, &name), 0);
    inet_pton(AF_INET6, "fdc0:de00::", &s6.sin6_addr);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s6, &name), 0);
    inet_pton(AF_INET, "198.20.0.1", &s4.sin_addr);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s4, &name), -1);
    inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s6, &name), -1);
    /* a name that is not plain ASCII letters, digits, - and _: NXDOMAIN, no number */
    size_t n = query(q, "a b", 1, 0x0100);
    np_dns_answer(&d, q, n, r);
    assert_int_equal(r[3] & 15, 3);
    assert_int_equal(r[7], 0);
    assert_int_equal(d.n, 2);
    /* many names: the index grows and every one keeps its number */
    char nm[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(nm, sizeof nm, "host%d.test", i);
        np_dns_answer(&d, q, query(q, nm, 1, 0x0100), r);
    }
    /* asked again, host1234 keeps N = 2 + 1234 + 1 = 1237: 198.18.4.213 */
    size_t m = np_dns_answer(&d, q, query(q, "host1234.test", 1, 0x0100), r);
    assert_memory_equal(r + m - 4, "\xc6\x12\x04\xd5", 4);
    s4.sin_addr.s_addr = htonl(0xC6120000u + 1237);
    assert_int_equal(np_dns_lookup(&d, (struct sockaddr *)&s4, &name), 1);
    assert_string_equal(name, "host1234.test");
    assert_int_equal(d.n, 3002);
    np_dns_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_replies),
        cmocka_unit_test(test_no_answer),
        cmocka_unit_test(test_edns_and_class),
        cmocka_unit_test(test_lookup_and_odd_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
