/* session: the unit a client resumes. A session owns its processes; a connection
 * is only its current binding. On disconnect the session is detached and kept for
 * the TTL, then its processes are killed (PROTOCOL.md section 9). Also implements
 * initialize and the environment methods. */
#ifndef EXEC_SESSION_SESSION_H
#define EXEC_SESSION_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct conn;
struct proc_table;
struct fs_watch_table;

struct session {
    char id[37];              /* UUID v4 text */
    struct conn *conn;        /* attached connection (not counted), or NULL */
    struct proc_table *procs; /* owned */
    struct fs_watch_table *watches; /* owned, NULL until fs/watchMissing */
    uv_timer_t ttl;           /* runs while detached */
    uv_loop_t *loop;
    uint64_t detach_order;    /* when it detached (a counter), for max_detached */
    bool ending;              /* session/close: end with this connection, no TTL */
    struct session *prev, *next;
};

/* Server-wide settings read by sessions. */
void session_configure(uv_loop_t *loop, uint64_t detached_ttl_ms);
/* Called by conn when its connection closes. */
void session_detach(struct session *s, struct conn *c);
/* Called by conn when its write queue dropped below the low-water mark. */
void session_output_unblocked(struct session *s);
/* Whether every process output notification that the attached connection has
 * not yet written (its stream offset is past written_total) is still in its
 * process's retained log, so dropping the queue loses nothing (conn.c). */
bool session_output_safe(struct session *s, uint64_t written_total);
/* Kills every process of every session and frees them (shutdown, stdio EOF). */
void session_destroy_all(void);

#endif
