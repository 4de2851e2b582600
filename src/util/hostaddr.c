/* hostaddr: a listening host name to the address to bind (see hostaddr.h). */
#include "util/hostaddr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int hostaddr_numeric(const char *host, char *out, size_t n, char *err, size_t errlen)
{
    struct in6_addr a6;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1) {
        snprintf(out, n, "%s", host);
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
        return -1;
    }
    const struct addrinfo *v4 = NULL, *v6 = NULL;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET && !v4) v4 = ai;
        if (ai->ai_family == AF_INET6 && !v6) v6 = ai;
    }
    const struct addrinfo *pick = v4 ? v4 : v6;
    int rc = -1;
    if (!pick) {
        snprintf(err, errlen, "cannot resolve %s: no IPv4 or IPv6 address", host);
    } else {
        const void *a =
            pick->ai_family == AF_INET
                ? (const void *)&((const struct sockaddr_in *)pick->ai_addr)->sin_addr
                : (const void *)&((const struct sockaddr_in6 *)pick->ai_addr)->sin6_addr;
        rc = inet_ntop(pick->ai_family, a, out, (socklen_t)n) ? 0 : -1;
        if (rc) snprintf(err, errlen, "cannot resolve %s: address too long", host);
    }
    freeaddrinfo(res);
    return rc;
}
