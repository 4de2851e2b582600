/* spec: a resolved sandbox, as the daemon describes it to the sandbox's init.
 *
 * The daemon builds it once per sandboxed start (process/spawn.c: the policy's lists
 * from sandbox/policy.h, the host's mode, the server's caps); the spawner's request
 * (helpers/spawn_wire.h) carries it whole, and the sandbox's init builds the view
 * (view.h), the Landlock ruleset (landlock.h) and the seccomp filter (seccomp.h) from
 * it (sandbox_init.h). See sandbox/policy.h for what each list holds. The strings are
 * borrowed.
 *
 * The members are listed once, below, and the struct and its wire codec are both made
 * from those lists: a member added there is carried to the init with nothing else to
 * edit. */
#ifndef EXEC_SANDBOX_SPEC_H
#define EXEC_SANDBOX_SPEC_H

#include <stdbool.h>

/* The yes/no members, X(name): */
#define SANDBOX_SPEC_FLAGS(X)                                                                      \
    X(enforce_fs)     /* the view and Landlock's file rules apply */                               \
    X(net_restricted) /* own network namespace, no sockets */                                      \
    X(net_proxy)      /* managed network: IP sockets to the init's loopback relay only */          \
    X(pid_inherit)    /* --linux-sandbox-pid-namespace inherit: no PID namespace */                \
    X(serve)          /* the fs helper: our own code, served in the init, no socket */             \
    X(landlock_only)  /* no namespaces (sandbox_host.h): Landlock, seccomp and the init's          \
                         broker (fs_broker.h) keep the policy, no view */                          \
    X(seal_cgroups)   /* with landlock_only: capped by cgroups, whose file systems the             \
                         command may only read (landlock.h, fs_broker.h) */

/* The path lists, X(name), each NULL-terminated (a NULL list is empty): */
#define SANDBOX_SPEC_LISTS(X)                                                                      \
    X(readable)        /* Landlock read rules */                                                   \
    X(writable)        /* read-write binds and rules */                                            \
    X(readonly_sub)    /* read-only binds under writable roots */                                  \
    X(denied)          /* covered */                                                               \
    X(protected_names) /* kept read-only, made when missing */                                     \
    X(deny_globs)      /* absolute patterns of `none` globs (path_rules.h) */

#define SANDBOX_SPEC_FLAG_MEMBER(name) bool name;
#define SANDBOX_SPEC_LIST_MEMBER(name) const char *const *name;

struct sandbox_spec {
    SANDBOX_SPEC_FLAGS(SANDBOX_SPEC_FLAG_MEMBER)
    unsigned max_procs; /* RLIMIT_NPROC for the command (its user namespace's tasks), 0 none */
    SANDBOX_SPEC_LISTS(SANDBOX_SPEC_LIST_MEMBER)
};

#endif
