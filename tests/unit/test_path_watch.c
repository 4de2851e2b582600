/* Unit tests for fs/path_watch, on a real loop and real directories: only the next
 * name on the way to a missing path counts, an owner hears once per batch, two owners
 * on one directory share its descriptor without losing it to each other's drop, and
 * the budget holds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "fs/path_watch.h"

struct counter {
    struct path_watch_owner owner;
    int calls;
};

static void count(struct path_watch_owner *o)
{
    ((struct counter *)o)->calls++;
}

struct fixture {
    uv_loop_t loop;
    struct path_watch *pw;
    char dir[64];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    uv_loop_init(&f->loop);
    f->pw = path_watch_new(&f->loop);
    snprintf(f->dir, sizeof f->dir, "/tmp/path-watch-XXXXXX");
    if (!f->pw || !mkdtemp(f->dir)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) return -1;
    path_watch_free(f->pw);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

static void stop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Lets the loop read what the kernel queued (the poll handle is unreferenced, so a
 * timer keeps the loop running for a moment). */
static void settle(struct fixture *f)
{
    uv_timer_t t;
    uv_timer_init(&f->loop, &t);
    uv_timer_start(&t, stop, 50, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
}

static char *at(struct fixture *f, const char *rel)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", f->dir, rel);
    return p[k];
}

static void only_the_next_name_counts(void **state)
{
    struct fixture *f = *state;
    struct counter c = {.owner = {.changed = count}};
    size_t prefix = 0;
    assert_int_equal(path_watch_missing(f->pw, &c.owner, at(f, "a/b/c"), 100, &prefix), 0);
    assert_int_equal(prefix, strlen(f->dir));
    assert_int_equal(path_watch_count(f->pw), 1);
    assert_int_equal(mkdir(at(f, "x"), 0700), 0);
    settle(f);
    assert_int_equal(c.calls, 0);
    assert_int_equal(mkdir(at(f, "a"), 0700), 0);
    assert_int_equal(mkdir(at(f, "a2"), 0700), 0);
    settle(f);
    assert_int_equal(c.calls, 1);
    assert_int_equal(path_watch_existing_prefix(at(f, "a/b/c")), strlen(at(f, "a")));
    path_watch_drop(f->pw, &c.owner);
    assert_int_equal(path_watch_count(f->pw), 0);
    assert_int_equal(rmdir(at(f, "a2")), 0);
    settle(f);
    assert_int_equal(c.calls, 1);
}

static void the_ancestor_going_away_counts(void **state)
{
    struct fixture *f = *state;
    struct counter c = {.owner = {.changed = count}};
    assert_int_equal(mkdir(at(f, "p"), 0700), 0);
    assert_int_equal(path_watch_missing(f->pw, &c.owner, at(f, "p/q"), 100, NULL), 0);
    assert_int_equal(rmdir(at(f, "p")), 0);
    settle(f);
    assert_int_equal(c.calls, 1);
    path_watch_drop(f->pw, &c.owner);
}

static void owners_share_a_directory(void **state)
{
    struct fixture *f = *state;
    struct counter a = {.owner = {.changed = count}}, b = {.owner = {.changed = count}};
    assert_int_equal(path_watch_dir(f->pw, &a.owner, f->dir, NULL, 100), 0);
    assert_int_equal(path_watch_dir(f->pw, &b.owner, f->dir, "n", 100), 0);
    assert_int_equal(mkdir(at(f, "m"), 0700), 0);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 0);
    /* a's drop leaves b's watch (the same descriptor) in the kernel. */
    path_watch_drop(f->pw, &a.owner);
    assert_int_equal(mkdir(at(f, "n"), 0700), 0);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    path_watch_drop(f->pw, &b.owner);
}

static void the_budget_holds(void **state)
{
    struct fixture *f = *state;
    struct counter c = {.owner = {.changed = count}};
    assert_int_equal(path_watch_dir(f->pw, &c.owner, f->dir, NULL, 1), 0);
    assert_int_equal(path_watch_dir(f->pw, &c.owner, f->dir, NULL, 1), -ENOSPC);
    assert_int_equal(path_watch_dir(f->pw, &c.owner, at(f, "gone"), NULL, 5), -ENOENT);
    assert_int_equal(path_watch_dir(NULL, &c.owner, f->dir, NULL, 5), -ENOSYS);
    assert_int_equal(path_watch_count(f->pw), 1);
    path_watch_drop(f->pw, &c.owner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(only_the_next_name_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(the_ancestor_going_away_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(owners_share_a_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(the_budget_holds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
