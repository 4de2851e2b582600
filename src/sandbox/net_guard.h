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
 * A sandbox without a network namespace of its own (sandbox_mode.h) and a managed
 * network has every connect decided here too: only the proxy's ports on loopback,
 * which lead to the init's relay listeners (proxy_only).
 *
 * net_guard_verdict is the decision alone, with no I/O (unit-tested); the rest runs
 * in the init, single-threaded, around its poll loop (the notifications come through
 * notify.h). */
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

struct notify;
struct notify_call;

/* The init's state: the blocking connects it completes on the command's behalf, and,
 * for a managed network without a network namespace of its own (a Landlock-only
 * sandbox), where the command's connects to the proxy go. */
struct net_guard {
    int npending;
    struct {
        uint64_t id; /* the notification to answer */
        int sock;    /* our duplicate of the command's socket */
    } pending[NET_GUARD_MAX_PENDING];
    bool proxy_only;         /* only the proxy's ports on loopback may be reached */
    uint16_t proxy_ports[2]; /* what the command is told (HTTP, SOCKS5; 0 = none) */
    uint16_t relay_ports[2]; /* where the init listens for them on the host's loopback */
};

/* Fills up to max pollfds with the pending sockets; returns how many. */
int net_guard_pollfds(const struct net_guard *g, struct pollfd *p, int max);

/* Answers the pending connects whose pollfds (net_guard_pollfds) are ready. */
void net_guard_serve_pending(struct net_guard *g, struct notify *nf, const struct pollfd *p, int n);

/* One connect(2) notification (the call c, received by the init's notify loop). */
void net_guard_connect(struct net_guard *g, struct notify *nf, const struct notify_call *c);

#endif
