/* cgroup_caps: a cgroup per sandbox for its caps (see cgroup_caps.h). */
#include "sandbox/cgroup_caps.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/mem.h"

static const char *const controller[CGROUP_CAP_N] = {"pids", "memory"};
/* This server's directory in each controller's hierarchy; empty when unavailable. On
 * cgroup v2 both may be the same directory. */
static char base[CGROUP_CAP_N][PATH_MAX];
static unsigned long counter;

/* Our own cgroup path in the hierarchy: v1, the line whose controllers include
 * ctrl; v2, the "0::" line. Returns 0 or -ENOENT. */
static int own_cgroup(bool v2, const char *ctrl, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -errno;
    char line[PATH_MAX + 64];
    size_t cl = strlen(ctrl);
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrls = c1 + 1;
        bool match = false;
        if (v2) {
            match = !*ctrls && !strncmp(line, "0", 1);
        } else {
            for (const char *p = ctrls; (p = strstr(p, ctrl)) && !match; p += cl)
                match = (p == ctrls || p[-1] == ',') && (p[cl] == 0 || p[cl] == ',');
        }
        if (match && strlen(c2 + 1) < n) {
            snprintf(out, n, "%s", c2 + 1);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* The mount point of ctrl's v1 hierarchy, else of cgroup2 (*v2 set), from
 * mountinfo. Returns 0 or -ENOENT. */
static int hierarchy_mount(const char *ctrl, bool *v2, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return -errno;
    char line[4096], v2path[PATH_MAX] = "";
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS */
        char *dash = strstr(line, " - ");
        if (!dash) continue;
        char mnt[PATH_MAX], fstype[64], src[256], sopts[1024] = "";
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1) continue;
        if (sscanf(dash + 3, "%63s %255s %1023s", fstype, src, sopts) < 2) continue;
        if (!strcmp(fstype, "cgroup2") && !v2path[0]) snprintf(v2path, sizeof v2path, "%s", mnt);
        if (strcmp(fstype, "cgroup")) continue;
        char *save = NULL;
        for (char *t = strtok_r(sopts, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (!strcmp(t, ctrl) && strlen(mnt) < n) {
                snprintf(out, n, "%s", mnt);
                *v2 = false;
                rc = 0;
            }
    }
    fclose(f);
    if (rc && v2path[0] && strlen(v2path) < n) {
        snprintf(out, n, "%s", v2path);
        *v2 = true;
        rc = 0;
    }
    return rc;
}

/* v2 only: whether the cgroup at dir hands ctrl down to the cgroups made in it. */
static bool delegates(const char *dir, const char *ctrl)
{
    char p[PATH_MAX + 32], buf[512];
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return false;
    buf[r] = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
        if (!strcmp(t, ctrl)) return true;
    return false;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -errno;
    close(fd);
    return rc;
}

/* Writes text to dir/name. */
static int write_at(const char *dir, const char *name, const char *text)
{
    char file[PATH_MAX + 64];
    if (snprintf(file, sizeof file, "%s/%s", dir, name) >= (int)sizeof file) return -ENAMETOOLONG;
    return write_text(file, text);
}

/* Whether a process has that pid here. A server's name is no sure sign (it may run
 * under another name, as a bench's copies do), so any process with the pid keeps the
 * directory: a reused pid only delays its removal to a later start. */
static bool pid_alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* Removes the empty cgroup at path after its empty child cgroups, depth levels
 * down (a server's directory holds its sandboxes' cgroups, which hold none). rmdir
 * fails on a cgroup that still has a task or a child: that is what keeps anything
 * in use. Returns whether path went. */
static bool remove_empty_tree(int parent, const char *name, int depth)
{
    int fd = depth > 0 ? openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0) close(fd);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            remove_empty_tree(dirfd(d), e->d_name, depth - 1);
    if (d) closedir(d);
    return unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

/* Removes what servers killed without their shutdown (SIGKILL, a crash) left in
 * dir: exec-server.PID directories whose PID no process has any more, when they
 * are empty. Returns how many went. */
static int sweep_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        if (e->d_type != DT_DIR || strncmp(e->d_name, "exec-server.", 12)) continue;
        long pid = strtol(e->d_name + 12, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() || pid_alive(pid)) continue;
        n += remove_empty_tree(dirfd(d), e->d_name, 2);
    }
    closedir(d);
    return n;
}

