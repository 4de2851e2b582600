/* sig_guard: the signals of a sandbox without namespaces, decided by its init.
 *
 * A PID namespace keeps every other process out of a sandbox's reach (kill(2) and its
 * kin take numbers the namespace does not have), and Landlock scopes signals from ABI
 * 6 on. Without either (a Landlock-only sandbox on an older kernel: sandbox_mode.h),
 * the command's filter hands kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo
 * and pidfd_send_signal to the init, which sends the signal itself when its target is
 * the init or one of its descendants (every process the command made: the init is
 * their subreaper), and refuses the rest (EPERM), the server and the host's other
 * processes of the same uid among them. kill(-1) reaches every process of the
 * sandbox, as in a PID namespace; a process group must have a member in it.
 *
 * Runs in the init only. */
#ifndef EXEC_SANDBOX_SIG_GUARD_H
#define EXEC_SANDBOX_SIG_GUARD_H

#include <stdbool.h>

struct notify;
struct notify_call;

/* Whether system call nr is one sig_guard answers. */
bool sig_guard_handles(long nr);

/* Answers the call c. */
void sig_guard_serve(struct notify *nf, const struct notify_call *c);

#endif
