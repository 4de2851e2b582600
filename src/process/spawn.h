/* spawn: starting one child on a PTY or on pipes (DESIGN.md pitfalls 2-5),
 * sandboxed or not, through the spawner process (helpers/spawner.h). */
#ifndef EXEC_PROCESS_SPAWN_H
#define EXEC_PROCESS_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

struct sandbox_hold;
struct sandbox_policy;

struct spawn_request {
    const char *program;  /* argv[0] as given: resolved on PATH unless it has a '/' */
    char *const *argv;    /* NULL-terminated; argv[0] may be the arg0 override */
    char *const *envp;    /* NULL-terminated, exactly the child's environment */
    const char *path_env; /* PATH from envp, or NULL */
    const char *cwd;      /* absolute directory */
    bool tty;
    unsigned short rows, cols; /* the PTY's initial size; 0 = 24 x 80 */
    bool pipe_stdin;
    const int *stdio;                     /* the child's 0, 1, 2 as given (no pipes are made and the
                                             result has no fds), or NULL */
    const struct sandbox_policy *sandbox; /* confine the child to it, or NULL */
    bool pid_inherit;     /* sandboxed: no PID namespace (--linux-sandbox-pid-namespace) */
    const int *extra_fds; /* given to the child as 3, 4, ... (not closed here) */
    unsigned n_extra_fds;
    int proxy_fd;                  /* managed network: the proxy's socketpair end for the
                                      sandbox's init, or -1 (not closed here) */
    unsigned short proxy_ports[2]; /* HTTP, SOCKS5 ports in the child's netns; 0 = none */
    bool transparent;              /* with proxy_fd: transparent TCP (sandbox/tun.h) */
    int tun_fd;                    /* with transparent: an O_PATH descriptor of /dev/net/tun
                                      for the init (not closed here) */
    const char *refusal;           /* run nothing: print this on stderr and exit refusal_code */
    int refusal_code;              /* 0 means 1 */
    bool serve;                    /* sandboxed, no exec: run the spawner's serve function on
                                      extra fd 0 (the fs helper) */
    int cgroup_fds[2];             /* sandboxed: what the init joins its cgroups by
                                      (sandbox/cgroup_caps.h), -1 where none; not
                                      closed */
};

struct spawn_result {
    pid_t pid;
    int pidfd;
    int out_fd;       /* stdout pipe, or the PTY master */
    int err_fd;       /* stderr pipe, or -1 with a PTY */
    int in_fd;        /* stdin pipe, a dup of the PTY master, or -1 */
    bool ends_itself; /* a sandbox without namespaces: ended by SANDBOX_END_SIGNAL to its
                         init, which ends everything it started (sandbox/sandbox_init.h),
                         never by killing its group (the init would die first) */
};

/* Starts the child. Returns 0, or a negative errno describing why it could not
 * be started (program not found, cwd missing, exec format error...), or
 * SPAWN_ERR_SANDBOX with *sandbox_err the errno when the sandbox could not be set
 * up. All returned fds are non-blocking and close-on-exec. */
#define SPAWN_ERR_SANDBOX (-100000)
int spawn_child(const struct spawn_request *rq, struct spawn_result *out, int *sandbox_err);

/* The same without blocking the loop: the request goes to the spawner now, and
 * done(arg, rc, result, sandbox_err) runs on the loop once the outcome is known
 * (rc as spawn_child returns it; result valid only when rc is 0, and then owned by
 * the callee). The loop thread waited for the exec before (0.3-1 ms a start, and
 * every start on the server queued behind the one in flight); now the child
 * execs while the loop serves other requests. Returns 0 (done will be called
 * exactly once unless spawn_cancel is), or a negative errno from sending the
 * request (done is not called). *op identifies the start for spawn_cancel. */
struct spawn_op;
typedef void (*spawn_done_fn)(void *arg, int rc, const struct spawn_result *r, int sandbox_err);
int spawn_child_async(uv_loop_t *loop, const struct spawn_request *rq, spawn_done_fn done,
                      void *arg, struct spawn_op **op);
/* Abandons an asynchronous start before done ran (its requester is gone); done is
 * not called. Never waits: a request still queued is taken back; one the spawner
 * has (it may be stopped or slow) keeps being watched on the loop, under the same
 * deadline as a start, and a child that does start is then killed and reaped (no
 * process, descriptor or request is left behind). hold, the start's sandbox hold
 * (or NULL), is taken over and released once nothing of the start is left. */
void spawn_cancel(struct spawn_op *op, struct sandbox_hold *hold);

/* A started child nobody wants (r from a done callback): killed with its group,
 * its descriptors closed, reaped on the loop once its pidfd says it exited; hold (or
 * NULL) is released then, not before (sandbox/hold.h). */
void spawn_discard(uv_loop_t *loop, const struct spawn_result *r, struct sandbox_hold *hold);

/* Reaps a child already killed once pidfd (taken over) reports its exit, then
 * releases hold (or NULL); the loop never waits for it. */
void spawn_reap_later(uv_loop_t *loop, int pidfd, struct sandbox_hold *hold);

/* Releases hold (or NULL): its placeholders now, its cgroups on a libuv pool thread:
 * a cgroup's rmdir takes the kernel's cgroup_mutex (about 0.1 ms each, more under
 * load), which the loop thread paid between a sandbox's exit and its process/closed,
 * and again before the next request. The sandbox is reaped: nothing in it is left to
 * exploit the delay, and the server's own cgroup directory is removed only after the
 * loop has run dry (cgroup_caps_shutdown), when every release has run. */
void spawn_release_later(uv_loop_t *loop, struct sandbox_hold *hold);

/* waitid(P_PIDFD, pidfd, si, WEXITED | WNOHANG) for a pidfd from spawn_child,
 * also when it is the eventfd of the no-pidfd_open fallback. si->si_pid is 0
 * while the child runs. Returns 0 or a negative errno. */
int spawn_wait(int pidfd, siginfo_t *si);

/* Sends sig to what is left of the process group whose leader pidfd refers to, once that
 * leader has been reaped. Its pid, and so its group's number, may then already belong to
 * an unrelated process that made a group of its own (setsid): kill(-pid) would signal that
 * stranger. The pidfd names the group's own struct pid, which a reused number never is
 * (pidfd_send_signal with PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9). Returns 0 (some member
 * was signalled; sig 0 only asks), -ESRCH (the group is empty: it can never be joined
 * again), or -EINVAL/-ENOSYS/-EBADF where the kernel cannot say (older kernels, the
 * eventfd stand-in for a pidfd): the caller then signals nothing. */
int spawn_group_signal(int pidfd, int sig);

#endif
