/* sandbox_rpc: how the sandbox reaches a JSON-RPC client: its errors (the policy code
 * reports kinds, policy.h; process/start and the fs methods map them here, in one
 * place, to the codes the reference uses) and what environment/info says of it. */
#ifndef EXEC_SANDBOX_SANDBOX_RPC_H
#define EXEC_SANDBOX_SANDBOX_RPC_H

#include "sandbox/policy.h"

/* The JSON-RPC error code for e. */
int sandbox_error_code(const struct sandbox_error *e);

/* Ours, in environment/info and initialize: info.sandbox {mode, available,
 * landlockAbi, hostProc, namespacesRefused} (sandbox_host.h) and the capability
 * sandboxModes. A session_info_fn (session.h). */
void sandbox_info(json_t *info, json_t *caps);

#endif
