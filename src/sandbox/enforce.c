/* enforce: Landlock + mount namespace + seccomp (see enforce.h for the layers).
 *
 * Debian's <linux/landlock.h> stops at ABI 2 while this kernel speaks 7, so the
 * constants and the attribute layouts are defined here and the handled rights are
 * masked by the ABI the kernel reports (DESIGN.md pitfall 12).
 *
 * The seccomp program is written by hand rather than with libseccomp: it must be
 * built before vfork and installed in the child with a single system call, while
 * seccomp_load() allocates and is not async-signal-safe. It is small enough to
 * read: wrong architecture -> kill, socket(!AF_UNIX) -> EACCES, io_uring_setup ->
 * EPERM (io_uring can create sockets without the socket system call). */
#include "sandbox/enforce.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/mem.h"

#define SB_OLDROOT "/.oldroot"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REFER (1ULL << 13)    /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_SIGNAL (1ULL << 1)  /* ABI 6 */

#define LL_FS_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_FS_FILE_ONLY (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

/* struct landlock_ruleset_attr as of ABI 6; the size passed tells the kernel which
 * prefix we mean. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

struct sb_mount_attr {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};
#define SB_MOUNT_ATTR_RDONLY 0x1ULL

int sandbox_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int)v;
}

static uint64_t fs_rights_for_abi(int abi)
{
    uint64_t r = (1ULL << 13) - 1; /* ABI 1: execute .. make_sym */
    if (abi >= 2) r |= LL_FS_REFER;
    if (abi >= 3) r |= LL_FS_TRUNCATE;
    if (abi >= 5) r |= LL_FS_IOCTL_DEV;
    return r;
}

