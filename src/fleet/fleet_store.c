/* fleet_store: the registry's SQL and migrations (see fleet_store.h). */
#include "fleet/fleet_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/random.h"
#include "proto/hex.h"
#include "util/mem.h"
#include "util/strmap.h"

/* ---- migrations ----
 * One entry per schema version, applied in order and recorded in fleet_schema.
 * Never edit an applied entry: add the next version. The SQL is the common subset
 * of SQLite and PostgreSQL (BIGINT, TEXT, IF NOT EXISTS). */
struct migration {
    int64_t version;
    const char *name;
    const char *const *sql; /* NULL-terminated */
};

static const char *const m1_sql[] = {
    "CREATE TABLE fleet_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ("CREATE TABLE fleet_tokens (id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, "
     "environment TEXT NOT NULL, role TEXT NOT NULL, created_at BIGINT NOT NULL, "
     "expires_at BIGINT, revoked_at BIGINT)"),
    ("CREATE TABLE fleet_registrations (environment TEXT PRIMARY KEY, registration_id TEXT NOT "
     "NULL, token_id TEXT NOT NULL, executor_key TEXT NOT NULL, registered_at BIGINT NOT NULL, "
     "last_seen_at BIGINT NOT NULL)"),
    "CREATE INDEX fleet_registrations_token ON fleet_registrations (token_id)",
    ("CREATE TABLE fleet_nodes (id TEXT PRIMARY KEY, url TEXT NOT NULL, started_at BIGINT NOT "
     "NULL, heartbeat_at BIGINT NOT NULL)"),
    ("CREATE TABLE fleet_attachments (environment TEXT PRIMARY KEY, registration_id TEXT NOT "
     "NULL, node_id TEXT NOT NULL, attached_at BIGINT NOT NULL, streams BIGINT NOT NULL "
     "DEFAULT 0)"),
    "CREATE INDEX fleet_attachments_node ON fleet_attachments (node_id)",
    ("CREATE TABLE fleet_bundles (nonce TEXT PRIMARY KEY, environment TEXT NOT NULL, "
     "expires_at BIGINT NOT NULL)"),
    "CREATE INDEX fleet_bundles_environment ON fleet_bundles (environment, expires_at)",
    NULL,
};

static const struct migration migrations[] = {
    {1, "tokens, registrations, nodes, attachments, bundles", m1_sql},
};
#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])
_Static_assert(NMIGRATIONS == FLEET_SCHEMA_VERSION, "one migration per schema version");

static int exec0(struct fleet_db *db, const char *sql, char *err, size_t n)
{
    return fleet_db_exec(db, sql, NULL, 0, NULL, err, n);
}

/* The first cell of the first row as an integer (0 when none or NULL). */
static int query_int(struct fleet_db *db, const char *sql, const struct fleet_param *p, size_t np,
                     int64_t *out, char *err, size_t n)
{
    struct fleet_rows r;
    int rc = fleet_db_exec(db, sql, p, np, &r, err, n);
    if (rc < 0) return rc;
    *out = r.nrows && fleet_cell(&r, 0, 0) ? strtoll(fleet_cell(&r, 0, 0), NULL, 10) : 0;
    fleet_rows_free(&r);
    return 0;
}

int fleet_store_version(struct fleet_db *db, int64_t *out, char *err, size_t n)
{
    return query_int(db, "SELECT max(version) FROM fleet_schema", NULL, 0, out, err, n);
}

static int migrate_locked(struct fleet_db *db, char *err, size_t n)
{
    int64_t have = 0;
    int rc = fleet_store_version(db, &have, err, n);
    if (rc < 0) return rc;
    if (have > FLEET_SCHEMA_VERSION) {
        fleet_db_err(err, n,
                     "the database has schema version %lld, newer than this exec-server knows "
                     "(%d): run a newer exec-server",
                     (long long)have, FLEET_SCHEMA_VERSION);
        return -EPROTO;
    }
    for (size_t i = 0; i < NMIGRATIONS && rc == 0; i++) {
        const struct migration *m = &migrations[i];
        if (m->version <= have) continue;
        for (const char *const *s = m->sql; *s && rc == 0; s++)
            rc = exec0(db, *s, err, n);
        struct fleet_param p[] = {FLEET_I(m->version), FLEET_S(m->name), FLEET_I(0)};
        if (rc == 0)
            rc = fleet_db_exec(db,
                               "INSERT INTO fleet_schema (version, name, applied_at) VALUES ($1, "
                               "$2, $3)",
                               p, 3, NULL, err, n);
    }
    if (rc < 0) return rc;
    /* The secret every node signs URLs with: made once, by whichever node is first. */
    uint8_t raw[FLEET_SECRET_LEN];
    char hex[2 * FLEET_SECRET_LEN + 1];
    crypto_random_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, hex);
    struct fleet_param sp[] = {FLEET_S(hex)};
    rc = fleet_db_exec(db,
                       "INSERT INTO fleet_settings (name, value) VALUES ('url_secret', $1) ON "
                       "CONFLICT (name) DO NOTHING",
                       sp, 1, NULL, err, n);
    memset(hex, 0, sizeof hex);
    memset(raw, 0, sizeof raw);
    return rc;
}

