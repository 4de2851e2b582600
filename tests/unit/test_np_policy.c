/* Unit tests for netproxy/np_policy: the domain patterns as codex defines them and
 * as the reference behaved (`*.x` subdomains only, `**.x` apex too, deny first),
 * the pattern validation texts, host normalisation, address classification, and
 * the baseline decision order. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netproxy/np_policy.h"

static void add(struct np_policy *p, const char *pat, enum np_perm perm)
{
    char err[300] = "";
    if (np_policy_add(p, pat, perm, err, sizeof err) != 0) fail_msg("%s: %s", pat, err);
}

static enum np_reason decide(const struct np_policy *p, const char *raw, bool *check)
{
    char host[NP_HOST_MAX];
    np_host_normalize(raw, host, sizeof host);
    bool c = false;
    enum np_reason r = np_policy_baseline(p, host, &c);
    if (check) *check = c;
    return r;
}

static void test_wildcards(void **state)
{
    (void)state;
    struct np_policy p = {.allow_local_binding = true};
    add(&p, "*.example.com", NP_PERM_DENY);
    add(&p, "**.apex.org", NP_PERM_DENY);
    add(&p, "exact.net", NP_PERM_DENY);
    add(&p, "Mixed.CASE.com.", NP_PERM_DENY);
    add(&p, "region*.v2.argo.com", NP_PERM_DENY);
    add(&p, "api?.q.io", NP_PERM_DENY);
    add(&p, "*", NP_PERM_ALLOW);
    /* the reference's answers, host by host (PROTOCOL.md 5.10 experiments) */
    assert_int_equal(decide(&p, "example.com", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "api.example.com", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "a.b.example.com", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "apex.org", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "x.apex.org", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "exact.net", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "sub.exact.net", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "MIXED.case.com", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "mixed.case.com.", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "region1.v2.argo.com", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "region.v2.argo.com", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "foo.region1.v2.argo.com", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "xregion1.v2.argo.com", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "api1.q.io", NULL), NP_REASON_DENIED);
    assert_int_equal(decide(&p, "api.q.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "api12.q.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "example.com:443", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "api.example.com:443", NULL), NP_REASON_DENIED);
    np_policy_free(&p);
}

static void test_allow_side(void **state)
{
    (void)state;
    struct np_policy p = {.allow_local_binding = true};
    add(&p, "*.star.io", NP_PERM_ALLOW);
    add(&p, "**.dstar.io", NP_PERM_ALLOW);
    add(&p, "none.io", NP_PERM_NONE);
    add(&p, "*.none.io", NP_PERM_ALLOW);
    add(&p, "[::1]", NP_PERM_ALLOW);
    assert_int_equal(decide(&p, "star.io", NULL), NP_REASON_NOT_ALLOWED);
    assert_int_equal(decide(&p, "a.star.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "dstar.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "b.dstar.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "none.io", NULL), NP_REASON_NOT_ALLOWED);
    assert_int_equal(decide(&p, "x.none.io", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "[::1]", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "::1", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&p, "", NULL), NP_REASON_NOT_ALLOWED);
    /* an empty policy allows nothing */
    struct np_policy empty = {.allow_local_binding = true};
    assert_int_equal(decide(&empty, "example.com", NULL), NP_REASON_NOT_ALLOWED);
    np_policy_free(&p);
}

static void bad_pattern(const char *pat, enum np_perm perm, const char *want)
{
    struct np_policy p = {0};
    char err[300] = "";
    assert_int_equal(np_policy_add(&p, pat, perm, err, sizeof err), -EINVAL);
    assert_string_equal(err, want);
    np_policy_free(&p);
}

static void test_validation_texts(void **state)
{
    (void)state;
    /* verified against 0.169.0 */
    bad_pattern("*", NP_PERM_DENY,
                "invalid value for network.denied_domains: * (allowed exact hosts or scoped "
                "wildcards like *.example.com or **.example.com)");
    bad_pattern("", NP_PERM_ALLOW, "domain pattern is empty");
    bad_pattern("*.", NP_PERM_ALLOW, "domain pattern is empty");
    bad_pattern("a b", NP_PERM_ALLOW, "unsupported domain pattern syntax: a b");
    bad_pattern("http://a.com", NP_PERM_ALLOW, "unsupported domain pattern syntax: http://a.com");
    bad_pattern("a{b}", NP_PERM_DENY, "unsupported domain pattern syntax: a{b}");
    bad_pattern("***.a.com", NP_PERM_ALLOW, "unsupported repeated wildcard: ***.a.com");
    bad_pattern("**", NP_PERM_ALLOW, "unsupported repeated wildcard: **");
    bad_pattern("**", NP_PERM_DENY, "unsupported repeated wildcard: **");
    bad_pattern("a[b", NP_PERM_ALLOW, "brackets are only supported for IPv6 literals or [*]: a[b");
    bad_pattern("[1.2.3.4]", NP_PERM_ALLOW,
                "brackets are only supported for IPv6 literals or [*]: [1.2.3.4]");
    struct np_policy p = {0};
    add(&p, "[fe80::1%25lo0]", NP_PERM_DENY);
    add(&p, "[::1]:443", NP_PERM_ALLOW);
    add(&p, " spaced.com ", NP_PERM_ALLOW);
    np_policy_free(&p);
}

static void norm(const char *in, const char *want)
{
    char out[NP_HOST_MAX];
    np_host_normalize(in, out, sizeof out);
    assert_string_equal(out, want);
}

static void test_normalize(void **state)
{
    (void)state;
    norm("  ExAmPlE.CoM  ", "example.com");
    norm("example.com:1234", "example.com");
    norm("2001:db8::1", "2001:db8::1");
    norm("example.com.", "example.com");
    norm("example.com.:443", "example.com");
    norm("[::1]", "::1");
    norm("[::1]:443", "::1");
    norm("fe80::1%lo0", "fe80::1%lo0");
    norm("[fe80::1%25lo0]", "fe80::1%lo0");
}

static bool non_public(const char *ip)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1)
        s4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1)
        s6->sin6_family = AF_INET6;
    else
        fail_msg("bad ip %s", ip);
    return np_addr_non_public((struct sockaddr *)&ss);
}

