/* fs_broker: a sandboxed command's file-system calls, decided at call time and made
 * by its init (see fs_broker.h).
 *
 * The walk (walk) resolves a path as the kernel would, but one component at a time
 * with O_PATH and O_NOFOLLOW, so that every symbolic link is read and followed here,
 * from the init's own copy of the path: /proc/self and /proc/thread-self mean the
 * caller (its numbers as the mounted /proc counts them, from its pidfd), /proc/<pid>
 * of any other process is refused, and the links inside the caller's own /proc
 * directory (fd/N, cwd, exe) are followed by the kernel, since they are its own
 * objects. Then the policy is asked of the canonical path of what was reached (or of
 * its directory and the new name), and the call is made on those descriptors. */
#include "sandbox/fs_broker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>
#include <utime.h>

#include "sandbox/notify.h"
#include "sandbox/path_rules.h"
#include "util/fdframe.h"
#include "util/procfs.h"

#define SB_PROC_SUPER_MAGIC 0x9fa0
#define SB_PROC_ROOT_INO 1
#define SB_CGROUP_MAGIC 0x27e0ebUL
#define SB_CGROUP2_MAGIC 0x63677270UL
#define MAX_LINKS 40
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#define __NR_removexattrat 466
#endif

/* ---- the caller ------------------------------------------------------------------------ */

struct caller {
    struct fs_broker *b;
    struct notify *nf;
    const struct notify_call *c;
    char pid[24], tid[24]; /* the caller's numbers as the mounted /proc counts them ("" unknown) */
    bool numbered;         /* pid and tid looked up (caller_numbers: only when needed) */
};

/* The caller's pid and tid as the /proc mounted in the view counts them: its pidfd's
 * fdinfo says (in the numbering of the /proc it is read through, which is the view's
 * even where that is the host's, bound into a PID namespace of our own). */
static void caller_numbers(struct caller *x)
{
    if (x->numbered) return;
    x->numbered = true;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", x->c->pidfd);
    long n = procfs_field(path, "Pid", 10);
    if (n <= 0) return;
    snprintf(x->tid, sizeof x->tid, "%ld", n);
    snprintf(path, sizeof path, "/proc/%ld/status", n);
    long tg = procfs_field(path, "Tgid", 10);
    snprintf(x->pid, sizeof x->pid, "%ld", tg > 0 ? tg : n);
}

/* ---- the walk ---------------------------------------------------------------------------- */

/* Where a path led: the directory of its last component (O_PATH) and that name, and
 * the object itself when it exists (O_PATH; -1 when it does not). A path naming its
 * start ("/", ".", "") has no name and no directory: obj only. */
struct res {
    int dir, obj;
    char name[NAME_MAX + 1];
};

static void res_free(struct res *r)
{
    if (r->dir >= 0) close(r->dir);
    if (r->obj >= 0) close(r->obj);
    r->dir = r->obj = -1;
}

static bool is_proc(int fd)
{
    struct statfs sf;
    return fstatfs(fd, &sf) == 0 && (unsigned long)sf.f_type == SB_PROC_SUPER_MAGIC;
}

static bool is_proc_root(int fd)
{
    struct stat st;
    return is_proc(fd) && fstat(fd, &st) == 0 && st.st_ino == SB_PROC_ROOT_INO;
}

static bool all_digits(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* The entry `comp` of /proc's root (dir) for the caller: self and thread-self are its
 * own directories, a number is allowed only when it is the caller's (another process's
 * environment, descriptors and memory are never the command's to reach through the
 * init), anything else (cpuinfo, sys...) is shared. Returns an O_PATH fd or -errno. */
