/*
 * escape_probe_procs: the attempts on other processes and on /proc: following
 * /proc/PID links out of the sandbox, reading another process's memory, seeing its pid,
 * joining its namespaces, tracing it, signalling it, taking its descriptors, and
 * changing its limits or priority.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kcmp.h>

#include "escape_probe.h"

static void at_readlink(const char *name, const char *arg)
{
    char target[PATH_MAX];
    if (!need_arg(name, arg)) return;
    ssize_t n = readlink(arg, target, sizeof target - 1);
    if (n < 0) {
        emit(name, errno, "readlink %s", arg);
        return;
    }
    target[n] = 0;
    /* Listing through the link shows whether it leads anywhere. */
    int entries = -1;
    DIR *d = opendir(arg);
    if (d) {
        entries = 0;
        while (readdir(d))
            entries++;
        closedir(d);
    }
    emit(name, 0, "%s -> %s entries=%d", arg, target, entries);
}

/* First readable address in PID's mappings (0 when they cannot be read). */
static unsigned long first_mapping(pid_t pid)
{
    char p[64], line[512];
    unsigned long lo = 0, hi;
    char perms[8];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r') break;
    fclose(f);
    return lo;
}

static void at_mem(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/mem", (int)pid);
    int fd = open(p, O_RDONLY);
    if (fd < 0) {
        emit(name, errno, "open %s", p);
        return;
    }
    unsigned long addr = first_mapping(pid);
    char buf[16];
    ssize_t r = pread(fd, buf, sizeof buf, (off_t)addr);
    emit(name, 0, "open %s ok; read at %#lx: %s", p, addr, r < 0 ? probe_errname(errno) : "ok");
    close(fd);
}

/* Which of the given pids this process can see in /proc (listing or by name). */
static void at_listproc(const char *name, const char *arg)
{
    DIR *d = opendir("/proc");
    if (!d) {
        emit(name, errno, "opendir /proc");
        return;
    }
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') count++;
    closedir(d);
    char seen[512] = "";
    char list[512];
    snprintf(list, sizeof list, "%s", arg ? arg : "");
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char p[64];
        struct stat st;
        snprintf(p, sizeof p, "/proc/%s", t);
        if (stat(p, &st) == 0) {
            size_t l = strlen(seen);
            snprintf(seen + l, sizeof seen - l, "%s%s", l ? "," : "", t);
        }
    }
    emit(name, *seen ? 0 : ENOENT, "count=%d seen=%s", count, seen);
}

static void at_setns(const char *name, const char *arg)
{
    static const char *const kinds[] = {"mnt", "pid", "net",    "user",
                                        "uts", "ipc", "cgroup", "time"};
    pid_t pid = arg_pid(arg);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char label[64], p[64];
        snprintf(label, sizeof label, "%s:%s", name, kinds[i]);
        snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)pid, kinds[i]);
        pid_t c = fork();
        if (c == 0) {
            int fd = open(p, O_RDONLY);
            if (fd < 0) {
                emit(label, errno, "open %s", p);
                _exit(0);
            }
            emit(label, rc_err(setns(fd, 0)), "setns %s", p);
            _exit(0);
        }
        if (c > 0) waitpid(c, NULL, 0);
    }
}

static void at_ptrace_attach(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) < 0) {
        emit(name, errno, "PTRACE_ATTACH %d", (int)pid);
        return;
    }
    waitpid(pid, NULL, __WALL);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
    emit(name, 0, "attached to %d (detached again)", (int)pid);
}

static void at_ptrace_traceme(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(ptrace(PTRACE_TRACEME, 0, NULL, NULL)), "PTRACE_TRACEME");
}

static void at_process_vm_readv(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    char mine[16] = "probe", buf[16];
    unsigned long addr = pid == getpid() ? (unsigned long)mine : first_mapping(pid);
    if (!addr) addr = (unsigned long)mine; /* maps unreadable: any address shows permission */
    struct iovec l = {buf, sizeof buf}, r = {(void *)addr, sizeof buf};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    emit(name, rc_err(n), "pid %d addr %#lx", (int)pid, addr);
}

