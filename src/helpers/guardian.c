/* guardian: the watchdog process that kills orphaned process groups (see
 * guardian.h).
 *
 * The guardian is deliberately tiny: a fixed-size table, one blocking read loop,
 * only system calls after the fork. Messages are native int32 values, 4 bytes
 * per write(2), which a pipe delivers atomically, so the guardian never sees a
 * torn message.
 *
 * The daemon keeps the same table (groups[]): a guardian started again after the
 * first one died is forked with it, so it knows every group alive at that moment
 * and hears of later ones through its own pipe. The daemon learns of a death from
 * the pipe itself: its write end reports an error once no reader is left. */
#include "helpers/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "core/log.h"
#include "util/fdclose.h"

#define GUARDIAN_MAX_GROUPS 65536

/* A guardian killed this soon after the last start is started again only after
 * this long: whatever kills it at once must not make the daemon fork in a loop. */
#define GUARDIAN_RESTART_MS 1000

static int guardian_wfd = -1;
/* The groups being guarded, kept by the daemon (loop thread) and inherited by each
 * guardian it forks, which keeps its own copy from then on. */
static pid_t groups[GUARDIAN_MAX_GROUPS];
static size_t ngroups;

static uv_loop_t *watch_loop;
static uv_poll_t watch; /* the pipe's write end: an error once the guardian is gone */
static bool watching;   /* watch is initialised and not closed */
static uv_timer_t restart_timer;
static uint64_t last_start_ms;

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
    size_t n = ngroups; /* the daemon's table when it forked us */
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

static void guardian_lost(const char *why);

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
    guardian_lost(strerror(errno));
}

void guardian_track(pid_t pgid)
{
    if (pgid <= 0) return;
    if (ngroups < GUARDIAN_MAX_GROUPS) groups[ngroups++] = pgid;
    guardian_send((int32_t)pgid);
}

void guardian_untrack(pid_t pgid)
{
    if (pgid <= 0) return;
    for (size_t k = 0; k < ngroups; k++) {
        if (groups[k] == pgid) {
            groups[k] = groups[--ngroups];
            break;
        }
    }
    guardian_send(-(int32_t)pgid);
}

/* ---- noticing a dead guardian and starting another ----------------------------------- */

static void watch_start(void);

static void restart_cb(uv_timer_t *t)
{
    int rc = guardian_start();
    if (rc < 0) {
        log_warn("cannot start a new guardian (%s); trying again in %d ms", strerror(-rc),
                 GUARDIAN_RESTART_MS);
        uv_timer_start(&restart_timer, restart_cb, GUARDIAN_RESTART_MS, 0);
        return;
    }
    last_start_ms = uv_now(watch_loop);
    log_notice("started a new guardian; it protects the %zu running process groups", ngroups);
    watch_start();
}

static void watch_closed(uv_handle_t *h)
{
    watching = false;
    if (uv_is_closing((uv_handle_t *)&restart_timer)) return; /* shutting down */
    /* Not twice in GUARDIAN_RESTART_MS. */
    uint64_t now = uv_now(watch_loop);
    uint64_t delay =
        now - last_start_ms < GUARDIAN_RESTART_MS ? GUARDIAN_RESTART_MS - (now - last_start_ms) : 0;
    uv_timer_start(&restart_timer, restart_cb, delay, 0);
}

/* The guardian is gone: say so, and start another (watch_closed). */
static void guardian_lost(const char *why)
{
    log_warn("guardian is gone (%s); starting a new one so that process groups stay "
             "protected against a daemon crash",
             why);
    if (guardian_wfd >= 0) {
        if (watching && !uv_is_closing((uv_handle_t *)&watch)) {
            uv_poll_stop(&watch); /* before the close: the fd leaves epoll first */
            uv_close((uv_handle_t *)&watch, watch_closed);
        }
        close(guardian_wfd);
        guardian_wfd = -1;
    }
}

static void watch_cb(uv_poll_t *h, int status, int events)
{
    guardian_lost("its pipe has no reader");
}

static void watch_start(void)
{
    if (!watch_loop || guardian_wfd < 0 || watching) return;
    if (uv_poll_init(watch_loop, &watch, guardian_wfd) < 0) return;
    watching = true;
    uv_unref((uv_handle_t *)&watch); /* never what keeps the loop alive */
    uv_poll_start(&watch, UV_DISCONNECT, watch_cb);
}

void guardian_watch(uv_loop_t *loop)
{
    watch_loop = loop;
    uv_timer_init(loop, &restart_timer);
    uv_unref((uv_handle_t *)&restart_timer);
    last_start_ms = uv_now(loop);
    if (guardian_wfd >= 0)
        watch_start();
    else
        uv_timer_start(&restart_timer, restart_cb, GUARDIAN_RESTART_MS, 0);
}
