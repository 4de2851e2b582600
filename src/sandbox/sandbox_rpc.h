/* sandbox_rpc: how the sandbox's errors reach a JSON-RPC client. The policy code
 * reports kinds (policy.h); process/start and the fs methods map them here, in
 * one place, to the codes the reference uses. */
#ifndef EXEC_SANDBOX_SANDBOX_RPC_H
#define EXEC_SANDBOX_SANDBOX_RPC_H

#include "sandbox/policy.h"

/* The JSON-RPC error code for e. */
int sandbox_error_code(const struct sandbox_error *e);

#endif
