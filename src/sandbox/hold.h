/* hold: what a sandbox keeps on the host for as long as it lives.
 *
 * Two things outlive a sandbox's start and must end with it, not before: the
 * placeholder directories of its missing protected names (placeholders.h: removing
 * one under a running sandbox would detach its read-only mount) and, where the
 * server can make one, its pids cgroup (pids_cgroup.h). A hold is taken before the
 * sandbox is started and released once it has been reaped (or its start failed). */
#ifndef EXEC_SANDBOX_HOLD_H
#define EXEC_SANDBOX_HOLD_H

#include <stdbool.h>

#include "sandbox/policy.h"

struct sandbox_hold;

/* Takes the placeholders of p's protected names and, with cap and a pids cgroup
 * available, a cgroup capped at max processes. Returns a handle (NULL when there is
 * nothing to hold). A cgroup that cannot be made is left out (RLIMIT_NPROC still
 * applies). Thread-safe. */
struct sandbox_hold *sandbox_hold_acquire(const struct sandbox_policy *p, bool cap, unsigned max);

/* The cgroup's cgroup.procs for the init to join (spawn_request.cgroup_fd), or -1.
 * The hold keeps ownership. */
int sandbox_hold_cgroup_fd(const struct sandbox_hold *h);

/* Ends the hold: the placeholders' use and the cgroup. NULL is a no-op. */
void sandbox_hold_release(struct sandbox_hold *h);

#endif
