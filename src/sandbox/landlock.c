/* landlock: the sandbox's Landlock ruleset (see landlock.h).
 *
 * Debian's <linux/landlock.h> stops at ABI 2 while this kernel speaks 7, so the
 * constants and the attribute layouts are defined here and the handled rights are
 * masked by the ABI the kernel reports (DESIGN.md pitfall 12). */
#include "sandbox/landlock.h"
#include "sandbox/cgroup_mounts.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

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

/* A path whose rights a rule of an ancestor must not reach, and what it gets. */
struct carve {
    const char *path;
    uint64_t access; /* 0: nothing (a rule of its own comes later, or none) */
};

static bool strictly_under(const char *anc, const char *p)
{
    size_t n = strlen(anc);
    if (n == 1) return p[0] == '/' && p[1] != 0;
    return !strncmp(anc, p, n) && p[n] == '/';
}

/* A rule for path with access, but for the carves under it: Landlock can only add
 * rights down a tree, so path is granted entry by entry along the way to each carve,
 * and the carve gets its own access. */
static int add_rule_except(int rfd, const char *path, uint64_t access, const struct carve *cv,
                           int ncv)
{
    bool below = false;
    for (int i = 0; i < ncv; i++) {
        if (!strcmp(cv[i].path, path)) return cv[i].access ? add_rule(rfd, path, cv[i].access) : 0;
        below |= strictly_under(path, cv[i].path);
    }
    if (!below) return add_rule(rfd, path, access);
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT || errno == EACCES ? 0 : -errno;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s%s%s", path, strcmp(path, "/") ? "/" : "", e->d_name) >=
            (int)sizeof p)
            continue;
        rc = add_rule_except(rfd, p, access, cv, ncv);
    }
    closedir(d);
    return rc ? rc : add_rule(rfd, path, access & LL_FS_READ_DIR);
}

/* What a root's rule must not reach without a view of the sandbox's own (no
 * namespaces): the host's /dev, whose raw disks root may read (the device rules come
 * later), and, for a sandbox capped by cgroups, every cgroup file system (a command
 * writing another cgroup's procs would leave its cap: read-only, as the view seals
 * them). Read once a ruleset (the mount table); the strings in own are freed by
 * carves_free. */
#define MAX_CARVES 32
struct carves {
    const char *path[MAX_CARVES]; /* [0] is /dev when there are any */
    int n;
    char **own;
};

static int carves_read(const struct sandbox_spec *s, struct carves *c)
{
    c->n = 0;
    c->own = NULL;
    if (!s->landlock_only) return 0;
    c->path[c->n++] = "/dev";
    if (!s->seal_cgroups) return 0;
    /* A cgroup file system not carved out would stay writable under a root's rule:
     * fail closed when the table cannot be read or holds more than fit. */
    int m = sandbox_cgroup_mounts(&c->own);
    if (m < 0) return m;
    if (m >= MAX_CARVES) return -E2BIG;
    for (int i = 0; i < m; i++)
        c->path[c->n++] = c->own[i];
    return 0;
}

static void carves_free(struct carves *c)
{
    for (char **m = c->own; m && *m; m++)
        free(*m);
    free(c->own);
}

static int add_root_rule(int rfd, const struct sandbox_spec *s, const struct carves *c,
                         const char *path, uint64_t access)
{
    /* Without a view of its own, a root inside the host's /dev would bring its device
     * nodes (the view shows directories only, with nodev): only /dev/shm's are roots. */
    if (s->landlock_only && strictly_under("/dev", path) && strcmp(path, "/dev/shm") &&
        !strictly_under("/dev/shm", path))
        return 0;
    struct carve cv[MAX_CARVES];
    for (int i = 0; i < c->n; i++) /* /dev nothing, the cgroup file systems read */
        cv[i] = (struct carve){c->path[i], i == 0 ? 0 : access & LL_FS_READ};
    return add_rule_except(rfd, path, access, cv, c->n);
}

/* The ruleset, built in the finished view (so /dev/pts is the private instance).
 * Without file enforcement every path stays allowed, but the process still gets a
 * Landlock domain: its ptrace and signal scoping keep processes outside closed.
 * writable_read_only: the writable roots get read rights only (a command whose
 * writes the init's broker makes: fs_broker.h). */
int sandbox_landlock_ruleset(const struct sandbox_spec *s, bool writable_read_only, int *out)
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
    int rfd = (int)fd;
    struct carves cv;
    int rc = carves_read(s, &cv);
    if (!s->enforce_fs) {
        if (!rc) rc = add_root_rule(rfd, s, &cv, "/", all);
    } else {
        uint64_t w = writable_read_only ? LL_FS_READ & all : all;
        for (const char *const *p = s->readable; p && *p && !rc; p++)
            rc = add_root_rule(rfd, s, &cv, *p, LL_FS_READ & all);
        for (const char *const *p = s->writable; p && *p && !rc; p++)
            rc = add_root_rule(rfd, s, &cv, *p, w);
    }
    carves_free(&cv);
    if (!rc && (s->enforce_fs || s->landlock_only)) {
        /* The private /dev and /proc every program expects. Without a view of its
         * own the host's devpts holds every session's terminal: only the multiplexer
         * (new terminals), and the command's own (sandbox_landlock_allow_device). */
        static const char *const devs[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                           "/dev/urandom", "/dev/tty",  "/dev/pts",  NULL};
        static const char *const host_devs[] = {"/dev/null",   "/dev/zero",     "/dev/full",
                                                "/dev/random", "/dev/urandom",  "/dev/tty",
                                                "/dev/ptmx",   "/dev/pts/ptmx", NULL};
        const char *const *d = s->landlock_only ? host_devs : devs;
        for (int i = 0; d[i] && !rc; i++)
            rc = add_rule(rfd, d[i], LL_FS_DEVICE & all);
        /* Without a view of its own, /dev and /dev/shm are the host's (another
         * session's terminals, another program's shared memory): nothing of them but
         * the nodes above and a root the policy names in /dev/shm; /proc is read-only. */
        if (!rc && !s->landlock_only) rc = add_rule(rfd, "/dev", LL_FS_READ_DIR);
        if (!rc && !s->landlock_only) rc = add_rule(rfd, "/dev/shm", all);
        uint64_t proc = (s->landlock_only ? LL_FS_READ : LL_FS_READ | LL_FS_WRITE_FILE) & all;
        if (!rc) rc = add_rule(rfd, "/proc", proc);
    }
    if (rc) {
        close(rfd);
        return rc;
    }
    *out = rfd;
    return 0;
}

int sandbox_landlock_allow_device(int ruleset_fd, const char *path)
{
    if (ruleset_fd < 0) return 0;
    int abi = sandbox_landlock_abi();
    return add_rule(ruleset_fd, path, LL_FS_DEVICE & fs_rights_for_abi(abi));
}

int sandbox_landlock_restrict(int ruleset_fd)
{
    if (ruleset_fd < 0) return 0;
    return syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0 ? -errno : 0;
}
