/* spawner_proc: the spawner process itself (see spawner.h): requests in, children
 * out.
 *
 * The spawner is single-threaded and owns nothing but its socket, so it may fork
 * freely. An ordinary child is started with clone(CLONE_VM | CLONE_VFORK |
 * CLONE_PARENT) on a stack of its own: the spawner waits while the child sets up
 * its descriptors and execs, and learns an exec failure through shared memory.
 *
 * A sandboxed child is the sandbox's init, cloned into fresh namespaces by
 * sandbox/sandbox_init.h, which runs the whole setup in one sequence; the spawner
 * only decodes the request, hands it over with its own part (the command's
 * descriptors, cwd and exec, shared with ordinary children, and the status records)
 * and records the init's pid. */
#include "helpers/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/own_ports.h"
#include "sandbox/sandbox_init.h"
#include "sandbox/user_budgets.h"
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
    execve(j->r.exe, (char *const *)j->r.argv, (char *const *)j->r.envp);
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

/* ---- sandboxed children ------------------------------------------------------------------ */

/* The spawner's part of a sandboxed start (sandbox/sandbox_init.h runs the rest). */

static int step_of(enum sandbox_step s)
{
    switch (s) {
    case SANDBOX_STEP_CLONE: return SPAWN_STEP_CLONE;
    case SANDBOX_STEP_SESSION: return SPAWN_STEP_SESSION;
    case SANDBOX_STEP_DEATHSIG: return SPAWN_STEP_DEATHSIG;
    case SANDBOX_STEP_SUBREAPER: return SPAWN_STEP_SUBREAPER;
    case SANDBOX_STEP_SIGNALS: return SPAWN_STEP_SIGNALS;
    case SANDBOX_STEP_TTY: return SPAWN_STEP_TTY;
    case SANDBOX_STEP_SETUP: return SPAWN_STEP_SANDBOX;
    case SANDBOX_STEP_PROXY: return SPAWN_STEP_PROXY;
    case SANDBOX_STEP_CWD: return SPAWN_STEP_CWD;
    case SANDBOX_STEP_CONFINE: return SPAWN_STEP_CONFINE;
    case SANDBOX_STEP_STDIO: return SPAWN_STEP_STDIO;
    }
    return SPAWN_STEP_NONE;
}

/* Ends the init (or the fs helper) whose step failed: the step and errno go on the
 * status pipe as a sandbox failure ('W', then 'F'); a failed clone of the command is
 * an exec-side failure ('E') as for an ordinary child. */
static __attribute__((noreturn)) void sbx_fail(void *job, enum sandbox_step step, int err)
{
    struct job *j = job;
    spawner_record(j->status, SPAWN_REC_STEP, step_of(step));
    spawner_record(j->status, step == SANDBOX_STEP_CLONE ? SPAWN_REC_EXEC : SPAWN_REC_SETUP,
                   err > 0 ? err : EIO);
    _exit(127);
}

static __attribute__((noreturn)) void sbx_exec_command(void *job,
                                                       const struct sandbox_confinement *c)
{
    struct job *j = job;
    child_exec(j, j->r.flags & SPAWN_F_TTY, c);
    _exit(127); /* not reached: child_exec execs or fails */
}

static bool sbx_command_failed(void *job)
{
    struct job *j = job;
    if (!j->child_err) return false;
    record_child_failure(j);
    return true;
}

static void sbx_started(void *job)
{
    struct job *j = job;
    spawner_record(j->status, SPAWN_REC_STARTED, 0);
}

static const struct sandbox_ops sbx_ops = {
    .fail = sbx_fail,
    .exec_command = sbx_exec_command,
    .command_failed = sbx_command_failed,
    .started = sbx_started,
};

/* The i-th cgroup's join descriptor among the init fds (they come last: SPAWN_F_CGROUP, then
 * SPAWN_F_CGROUP2), or -1. */
static int cgroup_init_fd(const struct job *j, int i)
{
    uint32_t f = j->r.flags;
    int n = !!(f & SPAWN_F_CGROUP) + (f & SPAWN_F_CGROUP ? !!(f & SPAWN_F_CGROUP2) : 0);
    if (i >= n || (int)j->r.n_init_fds < n) return -1;
    return j->init_fds[(int)j->r.n_init_fds - n + i];
}

static void start_sandboxed(struct job *j)
{
    struct sandbox_ops ops = sbx_ops;
    ops.serve = serve_fn;
    uint32_t f = j->r.flags;
    struct sandbox_start st = {
        .spec = j->r.spec,
        .tty = f & SPAWN_F_TTY,
        .tty_fd = j->in,
        .err_fd = j->err,
        .proxy_fd = (f & SPAWN_F_PROXY) ? j->init_fds[0] : -1,
        .proxy_ports = {j->r.proxy_ports[0], j->r.proxy_ports[1]},
        .tun_fd = (f & SPAWN_F_TRANSPARENT) && j->r.n_init_fds > 1 ? j->init_fds[1] : -1,
        .cgroup_fds = {cgroup_init_fd(j, 0), cgroup_init_fd(j, 1)},
        .serve_sock = j->r.n_extra_fds ? j->extra[0] : -1,
        .spawner_sock = SPAWNER_SOCK_FD,
        .fd_base = FD_BASE,
        .job_fds = j->fds,
        .njob_fds = j->nfds,
        .ops = &ops,
        .job = j,
    };
    j->child_err = 0;
    pid_t pid = sandbox_spawn(&st);
    if (pid < 0) {
        spawner_record(j->status, SPAWN_REC_STEP, SPAWN_STEP_CLONE);
        spawner_record(j->status, SPAWN_REC_SETUP, -pid);
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
    /* Every sandbox init is a fork of this process and reads the live table through
     * this mapping; without it a network-enabled sandbox is refused (net_guard). */
    if (own_ports_attach(SPAWNER_PORTS_FD) == 0) close(SPAWNER_PORTS_FD);
    user_budgets_notes_attach(SPAWNER_NOTES_FD);
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
            /* The next sandbox's network, while this one sets itself up. */
            if (j.r.spec.net_restricted && !j.r.spec.landlock_only) sandbox_net_prepare();
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
