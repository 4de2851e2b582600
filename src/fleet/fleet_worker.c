/* fleet_worker: the database thread (see fleet_worker.h). */
#include "fleet/fleet_worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

#define RECONNECT_EVERY_MS 1000

static struct {
    uv_loop_t *loop;
    uv_async_t async;
    uv_thread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fleet_job *todo_head, *todo_tail; /* waiting for the thread */
    struct fleet_job *done_head, *done_tail; /* finished, for the loop */
    unsigned pending;
    bool stopping, started;
    struct fleet_db *db;
    /* the thread's view of availability */
    bool down;
    int64_t last_try_ms;
    char last_err[240];
    int64_t last_ok_ms;        /* the last job that reached the database */
    int64_t outage_last_ok_ms; /* last_ok_ms when the latest outage began */
    int64_t back_ms;           /* when the latest outage ended (0: none yet) */
    /* the loop's view, for logs and /readyz */
    bool loop_down;
} w;

int64_t fleet_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void push(struct fleet_job **head, struct fleet_job **tail, struct fleet_job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

/* While the database is down, a job either waits for the next reconnect attempt's
 * turn (failing at once meanwhile) or makes that attempt. */
static bool ready_to_run(struct fleet_job *j)
{
    if (!w.down && !fleet_db_broken(w.db)) return true;
    int64_t now = fleet_now_ms();
    if (now - w.last_try_ms < RECONNECT_EVERY_MS && !j->reconnect_now) {
        j->result = -EIO;
        snprintf(j->err, sizeof j->err, "%s", w.last_err);
        return false;
    }
    w.last_try_ms = now;
    if (fleet_db_broken(w.db) && fleet_db_reconnect(w.db, w.last_err, sizeof w.last_err) < 0) {
        j->result = -EIO;
        snprintf(j->err, sizeof j->err, "%s", w.last_err);
        return false;
    }
    return true;
}

static void run_one(struct fleet_job *j)
{
    j->result = 0;
    j->err[0] = '\0';
    if (ready_to_run(j)) {
        if (w.down) {
            /* Back, as of now: before run, which may already judge other nodes'
             * heartbeats (a heartbeat's cleanup, /connect). */
            w.outage_last_ok_ms = w.last_ok_ms;
            w.back_ms = fleet_now_ms();
            w.down = false;
        }
        j->run(j, w.db);
    }
    if (j->result == -EIO) {
        w.down = true;
        if (!w.last_try_ms) w.last_try_ms = fleet_now_ms();
        if (j->err[0]) snprintf(w.last_err, sizeof w.last_err, "%s", j->err);
        return;
    }
    w.last_ok_ms = fleet_now_ms();
}

int64_t fleet_alive_after(int64_t now_ms, int64_t dead_ms, int64_t last_ok_ms, int64_t back_ms)
{
    if (back_ms && now_ms < back_ms + dead_ms) return last_ok_ms - dead_ms;
    return now_ms - dead_ms;
}

int64_t fleet_worker_alive_after(int64_t now_ms, int64_t dead_ms)
{
    return fleet_alive_after(now_ms, dead_ms, w.outage_last_ok_ms, w.back_ms);
}

static void thread_main(void *arg)
{
    pthread_mutex_lock(&w.mu);
    for (;;) {
        while (!w.todo_head && !w.stopping)
            pthread_cond_wait(&w.cv, &w.mu);
        struct fleet_job *j = w.todo_head;
        if (!j) break; /* stopping and drained */
        w.todo_head = j->next;
        if (!w.todo_head) w.todo_tail = NULL;
        pthread_mutex_unlock(&w.mu);
        run_one(j);
        pthread_mutex_lock(&w.mu);
        push(&w.done_head, &w.done_tail, j);
        uv_async_send(&w.async);
    }
    pthread_mutex_unlock(&w.mu);
}

/* The loop's side: logs a change of availability once, in the job's words. */
static void note_availability(const struct fleet_job *j)
{
    bool down = j->result == -EIO;
    if (down && !w.loop_down)
        log_warn("event=database result=unavailable detail=\"%s\": registry requests get 503 "
                 "until it returns; established relays go on",
                 j->err);
    else if (!down && w.loop_down)
        log_notice("event=database result=available: the database is reachable again");
    w.loop_down = down;
}

static void on_async(uv_async_t *a)
{
    pthread_mutex_lock(&w.mu);
    struct fleet_job *j = w.done_head;
    w.done_head = w.done_tail = NULL;
    pthread_mutex_unlock(&w.mu);
    while (j) {
        struct fleet_job *next = j->next;
        pthread_mutex_lock(&w.mu);
        w.pending--;
        pthread_mutex_unlock(&w.mu);
        note_availability(j);
        j->done(j);
        j = next;
    }
}

int fleet_worker_start(uv_loop_t *loop, struct fleet_db *db)
{
    memset(&w, 0, sizeof w);
    w.loop = loop;
    w.db = db;
    w.last_ok_ms = fleet_now_ms(); /* the caller has just used db */
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int r = uv_async_init(loop, &w.async, on_async);
    if (r < 0) return r;
    uv_unref((uv_handle_t *)&w.async); /* jobs do not keep the loop alive: stop drains them */
    r = uv_thread_create(&w.thread, thread_main, NULL);
    if (r < 0) {
        uv_close((uv_handle_t *)&w.async, NULL);
        return r;
    }
    w.started = true;
    return 0;
}

int fleet_worker_submit(struct fleet_job *j, fleet_job_run_fn run, fleet_job_done_fn done)
{
    j->run = run;
    j->done = done;
    j->now_ms = fleet_now_ms();
    pthread_mutex_lock(&w.mu);
    if (!w.started || w.stopping || w.pending >= FLEET_WORKER_QUEUE_MAX) {
        pthread_mutex_unlock(&w.mu);
        return -EAGAIN;
    }
    w.pending++;
    push(&w.todo_head, &w.todo_tail, j);
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    return 0;
}

bool fleet_worker_available(void)
{
    return !w.loop_down;
}

unsigned fleet_worker_pending(void)
{
    pthread_mutex_lock(&w.mu);
    unsigned n = w.pending;
    pthread_mutex_unlock(&w.mu);
    return n;
}

void fleet_worker_stop(void)
{
    if (!w.started) return;
    pthread_mutex_lock(&w.mu);
    w.stopping = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    uv_thread_join(&w.thread);
    on_async(&w.async); /* the last completions, on this (the loop's) thread */
    uv_close((uv_handle_t *)&w.async, NULL);
    fleet_db_close(w.db);
    w.db = NULL;
    w.started = false;
}
