/* enforce: the sandbox's mount view, Landlock rules and capability drop (see
 * enforce.h for the layers).
 *
 * sandbox_setup runs in the sandbox's init, a process of its own (a copy of the
 * small spawner, not of the daemon), so it may allocate and format freely.
 * sandbox_confine runs in the command between vfork and execve and only makes
 * system calls on memory prepared by sandbox_setup.
 *
 * Debian's <linux/landlock.h> stops at ABI 2 while this kernel speaks 7, so the
 * constants and the attribute layouts are defined here and the handled rights are
 * masked by the ABI the kernel reports (DESIGN.md pitfall 12).
 *
 * Bind mounts are made from file descriptors (open_tree + move_mount) taken before
 * the tree is made read-only: a clone keeps each mount's own flags, so a writable
 * root comes back exactly as the host has it (a read-only submount stays
 * read-only), and nothing is resolved twice by path. */
#include "sandbox/enforce.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/own_ports.h"
#include "sandbox/policy.h"
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
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define SB_RESOLVE_NO_SYMLINKS 0x04
#define SB_RESOLVE_NO_MAGICLINKS 0x02

struct sb_open_how {
    uint64_t flags, mode, resolve;
};
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#endif
#define SECBIT_NO_CAP_AMBIENT_RAISE_ (1 << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED_ (1 << 7)

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

