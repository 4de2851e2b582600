/* placeholders: the mount points for protected names that do not exist.
 *
 * A protected name (.git, .codex, ...) missing under a writable root is covered in
 * the sandbox by a read-only empty directory, so the sandboxed command can neither
 * create it nor plant a hook inside. A mount needs a directory to mount on, and
 * the only one there can be is on the host, in the workspace. The reference's
 * bubblewrap creates these directories and leaves them behind for good; we create
 * them for as long as a sandbox uses them (counted across every process and helper
 * that does) and remove them, if still empty, when the last one is done. */
#ifndef EXEC_SANDBOX_PLACEHOLDERS_H
#define EXEC_SANDBOX_PLACEHOLDERS_H

#include "sandbox/policy.h"

struct sb_placeholders;

/* Creates (or counts another use of) each missing name in paths. Returns a handle
 * for sandbox_placeholders_release, or NULL when there is nothing to hold. A name
 * that cannot be created is left to the sandbox setup, which then fails closed.
 * Thread-safe. */
struct sb_placeholders *sandbox_placeholders_acquire(const struct sb_paths *paths);

/* Ends one use; removes the directories this server created once nobody uses them.
 * NULL is a no-op. Thread-safe. */
void sandbox_placeholders_release(struct sb_placeholders *h);

#endif
