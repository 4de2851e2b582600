/* capabilities_rpc: the JSON-RPC methods of capability discovery,
 * `capabilityRoots/discoverV1` and `capabilities/discoverV2` (see capabilities_rpc.c). */
#ifndef EXEC_CAPABILITIES_CAPABILITIES_RPC_H
#define EXEC_CAPABILITIES_CAPABILITIES_RPC_H

#include "rpc/rpc.h"

extern const struct rpc_method capability_roots_methods[];
extern const struct rpc_method capability_roots_v2_methods[];

#endif
