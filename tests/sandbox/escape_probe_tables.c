/*
 * escape_probe_tables: the whole-table tools, which look at every system call
 * rather than one: the sweep makes each call number with every argument -1 in a child of
 * its own (a filter's EPERM against the kernel's own EFAULT, EBADF or EINVAL), and the
 * dump prints, from the host side, the seccomp filters attached to a process.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>

#include "escape_probe.h"

/* Each system call number in [lo, hi] with every argument -1 (bad pointer, bad fd,
 * bad flags), in a child of its own: a filter's EPERM against the kernel's own EFAULT,
 * EBADF or EINVAL. Calls that cannot be made safely this way are skipped. */
static void sweep_one(const char *name, long nr);

static void at_sweep(const char *name, const char *arg)
{
    long lo = 0, hi = 460;
    if (arg && strchr(arg, ',')) {
        char list[1024];
        snprintf(list, sizeof list, "%s", arg);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
            sweep_one(name, strtol(t, NULL, 10));
        return;
    }
    if (arg && *arg) sscanf(arg, "%ld-%ld", &lo, &hi);
    for (long nr = lo; nr <= hi; nr++)
        sweep_one(name, nr);
}

static void sweep_one(const char *name, long nr)
{
    char label[64];
    snprintf(label, sizeof label, "%s:%ld", name, nr);
    switch (nr) {
    case SYS_fork:
    case SYS_vfork:
    case SYS_clone:
    case SYS_clone3:
    case SYS_exit:
    case SYS_exit_group:
    case SYS_rt_sigreturn:
    case SYS_pause:
    case SYS_vhangup:
    case SYS_sync:
    case SYS_restart_syscall:
    case SYS_sched_yield:
    case SYS_munlockall: emit_res(label, "SKIP", "not swept"); return;
    default: break;
    }
    int pfd[2];
    if (pipe(pfd) < 0) {
        emit(label, errno, "pipe");
        return;
    }
    pid_t c = fork();
    if (c == 0) {
        close(pfd[0]);
        alarm(2);
        long r = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
        int e = r < 0 ? errno : 0;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(0);
    }
    close(pfd[1]);
    int e = -1, st = 0;
    ssize_t got = c > 0 ? read(pfd[0], &e, sizeof e) : -1;
    close(pfd[0]);
    if (c > 0) waitpid(c, &st, 0);
    if (got == (ssize_t)sizeof e)
        emit(label, e, "all args -1");
    else if (WIFSIGNALED(st))
        emit_res(label, WTERMSIG(st) == SIGALRM ? "TIMEOUT" : "SIGNAL", "signal %d", WTERMSIG(st));
    else
        emit_res(label, "EXITED", "status %d", WEXITSTATUS(st));
}

/* Host side (needs CAP_SYS_ADMIN): print every seccomp filter attached to PID, as
 * hex-encoded struct sock_filter arrays, innermost (most recently installed) first. */
static void at_seccomp_dump(const char *name, const char *arg)
{
    pid_t pid = arg_pid(arg);
    if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0) {
        emit(name, errno, "PTRACE_SEIZE %d", (int)pid);
        return;
    }
    ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
    waitpid(pid, NULL, __WALL);
    for (long i = 0;; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s:%ld", name, i);
        long n = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)i, NULL);
        if (n < 0) {
            if (errno != ENOENT || i == 0) emit(label, errno, "PTRACE_SECCOMP_GET_FILTER");
            break;
        }
        struct sock_filter *f = calloc((size_t)n, sizeof *f);
        if (!f || ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)i, f) != n) {
            emit(label, errno, "PTRACE_SECCOMP_GET_FILTER");
            free(f);
            break;
        }
        char *hex = malloc((size_t)n * 16 + 1);
        if (!hex) {
            free(f);
            break;
        }
        for (long k = 0; k < n; k++)
            snprintf(hex + k * 16, 17, "%04x%02x%02x%08x", f[k].code, f[k].jt, f[k].jf, f[k].k);
        /* Too long for one line of emit(): print it directly. */
        printf("@probe\t%s\tok\t%s\n", label, hex);
        fflush(stdout);
        free(hex);
        free(f);
    }
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
}

const struct probe_attempt probe_tables[] = {
    {"sweep", at_sweep, "[LO-HI|NR,NR,...]  system calls with every argument -1", 1},
    {"seccomp_dump", at_seccomp_dump, "PID  (host side) the seccomp filters of PID", 1},
    {NULL, NULL, NULL, 0},
};
