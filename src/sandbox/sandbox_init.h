/* sandbox_init: a sandboxed child's whole setup, as one sequence in one place.
 *
 * The spawner (helpers/spawner.h) hands a sandboxed request to sandbox_spawn,
 * which clones the sandbox's init into fresh namespaces; the init then goes
 * through bubblewrap's order, one step after the other (sandbox_init.c reads top to
 * bottom in this order):
 *  1. clone flags: user, PID (unless --linux-sandbox-pid-namespace inherit), mount,
 *     IPC, UTS and, network restricted or managed, network namespaces (a root
 *     server's spawner makes the restricted one ahead: sandbox_net_prepare); CLONE_PARENT,
 *     so the init is the daemon's child, reaped through its pidfd; where the kernel
 *     refuses root a user namespace, the same without it;
 *  2. its own session: die with the daemon, signals blocked (they are the
 *     command's), its terminal; before all that, its cgroups (cgroup_caps.h):
 *     cloned into them (v2) or joined as the init's first act (v1);
 *  3. the user namespace's id maps: our uid and gid to themselves only, setgroups
 *     denied; then the sandbox's share of the uid's kernel counts, its namespace's
 *     limits and rlimits (sandbox/user_budgets.h);
 *  4. mounts: the view (view.h);
 *  5. protected names (.git, .codex...) read-only, carve-outs and covers (view.h);
 *  6. the network: loopback up in a fresh namespace (done ahead in one made ahead),
 *     the managed proxy's relay and,
 *     for transparent TCP, its TUN device, routes and resolver (tun.h);
 *  7. the Landlock ruleset (landlock.h) and the seccomp filter (seccomp.h) prepared,
 *     the view watched (a change means the host removed something a mount sat on;
 *     the protected names by inotify, or on a timer where the kernel gives none);
 *  8. the command: vforked; between vfork and execve it puts its descriptors and
 *     cwd in place (the spawner's part), then sandbox_confine: no_new_privs,
 *     every capability dropped, Landlock, the process cap, seccomp last (its
 *     connect listener sent to the init: net_guard.h); then execve;
 *  9. the init supervises: reaps, relays the managed proxy's connections, answers
 *     the command's connects, ends the sandbox if its view changes, and exits with
 *     the command's status (128+N for a signal); with a PID namespace the kernel
 *     kills whatever the command left behind.
 * The fs helper (spec.serve) stops after 7: the init confines itself and serves.
 *
 * The layers, all failing closed, point by point like the reference's bubblewrap,
 * are in docs/SANDBOX.md. */
#ifndef EXEC_SANDBOX_SANDBOX_INIT_H
#define EXEC_SANDBOX_SANDBOX_INIT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sandbox/seccomp.h"
#include "sandbox/spec.h"

/* What step 8's command needs from the init (prepared at step 7). */
struct sandbox_confinement {
    int ruleset_fd;          /* Landlock ruleset, or -1 where Landlock is unavailable */
    unsigned long max_procs; /* the command's RLIMIT_NPROC, 0 to leave it */
    struct rlimit nofile;    /* the command's RLIMIT_NOFILE (sandbox/user_budgets.h); rlim_max
                                RLIM_INFINITY to leave it */
    int guard_sock[2];       /* network enabled: the command sends its seccomp listener on
                                [1], the init receives it on [0] (net_guard.h); else -1 */
    bool die_with_init;      /* no PID namespace ends the command with its init: the
                                parent-death signal does (no namespaces) */
    unsigned filter_bits;    /* the filter's parts beside the network (seccomp.h), decided
                                once: the filter and the choice of who serves must agree */
    struct seccomp_prog seccomp;
};

