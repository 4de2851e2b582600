/* fs_helper_pool: a pool of warm sandboxed fs helpers keyed by policy text (fs_sandbox).
 *
 * A helper is started like any sandboxed child (process/spawn, in namespaces of
 * its own with the policy's view, Landlock, no capabilities and the seccomp
 * filter) and serves requests until retired. Helpers are shared by every session
 * that uses the same policy (the confinement depends on nothing else); each keeps
 * the set of sessions that used it and is retired when the last of them ends, and
 * the pool holds at most HELPERS_MAX of them, evicting the least recently used
 * idle one beyond that. A helper found dead before a request is replaced
 * transparently; one that dies during a request fails that request.
 *
 * Locking: one global mutex guards the list and the reference counts; each helper
 * has its own mutex held for the whole request/reply exchange, so requests to one
 * helper are serialised and never interleave on its socket. A helper is freed by
 * whoever drops the last reference after it has been retired (session end, death,
 * eviction): retiring kills the process at once, so a thread blocked on the socket
 * wakes with EOF. */
#include "fs/fs_helper_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <poll.h>

#include "core/log.h"
#include "process/spawn.h"
#include "sandbox/hold.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_host.h"
#include "util/fdframe.h"
#include "util/mem.h"

#define HELPERS_MAX 64       /* warm helpers server-wide */
#define HELPERS_PER_POLICY 2 /* concurrent requests with one policy run in parallel */
#define DEAD_OWNERS 64

struct fs_helper {
    struct fs_helper *next;
    char *policy;            /* owned: the key of the sandbox it was started with */
    pid_t pid;               /* its sandbox init: killing it ends the helper */
    int pidfd;               /* the init's, readable once it exited (or -1) */
    int fd;                  /* our end of the socketpair */
    int refs;                /* list membership counts as one */
    bool retired;            /* killed / leaving; never handed out again */
    bool transient;          /* serves one call only, never in the pool */
    unsigned long long used; /* when it was last handed out (pool clock) */
    long long idle_since;    /* monotonic ms of its last use */
    char **owners;           /* owned: the sessions that used it */
    size_t nowners;
    struct sandbox_hold *hold; /* the placeholder directories its view mounts on */
    pthread_mutex_t io;        /* held during one exchange */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fs_helper *pool;
static unsigned long long pool_clock;
static char dead_owners[DEAD_OWNERS][40];
static int dead_next;

int fs_helper_frame_send(int fd, const void *p, size_t n, int pass_fd)
{
    return fdframe_send(fd, p, n, &pass_fd, pass_fd >= 0 ? 1 : 0);
}

int fs_helper_frame_recv(int fd, struct buf *out, int *fd_out)
{
    int got[1], n = 0;
    int rc = fdframe_recv(fd, out, got, 1, &n);
    if (fd_out)
        *fd_out = n ? got[0] : -1;
    else if (n)
        close(got[0]);
    return rc;
}

/* ---- helper processes ------------------------------------------------------------------ */

static void helper_destroy(struct fs_helper *h)
{
    kill(h->pid, SIGKILL);
    close(h->fd);
    if (h->pidfd >= 0) close(h->pidfd);
    int st;
    while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR) {
    }
    sandbox_hold_release(h->hold);
    for (size_t i = 0; i < h->nowners; i++)
        free(h->owners[i]);
    free(h->owners);
    pthread_mutex_destroy(&h->io);
    free(h->policy);
    free(h);
}

/* Drops a reference (pool_lock held); returns the helper when it must be freed. */
static struct fs_helper *unref_locked(struct fs_helper *h)
{
    return --h->refs == 0 ? h : NULL;
}

