/* np_socks: the SOCKS5 wire (RFC 1928), pure: the greeting, the request, the reply
 * and the UDP datagram header. Only "no authentication" is offered; CONNECT and
 * UDP ASSOCIATE are the commands the proxy serves (BIND is refused). */
#ifndef EXEC_NETPROXY_NP_SOCKS_H
#define EXEC_NETPROXY_NP_SOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum { NP_SOCKS_CONNECT = 1, NP_SOCKS_BIND = 2, NP_SOCKS_UDP = 3 };
/* reply codes */
enum {
    NP_SOCKS_OK = 0,
    NP_SOCKS_FAILURE = 1,
    NP_SOCKS_NOT_ALLOWED = 2,
    NP_SOCKS_NET_UNREACHABLE = 3,
    NP_SOCKS_HOST_UNREACHABLE = 4,
    NP_SOCKS_REFUSED = 5,
    NP_SOCKS_CMD_UNSUPPORTED = 7,
    NP_SOCKS_ATYP_UNSUPPORTED = 8,
};

struct np_socks_addr {
    char host[256]; /* a name, or an IP literal in text form */
    uint16_t port;
    bool is_name; /* ATYP 3 */
};

/* The method-selection message. Returns bytes consumed (> 0), 0 when incomplete,
 * -EPROTO when not SOCKS5. *no_auth: "no authentication" is among the methods. */
int np_socks_greeting(const uint8_t *d, size_t n, bool *no_auth);
/* The request. Returns bytes consumed, 0 when incomplete, -EPROTO malformed,
 * -EAFNOSUPPORT for an unknown address type. */
int np_socks_request(const uint8_t *d, size_t n, int *cmd, struct np_socks_addr *a);
/* Writes a reply (at most 22 bytes) with bound (NULL: 0.0.0.0:0). Returns its size. */
size_t np_socks_reply(uint8_t *out, int rep, const struct sockaddr *bound);
/* A client's UDP datagram: header fields and where the payload starts. Returns 0,
 * or -EPROTO (malformed, or fragmented: FRAG != 0 is dropped per RFC 1928). */
int np_socks_udp_parse(const uint8_t *d, size_t n, struct np_socks_addr *a, size_t *payload_at);
/* The header for a datagram relayed back to the client from `from`. */
size_t np_socks_udp_header(uint8_t *out, const struct sockaddr *from);

#endif