static int proc_root_entry(struct caller *x, int dir, const char *comp)
{
    char name[64];
    if (!strcmp(comp, "self") || !strcmp(comp, "thread-self") || all_digits(comp)) {
        caller_numbers(x);
        if (!x->pid[0]) return -EACCES;
        if (!strcmp(comp, "self"))
            snprintf(name, sizeof name, "%s", x->pid);
        else if (!strcmp(comp, "thread-self"))
            snprintf(name, sizeof name, "%s/task/%s", x->pid, x->tid);
        else if (strcmp(comp, x->pid) && strcmp(comp, x->tid))
            return -EACCES;
        else
            snprintf(name, sizeof name, "%s", comp);
        comp = name;
    }
    int fd = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int walk(struct caller *x, int at, const char *path, bool follow, int *links, struct res *r);

/* One symbolic link met on the way (nfd, named comp in cur): its target as an
 * object (O_PATH) for a component in the middle, or the whole result for the last.
 * Consumes nfd. */
static int follow_link(struct caller *x, int cur, const char *comp, int nfd, bool last, bool follow,
                       int *links, struct res *r)
{
    if (is_proc(nfd) && !is_proc_root(cur)) {
        /* A link inside the caller's own /proc directory (fd/N, cwd, root, exe): its
         * target is the caller's object, which the kernel follows to. */
        close(nfd);
        int t = openat(cur, comp, O_PATH | O_CLOEXEC);
        if (t < 0) return -errno;
        if (!last) return t;
        r->dir = dup(cur);
        snprintf(r->name, sizeof r->name, "%s", comp);
        r->obj = t;
        return 0;
    }
    if (++*links > MAX_LINKS) {
        close(nfd);
        return -ELOOP;
    }
    char text[PATH_MAX];
    ssize_t n = readlinkat(nfd, "", text, sizeof text - 1);
    close(nfd);
    if (n < 0) return -errno;
    text[n] = 0;
    struct res sub = {.dir = -1, .obj = -1};
    int from = text[0] == '/' ? -1 : dup(cur); /* an absolute target starts at "/" */
    if (from < 0 && text[0] != '/') return -errno;
    int rc = walk(x, from, text, last ? follow : true, links, &sub);
    if (rc < 0) return rc;
    if (last) {
        *r = sub;
        return 0;
    }
    int t = sub.obj;
    sub.obj = -1;
    res_free(&sub);
    return t >= 0 ? t : -ENOENT;
}

/* Splits path into its components in place; returns their count (at most max), -1
 * when there are too many. *trailing: the path ends with a slash after a component. */
static int split(char *path, char **comp, int max, bool *trailing)
{
    int n = 0;
    size_t len = strlen(path);
    *trailing = len > 1 && path[len - 1] == '/';
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == max) return -1;
        comp[n++] = t;
    }
    return n;
}

/* Resolves path from the directory `at` (consumed; -1 for an absolute path, which
 * starts at "/"), following a last component that is a link when follow is set. Fills
 * *r (the caller frees it). */
