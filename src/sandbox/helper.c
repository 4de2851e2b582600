/* helper: a pool of warm sandbox helpers keyed by (session id, policy text).
 *
 * Locking: one global mutex guards the list and the reference counts; each helper
 * has its own mutex held for the whole request/reply exchange, so requests to one
 * helper are serialised and never interleave on its socket. A helper is freed by
 * whoever drops the last reference after it has been retired (session end, death,
 * eviction): retiring kills the process at once, so a thread blocked on the socket
 * wakes with EOF. */
#include "sandbox/helper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "util/mem.h"

#define HELPERS_PER_OWNER 8
#define HELPERS_PER_POLICY 2
#define DEAD_OWNERS 64

struct sb_helper {
    struct sb_helper *next;
    char owner[40];
    char *policy;          /* owned: the sandbox JSON it applied */
    pid_t pid;
    int fd;                /* our end of the socketpair */
    int refs;              /* list membership counts as one */
    bool retired;          /* killed / leaving; never handed out again */
    bool transient;        /* serves one call only, never in the pool */
    pthread_mutex_t io;    /* held during one exchange */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sb_helper *pool;
static char dead_owners[DEAD_OWNERS][40];
static int dead_next;

/* ---- frames ------------------------------------------------------------------------ */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) return -EPIPE;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int sandbox_frame_send(int fd, const void *p, size_t n, int pass_fd)
{
    if (n > SB_FRAME_MAX) return -EMSGSIZE;
    uint32_t len = (uint32_t)n;
    struct iovec iov = {&len, sizeof len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    ssize_t w;
    do {
        w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w < 0) return -errno;
    if ((size_t)w < sizeof len) {
        int rc = write_all(fd, (char *)&len + w, sizeof len - (size_t)w);
        if (rc) return rc;
    }
    return write_all(fd, p, n);
}

int sandbox_frame_recv(int fd, struct buf *out, int *fd_out)
{
    if (fd_out) *fd_out = -1;
    uint32_t len;
    struct iovec iov = {&len, sizeof len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t r;
    do {
        r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    if (r == 0) return -EPIPE;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int got;
            memcpy(&got, CMSG_DATA(cm), sizeof got);
            if (fd_out && *fd_out < 0) *fd_out = got;
            else close(got);
        }
    }
    int rc = 0;
    if ((size_t)r < sizeof len) rc = read_all(fd, (char *)&len + r, sizeof len - (size_t)r);
    if (!rc && len > SB_FRAME_MAX) rc = -EMSGSIZE;
    if (!rc) rc = read_all(fd, buf_extend(out, len), len);
    if (rc && fd_out && *fd_out >= 0) {
        close(*fd_out);
        *fd_out = -1;
    }
    return rc;
}

/* ---- helper processes ------------------------------------------------------------------ */

/* The helper binary sits next to the daemon's own executable. */
static int helper_path(char *out, size_t n)
{
    char self[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l < 0) return -errno;
    self[l] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return -ENOENT;
    *slash = 0;
    if ((size_t)snprintf(out, n, "%s/%s", self, SB_HELPER_NAME) >= n) return -ENAMETOOLONG;
    return 0;
}

static void helper_destroy(struct sb_helper *h)
{
    kill(h->pid, SIGKILL);
    close(h->fd);
    int st;
    while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR) {
    }
    pthread_mutex_destroy(&h->io);
    free(h->policy);
    free(h);
}

/* Drops a reference (pool_lock held); returns the helper when it must be freed. */
static struct sb_helper *unref_locked(struct sb_helper *h)
{
    return --h->refs == 0 ? h : NULL;
}

