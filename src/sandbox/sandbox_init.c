/* sandbox_init: the sandbox's init, from clone to exit, in bubblewrap's order (see
 * sandbox_init.h for the steps; the functions below follow them).
 *
 * The init is a fork of the small spawner (no exec, no loader), so it may allocate
 * and format freely; the command is a vfork of the init, and between vfork and
 * execve only system calls on memory the init prepared are made. */
#include "sandbox/sandbox_init.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/own_ports.h"
#include "sandbox/cgroup_caps.h"
#include "sandbox/fs_broker.h"
#include "sandbox/landlock.h"
#include "sandbox/net_guard.h"
#include "sandbox/notify.h"
#include "sandbox/sig_guard.h"
#include "sandbox/tun.h"
#include "sandbox/user_budgets.h"
#include "sandbox/view.h"
#include "util/fdframe.h"

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

/* ---- 2. its own session ------------------------------------------------------------- */

/* The spawner's network namespaces (sandbox_net_prepare): the next sandbox's, -1 when
 * none is ready; its own, to come back to; and whether it may not make one (EPERM). */
static int net_ready = -1;
static int net_home = -1;
static bool net_ahead_off;

static void init_session(const struct sandbox_start *st, sigset_t *all)
{
    const struct sandbox_ops *o = st->ops;
    close(st->spawner_sock);
    if (net_home >= 0) close(net_home); /* the spawner's, as its socket */
    if (net_ready >= 0) close(net_ready);
    (void)prctl(PR_SET_NAME, st->spec.serve ? "exec-sbx-helper" : "exec-sandbox"); /* for ps */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) o->fail(st->job, SANDBOX_STEP_DEATHSIG, errno);
    if (setsid() < 0) o->fail(st->job, SANDBOX_STEP_SESSION, errno);
    /* Without a PID namespace, the command's orphans must come to us to be killed. */
    if ((st->spec.pid_inherit || st->spec.landlock_only) && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        o->fail(st->job, SANDBOX_STEP_SUBREAPER, errno);
    /* The process group's signals are the command's business; SIGKILL still ends us. */
    sigfillset(all);
    if (sigprocmask(SIG_SETMASK, all, NULL) < 0) o->fail(st->job, SANDBOX_STEP_SIGNALS, errno);
    if (st->tty && ioctl(st->tty_fd, TIOCSCTTY, 0) < 0) o->fail(st->job, SANDBOX_STEP_TTY, errno);
}

/* ---- 3. id maps --------------------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -EPERM;
    close(fd);
    return rc;
}

static int write_id_maps(uid_t uid, gid_t gid)
{
    char map[64];
    int rc = write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (!rc) rc = write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (!rc) rc = write_file("/proc/self/gid_map", map);
    return rc;
}

/* Step 3's end: the sandbox's share of the uid's kernel counts (user_budgets.h), set
 * while the init still has CAP_SYS_RESOURCE in its namespace. Where they cannot be set
 * the sandbox starts all the same, as before there were shares, and the server's log
 * says so once. */
static void split_budgets(bool userns)
{
    const char *what = "";
    int rc = user_budgets_apply(user_budgets_get(), userns, &what);
    if (rc < 0)
        user_budgets_note_once(
            USER_BUDGETS_NOT_SPLIT,
            "sandboxes get no share of the kernel's per-user counts here (%s: %s): one "
            "sandboxed command can use up the inotify instances, namespaces or queued signals "
            "of the server's uid (docs/SANDBOX.md, per-uid budgets)",
            what, strerror(-rc));
    if (!userns)
        user_budgets_note_once(
            USER_BUDGETS_NO_USERNS,
            "sandboxes run without a user namespace of their own here: the inotify instances, "
            "fanotify groups and namespaces a sandboxed command holds are the server uid's "
            "own (docs/SANDBOX.md, per-uid budgets)");
}

/* What the init watches while the command runs. */
struct supervision {
    pid_t cmd;
    bool pid_inherit;
    int sfd;          /* signalfd: SIGCHLD */
    int note_fd;      /* a copy of the command's standard error */
    int proxy;        /* the daemon's proxy socket, or -1 */
    int listeners[2]; /* the managed proxy's loopback relays */
    char tags[2];     /* 'H' or 'S' for each */
    int nl;
    struct notify nf;                   /* the command's seccomp listener (nf.fd -1: none) */
    struct net_guard guard;             /* connect (notify.h) */
    struct fs_broker broker;            /* file-system calls (fs_broker.h) */
    const char *const *protected_names; /* for view_lost's report */
};

/* ---- 6. the network ----------------------------------------------------------------- */

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

static int listen_loopback(uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return -errno;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 128) < 0) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}

/* ---- 7. rules, filter and the view's watch ------------------------------------------ */

/* /proc/self/mountinfo, opened once the view is complete (prepare_confinement). */
static int view_watch_fd = -1;
/* An inotify instance watching each protected name's own inode for a move or a
 * removal: a rename on the host carries the read-only mount with the directory (the
 * mount table's change counter does not move), so the name is free and only the
 * inode can tell (watch_protected_names). */
