/* pids_cgroup: a process cap per sandbox from the pids controller, where the
 * server may make cgroups.
 *
 * A sandbox's cap on processes (--sandbox-max-processes) is RLIMIT_NPROC in its
 * own user namespace, which counts that sandbox's tasks only; but the kernel never
 * applies RLIMIT_NPROC to uid 0, and a root server's sandboxes run as uid 0 (its
 * user namespace maps 0 to 0, so files it writes stay root's). For them the cap is
 * a pids cgroup of its own: pids.max = the cap, the spawner moves the sandbox's
 * init into it right after the clone (writing the pid to its cgroup.procs through a
 * descriptor the server opened: the kernel checks the opener's credentials) while
 * the init builds its view, and the init forks nothing before the move is done, so
 * every process of the sandbox is in it. A cgroup v1 move waits for an RCU grace
 * period (cgroup_threadgroup_rwsem): in the init's own path it cost a sandboxed
 * start 0.3 ms at p50 and several at p95, in parallel with the view nothing. The
 * server removes the cgroup once the sandbox has been reaped.
 *
 * The hierarchy is the pids controller's: a cgroup v1 "pids" mount, or cgroup v2
 * where the server's own cgroup delegates "pids" to its children (cgroup.subtree_
 * control lists it). Everything lives under one directory per server,
 * exec-server.<pid>, made at start. Where none can be made the cap is RLIMIT_NPROC
 * alone (docs/SANDBOX.md says what that means for root). */
#ifndef EXEC_SANDBOX_PIDS_CGROUP_H
#define EXEC_SANDBOX_PIDS_CGROUP_H

#include <stdbool.h>
#include <sys/types.h>

/* One sandbox's cgroup: its directory and the open cgroup.procs for its init. */
struct pids_cgroup {
    char *path;   /* malloc'd, NULL when there is none */
    int procs_fd; /* O_WRONLY, close-on-exec; -1 once handed over or when none */
};

/* Finds the hierarchy and makes this server's directory (once, at start). Returns 0,
 * or -errno when no pids cgroup can be made here (the cap then rests on
 * RLIMIT_NPROC). */
int pids_cgroup_init(void);

/* Whether pids_cgroup_init succeeded. */
bool pids_cgroup_available(void);

/* A new cgroup with pids.max = max. Returns 0 (out filled) or -errno. Thread-safe. */
int pids_cgroup_create(unsigned max, struct pids_cgroup *out);

/* Closes what is open and removes the directory (its processes are gone). */
void pids_cgroup_remove(struct pids_cgroup *cg);

/* Moves process pid into the cgroup of procs_fd (the caller closes it). Returns 0
 * or -errno. Async-signal-safe. */
int pids_cgroup_move(int procs_fd, pid_t pid);

/* Removes this server's directory at exit (empty by then). */
void pids_cgroup_shutdown(void);

#endif
