/* Unit tests of the environments' state machine and the step snapshot rule
 * (ec_envreg.c), driven as the locked shell drives it but with made-up connections
 * (plain tokens) instead of clients, so every interleaving is exact:
 *   - lazy environments: idle until a step selects them, then starting, and a later
 *     step sees them ready;
 *   - codex's replace-under-a-step case: worker -> handle A ready; environment/add worker -> handle
 *     B; the current step still uses A; the next uses B once ready (and omits worker
 *     while B is starting);
 *   - failures with their reason, no retry behind the caller's back, a retry on
 *     request; a ready handle lost for good; replace and remove while a step holds
 *     the handle or a connect is under way; every configuration and connection
 *     released exactly once. */
#include "ec_envreg.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- configurations and connections the test can count ------------------------------ */

struct cfg {
    int refs;
    const char *name;
};

static int cfg_alive; /* configurations with references */

static void cfg_ref(void *p)
{
    struct cfg *c = p;
    if (c->refs++ == 0) cfg_alive++;
}

static void cfg_unref(void *p)
{
    struct cfg *c = p;
    assert_true(c->refs > 0);
    if (--c->refs == 0) cfg_alive--;
}

/* Connections are tokens "A", "B", ...; closing one records it. */
static char closed[32];

static void collect(struct envreg *r)
{
    for (struct envreg_handle *g = envreg_take_garbage(r), *next; g; g = next) {
        next = g->next;
        if (g->conn) strncat(closed, g->conn, sizeof closed - strlen(closed) - 1);
        assert_null(g->cfg); /* given up when the handle became garbage */
        envreg_handle_free(g);
    }
}

static char lost_conn[8]; /* the connection the alive check reports as gone */

static bool alive(void *ud, void *conn, char *why, size_t n)
{
    (void)ud;
    if (strcmp(conn, lost_conn) != 0) return true;
    snprintf(why, n, "connection to the server lost: program exited with status 1");
    return false;
}

static const char *const WORKER[] = {"worker"};

static struct envreg_handle *one_start(struct envreg *r)
{
    struct envreg_handle *h = envreg_take_start(r);
    assert_non_null(h);
    assert_null(envreg_take_start(r)); /* exactly one */
    assert_int_equal(h->state, EC_ENV_STARTING);
    return h;
}

static void setup_case(struct envreg *r)
{
    envreg_init(r, cfg_ref, cfg_unref);
    closed[0] = 0;
    lost_conn[0] = 0;
    cfg_alive = 0;
}

/* Nothing left behind: configurations and connections all released. */
static void teardown_case(struct envreg *r)
{
    envreg_clear(r);
    collect(r);
    assert_null(envreg_take_start(r));
    assert_int_equal(cfg_alive, 0);
}

static void test_lazy_start(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg c = {.name = "c"};
    envreg_add(&r, "worker", &c, false);
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_IDLE);
    assert_null(envreg_take_start(&r)); /* lazy: nothing connects before first use */
    assert_int_equal(envreg_state(&r, "other", NULL), EC_ENV_MISSING);

    /* step 1: worker is idle -> asked to start, omitted from this step */
    struct envreg_step *s1 = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_int_equal(s1->n, 1);
    assert_int_equal(s1->e[0].state, EC_ENV_STARTING);
    assert_null(s1->e[0].h);
    struct envreg_handle *a = one_start(&r);
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_STARTING);
    assert_ptr_equal(a->cfg, &c);

    /* step 2 while it connects: still omitted, and not started twice */
    struct envreg_step *s2 = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_int_equal(s2->e[0].state, EC_ENV_STARTING);
    assert_null(envreg_take_start(&r));

    envreg_connected(&r, a, "A");
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_READY);
    /* step 3: ready, with its handle */
    struct envreg_step *s3 = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_int_equal(s3->e[0].state, EC_ENV_READY);
    assert_ptr_equal(s3->e[0].h, a);
    assert_string_equal(s3->e[0].h->conn, "A");
    /* the earlier steps did not change */
    assert_null(s1->e[0].h);
    assert_null(s2->e[0].h);
    envreg_step_release(&r, s1);
    envreg_step_release(&r, s2);
    envreg_step_release(&r, s3);
    collect(&r);
    assert_string_equal(closed, ""); /* the environment still has A */
    teardown_case(&r);
    assert_string_equal(closed, "A");
}

/* The step snapshot rule as codex's harness relies on it: "step snapshot: worker ->
 * handle A, ready; environment/add: worker -> fresh handle B for the same logical
 * environment; current step: plugin@1 still uses captured handle A". */
