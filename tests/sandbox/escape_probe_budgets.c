/*
 * escape_probe_budgets: the attempts on the kernel's per-user counts, which one process
 * can spend for every other process of its uid: inotify instances and watches, fanotify
 * groups, nested user namespaces, queued signals, POSIX message queues and descriptors
 * in flight over Unix sockets. The kernel charges a user namespace's counts to its
 * creator's uid as well, so a sandboxed command that takes them all takes them from the
 * server, from the other sandboxes and (a root server's) from every root process on the
 * host.
 *
 * `hold=KIND[:MAX]` takes as many of KIND as the kernel gives, at most MAX (none: no
 * bound), keeps them, and prints how many it got and what stopped it (the errno, or
 * "ok" when MAX was reached). `hold_wait=SECONDS` then keeps everything held until its
 * standard input has something to read or ends, or SECONDS pass, so the test can try
 * the rest of the machine meanwhile. Run on the host with MAX 1, the same attempt asks
 * whether a process of the uid still gets one.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <mqueue.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape_probe.h"

/* Descriptors are what most counts are held by: as many as the hard limit allows. */
static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
    }
}

static void report(const char *kind, long made, long max, int err)
{
    char label[64];
    snprintf(label, sizeof label, "hold:%s", kind);
    if (max && made >= max)
        emit_res(label, "ok", "made=%ld (the bound asked for)", made);
    else
        emit(label, err ? err : EIO, "made=%ld", made);
}

/* Each take_* takes one of its count and keeps it: 0, or the errno that refused it. */
static int take_inotify(long i)
{
    (void)i;
    return inotify_init1(IN_CLOEXEC) < 0 ? errno : 0;
}

static int take_fanotify(long i)
{
    (void)i; /* FAN_REPORT_FID: the kind of group a process without CAP_SYS_ADMIN may make */
    return fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC, O_RDONLY) < 0 ? errno : 0;
}

/* inotify watches: one instance, a watch on every file and directory under /usr. An
 * inode met again (a hard link, a bind mount) gives back its watch's descriptor, which
 * the kernel numbers upwards: only a new one counts. */
static int watch_fd = -1, last_wd;
static long watches, watch_max;
static int watch_err;

static int watch_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st, (void)type, (void)f;
    int wd = inotify_add_watch(watch_fd, path, IN_ATTRIB | IN_DONT_FOLLOW);
    if (wd > last_wd) {
        last_wd = wd;
        watches++;
    } else if (wd < 0 && (errno == ENOSPC || errno == ENOMEM)) {
        watch_err = errno;
        return 1;
    }
    return watch_max && watches >= watch_max;
}

static long hold_inotify_watch(long max, int *err)
{
    watch_fd = inotify_init1(IN_CLOEXEC);
    if (watch_fd < 0) {
        *err = errno;
        return 0;
    }
    watches = last_wd = 0;
    watch_max = max;
    watch_err = 0;
    (void)nftw("/usr", watch_one, 64, FTW_PHYS); /* no file there comes or goes meanwhile */
    *err = watch_err ? watch_err : ENOENT;       /* ENOENT: the tree ran out first */
    return watches;
}

/* A user namespace lives as long as a descriptor of it: a child cloned into a new
 * one opens /proc/self/ns/user into the descriptor table it shares with us, and
 * exits. (Nesting deeper would need an id map per level, which writes /proc.) */
static int ns_fd;
static char ns_stack[64 * 1024] __attribute__((aligned(16)));

static int open_own_userns(void *arg)
{
    (void)arg;
    ns_fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    ns_fd = ns_fd < 0 ? -errno : ns_fd;
    return 0;
}

