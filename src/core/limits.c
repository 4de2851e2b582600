/* limits: storage and defaults of the server-wide limits (see limits.h). */
#include "core/limits.h"

struct server_limits server_limits = {
    .max_connections = LIMITS_DEFAULT_MAX_CONNECTIONS,
    .max_connections_per_peer = LIMITS_DEFAULT_MAX_CONNECTIONS_PER_PEER,
    .max_processes = LIMITS_DEFAULT_MAX_PROCESSES,
    .max_total_processes = LIMITS_DEFAULT_MAX_TOTAL_PROCESSES,
    .max_read_buffer = LIMITS_DEFAULT_MAX_READ_BUFFER,
    .max_message = LIMITS_DEFAULT_MAX_MESSAGE,
    .max_queued = LIMITS_DEFAULT_MAX_QUEUED,
    .max_inflight = LIMITS_DEFAULT_MAX_INFLIGHT,
    .max_detached = LIMITS_DEFAULT_MAX_DETACHED,
    .sandbox_pid_namespace = LIMITS_PID_NS_ISOLATE,
    .max_keep_ms = LIMITS_KEEP_FOREVER,
    .sandbox_max_processes = LIMITS_DEFAULT_SANDBOX_MAX_PROCESSES,
};

enum limits_pid_namespace limits_sandbox_pid_namespace(void)
{
    return server_limits.sandbox_pid_namespace == LIMITS_PID_NS_INHERIT ? LIMITS_PID_NS_INHERIT
                                                                        : LIMITS_PID_NS_ISOLATE;
}

bool limits_proxy_private_ips_via_upstream(void)
{
    return server_limits.proxy_private_ips_via_upstream;
}

bool limits_sandbox_transparent_tcp(void)
{
    return server_limits.sandbox_transparent_tcp;
}

const struct limits_endpoint *limits_tcp_upstream_proxy(void)
{
    return server_limits.tcp_upstream_proxy.host[0] ? &server_limits.tcp_upstream_proxy : NULL;
}
