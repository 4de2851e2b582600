/*
 * escape_probe: the attacker's side of tests/blackbox/test_sandbox_escape.py.
 *
 * A sandboxed command runs this with a list of named attacks; each is one system call
 * (or a short sequence) that a shell cannot make, tried the way an agent bent on leaving
 * the sandbox would try it. Every attempt runs in a forked child (so setns, unshare,
 * setuid and the like do not leak into the next one, and a hang or crash is reported
 * instead of ending the run) and prints one tab-separated line per result:
 *
 *     @probe <name> <result> <detail>
 *
 * where <result> is "ok" when the operation succeeded (the attack worked, or got as far
 * as the kernel's own argument checks) and the errno name (EPERM, ENOENT, ...) when it
 * failed; "SIG<n>" and "TIMEOUT" report a child that died or hung. The probe decides
 * nothing: the test reads the lines and asserts which denial it expects.
 *
 * Attempts are written so that, run unsandboxed by root, they change nothing on the host
 * (arguments the kernel rejects after its permission check, or values set to what they
 * already are), except where the argument names what to change (sethostname=NAME,
 * write=PATH): the test picks those and restores them.
 *
 * Usage: escape_probe ATTEMPT[=ARG] ...   (escape_probe help lists the attempts)
 * Not part of the server: a test tool, built by CMake into the build directory.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/io.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/quota.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/kexec.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/vt.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef TIOCL_GETSHIFTSTATE
#define TIOCL_GETSHIFTSTATE 6
#endif

/* ---- output ----------------------------------------------------------------------- */

static const char *probe_errname(int err)
{
    static char buf[32];
    const char *n = err ? strerrorname_np(err) : "ok";
    if (n) return n;
    snprintf(buf, sizeof buf, "E%d", err);
    return buf;
}

/* One result line, written with a single write(2) so lines of concurrent children never
 * interleave. Tabs and newlines in the detail become spaces. */
static void emit_res(const char *name, const char *result, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emit_res(const char *name, const char *result, const char *fmt, ...)
{
    char detail[3072] = "";
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    for (char *p = detail; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
    int n = snprintf(line, sizeof line, "@probe\t%s\t%s\t%s\n", name, result, detail);
    if (n > (int)sizeof line - 1) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w = write(1, line, (size_t)n);
    (void)w;
}

#define emit(name, err, ...) emit_res((name), probe_errname(err), __VA_ARGS__)

/* errno of a call's result: 0 when it succeeded (r >= 0). */
static int rc_err(long r)
{
    return r < 0 ? errno : 0;
}

/* ---- argument helpers ------------------------------------------------------------- */

/* Split "A:B" at the first ':' into two strings (B may be empty). */
static void split2(const char *arg, char *a, size_t an, char *b, size_t bn)
{
    const char *c = arg ? strchr(arg, ':') : NULL;
    size_t la = c ? (size_t)(c - arg) : (arg ? strlen(arg) : 0);
    if (la >= an) la = an - 1;
    if (arg) memcpy(a, arg, la);
    a[la] = 0;
    snprintf(b, bn, "%s", c ? c + 1 : "");
}

/* "\n", "\r", "\t" and "\\" escapes, so a shell-free argv can carry a newline. */
static size_t unescape(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (; *in && o + 1 < n; in++) {
        if (*in == '\\' && in[1]) {
            in++;
            out[o++] = *in == 'n' ? '\n' : *in == 'r' ? '\r' : *in == 't' ? '\t' : *in;
        } else {
            out[o++] = *in;
        }
    }
    out[o] = 0;
    return o;
}

static pid_t arg_pid(const char *arg)
{
    if (!arg || !*arg || strcmp(arg, "self") == 0) return getpid();
    return (pid_t)strtol(arg, NULL, 10);
}

static int need_arg(const char *name, const char *arg)
{
    if (arg && *arg) return 1;
    emit(name, EINVAL, "missing argument");
    return 0;
}

/* ---- ttys ------------------------------------------------------------------------- */

static void at_tiocsti(const char *name, const char *arg)
{
    char path[PATH_MAX], raw[1024], text[1024];
    if (!need_arg(name, arg)) return;
    split2(arg, path, sizeof path, raw, sizeof raw);
    size_t n = unescape(raw, text, sizeof text);
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ioctl(fd, TIOCSTI, &text[i]) < 0) {
            emit(name, errno, "ioctl TIOCSTI after %zu of %zu bytes", i, n);
            close(fd);
            return;
        }
    }
    emit(name, 0, "pushed %zu bytes into %s", n, path);
    close(fd);
}

static void at_ptywrite(const char *name, const char *arg)
{
    char path[PATH_MAX], raw[1024], text[1024];
    if (!need_arg(name, arg)) return;
    split2(arg, path, sizeof path, raw, sizeof raw);
    size_t n = unescape(raw, text, sizeof text);
    int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    ssize_t w = write(fd, text, n);
    emit(name, rc_err(w), "wrote %zd of %zu bytes to %s", w, n, path);
    close(fd);
}

