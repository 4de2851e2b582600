/* np_socks: SOCKS5 messages (see np_socks.h). Pure. */
#include "netproxy/np_socks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "netproxy/np_policy.h"

int np_socks_greeting(const uint8_t *d, size_t n, bool *no_auth)
{
    if (n < 2) return n && d[0] != 5 ? -EPROTO : 0;
    if (d[0] != 5 || d[1] == 0) return -EPROTO;
    size_t need = 2 + (size_t)d[1];
    if (n < need) return 0;
    *no_auth = memchr(d + 2, 0, d[1]) != NULL;
    return (int)need;
}

/* Reads ATYP ADDR PORT at d. Returns bytes used, 0 incomplete, <0 error. */
static int read_addr(const uint8_t *d, size_t n, struct np_socks_addr *a)
{
    memset(a, 0, sizeof *a);
    if (n < 1) return 0;
    size_t need;
    switch (d[0]) {
    case 1:
        need = 1 + 4 + 2;
        if (n < need) return 0;
        inet_ntop(AF_INET, d + 1, a->host, sizeof a->host);
        break;
    case 4:
        need = 1 + 16 + 2;
        if (n < need) return 0;
        inet_ntop(AF_INET6, d + 1, a->host, sizeof a->host);
        break;
    case 3: {
        if (n < 2) return 0;
        size_t len = d[1];
        need = 2 + len + 2;
        if (n < need) return 0;
        if (len == 0 || memchr(d + 2, 0, len)) return -EPROTO;
        char raw[256];
        memcpy(raw, d + 2, len);
        raw[len] = '\0';
        np_host_normalize(raw, a->host, sizeof a->host);
        a->is_name = true;
        break;
    }
    default: return -EAFNOSUPPORT;
    }
    a->port = (uint16_t)(d[need - 2] << 8 | d[need - 1]);
    return (int)need;
}

int np_socks_request(const uint8_t *d, size_t n, int *cmd, struct np_socks_addr *a)
{
    if (n < 4) return n && d[0] != 5 ? -EPROTO : 0;
    if (d[0] != 5 || d[2] != 0) return -EPROTO;
    *cmd = d[1];
    int r = read_addr(d + 3, n - 3, a);
    return r <= 0 ? r : r + 3;
}

static size_t put_addr(uint8_t *out, const struct sockaddr *sa)
{
    if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        out[0] = 4;
        memcpy(out + 1, &s6->sin6_addr, 16);
        memcpy(out + 17, &s6->sin6_port, 2);
        return 19;
    }
    out[0] = 1;
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        memcpy(out + 1, &s4->sin_addr, 4);
        memcpy(out + 5, &s4->sin_port, 2);
    } else {
        memset(out + 1, 0, 6);
    }
    return 7;
}

size_t np_socks_reply(uint8_t *out, int rep, const struct sockaddr *bound)
{
    out[0] = 5;
    out[1] = (uint8_t)rep;
    out[2] = 0;
    return 3 + put_addr(out + 3, bound);
}

int np_socks_udp_parse(const uint8_t *d, size_t n, struct np_socks_addr *a, size_t *payload_at)
{
    if (n < 4 || d[0] != 0 || d[1] != 0 || d[2] != 0) return -EPROTO;
    int r = read_addr(d + 3, n - 3, a);
    if (r <= 0) return -EPROTO;
    *payload_at = 3 + (size_t)r;
    return 0;
}

size_t np_socks_udp_header(uint8_t *out, const struct sockaddr *from)
{
    out[0] = out[1] = out[2] = 0;
    return 3 + put_addr(out + 3, from);
}
