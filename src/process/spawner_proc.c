/* spawner_proc: the spawner process itself (see spawner.h): requests in, children
 * out.
 *
 * The spawner is single-threaded and owns nothing but its socket, so it may fork
 * freely. An ordinary child is started with clone(CLONE_VM | CLONE_VFORK |
 * CLONE_PARENT) on a stack of its own: the spawner waits while the child sets up
 * its descriptors and execs, and learns an exec failure through shared memory.
 *
 * A sandboxed child is a fork (clone(CLONE_PARENT) with fresh user, PID, mount,
 * IPC, UTS and, network restricted, network namespaces): the sandbox's init, PID 1 of
 * its namespace. It builds the view (sandbox/enforce), vforks the command, which
 * confines itself and execs, and then only waits: when the command exits the init
 * exits with its status (128+N for a signal, as a shell reports it) and the kernel
 * kills whatever the command left behind in the namespace. The init ignores the
 * signals a process group receives (terminate sends SIGKILL, which it cannot), so
 * signals reach the command as they would unsandboxed. With a managed network the
 * init also accepts connections on loopback inside the namespace and hands each
 * socket to the daemon's proxy over a socketpair (SCM_RIGHTS, a 1-byte tag). */
#include "process/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/enforce.h"
#include "sandbox/tun.h"
#include "util/fdclose.h"
#include "util/fdframe.h"

#define CHILD_STACK (64 * 1024)

static spawner_serve_fn serve_fn;
#define FD_BASE                                                                                    \
    (3 + FDFRAME_MAX_FDS) /* received descriptors are moved up here, clear of                      \
                             the 0, 1, 2, 3... they are placed on */

/* One decoded request with its descriptors, as the child sees it. */
struct job {
    struct spawn_wire_req r;
    int fds[FDFRAME_MAX_FDS];
    int nfds;
    int status;       /* the status pipe's write end */
    int in, out, err; /* the child's 0, 1, 2 (all the PTY slave with SPAWN_F_TTY) */
    const int *extra; /* to 3, 4, ... */
    const int *init_fds;
    volatile int child_err;  /* errno of a failed start, written by the vfork child */
    volatile int child_step; /* and the step that failed (enum spawn_step) */
};

/* ---- the child's common tail ------------------------------------------------------- */

/* The signals this process ignores (SIG_IGN survives execve, so each child resets
 * them), found once at start: resetting all 64 in every child was 64 system calls
 * on the spawner's critical path (it waits for each child's exec). */
static int ignored_sigs[NSIG];
static int n_ignored_sigs;

static void find_ignored_sigs(void)
{
    n_ignored_sigs = 0;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            ignored_sigs[n_ignored_sigs++] = sig;
    }
}

/* Ends a vfork / CLONE_VM child whose step failed: the errno and the step go to the
 * parent through the shared job, which puts them on the status pipe. */
static __attribute__((noreturn)) void child_fail(struct job *j, int step)
{
    j->child_err = errno ? errno : EIO;
    j->child_step = step;
    _exit(127);
}

/* Puts the descriptors in place, resets signals and execs. Only system calls, each
 * checked: a child that went on after a failed one would run with the wrong stdio,
 * directory or signal state. */
