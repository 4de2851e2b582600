/* policy_internal: building a sandbox_policy step by step from plain values, what
 * the decoder of the wire's `sandbox` object (policy_rpc.c) does as it walks the
 * JSON, so resolution (policy.c) never sees JSON. The order of the steps is the
 * order errors are reported in: the context first, then each entry, then finish.
 * Private to src/sandbox. */
#ifndef EXEC_SANDBOX_POLICY_INTERNAL_H
#define EXEC_SANDBOX_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "sandbox/policy.h"

#define GLOB_DEFAULT_DEPTH 8

/* An entry's access; a path's strongest wins (none/deny > write > read). */
enum sb_access { ACC_READ = 1, ACC_WRITE = 2, ACC_DENY = 3 };

/* One file-system entry: exactly one of path (a path URI), pattern (a glob,
 * absolute or relative to the cwd) and kind (a special path, with an optional
 * subpath) is set. */
struct sb_entry {
    int access; /* enum sb_access */
    const char *path, *pattern, *kind, *subpath;
};

struct sb_build;

struct sb_build *sandbox_build_new(void);
/* Frees b and whatever it resolved (NULL is fine). */
void sandbox_build_free(struct sb_build *b);
/* The context: the working directory (cwd, a URI, else fallback_cwd, a path, may
 * be NULL), the workspace roots and the temporary directories (URIs). Returns 0,
 * or -EINVAL / -E2BIG with err filled. */
int sandbox_build_context(struct sb_build *b, const char *cwd, const char *fallback_cwd,
                          const char *const *roots, size_t nroots, const char *const *tmps,
                          size_t ntmps, struct sandbox_error *err);
/* Resolves one entry (globs scanned to glob_depth). Returns 0, or -EINVAL / -E2BIG
 * with err filled (a foreign host, a bad subpath, too many paths). */
int sandbox_build_entry(struct sb_build *b, const struct sb_entry *ent, int glob_depth,
                        struct sandbox_error *err);
/* Fills out (zeroed by the caller) from what b resolved: a sandbox with the
 * network restricted or not, the file system enforced or not. Returns 0, or
 * -EINVAL with err filled (dynamic entries without a cwd). */
int sandbox_build_finish(struct sb_build *b, bool net_restricted, bool enforce_fs,
                         struct sandbox_policy *out, struct sandbox_error *err);

#endif
