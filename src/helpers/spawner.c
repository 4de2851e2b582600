/* spawner: the daemon's side of its spawner process (see spawner.h). */
#include "helpers/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/own_ports.h"
#include "util/fdframe.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int sock = -1; /* our end, blocking */
static pid_t spawner_pid = -1;
static char self_exe[PATH_MAX];

/* Starts the process (lock held or before threads exist). */
static int start_locked(void)
{
    if (!self_exe[0]) {
        ssize_t l = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
        if (l < 0) return -errno;
        self_exe[l] = 0;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], SPAWNER_SOCK_FD);
    if (own_ports_fd() >= 0)
        posix_spawn_file_actions_adddup2(&fa, own_ports_fd(), SPAWNER_PORTS_FD);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {(char *)"exec-server", (char *)SPAWNER_ARG, NULL};
    /* LeakSanitizer's exit scan is of no use in a process that only forks. */
    char *envp[] = {(char *)"ASAN_OPTIONS=detect_leaks=0", NULL};
    pid_t pid;
    int e = posix_spawn(&pid, self_exe, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (e) {
        close(sv[0]);
        return -e;
    }
    sock = sv[0];
    spawner_pid = pid;
    return 0;
}

static void stop_locked(void)
{
    if (sock < 0) return;
    close(sock);
    sock = -1;
    int st;
    while (waitpid(spawner_pid, &st, 0) < 0 && errno == EINTR) {
    }
    spawner_pid = -1;
}

int spawner_start(void)
{
    pthread_mutex_lock(&lock);
    int rc = sock >= 0 ? 0 : start_locked();
    pthread_mutex_unlock(&lock);
    return rc;
}

void spawner_stop(void)
{
    pthread_mutex_lock(&lock);
    stop_locked();
    pthread_mutex_unlock(&lock);
}

int spawner_request(const struct spawn_wire_req *r, const int *fds, int nfds)
{
    struct buf b;
    buf_init(&b);
    spawn_wire_encode(&b, r);
    pthread_mutex_lock(&lock);
    int rc = sock >= 0 ? 0 : start_locked();
    if (!rc) rc = fdframe_send(sock, b.data, b.len, fds, nfds);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        /* It died (an OOM kill, a crash): one fresh start, one more try. */
        log_warn("the spawner process exited; starting a new one");
        stop_locked();
        rc = start_locked();
        if (!rc) rc = fdframe_send(sock, b.data, b.len, fds, nfds);
    }
    pthread_mutex_unlock(&lock);
    buf_free(&b);
    return rc;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void spawner_status_init(struct spawner_status *st)
{
    memset(st, 0, sizeof *st);
}

int spawner_status_read(int status_r, struct spawner_status *st)
{
    /* Records come from the spawner ('P') and from the child or its init (the
     * rest) in either order; the pipe ends once every writer is done (the spawner
     * after the request, the init after the command started, the command at
     * exec), so it is read to the end. */
    for (;;) {
        ssize_t r = read(status_r, st->rec + st->have, sizeof st->rec - st->have);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return 0;
        if (r < 0) return -errno;
        if (r == 0) return 1;
        st->have += (size_t)r;
        if (st->have < sizeof st->rec) continue;
        st->have = 0;
        int v;
        memcpy(&v, st->rec + 1, sizeof v);
        switch (st->rec[0]) {
        case SPAWN_REC_PID: st->o.pid = v; break;
        case SPAWN_REC_STARTED: st->decided = true; break;
        case SPAWN_REC_STEP:
            if (!st->o.step) st->o.step = v;
            break;
        case SPAWN_REC_SETUP:
            st->o.setup_failed = true;
            /* fall through */
        case SPAWN_REC_EXEC:
            if (!st->o.err) st->o.err = v > 0 ? v : EIO;
            st->decided = true;
            break;
        default: return -EPROTO;
        }
    }
}

int spawner_wait(int status_r, int timeout_ms, struct spawn_outcome *o)
{
    struct spawner_status st;
    spawner_status_init(&st);
    long long deadline = now_ms() + timeout_ms;
    int rc;
    while ((rc = spawner_status_read(status_r, &st)) == 0) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            *o = st.o;
            return -ETIMEDOUT;
        }
        struct pollfd p = {status_r, POLLIN, 0};
        poll(&p, 1, (int)left);
    }
    *o = st.o;
    if (rc < 0) return rc;
    return st.decided ? 0 : -EPIPE;
}

const char *spawner_step_name(int step)
{
    static const char *const names[] = {
        [SPAWN_STEP_NONE] = "start",
        [SPAWN_STEP_CLONE] = "clone",
        [SPAWN_STEP_SESSION] = "setsid",
        [SPAWN_STEP_DEATHSIG] = "prctl(PR_SET_PDEATHSIG)",
        [SPAWN_STEP_SUBREAPER] = "prctl(PR_SET_CHILD_SUBREAPER)",
        [SPAWN_STEP_TTY] = "ioctl(TIOCSCTTY)",
        [SPAWN_STEP_STDIO] = "dup2",
        [SPAWN_STEP_CWD] = "chdir",
        [SPAWN_STEP_CONFINE] = "sandbox confinement",
        [SPAWN_STEP_SIGNALS] = "signal setup",
        [SPAWN_STEP_SANDBOX] = "sandbox setup",
        [SPAWN_STEP_PROXY] = "network proxy listener",
        [SPAWN_STEP_EXEC] = "execve",
    };
    if (step < 0 || (size_t)step >= sizeof names / sizeof names[0]) return "start";
    return names[step];
}

void spawner_record(int fd, char tag, int value)
{
    char rec[SPAWN_REC_LEN];
    rec[0] = tag;
    memcpy(rec + 1, &value, sizeof value);
    ssize_t w;
    do {
        w = write(fd, rec, sizeof rec);
    } while (w < 0 && errno == EINTR);
}
