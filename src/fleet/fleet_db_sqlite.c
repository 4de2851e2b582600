/* fleet_db_sqlite: the SQLite backend of fleet_db (libsqlite3.so.0 through dlopen).
 *
 * Statements are prepared once per connection and kept (the SQL of fleet_store is a
 * fixed set of string literals), so a request costs a bind and a step, not a parse.
 * Parameters `$N` are bound by name, so the same text serves PostgreSQL. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_db_internal.h"
#include "util/mem.h"

#define SQ_FUNCS(X)                                                                                \
    X(sqlite3_open_v2)                                                                             \
    X(sqlite3_close_v2)                                                                            \
    X(sqlite3_extended_result_codes)                                                               \
    X(sqlite3_busy_timeout)                                                                        \
    X(sqlite3_prepare_v2)                                                                          \
    X(sqlite3_bind_parameter_index)                                                                \
    X(sqlite3_bind_text)                                                                           \
    X(sqlite3_bind_int64)                                                                          \
    X(sqlite3_bind_null)                                                                           \
    X(sqlite3_step)                                                                                \
    X(sqlite3_column_count)                                                                        \
    X(sqlite3_column_text)                                                                         \
    X(sqlite3_column_type)                                                                         \
    X(sqlite3_reset)                                                                               \
    X(sqlite3_clear_bindings)                                                                      \
    X(sqlite3_finalize)                                                                            \
    X(sqlite3_changes64)                                                                           \
    X(sqlite3_errmsg)                                                                              \
    X(sqlite3_extended_errcode)

#define SQ_SLOT(name) __typeof__(name) *name;
static struct {
    SQ_FUNCS(SQ_SLOT)
} sq;
#undef SQ_SLOT

#define SQ_NAME(name) #name,
#define SQ_ADDR(name) (void **)&sq.name,
static const char *const sq_names[] = {SQ_FUNCS(SQ_NAME)};
static void **const sq_slots[] = {SQ_FUNCS(SQ_ADDR)};
#undef SQ_NAME
#undef SQ_ADDR

static int sq_load(char *err, size_t n)
{
    static struct fleet_dl dl = {.rc = 1};
    return fleet_db_dl_load(&dl, "libsqlite3.so.0", "libsqlite3-0", sq_names, sq_slots,
                            sizeof sq_names / sizeof sq_names[0], err, n);
}

#define SQ_CACHE 64

struct sq_conn {
    sqlite3 *db;
    char path[200];
    struct {
        const char *sql; /* a string literal of fleet_store: compared by address and text */
        sqlite3_stmt *st;
    } cache[SQ_CACHE];
    size_t ncache;
};

/* The fleet_db error for a SQLite result code. */
static int sq_code(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return -EBUSY;
    case SQLITE_CONSTRAINT:
        return rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY ? -EEXIST
                                                                                    : -EINVAL;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_FULL:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PERM:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL: return -EIO;
    default: return -EINVAL;
    }
}

static int sq_fail(struct sq_conn *c, int rc, char *err, size_t n)
{
    fleet_db_err(err, n, "%s", sq.sqlite3_errmsg(c->db));
    return sq_code(rc);
}

static sqlite3_stmt *sq_prepare(struct sq_conn *c, const char *sql, int *rc)
{
    for (size_t i = 0; i < c->ncache; i++)
        if (c->cache[i].sql == sql && strcmp(c->cache[i].sql, sql) == 0) return c->cache[i].st;
    sqlite3_stmt *st = NULL;
    *rc = sq.sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (*rc != SQLITE_OK) return NULL;
    if (c->ncache < SQ_CACHE) {
        c->cache[c->ncache].sql = sql;
        c->cache[c->ncache++].st = st;
    }
    return st;
}

static void sq_release(struct sq_conn *c, sqlite3_stmt *st)
{
    sq.sqlite3_reset(st);
    sq.sqlite3_clear_bindings(st);
    for (size_t i = 0; i < c->ncache; i++)
        if (c->cache[i].st == st) return;
    sq.sqlite3_finalize(st);
}

