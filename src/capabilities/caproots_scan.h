/* caproots_scan: one capability root scanned for plugin and skill manifests, the part
 * of capabilityRoots/discoverV1 (capabilities/capability_roots.c) and capabilities/discoverV2
 * (capabilities/capabilities_v2.c) that reads the disk. It runs where the root may be read: on
 * a pool thread, or inside the session's sandbox helper as the fs operation
 * OP_DISCOVER (fs/fs_ops.c). */
#ifndef EXEC_CAPABILITIES_CAPROOTS_SCAN_H
#define EXEC_CAPABILITIES_CAPROOTS_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* The reference's bounds (codex-rs exec-server capability discovery). */
#define CAPROOTS_MAX_ROOTS 128
#define CAPROOTS_MAX_DEPTH 6
#define CAPROOTS_MAX_DIRS 2000
#define CAPROOTS_MAX_ENTRIES 20000
#define CAPROOTS_MAX_FILE (1u << 20)
#define CAPROOTS_MAX_BUNDLE (16u << 20)

/* Scans one root (blocking). root is the native path, root_uri the URI the messages
 * name it by. Appends to out one JSON object
 * {"plugin":..,"skills":[..],"namespaceManifests":[..],"warnings":[..],"error":..}:
 * every failure is reported in it (root-local), never as an RPC error. */
void caproots_scan(const char *root, const char *root_uri, struct buf *out);

/* Appends a root's entry that holds only `error`. */
void caproots_put_error(struct buf *out, const char *error);

/* Validates a path declared in a plugin manifest (`"mcpServers": "./x.json"`).
 * Returns 0 and stores the part below the root in *rel (borrowed from decl), or
 * 1 when it does not start with "./", 2 when it is empty or leaves the root. */
int caproots_declared_path(const char *decl, const char **rel);

#endif
