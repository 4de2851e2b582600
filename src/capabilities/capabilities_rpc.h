/* capabilities_rpc: the JSON-RPC methods of capability discovery,
 * `capabilityRoots/discoverV1` and `capabilities/discoverV2` (see capabilities_rpc.c). */
#ifndef EXEC_CAPABILITIES_CAPABILITIES_RPC_H
#define EXEC_CAPABILITIES_CAPABILITIES_RPC_H

#include "rpc/rpc.h"

extern const struct rpc_method capability_roots_methods[];
extern const struct rpc_method capability_roots_v2_methods[];

/* Capability discovery's record (rpc.h): both tables and their capabilities. */
extern const struct rpc_domain capability_roots_domain;

#endif
