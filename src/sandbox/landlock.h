/* landlock: the sandbox's Landlock ruleset, prepared by the init in the finished
 * view and applied by the command just before its seccomp filter.
 *
 * Reads only under readable roots, writes only under writable ones, no TCP when the
 * network is restricted, no signals or abstract Unix sockets outside the sandbox
 * (ABI 6+); its ptrace rule keeps /proc/<pid>/{mem,environ} of outside processes
 * closed even without a PID namespace. The ABI is probed at run time: a right the
 * kernel does not know is not asked for. */
#ifndef EXEC_SANDBOX_LANDLOCK_H
#define EXEC_SANDBOX_LANDLOCK_H

#include <stdbool.h>

#include "sandbox/spec.h"

/* The Landlock ABI version of the running kernel, or 0 when unavailable. */
int sandbox_landlock_abi(void);

/* The ruleset for s, built in the finished view (so /dev/pts is the private one):
 * *out is its fd, or -1 where the kernel has no Landlock (the view alone then
 * enforces the policy). writable_read_only gives the writable roots read rights
 * only, for a command whose writes its init's broker makes (fs_broker.h). Without
 * namespaces (s->landlock_only) "/" is granted without the host's /dev. Returns 0
 * or -errno. */
int sandbox_landlock_ruleset(const struct sandbox_spec *s, bool writable_read_only, int *out);

/* Adds read and write of one device node (a terminal) to the ruleset. Returns 0 or
 * -errno. */
int sandbox_landlock_allow_device(int ruleset_fd, const char *path);

/* Restricts the calling process with ruleset_fd (no-op for -1). Needs no_new_privs.
 * Async-signal-safe. Returns 0 or -errno. */
int sandbox_landlock_restrict(int ruleset_fd);

#endif