static int view_names_fd = -1;

/* Where the kernel gives the init no inotify instance or watch (the uid's count used
 * up outside this sandbox: by the server's other processes, by other sandboxes at once,
 * or, without a user namespace of the sandbox's own, by any process of the uid), each
 * name's inode is compared on a timer instead: a rename on the host is then seen up to
 * NAMES_POLL_MS later (quarantine_remade_names moves aside what was made meanwhile),
 * and the start never depends on a count another command could have used up. */
#define NAMES_POLL_MS 10
struct polled_name {
    const char *path; /* the spec's */
    dev_t dev;
    ino_t ino;
};
static struct polled_name *polled_names;
static int npolled_names;

static bool out_of_watches(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOSPC;
}

static int poll_protected_names(const struct sandbox_spec *spec, int err)
{
    if (view_names_fd >= 0) close(view_names_fd);
    view_names_fd = -1;
    int n = 0;
    while (spec->protected_names[n])
        n++;
    polled_names = calloc((size_t)n, sizeof *polled_names);
    if (!polled_names) return -ENOMEM;
    for (const char *const *p = spec->protected_names; *p; p++) {
        struct stat st;
        if (lstat(*p, &st) < 0) {
            if (errno == ENOENT) continue; /* as the watch: only what exists */
            return -errno;
        }
        polled_names[npolled_names++] = (struct polled_name){*p, st.st_dev, st.st_ino};
    }
    user_budgets_note_once(USER_BUDGETS_NAMES_POLLED,
                           "a sandbox's init got no inotify watch on the protected names (%s): "
                           "they are looked at every %d ms instead, so a rename of one on the "
                           "host is seen that much later (docs/SANDBOX.md, per-uid budgets)",
                           strerror(err), NAMES_POLL_MS);
    return 0;
}

/* Whether a polled name is gone or is another inode now. */
static bool polled_names_moved(void)
{
    for (int i = 0; i < npolled_names; i++) {
        struct stat st;
        if (lstat(polled_names[i].path, &st) < 0 || st.st_dev != polled_names[i].dev ||
            st.st_ino != polled_names[i].ino)
            return true;
    }
    return false;
}

/* Watches every protected name that exists in the finished view. A watch is on the
 * inode, so the host's `mv .git .git.bak` reaches us though it happens outside. */
static int watch_protected_names(const struct sandbox_spec *spec)
{
    if (!spec->protected_names || !spec->protected_names[0]) return 0;
    view_names_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (view_names_fd < 0)
        return out_of_watches(errno) ? poll_protected_names(spec, errno) : -errno;
    for (const char *const *p = spec->protected_names; *p; p++)
        if (inotify_add_watch(view_names_fd, *p, IN_MOVE_SELF | IN_DELETE_SELF | IN_DONT_FOLLOW) <
                0 &&
            errno != ENOENT)
            return out_of_watches(errno) ? poll_protected_names(spec, errno) : -errno;
    return 0;
}

/* Whether the policy has deny entries the view cannot cover for the life of the
 * command (fs_broker.h): a glob, or a path missing now. Without namespaces there is
 * no cover at all, and Landlock cannot take back a read it grants a root: any deny. */
static bool needs_broker_reads(const struct sandbox_spec *spec)
{
    if (!spec->enforce_fs) return false;
    if (spec->deny_globs && spec->deny_globs[0]) return true;
    for (const char *const *p = spec->denied; p && *p; p++) {
        struct stat st;
        if (spec->landlock_only || lstat(*p, &st) < 0) return true;
    }
    return false;
}

/* The filter's parts beside the network (seccomp.h): the broker's and, without
 * namespaces, what they would have hidden. */
static unsigned broker_bits(const struct sandbox_spec *spec)
{
    unsigned b = needs_broker_reads(spec) ? SECCOMP_BROKER_READS : 0;
    if (spec->landlock_only) {
        b |= SECCOMP_NO_NAMESPACES;
        if (spec->enforce_fs) b |= SECCOMP_BROKER_WRITES;
        if (sandbox_landlock_abi() < 6) b |= SECCOMP_SIGNALS;
    }
    return b;
}

/* The ruleset, the filter (with its listener's socketpair when connects are to be
 * answered) and the process cap, for step 8; then the view's watch. Returns 0 or
 * -errno with *step naming what failed. */
