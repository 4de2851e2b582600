/* fleet_store: everything the registry keeps in its database, as SQL written once
 * for SQLite and PostgreSQL (fleet_db), and the versioned migrations that create it.
 *
 * Tables (times in unix milliseconds):
 *   fleet_schema         applied migrations (version, name, applied_at)
 *   fleet_settings       the fleet's URL-signing secret, made at the first start
 *   fleet_tokens         bearer tokens: id, SHA-256 of the secret, environment (or
 *                        prefix*), role, created/expires/revoked
 *   fleet_registrations  one per environment: the current registration id, the
 *                        executor's public key JSON, the token that registered it
 *   fleet_nodes          registry nodes: their rendezvous URL and last heartbeat
 *   fleet_attachments    which node holds each environment's executor socket, and
 *                        how many streams it routes
 *   fleet_bundles        harness URL nonces not used yet (single use, until expiry)
 *
 * Every function runs on the caller's thread and blocks (the database thread, or a
 * command). Returns 0 or a negative error: fleet_db's (-EIO, -EBUSY, -EINVAL with
 * err set) or the logical outcome each function names. */
#ifndef EXEC_FLEET_STORE_H
#define EXEC_FLEET_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet_db.h"
#include "fleet/fleet_sign.h"

/* The newest schema version this build knows. */
#define FLEET_SCHEMA_VERSION 1

/* Applies the migrations the database lacks, in one transaction (PostgreSQL: under
 * an advisory lock, so nodes starting together migrate once), and makes the fleet
 * secret if there is none. -EPROTO when the database is of a newer schema than this
 * build knows. */
int fleet_store_migrate(struct fleet_db *db, char *err, size_t n);
/* The fleet's URL-signing secret. */
int fleet_store_secret(struct fleet_db *db, uint8_t out[FLEET_SECRET_LEN], char *err, size_t n);
/* The applied schema version (0 when none). */
int fleet_store_version(struct fleet_db *db, int64_t *out, char *err, size_t n);

/* ---- tokens ---- */

/* Makes a token for env_pattern and role, expiring at expires_ms (0: never); token
 * gets the bearer (FLEET_TOKEN_LEN + 1 bytes), shown once and never stored. */
int fleet_store_token_create(struct fleet_db *db, const char *env_pattern, enum fleet_role role,
                             int64_t expires_ms, int64_t now_ms, char *token, char *err, size_t n);
/* Every token: id, environment, role, created_at, expires_at, revoked_at. */
int fleet_store_token_list(struct fleet_db *db, struct fleet_rows *rows, char *err, size_t n);
/* Revokes token id at now: -ENOENT when there is no such token (revoking twice is
 * fine). */
int fleet_store_token_revoke(struct fleet_db *db, const char *id, int64_t now_ms, char *err,
                             size_t n);

/* Why a presented token was refused (or FLEET_TOKEN_OK). */
enum fleet_token_verdict {
    FLEET_TOKEN_OK,
    FLEET_TOKEN_MALFORMED,  /* not a token of ours (401) */
    FLEET_TOKEN_UNKNOWN,    /* no such id, or the secret does not match (401) */
    FLEET_TOKEN_REVOKED,    /* (401) */
    FLEET_TOKEN_EXPIRED,    /* (401) */
    FLEET_TOKEN_WRONG_ROLE, /* an executor token at /connect or the reverse (403) */
    FLEET_TOKEN_WRONG_ENV,  /* another environment's token (403) */
};
/* A short reason for logs and metrics ("unknown_token", "wrong_environment" ...). */
const char *fleet_token_verdict_name(enum fleet_token_verdict v);
/* Checks a presented bearer for role and env at now; *verdict says what it is
 * (the digest compared in constant time) and id (FLEET_TOKEN_ID_LEN + 1) its id
 * when it has the token's shape. */
