/* np_budget: the flow budget of the managed proxy and transparent TCP (docs/SANDBOX.md,
 * "The flow budget"): what the server holds on behalf of one sandbox's connections, and
 * of all sandboxes' together. Without it a command that opened hundreds of connections
 * to a service sending more than it read kept every byte in the server (2,048 flows of
 * up to 2 MiB each per sandbox, none charged to the sandbox's memory cgroup): 700 such
 * connections grew the server by 800 MB.
 *
 * Two counts per budget, each checked against this sandbox's limit and against the
 * limit of all sandboxes (the parent):
 *   bytes  what waits in the server: queued towards a socket, or towards the child of
 *          a transparent connection (its queue and lwIP's send buffer);
 *   flows  proxied connections open.
 * A read into the proxy is taken only where its buffer fits both (np_conn.c asks before
 * every read; np_stack.c before every delivery from a child): what does not fit waits
 * in the kernel, and TCP's window holds the sender back. A side that could not read
 * waits here (np_budget_wait) and is woken, oldest first, once bytes are given back.
 * A connection past the flow limit is refused.
 *
 * No I/O: the loop thread only (tests/unit/test_np_budget.c). */
#ifndef EXEC_NETPROXY_NP_BUDGET_H
#define EXEC_NETPROXY_NP_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

/* Per sandbox (one managed-network process). */
#define NP_BUDGET_BYTES (16u << 20)
#define NP_BUDGET_FLOWS 256u
/* All sandboxes together (flows: at most a quarter of the descriptor limit, each
 * connection holding one or two). */
#define NP_BUDGET_ALL_BYTES (256u << 20)
#define NP_BUDGET_ALL_FLOWS 2048u

struct np_budget {
    struct np_budget *parent; /* all sandboxes' budget, or NULL (this is it) */
    size_t bytes, max_bytes;
    unsigned flows, max_flows;
};

/* A side that waits for room: linked in the waiting list while `waiting`. */
struct np_budget_waiter {
    struct np_budget_waiter *next, *prev;
    struct np_budget *budget;                  /* whose room it waits for */
    void (*wake)(struct np_budget_waiter *w);  /* called once, unlinked first */
    bool (*floor)(struct np_budget_waiter *w); /* may read past the budget now (or NULL) */
    bool waiting;
};

/* The budget of all sandboxes (its flow limit read from RLIMIT_NOFILE on first use). */
struct np_budget *np_budget_all(void);
void np_budget_init(struct np_budget *b, struct np_budget *parent, size_t max_bytes,
                    unsigned max_flows);

/* Whether n more bytes fit b and its parent. */
bool np_budget_room(const struct np_budget *b, size_t n);
/* Counts n bytes held / given back (in b and its parent). Giving back while a side
 * waits calls the room function (np_budget_on_room), which wakes them later: bytes
 * are given back inside lwIP's callbacks and while flows are being walked, where
 * nothing may be closed under the walker. */
void np_budget_hold(struct np_budget *b, size_t n);
void np_budget_give(struct np_budget *b, size_t n);
void np_budget_on_room(void (*fn)(void));

/* Whether `pending` more flows (handshakes not yet connections) and one more fit; take
 * counts one (false: refused, nothing counted); drop gives it back. */
bool np_budget_flow_room(const struct np_budget *b, unsigned pending);
bool np_budget_flow_take(struct np_budget *b);
void np_budget_flow_drop(struct np_budget *b);

/* Puts w at the end of the waiting list (once); unwait takes it out (a closing side). */
void np_budget_wait(struct np_budget_waiter *w);
void np_budget_unwait(struct np_budget_waiter *w);
/* Wakes the oldest waiters whose budget has room for read_size per woken one, and
 * those whose floor says they may read past it (the room function's work). */
void np_budget_wake(size_t read_size);

#endif