static int prepare_confinement(const struct sandbox_spec *spec, struct sandbox_confinement *c,
                               const char **step)
{
    c->ruleset_fd = -1;
    c->guard_sock[0] = c->guard_sock[1] = -1;
    c->die_with_init = spec->landlock_only;
    /* The cap counts the tasks of this user namespace's uid, i.e. this sandbox's
     * (the init included); never above what the server may have itself. */
    struct rlimit nproc;
    c->max_procs = spec->max_procs;
    if (c->max_procs && getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_max != RLIM_INFINITY &&
        nproc.rlim_max < c->max_procs)
        c->max_procs = nproc.rlim_max;
    c->nofile = user_budgets_get()->nofile;
    if (spec->serve) c->nofile.rlim_max = RLIM_INFINITY; /* sandbox_confine: not the helper's */
    /* Without namespaces the command's writes are the broker's: its own rules give the
     * writable roots read rights only. */
    int rc = sandbox_landlock_ruleset(spec, spec->landlock_only, &c->ruleset_fd);
    if (rc < 0) {
        *step = "landlock ruleset";
        return rc;
    }
    /* The fs helper runs our own code: an allowlist of what it calls. */
    enum seccomp_net net = !spec->net_restricted ? SECCOMP_NET_OPEN
                           : spec->net_proxy     ? SECCOMP_NET_INET_ONLY
                                                 : SECCOMP_NET_NONE;
    rc = spec->serve ? seccomp_build_fs_helper(c->filter_bits, &c->seccomp)
                     : seccomp_build(net, c->filter_bits, &c->seccomp);
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
    if (spec->landlock_only) return 0; /* no view to watch: the broker keeps the names */
    /* The view is complete: from now on any change of this namespace's mount table
     * is the host removing or moving something a mount sits on (the command can
     * mount nothing), and a protected name's read-only mount would be gone with it. */
    sandbox_view_keep(spec);
    view_watch_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (view_watch_fd < 0) {
        *step = "watch the mount table";
        return -errno;
    }
    if ((rc = watch_protected_names(spec)) < 0) {
        *step = "watch the protected names";
        return rc;
    }
    return 0;
}

/* The pollfds of the view's watches, into p[0] and p[1] (fd -1 where unused, which
 * poll skips). */
static void view_watch_pollfds(struct pollfd *p)
{
    p[0] = (struct pollfd){view_watch_fd, POLLPRI, 0};
    p[1] = (struct pollfd){view_names_fd, POLLIN, 0};
}

bool sandbox_view_intact(void)
{
    if (view_watch_fd < 0) return true;
    struct pollfd p[2];
    view_watch_pollfds(p);
    if (polled_names_moved()) return false;
    if (poll(p, 2, 0) <= 0) return true;
    return !p[1].revents && sandbox_view_kept();
}

/* ---- 8. the command's confinement ----------------------------------------------------- */

/* Drops every capability for good: the bounding set first (needs CAP_SETPCAP),
 * then ambient, securebits so exec as uid 0 gains nothing, then the sets. A process
 * that never had CAP_SETPCAP (a server not running as root, without namespaces) has
 * nothing there to drop or lock: no_new_privs, set before, keeps exec from granting
 * any (file capabilities and set-id bits are ignored under it). */
static int drop_caps(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0) return -errno;
    bool setpcap = d[CAP_SETPCAP / 32].effective & (1u << (CAP_SETPCAP % 32));
    /* Up to the kernel's last capability: the first it does not know (EINVAL) ends the
     * walk, where going on to 63 made 23 more system calls on a 6.x kernel. */
    for (int cap = 0; cap <= 63 && setpcap; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno != EINVAL) return -errno;
            break;
        }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                         SECBIT_NO_CAP_AMBIENT_RAISE_ | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED_;
    if (setpcap && prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0) return -errno;
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) < 0) return -errno;
    return 0;
}

int sandbox_confine(const struct sandbox_confinement *c)
{
    if (c->die_with_init && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) return -errno;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -errno;
    int rc = drop_caps();
    if (!rc) rc = sandbox_landlock_restrict(c->ruleset_fd);
    if (!rc && c->max_procs) {
        struct rlimit r = {c->max_procs, c->max_procs};
        if (setrlimit(RLIMIT_NPROC, &r) < 0) rc = -errno;
    }
    if (!rc) rc = seccomp_install(&c->seccomp, c->guard_sock[1]);
    /* The descriptors' share last: installing the filter passes its listener to the init
     * over a socket, which counts against the uid's descriptors in flight up to this
     * limit, and another sandbox of the uid may hold all of its own share already (a
     * command without a listener of its own never needed one: without namespaces every
     * command has one). The fs helper keeps the spawner's: its allowlist sets no limit,
     * and our own code holds nothing in flight. */
    if (!rc && c->nofile.rlim_max != RLIM_INFINITY && setrlimit(RLIMIT_NOFILE, &c->nofile) < 0)
        rc = -errno;
    return rc;
}

static __attribute__((noinline)) pid_t vfork_command(const struct sandbox_start *st,
                                                     const struct sandbox_confinement *c)
{
    pid_t pid = vfork();
    if (pid == 0) st->ops->exec_command(st->job, c);
    return pid;
}

/* The command's seccomp listener, sent on conf->guard_sock[1] before it execed
 * (seccomp_install): into nf, or -errno (the command must not run unanswered). */