/* Unlinks and kills h (pool_lock held). */
static struct sb_helper *retire_locked(struct sb_helper *h)
{
    if (h->retired) return NULL;
    h->retired = true;
    kill(h->pid, SIGKILL);
    if (h->transient) return NULL; /* not in the pool: the call's reference frees it */
    for (struct sb_helper **pp = &pool; *pp; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    return unref_locked(h);
}

/* Starts a helper and hands it the policy. Returns NULL with *rc set. */
static struct sb_helper *helper_start(const char *owner, const char *policy, int *rc)
{
    char path[PATH_MAX];
    if ((*rc = helper_path(path, sizeof path)) < 0) return NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        *rc = -errno;
        return NULL;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3); /* dup2 clears CLOEXEC on fd 3 */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char ppid[24];
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    char *argv[] = {(char *)SB_HELPER_NAME, ppid, NULL};
    /* LeakSanitizer cannot work under the helper's confinement (DESIGN.md pitfall 12). */
    char *envp[] = {(char *)"ASAN_OPTIONS=detect_leaks=0", NULL};
    pid_t pid;
    int e = posix_spawn(&pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (e) {
        close(sv[0]);
        *rc = -e;
        return NULL;
    }
    struct sb_helper *h = xcalloc(1, sizeof *h);
    snprintf(h->owner, sizeof h->owner, "%s", owner);
    h->policy = xstrdup(policy);
    h->pid = pid;
    h->fd = sv[0];
    h->refs = 1;
    pthread_mutex_init(&h->io, NULL);
    struct buf ans;
    buf_init(&ans);
    *rc = sandbox_frame_send(h->fd, policy, strlen(policy), -1);
    if (!*rc) *rc = sandbox_frame_recv(h->fd, &ans, NULL);
    bool ok = !*rc && ans.len == 2 && memcmp(ans.data, "ok", 2) == 0;
    if (!ok)
        log_warn("sandbox helper refused the policy: %.*s", (int)(ans.len > 200 ? 200 : ans.len),
                 ans.len ? ans.data : "(no answer)");
    buf_free(&ans);
    if (!ok) {
        helper_destroy(h);
        *rc = SB_CALL_UNENFORCEABLE;
        return NULL;
    }
    return h;
}

static bool owner_dead_locked(const char *owner)
{
    for (int i = 0; i < DEAD_OWNERS; i++)
        if (dead_owners[i][0] && !strcmp(dead_owners[i], owner)) return true;
    return false;
}

/* Finds or starts the helper, returning it with a reference held. */
static struct sb_helper *helper_get(const char *owner, const char *policy, int *rc)
{
    pthread_mutex_lock(&pool_lock);
    if (owner_dead_locked(owner)) {
        pthread_mutex_unlock(&pool_lock);
        *rc = SB_CALL_CLOSED;
        return NULL;
    }
    int count = 0, same = 0;
    struct sb_helper *victim = NULL, *idle = NULL, *busy = NULL;
    for (struct sb_helper *h = pool; h; h = h->next) {
        if (strcmp(h->owner, owner)) continue;
        count++;
        if (!strcmp(h->policy, policy)) {
            same++;
            if (h->refs == 1 && !idle) idle = h; /* only the pool holds it */
            else if (!busy || h->refs < busy->refs) busy = h;
        } else if (h->refs == 1) {
            victim = h;
        }
    }
    /* Reuse an idle helper; when all are busy, queue on the least loaded one unless
     * the key may have one more (concurrent requests then run in parallel). */
    struct sb_helper *pick = idle ? idle : same >= HELPERS_PER_POLICY ? busy : NULL;
    if (pick) {
        pick->refs++;
        pthread_mutex_unlock(&pool_lock);
        return pick;
    }
    /* Bound the helpers one session can keep: evict an idle one. */
    struct sb_helper *dead = count >= HELPERS_PER_OWNER && victim ? retire_locked(victim) : NULL;
    pthread_mutex_unlock(&pool_lock);
    if (dead) helper_destroy(dead);

    /* Started outside the lock: a slow start must not stall other sessions. */
    struct sb_helper *h = helper_start(owner, policy, rc);
    if (!h) return NULL;
    pthread_mutex_lock(&pool_lock);
    if (owner_dead_locked(owner)) {
        pthread_mutex_unlock(&pool_lock);
        helper_destroy(h);
        *rc = SB_CALL_CLOSED;
        return NULL;
    }
    /* Other threads may have started helpers for the same key meanwhile: this one
     * serves this call, and joins the pool only while the key is below its bound;
     * otherwise it is retired and dies when the call drops it. */
    same = 0;
    for (struct sb_helper *o = pool; o; o = o->next)
        if (!strcmp(o->owner, owner) && !strcmp(o->policy, policy)) same++;
    if (same < HELPERS_PER_POLICY) {
        h->next = pool;
        pool = h;
        h->refs++;
    } else {
        h->transient = true;
    }
    pthread_mutex_unlock(&pool_lock);
    return h;
}

int sandbox_helper_call(const char *owner, const char *policy_json, const void *req,
                        size_t req_len, struct buf *reply, int *fd_out)
{
    *fd_out = -1;
    int rc = 0;
    struct sb_helper *h = helper_get(owner, policy_json, &rc);
    if (!h) {
        /* Could not start (no helper binary, no resources) or confine: fail closed. */
        if (rc != SB_CALL_CLOSED) log_warn("sandbox helper unavailable (%d)", rc);
        return rc == SB_CALL_CLOSED ? rc : SB_CALL_UNENFORCEABLE;
    }
    pthread_mutex_lock(&h->io);
    rc = h->retired ? -EPIPE : sandbox_frame_send(h->fd, req, req_len, -1);
    if (!rc) rc = sandbox_frame_recv(h->fd, reply, fd_out);
    pthread_mutex_unlock(&h->io);
    struct sb_helper *dead = NULL;
    pthread_mutex_lock(&pool_lock);
    if (rc) dead = retire_locked(h); /* a broken exchange leaves the socket unusable */
    struct sb_helper *last = unref_locked(h);
    pthread_mutex_unlock(&pool_lock);
    if (dead && dead != last) helper_destroy(dead);
    if (last) helper_destroy(last);
    return rc ? SB_CALL_DIED : 0;
}

void sandbox_helper_release_owner(const char *owner)
{
    struct sb_helper *dead[64];
    int nd = 0;
    pthread_mutex_lock(&pool_lock);
    snprintf(dead_owners[dead_next], sizeof dead_owners[0], "%s", owner);
    dead_next = (dead_next + 1) % DEAD_OWNERS;
    struct sb_helper *h = pool;
    while (h) {
        struct sb_helper *next = h->next;
        if (!strcmp(h->owner, owner)) {
            struct sb_helper *d = retire_locked(h);
            if (d && nd < 64) dead[nd++] = d;
        }
        h = next;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nd; i++) helper_destroy(dead[i]);
}

int sandbox_helper_pid(const char *owner, const char *policy_json)
{
    int pid = -1;
    pthread_mutex_lock(&pool_lock);
    for (struct sb_helper *h = pool; h; h = h->next)
        if (!strcmp(h->owner, owner) && !strcmp(h->policy, policy_json)) pid = h->pid;
    pthread_mutex_unlock(&pool_lock);
    return pid;
}
