/* sandbox_host: what this host and the server's options allow every sandbox.
 *
 * Whether a sandbox can be enforced here at all (the seccomp filter needs a known
 * architecture) and whether sandboxes get their own PID namespace. Asked by the
 * rpc-facing starters (process/, fs/) before they ask the spawner, and by the
 * placeholders' cleanup; the sandbox's init itself lives in helpers/sandbox_init. */
#ifndef EXEC_SANDBOX_SANDBOX_HOST_H
#define EXEC_SANDBOX_SANDBOX_HOST_H

#include <stdbool.h>

#include "sandbox/spec.h"

/* --linux-sandbox-pid-namespace inherit: sandboxed children share the daemon's
 * PID namespace (default false: each gets its own). Set once at start. */
extern bool sandbox_pid_namespace_inherit;

struct sandbox_policy;

/* Whether this host can enforce spec at all (a known architecture for the filter;
 * Landlock is defense in depth where the kernel has it). Returns 0 or -errno. */
int sandbox_check(const struct sandbox_spec *spec);
/* The same for a parsed policy. */
int sandbox_policy_check(const struct sandbox_policy *p);

#endif