static void test_classification(void **state)
{
    (void)state;
    const char *local[] = {"127.0.0.1",
                           "10.0.0.1",
                           "192.168.0.1",
                           "172.16.5.4",
                           "169.254.1.1",
                           "100.64.0.1",
                           "192.0.0.1",
                           "192.0.2.1",
                           "198.18.0.1",
                           "198.51.100.1",
                           "203.0.113.1",
                           "240.0.0.1",
                           "0.1.2.3",
                           "255.255.255.255",
                           "224.0.0.1",
                           "::ffff:127.0.0.1",
                           "::ffff:10.0.0.1",
                           "::1",
                           "::",
                           "fe80::1",
                           "fc00::1",
                           "fd12::1",
                           "ff02::1",
                           NULL};
    for (const char **s = local; *s; s++)
        if (!non_public(*s)) fail_msg("%s should be non-public", *s);
    const char *pub[] = {"8.8.8.8",         "172.32.0.1", "::ffff:8.8.8.8",
                         "2001:4860::8888", "1.1.1.1",    NULL};
    for (const char **s = pub; *s; s++)
        if (non_public(*s)) fail_msg("%s should be public", *s);
    assert_true(np_host_is_loopback("localhost"));
    assert_true(np_host_is_loopback("127.9.9.9"));
    assert_true(np_host_is_loopback("::1"));
    assert_false(np_host_is_loopback("notlocalhost"));
    assert_false(np_host_is_loopback("1.2.3.4"));
}

