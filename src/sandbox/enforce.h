/* enforce: applying a sandbox_policy to the calling process with the kernel.
 *
 * Three layers, all fail closed:
 *  - a private mount namespace where the whole tree is read-only, writable roots are
 *    read-write bind mounts, carve-outs under them read-only bind mounts and denied
 *    paths are covered by empty read-only mounts (so writes outside the writable
 *    roots, chmod included, fail with EROFS as with the reference's bubblewrap);
 *  - Landlock (ABI probed at run time) allowing reads only under readable roots and
 *    writes only under writable ones, and TCP bind/connect not at all when the
 *    network is restricted (ABI 4+), and no signals to processes outside the
 *    sandbox (ABI 6+);
 *  - PR_SET_NO_NEW_PRIVS and a seccomp filter that makes socket() for any family but
 *    AF_UNIX fail with EACCES when the network is restricted.
 *
 * sandbox_prepare does everything that allocates or may fail softly (opening the
 * ruleset, building the BPF program, classifying denied paths), in the parent; sandbox_apply makes only raw system calls on prepared memory, so it is
 * safe between vfork and execve. */
#ifndef EXEC_SANDBOX_ENFORCE_H
#define EXEC_SANDBOX_ENFORCE_H

#include <linux/filter.h>
#include <stdbool.h>

#include "sandbox/policy.h"

#define SB_BPF_MAX 16

struct sandbox_prepared {
    bool mountns;            /* build the private mount view */
    bool userns;             /* not root: also a user namespace to be allowed to mount */
    char uid_map[32], gid_map[32]; /* "0 <uid> 1\n" lines for the user namespace */
    const char *const *rw;   /* borrowed from the policy */
    size_t nrw;
    const char *const *ro;
    size_t nro;
    const char *const *hide;
    size_t nhide;
    unsigned char *hide_is_dir; /* owned; per hide entry: dir (1), file (0), missing (2) */
    bool hide_files;         /* some denied path is a file (needs the staging tmpfs) */
    bool newroot;            /* "/" is not readable: the view is a fresh tmpfs root with
                                only the granted roots bound in (pivot_root) */
    size_t nroots;           /* granted roots to bind into the new root, shortest first */
    const char **root_new;   /* owned array; strings borrowed from the policy */
    char **root_old;         /* owned: "/.oldroot" + path */
    unsigned char *root_kind; /* owned: 1 directory, 0 other file */
    size_t nlinks;           /* top-level symlinks of "/" (merged /usr: /bin -> usr/bin) */
    char **link_name, **link_target; /* owned, recreated in the new root */
    int ruleset_fd;          /* Landlock ruleset, or -1 */
    bool seccomp;
    struct sock_filter filter[SB_BPF_MAX];
    struct sock_fprog prog;
};

/* The Landlock ABI version of the running kernel, or 0 when unavailable. */
int sandbox_landlock_abi(void);

/* Prepares pol (which must outlive *sp) for sandbox_apply. Returns 0, or -errno
 * when the policy cannot be enforced here (no Landlock, no seccomp for this
 * architecture...): the caller must then refuse, never run unconfined. */
int sandbox_prepare(const struct sandbox_policy *pol, struct sandbox_prepared *sp);

/* Confines the calling process. Async-signal-safe. Returns 0 or -errno; on failure
 * the process may be partly confined and must exit. */
int sandbox_apply(const struct sandbox_prepared *sp);

/* Closes the prepared fds and frees what prepare allocated. */
void sandbox_prepared_free(struct sandbox_prepared *sp);

#endif
