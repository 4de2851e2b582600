/* ec_envs: many environments held the way codex holds them (stable ids, handles
 * replaced underneath, one view per step) around the pure state machine of
 * ec_envreg.c: one lock, one connect thread per handle starting, the clients, step
 * snapshots and the capability-root cache.
 *
 * Locking: every registry change and every look happens under `mu`; nothing that can
 * block on the network runs under it. Connects run in their own threads (signals
 * blocked, so the host's handlers keep running where it expects them), each holding a
 * reference on its handle; a finished connect reports under the lock and wakes the
 * waiters (`cv`). Handles nobody references any more are closed after the lock is
 * released, by whichever thread dropped the last reference.
 *
 * Lifetime: the ec_envs memory lives while the owner has not freed it or a step is
 * still held (refs); ec_envs_free joins the connect threads, so none outlives it. */
#include "ec_envreg.h"
#include "ec_internal.h"

#include "util/mem.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- configurations: a deep copy of the options, shared by a generation's handles --- */

struct env_cfg {
    unsigned refs; /* changed under the ec_envs lock only */
    ec_client_options o;
    char *url, *token, *name, *ca, *remote, *envid, *cwd;
    char **argv, **env;
};

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static struct env_cfg *cfg_new(const ec_client_options *o)
{
    struct env_cfg *c = xcalloc(1, sizeof *c);
    c->o = *o;
    c->o.url = c->url = dup_or_null(o->url);
    c->o.bearer_token = c->token = dup_or_null(o->bearer_token);
    c->o.client_name = c->name = dup_or_null(o->client_name);
    c->o.ca_file = c->ca = dup_or_null(o->ca_file);
    c->o.remote_url = c->remote = dup_or_null(o->remote_url);
    c->o.environment_id = c->envid = dup_or_null(o->environment_id);
    c->o.program_cwd = c->cwd = dup_or_null(o->program_cwd);
    c->argv = ec_strv_dup(o->program_argv);
    c->env = ec_strv_dup(o->program_env);
    c->o.program_argv = (const char *const *)c->argv;
    c->o.program_env = (const char *const *)c->env;
    return c;
}

static void cfg_ref(void *p)
{
    ((struct env_cfg *)p)->refs++;
}

static void cfg_unref(void *p)
{
    struct env_cfg *c = p;
    if (--c->refs > 0) return;
    free(c->url);
    if (c->token) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
    }
    free(c->name);
    free(c->ca);
    free(c->remote);
    free(c->envid);
    free(c->cwd);
    ec_strv_free(c->argv);
    ec_strv_free(c->env);
    free(c);
}

/* ---- the object ------------------------------------------------------------------------ */

struct job {
    struct job *next;
    pthread_t th;
    struct ec_envs *e;
    struct envreg_handle *h;
    bool done; /* under mu: the thread no longer touches anything of ours */
};

struct root_entry {
    struct root_entry *next;
    char *env, *uri;
    json_t *entry; /* the discoverV1 entry, as first discovered */
};

struct ec_envs {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a connect finished */
    struct envreg reg;
    unsigned refs; /* 1 until ec_envs_free, plus one per step held */
    bool freed;
    struct job *jobs;
    struct root_entry *roots;
};

struct ec_step {
    struct ec_envs *e;
    struct envreg_step *s;
};

const char *ec_env_state_name(ec_env_state s)
{
    switch (s) {
    case EC_ENV_MISSING: return "missing";
    case EC_ENV_IDLE: return "idle";
    case EC_ENV_STARTING: return "starting";
    case EC_ENV_READY: return "ready";
    case EC_ENV_FAILED: return "failed";
    }
    return "unknown";
}