static int walk(struct caller *x, int at, const char *path, bool follow, int *links, struct res *r)
{
    r->dir = r->obj = -1;
    r->name[0] = 0;
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof buf) {
        if (at >= 0) close(at);
        return -ENAMETOOLONG;
    }
    memcpy(buf, path, len + 1);
    int cur = at;
    if (buf[0] == '/') {
        if (cur >= 0) close(cur);
        cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0) return -errno;
    }
    char *comp[PATH_MAX / 2];
    bool trailing;
    int n = split(buf, comp, (int)(sizeof comp / sizeof comp[0]), &trailing);
    if (n < 0) {
        close(cur);
        return -ENAMETOOLONG;
    }
    if (trailing) follow = true;
    if (n == 0) {
        r->obj = cur; /* "/" */
        return 0;
    }
    for (int i = 0; i < n; i++) {
        bool last = i == n - 1;
        int nfd;
        if (!strcmp(comp[i], ".") || !strcmp(comp[i], "..")) {
            nfd = openat(cur, comp[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (nfd < 0) goto fail_errno;
            close(cur);
            cur = nfd;
            if (last) r->obj = cur; /* "x/.." names a directory, not a new name */
            if (last) return 0;
            continue;
        }
        if (strlen(comp[i]) > NAME_MAX) {
            close(cur);
            return -ENAMETOOLONG;
        }
        nfd = is_proc_root(cur) ? proc_root_entry(x, cur, comp[i])
                                : openat(cur, comp[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && nfd != -1) { /* proc_root_entry's -errno */
            close(cur);
            return nfd;
        }
        if (nfd < 0) {
            if (errno == ENOENT && last) {
                r->dir = cur;
                snprintf(r->name, sizeof r->name, "%s", comp[i]);
                return trailing ? (res_free(r), -ENOENT) : 0;
            }
            goto fail_errno;
        }
        struct stat st;
        if (fstat(nfd, &st) < 0) {
            close(nfd);
            goto fail_errno;
        }
        if (S_ISLNK(st.st_mode) && (!last || follow)) {
            int t = follow_link(x, cur, comp[i], nfd, last, follow, links, r);
            if (t < 0 || last) {
                close(cur);
                return t < 0 ? t : 0;
            }
            nfd = t;
            if (fstat(nfd, &st) < 0) {
                close(nfd);
                goto fail_errno;
            }
        }
        if (last) {
            if (trailing && !S_ISDIR(st.st_mode)) {
                close(nfd);
                close(cur);
                return -ENOTDIR;
            }
            r->dir = cur;
            snprintf(r->name, sizeof r->name, "%s", comp[i]);
            r->obj = nfd;
            return 0;
        }
        if (!S_ISDIR(st.st_mode)) {
            close(nfd);
            close(cur);
            return -ENOTDIR;
        }
        close(cur);
        cur = nfd;
    }
    return 0;
fail_errno:;
    int e = errno;
    close(cur);
    return -e;
}

/* Where a call's relative path starts: the caller's working directory (AT_FDCWD)
 * or its descriptor dirfd. An O_PATH descriptor, or -errno. */
static int start_of(struct caller *x, int dirfd)
{
    if (dirfd == AT_FDCWD) {
        caller_numbers(x);
        if (!x->tid[0]) return -EACCES;
        char p[64];
        snprintf(p, sizeof p, "/proc/%s/cwd", x->tid);
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
    }
    return notify_getfd(x->c, dirfd);
}

/* Reads the path at addr and resolves it from dirfd. */
static int resolve(struct caller *x, int dirfd, uint64_t addr, bool follow, struct res *r)
{
    r->dir = r->obj = -1;
    char path[PATH_MAX];
    ssize_t n = notify_read_string(x->c, addr, path, sizeof path);
    if (n < 0) return (int)n;
    if (n == 0) return -ENOENT;
    int at = path[0] == '/' ? -1 : start_of(x, dirfd); /* walk opens "/" itself */
    if (at < 0 && path[0] != '/') return at == -1 ? -errno : at;
    int links = 0;
    return walk(x, at, path, follow, &links, r);
}

/* ---- the policy ------------------------------------------------------------------------- */

/* The canonical path of fd (the view's name for it), into out. */
static int fd_path(int fd, char *out, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n < 0) return -errno;
    out[n] = 0;
    return out[0] == '/' ? 0 : -EACCES; /* "pipe:[..]", "anon_inode:..." */
}

static bool under(const char *dir, const char *p)
{
    size_t n = strlen(dir);
    return !strncmp(p, dir, n) && (p[n] == '/' || p[n] == 0);
}

/* Whether /dev/pts/<n> is one of the sandbox's terminals: all of them in a private
 * devpts; without one, the host's holds every other session's terminal too, and only
 * the command's own and those it made (/dev/ptmx) are its. */
static bool own_pty(const struct fs_broker *b, const char *p)
{
    if (b->own_dev) return true;
    char *end;
    long n = strtol(p + 9, &end, 10);
    for (int i = 0; i < b->nptys && !*end && end != p + 9; i++)
        if (b->ptys[i] == n) return true;
    return false;
}

/* What the view itself gives every sandbox, beside the policy's roots: its own /proc
 * (the caller's entries only: the walk refuses the rest), the harmless device nodes,
 * its terminals and, with a private /dev, /dev/shm. */
static enum path_access own_access(const struct fs_broker *b, const char *p)
{
    static const char *const devs[] = {"/dev/null",   "/dev/zero",     "/dev/full",
                                       "/dev/random", "/dev/urandom",  "/dev/tty",
                                       "/dev/ptmx",   "/dev/pts/ptmx", NULL};
    for (int i = 0; devs[i]; i++)
        if (!strcmp(p, devs[i])) return PATH_WRITE;
    if (!strncmp(p, "/dev/pts/", 9)) return own_pty(b, p) ? PATH_WRITE : PATH_NONE;
    if (under("/proc", p)) return b->own_dev ? PATH_WRITE : PATH_READ;
    if (b->own_dev && under("/dev/shm", p)) return PATH_WRITE;
    if (!strcmp(p, "/dev")) return PATH_READ;
    return PATH_NONE;
}

/* Whether a root the policy names in /dev/shm reaches p (without a view, the only
 * roots inside the host's /dev that count: landlock.h). */
static bool named_below_root(const char *const *list, const char *p)
{
    for (; list && *list; list++)
        if (under("/dev/shm", *list) && under(*list, p)) return true;
    return false;
}

static enum path_access access_at(const struct fs_broker *b, const char *p)
{
    if (path_rules_denied(b->spec, p)) return PATH_NONE;
    enum path_access a = path_rules_granted(b->spec, p), own = own_access(b, p);
    /* Without a view, /dev is the host's, with its disks: "/" granted does not reach
     * it, only the nodes above and a root named inside it. */
    if (!b->own_dev && under("/dev", p) && !named_below_root(b->spec->writable, p) &&
        !named_below_root(b->spec->readable, p))
        a = PATH_NONE;
    return own > a ? own : a;
}

/* A terminal the sandbox made (it opened the multiplexer) is its own from now on. */
static void note_pty(struct fs_broker *b, int fd)
{
    unsigned n;
    if (b->own_dev || b->nptys == (int)(sizeof b->ptys / sizeof b->ptys[0]) ||
        ioctl(fd, TIOCGPTN, &n) < 0)
        return;
    b->ptys[b->nptys++] = (int)n;
}

/* The errno for wanting `want` where `have` is given: nothing at all reads as the
 * reference's denied read (EACCES), read-only as its read-only file system. */
static int refusal(enum path_access have)
{
    return have == PATH_NONE ? -EACCES : -EROFS;
}

/* Whether the broker lets the caller have `want` on path: writes are the broker's
 * to decide only when it makes them (b->writes); elsewhere the view's own mounts
 * decide, and here only the deny entries. */
static int allowed(const struct fs_broker *b, const char *path, enum path_access want)
{
    enum path_access have = access_at(b, path);
    if (!b->writes && want == PATH_WRITE) want = PATH_READ;
    return have >= want ? 0 : refusal(have);
}

/* A sandbox capped by cgroups may not write a cgroup file system (its procs would
 * leave the cap: the view seals them, view.h). */
static int sealed(const struct fs_broker *b, int fd, enum path_access want)
{
    struct statfs sf;
    if (want != PATH_WRITE || !b->spec->seal_cgroups || fstatfs(fd, &sf) < 0) return 0;
    return (unsigned long)sf.f_type == SB_CGROUP_MAGIC ||
                   (unsigned long)sf.f_type == SB_CGROUP2_MAGIC
               ? -EROFS
               : 0;
}

/* The policy asked of an existing object. One with no path (a pipe, a socket, an
 * anonymous inode: "pipe:[...]") is reached only through the caller's own
 * descriptors (/dev/stdout, /proc/self/fd/N): it is the caller's already. */
static int allowed_obj(const struct fs_broker *b, int obj, enum path_access want)
{
    char p[PATH_MAX];
    int rc = fd_path(obj, p, sizeof p);
    if (rc == -EACCES && p[0] != '/') return 0;
    if (rc == 0) rc = sealed(b, obj, want);
    return rc < 0 ? rc : allowed(b, p, want);
}

/* The policy asked of name in dir (a new entry, or one removed). */
static int allowed_name(const struct fs_broker *b, int dir, const char *name, enum path_access want,
                        char *out, size_t cap)
{
    char d[PATH_MAX];
    int rc = fd_path(dir, d, sizeof d);
    if (rc == 0) rc = sealed(b, dir, want);
    if (rc < 0) return rc;
    if (snprintf(out, cap, "%s%s%s", d, strcmp(d, "/") ? "/" : "", name) >= (int)cap)
        return -ENAMETOOLONG;
    return allowed(b, out, want);
}

/* ---- doing it as the caller -------------------------------------------------------------- */

/* The caller's umask, from its /proc status (the init's own must not decide a new
 * file's mode). */
static mode_t caller_umask(struct caller *x)
{
    char p[64];
    caller_numbers(x);
    if (!x->tid[0]) return 022;
    snprintf(p, sizeof p, "/proc/%s/status", x->tid);
    long u = procfs_field(p, "Umask", 8);
    return u < 0 ? 022 : (mode_t)u;
}

/* The init's side of a call made for the caller: no effective capabilities (it
 * passes no check the command would fail) and the caller's umask. */
static mode_t as_caller_begin(struct caller *x)
{
    notify_effective_caps(false);
    return umask(caller_umask(x));
}

static void as_caller_end(mode_t old)
{
    umask(old);
    notify_effective_caps(true);
}

static int magic_path(int fd, char *out, size_t cap)
{
    return snprintf(out, cap, "/proc/self/fd/%d", fd) < (int)cap ? 0 : -ENAMETOOLONG;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* A blocking open of a FIFO, made by a fork that sends the descriptor back when a
 * peer comes; the init goes on. Returns 0 when it is waiting (answered later). */
static int open_fifo_later(struct caller *x, int obj, int flags)
{
    struct fs_broker *b = x->b;
    if (b->nwaiting == FS_BROKER_MAX_WAITING) return -EAGAIN;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return -e;
    }
    if (pid == 0) {
        close(sv[0]);
        char p[64];
        magic_path(obj, p, sizeof p);
        notify_effective_caps(false);
        int fd = open(p, (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC);
        char err = fd < 0 ? (char)errno : 0;
        if (fd >= 0)
            (void)fdframe_send_tagged(sv[1], 'F', &fd, 1);
        else
            (void)!write(sv[1], &err, 1);
        _exit(0);
    }
    close(sv[1]);
    b->waiting[b->nwaiting].id = x->c->n->id;
    b->waiting[b->nwaiting].sock = sv[0];
    b->waiting[b->nwaiting].pid = pid;
    b->waiting[b->nwaiting].cloexec = flags & O_CLOEXEC;
    b->nwaiting++;
    return 1;
}

/* Opens the existing object r->obj as flags asked. Returns an fd, 1 when a fork
 * waits for a FIFO's peer, or -errno. */
static int open_existing(struct caller *x, struct res *r, int flags)
{
    struct stat st;
    if (fstat(r->obj, &st) < 0) return -errno;
    int acc = flags & O_ACCMODE;
    bool write = !(flags & O_PATH) && (acc != O_RDONLY || (flags & O_TRUNC));
    if ((flags & O_CREAT) && (flags & O_EXCL)) return -EEXIST;
    if (S_ISLNK(st.st_mode) && !(flags & O_PATH)) return -ELOOP; /* O_NOFOLLOW */
    if ((flags & O_DIRECTORY) && !S_ISDIR(st.st_mode)) return -ENOTDIR;
    if (S_ISDIR(st.st_mode) && write) return -EISDIR;
    int rc = allowed_obj(x->b, r->obj, write ? PATH_WRITE : PATH_READ);
    if (rc < 0) return rc;
    if (flags & O_PATH) return fcntl(r->obj, F_DUPFD_CLOEXEC, 0);
    if (S_ISFIFO(st.st_mode) && !(flags & O_NONBLOCK)) return open_fifo_later(x, r->obj, flags);
    char p[64];
    magic_path(r->obj, p, sizeof p);
    mode_t old = as_caller_begin(x);
    int fd = open(p, (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC);
    int e = errno;
    as_caller_end(old);
    if (fd >= 0 && S_ISCHR(st.st_mode)) note_pty(x->b, fd);
    return fd < 0 ? -e : fd;
}

static int open_new(struct caller *x, struct res *r, int flags, mode_t mode)
{
    if (!(flags & O_CREAT)) return -ENOENT;
    char p[PATH_MAX];
    int rc = allowed_name(x->b, r->dir, r->name, PATH_WRITE, p, sizeof p);
    if (rc < 0) return rc;
    mode_t old = as_caller_begin(x);
    int fd = openat(r->dir, r->name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    as_caller_end(old);
    return fd < 0 ? -e : fd;
}

static void do_open(struct caller *x, int dirfd, uint64_t path, int flags, mode_t mode)
{
    /* O_CREAT | O_EXCL never follows a last link: it fails, as the kernel says */
    bool follow = !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
    struct res r;
    int rc = resolve(x, dirfd, path, follow, &r);
    if (rc == 0 && (flags & O_CREAT) && r.obj < 0 && !r.name[0]) rc = -EISDIR;
    if (rc == 0) rc = r.obj >= 0 ? open_existing(x, &r, flags) : open_new(x, &r, flags, mode);
    res_free(&r);
    if (rc == 1) return; /* a fork waits for the FIFO's peer */
    if (rc >= 0) {
        int e = notify_answer_fd(x->nf, x->c->n->id, rc, flags & O_CLOEXEC);
        close(rc);
        if (e < 0) notify_answer(x->nf, x->c->n->id, e, 0);
        return;
    }
    notify_answer(x->nf, x->c->n->id, rc, 0);
}

/* ---- the calls that change a name ----------------------------------------------------------- */

/* Resolves a new name (mkdir, mknod, symlink, the new end of link and rename) and
 * checks it may be made. */
static int new_name(struct caller *x, int dirfd, uint64_t path, struct res *r)
{
    int rc = resolve(x, dirfd, path, false, r);
    if (rc < 0) return rc;
    if (r->obj >= 0) return -EEXIST;
    char p[PATH_MAX];
    return allowed_name(x->b, r->dir, r->name, PATH_WRITE, p, sizeof p);
}

static int do_mkdir(struct caller *x, int dirfd, uint64_t path, mode_t mode)
{
    struct res r;
    int rc = new_name(x, dirfd, path, &r);
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = mkdirat(r.dir, r.name, mode) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&r);
    return rc;
}

static int do_mknod(struct caller *x, int dirfd, uint64_t path, mode_t mode, dev_t dev)
{
    if (S_ISCHR(mode) || S_ISBLK(mode)) return -EPERM; /* a device needs a capability */
    struct res r;
    int rc = new_name(x, dirfd, path, &r);
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = mknodat(r.dir, r.name, mode, dev) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&r);
    return rc;
}

static int do_symlink(struct caller *x, uint64_t target, int dirfd, uint64_t path)
{
    char text[PATH_MAX];
    ssize_t n = notify_read_string(x->c, target, text, sizeof text);
    if (n < 0) return (int)n;
    struct res r;
    int rc = new_name(x, dirfd, path, &r);
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = symlinkat(text, r.dir, r.name) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&r);
    return rc;
}

/* An existing name to remove or move away: resolved without following its last
 * component, which must be there and writable. */
static int old_name(struct caller *x, int dirfd, uint64_t path, struct res *r, char *canon,
                    size_t cap)
{
    int rc = resolve(x, dirfd, path, false, r);
    if (rc < 0) return rc;
    if (r->obj < 0) return -ENOENT;
    if (!r->name[0] || r->dir < 0) return -EBUSY; /* "/" or "." */
    return allowed_name(x->b, r->dir, r->name, PATH_WRITE, canon, cap);
}

static int do_unlink(struct caller *x, int dirfd, uint64_t path, int flags)
{
    struct res r;
    char p[PATH_MAX];
    int rc = old_name(x, dirfd, path, &r, p, sizeof p);
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = unlinkat(r.dir, r.name, flags & AT_REMOVEDIR) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&r);
    return rc;
}

