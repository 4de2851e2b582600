/* Unit tests for process/proc_denied: PROTOCOL.md section 10.5's rules in their order,
 * with keywords split across output chunks and in any case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "process/proc_denied.h"

static bool verdict(bool sandboxed, int code, const char *a, const char *b)
{
    struct event_log log;
    event_log_init(&log);
    if (a) event_log_append(&log, STREAM_STDOUT, a, strlen(a));
    if (b) event_log_append(&log, STREAM_STDERR, b, strlen(b));
    bool v = proc_denied_verdict(sandboxed, code, &log);
    event_log_free(&log);
    return v;
}

static void test_rules(void **state)
{
    assert_false(verdict(false, 1, "Permission denied", NULL));          /* 1: not sandboxed */
    assert_false(verdict(true, 0, "Read-only file system", NULL));       /* 2: exit 0 */
    assert_true(verdict(true, 2, NULL, "sh: x: Read-only file system")); /* 3 before 4 */
    assert_true(verdict(true, 1, "OPERATION NOT PERMITTED", NULL));
    assert_true(verdict(true, 1, "landlock said no", NULL));
    assert_true(verdict(true, 1, "Failed to write file x", NULL));
    /* the sandbox's process cap, as bash and dash report a failed fork */
    assert_true(verdict(true, 254, NULL, "bash: fork: retry: Resource temporarily unavailable"));
    assert_true(verdict(true, 2, NULL, "sh: 1: Cannot fork"));
    assert_false(verdict(true, 126, "nope", NULL)); /* 4 */
    assert_false(verdict(true, 127, NULL, NULL));
    assert_true(verdict(true, 159, NULL, NULL)); /* 5: SIGSYS */
    assert_false(verdict(true, 1, NULL, NULL));  /* 6 */
    assert_false(verdict(true, 1, "all good", "really"));
}

static void test_keyword_split_across_chunks(void **state)
{
    assert_true(verdict(true, 1, "cannot open: Permission de", "nied"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_keyword_split_across_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
