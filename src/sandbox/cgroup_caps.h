/* cgroup_caps: a cgroup per sandbox for its caps on processes and memory, where the
 * server may make cgroups.
 *
 * A sandbox's cap on processes (--sandbox-max-processes) is RLIMIT_NPROC in its
 * own user namespace, which counts that sandbox's tasks only; but the kernel never
 * applies RLIMIT_NPROC to uid 0, and a root server's sandboxes run as uid 0 (its
 * user namespace maps 0 to 0, so files it writes stay root's). For them the cap is
 * a pids cgroup of its own: pids.max = the cap. A cap on memory
 * (--sandbox-max-memory, off by default) has no rlimit at all that counts a whole
 * sandbox (RLIMIT_AS is per process and breaks runtimes that reserve address space),
 * so it exists only as a memory cgroup: memory.limit_in_bytes (v1) or memory.max
 * (v2), past which the kernel's OOM killer chooses inside the sandbox.
 *
 * The init is in its cgroups before it does anything else, and nothing of the
 * sandbox is forked before, without a cgroup move on the start's path: a move
 * (writing a pid to cgroup.procs) takes cgroup_threadgroup_rwsem for writing,
 * which waits for an RCU grace period (11 ms at p50 on this two-core machine at a load
 * of 20): row 1b's p95 went from 7 to 13 ms when the spawner did it. Instead,
 * per hierarchy, through a descriptor the server opened (the kernel checks the
 * opener's credentials):
 *  - cgroup v1: the init writes "0" to the cgroup's `tasks` as its first step. A
 *    thread that moves itself alone takes no global lock (the kernel's
 *    cgroup_procs_write_start: it cannot exit or exec under the move), and the init
 *    is single-threaded, so its whole process moves: 0.03 ms.
 *  - cgroup v2: the spawner clones the init into the cgroup (clone3's
 *    CLONE_INTO_CGROUP with the cgroup's directory), which takes the lock only for
 *    reading. (v2 has no per-thread move of a domain cgroup.)
 * Once the sandbox has been reaped its cgroups are removed, or, a pids cgroup alone
 * with no task left in it, kept for the next sandbox (cgroup_caps_release).
 *
 * The hierarchies: on cgroup v1 the "pids" and the "memory" mounts, one directory
 * each; on cgroup v2 one directory where the server's own cgroup delegates the
 * controller to its children (cgroup.subtree_control lists it). Everything lives
 * under one directory per server and hierarchy, exec-server.<pid>, made at start.
 * Where none can be made the process cap is RLIMIT_NPROC alone and the memory cap
 * does not hold (docs/SANDBOX.md says what that means). */
#ifndef EXEC_SANDBOX_CGROUP_CAPS_H
#define EXEC_SANDBOX_CGROUP_CAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The controllers a sandbox's cgroups may carry. */
enum cgroup_cap { CGROUP_CAP_PIDS, CGROUP_CAP_MEMORY, CGROUP_CAP_N };

/* One sandbox's cgroups: a directory per hierarchy, and what its init joins each by
 * (on v2 both caps share one directory: join_fd[1] is then -1). */
struct cgroup_caps {
    char *path[CGROUP_CAP_N];  /* malloc'd, NULL when there is none */
    int join_fd[CGROUP_CAP_N]; /* close-on-exec; -1 when none: v1, the cgroup's tasks
                                  (O_WRONLY); v2, the directory (O_RDONLY) */
    unsigned max_procs;        /* the limits they were made with */
    uint64_t max_memory;
};

/* Finds the hierarchies and makes this server's directories (once, at start).
 * Returns 0 when the process cap can be made, or -errno (the cap then rests on
 * RLIMIT_NPROC); *memory_err gets 0 or -errno for the memory cap. Run as root, it
 * first removes the empty exec-server.PID directories beside its own whose PID no
 * process has any more (a server killed with SIGKILL never removes its own),
 * counting them in *swept. */
int cgroup_caps_init(int *memory_err, int *swept);

/* Whether a cgroup with that cap can be made (cgroup_caps_init found it). */
bool cgroup_caps_available(enum cgroup_cap which);

/* New cgroups: pids.max = max_procs (0: none), a memory limit of max_memory bytes
 * (0: none): one made ahead by cgroup_caps_prepare with those limits, else made now.
 * Returns 0 (out filled; every path NULL when neither applies) or -errno, with
 * nothing left behind. Thread-safe. */
int cgroup_caps_create(unsigned max_procs, uint64_t max_memory, struct cgroup_caps *out);

/* Makes cgroups ahead for cgroup_caps_create, up to two sets, on a thread that may
 * block (mkdir, the limits and the join descriptor were 0.15 ms of a capped start on
 * the loop thread; opening a ready set's join descriptor is 0.006 ms). They hold no
 * descriptor meanwhile. Thread-safe; after cgroup_caps_shutdown it makes nothing. */
void cgroup_caps_prepare(unsigned max_procs, uint64_t max_memory);

/* Whether no set is ready, so that the next capped start would make its own: the
 * time for cgroup_caps_prepare. Thread-safe. */
bool cgroup_caps_prepare_wanted(void);

/* A sandbox's cgroups once every process of it is gone: closes what is open, then
 * gives the set back for the next sandbox with the same limits where it can serve it
 * (a pids cgroup alone, empty, its pids.max written again, up to two kept), else
 * removes it. A mkdir and an rmdir per sandbox were 0.17 ms of a pool thread's time
 * under cgroup_mutex, beside every capped start on a two-core machine. May block
 * (rmdir). Thread-safe. */
void cgroup_caps_release(struct cgroup_caps *cg);

/* Closes what is open and removes the directories (their processes are gone). */
void cgroup_caps_remove(struct cgroup_caps *cg);

/* Whether join_fd is a cgroup v2 directory, to clone the init into
 * (CLONE_INTO_CGROUP), rather than a v1 tasks file for the init to write. */
bool cgroup_caps_join_by_clone(int join_fd);

/* In the init, single-threaded: moves the calling process into the cgroup of
 * join_fd: by v1's tasks file, or by a v2 directory's cgroup.procs where the kernel
 * could not clone into it (before Linux 5.7). The caller closes join_fd. Returns 0
 * or -errno. Async-signal-safe. */
int cgroup_caps_join_self(int join_fd);

/* Removes the cgroups made ahead and this server's directories, at exit. */
void cgroup_caps_shutdown(void);

#endif
