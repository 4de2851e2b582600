/* spawn: starts a child through the spawner (helpers/spawner.h).
 *
 * The daemon resolves the program on PATH, makes the child's pipes or PTY and a
 * status pipe, hands the child's ends to the spawner, and reads the outcome: the
 * pid, then whether the program runs, could not be executed, or could not be
 * sandboxed. The child is the daemon's own (CLONE_PARENT): it is watched and
 * reaped through a pidfd as before. Both modes start a new session, so the
 * child's pid is its process group and terminate reaches grandchildren; a
 * sandboxed child's pid is its sandbox init, whose group holds the command. */
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

#include "core/limits.h"
#include "core/log.h"
#include "helpers/spawner.h"
#include "helpers/guardian.h"
#include "sandbox/hold.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_host.h"
#include "util/fdframe.h"
#include "util/mem.h"

#define FDS_MAX FDFRAME_MAX_FDS

/* Fallback where pidfd_open is missing (valgrind 3.19 does not know syscall 434,
 * so the whole process path would be untestable under it): a detached thread
 * blocks in waitid(P_PID) for the child, keeps its status and makes an eventfd
 * readable; spawn_wait() hands the status out as waitid(P_PIDFD) would. */
struct pidwatch {
    struct pidwatch *next;
    int fd; /* the eventfd the caller polls (owned by the caller) */
    pid_t pid;
    bool done; /* the thread reaped the child; si holds its status */
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

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2) /* linux/pidfd.h, Linux 6.9 */
#endif

int spawn_group_signal(int pidfd, int sig)
{
#ifdef SYS_pidfd_send_signal
    if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, PIDFD_SIGNAL_PROCESS_GROUP) == 0) return 0;
    return -errno;
#else
    (void)pidfd;
    (void)sig;
    return -ENOSYS;
#endif
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

/* A start that takes this long means the spawner or a sandbox init is stuck. */
#define SPAWN_TIMEOUT_MS 30000

/* The request's sandbox part: the spec the sandbox's init gets (sandbox/spec.h),
 * built here once from the resolved policy, the host's mode and the server's caps,
 * and the init's descriptors. */
static void wire_sandbox(const struct spawn_request *rq, struct spawn_wire_req *w)
{
    struct sandbox_spec *s = &w->spec;
    sandbox_policy_spec(rq->sandbox, s);
    s->landlock_only = sandbox_host_mode_for(rq->sandbox->legacy_landlock) == SANDBOX_MODE_LANDLOCK;
    s->pid_inherit = rq->pid_inherit;
    s->serve = rq->serve;
    s->net_proxy = rq->proxy_fd >= 0;
    s->seal_cgroups = s->landlock_only && rq->cgroup_fds[0] >= 0;
    s->max_procs = server_limits.sandbox_max_processes;
    w->flags |= SPAWN_F_SANDBOX;
    if (rq->proxy_fd >= 0) {
        w->flags |= SPAWN_F_PROXY;
        w->proxy_ports[0] = rq->proxy_ports[0];
        w->proxy_ports[1] = rq->proxy_ports[1];
        w->n_init_fds++;
        if (rq->transparent) {
            w->flags |= SPAWN_F_TRANSPARENT;
            w->n_init_fds++;
        }
    }
    if (rq->cgroup_fds[0] >= 0) {
        w->flags |= SPAWN_F_CGROUP;
        w->n_init_fds++;
    }
    if (rq->cgroup_fds[1] >= 0) {
        w->flags |= SPAWN_F_CGROUP2;
        w->n_init_fds++;
    }
}

/* One start, from the request to the result: what the child's descriptors are,
 * the status pipe, and (async) the handles watching it. */
