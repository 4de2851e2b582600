/* own_ports: the TCP ports this server listens on, shared with its sandboxes.
 *
 * A sandboxed command must never reach a listener of the server that started it:
 * with the network enabled it shares the host's network, and the loopback
 * WebSocket (no authentication by default) would let it ask for an unsandboxed
 * process/start. Every listener the server opens (--listen, TLS, remote mode's
 * local endpoint, the managed proxy's per-sandbox listeners) is counted here as it
 * binds; the managed proxy refuses these ports whatever its policy says, and the
 * init of a network-enabled sandbox refuses a connect(2) to them on any address
 * (sandbox/net_guard.h).
 *
 * The table is one count per port in a shared memory file (64 KiB): the server
 * writes it, the spawner maps it read-only once at start (its fd is passed at
 * exec), and every sandbox init, a fork of the spawner, reads the live table
 * without asking anyone. Counts, not bits: two listeners (IPv4 and IPv6) may share
 * a port number. Updates are atomic per entry; a port is counted before its
 * listener accepts anything and uncounted after it is closed. */
#ifndef EXEC_CORE_OWN_PORTS_H
#define EXEC_CORE_OWN_PORTS_H

#include <stdbool.h>
#include <stdint.h>

/* Creates the table (the server, once at start, before the spawner). Returns 0 or
 * -errno; without it no network-enabled sandbox can be confined. */
int own_ports_init(void);

/* The table's descriptor, for the spawner's exec; -1 before own_ports_init. */
int own_ports_fd(void);

/* In the spawner: maps the table inherited as fd read-only. Returns 0 or -errno. */
int own_ports_attach(int fd);

/* Whether the table is there to consult (own_ports_init or own_ports_attach). */
bool own_ports_ready(void);

/* Counts / uncounts a listening port (the server). Thread-safe; no-op without a
 * table or for port 0. */
void own_ports_add(uint16_t port);
void own_ports_remove(uint16_t port);

/* Whether port is one of the server's listening ports. Async-signal-safe. */
bool own_ports_has(uint16_t port);

#endif