static void test_local_binding_order(void **state)
{
    (void)state;
    struct np_policy p = {.allow_local_binding = false};
    add(&p, "localhost", NP_PERM_ALLOW);
    add(&p, "127.0.0.2", NP_PERM_ALLOW);
    add(&p, "named.test", NP_PERM_ALLOW);
    add(&p, "*.wild.test", NP_PERM_ALLOW);
    add(&p, "10.9.9.9", NP_PERM_DENY);
    bool check = true;
    /* an explicitly listed local literal passes; no lookup needed */
    assert_int_equal(decide(&p, "localhost", &check), NP_REASON_ALLOW);
    assert_false(check);
    assert_int_equal(decide(&p, "127.0.0.2", &check), NP_REASON_ALLOW);
    /* one not listed is refused before any decider (verified: no policyRequest) */
    assert_int_equal(decide(&p, "127.0.0.1", &check), NP_REASON_NOT_ALLOWED_LOCAL);
    assert_int_equal(decide(&p, "10.1.2.3", &check), NP_REASON_NOT_ALLOWED_LOCAL);
    /* deny still comes first */
    assert_int_equal(decide(&p, "10.9.9.9", &check), NP_REASON_DENIED);
    /* a name is allowed here and its addresses are checked after resolution */
    assert_int_equal(decide(&p, "named.test", &check), NP_REASON_ALLOW);
    assert_true(check);
    assert_int_equal(decide(&p, "other.test", &check), NP_REASON_NOT_ALLOWED);
    assert_true(check);
    /* a public literal needs no check */
    assert_int_equal(decide(&p, "8.8.8.8", &check), NP_REASON_NOT_ALLOWED);
    assert_false(check);
    /* `*` does not make localhost explicit (verified) */
    struct np_policy star = {.allow_local_binding = false};
    add(&star, "*", NP_PERM_ALLOW);
    assert_int_equal(decide(&star, "localhost", &check), NP_REASON_NOT_ALLOWED_LOCAL);
    np_policy_free(&star);
    np_policy_free(&p);
}

static void test_review(void **state)
{
    (void)state;
    struct np_policy p = {.allow_local_binding = true};
    add(&p, "listed.test", NP_PERM_ALLOW);
    add(&p, "*.listed.test", NP_PERM_ALLOW);
    add(&p, "listed.test", NP_PERM_REVIEW);
    add(&p, "bad.test", NP_PERM_DENY);
    add(&p, "*", NP_PERM_REVIEW);
    /* under review: as if no allow entry listed it (the decider is asked) */
    assert_int_equal(decide(&p, "listed.test", NULL), NP_REASON_NOT_ALLOWED);
    assert_int_equal(decide(&p, "a.listed.test", NULL), NP_REASON_NOT_ALLOWED);
    assert_int_equal(decide(&p, "bad.test", NULL), NP_REASON_DENIED);
    np_policy_free(&p);
    struct np_policy q = {.allow_local_binding = true};
    add(&q, "listed.test", NP_PERM_ALLOW);
    add(&q, "*.listed.test", NP_PERM_REVIEW);
    assert_int_equal(decide(&q, "listed.test", NULL), NP_REASON_ALLOW);
    assert_int_equal(decide(&q, "x.listed.test", NULL), NP_REASON_NOT_ALLOWED);
    np_policy_free(&q);
}

static void test_messages(void **state)
{
    (void)state;
    assert_string_equal(np_reason_message("denied"), "Domain denied by the sandbox policy.");
    assert_string_equal(np_reason_message("not_allowed"), "Domain not in allowlist.");
    assert_string_equal(np_reason_message("custom"), "Request blocked by network policy.");
    assert_string_equal(np_reason_header("not_allowed_local"), "blocked-by-allowlist");
    assert_string_equal(np_reason_header("custom"), "blocked-by-policy");
    assert_true(np_method_allowed_limited("GET"));
    assert_true(np_method_allowed_limited("HEAD"));
    assert_true(np_method_allowed_limited("OPTIONS"));
    assert_false(np_method_allowed_limited("POST"));
    assert_false(np_method_allowed_limited("CONNECT"));
    assert_false(np_method_allowed_limited("get"));
}

static void test_matcher_edges(void **state)
{
    (void)state;
    assert_true(np_pattern_match("*", "anything.at.all"));
    assert_true(np_pattern_match("a*b*c", "aXXbYYc"));
    assert_false(np_pattern_match("a*b*c", "aXXbYY"));
    assert_true(np_pattern_match("?*.x.com", "a.x.com"));
    assert_false(np_pattern_match("?*.x.com", ".x.com"));
    assert_false(np_pattern_match("?*.x.com", "x.com"));
    assert_true(np_pattern_match("?.x", "\xc3\xa9.x")); /* one character, two bytes */
    assert_true(np_pattern_match("A.COM", "a.com"));
    /* bounded work on a hostile pattern */
    char host[300];
    memset(host, 'a', 299);
    host[299] = '\0';
    assert_false(np_pattern_match("*a*a*a*a*a*a*a*b", host));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wildcards),        cmocka_unit_test(test_allow_side),
        cmocka_unit_test(test_validation_texts), cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_classification),   cmocka_unit_test(test_local_binding_order),
        cmocka_unit_test(test_messages),         cmocka_unit_test(test_matcher_edges),
        cmocka_unit_test(test_review),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
