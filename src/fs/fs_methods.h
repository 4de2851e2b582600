/* fs_methods: the fs JSON-RPC methods (fs_methods.c: files, directories, handles,
 * walks, copies; fs_mode_methods.c: permissions; fs_rename_methods.c: rename). Their tables,
 * registered with rpc. */
#ifndef EXEC_FS_FS_METHODS_H
#define EXEC_FS_FS_METHODS_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/fs_work.h"
#include "rpc/rpc.h"

extern const struct rpc_method fs_methods[];
extern const struct rpc_method fs_mode_methods[];
extern const struct rpc_method fs_rename_methods[];
/* A file: URI param (uri, len bytes) as a native path in *out (caller frees), or false
 * after replying to req with the URI's error. */
bool fs_param_path(struct rpc_req *req, const char *uri, size_t len, char **out, size_t *out_len);
/* The id of req's session ("" for none) into out: what the audit records carry, kept by
 * the work that outlives the request's connection. */
void fs_session_id(const struct rpc_req *req, char out[FS_SESSION_ID_LEN]);
/* fs/writeFile dataBase64 and fs/writeBlock chunk: kept as slices of the message. */
extern const struct rpc_payload fs_payloads[];

/* The fs domain's record (rpc.h, fs_rpc.c): the tables above and fs_watch_methods,
 * fs_payloads and the fs capabilities. */
extern const struct rpc_domain fs_domain;

#endif
