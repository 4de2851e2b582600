/* fdclose: closing every descriptor from a number up, in a child between fork and
 * exec.
 *
 * A child must start with only the descriptors it was given: a listening socket or
 * another client's pipe held by a long-lived command would keep that peer waiting
 * (and hand the command something it was never meant to see). close_range(2) does it
 * in one call from Linux 5.9; before that it fails with ENOSYS, and a seccomp filter
 * that does not know it (Docker's before 20.10) fails it with EPERM. The fallback
 * reads /proc/self/fd, and where /proc is not mounted closes every number up to
 * RLIMIT_NOFILE. Async-signal-safe and allocation-free (no opendir): callers run in
 * a vfork or CLONE_VM child. */
#ifndef EXEC_UTIL_FDCLOSE_H
#define EXEC_UTIL_FDCLOSE_H

/* Closes every descriptor >= lowfd: close_range, else the fallbacks below. Cannot
 * fail (the last fallback needs nothing). */
void fdclose_from(int lowfd);

/* The fallbacks, separate so that a test can run them on a kernel that has
 * close_range. By /proc/self/fd: 0, or -errno when it cannot be read (nothing was
 * closed then). */
int fdclose_from_procfs(int lowfd);
/* Every number from lowfd below RLIMIT_NOFILE's soft limit (at most 1 << 20, the
 * kernel's default nr_open). */
void fdclose_from_limit(int lowfd);

#endif