static int take_userns(long i)
{
    (void)i;
    ns_fd = -EIO;
    pid_t c = clone(open_own_userns, ns_stack + sizeof ns_stack,
                    CLONE_NEWUSER | CLONE_FILES | CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (c < 0) return errno;
    waitpid(c, NULL, 0);
    return ns_fd < 0 ? -ns_fd : 0;
}

/* Queued signals: a real-time one, blocked, queued to ourselves. */
static int take_sigqueue(long i)
{
    if (i == 0) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGRTMIN);
        sigprocmask(SIG_BLOCK, &s, NULL);
    }
    union sigval v = {.sival_int = (int)i};
    return sigqueue(getpid(), SIGRTMIN, v) < 0 ? errno : 0;
}

/* POSIX message queues of the default size, each unlinked at once: the descriptor
 * keeps it (and its charge), and nothing is left in the host's /dev/mqueue. */
static int take_mqueue(long i)
{
    char name[64];
    snprintf(name, sizeof name, "/escape-probe-%d-%ld", (int)getpid(), i);
    mqd_t q = mq_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600, NULL);
    if (q == (mqd_t)-1) return errno;
    mq_unlink(name);
    return 0;
}

/* Descriptors in flight: sent over Unix sockets (SCM_RIGHTS) and never received. The
 * kernel counts them per uid and refuses a sender without CAP_SYS_RESOURCE once the
 * count passes the sender's RLIMIT_NOFILE: a server that is not root passes every
 * child's descriptors to its spawner that way. */
static int send_fd(int sock, int fd)
{
    char c = 'x', ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&c, 1};
    struct msghdr m = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    return sendmsg(sock, &m, MSG_DONTWAIT) < 0 ? errno : 0;
}

static int take_inflight(long i)
{
    static int sv[2] = {-1, -1};
    (void)i;
    for (;;) {
        int e = sv[0] < 0 ? EAGAIN : send_fd(sv[0], 0);
        if (e != EAGAIN && e != ENOBUFS) return e;
        /* this socket's queue is full: another one */
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) return errno;
    }
}

static long hold_each(int (*take)(long i), long max, int *err)
{
    long n = 0;
    while (!max || n < max) {
        if ((*err = take(n)) != 0) break;
        n++;
    }
    return n;
}

/* A kind is taken one at a time (take), or all at once (hold: the watches' walk). */
static const struct {
    const char *kind;
    int (*take)(long i);
    long (*hold)(long max, int *err);
} kinds[] = {
    {"inotify", take_inotify, NULL},   {"inotify_watch", NULL, hold_inotify_watch},
    {"fanotify", take_fanotify, NULL}, {"userns", take_userns, NULL},
    {"sigqueue", take_sigqueue, NULL}, {"mqueue", take_mqueue, NULL},
    {"inflight", take_inflight, NULL},
};

static void at_hold(const char *name, const char *arg)
{
    if (!need_arg(name, arg)) return;
    char kind[32], max[32];
    split2(arg, kind, sizeof kind, max, sizeof max);
    raise_nofile();
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].kind, kind) != 0) continue;
        long bound = strtol(max, NULL, 10), made;
        int err = 0;
        made = kinds[i].hold ? kinds[i].hold(bound, &err) : hold_each(kinds[i].take, bound, &err);
        report(kind, made, bound, err);
        return;
    }
    emit(name, EINVAL, "no such kind: %s", kind);
}

static void at_hold_wait(const char *name, const char *arg)
{
    int secs = arg && *arg ? atoi(arg) : 60;
    emit_res(name, "ok", "holding for up to %d s, until standard input has something", secs);
    struct pollfd p = {0, POLLIN, 0};
    (void)poll(&p, 1, secs * 1000);
}

const struct probe_attempt probe_budgets[] = {
    {"hold", at_hold,
     "KIND[:MAX]  take inotify, inotify_watch, fanotify, userns, sigqueue, mqueue or inflight "
     "until refused (or MAX), and keep them",
     1},
    {"hold_wait", at_hold_wait, "[SECONDS]  keep what hold took until stdin has something", 1},
    {NULL, NULL, NULL, 0},
};
