/* Unit tests for core/host_env: the kind of a login shell by its name, the fallbacks
 * when passwd names none that codex can drive (fish, nologin, no entry), and the
 * lexical normalisation of the directories environment/info reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <stdlib.h>

#include <cmocka.h>

#include "core/env_vars.h"
#include "core/host_env.h"

static void test_kind_of(void **state)
{
    (void)state;
    assert_int_equal(host_env_shell_kind_of("/bin/bash"), SHELL_BASH);
    assert_int_equal(host_env_shell_kind_of("/usr/local/bin/zsh"), SHELL_ZSH);
    assert_int_equal(host_env_shell_kind_of("/bin/sh"), SHELL_SH);
    assert_int_equal(host_env_shell_kind_of("sh"), SHELL_SH);
    assert_int_equal(host_env_shell_kind_of("bash.exe"), SHELL_BASH);
    assert_int_equal(host_env_shell_kind_of("/usr/bin/fish"), SHELL_UNKNOWN);
    assert_int_equal(host_env_shell_kind_of("/usr/sbin/nologin"), SHELL_UNKNOWN);
    assert_int_equal(host_env_shell_kind_of("/bin/bash5.2"), SHELL_UNKNOWN);
    assert_int_equal(host_env_shell_kind_of("/bin/.bash"), SHELL_UNKNOWN);
    assert_int_equal(host_env_shell_kind_of(""), SHELL_UNKNOWN);
    assert_int_equal(host_env_shell_kind_of(NULL), SHELL_UNKNOWN);
    assert_string_equal(host_env_shell_kind_name(SHELL_ZSH), "zsh");
    assert_string_equal(host_env_shell_kind_name(SHELL_UNKNOWN), "sh");
}

static void test_login_shell_taken_as_is(void **state)
{
    (void)state;
    char out[256];
    /* Not looked up on disk: the passwd entry is what the user logs in with. */
    assert_int_equal(host_env_shell_resolve("/opt/shells/zsh", "/nonexistent", out, sizeof out),
                     SHELL_ZSH);
    assert_string_equal(out, "/opt/shells/zsh");
    assert_int_equal(host_env_shell_resolve("/bin/sh", NULL, out, sizeof out), SHELL_SH);
    assert_string_equal(out, "/bin/sh");
}

static void test_fallback_prefers_bash(void **state)
{
    (void)state;
    char out[256];
    /* This machine has bash (the test suite runs under it); a fish or nologin user,
     * or one with no passwd entry, gets it, found on the search path. */
    assert_int_equal(host_env_shell_resolve("/usr/bin/fish", "relative:/nonexistent:/usr/bin:/bin",
                                            out, sizeof out),
                     SHELL_BASH);
    assert_true(strcmp(out, "/usr/bin/bash") == 0 || strcmp(out, "/bin/bash") == 0);
    assert_int_equal(access(out, X_OK), 0);
    assert_int_equal(host_env_shell_resolve(NULL, NULL, out, sizeof out), SHELL_BASH);
    assert_string_equal(out, "/bin/bash");
}

static void test_too_long_login_shell(void **state)
{
    (void)state;
    char out[8];
    /* A path that does not fit is not truncated into another file's name. */
    enum shell_kind k = host_env_shell_resolve("/very/long/path/to/bash", NULL, out, sizeof out);
    assert_int_equal(k, SHELL_SH);
    assert_string_equal(out, "/bin/sh");
}

static void check_norm(const char *path, const char *cwd, const char *want)
{
    char out[64];
    assert_int_equal(host_env_path_normalize(path, cwd, out, sizeof out), 0);
    assert_string_equal(out, want);
}

static void test_path_normalize(void **state)
{
    (void)state;
    /* What the reference answered for these TMPDIR and HOME values. */
    check_norm("/tmp/", NULL, "/tmp");
    check_norm("//var//tmp/./", NULL, "/var/tmp");
    check_norm("/var/tmp/../tmp", NULL, "/var/tmp");
    check_norm("//root/./x/..", NULL, "/root");
    check_norm("rel/./a/", "/srv/work", "/srv/work/rel/a");
    check_norm("../x", "/srv/work", "/srv/x");
    check_norm("/..", NULL, "/");
    check_norm("/../../a", NULL, "/a");
    check_norm("/", NULL, "/");
    check_norm("a/..", "/", "/");
    char small[6];
    assert_int_equal(host_env_path_normalize("/abcdef", NULL, small, sizeof small), -1);
    assert_int_equal(host_env_path_normalize("/abcd", NULL, small, sizeof small), 0);
    assert_string_equal(small, "/abcd");
    assert_int_equal(host_env_path_normalize("", "/", small, sizeof small), -1);
    assert_int_equal(host_env_path_normalize("rel", NULL, small, sizeof small), -1);
}

/* The variables as options_read_env leaves them (core/env_vars.h). */
static void test_home_and_temp_from_env(void **state)
{
    (void)state;
    char out[256];
    int from_env;
    env_vars.home = "//home/u/./";
    assert_string_equal(host_env_home(out, sizeof out), "/home/u");
    env_vars.home = "relative";
    assert_null(host_env_home(out, sizeof out));
    /* unset or empty: the password entry's, absolute */
    env_vars.home = "";
    const char *h = host_env_home(out, sizeof out);
    if (h) assert_true(h[0] == '/');
    env_vars.tmpdir = "t/../u/";
    assert_string_equal(host_env_temp_dir("/w", out, sizeof out, &from_env), "/w/u");
    assert_int_equal(from_env, 1);
    env_vars.tmpdir = "";
    assert_string_equal(host_env_temp_dir("/w", out, sizeof out, &from_env), "/tmp");
    assert_int_equal(from_env, 0);
    env_vars.tmpdir = NULL;
    assert_string_equal(host_env_temp_dir("/w", out, sizeof out, &from_env), "/tmp");
    assert_int_equal(from_env, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_of),
        cmocka_unit_test(test_login_shell_taken_as_is),
        cmocka_unit_test(test_fallback_prefers_bash),
        cmocka_unit_test(test_too_long_login_shell),
        cmocka_unit_test(test_path_normalize),
        cmocka_unit_test(test_home_and_temp_from_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