int fleet_store_migrate(struct fleet_db *db, char *err, size_t n)
{
    /* Everything under the lock, the schema table's creation included: two nodes
     * starting together on one PostgreSQL raced on CREATE TABLE IF NOT EXISTS, which
     * is not atomic there (the loser failed on its row type: `type "fleet_schema"
     * already exists`). DDL is transactional in both databases. */
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    if (strcmp(fleet_db_kind(db), "postgresql") == 0)
        rc = exec0(db, "SELECT pg_advisory_xact_lock(7261537)", err, n);
    if (rc == 0)
        rc = exec0(db,
                   "CREATE TABLE IF NOT EXISTS fleet_schema (version BIGINT PRIMARY KEY, name "
                   "TEXT NOT NULL, applied_at BIGINT NOT NULL)",
                   err, n);
    if (rc == 0) rc = migrate_locked(db, err, n);
    return fleet_db_end(db, rc, err, n);
}

int fleet_store_secret(struct fleet_db *db, uint8_t out[FLEET_SECRET_LEN], char *err, size_t n)
{
    struct fleet_rows r;
    int rc = fleet_db_exec(db, "SELECT value FROM fleet_settings WHERE name = 'url_secret'", NULL,
                           0, &r, err, n);
    if (rc < 0) return rc;
    const char *v = r.nrows ? fleet_cell(&r, 0, 0) : NULL;
    if (!v || strlen(v) != 2 * FLEET_SECRET_LEN || hex_decode(v, 2 * FLEET_SECRET_LEN, out) < 0) {
        fleet_db_err(err, n, "the database holds no valid fleet secret (not migrated?)");
        rc = -EINVAL;
    }
    fleet_rows_free(&r);
    return rc;
}

/* ---- tokens ---- */

int fleet_store_token_create(struct fleet_db *db, const char *env_pattern, enum fleet_role role,
                             int64_t expires_ms, int64_t now_ms, char *token, char *err, size_t n)
{
    uint8_t raw[40];
    char id[FLEET_TOKEN_ID_LEN + 1], digest[FLEET_DIGEST_HEX + 1];
    crypto_random_bytes(raw, sizeof raw);
    fleet_token_make(raw, token, id, digest);
    memset(raw, 0, sizeof raw);
    struct fleet_param p[] = {
        FLEET_S(id),          FLEET_S(digest),
        FLEET_S(env_pattern), FLEET_S(fleet_role_name(role)),
        FLEET_I(now_ms),      expires_ms ? FLEET_I(expires_ms) : FLEET_S(NULL)};
    int rc = fleet_db_exec(db,
                           "INSERT INTO fleet_tokens (id, secret_sha256, environment, role, "
                           "created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                           p, 6, NULL, err, n);
    if (rc < 0) memset(token, 0, FLEET_TOKEN_LEN);
    return rc;
}

int fleet_store_token_list(struct fleet_db *db, struct fleet_rows *rows, char *err, size_t n)
{
    return fleet_db_exec(db,
                         "SELECT id, environment, role, created_at, expires_at, revoked_at FROM "
                         "fleet_tokens ORDER BY created_at, id",
                         NULL, 0, rows, err, n);
}

int fleet_store_token_revoke(struct fleet_db *db, const char *id, int64_t now_ms, char *err,
                             size_t n)
{
    struct fleet_param p[] = {FLEET_S(id), FLEET_I(now_ms)};
    int rc = fleet_db_exec(db,
                           "UPDATE fleet_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE "
                           "id = $1",
                           p, 2, NULL, err, n);
    if (rc == 0 && fleet_db_changes(db) == 0) rc = -ENOENT;
    return rc;
}

const char *fleet_token_verdict_name(enum fleet_token_verdict v)
{
    switch (v) {
    case FLEET_TOKEN_OK: return "ok";
    case FLEET_TOKEN_MALFORMED: return "malformed_token";
    case FLEET_TOKEN_UNKNOWN: return "unknown_token";
    case FLEET_TOKEN_REVOKED: return "revoked_token";
    case FLEET_TOKEN_EXPIRED: return "expired_token";
    case FLEET_TOKEN_WRONG_ROLE: return "wrong_role";
    case FLEET_TOKEN_WRONG_ENV: return "wrong_environment";
    }
    return "unknown_token";
}

int fleet_store_token_check(struct fleet_db *db, const char *token, size_t len,
                            enum fleet_role role, const char *env, int64_t now_ms,
                            enum fleet_token_verdict *verdict, char *id, char *err, size_t n)
{
    char digest[FLEET_DIGEST_HEX + 1];
    id[0] = '\0';
    if (fleet_token_split(token, len, id, digest) < 0) {
        id[0] = '\0';
        *verdict = FLEET_TOKEN_MALFORMED;
        return 0;
    }
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(id)};
    int rc = fleet_db_exec(db,
                           "SELECT secret_sha256, environment, role, expires_at, revoked_at FROM "
                           "fleet_tokens WHERE id = $1",
                           p, 1, &r, err, n);
    if (rc < 0) return rc;
    if (r.nrows == 0 || !fleet_digest_equal(fleet_cell(&r, 0, 0), digest))
        *verdict = FLEET_TOKEN_UNKNOWN;
    else if (fleet_cell(&r, 0, 4))
        *verdict = FLEET_TOKEN_REVOKED;
    else if (fleet_cell(&r, 0, 3) && strtoll(fleet_cell(&r, 0, 3), NULL, 10) < now_ms)
        *verdict = FLEET_TOKEN_EXPIRED;
    else if (strcmp(fleet_cell(&r, 0, 2), fleet_role_name(role)) != 0)
        *verdict = FLEET_TOKEN_WRONG_ROLE;
    else if (!fleet_env_pattern_match(fleet_cell(&r, 0, 1), env, strlen(env)))
        *verdict = FLEET_TOKEN_WRONG_ENV;
    else
        *verdict = FLEET_TOKEN_OK;
    fleet_rows_free(&r);
    return 0;
}