static int do_rename(struct caller *x, int odir, uint64_t opath, int ndir, uint64_t npath,
                     unsigned flags)
{
    struct res o, n = {.dir = -1, .obj = -1};
    char from[PATH_MAX], to[PATH_MAX];
    int rc = old_name(x, odir, opath, &o, from, sizeof from);
    if (rc == 0) rc = resolve(x, ndir, npath, false, &n);
    if (rc == 0 && (!n.name[0] || n.dir < 0)) rc = -EBUSY;
    if (rc == 0) rc = allowed_name(x->b, n.dir, n.name, PATH_WRITE, to, sizeof to);
    struct stat st;
    /* a directory carries what is in it: nothing the policy keeps may go along */
    if (rc == 0 && fstat(o.obj, &st) == 0 && S_ISDIR(st.st_mode) &&
        !path_rules_rename_keeps(x->b->spec, from, to))
        rc = -EACCES;
    if (rc == 0 && (flags & RENAME_EXCHANGE) && n.obj >= 0 && fstat(n.obj, &st) == 0 &&
        S_ISDIR(st.st_mode) && !path_rules_rename_keeps(x->b->spec, to, from))
        rc = -EACCES;
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = syscall(SYS_renameat2, o.dir, o.name, n.dir, n.name, flags) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&o);
    res_free(&n);
    return rc;
}

