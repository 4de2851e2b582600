/* Unit tests for util/procfs: a field is found only at a line's start ("Pid" not in
 * "PPid" or "TracerPid"), in the base asked, and -1 stands for every way it is not
 * there; then the real files the sandbox reads (a status, a pidfd's fdinfo); and a file
 * of one number, through a directory descriptor, as the per-user limits are read. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/procfs.h"

static char path[64];

static int make_file(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "/tmp/test_procfs.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    const char text[] = "Name:\tbash\nUmask:\t0027\nState:\tS (sleeping)\nTgid:\t41\n"
                        "PPid:\t7\nTracerPid:\t0\nPid:\t42\nGone:\t-1\nEmpty:\t\nWord:\tx12\n";
    ssize_t n = write(fd, text, sizeof text - 1);
    close(fd);
    return n == (ssize_t)sizeof text - 1 ? 0 : -1;
}

static int remove_file(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void test_a_field_at_a_lines_start(void **state)
{
    (void)state;
    assert_int_equal(procfs_field(path, "Pid", 10), 42); /* not PPid's 7 */
    assert_int_equal(procfs_field(path, "PPid", 10), 7);
    assert_int_equal(procfs_field(path, "Tgid", 10), 41);
    assert_int_equal(procfs_field(path, "Umask", 8), 027);
}

static void test_minus_one_when_it_is_not_there(void **state)
{
    (void)state;
    assert_int_equal(procfs_field(path, "Ppid", 10), -1);  /* case counts */
    assert_int_equal(procfs_field(path, "id", 10), -1);    /* a line's end is no field */
    assert_int_equal(procfs_field(path, "Gone", 10), -1);  /* a pidfd of an exited process */
    assert_int_equal(procfs_field(path, "Empty", 10), -1); /* no digits */
    assert_int_equal(procfs_field(path, "Word", 10), -1);
    assert_int_equal(procfs_field("/nonexistent/status", "Pid", 10), -1);
}

static void test_the_kernels_files(void **state)
{
    (void)state;
    assert_int_equal(procfs_field("/proc/self/status", "Pid", 10), getpid());
    assert_int_equal(procfs_field("/proc/self/status", "PPid", 10), getppid());
    mode_t old = umask(0037);
    assert_int_equal(procfs_field("/proc/self/status", "Umask", 8), 0037);
    umask(old);
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (pidfd < 0) skip();
    char fdinfo[64];
    snprintf(fdinfo, sizeof fdinfo, "/proc/self/fdinfo/%d", pidfd);
    assert_int_equal(procfs_field(fdinfo, "Pid", 10), getpid());
    close(pidfd);
}

/* Writes text to a file named name in dir. */
static void put(int dir, const char *name, const char *text)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void test_a_file_of_one_number(void **state)
{
    (void)state;
    char dir_path[] = "/tmp/test_procfs_dir.XXXXXX";
    assert_non_null(mkdtemp(dir_path));
    int dir = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dir >= 0);
    put(dir, "max", "128\n");
    put(dir, "negative", "-5\n");
    put(dir, "word", "many\n");
    put(dir, "empty", "");
    assert_int_equal(procfs_number(dir, "max"), 128);
    assert_int_equal(procfs_number(dir, "negative"), -1);
    assert_int_equal(procfs_number(dir, "word"), -1);
    assert_int_equal(procfs_number(dir, "empty"), -1);
    assert_int_equal(procfs_number(dir, "missing"), -1);
    /* The kernel's own: the descriptor ceiling the sandbox's inits raise their limit to. */
    assert_true(procfs_number(AT_FDCWD, "/proc/sys/fs/nr_open") >= 1024);
    static const char *const names[] = {"max", "negative", "word", "empty"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlinkat(dir, names[i], 0);
    close(dir);
    rmdir(dir_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_field_at_a_lines_start),
        cmocka_unit_test(test_minus_one_when_it_is_not_there),
        cmocka_unit_test(test_the_kernels_files),
        cmocka_unit_test(test_a_file_of_one_number),
    };
    return cmocka_run_group_tests(tests, make_file, remove_file);
}
