/* sandbox_rpc: see sandbox_rpc.h. */
#include "sandbox/sandbox_rpc.h"

#include "rpc/rpc.h"
#include "sandbox/sandbox_host.h"

int sandbox_error_code(const struct sandbox_error *e)
{
    return e->kind == SANDBOX_ERR_INVALID ? RPC_INVALID_PARAMS : RPC_INVALID_REQUEST;
}

static void sandbox_info(json_t *info)
{
    const struct sandbox_host_caps *h = &sandbox_host;
    json_t *modes = json_array();
    if (h->filter && h->namespaces) json_array_append_new(modes, json_string("namespaces"));
    if (h->filter && h->landlock_abi >= 1) json_array_append_new(modes, json_string("landlock"));
    json_object_set_new(info, "sandbox",
                        json_pack("{s:s,s:o,s:i,s:b,s:s}", "mode",
                                  sandbox_mode_name(sandbox_host_mode_for(false)), "available",
                                  modes, "landlockAbi", h->landlock_abi, "hostProc",
                                  h->host_proc && h->namespaces, "namespacesRefused", h->why_not));
}

/* windowsMxc: not Windows. linuxRootWritePreservesDevices and
 * linuxApprovedRootWritePreservesRestrictions: with / writable the sandbox still gives
 * the standard devices (its private /dev), and an approved root write keeps them and
 * the denied carve-outs. Ours (PROTOCOL.md §11 (j)): sandboxModes, environment/info's
 * `sandbox` and process/start's sandboxMode. */
static const struct rpc_capability sandbox_capabilities[] = {
    {"windowsMxc", false, NULL},
    {"linuxRootWritePreservesDevices", true, NULL},
    {"linuxApprovedRootWritePreservesRestrictions", true, NULL},
    {"sandboxModes", true, NULL},
    {NULL, false, NULL},
};

const struct rpc_domain sandbox_domain = {
    .name = "sandbox",
    .capabilities = sandbox_capabilities,
    .info = sandbox_info,
};
