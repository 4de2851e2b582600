/* view: the sandbox's mount view, built by its init (see view.h).
 *
 * Bind mounts are made from file descriptors (open_tree + move_mount) taken before
 * the tree is made read-only: a clone keeps each mount's own flags, so a writable
 * root comes back exactly as the host has it (a read-only submount stays
 * read-only), and nothing is resolved twice by path. Runs in the init, a copy of
 * the small spawner, so it may allocate and format freely. */
#include "sandbox/view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sandbox/cgroup_mounts.h"
#include "sandbox/landlock.h"
#include "util/mem.h"

#define SB_OLDROOT "/.oldroot"

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
struct sb_mount_attr {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};
#define SB_MOUNT_ATTR_RDONLY 0x1ULL
#define SB_MOUNT_ATTR_NODEV 0x4ULL

/* The device nodes a fresh /dev gets, bound from the host's (bubblewrap's list). */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
#define NDEV 6

/* ---- helpers ---------------------------------------------------------------------- */

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

int sandbox_open_exact(const char *path, int flags)
{
    struct sb_open_how how = {.flags = (uint64_t)flags | O_PATH | O_CLOEXEC,
                              .resolve = SB_RESOLVE_NO_SYMLINKS | SB_RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) fd = open(path, flags | O_PATH | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

/* A detached copy of the mount tree at path (recursive), or -errno. */
static int clone_tree(const char *path)
{
    int at = sandbox_open_exact(path, 0);
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
    int at = sandbox_open_exact(path, 0);
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

/* mount(2) of a new file system onto path, resolved as sandbox_open_exact does (the mount
 * goes through the descriptor's /proc/self/fd link, which names that object). */
static int mount_exact(const char *path, const char *fstype, unsigned long flags, const char *data)
{
    int at = sandbox_open_exact(path, 0);
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

/* The /proc the view shows where a fresh one is refused: the one already there
 * (host_proc: "/proc" in place, the old root's under a new root), bound read-only
 * with everything mounted on it, the container runtime's masks included. The
 * kernel refuses a new procfs to a user namespace unless a proc mount it can see is
 * fully visible (mount_too_revealing): inside podman's or Docker's containers, whose
 * /proc has masked paths, and under bubblewrap's --proc, never. The bound one shows
 * the processes of the PID namespace it was made for (the container's, the server
 * among them) rather than the sandbox's; what keeps theirs closed (environ, fds, mem,
 * cwd) is Landlock's ptrace rule, which every sandbox's command is under: without
 * Landlock this view would not hold, and the start fails closed. */
static int bind_host_proc(struct view *v, const char *host_proc)
{
    if (sandbox_landlock_abi() < 1) {
        v->step = "mount /proc (a fresh /proc is refused here, and without Landlock the "
                  "host's would show other processes' environment)";
        return -EPERM;
    }
    CHECK(v, bind_ro(host_proc, "/proc"), "bind the host's /proc");
    return 0;
}

/* A fresh /proc for the PID namespace, with the host-wide knobs read-only (as
 * bubblewrap's --proc does; best effort, like it); where the kernel refuses one,
 * the host's, read-only (bind_host_proc). */
static int mount_proc(struct view *v, const char *host_proc)
{
    if (mkdir("/proc", 0555) < 0 && errno != EEXIST) FAIL(v, "mkdir /proc");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        if (errno == EPERM || errno == EACCES) return bind_host_proc(v, host_proc);
        FAIL(v, "mount /proc");
    }
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
    int at = sandbox_open_exact(path, 0);
    if (at == -ENOENT) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST) return nothing_to_create(errno) ? 0 : -errno;
        at = sandbox_open_exact(path, 0);
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
        int at = sandbox_open_exact(*p, 0);
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
    if (!s->pid_inherit && (rc = mount_proc(v, "/proc")) < 0) return rc;
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
        if ((rc = mount_proc(v, SB_OLDROOT "/proc")) < 0) return rc;
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

/* ---- cgroup file systems -------------------------------------------------------- */

/* listmount and statmount (Linux 6.8), and the unique mount id statx gives for them:
 * Debian 12's headers predate them. The answer's head only: later kernels add fields
 * past it, and never write past the size given. */
#ifndef SYS_statmount
#define SYS_statmount 457
#define SYS_listmount 458
#endif
#define SB_STATX_MNT_ID_UNIQUE 0x4000U
#define SB_STATMOUNT_SB_BASIC 0x1ULL
#define SB_STATMOUNT_MNT_BASIC 0x2ULL
#define SB_MNT_ID_REQ_SIZE 24
#define SB_CGROUP_MAGIC 0x27e0ebULL
#define SB_CGROUP2_MAGIC 0x63677270ULL
struct sb_mnt_id_req {
    uint32_t size, spare;
    uint64_t mnt_id, param;
};
struct sb_statmount {
    uint32_t size, mnt_opts;
    uint64_t mask;
    uint32_t sb_dev_major, sb_dev_minor;
    uint64_t sb_magic;
    uint32_t sb_flags, fs_type;
    uint64_t mnt_id, mnt_parent_id;
};

static bool is_cgroupfs(uint64_t magic)
{
    return magic == SB_CGROUP_MAGIC || magic == SB_CGROUP2_MAGIC;
}

/* Whether a mount below the one of unique id `id` is a cgroup file system: 1, 0, or
 * -1 where the kernel cannot say (before 6.8) or the tree is deeper than depth.
 * listmount lists every mount below on the kernels we know; a children-only answer
 * would still be complete, as each child is asked in turn (a workspace has a few: its
 * protected names, its covers). */
static int cgroupfs_below(uint64_t id, int depth)
{
    uint64_t ids[64];
    struct sb_mnt_id_req req = {.size = SB_MNT_ID_REQ_SIZE, .mnt_id = id};
    for (;;) {
        long n = syscall(SYS_listmount, &req, ids, sizeof ids / sizeof ids[0], 0);
        if (n < 0) return -1;
        for (long i = 0; i < n; i++) {
            struct sb_mnt_id_req q = {.size = SB_MNT_ID_REQ_SIZE,
                                      .mnt_id = ids[i],
                                      .param = SB_STATMOUNT_SB_BASIC | SB_STATMOUNT_MNT_BASIC};
            struct sb_statmount sm;
            if (syscall(SYS_statmount, &q, &sm, sizeof sm, 0) < 0) return -1;
            if (is_cgroupfs(sm.sb_magic)) return 1;
            int r = sm.mnt_parent_id != id ? 0 : depth > 0 ? cgroupfs_below(ids[i], depth - 1) : -1;
            if (r) return r;
        }
        if (n < (long)(sizeof ids / sizeof ids[0])) return 0;
        req.param = ids[n - 1]; /* the next page: after the last id */
    }
}

/* Whether the finished view may show a cgroup file system writable. Only where it
 * kept the host's own mount flags: everywhere when "/" is writable, else in the
 * writable roots' trees (clones keep each mount's flags). The rest is read-only by
 * construction (set_ro of "/" or of each readable root, recursively) or a file
 * system of the view's own (tmpfs, devpts, proc, the covers). */
static bool may_show_cgroupfs(const struct sandbox_spec *s)
{
    if (!s->enforce_fs) return true;
    for (const char *const *w = s->writable; w && *w; w++) {
        if (!strcmp(*w, "/")) return true;
        int fd = sandbox_open_exact(*w, 0);
        if (fd == -ENOENT) continue; /* not shown */
        if (fd < 0) return true;
        struct statfs sf;
        struct statx sx;
        bool maybe = fstatfs(fd, &sf) < 0 || is_cgroupfs((uint64_t)sf.f_type) ||
                     statx(fd, "", AT_EMPTY_PATH, SB_STATX_MNT_ID_UNIQUE, &sx) < 0 ||
                     !(sx.stx_mask & SB_STATX_MNT_ID_UNIQUE) || cgroupfs_below(sx.stx_mnt_id, 8);
        close(fd);
        if (maybe) return true;
    }
    return false;
}

int sandbox_view_seal_cgroups(const struct sandbox_spec *s, const char **step)
{
    /* The mount table is read only where a cgroup file system may be writable: that
     * read was 0.2 ms of every capped start, its seal of a read-only view included. */
    if (!may_show_cgroupfs(s)) return 0;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) {
        *step = "read the view's mounts";
        return -errno;
    }
    char *line = NULL, *mnt;
    size_t cap = 0;
    int rc = 0;
    bool ro;
    while (!rc && (mnt = sandbox_cgroup_mount_next(f, &line, &cap, &ro))) {
        /* Already read-only (a read-only view binds the host's tree so): nothing to
         * do, and a remount per cgroup hierarchy was a quarter of a millisecond of
         * every sandboxed start (row 1b). */
        if (ro) continue;
        rc = set_ro(mnt, true, true);
        if (rc < 0) *step = "read-only cgroup file system";
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---- what the view's watch looks at ---------------------------------------------- */

/* The view's own mounts a host's change could take away (a protected name's read-only
 * bind, a cover, a root attached from a clone), as they were when it was complete. */
struct kept_mount {
    char *path;
    uint64_t mnt_id;
};
static struct kept_mount *kept;
static size_t nkept;

#define SB_STATX_MNT_ID 0x1000U

/* The mount id of path when it is the root of a mount; 0 when it is not one (or gone). */
static uint64_t mount_root_id(const char *path)
{
    struct statx sx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, SB_STATX_MNT_ID, &sx) < 0) return 0;
    if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
        !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || !(sx.stx_mask & SB_STATX_MNT_ID))
        return 0;
    return sx.stx_mnt_id;
}

static void keep_mounts_of(const char *const *list)
{
    for (; list && *list; list++) {
        uint64_t id = mount_root_id(*list);
        if (!id) continue;
        kept = xrealloc(kept, (nkept + 1) * sizeof *kept);
        kept[nkept++] = (struct kept_mount){xstrdup(*list), id};
    }
}

void sandbox_view_keep(const struct sandbox_spec *s)
{
    keep_mounts_of(s->protected_names);
    keep_mounts_of(s->denied);
    keep_mounts_of(s->readonly_sub);
    keep_mounts_of(s->writable);
    keep_mounts_of(s->readable);
}

bool sandbox_view_kept(void)
{
    for (size_t i = 0; i < nkept; i++)
        if (mount_root_id(kept[i].path) != kept[i].mnt_id) return false;
    return true;
}

int sandbox_view_build(const struct sandbox_spec *s, const char **step)
{
    struct view v = {.s = s};
    int rc = build_view(&v);
    if (rc < 0) *step = v.step;
    return rc;
}