/* Every /dev/pts/N visible here, and which of them open read-write. */
static void at_ptslist(const char *name, const char *arg)
{
    char entries[1024] = "", opened[1024] = "";
    int first_err = 0, numeric = 0, nopen = 0;
    DIR *d = opendir("/dev/pts");
    if (!d) {
        emit(name, errno, "opendir /dev/pts");
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t l = strlen(entries);
        snprintf(entries + l, sizeof entries - l, "%s%s", l ? "," : "", e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        numeric++;
        char p[300];
        snprintf(p, sizeof p, "/dev/pts/%s", e->d_name);
        int fd = open(p, O_RDWR | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
            if (!first_err) first_err = errno;
            continue;
        }
        close(fd);
        nopen++;
        l = strlen(opened);
        snprintf(opened + l, sizeof opened - l, "%s%s", l ? "," : "", e->d_name);
    }
    closedir(d);
    (void)arg;
    emit(name, nopen ? 0 : numeric ? first_err : ENOENT, "entries=%s opened=%s", entries, opened);
}

static void at_tioclinux(const char *name, const char *arg)
{
    const char *path = arg && *arg ? arg : "/dev/tty0";
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    char sub[2] = {TIOCL_GETSHIFTSTATE, 0};
    emit(name, rc_err(ioctl(fd, TIOCLINUX, sub)), "ioctl TIOCLINUX on %s", path);
    close(fd);
}

/* ---- files ------------------------------------------------------------------------ */

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

/* ---- /proc and other processes ---------------------------------------------------- */

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

/* ---- kernel facilities ------------------------------------------------------------ */

static void at_io_uring_setup(const char *name, const char *arg)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    (void)arg;
    long fd = syscall(SYS_io_uring_setup, 4, &p);
    emit(name, rc_err(fd), "entries=4");
    if (fd >= 0) close((int)fd);
}

static void at_io_uring_enter(const char *name, const char *arg)
{
    (void)arg; /* EBADF from the kernel, EPERM from a filter */
    emit(name, rc_err(syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)), "fd -1");
}

static void at_io_uring_register(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(syscall(SYS_io_uring_register, -1, 0, NULL, 0)), "fd -1");
}

static void at_bpf(const char *name, const char *arg)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = 1;
    (void)arg;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
    emit(name, rc_err(fd), "BPF_MAP_CREATE array");
    if (fd >= 0) close((int)fd);
}

static void at_perf_event_open(const char *name, const char *arg)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    (void)arg;
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    emit(name, rc_err(fd), "software task clock on self");
    if (fd >= 0) close((int)fd);
}

static void at_keyctl(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)),
         "KEYCTL_GET_KEYRING_ID session");
}

