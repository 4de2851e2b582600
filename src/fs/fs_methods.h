/* fs_methods: the fs JSON-RPC methods (fs_methods.c: files, directories, handles,
 * walks, copies; fs_mode_methods.c: permissions; fs_rename_methods.c: rename). Their tables,
 * registered with rpc. */
#ifndef EXEC_FS_FS_METHODS_H
#define EXEC_FS_FS_METHODS_H

#include "rpc/rpc.h"

extern const struct rpc_method fs_methods[];
extern const struct rpc_method fs_mode_methods[];
extern const struct rpc_method fs_rename_methods[];
/* fs/writeFile dataBase64 and fs/writeBlock chunk: kept as slices of the message. */
extern const struct rpc_payload fs_payloads[];

#endif