/* Adds a path_beneath rule; a missing path is skipped (nothing to grant). */
static int add_rule(int rfd, const char *path, uint64_t access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? 0 : -errno;
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= LL_FS_FILE_ONLY;
    struct ll_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    int rc = 0;
    if (access && syscall(SYS_landlock_add_rule, rfd, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static void build_filter(struct sandbox_prepared *sp)
{
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#else
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
    struct sock_filter f[] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        /* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        /* 4: x32 system calls would dodge the numbers below */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 3, 0),
#else
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffU, 3, 0),
#endif
        /* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 3, 0),
        /* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 1, 0),
        /* 7 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 8 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        /* 9: socket(domain, ...): the low 32 bits of args[0] */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 1),
        /* 11 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 12 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
    };
    _Static_assert(sizeof f / sizeof f[0] <= SB_BPF_MAX, "filter too long");
    memcpy(sp->filter, f, sizeof f);
    sp->prog.len = sizeof f / sizeof f[0];
    sp->prog.filter = sp->filter;
}

int sandbox_prepare(const struct sandbox_policy *pol, struct sandbox_prepared *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->ruleset_fd = -1;
    int rc = 0;
    int abi = sandbox_landlock_abi();
    if (pol->enforce_fs && abi < 1) return -EOPNOTSUPP;
#if !defined(__x86_64__) && !defined(__aarch64__)
    if (pol->net_restricted) return -EOPNOTSUPP;
#endif
    if (pol->net_restricted) {
        build_filter(sp);
        sp->seccomp = true;
    }
    struct ll_ruleset_attr ra = {0};
    size_t ra_size = abi >= 6 ? sizeof ra : abi >= 4 ? 16 : 8;
    uint64_t all = fs_rights_for_abi(abi);
    if (pol->enforce_fs) ra.handled_access_fs = all;
    if (pol->net_restricted && abi >= 4) ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    /* A confined process may not signal anything outside its sandbox (the daemon,
     * other jobs); its own descendants share the domain and stay reachable. */
    if (abi >= 6) ra.scoped = LL_SCOPE_SIGNAL;
    if (ra.handled_access_fs || ra.handled_access_net || ra.scoped) {
        long fd = syscall(SYS_landlock_create_ruleset, &ra, ra_size, 0);
        if (fd < 0) return -errno;
        sp->ruleset_fd = (int)fd;
    }
    if (!pol->enforce_fs) return 0;

    for (size_t i = 0; i < pol->readable.n && !rc; i++)
        rc = add_rule(sp->ruleset_fd, pol->readable.v[i], LL_FS_READ & all);
    for (size_t i = 0; i < pol->writable.n && !rc; i++)
        rc = add_rule(sp->ruleset_fd, pol->writable.v[i], all);
    /* Terminals and the harmless devices every shell expects to write. */
    static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                       "/dev/urandom", "/dev/tty", "/dev/pts", "/dev/ptmx", NULL};
    for (int i = 0; devs[i] && !rc; i++)
        rc = add_rule(sp->ruleset_fd, devs[i],
                      (LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV | LL_FS_READ_DIR) & all);
    if (rc) goto fail;

    sp->mountns = true;
    if (geteuid() != 0) {
        sp->userns = true;
        snprintf(sp->uid_map, sizeof sp->uid_map, "%u %u 1\n", geteuid(), geteuid());
        snprintf(sp->gid_map, sizeof sp->gid_map, "%u %u 1\n", getegid(), getegid());
    }
    sp->rw = (const char *const *)pol->writable.v;
    sp->nrw = pol->writable.n;
    sp->ro = (const char *const *)pol->readonly_sub.v;
    sp->nro = pol->readonly_sub.n;
    sp->hide = (const char *const *)pol->denied.v;
    sp->nhide = pol->denied.n;
    /* Without a readable "/", paths outside the roots must not even be visible
     * (stat, canonicalize): build a fresh root holding only the granted roots. */
    sp->newroot = true;
    const struct sb_paths *lists[2] = {&pol->readable, &pol->writable};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++)
            if (!strcmp(lists[l]->v[i], "/")) sp->newroot = false;
    if (sp->newroot) {
        size_t cap = pol->readable.n + pol->writable.n + 1;
        sp->root_new = xcalloc(cap, sizeof *sp->root_new);
        sp->root_old = xcalloc(cap, sizeof *sp->root_old);
        sp->root_kind = xcalloc(cap, 1);
        for (int l = 0; l < 2; l++) {
            for (size_t i = 0; i < lists[l]->n; i++) {
                const char *p = lists[l]->v[i];
                struct stat st;
                if (stat(p, &st) < 0) continue; /* nothing to show */
                size_t k = sp->nroots++;
                sp->root_new[k] = p;
                sp->root_kind[k] = S_ISDIR(st.st_mode);
                sp->root_old[k] = xmalloc(strlen(p) + sizeof SB_OLDROOT);
                strcpy(sp->root_old[k], SB_OLDROOT);
                strcat(sp->root_old[k], p);
            }
        }
        /* Top-level symlinks are kept so /bin/sh still names /usr/bin/sh. */
        DIR *d = opendir("/");
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_type != DT_LNK || sp->nlinks >= 64) continue;
            char name[300], target[PATH_MAX];
            snprintf(name, sizeof name, "/%s", de->d_name);
            ssize_t n = readlink(name, target, sizeof target - 1);
            if (n <= 0) continue;
            target[n] = 0;
            sp->link_name = xrealloc(sp->link_name, (sp->nlinks + 1) * sizeof(char *));
            sp->link_target = xrealloc(sp->link_target, (sp->nlinks + 1) * sizeof(char *));
            sp->link_name[sp->nlinks] = xstrdup(name);
            sp->link_target[sp->nlinks++] = xstrdup(target);
        }
        if (d) closedir(d);
        /* Shortest first, so a root nested in another is bound after (inside) it. */
        for (size_t i = 1; i < sp->nroots; i++)
            for (size_t j = i; j > 0 && strlen(sp->root_new[j]) < strlen(sp->root_new[j - 1]); j--) {
                const char *tn = sp->root_new[j];
                sp->root_new[j] = sp->root_new[j - 1];
                sp->root_new[j - 1] = tn;
                char *to = sp->root_old[j];
                sp->root_old[j] = sp->root_old[j - 1];
                sp->root_old[j - 1] = to;
                unsigned char tk = sp->root_kind[j];
                sp->root_kind[j] = sp->root_kind[j - 1];
                sp->root_kind[j - 1] = tk;
            }
    }
    sp->hide_is_dir = xcalloc(sp->nhide + 1, 1);
    for (size_t i = 0; i < sp->nhide; i++) {
        struct stat st;
        if (stat(sp->hide[i], &st) < 0) sp->hide_is_dir[i] = 2;
        else if (S_ISDIR(st.st_mode)) sp->hide_is_dir[i] = 1;
        else sp->hide_files = true;
    }
    return 0;