static int take_listener(struct sandbox_confinement *conf, struct notify *nf, bool forked)
{
    nf->fd = -1;
    if (conf->guard_sock[0] < 0) return 0;
    char tag = 0;
    int fd = -1, nfds = 0;
    /* A vforked command has sent it before we run again; a fork (the fs helper)
     * sends it when it gets there, or dies first: then our end reads the end. */
    if (forked) close(conf->guard_sock[1]);
    int n =
        fdframe_recv_tagged(conf->guard_sock[0], forked ? 0 : MSG_DONTWAIT, &tag, &fd, 1, &nfds);
    close(conf->guard_sock[0]);
    if (!forked) close(conf->guard_sock[1]);
    if (n != 1 || tag != 'L' || nfds != 1) {
        if (fd >= 0) close(fd);
        return n < 0 ? n : -EPROTO;
    }
    int rc = notify_open(nf, fd);
    if (rc < 0) close(fd);
    return rc;
}

/* One notification of the command's (notify.h), handed to whoever decides its call. */
static void serve_notification(struct supervision *s)
{
    struct notify_call c;
    if (notify_recv(&s->nf, &c) <= 0) return;
    long nr = c.n->data.nr;
    if (nr == __NR_connect)
        net_guard_connect(&s->guard, &s->nf, &c);
    else if (sig_guard_handles(nr))
        sig_guard_serve(&s->nf, &c);
    else /* the filter notifies nothing else but file-system calls (seccomp.h): the broker
          * answers them, and ENOSYS to a number it does not know */
        fs_broker_serve(&s->broker, &s->nf, &c);
    notify_call_done(&c);
}

/* ---- 9. supervision ------------------------------------------------------------------- */

static int exit_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* Kills what the command left behind when there is no PID namespace to do it:
 * every orphan came to us (a subreaper), so our children are all of them. */
static void kill_leftovers(void)
{
    for (int round = 0; round < 1000; round++) {
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        if (n <= 0) break;
        buf[n] = 0;
        for (char *p = buf; *p;) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p) break;
            kill((pid_t)pid, SIGKILL);
            p = end;
        }
        int reaped = 0;
        while (waitpid(-1, NULL, WNOHANG) > 0)
            reaped++;
        /* Wait only while those just killed are still dying: once they are reaped, a
         * child not yet listed (a grandchild that came to us when its parent died) is
         * alive and unkilled, and waiting for it would wait as long as it runs. The next
         * round lists and kills it. */
        int st;
        if (!reaped && waitpid(-1, &st, 0) < 0 && errno == ECHILD) break;
    }
}

/* The kill is a scheduler wake-up behind the host's rmdir, and a loop that creates the
 * name in that gap wins (SANDBOX.md, known holes). With every process gone, a protected
 * name that exists but is no longer the read-only mount was made again while the
 * sandbox could write there: it is renamed aside (git and codex read only the exact
 * name) and the note says where, so that what the command planted never runs and
 * nothing is deleted. */
static void quarantine_remade_names(const struct supervision *s)
{
    for (const char *const *p = s->protected_names; p && *p; p++) {
        struct statx sx;
        if (statx(AT_FDCWD, *p, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) < 0) continue;
        if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
            (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
            continue;
        char aside[4096];
        int rc = -1;
        for (int n = 1; n < 100 && rc < 0; n++) {
            snprintf(aside, sizeof aside, "%s.quarantined-by-exec-server.%d", *p, n);
            rc = renameat2(AT_FDCWD, *p, AT_FDCWD, aside, RENAME_NOREPLACE);
            if (rc < 0 && errno != EEXIST) break;
        }
        if (s->note_fd < 0) continue;
        if (rc == 0)
            dprintf(s->note_fd,
                    "exec-server: %s was made again while the sandbox could write there; "
                    "moved to %s: inspect it before use\n",
                    *p, aside);
        else
            dprintf(s->note_fd,
                    "exec-server: %s was made again while the sandbox could write there and "
                    "could not be moved aside (%s): inspect it before git or codex use it\n",
                    *p, strerror(errno));
    }
}

/* The view changed under the command (sandbox_view_intact): a protected name's
 * read-only mount may be gone, so the sandbox ends now, saying why on the command's
 * standard error. */
static __attribute__((noreturn)) void view_lost(const struct supervision *s)
{
    static const char msg[] = "exec-server: sandbox ended: a path its view mounts on was removed "
                              "or moved on the host (a protected name may have lost its "
                              "read-only mount)\n";
    /* Every process first, the note after: from the moment the mount is gone a loop
     * needs a few microseconds to create the name and plant something in it, and a
     * child of the command, left to die with the init's exit, had milliseconds (the
     * escape suite's tight planting loop won most runs). In a PID namespace kill(-1)
     * reaches all of them but us at once. */
    if (!s->pid_inherit) kill(-1, SIGKILL);
    kill(s->cmd, SIGKILL);
    if (s->note_fd >= 0) {
        ssize_t w = write(s->note_fd, msg, sizeof msg - 1);
        (void)w;
    }
    if (s->pid_inherit) kill_leftovers();
    /* Orphans come to PID 1: once waitpid has nobody left, nothing of the sandbox can
     * write any more. */
    while (!s->pid_inherit && (waitpid(-1, NULL, 0) > 0 || errno == EINTR)) {
    }
    quarantine_remade_names(s);
    _exit(128 + SIGKILL);
}

/* The server ends a sandbox without namespaces (SANDBOX_END_SIGNAL): everything it
 * started goes, then the init. */
static __attribute__((noreturn)) void end_everything(struct supervision *s)
{
    kill(s->cmd, SIGKILL);
    kill_leftovers();
    _exit(128 + SIGKILL);
}

/* Reaps; exits with the command's status once it is gone. */
static void reap(struct supervision *s)
{
    struct signalfd_siginfo si;
    while (read(s->sfd, &si, sizeof si) > 0) {
        if ((int)si.ssi_signo == SANDBOX_END_SIGNAL && s->pid_inherit &&
            (pid_t)si.ssi_pid == getppid())
            end_everything(s);
    }
    int st;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w != s->cmd) continue;
        if (s->pid_inherit) kill_leftovers();
        _exit(exit_code(st));
    }
}

