/* hostaddr: a listening address given as a host name, as sshd's ListenAddress takes
 * one, turned into the numeric address to bind.
 *
 * A name is resolved once, at start (getaddrinfo, so /etc/hosts and DNS as the host
 * has them). The first IPv4 address it has is taken, else its first IPv6 one: a
 * listener binds one address, and `localhost` is 127.0.0.1 then ::1 on most hosts. A
 * numeric address (dotted quad or IPv6 text) is returned unchanged. */
#ifndef EXEC_UTIL_HOSTADDR_H
#define EXEC_UTIL_HOSTADDR_H

#include <stddef.h>

/* Writes host's numeric address into out (n bytes; INET6_ADDRSTRLEN is enough).
 * Returns 0, or -1 with "cannot resolve NAME: WHY" in err. Blocks on the resolver:
 * call it at start, never from the event loop. */
int hostaddr_numeric(const char *host, char *out, size_t n, char *err, size_t errlen);

#endif
