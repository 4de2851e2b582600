/* np_stack: what transparent TCP's stack (np_stack.c: the one user-space TCP stack all
 * sandboxes share, and the translation of their connections) knows of one sandbox,
 * and what the sandbox's side (np_tun.c: its TUN device and resolver, their I/O) asks
 * of it. np_tun.c calls down into np_stack.c only; the stack reads what it needs of a
 * sandbox from struct np_stack_tun, which np_tun.c keeps. Nothing outside src/netproxy
 * includes it; the rest of the proxy sees only np_internal.h. */
#ifndef EXEC_NETPROXY_NP_STACK_H
#define EXEC_NETPROXY_NP_STACK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct netproxy;
struct np_client;
struct np_dns;
struct np_tflow;
struct np_budget;

/* One sandbox as the stack sees it (a member of np_tun.c's structure). */
struct np_stack_tun {
    struct netproxy *np; /* the proxy its connections go to */
    /* takes an accepted connection (np_tun_attach's accept; NULL: refused) */
    struct np_client *(*accept)(struct netproxy *np, struct np_tflow *f, const char *host,
                                uint16_t port, const char *peer);
    int fd;                     /* its TUN device (frames: a virtio header, then IP) */
    const struct np_dns *names; /* its synthetic names */
    struct np_budget *budget;   /* its proxy's flow budget (np_budget.h) */
    unsigned flows;             /* its connections in the stack, closing ones too */
    unsigned pending;           /* ... of which handshakes, not yet the proxy's */
    uint64_t frames_in, frames_out, bytes_out; /* for the debug log at release */
};

/* Readies the stack on the first sandbox (lwIP, its interface, its listeners).
 * Returns 0 or -errno. */
int np_stack_init(uv_loop_t *loop);
/* One packet the sandbox wrote (IP, after the virtio header; the bytes may be
 * rewritten in place). */
void np_stack_input(struct np_stack_tun *t, uint8_t *pkt, size_t n);
/* The sandbox is going: every connection of it is reset and forgotten (before its
 * device is closed). */
void np_stack_tun_gone(struct np_stack_tun *t);

#endif
