/* spawner: the daemon's side of its spawner processes (see spawner.h): starting
 * one, the two request channels (the loop thread's, which queues rather than
 * blocks and replaces a dead spawner on the loop; the pool threads', blocking
 * under its own mutex), and reading a start's status records. */
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/own_ports.h"
#include "sandbox/user_budgets.h"
#include "util/fdframe.h"
#include "util/mem.h"

/* One channel: a socket to one spawner process. */
struct chan {
    int sock;
    pid_t pid;
};

static char self_exe[PATH_MAX];

/* Starts a spawner process for c (under the caller's serialisation). */
static int chan_start(struct chan *c)
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
    if (user_budgets_notes_fd() >= 0)
        posix_spawn_file_actions_adddup2(&fa, user_budgets_notes_fd(), SPAWNER_NOTES_FD);
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
    /* Room for a burst of starts (1 MiB, which the kernel doubles; it caps it at
     * net.core.wmem_max), so that the loop channel's queue is seldom needed. */
    int room = 1 << 20;
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    c->sock = sv[0];
    c->pid = pid;
    return 0;
}

static void reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

/* Closes c's socket (its spawner exits on EOF) and reaps it: at shutdown, or on a
 * thread that may block. */
static void chan_stop(struct chan *c)
{
    if (c->sock < 0) return;
    close(c->sock);
    c->sock = -1;
    reap(c->pid);
    c->pid = -1;
}

/* ---- the blocking channel: any thread but the loop's --------------------------------- */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chan pool = {-1, -1};

int spawner_request(const struct spawn_wire_req *r, const int *fds, int nfds)
{
    struct buf b;
    buf_init(&b);
    spawn_wire_encode(&b, r);
    pthread_mutex_lock(&pool_lock);
    int rc = pool.sock >= 0 ? 0 : chan_start(&pool);
    if (!rc) rc = fdframe_send(pool.sock, b.data, b.len, fds, nfds);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        /* It died (an OOM kill, a crash): one fresh start, one more try. */
        log_warn("the spawner process exited; starting a new one");
        chan_stop(&pool);
        rc = chan_start(&pool);
        if (!rc) rc = fdframe_send(pool.sock, b.data, b.len, fds, nfds);
    }
    pthread_mutex_unlock(&pool_lock);
    buf_free(&b);
    return rc;
}

/* ---- the loop thread's channel: never blocks ----------------------------------------- */

/* A request the socket had no room for yet, in order. */
struct queued {
    struct queued *next;
    uint64_t ticket;
    struct buf frame; /* the whole frame, its length first */
    size_t off;       /* bytes sent so far */
    int fds[FDFRAME_MAX_FDS];
    int nfds; /* our duplicates, until byte 0 has gone with them */
};

/* A dead spawner waiting to be reaped (its pidfd readable), off the loop's path. */
struct reaper {
    struct reaper *next;
    uv_poll_t poll;
    pid_t pid;
    int pidfd;
};

static struct {
    uv_loop_t *loop; /* set by the first spawner_submit */
    struct chan ch;
    uv_poll_t *poll; /* on ch.sock, watching for room while the queue waits */
    bool watching;
    struct queued *head, *tail;
    uint64_t next_ticket;
    struct reaper *reapers;
} lc = {.ch = {-1, -1}};

static void handle_free(uv_handle_t *h)
{
    free(h);
}

static void queued_free(struct queued *q)
{
    for (int i = 0; i < q->nfds; i++)
        close(q->fds[i]);
    buf_free(&q->frame);
    free(q);
}

static void lc_drop_all(void)
{
    while (lc.head) {
        struct queued *q = lc.head;
        lc.head = q->next;
        queued_free(q);
    }
    lc.tail = NULL;
}

static void reaper_closed(uv_handle_t *h)
{
    struct reaper *r = h->data;
    for (struct reaper **pp = &lc.reapers; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    close(r->pidfd);
    free(r);
}

static void reaper_ready(uv_poll_t *h, int status, int events)
{
    struct reaper *r = h->data;
    int st;
    if (waitpid(r->pid, &st, WNOHANG) == 0 && status == 0) return; /* not yet */
    uv_poll_stop(h);
    uv_close((uv_handle_t *)h, reaper_closed);
}

/* Reaps a spawner whose socket was closed once it has exited: now when it has,
 * else when its pidfd says so; without pidfds, at spawner_stop. */
static void reap_later(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, WNOHANG) != 0) return;
    struct reaper *r = xmalloc(sizeof *r);
    r->pid = pid;
    r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    r->next = lc.reapers;
    lc.reapers = r;
    if (r->pidfd < 0) return;
    uv_poll_init(lc.loop, &r->poll, r->pidfd);
    r->poll.data = r;
    uv_poll_start(&r->poll, UV_READABLE, reaper_ready);
}

static void lc_writable(uv_poll_t *h, int status, int events);

/* Watches the socket for room while the queue holds something. */
static void lc_watch(bool on)
{
    if (on == lc.watching || !lc.poll) return;
    lc.watching = on;
    if (on)
        uv_poll_start(lc.poll, UV_WRITABLE, lc_writable);
    else
        uv_poll_stop(lc.poll);
}

static int lc_open(void)
{
    int rc = chan_start(&lc.ch);
    if (rc < 0) return rc;
    lc.poll = xmalloc(sizeof *lc.poll);
    uv_poll_init_socket(lc.loop, lc.poll, lc.ch.sock);
    lc.watching = false;
    return 0;
}

/* The spawner died (EPIPE): close its socket, reap it later, start a new one. A
 * request it had only part of cannot be sent again (its descriptors went with its
 * first bytes): it is dropped, and its start ends without a verdict, like the
 * requests the dead spawner had received and not served. */
