/* Unit tests for fs/fs_tree: a file copied whole with its mode, and a source that is
 * not a regular file (a FIFO swapped in after the caller's stat) refused at once
 * instead of waiting for a writer, as is a FIFO where the copy goes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/fs_tree.h"

static char tmp[64];

static int setup(void **state)
{
    strcpy(tmp, "/tmp/fstreeXXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_copy_file(void **state)
{
    char src[128], dst[128], buf[16] = {0};
    snprintf(src, sizeof src, "%s/src", tmp);
    snprintf(dst, sizeof dst, "%s/dst", tmp);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello", 5), 5);
    close(fd);
    assert_int_equal(fs_tree_copy_file(src, dst), 0);
    fd = open(dst, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof buf), 5);
    close(fd);
    assert_string_equal(buf, "hello");
    struct stat st;
    assert_int_equal(stat(dst, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fs_tree_copy_file waited on a FIFO\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void test_fifo_source_does_not_block(void **state)
{
    char src[128], dst[128];
    snprintf(src, sizeof src, "%s/fifo", tmp);
    snprintf(dst, sizeof dst, "%s/copy", tmp);
    assert_int_equal(mkfifo(src, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(5);
    assert_int_equal(fs_tree_copy_file(src, dst), -EINVAL);
    alarm(0);
    struct stat st;
    assert_int_not_equal(lstat(dst, &st), 0); /* nothing made */
}

static void test_fifo_destination_does_not_block(void **state)
{
    char src[128], dst[128];
    snprintf(src, sizeof src, "%s/file", tmp);
    snprintf(dst, sizeof dst, "%s/fifo", tmp);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mkfifo(dst, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(5);
    assert_int_equal(fs_tree_copy_file(src, dst), -ENXIO);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copy_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_source_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_destination_does_not_block, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
