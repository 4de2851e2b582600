/* Unit tests for sandbox/path_rules: the policy asked of one path after the start,
 * the precedence of deny entries and globs, carve-outs and protected names over
 * writable roots, globs matching a directory's contents, and which directory renames
 * would carry a guarded path to a name the policy does not mention. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sandbox/path_rules.h"

static const char *const readable[] = {"/", NULL};
static const char *const writable[] = {"/w", "/tmp", NULL};
static const char *const ro_sub[] = {"/w/vendor", NULL};
static const char *const denied[] = {"/w/late.env", "/home/u/.ssh", NULL};
static const char *const protected_names[] = {"/w/.git", "/w/.codex", "/tmp/.git", NULL};
static const char *const globs[] = {"/w/**/*.env", "/w/secrets/*", NULL};

static struct sandbox_spec spec(void)
{
    return (struct sandbox_spec){.enforce_fs = true,
                                 .readable = readable,
                                 .writable = writable,
                                 .readonly_sub = ro_sub,
                                 .denied = denied,
                                 .protected_names = protected_names,
                                 .deny_globs = globs};
}

static void test_access(void **state)
{
    (void)state;
    struct sandbox_spec s = spec();
    assert_int_equal(path_rules_access(&s, "/etc/passwd"), PATH_READ);
    assert_int_equal(path_rules_access(&s, "/w"), PATH_WRITE);
    assert_int_equal(path_rules_access(&s, "/w/src/main.c"), PATH_WRITE);
    assert_int_equal(path_rules_access(&s, "/wx/file"), PATH_READ); /* not under /w */
    assert_int_equal(path_rules_access(&s, "/w/.git"), PATH_READ);
    assert_int_equal(path_rules_access(&s, "/w/.git/hooks/pre-commit"), PATH_READ);
    assert_int_equal(path_rules_access(&s, "/w/.gitignore"), PATH_WRITE);
    assert_int_equal(path_rules_access(&s, "/w/vendor/lib.c"), PATH_READ);
    assert_int_equal(path_rules_access(&s, "/tmp/x"), PATH_WRITE);
    assert_int_equal(path_rules_access(&s, "/tmp/.git/config"), PATH_READ);
    assert_int_equal(path_rules_access(&s, "relative"), PATH_NONE);
}

static void test_deny_entries_and_globs(void **state)
{
    (void)state;
    struct sandbox_spec s = spec();
    /* a path entry, whether or not the file exists: a string, not an inode */
    assert_int_equal(path_rules_access(&s, "/w/late.env"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/home/u/.ssh/id_ed25519"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/home/u/.sshx"), PATH_READ);
    /* `**` matches any depth, `*.env` does not match a dot-file's leading period */
    assert_int_equal(path_rules_access(&s, "/w/sub/new.env"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/w/a/b/c/d.env"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/w/top.env"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/w/.env"), PATH_WRITE);
    assert_int_equal(path_rules_access(&s, "/w/sub/new.envx"), PATH_WRITE);
    /* a glob matching a directory denies what is in it */
    assert_int_equal(path_rules_access(&s, "/w/secrets/db"), PATH_NONE);
    assert_int_equal(path_rules_access(&s, "/w/secrets/db/password"), PATH_NONE);
    assert_true(path_rules_denied(&s, "/w/x.env/inside"));
    assert_false(path_rules_denied(&s, "/w/secrets"));
    assert_false(path_rules_denied(&s, "/other/x.env"));
}

static void test_without_fs_enforcement(void **state)
{
    (void)state;
    struct sandbox_spec s = {.enforce_fs = false};
    assert_int_equal(path_rules_access(&s, "/anything"), PATH_WRITE);
}

static void test_rename_keeps(void **state)
{
    (void)state;
    struct sandbox_spec s = spec();
    /* nothing guarded below, within the `**` glob's base */
    assert_true(path_rules_rename_keeps(&s, "/w/src", "/w/src2"));
    /* out of the glob's base: a .env inside would no longer match */
    assert_false(path_rules_rename_keeps(&s, "/w/src", "/tmp/src"));
    /* carries a deny entry, a protected name, a carve-out */
    static const char *const d2[] = {"/w/sub/late.env", NULL};
    struct sandbox_spec t = s;
    t.denied = d2;
    t.deny_globs = NULL;
    assert_false(path_rules_rename_keeps(&t, "/w/sub", "/w/sub2"));
    assert_true(path_rules_rename_keeps(&t, "/w/other", "/w/other2"));
    t.denied = NULL;
    assert_false(path_rules_rename_keeps(&t, "/w", "/w2"));
    /* a glob without `**` depends on the directory's name */
    static const char *const g2[] = {"/w/secrets/*", NULL};
    t.deny_globs = g2;
    t.protected_names = NULL;
    t.readonly_sub = NULL;
    assert_false(path_rules_rename_keeps(&t, "/w/secrets", "/w/public"));
    assert_true(path_rules_rename_keeps(&t, "/tmp/a", "/tmp/b"));
}

static void test_glob_match(void **state)
{
    (void)state;
    assert_true(path_rules_glob_match("/w/**/*.env", "/w/x.env"));
    assert_true(path_rules_glob_match("/w/**/*.env", "/w/.hidden/x.env"));
    assert_false(path_rules_glob_match("/w/*.env", "/w/sub/x.env"));
    assert_true(path_rules_glob_match("/w/[ab].txt", "/w/a.txt"));
    assert_false(path_rules_glob_match("/w/?.txt", "/w/ab.txt"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_access),
        cmocka_unit_test(test_deny_entries_and_globs),
        cmocka_unit_test(test_without_fs_enforcement),
        cmocka_unit_test(test_rename_keeps),
        cmocka_unit_test(test_glob_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
