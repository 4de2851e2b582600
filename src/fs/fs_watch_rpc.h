/* fs_watch_rpc: the JSON-RPC face of `fs/watchMissing` (PROTOCOL.md §6.14) and what
 * fs keeps per session; see fs_watch_rpc.c. */
#ifndef EXEC_FS_FS_WATCH_RPC_H
#define EXEC_FS_FS_WATCH_RPC_H

#include "rpc/rpc.h"

struct session_part_ops;

/* What fs keeps per session as a session part (session.h): its watches, and its
 * share of the warm sandbox helpers (fs/fs_helper_pool.h), both ended with it. */
extern const struct session_part_ops fs_session_part;

extern const struct rpc_method fs_watch_methods[];

#endif