static void at_process_vm_writev(const char *name, const char *arg)
{
    /* Only into this process itself: shows whether the filter lets the call through. */
    char mine[16] = "probe", src[16] = "probe";
    struct iovec l = {src, sizeof src}, r = {mine, sizeof mine};
    (void)arg;
    emit(name, rc_err(process_vm_writev(getpid(), &l, 1, &r, 1, 0)), "into self");
}

static void at_kill(const char *name, const char *arg, int sig)
{
    pid_t pid = arg_pid(arg);
    emit(name, rc_err(kill(pid, sig)), "kill(%d, %d)", (int)pid, sig);
}

static void at_kill0(const char *name, const char *arg)
{
    at_kill(name, arg, 0);
}

static void at_killterm(const char *name, const char *arg)
{
    at_kill(name, arg, SIGTERM);
}

static void at_pidfd_getfd(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0) {
        emit(name, errno, "pidfd_open %d", (int)pid);
        return;
    }
    int err = EBADF;
    for (int fd = 0; fd < 64; fd++) {
        int got = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
        if (got >= 0) {
            char p[64], t[PATH_MAX] = "";
            snprintf(p, sizeof p, "/proc/self/fd/%d", got);
            ssize_t n = readlink(p, t, sizeof t - 1);
            t[n > 0 ? n : 0] = 0;
            emit(name, 0, "took fd %d of %d: %s", fd, (int)pid, t);
            close(got);
            close(pfd);
            return;
        }
        if (errno != EBADF) {
            err = errno;
            break;
        }
    }
    emit(name, err, "pidfd_getfd on %d", (int)pid);
    close(pfd);
}

static void at_kcmp(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    emit(name, rc_err(syscall(SYS_kcmp, getpid(), pid, KCMP_VM, 0, 0)), "kcmp(self, %d)", (int)pid);
}

static void at_prlimit(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    struct rlimit old;
    if (prlimit(pid, RLIMIT_CORE, NULL, &old) < 0) {
        emit(name, errno, "prlimit get %d", (int)pid);
        return;
    }
    emit(name, rc_err(prlimit(pid, RLIMIT_CORE, &old, NULL)), "prlimit set %d (same value)",
         (int)pid);
}

static void at_setpriority(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)pid);
    if (prio == -1 && errno) {
        emit(name, errno, "getpriority %d", (int)pid);
        return;
    }
    emit(name, rc_err(setpriority(PRIO_PROCESS, (id_t)pid, prio)), "setpriority %d (same value)",
         (int)pid);
}

const struct probe_attempt probe_procs[] = {
    {"readlink", at_readlink, "PATH  readlink and list through it (/proc/PID/root)", 0},
    {"mem", at_mem, "PID  open and read /proc/PID/mem", 0},
    {"listproc", at_listproc, "PID,PID...  count /proc entries, which PIDs are visible", 0},
    {"setns", at_setns, "PID  setns into each /proc/PID/ns/*", 0},
    {"ptrace_attach", at_ptrace_attach, "PID", 0},
    {"ptrace_traceme", at_ptrace_traceme, "", 0},
    {"process_vm_readv", at_process_vm_readv, "PID|self", 0},
    {"process_vm_writev", at_process_vm_writev, "(into self)", 0},
    {"kill0", at_kill0, "PID  kill(PID, 0)", 0},
    {"killterm", at_killterm, "PID  kill(PID, SIGTERM)", 0},
    {"pidfd_getfd", at_pidfd_getfd, "PID  steal the first open fd of PID", 0},
    {"kcmp", at_kcmp, "PID", 0},
    {"prlimit", at_prlimit, "PID  set RLIMIT_CORE of PID to its value", 0},
    {"setpriority", at_setpriority, "PID  set the nice value of PID to its value", 0},
    {NULL, NULL, NULL, 0},
};
