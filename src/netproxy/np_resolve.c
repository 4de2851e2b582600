/* np_resolve: the names the proxy resolves at once, without the resolver: IP
 * literals (an IPv6 zone by interface name too), and the test table of
 * EXEC_SERVER_TEST_RESOLVE ("name=ip,..."), which lets the tests give names to
 * loopback addresses. Shared by the TCP path (np_relay.c) and the UDP relay
 * (np_udp.c); everything else goes through uv_getaddrinfo. */
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "core/log.h"
#include "util/mem.h"

struct np_override {
    char name[NP_HOST_MAX];
    struct sockaddr_storage addr;
};
static struct np_override *overrides;
static size_t n_overrides;
static bool overrides_read;

void np_resolve_load_overrides(void)
{
    if (overrides_read) return;
    overrides_read = true;
    const char *spec = env_vars.test_resolve;
    if (!spec || !*spec) return;
    char *copy = xstrdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        struct np_override o = {0};
        np_host_normalize(item, o.name, sizeof o.name);
        struct sockaddr_in *s4 = (struct sockaddr_in *)&o.addr;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&o.addr;
        if (inet_pton(AF_INET, eq + 1, &s4->sin_addr) == 1)
            s4->sin_family = AF_INET;
        else if (inet_pton(AF_INET6, eq + 1, &s6->sin6_addr) == 1)
            s6->sin6_family = AF_INET6;
        else
            continue;
        overrides = xrealloc(overrides, (n_overrides + 1) * sizeof *overrides);
        overrides[n_overrides++] = o;
    }
    free(copy);
    if (n_overrides)
        log_warn("EXEC_SERVER_TEST_RESOLVE is set: the network proxy resolves %zu "
                 "name(s) from it (a test setting)",
                 n_overrides);
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

int np_resolve_now(const char *host, uint16_t port, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof *out);
    struct sockaddr_in *s4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
    char ip[NP_HOST_MAX];
    snprintf(ip, sizeof ip, "%s", host);
    char *pct = strchr(ip, '%');
    if (pct) *pct = '\0';
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
    } else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        if (pct) s6->sin6_scope_id = if_nametoindex(pct + 1);
    } else {
        size_t i = 0;
        for (; i < n_overrides; i++)
            if (strcmp(overrides[i].name, host) == 0) break;
        if (i == n_overrides) return 0;
        *out = overrides[i].addr;
    }
    set_port(out, port);
    return 1;
}

int np_resolve_start(uv_loop_t *loop, uv_getaddrinfo_t *req, uv_getaddrinfo_cb cb, const char *host,
                     uint16_t port, int socktype)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = socktype};
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    return uv_getaddrinfo(loop, req, cb, host, service, &hints);
}
