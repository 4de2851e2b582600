/* process: the per-session process table, the model under the process methods.
 *
 * Children are forked and exec'd by spawn.c (never uv_spawn: PTY jobs need a
 * controlling terminal). Their output fds, pidfd and stdin are watched with
 * uv_poll handles; every output chunk, the exit and the close go into the
 * process's event_log, from which notifications are pushed and process/read is
 * answered. Never two sources of truth. The table knows nothing of JSON-RPC: it
 * reports its events through the struct proc_events its owner gave it
 * (proc_internal.h; the session's is in proc_rpc.c). */
#ifndef EXEC_PROCESS_PROCESS_H
#define EXEC_PROCESS_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

struct proc_table;
struct proc_events;

/* A table whose events go to `events` with `owner` (the table's t->owner);
 * owner_id names the owner in log lines and outlives the table. */
struct proc_table *proc_table_new(const struct proc_events *events, void *owner,
                                  const char *owner_id);
/* Kills every process group and frees the table (session end). */
void proc_table_destroy(struct proc_table *t);
/* The consumer's queue was dropped (its connection went away): nothing of the
 * logs is in flight any more, and paused readers resume (detached output is
 * recorded in the retained log, never held back). */
void proc_table_unsent(struct proc_table *t);
/* Whether every output notification the attached connection has queued past
 * stream offset written_total is still in its process's retained log. */
bool proc_table_output_safe(const struct proc_table *t, uint64_t written_total);
/* How many processes t has, and how many of them have not exited. */
void proc_table_count(const struct proc_table *t, unsigned *running, unsigned *total);
/* The consumer drained its queue: resume paused readers. */
void proc_table_resume_output(struct proc_table *t);

/* Retention of a closed process before eviction (80 s like the reference). */
#define PROC_RETAIN_MS 80000

#endif
