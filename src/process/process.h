/* process: the process methods and the per-session process table.
 *
 * Children are forked and exec'd by spawn.c (never uv_spawn: PTY jobs need a
 * controlling terminal). Their output fds, pidfd and stdin are watched with
 * uv_poll handles; every output chunk, the exit and the close go into the
 * process's event_log, from which notifications are pushed and process/read is
 * answered. Never two sources of truth. */
#ifndef EXEC_PROCESS_PROCESS_H
#define EXEC_PROCESS_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc/rpc.h"

struct session;
struct session_part_ops;
struct conn;
struct proc_table;

struct proc_table *proc_table_new(struct session *s);
/* Kills every process group and frees the table (session end). */
void proc_table_destroy(struct proc_table *t);
/* The session lost connection c: pending long polls from it are dropped. */
void proc_table_detached(struct proc_table *t, struct conn *c);
/* The session was resumed on c. */
void proc_table_attached(struct proc_table *t, struct conn *c);
/* Whether every output notification the attached connection has queued past
 * stream offset written_total is still in its process's retained log. */
bool proc_table_output_safe(const struct proc_table *t, uint64_t written_total);
/* How many processes t has, and how many of them have not exited. */
void proc_table_count(const struct proc_table *t, unsigned *running, unsigned *total);
/* The attached connection drained its write queue: resume paused readers. */
void proc_table_resume_output(struct proc_table *t);

/* The per-session process table as a session part (session.h): created and
 * destroyed with the session, told of its attach, detach and output flow. */
extern const struct session_part_ops proc_session_part;
/* A session's process table. */
struct proc_table *proc_table_of(const struct session *s);

/* Retention of a closed process before eviction (80 s like the reference). */
#define PROC_RETAIN_MS 80000

/* process/start, read, write, terminate, and the terminal methods. */
extern const struct rpc_method process_methods[];

#endif