static __attribute__((noreturn)) void supervise(struct supervision *s)
{
    for (;;) {
        struct pollfd p[5 + 1 + NET_GUARD_MAX_PENDING + FS_BROKER_MAX_WAITING];
        int np = 0;
        p[np++] = (struct pollfd){s->sfd, POLLIN, 0};
        view_watch_pollfds(p + np);
        np += 2;
        for (int i = 0; i < s->nl; i++)
            p[np++] = (struct pollfd){s->listeners[i], POLLIN, 0};
        int nfi = np;
        p[np++] = (struct pollfd){s->nf.fd, POLLIN, 0}; /* -1: skipped */
        int gfirst = np;
        np += net_guard_pollfds(&s->guard, p + np, NET_GUARD_MAX_PENDING);
        int bfirst = np;
        np += fs_broker_pollfds(&s->broker, p + np, FS_BROKER_MAX_WAITING);
        /* The protected names compared on a timer (no inotify: poll_protected_names),
         * and a FIFO's open waiting in a fork, given up when its caller goes: looked
         * at once a second. */
        int timeout = npolled_names ? NAMES_POLL_MS : s->broker.nwaiting ? 1000 : -1;
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) _exit(1);
        /* The mount table changes for the host's own reasons too (a container's mount
         * point removed, a disk mounted): only a change to the view's own mounts ends
         * the sandbox. */
        if ((p[1].revents && !sandbox_view_kept()) || p[2].revents || polled_names_moved())
            view_lost(s);
        net_guard_serve_pending(&s->guard, &s->nf, p + gfirst, bfirst - gfirst);
        fs_broker_serve_waiting(&s->broker, &s->nf, p + bfirst, np - bfirst);
        if (p[nfi].revents & POLLIN) serve_notification(s);
        for (int i = 0; i < s->nl; i++) {
            if (!(p[3 + i].revents & POLLIN)) continue;
            int c;
            while ((c = accept4(s->listeners[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                (void)fdframe_send_tagged(s->proxy, s->tags[i], &c, 1); /* to the proxy */
                close(c);
            }
        }
        if (p[0].revents & POLLIN) reap(s);
    }
}

/* ---- the sequence --------------------------------------------------------------------- */

/* The fs helper: no exec (nothing of the host need be visible to load a program
 * from); after step 7 the init confines itself and serves. */
static __attribute__((noreturn)) void serve_confined(const struct sandbox_start *st,
                                                     struct sandbox_confinement *c)
{
    const struct sandbox_ops *o = st->ops;
    if (st->serve_sock < 0 || !o->serve) o->fail(st->job, SANDBOX_STEP_STDIO, EPROTO);
    if (chdir("/") < 0) o->fail(st->job, SANDBOX_STEP_CWD, errno);
    int rc = sandbox_confine(c);
    if (rc < 0) o->fail(st->job, SANDBOX_STEP_CONFINE, -rc);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) o->fail(st->job, SANDBOX_STEP_SIGNALS, errno);
    o->started(st->job);
    for (int i = 0; i < st->njob_fds; i++)
        if (st->job_fds[i] != st->serve_sock) close(st->job_fds[i]);
    if (c->ruleset_fd >= 0) close(c->ruleset_fd);
    _exit(o->serve(st->serve_sock));
}

/* The fs helper behind the broker: a fork that confines itself as a command would
 * (its filter's listener goes to us) and serves; we supervise it like a command. */
static pid_t fork_server(const struct sandbox_start *st, struct sandbox_confinement *c)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    const struct sandbox_ops *o = st->ops;
    if (chdir("/") < 0) _exit(127);
    if (sandbox_confine(c) < 0) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) _exit(127);
    for (int i = 0; i < st->njob_fds; i++)
        if (st->job_fds[i] != st->serve_sock) close(st->job_fds[i]);
    if (c->ruleset_fd >= 0) close(c->ruleset_fd);
    _exit(o->serve(st->serve_sock));
}