int fleet_store_token_check(struct fleet_db *db, const char *token, size_t len,
                            enum fleet_role role, const char *env, int64_t now_ms,
                            enum fleet_token_verdict *verdict, char *id, char *err, size_t n);

/* ---- registrations and attachments ---- */

/* Records registration reg of env by token_id with the executor's key JSON; -EDQUOT
 * when token_id already registered max_envs other environments. */
int fleet_store_register(struct fleet_db *db, const char *env, const char *reg,
                         const char *token_id, const char *key_json, int64_t max_envs,
                         int64_t now_ms, char *err, size_t n);
/* Whether reg is env's current registration and its token still valid at now:
 * 0, -ESTALE (superseded or unknown), -EKEYREVOKED (its token was revoked or
 * expired). */
int fleet_store_registration_check(struct fleet_db *db, const char *env, const char *reg,
                                   int64_t now_ms, char *err, size_t n);
/* env's executor socket (registration reg) is now held by node: checks as
 * fleet_store_registration_check, then records the attachment. */
int fleet_store_attach(struct fleet_db *db, const char *env, const char *reg, const char *node,
                       int64_t now_ms, char *err, size_t n);
/* node no longer holds env (a no-op when another node took it over). */
int fleet_store_detach(struct fleet_db *db, const char *env, const char *node, int64_t now_ms,
                       char *err, size_t n);

/* Where a harness finds env: its current registration, executor key JSON and the
 * URL of the live node (heartbeat at or after alive_after_ms) holding its socket.
 * -ENOENT when no live node holds it (offline). Strings malloc'd (caller frees). */
struct fleet_location {
    char *registration, *key_json, *node_url, *node_id;
};
void fleet_location_clear(struct fleet_location *l);
int fleet_store_locate(struct fleet_db *db, const char *env, int64_t alive_after_ms,
                       struct fleet_location *out, char *err, size_t n);

/* ---- harness bundles ---- */

/* Records a harness URL's nonce for env until expires_ms; -EDQUOT when env already
 * has max_pending unused, unexpired ones. */
int fleet_store_bundle_add(struct fleet_db *db, const char *nonce, const char *env,
                           int64_t expires_ms, int64_t max_pending, int64_t now_ms, char *err,
                           size_t n);
/* Uses a nonce up: 0 the first time, -ENOENT when it was used, expired or never
 * issued for env. */
int fleet_store_bundle_take(struct fleet_db *db, const char *nonce, const char *env, int64_t now_ms,
                            char *err, size_t n);

/* ---- nodes ---- */

/* What a node reports in its heartbeat: the environments it holds. */
struct fleet_held {
    const char *env, *reg;
    int64_t streams;
    bool streams_changed; /* since the last successful heartbeat */
};
/* The heartbeat of node (its rendezvous URL): refreshes its row, reconciles the
 * attachments table with held[] (rows of this node it no longer holds go; held
 * environments missing there, e.g. removed while this node could not reach the
 * database, come back unless another live node took them), writes changed stream
 * counts, forgets dead nodes' attachments (heartbeat before dead_before_ms) and
 * expired bundles. *lost (malloc'd, count *nlost) gets the held environments that
 * must be let go: taken over by another live node, superseded, or whose token was
 * revoked or expired. */
int fleet_store_heartbeat(struct fleet_db *db, const char *node, const char *url,
                          const struct fleet_held *held, size_t nheld, int64_t dead_before_ms,
                          int64_t now_ms, char ***lost, size_t *nlost, char *err, size_t n);
/* The node leaves (orderly shutdown): its row and attachments go. */
int fleet_store_node_leave(struct fleet_db *db, const char *node, int64_t now_ms, char *err,
                           size_t n);

/* Every registered environment: environment, registration_id, registered_at,
 * last_seen_at, node_id (NULL when none), node_url, node_heartbeat_at, streams. */
int fleet_store_environments(struct fleet_db *db, struct fleet_rows *rows, char *err, size_t n);

#endif