static int do_link(struct caller *x, int odir, uint64_t opath, int ndir, uint64_t npath, int flags)
{
    struct res o, n = {.dir = -1, .obj = -1};
    int rc = resolve(x, odir, opath, flags & AT_SYMLINK_FOLLOW, &o);
    if (rc == 0 && o.obj < 0) rc = -ENOENT;
    /* The new name reaches the same file: it must be one the caller may write (a
     * read-only .git/config linked into the workspace would be written through it),
     * and never a denied one. */
    if (rc == 0 && (!o.name[0] || o.dir < 0)) rc = -EPERM;
    if (rc == 0) rc = allowed_obj(x->b, o.obj, PATH_WRITE);
    if (rc == 0) rc = new_name(x, ndir, npath, &n);
    if (rc == 0) {
        mode_t old = as_caller_begin(x);
        rc = linkat(o.dir, o.name, n.dir, n.name, 0) < 0 ? -errno : 0;
        as_caller_end(old);
    }
    res_free(&o);
    res_free(&n);
    return rc;
}

/* ---- the calls that change an object ----------------------------------------------------- */

enum attr_op { ATTR_CHMOD, ATTR_CHOWN, ATTR_TIMES, ATTR_SETX, ATTR_REMOVEX, ATTR_TRUNCATE };

