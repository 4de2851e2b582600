/* server_methods: which domains this server serves, as the list of their records
 * (struct rpc_domain: methods, payloads, capabilities). The executables and the tests
 * that dispatch whole messages register the same set, so rpc itself never names a
 * method module (docs/ARCHITECTURE.md, top layer). */
#ifndef EXEC_SERVER_SERVER_METHODS_H
#define EXEC_SERVER_SERVER_METHODS_H

/* Registers every domain's record (its methods and payloads with rpc, its
 * capabilities with the session layer) and every session part (idempotent). */
void server_methods_register(void);
/* --audit-required: the methods that make audit records are refused while the log
 * cannot take them (rpc_set_work_gate). */
void server_methods_gate_audit(void);

#endif