static void at_add_key(const char *name, const char *arg)
{
    (void)arg; /* the process keyring dies with the probe */
    emit(name,
         rc_err(syscall(SYS_add_key, "user", "escape-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING)),
         "user key in the process keyring");
}

static void at_request_key(const char *name, const char *arg)
{
    (void)arg; /* ENOKEY when allowed */
    emit(name, rc_err(syscall(SYS_request_key, "user", "escape-probe-missing", NULL, 0)),
         "missing user key");
}

static void at_init_module(const char *name, const char *arg)
{
    (void)arg; /* an empty image: EPERM without CAP_SYS_MODULE, else a format error */
    emit(name, rc_err(syscall(SYS_init_module, NULL, 0UL, "")), "empty image");
}

static void at_finit_module(const char *name, const char *arg)
{
    int fd = open("/dev/null", O_RDONLY);
    (void)arg;
    emit(name, rc_err(syscall(SYS_finit_module, fd, "", 0)), "fd of /dev/null");
    if (fd >= 0) close(fd);
}

static void at_delete_module(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(syscall(SYS_delete_module, "escape_probe_none", O_NONBLOCK)),
         "missing module");
}

static void at_kexec_load(const char *name, const char *arg)
{
    (void)arg; /* a foreign architecture: EPERM without CAP_SYS_BOOT, else EINVAL */
    emit(name, rc_err(syscall(SYS_kexec_load, 0UL, 0UL, NULL, (unsigned long)KEXEC_ARCH_386)),
         "i386 image, no segments");
}

static void at_kexec_file_load(const char *name, const char *arg)
{
    (void)arg; /* an unknown flag: EPERM first, else EINVAL */
    emit(name, rc_err(syscall(SYS_kexec_file_load, -1, -1, 0UL, "", 0x80000000UL)), "unknown flag");
}

static void at_mount(const char *name, const char *arg)
{
    if (!need_arg(name, arg)) return;
    if (mount("escape-probe", arg, "tmpfs", 0, "size=16k") < 0) {
        emit(name, errno, "tmpfs on %s", arg);
        return;
    }
    umount2(arg, MNT_DETACH);
    emit(name, 0, "tmpfs mounted on %s (unmounted again)", arg);
}

static void at_bindmount(const char *name, const char *arg)
{
    char a[PATH_MAX], b[PATH_MAX];
    if (!need_arg(name, arg)) return;
    split2(arg, a, sizeof a, b, sizeof b);
    emit(name, rc_err(mount(a, b, NULL, MS_BIND, NULL)), "bind %s on %s", a, b);
}

/* Make a read-only bind writable again: the way out of a read-only protected path. */
static void at_remount_rw(const char *name, const char *arg)
{
    if (need_arg(name, arg))
        emit(name, rc_err(mount(NULL, arg, NULL, MS_REMOUNT | MS_BIND, NULL)),
             "remount %s read-write", arg);
}

static void at_mount_setattr_rw(const char *name, const char *arg)
{
    struct mount_attr a;
    memset(&a, 0, sizeof a);
    a.attr_clr = MOUNT_ATTR_RDONLY;
    if (need_arg(name, arg))
        emit(name, rc_err(syscall(SYS_mount_setattr, AT_FDCWD, arg, 0, &a, sizeof a)),
             "clear MOUNT_ATTR_RDONLY on %s", arg);
}

static void at_umount(const char *name, const char *arg)
{
    if (need_arg(name, arg))
        emit(name, rc_err(umount2(arg, MNT_DETACH)), "umount2 %s MNT_DETACH", arg);
}

static void at_pivot_root(const char *name, const char *arg)
{
    (void)arg; /* missing paths: EPERM first when not allowed, else ENOENT */
    emit(name, rc_err(syscall(SYS_pivot_root, "/escape-probe-none", "/escape-probe-none")),
         "missing paths");
}

static void at_chroot(const char *name, const char *arg)
{
    const char *p = arg && *arg ? arg : "/";
    emit(name, rc_err(chroot(p)), "chroot %s", p);
}

static void at_fsopen(const char *name, const char *arg)
{
    (void)arg;
    long fd = syscall(SYS_fsopen, "tmpfs", 0);
    emit(name, rc_err(fd), "tmpfs");
    if (fd >= 0) close((int)fd);
}

static void at_fspick(const char *name, const char *arg)
{
    const char *p = arg && *arg ? arg : "/";
    long fd = syscall(SYS_fspick, AT_FDCWD, p, 0);
    emit(name, rc_err(fd), "%s", p);
    if (fd >= 0) close((int)fd);
}

static void at_open_tree(const char *name, const char *arg)
{
    const char *p = arg && *arg ? arg : "/";
    long fd = syscall(SYS_open_tree, AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    emit(name, rc_err(fd), "OPEN_TREE_CLONE %s", p);
    if (fd >= 0) close((int)fd);
}

static void at_move_mount(const char *name, const char *arg)
{
    (void)arg; /* a missing target: EPERM first when not allowed, else ENOENT */
    emit(name, rc_err(syscall(SYS_move_mount, AT_FDCWD, "/", AT_FDCWD, "/escape-probe-none", 0)),
         "/ onto a missing path");
}

static void at_swapon(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(swapon("/escape-probe-none", 0)), "missing file");
}

static void at_swapoff(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(swapoff("/escape-probe-none")), "missing file");
}

static void at_reboot(const char *name, const char *arg)
{
    (void)arg; /* bad magic: EPERM without CAP_SYS_BOOT, EINVAL after it */
    emit(name, rc_err(syscall(SYS_reboot, 0, 0, 0, NULL)), "bad magic");
}

static void at_sethostname(const char *name, const char *arg)
{
    char cur[256] = "";
    gethostname(cur, sizeof cur - 1);
    const char *v = arg && *arg ? arg : cur;
    emit(name, rc_err(sethostname(v, strlen(v))), "to %s (was %s)", v, cur);
}

static void at_setdomainname(const char *name, const char *arg)
{
    char cur[256] = "";
    if (getdomainname(cur, sizeof cur - 1) < 0) cur[0] = 0;
    const char *v = arg && *arg ? arg : cur;
    emit(name, rc_err(setdomainname(v, strlen(v))), "to %s (was %s)", v, cur);
}

static const struct {
    const char *name;
    int flag;
} ns_flags[] = {
    {"user", CLONE_NEWUSER},     {"mnt", CLONE_NEWNS},    {"net", CLONE_NEWNET},
    {"pid", CLONE_NEWPID},       {"uts", CLONE_NEWUTS},   {"ipc", CLONE_NEWIPC},
    {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
};

static void at_unshare(const char *name, const char *arg)
{
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        if (arg && *arg && strcmp(arg, ns_flags[i].name) != 0) continue;
        char label[64];
        snprintf(label, sizeof label, "%s:%s", name, ns_flags[i].name);
        pid_t c = fork();
        if (c == 0) {
            emit(label, rc_err(unshare(ns_flags[i].flag)), "unshare");
            _exit(0);
        }
        if (c > 0) waitpid(c, NULL, 0);
    }
}

