/* spawn: starts a child with vfork + execve.
 *
 * vfork keeps spawning cheap whatever the daemon's size (no page-table copy), and
 * lets the child report an exec failure by writing errno into the parent's memory
 * before _exit, so no error pipe is needed. Between vfork and execve the child
 * makes only system calls: every signal was blocked by the parent first (so no
 * handler of ours can run on the shared stack), dispositions are reset to default
 * and the mask is cleared just before execve. Both modes start a new session, so
 * the child's pid is its process group and terminate reaches grandchildren. */
#include "process/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "process/guardian.h"
#include "sandbox/enforce.h"
#include "util/mem.h"

/* Fallback where pidfd_open is missing (valgrind 3.19 does not know syscall 434,
 * so the whole process path would be untestable under it): a detached thread
 * blocks in waitid(P_PID) for the child, keeps its status and makes an eventfd
 * readable; spawn_wait() hands the status out as waitid(P_PIDFD) would. */
struct pidwatch {
    struct pidwatch *next;
    int fd;        /* the eventfd the caller polls (owned by the caller) */
    pid_t pid;
    bool done;     /* the thread reaped the child; si holds its status */
    siginfo_t si;
};
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pidwatch *watches;

struct watch_arg {
    pid_t pid;
    int wfd; /* a dup of the eventfd, owned by the thread */
};

static void *watch_thread(void *arg)
{
    struct watch_arg a = *(struct watch_arg *)arg;
    free(arg);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)a.pid, &si, WEXITED) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&watch_lock);
    for (struct pidwatch *w = watches; w; w = w->next) {
        if (w->pid == a.pid && !w->done) {
            w->si = si;
            w->done = true;
            break;
        }
    }
    pthread_mutex_unlock(&watch_lock);
    uint64_t one = 1;
    ssize_t r = write(a.wfd, &one, sizeof one);
    (void)r;
    close(a.wfd);
    return NULL;
}

/* Stands in for pidfd_open where the kernel lacks it (an eventfd a watcher thread
 * signals), so it keeps that syscall's convention: an fd, or -1 with errno set. */
static int pidfd_fallback(pid_t pid)
{
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return -1;
    struct watch_arg *a = xmalloc(sizeof *a);
    a->pid = pid;
    a->wfd = fcntl(efd, F_DUPFD_CLOEXEC, 3);
    if (a->wfd < 0) {
        int err = errno;
        free(a);
        close(efd);
        errno = err;
        return -1;
    }
    struct pidwatch *w = xcalloc(1, sizeof *w);
    w->fd = efd;
    w->pid = pid;
    pthread_mutex_lock(&watch_lock);
    w->next = watches;
    watches = w;
    pthread_mutex_unlock(&watch_lock);
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &attr, watch_thread, a);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        pthread_mutex_lock(&watch_lock);
        watches = w->next; /* still the head: only this thread adds */
        pthread_mutex_unlock(&watch_lock);
        free(w);
        close(a->wfd);
        free(a);
        close(efd);
        errno = r;
        return -1;
    }
    return efd;
}

int spawn_wait(int pidfd, siginfo_t *si)
{
    pthread_mutex_lock(&watch_lock);
    for (struct pidwatch **pp = &watches; *pp; pp = &(*pp)->next) {
        struct pidwatch *w = *pp;
        if (w->fd != pidfd) continue;
        if (w->done) {
            *si = w->si;
            *pp = w->next;
            free(w);
        } else {
            memset(si, 0, sizeof *si);
        }
        pthread_mutex_unlock(&watch_lock);
        return 0;
    }
    pthread_mutex_unlock(&watch_lock);
    return waitid(P_PIDFD, (id_t)pidfd, si, WEXITED | WNOHANG) < 0 ? -errno : 0;
}

/* Returns 0 or -errno. */
static int set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

/* PATH search as execvp does it, done in the parent so both modes agree. Returns a
 * malloc'd path, or NULL with *err set (ENOENT, or EACCES when only
 * non-executable candidates exist). */
static char *resolve_program(const char *prog, const char *path_env, int *err)
{
    if (strchr(prog, '/')) return xstrdup(prog);
    if (!*prog) {
        *err = ENOENT;
        return NULL;
    }
    const char *path = path_env ? path_env : "/usr/local/bin:/bin:/usr/bin";
    int seen_eacces = 0;
    size_t plen = strlen(prog);
    while (1) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        char *cand = xmalloc(dlen + plen + 3);
        if (dlen == 0) {
            memcpy(cand, "./", 2);
            dlen = 1;
            memcpy(cand + 2, prog, plen + 1);
        } else {
            memcpy(cand, path, dlen);
            cand[dlen] = '/';
            memcpy(cand + dlen + 1, prog, plen + 1);
        }
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) return cand;
            seen_eacces = 1;
        }
        free(cand);
        if (!colon) break;
        path = colon + 1;
    }
    *err = seen_eacces ? EACCES : ENOENT;
    return NULL;
}

