/* fs_tree: recursive remove and copy helpers for the fs methods (see fs_tree.h),
 * kept apart from the request plumbing in fs_methods.c. */
#include "fs/fs_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_util.h"
#include "util/buf.h"
#include "util/mem.h"

bool fs_tree_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* std::fs::create_dir_all: returns 0 or a negative errno. */
int fs_tree_mkdir_all(char *path)
{
    if (mkdir(path, 0777) == 0) return 0;
    int e = errno;
    if (e != ENOENT) return fs_tree_is_dir(path) ? 0 : -e;
    char *slash = strrchr(path, '/');
    if (!slash || slash == path) return -e;
    *slash = '\0';
    int pe = fs_tree_mkdir_all(path);
    *slash = '/';
    if (pe) return pe;
    if (mkdir(path, 0777) == 0) return 0;
    e = errno;
    return fs_tree_is_dir(path) ? 0 : -e;
}

/* mkdir -p without following symlinks: every existing component must be a real
 * directory (a symlink or file gives ENOTDIR; an existing non-directory leaf
 * gives EEXIST). Returns 0 or a negative errno. */
int fs_tree_mkdir_all_nofollow(const char *path)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    const char *p = path + 1;
    int err = 0;
    while (*p) {
        const char *e = strchr(p, '/');
        if (!e) e = p + strlen(p);
        size_t n = (size_t)(e - p);
        if (n > 0) {
            char comp[NAME_MAX + 1];
            if (n > NAME_MAX) {
                err = -ENAMETOOLONG;
                break;
            }
            memcpy(comp, p, n);
            comp[n] = '\0';
            bool created = mkdirat(fd, comp, 0777) == 0;
            if (!created && errno != EEXIST) {
                err = -errno;
                break;
            }
            int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (nfd < 0) {
                err = (*e == '\0' && errno == ENOTDIR) ? -EEXIST : -errno;
                break;
            }
            close(fd);
            fd = nfd;
        }
        p = *e ? e + 1 : e;
    }
    close(fd);
    return err;
}

/* Removes the directory `name` under dirfd and everything below it, never following
 * symlinks. Returns 0 or a negative errno. */
int fs_tree_remove_at(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int e = -errno;
        close(fd);
        return e;
    }
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            if (errno) err = -errno;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        struct stat st;
        if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) continue;
            err = -errno;
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            err = fs_tree_remove_at(fd, de->d_name);
            if (err) break;
        } else if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT) {
            err = -errno;
            break;
        }
    }
    closedir(dir);
    if (err) return err;
    if (unlinkat(parent, name, AT_REMOVEDIR) < 0) return -errno;
    return 0;
}

int fs_tree_copy_file(const char *src, const char *dst)
{
    /* Not blocking: the callers saw a regular file, but one swapped for a FIFO since
     * (a sandboxed command can, in its writable root) would hold this pool thread, or
     * the sandbox helper serving the copy, until a writer came; likewise a FIFO left
     * where the copy goes (ENXIO, no reader). */
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0) return -errno;
    struct stat st;
    int bad = fstat(in, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
    if (bad) {
        close(in);
        return bad;
    }
    /* Copying a file onto itself (or a hard link of itself) would truncate the
     * source before reading it: leave it as it is. */
    struct stat dst_st;
    if (stat(dst, &dst_st) == 0 && dst_st.st_dev == st.st_dev && dst_st.st_ino == st.st_ino) {
        close(in);
        return 0;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, st.st_mode & 07777);
    if (out < 0) {
        int e = -errno;
        close(in);
        return e;
    }
    int err = 0;
    char *b = xmalloc(1 << 20);
    for (;;) {
        ssize_t r = read(in, b, 1 << 20);
        if (r < 0) {
            if (errno == EINTR) continue;
            err = -errno;
            break;
        }
        if (r == 0) break;
        ssize_t done = 0;
        while (done < r) {
            ssize_t w = write(out, b + done, (size_t)(r - done));
            if (w < 0) {
                if (errno == EINTR) continue;
                err = -errno;
                break;
            }
            done += w;
        }
        if (err) break;
    }
    free(b);
    if (!err && fchmod(out, st.st_mode & 07777) < 0) err = -errno;
    if (close(out) < 0 && !err) err = -errno;
    close(in);
    return err;
}

int fs_tree_copy_link(const char *src, const char *dst)
{
    char target[PATH_MAX + 1];
    ssize_t n = readlink(src, target, PATH_MAX);
    if (n < 0) return -errno;
    target[n] = '\0';
    if (symlink(target, dst) < 0) return -errno;
    return 0;
}

int fs_tree_copy(const char *src, const char *dst)
{
    int e = 0;
    if (mkdir(dst, 0777) < 0 && errno != EEXIST) return -errno;
    if (!fs_tree_is_dir(dst)) return -EEXIST;
    DIR *dir = opendir(src);
    if (!dir) return -errno;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            if (errno) e = -errno;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *s = fs_path_join(src, de->d_name), *d = fs_path_join(dst, de->d_name);
        struct stat st;
        if (lstat(s, &st) < 0)
            e = -errno;
        else if (S_ISDIR(st.st_mode))
            e = fs_tree_copy(s, d);
        else if (S_ISREG(st.st_mode))
            e = fs_tree_copy_file(s, d);
        else if (S_ISLNK(st.st_mode))
            e = fs_tree_copy_link(s, d);
        free(s);
        free(d);
        if (e) break;
    }
    closedir(dir);
    return e;
}

/* realpath of the longest existing prefix of p, plus the remaining components. */
char *fs_tree_resolve_existing_prefix(const char *p)
{
    char *cur = xstrdup(p);
    fs_path_strip_slashes(cur);
    struct buf rest;
    buf_init(&rest);
    char *res = NULL;
    for (;;) {
        char *r = realpath(cur, NULL);
        if (r) {
            struct buf b;
            buf_init(&b);
            buf_puts(&b, r);
            if (rest.len) {
                if (b.len == 0 || b.data[b.len - 1] != '/') buf_putc(&b, '/');
                buf_append(&b, rest.data, rest.len);
            }
            buf_putc(&b, '\0');
            res = buf_steal(&b);
            free(r);
            break;
        }
        char *slash = strrchr(cur, '/');
        if (!slash) break;
        struct buf nr;
        buf_init(&nr);
        buf_puts(&nr, slash + 1);
        if (rest.len) {
            buf_putc(&nr, '/');
            buf_append(&nr, rest.data, rest.len);
        }
        buf_free(&rest);
        rest = nr;
        if (slash == cur)
            cur[1] = '\0';
        else
            *slash = '\0';
    }
    buf_free(&rest);
    free(cur);
    return res;
}
