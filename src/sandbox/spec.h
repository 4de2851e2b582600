/* spec: a resolved sandbox as its init receives it.
 *
 * The spawner decodes its request (helpers/spawn_wire.h) into this plain struct;
 * the sandbox's init builds the view (view.h), the Landlock ruleset (landlock.h)
 * and the seccomp filter (seccomp.h) from it (sandbox_init.h). See sandbox/policy.h
 * for what each list holds. The strings are borrowed. */
#ifndef EXEC_SANDBOX_SPEC_H
#define EXEC_SANDBOX_SPEC_H

#include <stdbool.h>

struct sandbox_spec {
    bool enforce_fs;     /* the view and Landlock's file rules apply */
    bool net_restricted; /* own network namespace, no sockets */
    bool net_proxy;      /* managed network: IP sockets to the init's loopback relay only */
    bool pid_inherit;    /* --linux-sandbox-pid-namespace inherit: no PID namespace */
    bool serve;          /* the fs helper: our own code, served in the init, no socket */
    bool landlock_only;  /* no namespaces (sandbox_host.h): Landlock, seccomp and the
                            init's broker (fs_broker.h) keep the policy, no view */
    bool seal_cgroups;   /* with landlock_only: capped by cgroups, whose file systems
                            the command may only read (landlock.h, fs_broker.h) */
    unsigned max_procs;  /* RLIMIT_NPROC for the command (its user namespace's tasks), 0 none */
    /* NULL-terminated lists */
    const char *const *readable, *const *writable, *const *readonly_sub, *const *denied;
    const char *const *protected_names;
    const char *const *deny_globs; /* absolute patterns of `none` globs (path_rules.h) */
};

#endif
