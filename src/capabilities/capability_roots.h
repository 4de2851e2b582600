/* capability_roots: what `capabilityRoots/discoverV1` answers (executor-side discovery
 * of the plugin and skill manifests below caller-selected roots, PROTOCOL.md section
 * 8.2), and the scan of one root here or in the session's sandbox helper, which
 * discoverV2 shares. The method's params are decoded and its reply made in
 * capabilities_rpc.c; the per-root scan (capabilities/caproots_scan.h) is an fs
 * operation (OP_DISCOVER, fs_work.h) so a root that carries a sandbox is scanned inside
 * the session's sandbox helper by the very same code. */
#ifndef EXEC_CAPABILITIES_CAPABILITY_ROOTS_H
#define EXEC_CAPABILITIES_CAPABILITY_ROOTS_H

#include <stddef.h>

#include "util/buf.h"

struct fs_sandbox;

/* One root of a request, decoded. */
struct caproots_root {
    const char *id; /* borrowed from the request, which outlives the scan */
    size_t id_len;
    const char *uri; /* as sent (borrowed) or uri_own: echoed back, named in messages */
    size_t uri_len;
    char *path;            /* native, owned */
    char *uri_own;         /* the normalized echo when the sent URI needed it, or NULL */
    struct fs_sandbox *sb; /* the sandbox to enforce (owned), or NULL */
};

/* Scans one root (blocking) into out, as caproots_scan writes it: here, or inside the
 * session `owner`'s sandbox helper for sb when it is set. 0; -1 when the helper
 * could not run it, with its words in err. */
int caproots_scan_root(const char *path, const char *uri, struct fs_sandbox *sb, const char *owner,
                       struct buf *out, char *err, size_t errlen);

/* Scans every root (blocking) and appends the result object {"roots":[...]}. */
void caproots_discover(const struct caproots_root *roots, size_t n, const char *owner,
                       struct buf *out);

void caproots_root_free(struct caproots_root *r);

#endif
