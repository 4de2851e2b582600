/* guardian: kills every managed process group when the daemon dies, even by
 * SIGKILL.
 *
 * PR_SET_PDEATHSIG reaches only a direct child; its own children in the same
 * process group would survive a SIGKILLed daemon. So at startup the daemon
 * double-forks a tiny guardian (not its child: it never shows up among the
 * daemon's descendants and needs no reaping) connected by a pipe. The daemon
 * writes each new process group id, and its negation once the group is killed;
 * the guardian keeps the set and, when the pipe reaches EOF (the daemon exited,
 * however it exited), SIGKILLs every group still in it and exits.
 *
 * A guardian that dies (killed by hand, by the OOM killer) is started again at
 * once, knowing every group then alive (at most once a second): the daemon keeps
 * running its sessions, and the window without protection is the few milliseconds
 * the new fork takes. Exiting instead would end every session for an event that
 * harms nothing by itself, and leave the very processes the guardian exists for
 * without one (docs/ARCHITECTURE.md, "The guardian"). Loop thread only. */
#ifndef EXEC_HELPERS_GUARDIAN_H
#define EXEC_HELPERS_GUARDIAN_H

#include <sys/types.h>
#include <uv.h>

/* Forks the guardian. Call before any thread exists (before the libuv loop runs
 * work). Returns 0 or a negative errno; without a guardian the daemon still
 * works, with PR_SET_PDEATHSIG as the only net. */
int guardian_start(void);
/* Watches the guardian from loop (after guardian_start, once the loop exists): when
 * it dies, another is started (or, if the first never started, tried every second). */
void guardian_watch(uv_loop_t *loop);
/* Registers / unregisters a process group (never blocks; drops the message with
 * a warning when the guardian is gone or not keeping up). */
void guardian_track(pid_t pgid);
void guardian_untrack(pid_t pgid);

#endif
