/*
 * escape_probe_creds: the attempts on credentials, capabilities and the
 * host-wide settings they guard: the capability sets and seccomp state, raising
 * capabilities, changing uid and groups, userfaultfd, opening by file handle past the
 * mounts, personality, accounting, the clocks, the kernel log, I/O ports, fanotify,
 * vhangup and quotas.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/io.h>
#include <sys/klog.h>
#include <sys/personality.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "escape_probe.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

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

const struct probe_attempt probe_creds[] = {
    {"caps", at_caps, "capability sets, NoNewPrivs, Seccomp (ok = CapEff not 0)", 0},
    {"capset", at_capset, "raise every capability", 0},
    {"setuid0", at_setuid0, "", 0},
    {"setresuid", at_setresuid, "[UID]  (default 4242)", 0},
    {"setgroups", at_setgroups, "", 0},
    {"userfaultfd", at_userfaultfd, "", 0},
    {"open_by_handle", at_open_by_handle, "[PATH]", 0},
    {"personality", at_personality, "", 0},
    {"acct", at_acct, "", 0},
    {"settimeofday", at_settimeofday, "", 0},
    {"clock_settime", at_clock_settime, "", 0},
    {"clock_adjtime", at_clock_adjtime, "", 0},
    {"syslog", at_syslog, "read the kernel log", 0},
    {"ioperm", at_ioperm, "", 0},
    {"iopl", at_iopl, "", 0},
    {"fanotify", at_fanotify, "", 0},
    {"vhangup", at_vhangup, "", 0},
    {"quotactl", at_quotactl, "", 0},
    {NULL, NULL, NULL, 0},
};