/* Step 6: loopback, the managed proxy's relay listeners (into s) and transparent
 * TCP's device. Before step 7: tun.h mounts over /etc/resolv.conf, and the view's
 * watch starts after the last mount. Returns 0 or -errno with *what set. */
static int network_up(const struct sandbox_start *st, bool net_ahead, struct supervision *s,
                      const char **what)
{
    int rc = 0;
    bool own_net = !st->spec.landlock_only; /* else the host's network: nothing to bring up */
    if (own_net && st->spec.net_restricted && !net_ahead && (rc = loopback_up()) < 0) {
        *what = "loopback";
        return rc;
    }
    /* The proxy's ports on loopback. Without a network namespace of our own they are
     * the host's: the init listens on ports the kernel picks, and the command's
     * connects to the ports it was told go there (net_guard.h, proxy_only). */
    s->guard.proxy_only = !own_net && st->proxy_fd >= 0;
    for (int i = 0; i < 2 && st->proxy_fd >= 0; i++) {
        if (!st->proxy_ports[i]) continue;
        int l = listen_loopback(own_net ? st->proxy_ports[i] : 0);
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        if (l >= 0 && !own_net && getsockname(l, (struct sockaddr *)&a, &al) == 0) {
            s->guard.proxy_ports[i] = st->proxy_ports[i];
            s->guard.relay_ports[i] = ntohs(a.sin_port);
        }
        if (l < 0) {
            *what = "the managed proxy's loopback listener";
            return l;
        }
        s->tags[s->nl] = st->proxy_ports[0] && i == 0 ? 'H' : 'S';
        s->listeners[s->nl++] = l;
    }
    if (st->tun_fd >= 0 && !own_net) {
        *what = "transparent TCP (it needs a network namespace of the sandbox's own)";
        return -EOPNOTSUPP;
    }
    if (st->tun_fd >= 0 && st->proxy_fd >= 0)
        rc = sandbox_tun_start(st->tun_fd, st->proxy_fd, what);
    return rc;
}

/* Steps 3-7 (the id maps when userns). Returns 0 or -errno with *what set. */
static int build_sandbox(const struct sandbox_start *st, bool userns, bool net_ahead, uid_t uid,
                         gid_t gid, struct sandbox_confinement *c, struct supervision *s,
                         const char **what)
{
    int rc = 0;
    if (userns && (rc = write_id_maps(uid, gid)) < 0) {
        *what = "user namespace id maps";
        return rc;
    }
    split_budgets(userns);
    /* 4 and 5: the mounts, then the protected names, carve-outs and covers. Without
     * namespaces there is no view: Landlock and the broker keep the policy. */
    if (!st->spec.landlock_only && (rc = sandbox_view_build(&st->spec, what)) < 0) return rc;
    /* A root server's process cap is the cgroup the init joins: not the command's to
     * leave (cgroup v1 lets a task of the same uid move itself). Without a view, only
     * the broker writes, and only in the policy's roots. */
    if (!st->spec.landlock_only && st->cgroup_fds[0] >= 0 &&
        (rc = sandbox_view_seal_cgroups(&st->spec, what)) < 0)
        return rc;
    if ((rc = network_up(st, net_ahead, s, what)) < 0) return rc;
    return prepare_confinement(&st->spec, c, what);
}

