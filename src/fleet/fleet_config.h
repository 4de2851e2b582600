/* fleet_config: the configuration of `exec-server registry` and its commands, filled
 * from the command line by fleet_options (its option table is the one place each
 * option is declared) and resolved by fleet_command. One instance, fleet_cfg, read by
 * every fleet module on the loop thread. */
#ifndef EXEC_FLEET_CONFIG_H
#define EXEC_FLEET_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet_sign.h"

struct fleet_config {
    /* options (fleet_options.c says what each means) */
    const char *listen_url, *database, *public_url, *environment_url;
    const char *tls_cert, *tls_key, *node_id;
    const char *environment, *role, *expires;
    const char *audit_log; /* --audit-log, or EXEC_REGISTRY_AUDIT_LOG (docs/AUDIT.md) */
    uint64_t max_envs_per_token, max_streams, max_pending, max_frame, max_connections;
    uint64_t idle_ms, claim_ms, bundle_ttl_ms, env_url_ttl_ms, heartbeat_ms, ping_ms;
    uint64_t connect_rate, connect_burst;

    /* resolved by fleet_command */
    char host[64];
    int port;
    bool tls;
    char node[FLEET_MAX_ID + 1]; /* this node's id */
    char public_base[512];       /* http(s)://HOST:PORT[/PREFIX] of this node */
    char environment_base[512];  /* ws(s)://... executor URLs start with */
    uint8_t secret[FLEET_SECRET_LEN];
    uint64_t pong_ms, dead_ms; /* derived: 2 pings; 3 heartbeats */
};

extern struct fleet_config fleet_cfg;

#endif