/* Makes this server's directory in ctrl's hierarchy into out. */
static int init_one(const char *ctrl, char *out, size_t n, int *swept)
{
    char mnt[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
    bool v2 = false;
    int rc = hierarchy_mount(ctrl, &v2, mnt, sizeof mnt);
    if (!rc) rc = own_cgroup(v2, ctrl, own, sizeof own);
    if (rc) return rc;
    if (snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(own, "/") ? own : "") >= (int)sizeof dir)
        return -ENAMETOOLONG;
    if (v2 && !delegates(dir, ctrl)) return -EPERM;
    if (geteuid() == 0) *swept += sweep_leftovers(dir);
    char mine[PATH_MAX];
    if (snprintf(mine, sizeof mine, "%s/exec-server.%d", dir, (int)getpid()) >= (int)sizeof mine)
        return -ENAMETOOLONG;
    if (mkdir(mine, 0755) < 0 && errno != EEXIST) return -errno;
    /* v2: our directory must hand the controller on to each sandbox's cgroup. */
    char plus[32];
    snprintf(plus, sizeof plus, "+%s", ctrl);
    if (v2 && (rc = write_at(mine, "cgroup.subtree_control", plus))) {
        rmdir(mine);
        return rc;
    }
    snprintf(out, n, "%s", mine);
    return 0;
}

int cgroup_caps_init(int *memory_err, int *swept)
{
    *swept = 0;
    int rc = init_one(controller[CGROUP_CAP_PIDS], base[CGROUP_CAP_PIDS], PATH_MAX, swept);
    *memory_err = init_one(controller[CGROUP_CAP_MEMORY], base[CGROUP_CAP_MEMORY], PATH_MAX, swept);
    return rc;
}

bool cgroup_caps_available(enum cgroup_cap which)
{
    return base[which][0] != 0;
}

/* The limit files of one cap, written into dir. A memory limit also bounds swap
 * where the kernel counts it (v1 memsw; v2 swap.max), or a sandbox could page its
 * way past it; those files are absent without swap accounting. */
static int write_limits(enum cgroup_cap c, const char *dir, unsigned max_procs, uint64_t max_mem)
{
    char num[32];
    if (c == CGROUP_CAP_PIDS) {
        snprintf(num, sizeof num, "%u", max_procs);
        return write_at(dir, "pids.max", num);
    }
    snprintf(num, sizeof num, "%llu", (unsigned long long)max_mem);
    int rc = write_at(dir, "memory.limit_in_bytes", num);
    if (rc == -ENOENT) { /* v2 */
        rc = write_at(dir, "memory.max", num);
        int sw = rc ? 0 : write_at(dir, "memory.swap.max", "0");
        return sw == -ENOENT ? 0 : rc ? rc : sw;
    }
    int sw = rc ? 0 : write_at(dir, "memory.memsw.limit_in_bytes", num);
    return sw == -ENOENT ? 0 : rc ? rc : sw;
}

/* What the init joins the new cgroup at path by (cgroup_caps.h): its tasks file on
 * v1 (v2 has none), else the directory for clone3. Returns the fd or -errno. */