static void at_clone(const char *name, const char *arg)
{
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        if (arg && *arg && strcmp(arg, ns_flags[i].name) != 0) continue;
        if (ns_flags[i].flag == CLONE_NEWTIME)
            continue; /* its bit is CSIGNAL's for clone(2); only clone3 and unshare take it */
        char label[64];
        snprintf(label, sizeof label, "%s:%s", name, ns_flags[i].name);
        long c =
            syscall(SYS_clone, (unsigned long)ns_flags[i].flag | SIGCHLD, NULL, NULL, NULL, 0UL);
        if (c == 0) _exit(0);
        if (c > 0) waitpid((pid_t)c, NULL, 0);
        emit(label, rc_err(c), "clone");
    }
}

/* ---- sockets ---------------------------------------------------------------------- */

static const struct {
    const char *name;
    int family, type, proto;
} families[] = {
    {"unix", AF_UNIX, SOCK_STREAM, 0},   {"inet", AF_INET, SOCK_STREAM, 0},
    {"inet6", AF_INET6, SOCK_STREAM, 0}, {"netlink", AF_NETLINK, SOCK_RAW, 0},
    {"packet", AF_PACKET, SOCK_RAW, 0},  {"vsock", AF_VSOCK, SOCK_STREAM, 0},
    {"alg", AF_ALG, SOCK_SEQPACKET, 0},  {"inet_raw", AF_INET, SOCK_RAW, 1 /* ICMP */},
};

static void at_socket(const char *name, const char *arg)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (arg && *arg && strcmp(arg, families[i].name) != 0) continue;
        char label[64];
        snprintf(label, sizeof label, "%s:%s", name, families[i].name);
        int fd = socket(families[i].family, families[i].type, families[i].proto);
        emit(label, rc_err(fd), "family %d", families[i].family);
        if (fd >= 0) close(fd);
    }
}

static void at_socketpair(const char *name, const char *arg)
{
    int sv[2];
    (void)arg;
    int r = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    emit(name, rc_err(r), "AF_UNIX stream");
    if (r == 0) close(sv[0]), close(sv[1]);
}

/* connect, send "ping", wait up to 3 s for a reply. */
static void connect_common(const char *name, int fd, const struct sockaddr *sa, socklen_t len,
                           const char *what)
{
    if (fd < 0) {
        emit(name, errno, "socket for %s", what);
        return;
    }
    if (connect(fd, sa, len) < 0) {
        emit(name, errno, "connect %s", what);
        close(fd);
        return;
    }
    char reply[128] = "";
    ssize_t s = send(fd, "ping\n", 5, MSG_NOSIGNAL);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r = s == 5 ? recv(fd, reply, sizeof reply - 1, 0) : -1;
    reply[r > 0 ? r : 0] = 0;
    emit(name, 0, "connected to %s; reply=%s", what, r > 0 ? reply : "(none)");
    close(fd);
}

static void at_connect_unix(const char *name, const char *arg, int abstract)
{
    struct sockaddr_un sa;
    if (!need_arg(name, arg)) return;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(arg);
    if (n > sizeof sa.sun_path - 2) n = sizeof sa.sun_path - 2;
    memcpy(sa.sun_path + (abstract ? 1 : 0), arg, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
    connect_common(name, socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&sa, len, arg);
}

static void at_connect_path(const char *name, const char *arg)
{
    at_connect_unix(name, arg, 0);
}

static void at_connect_abstract(const char *name, const char *arg)
{
    at_connect_unix(name, arg, 1);
}

static void at_connect_tcp(const char *name, const char *arg)
{
    char host[128], port[16];
    if (!need_arg(name, arg)) return;
    split2(arg, host, sizeof host, port, sizeof port);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        emit(name, EINVAL, "bad address %s", host);
        return;
    }
    connect_common(name, socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&sa, sizeof sa, arg);
}

static int inet4_arg(const char *name, const char *arg, struct sockaddr_in *sa)
{
    char host[128], port[16];
    if (!need_arg(name, arg)) return 0;
    split2(arg, host, sizeof host, port, sizeof port);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        emit(name, EINVAL, "bad address %s", host);
        return 0;
    }
    return 1;
}

/* What a WebSocket server answers an upgrade on fd: its status line, to show who
 * was reached. */