static void child_exec(struct job *j, bool tty, const struct sandbox_confinement *conf)
{
    if (tty) {
        if (dup2(j->in, 0) < 0 || dup2(j->in, 1) < 0 || dup2(j->in, 2) < 0)
            child_fail(j, SPAWN_STEP_STDIO);
    } else if (dup2(j->in, 0) < 0 || dup2(j->out, 1) < 0 || dup2(j->err, 2) < 0) {
        child_fail(j, SPAWN_STEP_STDIO);
    }
    for (uint32_t i = 0; i < j->r.n_extra_fds; i++)
        if (dup2(j->extra[i], 3 + (int)i) < 0) child_fail(j, SPAWN_STEP_STDIO);
    if (chdir(j->r.cwd) < 0) child_fail(j, SPAWN_STEP_CWD);
    /* Confinement needs the Landlock ruleset's fd: before the descriptors go. */
    if (conf) {
        int rc = sandbox_confine(conf);
        if (rc < 0) {
            errno = -rc;
            child_fail(j, SPAWN_STEP_CONFINE);
        }
    }
    /* Everything above the child's own: close_range, or /proc/self/fd before Linux
     * 5.9 (received descriptors are close-on-exec, but nothing else need be). */
    fdclose_from(3 + (int)j->r.n_extra_fds);
    /* execve resets caught signals by itself; only ignored ones survive it (see
     * ignored_sigs). */
    for (int i = 0; i < n_ignored_sigs; i++) {
        struct sigaction sa = {.sa_handler = SIG_DFL};
        if (sigaction(ignored_sigs[i], &sa, NULL) < 0) child_fail(j, SPAWN_STEP_SIGNALS);
    }
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) child_fail(j, SPAWN_STEP_SIGNALS);
    execve(j->r.exe, (char *const *)j->r.list[SPAWN_L_ARGV],
           (char *const *)j->r.list[SPAWN_L_ENVP]);
    child_fail(j, SPAWN_STEP_EXEC);
}

/* Puts a failed child's step and errno on the status pipe ('W', then 'E'). */
static void record_child_failure(struct job *j)
{
    spawner_record(j->status, SPAWN_REC_STEP, j->child_step);
    spawner_record(j->status, SPAWN_REC_EXEC, j->child_err);
}

/* ---- ordinary children ---------------------------------------------------------------- */

