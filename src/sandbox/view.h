/* view: the sandbox's mount view, as bubblewrap's setup_newroot builds one.
 *
 * In the init's fresh mount namespace: everything made private first (nothing
 * propagates back to the host); with "/" readable, the host's tree in place made
 * read-only with the writable roots attached back from clones taken before (a
 * read-only submount stays read-only), else a tmpfs root holding only the granted
 * roots (pivot_root); a fresh /dev (tmpfs, the harmless nodes bound in, a private
 * devpts) and, with a PID namespace, a fresh /proc with the host-wide knobs
 * read-only; then the read-only carve-outs, the protected names (each bound
 * read-only onto itself, made when missing: placeholders.h), and covers over
 * denied paths. Every path is opened with no symbolic link on the way, so nothing
 * swapped in since the policy was resolved is bound or covered instead. */
#ifndef EXEC_SANDBOX_VIEW_H
#define EXEC_SANDBOX_VIEW_H

#include "sandbox/spec.h"

/* Builds the view for s in the calling process's (new) mount namespace. Returns 0,
 * or -errno with *step naming what failed (static text). */
int sandbox_view_build(const struct sandbox_spec *s, const char **step);

/* Once the view is complete: records the mounts of it that a host's change could take
 * away (each path of s's lists that is the root of a mount now: a protected name's
 * read-only bind, a cover, a root), for sandbox_view_kept. */
void sandbox_view_keep(const struct sandbox_spec *s);

/* Whether every mount sandbox_view_keep recorded is still there, the same mount at the
 * same path. The mount table changes for reasons of the host's own too (a container's
 * mount point removed, a disk mounted): only these mean the view lost something. */
bool sandbox_view_kept(void);

/* Makes every cgroup file system of the view built for s read-only (recursively): a
 * sandbox capped by its cgroups (cgroup_caps.h) would otherwise leave it, or raise
 * its pids.max, wherever the view shows cgroupfs writable (a full-disk policy, a
 * writable root above it). Only where the view kept the host's mount flags can one
 * be writable ("/" writable, the writable roots' trees); elsewhere nothing is read
 * (listmount and statmount, Linux 6.8, tell; older kernels read the mount table
 * every time). Returns 0, or -errno with *step set. */
int sandbox_view_seal_cgroups(const struct sandbox_spec *s, const char **step);

/* An O_PATH descriptor of path (plus flags, O_DIRECTORY say) resolved with no
 * symbolic link anywhere on the way, or -errno. The daemon sends canonical paths
 * (realpath), so a link found now was swapped in since: fail (ELOOP) rather than bind,
 * cover, make or remove something else. Kernels without openat2 (before 5.6) get
 * O_NOFOLLOW on the last component. */
int sandbox_open_exact(const char *path, int flags);

#endif
