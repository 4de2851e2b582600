/* fleet_db_pg: the PostgreSQL backend of fleet_db (libpq.so.5 through dlopen).
 *
 * Blocking libpq calls on the caller's thread (the registry's database thread). The
 * connection gets a 5 s connect timeout, TCP keepalives and a 5 s statement timeout
 * unless the URL says otherwise, so a server that vanishes turns into an error within
 * seconds rather than a thread stuck forever. Parameters are sent as text with their
 * types (int8 or text) named, so `$1 - 15000` needs no casts in the shared SQL. */
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_db_internal.h"
#include "util/mem.h"

#define PQ_FUNCS(X)                                                                                \
    X(PQconnectdbParams)                                                                           \
    X(PQstatus)                                                                                    \
    X(PQerrorMessage)                                                                              \
    X(PQfinish)                                                                                    \
    X(PQreset)                                                                                     \
    X(PQexecParams)                                                                                \
    X(PQresultStatus)                                                                              \
    X(PQresultErrorField)                                                                          \
    X(PQresultErrorMessage)                                                                        \
    X(PQntuples)                                                                                   \
    X(PQnfields)                                                                                   \
    X(PQgetvalue)                                                                                  \
    X(PQgetisnull)                                                                                 \
    X(PQcmdTuples)                                                                                 \
    X(PQclear)                                                                                     \
    X(PQsetNoticeProcessor)                                                                        \
    X(PQdb)                                                                                        \
    X(PQuser)                                                                                      \
    X(PQhost)

#define PQ_SLOT(name) __typeof__(name) *name;
static struct {
    PQ_FUNCS(PQ_SLOT)
} pq;
#undef PQ_SLOT

#define PQ_NAME(name) #name,
#define PQ_ADDR(name) (void **)&pq.name,
static const char *const pq_names[] = {PQ_FUNCS(PQ_NAME)};
static void **const pq_slots[] = {PQ_FUNCS(PQ_ADDR)};
#undef PQ_NAME
#undef PQ_ADDR

static int pq_load(char *err, size_t n)
{
    static struct fleet_dl dl = {.rc = 1};
    return fleet_db_dl_load(&dl, "libpq.so.5", "libpq5", pq_names, pq_slots,
                            sizeof pq_names / sizeof pq_names[0], err, n);
}

struct pq_conn {
    PGconn *c;
    int64_t changes;
};

static void pq_quiet(void *arg, const char *message)
{
    /* NOTICEs ("relation already exists, skipping") are not the operator's business. */
}

/* The last line of a libpq message, without its newline. */
static void pq_message(const char *m, char *err, size_t n)
{
    char buf[400];
    snprintf(buf, sizeof buf, "%s", m ? m : "unknown error");
    size_t l = strlen(buf);
    while (l && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
        buf[--l] = '\0';
    fleet_db_err(err, n, "%s", buf);
}

static PGconn *pq_connect(const char *url)
{
    /* Ours first: the URL's own settings, expanded from dbname, override them. */
    const char *const keys[] = {"connect_timeout",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "application_name",
                                "options",
                                "dbname",
                                NULL};
    const char *const vals[] = {
        "5", "10", "5", "3", "exec-server-registry", "-c statement_timeout=5000", url, NULL};
    return pq.PQconnectdbParams(keys, vals, 1);
}

static void *pq_open(const char *url, int *code, char *err, size_t n)
{
    if ((*code = pq_load(err, n)) < 0) return NULL;
    PGconn *c = pq_connect(url);
    if (!c || pq.PQstatus(c) != CONNECTION_OK) {
        pq_message(c ? pq.PQerrorMessage(c) : "out of memory", err, n);
        if (c) pq.PQfinish(c);
        *code = -EIO;
        return NULL;
    }
    pq.PQsetNoticeProcessor(c, pq_quiet, NULL);
    struct pq_conn *p = xcalloc(1, sizeof *p);
    p->c = c;
    return p;
}

static void pq_close(void *h)
{
    struct pq_conn *p = h;
    pq.PQfinish(p->c);
    free(p);
}

/* The fleet_db error for a failed result (SQLSTATE classes). */
static int pq_code(struct pq_conn *p, PGresult *r)
{
    if (pq.PQstatus(p->c) != CONNECTION_OK) return -EIO;
    const char *st = r ? pq.PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!st) return -EIO;
    if (strcmp(st, "23505") == 0) return -EEXIST;
    if (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "55P03") == 0)
        return -EBUSY;
    if (strncmp(st, "08", 2) == 0 || strncmp(st, "57", 2) == 0 || strncmp(st, "53", 2) == 0 ||
        strcmp(st, "25P03") == 0)
        return -EIO;
    return -EINVAL;
}

