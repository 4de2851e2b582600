/* fleet_worker: the registry's database thread. The loop never waits for the
 * database: a request that needs it becomes a job, run here in arrival order on the
 * one connection this thread owns, and its completion comes back to the loop through
 * a uv_async (the loop then calls the job's done). SQLite's busy waits and
 * PostgreSQL's round trips, reconnects and timeouts all happen on this thread.
 *
 * While the database is unavailable (a job failed with -EIO) a new connection is
 * tried at most once a second; jobs in between fail at once with -EIO and the last
 * error, so requests get their 503 quickly instead of queueing behind reconnects.
 * The heartbeat is the exception: it always tries (its timer paces it), so a node is
 * back in the database within one heartbeat of the database's return, not a
 * heartbeat plus a second of throttle. The loop logs each change of availability
 * once and /readyz follows it.
 *
 * An outage also stops every node's heartbeat, so the thread remembers the last one
 * it saw (fleet_worker_alive_after): the node that gets the database back first must
 * not take the others, silent only because they could not write, for dead. */
#ifndef EXEC_FLEET_WORKER_H
#define EXEC_FLEET_WORKER_H

#include <stdbool.h>
#include <uv.h>

#include "fleet/fleet_db.h"

#define FLEET_WORKER_QUEUE_MAX 4096 /* jobs waiting: past this, submit refuses (503) */

struct fleet_job;
/* Runs on the database thread with the connection; sets j->result (0 or negative)
 * and j->err on failure. */
typedef void (*fleet_job_run_fn)(struct fleet_job *j, struct fleet_db *db);
/* Runs on the loop thread once run has (fleet_worker_stop runs every queued job first,
 * so each done is called exactly once). */
typedef void (*fleet_job_done_fn)(struct fleet_job *j);

struct fleet_job {
    fleet_job_run_fn run;
    fleet_job_done_fn done;
    int result;
    char err[240];
    int64_t now_ms;         /* wall clock when submitted: what run compares expiries with */
    bool reconnect_now;     /* set before submit: may try to reconnect even within the
                               throttle (the heartbeat) */
    struct fleet_job *next; /* queue link (the worker's) */
};

/* Starts the thread with db (owned from now on; closed at stop). */
int fleet_worker_start(uv_loop_t *loop, struct fleet_db *db);
/* Queues j (the caller keeps it alive until done runs). -EAGAIN when the queue is
 * full or the worker is stopping: done is then not called. */
int fleet_worker_submit(struct fleet_job *j, fleet_job_run_fn run, fleet_job_done_fn done);
/* Whether the last job found the database reachable. */
bool fleet_worker_available(void);
/* Jobs waiting or running. */
unsigned fleet_worker_pending(void);
/* Lets queued jobs finish (bounded by the database's own timeouts), calls their
 * done, joins the thread and closes the connection. */
void fleet_worker_stop(void);

/* For a job's run (the database thread): the oldest node heartbeat that still counts
 * as alive at now_ms (a job's now_ms), the nodes' dead time being dead_ms:
 * fleet_alive_after with what this thread saw of the database. */
int64_t fleet_worker_alive_after(int64_t now_ms, int64_t dead_ms);
/* The rule: now_ms - dead_ms, except in the dead_ms after the database came back
 * (back_ms, 0 when it never went away) from an outage that began after last_ok_ms
 * (the last success before it). Then every node that was alive at last_ok_ms still
 * is: no node could heartbeat during the outage, and each gets the whole dead time
 * after the return to check in again, as in steady state. */
int64_t fleet_alive_after(int64_t now_ms, int64_t dead_ms, int64_t last_ok_ms, int64_t back_ms);

/* Wall clock in unix milliseconds. */
int64_t fleet_now_ms(void);

#endif
