/* np_budget: the flow budget's counts and its waiting list (see np_budget.h). */
#include "netproxy/np_budget.h"

#include <sys/resource.h>

static struct np_budget all;
static bool all_ready;
static struct np_budget_waiter waiters = {.next = &waiters, .prev = &waiters};
static void (*room_fn)(void);

struct np_budget *np_budget_all(void)
{
    if (!all_ready) {
        struct rlimit rl;
        unsigned flows = NP_BUDGET_ALL_FLOWS;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur / 4 < flows)
            flows = (unsigned)(rl.rlim_cur / 4);
        np_budget_init(&all, NULL, NP_BUDGET_ALL_BYTES, flows);
        all_ready = true;
    }
    return &all;
}

void np_budget_init(struct np_budget *b, struct np_budget *parent, size_t max_bytes,
                    unsigned max_flows)
{
    *b = (struct np_budget){.parent = parent, .max_bytes = max_bytes, .max_flows = max_flows};
}

bool np_budget_room(const struct np_budget *b, size_t n)
{
    for (; b; b = b->parent)
        if (b->bytes + n > b->max_bytes) return false;
    return true;
}

void np_budget_hold(struct np_budget *b, size_t n)
{
    for (; b; b = b->parent)
        b->bytes += n;
}

void np_budget_give(struct np_budget *b, size_t n)
{
    for (; b; b = b->parent)
        b->bytes -= n < b->bytes ? n : b->bytes;
    if (n && waiters.next != &waiters && room_fn) room_fn();
}

void np_budget_on_room(void (*fn)(void))
{
    room_fn = fn;
}

bool np_budget_flow_room(const struct np_budget *b, unsigned pending)
{
    for (; b; b = b->parent)
        if (b->flows + pending >= b->max_flows) return false;
    return true;
}

bool np_budget_flow_take(struct np_budget *b)
{
    if (!np_budget_flow_room(b, 0)) return false;
    for (; b; b = b->parent)
        b->flows++;
    return true;
}

void np_budget_flow_drop(struct np_budget *b)
{
    for (; b; b = b->parent)
        if (b->flows) b->flows--;
}

void np_budget_wait(struct np_budget_waiter *w)
{
    if (w->waiting) return;
    w->waiting = true;
    w->next = &waiters;
    w->prev = waiters.prev;
    waiters.prev->next = w;
    waiters.prev = w;
}

void np_budget_unwait(struct np_budget_waiter *w)
{
    if (!w->waiting) return;
    w->waiting = false;
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->next = w->prev = NULL;
}

/* Each pass starts again from the oldest: a wake may close other waiters (a
 * connection that fails as it reads again), so nothing is kept across one. Most of
 * the woken read later (the loop polls their sockets), so each is promised a buffer. */
void np_budget_wake(size_t read_size)
{
    static bool waking;
    if (waking) return; /* a wake that gives bytes back: the pass in progress goes on */
    waking = true;
    size_t promised = 0;
    for (bool again = true; again;) {
        again = false;
        for (struct np_budget_waiter *w = waiters.next; w != &waiters; w = w->next) {
            if (np_budget_room(w->budget, promised + read_size))
                promised += read_size;
            else if (!w->floor || !w->floor(w))
                continue;
            np_budget_unwait(w);
            w->wake(w);
            again = true;
            break;
        }
    }
    waking = false;
}