struct spawn_op {
    bool tty, has_stdio, sandboxed;
    bool landlock_only; /* no namespaces: the result ends itself */
    int master, slave, outp[2], errp[2], inp[2], devnull;
    int status;               /* the status pipe's read end, or -1 */
    struct spawner_status st; /* the records read so far */
    /* spawn_child_async */
    uv_loop_t *loop; /* sent on the loop's channel (spawner_submit) */
    uint64_t ticket; /* while the request waits in that channel's queue */
    uv_poll_t poll;
    uv_timer_t timer;
    int handles;               /* open uv handles; freed when it reaches zero */
    bool finished;             /* the outcome is known (done called, or the child discarded) */
    bool cancelled;            /* spawn_cancel: no done to call */
    struct sandbox_hold *hold; /* taken over by spawn_cancel */
    spawn_done_fn done;
    void *arg;
};

static void op_init(struct spawn_op *op, const struct spawn_request *rq)
{
    memset(op, 0, sizeof *op);
    op->tty = rq->tty;
    op->has_stdio = rq->stdio != NULL;
    op->sandboxed = rq->sandbox != NULL;
    op->landlock_only =
        rq->sandbox && !rq->refusal &&
        sandbox_host_mode_for(rq->sandbox->legacy_landlock) == SANDBOX_MODE_LANDLOCK;
    op->master = op->slave = op->devnull = op->status = -1;
    op->outp[0] = op->outp[1] = op->errp[0] = op->errp[1] = op->inp[0] = op->inp[1] = -1;
}

/* Closes every descriptor the op still holds (a failed start). */
static void op_close_fds(struct spawn_op *op)
{
    int fds[] = {op->master,  op->slave,  op->outp[0], op->outp[1], op->errp[0],
                 op->errp[1], op->inp[0], op->inp[1],  op->devnull, op->status};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    op->master = op->slave = op->devnull = op->status = -1;
    op->outp[0] = op->outp[1] = op->errp[0] = op->errp[1] = op->inp[0] = op->inp[1] = -1;
}

/* Resolves the program, makes the child's pipes or PTY and the status pipe, and
 * sends the request to the spawner. Returns 0 (op->status is the pipe to read
 * the outcome from) or -errno; on failure op holds no descriptor. */
