/* process_rpc: the process room as the server registers it: its record (methods,
 * capabilities; proc_rpc.c), its JSON-RPC methods (process_methods.c, start_methods.c,
 * tty_methods.c) and the per-session process table as a session part (proc_rpc.c),
 * which turns the table's events into notifications. */
#ifndef EXEC_PROCESS_PROCESS_RPC_H
#define EXEC_PROCESS_PROCESS_RPC_H

#include "rpc/rpc.h"

struct session;
struct session_part_ops;
struct proc_table;

/* The per-session process table as a session part (session.h): created and
 * destroyed with the session, told of its attach, detach and output flow. */
extern const struct session_part_ops proc_session_part;
/* A session's process table. */
struct proc_table *proc_table_of(const struct session *s);

/* process/start, read, write, terminate, and the terminal methods. */
extern const struct rpc_method process_methods[];

/* The process domain's record (rpc.h): process_methods and its capabilities. */
extern const struct rpc_domain process_domain;

#endif