static void upgrade_status(int fd, char *line, size_t n)
{
    static const char req[] =
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n";
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r = send(fd, req, sizeof req - 1, MSG_NOSIGNAL) > 0 ? recv(fd, line, n - 1, 0) : -1;
    line[r > 0 ? r : 0] = 0;
    line[strcspn(line, "\r\n")] = 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A connect guard that looks at the socket behind a descriptor number and then lets
 * the kernel carry on with the call uses that number twice: between the look and the
 * use, another task sharing the descriptor table (clone CLONE_FILES) puts an IP
 * socket where a Unix one was looked at. ok: the IP socket got connected to IPV4:PORT
 * (the detail shows what answered a WebSocket upgrade there). */
static void at_connect_swap(const char *name, const char *arg)
{
    struct sockaddr_in sa;
    if (!inet4_arg(name, arg, &sa)) return;
    int u = socket(AF_UNIX, SOCK_STREAM, 0), in = socket(AF_INET, SOCK_STREAM, 0);
    if (u < 0 || in < 0) {
        emit(name, errno, "socket");
        return;
    }
    const int slot = 200;
    if (dup2(u, slot) < 0) {
        emit(name, errno, "dup2");
        return;
    }
    pid_t t = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, 0);
    if (t < 0) {
        emit(name, errno, "clone CLONE_FILES");
        return;
    }
    if (t == 0)
        for (;;) {
            dup2(in, slot);
            dup2(u, slot);
        }
    long tries = 0, refused = 0, other = 0;
    int got = 0;
    for (double end = now_s() + 2; !got && now_s() < end;) {
        tries++;
        if (connect(slot, (struct sockaddr *)&sa, sizeof sa) == 0) {
            struct sockaddr_in peer;
            socklen_t pl = sizeof peer;
            got = getpeername(in, (struct sockaddr *)&peer, &pl) == 0;
        } else if (errno == ECONNREFUSED) {
            refused++;
        } else if (errno != EINVAL && errno != EAFNOSUPPORT) {
            other++;
        }
    }
    kill(t, SIGKILL);
    waitpid(t, NULL, 0);
    if (!got) {
        emit(name, ECONNREFUSED, "%ld tries (%ld refused, %ld other), never connected", tries,
             refused, other);
        return;
    }
    char line[256];
    upgrade_status(in, line, sizeof line);
    emit(name, 0, "connected after %ld tries; upgrade answered: %s", tries, line);
}

static void *connect_in_thread(void *p)
{
    const struct sockaddr_in *sa = p;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    long err = fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    return (void *)err;
}

/* A connect from a thread that is not the process's first (Go, Java, a resolver's
 * thread pool): a positive control for a guard that must find the caller's
 * descriptors from its thread id. */
static void at_connect_thread(const char *name, const char *arg)
{
    struct sockaddr_in sa;
    if (!inet4_arg(name, arg, &sa)) return;
    pthread_t th;
    void *res = NULL;
    int e = pthread_create(&th, NULL, connect_in_thread, &sa);
    if (e) {
        emit(name, e, "pthread_create");
        return;
    }
    pthread_join(th, &res);
    emit(name, (int)(long)res, "connect %s from a second thread", arg);
}

/* A protected name's read-only mount detached under the sandbox (the host removed the
 * directory it sat on) leaves the name free for a moment: PROCS processes loop on
 * mkdir(NAME) for SECONDS and, the moment one succeeds, write NAME/config. ok: planted
 * (the detail says after how many tries and what the write returned). */
static void at_plant(const char *name, const char *arg)
{
    char dir[256], rest[64], secs[16], procs[16];
    if (!need_arg(name, arg)) return;
    split2(arg, dir, sizeof dir, rest, sizeof rest);
    split2(rest, secs, sizeof secs, procs, sizeof procs);
    int n = atoi(procs) > 0 ? atoi(procs) : 1;
    double end = now_s() + (atof(secs) > 0 ? atof(secs) : 2);
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    for (int i = 0; i < n; i++) {
        if (fork() != 0) continue;
        for (long tries = 1; now_s() < end; tries++) {
            if (mkdir(dir, 0755) < 0) continue;
            int fd = open(cfg, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            static const char text[] = "[core]\n\tfsmonitor = \"echo PWNED\"\n";
            ssize_t w = fd >= 0 ? write(fd, text, sizeof text - 1) : -1;
            emit(name, 0, "created %s after %ld tries; config write %zd", dir, tries, w);
            _exit(0);
        }
        _exit(1);
    }
    int st, planted = 0;
    while (wait(&st) > 0)
        planted |= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!planted) emit(name, EEXIST, "%s never created", dir);
}

/* A listening socket in the file system: a way in for unsandboxed host processes. */
static void at_listen_path(const char *name, const char *arg)
{
    struct sockaddr_un sa;
    if (!need_arg(name, arg)) return;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", arg);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        emit(name, errno, "socket");
        return;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        emit(name, errno, "bind %s", arg);
    } else {
        emit(name, rc_err(listen(fd, 1)), "listen %s", arg);
    }
    close(fd);
}

/* Network interfaces visible (a private network namespace shows only lo). */
static void at_netif(const char *name, const char *arg)
{
    (void)arg;
    FILE *f = fopen("/proc/net/dev", "r");
    if (!f) {
        emit(name, errno, "/proc/net/dev");
        return;
    }
    char line[512], list[512] = "";
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        *c = 0;
        char *s = line;
        while (*s == ' ')
            s++;
        size_t l = strlen(list), k = strlen(s);
        if (l + k + 2 > sizeof list) break; /* enough names to report */
        if (l) list[l++] = ',';
        memcpy(list + l, s, k + 1);
        n++;
    }
    fclose(f);
    emit(name, 0, "count=%d names=%s", n, list);
}

/* ---- credentials and capabilities ------------------------------------------------- */

