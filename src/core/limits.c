/* limits: storage and defaults of the server-wide limits (see limits.h). */
#include "core/limits.h"

struct server_limits server_limits = {
    .max_connections = LIMITS_DEFAULT_MAX_CONNECTIONS,
    .max_processes = LIMITS_DEFAULT_MAX_PROCESSES,
    .max_message = LIMITS_DEFAULT_MAX_MESSAGE,
    .max_queued = LIMITS_DEFAULT_MAX_QUEUED,
    .max_detached = LIMITS_DEFAULT_MAX_DETACHED,
    .max_keep_ms = LIMITS_KEEP_FOREVER,
};
