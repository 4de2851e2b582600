/* placeholders: the directories a missing protected name is kept read-only on.
 *
 * A protected name (.git, .codex, .agents, .aws) under a writable root is kept
 * read-only in the sandbox's view by a read-only mount on it, so the sandboxed
 * command can neither create it nor plant a hook inside. A mount needs something to
 * mount on, and for a missing name the only place is the host's workspace: an empty
 * directory this server makes for as long as any of its sandboxes uses the name.
 *
 * The kernel ties every sandbox's mount to that directory: removing it on the host
 * (rmdir, rename) detaches the mount in every other mount namespace, and the sandbox
 * could then create the name itself. So a placeholder is counted across every
 * process, shell snapshot and fs helper of this server that asks for the name while
 * it is ours (acquire takes a reference on each protected name that is missing or
 * already ours, under one lock, before the sandbox is started), and removed, if
 * still empty, only when the last of them has ended: a sandbox never outlives a
 * placeholder it mounts on. A name that exists and is not ours (the user's own, or
 * another program's placeholder) is never removed by us; its removal on the host is
 * noticed by the sandbox's init, which ends the sandbox (sandbox_init.h). The
 * reference also removes its placeholders when its last sandbox on them ends. */
#ifndef EXEC_SANDBOX_PLACEHOLDERS_H
#define EXEC_SANDBOX_PLACEHOLDERS_H

#include "sandbox/policy.h"

struct sb_placeholders;

/* Takes a reference on each protected name in paths that is ours already or does
 * not exist (making its directory). Returns a handle for sandbox_placeholders_release,
 * or NULL when there is nothing to hold. A name that cannot be made here is left to
 * the sandbox's setup, which makes it or fails closed. Thread-safe. */
struct sb_placeholders *sandbox_placeholders_acquire(const struct sb_paths *paths);

/* Ends one use; removes the directories this server created once nobody uses them.
 * NULL is a no-op. Thread-safe. */
void sandbox_placeholders_release(struct sb_placeholders *h);

#endif
