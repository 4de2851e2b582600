/* session: the unit a client resumes. A session owns its processes; a connection
 * is only its current binding, to which the session installs itself as the owner
 * (conn_owner_ops: it hears of the close and of the output flow). On disconnect
 * the session is detached and kept for the TTL, then its processes are killed
 * (PROTOCOL.md section 9). Also implements initialize and the environment
 * methods.
 *
 * What the domains keep per session (process/ its process table, fs/ its watches
 * and sandbox helpers) are parts: each registers a struct session_part_ops and
 * hears of the session's life through it, so this layer sits below them and names
 * none of them. */
#ifndef EXEC_SESSION_SESSION_H
#define EXEC_SESSION_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "rpc/rpc.h"

struct conn;

#define SESSION_PARTS_MAX 4

struct session {
    char id[37];                    /* UUID v4 text */
    char identity[65];              /* conn_identity of the connection that created it */
    char *client_name;              /* initialize's clientName (owned), for session/list */
    uint64_t created_ms;            /* wall clock (ms since the epoch), for session/list */
    uint64_t detached_ms;           /* wall clock of the last detach, 0 while attached */
    bool detached;                  /* no connection and not ended: counted as detached */
    bool kept;                      /* session/keep: keep_ms replaces the --session-ttl */
    uint64_t keep_ms;               /* LIMITS_KEEP_FOREVER: until terminated */
    struct conn *conn;              /* attached connection (not counted), or NULL */
    void *parts[SESSION_PARTS_MAX]; /* each registered part's state (session_part) */
    uv_timer_t ttl;                 /* runs while detached */
    uv_loop_t *loop;
    uint64_t detach_order; /* when it detached (a counter), for max_detached */
    bool ending;           /* session/close: end with this connection, no TTL */
    struct session *prev, *next;
};

/* A part's hooks, each optional. */
struct session_part_ops {
    /* s was created (initialize without resumeSessionId), before it attaches. */
    void (*created)(struct session *s);
    /* s was resumed on c. */
    void (*attached)(struct session *s, struct conn *c);
    /* s lost its connection c: it waits to be resumed, or ends next. */
    void (*detached)(struct session *s, struct conn *c);
    /* s ends: free its state (the hooks run in the order the parts registered). */
    void (*ended)(struct session *s);
    /* s's connection drained its write queue (conn_owner_ops.unblocked). */
    void (*unblocked)(struct session *s);
    /* conn_owner_ops.output_safe for s: every part must agree. */
    bool (*output_safe)(struct session *s, uint64_t written_total);
    /* session/list: adds the part's members to s's entry o. */
    void (*list)(const struct session *s, json_t *o);
    /* session_destroy_all: every session has ended (server shutdown). */
    void (*shutdown)(void);
};
/* Registers a part (once; again is a no-op). At most SESSION_PARTS_MAX, before
 * the first session exists. */
void session_register_part(const struct session_part_ops *ops);
/* The state part ops keeps for s (NULL until set), and setting it. */
void *session_part(const struct session *s, const struct session_part_ops *ops);
void session_set_part(struct session *s, const struct session_part_ops *ops, void *state);

/* Registers a domain's record (struct rpc_domain, rpc.h): its method tables and
 * payloads with rpc, its capabilities and info for initialize's and
 * environment/info's answers. At start (server_methods_register), before any
 * connection; at most SESSION_DOMAINS_MAX, again is a no-op. */
#define SESSION_DOMAINS_MAX 16
void session_register_domain(const struct rpc_domain *d);

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
 * session/list and environment/config (env_config.c), with the capabilities of
 * sessions. */
extern const struct rpc_domain session_domain;

#endif
