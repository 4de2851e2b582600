/* fleet_store_nodes: the node heartbeat of fleet_store (see fleet_store.h): one
 * transaction that keeps the node alive and the attachments table true to what the
 * node really holds. Set-based where the rows are many (10,000 idle executors on one
 * node must cost a few queries, not 10,000 round trips to PostgreSQL); per row only
 * for the differences, which are few unless the node was cut off from the database. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/random.h"
#include "fleet/fleet_store.h"
#include "util/mem.h"
#include "util/strmap.h"

#define DEAD_NODE_FORGET_MS (10 * 60 * 1000) /* a dead node's row stays this long */

static void lost_add(char ***lost, size_t *nlost, const char *env)
{
    *lost = xrealloc(*lost, (*nlost + 1) * sizeof **lost);
    (*lost)[(*nlost)++] = xstrdup(env);
}

/* A held environment missing from the table: attach it again unless a live node
 * holds it or its registration or token is no longer good. */
static int reclaim(struct fleet_db *db, const struct fleet_held *h, const char *node,
                   int64_t dead_before, int64_t now, char ***lost, size_t *nlost, char *err,
                   size_t n)
{
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(h->env), FLEET_I(dead_before)};
    int rc = fleet_db_exec(db,
                           "SELECT a.node_id FROM fleet_attachments a JOIN fleet_nodes nd ON "
                           "nd.id = a.node_id WHERE a.environment = $1 AND nd.heartbeat_at >= $2",
                           p, 2, &r, err, n);
    if (rc < 0) return rc;
    bool elsewhere = r.nrows > 0 && strcmp(fleet_cell(&r, 0, 0), node) != 0;
    fleet_rows_free(&r);
    if (!elsewhere) {
        rc = fleet_store_registration_check(db, h->env, h->reg, now, err, n);
        if (rc == -ESTALE || rc == -EKEYREVOKED)
            elsewhere = true;
        else if (rc < 0)
            return rc;
    }
    if (elsewhere) {
        lost_add(lost, nlost, h->env);
        return 0;
    }
    struct fleet_param ap[] = {FLEET_S(h->env), FLEET_S(h->reg), FLEET_S(node), FLEET_I(now),
                               FLEET_I(h->streams)};
    return fleet_db_exec(db,
                         "INSERT INTO fleet_attachments (environment, registration_id, node_id, "
                         "attached_at, streams) VALUES ($1, $2, $3, $4, $5) ON CONFLICT "
                         "(environment) DO UPDATE SET registration_id = excluded.registration_id, "
                         "node_id = excluded.node_id, attached_at = excluded.attached_at, "
                         "streams = excluded.streams",
                         ap, 5, NULL, err, n);
}

/* Rows of this node that are no longer good (registration superseded or gone, token
 * revoked or expired): their environments are lost, the rows go. */
static int drop_bad(struct fleet_db *db, const char *node, int64_t now, struct strmap *held,
                    char ***lost, size_t *nlost, char *err, size_t n)
{
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(node), FLEET_I(now)};
    int rc = fleet_db_exec(db,
                           "SELECT a.environment FROM fleet_attachments a LEFT JOIN "
                           "fleet_registrations r ON r.environment = a.environment AND "
                           "r.registration_id = a.registration_id LEFT JOIN fleet_tokens t ON "
                           "t.id = r.token_id WHERE a.node_id = $1 AND (r.environment IS NULL OR "
                           "t.id IS NULL OR t.revoked_at IS NOT NULL OR (t.expires_at IS NOT "
                           "NULL AND t.expires_at < $2))",
                           p, 2, &r, err, n);
    for (size_t i = 0; rc == 0 && i < r.nrows; i++) {
        const char *env = fleet_cell(&r, i, 0);
        struct fleet_param dp[] = {FLEET_S(env), FLEET_S(node)};
        rc = fleet_db_exec(db,
                           "DELETE FROM fleet_attachments WHERE environment = $1 AND node_id = $2",
                           dp, 2, NULL, err, n);
        if (rc == 0 && strmap_get(held, env, strlen(env))) {
            lost_add(lost, nlost, env);
            strmap_del(held, env, strlen(env));
        }
    }
    fleet_rows_free(&r);
    return rc;
}

/* The rows of this node against held[]: extra rows go, changed stream counts are
 * written, missing ones are reclaimed. held (a map env -> struct fleet_held) loses
 * every entry it finds a row for. */