/* Unlinks and kills h (pool_lock held). */
static struct fs_helper *retire_locked(struct fs_helper *h)
{
    if (h->retired) return NULL;
    h->retired = true;
    kill(h->pid, SIGKILL);
    if (h->transient) return NULL; /* not in the pool: the call's reference frees it */
    for (struct fs_helper **pp = &pool; *pp; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    return unref_locked(h);
}

/* What went wrong starting a helper, in the words a client should read: a host
 * that cannot sandbox is not the same as one that ran out of something. */
static int start_failed(int err, char *why, size_t n)
{
    if (err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EAGAIN || err == -ENOSPC) {
        snprintf(why, n, "cannot start the filesystem sandbox helper: %s", strerror(-err));
        return FS_HELPER_CALL_NO_RESOURCES;
    }
    snprintf(why, n, "filesystem sandbox cannot be enforced on this executor%s",
             sandbox_host_refusal());
    return FS_HELPER_CALL_UNENFORCEABLE;
}

int fs_sandbox_decode(json_t *sandbox, bool reads, bool writes, struct fs_sandbox **out,
                      struct sandbox_error *se)
{
    *out = NULL;
    struct sandbox_policy pol;
    if (sandbox_policy_parse(sandbox, NULL, &pol, se) < 0) return -EINVAL;
    if (!sandbox_policy_needs_fs(&pol, reads, writes)) {
        sandbox_policy_free(&pol);
        return 0;
    }
    struct fs_sandbox *sb = xcalloc(1, sizeof *sb);
    sb->key = json_dumps(sandbox, JSON_COMPACT | JSON_SORT_KEYS);
    sb->pol = pol;
    *out = sb;
    return 0;
}

void fs_sandbox_free(struct fs_sandbox *sb)
{
    if (!sb) return;
    free(sb->key);
    sandbox_policy_free(&sb->pol);
    free(sb);
}

/* Starts a helper confined to sb. Returns NULL with *rc set (and why filled). */
static struct fs_helper *helper_start(const struct fs_sandbox *sb, int *rc, char *why, size_t whyn)
{
    if (sb->pol.refusal) {
        snprintf(why, whyn, "%s", sb->pol.refusal);
        *rc = FS_HELPER_CALL_REFUSED;
        return NULL;
    }
    const struct sandbox_policy *pol = &sb->pol;
    if (sandbox_policy_check(pol) < 0) {
        *rc = start_failed(-EOPNOTSUPP, why, whyn);
        return NULL;
    }
    int sv[2] = {-1, -1}, devnull = -1;
    struct fs_helper *h = NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
        (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
        *rc = start_failed(-errno, why, whyn);
        goto out;
    }
    int herr; /* never set: no cap asked for, since the helper never forks */
    struct sandbox_hold *hold = sandbox_hold_acquire(pol, 0, 0, &herr);
    char *argv[] = {(char *)"exec-sandbox-helper", NULL};
    char *envp[] = {NULL};
    int stdio[3] = {devnull, devnull, STDERR_FILENO};
    struct spawn_request rq = {.argv = argv,
                               .envp = envp,
                               .cwd = "/",
                               .serve = true,
                               .stdio = stdio,
                               .sandbox = pol,
                               .pid_inherit = sandbox_pid_namespace_inherit,
                               .extra_fds = &sv[1],
                               .n_extra_fds = 1,
                               .proxy_fd = -1,
                               .cgroup_fds = {-1, -1}};
    struct spawn_result sr;
    int sberr = 0;
    int err = spawn_child(&rq, &sr, &sberr);
    if (err < 0) {
        sandbox_hold_release(hold);
        if (err == SPAWN_ERR_SANDBOX)
            log_warn("sandbox helper: the sandbox could not be set up: %s", strerror(sberr));
        *rc = start_failed(err == SPAWN_ERR_SANDBOX ? -sberr : err, why, whyn);
        goto out;
    }
    h = xcalloc(1, sizeof *h);
    h->pidfd = sr.pidfd; /* watched for its death; reaped with waitpid when retired */
    h->policy = xstrdup(sb->key);
    h->pid = sr.pid;
    h->fd = sv[0];
    sv[0] = -1;
    h->refs = 1;
    h->hold = hold;
    pthread_mutex_init(&h->io, NULL);
    struct buf ans;
    buf_init(&ans);
    *rc = fs_helper_frame_recv(h->fd, &ans, NULL);
    bool ok = !*rc && ans.len == 2 && memcmp(ans.data, "ok", 2) == 0;
    buf_free(&ans);
    if (!ok) {
        log_warn("sandbox helper did not start (%d)", *rc);
        helper_destroy(h);
        h = NULL;
        *rc = start_failed(-EIO, why, whyn);
    }
out:
    if (sv[0] >= 0) close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    if (devnull >= 0) close(devnull);
    return h;
}

static bool owner_dead_locked(const char *owner)
{
    for (int i = 0; i < DEAD_OWNERS; i++)
        if (dead_owners[i][0] && !strcmp(dead_owners[i], owner)) return true;
    return false;
}

static void add_owner_locked(struct fs_helper *h, const char *owner)
{
    for (size_t i = 0; i < h->nowners; i++)
        if (!strcmp(h->owners[i], owner)) return;
    h->owners = xrealloc(h->owners, (h->nowners + 1) * sizeof *h->owners);
    h->owners[h->nowners++] = xstrdup(owner);
}

/* Finds or starts the helper, returning it with a reference held. */
static struct fs_helper *helper_get(const char *owner, const struct fs_sandbox *sb, int *rc,
                                    char *why, size_t whyn)
{
    const char *policy = sb->key;
    pthread_mutex_lock(&pool_lock);
    if (owner_dead_locked(owner)) {
        pthread_mutex_unlock(&pool_lock);
        *rc = FS_HELPER_CALL_CLOSED;
        return NULL;
    }
    int total = 0, same = 0;
    struct fs_helper *lru = NULL, *idle = NULL, *busy = NULL;
    for (struct fs_helper *h = pool; h; h = h->next) {
        total++;
        if (!strcmp(h->policy, policy)) {
            same++;
            if (h->refs == 1 && !idle)
                idle = h; /* only the pool holds it */
            else if (!busy || h->refs < busy->refs)
                busy = h;
        } else if (h->refs == 1 && (!lru || h->used < lru->used)) {
            lru = h;
        }
    }
    /* Reuse an idle helper; when all are busy, queue on the least loaded one unless
     * the key may have one more (concurrent requests then run in parallel). */
    struct fs_helper *pick = idle ? idle : same >= HELPERS_PER_POLICY ? busy : NULL;
    if (pick) {
        pick->refs++;
        pick->used = ++pool_clock;
        add_owner_locked(pick, owner);
        pthread_mutex_unlock(&pool_lock);
        return pick;
    }
    /* Bound the helpers the server keeps: evict the least recently used idle one. */
    struct fs_helper *dead = total >= HELPERS_MAX && lru ? retire_locked(lru) : NULL;
    pthread_mutex_unlock(&pool_lock);
    if (dead) helper_destroy(dead);

    /* Started outside the lock: a slow start must not stall other sessions. */
    struct fs_helper *h = helper_start(sb, rc, why, whyn);
    if (!h) return NULL;
    pthread_mutex_lock(&pool_lock);
    if (owner_dead_locked(owner)) {
        pthread_mutex_unlock(&pool_lock);
        helper_destroy(h);
        *rc = FS_HELPER_CALL_CLOSED;
        return NULL;
    }
    add_owner_locked(h, owner);
    h->used = ++pool_clock;
    /* Other threads may have started helpers for the same key meanwhile: this one
     * serves this call, and joins the pool only while the key is below its bound;
     * otherwise it is retired and dies when the call drops it. */
    same = 0;
    for (struct fs_helper *o = pool; o; o = o->next)
        if (!strcmp(o->policy, policy)) same++;
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

/* Whether a helper died while it sat idle: its socket is readable (EOF) or hung up
 * before we asked anything, or its init has exited. The socket alone is not enough
 * where the init's child serves (no namespaces, or deny entries made later: the
 * broker): that child holds the socket for a moment after its init was killed, and a
 * request sent then died with it ("exited during the request"). */
static bool helper_gone(const struct fs_helper *h)
{
    struct pollfd p[2] = {{h->fd, POLLIN, 0}, {h->pidfd, POLLIN, 0}};
    return poll(p, h->pidfd >= 0 ? 2 : 1, 0) > 0 &&
           ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) || (p[1].revents & POLLIN));
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drops the call's reference; retires h first when asked. */
static void helper_put(struct fs_helper *h, bool retire)
{
    struct fs_helper *dead = NULL;
    pthread_mutex_lock(&pool_lock);
    h->idle_since = mono_ms();
    if (retire) dead = retire_locked(h);
    struct fs_helper *last = unref_locked(h);
    pthread_mutex_unlock(&pool_lock);
    if (dead && dead != last) helper_destroy(dead);
    if (last) helper_destroy(last);
}

int fs_helper_pool_call(const char *owner, const struct fs_sandbox *sb, const void *req,
                        size_t req_len, struct buf *reply, int *fd_out, char *why, size_t whyn)
{
    *fd_out = -1;
    why[0] = 0;
    for (int attempt = 0;; attempt++) {
        int rc = 0;
        struct fs_helper *h = helper_get(owner, sb, &rc, why, whyn);
        if (!h) {
            if (rc != FS_HELPER_CALL_CLOSED) log_warn("sandbox helper unavailable: %s", why);
            return rc;
        }
        pthread_mutex_lock(&h->io);
        if (!h->retired && helper_gone(h)) {
            /* Died between requests (killed, OOM): nothing of this request ran yet,
             * so a fresh helper may take it. */
            pthread_mutex_unlock(&h->io);
            helper_put(h, true);
            if (attempt == 0) continue;
            snprintf(why, whyn, "sandbox helper exited before the request");
            return FS_HELPER_CALL_DIED;
        }
        rc = h->retired ? -EPIPE : fs_helper_frame_send(h->fd, req, req_len, -1);
        if (!rc) rc = fs_helper_frame_recv(h->fd, reply, fd_out);
        pthread_mutex_unlock(&h->io);
        /* A broken exchange leaves the socket unusable. */
        helper_put(h, rc != 0);
        return rc ? FS_HELPER_CALL_DIED : 0;
    }
}

void fs_helper_pool_release_owner(const char *owner)
{
    struct fs_helper *dead[HELPERS_MAX + 8];
    int nd = 0;
    pthread_mutex_lock(&pool_lock);
    snprintf(dead_owners[dead_next], sizeof dead_owners[0], "%s", owner);
    dead_next = (dead_next + 1) % DEAD_OWNERS;
    struct fs_helper *h = pool;
    while (h) {
        struct fs_helper *next = h->next;
        for (size_t i = 0; i < h->nowners; i++) {
            if (strcmp(h->owners[i], owner)) continue;
            free(h->owners[i]);
            h->owners[i] = h->owners[--h->nowners];
            break;
        }
        if (h->nowners == 0) {
            struct fs_helper *d = retire_locked(h);
            if (d && nd < (int)(sizeof dead / sizeof dead[0])) dead[nd++] = d;
        }
        h = next;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nd; i++)
        helper_destroy(dead[i]);
}

int fs_helper_pool_pid(const char *owner, const char *policy_json)
{
    (void)owner;
    int pid = -1;
    pthread_mutex_lock(&pool_lock);
    for (struct fs_helper *h = pool; h; h = h->next)
        if (!strcmp(h->policy, policy_json)) pid = h->pid;
    pthread_mutex_unlock(&pool_lock);
    return pid;
}

int fs_helper_pool_sweep(int idle_ms)
{
    struct fs_helper *dead[HELPERS_MAX + 8];
    int nd = 0, left = 0;
    long long now = mono_ms();
    pthread_mutex_lock(&pool_lock);
    struct fs_helper *h = pool;
    while (h) {
        struct fs_helper *next = h->next;
        if (h->refs == 1 && now - h->idle_since >= idle_ms) {
            struct fs_helper *d = retire_locked(h);
            if (d && nd < (int)(sizeof dead / sizeof dead[0])) dead[nd++] = d;
        } else {
            left++;
        }
        h = next;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nd; i++)
        helper_destroy(dead[i]);
    return left;
}

int fs_helper_pool_count(void)
{
    int n = 0;
    pthread_mutex_lock(&pool_lock);
    for (struct fs_helper *h = pool; h; h = h->next)
        n++;
    pthread_mutex_unlock(&pool_lock);
    return n;
}