static int open_join(const char *path)
{
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/tasks", path);
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Makes a new sandbox's cgroups (cgroup_caps_create). */
static int make_cgroups(unsigned max_procs, uint64_t max_memory, struct cgroup_caps *out)
{
    for (int c = 0; c < CGROUP_CAP_N; c++) {
        out->path[c] = NULL;
        out->join_fd[c] = -1;
    }
    out->max_procs = max_procs;
    out->max_memory = max_memory;
    bool want[CGROUP_CAP_N] = {max_procs && base[CGROUP_CAP_PIDS][0],
                               max_memory && base[CGROUP_CAP_MEMORY][0]};
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int rc = 0;
    for (int c = 0; c < CGROUP_CAP_N && !rc; c++) {
        if (!want[c]) continue;
        /* v2: one directory carries every controller. */
        const char *dir = c && out->path[0] && !strcmp(base[c], base[0]) ? out->path[0] : NULL;
        if (!dir) {
            char *path = xasprintf("%s/s%lu", base[c], n);
            if (mkdir(path, 0755) < 0) {
                rc = -errno;
                free(path);
                break;
            }
            out->path[c] = path;
            dir = path;
            int fd = open_join(path);
            if (fd < 0)
                rc = fd;
            else
                out->join_fd[c] = fd;
        }
        if (!rc) rc = write_limits((enum cgroup_cap)c, dir, max_procs, max_memory);
    }
    if (rc) cgroup_caps_remove(out);
    return rc;
}

/* Cgroups ready for cgroup_caps_create to take: made ahead (cgroup_caps_prepare), or
 * a finished sandbox's given back (cgroup_caps_release). They keep no descriptor
 * (join_fd -1): a server between sandboxes holds the descriptors it held before them. */
#define READY_MAX 2
static struct cgroup_caps ready[READY_MAX];
static int n_ready;
static bool shut; /* cgroup_caps_shutdown ran: nothing more is kept */
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;

/* Adds cg (no descriptor open) to the ready sets unless they are full or the server
 * is shutting down; the ready set then owns its paths. Returns whether it was kept. */
static bool keep_ready(const struct cgroup_caps *cg)
{
    pthread_mutex_lock(&ready_lock);
    bool kept = !shut && n_ready < READY_MAX;
    if (kept) ready[n_ready++] = *cg;
    pthread_mutex_unlock(&ready_lock);
    return kept;
}

int cgroup_caps_create(unsigned max_procs, uint64_t max_memory, struct cgroup_caps *out)
{
    pthread_mutex_lock(&ready_lock);
    bool taken = n_ready > 0 && ready[n_ready - 1].max_procs == max_procs &&
                 ready[n_ready - 1].max_memory == max_memory;
    if (taken) *out = ready[--n_ready];
    pthread_mutex_unlock(&ready_lock);
    for (int c = 0; c < CGROUP_CAP_N && taken; c++) {
        if (!out->path[c]) continue;
        out->join_fd[c] = open_join(out->path[c]);
        if (out->join_fd[c] < 0) { /* removed under us: make a new one */
            out->join_fd[c] = -1;
            cgroup_caps_remove(out);
            taken = false;
        }
    }
    return taken ? 0 : make_cgroups(max_procs, max_memory, out);
}

bool cgroup_caps_prepare_wanted(void)
{
    pthread_mutex_lock(&ready_lock);
    bool wanted = !shut && n_ready == 0;
    pthread_mutex_unlock(&ready_lock);
    return wanted;
}

void cgroup_caps_prepare(unsigned max_procs, uint64_t max_memory)
{
    for (;;) {
        pthread_mutex_lock(&ready_lock);
        bool full = shut || n_ready == READY_MAX;
        pthread_mutex_unlock(&ready_lock);
        struct cgroup_caps cg;
        if (full || make_cgroups(max_procs, max_memory, &cg) < 0 ||
            (!cg.path[CGROUP_CAP_PIDS] && !cg.path[CGROUP_CAP_MEMORY]))
            return;
        for (int c = 0; c < CGROUP_CAP_N; c++) {
            if (cg.join_fd[c] >= 0) close(cg.join_fd[c]);
            cg.join_fd[c] = -1;
        }
        if (!keep_ready(&cg)) {
            cgroup_caps_remove(&cg);
            return;
        }
    }
}

/* Whether a finished sandbox's cgroups can serve the next: a pids cgroup alone (a
 * memory cgroup keeps the page cache charged to it, which would count against the
 * next sandbox) that no task is left in. Its limit is written again, whatever
 * became of it. */
static bool reusable(struct cgroup_caps *cg)
{
    if (!cg->path[CGROUP_CAP_PIDS] || cg->path[CGROUP_CAP_MEMORY] || cg->max_memory) return false;
    char file[PATH_MAX + 32], now[32];
    snprintf(file, sizeof file, "%s/pids.current", cg->path[CGROUP_CAP_PIDS]);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, now, sizeof now - 1);
    if (fd >= 0) close(fd);
    return n == 2 && !memcmp(now, "0\n", 2) &&
           write_limits(CGROUP_CAP_PIDS, cg->path[CGROUP_CAP_PIDS], cg->max_procs, 0) == 0;
}

void cgroup_caps_release(struct cgroup_caps *cg)
{
    for (int c = 0; c < CGROUP_CAP_N; c++) {
        if (cg->join_fd[c] >= 0) close(cg->join_fd[c]);
        cg->join_fd[c] = -1;
    }
    if (!reusable(cg) || !keep_ready(cg)) {
        cgroup_caps_remove(cg);
        return;
    }
    for (int c = 0; c < CGROUP_CAP_N; c++)
        cg->path[c] = NULL; /* the ready set owns them now */
}

void cgroup_caps_remove(struct cgroup_caps *cg)
{
    for (int c = 0; c < CGROUP_CAP_N; c++) {
        if (cg->join_fd[c] >= 0) close(cg->join_fd[c]);
        cg->join_fd[c] = -1;
        if (cg->path[c]) rmdir(cg->path[c]);
        free(cg->path[c]);
        cg->path[c] = NULL;
    }
}

bool cgroup_caps_join_by_clone(int join_fd)
{
    struct stat sb;
    return fstat(join_fd, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int cgroup_caps_join_self(int join_fd)
{
    /* "0" is the writer: the calling thread alone with v1's `tasks`, which needs no
     * global lock (cgroup_caps.h). A v2 directory's cgroup.procs, where the init
     * could not be cloned into it, moves the process, with the lock. */
    int fd = cgroup_caps_join_by_clone(join_fd)
                 ? openat(join_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC)
                 : join_fd;
    int rc = fd < 0 ? -errno : write(fd, "0", 1) == 1 ? 0 : -errno;
    if (fd >= 0 && fd != join_fd) close(fd);
    return rc;
}

void cgroup_caps_shutdown(void)
{
    pthread_mutex_lock(&ready_lock);
    shut = true;
    while (n_ready > 0)
        cgroup_caps_remove(&ready[--n_ready]);
    pthread_mutex_unlock(&ready_lock);
    for (int c = CGROUP_CAP_N - 1; c >= 0; c--) {
        if (base[c][0] && (c == 0 || strcmp(base[c], base[0]))) rmdir(base[c]);
        base[c][0] = 0;
    }
}
