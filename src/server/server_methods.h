/* server_methods: which JSON-RPC methods this server serves. The executables and
 * the tests that dispatch whole messages register the same set, so rpc itself
 * never names a method module (docs/ARCHITECTURE.md, top layer). */
#ifndef EXEC_SERVER_SERVER_METHODS_H
#define EXEC_SERVER_SERVER_METHODS_H

/* Registers every method table with rpc and every session part with the session
 * layer (idempotent). */
void server_methods_register(void);
/* --audit-required: the methods that make audit records are refused while the log
 * cannot take them (rpc_set_work_gate). */
void server_methods_gate_audit(void);

#endif