static __attribute__((no_sanitize("address", "undefined"))) int plain_child(void *arg)
{
    struct job *j = arg;
    /* Every call is checked, as libuv's uv__process_child_init does: a child that is
     * not its own group leader would escape terminate, one without the death signal
     * would outlive a SIGKILLed daemon. */
    if (setsid() < 0) child_fail(j, SPAWN_STEP_SESSION);
    /* Die with the daemon even if it is SIGKILLed (the group kill cannot run). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) child_fail(j, SPAWN_STEP_DEATHSIG);
    if ((j->r.flags & SPAWN_F_TTY) && ioctl(j->in, TIOCSCTTY, 0) < 0) child_fail(j, SPAWN_STEP_TTY);
    if (j->r.flags & SPAWN_F_REFUSE) {
        int fd = (j->r.flags & SPAWN_F_TTY) ? j->in : j->err;
        ssize_t w = write(fd, j->r.exe, strlen(j->r.exe));
        w = write(fd, "\n", 1);
        (void)w;
        _exit(j->r.refuse_code ? (int)(j->r.refuse_code & 0xff) : 1);
    }
    child_exec(j, j->r.flags & SPAWN_F_TTY, NULL);
    return 127;
}

static void start_plain(struct job *j, char *stack)
{
    j->child_err = 0;
    pid_t pid =
        clone(plain_child, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | CLONE_PARENT | SIGCHLD, j);
    if (pid < 0) {
        int err = errno;
        spawner_record(j->status, SPAWN_REC_STEP, SPAWN_STEP_CLONE);
        spawner_record(j->status, SPAWN_REC_EXEC, err);
        return;
    }
    spawner_record(j->status, SPAWN_REC_PID, pid);
    if (j->child_err)
        record_child_failure(j);
    else
        spawner_record(j->status, SPAWN_REC_STARTED, 0);
}

/* ---- sandboxed children: the init --------------------------------------------------------- */

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

/* Hands an accepted connection to the daemon's proxy. */
static void pass_conn(int proxy, int conn, char tag)
{
    struct iovec iov = {&tag, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &conn, sizeof conn);
    while (sendmsg(proxy, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

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
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        int st;
        if (waitpid(-1, &st, 0) < 0 && errno == ECHILD) break;
    }
}

/* The init's life after the command started: reap, relay connections, and exit
 * with the command's status. */
static __attribute__((noreturn)) void init_wait(pid_t cmd, const struct spawn_wire_req *r,
                                                int proxy, const int *listeners, int nl, int sfd)
{
    for (;;) {
        struct pollfd p[3];
        int np = 0;
        p[np++] = (struct pollfd){sfd, POLLIN, 0};
        for (int i = 0; i < nl; i++)
            p[np++] = (struct pollfd){listeners[i], POLLIN, 0};
        if (poll(p, (nfds_t)np, -1) < 0 && errno != EINTR) _exit(1);
        for (int i = 0; i < nl; i++) {
            if (!(p[1 + i].revents & POLLIN)) continue;
            int c;
            while ((c = accept4(listeners[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                pass_conn(proxy, c, r->proxy_ports[0] && i == 0 ? 'H' : 'S');
                close(c);
            }
        }
        if (!(p[0].revents & POLLIN)) continue;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) > 0) {
        }
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
            if (w != cmd) continue;
            if (r->flags & SPAWN_F_PID_INHERIT) kill_leftovers();
            _exit(exit_code(st));
        }
    }
}

/* Ends the init (or the fs helper) whose step failed: the step and errno go on the
 * status pipe as a sandbox failure ('W', then 'F'). */
static __attribute__((noreturn)) void init_fail(struct job *j, int step, int err)
{
    spawner_record(j->status, SPAWN_REC_STEP, step);
    spawner_record(j->status, SPAWN_REC_SETUP, err > 0 ? err : EIO);
    _exit(127);
}

/* The sandboxed fs helper: no exec (nothing of the host need be visible to load a
 * program from); the init confines itself and serves. */
static __attribute__((noreturn)) void serve_confined(struct job *j, struct sandbox_confinement *c)
{
    int sock = j->r.n_extra_fds && serve_fn ? j->extra[0] : -1;
    (void)prctl(PR_SET_NAME, "exec-sbx-helper"); /* a name for ps, nothing depends on it */
    if (sock < 0) init_fail(j, SPAWN_STEP_STDIO, EPROTO);
    if (chdir("/") < 0) init_fail(j, SPAWN_STEP_CWD, errno);
    int rc = sandbox_confine(c);
    if (rc < 0) init_fail(j, SPAWN_STEP_CONFINE, -rc);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) init_fail(j, SPAWN_STEP_SIGNALS, errno);
    spawner_record(j->status, SPAWN_REC_STARTED, 0);
    for (int i = 0; i < j->nfds; i++)
        if (j->fds[i] != sock) close(j->fds[i]);
    if (c->ruleset_fd >= 0) close(c->ruleset_fd);
    _exit(serve_fn(sock));
}

static __attribute__((noinline)) pid_t vfork_command(struct job *j,
                                                     const struct sandbox_confinement *c)
{
    pid_t pid = vfork();
    if (pid == 0) child_exec(j, j->r.flags & SPAWN_F_TTY, c);
    return pid;
}

/* Runs in the init (PID 1 of the new namespaces, or a subreaper without a PID
 * namespace). Never returns. */
static __attribute__((noreturn)) void sandbox_init(struct job *j, bool userns, uid_t uid, gid_t gid)
{
    close(SPAWNER_SOCK_FD);
    (void)prctl(PR_SET_NAME, "exec-sandbox"); /* a name for ps, nothing depends on it */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) init_fail(j, SPAWN_STEP_DEATHSIG, errno);
    if (setsid() < 0) init_fail(j, SPAWN_STEP_SESSION, errno);
    /* Without a PID namespace, the command's orphans must come to us to be killed. */
    if ((j->r.flags & SPAWN_F_PID_INHERIT) && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        init_fail(j, SPAWN_STEP_SUBREAPER, errno);
    /* The process group's signals are the command's business; SIGKILL still ends us. */
    sigset_t all;
    sigfillset(&all);
    if (sigprocmask(SIG_SETMASK, &all, NULL) < 0) init_fail(j, SPAWN_STEP_SIGNALS, errno);
    if ((j->r.flags & SPAWN_F_TTY) && ioctl(j->in, TIOCSCTTY, 0) < 0)
        init_fail(j, SPAWN_STEP_TTY, errno);
    struct sandbox_spec spec = {
        .enforce_fs = j->r.flags & SPAWN_F_ENFORCE_FS,
        .net_restricted = j->r.flags & SPAWN_F_NET_RESTRICTED,
        .net_proxy = j->r.flags & SPAWN_F_PROXY,
        .pid_inherit = j->r.flags & SPAWN_F_PID_INHERIT,
        .readable = j->r.list[SPAWN_L_READABLE],
        .writable = j->r.list[SPAWN_L_WRITABLE],
        .readonly_sub = j->r.list[SPAWN_L_READONLY_SUB],
        .denied = j->r.list[SPAWN_L_DENIED],
        .placeholders = j->r.list[SPAWN_L_PLACEHOLDERS],
    };
    struct sandbox_confinement conf;
    const char *what = "";
    int rc = sandbox_setup(&spec, userns, uid, gid, &conf, &what);
    if (rc < 0) {
        fprintf(stderr, "exec-server: sandbox setup failed at %s: %s\n", what, strerror(-rc));
        init_fail(j, SPAWN_STEP_SANDBOX, -rc);
    }
    /* The command needs the ruleset while it puts its own 0, 1, 2, 3... in place. */
    if (conf.ruleset_fd >= 0 && conf.ruleset_fd < FD_BASE) {
        int h = fcntl(conf.ruleset_fd, F_DUPFD_CLOEXEC, FD_BASE);
        int err = errno;
        close(conf.ruleset_fd);
        conf.ruleset_fd = h;
        if (h < 0) init_fail(j, SPAWN_STEP_SANDBOX, err);
    }
    if (j->r.flags & SPAWN_F_SERVE) serve_confined(j, &conf);
    int listeners[2], nl = 0;
    int proxy = j->r.n_init_fds ? j->init_fds[0] : -1;
    if ((j->r.flags & SPAWN_F_PROXY) && proxy >= 0) {
        for (int i = 0; i < 2; i++) {
            if (!j->r.proxy_ports[i]) continue;
            int s = listen_loopback(j->r.proxy_ports[i]);
            if (s < 0) init_fail(j, SPAWN_STEP_PROXY, -s);
            listeners[nl++] = s;
        }
    }
    if ((j->r.flags & SPAWN_F_TRANSPARENT) && proxy >= 0 && j->r.n_init_fds > 1 &&
        (rc = sandbox_tun_start(j->init_fds[1], proxy, &what)) < 0) {
        fprintf(stderr, "exec-server: sandbox setup failed at %s: %s\n", what, strerror(-rc));
        init_fail(j, SPAWN_STEP_SANDBOX, -rc);
    }
    /* Without it the init could not learn that the command exited: it would wait
     * forever, and so would the client. */
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) init_fail(j, SPAWN_STEP_SIGNALS, errno);
    j->child_err = 0;
    pid_t cmd = vfork_command(j, &conf);
    if (cmd < 0) {
        int err = errno;
        spawner_record(j->status, SPAWN_REC_STEP, SPAWN_STEP_CLONE);
        spawner_record(j->status, SPAWN_REC_EXEC, err);
        _exit(127);
    }
    if (j->child_err) {
        record_child_failure(j);
        _exit(127);
    }
    spawner_record(j->status, SPAWN_REC_STARTED, 0);
    /* Keep nothing of the command's: its pipes must reach EOF when it is gone. */
    for (int i = 0; i < j->nfds; i++)
        if (j->fds[i] != proxy) close(j->fds[i]);
    if (conf.ruleset_fd >= 0) close(conf.ruleset_fd);
    init_wait(cmd, &j->r, proxy, listeners, nl, sfd);
}

