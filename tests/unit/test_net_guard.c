/* Unit tests for sandbox/net_guard's decision: which connect(2) addresses a
 * network-enabled sandbox is refused (a port of the server, on any address family
 * and form) and which malformed ones get the kernel's EINVAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sandbox/net_guard.h"

static bool ours(uint16_t port)
{
    return port == 8765 || port == 41234;
}

static int v4(const char *ip, uint16_t port, size_t len)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return net_guard_verdict(&a, len ? len : sizeof a, ours);
}

static int v6(const char *ip, uint16_t port)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return net_guard_verdict(&a, sizeof a, ours);
}

static void test_server_ports_refused_on_every_address(void **state)
{
    assert_int_equal(v4("127.0.0.1", 8765, 0), -ECONNREFUSED);
    assert_int_equal(v4("127.0.0.2", 8765, 0), -ECONNREFUSED);
    assert_int_equal(v4("0.0.0.0", 41234, 0), -ECONNREFUSED);
    assert_int_equal(v4("10.1.2.3", 8765, 0), -ECONNREFUSED); /* a NAT hairpin too */
    assert_int_equal(v6("::1", 8765), -ECONNREFUSED);
    assert_int_equal(v6("::ffff:127.0.0.1", 41234), -ECONNREFUSED);
    assert_int_equal(v6("::", 8765), -ECONNREFUSED);
}

static void test_other_ports_pass(void **state)
{
    assert_int_equal(v4("127.0.0.1", 8766, 0), 0);
    assert_int_equal(v4("93.184.216.34", 443, 0), 0);
    assert_int_equal(v6("::1", 22), 0);
}

static void test_malformed_and_other_families(void **state)
{
    /* shorter than a sockaddr_in: the kernel's EINVAL, not a pass */
    assert_int_equal(v4("127.0.0.1", 8765, 8), -EINVAL);
    assert_int_equal(net_guard_verdict("x", 1, ours), -EINVAL);
    char big[sizeof(struct sockaddr_storage) + 1] = {0};
    assert_int_equal(net_guard_verdict(big, sizeof big, ours), -EINVAL);
    /* RFC 2133's 24-byte sockaddr_in6 (no scope id) is one the kernel connects */
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(8765)};
    assert_int_equal(net_guard_verdict(&a6, offsetof(struct sockaddr_in6, sin6_scope_id), ours),
                     -ECONNREFUSED);
    assert_int_equal(net_guard_verdict(&a6, offsetof(struct sockaddr_in6, sin6_scope_id) - 1, ours),
                     -EINVAL);
    struct sockaddr un = {.sa_family = AF_UNSPEC};
    assert_int_equal(net_guard_verdict(&un, sizeof un, ours), 0); /* dissolve an association */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_ports_refused_on_every_address),
        cmocka_unit_test(test_other_ports_pass),
        cmocka_unit_test(test_malformed_and_other_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
