/* path_rules: what a resolved sandbox policy says of one path, decided without I/O.
 *
 * The view (view.h) and Landlock (landlock.h) enforce a policy as it stood when the
 * sandbox started; these rules are the same policy asked of a path at any moment
 * afterwards, by whoever acts on the sandbox's behalf with more rights than it has:
 * the server before it hands a sandboxed fs request to the helper, the fs helper on
 * each object it opens, and the file-system broker of a sandbox without namespaces
 * (fs_broker.h). So a deny entry holds for a file made after the start (by the
 * host, by another sandbox, or renamed there), and a deny glob for every path it
 * matches whenever it is asked, not only for those that matched at start.
 *
 * The path is canonical and absolute (what readlink of /proc/self/fd/N gives for an
 * opened object, or a realpath'd parent joined with a name). The most specific entry
 * wins: a deny entry or glob match (at the path or any of its ancestors) gives
 * nothing; a protected name (.git, .codex...) or a read-only carve-out gives read; a
 * writable root write; a readable root read. */
#ifndef EXEC_SANDBOX_PATH_RULES_H
#define EXEC_SANDBOX_PATH_RULES_H

#include <stdbool.h>

#include "sandbox/spec.h"

enum path_access { PATH_NONE = 0, PATH_READ = 1, PATH_WRITE = 2 };

/* What s grants on path (everything when s does not enforce the file system, but
 * what a deny entry or glob takes away). */
enum path_access path_rules_access(const struct sandbox_spec *s, const char *path);

/* The same before the deny entries: for a caller that has asked path_rules_denied
 * already (the broker, on every call it decides). */
enum path_access path_rules_granted(const struct sandbox_spec *s, const char *path);

/* Whether path, or a directory it lies in, is denied by a deny entry or a deny glob. */
bool path_rules_denied(const struct sandbox_spec *s, const char *path);

/* Whether a directory may move from `from` to `to` without carrying something the
 * policy keeps from the sandbox (a deny entry, a read-only carve-out, a protected
 * name lying under it) to a name the policy does not mention, or out of what a deny
 * glob matches (only a glob of a `**` segment and one name pattern under its base
 * keeps matching, and only for a move within that base). A file
 * carries nothing: its own access decides. */
bool path_rules_rename_keeps(const struct sandbox_spec *s, const char *from, const char *to);

/* Whether an absolute glob pattern matches path: segments are fnmatch patterns
 * (a leading period matched only explicitly), and a `**` segment matches any
 * number of segments. */
bool path_rules_glob_match(const char *pattern, const char *path);

#endif
