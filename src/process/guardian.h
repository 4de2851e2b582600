/* guardian: kills every managed process group when the daemon dies, even by
 * SIGKILL.
 *
 * PR_SET_PDEATHSIG reaches only a direct child; its own children in the same
 * process group would survive a SIGKILLed daemon. So at startup the daemon
 * double-forks a tiny guardian (not its child: it never shows up among the
 * daemon's descendants and needs no reaping) connected by a pipe. The daemon
 * writes each new process group id, and its negation once the group is killed;
 * the guardian keeps the set and, when the pipe reaches EOF (the daemon exited,
 * however it exited), SIGKILLs every group still in it and exits. */
#ifndef EXEC_PROCESS_GUARDIAN_H
#define EXEC_PROCESS_GUARDIAN_H

#include <sys/types.h>

/* Forks the guardian. Call before any thread exists (before the libuv loop runs
 * work). Returns 0 or a negative errno; without a guardian the daemon still
 * works, with PR_SET_PDEATHSIG as the only net. */
int guardian_start(void);
/* Registers / unregisters a process group (never blocks; drops the message with
 * a warning when the guardian is gone or not keeping up). */
void guardian_track(pid_t pgid);
void guardian_untrack(pid_t pgid);

#endif
