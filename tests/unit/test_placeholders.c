/* Unit tests for sandbox/placeholders: a placeholder is made for a missing protected
 * name, counted, and removed by the last user; never made or removed through a
 * symbolic link swapped into its path (the server, often root, would make or remove
 * a directory wherever the link points). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/placeholders.h"
#include "sandbox/policy.h"

static char tmp[64];

static int setup(void **state)
{
    strcpy(tmp, "/tmp/sbphXXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static char *at(const char *rel)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, rel);
    return buf[k];
}

static bool is_dir(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_made_counted_removed(void **state)
{
    assert_int_equal(mkdir(at("ws"), 0755), 0);
    struct sb_paths names = {0};
    sandbox_paths_add(&names, at("ws/.git"));
    struct sb_placeholders *a = sandbox_placeholders_acquire(&names);
    struct sb_placeholders *b = sandbox_placeholders_acquire(&names);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(is_dir(at("ws/.git")));
    sandbox_placeholders_release(a);
    assert_true(is_dir(at("ws/.git"))); /* b still uses it */
    sandbox_placeholders_release(b);
    assert_false(is_dir(at("ws/.git")));
    sandbox_paths_free(&names);
}

static void test_not_through_a_link(void **state)
{
    /* proj/ws is the workspace; decoy/ws a host directory with an empty .git of its own */
    assert_int_equal(mkdir(at("proj"), 0755), 0);
    assert_int_equal(mkdir(at("proj/ws"), 0755), 0);
    assert_int_equal(mkdir(at("decoy"), 0755), 0);
    assert_int_equal(mkdir(at("decoy/ws"), 0755), 0);
    struct sb_paths names = {0};
    sandbox_paths_add(&names, at("proj/ws/.git"));
    /* made: then proj is swapped for a link to decoy, which holds an empty .git */
    struct sb_placeholders *h = sandbox_placeholders_acquire(&names);
    assert_non_null(h);
    assert_true(is_dir(at("proj/ws/.git")));
    assert_int_equal(rename(at("proj"), at("proj.moved")), 0);
    assert_int_equal(symlink(at("decoy"), at("proj")), 0);
    assert_int_equal(mkdir(at("decoy/ws/.git"), 0755), 0);
    sandbox_placeholders_release(h);
    assert_true(is_dir(at("decoy/ws/.git"))); /* not removed through the link */
    assert_int_equal(rmdir(at("decoy/ws/.git")), 0);
    /* not made through the link either */
    h = sandbox_placeholders_acquire(&names);
    assert_null(h);
    assert_false(is_dir(at("decoy/ws/.git")));
    sandbox_paths_free(&names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_made_counted_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_through_a_link, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