static int lc_restart(void)
{
    log_warn("the spawner process exited; starting a new one");
    if (lc.ch.sock < 0) return lc_open();
    if (lc.head && lc.head->off > 0) {
        struct queued *q = lc.head;
        lc.head = q->next;
        if (!lc.head) lc.tail = NULL;
        queued_free(q);
    }
    lc_watch(false);
    if (lc.poll) uv_close((uv_handle_t *)lc.poll, handle_free);
    lc.poll = NULL;
    close(lc.ch.sock);
    lc.ch.sock = -1;
    reap_later(lc.ch.pid);
    lc.ch.pid = -1;
    return lc_open();
}

/* Sends what fits of the queue, in order: 0 when it is empty, -EAGAIN when the
 * socket is full, or -errno. */
static int lc_flush(void)
{
    while (lc.head) {
        struct queued *q = lc.head;
        ssize_t w = fdframe_send_part(lc.ch.sock, q->frame.data, q->frame.len, q->off,
                                      q->off ? NULL : q->fds, q->off ? 0 : q->nfds);
        if (w < 0) return (int)w;
        if (w == 0) return -EAGAIN;
        if (q->off == 0) {
            for (int i = 0; i < q->nfds; i++)
                close(q->fds[i]);
            q->nfds = 0;
        }
        q->off += (size_t)w;
        if (q->off < q->frame.len) continue;
        lc.head = q->next;
        if (!lc.head) lc.tail = NULL;
        queued_free(q);
    }
    return 0;
}

/* Flushes, restarting a dead spawner once; what cannot be sent at all is dropped
 * (each start then ends without a verdict). */
static void lc_pump(void)
{
    int rc = lc.ch.sock >= 0 ? lc_flush() : -EPIPE;
    if (rc == -EPIPE || rc == -ECONNRESET) {
        rc = lc_restart();
        if (rc == 0) rc = lc_flush();
    }
    if (rc < 0 && rc != -EAGAIN) {
        log_warn("cannot send to the spawner: %s; %s", strerror(-rc),
                 "the starts waiting for it fail");
        lc_drop_all();
    }
    lc_watch(lc.head != NULL);
}

static void lc_writable(uv_poll_t *h, int status, int events)
{
    lc_pump();
}

/* Queues frame (taken over) behind what waits, with duplicates of fds unless its
 * first bytes went already. */
static int lc_enqueue(struct buf *frame, size_t off, const int *fds, int nfds, uint64_t *ticket)
{
    struct queued *q = xcalloc(1, sizeof *q);
    for (int i = 0; i < nfds && off == 0; i++) {
        q->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        if (q->fds[i] < 0) {
            int err = errno;
            queued_free(q);
            return -err;
        }
        q->nfds = i + 1;
    }
    q->frame = *frame;
    buf_init(frame);
    q->off = off;
    q->ticket = ++lc.next_ticket;
    if (lc.tail)
        lc.tail->next = q;
    else
        lc.head = q;
    lc.tail = q;
    if (off == 0) *ticket = q->ticket;
    lc_watch(true);
    return 0;
}

int spawner_submit(uv_loop_t *loop, const struct spawn_wire_req *r, const int *fds, int nfds,
                   uint64_t *ticket)
{
    *ticket = 0;
    if (nfds < 0 || nfds > FDFRAME_MAX_FDS) return -EMSGSIZE;
    if (!lc.loop) {
        lc.loop = loop;
        if (lc.ch.sock >= 0) {
            lc.poll = xmalloc(sizeof *lc.poll);
            uv_poll_init_socket(loop, lc.poll, lc.ch.sock);
        }
    }
    struct buf b;
    buf_init(&b);
    fdframe_begin(&b);
    spawn_wire_encode(&b, r);
    fdframe_end(&b, 0);
    int rc = 0;
    ssize_t w = 0;
    if (!lc.head) {
        /* Nothing waits: straight to the socket, as far as it has room. */
        if (lc.ch.sock < 0) rc = lc_open();
        if (!rc) w = fdframe_send_part(lc.ch.sock, b.data, b.len, 0, fds, nfds);
        if (w == -EPIPE || w == -ECONNRESET) {
            rc = lc_restart();
            w = rc ? rc : fdframe_send_part(lc.ch.sock, b.data, b.len, 0, fds, nfds);
        }
        if (w < 0) rc = (int)w;
    }
    if (!rc && (size_t)w < b.len) rc = lc_enqueue(&b, (size_t)w, fds, nfds, ticket);
    buf_free(&b);
    return rc;
}

bool spawner_withdraw(uint64_t ticket)
{
    if (!ticket) return false;
    struct queued *prev = NULL;
    for (struct queued *q = lc.head; q; prev = q, q = q->next) {
        if (q->ticket != ticket) continue;
        if (q->off > 0) return false; /* on its way: the spawner gets all of it */
        if (prev)
            prev->next = q->next;
        else
            lc.head = q->next;
        if (lc.tail == q) lc.tail = prev;
        queued_free(q);
        lc_watch(lc.head != NULL);
        return true;
    }
    return false;
}

int spawner_start(void)
{
    return lc.ch.sock >= 0 ? 0 : chan_start(&lc.ch);
}

void spawner_stop(void)
{
    /* The loop is closed (its handles too): free what is left, then the processes. */
    lc_drop_all();
    free(lc.poll);
    lc.poll = NULL;
    lc.loop = NULL;
    chan_stop(&lc.ch);
    while (lc.reapers) {
        struct reaper *r = lc.reapers;
        lc.reapers = r->next;
        reap(r->pid);
        if (r->pidfd >= 0) close(r->pidfd);
        free(r);
    }
    pthread_mutex_lock(&pool_lock);
    chan_stop(&pool);
    pthread_mutex_unlock(&pool_lock);
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
