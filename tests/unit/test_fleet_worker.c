/* Unit tests for fleet/fleet_worker's liveness rule (fleet_alive_after): which node
 * heartbeats still count as alive, in steady state and after a database outage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fleet/fleet_worker.h"

#define DEAD 1500 /* three heartbeats of 0.5 s */

static void test_steady_state(void **state)
{
    /* never an outage: three heartbeats back from now */
    assert_int_equal(fleet_alive_after(100000, DEAD, 0, 0), 100000 - DEAD);
}

static void test_after_an_outage(void **state)
{
    /* last success at 10 s, back at 30 s: a node that heartbeated at 9 s (alive when
     * the database went away) is alive for the dead time after the return... */
    int64_t last_ok = 10000, back = 30000, hb = 9000;
    for (int64_t now = back; now < back + DEAD; now += 100)
        assert_true(hb >= fleet_alive_after(now, DEAD, last_ok, back));
    /* ...and dead after it, unless it heartbeated since */
    assert_false(hb >= fleet_alive_after(back + DEAD, DEAD, last_ok, back));
    assert_true(back + 200 >= fleet_alive_after(back + DEAD, DEAD, last_ok, back));
    /* a node already dead when the database went away stays dead */
    assert_false(last_ok - DEAD - 1 >= fleet_alive_after(back, DEAD, last_ok, back));
    /* a job submitted during the outage and run after it gets the same grace */
    assert_true(hb >= fleet_alive_after(back - 500, DEAD, last_ok, back));
    /* long after the outage it is steady state again */
    assert_int_equal(fleet_alive_after(back + 60000, DEAD, last_ok, back), back + 60000 - DEAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_state),
        cmocka_unit_test(test_after_an_outage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