static void test_snapshot_rule(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg ca = {.name = "a"}, cb = {.name = "b"};
    envreg_add(&r, "worker", &ca, true);
    struct envreg_handle *a = one_start(&r);
    envreg_connected(&r, a, "A");

    struct envreg_step *current = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_ptr_equal(envreg_step_find(current, "worker")->h, a);

    /* environment/add worker: a fresh handle B, starting */
    envreg_add(&r, "worker", &cb, true);
    struct envreg_handle *b = one_start(&r);
    assert_ptr_not_equal(a, b);
    assert_true(b->serial > a->serial);
    assert_ptr_equal(b->cfg, &cb);
    collect(&r);
    assert_string_equal(closed, ""); /* A lives on in the current step */
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_STARTING);

    /* the current step still uses A */
    const struct envreg_step_entry *en = envreg_step_find(current, "worker");
    assert_int_equal(en->state, EC_ENV_READY);
    assert_ptr_equal(en->h, a);
    assert_string_equal(en->h->conn, "A");

    /* the next step, while B starts: worker is omitted, never "A was ready + B" */
    struct envreg_step *next = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_int_equal(envreg_step_find(next, "worker")->state, EC_ENV_STARTING);
    assert_null(envreg_step_find(next, "worker")->h);

    envreg_connected(&r, b, "B");
    /* the step after: B, once ready */
    struct envreg_step *later = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_ptr_equal(envreg_step_find(later, "worker")->h, b);
    assert_string_equal(envreg_step_find(later, "worker")->h->conn, "B");
    /* ...and the current one is still pinned to A */
    assert_ptr_equal(envreg_step_find(current, "worker")->h, a);

    /* A is closed when the last step holding it ends, not before */
    envreg_step_release(&r, next);
    envreg_step_release(&r, later);
    collect(&r);
    assert_string_equal(closed, "");
    envreg_step_release(&r, current);
    collect(&r);
    assert_string_equal(closed, "A");
    assert_int_equal(ca.refs, 0); /* A's configuration went with it */
    teardown_case(&r);
    assert_string_equal(closed, "AB");
}

static void test_replace_while_starting(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg c1 = {.name = "1"}, c2 = {.name = "2"};
    envreg_add(&r, "worker", &c1, true);
    struct envreg_handle *h1 = one_start(&r);
    envreg_add(&r, "worker", &c2, true);
    struct envreg_handle *h2 = one_start(&r);
    /* the first attempt finishes after it was replaced: its connection is closed at
     * once and never reaches a step */
    envreg_connected(&r, h1, "X");
    collect(&r);
    assert_string_equal(closed, "X");
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_STARTING);
    struct envreg_step *s = envreg_capture(&r, WORKER, 1, alive, NULL);
    assert_null(s->e[0].h);
    envreg_step_release(&r, s);
    envreg_connected(&r, h2, "Y");
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_READY);
    /* a replaced attempt that fails leaves the environment alone too */
    struct cfg c3 = {.name = "3"};
    envreg_add(&r, "worker", &c3, true);
    struct envreg_handle *h3 = one_start(&r);
    envreg_add(&r, "worker", &c1, true);
    struct envreg_handle *h4 = one_start(&r);
    envreg_connect_failed(&r, h3, "refused");
    assert_int_equal(envreg_state(&r, "worker", NULL), EC_ENV_STARTING);
    envreg_connected(&r, h4, "Z");
    collect(&r);
    assert_string_equal(closed, "XY"); /* Y was dropped by the replacement */
    teardown_case(&r);
    assert_string_equal(closed, "XYZ");
}

static void test_failure_and_retry(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg c = {.name = "c"};
    envreg_add(&r, "broken", &c, false);
    assert_int_equal(envreg_start(&r, "broken"), 0);
    struct envreg_handle *h = one_start(&r);
    assert_int_equal(envreg_start(&r, "broken"), 0); /* starting: no second attempt */
    assert_null(envreg_take_start(&r));
    envreg_connect_failed(&r, h, "cannot connect to 127.0.0.1:1: Connection refused");
    const char *why = NULL;
    assert_int_equal(envreg_state(&r, "broken", &why), EC_ENV_FAILED);
    assert_string_equal(why, "cannot connect to 127.0.0.1:1: Connection refused");
    const char *sel[] = {"broken", "broken", "nope"};
    struct envreg_step *s = envreg_capture(&r, sel, 3, alive, NULL);
    assert_int_equal(s->n, 2); /* duplicates taken once */
    assert_int_equal(s->e[0].state, EC_ENV_FAILED);
    assert_string_equal(s->e[0].reason, "cannot connect to 127.0.0.1:1: Connection refused");
    assert_null(s->e[0].h);
    assert_int_equal(s->e[1].state, EC_ENV_MISSING);
    assert_null(envreg_step_find(s, "other"));
    envreg_step_release(&r, s);
    /* failed stays failed: a capture does not retry behind the caller's back */
    assert_null(envreg_take_start(&r));
    /* a retry on request */
    assert_int_equal(envreg_start(&r, "broken"), 0);
    struct envreg_handle *h2 = one_start(&r);
    assert_ptr_not_equal(h2, h);
    envreg_connected(&r, h2, "R");
    assert_int_equal(envreg_state(&r, "broken", &why), EC_ENV_READY);
    assert_null(why);
    assert_int_equal(envreg_start(&r, "nope"), -1);
    assert_int_equal(envreg_remove(&r, "nope"), -1);
    teardown_case(&r);
    assert_string_equal(closed, "R");
}

