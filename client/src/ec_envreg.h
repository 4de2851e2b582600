/* ec_envreg: the environments' state machine and the step snapshot rule, sans I/O.
 * Not installed; ec_envs.c wraps it with a lock, connect threads and clients, and the
 * unit tests drive it directly with made-up connections.
 *
 * An environment is a stable id plus its current configuration and, once asked to
 * start, its current handle. A handle is one connection attempt and, when it
 * succeeds, the connection (an opaque `conn`): STARTING -> READY or FAILED, and READY
 * -> FAILED when the connection is lost for good. Replacing an environment (add with
 * an id that exists) gives it a new configuration and drops its handle: the next
 * start makes a new one. Nobody waits on a handle that was replaced; it finishes its
 * attempt and goes away.
 *
 * A step snapshot (envreg_capture) records, for each selected id, the state seen in
 * that one look at the registry and, for a READY environment, the handle itself with
 * a reference: whatever happens to the registry afterwards (replace, remove, another
 * connect), every use through the step reaches that handle. As codex's harness
 * expects of a step: a ready environment is captured with its handle; a starting,
 * failed or missing one is omitted; an idle (lazy) one is asked to start, so a later
 * step can see it ready.
 *
 * Handles are reference-counted: one reference for the environment whose current
 * handle it is, one for a connect job in progress, one per step that captured it.
 * At zero the handle goes to the garbage list, where the caller (outside any lock)
 * closes its connection and frees it with envreg_handle_free. Configurations are
 * opaque too, reference-counted through the cfg_ref/cfg_unref callbacks. */
#ifndef EC_ENVREG_H
#define EC_ENVREG_H

#include "execclient.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct envreg_handle {
    struct envreg_handle *next; /* in the start queue or the garbage list */
    unsigned refs;
    uint64_t serial;    /* 1, 2, ...: which attempt this is, registry-wide */
    char *env_id;       /* the environment it was made for (owned) */
    void *cfg;          /* one reference, dropped when the handle is garbage */
    ec_env_state state; /* EC_ENV_STARTING, EC_ENV_READY or EC_ENV_FAILED */
    void *conn;         /* the connection once READY (then kept until freed) */
    char reason[300];   /* why FAILED */
};

struct envreg_env {
    struct envreg_env *next;
    char *id;
    void *cfg;                 /* one reference */
    struct envreg_handle *cur; /* NULL: idle (never started since added/replaced) */
};

struct envreg_step_entry {
    char *id;
    ec_env_state state;      /* as captured */
    char *reason;            /* EC_ENV_FAILED: why (owned), else NULL */
    struct envreg_handle *h; /* EC_ENV_READY: the captured handle (one reference) */
};

struct envreg_step {
    struct envreg_step_entry *e;
    size_t n;
};

struct envreg {
    struct envreg_env *envs, **tail; /* in the order they were added */
    uint64_t next_serial;
    struct envreg_handle *starts, **starts_tail; /* to connect, oldest first */
    struct envreg_handle *garbage;
    void (*cfg_ref)(void *cfg);
    void (*cfg_unref)(void *cfg);
};

/* Tells whether a READY handle's connection is still usable; false fills why. */
typedef bool (*envreg_alive_fn)(void *ud, void *conn, char *why, size_t whylen);

void envreg_init(struct envreg *r, void (*cfg_ref)(void *), void (*cfg_unref)(void *));
/* Drops every environment (their handles live on while steps or jobs hold them). */
void envreg_clear(struct envreg *r);

/* Adds environment id with cfg (takes a reference of its own), or replaces its
 * configuration (the old handle is dropped). start: make a handle now (queued for
 * envreg_take_start); otherwise the environment is idle until asked. */
void envreg_add(struct envreg *r, const char *id, void *cfg, bool start);
/* -1 when there is no such environment. */
int envreg_remove(struct envreg *r, const char *id);
/* Idle or failed: a new handle, STARTING and queued. Starting or ready: nothing.
 * -1 when there is no such environment. */
int envreg_start(struct envreg *r, const char *id);
/* The state of environment id (EC_ENV_MISSING, EC_ENV_IDLE, ...); *reason (may be
 * NULL) borrowed from the registry while FAILED. */
ec_env_state envreg_state(const struct envreg *r, const char *id, const char **reason);
/* The current handle of id, or NULL (idle or missing). Borrowed. */
struct envreg_handle *envreg_current(const struct envreg *r, const char *id);

/* The next handle to connect (the caller owns the job's reference from here and ends
 * it with envreg_connected or envreg_connect_failed), or NULL. */
struct envreg_handle *envreg_take_start(struct envreg *r);
void envreg_connected(struct envreg *r, struct envreg_handle *h, void *conn);
void envreg_connect_failed(struct envreg *r, struct envreg_handle *h, const char *reason);
/* A READY handle's connection is gone for good: it becomes FAILED. */
void envreg_lost(struct envreg *r, struct envreg_handle *h, const char *reason);

/* The snapshot of ids[0..n) (ids NULL: every environment, in order; duplicates taken
 * once). alive (may be NULL) is asked about each READY handle first. Caller releases
 * the step with envreg_step_release. */
struct envreg_step *envreg_capture(struct envreg *r, const char *const *ids, size_t n,
                                   envreg_alive_fn alive, void *ud);
/* The captured entry for id, or NULL when id was not selected. */
const struct envreg_step_entry *envreg_step_find(const struct envreg_step *s, const char *id);
void envreg_step_release(struct envreg *r, struct envreg_step *s);

/* Handles nobody references any more (linked through next), for the caller to close
 * (their conn, if any) and free; the list is emptied. */
struct envreg_handle *envreg_take_garbage(struct envreg *r);
void envreg_handle_free(struct envreg_handle *h);

#endif
