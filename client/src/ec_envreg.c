/* ec_envreg: the environments' state machine and the step snapshot rule (see
 * ec_envreg.h). Pure: no locks, no threads, no I/O; every effect the caller must carry
 * out comes back as a handle to connect (envreg_take_start) or to close
 * (envreg_take_garbage). */
#include "ec_envreg.h"

#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void envreg_init(struct envreg *r, void (*cfg_ref)(void *), void (*cfg_unref)(void *))
{
    memset(r, 0, sizeof *r);
    r->tail = &r->envs;
    r->starts_tail = &r->starts;
    r->cfg_ref = cfg_ref;
    r->cfg_unref = cfg_unref;
}

static struct envreg_env *find(const struct envreg *r, const char *id)
{
    for (struct envreg_env *e = r->envs; e; e = e->next)
        if (strcmp(e->id, id) == 0) return e;
    return NULL;
}

/* One reference less; at zero the handle gives up its configuration and waits in the
 * garbage list for its connection to be closed. */
static void handle_unref(struct envreg *r, struct envreg_handle *h)
{
    if (!h || --h->refs > 0) return;
    if (h->cfg && r->cfg_unref) r->cfg_unref(h->cfg);
    h->cfg = NULL;
    h->next = r->garbage;
    r->garbage = h;
}

/* A new STARTING handle for e, queued to connect: one reference for e, one for the
 * job. */
static void handle_start(struct envreg *r, struct envreg_env *e)
{
    struct envreg_handle *h = xcalloc(1, sizeof *h);
    h->refs = 2;
    h->serial = ++r->next_serial;
    h->env_id = xstrdup(e->id);
    h->cfg = e->cfg;
    if (r->cfg_ref) r->cfg_ref(h->cfg);
    h->state = EC_ENV_STARTING;
    *r->starts_tail = h;
    r->starts_tail = &h->next;
    handle_unref(r, e->cur);
    e->cur = h;
}

void envreg_add(struct envreg *r, const char *id, void *cfg, bool start)
{
    struct envreg_env *e = find(r, id);
    if (!e) {
        e = xcalloc(1, sizeof *e);
        e->id = xstrdup(id);
        *r->tail = e;
        r->tail = &e->next;
    } else {
        /* Replaced: the old handle stays with the steps that captured it, and one
         * still connecting finishes on its own; the environment starts over. */
        if (e->cfg && r->cfg_unref) r->cfg_unref(e->cfg);
        handle_unref(r, e->cur);
        e->cur = NULL;
    }
    e->cfg = cfg;
    if (r->cfg_ref) r->cfg_ref(cfg);
    if (start) handle_start(r, e);
}

static void env_free(struct envreg *r, struct envreg_env *e)
{
    if (e->cfg && r->cfg_unref) r->cfg_unref(e->cfg);
    handle_unref(r, e->cur);
    free(e->id);
    free(e);
}

int envreg_remove(struct envreg *r, const char *id)
{
    for (struct envreg_env **pp = &r->envs; *pp; pp = &(*pp)->next) {
        struct envreg_env *e = *pp;
        if (strcmp(e->id, id) != 0) continue;
        *pp = e->next;
        if (r->tail == &e->next) r->tail = pp;
        env_free(r, e);
        return 0;
    }
    return -1;
}

void envreg_clear(struct envreg *r)
{
    while (r->envs) {
        struct envreg_env *e = r->envs;
        r->envs = e->next;
        env_free(r, e);
    }
    r->tail = &r->envs;
}

int envreg_start(struct envreg *r, const char *id)
{
    struct envreg_env *e = find(r, id);
    if (!e) return -1;
    if (!e->cur || e->cur->state == EC_ENV_FAILED) handle_start(r, e);
    return 0;
}

ec_env_state envreg_state(const struct envreg *r, const char *id, const char **reason)
{
    if (reason) *reason = NULL;
    struct envreg_env *e = find(r, id);
    if (!e) return EC_ENV_MISSING;
    if (!e->cur) return EC_ENV_IDLE;
    if (e->cur->state == EC_ENV_FAILED && reason) *reason = e->cur->reason;
    return e->cur->state;
}

struct envreg_handle *envreg_current(const struct envreg *r, const char *id)
{
    struct envreg_env *e = find(r, id);
    return e ? e->cur : NULL;
}

struct envreg_handle *envreg_take_start(struct envreg *r)
{
    struct envreg_handle *h = r->starts;
    if (!h) return NULL;
    r->starts = h->next;
    if (!r->starts) r->starts_tail = &r->starts;
    h->next = NULL;
    return h;
}

void envreg_connected(struct envreg *r, struct envreg_handle *h, void *conn)
{
    h->conn = conn;
    h->state = EC_ENV_READY;
    handle_unref(r, h); /* the job's: a handle replaced meanwhile goes now */
}

void envreg_connect_failed(struct envreg *r, struct envreg_handle *h, const char *reason)
{
    h->state = EC_ENV_FAILED;
    snprintf(h->reason, sizeof h->reason, "%s", reason ? reason : "connect failed");
    handle_unref(r, h);
}

void envreg_lost(struct envreg *r, struct envreg_handle *h, const char *reason)
{
    (void)r;
    if (h->state != EC_ENV_READY) return;
    h->state = EC_ENV_FAILED;
    snprintf(h->reason, sizeof h->reason, "%s", reason ? reason : "connection lost");
}

static void capture_one(struct envreg *r, struct envreg_step_entry *out, const char *id,
                        envreg_alive_fn alive, void *ud)
{
    out->id = xstrdup(id);
    struct envreg_env *e = find(r, id);
    if (!e) {
        out->state = EC_ENV_MISSING;
        return;
    }
    if (!e->cur) handle_start(r, e); /* lazy: asked to start, seen by a later step */
    struct envreg_handle *h = e->cur;
    if (h->state == EC_ENV_READY && alive) {
        char why[300] = "";
        if (!alive(ud, h->conn, why, sizeof why)) envreg_lost(r, h, why);
    }
    out->state = h->state;
    if (h->state == EC_ENV_READY) {
        h->refs++;
        out->h = h;
    } else if (h->state == EC_ENV_FAILED) {
        out->reason = xstrdup(h->reason);
    }
}

struct envreg_step *envreg_capture(struct envreg *r, const char *const *ids, size_t n,
                                   envreg_alive_fn alive, void *ud)
{
    struct envreg_step *s = xcalloc(1, sizeof *s);
    if (!ids) {
        n = 0;
        for (struct envreg_env *e = r->envs; e; e = e->next)
            n++;
    }
    s->e = xcalloc(n ? n : 1, sizeof *s->e);
    struct envreg_env *it = r->envs;
    for (size_t i = 0; i < n; i++) {
        const char *id = ids ? ids[i] : it->id;
        if (!ids) it = it->next;
        if (!id || envreg_step_find(s, id)) continue; /* one entry per id */
        capture_one(r, &s->e[s->n++], id, alive, ud);
    }
    return s;
}

const struct envreg_step_entry *envreg_step_find(const struct envreg_step *s, const char *id)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->e[i].id, id) == 0) return &s->e[i];
    return NULL;
}

void envreg_step_release(struct envreg *r, struct envreg_step *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        handle_unref(r, s->e[i].h);
        free(s->e[i].id);
        free(s->e[i].reason);
    }
    free(s->e);
    free(s);
}

struct envreg_handle *envreg_take_garbage(struct envreg *r)
{
    struct envreg_handle *g = r->garbage;
    r->garbage = NULL;
    return g;
}

void envreg_handle_free(struct envreg_handle *h)
{
    if (!h) return;
    free(h->env_id);
    free(h);
}
