/* fleet_server: `exec-server registry` serving: opens and migrates the database,
 * listens, routes requests (the JSON endpoints to fleet_api, rendezvous upgrades to
 * fleet_relay, /metrics, /readyz), keeps this node's heartbeat in the database and
 * stops cleanly on SIGTERM/SIGINT (SIGHUP re-reads the TLS pair). */
#ifndef EXEC_FLEET_SERVER_H
#define EXEC_FLEET_SERVER_H

/* Runs until stopped; fleet_cfg is parsed. Returns the exit status. */
int fleet_server_run(void);

#endif