static int sq_bind(sqlite3_stmt *st, const struct fleet_param *p, size_t np)
{
    for (size_t i = 0; i < np; i++) {
        char name[24];
        snprintf(name, sizeof name, "$%zu", i + 1);
        int idx = sq.sqlite3_bind_parameter_index(st, name);
        if (idx == 0) continue; /* a statement may leave a parameter out */
        int rc = p[i].is_int ? sq.sqlite3_bind_int64(st, idx, p[i].i)
                 : p[i].s    ? sq.sqlite3_bind_text(st, idx, p[i].s, -1, SQLITE_TRANSIENT)
                             : sq.sqlite3_bind_null(st, idx);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* Appends the current row to rows. */
static void sq_take_row(sqlite3_stmt *st, struct fleet_rows *rows)
{
    size_t nc = (size_t)sq.sqlite3_column_count(st);
    rows->ncols = nc;
    rows->cell = xrealloc(rows->cell, (rows->nrows + 1) * nc * sizeof *rows->cell);
    for (size_t k = 0; k < nc; k++) {
        const unsigned char *t = sq.sqlite3_column_type(st, (int)k) == SQLITE_NULL
                                     ? NULL
                                     : sq.sqlite3_column_text(st, (int)k);
        rows->cell[rows->nrows * nc + k] = t ? xstrdup((const char *)t) : NULL;
    }
    rows->nrows++;
}

static int sq_exec(void *h, const char *sql, const struct fleet_param *params, size_t np,
                   struct fleet_rows *rows, char *err, size_t n)
{
    struct sq_conn *c = h;
    int rc;
    sqlite3_stmt *st = sq_prepare(c, sql, &rc);
    if (!st) return sq_fail(c, rc, err, n);
    rc = sq_bind(st, params, np);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        rc = sq.sqlite3_step(st);
        if (rc == SQLITE_ROW && rows) sq_take_row(st, rows);
    }
    int result = rc == SQLITE_DONE ? 0 : sq_fail(c, sq.sqlite3_extended_errcode(c->db), err, n);
    if (result < 0 && rows) fleet_rows_free(rows);
    sq_release(c, st);
    return result;
}

static void sq_close(void *h)
{
    struct sq_conn *c = h;
    for (size_t i = 0; i < c->ncache; i++)
        sq.sqlite3_finalize(c->cache[i].st);
    sq.sqlite3_close_v2(c->db);
    free(c);
}

static void *sq_open(const char *path, int *code, char *err, size_t n)
{
    if ((*code = sq_load(err, n)) < 0) return NULL;
    struct sq_conn *c = xcalloc(1, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    int rc = sq.sqlite3_open_v2(
        path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        fleet_db_err(err, n, "cannot open %s: %s", path,
                     c->db ? sq.sqlite3_errmsg(c->db) : "out of memory");
        *code = -EIO;
        sq_close(c);
        return NULL;
    }
    sq.sqlite3_extended_result_codes(c->db, 1);
    sq.sqlite3_busy_timeout(c->db, 2000);
    /* WAL: readers never wait for the writer, and a commit is one append; NORMAL
     * syncs at checkpoints, not every commit. */
    static const char *const pragmas[] = {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"};
    for (size_t i = 0; i < 2; i++) {
        struct fleet_rows r = {0};
        char e[200];
        int pr = sq_exec(c, pragmas[i], NULL, 0, &r, e, sizeof e);
        bool wal_refused = i == 0 && pr == 0 && r.nrows == 1 && fleet_cell(&r, 0, 0) &&
                           strcmp(fleet_cell(&r, 0, 0), "wal") != 0;
        fleet_rows_free(&r);
        if (pr < 0 || wal_refused) {
            fleet_db_err(err, n, "cannot use %s: %s", path,
                         pr < 0 ? e : "the WAL journal is not available there");
            *code = pr < 0 ? pr : -EIO;
            sq_close(c);
            return NULL;
        }
    }
    return c;
}

static int64_t sq_changes(void *h)
{
    return sq.sqlite3_changes64(((struct sq_conn *)h)->db);
}

static bool sq_broken(void *h)
{
    return false;
}

static int sq_reconnect(void *h, char *err, size_t n)
{
    return 0;
}

static void sq_where(void *h, char *out, size_t n)
{
    snprintf(out, n, "sqlite:%s", ((struct sq_conn *)h)->path);
}

const struct fleet_db_backend fleet_db_sqlite = {
    .kind = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .exec = sq_exec,
    .changes = sq_changes,
    .begin_read = "BEGIN",
    .begin_write = "BEGIN IMMEDIATE",
    /* A checkpoint syncs the WAL and the database (tens of ms on some disks): the
     * registry's connection makes none on its own, so no request waits behind one; the
     * heartbeat runs a passive one instead, between requests. */
    .serve_mode = "PRAGMA wal_autocheckpoint=0",
    .maintain = "PRAGMA wal_checkpoint(PASSIVE)",
    .broken = sq_broken,
    .reconnect = sq_reconnect,
    .where = sq_where,
};
