/*
 * escape_probe_kernel: the attempts on kernel facilities a sandboxed command
 * has no business with: io_uring, bpf, perf events, keyrings, modules, kexec, the mount
 * calls old and new, swap, reboot, host and domain names, and new namespaces through
 * unshare and clone. Each is made with arguments the kernel rejects after its
 * permission check, so that run by root outside a sandbox it changes nothing.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kexec.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>

#include "escape_probe.h"

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

const struct probe_attempt probe_kernel[] = {
    {"io_uring_setup", at_io_uring_setup, "", 0},
    {"io_uring_enter", at_io_uring_enter, "", 0},
    {"io_uring_register", at_io_uring_register, "", 0},
    {"bpf", at_bpf, "BPF_MAP_CREATE", 0},
    {"perf_event_open", at_perf_event_open, "", 0},
    {"keyctl", at_keyctl, "", 0},
    {"add_key", at_add_key, "", 0},
    {"request_key", at_request_key, "", 0},
    {"init_module", at_init_module, "", 0},
    {"finit_module", at_finit_module, "", 0},
    {"delete_module", at_delete_module, "", 0},
    {"kexec_load", at_kexec_load, "", 0},
    {"kexec_file_load", at_kexec_file_load, "", 0},
    {"mount", at_mount, "DIR  mount a tmpfs on DIR", 0},
    {"bindmount", at_bindmount, "SRC:DST", 0},
    {"remount_rw", at_remount_rw, "PATH  remount a bind mount read-write", 0},
    {"mount_setattr_rw", at_mount_setattr_rw, "PATH  clear MOUNT_ATTR_RDONLY", 0},
    {"umount", at_umount, "PATH  umount2(MNT_DETACH)", 0},
    {"pivot_root", at_pivot_root, "", 0},
    {"chroot", at_chroot, "[PATH]", 0},
    {"fsopen", at_fsopen, "", 0},
    {"fspick", at_fspick, "[PATH]", 0},
    {"open_tree", at_open_tree, "[PATH]", 0},
    {"move_mount", at_move_mount, "", 0},
    {"swapon", at_swapon, "", 0},
    {"swapoff", at_swapoff, "", 0},
    {"reboot", at_reboot, "", 0},
    {"sethostname", at_sethostname, "[NAME]  (default: the current name)", 0},
    {"setdomainname", at_setdomainname, "[NAME]", 0},
    {"unshare", at_unshare, "[user|mnt|net|pid|uts|ipc|cgroup|time]", 0},
    {"clone", at_clone, "[user|mnt|net|pid|uts|ipc|cgroup|time]", 0},
    {NULL, NULL, NULL, 0},
};
