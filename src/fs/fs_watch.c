/* fs_watch: `fs/watchMissing`, a one-shot watch for paths that do not exist yet.
 *
 * codex asks for it when environment/info advertises `fsWatchMissing`: after
 * looking for a project's .git, .agents/skills and AGENTS files through fs methods, it
 * registers the ones that were missing (and optionally one that was present) and
 * re-scans when told `fs/missingChanged {watchId}` (PROTOCOL.md §6.14, behaviour
 * settled against the reference):
 *   - `missing`: file: URIs; `present`: one URI or null;
 *   - result `{"watching":true}` when armed; `false` when there is nothing to watch,
 *     when a `missing` path already exists or `present` does not (the caller's view
 *     is already stale), or when the watchId was used before in this session;
 *   - one notification, then the watch is over. It fires when a missing path, or
 *     any directory on the way to it, comes into existence (so a deep path fires
 *     as soon as its first missing ancestor appears), or when `present` goes away.
 *
 * Each armed watch holds inotify watches (path_watch.h, shared with capability
 * discovery) on the deepest existing ancestor of every missing path, for the next name
 * on the way, and on the parent of `present`, for its name; such an event, or one of
 * those directories going away, triggers a re-check with stat(). Watches belong to the session
 * (they survive a reconnect; a change while detached is not replayed). Bounded: at most
 * FS_WATCH_MAX_PATHS paths a watch and FS_WATCH_MAX_ACTIVE armed watches a session.
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
#include "fs/sandbox_helper.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "session/session.h"
#include "transport/conn.h"
#include "util/buf.h"
#include "util/mem.h"

#define FS_WATCH_MAX_PATHS 64
#define FS_WATCH_MAX_ACTIVE 64
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
    struct session *session;
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

static void notify_changed(struct fs_watch *w)
{
    struct conn *c = w->table->session->conn;
    if (!c) return;
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"method\":\"fs/missingChanged\",\"params\":{\"watchId\":");
    buf_put_u64(&b, w->id);
    buf_puts(&b, "}}");
    conn_send(c, &b);
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
        notify_changed(w);
        unlink_active(w);
        watch_free(w);
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

struct fs_watch_table *fs_watch_table_new(struct session *s, uv_loop_t *loop)
{
    struct fs_watch_table *t = xcalloc(1, sizeof *t);
    t->session = s;
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

/* session_part_ops.ended: the session's watches stop, and the warm sandbox helpers
 * only it used (fs_methods.c) are retired. */
static void fs_session_ended(struct session *s)
{
    fs_watch_table_destroy(session_part(s, &fs_session_part));
    session_set_part(s, &fs_session_part, NULL);
    sandbox_helper_release_owner(s->id);
}

const struct session_part_ops fs_session_part = {.ended = fs_session_ended};

static void reply_watching(struct rpc_req *req, bool watching)
{
    rpc_reply_json(req, json_pack("{s:b}", "watching", watching));
}

static void handle_watch_missing(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WatchMissingParams");
    uint64_t id = pdec_u64(&d, "watchId", PDEC_REQUIRED, 0, NULL);
    json_t *missing = pdec_array(&d, "missing", PDEC_REQUIRED);
    const char *present = pdec_string(&d, "present", PDEC_OPTIONAL);
    size_t i;
    json_t *v;
    if (!d.failed) {
        json_array_foreach(missing, i, v)
        {
            if (json_is_string(v)) continue;
            char what[128];
            pdec_describe(v, what, sizeof what);
            pdec_fail(&d, "invalid type: %s, expected a string", what);
            break;
        }
    }
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    size_t n = json_array_size(missing);
    if (n + (present != NULL) > FS_WATCH_MAX_PATHS) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "fs/watchMissing watches at most %d paths",
                        FS_WATCH_MAX_PATHS);
        return;
    }

    struct fs_watch *w = xcalloc(1, sizeof *w);
    w->id = id;
    w->missing = xcalloc(n ? n : 1, sizeof *w->missing);
    w->base = xcalloc(n ? n : 1, sizeof *w->base);
    struct uri_error ue;
    size_t plen;
    json_array_foreach(missing, i, v)
    {
        if (uri_to_path(json_string_value(v), json_string_length(v), false, &w->missing[i], &plen,
                        &ue) < 0) {
            w->nmissing = i;
            watch_free(w);
            rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
            return;
        }
    }
    w->nmissing = n;
    if (present && uri_to_path(present, strlen(present), false, &w->present, &plen, &ue) < 0) {
        watch_free(w);
        rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
        return;
    }

    struct session *s = session_of(req->conn);
    struct fs_watch_table *t = session_part(s, &fs_session_part);
    if (!t) session_set_part(s, &fs_session_part, t = fs_watch_table_new(s, req->loop));
    bool stale = w->present && !path_exists(w->present);
    for (i = 0; i < n && !stale; i++)
        stale = path_exists(w->missing[i]);
    bool reused = id_used(t, id);
    if (!reused) remember_id(t, id);
    if ((n == 0 && !w->present) || stale || reused) {
        watch_free(w);
        reply_watching(req, false);
        return;
    }
    if (t->nactive >= FS_WATCH_MAX_ACTIVE) {
        watch_free(w);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "watch limit reached: this session already has %d active "
                        "fs/watchMissing watches",
                        FS_WATCH_MAX_ACTIVE);
        return;
    }
    w->table = t;
    w->owner.changed = on_changed;
    arm(w);
    w->next = t->active;
    t->active = w;
    t->nactive++;
    reply_watching(req, true);
}

const struct rpc_method fs_watch_methods[] = {
    {"fs/watchMissing", "filesystem", handle_watch_missing},
    {NULL, NULL, NULL},
};
