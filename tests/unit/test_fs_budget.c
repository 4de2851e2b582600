/* Unit tests for fs/fs_budget: the rules of the server-wide read budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/limits.h"
#include "fs/fs_budget.h"

static void known_sizes_wait_or_go_alone(void **state)
{
    (void)state;
    server_limits.max_read_buffer = 100;
    assert_int_equal(fs_budget_take(60, 0, true), FS_BUDGET_OK);
    assert_int_equal(fs_budget_take(30, 0, true), FS_BUDGET_OK);   /* 90: fits */
    assert_int_equal(fs_budget_take(20, 0, true), FS_BUDGET_WAIT); /* others hold */
    assert_false(fs_budget_fits(20));
    fs_budget_give(90);
    assert_true(fs_budget_fits(1000));                             /* alone */
    assert_int_equal(fs_budget_take(1000, 0, true), FS_BUDGET_OK); /* one reply fits */
    assert_int_equal(fs_budget_take(1, 0, true), FS_BUDGET_WAIT);
    fs_budget_give(1000);
    assert_int_equal(fs_budget_used(), 0);
}

static void steps_never_pass_the_budget(void **state)
{
    (void)state;
    server_limits.max_read_buffer = 100;
    /* Alone, steps go up to the budget and no further. */
    assert_int_equal(fs_budget_take(40, 0, false), FS_BUDGET_OK);
    assert_int_equal(fs_budget_take(40, 40, false), FS_BUDGET_OK);
    assert_int_equal(fs_budget_take(40, 80, false), FS_BUDGET_NEVER);
    /* A read holding room never waits (two would wait for each other). */
    assert_int_equal(fs_budget_take(10, 0, true), FS_BUDGET_OK);
    assert_int_equal(fs_budget_take(20, 80, false), FS_BUDGET_NEVER);
    /* One holding nothing waits for the others. */
    assert_int_equal(fs_budget_take(20, 0, false), FS_BUDGET_WAIT);
    fs_budget_give(90);
    /* A first step larger than the whole budget can never fit. */
    assert_int_equal(fs_budget_take(200, 0, false), FS_BUDGET_NEVER);
    fs_budget_force(500); /* a sandboxed read's reply, already in memory */
    assert_int_equal(fs_budget_used(), 500);
    assert_int_equal(fs_budget_take(1, 0, false), FS_BUDGET_WAIT);
    fs_budget_give(500);
    assert_int_equal(fs_budget_used(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_sizes_wait_or_go_alone),
        cmocka_unit_test(steps_never_pass_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
