/* net_guard: a network-enabled sandbox's connect(2), decided by its init.
 *
 * With the network enabled a sandbox shares the host's network, and so the
 * server's own listeners (core/own_ports.h): its loopback WebSocket would start an
 * unsandboxed process for whoever asks. The command's seccomp filter turns every
 * connect(2) into a user notification (SECCOMP_RET_USER_NOTIF) that the sandbox's
 * init, outside the filter, answers:
 *  - the address is read from the command's memory once; a port of the server is
 *    refused with ECONNREFUSED, on every address (loopback, the host's own, a NAT
 *    hairpin: a port is a port) and whatever the socket's family (an SMC socket,
 *    say, takes IP addresses too);
 *  - any other connect is made BY THE INIT, on the command's own socket (a
 *    duplicate through pidfd_getfd, from the calling thread), with the copy it
 *    read, for every family: letting the kernel continue the call would read the
 *    address again, and look the descriptor number up again, and another task
 *    sharing the command's memory or descriptor table could have rewritten the one
 *    or put an IP socket behind the other in between (seccomp(2) warns of exactly
 *    this). The init makes it with its effective capabilities off, so it passes
 *    no check the command would fail, and resolves a Unix socket's relative name
 *    from the caller's working directory. A blocking socket's connect waits in the
 *    init's loop, not in the init (a Unix socket whose listener's backlog is full
 *    answers EAGAIN at once). The one difference a peer can see: a Unix socket's
 *    SO_PEERCRED names the init's pid (same uid and gid).
 * TCP Fast Open (which connects from sendto/sendmsg) and SCTP (which connects from
 * sendmsg and setsockopt) are refused by the filter itself (sandbox/seccomp.h). A
 * second listener cannot be stacked under ours (the kernel refuses it), so the
 * command cannot answer its own notifications.
 *
 * net_guard_verdict is the decision alone, with no I/O (unit-tested); the rest runs
 * in the init, single-threaded, around its poll loop. */
#ifndef EXEC_SANDBOX_NET_GUARD_H
#define EXEC_SANDBOX_NET_GUARD_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a connect to addr (len bytes, as the command passed them) gets: 0 to go on,
 * -ECONNREFUSED for a port of this server, -EINVAL for a malformed address (as the
 * kernel would answer). is_ours says which ports are the server's. */
int net_guard_verdict(const void *addr, size_t len, bool (*is_ours)(uint16_t port));

#define NET_GUARD_MAX_PENDING 64

/* The init's state: the notification descriptor and the blocking connects it
 * completes on the command's behalf. */
struct net_guard {
    int fd; /* the seccomp listener, -1 when there is none */
    void *req, *resp;
    size_t req_size, resp_size;
    int npending;
    struct {
        uint64_t id; /* the notification to answer */
        int sock;    /* our duplicate of the command's socket */
    } pending[NET_GUARD_MAX_PENDING];
};

/* Takes the listener fd (from the command, SCM_RIGHTS). Returns 0 or -errno. */
int net_guard_open(struct net_guard *g, int fd);

/* Fills up to max pollfds (the listener, then each pending socket); returns how many. */
int net_guard_pollfds(const struct net_guard *g, struct pollfd *p, int max);

/* Acts on the pollfds net_guard_pollfds filled (after poll). */
void net_guard_serve(struct net_guard *g, const struct pollfd *p, int n);

#endif