fail:
    sandbox_prepared_free(sp);
    return rc;
}

void sandbox_prepared_free(struct sandbox_prepared *sp)
{
    if (sp->ruleset_fd >= 0) close(sp->ruleset_fd);
    free(sp->hide_is_dir);
    for (size_t i = 0; i < sp->nroots; i++) free(sp->root_old[i]);
    free(sp->root_old);
    free(sp->root_new);
    free(sp->root_kind);
    for (size_t i = 0; i < sp->nlinks; i++) {
        free(sp->link_name[i]);
        free(sp->link_target[i]);
    }
    free(sp->link_name);
    free(sp->link_target);
    memset(sp, 0, sizeof *sp);
    sp->ruleset_fd = -1;
}

/* ---- the async-signal-safe part ------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -EPERM;
    close(fd);
    return rc;
}

static int set_ro(const char *path, bool ro)
{
    struct sb_mount_attr a = {0};
    if (ro) a.attr_set = SB_MOUNT_ATTR_RDONLY;
    else a.attr_clr = SB_MOUNT_ATTR_RDONLY;
    return syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a) < 0 ? -errno : 0;
}

#define SB_EMPTY "/proc/.sandbox-empty"
#define SB_EMPTY_NEWROOT "/.sandbox-empty"

/* The object bound over denied files. Preferably a device node on a nodev mount:
 * opening it fails with EACCES, the reference's error for a denied read. Without
 * CAP_MKNOD (user namespace) an empty mode-000 file: nothing of the original leaks
 * either, but a read succeeds empty. */
static int make_cover(const char *path)
{
    if (mknod(path, S_IFCHR, makedev(1, 3)) == 0) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0) return -errno;
    close(fd);
    return 0;
}

static bool path_under(const char *anc, const char *p)
{
    size_t n = strlen(anc);
    return strncmp(anc, p, n) == 0 && p[n] == '/';
}

/* mkdir -p of path's components in the new root (the last one as a file when
 * !dir). No allocation: a stack copy. */
static int make_path(const char *path, bool dir)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        bool last = c == 0;
        if (last && !dir) {
            int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC, 0);
            if (fd < 0 && errno != EEXIST) return -errno;
            if (fd >= 0) close(fd);
        } else if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
            return -errno;
        }
        buf[i] = c;
    }
    return 0;
}

/* Replaces the root with a tmpfs holding only the granted roots, each a recursive
 * bind of the original. The tmpfs is staged on /proc, which pivot_root vacates. */