static int reconcile(struct fleet_db *db, const char *node, struct strmap *held,
                     int64_t dead_before, int64_t now, char ***lost, size_t *nlost, char *err,
                     size_t n)
{
    struct fleet_rows r;
    struct fleet_param p[] = {FLEET_S(node)};
    int rc = fleet_db_exec(db, "SELECT environment FROM fleet_attachments WHERE node_id = $1", p, 1,
                           &r, err, n);
    for (size_t i = 0; rc == 0 && i < r.nrows; i++) {
        const char *env = fleet_cell(&r, i, 0);
        const struct fleet_held *h = strmap_del(held, env, strlen(env));
        struct fleet_param dp[] = {FLEET_S(env), FLEET_S(node), FLEET_I(h ? h->streams : 0)};
        if (!h)
            rc = fleet_db_exec(db,
                               "DELETE FROM fleet_attachments WHERE environment = $1 AND node_id "
                               "= $2",
                               dp, 2, NULL, err, n);
        else if (h->streams_changed)
            rc = fleet_db_exec(db,
                               "UPDATE fleet_attachments SET streams = $3 WHERE environment = $1 "
                               "AND node_id = $2",
                               dp, 3, NULL, err, n);
    }
    fleet_rows_free(&r);
    size_t pos = 0;
    const struct fleet_held *h;
    while (rc == 0 && (h = strmap_next(held, &pos)))
        rc = reclaim(db, h, node, dead_before, now, lost, nlost, err, n);
    return rc;
}

static int heartbeat_txn(struct fleet_db *db, const char *node, const char *url,
                         struct strmap *held, int64_t dead_before, int64_t now, char ***lost,
                         size_t *nlost, char *err, size_t n)
{
    struct fleet_param np[] = {FLEET_S(node), FLEET_S(url), FLEET_I(now)};
    int rc = fleet_db_exec(db,
                           "INSERT INTO fleet_nodes (id, url, started_at, heartbeat_at) VALUES "
                           "($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET url = excluded.url, "
                           "heartbeat_at = excluded.heartbeat_at",
                           np, 3, NULL, err, n);
    if (rc == 0) rc = drop_bad(db, node, now, held, lost, nlost, err, n);
    if (rc == 0) rc = reconcile(db, node, held, dead_before, now, lost, nlost, err, n);
    /* Whoever sees a dead node first cleans up after it. */
    static const char *const cleanup[] = {
        ("DELETE FROM fleet_attachments WHERE node_id IN (SELECT id FROM fleet_nodes WHERE "
         "heartbeat_at < $1)"),
        "DELETE FROM fleet_nodes WHERE heartbeat_at < $2",
        "DELETE FROM fleet_bundles WHERE expires_at < $3",
    };
    struct fleet_param dp[] = {FLEET_I(dead_before), FLEET_I(dead_before - DEAD_NODE_FORGET_MS),
                               FLEET_I(now)};
    if (rc == 0) rc = fleet_db_exec_all(db, cleanup, 3, dp, 3, err, n);
    return rc;
}

int fleet_store_heartbeat(struct fleet_db *db, const char *node, const char *url,
                          const struct fleet_held *held, size_t nheld, int64_t dead_before_ms,
                          int64_t now_ms, char ***lost, size_t *nlost, char *err, size_t n)
{
    *lost = NULL;
    *nlost = 0;
    uint8_t seed[16];
    crypto_random_bytes(seed, sizeof seed);
    struct strmap map;
    strmap_init(&map, seed);
    for (size_t i = 0; i < nheld; i++)
        strmap_put(&map, held[i].env, strlen(held[i].env), (void *)&held[i]);
    int rc = fleet_db_begin(db, true, err, n);
    if (rc == 0)
        rc = fleet_db_end(
            db, heartbeat_txn(db, node, url, &map, dead_before_ms, now_ms, lost, nlost, err, n),
            err, n);
    strmap_free(&map);
    if (rc < 0) {
        for (size_t i = 0; i < *nlost; i++)
            free((*lost)[i]);
        free(*lost);
        *lost = NULL;
        *nlost = 0;
    }
    return rc;
}

int fleet_store_node_leave(struct fleet_db *db, const char *node, int64_t now_ms, char *err,
                           size_t n)
{
    static const char *const leave[] = {
        ("UPDATE fleet_registrations SET last_seen_at = $2 WHERE environment IN (SELECT "
         "environment FROM fleet_attachments WHERE node_id = $1)"),
        "DELETE FROM fleet_attachments WHERE node_id = $1",
        "DELETE FROM fleet_nodes WHERE id = $1",
    };
    int rc = fleet_db_begin(db, true, err, n);
    if (rc < 0) return rc;
    struct fleet_param p[] = {FLEET_S(node), FLEET_I(now_ms)};
    return fleet_db_end(db, fleet_db_exec_all(db, leave, 3, p, 2, err, n), err, n);
}