ec_envs *ec_envs_new(void)
{
    ec_envs *e = xcalloc(1, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    envreg_init(&e->reg, cfg_ref, cfg_unref);
    e->refs = 1;
    return e;
}

static void lock(ec_envs *e)
{
    pthread_mutex_lock(&e->mu);
}

static void unlock(ec_envs *e)
{
    pthread_mutex_unlock(&e->mu);
}

/* Closes and frees handles nobody references any more. Never under the lock: a
 * client close may wait for a program to exit. */
static void close_garbage(struct envreg_handle *g)
{
    while (g) {
        struct envreg_handle *next = g->next;
        ec_client_close(g->conn);
        envreg_handle_free(g);
        g = next;
    }
}

static void roots_free(struct root_entry *r)
{
    while (r) {
        struct root_entry *next = r->next;
        free(r->env);
        free(r->uri);
        json_decref(r->entry);
        free(r);
        r = next;
    }
}

static void destroy(ec_envs *e)
{
    roots_free(e->roots);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static void *job_main(void *arg)
{
    struct job *j = arg;
    ec_envs *e = j->e;
    struct envreg_handle *h = j->h;
    /* The job's reference keeps h, and with it h->cfg, alive and unchanged. */
    const struct env_cfg *cfg = h->cfg;
    ec_client *c = NULL;
    ec_error err = {0};
    int rc = ec_client_connect(&cfg->o, &c, &err);
    lock(e);
    if (rc == 0)
        envreg_connected(&e->reg, h, c);
    else
        envreg_connect_failed(&e->reg, h, err.message[0] ? err.message : "connect failed");
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    pthread_cond_broadcast(&e->cv);
    unlock(e);
    close_garbage(g); /* a handle replaced while it connected */
    lock(e);
    j->done = true;
    unlock(e);
    return NULL;
}

/* Under the lock: joins the connect threads that have finished, and starts one for
 * each handle the registry queued. */
static void kick(ec_envs *e)
{
    for (struct job **pp = &e->jobs; *pp;) {
        struct job *j = *pp;
        if (!j->done) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        pthread_join(j->th, NULL); /* it is past its last lock: returns at once */
        free(j);
    }
    struct envreg_handle *h;
    while ((h = envreg_take_start(&e->reg))) {
        struct job *j = xcalloc(1, sizeof *j);
        j->e = e;
        j->h = h;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits this mask */
        int rc = pthread_create(&j->th, NULL, job_main, j);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            char why[120];
            snprintf(why, sizeof why, "cannot start a connect thread: %s", strerror(rc));
            envreg_connect_failed(&e->reg, h, why);
            free(j);
            continue;
        }
        j->next = e->jobs;
        e->jobs = j;
    }
}

void ec_envs_free(ec_envs *e)
{
    if (!e) return;
    lock(e);
    e->freed = true;
    envreg_clear(&e->reg);
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    unlock(e);
    close_garbage(g);
    lock(e);
    while (e->jobs) {
        struct job *j = e->jobs;
        e->jobs = j->next;
        unlock(e);
        pthread_join(j->th, NULL);
        free(j);
        lock(e);
    }
    bool last = --e->refs == 0;
    unlock(e);
    if (last) destroy(e);
}

int ec_envs_add(ec_envs *e, const char *id, const ec_client_options *o, bool start, ec_error *err)
{
    if (!id || !*id) return ec_fail(err, EC_ERR_USAGE, 0, "an environment needs an id");
    if (!o || (!o->program_argv && !o->remote_url && !o->url))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment `%s` needs a url, a remote_url or a program_argv", id);
    struct env_cfg *cfg = cfg_new(o);
    lock(e);
    cfg->refs = 1; /* ours until the registry took its own */
    envreg_add(&e->reg, id, cfg, start);
    cfg_unref(cfg);
    kick(e);
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    unlock(e);
    close_garbage(g);
    return 0;
}

int ec_envs_add_file(ec_envs *e, const ec_env_file *f, ec_error *err)
{
    for (size_t i = 0; i < ec_env_file_count(f); i++) {
        int rc = ec_envs_add(e, ec_env_file_id(f, i), ec_env_file_options(f, i), false, err);
        if (rc) return rc;
    }
    return 0;
}

int ec_envs_remove(ec_envs *e, const char *id, ec_error *err)
{
    lock(e);
    int rc = id ? envreg_remove(&e->reg, id) : -1;
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    unlock(e);
    close_garbage(g);
    if (rc) return ec_fail(err, EC_ERR_USAGE, 0, "no environment `%s`", id ? id : "(null)");
    return 0;
}

int ec_envs_start(ec_envs *e, const char *id, ec_error *err)
{
    lock(e);
    int rc = id ? envreg_start(&e->reg, id) : -1;
    kick(e);
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    unlock(e);
    close_garbage(g);
    if (rc) return ec_fail(err, EC_ERR_USAGE, 0, "no environment `%s`", id ? id : "(null)");
    return 0;
}

/* Under the lock: the state, noticing a ready handle that was lost for good. */
static ec_env_state state_locked(ec_envs *e, const char *id, const char **reason)
{
    struct envreg_handle *h = envreg_current(&e->reg, id);
    ec_error why;
    if (h && h->state == EC_ENV_READY && ec_client_lost(h->conn, &why))
        envreg_lost(&e->reg, h, why.message);
    return envreg_state(&e->reg, id, reason);
}

ec_env_state ec_envs_state(ec_envs *e, const char *id, ec_error *reason)
{
    if (!id) return EC_ENV_MISSING;
    lock(e);
    const char *why = NULL;
    ec_env_state st = state_locked(e, id, &why);
    if (reason) {
        memset(reason, 0, sizeof *reason);
        if (why) ec_fail(reason, EC_ERR_TRANSPORT, 0, "%s", why);
    }
    unlock(e);
    return st;
}

/* Waits on cv until deadline (-1: none); false on timeout. */
static bool wait_until(ec_envs *e, int64_t deadline)
{
    if (deadline < 0) {
        pthread_cond_wait(&e->cv, &e->mu);
        return true;
    }
    int64_t left = deadline - ec_now_ms();
    if (left <= 0) return false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return pthread_cond_timedwait(&e->cv, &e->mu, &ts) != ETIMEDOUT || ec_now_ms() < deadline;
}

int ec_envs_wait(ec_envs *e, const char *id, int timeout_ms, ec_error *err)
{
    if (!id) return ec_fail(err, EC_ERR_USAGE, 0, "no environment id");
    int64_t deadline = ec_deadline(timeout_ms);
    lock(e);
    if (envreg_state(&e->reg, id, NULL) == EC_ENV_IDLE) envreg_start(&e->reg, id);
    kick(e);
    const char *why = NULL;
    ec_env_state st;
    while ((st = state_locked(e, id, &why)) == EC_ENV_STARTING)
        if (!wait_until(e, deadline)) break;
    int rc = 0;
    if (st == EC_ENV_MISSING)
        rc = ec_fail(err, EC_ERR_USAGE, 0, "no environment `%s`", id);
    else if (st == EC_ENV_STARTING)
        rc = ec_fail(err, EC_ERR_TIMEOUT, 0, "environment `%s` is still starting", id);
    else if (st == EC_ENV_FAILED)
        rc = ec_fail(err, EC_ERR_TRANSPORT, 0, "environment `%s` failed: %s", id, why);
    unlock(e);
    return rc;
}

static bool alive(void *ud, void *conn, char *why, size_t n)
{
    (void)ud;
    ec_error e;
    if (!ec_client_lost(conn, &e)) return true;
    snprintf(why, n, "%s", e.message);
    return false;
}

ec_step *ec_envs_capture(ec_envs *e, const char *const *ids, size_t n, int wait_ms)
{
    lock(e);
    if (wait_ms != 0) {
        /* Start the idle ones among the selection, then wait for every selected one
         * that is starting to settle (ready or failed). */
        int64_t deadline = ec_deadline(wait_ms);
        for (;;) {
            bool starting = false;
            size_t count = ids ? n : 0;
            if (!ids)
                for (struct envreg_env *v = e->reg.envs; v; v = v->next)
                    count++;
            struct envreg_env *it = e->reg.envs;
            for (size_t i = 0; i < count; i++) {
                const char *id = ids ? ids[i] : it->id;
                if (!ids) it = it->next;
                if (!id) continue;
                ec_env_state st = state_locked(e, id, NULL);
                if (st == EC_ENV_IDLE) {
                    envreg_start(&e->reg, id);
                    st = EC_ENV_STARTING;
                }
                starting |= st == EC_ENV_STARTING;
            }
            kick(e);
            if (!starting || !wait_until(e, deadline)) break;
        }
    }
    ec_step *s = xcalloc(1, sizeof *s);
    s->e = e;
    s->s = envreg_capture(&e->reg, ids, n, alive, NULL);
    kick(e); /* the idle ones it asked to start */
    e->refs++;
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    unlock(e);
    close_garbage(g);
    return s;
}

size_t ec_step_count(const ec_step *s)
{
    return s ? s->s->n : 0;
}

const char *ec_step_id(const ec_step *s, size_t i)
{
    return s && i < s->s->n ? s->s->e[i].id : NULL;
}

ec_env_state ec_step_state(const ec_step *s, const char *id, const char **reason)
{
    if (reason) *reason = NULL;
    const struct envreg_step_entry *en = s && id ? envreg_step_find(s->s, id) : NULL;
    if (!en) return EC_ENV_MISSING;
    if (reason) *reason = en->reason;
    return en->state;
}

ec_client *ec_step_client(const ec_step *s, const char *id)
{
    const struct envreg_step_entry *en = s && id ? envreg_step_find(s->s, id) : NULL;
    return en && en->h ? en->h->conn : NULL;
}

void ec_step_release(ec_step *s)
{
    if (!s) return;
    ec_envs *e = s->e;
    lock(e);
    envreg_step_release(&e->reg, s->s);
    struct envreg_handle *g = envreg_take_garbage(&e->reg);
    bool last = --e->refs == 0;
    unlock(e);
    close_garbage(g);
    free(s);
    if (last) destroy(e);
}

/* ---- capability roots ------------------------------------------------------------------ */

static struct root_entry *root_find(ec_envs *e, const char *env, const char *uri)
{
    for (struct root_entry *r = e->roots; r; r = r->next)
        if (strcmp(r->env, env) == 0 && strcmp(r->uri, uri) == 0) return r;
    return NULL;
}

void ec_envs_forget_roots(ec_envs *e, const char *environment_id)
{
    lock(e);
    struct root_entry *gone = NULL;
    for (struct root_entry **pp = &e->roots; *pp;) {
        struct root_entry *r = *pp;
        if (environment_id && strcmp(r->env, environment_id) != 0) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        r->next = gone;
        gone = r;
    }
    unlock(e);
    roots_free(gone);
}

void ec_resolved_roots_free(ec_resolved_root *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].id);
        free(r[i].environment_id);
        free(r[i].path);
        json_decref(r[i].discovery);
    }
    free(r);
}