static int build_newroot(const struct sandbox_prepared *sp)
{
    int rc;
    if (mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) return -errno;
    if (mkdir("/proc" SB_OLDROOT, 0700) < 0) return -errno;
    if (chdir("/proc") < 0) return -errno;
    if (syscall(SYS_pivot_root, ".", "." SB_OLDROOT) < 0) return -errno;
    if (chdir("/") < 0) return -errno;
    for (size_t i = 0; i < sp->nroots; i++) {
        bool nested = false;
        for (size_t j = 0; j < i && !nested; j++)
            nested = sp->root_kind[j] && path_under(sp->root_new[j], sp->root_new[i]);
        /* A nested root already exists inside its (bound) parent: creating it
         * would write to the real file system. */
        if (!nested && (rc = make_path(sp->root_new[i], sp->root_kind[i])) < 0) return rc;
        if (mount(sp->root_old[i], sp->root_new[i], NULL, MS_BIND | MS_REC, NULL) < 0)
            return -errno;
    }
    for (size_t i = 0; i < sp->nlinks; i++)
        if (symlink(sp->link_target[i], sp->link_name[i]) < 0 && errno != EEXIST) return -errno;
    if (sp->hide_files) {
        if ((rc = make_cover(SB_EMPTY_NEWROOT)) < 0) return rc;
    }
    if (umount2(SB_OLDROOT, MNT_DETACH) < 0) return -errno;
    if (rmdir(SB_OLDROOT) < 0) return -errno;
    return 0;
}

static int build_mounts(const struct sandbox_prepared *sp)
{
    int rc;
    if (unshare(CLONE_NEWNS | (sp->userns ? CLONE_NEWUSER : 0)) < 0) return -errno;
    if (sp->userns) {
        if ((rc = write_file("/proc/self/setgroups", "deny")) < 0) return rc;
        if ((rc = write_file("/proc/self/uid_map", sp->uid_map)) < 0) return rc;
        if ((rc = write_file("/proc/self/gid_map", sp->gid_map)) < 0) return rc;
    }
    /* Nothing we do here may propagate back to the host's mount table. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -errno;
    if (sp->newroot && (rc = build_newroot(sp)) < 0) return rc;
    if ((rc = set_ro("/", true)) < 0) return rc;
    for (size_t i = 0; i < sp->nrw; i++) {
        if (mount(sp->rw[i], sp->rw[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT) continue; /* nothing there to write to */
            return -errno;
        }
        if ((rc = set_ro(sp->rw[i], false)) < 0) return rc;
    }
    for (size_t i = 0; i < sp->nro; i++) {
        if (mount(sp->ro[i], sp->ro[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT) continue;
            return -errno;
        }
        if ((rc = set_ro(sp->ro[i], true)) < 0) return rc;
    }
    /* Denied files are covered by an empty mode-000 file. It must live on a mount
     * that can be bound (a memfd's cannot), so a tmpfs is put over /proc for the time
     * it takes to create and bind it, then detached; the binds keep it alive. */
    if (sp->hide_files && sp->newroot) {
        for (size_t i = 0; i < sp->nhide; i++) {
            if (sp->hide_is_dir[i] != 0) continue;
            if (mount(SB_EMPTY_NEWROOT, sp->hide[i], NULL, MS_BIND, NULL) < 0) return -errno;
            if ((rc = set_ro(sp->hide[i], true)) < 0) return rc;
        }
    } else if (sp->hide_files) {
        if (mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k") < 0)
            return -errno;
        if ((rc = make_cover(SB_EMPTY)) < 0) return rc;
        for (size_t i = 0; i < sp->nhide; i++) {
            if (sp->hide_is_dir[i] != 0) continue;
            if (mount(SB_EMPTY, sp->hide[i], NULL, MS_BIND, NULL) < 0) return -errno;
            if ((rc = set_ro(sp->hide[i], true)) < 0) return rc;
        }
        if (umount2("/proc", MNT_DETACH) < 0) return -errno;
    }
    for (size_t i = 0; i < sp->nhide; i++) {
        if (sp->hide_is_dir[i] != 1) continue;
        if (mount("tmpfs", sp->hide[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=000,size=4k") < 0)
            return -errno;
    }
    return 0;
}

int sandbox_apply(const struct sandbox_prepared *sp)
{
    int rc;
    if (sp->mountns && (rc = build_mounts(sp)) < 0) return rc;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -errno;
    if (sp->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, sp->ruleset_fd, 0) < 0)
        return -errno;
    if (sp->seccomp && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sp->prog, 0, 0) < 0)
        return -errno;
    return 0;
}