static void start_sandboxed(struct job *j)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int ns = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    if (!(j->r.flags & SPAWN_F_PID_INHERIT)) ns |= CLONE_NEWPID;
    if (j->r.flags & SPAWN_F_NET_RESTRICTED) ns |= CLONE_NEWNET;
    bool userns = true;
    long pid = syscall(SYS_clone, CLONE_PARENT | CLONE_NEWUSER | ns | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid < 0 && uid == 0 && (errno == EPERM || errno == EINVAL || errno == ENOSPC)) {
        /* No user namespace for root here (disabled or exhausted): the namespaces
         * are made as root, and the command still drops every capability. */
        userns = false;
        pid = syscall(SYS_clone, CLONE_PARENT | ns | SIGCHLD, NULL, NULL, NULL, 0);
    }
    if (pid == 0) sandbox_init(j, userns, uid, gid);
    if (pid < 0) {
        int err = errno;
        spawner_record(j->status, SPAWN_REC_STEP, SPAWN_STEP_CLONE);
        spawner_record(j->status, SPAWN_REC_SETUP, err);
        return;
    }
    spawner_record(j->status, SPAWN_REC_PID, (int)pid);
}

/* ---- the request loop ------------------------------------------------------------------- */

/* Moves received descriptors above FD_BASE (close-on-exec) so that placing the
 * child's 0, 1, 2, 3... can never overwrite one still to be placed. */