/* Where a start failed, for the spawner's status record. */
enum sandbox_step {
    SANDBOX_STEP_CLONE,
    SANDBOX_STEP_SESSION,
    SANDBOX_STEP_DEATHSIG,
    SANDBOX_STEP_SUBREAPER,
    SANDBOX_STEP_SIGNALS,
    SANDBOX_STEP_TTY,
    SANDBOX_STEP_SETUP, /* id maps, mounts, protected names, network, rules, filter */
    SANDBOX_STEP_PROXY,
    SANDBOX_STEP_CWD,
    SANDBOX_STEP_CONFINE,
    SANDBOX_STEP_STDIO,
};

/* The spawner's side of a start (helpers/spawner_proc.c), called in the init. */
struct sandbox_ops {
    /* A step failed before the command started: record it and _exit. */
    __attribute__((noreturn)) void (*fail)(void *job, enum sandbox_step step, int err);
    /* In the vfork child: descriptors, cwd, sandbox_confine(c), execve. Never returns
     * (a failure is left in the job for command_failed). */
    __attribute__((noreturn)) void (*exec_command)(void *job, const struct sandbox_confinement *c);
    /* After the vfork: true when the command did not start (the failure recorded). */
    bool (*command_failed)(void *job);
    /* The command runs: record it. */
    void (*started)(void *job);
    /* The fs helper's request loop on sock; returns an exit status. */
    int (*serve)(int sock);
};

/* One sandboxed start, as the spawner decoded it. */
struct sandbox_start {
    struct sandbox_spec spec;
    bool tty;                /* the command's terminal is tty_fd */
    int tty_fd;              /* the PTY slave, or -1 */
    int err_fd;              /* the command's standard error (a note if the view changes) */
    int proxy_fd;            /* managed network: the proxy's socketpair end, or -1 */
    uint16_t proxy_ports[2]; /* the proxy's ports to relay on loopback (0: none) */
    int tun_fd;              /* transparent TCP: an O_PATH descriptor of /dev/net/tun for the
                                device made in the sandbox's network namespace (tun.h), or -1 */
    int cgroup_fds[2];       /* what the init joins its cgroups by (cgroup_caps.h: v1
                                tasks, v2 the directory), -1 where none: it is in each
                                before anything else */
    int serve_sock;          /* spec.serve: the fs helper's socket */
    int spawner_sock;        /* the spawner's own socket: never the init's */
    int fd_base;             /* descriptors the command places stay below this */
    const int *job_fds;      /* every descriptor of the request: closed once the command
                                runs (but proxy_fd) */
    int njob_fds;
    const struct sandbox_ops *ops;
    void *job;
};

/* What ends a sandbox without namespaces (spec.landlock_only), sent by the server to
 * its init alone: the init kills the command and everything it started (it is their
 * subreaper; there is no PID namespace to take them along) and exits 137. Killing the
 * init's group instead would end the init first and leave what left the group. */
#define SANDBOX_END_SIGNAL (SIGRTMIN + 3)

/* Steps 1-9: clones the init (which never returns) and returns its pid, or -errno
 * when the clone itself failed. */
pid_t sandbox_spawn(const struct sandbox_start *st);

/* In the spawner between starts: makes the next network-restricted sandbox's network
 * namespace ahead where it may (a root server), so sandbox_spawn's clone need not.
 * Does nothing when one is ready or it may not. */
void sandbox_net_prepare(void);

/* Step 8's confinement, in the command between vfork and execve: no_new_privs,
 * capabilities, Landlock, the process cap, seccomp. Only system calls on memory
 * prepared by the init: async-signal-safe. Returns 0 or -errno. */
int sandbox_confine(const struct sandbox_confinement *c);

/* In the init (or the fs helper) after step 7: false once the mount table changed,
 * i.e. the host removed a path one of the view's mounts sits on (or renamed
 * something over it), a protected name's read-only mount included (the kernel
 * detaches it in every other namespace). The caller must then end the sandbox. A
 * path renamed away is not seen: its mount moves with it and the table's change
 * counter stays (docs/SANDBOX.md, "Known holes"). */
bool sandbox_view_intact(void);

#endif
