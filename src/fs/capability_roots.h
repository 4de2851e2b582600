/* capability_roots: `capabilityRoots/discoverV1`, executor-side discovery of the
 * plugin and skill manifests below caller-selected roots (PROTOCOL.md section 8.2).
 *
 * The method handler lives in capability_roots.c; the per-root scan is an fs
 * operation (OP_DISCOVER, fs_work.h) so a root that carries a sandbox is scanned
 * inside the session's sandbox helper by the very same code. */
#ifndef EXEC_FS_CAPABILITY_ROOTS_H
#define EXEC_FS_CAPABILITY_ROOTS_H

#include <stdbool.h>
#include <stddef.h>

#include "rpc/rpc.h"
#include "util/buf.h"

/* The reference's bounds (codex-rs exec-server capability discovery). */
#define CAPROOTS_MAX_ROOTS 128
#define CAPROOTS_MAX_DEPTH 6
#define CAPROOTS_MAX_DIRS 2000
#define CAPROOTS_MAX_ENTRIES 20000
#define CAPROOTS_MAX_FILE (1u << 20)
#define CAPROOTS_MAX_BUNDLE (16u << 20)

extern const struct rpc_method capability_roots_methods[];

/* Scans one root (blocking; a pool thread or the sandbox helper). root is the native
 * path, root_uri the URI the messages name it by. Appends to out one JSON object
 * {"plugin":..,"skills":[..],"namespaceManifests":[..],"warnings":[..],"error":..}:
 * every failure is reported in it (root-local), never as an RPC error. */
void caproots_scan(const char *root, const char *root_uri, struct buf *out);


/* Validates a path declared in a plugin manifest (`"mcpServers": "./x.json"`).
 * Returns 0 and stores the part below the root in *rel (borrowed from decl), or
 * 1 when it does not start with "./", 2 when it is empty or leaves the root. */
int caproots_declared_path(const char *decl, const char **rel);

#endif
