/* reload: what SIGHUP means to exec-server: re-read the files it was started with
 * and keep running, on every kind of listener (ws://, wss://, stdio, remote mode).
 * The audit log (--audit-log) is reopened at its path, as logrotate expects.
 *
 * Reloaded: the TLS certificate and key (--tls-cert/--tls-key; new connections get
 * the new pair, live ones keep theirs), the capability token file (--ws-token-file)
 * and the JWT secret file (--ws-shared-secret-file). A file that fails to load
 * leaves its old value in force and is logged as a warning; the outcome is one
 * notice line. Nothing else changes: options, limits and listeners stay as they
 * were, sessions and their processes are untouched. systemd's ExecReload= sends
 * this signal. */
#ifndef EXEC_SERVER_RELOAD_H
#define EXEC_SERVER_RELOAD_H

#include <uv.h>

/* Installs the SIGHUP handler on loop. Returns 0 or a libuv error. */
int reload_start(uv_loop_t *loop);
/* Re-reads everything reloadable now. Returns 0, or the first failure's negative
 * code (each failure is logged). */
int reload_now(void);
/* Stops watching for SIGHUP (shutdown); the handle closes with the loop's others. */
void reload_stop(void);

#endif
