/* np_stack: what transparent TCP's two halves ask of each other: np_tun.c (one
 * sandbox's TUN device and resolver, its I/O) and np_stack.c (the one user-space TCP
 * stack all sandboxes share, and the translation of their connections). Nothing
 * outside src/netproxy includes it; netproxy.c sees only np_internal.h. */
#ifndef EXEC_NETPROXY_NP_STACK_H
#define EXEC_NETPROXY_NP_STACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

struct np_tun;
struct netproxy;

/* np_stack.c */

/* Readies the stack on the first sandbox (lwIP, its interface, its listeners).
 * Returns 0 or -errno. */
int np_stack_init(uv_loop_t *loop);
/* One packet the sandbox wrote (IP, after the virtio header; the bytes may be
 * rewritten in place). */
void np_stack_input(struct np_tun *t, uint8_t *pkt, size_t n);
/* The sandbox is going: every connection of it is reset and forgotten. */
void np_stack_tun_gone(struct np_tun *t);

/* np_tun.c */

/* The proxy a sandbox belongs to. */
struct netproxy *np_tun_proxy(const struct np_tun *t);
/* Writes one frame (virtio header and packet, in n pieces) to the sandbox's TUN
 * device; a frame the device does not take is dropped (TCP sends it again). */
struct iovec;
void np_tun_writev(struct np_tun *t, const struct iovec *iov, int n);
/* The name behind a synthetic address (np_dns_lookup). */
int np_tun_name(const struct np_tun *t, const struct sockaddr *sa, const char **name);
/* The sandbox's count of connections changed by delta; returns the count. */
unsigned np_tun_flows_changed(struct np_tun *t, int delta);

#endif