/* One discoverV1 request on env's captured handle for the roots idx[0..k) of roots
 * (uris alongside); fills found[] and caches what succeeded. */
static int discover(ec_step *s, const char *env, const ec_selected_root *roots, char **uris,
                    const size_t *idx, size_t k, json_t **found, ec_error *err)
{
    ec_client *c = ec_step_client(s, env);
    json_t *list = json_array();
    for (size_t j = 0; j < k; j++)
        json_array_append_new(
            list, json_pack("{s:s, s:s}", "id", roots[idx[j]].id, "path", uris[idx[j]]));
    json_t *res = NULL;
    int rc = ec_client_call(c, "capabilityRoots/discoverV1", json_pack("{s:o}", "roots", list),
                            &res, err);
    if (rc) return rc;
    json_t *got = json_object_get(res, "roots");
    if (!json_is_array(got) || json_array_size(got) != k) {
        json_decref(res);
        return ec_fail(err, EC_ERR_PROTOCOL, 0,
                       "capabilityRoots/discoverV1: expected %zu roots in the result", k);
    }
    ec_envs *e = s->e;
    lock(e);
    for (size_t j = 0; j < k; j++) {
        json_t *entry = json_array_get(got, j);
        if (!json_is_object(entry)) continue;
        found[idx[j]] = json_incref(entry);
        json_t *error = json_object_get(entry, "error");
        if ((error && !json_is_null(error)) || root_find(e, env, uris[idx[j]])) continue;
        struct root_entry *r = xcalloc(1, sizeof *r);
        r->env = xstrdup(env);
        r->uri = xstrdup(uris[idx[j]]);
        r->entry = json_incref(entry);
        r->next = e->roots;
        e->roots = r;
    }
    unlock(e);
    json_decref(res);
    return 0;
}

