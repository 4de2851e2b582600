/* fleet_db: the backend-neutral half (see fleet_db.h): choosing the backend from the
 * URL, transactions and result rows. */
#include "fleet/fleet_db.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_db_internal.h"
#include "util/mem.h"

struct fleet_db {
    const struct fleet_db_backend *be;
    void *h;         /* the backend's connection */
    char where[256]; /* for logs */
};

void fleet_db_err(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* Appends s to out[*k], keeping room for the NUL (what does not fit is cut). */
static void put_str(char *out, size_t n, size_t *k, const char *s, size_t len)
{
    for (size_t i = 0; i < len && *k + 1 < n; i++)
        out[(*k)++] = s[i];
}

bool fleet_db_url_redact(const char *url, char *out, size_t n)
{
    bool pg = strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
    const char *auth = pg ? strstr(url, "://") + 3 : NULL;
    size_t an = auth ? strcspn(auth, "/?#") : 0;
    const char *at = auth ? memchr(auth, '@', an) : NULL;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    const char *query = pg ? strchr(url, '?') : NULL;
    bool found = false;
    size_t k = 0;
    for (const char *p = url; *p;) {
        if (p == colon) { /* user:PASSWORD@ */
            put_str(out, n, &k, ":***", 4);
            p = at;
            found = true;
        } else if (query && p > query && (p[-1] == '?' || p[-1] == '&') &&
                   strncmp(p, "password=", 9) == 0) {
            put_str(out, n, &k, "password=***", 12);
            p += 9 + strcspn(p + 9, "&#");
            found = true;
        } else {
            put_str(out, n, &k, p++, 1);
        }
    }
    if (n) out[k] = '\0';
    return found;
}

int fleet_db_dl_load(struct fleet_dl *dl, const char *lib, const char *package,
                     const char *const *names, void **const *slots, size_t count, char *err,
                     size_t n)
{
    if (dl->rc == 1) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        dl->rc = h ? 0 : -ELIBACC;
        if (!h)
            snprintf(dl->why, sizeof dl->why, "cannot load %s (Debian: %s): %s", lib, package,
                     dlerror());
        for (size_t i = 0; h && i < count && dl->rc == 0; i++)
            if (!(*slots[i] = dlsym(h, names[i]))) {
                snprintf(dl->why, sizeof dl->why, "%s has no %s (too old)", lib, names[i]);
                dl->rc = -ELIBACC;
            }
    }
    if (dl->rc < 0) fleet_db_err(err, n, "%s", dl->why);
    return dl->rc;
}

void fleet_rows_free(struct fleet_rows *r)
{
    if (!r->cell) return;
    for (size_t i = 0; i < r->nrows * r->ncols; i++)
        free(r->cell[i]);
    free(r->cell);
    memset(r, 0, sizeof *r);
}

int fleet_db_open(const char *url, struct fleet_db **out, char *err, size_t n)
{
    const struct fleet_db_backend *be;
    const char *target = url;
    if (strncmp(url, "sqlite:", 7) == 0) {
        be = &fleet_db_sqlite;
        target = url + 7;
        if (!*target) {
            fleet_db_err(err, n, "sqlite: needs a file path (sqlite:/var/lib/exec-registry.db)");
            return -EINVAL;
        }
    } else if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0) {
        be = &fleet_db_pg;
    } else {
        fleet_db_err(err, n, "unknown database URL (expected sqlite:PATH or postgresql://...)");
        return -EINVAL;
    }
    int code = -EIO;
    void *h = be->open(target, &code, err, n);
    if (!h) return code;
    struct fleet_db *db = xcalloc(1, sizeof *db);
    db->be = be;
    db->h = h;
    be->where(h, db->where, sizeof db->where);
    *out = db;
    return 0;
}

void fleet_db_close(struct fleet_db *db)
{
    if (!db) return;
    db->be->close(db->h);
    free(db);
}

const char *fleet_db_kind(const struct fleet_db *db)
{
    return db->be->kind;
}

const char *fleet_db_where(const struct fleet_db *db)
{
    return db->where;
}

int fleet_db_exec(struct fleet_db *db, const char *sql, const struct fleet_param *params,
                  size_t nparams, struct fleet_rows *rows, char *err, size_t n)
{
    if (rows) memset(rows, 0, sizeof *rows);
    return db->be->exec(db->h, sql, params, nparams, rows, err, n);
}

int fleet_db_exec_all(struct fleet_db *db, const char *const *sql, size_t count,
                      const struct fleet_param *params, size_t nparams, char *err, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = fleet_db_exec(db, sql[i], params, nparams, NULL, err, n);
    return rc;
}

int64_t fleet_db_changes(const struct fleet_db *db)
{
    return db->be->changes(db->h);
}

int fleet_db_begin(struct fleet_db *db, bool write, char *err, size_t n)
{
    return fleet_db_exec(db, write ? db->be->begin_write : db->be->begin_read, NULL, 0, NULL, err,
                         n);
}

int fleet_db_commit(struct fleet_db *db, char *err, size_t n)
{
    int r = fleet_db_exec(db, "COMMIT", NULL, 0, NULL, err, n);
    if (r < 0) fleet_db_rollback(db);
    return r;
}

int fleet_db_end(struct fleet_db *db, int rc, char *err, size_t n)
{
    if (rc < 0) {
        fleet_db_rollback(db);
        return rc;
    }
    return fleet_db_commit(db, err, n);
}

void fleet_db_rollback(struct fleet_db *db)
{
    (void)fleet_db_exec(db, "ROLLBACK", NULL, 0, NULL, NULL, 0);
}

int fleet_db_serve_mode(struct fleet_db *db, char *err, size_t n)
{
    struct fleet_rows r;
    int rc = db->be->serve_mode ? fleet_db_exec(db, db->be->serve_mode, NULL, 0, &r, err, n) : 0;
    if (db->be->serve_mode && rc == 0) fleet_rows_free(&r);
    return rc;
}

int fleet_db_maintain(struct fleet_db *db, char *err, size_t n)
{
    struct fleet_rows r;
    int rc = db->be->maintain ? fleet_db_exec(db, db->be->maintain, NULL, 0, &r, err, n) : 0;
    if (db->be->maintain && rc == 0) fleet_rows_free(&r);
    return rc;
}

bool fleet_db_broken(const struct fleet_db *db)
{
    return db->be->broken(db->h);
}

int fleet_db_reconnect(struct fleet_db *db, char *err, size_t n)
{
    return db->be->reconnect(db->h, err, n);
}