/* The command's terminal (its PTY slave) as one of its own for Landlock and the broker. */
static void own_terminal(const struct sandbox_start *st, struct sandbox_confinement *c,
                         struct fs_broker *b)
{
    char link[64], path[128];
    snprintf(link, sizeof link, "/proc/self/fd/%d", st->tty_fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    int rc = sandbox_landlock_allow_device(c->ruleset_fd, path);
    if (rc < 0) st->ops->fail(st->job, SANDBOX_STEP_SETUP, -rc);
    if (!strncmp(path, "/dev/pts/", 9) && b->nptys < (int)(sizeof b->ptys / sizeof b->ptys[0]))
        b->ptys[b->nptys++] = atoi(path + 9);
}

/* Step 2's cgroups, the init's first act: joins each but the one it was cloned
 * into (born_in, or -1; cgroup_caps.h). Nothing is forked before. */
static void join_cgroups(const struct sandbox_start *st, int born_in)
{
    for (int i = 0; i < 2; i++) {
        int fd = st->cgroup_fds[i], rc;
        if (fd < 0 || fd == born_in) continue;
        if ((rc = cgroup_caps_join_self(fd)) < 0) {
            fprintf(stderr, "exec-server: sandbox setup failed at its cgroup: %s\n", strerror(-rc));
            st->ops->fail(st->job, SANDBOX_STEP_SETUP, -rc);
        }
    }
}

/* Runs in the init (PID 1 of the new namespaces, or a subreaper without a PID
 * namespace). Never returns. */
static __attribute__((noreturn)) void init_main(const struct sandbox_start *st, bool userns,
                                                bool net_ahead, uid_t uid, gid_t gid, int born_in)
{
    const struct sandbox_ops *o = st->ops;
    join_cgroups(st, born_in);
    sigset_t all;
    init_session(st, &all);
    struct sandbox_confinement conf;
    struct supervision s = {.pid_inherit = st->spec.pid_inherit || st->spec.landlock_only,
                            .proxy = st->proxy_fd,
                            .protected_names = st->spec.protected_names,
                            .nf = {.fd = -1},
                            .broker = {.spec = &st->spec,
                                       .writes = st->spec.landlock_only && st->spec.enforce_fs,
                                       .own_dev = !st->spec.landlock_only}};
    const char *what = "";
    /* Once: whether a deny path exists is read here, and a path made between two reads
     * would have given the command a listener while the helper served unbrokered. */
    conf.filter_bits = broker_bits(&st->spec);
    int rc = build_sandbox(st, userns, net_ahead, uid, gid, &conf, &s, &what);
    if (rc < 0) {
        fprintf(stderr, "exec-server: sandbox setup failed at %s: %s\n", what, strerror(-rc));
        o->fail(st->job, SANDBOX_STEP_SETUP, -rc);
    }
    /* Without a private devpts the command's terminal is one of the host's: it, and
     * nothing of the others, is the command's (landlock.h, fs_broker.h). */
    if (st->spec.landlock_only && st->tty) own_terminal(st, &conf, &s.broker);
    /* The command needs the ruleset while it puts its own 0, 1, 2, 3... in place. */
    if (conf.ruleset_fd >= 0 && conf.ruleset_fd < st->fd_base) {
        int h = fcntl(conf.ruleset_fd, F_DUPFD_CLOEXEC, st->fd_base);
        int err = errno;
        close(conf.ruleset_fd);
        conf.ruleset_fd = h;
        if (h < 0) o->fail(st->job, SANDBOX_STEP_SETUP, err);
    }
    /* The fs helper serves in the init itself (it forks nothing: never capped), but
     * where the broker decides its calls (no namespaces, or deny entries the view
     * cannot cover): then a child serves, under the same broker as a command. */
    bool brokered = conf.filter_bits & (SECCOMP_BROKER_READS | SECCOMP_BROKER_WRITES);
    if (st->spec.serve && !brokered) serve_confined(st, &conf);
    /* Without it the init could not learn that the command exited: it would wait
     * forever, and so would the client. */
    s.sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s.sfd < 0) o->fail(st->job, SANDBOX_STEP_SIGNALS, errno);
    /* Rooted in the cgroup we joined: on cgroup v2 a task may only move
     * to a cgroup inside its cgroup namespace, which also closes
     * clone3(CLONE_INTO_CGROUP), a way around the read-only cgroupfs
     * (sandbox_view_seal_cgroups): it takes a descriptor of any cgroup directory,
     * opened for reading. */
    if (st->cgroup_fds[0] >= 0 && unshare(CLONE_NEWCGROUP) < 0 && !st->spec.landlock_only)
        o->fail(st->job, SANDBOX_STEP_SETUP, errno); /* without namespaces: clone3 is denied */
    /* 8 */
    s.cmd = st->spec.serve ? fork_server(st, &conf) : vfork_command(st, &conf);
    if (s.cmd < 0) o->fail(st->job, SANDBOX_STEP_CLONE, errno);
    if (!st->spec.serve && o->command_failed(st->job)) _exit(127);
    rc = take_listener(&conf, &s.nf, st->spec.serve);
    if (rc < 0) {
        kill(s.cmd, SIGKILL);
        o->fail(st->job, SANDBOX_STEP_SETUP, -rc);
    }
    o->started(st->job);
    /* Keep nothing of the command's (its pipes must reach EOF when it is gone) but a
     * copy of its standard error for view_lost: the init ends with it. */
    s.note_fd = fcntl(st->err_fd, F_DUPFD_CLOEXEC, st->fd_base);
    for (int i = 0; i < st->njob_fds; i++)
        if (st->job_fds[i] != st->proxy_fd) close(st->job_fds[i]);
    if (conf.ruleset_fd >= 0) close(conf.ruleset_fd);
    /* 9 */
    supervise(&s);
}

/* clone3's arguments as far as CLONE_INTO_CGROUP (Linux 5.7): ours, since
 * <linux/sched.h>'s clash with <sched.h>. */
struct clone3_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
        set_tid_size, cgroup;
};
#define CLONE_INTO_CGROUP_ 0x200000000ULL

/* A fork-like clone with flags (SIGCHLD on exit), into the cgroup v2 directory
 * *into unless it is -1; *into becomes -1 where the kernel cannot (before Linux 5.7:
 * no clone3, or one without its cgroup), and the init then joins it itself. */
static long clone_init(unsigned long flags, int *into)
{
    if (*into >= 0) {
        struct clone3_args a = {
            .flags = flags | CLONE_INTO_CGROUP_, .exit_signal = SIGCHLD, .cgroup = (uint64_t)*into};
        long pid = syscall(SYS_clone3, &a, sizeof a);
        if (pid >= 0 || (errno != ENOSYS && errno != E2BIG)) return pid;
        *into = -1;
    }
    return syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
}

