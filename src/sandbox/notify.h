/* notify: a sandbox's seccomp user notifications, answered by its init.
 *
 * A command's filter can hand a call to the init instead of deciding it
 * (SECCOMP_RET_USER_NOTIF): the init reads the call's arguments, does what the
 * command asked ITSELF, on objects it resolved itself from a copy of the arguments,
 * and answers with the result (an errno, a value, or a descriptor put into the
 * command's table). It never lets the kernel continue a call after looking at it:
 * the kernel would read the arguments again, and another task sharing the command's
 * memory or descriptor table could have changed them in between (seccomp(2) warns of
 * exactly this). The callers are net_guard.h (connect with the network enabled),
 * fs_broker.h (file-system calls the policy must decide at call time) and the
 * signals of a sandbox without namespaces (sig_guard in fs_broker.h's family).
 *
 * Runs in the init only (a fork of the spawner, single-threaded): it may allocate. */
#ifndef EXEC_SANDBOX_NOTIFY_H
#define EXEC_SANDBOX_NOTIFY_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct notify {
    int fd; /* the seccomp listener, -1 when there is none */
    struct seccomp_notif *req;
    struct seccomp_notif_resp *resp;
    size_t req_size, resp_size;
};

/* The call being answered: its notification and a pidfd of its caller's process. */
struct notify_call {
    const struct seccomp_notif *n;
    pid_t tid; /* the calling thread, in the init's PID namespace */
    int pidfd; /* for pidfd_getfd: the thread's (Linux 6.9), else its process's when
                  both share one descriptor table; -1 when none could be had */
};

/* Takes the listener fd. Returns 0 or -errno. */
int notify_open(struct notify *nf, int fd);

/* Receives the next notification into nf->req and opens its caller's pidfd into
 * *c. Returns 1, 0 when there was none (or its caller is gone), or -errno. */
int notify_recv(struct notify *nf, struct notify_call *c);

/* Releases what notify_recv took for c (its pidfd). */
void notify_call_done(struct notify_call *c);

/* Whether the notification is still pending (its caller still inside the call). */
bool notify_valid(const struct notify *nf, uint64_t id);

/* Answers id: error is 0 or -errno, val the call's return value when error is 0. */
void notify_answer(struct notify *nf, uint64_t id, int error, int64_t val);

/* Answers id by putting fd into the caller's table (the call returns its number),
 * close-on-exec when cloexec. Returns 0, or -errno when it could not (the caller
 * then still waits for an answer). */
int notify_answer_fd(struct notify *nf, uint64_t id, int fd, bool cloexec);

/* Copies len bytes at addr from the caller's memory. Returns 0 or -EFAULT. */
int notify_read(const struct notify_call *c, uint64_t addr, void *out, size_t len);

/* Copies the NUL-terminated string at addr (at most cap - 1 bytes) from the
 * caller's memory. Returns its length, -EFAULT, or -ENAMETOOLONG. */
ssize_t notify_read_string(const struct notify_call *c, uint64_t addr, char *out, size_t cap);

/* A duplicate of the caller's descriptor n (pidfd_getfd), or -errno. */
int notify_getfd(const struct notify_call *c, int n);

/* The init's effective capabilities off (on: back from its permitted set): what it
 * does for the command must not pass a check the command would fail. */
void notify_effective_caps(bool on);

#endif
