/* fs_watch: the one-shot watches of `fs/watchMissing`, for paths that do not exist
 * yet (the method's params and replies are fs_watch_rpc.c's).
 *
 * codex asks for it when environment/info advertises `fsWatchMissing`: after
 * looking for a project's .git, .agents/skills and AGENTS files through fs methods, it
 * registers the ones that were missing (and optionally one that was present) and
 * re-scans when told `fs/missingChanged {watchId}` (PROTOCOL.md §6.14, behaviour
 * settled against the reference):
 *   - a watch is armed for the `missing` paths and the `present` one; not when there
 *     is nothing to watch, when a `missing` path already exists or `present` does not
 *     (the caller's view is already stale), or when the watchId was used before in
 *     this session;
 *   - it fires once (the owner of the table is told), then the watch is over. It fires when a
 * missing path, or any directory on the way to it, comes into existence (so a deep path fires as
 * soon as its first missing ancestor appears), or when `present` goes away.
 *
 * Each armed watch holds inotify watches (path_watch.h, shared with capability
 * discovery) on the deepest existing ancestor of every missing path, for the next name
 * on the way, and on the parent of `present`, for its name; such an event, or one of
 * those directories going away, triggers a re-check with stat(). Watches belong to the session
 * (they survive a reconnect; a change while detached is not replayed). Bounded: at most
 * FS_WATCH_MAX_PATHS paths a watch (the caller checks) and FS_WATCH_MAX_ACTIVE armed
 * watches a table.
 *
 * The stat() calls run on the loop thread: a handful of local lookups per event,
 * the same kind of cost as the kernel's own path walk, never file contents. */
#include "fs/fs_watch.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/path_watch.h"
#include "util/mem.h"

#define FS_WATCH_MAX_IDS 4096 /* remembered used ids, oldest forgotten first */

struct fs_watch {
    uint64_t id;
    struct fs_watch_table *table;
    size_t nmissing;
    char **missing;
    size_t *base;  /* length of the deepest existing ancestor of missing[i] */
    char *present; /* or NULL */
    struct path_watch_owner owner;
    struct fs_watch *next;
};

struct fs_watch_table {
    fs_watch_fired_fn fired;
    void *arg;
    struct fs_watch *active;
    size_t nactive;
    uint64_t *used; /* ring of used ids */
    size_t nused, used_head;
};

/* The inotify instance of every session's watches (path_watch.h), made with the first
 * table; NULL when the kernel gives none: watches are then armed but see nothing. */
static struct path_watch *watches;

static bool path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void watch_free(struct fs_watch *w)
{
    path_watch_drop(watches, &w->owner);
    for (size_t i = 0; i < w->nmissing; i++)
        free(w->missing[i]);
    free(w->missing);
    free(w->base);
    free(w->present);
    free(w);
}

static void unlink_active(struct fs_watch *w)
{
    struct fs_watch_table *t = w->table;
    for (struct fs_watch **pp = &t->active; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            t->nactive--;
            return;
        }
    }
}

/* (Re)computes the baseline and the watched directories. A directory that cannot be
 * watched (inotify limit, permissions) is left out: the watch still fires on the
 * events it can see. */
static void arm(struct fs_watch *w)
{
    path_watch_drop(watches, &w->owner);
    for (size_t i = 0; i < w->nmissing; i++)
        (void)path_watch_missing(watches, &w->owner, w->missing[i], SIZE_MAX, &w->base[i]);
    if (w->present) {
        const char *slash = strrchr(w->present, '/');
        size_t n = slash == w->present ? 1 : (size_t)(slash - w->present);
        char *dir = xstrndup(w->present, n);
        (void)path_watch_dir(watches, &w->owner, dir, slash + 1, SIZE_MAX);
        free(dir);
    }
}

/* path_watch_owner.changed: something on the way to a path changed; look again. */
static void on_changed(struct path_watch_owner *o)
{
    struct fs_watch *w = (struct fs_watch *)((char *)o - offsetof(struct fs_watch, owner));
    bool fired = w->present && !path_exists(w->present);
    bool moved_up = false;
    for (size_t i = 0; i < w->nmissing && !fired; i++) {
        size_t now = path_watch_existing_prefix(w->missing[i]);
        if (now > w->base[i])
            fired = true;
        else if (now < w->base[i])
            moved_up = true;
    }
    if (fired) {
        struct fs_watch_table *t = w->table;
        uint64_t id = w->id;
        unlink_active(w);
        watch_free(w);
        t->fired(t->arg, id);
    } else if (moved_up) {
        arm(w); /* an ancestor went away: watch the one that is left */
    }
}

static bool id_used(struct fs_watch_table *t, uint64_t id)
{
    for (size_t i = 0; i < t->nused; i++)
        if (t->used[i] == id) return true;
    return false;
}

static void remember_id(struct fs_watch_table *t, uint64_t id)
{
    if (!t->used) t->used = xcalloc(FS_WATCH_MAX_IDS, sizeof *t->used);
    if (t->nused < FS_WATCH_MAX_IDS) {
        t->used[t->nused++] = id;
    } else {
        t->used[t->used_head] = id;
        t->used_head = (t->used_head + 1) % FS_WATCH_MAX_IDS;
    }
}

struct fs_watch_table *fs_watch_table_new(uv_loop_t *loop, fs_watch_fired_fn fired, void *arg)
{
    struct fs_watch_table *t = xcalloc(1, sizeof *t);
    t->fired = fired;
    t->arg = arg;
    if (!watches) watches = path_watch_new(loop);
    return t;
}

void fs_watch_table_destroy(struct fs_watch_table *t)
{
    if (!t) return;
    while (t->active) {
        struct fs_watch *w = t->active;
        t->active = w->next;
        watch_free(w);
    }
    free(t->used);
    free(t);
}

int fs_watch_arm(struct fs_watch_table *t, uint64_t id, char **missing, size_t n, char *present)
{
    struct fs_watch *w = xcalloc(1, sizeof *w);
    w->id = id;
    w->missing = missing;
    w->nmissing = n;
    w->base = xcalloc(n ? n : 1, sizeof *w->base);
    w->present = present;
    bool stale = present && !path_exists(present);
    for (size_t i = 0; i < n && !stale; i++)
        stale = path_exists(missing[i]);
    bool reused = id_used(t, id);
    if (!reused) remember_id(t, id);
    if ((n == 0 && !present) || stale || reused) {
        watch_free(w);
        return 0;
    }
    if (t->nactive >= FS_WATCH_MAX_ACTIVE) {
        watch_free(w);
        return -ENOSPC;
    }
    w->table = t;
    w->owner.changed = on_changed;
    arm(w);
    w->next = t->active;
    t->active = w;
    t->nactive++;
    return 1;
}
