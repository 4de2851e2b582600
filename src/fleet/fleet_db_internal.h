/* fleet_db_internal: the backend table behind fleet_db (fleet_db_sqlite.c and
 * fleet_db_pg.c each provide one). Private to src/fleet. */
#ifndef EXEC_FLEET_DB_INTERNAL_H
#define EXEC_FLEET_DB_INTERNAL_H

#include "fleet/fleet_db.h"

struct fleet_db_backend {
    const char *kind;
    /* Opens target (the URL without "sqlite:" for SQLite, the whole URL for
     * PostgreSQL); returns the backend's connection object or NULL with err set and
     * *code the fleet_db error. */
    void *(*open)(const char *target, int *code, char *err, size_t n);
    void (*close)(void *h);
    int (*exec)(void *h, const char *sql, const struct fleet_param *params, size_t nparams,
                struct fleet_rows *rows, char *err, size_t n);
    int64_t (*changes)(void *h);
    const char *begin_read, *begin_write;
    const char *serve_mode; /* SQL for a long-lived server connection, or NULL */
    const char *maintain;   /* SQL of the periodic upkeep, or NULL */
    bool (*broken)(void *h);
    int (*reconnect)(void *h, char *err, size_t n);
    void (*where)(void *h, char *out, size_t n);
};

/* A library loaded on first use (dlopen) and its functions (dlsym into slots[i] for
 * names[i]). Loads once: later calls repeat the first answer, 0 or -ELIBACC with the
 * reason in err ("cannot load libpq.so.5 (Debian: libpq5): ..."). */
struct fleet_dl {
    int rc; /* 1 before the first try */
    char why[200];
};
int fleet_db_dl_load(struct fleet_dl *dl, const char *lib, const char *package,
                     const char *const *names, void **const *slots, size_t count, char *err,
                     size_t n);

extern const struct fleet_db_backend fleet_db_sqlite;
extern const struct fleet_db_backend fleet_db_pg;

#endif
