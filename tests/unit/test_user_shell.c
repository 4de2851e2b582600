/* Unit tests for core/user_shell: the kind of a login shell by its name, and the
 * fallbacks when passwd names none that codex can drive (fish, nologin, no entry). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/user_shell.h"

static void test_kind_of(void **state)
{
    (void)state;
    assert_int_equal(user_shell_kind_of("/bin/bash"), SHELL_BASH);
    assert_int_equal(user_shell_kind_of("/usr/local/bin/zsh"), SHELL_ZSH);
    assert_int_equal(user_shell_kind_of("/bin/sh"), SHELL_SH);
    assert_int_equal(user_shell_kind_of("sh"), SHELL_SH);
    assert_int_equal(user_shell_kind_of("bash.exe"), SHELL_BASH);
    assert_int_equal(user_shell_kind_of("/usr/bin/fish"), SHELL_UNKNOWN);
    assert_int_equal(user_shell_kind_of("/usr/sbin/nologin"), SHELL_UNKNOWN);
    assert_int_equal(user_shell_kind_of("/bin/bash5.2"), SHELL_UNKNOWN);
    assert_int_equal(user_shell_kind_of("/bin/.bash"), SHELL_UNKNOWN);
    assert_int_equal(user_shell_kind_of(""), SHELL_UNKNOWN);
    assert_int_equal(user_shell_kind_of(NULL), SHELL_UNKNOWN);
    assert_string_equal(user_shell_kind_name(SHELL_ZSH), "zsh");
    assert_string_equal(user_shell_kind_name(SHELL_UNKNOWN), "sh");
}

static void test_login_shell_taken_as_is(void **state)
{
    (void)state;
    char out[256];
    /* Not looked up on disk: the passwd entry is what the user logs in with. */
    assert_int_equal(user_shell_resolve("/opt/shells/zsh", "/nonexistent", out, sizeof out),
                     SHELL_ZSH);
    assert_string_equal(out, "/opt/shells/zsh");
    assert_int_equal(user_shell_resolve("/bin/sh", NULL, out, sizeof out), SHELL_SH);
    assert_string_equal(out, "/bin/sh");
}

static void test_fallback_prefers_bash(void **state)
{
    (void)state;
    char out[256];
    /* This machine has bash (the test suite runs under it); a fish or nologin user,
     * or one with no passwd entry, gets it, found on the search path. */
    assert_int_equal(
        user_shell_resolve("/usr/bin/fish", "relative:/nonexistent:/usr/bin:/bin", out, sizeof out),
        SHELL_BASH);
    assert_true(strcmp(out, "/usr/bin/bash") == 0 || strcmp(out, "/bin/bash") == 0);
    assert_int_equal(access(out, X_OK), 0);
    assert_int_equal(user_shell_resolve(NULL, NULL, out, sizeof out), SHELL_BASH);
    assert_string_equal(out, "/bin/bash");
}

static void test_too_long_login_shell(void **state)
{
    (void)state;
    char out[8];
    /* A path that does not fit is not truncated into another file's name. */
    enum shell_kind k = user_shell_resolve("/very/long/path/to/bash", NULL, out, sizeof out);
    assert_int_equal(k, SHELL_SH);
    assert_string_equal(out, "/bin/sh");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_of),
        cmocka_unit_test(test_login_shell_taken_as_is),
        cmocka_unit_test(test_fallback_prefers_bash),
        cmocka_unit_test(test_too_long_login_shell),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
