/* guardian: the watchdog process that kills orphaned process groups (see
 * guardian.h).
 *
 * The guardian is deliberately tiny: a fixed-size table, one blocking read loop,
 * only system calls after the fork. Messages are native int32 values, 4 bytes
 * per write(2), which a pipe delivers atomically, so the guardian never sees a
 * torn message. */
#include "process/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "util/fdclose.h"

#define GUARDIAN_MAX_GROUPS 65536

static int guardian_wfd = -1;
static pid_t groups[GUARDIAN_MAX_GROUPS]; /* used in the guardian only */

static __attribute__((noreturn)) void guardian_run(int rfd)
{
    /* Terminal and service-manager signals are the daemon's business: the
     * guardian leaves when the pipe says the daemon is gone. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    (void)prctl(PR_SET_NAME, "exec-guardian"); /* a name for ps, nothing depends on it */
    /* Keep only stdio and the pipe (moved to 3 first: with the daemon's stdin closed
     * it may be 0): an inherited listening socket or child pipe would outlive the
     * daemon and keep its peers waiting. A guardian that cannot set itself up
     * leaves; the daemon's next write sees EPIPE and says the guardian is gone. */
    if (rfd != 3) {
        if (dup2(rfd, 3) < 0) _exit(1);
        rfd = 3;
    }
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0) _exit(1);
    fdclose_from(4);
    size_t n = 0;
    int32_t msg[1024];
    size_t have = 0; /* bytes in msg */
    for (;;) {
        ssize_t r = read(rfd, (char *)msg + have, sizeof msg - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        size_t whole = have / sizeof msg[0];
        for (size_t i = 0; i < whole; i++) {
            int32_t v = msg[i];
            if (v > 0) {
                if (n < GUARDIAN_MAX_GROUPS) groups[n++] = v;
            } else if (v < 0) {
                for (size_t k = 0; k < n; k++) {
                    if (groups[k] == -v) {
                        groups[k] = groups[--n];
                        break;
                    }
                }
            }
        }
        size_t rest = have - whole * sizeof msg[0];
        for (size_t b = 0; b < rest; b++)
            ((char *)msg)[b] = ((char *)msg)[whole * sizeof msg[0] + b];
        have = rest;
    }
    for (size_t k = 0; k < n; k++)
        kill(-groups[k], SIGKILL);
    _exit(0);
}

int guardian_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    pid_t mid = fork();
    if (mid < 0) {
        int err = errno;
        close(p[0]);
        close(p[1]);
        return -err;
    }
    if (mid == 0) {
        /* Double fork: the guardian is reparented away from the daemon. */
        close(p[1]);
        /* Not in the daemon's terminal job: Ctrl-C is the daemon's. */
        if (setsid() < 0) _exit(1);
        pid_t g = fork();
        if (g == 0) guardian_run(p[0]);
        _exit(g < 0 ? 1 : 0);
    }
    close(p[0]);
    int st;
    while (waitpid(mid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        close(p[1]);
        return -ECHILD;
    }
    fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
    guardian_wfd = p[1];
    return 0;
}

static void guardian_send(int32_t v)
{
    if (guardian_wfd < 0) return;
    ssize_t r;
    do {
        r = write(guardian_wfd, &v, sizeof v);
    } while (r < 0 && errno == EINTR);
    if (r == (ssize_t)sizeof v) return;
    if (errno == EAGAIN) {
        log_warn("guardian is not keeping up; process group %d is not protected against a "
                 "daemon crash",
                 (int)(v < 0 ? -v : v));
        return;
    }
    log_warn("guardian is gone (%s); process groups are no longer protected against a "
             "daemon crash",
             strerror(errno));
    close(guardian_wfd);
    guardian_wfd = -1;
}

void guardian_track(pid_t pgid)
{
    if (pgid > 0) guardian_send((int32_t)pgid);
}

void guardian_untrack(pid_t pgid)
{
    if (pgid > 0) guardian_send(-(int32_t)pgid);
}
