/* Unit tests for util/fdclose: each way of closing every descriptor from a number up
 * (close_range, the /proc/self/fd walk, the loop to the limit) closes exactly those,
 * in a child process so the runner's own descriptors are not touched. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fdclose.h"

#define LOW 500
static const int above[] = {LOW, LOW + 1, LOW + 7, 900};

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* In a child: descriptors below and at/above LOW, then `how`; exits 0 when exactly
 * those >= LOW went, or with the number of the check that failed. */
static void run_in_child(int how)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) _exit(10);
        if (rl.rlim_cur <= 1000) {
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 1000 ? 1001 : rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) < 0) _exit(11);
        }
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) _exit(12);
        if (dup2(fd, LOW - 1) < 0) _exit(13);
        for (size_t i = 0; i < sizeof above / sizeof above[0]; i++)
            if (above[i] < (int)rl.rlim_cur && dup2(fd, above[i]) < 0) _exit(14);
        if (how == 0)
            fdclose_from(LOW);
        else if (how == 1 && fdclose_from_procfs(LOW) < 0)
            _exit(15);
        else if (how == 2)
            fdclose_from_limit(LOW);
        for (size_t i = 0; i < sizeof above / sizeof above[0]; i++)
            if (is_open(above[i])) _exit(20 + (int)i);
        if (!is_open(LOW - 1) || !is_open(fd) || !is_open(0) || !is_open(1) || !is_open(2))
            _exit(30);
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_close_range(void **state)
{
    run_in_child(0);
}

static void test_procfs(void **state)
{
    if (access("/proc/self/fd", R_OK) != 0) skip();
    run_in_child(1);
}

static void test_limit(void **state)
{
    run_in_child(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_range),
        cmocka_unit_test(test_procfs),
        cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