#define PQ_MAX_PARAMS 16

/* The highest $N the statement uses: PostgreSQL refuses parameters a statement does not
 * reference, SQLite leaves them unbound, and fleet_db promises the latter. */
static size_t pq_params_used(const char *sql)
{
    size_t most = 0;
    for (const char *p = strchr(sql, '$'); p; p = strchr(p + 1, '$')) {
        size_t k = (size_t)strtoul(p + 1, NULL, 10);
        if (k > most) most = k;
    }
    return most;
}

static int pq_exec(void *h, const char *sql, const struct fleet_param *params, size_t np,
                   struct fleet_rows *rows, char *err, size_t n)
{
    struct pq_conn *p = h;
    if (np > PQ_MAX_PARAMS) abort();
    size_t used = pq_params_used(sql);
    if (np > used) np = used;
    const char *vals[PQ_MAX_PARAMS];
    Oid types[PQ_MAX_PARAMS];
    char ints[PQ_MAX_PARAMS][24];
    for (size_t i = 0; i < np; i++) {
        if (params[i].is_int) {
            snprintf(ints[i], sizeof ints[i], "%lld", (long long)params[i].i);
            vals[i] = ints[i];
            types[i] = 20; /* int8 */
        } else {
            vals[i] = params[i].s;
            types[i] = params[i].s ? 25 : 0; /* text; a NULL takes the column's type */
        }
    }
    PGresult *r = pq.PQexecParams(p->c, sql, (int)np, types, vals, NULL, NULL, 0);
    ExecStatusType s = r ? pq.PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        int code = pq_code(p, r);
        pq_message(r ? pq.PQresultErrorMessage(r) : pq.PQerrorMessage(p->c), err, n);
        if (r) pq.PQclear(r);
        return code;
    }
    const char *ct = pq.PQcmdTuples(r);
    p->changes = ct && *ct ? strtoll(ct, NULL, 10) : 0;
    if (rows && s == PGRES_TUPLES_OK) {
        size_t nr = (size_t)pq.PQntuples(r), nc = (size_t)pq.PQnfields(r);
        rows->nrows = nr;
        rows->ncols = nc;
        rows->cell = nr && nc ? xcalloc(nr * nc, sizeof *rows->cell) : NULL;
        for (size_t i = 0; i < nr; i++)
            for (size_t k = 0; k < nc; k++)
                if (!pq.PQgetisnull(r, (int)i, (int)k))
                    rows->cell[i * nc + k] = xstrdup(pq.PQgetvalue(r, (int)i, (int)k));
    }
    pq.PQclear(r);
    return 0;
}

static int64_t pq_changes(void *h)
{
    return ((struct pq_conn *)h)->changes;
}

static bool pq_broken(void *h)
{
    return pq.PQstatus(((struct pq_conn *)h)->c) != CONNECTION_OK;
}

static int pq_reconnect(void *h, char *err, size_t n)
{
    struct pq_conn *p = h;
    pq.PQreset(p->c);
    if (pq.PQstatus(p->c) == CONNECTION_OK) return 0;
    pq_message(pq.PQerrorMessage(p->c), err, n);
    return -EIO;
}

static void pq_where(void *h, char *out, size_t n)
{
    PGconn *c = ((struct pq_conn *)h)->c;
    const char *host = pq.PQhost(c);
    snprintf(out, n, "postgresql database %s as %s on %s", pq.PQdb(c), pq.PQuser(c),
             host && *host ? host : "the local socket");
}

const struct fleet_db_backend fleet_db_pg = {
    .kind = "postgresql",
    .open = pq_open,
    .close = pq_close,
    .exec = pq_exec,
    .changes = pq_changes,
    .begin_read = "BEGIN",
    .begin_write = "BEGIN",
    .broken = pq_broken,
    .reconnect = pq_reconnect,
    .where = pq_where,
};
