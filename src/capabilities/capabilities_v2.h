/* capabilities_v2: `capabilities/discoverV2` (capability capabilityDiscoveryV2),
 * the skills and plugins installed on the executor itself (PROTOCOL.md §8.3); see
 * capabilities_v2.c. */
#ifndef EXEC_CAPABILITIES_CAPABILITIES_V2_H
#define EXEC_CAPABILITIES_CAPABILITIES_V2_H

#include <stdbool.h>

#include "rpc/rpc.h"

extern const struct rpc_method capability_roots_v2_methods[];

/* Compares plugin version directory names as the reference does: SemVer 2.0 order
 * (then build metadata) when both parse, bytewise otherwise. */
int caproots_version_cmp(const char *a, const char *b);

/* Whether s is a plugin id segment ([A-Za-z0-9_-]+) / a version directory name
 * ([A-Za-z0-9.+_-]+, not `.` or `..`). */
bool caproots_plugin_segment_ok(const char *s);
bool caproots_version_segment_ok(const char *s);

#endif