int ec_step_resolve_roots(ec_step *s, const ec_selected_root *roots, size_t n,
                          ec_resolved_root **out, size_t *nout, ec_error *err)
{
    *out = NULL;
    *nout = 0;
    if (err) memset(err, 0, sizeof *err);
    char **uris = xcalloc(n + 1, sizeof *uris);
    json_t **found = xcalloc(n + 1, sizeof *found);
    size_t *idx = xcalloc(n + 1, sizeof *idx);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!roots[i].id || !roots[i].environment_id || !roots[i].path ||
            !(uris[i] = ec_path_to_uri(roots[i].path))) {
            rc = ec_fail(err, EC_ERR_USAGE, 0,
                         "selected root %zu needs an id, an environment id and an absolute "
                         "path",
                         i);
            goto out;
        }
    }
    ec_envs *e = s->e;
    lock(e);
    for (size_t i = 0; i < n; i++) {
        if (!ec_step_client(s, roots[i].environment_id)) continue; /* omitted this step */
        struct root_entry *r = root_find(e, roots[i].environment_id, uris[i]);
        if (r) found[i] = json_incref(r->entry);
    }
    unlock(e);
    /* The misses, one request per environment (in order of first appearance). */
    bool *asked = xcalloc(n + 1, sizeof *asked);
    for (size_t i = 0; i < n; i++) {
        const char *env = roots[i].environment_id;
        if (found[i] || asked[i] || !ec_step_client(s, env)) continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++) {
            if (asked[j] || found[j] || strcmp(roots[j].environment_id, env) != 0) continue;
            asked[j] = true;
            idx[k++] = j;
        }
        ec_error de = {0};
        if (discover(s, env, roots, uris, idx, k, found, &de) != 0 && err && err->kind == EC_OK)
            *err = de;
    }
    free(asked);
    ec_resolved_root *res = xcalloc(n + 1, sizeof *res);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!found[i]) continue;
        ec_resolved_root *r = &res[m++];
        r->id = xstrdup(roots[i].id);
        r->environment_id = xstrdup(roots[i].environment_id);
        r->path = xstrdup(roots[i].path);
        r->client = ec_step_client(s, roots[i].environment_id);
        r->discovery = json_copy(found[i]); /* shallow: the members stay shared */
        json_object_set_new(r->discovery, "id", json_string(roots[i].id));
    }
    *out = res;
    *nout = m;
out:
    for (size_t i = 0; i < n; i++) {
        free(uris[i]);
        json_decref(found[i]);
    }
    free(uris);
    free(found);
    free(idx);
    return rc;
}
