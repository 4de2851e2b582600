/* path_watch: inotify watches on directories, each held for an owner, read on the
 * loop (see path_watch.h).
 *
 * Two users watch paths that are not there yet, and both do it the same way: watch
 * the deepest ancestor that exists, and look again when the next name on the way
 * appears or that ancestor goes. fs/watchMissing (fs_watch.c) holds a few such watches
 * per request until one fires; capabilities/discoverV2 keeps its answers valid with a
 * watch on every directory it scanned and on the ancestors of the roots that are
 * missing. This module is that mechanism once: an inotify instance read by one poll
 * handle on the loop, and a table of watches, each a watch descriptor, an optional
 * entry name that alone counts, and the owner to tell.
 *
 * Watches are added from any thread (discoverV2 adds them from the pool threads while
 * they scan, so a change during the scan is seen), under the table's mutex; events
 * are read and owners told on the loop thread, with the mutex released around each
 * callback. The kernel hands out one descriptor per inode and instance (adding it
 * again returns the same one), so a descriptor is removed only when the last watch
 * that uses it is dropped. Every watch uses the same event mask: within an instance a
 * later inotify_add_watch replaces the mask for all. */
#include "fs/path_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/mem.h"

#define PW_MASK                                                                                    \
    (IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |            \
     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

struct pw_rec {
    int wd;
    char *name; /* the entry that counts, or NULL: any */
    struct path_watch_owner *owner;
};

struct path_watch {
    pthread_mutex_t lock;
    int fd;
    uv_poll_t poll;
    struct pw_rec *recs;
    size_t n, cap;
    size_t nowners, npending; /* owners holding watches; of them, told nothing yet */
};

static void on_readable(uv_poll_t *h, int status, int events);

struct path_watch *path_watch_new(uv_loop_t *loop)
{
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return NULL;
    struct path_watch *pw = xcalloc(1, sizeof *pw);
    pthread_mutex_init(&pw->lock, NULL);
    pw->fd = fd;
    uv_poll_init(loop, &pw->poll, fd);
    pw->poll.data = pw;
    uv_poll_start(&pw->poll, UV_READABLE, on_readable);
    /* Idle watching must not keep the loop (and so the server) alive. */
    uv_unref((uv_handle_t *)&pw->poll);
    return pw;
}

static void closed(uv_handle_t *h)
{
    struct path_watch *pw = h->data;
    for (size_t i = 0; i < pw->n; i++)
        free(pw->recs[i].name);
    free(pw->recs);
    close(pw->fd); /* its watches go with it */
    pthread_mutex_destroy(&pw->lock);
    free(pw);
}

void path_watch_free(struct path_watch *pw)
{
    if (pw) uv_close((uv_handle_t *)&pw->poll, closed);
}

size_t path_watch_existing_prefix(const char *path)
{
    size_t len = strlen(path);
    char *tmp = xstrdup(path);
    struct stat st;
    while (len > 1) {
        tmp[len] = '\0';
        if (stat(tmp, &st) == 0) break;
        char *slash = strrchr(tmp, '/');
        len = !slash || slash == tmp ? 1 : (size_t)(slash - tmp);
    }
    free(tmp);
    return len < 1 ? 1 : len;
}

int path_watch_dir(struct path_watch *pw, struct path_watch_owner *o, const char *dir,
                   const char *name, size_t max)
{
    if (!pw) return -ENOSYS;
    pthread_mutex_lock(&pw->lock);
    int rc = 0;
    int wd = pw->n >= max ? -1 : inotify_add_watch(pw->fd, dir, PW_MASK);
    if (pw->n >= max) {
        rc = -ENOSPC;
    } else if (wd < 0) {
        rc = errno == ENOMEM ? -ENOSPC : -errno;
    } else {
        if (pw->n == pw->cap) {
            pw->cap = pw->cap ? pw->cap * 2 : 64;
            pw->recs = xrealloc(pw->recs, pw->cap * sizeof *pw->recs);
        }
        pw->recs[pw->n++] = (struct pw_rec){wd, name ? xstrdup(name) : NULL, o};
        if (o->nwatches++ == 0) {
            pw->nowners++;
            o->pending = false;
        }
    }
    pthread_mutex_unlock(&pw->lock);
    return rc;
}

int path_watch_missing(struct path_watch *pw, struct path_watch_owner *o, const char *path,
                       size_t max, size_t *prefix)
{
    size_t len = path_watch_existing_prefix(path);
    if (prefix) *prefix = len;
    char *dir = xstrndup(path, len);
    int rc;
    if (!path[len]) {
        rc = path_watch_dir(pw, o, dir, NULL, max);
    } else {
        const char *next = path + len + (path[len] == '/');
        char *name = xstrndup(next, strcspn(next, "/"));
        rc = path_watch_dir(pw, o, dir, name, max);
        free(name);
    }
    free(dir);
    return rc;
}

static bool wd_in_use(const struct path_watch *pw, int wd)
{
    for (size_t i = 0; i < pw->n; i++)
        if (pw->recs[i].wd == wd) return true;
    return false;
}

void path_watch_drop(struct path_watch *pw, struct path_watch_owner *o)
{
    if (!pw) return;
    pthread_mutex_lock(&pw->lock);
    if (!o->nwatches) {
        pthread_mutex_unlock(&pw->lock);
        return;
    }
    /* Keep the others' watches in place, gather o's behind them. */
    size_t keep = 0;
    for (size_t i = 0; i < pw->n; i++) {
        if (pw->recs[i].owner == o) continue;
        struct pw_rec r = pw->recs[i];
        pw->recs[i] = pw->recs[keep];
        pw->recs[keep++] = r;
    }
    size_t end = pw->n;
    pw->n = keep;
    for (size_t i = keep; i < end; i++) {
        /* A descriptor another owner still uses stays (o's duplicates: the second
         * removal fails harmlessly). */
        if (!wd_in_use(pw, pw->recs[i].wd)) inotify_rm_watch(pw->fd, pw->recs[i].wd);
        free(pw->recs[i].name);
    }
    o->nwatches = 0;
    pw->nowners--;
    if (o->pending) pw->npending--;
    o->pending = false;
    pthread_mutex_unlock(&pw->lock);
}

size_t path_watch_count(struct path_watch *pw)
{
    if (!pw) return 0;
    pthread_mutex_lock(&pw->lock);
    size_t n = pw->n;
    pthread_mutex_unlock(&pw->lock);
    return n;
}

static void mark(struct path_watch *pw, struct path_watch_owner *o)
{
    if (o->pending) return;
    o->pending = true;
    pw->npending++;
}

/* Marks the owners an event concerns (under the lock). */
static void mark_event(struct path_watch *pw, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        for (size_t i = 0; i < pw->n; i++)
            mark(pw, pw->recs[i].owner);
        return;
    }
    if (ev->mask & IN_IGNORED) return; /* a removal of ours, or the directory went (seen) */
    bool self = ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF);
    for (size_t i = 0; i < pw->n && pw->npending < pw->nowners; i++) {
        const struct pw_rec *r = &pw->recs[i];
        if (r->wd != ev->wd || r->owner->pending) continue;
        if (!r->name || self || (ev->len && strcmp(r->name, ev->name) == 0)) mark(pw, r->owner);
    }
}

/* The next owner to tell, unmarked, or NULL (under the lock). */
static struct path_watch_owner *next_pending(struct path_watch *pw)
{
    for (size_t i = 0; i < pw->n && pw->npending; i++) {
        struct path_watch_owner *o = pw->recs[i].owner;
        if (!o->pending) continue;
        o->pending = false;
        pw->npending--;
        return o;
    }
    return NULL;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    struct path_watch *pw = h->data;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(pw->fd, buf, sizeof buf);
        if (n <= 0) break;
        pthread_mutex_lock(&pw->lock);
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            mark_event(pw, ev);
            p += sizeof *ev + ev->len;
        }
        pthread_mutex_unlock(&pw->lock);
    }
    /* An owner is found through its watches, so one freed by an earlier callback
     * (and dropped first) is never touched. */
    for (;;) {
        pthread_mutex_lock(&pw->lock);
        struct path_watch_owner *o = next_pending(pw);
        pthread_mutex_unlock(&pw->lock);
        if (!o) break;
        o->changed(o);
    }
}