static int lift_fds(struct job *j)
{
    for (int i = 0; i < j->nfds; i++) {
        int h = fcntl(j->fds[i], F_DUPFD_CLOEXEC, FD_BASE);
        if (h < 0) return -errno;
        close(j->fds[i]);
        j->fds[i] = h;
    }
    return 0;
}

/* Assigns the descriptors to their roles; -EPROTO when the counts do not add up. */
static int assign_fds(struct job *j)
{
    bool tty = j->r.flags & SPAWN_F_TTY;
    int stdio = tty ? 1 : 3;
    if (j->nfds != 1 + stdio + (int)j->r.n_extra_fds + (int)j->r.n_init_fds) return -EPROTO;
    j->status = j->fds[0];
    j->in = j->fds[1];
    j->out = tty ? j->fds[1] : j->fds[2];
    j->err = tty ? j->fds[1] : j->fds[3];
    j->extra = j->fds + 1 + stdio;
    j->init_fds = j->extra + j->r.n_extra_fds;
    return 0;
}

int spawner_main(int sk, spawner_serve_fn serve)
{
    serve_fn = serve;
    signal(SIGPIPE, SIG_IGN);
    find_ignored_sigs();
    (void)prctl(PR_SET_NAME, "exec-spawner"); /* a name for ps, nothing depends on it */
    /* Die with the daemon: a spawner without it would only hold its pipes open. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) return 1;
    char *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return 1;
    struct buf in;
    buf_init(&in);
    for (;;) {
        static struct job j;
        memset(&j, 0, sizeof j);
        buf_reset(&in);
        int rc = fdframe_recv(sk, &in, j.fds, FDFRAME_MAX_FDS, &j.nfds);
        if (rc < 0) break;
        void *arena = NULL;
        if (spawn_wire_decode(in.data, in.len, &j.r, &arena) < 0 || lift_fds(&j) < 0 ||
            assign_fds(&j) < 0) {
            if (j.nfds > 0) spawner_record(j.fds[0], SPAWN_REC_SETUP, EPROTO);
        } else if (j.r.flags & SPAWN_F_SANDBOX) {
            start_sandboxed(&j);
        } else {
            start_plain(&j, stack);
        }
        for (int i = 0; i < j.nfds; i++)
            close(j.fds[i]);
        free(arena);
    }
    buf_free(&in);
    return 0;
}
