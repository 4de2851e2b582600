/* sandbox_host: what this host and the server's options allow every sandbox.
 *
 * Which sandbox a request gets (sandbox_host_mode_for): with namespaces (user, PID,
 * mount, network, IPC, UTS; a view of the file system made of mounts, Landlock and
 * seccomp), or, where the host refuses them (a container under Docker's or
 * Kubernetes' default seccomp rules, user namespaces disabled), without (Landlock,
 * seccomp, and the sandbox's init deciding every file-system change: fs_broker.h);
 * or none, and every sandboxed request is refused with what to do about it. The
 * server probes once at start what the host allows (sandbox_host_probe: the
 * namespaces and the mounts a view needs, made in a throwaway child), logs one line
 * saying which it will give, and reports it in environment/info; --sandbox-mode
 * chooses, and a request's useLegacyLandlock asks for the mode without namespaces.
 * Also: whether sandboxes get their own PID namespace. Asked by the rpc-facing
 * starters (process/, fs/) before they ask the spawner, and by the placeholders'
 * cleanup; the sandbox's init itself lives in sandbox/sandbox_init. */
#ifndef EXEC_SANDBOX_SANDBOX_HOST_H
#define EXEC_SANDBOX_SANDBOX_HOST_H

#include <stdbool.h>
#include <stddef.h>

/* --linux-sandbox-pid-namespace inherit: sandboxed children share the daemon's
 * PID namespace (default false: each gets its own). Set once at start. */
extern bool sandbox_pid_namespace_inherit;

enum sandbox_mode {
    SANDBOX_MODE_NONE = 0,   /* nothing can be enforced here: refused */
    SANDBOX_MODE_NAMESPACES, /* namespaces, a view, Landlock, seccomp */
    SANDBOX_MODE_LANDLOCK,   /* Landlock, seccomp and the init's broker, no namespaces */
};

/* --sandbox-mode */
enum sandbox_mode_choice {
    SANDBOX_CHOICE_AUTO = 0,
    SANDBOX_CHOICE_NAMESPACES = 1,
    SANDBOX_CHOICE_LANDLOCK = 2,
};

/* What the start-time probe found. */
struct sandbox_host_caps {
    bool probed;
    bool namespaces;   /* a sandbox's namespaces and mounts could be made */
    bool host_proc;    /* ... but a fresh /proc was refused: the view binds the host's */
    int landlock_abi;  /* 0: none */
    bool filter;       /* the seccomp filter knows this architecture */
    char why_not[200]; /* why there are no namespaces ("" when there are) */
    enum sandbox_mode_choice choice;
};
extern struct sandbox_host_caps sandbox_host;

/* Probes the host once (a throwaway child makes what a sandbox needs) and records
 * the operator's choice. Blocks for a few milliseconds: at start, before the loop.
 * Writes the line the server logs into line. */
void sandbox_host_probe(enum sandbox_mode_choice choice, char *line, size_t cap);

/* The mode a request gets (legacy_landlock: its useLegacyLandlock). */
enum sandbox_mode sandbox_host_mode_for(bool legacy_landlock);

/* "namespaces", "landlock" or "none". */
const char *sandbox_mode_name(enum sandbox_mode m);

/* Why nothing can be enforced here and what the operator can do, for a refusal
 * (" (...)" appended to the reference's words), or "" when a mode is available. */
const char *sandbox_host_refusal(void);

/* Whether this host can enforce a parsed policy at all, in the mode it would get (a
 * known architecture for the filter, a mode). Returns 0 or -EOPNOTSUPP. */
struct sandbox_policy;
int sandbox_policy_check(const struct sandbox_policy *p);

#endif
