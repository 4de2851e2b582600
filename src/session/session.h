/* session: the unit a client resumes. A session owns its processes; a connection
 * is only its current binding, to which the session installs itself as the owner
 * (conn_owner_ops: it hears of the close and of the output flow). On disconnect
 * the session is detached and kept for the TTL, then its processes are killed
 * (PROTOCOL.md section 9). Also implements initialize and the environment
 * methods. */
#ifndef EXEC_SESSION_SESSION_H
#define EXEC_SESSION_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "rpc/rpc.h"

struct conn;
struct proc_table;
struct fs_watch_table;

struct session {
    char id[37];              /* UUID v4 text */
    char identity[65];        /* conn_identity of the connection that created it */
    char *client_name;        /* initialize's clientName (owned), for session/list */
    uint64_t created_ms;      /* wall clock (ms since the epoch), for session/list */
    uint64_t detached_ms;     /* wall clock of the last detach, 0 while attached */
    bool detached;            /* no connection and not ended: counted as detached */
    bool kept;                /* session/keep: keep_ms replaces the --session-ttl */
    uint64_t keep_ms;         /* LIMITS_KEEP_FOREVER: until terminated */
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
/* The session with this id, or NULL. */
struct session *session_find(const char *id);
/* The session with this id if the client on c may see it (its creator had the
 * same conn_identity), or NULL. */
struct session *session_visible(const struct conn *c, const char *id);
/* A new session bound to c (initialize without resumeSessionId); owned by the
 * registry, which destroys it when it ends. */
struct session *session_create(struct conn *c, const char *client_name);
/* Binds the detached session s to c (initialize with resumeSessionId). */
void session_resume(struct session *s, struct conn *c);
/* The session bound to c, or NULL before initialize (not a counted reference:
 * valid on the loop thread while c is its binding). */
struct session *session_of(const struct conn *c);
/* Kills every process of every session and frees them (shutdown, stdio EOF). */
void session_destroy_all(void);

/* session/keep: while detached, s lives keep_ms (LIMITS_KEEP_FOREVER: until it is
 * ended) instead of the --session-ttl. Returns 0, or -ENOSPC when
 * --max-detached-sessions sessions are kept already. */
int session_keep(struct session *s, uint64_t keep_ms);
/* session/list: the sessions c may see, as a JSON array (new reference). */
json_t *session_list_json(const struct conn *c);

/* initialize, environment/info, environment/status, session/close, session/keep,
 * session/list. */
extern const struct rpc_method session_methods[];

#endif
