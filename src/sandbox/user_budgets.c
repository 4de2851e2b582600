/* user_budgets: each sandbox's share of the kernel's per-user counts (see
 * user_budgets.h). */
#include "sandbox/user_budgets.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "util/procfs.h"

static const char *const names[USER_COUNT_N] = {
    [USER_COUNT_USER_NS] = "max_user_namespaces",
    [USER_COUNT_PID_NS] = "max_pid_namespaces",
    [USER_COUNT_UTS_NS] = "max_uts_namespaces",
    [USER_COUNT_IPC_NS] = "max_ipc_namespaces",
    [USER_COUNT_NET_NS] = "max_net_namespaces",
    [USER_COUNT_MNT_NS] = "max_mnt_namespaces",
    [USER_COUNT_CGROUP_NS] = "max_cgroup_namespaces",
    [USER_COUNT_TIME_NS] = "max_time_namespaces",
    [USER_COUNT_INOTIFY_INSTANCES] = "max_inotify_instances",
    [USER_COUNT_INOTIFY_WATCHES] = "max_inotify_watches",
    [USER_COUNT_FANOTIFY_GROUPS] = "max_fanotify_groups",
    [USER_COUNT_FANOTIFY_MARKS] = "max_fanotify_marks",
};

/* The host-wide sysctls behind the same counts: the initial user namespace's limits,
 * which a user namespace's own files do not show (they start at INT_MAX). */
static const char *const host_wide[USER_COUNT_N] = {
    [USER_COUNT_INOTIFY_INSTANCES] = "/proc/sys/fs/inotify/max_user_instances",
    [USER_COUNT_INOTIFY_WATCHES] = "/proc/sys/fs/inotify/max_user_watches",
    [USER_COUNT_FANOTIFY_GROUPS] = "/proc/sys/fs/fanotify/max_user_groups",
    [USER_COUNT_FANOTIFY_MARKS] = "/proc/sys/fs/fanotify/max_user_marks",
};

/* ---- the shares (pure) ---------------------------------------------------------------- */

static long count_share(enum user_count c, long uid)
{
    if (uid < 0) return -1;
    long s = uid / USER_BUDGET_SHARE;
    if (s < 1 && uid > 0) s = 1;
    if (c <= USER_COUNT_TIME_NS && s > USER_BUDGET_MAX_NS) s = USER_BUDGET_MAX_NS;
    return s;
}

static rlim_t rlimit_share(rlim_t uid)
{
    if (uid == RLIM_INFINITY) return RLIM_INFINITY;
    rlim_t s = uid / USER_BUDGET_SHARE;
    return s < 1 && uid > 0 ? 1 : s;
}

void user_budgets_share(const struct user_budgets *uid, struct user_budgets *share)
{
    for (int c = 0; c < USER_COUNT_N; c++)
        share->count[c] = count_share((enum user_count)c, uid->count[c]);
    share->sigpending = rlimit_share(uid->sigpending);
    share->msgqueue = rlimit_share(uid->msgqueue);
    rlim_t hard = uid->nofile.rlim_max;
    share->nofile.rlim_max =
        hard == RLIM_INFINITY ? RLIM_INFINITY : hard - hard / USER_BUDGET_SHARE;
    share->nofile.rlim_cur = uid->nofile.rlim_cur < share->nofile.rlim_max ? uid->nofile.rlim_cur
                                                                           : share->nofile.rlim_max;
}

/* ---- the spawner's side --------------------------------------------------------------- */

/* The kernel's ceiling for descriptors (fs.nr_open), read with the limits: the inits, forks
 * of the spawner, raise their own soft limit to it without reading it again. */
static long kernel_nr_open = -1;

/* A resource is glibc's __rlimit_resource_t (an enum under _GNU_SOURCE): an int would be
 * a sign conversion to clang's -Wconversion. */
static rlim_t soft_limit(__rlimit_resource_t resource)
{
    struct rlimit r;
    return getrlimit(resource, &r) == 0 ? r.rlim_cur : RLIM_INFINITY;
}

static void read_uid_limits(struct user_budgets *uid)
{
    int dir = open("/proc/sys/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int c = 0; c < USER_COUNT_N; c++) {
        long own = dir >= 0 ? procfs_number(dir, names[c]) : -1;
        long host = host_wide[c] ? procfs_number(AT_FDCWD, host_wide[c]) : -1;
        uid->count[c] = own < 0 ? host : host < 0 || own < host ? own : host;
    }
    if (dir >= 0) close(dir);
    uid->sigpending = soft_limit(RLIMIT_SIGPENDING);
    uid->msgqueue = soft_limit(RLIMIT_MSGQUEUE);
    if (getrlimit(RLIMIT_NOFILE, &uid->nofile) < 0)
        uid->nofile = (struct rlimit){RLIM_INFINITY, RLIM_INFINITY};
    /* Unlimited, the server's soft limit is the kernel's ceiling (server_run.c) */
    kernel_nr_open = procfs_number(AT_FDCWD, "/proc/sys/fs/nr_open");
    if (uid->nofile.rlim_max == RLIM_INFINITY && kernel_nr_open > 0)
        uid->nofile.rlim_max = (rlim_t)kernel_nr_open;
}