static int op_send(struct spawn_op *op, const struct spawn_request *rq)
{
    int err = 0;
    bool exec = !rq->refusal && !rq->serve;
    char *exe = exec ? resolve_program(rq->program, rq->path_env, &err) : NULL;
    if (!exe && exec) return -err;
    if (rq->stdio) {
        /* The caller wires the child itself. */
    } else if (rq->tty) {
        struct winsize ws = {.ws_row = rq->rows ? rq->rows : 24,
                             .ws_col = rq->cols ? rq->cols : 80};
        if (openpty(&op->master, &op->slave, NULL, NULL, &ws) < 0) {
            err = errno;
            goto fail;
        }
        /* openpty's fds are not close-on-exec: one job must never inherit another's
         * terminal. */
        fcntl(op->slave, F_SETFD, FD_CLOEXEC);
        set_nonblock_cloexec(op->master);
    } else {
        if (pipe2(op->outp, O_CLOEXEC) < 0 || pipe2(op->errp, O_CLOEXEC) < 0) {
            err = errno;
            goto fail;
        }
        if (rq->pipe_stdin) {
            if (pipe2(op->inp, O_CLOEXEC) < 0) {
                err = errno;
                goto fail;
            }
        } else if ((op->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
            err = errno;
            goto fail;
        }
    }
    int stdio[3], nstdio;
    if (rq->stdio) {
        memcpy(stdio, rq->stdio, sizeof stdio);
        nstdio = 3;
    } else if (rq->tty) {
        stdio[0] = op->slave;
        nstdio = 1;
    } else {
        stdio[0] = rq->pipe_stdin ? op->inp[0] : op->devnull;
        stdio[1] = op->outp[1];
        stdio[2] = op->errp[1];
        nstdio = 3;
    }
    struct spawn_wire_req w = {.rows = rq->rows ? rq->rows : 24,
                               .cols = rq->cols ? rq->cols : 80,
                               .exe = rq->refusal ? rq->refusal
                                      : exe       ? exe
                                                  : "",
                               .cwd = rq->cwd,
                               .n_extra_fds = rq->n_extra_fds};
    if (rq->tty) w.flags |= SPAWN_F_TTY;
    if (rq->pipe_stdin) w.flags |= SPAWN_F_PIPE_STDIN;
    if (rq->refusal) {
        w.flags |= SPAWN_F_REFUSE;
        w.refuse_code = (uint32_t)rq->refusal_code;
    }
    w.argv = (const char *const *)rq->argv;
    w.envp = (const char *const *)rq->envp;
    if (rq->sandbox && !rq->refusal) wire_sandbox(rq, &w);
    int st[2];
    if (pipe2(st, O_CLOEXEC | O_NONBLOCK) < 0) {
        err = errno;
        goto fail;
    }
    int fds[FDS_MAX];
    int n = 0;
    fds[n++] = st[1];
    for (int i = 0; i < nstdio; i++)
        fds[n++] = stdio[i];
    for (unsigned i = 0; i < rq->n_extra_fds; i++)
        fds[n++] = rq->extra_fds[i];
    if (w.flags & SPAWN_F_PROXY) fds[n++] = rq->proxy_fd;
    if (w.flags & SPAWN_F_TRANSPARENT) fds[n++] = rq->tun_fd;
    if (w.flags & SPAWN_F_CGROUP) fds[n++] = rq->cgroup_fds[0];
    if (w.flags & SPAWN_F_CGROUP2) fds[n++] = rq->cgroup_fds[1];
    int rc =
        op->loop ? spawner_submit(op->loop, &w, fds, n, &op->ticket) : spawner_request(&w, fds, n);
    close(st[1]);
    free(exe);
    exe = NULL;
    if (rc < 0) {
        close(st[0]);
        err = -rc;
        goto fail;
    }
    op->status = st[0];
    spawner_status_init(&op->st);
    return 0;
fail:
    free(exe);
    op_close_fds(op);
    return -err;
}

/* The verdict once the status pipe is done with (rc: 0, or what waiting for it
 * gave: -ETIMEDOUT, -EPIPE without a verdict, another -errno): 0 with *pid, or
 * -errno / SPAWN_ERR_SANDBOX (with *sandbox_err). */
static int op_verdict(struct spawn_op *op, int rc, pid_t *pid, int *sandbox_err)
{
    const struct spawn_outcome *o = &op->st.o;
    close(op->status);
    op->status = -1;
    if (rc < 0) {
        if (rc != -ETIMEDOUT && rc != -EPIPE) return rc;
        /* No verdict: whatever was started must not live on unwatched. */
        if (o->pid > 0) {
            kill(o->pid, SIGKILL);
            while (waitpid(o->pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
        *sandbox_err = rc == -ETIMEDOUT ? ETIMEDOUT : EPIPE;
        return op->sandboxed ? SPAWN_ERR_SANDBOX : -EAGAIN;
    }
    if (o->err) {
        if (o->pid > 0)
            while (waitpid(o->pid, NULL, 0) < 0 && errno == EINTR) {
            }
        /* A missing program or directory is the caller's to hear about (the reply
         * says it); a step that should not fail is the operator's. */
        if (o->step != SPAWN_STEP_NONE && o->step != SPAWN_STEP_EXEC && o->step != SPAWN_STEP_CWD)
            log_warn("a child's start failed at %s: %s", spawner_step_name(o->step),
                     strerror(o->err));
        if (o->setup_failed) {
            *sandbox_err = o->err;
            return SPAWN_ERR_SANDBOX;
        }
        return -o->err;
    }
    *pid = o->pid;
    return 0;
}

/* The child runs: watch it (pidfd), hand the parent's ends out. Returns 0, or
 * -errno after killing it (out of fds for its pidfd). */
static int op_finish(struct spawn_op *op, pid_t pid, struct spawn_result *out)
{
    out->pid = pid;
    out->ends_itself = op->landlock_only;
    out->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (out->pidfd < 0 && errno == ENOSYS) out->pidfd = pidfd_fallback(pid);
    if (out->pidfd < 0) {
        /* Out of fds (EMFILE) after the exec: a child we cannot watch is killed. */
        int err = errno;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        op_close_fds(op);
        return -err;
    }
    guardian_track(pid);
    if (op->has_stdio) {
        out->out_fd = out->err_fd = out->in_fd = -1;
    } else if (op->tty) {
        close(op->slave);
        out->out_fd = op->master;
        out->err_fd = -1;
        out->in_fd = fcntl(op->master, F_DUPFD_CLOEXEC, 3);
    } else {
        close(op->outp[1]);
        close(op->errp[1]);
        if (op->inp[0] >= 0) close(op->inp[0]);
        if (op->devnull >= 0) close(op->devnull);
        set_nonblock_cloexec(op->outp[0]);
        set_nonblock_cloexec(op->errp[0]);
        out->out_fd = op->outp[0];
        out->err_fd = op->errp[0];
        out->in_fd = op->inp[1];
        if (op->inp[1] >= 0) set_nonblock_cloexec(op->inp[1]);
    }
    return 0;
}

/* The verdict and the result, or the cleanup of a failed start. */
static int op_complete(struct spawn_op *op, int rc, struct spawn_result *out, int *sandbox_err)
{
    pid_t pid = -1;
    *sandbox_err = 0;
    rc = op_verdict(op, rc, &pid, sandbox_err);
    if (rc == 0) return op_finish(op, pid, out);
    op_close_fds(op);
    return rc;
}

int spawn_child(const struct spawn_request *rq, struct spawn_result *out, int *sandbox_err)
{
    *sandbox_err = 0;
    if (rq->n_extra_fds > FDS_MAX - 6) return -EINVAL;
    struct spawn_op op;
    op_init(&op, rq);
    int rc = op_send(&op, rq);
    if (rc < 0) return rc;
    struct spawn_outcome o;
    rc = spawner_wait(op.status, SPAWN_TIMEOUT_MS, &o);
    op.st.o = o;
    op.st.decided = rc == 0;
    return op_complete(&op, rc, out, sandbox_err);
}

/* ---- asynchronous starts ---------------------------------------------------------- */

/* A killed child that is no longer tracked must still be reaped; a sandbox's hold is
 * let go only then, when nothing is left in it to exploit the removal of its
 * placeholders (sandbox/hold.h). */
struct reaper {
    uv_poll_t poll;
    int pidfd;
    struct sandbox_hold *hold;
};

static void reaper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void reaper_cb(uv_poll_t *h, int status, int events)
{
    struct reaper *r = h->data;
    siginfo_t si = {0};
    if (spawn_wait(r->pidfd, &si) == 0 && si.si_pid == 0) return;
    uv_close((uv_handle_t *)&r->poll, reaper_closed);
    close(r->pidfd);
    spawn_release_later(h->loop, r->hold);
    r->hold = NULL;
}

/* A hold let go on a pool thread (spawn_release_later). */
struct releaser {
    uv_work_t work;
    struct sandbox_hold *hold;
};

static void releaser_run(uv_work_t *w)
{
    struct releaser *r = w->data;
    sandbox_hold_release(r->hold);
}

static void releaser_done(uv_work_t *w, int status)
{
    free(w->data);
}

void spawn_release_later(uv_loop_t *loop, struct sandbox_hold *hold)
{
    /* The placeholders go now: a client that sees process/closed finds none left on
     * the host (the escape suite checks it). */
    if (!sandbox_hold_release_placeholders(hold)) {
        sandbox_hold_release(hold);
        return;
    }
    struct releaser *r = xmalloc(sizeof *r);
    r->hold = hold;
    r->work.data = r;
    if (uv_queue_work(loop, &r->work, releaser_run, releaser_done) != 0) {
        free(r);
        sandbox_hold_release(hold);
    }
}

void spawn_reap_later(uv_loop_t *loop, int pidfd, struct sandbox_hold *hold)
{
    struct reaper *r = xmalloc(sizeof *r);
    r->pidfd = pidfd;
    r->hold = hold;
    uv_poll_init(loop, &r->poll, pidfd);
    r->poll.data = r;
    uv_poll_start(&r->poll, UV_READABLE, reaper_cb);
}

void spawn_discard(uv_loop_t *loop, const struct spawn_result *r, struct sandbox_hold *hold)
{
    kill(-r->pid, SIGKILL);
    kill(r->pid, SIGKILL);
    guardian_untrack(r->pid);
    int fds[] = {r->out_fd, r->err_fd, r->in_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    spawn_reap_later(loop, r->pidfd, hold);
}

static void op_handle_closed(uv_handle_t *h)
{
    struct spawn_op *op = h->data;
    if (--op->handles == 0) free(op);
}

static void op_close(struct spawn_op *op)
{
    uv_close((uv_handle_t *)&op->poll, op_handle_closed);
    uv_close((uv_handle_t *)&op->timer, op_handle_closed);
}

/* The status pipe ended (rc 0), or waiting for it failed: complete and report, or,
 * for a cancelled start, stop what started. */
static void op_done(struct spawn_op *op, int rc)
{
    if (op->finished) return;
    op->finished = true;
    uv_poll_stop(&op->poll);
    uv_timer_stop(&op->timer);
    /* Timed out still queued (a stopped spawner): it must never start later. */
    if (rc == -ETIMEDOUT) spawner_withdraw(op->ticket);
    struct spawn_result r;
    int sberr = 0;
    memset(&r, 0, sizeof r);
    rc = op_complete(op, rc == 0 && !op->st.decided ? -EPIPE : rc, &r, &sberr);
    if (!op->cancelled)
        op->done(op->arg, rc, &r, sberr);
    else if (rc == 0)
        spawn_discard(op->loop, &r, op->hold);
    else
        sandbox_hold_release(op->hold);
    op->hold = NULL;
    op_close(op);
}

static void op_readable(uv_poll_t *h, int status, int events)
{
    struct spawn_op *op = h->data;
    int rc = status < 0 ? status : spawner_status_read(op->status, &op->st);
    if (rc == 0) return; /* more to come */
    op_done(op, rc < 0 ? rc : 0);
}

static void op_timeout(uv_timer_t *t)
{
    op_done(t->data, -ETIMEDOUT);
}

int spawn_child_async(uv_loop_t *loop, const struct spawn_request *rq, spawn_done_fn done,
                      void *arg, struct spawn_op **opp)
{
    if (rq->n_extra_fds > FDS_MAX - 6) return -EINVAL;
    struct spawn_op *op = xmalloc(sizeof *op);
    op_init(op, rq);
    op->loop = loop;
    int rc = op_send(op, rq);
    if (rc < 0) {
        free(op);
        return rc;
    }
    op->done = done;
    op->arg = arg;
    uv_poll_init(loop, &op->poll, op->status);
    uv_timer_init(loop, &op->timer);
    op->poll.data = op->timer.data = op;
    op->handles = 2;
    uv_poll_start(&op->poll, UV_READABLE | UV_DISCONNECT, op_readable);
    uv_timer_start(&op->timer, op_timeout, SPAWN_TIMEOUT_MS, 0);
    *opp = op;
    return 0;
}

void spawn_cancel(struct spawn_op *op, struct sandbox_hold *hold)
{
    if (op->finished || op->cancelled) {
        sandbox_hold_release(hold);
        return;
    }
    op->cancelled = true;
    op->hold = hold;
    /* Still queued on the loop's channel: it never reaches the spawner, and its
     * status pipe ends at once. Otherwise the spawner has it, perhaps stopped or
     * stuck: the loop goes on watching the pipe (op_readable, op_timeout) and the
     * child, if one starts, is discarded then. Waiting here was up to 30 s of a
     * loop that serves every connection. */
    spawner_withdraw(op->ticket);
    op->ticket = 0;
}
