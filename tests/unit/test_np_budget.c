/* Unit tests for netproxy/np_budget: the flow budget's counts, checked against a
 * sandbox's limit and all sandboxes' at once, and its waiting list: the oldest waiter
 * that fits is woken first (later, by the room function's caller, never inside the
 * give), one whose sandbox is full is passed over, and no more are woken than the room
 * given back has buffers for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "netproxy/np_budget.h"

#define K 1024u

static int woken[8], n_woken, rooms;

static void on_room(void)
{
    rooms++;
}

static void on_wake(struct np_budget_waiter *w)
{
    woken[n_woken++] = (int)(intptr_t)w->next; /* unlinked: next is NULL */
}

struct tagged {
    struct np_budget_waiter w;
    int tag;
};

static void on_wake_tagged(struct np_budget_waiter *w)
{
    woken[n_woken++] = ((struct tagged *)w)->tag;
}

static void test_bytes_both_levels(void **state)
{
    (void)state;
    struct np_budget all, a, b;
    np_budget_init(&all, NULL, 100 * K, 10);
    np_budget_init(&a, &all, 64 * K, 4);
    np_budget_init(&b, &all, 64 * K, 4);
    assert_true(np_budget_room(&a, 64 * K));
    assert_false(np_budget_room(&a, 64 * K + 1)); /* the sandbox's own limit */
    np_budget_hold(&a, 60 * K);
    assert_int_equal(all.bytes, 60 * K);
    assert_true(np_budget_room(&b, 40 * K));
    assert_false(np_budget_room(&b, 41 * K)); /* room in b, not in all */
    np_budget_give(&a, 60 * K);
    assert_int_equal(a.bytes, 0);
    assert_int_equal(all.bytes, 0);
    np_budget_give(&a, 5); /* never below nothing */
    assert_int_equal(all.bytes, 0);
}

static void test_flows(void **state)
{
    (void)state;
    struct np_budget all, a, b;
    np_budget_init(&all, NULL, 1, 3);
    np_budget_init(&a, &all, 1, 2);
    np_budget_init(&b, &all, 1, 2);
    assert_true(np_budget_flow_take(&a));
    assert_false(np_budget_flow_room(&a, 1)); /* one open, one handshake pending */
    assert_true(np_budget_flow_take(&a));
    assert_false(np_budget_flow_take(&a)); /* the sandbox's limit */
    assert_int_equal(a.flows, 2);
    assert_true(np_budget_flow_take(&b));
    assert_false(np_budget_flow_take(&b)); /* all sandboxes' limit */
    np_budget_flow_drop(&a);
    assert_true(np_budget_flow_take(&b));
    assert_int_equal(all.flows, 3);
}

static void test_wake_oldest_that_fits(void **state)
{
    (void)state;
    struct np_budget all, full, a;
    np_budget_init(&all, NULL, 1024 * K, 100);
    np_budget_init(&full, &all, 64 * K, 10);
    np_budget_init(&a, &all, 256 * K, 10);
    np_budget_hold(&full, 64 * K);
    np_budget_hold(&a, 256 * K);
    struct tagged w[4];
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].tag = i;
        w[i].w.wake = on_wake_tagged;
        w[i].w.budget = i == 0 ? &full : &a;
        np_budget_wait(&w[i].w);
    }
    np_budget_wait(&w[1].w); /* twice: still once in the list */
    n_woken = 0;
    rooms = 0;
    np_budget_on_room(on_room);
    /* 128 KiB back in a: the room function is called, and nobody is woken inside the
     * give (its caller may be walking what a wake could close) */
    np_budget_give(&a, 128 * K);
    assert_int_equal(rooms, 1);
    assert_int_equal(n_woken, 0);
    /* then two 64 KiB reads fit; the full sandbox's waiter stays */
    np_budget_wake(64 * K);
    assert_int_equal(n_woken, 2);
    assert_int_equal(woken[0], 1);
    assert_int_equal(woken[1], 2);
    assert_true(w[0].w.waiting);
    assert_false(w[1].w.waiting);
    assert_true(w[3].w.waiting);
    np_budget_unwait(&w[3].w);
    np_budget_give(&full, 64 * K);
    np_budget_wake(64 * K);
    assert_int_equal(n_woken, 3);
    np_budget_give(&a, 64 * K); /* nobody waits: no room function */
    assert_int_equal(rooms, 2);
    np_budget_on_room(NULL);
    assert_int_equal(woken[2], 0);
    np_budget_wake(64 * K); /* nobody waits: nothing */
    assert_int_equal(n_woken, 3);
}

static void test_unlinked_before_wake(void **state)
{
    (void)state;
    struct np_budget all;
    np_budget_init(&all, NULL, 1024 * K, 1);
    struct np_budget_waiter w = {.budget = &all, .wake = on_wake};
    np_budget_wait(&w);
    n_woken = 0;
    np_budget_wake(64 * K);
    assert_int_equal(n_woken, 1);
    assert_int_equal(woken[0], 0); /* its links cleared when it ran */
    assert_false(w.waiting);
}

static bool floor_yes(struct np_budget_waiter *w)
{
    (void)w;
    return true;
}

/* A waiter whose floor applies (its connection holds almost nothing) is woken though
 * its sandbox's budget is full: no connection waits for another's bytes to be read. */
static void test_floor_wakes_past_the_budget(void **state)
{
    (void)state;
    struct np_budget all, a;
    np_budget_init(&all, NULL, 1024 * K, 10);
    np_budget_init(&a, &all, 64 * K, 10);
    np_budget_hold(&a, 64 * K);
    struct tagged full = {.w = {.budget = &a, .wake = on_wake_tagged}, .tag = 7};
    struct tagged floored = {.w = {.budget = &a, .wake = on_wake_tagged, .floor = floor_yes},
                             .tag = 8};
    np_budget_wait(&full.w);
    np_budget_wait(&floored.w);
    n_woken = 0;
    np_budget_wake(16 * K);
    assert_int_equal(n_woken, 1);
    assert_int_equal(woken[0], 8);
    assert_true(full.w.waiting);
    np_budget_unwait(&full.w);
}

static void test_all_limits_from_descriptors(void **state)
{
    (void)state;
    struct np_budget *all = np_budget_all();
    assert_int_equal(all->max_bytes, NP_BUDGET_ALL_BYTES);
    assert_true(all->max_flows > 0 && all->max_flows <= NP_BUDGET_ALL_FLOWS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_both_levels),
        cmocka_unit_test(test_flows),
        cmocka_unit_test(test_wake_oldest_that_fits),
        cmocka_unit_test(test_unlinked_before_wake),
        cmocka_unit_test(test_floor_wakes_past_the_budget),
        cmocka_unit_test(test_all_limits_from_descriptors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
