/* notify: a sandbox's seccomp user notifications, answered by its init (see
 * notify.h). */
#include "sandbox/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/procfs.h"

#define SB_PIDFD_THREAD O_EXCL /* linux/pidfd.h, Linux 6.9 */
#ifndef SECCOMP_IOCTL_NOTIF_ADDFD
#define SECCOMP_IOCTL_NOTIF_ADDFD SECCOMP_IOW(3, struct seccomp_notif_addfd)
struct seccomp_notif_addfd {
    uint64_t id;
    uint32_t flags, srcfd, newfd, newfd_flags;
};
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif

int notify_open(struct notify *nf, int fd)
{
    memset(nf, 0, sizeof *nf);
    nf->fd = -1;
    struct seccomp_notif_sizes sz;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0) return -errno;
    /* The kernel's structs may be larger than our headers' (newer fields). */
    nf->req_size = sz.seccomp_notif > sizeof(struct seccomp_notif) ? sz.seccomp_notif
                                                                   : sizeof(struct seccomp_notif);
    nf->resp_size = sz.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
                        ? sz.seccomp_notif_resp
                        : sizeof(struct seccomp_notif_resp);
    nf->req = calloc(1, nf->req_size);
    nf->resp = calloc(1, nf->resp_size);
    if (!nf->req || !nf->resp) return -ENOMEM;
    nf->fd = fd;
    return 0;
}

bool notify_valid(const struct notify *nf, uint64_t id)
{
    return ioctl(nf->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

void notify_answer(struct notify *nf, uint64_t id, int error, int64_t val)
{
    struct seccomp_notif_resp *r = nf->resp;
    memset(r, 0, nf->resp_size);
    r->id = id;
    r->error = error;
    r->val = error ? 0 : val;
    /* A target gone meanwhile (ENOENT) needs no answer. */
    while (ioctl(nf->fd, SECCOMP_IOCTL_NOTIF_SEND, r) < 0 && errno == EINTR) {
    }
}

int notify_answer_fd(struct notify *nf, uint64_t id, int fd, bool cloexec)
{
    struct seccomp_notif_addfd a = {.id = id,
                                    .flags = SECCOMP_ADDFD_FLAG_SEND,
                                    .srcfd = (uint32_t)fd,
                                    .newfd_flags = cloexec ? O_CLOEXEC : 0};
    for (;;) {
        int n = ioctl(nf->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
        if (n >= 0 && (a.flags & SECCOMP_ADDFD_FLAG_SEND)) return 0;
        if (n >= 0) { /* added without answering (before Linux 5.14): its number is it */
            notify_answer(nf, id, 0, n);
            return 0;
        }
        if (errno == EINTR) continue;
        if (errno == EINVAL && (a.flags & SECCOMP_ADDFD_FLAG_SEND)) {
            a.flags = 0;
            continue;
        }
        /* A target gone meanwhile needs no answer; any other failure (a full table,
         * EMFILE) is the command's call failing. */
        return errno == ENOENT ? 0 : -errno;
    }
}

/* A pidfd of the calling thread's process, for pidfd_getfd. Since Linux 6.9 the
 * thread's own (PIDFD_THREAD); before, only a thread group leader has one (a
 * thread's id gets EINVAL or ENOENT), so a thread's is its leader's, used only when
 * both share one descriptor table. */
static int caller_pidfd(pid_t tid)
{
    int fd = (int)syscall(SYS_pidfd_open, tid, SB_PIDFD_THREAD);
    if (fd >= 0 || errno != EINVAL) return fd;
    /* Most callers lead their thread group: theirs needs no lookup. The /proc below is
     * numbered by the PID namespace it was made for, which is not the sandbox's where
     * the view binds the host's (under a container's masked /proc): there a thread's
     * lookup finds another process, and the kcmp below refuses it (ESRCH). */
    fd = (int)syscall(SYS_pidfd_open, tid, 0);
    if (fd >= 0) return fd;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    pid_t tgid = (pid_t)procfs_field(path, "Tgid", 10); /* -1: none */
    if (tgid <= 0 || (tgid != tid && syscall(SYS_kcmp, tgid, tid, KCMP_FILES, 0, 0) != 0)) {
        errno = ESRCH;
        return -1;
    }
    return (int)syscall(SYS_pidfd_open, tgid, 0);
}

int notify_recv(struct notify *nf, struct notify_call *c)
{
    memset(nf->req, 0, nf->req_size);
    memset(c, 0, sizeof *c);
    c->pidfd = -1;
    if (ioctl(nf->fd, SECCOMP_IOCTL_NOTIF_RECV, nf->req) < 0)
        return errno == ENOENT || errno == EINTR ? 0 : -errno; /* gone meanwhile */
    c->n = nf->req;
    c->tid = (pid_t)nf->req->pid;
    c->pidfd = caller_pidfd(c->tid);
    /* The pid may have been reused before pidfd_open: the id says whether it is
     * still the caller. */
    if (c->pidfd < 0 || !notify_valid(nf, nf->req->id)) {
        notify_answer(nf, nf->req->id, -ESRCH, 0);
        notify_call_done(c);
        return 0;
    }
    return 1;
}

void notify_call_done(struct notify_call *c)
{
    if (c->pidfd >= 0) close(c->pidfd);
    c->pidfd = -1;
}

int notify_read(const struct notify_call *c, uint64_t addr, void *out, size_t len)
{
    if (!len) return 0;
    struct iovec local = {out, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    return process_vm_readv(c->tid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

ssize_t notify_read_string(const struct notify_call *c, uint64_t addr, char *out, size_t cap)
{
    size_t got = 0;
    while (got < cap) {
        /* up to the end of the page: the next one may not be mapped */
        size_t room = 4096 - (size_t)((addr + got) & 4095);
        if (room > cap - got) room = cap - got;
        struct iovec local = {out + got, room};
        struct iovec remote = {(void *)(uintptr_t)(addr + got), room};
        ssize_t n = process_vm_readv(c->tid, &local, 1, &remote, 1, 0);
        if (n <= 0) return -EFAULT;
        char *nul = memchr(out + got, 0, (size_t)n);
        if (nul) return nul - out;
        got += (size_t)n;
    }
    return -ENAMETOOLONG;
}

int notify_getfd(const struct notify_call *c, int n)
{
    int fd = (int)syscall(SYS_pidfd_getfd, c->pidfd, n, 0);
    return fd < 0 ? -errno : fd;
}

void notify_effective_caps(bool on)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0) return;
    for (int i = 0; i < 2; i++)
        d[i].effective = on ? d[i].permitted : 0;
    (void)syscall(SYS_capset, &h, d);
}