struct attr_args {
    enum attr_op op;
    mode_t mode;
    uid_t uid;
    gid_t gid;
    struct timespec ts[2];
    bool ts_null;
    char xname[XATTR_NAME_MAX + 1];
    void *xval;
    size_t xsize;
    int xflags;
    off_t len;
};

/* Does a's change on the object at path p (a /proc/self/fd link, followed) or, with
 * nofollow, on the name itself. */
static int attr_apply(const struct attr_args *a, const char *p, bool nofollow)
{
    int rc;
    switch (a->op) {
    case ATTR_CHMOD: rc = fchmodat(AT_FDCWD, p, a->mode, 0); break;
    case ATTR_CHOWN:
        rc = fchownat(AT_FDCWD, p, a->uid, a->gid, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
        break;
    case ATTR_TIMES:
        rc = utimensat(AT_FDCWD, p, a->ts_null ? NULL : a->ts, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
        break;
    case ATTR_SETX:
        rc = nofollow ? lsetxattr(p, a->xname, a->xval, a->xsize, a->xflags)
                      : setxattr(p, a->xname, a->xval, a->xsize, a->xflags);
        break;
    case ATTR_REMOVEX: rc = nofollow ? lremovexattr(p, a->xname) : removexattr(p, a->xname); break;
    case ATTR_TRUNCATE: rc = truncate(p, a->len); break;
    default: errno = ENOSYS; rc = -1;
    }
    return rc < 0 ? -errno : 0;
}

static int attr_on(struct caller *x, int obj, const char *nofollow_name, int dir,
                   const struct attr_args *a)
{
    int rc = allowed_obj(x->b, obj, PATH_WRITE);
    if (rc < 0) return rc;
    char p[PATH_MAX];
    if (nofollow_name)
        snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dir, nofollow_name);
    else
        magic_path(obj, p, sizeof p);
    mode_t old = as_caller_begin(x);
    rc = attr_apply(a, p, nofollow_name != NULL);
    as_caller_end(old);
    return rc;
}

/* A change of the object a path names (following its last link unless nofollow). */
static int attr_path(struct caller *x, int dirfd, uint64_t path, bool nofollow,
                     const struct attr_args *a)
{
    struct res r;
    int rc = resolve(x, dirfd, path, !nofollow, &r);
    if (rc == 0 && r.obj < 0) rc = -ENOENT;
    struct stat st;
    bool link = rc == 0 && nofollow && fstat(r.obj, &st) == 0 && S_ISLNK(st.st_mode);
    if (rc == 0) rc = attr_on(x, r.obj, link ? r.name : NULL, r.dir, a);
    res_free(&r);
    return rc;
}

/* A change of the object behind the caller's descriptor n. */
static int attr_fd(struct caller *x, int n, const struct attr_args *a)
{
    int fd = notify_getfd(x->c, n);
    if (fd < 0) return fd;
    int rc = attr_on(x, fd, NULL, -1, a);
    close(fd);
    return rc;
}

static int read_xattr(struct caller *x, uint64_t name, uint64_t val, size_t size,
                      struct attr_args *a)
{
    ssize_t n = notify_read_string(x->c, name, a->xname, sizeof a->xname);
    if (n < 0) return n == -ENAMETOOLONG ? -ERANGE : (int)n;
    if (size > XATTR_SIZE_MAX) return -E2BIG;
    a->xsize = size;
    if (!size) return 0;
    a->xval = malloc(size);
    if (!a->xval) return -ENOMEM;
    return notify_read(x->c, val, a->xval, size);
}

/* utimes/futimesat's timevals (NULL: now) into a. */
static int read_timevals(struct caller *x, uint64_t addr, struct attr_args *a)
{
    a->ts_null = !addr;
    if (!addr) return 0;
    struct timeval tv[2];
    int rc = notify_read(x->c, addr, tv, sizeof tv);
    for (int i = 0; i < 2 && !rc; i++)
        a->ts[i] = (struct timespec){tv[i].tv_sec, tv[i].tv_usec * 1000};
    return rc;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

#define ARG(i) (c->n->data.args[i])
#define IARG(i) ((int)(int32_t)ARG(i))

/* The path-taking attribute calls, as (dirfd, path, nofollow) and their arguments. */
static int serve_attr(struct caller *x, long nr)
{
    const struct notify_call *c = x->c;
    struct attr_args a = {.op = ATTR_CHMOD};
    int dirfd = AT_FDCWD, rc = 0, fd = -1;
    uint64_t path = 0;
    bool nofollow = false, by_fd = false;
    switch (nr) {
#if defined(__x86_64__)
    case __NR_chmod: path = ARG(0), a.mode = (mode_t)ARG(1); break;
    case __NR_chown:
    case __NR_lchown:
        a.op = ATTR_CHOWN, path = ARG(0), a.uid = (uid_t)ARG(1), a.gid = (gid_t)ARG(2);
        nofollow = nr == __NR_lchown;
        break;
    case __NR_utime: {
        a.op = ATTR_TIMES, path = ARG(0), a.ts_null = !ARG(1);
        struct utimbuf ub;
        if (ARG(1) && !(rc = notify_read(x->c, ARG(1), &ub, sizeof ub))) {
            a.ts[0] = (struct timespec){ub.actime, 0};
            a.ts[1] = (struct timespec){ub.modtime, 0};
        }
        break;
    }
    case __NR_utimes: a.op = ATTR_TIMES, path = ARG(0), rc = read_timevals(x, ARG(1), &a); break;
    case __NR_futimesat:
        a.op = ATTR_TIMES, dirfd = IARG(0), path = ARG(1), rc = read_timevals(x, ARG(2), &a);
        break;
#endif
    case __NR_fchmodat: dirfd = IARG(0), path = ARG(1), a.mode = (mode_t)ARG(2); break;
    case __NR_fchmodat2:
        dirfd = IARG(0), path = ARG(1), a.mode = (mode_t)ARG(2);
        if (ARG(3) & AT_SYMLINK_NOFOLLOW) rc = -EOPNOTSUPP; /* a link's mode cannot change */
        break;
    case __NR_fchmod: by_fd = true, fd = IARG(0), a.mode = (mode_t)ARG(1); break;
    case __NR_fchownat:
        a.op = ATTR_CHOWN, dirfd = IARG(0), path = ARG(1), a.uid = (uid_t)ARG(2),
        a.gid = (gid_t)ARG(3), nofollow = ARG(4) & AT_SYMLINK_NOFOLLOW;
        if (ARG(4) & AT_EMPTY_PATH) by_fd = true, fd = dirfd;
        break;
    case __NR_fchown:
        a.op = ATTR_CHOWN, by_fd = true, fd = IARG(0), a.uid = (uid_t)ARG(1), a.gid = (gid_t)ARG(2);
        break;
    case __NR_utimensat:
        a.op = ATTR_TIMES, dirfd = IARG(0), path = ARG(1), nofollow = ARG(3) & AT_SYMLINK_NOFOLLOW;
        a.ts_null = !ARG(2);
        if (ARG(2)) rc = notify_read(x->c, ARG(2), a.ts, sizeof a.ts);
        if (!path) by_fd = true, fd = dirfd; /* futimens */
        break;
    case __NR_setxattr:
    case __NR_lsetxattr:
        a.op = ATTR_SETX, path = ARG(0), nofollow = nr == __NR_lsetxattr, a.xflags = IARG(4);
        rc = read_xattr(x, ARG(1), ARG(2), (size_t)ARG(3), &a);
        break;
    case __NR_fsetxattr:
        a.op = ATTR_SETX, by_fd = true, fd = IARG(0), a.xflags = IARG(4);
        rc = read_xattr(x, ARG(1), ARG(2), (size_t)ARG(3), &a);
        break;
    case __NR_removexattr:
    case __NR_lremovexattr:
        a.op = ATTR_REMOVEX, path = ARG(0), nofollow = nr == __NR_lremovexattr;
        rc = read_xattr(x, ARG(1), 0, 0, &a);
        break;
    case __NR_fremovexattr:
        a.op = ATTR_REMOVEX, by_fd = true, fd = IARG(0);
        rc = read_xattr(x, ARG(1), 0, 0, &a);
        break;
    case __NR_truncate: a.op = ATTR_TRUNCATE, path = ARG(0), a.len = (off_t)ARG(1); break;
    default: rc = -ENOSYS;
    }
    if (rc == 0) rc = by_fd ? attr_fd(x, fd, &a) : attr_path(x, dirfd, path, nofollow, &a);
    free(a.xval);
    return rc;
}

void fs_broker_serve(struct fs_broker *b, struct notify *nf, const struct notify_call *c)
{
    struct caller x = {.b = b, .nf = nf, .c = c};
    long nr = c->n->data.nr;
    int rc;
    switch (nr) {
#if defined(__x86_64__)
    case __NR_open: do_open(&x, AT_FDCWD, ARG(0), IARG(1), (mode_t)ARG(2)); return;
    case __NR_creat:
        do_open(&x, AT_FDCWD, ARG(0), O_CREAT | O_WRONLY | O_TRUNC, (mode_t)ARG(1));
        return;
    case __NR_mkdir: rc = do_mkdir(&x, AT_FDCWD, ARG(0), (mode_t)ARG(1)); break;
    case __NR_mknod: rc = do_mknod(&x, AT_FDCWD, ARG(0), (mode_t)ARG(1), (dev_t)ARG(2)); break;
    case __NR_symlink: rc = do_symlink(&x, ARG(0), AT_FDCWD, ARG(1)); break;
    case __NR_link: rc = do_link(&x, AT_FDCWD, ARG(0), AT_FDCWD, ARG(1), 0); break;
    case __NR_unlink: rc = do_unlink(&x, AT_FDCWD, ARG(0), 0); break;
    case __NR_rmdir: rc = do_unlink(&x, AT_FDCWD, ARG(0), AT_REMOVEDIR); break;
    case __NR_rename: rc = do_rename(&x, AT_FDCWD, ARG(0), AT_FDCWD, ARG(1), 0); break;
#endif
    case __NR_openat: do_open(&x, IARG(0), ARG(1), IARG(2), (mode_t)ARG(3)); return;
    case __NR_openat2: rc = -ENOSYS; break; /* its RESOLVE_ flags are not ours: libc falls back */
    case __NR_mkdirat: rc = do_mkdir(&x, IARG(0), ARG(1), (mode_t)ARG(2)); break;
    case __NR_mknodat: rc = do_mknod(&x, IARG(0), ARG(1), (mode_t)ARG(2), (dev_t)ARG(3)); break;
    case __NR_symlinkat: rc = do_symlink(&x, ARG(0), IARG(1), ARG(2)); break;
    case __NR_linkat: rc = do_link(&x, IARG(0), ARG(1), IARG(2), ARG(3), IARG(4)); break;
    case __NR_unlinkat: rc = do_unlink(&x, IARG(0), ARG(1), IARG(2)); break;
    case __NR_renameat: rc = do_rename(&x, IARG(0), ARG(1), IARG(2), ARG(3), 0); break;
    case __NR_renameat2:
        rc = do_rename(&x, IARG(0), ARG(1), IARG(2), ARG(3), (unsigned)ARG(4));
        break;
    case __NR_setxattrat:
    case __NR_removexattrat: rc = -ENOSYS; break; /* libc uses the older calls */
    default: rc = serve_attr(&x, nr);
    }
    notify_answer(nf, c->n->id, rc, 0);
}

/* ---- FIFOs waiting for their peer ---------------------------------------------------------- */

int fs_broker_pollfds(const struct fs_broker *b, struct pollfd *p, int max)
{
    int n = 0;
    for (int i = 0; i < b->nwaiting && n < max; i++)
        p[n++] = (struct pollfd){b->waiting[i].sock, POLLIN, 0};
    return n;
}

void fs_broker_serve_waiting(struct fs_broker *b, struct notify *nf, const struct pollfd *p, int n)
{
    for (int k = n - 1; k >= 0; k--) {
        bool gone = !notify_valid(nf, b->waiting[k].id);
        if (!p[k].revents && !gone) continue;
        if (!gone) {
            char tag = 0, err = 0;
            int fd = -1, nfds = 0;
            int got = fdframe_recv_tagged(b->waiting[k].sock, MSG_DONTWAIT, &tag, &fd, 1, &nfds);
            if (got == 1 && tag == 'F' && nfds == 1) {
                int e = notify_answer_fd(nf, b->waiting[k].id, fd, b->waiting[k].cloexec);
                if (e < 0) notify_answer(nf, b->waiting[k].id, e, 0);
            } else {
                err = got == 1 && nfds == 0 ? tag : EIO;
                notify_answer(nf, b->waiting[k].id, -(err ? err : EIO), 0);
            }
            if (fd >= 0) close(fd);
        }
        kill(b->waiting[k].pid, SIGKILL); /* the caller went: its open with it */
        close(b->waiting[k].sock);
        b->waiting[k] = b->waiting[--b->nwaiting];
    }
}