/* ---- registrations and attachments ---- */

int fleet_store_register(struct fleet_db *db, const char *env, const char *reg,
                         const char *token_id, const char *key_json, int64_t max_envs,
                         int64_t now_ms, char *err, size_t n)
{
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    int64_t others = 0;
    struct fleet_param cp[] = {FLEET_S(token_id), FLEET_S(env)};
    rc = query_int(db,
                   "SELECT count(*) FROM fleet_registrations WHERE token_id = $1 AND environment "
                   "<> $2",
                   cp, 2, &others, err, n);
    if (rc == 0 && others >= max_envs) rc = -EDQUOT;
    struct fleet_param p[] = {FLEET_S(env), FLEET_S(reg), FLEET_S(token_id), FLEET_S(key_json),
                              FLEET_I(now_ms)};
    if (rc == 0)
        rc = fleet_db_exec(db,
                           "INSERT INTO fleet_registrations (environment, registration_id, "
                           "token_id, executor_key, registered_at, last_seen_at) VALUES ($1, $2, "
                           "$3, $4, $5, $5) ON CONFLICT (environment) DO UPDATE SET "
                           "registration_id = excluded.registration_id, token_id = "
                           "excluded.token_id, executor_key = excluded.executor_key, "
                           "registered_at = excluded.registered_at, last_seen_at = "
                           "excluded.last_seen_at",
                           p, 5, NULL, err, n);
    return fleet_db_end(db, rc, err, n);
}

int fleet_store_registration_check(struct fleet_db *db, const char *env, const char *reg,
                                   int64_t now_ms, char *err, size_t n)
{
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(env)};
    int rc = fleet_db_exec(db,
                           "SELECT r.registration_id, t.revoked_at, t.expires_at, t.id FROM "
                           "fleet_registrations r LEFT JOIN fleet_tokens t ON t.id = r.token_id "
                           "WHERE r.environment = $1",
                           p, 1, &r, err, n);
    if (rc < 0) return rc;
    if (r.nrows == 0 || strcmp(fleet_cell(&r, 0, 0), reg) != 0)
        rc = -ESTALE;
    else if (!fleet_cell(&r, 0, 3) || fleet_cell(&r, 0, 1) ||
             (fleet_cell(&r, 0, 2) && strtoll(fleet_cell(&r, 0, 2), NULL, 10) < now_ms))
        rc = -EKEYREVOKED;
    fleet_rows_free(&r);
    return rc;
}

int fleet_store_attach(struct fleet_db *db, const char *env, const char *reg, const char *node,
                       int64_t now_ms, char *err, size_t n)
{
    static const char *const record[] = {
        ("INSERT INTO fleet_attachments (environment, registration_id, node_id, attached_at, "
         "streams) VALUES ($1, $2, $3, $4, 0) ON CONFLICT (environment) DO UPDATE SET "
         "registration_id = excluded.registration_id, node_id = excluded.node_id, attached_at = "
         "excluded.attached_at, streams = 0"),
        "UPDATE fleet_registrations SET last_seen_at = $4 WHERE environment = $1",
    };
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    rc = fleet_store_registration_check(db, env, reg, now_ms, err, n);
    struct fleet_param p[] = {FLEET_S(env), FLEET_S(reg), FLEET_S(node), FLEET_I(now_ms)};
    if (rc == 0) rc = fleet_db_exec_all(db, record, 2, p, 4, err, n);
    return fleet_db_end(db, rc, err, n);
}