/* Step 1's network namespace, made ahead (net_ready, above). A new one was 0.7 ms
 * of every clone with network restricted (its loopback device, sysctl tables and
 * /proc/net entries), the biggest part of row 1b after the view. A spawner that can
 * make one without a user namespace (a root server's) makes the next sandbox's once
 * a start is out of its hands, loopback up, and the next clone is made from inside
 * it: each sandbox still gets one of its own, never used before. Owned by the host's
 * user namespace, it gives the sandbox's root no power over it (no CAP_NET_ADMIN
 * there), so a managed network's relay and transparent TCP, which the init sets up
 * itself, keep the clone's own. */
/* The spawner back in its own network namespace. Every later start, unsandboxed ones
 * too, inherits it: a spawner that cannot go home must not serve another (the daemon
 * starts a new one), and pid, an init just cloned from elsewhere (or 0), is killed
 * first, never to run unwatched. */
static void net_go_home(pid_t pid)
{
    if (setns(net_home, CLONE_NEWNET) == 0) return;
    if (pid > 0) kill(pid, SIGKILL);
    _exit(127);
}

void sandbox_net_prepare(void)
{
    if (net_ready >= 0 || net_ahead_off) return;
    if (net_home < 0 && (net_home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
        net_ahead_off = true;
        return;
    }
    /* Coming home takes CAP_SYS_ADMIN in the user namespace that owns our network
     * namespace: a spawner whose capabilities are those of a user namespace of its own
     * (root in bubblewrap's, in a container's) can make a network namespace but not
     * come back from it, and would exit after every start. Tried once, here, where it
     * is a no-op. */
    static bool home_tried;
    if (!home_tried) {
        home_tried = true;
        if (setns(net_home, CLONE_NEWNET) < 0) {
            net_ahead_off = true;
            return;
        }
    }
    if (unshare(CLONE_NEWNET) < 0) {
        /* Not allowed here: every clone makes its own. Out of namespaces (ENOSPC,
         * ENOMEM): the next start tries again. */
        net_ahead_off = errno == EPERM || errno == EINVAL;
        return;
    }
    int fd = loopback_up() == 0 ? open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC) : -1;
    net_go_home(0);
    net_ready = fd;
}

/* Whether st may take the ready network namespace (no relay or TUN to set up). */
static bool takes_ready_net(const struct sandbox_start *st)
{
    return st->spec.net_restricted && st->proxy_fd < 0 && st->tun_fd < 0 && net_ready >= 0;
}

/* A sandbox without namespaces (sandbox_mode.h): the init is a plain child of the
 * server, in its cgroups from birth where it can be (v2), and what it builds is the
 * command's Landlock rules, filter and broker (steps 7-9). */
static pid_t spawn_without_namespaces(const struct sandbox_start *st)
{
    int into = -1;
    for (int i = 0; i < 2; i++)
        if (st->cgroup_fds[i] >= 0 && cgroup_caps_join_by_clone(st->cgroup_fds[i]))
            into = st->cgroup_fds[i];
    long pid = clone_init(CLONE_PARENT, &into);
    if (pid == 0) init_main(st, false, false, geteuid(), getegid(), into);
    return pid < 0 ? -errno : (pid_t)pid;
}

pid_t sandbox_spawn(const struct sandbox_start *st)
{
    (void)user_budgets_get(); /* read once, here, for every init to come (either mode) */
    if (st->spec.landlock_only) return spawn_without_namespaces(st);
    /* 1. the clone flags */
    uid_t uid = geteuid();
    gid_t gid = getegid();
    unsigned long ns = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    if (!st->spec.pid_inherit) ns |= CLONE_NEWPID;
    bool in_ready = takes_ready_net(st) && setns(net_ready, CLONE_NEWNET) == 0;
    if (st->spec.net_restricted && !in_ready) ns |= CLONE_NEWNET;
    bool userns = true;
    /* 2's cgroups: a v2 one is the init's from birth (cgroup_caps.h). */
    int into = -1;
    for (int i = 0; i < 2; i++)
        if (st->cgroup_fds[i] >= 0 && cgroup_caps_join_by_clone(st->cgroup_fds[i]))
            into = st->cgroup_fds[i];
    long pid = clone_init(CLONE_PARENT | CLONE_NEWUSER | ns, &into);
    if (pid < 0 && uid == 0 && (errno == EPERM || errno == EINVAL || errno == ENOSPC)) {
        /* No user namespace for root here (disabled or exhausted): the namespaces
         * are made as root, and the command still drops every capability. */
        userns = false;
        pid = clone_init(CLONE_PARENT | ns, &into);
    }
    if (pid == 0) init_main(st, userns, in_ready, uid, gid, into);
    int err = errno;
    if (in_ready) {
        net_go_home(pid > 0 ? (pid_t)pid : 0);
        close(net_ready);
        net_ready = -1;
    }
    return pid < 0 ? -err : (pid_t)pid;
}
