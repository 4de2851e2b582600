/* sig_guard: the signals of a sandbox without namespaces, decided by its init (see
 * sig_guard.h). */
#include "sandbox/sig_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/notify.h"
#include "util/procfs.h"

bool sig_guard_handles(long nr)
{
    return nr == __NR_kill || nr == __NR_tkill || nr == __NR_tgkill || nr == __NR_rt_sigqueueinfo ||
           nr == __NR_rt_tgsigqueueinfo || nr == __NR_pidfd_send_signal;
}

/* A field of /proc/<pid>/stat after the command name: its n-th (ppid is 1, pgrp 2). */
static long stat_field(pid_t pid, int n)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (len <= 0) return -1;
    buf[len] = 0;
    char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    if (!p) return -1;
    p += 2; /* the state */
    for (int i = 0; i < n && p; i++)
        p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
    return p ? strtol(p, NULL, 10) : -1;
}

/* Whether pid is the init or one of its descendants. */
static bool in_sandbox(pid_t pid)
{
    pid_t init = getpid();
    for (int depth = 0; pid > 1 && depth < 4096; depth++) {
        if (pid == init) return true;
        pid = (pid_t)stat_field(pid, 1);
    }
    return pid == init;
}

/* Every process of the sandbox but the init, signalled (kill(-1) in a PID namespace). */
static int signal_all(int sig)
{
    DIR *d = opendir("/proc");
    if (!d) return -errno;
    int sent = 0;
    for (struct dirent *e; (e = readdir(d));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == getpid() || !in_sandbox(pid)) continue;
        if (kill(pid, sig) == 0) sent++;
    }
    closedir(d);
    return sent ? 0 : -ESRCH;
}

/* Whether process group pgrp has a member in the sandbox (its members then all are:
 * a group lies within one session, and the sandbox's sessions are its own). */
static bool group_in_sandbox(pid_t pgrp)
{
    if (in_sandbox(pgrp)) return true;
    DIR *d = opendir("/proc");
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        found = pid > 0 && stat_field(pid, 2) == pgrp && in_sandbox(pid);
    }
    if (d) closedir(d);
    return found;
}

/* The process a pidfd (or a /proc/<pid> directory descriptor) of ours stands for. */
static pid_t pid_of(int fd)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    long pid = procfs_field(path, "Pid", 10); /* a pidfd's */
    if (pid != -1) return (pid_t)pid;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = 0;
    return !strncmp(buf, "/proc/", 6) ? (pid_t)atoi(buf + 6) : -1;
}

#define ARG(i) (c->n->data.args[i])

static int serve(const struct notify_call *c)
{
    long nr = c->n->data.nr;
    int sig = (int)ARG(nr == __NR_tgkill || nr == __NR_rt_tgsigqueueinfo ? 2 : 1);
    pid_t target = (pid_t)ARG(0);
    if (nr == __NR_kill) {
        pid_t caller_pgrp = (pid_t)stat_field(c->tid, 2);
        if (target == -1) return signal_all(sig);
        if (target == 0) target = -caller_pgrp;
        if (target < 0 ? !group_in_sandbox(-target) : !in_sandbox(target)) return -EPERM;
        return kill(target, sig) < 0 ? -errno : 0;
    }
    if (nr == __NR_pidfd_send_signal) {
        int fd = notify_getfd(c, (int)ARG(0));
        if (fd < 0) return fd;
        pid_t pid = pid_of(fd);
        int rc = pid > 0 && in_sandbox(pid) ? 0 : -EPERM;
        siginfo_t si;
        if (!rc && ARG(2)) rc = notify_read(c, ARG(2), &si, sizeof si);
        if (!rc && syscall(SYS_pidfd_send_signal, fd, (int)ARG(1), ARG(2) ? &si : NULL,
                           (unsigned)ARG(3)) < 0)
            rc = -errno;
        close(fd);
        return rc;
    }
    /* tkill(tid), tgkill(tgid, tid), rt_sigqueueinfo(tgid), rt_tgsigqueueinfo(tgid, tid):
     * the thread group decides */
    if (target <= 0 || !in_sandbox(target)) return -EPERM;
    siginfo_t si;
    if (nr == __NR_rt_sigqueueinfo || nr == __NR_rt_tgsigqueueinfo) {
        int rc = notify_read(c, ARG(nr == __NR_rt_sigqueueinfo ? 2 : 3), &si, sizeof si);
        if (rc < 0) return rc;
    }
    long r = nr == __NR_tkill    ? syscall(SYS_tkill, target, sig)
             : nr == __NR_tgkill ? syscall(SYS_tgkill, target, (pid_t)ARG(1), sig)
             : nr == __NR_rt_sigqueueinfo
                 ? syscall(SYS_rt_sigqueueinfo, target, sig, &si)
                 : syscall(SYS_rt_tgsigqueueinfo, target, (pid_t)ARG(1), sig, &si);
    return r < 0 ? -errno : 0;
}

void sig_guard_serve(struct notify *nf, const struct notify_call *c)
{
    notify_effective_caps(false);
    int rc = serve(c);
    notify_effective_caps(true);
    notify_answer(nf, c->n->id, rc, 0);
}