static void at_caps(const char *name, const char *arg)
{
    (void)arg;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) {
        emit(name, errno, "/proc/self/status");
        return;
    }
    char line[256], out[1024] = "";
    unsigned long long eff = 0;
    while (fgets(line, sizeof line, f)) {
        static const char *const keys[] = {
            "Uid:",    "CapEff:",     "CapPrm:",  "CapBnd:",
            "CapAmb:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            if (strncmp(line, keys[i], strlen(keys[i])) != 0) continue;
            if (i == 1) eff = strtoull(line + 7, NULL, 16);
            char *v = line + strlen(keys[i]);
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            size_t l = strlen(out);
            snprintf(out + l, sizeof out - l, "%s%.*s=%s", l ? " " : "", (int)strlen(keys[i]) - 1,
                     keys[i], v);
        }
    }
    fclose(f);
    /* ok = some capability is effective: the sandbox kept root's powers. */
    emit_res(name, eff ? "ok" : "NOCAPS", "%s", out);
}

/* Raise every capability into the effective set. */
static void at_capset(const char *name, const char *arg)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    (void)arg;
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0) {
        emit(name, errno, "capget");
        return;
    }
    for (int i = 0; i < 2; i++)
        d[i].effective = d[i].permitted = 0xffffffffu;
    emit(name, rc_err(syscall(SYS_capset, &h, d)), "all capabilities effective");
}

static void at_setuid0(const char *name, const char *arg)
{
    (void)arg;
    int r = setuid(0);
    emit(name, rc_err(r), "uid now %d euid %d", (int)getuid(), (int)geteuid());
}

/* Become another user (root with CAP_SETUID can be anybody, e.g. to read their files). */
static void at_setresuid(const char *name, const char *arg)
{
    uid_t u = arg && *arg ? (uid_t)strtoul(arg, NULL, 10) : 4242;
    int r = setresuid(u, u, u);
    emit(name, rc_err(r), "to %u: uid now %d", (unsigned)u, (int)getuid());
}

static void at_setgroups(const char *name, const char *arg)
{
    gid_t g = 0;
    (void)arg;
    emit(name, rc_err(setgroups(1, &g)), "groups {0}");
}

static void at_userfaultfd(const char *name, const char *arg)
{
    (void)arg;
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
    char label[64];
    snprintf(label, sizeof label, "%s:kernel", name);
    emit(label, rc_err(fd), "flags O_CLOEXEC");
    if (fd >= 0) close((int)fd);
    snprintf(label, sizeof label, "%s:user", name);
    fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    emit(label, rc_err(fd), "UFFD_USER_MODE_ONLY");
    if (fd >= 0) close((int)fd);
}

/* name_to_handle_at then open_by_handle_at: with CAP_DAC_READ_SEARCH a handle opens a
 * file by inode, past every bind mount and path rule ("shocker"). */
static void at_open_by_handle(const char *name, const char *arg)
{
    const char *p = arg && *arg ? arg : "/etc/hostname";
    char label[64];
    struct {
        struct file_handle h;
        unsigned char data[MAX_HANDLE_SZ];
    } fh;
    int mount_id;
    memset(&fh, 0, sizeof fh);
    fh.h.handle_bytes = MAX_HANDLE_SZ;
    snprintf(label, sizeof label, "%s:name_to_handle_at", name);
    if (name_to_handle_at(AT_FDCWD, p, &fh.h, &mount_id, 0) < 0) {
        emit(label, errno, "%s", p);
        return;
    }
    emit(label, 0, "%s", p);
    snprintf(label, sizeof label, "%s:open_by_handle_at", name);
    int mfd = open("/", O_RDONLY | O_DIRECTORY);
    int fd = open_by_handle_at(mfd, &fh.h, O_RDONLY);
    emit(label, rc_err(fd), "handle of %s", p);
    if (fd >= 0) close(fd);
    if (mfd >= 0) close(mfd);
}

static void at_personality(const char *name, const char *arg)
{
    (void)arg;
    int cur = personality(0xffffffff);
    if (cur < 0) {
        emit(name, errno, "query");
        return;
    }
    emit(name, rc_err(personality((unsigned long)cur | ADDR_NO_RANDOMIZE)),
         "ADDR_NO_RANDOMIZE (was %#x)", cur);
}

static void at_acct(const char *name, const char *arg)
{
    (void)arg; /* a missing file: EPERM without CAP_SYS_PACCT, else ENOENT */
    emit(name, rc_err(acct("/escape-probe-none/acct")), "missing file");
}

static void at_settimeofday(const char *name, const char *arg)
{
    (void)arg; /* both NULL: the permission check and nothing else */
    emit(name, rc_err(syscall(SYS_settimeofday, NULL, NULL)), "NULL, NULL");
}

static void at_clock_settime(const char *name, const char *arg)
{
    struct timespec now;
    (void)arg; /* to the time it already is (a few microseconds back at most) */
    clock_gettime(CLOCK_REALTIME, &now);
    emit(name, rc_err(clock_settime(CLOCK_REALTIME, &now)), "CLOCK_REALTIME to now");
}

