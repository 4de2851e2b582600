/* fdclose: closing every descriptor from a number up (see fdclose.h). */
#include "util/fdclose.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436 /* the same number on every architecture */
#endif

/* The layout getdents64(2) fills in (glibc declares struct dirent64 only for
 * readdir, which allocates). */
struct fdclose_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* A decimal descriptor number, or -1 ("." and ".."). */
static int parse_fd(const char *s)
{
    if (!*s) return -1;
    long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > INT32_MAX / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    return v <= INT32_MAX ? (int)v : -1;
}

int fdclose_from_procfs(int lowfd)
{
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -errno;
    /* Closing entries between reads is safe: the kernel walks the table by number,
     * and the position is the next number to look at. */
    _Alignas(8) char buf[2048];
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            const struct fdclose_dirent *d = (const struct fdclose_dirent *)(buf + off);
            int fd = parse_fd(d->name);
            if (fd >= lowfd && fd != dir) close(fd);
            off += d->reclen;
        }
    }
    int err = n < 0 ? errno : 0;
    close(dir);
    return -err;
}

void fdclose_from_limit(int lowfd)
{
    struct rlimit rl;
    long top = 1L << 20;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)top) top = (long)rl.rlim_cur;
    for (long fd = lowfd; fd < top; fd++)
        close((int)fd);
}

void fdclose_from(int lowfd)
{
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0) return;
    /* ENOSYS before 5.9, EPERM under a seccomp filter that predates it: the same
     * result the slow way. A /proc read that fails part-way leaves the rest to the
     * loop. */
    if (fdclose_from_procfs(lowfd) == 0) return;
    fdclose_from_limit(lowfd);
}
