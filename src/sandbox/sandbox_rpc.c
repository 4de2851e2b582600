/* sandbox_rpc: see sandbox_rpc.h. */
#include "sandbox/sandbox_rpc.h"

#include "rpc/rpc.h"

int sandbox_error_code(const struct sandbox_error *e)
{
    return e->kind == SANDBOX_ERR_INVALID ? RPC_INVALID_PARAMS : RPC_INVALID_REQUEST;
}