static void at_clock_adjtime(const char *name, const char *arg)
{
    struct timex t;
    (void)arg;
    memset(&t, 0, sizeof t);
    if (adjtimex(&t) < 0) {
        emit(name, errno, "read");
        return;
    }
    long tick = t.tick;
    memset(&t, 0, sizeof t);
    t.modes = ADJ_TICK;
    t.tick = tick; /* the value it has */
    emit(name, rc_err(syscall(SYS_clock_adjtime, CLOCK_REALTIME, &t)), "ADJ_TICK %ld", tick);
}

static void at_syslog(const char *name, const char *arg)
{
    static char buf[4096];
    (void)arg;
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf);
    emit(name, rc_err(n), "read %d bytes of the kernel log", n);
}

static void at_ioperm(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(ioperm(0x80, 1, 1)), "port 0x80");
}

static void at_iopl(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(iopl(3)), "level 3");
}

static void at_fanotify(const char *name, const char *arg)
{
    (void)arg;
    int fd = fanotify_init(FAN_CLASS_NOTIF, O_RDONLY);
    emit(name, rc_err(fd), "FAN_CLASS_NOTIF");
    if (fd >= 0) close(fd);
}

static void at_vhangup(const char *name, const char *arg)
{
    (void)arg;
    emit(name, rc_err(vhangup()), "vhangup");
}

static void at_quotactl(const char *name, const char *arg)
{
    (void)arg; /* Q_QUOTAOFF on a missing device: EPERM or ENOENT */
    emit(name,
         rc_err(syscall(SYS_quotactl, QCMD(Q_QUOTAOFF, USRQUOTA), "/escape-probe-none", 0, NULL)),
         "Q_QUOTAOFF missing device");
}

/* ---- whole-table tools ------------------------------------------------------------ */

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

/* ---- dispatch --------------------------------------------------------------------- */

typedef void (*attempt_fn)(const char *name, const char *arg);

