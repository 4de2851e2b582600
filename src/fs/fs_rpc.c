/* fs_rpc: the fs room as the server registers it, in one record (struct rpc_domain):
 * its method tables (fs_methods.c, fs_watch_rpc.c, fs_mode_methods.c,
 * fs_rename_methods.c), the payload members kept out of params and the capabilities
 * it announces. */
#include <stddef.h>

#include "fs/fs_methods.h"
#include "fs/fs_watch_rpc.h"
#include "rpc/rpc.h"

static const struct rpc_method *const fs_tables[] = {
    fs_methods, fs_watch_methods, fs_mode_methods, fs_rename_methods, NULL,
};

/* fsWatchMissing: fs/watchMissing (fs_watch_rpc.c). sandboxedFileStreaming: fs/open
 * with a `sandbox` streams through the sandbox helper; fileWriteStreaming: fs/open
 * with `write` and fs/writeBlock. Ours (PROTOCOL.md §11 (g)): fsPermissions
 * (fs/setPermissions, fs_mode_methods.c) and fsRename (fs_rename_methods.c). */
static const struct rpc_capability fs_capabilities[] = {
    {"fsWatchMissing", true, NULL},     {"sandboxedFileStreaming", true, NULL},
    {"fileWriteStreaming", true, NULL}, {"fsPermissions", true, NULL},
    {"fsRename", true, NULL},           {NULL, false, NULL},
};

const struct rpc_domain fs_domain = {
    .name = "fs",
    .methods = fs_tables,
    .payloads = fs_payloads,
    .capabilities = fs_capabilities,
};
