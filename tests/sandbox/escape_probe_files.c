/*
 * escape_probe_files: the file attempts: reading and writing a path, and the
 * calls that change the tree (mkdir, rmdir, unlink, chmod, rename, link, symlink) and
 * make device nodes, each against the paths the test names (protected names, paths
 * outside the writable roots).
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "escape_probe.h"

static void at_read(const char *name, const char *arg)
{
    char path[PATH_MAX], needle[256];
    if (!need_arg(name, arg)) return;
    split2(arg, path, sizeof path, needle, sizeof needle);
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    static char buf[1 << 20];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    int err = got == 0 && r < 0 ? errno : 0;
    close(fd);
    int found = 0;
    if (*needle)
        for (size_t i = 0; i + strlen(needle) <= got && !found; i++)
            found = memcmp(buf + i, needle, strlen(needle)) == 0;
    emit(name, err, "bytes=%zu needle=%s", got, !*needle ? "-" : found ? "yes" : "no");
}

static void at_write(const char *name, const char *arg)
{
    char path[PATH_MAX], raw[512], data[512];
    if (!need_arg(name, arg)) return;
    split2(arg, path, sizeof path, raw, sizeof raw);
    size_t n = unescape(*raw ? raw : "pwned\\n", data, sizeof data);
    /* Append, never truncate: an existing protected file must show the attack, not lose
     * its content. */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY | O_NONBLOCK, 0644);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    ssize_t w = write(fd, data, n);
    emit(name, rc_err(w), "wrote %zd bytes to %s", w, path);
    close(fd);
}

/* The one-path and two-path ("A:B") file calls, errno as the result. */
static int do_mkdir(const char *p)
{
    return mkdir(p, 0755);
}

static int do_chmod(const char *p)
{
    return chmod(p, 0777);
}

static void one_path(const char *name, const char *arg, int (*op)(const char *))
{
    if (need_arg(name, arg)) emit(name, rc_err(op(arg)), "%s", arg);
}

static void two_paths(const char *name, const char *arg, int (*op)(const char *, const char *))
{
    char a[PATH_MAX], b[PATH_MAX];
    if (!need_arg(name, arg)) return;
    split2(arg, a, sizeof a, b, sizeof b);
    emit(name, rc_err(op(a, b)), "%s, %s", a, b);
}

static void at_mkdir(const char *name, const char *arg)
{
    one_path(name, arg, do_mkdir);
}

static void at_rmdir(const char *name, const char *arg)
{
    one_path(name, arg, rmdir);
}

static void at_unlink(const char *name, const char *arg)
{
    one_path(name, arg, unlink);
}

static void at_chmod(const char *name, const char *arg)
{
    one_path(name, arg, do_chmod);
}

static void at_rename(const char *name, const char *arg)
{
    two_paths(name, arg, rename);
}

static void at_link(const char *name, const char *arg)
{
    two_paths(name, arg, link);
}

static void at_symlink(const char *name, const char *arg)
{
    two_paths(name, arg, symlink);
}

static void mknod_common(const char *name, const char *path, mode_t type, dev_t dev)
{
    if (mknod(path, type | 0666, dev) < 0) {
        emit(name, errno, "mknod %s %u:%u", path, major(dev), minor(dev));
        return;
    }
    /* The node exists; can it be opened (a nodev mount stops this)? */
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    int oerr = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    emit(name, 0, "created %s %u:%u open=%s", path, major(dev), minor(dev), probe_errname(oerr));
}

static void at_mknod_chr(const char *name, const char *arg)
{
    if (need_arg(name, arg)) mknod_common(name, arg, S_IFCHR, makedev(1, 3));
}

/* A block node for the disk "/" lives on: the raw-disk escape. */
static void at_mknod_blk(const char *name, const char *arg)
{
    struct stat st;
    if (!need_arg(name, arg)) return;
    dev_t dev = stat("/", &st) == 0 ? st.st_dev : makedev(8, 0);
    mknod_common(name, arg, S_IFBLK, dev);
}

const struct probe_attempt probe_files[] = {
    {"read", at_read, "PATH[:NEEDLE]  read a file; reports whether NEEDLE occurs", 0},
    {"write", at_write, "PATH[:DATA]  create or append to a file", 0},
    {"mkdir", at_mkdir, "PATH", 0},
    {"rmdir", at_rmdir, "PATH", 0},
    {"unlink", at_unlink, "PATH", 0},
    {"chmod", at_chmod, "PATH  chmod 0777", 0},
    {"rename", at_rename, "SRC:DST", 0},
    {"link", at_link, "SRC:DST  hard link", 0},
    {"symlink", at_symlink, "TARGET:LINKPATH", 0},
    {"mknod_chr", at_mknod_chr, "PATH  character device 1:3, then open it", 0},
    {"mknod_blk", at_mknod_blk, "PATH  block device of the root disk, then open it", 0},
    {NULL, NULL, NULL, 0},
};