static const struct {
    const char *name;
    attempt_fn fn;
    const char *help;
} attempts[] = {
    {"tiocsti", at_tiocsti, "PATH:TEXT  push TEXT into a tty's input (TIOCSTI)"},
    {"ptywrite", at_ptywrite, "PATH:TEXT  write TEXT to a tty"},
    {"ptslist", at_ptslist, "list /dev/pts and open every numbered entry"},
    {"tioclinux", at_tioclinux, "[PATH]  TIOCLINUX on a tty (default /dev/tty0)"},
    {"read", at_read, "PATH[:NEEDLE]  read a file; reports whether NEEDLE occurs"},
    {"write", at_write, "PATH[:DATA]  create or append to a file"},
    {"mkdir", at_mkdir, "PATH"},
    {"rmdir", at_rmdir, "PATH"},
    {"unlink", at_unlink, "PATH"},
    {"chmod", at_chmod, "PATH  chmod 0777"},
    {"rename", at_rename, "SRC:DST"},
    {"link", at_link, "SRC:DST  hard link"},
    {"symlink", at_symlink, "TARGET:LINKPATH"},
    {"mknod_chr", at_mknod_chr, "PATH  character device 1:3, then open it"},
    {"mknod_blk", at_mknod_blk, "PATH  block device of the root disk, then open it"},
    {"readlink", at_readlink, "PATH  readlink and list through it (/proc/PID/root)"},
    {"mem", at_mem, "PID  open and read /proc/PID/mem"},
    {"listproc", at_listproc, "PID,PID...  count /proc entries, which PIDs are visible"},
    {"setns", at_setns, "PID  setns into each /proc/PID/ns/*"},
    {"ptrace_attach", at_ptrace_attach, "PID"},
    {"ptrace_traceme", at_ptrace_traceme, ""},
    {"process_vm_readv", at_process_vm_readv, "PID|self"},
    {"process_vm_writev", at_process_vm_writev, "(into self)"},
    {"kill0", at_kill0, "PID  kill(PID, 0)"},
    {"killterm", at_killterm, "PID  kill(PID, SIGTERM)"},
    {"pidfd_getfd", at_pidfd_getfd, "PID  steal the first open fd of PID"},
    {"kcmp", at_kcmp, "PID"},
    {"prlimit", at_prlimit, "PID  set RLIMIT_CORE of PID to its value"},
    {"setpriority", at_setpriority, "PID  set the nice value of PID to its value"},
    {"io_uring_setup", at_io_uring_setup, ""},
    {"io_uring_enter", at_io_uring_enter, ""},
    {"io_uring_register", at_io_uring_register, ""},
    {"bpf", at_bpf, "BPF_MAP_CREATE"},
    {"perf_event_open", at_perf_event_open, ""},
    {"keyctl", at_keyctl, ""},
    {"add_key", at_add_key, ""},
    {"request_key", at_request_key, ""},
    {"init_module", at_init_module, ""},
    {"finit_module", at_finit_module, ""},
    {"delete_module", at_delete_module, ""},
    {"kexec_load", at_kexec_load, ""},
    {"kexec_file_load", at_kexec_file_load, ""},
    {"mount", at_mount, "DIR  mount a tmpfs on DIR"},
    {"bindmount", at_bindmount, "SRC:DST"},
    {"remount_rw", at_remount_rw, "PATH  remount a bind mount read-write"},
    {"mount_setattr_rw", at_mount_setattr_rw, "PATH  clear MOUNT_ATTR_RDONLY"},
    {"umount", at_umount, "PATH  umount2(MNT_DETACH)"},
    {"pivot_root", at_pivot_root, ""},
    {"chroot", at_chroot, "[PATH]"},
    {"fsopen", at_fsopen, ""},
    {"fspick", at_fspick, "[PATH]"},
    {"open_tree", at_open_tree, "[PATH]"},
    {"move_mount", at_move_mount, ""},
    {"swapon", at_swapon, ""},
    {"swapoff", at_swapoff, ""},
    {"reboot", at_reboot, ""},
    {"sethostname", at_sethostname, "[NAME]  (default: the current name)"},
    {"setdomainname", at_setdomainname, "[NAME]"},
    {"unshare", at_unshare, "[user|mnt|net|pid|uts|ipc|cgroup|time]"},
    {"clone", at_clone, "[user|mnt|net|pid|uts|ipc|cgroup|time]"},
    {"socket", at_socket, "[unix|inet|inet6|netlink|packet|vsock|alg|inet_raw]"},
    {"socketpair", at_socketpair, "AF_UNIX"},
    {"connect_path", at_connect_path, "PATH  AF_UNIX pathname socket; ping and read the reply"},
    {"connect_abstract", at_connect_abstract, "NAME  abstract AF_UNIX socket \\0NAME"},
    {"connect_tcp", at_connect_tcp, "IPV4:PORT"},
    {"connect_swap", at_connect_swap, "IPV4:PORT  race an IP socket into a Unix one's slot"},
    {"connect_thread", at_connect_thread, "IPV4:PORT  connect from a second thread"},
    {"plant", at_plant, "DIR[:SECONDS[:PROCS]]  loop on mkdir DIR, then write DIR/config"},
    {"listen_path", at_listen_path, "PATH  bind and listen on a pathname AF_UNIX socket"},
    {"netif", at_netif, "network interfaces in /proc/net/dev"},
    {"caps", at_caps, "capability sets, NoNewPrivs, Seccomp (ok = CapEff not 0)"},
    {"capset", at_capset, "raise every capability"},
    {"setuid0", at_setuid0, ""},
    {"setresuid", at_setresuid, "[UID]  (default 4242)"},
    {"setgroups", at_setgroups, ""},
    {"userfaultfd", at_userfaultfd, ""},
    {"open_by_handle", at_open_by_handle, "[PATH]"},
    {"personality", at_personality, ""},
    {"acct", at_acct, ""},
    {"settimeofday", at_settimeofday, ""},
    {"clock_settime", at_clock_settime, ""},
    {"clock_adjtime", at_clock_adjtime, ""},
    {"syslog", at_syslog, "read the kernel log"},
    {"ioperm", at_ioperm, ""},
    {"iopl", at_iopl, ""},
    {"fanotify", at_fanotify, ""},
    {"vhangup", at_vhangup, ""},
    {"quotactl", at_quotactl, ""},
    {"sweep", at_sweep, "[LO-HI|NR,NR,...]  system calls with every argument -1"},
    {"seccomp_dump", at_seccomp_dump, "PID  (host side) the seccomp filters of PID"},
};

static int run_attempt(const char *spec)
{
    char name[64];
    const char *eq = strchr(spec, '=');
    size_t n = eq ? (size_t)(eq - spec) : strlen(spec);
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, spec, n);
    name[n] = 0;
    const char *arg = eq ? eq + 1 : NULL;
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        if (strcmp(attempts[i].name, name) != 0) continue;
        /* The sweep and the dump fork or trace themselves and run for long. */
        if (attempts[i].fn == at_sweep || attempts[i].fn == at_seccomp_dump) {
            attempts[i].fn(name, arg);
            return 0;
        }
        pid_t c = fork();
        if (c < 0) {
            emit(name, errno, "fork");
            return 0;
        }
        if (c == 0) {
            alarm(10);
            attempts[i].fn(name, arg);
            _exit(0);
        }
        int st = 0;
        waitpid(c, &st, 0);
        if (WIFSIGNALED(st))
            emit_res(name, WTERMSIG(st) == SIGALRM ? "TIMEOUT" : "SIGNAL", "signal %d",
                     WTERMSIG(st));
        return 0;
    }
    emit_res(name, "UNKNOWN", "no such attempt");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "help") == 0) {
        fprintf(stderr, "usage: %s ATTEMPT[=ARG] ...\n", argv[0]);
        for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++)
            fprintf(stderr, "  %-18s %s\n", attempts[i].name, attempts[i].help);
        return argc < 2 ? 2 : 0;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    int bad = 0;
    for (int i = 1; i < argc; i++)
        bad |= run_attempt(argv[i]);
    return bad ? 2 : 0;
}
