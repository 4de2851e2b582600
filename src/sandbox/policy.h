/* policy: the `sandbox` object of PROTOCOL.md section 10 turned into one plain
 * struct the enforcement code can act on.
 *
 * Parsing (policy_rpc.c) decodes the wire JSON with serde's wording (rpc/params);
 * policy.c resolves every entry (special kinds, path URIs, globs) against the
 * sandbox cwd and workspace roots, and classifies the resolved paths into what the kernel
 * mechanisms can express: Landlock rules for readable and writable roots, read-only bind mounts for
 * carve-outs under writable roots (.git, .agents, .codex, explicit `read` entries), and hiding
 * mounts for `none`/`deny` entries under readable roots.
 *
 * No enforcement happens here; the only I/O is what resolving needs (realpath of
 * existing paths, reading a `.git` file's gitdir line, the bounded glob scan). */
#ifndef EXEC_SANDBOX_POLICY_H
#define EXEC_SANDBOX_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A list of malloc'd absolute paths, NULL-terminated (v[n] is NULL once one was
 * added), so that it reads as a sandbox_spec's list (spec.h). */
struct sb_paths {
    char **v;
    size_t n, cap;
};

struct sandbox_policy {
    bool sandboxed;                  /* a non-null sandbox object was given */
    bool enforce_fs;                 /* managed + restricted: the file system needs the kernel */
    bool net_restricted;             /* the network must be denied (except AF_UNIX) */
    bool full_read;                  /* root readable and nothing denied */
    bool full_write;                 /* root writable and nothing denied */
    bool legacy_landlock;            /* useLegacyLandlock: asks for the mode without
                                        namespaces (sandbox_host.h) */
    struct sb_paths readable;        /* Landlock read rules */
    struct sb_paths writable;        /* Landlock read+write rules, read-write bind mounts */
    struct sb_paths readonly_sub;    /* read-only bind mounts under writable roots */
    struct sb_paths denied;          /* hidden: under a readable or writable root */
    struct sb_paths protected_names; /* .git, .codex... under each writable root: kept
                                        read-only in the view whatever happens to
                                        them on the host (sandbox/placeholders.h) */
    struct sb_paths deny_globs;      /* `none` glob patterns, absolute: matched again
                                        whenever a path is asked (path_rules.h), not
                                        only at start */
    char *cwd;                       /* the resolved sandbox cwd, or NULL */
    char *refusal;                   /* why this policy cannot be enforced on this tree
                                        (a protected name is a symlink), or NULL */
};

/* The names kept read-only under every writable root, whether or not they exist
 * (the reference's list): NULL-terminated. */
extern const char *const sandbox_protected_names[];

/* What went wrong, and the text the reference uses. The JSON-RPC code a kind
 * gets is the handlers' business (sandbox_error_code, sandbox_rpc.h). */
enum sandbox_error_kind {
    SANDBOX_ERR_INVALID,      /* malformed, or no path on this host (-32602) */
    SANDBOX_ERR_FOREIGN_HOST, /* a path URI names another host (-32600, like uri's) */
    SANDBOX_ERR_TOO_MANY,     /* more paths than can be enforced (-32600) */
};
struct sandbox_error {
    enum sandbox_error_kind kind;
    char message[512];
};

/* Parses a sandbox object (NULL or JSON null: no sandbox); in policy_rpc.c, the
 * one place that reads the wire's JSON. fallback_cwd (may be
 * NULL) is used when the object has no cwd (process/start's request cwd). On
 * success returns 0 and fills *out (free with sandbox_policy_free). On failure
 * returns -EINVAL with *err filled and *out left empty. */
int sandbox_policy_parse(json_t *sandbox, const char *fallback_cwd, struct sandbox_policy *out,
                         struct sandbox_error *err);

/* Whether an fs operation that reads (and/or writes) must run in the sandbox helper. */
bool sandbox_policy_needs_fs(const struct sandbox_policy *p, bool reads, bool writes);

/* Whether process/start must confine the child at all. */
bool sandbox_policy_needs_process(const struct sandbox_policy *p);

void sandbox_policy_free(struct sandbox_policy *p);

/* The policy's lists as a sandbox_spec (borrowed: valid while p is), for path_rules.h. */
struct sandbox_spec;
void sandbox_policy_spec(const struct sandbox_policy *p, struct sandbox_spec *out);

/* path canonical (malloc'd; the caller frees): its realpath when it exists, else its
 * deepest existing directory's realpath followed by the rest as named (a file a deny
 * entry names before it exists). Blocks on the file system: not on the loop thread. */
char *sandbox_canonical_path(const char *path);

/* Helpers for path lists (also used by the enforcement code). */
void sandbox_paths_add(struct sb_paths *l, const char *path);
void sandbox_paths_free(struct sb_paths *l);

#endif