/* What the vfork child needs, gathered so the child code sits in its own frame
 * (no caller locals can be clobbered by vfork's second return). */
struct child_setup {
    const char *exe;
    const struct spawn_request *rq;
    int slave, in_r, devnull, out_w, err_w;
};

static __attribute__((noinline)) pid_t vfork_exec(const struct child_setup *cs,
                                                  volatile int *child_err)
{
    const struct spawn_request *rq = cs->rq;
    pid_t pid = vfork();
    if (pid != 0) return pid;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigaction(sig, &sa, NULL);
    }
    setsid();
    /* Die with the daemon even if it is SIGKILLed (the group kill cannot run). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (rq->tty) {
        if (ioctl(cs->slave, TIOCSCTTY, 0) < 0) goto fail;
        if (dup2(cs->slave, 0) < 0 || dup2(cs->slave, 1) < 0 || dup2(cs->slave, 2) < 0) goto fail;
    } else {
        if (dup2(rq->pipe_stdin ? cs->in_r : cs->devnull, 0) < 0 || dup2(cs->out_w, 1) < 0 ||
            dup2(cs->err_w, 2) < 0)
            goto fail;
    }
    /* The sandbox goes on before chdir: a cwd inside a writable root must resolve
     * in the new mount view, not keep the read-only one. */
    if (rq->sandbox) {
        int rc = sandbox_apply(rq->sandbox);
        if (rc < 0) {
            errno = -rc;
            goto fail;
        }
    }
    if (chdir(rq->cwd) < 0) goto fail;
    syscall(SYS_close_range, 3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(cs->exe, rq->argv, rq->envp);
fail:
    *child_err = errno ? errno : EIO;
    _exit(127);
}

int spawn_child(const struct spawn_request *rq, struct spawn_result *out)
{
    int err = 0;
    char *exe = resolve_program(rq->program, rq->path_env, &err);
    if (!exe) return -err;

    int master = -1, slave = -1, outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1};
    int devnull = -1;
    if (rq->tty) {
        struct winsize ws = {.ws_row = rq->rows ? rq->rows : 24, .ws_col = rq->cols ? rq->cols : 80};
        if (openpty(&master, &slave, NULL, NULL, &ws) < 0) {
            err = errno;
            goto fail;
        }
        /* openpty's fds are not close-on-exec: one job must never inherit another's
         * terminal. */
        fcntl(slave, F_SETFD, FD_CLOEXEC);
        set_nonblock_cloexec(master);
    } else {
        if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
            err = errno;
            goto fail;
        }
        if (rq->pipe_stdin) {
            if (pipe2(inp, O_CLOEXEC) < 0) {
                err = errno;
                goto fail;
            }
        } else if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
            err = errno;
            goto fail;
        }
    }

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    volatile int child_err = 0;
    struct child_setup cs = {exe, rq, slave, inp[0], devnull, outp[1], errp[1]};
    pid_t pid = vfork_exec(&cs, &child_err);
    int vfork_err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(exe);
    exe = NULL;
    if (pid < 0) {
        err = vfork_err;
        goto fail;
    }
    if (child_err) {
        err = child_err;
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        goto fail;
    }
    out->pid = pid;
    out->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (out->pidfd < 0 && errno == ENOSYS) {
        out->pidfd = pidfd_fallback(pid);
        /* Where pidfd_open is missing, vfork may be emulated by fork (valgrind):
         * then the child may not have reached setsid() yet, and a group kill
         * right after the start would miss it. Wait (bounded) until it has. */
        for (int i = 0; out->pidfd >= 0 && i < 2000 && getpgid(pid) != pid; i++) usleep(500);
    }
    if (out->pidfd < 0) {
        /* Out of fds (EMFILE) after the exec: a child we cannot watch is killed. */
        err = errno;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL); /* in case it has not reached setsid() (fork-like vfork) */
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        goto fail;
    }
    guardian_track(pid);
    if (rq->tty) {
        close(slave);
        out->out_fd = master;
        out->err_fd = -1;
        out->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 3);
    } else {
        close(outp[1]);
        close(errp[1]);
        if (inp[0] >= 0) close(inp[0]);
        if (devnull >= 0) close(devnull);
        set_nonblock_cloexec(outp[0]);
        set_nonblock_cloexec(errp[0]);
        out->out_fd = outp[0];
        out->err_fd = errp[0];
        out->in_fd = inp[1];
        if (inp[1] >= 0) set_nonblock_cloexec(inp[1]);
    }
    return 0;

fail:
    free(exe);
    int fds[] = {master, slave, outp[0], outp[1], errp[0], errp[1], inp[0], inp[1], devnull};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    return -err;
}
