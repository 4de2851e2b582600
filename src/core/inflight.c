/* inflight: counters of the server-wide in-flight budget (see inflight.h). */
#include "core/inflight.h"

#include <stdatomic.h>

#include "core/limits.h"

static _Atomic size_t queued, reading;
static size_t wanted;         /* loop thread */
static void (*room_fn)(void); /* loop thread */

void inflight_queued_add(size_t n)
{
    atomic_fetch_add_explicit(&queued, n, memory_order_relaxed);
}

void inflight_queued_sub(size_t n)
{
    atomic_fetch_sub_explicit(&queued, n, memory_order_relaxed);
}

size_t inflight_queued(void)
{
    return atomic_load_explicit(&queued, memory_order_relaxed);
}

void inflight_reading_add(size_t n)
{
    atomic_fetch_add_explicit(&reading, n, memory_order_relaxed);
}

void inflight_reading_sub(size_t n)
{
    atomic_fetch_sub_explicit(&reading, n, memory_order_relaxed);
}

size_t inflight_reading(void)
{
    return atomic_load_explicit(&reading, memory_order_relaxed);
}

size_t inflight_total(void)
{
    return inflight_queued() + inflight_reading();
}

void inflight_want(size_t n)
{
    wanted = n;
}

size_t inflight_wanted(void)
{
    return wanted;
}

bool inflight_over(void)
{
    return inflight_total() + wanted > server_limits.max_inflight;
}

void inflight_on_room(void (*fn)(void))
{
    room_fn = fn;
}

void inflight_room(void)
{
    if (wanted && room_fn) room_fn();
}