#define LL_FS_READ (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_FS_FILE_ONLY                                                                            \
    (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
#define LL_FS_DEVICE (LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV | LL_FS_READ_DIR)

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
#define SB_MOUNT_ATTR_NODEV 0x4ULL

/* The device nodes a fresh /dev gets, bound from the host's (bubblewrap's list). */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
#define NDEV 6

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

bool sandbox_pid_namespace_inherit;

int sandbox_check(const struct sandbox_spec *spec)
{
    /* Landlock is defense in depth where the kernel has it: the mount view alone
     * expresses every policy (only the granted roots visible, writes only under
     * writable ones, denied paths covered). The filter cannot be done without. */
    (void)spec;
    struct seccomp_prog probe;
    return seccomp_build(SECCOMP_NET_NONE, &probe) < 0 ? -EOPNOTSUPP : 0;
}

int sandbox_policy_check(const struct sandbox_policy *p)
{
    struct sandbox_spec spec = {.enforce_fs = p->enforce_fs, .net_restricted = p->net_restricted};
    return sandbox_check(&spec);
}

/* ---- helpers ---------------------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -EPERM;
    close(fd);
    return rc;
}

static int set_ro(const char *path, bool ro, bool recursive)
{
    struct sb_mount_attr a = {0};
    if (ro)
        a.attr_set = SB_MOUNT_ATTR_RDONLY;
    else
        a.attr_clr = SB_MOUNT_ATTR_RDONLY;
    return syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof a) <
                   0
               ? -errno
               : 0;
}

/* An O_PATH descriptor of path resolved with no symbolic link anywhere on the way.
 * The daemon sends canonical paths (realpath), so a link found now was swapped in
 * since: fail (ELOOP) rather than bind or cover something else. Kernels without
 * openat2 (before 5.6) get O_NOFOLLOW on the last component. */
static int open_exact(const char *path)
{
    struct sb_open_how how = {.flags = O_PATH | O_CLOEXEC,
                              .resolve = SB_RESOLVE_NO_SYMLINKS | SB_RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

/* A detached copy of the mount tree at path (recursive), or -errno. */
static int clone_tree(const char *path)
{
    int at = open_exact(path);
    if (at < 0) return at;
    long fd = syscall(SYS_open_tree, at, "",
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    int rc = fd < 0 ? -errno : (int)fd;
    close(at);
    return rc;
}

/* Attaches a tree from clone_tree at path and closes the fd. */
static int attach_tree(int fd, const char *path)
{
    int at = open_exact(path);
    if (at < 0) {
        close(fd);
        return at;
    }
    long r =
        syscall(SYS_move_mount, fd, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    int rc = r < 0 ? -errno : 0;
    close(at);
    close(fd);
    return rc;
}

/* mount(2) of a new file system onto path, resolved as open_exact does (the mount
 * goes through the descriptor's /proc/self/fd link, which names that object). */
static int mount_exact(const char *path, const char *fstype, unsigned long flags, const char *data)
{
    int at = open_exact(path);
    if (at < 0) return at;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", at);
    int rc = mount(fstype, link, fstype, flags, data) < 0 ? -errno : 0;
    close(at);
    return rc;
}

/* A read-only recursive bind of src at dst. */
static int bind_ro(const char *src, const char *dst)
{
    int fd = clone_tree(src);
    if (fd < 0) return fd;
    int rc = attach_tree(fd, dst);
    return rc < 0 ? rc : set_ro(dst, true, true);
}

static bool path_under(const char *anc, const char *p)
{
    size_t n = strlen(anc);
    return strncmp(anc, p, n) == 0 && p[n] == '/';
}

/* A root the private /dev would hide if it were attached before it (a workspace
 * in /dev/shm): attached after mount_dev, on a mount point made in that tmpfs, as
 * bubblewrap binds what comes after --dev. /dev itself stays the private one, the
 * host's /dev/pts is never shown (other terminals: SANDBOX.md), and only directories
 * are: a device node granted as a root stays hidden (dev_root_shown). */
static bool under_private_dev(const char *p)
{
    return path_under("/dev", p) && strcmp(p, "/dev/pts") && !path_under("/dev/pts", p);
}

/* Whether a root inside the private /dev, of mode st, is attached there. */
static bool dev_root_shown(const struct stat *st)
{
    return S_ISDIR(st->st_mode);
}

/* A root shown inside the private /dev gets nodev on its whole tree (fd from
 * clone_tree): the host's /dev is a devtmpfs without it, and a granted directory
 * there (/dev/input, /dev/dri) would otherwise bring working device nodes. */
static int tree_nodev(int fd)
{
    struct sb_mount_attr a = {.attr_set = SB_MOUNT_ATTR_NODEV};
    return syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0
               ? -errno
               : 0;
}

/* The indexes of paths[0..n) ordered shortest path first (stable), so a root nested in
 * another comes after it. The caller frees. */
static size_t *shortest_first(const char *const *paths, size_t n)
{
    size_t *order = xcalloc(n + 1, sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strlen(paths[order[j]]) < strlen(paths[order[j - 1]]); j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return order;
}

/* mkdir -p of path's components (the last one as a file when !dir). */
static int make_path(const char *path, bool dir)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (c == 0 && !dir) {
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

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* ---- the mount view --------------------------------------------------------------- */

struct view {
    const struct sandbox_spec *s;
    bool newroot;     /* "/" is not readable: a fresh tmpfs root */
    int dev_fd[NDEV]; /* O_PATH fds of the host's device nodes */
    const char *step;
};

#define FAIL(v, what)                                                                              \
    do {                                                                                           \
        (v)->step = (what);                                                                        \
        return -errno;                                                                             \
    } while (0)
#define CHECK(v, expr, what)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ < 0) {                                                                             \
            (v)->step = (what);                                                                    \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)

/* A fresh /dev: a tmpfs with the host's harmless nodes bound in, the usual
 * symlinks, and a devpts instance of its own (bubblewrap's --dev). */
static int mount_dev(struct view *v)
{
    if (mkdir("/dev", 0755) < 0 && errno != EEXIST) FAIL(v, "mkdir /dev");
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
        FAIL(v, "mount /dev");
    char path[64];
    for (int i = 0; i < NDEV; i++) {
        if (v->dev_fd[i] < 0) continue;
        snprintf(path, sizeof path, "/dev/%s", dev_nodes[i]);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) FAIL(v, "create a /dev node");
        close(fd);
        long t = syscall(SYS_open_tree, v->dev_fd[i], "",
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (t < 0) FAIL(v, "bind a /dev node");
        CHECK(v, attach_tree((int)t, path), "bind a /dev node");
    }
    static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
                                           {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"},
                                           {"/proc/self/fd/2", "/dev/stderr"},
                                           {"pts/ptmx", "/dev/ptmx"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (symlink(links[i][0], links[i][1]) < 0) FAIL(v, "/dev symlinks");
    if (mkdir("/dev/shm", 01777) < 0 || mkdir("/dev/pts", 0755) < 0) FAIL(v, "mkdir /dev/pts");
    if (chmod("/dev/shm", 01777) < 0) FAIL(v, "chmod /dev/shm");
    if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=620") < 0)
        FAIL(v, "mount devpts");
    return 0;
}

/* A fresh /proc for the PID namespace, with the host-wide knobs read-only (as
 * bubblewrap's --proc does; best effort, like it). */
static int mount_proc(struct view *v)
{
    if (mkdir("/proc", 0555) < 0 && errno != EEXIST) FAIL(v, "mkdir /proc");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        FAIL(v, "mount /proc");
    static const char *const cover[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
                                        "/proc/bus", NULL};
    for (int i = 0; cover[i]; i++) {
        if (mount(cover[i], cover[i], NULL, MS_BIND | MS_REC, NULL) == 0)
            set_ro(cover[i], true, true);
    }
    return 0;
}

#define COVER "/dev/.sandbox-cover"

/* Whether mkdir's errno says that nobody in the sandbox could make anything there
 * either: the init has every capability of its user namespace and is not under
 * Landlock, so what it cannot create, the command (no capabilities) cannot. */
static bool nothing_to_create(int err)
{
    return err == ENOENT || err == ENOTDIR || err == EROFS || err == EACCES || err == EPERM;
}

/* Keeps one protected name read-only, decided now rather than when the policy was
 * resolved (the host may have changed it since): an existing one is bound read-only
 * onto itself (a directory, or a `.git` file); a missing one is made, the daemon's
 * placeholder having gone meanwhile, and bound the same way; a symbolic link fails
 * (ELOOP), as it fails the policy. The clone is made read-only before it is attached,
 * so there is no moment the name is writable. */
static int protect_name(const char *path)
{
    int at = open_exact(path);
    if (at == -ENOENT) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST) return nothing_to_create(errno) ? 0 : -errno;
        at = open_exact(path);
    }
    if (at < 0) return at;
    long t = syscall(SYS_open_tree, at, "",
                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    int rc = t < 0 ? -errno : 0;
    struct sb_mount_attr a = {.attr_set = SB_MOUNT_ATTR_RDONLY};
    if (!rc &&
        syscall(SYS_mount_setattr, (int)t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
        rc = -errno;
    if (!rc && syscall(SYS_move_mount, (int)t, "", at, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        rc = -errno;
    if (t >= 0) close((int)t);
    close(at);
    return rc;
}

/* Read-only carve-outs, the protected names, and covers for denied paths (after the
 * private /dev exists): the same in both kinds of view. */
static int mount_carveouts(struct view *v)
{
    const struct sandbox_spec *s = v->s;
    for (const char *const *p = s->readonly_sub; p && *p; p++) {
        int rc = bind_ro(*p, *p);
        if (rc == -ENOENT) continue; /* gone meanwhile: nothing to protect */
        CHECK(v, rc, "read-only carve-out");
    }
    for (const char *const *p = s->protected_names; p && *p; p++)
        CHECK(v, protect_name(*p), "protected name");
    bool have_cover = false;
    for (const char *const *p = s->denied; p && *p; p++) {
        struct stat st;
        if (lstat(*p, &st) < 0) continue;
        if (S_ISDIR(st.st_mode)) {
            CHECK(v,
                  mount_exact(*p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                              "mode=000,size=4k"),
                  "cover a denied directory");
            continue;
        }
        /* The cover file sits on the private /dev (a nodev tmpfs) until it is bound
         * everywhere; the binds keep it after it is unlinked. */
        if (!have_cover) CHECK(v, make_cover(COVER), "cover file");
        have_cover = true;
        int at = open_exact(*p);
        CHECK(v, at, "cover a denied file");
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", at);
        int rc = mount(COVER, link, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
        close(at);
        CHECK(v, rc, "cover a denied file");
        set_ro(*p, true, false);
    }
    if (have_cover) unlink(COVER);
    return 0;
}

/* Readies writable root i for the private /dev (in place view): only a directory is
 * shown (*tree closed and set to -1 otherwise), with nodev, on a mount point made in the
 * private tmpfs unless it lies in a root shown there already (where it exists, and a
 * mkdir would write to the real file system). Returns 0 or -errno (fail closed). */
static int dev_root_prepare(struct view *v, const char *const *roots, const bool *shown, size_t i,
                            int *tree)
{
    struct stat st;
    if (fstat(*tree, &st) < 0 || !dev_root_shown(&st)) {
        close(*tree);
        *tree = -1;
        return 0;
    }
    int rc = tree_nodev(*tree);
    if (rc < 0) {
        v->step = "writable root in /dev: nodev";
        return rc;
    }
    bool nested = false;
    for (size_t j = 0; roots[j] && !nested; j++)
        nested = shown[j] && path_under(roots[j], roots[i]);
    if (!nested && (rc = make_path(roots[i], true)) < 0)
        v->step = "writable root in /dev: mount point";
    return rc;
}

/* "/" readable: the host tree in place, read-only, with the writable roots
 * attached back from clones taken before. */
static int view_in_place(struct view *v)
{
    const struct sandbox_spec *s = v->s;
    size_t nw = count(s->writable);
    int *tree = xcalloc(nw + 1, sizeof *tree);
    int rc = 0;
    /* "/" writable (an approved full write): the tree stays as the host has it;
     * only the carve-outs, covers, /dev and /proc below apply. */
    bool all_writable = !s->enforce_fs;
    for (size_t i = 0; i < nw; i++)
        all_writable |= !strcmp(s->writable[i], "/");
    for (size_t i = 0; i < nw; i++)
        tree[i] = -1;
    for (size_t i = 0; i < nw && !rc && !all_writable; i++) {
        tree[i] = clone_tree(s->writable[i]);
        if (tree[i] == -ENOENT)
            tree[i] = -1; /* nothing there to write to */
        else if (tree[i] < 0)
            rc = tree[i], v->step = "clone a writable root";
    }
    if (!rc && !all_writable && (rc = set_ro("/", true, true)) < 0) v->step = "read-only /";
    /* Two passes: the roots in /dev go on once the private /dev is there, shortest
     * first, so that one inside another is attached into it. */
    size_t *order = shortest_first(s->writable, nw);
    bool *shown = xcalloc(nw + 1, sizeof *shown);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !rc && (rc = mount_dev(v)) < 0) break;
        for (size_t k = 0; k < nw; k++) {
            size_t i = pass == 1 ? order[k] : k;
            if (tree[i] < 0 || under_private_dev(s->writable[i]) != (pass == 1)) continue;
            if (pass == 1 && !rc) rc = dev_root_prepare(v, s->writable, shown, i, &tree[i]);
            if (tree[i] < 0) continue; /* not shown */
            if (!rc && (rc = attach_tree(tree[i], s->writable[i])) < 0)
                v->step = "writable root";
            else if (rc)
                close(tree[i]);
            else
                shown[i] = true;
            tree[i] = -1;
        }
    }
    for (size_t i = 0; i < nw; i++)
        if (tree[i] >= 0) close(tree[i]); /* left by a failure */
    free(order);
    free(shown);
    free(tree);
    if (rc) return rc;
    if (!s->pid_inherit && (rc = mount_proc(v)) < 0) return rc;
    return mount_carveouts(v);
}

/* The new root's root[i] (sorted shortest first), bound from the old root. */
static int attach_root(struct view *v, const char *const *root, size_t i, bool writable)
{
    char old[PATH_MAX + sizeof SB_OLDROOT];
    snprintf(old, sizeof old, SB_OLDROOT "%s", root[i]);
    struct stat st;
    if (stat(old, &st) < 0) return 0; /* nothing to show */
    if (under_private_dev(root[i]) && !dev_root_shown(&st)) return 0;
    /* A root nested in one attached in the same pass already exists inside its
     * (bound) parent: creating it would write to the real file system. */
    bool nested = false;
    for (size_t j = 0; j < i && !nested; j++)
        nested = under_private_dev(root[j]) == under_private_dev(root[i]) &&
                 path_under(root[j], root[i]);
    int rc;
    if (!nested && (rc = make_path(root[i], S_ISDIR(st.st_mode))) < 0) {
        v->step = "new root: mount point";
        return rc;
    }
    int t = clone_tree(old);
    if (t >= 0 && under_private_dev(root[i]) && (rc = tree_nodev(t)) < 0) {
        close(t);
        v->step = "new root: nodev in /dev";
        return rc;
    }
    if (t < 0 || (rc = attach_tree(t, root[i])) < 0) {
        v->step = "new root: bind a root";
        return t < 0 ? t : rc;
    }
    if (!writable && (rc = set_ro(root[i], true, true)) < 0) {
        v->step = "new root: read-only";
        return rc;
    }
    return 0;
}

/* "/" not readable: a tmpfs root holding only the granted roots (pivot_root), so
 * paths outside them are not even visible. */
static int view_new_root(struct view *v)
{
    const struct sandbox_spec *s = v->s;
    if (mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
        FAIL(v, "stage the new root");
    if (mkdir("/proc" SB_OLDROOT, 0700) < 0 || chdir("/proc") < 0 ||
        syscall(SYS_pivot_root, ".", "." SB_OLDROOT) < 0 || chdir("/") < 0)
        FAIL(v, "pivot_root");
    /* Roots shortest first, so a root nested in another is attached inside it. */
    size_t nr = count(s->readable), nw = count(s->writable), n = nr + nw;
    const char **all = xcalloc(n + 1, sizeof *all);
    for (size_t i = 0; i < n; i++)
        all[i] = i < nr ? s->readable[i] : s->writable[i - nr];
    size_t *order = shortest_first(all, n);
    const char **root = xcalloc(n + 1, sizeof *root);
    bool *writable = xcalloc(n + 1, sizeof *writable);
    for (size_t k = 0; k < n; k++) {
        root[k] = all[order[k]];
        writable[k] = order[k] >= nr;
    }
    free(order);
    free(all);
    int rc = 0;
    /* Two passes: the roots in /dev go on once the private /dev is there. */
    for (int pass = 0; pass < 2 && !rc; pass++) {
        if (pass == 1 && (rc = mount_dev(v)) < 0) break;
        for (size_t i = 0; i < n && !rc; i++)
            if (under_private_dev(root[i]) == (pass == 1))
                rc = attach_root(v, root, i, writable[i]);
    }
    free(root);
    free(writable);
    if (rc) return rc;
    /* Top-level symlinks are kept so /bin/sh still names /usr/bin/sh. */
    DIR *d = opendir(SB_OLDROOT);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_type != DT_LNK) continue;
        char name[300], target[PATH_MAX];
        snprintf(name, sizeof name, SB_OLDROOT "/%s", de->d_name);
        ssize_t l = readlink(name, target, sizeof target - 1);
        if (l <= 0) continue;
        target[l] = 0;
        snprintf(name, sizeof name, "/%s", de->d_name);
        if (symlink(target, name) < 0 && errno != EEXIST) {
            closedir(d);
            FAIL(v, "new root: symlinks");
        }
    }
    if (d) closedir(d);
    /* proc may be mounted only while a full one is visible: before the old root goes. */
    if (!s->pid_inherit) {
        if ((rc = mount_proc(v)) < 0) return rc;
    } else {
        if (mkdir("/proc", 0555) < 0 && errno != EEXIST) FAIL(v, "mkdir /proc");
        CHECK(v, bind_ro(SB_OLDROOT "/proc", "/proc"), "bind /proc");
    }
    if ((rc = mount_carveouts(v)) < 0) return rc;
    if (umount2(SB_OLDROOT, MNT_DETACH) < 0 || rmdir(SB_OLDROOT) < 0) FAIL(v, "drop the old root");
    CHECK(v, set_ro("/", true, false), "read-only new root");
    return 0;
}

static int build_view(struct view *v)
{
    const struct sandbox_spec *s = v->s;
    /* Nothing done here may propagate back to the host's mount table. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) FAIL(v, "make / private");
    char path[64];
    for (int i = 0; i < NDEV; i++) {
        snprintf(path, sizeof path, "/dev/%s", dev_nodes[i]);
        v->dev_fd[i] = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    v->newroot = s->enforce_fs;
    for (const char *const *p = s->readable; p && *p; p++)
        if (!strcmp(*p, "/")) v->newroot = false;
    for (const char *const *p = s->writable; p && *p; p++)
        if (!strcmp(*p, "/")) v->newroot = false;
    int rc = v->newroot ? view_new_root(v) : view_in_place(v);
    for (int i = 0; i < NDEV; i++)
        if (v->dev_fd[i] >= 0) close(v->dev_fd[i]);
    return rc;
}

/* ---- Landlock ------------------------------------------------------------------------ */

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

/* The ruleset, built in the finished view (so /dev/pts is the private instance).
 * Without file enforcement every path stays allowed, but the process still gets a
 * Landlock domain: its ptrace and signal scoping keep processes outside closed. */
static int build_ruleset(const struct sandbox_spec *s, int *out)
{
    *out = -1;
    int abi = sandbox_landlock_abi();
    if (abi < 1) return 0; /* the mount view alone enforces the policy */
    uint64_t all = fs_rights_for_abi(abi);
    struct ll_ruleset_attr ra = {.handled_access_fs = all};
    size_t ra_size = abi >= 6 ? sizeof ra : abi >= 4 ? 16 : 8;
    if (s->net_restricted && !s->net_proxy && abi >= 4)
        ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    /* No signals to processes outside the sandbox (the daemon, other jobs); with the
     * network restricted, no abstract Unix sockets outside either. */
    if (abi >= 6) ra.scoped = LL_SCOPE_SIGNAL | (s->net_restricted ? LL_SCOPE_ABSTRACT_UNIX : 0);
    long fd = syscall(SYS_landlock_create_ruleset, &ra, ra_size, 0);
    if (fd < 0) return -errno;
    int rfd = (int)fd, rc = 0;
    if (!s->enforce_fs) {
        rc = add_rule(rfd, "/", all);
    } else {
        for (const char *const *p = s->readable; p && *p && !rc; p++)
            rc = add_rule(rfd, *p, LL_FS_READ & all);
        for (const char *const *p = s->writable; p && *p && !rc; p++)
            rc = add_rule(rfd, *p, all);
        /* The private /dev and /proc every program expects. */
        static const char *const devs[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                           "/dev/urandom", "/dev/tty",  "/dev/pts",  NULL};
        for (int i = 0; devs[i] && !rc; i++)
            rc = add_rule(rfd, devs[i], LL_FS_DEVICE & all);
        if (!rc) rc = add_rule(rfd, "/dev", LL_FS_READ_DIR);
        if (!rc) rc = add_rule(rfd, "/dev/shm", all);
        if (!rc) rc = add_rule(rfd, "/proc", (LL_FS_READ | LL_FS_WRITE_FILE) & all);
    }
    if (rc) {
        close(rfd);
        return rc;
    }
    *out = rfd;
    return 0;
}

/* ---- setup and confine --------------------------------------------------------------- */

static int loopback_up(void)
{
    int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sk < 0) return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    int rc = 0;
    if (ioctl(sk, SIOCGIFFLAGS, &ifr) < 0) rc = -errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (!rc && ioctl(sk, SIOCSIFFLAGS, &ifr) < 0) rc = -errno;
    close(sk);
    return rc;
}

/* /proc/self/mountinfo, opened once the view is complete (see sandbox_setup). */
static int view_watch_fd = -1;

int sandbox_setup(const struct sandbox_spec *spec, bool userns, uid_t uid, gid_t gid,
                  struct sandbox_confinement *c, const char **step)
{
    c->ruleset_fd = -1;
    c->view_fd = -1;
    c->guard_sock[0] = c->guard_sock[1] = -1;
    /* The cap counts the tasks of this user namespace's uid, i.e. this sandbox's
     * (the init included); never above what the server may have itself. */
    struct rlimit nproc;
    c->max_procs = spec->max_procs;
    if (c->max_procs && getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_max != RLIM_INFINITY &&
        nproc.rlim_max < c->max_procs)
        c->max_procs = nproc.rlim_max;
    *step = "";
    int rc;
    if (userns) {
        char map[64];
        *step = "user namespace id maps";
        if ((rc = write_file("/proc/self/setgroups", "deny")) < 0) return rc;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if ((rc = write_file("/proc/self/uid_map", map)) < 0) return rc;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if ((rc = write_file("/proc/self/gid_map", map)) < 0) return rc;
    }
    struct view v = {.s = spec};
    if ((rc = build_view(&v)) < 0) {
        *step = v.step;
        return rc;
    }
    if (spec->net_restricted && (rc = loopback_up()) < 0) {
        *step = "loopback";
        return rc;
    }
    if ((rc = build_ruleset(spec, &c->ruleset_fd)) < 0) {
        *step = "landlock ruleset";
        return rc;
    }
    /* The fs helper runs our own code: an allowlist of what it calls. */
    enum seccomp_net net = !spec->net_restricted ? SECCOMP_NET_OPEN
                           : spec->net_proxy     ? SECCOMP_NET_INET_ONLY
                                                 : SECCOMP_NET_NONE;
    rc = spec->serve ? seccomp_build_fs_helper(&c->seccomp) : seccomp_build(net, &c->seccomp);
    if (rc < 0) {
        *step = "seccomp filter";
        return rc;
    }
    if (c->seccomp.listener) {
        /* Without the table of the server's ports there is nothing to refuse by:
         * fail closed rather than let the command reach the server. */
        if (!own_ports_ready()) {
            *step = "the server's port table";
            return -ENOTRECOVERABLE;
        }
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->guard_sock) < 0) {
            *step = "connect guard";
            return -errno;
        }
    }
    /* The view is complete: from now on any change of this namespace's mount table
     * is the host removing or moving something a mount sits on (the command can
     * mount nothing), and a protected name's read-only mount would be gone with it. */
    view_watch_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (view_watch_fd < 0) {
        *step = "watch the mount table";
        return -errno;
    }
    c->view_fd = view_watch_fd;
    return 0;
}

bool sandbox_view_intact(void)
{
    if (view_watch_fd < 0) return true;
    struct pollfd p = {view_watch_fd, POLLPRI, 0};
    return poll(&p, 1, 0) == 0;
}

/* Drops every capability for good: the bounding set first (needs CAP_SETPCAP),
 * then ambient, securebits so exec as uid 0 gains nothing, then the sets. */
static int drop_caps(void)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) return -errno;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                         SECBIT_NO_CAP_AMBIENT_RAISE_ | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED_;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0) return -errno;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) < 0) return -errno;
    return 0;
}

int sandbox_confine(const struct sandbox_confinement *c)
{
    int rc;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -errno;
    if (c->ruleset_fd >= 0 && syscall(SYS_landlock_restrict_self, c->ruleset_fd, 0) < 0)
        return -errno;
    if ((rc = drop_caps()) < 0) return rc;
    if (c->max_procs) {
        struct rlimit r = {c->max_procs, c->max_procs};
        if (setrlimit(RLIMIT_NPROC, &r) < 0) return -errno;
    }
    return seccomp_install(&c->seccomp, c->guard_sock[1]);
}
