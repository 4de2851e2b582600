/* Unit tests for core/log: a message is one line whatever its values carry (control
 * characters escaped by the logger itself), and log_value's quoting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"

/* What log_msg wrote to stderr while it ran (the test's stderr swapped for a pipe). */
static void capture(char *out, size_t n, enum log_level level, const char *fmt, const char *arg)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    log_msg(level, fmt, arg);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    ssize_t r = read(p[0], out, n - 1);
    close(p[0]);
    out[r > 0 ? r : 0] = '\0';
}

static void test_message_is_one_line(void **state)
{
    (void)state;
    char out[4096];
    capture(out, sizeof out, LOG_WARN, "event=database result=unavailable detail=\"%s\"",
            "server closed the connection unexpectedly\n\tThis probably means\r\x1b[31m\x7f");
    const char *text = strstr(out, "exec-server: ");
    assert_non_null(text);
    assert_string_equal(text, "exec-server: event=database result=unavailable detail=\"server "
                              "closed the connection unexpectedly\\n\\tThis probably "
                              "means\\r\\x1b[31m\\x7f\"\n");
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
    assert_memory_equal(out + 25, "warn   exec-server: ", 20);
    /* UTF-8 is text, not a control character */
    capture(out, sizeof out, LOG_ERROR, "name=%s", "caf\xc3\xa9");
    assert_non_null(strstr(out, "exec-server: name=caf\xc3\xa9\n"));
}

static void test_long_message_cut_within_the_line(void **state)
{
    (void)state;
    char big[3000], out[4096];
    memset(big, '\n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    capture(out, sizeof out, LOG_ERROR, "%s", big);
    assert_true(strlen(out) < 2048 + 1);
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
    assert_non_null(strstr(out, "exec-server: \\n\\n"));
}

static void test_value_quoting(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(log_value("abc-1.2:3/x@y+z", out, sizeof out), "abc-1.2:3/x@y+z");
    assert_string_equal(log_value("a b", out, sizeof out), "\"a b\"");
    assert_string_equal(log_value("", out, sizeof out), "\"\"");
    assert_string_equal(log_value("q\"\\\n\t\r\x01\xff", out, sizeof out),
                        "\"q\\\"\\\\\\n\\t\\r\\x01\\xff\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_is_one_line),
        cmocka_unit_test(test_long_message_cut_within_the_line),
        cmocka_unit_test(test_value_quoting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
