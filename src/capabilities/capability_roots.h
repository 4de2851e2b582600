/* capability_roots: `capabilityRoots/discoverV1`, executor-side discovery of the
 * plugin and skill manifests below caller-selected roots (PROTOCOL.md section 8.2).
 *
 * The method handler lives in capability_roots.c; the per-root scan
 * (capabilities/caproots_scan.h) is an fs operation (OP_DISCOVER, fs_work.h) so a root that
 * carries a sandbox is scanned inside the session's sandbox helper by the very same
 * code. */
#ifndef EXEC_CAPABILITIES_CAPABILITY_ROOTS_H
#define EXEC_CAPABILITIES_CAPABILITY_ROOTS_H

#include "rpc/rpc.h"

extern const struct rpc_method capability_roots_methods[];

#endif
