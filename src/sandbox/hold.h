/* hold: what a sandbox keeps on the host for as long as it lives.
 *
 * Two things outlive a sandbox's start and must end with it, not before: the
 * placeholder directories of its missing protected names (placeholders.h: removing
 * one under a running sandbox would detach its read-only mount) and, where the
 * server can make them, its cgroups (cgroup_caps.h). A hold is taken before the
 * sandbox is started and released once it has been reaped (or its start failed). */
#ifndef EXEC_SANDBOX_HOLD_H
#define EXEC_SANDBOX_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "sandbox/policy.h"

struct sandbox_hold;

/* Takes the placeholders of p's protected names and the sandbox's cgroups: one
 * capped at max_procs processes where a pids cgroup can be made (0: none; without
 * one, RLIMIT_NPROC still applies), one capped at max_memory bytes (0: none).
 * Returns a handle, or NULL: with *err 0 when there is nothing to hold, -errno when
 * the memory cap cannot be made (nothing else enforces it, so the start must fail).
 * Thread-safe. */
struct sandbox_hold *sandbox_hold_acquire(const struct sandbox_policy *p, unsigned max_procs,
                                          uint64_t max_memory, int *err);

/* Makes the cgroups of the next holds with these caps ahead (cgroup_caps_prepare), on
 * a thread that may block. */
void sandbox_hold_prepare(unsigned max_procs, uint64_t max_memory);

/* Whether the next hold would make its cgroups itself (none ready): the time to call
 * sandbox_hold_prepare. */
bool sandbox_hold_prepare_wanted(void);

/* What the init joins the cgroups by (cgroup_caps.h; spawn_request.cgroup_fds),
 * -1 where none. The hold keeps ownership. */
void sandbox_hold_cgroup_fds(const struct sandbox_hold *h, int fds[2]);

/* Ends the placeholders' use of h (NULL: none) now, keeping its cgroups for
 * sandbox_hold_release; returns whether it has any (their removal may block). */
bool sandbox_hold_release_placeholders(struct sandbox_hold *h);

/* Ends the hold: the placeholders' use and the cgroups (kept for the next sandbox
 * where they can serve it, cgroup_caps_release). NULL is a no-op. May block. */
void sandbox_hold_release(struct sandbox_hold *h);

#endif