static struct user_budgets shares;
static bool shares_read;

const struct user_budgets *user_budgets_get(void)
{
    if (shares_read) return &shares;
    struct user_budgets uid;
    read_uid_limits(&uid);
    user_budgets_share(&uid, &shares);
    shares_read = true;
    return &shares;
}

/* ---- the notes ------------------------------------------------------------------------ */

#define NOTES_SIZE 4096
#define NOTES_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* One flag a note, shared by the server's spawners and their inits; NULL: none. */
static unsigned char *noted;
static int notes_fd = -1;
static pthread_once_t notes_once = PTHREAD_ONCE_INIT;

static void notes_make(void)
{
    int fd = memfd_create("exec-server-notes", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return;
    if (ftruncate(fd, NOTES_SIZE) < 0 || fcntl(fd, F_ADD_SEALS, NOTES_SEALS) < 0) {
        close(fd);
        return;
    }
    notes_fd = fd;
}

int user_budgets_notes_fd(void)
{
    pthread_once(&notes_once, notes_make);
    return notes_fd;
}

void user_budgets_notes_attach(int fd)
{
    /* The seals tell our page from whatever else the descriptor could be. */
    bool ours = fcntl(fd, F_GET_SEALS) == NOTES_SEALS;
    void *p = ours ? mmap(NULL, NOTES_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (ours) close(fd);
    if (p == MAP_FAILED)
        p = mmap(NULL, NOTES_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    noted = p == MAP_FAILED ? NULL : p;
}

void user_budgets_note_once(enum user_budgets_note n, const char *fmt, ...)
{
    if (noted && __atomic_exchange_n(&noted[n], 1, __ATOMIC_RELAXED)) return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_warn("%s", text);
}

/* ---- the init's side ------------------------------------------------------------------ */

/* Lowers resource's soft and hard limits to at most v; the command inherits them and,
 * without CAP_SYS_RESOURCE in the host's user namespace, cannot raise them. */
static int lower_rlimit(__rlimit_resource_t resource, rlim_t v)
{
    struct rlimit r;
    if (v == RLIM_INFINITY || getrlimit(resource, &r) < 0) return 0;
    if (r.rlim_cur > v) r.rlim_cur = v;
    if (r.rlim_max > v) r.rlim_max = v;
    return setrlimit(resource, &r) < 0 ? -errno : 0;
}

static int write_count(int dir, const char *name, long v)
{
    int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -errno; /* a count this kernel does not keep */
    char text[24];
    int n = snprintf(text, sizeof text, "%ld", v);
    int rc = write(fd, text, (size_t)n) == n ? 0 : -errno;
    close(fd);
    return rc;
}

/* The init's own soft descriptor limit up to its hard one: it passes the managed
 * proxy's connections over a Unix socket, and must not be refused for the descriptors
 * its command holds in flight (the command's limit is lower: user_budgets.h). */
static void raise_own_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) < 0 || r.rlim_cur >= r.rlim_max) return;
    r.rlim_cur = r.rlim_max;
    /* An unlimited hard limit cannot be the soft one: the kernel's ceiling can. */
    if (r.rlim_cur == RLIM_INFINITY && kernel_nr_open > 0) r.rlim_cur = (rlim_t)kernel_nr_open;
    (void)setrlimit(RLIMIT_NOFILE, &r);
}

int user_budgets_apply(const struct user_budgets *b, bool own_userns, const char **what)
{
    raise_own_nofile();
    int rc = lower_rlimit(RLIMIT_SIGPENDING, b->sigpending), r;
    if (rc < 0) *what = "RLIMIT_SIGPENDING";
    if ((r = lower_rlimit(RLIMIT_MSGQUEUE, b->msgqueue)) < 0 && !rc) {
        rc = r;
        *what = "RLIMIT_MSGQUEUE";
    }
    /* Without a namespace of its own the files are the host's: never ours to change. */
    if (!own_userns) return rc;
    /* The files the init opens are its own namespace's: the kernel picks them by the
     * opener's user namespace. */
    int dir = open("/proc/sys/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        *what = "/proc/sys/user";
        return -errno;
    }
    for (int c = 0; c < USER_COUNT_N; c++) {
        if (b->count[c] < 0) continue;
        if ((r = write_count(dir, names[c], b->count[c])) < 0 && !rc) {
            rc = r;
            *what = names[c];
        }
    }
    close(dir);
    return rc;
}