int fleet_store_detach(struct fleet_db *db, const char *env, const char *node, int64_t now_ms,
                       char *err, size_t n)
{
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    struct fleet_param p[] = {FLEET_S(env), FLEET_S(node), FLEET_I(now_ms)};
    rc = fleet_db_exec(db, "DELETE FROM fleet_attachments WHERE environment = $1 AND node_id = $2",
                       p, 2, NULL, err, n);
    if (rc == 0 && fleet_db_changes(db) > 0)
        rc = fleet_db_exec(db,
                           "UPDATE fleet_registrations SET last_seen_at = $3 WHERE environment = "
                           "$1",
                           p, 3, NULL, err, n);
    return fleet_db_end(db, rc, err, n);
}

void fleet_location_clear(struct fleet_location *l)
{
    free(l->registration);
    free(l->key_json);
    free(l->node_url);
    free(l->node_id);
    memset(l, 0, sizeof *l);
}

int fleet_store_locate(struct fleet_db *db, const char *env, int64_t alive_after_ms,
                       struct fleet_location *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(env), FLEET_I(alive_after_ms)};
    int rc = fleet_db_exec(db,
                           "SELECT a.registration_id, r.executor_key, nd.url, nd.id FROM "
                           "fleet_attachments a JOIN fleet_registrations r ON r.environment = "
                           "a.environment AND r.registration_id = a.registration_id JOIN "
                           "fleet_nodes nd ON nd.id = a.node_id WHERE a.environment = $1 AND "
                           "nd.heartbeat_at >= $2",
                           p, 2, &r, err, n);
    if (rc < 0) return rc;
    if (r.nrows == 0) {
        rc = -ENOENT;
    } else {
        out->registration = xstrdup(fleet_cell(&r, 0, 0));
        out->key_json = xstrdup(fleet_cell(&r, 0, 1));
        out->node_url = xstrdup(fleet_cell(&r, 0, 2));
        out->node_id = xstrdup(fleet_cell(&r, 0, 3));
    }
    fleet_rows_free(&r);
    return rc;
}

/* ---- bundles ---- */

int fleet_store_bundle_add(struct fleet_db *db, const char *nonce, const char *env,
                           int64_t expires_ms, int64_t max_pending, int64_t now_ms, char *err,
                           size_t n)
{
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    int64_t pending = 0;
    struct fleet_param cp[] = {FLEET_S(env), FLEET_I(now_ms)};
    rc = query_int(db,
                   "SELECT count(*) FROM fleet_bundles WHERE environment = $1 AND expires_at >= "
                   "$2",
                   cp, 2, &pending, err, n);
    if (rc == 0 && pending >= max_pending) rc = -EDQUOT;
    struct fleet_param p[] = {FLEET_S(nonce), FLEET_S(env), FLEET_I(expires_ms)};
    if (rc == 0)
        rc = fleet_db_exec(db,
                           "INSERT INTO fleet_bundles (nonce, environment, expires_at) VALUES "
                           "($1, $2, $3)",
                           p, 3, NULL, err, n);
    return fleet_db_end(db, rc, err, n);
}

int fleet_store_bundle_take(struct fleet_db *db, const char *nonce, const char *env, int64_t now_ms,
                            char *err, size_t n)
{
    struct fleet_param p[] = {FLEET_S(nonce), FLEET_S(env), FLEET_I(now_ms)};
    int rc = fleet_db_exec(db,
                           "DELETE FROM fleet_bundles WHERE nonce = $1 AND environment = $2 AND "
                           "expires_at >= $3",
                           p, 3, NULL, err, n);
    if (rc == 0 && fleet_db_changes(db) != 1) rc = -ENOENT;
    return rc;
}

int fleet_store_environments(struct fleet_db *db, struct fleet_rows *rows, char *err, size_t n)
{
    return fleet_db_exec(db,
                         "SELECT r.environment, r.registration_id, r.registered_at, "
                         "r.last_seen_at, a.node_id, nd.url, nd.heartbeat_at, a.streams FROM "
                         "fleet_registrations r LEFT JOIN fleet_attachments a ON a.environment "
                         "= r.environment LEFT JOIN fleet_nodes nd ON nd.id = a.node_id ORDER BY "
                         "r.environment",
                         NULL, 0, rows, err, n);
}