static void test_lost_for_good(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg c = {.name = "c"};
    envreg_add(&r, "stdio", &c, true);
    struct envreg_handle *h = one_start(&r);
    envreg_connected(&r, h, "P");
    const char *const sel[] = {"stdio"};
    struct envreg_step *s1 = envreg_capture(&r, sel, 1, alive, NULL);
    assert_ptr_equal(s1->e[0].h, h);
    /* the program exits: the next look finds the handle gone */
    strcpy(lost_conn, "P");
    struct envreg_step *s2 = envreg_capture(&r, sel, 1, alive, NULL);
    assert_int_equal(s2->e[0].state, EC_ENV_FAILED);
    assert_null(s2->e[0].h);
    assert_non_null(strstr(s2->e[0].reason, "program exited with status 1"));
    /* the earlier step keeps its (now dead) handle until released */
    assert_ptr_equal(s1->e[0].h, h);
    envreg_step_release(&r, s2);
    envreg_step_release(&r, s1);
    collect(&r);
    assert_string_equal(closed, ""); /* the environment still holds it, failed */
    assert_int_equal(envreg_state(&r, "stdio", NULL), EC_ENV_FAILED);
    /* a retry replaces the dead handle, which is closed then */
    envreg_start(&r, "stdio");
    struct envreg_handle *h2 = one_start(&r);
    collect(&r);
    assert_string_equal(closed, "P");
    envreg_connect_failed(&r, h2, "spawn failed");
    teardown_case(&r);
}

static void test_remove_and_all(void **state)
{
    (void)state;
    struct envreg r;
    setup_case(&r);
    struct cfg c = {.name = "c"};
    envreg_add(&r, "b", &c, true);
    envreg_add(&r, "a", &c, false);
    envreg_add(&r, "c", &c, true);
    struct envreg_handle *hb = envreg_take_start(&r), *hc = envreg_take_start(&r);
    assert_string_equal(hb->env_id, "b"); /* queued oldest first */
    assert_string_equal(hc->env_id, "c");
    assert_null(envreg_take_start(&r));
    envreg_connected(&r, hb, "B");
    /* every environment, in the order added: b ready, a asked to start, c starting */
    struct envreg_step *s = envreg_capture(&r, NULL, 0, alive, NULL);
    assert_int_equal(s->n, 3);
    assert_string_equal(s->e[0].id, "b");
    assert_int_equal(s->e[0].state, EC_ENV_READY);
    assert_string_equal(s->e[1].id, "a");
    assert_int_equal(s->e[1].state, EC_ENV_STARTING);
    assert_string_equal(s->e[2].id, "c");
    assert_int_equal(s->e[2].state, EC_ENV_STARTING);
    struct envreg_handle *ha = one_start(&r);
    /* removed while a step holds its handle: gone from the registry, alive in the step */
    assert_int_equal(envreg_remove(&r, "b"), 0);
    assert_int_equal(envreg_state(&r, "b", NULL), EC_ENV_MISSING);
    collect(&r);
    assert_string_equal(closed, "");
    assert_string_equal(envreg_step_find(s, "b")->h->conn, "B");
    struct envreg_step *s2 = envreg_capture(&r, NULL, 0, alive, NULL);
    assert_int_equal(s2->n, 2);
    assert_null(envreg_step_find(s2, "b"));
    envreg_step_release(&r, s2);
    envreg_step_release(&r, s);
    collect(&r);
    assert_string_equal(closed, "B");
    /* removed while connecting: the attempt ends, its connection is closed */
    assert_int_equal(envreg_remove(&r, "c"), 0);
    envreg_connected(&r, hc, "C");
    collect(&r);
    assert_string_equal(closed, "BC");
    envreg_connect_failed(&r, ha, "no");
    /* removing the last one and adding again keeps the order sane */
    assert_int_equal(envreg_remove(&r, "a"), 0);
    envreg_add(&r, "d", &c, false);
    struct envreg_step *s3 = envreg_capture(&r, NULL, 0, alive, NULL);
    assert_int_equal(s3->n, 1);
    assert_string_equal(s3->e[0].id, "d");
    envreg_step_release(&r, s3);
    struct envreg_handle *hd = one_start(&r);
    envreg_connect_failed(&r, hd, "no");
    teardown_case(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lazy_start),
        cmocka_unit_test(test_snapshot_rule),
        cmocka_unit_test(test_replace_while_starting),
        cmocka_unit_test(test_failure_and_retry),
        cmocka_unit_test(test_lost_for_good),
        cmocka_unit_test(test_remove_and_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
