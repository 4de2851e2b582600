/* enforce: turning a resolved sandbox into kernel state, in the sandboxed child.
 *
 * A sandboxed child is started by the spawner with clone(2) into fresh user, PID,
 * mount, IPC and (network restricted) network namespaces; it becomes the
 * sandbox's init (PID 1), sets the view up with sandbox_setup, then vforks the
 * command, which confines itself with sandbox_confine and execs. The layers, all
 * failing closed, point by point like the reference's bubblewrap:
 *  - the user namespace maps only our own uid and gid (setgroups denied), and every
 *    capability is dropped before exec (bounding set, ambient, inheritable,
 *    permitted, effective; securebits locked so exec as uid 0 gains none);
 *    where the kernel refuses a user namespace to root, the same explicit drop
 *    is the whole protection;
 *  - a private mount view: the tree read-only, writable roots bound read-write,
 *    carve-outs read-only, protected names that do not exist covered by read-only
 *    empty directories, denied paths covered; a fresh /proc for the PID namespace;
 *    a fresh /dev (tmpfs, the harmless device nodes bound in, a private devpts:
 *    no terminal of the host is reachable); without a readable "/", a fresh root
 *    holding only the granted roots;
 *  - Landlock (ABI probed at run time): reads only under readable roots, writes
 *    only under writable ones, no TCP when the network is restricted, no signals
 *    or abstract Unix sockets outside the sandbox (ABI 6+); its ptrace rule keeps
 *    /proc/<pid>/{mem,environ} of outside processes closed even without a PID
 *    namespace;
 *  - PR_SET_NO_NEW_PRIVS and the seccomp filter of sandbox/seccomp.h. */
#ifndef EXEC_SANDBOX_ENFORCE_H
#define EXEC_SANDBOX_ENFORCE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "sandbox/seccomp.h"

/* A resolved sandbox as the spawner receives it (see sandbox/policy.h for what
 * each list holds). The strings are borrowed. */
struct sandbox_spec {
    bool enforce_fs;     /* the view and Landlock's file rules apply */
    bool net_restricted; /* own network namespace, no sockets */
    bool net_proxy;      /* managed network: IP sockets to the init's loopback relay only */
    bool pid_inherit;    /* --linux-sandbox-pid-namespace inherit: no PID namespace */
    bool serve;          /* the fs helper: our own code, served in the init, no socket */
    unsigned max_procs;  /* RLIMIT_NPROC for the command (its user namespace's tasks), 0 none */
    /* NULL-terminated lists */
    const char *const *readable, *const *writable, *const *readonly_sub, *const *denied;
    const char *const *protected_names;
};

/* What sandbox_setup prepares for sandbox_confine. */
struct sandbox_confinement {
    int ruleset_fd; /* Landlock ruleset, or -1 where Landlock is unavailable and not needed */
    int view_fd;    /* the init's /proc/self/mountinfo: POLLPRI when the view changed */
    unsigned long max_procs; /* the command's RLIMIT_NPROC, 0 to leave it */
    int guard_sock[2];       /* network enabled: the command sends its seccomp listener on [1],
                                the init receives it on [0] (net_guard.h); else -1 */
    struct seccomp_prog seccomp;
};

/* --linux-sandbox-pid-namespace inherit: sandboxed children share the daemon's
 * PID namespace (default false: each gets its own). Set once at start. */
extern bool sandbox_pid_namespace_inherit;

struct sandbox_policy;

/* The Landlock ABI version of the running kernel, or 0 when unavailable. */
int sandbox_landlock_abi(void);

/* Whether this host can enforce spec at all (Landlock for file rules, a known
 * architecture for the filter). Returns 0 or a negative errno. */
int sandbox_check(const struct sandbox_spec *spec);
/* The same for a parsed policy. */
int sandbox_policy_check(const struct sandbox_policy *p);

/* In the sandbox's init, right after clone() made its namespaces: writes the id
 * maps (when userns), builds the mount view, brings loopback up in a fresh
 * network namespace, and prepares the confinement. uid/gid are the spawner's
 * ids outside. Returns 0, or -errno with *step naming what failed (static text). */
int sandbox_setup(const struct sandbox_spec *spec, bool userns, uid_t uid, gid_t gid,
                  struct sandbox_confinement *c, const char **step);

/* In the init (or the fs helper) after sandbox_setup: false once the mount table
 * changed, i.e. the host removed or moved a path one of the view's mounts sits on,
 * a protected name's read-only mount included (the kernel detaches it in every
 * other namespace). The caller must then end the sandbox. */
bool sandbox_view_intact(void);

/* Confines the calling process (the command, between vfork and execve):
 * no_new_privs, Landlock, every capability dropped, seccomp last. Only system
 * calls: async-signal-safe. Returns 0 or -errno; on failure the caller exits. */
int sandbox_confine(const struct sandbox_confinement *c);

#endif
