/* fs_broker: the file-system calls a sandboxed command's policy must decide at call
 * time, made by the sandbox's init on the command's behalf.
 *
 * Two things the kernel cannot say by itself ask for it:
 *  - reads: a deny entry for a path missing when the sandbox started, or a deny glob,
 *    must hold for files made afterwards (by the host, by another sandbox, renamed
 *    there by the command): no mount can cover a name that does not exist yet, and
 *    Landlock can only allow. Every open(2), rename(2) and link(2) of the command
 *    then comes here, and the policy (path_rules.h) is asked of the object it would
 *    reach;
 *  - writes: a sandbox without namespaces (sandbox_mode.h) has no read-only mounts,
 *    and Landlock cannot keep .git read-only inside a writable workspace (a right
 *    granted on a directory reaches everything under it). Its command's Landlock
 *    rules give the writable roots read rights only, and every call that changes
 *    the file system (opens for writing, creating, removing, renaming, linking,
 *    modes, owners, times, extended attributes) comes here, where the init makes the
 *    change itself when the policy grants write on every path it touches.
 *
 * The init resolves each path itself, one component at a time as the kernel would
 * (symbolic links followed from its own copy of the path, /proc/self meaning the
 * caller, another process's /proc entries refused), from the caller's working
 * directory or descriptor, asks the policy of the canonical path of what it reached,
 * does the call on that object with its effective capabilities off and the caller's
 * umask, and answers with the result or puts the opened descriptor into the
 * caller's table (notify.h). Nothing is continued by the kernel after a look.
 *
 * Runs in the init only (single-threaded; a blocking open of a FIFO is made by a
 * short-lived fork so that the init's loop goes on). */
#ifndef EXEC_SANDBOX_FS_BROKER_H
#define EXEC_SANDBOX_FS_BROKER_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/spec.h"

struct notify;
struct notify_call;

#define FS_BROKER_MAX_WAITING 16

struct fs_broker {
    const struct sandbox_spec *spec; /* the policy (borrowed: the init's) */
    bool writes;                     /* every change under a writable root */
    bool own_dev;                    /* /dev and /proc are the sandbox's own (a view) */
    int ptys[16];                    /* without: the /dev/pts numbers that are its own
                                        (its terminal, those it opened /dev/ptmx for) */
    int nptys;
    int nwaiting; /* blocking FIFO opens in a fork */
    struct {
        uint64_t id;  /* the notification to answer */
        int sock;     /* where the fork sends the opened descriptor */
        pid_t pid;    /* the fork */
        bool cloexec; /* O_CLOEXEC asked */
    } waiting[FS_BROKER_MAX_WAITING];
};

/* Answers the call c (received by the init's notify loop): any the filter notifies but
 * connect(2) and the signals' (seccomp.h); ENOSYS to a number it does not know. */
void fs_broker_serve(struct fs_broker *b, struct notify *nf, const struct notify_call *c);

/* The blocking opens waiting in forks: up to max pollfds; how many. */
int fs_broker_pollfds(const struct fs_broker *b, struct pollfd *p, int max);

/* Answers those whose fork has sent its descriptor (or failed). */
void fs_broker_serve_waiting(struct fs_broker *b, struct notify *nf, const struct pollfd *p, int n);

#endif
