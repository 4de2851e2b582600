/* fs_watch: `fs/watchMissing`, one-shot watches for paths that do not exist yet
 * (PROTOCOL.md §6.14). See fs_watch.c for the semantics. */
#ifndef EXEC_FS_FS_WATCH_H
#define EXEC_FS_FS_WATCH_H

#include <uv.h>

#include "rpc/rpc.h"

struct session;
struct session_part_ops;
struct fs_watch_table;

/* A session's watches; created on its first fs/watchMissing, destroyed with it. */
struct fs_watch_table *fs_watch_table_new(struct session *s, uv_loop_t *loop);
void fs_watch_table_destroy(struct fs_watch_table *t);

/* What fs keeps per session as a session part (session.h): its watches, and its
 * share of the warm sandbox helpers (fs/sandbox_helper.h), both ended with it. */
extern const struct session_part_ops fs_session_part;

extern const struct rpc_method fs_watch_methods[];

#endif
