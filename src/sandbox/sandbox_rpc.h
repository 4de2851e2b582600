/* sandbox_rpc: how the sandbox reaches a JSON-RPC client: its errors (the policy code
 * reports kinds, policy.h; process/start and the fs methods map them here, in one
 * place, to the codes the reference uses) and what environment/info says of it. */
#ifndef EXEC_SANDBOX_SANDBOX_RPC_H
#define EXEC_SANDBOX_SANDBOX_RPC_H

#include "sandbox/policy.h"

/* The JSON-RPC error code for e. */
int sandbox_error_code(const struct sandbox_error *e);

/* The sandbox's record (rpc.h): no methods of its own; its capabilities and, ours,
 * environment/info's `sandbox` {mode, available, landlockAbi, hostProc,
 * namespacesRefused} (sandbox_host.h). */
extern const struct rpc_domain sandbox_domain;

#endif
