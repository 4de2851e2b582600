/* fleet_db: one connection to the registry's database, SQLite or PostgreSQL, behind
 * one small interface, so the SQL of fleet_store is written once.
 *
 *   sqlite:PATH                   the embedded default: one file, WAL journal (readers
 *                                 never wait for the writer), synchronous=NORMAL
 *                                 (a commit survives a crash of the process; a power
 *                                 cut may lose the last commits, never the file), a
 *                                 2 s busy timeout for writers of other processes
 *                                 (`exec-server registry token ...`)
 *   postgresql://... postgres://  several registry nodes on one database; any libpq
 *                                 connection URI (host=/socket/dir in the query works)
 *
 * Both libraries are loaded with dlopen on first use (libsqlite3.so.0, libpq.so.5),
 * like libssl and libcurl (transport/tls.c says why: an exec-server that is not a
 * registry maps neither). SQL is the common subset with `$1, $2 ...` placeholders;
 * parameters are typed (text or 64-bit integer) and results come back as text.
 *
 * A connection belongs to one thread at a time (the registry's database thread,
 * fleet_worker, or a command-line tool) and blocks: never call it on the loop. */
#ifndef EXEC_FLEET_DB_H
#define EXEC_FLEET_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fleet_db;

/* One parameter: text (s, NULL for SQL NULL) or an integer (is_int). */
struct fleet_param {
    const char *s;
    int64_t i;
    bool is_int;
};
#define FLEET_S(x) ((struct fleet_param){.s = (x)})
#define FLEET_I(x) ((struct fleet_param){.i = (int64_t)(x), .is_int = true})

/* A result: nrows x ncols cells of text, NULL for SQL NULL (all owned). */
struct fleet_rows {
    size_t nrows, ncols;
    char **cell; /* cell[r * ncols + c] */
};
static inline const char *fleet_cell(const struct fleet_rows *r, size_t row, size_t col)
{
    return r->cell[row * r->ncols + col];
}
void fleet_rows_free(struct fleet_rows *r);

/* Errors every call returns (negative):
 *   -EIO     the database is unavailable (connection lost or refused, the file
 *            unreadable, the disk full): retry later, after fleet_db_reconnect
 *   -EBUSY   locked by another writer past the busy timeout, or a serialization
 *            conflict: retry
 *   -EEXIST  a unique key is taken
 *   -EINVAL  any other SQL error (a bug, or a schema that is not ours)
 * err (when not NULL) gets the database's own text. */

/* Connects (SQLite: opens and sets the pragmas). Returns 0 with *out, or a negative
 * error with err set: -EINVAL for a URL that is neither form, -ELIBACC when the
 * library cannot be loaded, -EIO when the database cannot be reached or opened. */
int fleet_db_open(const char *url, struct fleet_db **out, char *err, size_t n);
void fleet_db_close(struct fleet_db *db);

/* url as a message may show it: a password in a PostgreSQL URI (user:PASSWORD@host,
 * password=PASSWORD) written as ***, into out (n bytes). Returns whether it held one.
 * Pure. */
bool fleet_db_url_redact(const char *url, char *out, size_t n);

/* "sqlite" or "postgresql". */
const char *fleet_db_kind(const struct fleet_db *db);
/* A description for logs: the SQLite path, or PostgreSQL's database, user and host
 * (never a password). Owned by db. */
const char *fleet_db_where(const struct fleet_db *db);

/* Runs one statement with params; rows (may be NULL) receives its result. */
int fleet_db_exec(struct fleet_db *db, const char *sql, const struct fleet_param *params,
                  size_t nparams, struct fleet_rows *rows, char *err, size_t n);
/* Runs statements sql[0..count) in order with the same params (each uses the ones it
 * names; the others are left out), stopping at the first error. */
int fleet_db_exec_all(struct fleet_db *db, const char *const *sql, size_t count,
                      const struct fleet_param *params, size_t nparams, char *err, size_t n);
/* Rows changed by the last INSERT, UPDATE or DELETE. */
int64_t fleet_db_changes(const struct fleet_db *db);

/* Transactions: begin (write: take the write lock at once, so two writers never
 * deadlock upgrading a read lock; SQLite's BEGIN IMMEDIATE), commit, rollback
 * (rollback never fails in a way the caller can act on). */
int fleet_db_begin(struct fleet_db *db, bool write, char *err, size_t n);
int fleet_db_commit(struct fleet_db *db, char *err, size_t n);
void fleet_db_rollback(struct fleet_db *db);
/* Ends the transaction after its work returned rc: commits when rc is 0, else rolls
 * back. Returns rc, or the commit's error. */
int fleet_db_end(struct fleet_db *db, int rc, char *err, size_t n);

/* The registry's own connection: upkeep happens only when fleet_db_maintain says so
 * (SQLite: no automatic WAL checkpoints inside a request's commit). */
int fleet_db_serve_mode(struct fleet_db *db, char *err, size_t n);
/* Periodic upkeep between requests (SQLite: a passive WAL checkpoint). */
int fleet_db_maintain(struct fleet_db *db, char *err, size_t n);

/* Whether the connection is known to be lost (PostgreSQL), and a new attempt to
 * connect (0 or -EIO). SQLite connections never break this way. */
bool fleet_db_broken(const struct fleet_db *db);
int fleet_db_reconnect(struct fleet_db *db, char *err, size_t n);

/* Sets err (may be NULL) to a formatted message: the error texts of fleet_db and the
 * layers above it. */
void fleet_db_err(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
