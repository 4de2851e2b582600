/* path_watch: inotify watches on directories, each held for an owner, read on the
 * loop; the one way the server watches "the deepest existing ancestor" of a path
 * that is not there yet (fs/watchMissing in fs_watch.c, the answer cache of
 * capabilities/discoverV2). See path_watch.c. */
#ifndef EXEC_FS_PATH_WATCH_H
#define EXEC_FS_PATH_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct path_watch;

/* What holds watches: embedded in the owner's own object. `changed` is called on the
 * loop thread, at most once per batch of events read, when something it watches
 * changed (or the kernel's event queue overflowed); it may drop and add watches and
 * free its owner (after path_watch_drop), or another owner. */
struct path_watch_owner {
    void (*changed)(struct path_watch_owner *o);
    size_t nwatches; /* path_watch's: how many watches it holds */
    bool pending;    /* path_watch's: changed, its callback not made yet */
};

/* One inotify instance read on the loop (its poll handle does not keep the loop
 * alive), or NULL when the kernel gives none (limits): then nothing can be watched. */
struct path_watch *path_watch_new(uv_loop_t *loop);

/* Ends the instance and every watch in it (loop thread, no thread adding). Owners
 * still holding watches must not be used with it again. */
void path_watch_free(struct path_watch *pw);

/* Watches dir for o: every change of its entries when name is NULL, else only of the
 * entry `name`; the directory itself going away or moving always counts. Safe from
 * any thread. 0; -ENOENT (or another errno) when dir cannot be watched, because it is
 * gone or not searchable; -ENOSPC when the instance holds `max` watches already or the
 * kernel's limit is reached (nothing added). pw NULL: -ENOSYS. */
int path_watch_dir(struct path_watch *pw, struct path_watch_owner *o, const char *dir,
                   const char *name, size_t max);

/* Watches path for o as seen from its deepest existing ancestor: path itself (every
 * change) when it exists, else that ancestor for the next name on the way, so only the
 * step that brings path closer to existing counts (that ancestor going away counts
 * too). path is absolute and normalised. *prefix (when not NULL) gets the length of
 * the part that existed, as path_watch_existing_prefix says: the owner compares it with a
 * later look to tell which way things moved. Returns as path_watch_dir. */
int path_watch_missing(struct path_watch *pw, struct path_watch_owner *o, const char *path,
                       size_t max, size_t *prefix);

/* Ends every watch of o (loop thread, or any thread when no callback can be running
 * for o). */
void path_watch_drop(struct path_watch *pw, struct path_watch_owner *o);

/* How many watches the instance holds (for budgets). */
size_t path_watch_count(struct path_watch *pw);

/* Length of the longest prefix of path (absolute, normalised) that exists: the path
 * itself, or an ancestor ("/" always exists: 1). */
size_t path_watch_existing_prefix(const char *path);

#endif
