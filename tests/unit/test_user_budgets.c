/* Unit tests for sandbox/user_budgets: a sandbox's share of a uid's kernel counts, and
 * the init's setting of it in a user namespace of its own (a real one, in a child). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/user_budgets.h"

/* This machine's kernel defaults (a 24 GiB, 2-core VM) as a uid's limits. */
static struct user_budgets host_defaults(void)
{
    struct user_budgets u;
    for (int c = 0; c < USER_COUNT_N; c++)
        u.count[c] = 96367; /* namespaces: half the thread limit */
    u.count[USER_COUNT_INOTIFY_INSTANCES] = 128;
    u.count[USER_COUNT_INOTIFY_WATCHES] = 192543;
    u.count[USER_COUNT_FANOTIFY_GROUPS] = 128;
    u.count[USER_COUNT_FANOTIFY_MARKS] = 205046;
    u.sigpending = 96367;
    u.msgqueue = 819200;
    u.nofile = (struct rlimit){1024, 524288}; /* systemd's for a service */
    return u;
}

static void a_share_is_an_eighth(void **state)
{
    (void)state;
    struct user_budgets u = host_defaults(), s;
    user_budgets_share(&u, &s);
    assert_int_equal(s.count[USER_COUNT_INOTIFY_INSTANCES], 16);
    assert_int_equal(s.count[USER_COUNT_INOTIFY_WATCHES], 24067);
    assert_int_equal(s.count[USER_COUNT_FANOTIFY_GROUPS], 16);
    assert_int_equal(s.count[USER_COUNT_FANOTIFY_MARKS], 25630);
    assert_int_equal(s.sigpending, 12045);
    assert_int_equal(s.msgqueue, 102400);
}

/* Descriptors: seven eighths of the hard limit, under which the server and the inits
 * send; the soft limit stays the spawner's unless it is above that. */
static void descriptors_stay_short_of_the_server(void **state)
{
    (void)state;
    struct user_budgets u = host_defaults(), s;
    user_budgets_share(&u, &s);
    assert_int_equal(s.nofile.rlim_cur, 1024);
    assert_int_equal(s.nofile.rlim_max, 458752);
    u.nofile = (struct rlimit){20000, 20000};
    user_budgets_share(&u, &s);
    assert_int_equal(s.nofile.rlim_cur, 17500);
    assert_int_equal(s.nofile.rlim_max, 17500);
    u.nofile = (struct rlimit){RLIM_INFINITY, RLIM_INFINITY};
    user_budgets_share(&u, &s);
    assert_true(s.nofile.rlim_max == RLIM_INFINITY && s.nofile.rlim_cur == RLIM_INFINITY);
}

static void namespaces_are_capped(void **state)
{
    (void)state;
    struct user_budgets u = host_defaults(), s;
    u.count[USER_COUNT_MNT_NS] = 4000;
    user_budgets_share(&u, &s);
    for (int c = USER_COUNT_USER_NS; c <= USER_COUNT_TIME_NS; c++)
        assert_int_equal(s.count[c], c == USER_COUNT_MNT_NS ? 500 : USER_BUDGET_MAX_NS);
    /* the cap is for namespaces only */
    u.count[USER_COUNT_INOTIFY_WATCHES] = 1048576;
    user_budgets_share(&u, &s);
    assert_int_equal(s.count[USER_COUNT_INOTIFY_WATCHES], 131072);
}

static void unknown_unlimited_and_small_limits(void **state)
{
    (void)state;
    struct user_budgets u = host_defaults(), s;
    u.count[USER_COUNT_TIME_NS] = -1;        /* a count this kernel does not keep */
    u.count[USER_COUNT_USER_NS] = 0;         /* none for anyone */
    u.count[USER_COUNT_FANOTIFY_GROUPS] = 5; /* less than one an eighth */
    u.sigpending = RLIM_INFINITY;
    u.msgqueue = 3;
    user_budgets_share(&u, &s);
    assert_int_equal(s.count[USER_COUNT_TIME_NS], -1);
    assert_int_equal(s.count[USER_COUNT_USER_NS], 0);
    assert_int_equal(s.count[USER_COUNT_FANOTIFY_GROUPS], 1);
    assert_true(s.sigpending == RLIM_INFINITY);
    assert_int_equal(s.msgqueue, 1);
}

static long read_count(const char *name)
{
    char path[128], buf[32];
    snprintf(path, sizeof path, "/proc/sys/user/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

/* In a child: a user namespace of its own, the shares set in it (as the init does),
 * then read back as the namespace's limits and the child's rlimits. Exit 0 when all
 * hold, 77 when this host gives no user namespace, else the failing step. */
static int apply_in_child(const struct user_budgets *s)
{
    if (unshare(CLONE_NEWUSER) < 0) return 77;
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || nofile.rlim_max < 128) return 77;
    nofile.rlim_cur = 64; /* the init's own soft limit goes up to the hard one */
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) return 9;
    const char *what = "";
    if (user_budgets_apply(s, true, &what) < 0) return 2;
    if (getrlimit(RLIMIT_NOFILE, &nofile) < 0 || nofile.rlim_cur <= 64) return 10;
    if (read_count("max_inotify_instances") != s->count[USER_COUNT_INOTIFY_INSTANCES]) return 3;
    if (read_count("max_user_namespaces") != s->count[USER_COUNT_USER_NS]) return 4;
    struct rlimit r;
    if (getrlimit(RLIMIT_SIGPENDING, &r) < 0 || r.rlim_cur > s->sigpending ||
        r.rlim_max > s->sigpending)
        return 5;
    /* a ceiling: raising it needs CAP_SYS_RESOURCE in the host's user namespace, which
       no task of a namespace below it has, root's included */
    r.rlim_cur = r.rlim_max = s->sigpending + 1;
    if (setrlimit(RLIMIT_SIGPENDING, &r) == 0) return 6;
    /* and the init's own inotify instance is charged to the share */
    for (long i = 0; i < s->count[USER_COUNT_INOTIFY_INSTANCES]; i++)
        if (inotify_init1(IN_CLOEXEC) < 0) return 7;
    if (inotify_init1(IN_CLOEXEC) >= 0 || errno != EMFILE) return 8;
    return 0;
}

static void applied_in_a_user_namespace(void **state)
{
    (void)state;
    struct user_budgets u = host_defaults(), s;
    user_budgets_share(&u, &s);
    s.count[USER_COUNT_INOTIFY_INSTANCES] = 3;
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) _exit(apply_in_child(&s));
    int st = 0;
    assert_int_equal(waitpid(c, &st, 0), c);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) skip();
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_share_is_an_eighth),
        cmocka_unit_test(namespaces_are_capped),
        cmocka_unit_test(descriptors_stay_short_of_the_server),
        cmocka_unit_test(unknown_unlimited_and_small_limits),
        cmocka_unit_test(applied_in_a_user_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
