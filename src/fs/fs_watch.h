/* fs_watch: the one-shot watches of `fs/watchMissing` for paths that do not exist yet
 * (PROTOCOL.md §6.14), a table of them per session. See fs_watch.c for the semantics;
 * the method is fs_watch_rpc.c's. */
#ifndef EXEC_FS_FS_WATCH_H
#define EXEC_FS_FS_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define FS_WATCH_MAX_PATHS 64  /* paths a watch (missing and present) */
#define FS_WATCH_MAX_ACTIVE 64 /* armed watches a table */

struct fs_watch_table;

/* Called on the loop thread when watch `id` fires; the watch is over by then. */
typedef void (*fs_watch_fired_fn)(void *arg, uint64_t id);

struct fs_watch_table *fs_watch_table_new(uv_loop_t *loop, fs_watch_fired_fn fired, void *arg);
void fs_watch_table_destroy(struct fs_watch_table *t);

/* Arms watch id for the native paths missing[0..n) and present (or NULL); takes them
 * (the array and its strings) whatever the outcome. 1 when armed; 0 when not: nothing
 * to watch, the caller's view is stale (a missing path exists, present does not), or
 * id was used in this table before (it is remembered either way); -ENOSPC when the
 * table holds FS_WATCH_MAX_ACTIVE armed watches already. */
int fs_watch_arm(struct fs_watch_table *t, uint64_t id, char **missing, size_t n, char *present);

#endif
