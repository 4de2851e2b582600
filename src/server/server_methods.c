/* server_methods: see server_methods.h. */
#include "server/server_methods.h"

#include "capabilities/capabilities_rpc.h"
#include "fs/fs_methods.h"
#include "fs/fs_watch_rpc.h"
#include "http/http_methods.h"
#include "process/process_rpc.h"
#include "rpc/dispatch.h"
#include "session/env_config.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "tcp/tcp_methods.h"

void server_methods_register(void)
{
    static const struct rpc_method *const tables[] = {
        session_methods,    process_methods,          fs_methods,
        fs_watch_methods,   fs_mode_methods,          http_methods,
        env_config_methods, capability_roots_methods, capability_roots_v2_methods,
        tcp_methods,        fs_rename_methods,
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        rpc_register_methods(tables[i]);
    rpc_register_payloads(fs_payloads);
    /* What the domains keep per session, in the order a session's end frees it. */
    session_register_part(&proc_session_part);
    session_register_part(&fs_session_part);
    /* What environment/info says beside the session's own. */
    session_add_info(sandbox_info);
}
