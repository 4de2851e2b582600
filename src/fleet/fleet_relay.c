/* fleet_relay: the rendezvous router (see fleet_relay.h). */
#include "fleet/fleet_relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "crypto/random.h"
#include "fleet/fleet_api.h"
#include "fleet/fleet_audit.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_worker.h"
#include "proto/relay_frame.h"
#include "proto/ws_reader.h"
#include "util/mem.h"
#include "util/strmap.h"

#define STREAM_ID_MAX 128

struct relay_harness;

/* One stream id, held by one harness socket. */
struct relay_stream {
    struct relay_harness *h;
    struct relay_stream *next; /* the harness's streams */
    size_t len;
    char id[]; /* the map's key */
};

/* An attached executor socket. */
struct relay_env {
    char id[FLEET_MAX_ID + 1];
    char reg[FLEET_MAX_ID + 1];
    struct fleet_conn *conn;
    struct strmap streams;           /* stream id -> relay_stream */
    struct relay_harness *harnesses; /* every harness socket bound to it */
    unsigned nstreams;
    unsigned blocked;     /* harness sockets too full to take more: reading paused */
    bool streams_changed; /* since the last heartbeat */
    bool replaced;        /* a newer socket took over: no detach on close */
};

/* A harness socket. */
struct relay_harness {
    struct fleet_conn *conn;
    struct relay_env *env; /* NULL once the executor left */
    struct relay_stream *streams;
    struct relay_harness *prev, *next; /* env->harnesses */
    uint64_t last_activity;            /* loop ms of the last frame either way */
    bool claimed;                      /* a first frame came */
    bool paused;                       /* reading stopped: the executor's socket is full */
    bool blocking;                     /* its own socket is full: counted in env->blocked */
};

static struct strmap envs; /* id -> relay_env */
/* id -> upgrade_job of an executor socket whose attachment is being recorded: the
 * database has (or is about to have) its row while envs does not have it yet, and a
 * heartbeat taken meanwhile must count it as held, or it would delete that row. */
static struct strmap attaching;
static bool lost_heartbeat = true;
static bool stopping;

void fleet_relay_shutdown(void)
{
    stopping = true;
}

static void (*streams_changed_cb)(void);

void fleet_relay_init(void (*on_streams)(void))
{
    streams_changed_cb = on_streams;
    uint8_t seed[16];
    crypto_random_bytes(seed, sizeof seed);
    strmap_init(&envs, seed);
    crypto_random_bytes(seed, sizeof seed);
    strmap_init(&attaching, seed);
}

size_t fleet_relay_count(void)
{
    return envs.n;
}

/* Loop time in ms (the registry runs on the default loop). */
static uint64_t now_loop(void)
{
    return uv_now(uv_default_loop());
}

/* Sends reset{reason} on stream id to c. */
static void send_reset(struct fleet_conn *c, const char *id, size_t len, const char *reason)
{
    struct relay_frame f = {.version = RELAY_FRAME_VERSION,
                            .stream_id = {id, len},
                            .body = RELAY_BODY_RESET,
                            .reason = {reason, strlen(reason)}};
    uint8_t buf[STREAM_ID_MAX + 128];
    size_t n;
    if (relay_frame_encode(&f, buf, sizeof buf, &n) == 0) fleet_conn_send(c, true, buf, n);
}

/* ---- streams ---- */

static void stream_forget(struct relay_env *env, struct relay_stream *s)
{
    struct relay_harness *h = s->h;
    for (struct relay_stream **p = &h->streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (env) {
        strmap_del(&env->streams, s->id, s->len);
        env->nstreams--;
        env->streams_changed = true;
        if (streams_changed_cb) streams_changed_cb();
    }
    fleet_metrics_gauges(0, -1, 0);
    free(s);
}

static struct relay_stream *stream_claim(struct relay_env *env, struct relay_harness *h,
                                         const char *id, size_t len)
{
    struct relay_stream *s = xmalloc(sizeof *s + len + 1);
    s->h = h;
    s->len = len;
    memcpy(s->id, id, len);
    s->id[len] = '\0';
    s->next = h->streams;
    h->streams = s;
    strmap_put(&env->streams, s->id, len, s);
    env->nstreams++;
    env->streams_changed = true;
    if (streams_changed_cb) streams_changed_cb();
    fleet_metrics_gauges(0, 1, 0);
    return s;
}

/* ---- back-pressure ---- */

static void harness_pause(struct relay_harness *h)
{
    if (h->paused) return;
    h->paused = true;
    fleet_conn_set_reading(h->conn, false);
}

static void env_drained(void *owner, struct fleet_conn *c)
{
    struct relay_env *env = owner;
    for (struct relay_harness *h = env->harnesses; h; h = h->next)
        if (h->paused) {
            h->paused = false;
            fleet_conn_set_reading(h->conn, true);
        }
}

static void harness_unblock(struct relay_harness *h)
{
    if (!h->blocking) return;
    h->blocking = false;
    if (h->env && --h->env->blocked == 0) fleet_conn_set_reading(h->env->conn, true);
}

static void harness_drained(void *owner, struct fleet_conn *c)
{
    harness_unblock(owner);
}

/* ---- harness sockets ---- */

static bool frame_routable(const uint8_t *data, size_t len, struct relay_frame *f)
{
    return relay_frame_decode(data, len, f) == 0 && f->stream_id.len <= STREAM_ID_MAX;
}

static void harness_message(void *owner, struct fleet_conn *c, uint8_t *data, size_t len,
                            bool binary)
{
    struct relay_harness *h = owner;
    struct relay_frame f;
    if (!binary || !frame_routable(data, len, &f)) {
        const char *reason = binary ? "malformed_frame" : "text_frame";
        fleet_metrics_refusal(reason);
        log_notice("event=refusal what=frame peer=%s reason=%s: closing the harness socket",
                   fleet_conn_peer(c), reason);
        fleet_conn_ws_close(c, binary ? WS_CLOSE_PROTOCOL : 1003,
                            binary ? "not a relay frame" : "binary relay frames only");
        return;
    }
    struct relay_env *env = h->env;
    h->last_activity = now_loop();
    h->claimed = true;
    if (!env) return;
    struct relay_stream *s = strmap_get(&env->streams, f.stream_id.ptr, f.stream_id.len);
    if (!s) {
        if (f.body == RELAY_BODY_RESET) return;
        if (env->nstreams >= fleet_cfg.max_streams) {
            fleet_metrics_refusal("too_many_streams");
            log_notice("event=refusal what=stream environment=%s peer=%s reason=too_many_streams",
                       env->id, fleet_conn_peer(c));
            send_reset(c, f.stream_id.ptr, f.stream_id.len, "too_many_streams");
            return;
        }
        s = stream_claim(env, h, f.stream_id.ptr, f.stream_id.len);
        log_info("event=stream_open environment=%s peer=%s streams=%u", env->id, fleet_conn_peer(c),
                 env->nstreams);
    } else if (s->h != h) {
        fleet_metrics_refusal("stream_taken");
        return;
    }
    fleet_conn_send(env->conn, true, data, len);
    fleet_metrics_relayed(true, len);
    if (f.body == RELAY_BODY_RESET) stream_forget(env, s);
    if (fleet_conn_congested(env->conn)) harness_pause(h);
}

static void harness_closed(void *owner, struct fleet_conn *c)
{
    struct relay_harness *h = owner;
    struct relay_env *env = h->env;
    harness_unblock(h);
    while (h->streams) {
        struct relay_stream *s = h->streams;
        if (env) send_reset(env->conn, s->id, s->len, "harness_disconnected");
        stream_forget(env, s);
    }
    if (env) {
        if (h->prev)
            h->prev->next = h->next;
        else
            env->harnesses = h->next;
        if (h->next) h->next->prev = h->prev;
    }
    log_info("event=harness_close environment=%s peer=%s", env ? env->id : "-", fleet_conn_peer(c));
    fleet_metrics_gauges(0, 0, -1);
    free(h);
}

static void harness_deadline(void *owner, struct fleet_conn *c)
{
    struct relay_harness *h = owner;
    uint64_t now = now_loop();
    const char *reason = NULL;
    if (!h->claimed)
        reason = "claim_timeout";
    else if (now - h->last_activity >= fleet_cfg.idle_ms)
        reason = "idle_timeout";
    if (!reason) {
        fleet_conn_set_deadline(c, h->last_activity + fleet_cfg.idle_ms);
        return;
    }
    fleet_metrics_refusal(reason);
    log_notice("event=refusal what=harness environment=%s peer=%s reason=%s: closing",
               h->env ? h->env->id : "-", fleet_conn_peer(c), reason);
    fleet_conn_ws_close(c, 1008, h->claimed ? "idle" : "no relay frame within --claim-timeout");
}

static const struct fleet_ws_ops harness_ops = {
    .message = harness_message,
    .closed = harness_closed,
    .drained = harness_drained,
    .deadline = harness_deadline,
};

/* ---- executor sockets ---- */

static void env_message(void *owner, struct fleet_conn *c, uint8_t *data, size_t len, bool binary)
{
    struct relay_env *env = owner;
    struct relay_frame f;
    if (!binary || !frame_routable(data, len, &f)) {
        fleet_metrics_refusal(binary ? "malformed_frame" : "text_frame");
        log_info("event=refusal what=frame environment=%s reason=%s: dropped", env->id,
                 binary ? "malformed_frame" : "text_frame");
        return;
    }
    struct relay_stream *s = strmap_get(&env->streams, f.stream_id.ptr, f.stream_id.len);
    if (!s) {
        fleet_metrics_refusal("unknown_stream");
        return;
    }
    struct relay_harness *h = s->h;
    fleet_conn_send(h->conn, true, data, len);
    fleet_metrics_relayed(false, len);
    h->last_activity = now_loop();
    if (f.body == RELAY_BODY_RESET) stream_forget(env, s);
    if (fleet_conn_congested(h->conn) && !h->blocking) {
        h->blocking = true;
        if (env->blocked++ == 0) fleet_conn_set_reading(c, false);
    }
}

struct detach_job {
    struct fleet_job job;
    char env[FLEET_MAX_ID + 1];
};

static void detach_run(struct fleet_job *j, struct fleet_db *db)
{
    struct detach_job *d = (struct detach_job *)j;
    j->result = fleet_store_detach(db, d->env, fleet_cfg.node, j->now_ms, j->err, sizeof j->err);
}

static void detach_done(struct fleet_job *j)
{
    /* A failure is repaired by the next heartbeat (rows this node does not hold go). */
    free(j);
}

static void env_closed(void *owner, struct fleet_conn *c)
{
    struct relay_env *env = owner;
    if (strmap_get(&envs, env->id, strlen(env->id)) == env)
        strmap_del(&envs, env->id, strlen(env->id));
    struct relay_harness *hs = env->harnesses;
    env->harnesses = NULL;
    strmap_free(&env->streams); /* the streams are the harnesses', freed as they close */
    for (struct relay_harness *h = hs, *next; h; h = next) {
        next = h->next;
        h->env = NULL;
        h->prev = h->next = NULL;
        h->blocking = false;
        for (struct relay_stream *s = h->streams; s; s = s->next)
            send_reset(h->conn, s->id, s->len, "environment_disconnected");
        fleet_conn_ws_close(h->conn, 1001, "the executor disconnected");
    }
    static const char *const why[] = {"peer_close", "read_error", "pong_timeout", "protocol_error",
                                      "closed_here"};
    log_notice("event=detach environment=%s peer=%s reason=%s", env->id, fleet_conn_peer(c),
               env->replaced ? "replaced" : why[fleet_conn_close_reason(c)]);
    fleet_audit("registry.detach",
                &(struct fleet_audit_event){
                    .environment = env->id,
                    .registration = env->reg,
                    .peer = fleet_conn_peer(c),
                    .valid = -1,
                    .reason = env->replaced ? "replaced" : why[fleet_conn_close_reason(c)]});
    if (!env->replaced && !stopping) {
        struct detach_job *d = xcalloc(1, sizeof *d);
        memcpy(d->env, env->id, sizeof d->env);
        if (fleet_worker_submit(&d->job, detach_run, detach_done) < 0) free(d);
    }
    fleet_metrics_gauges(-1, 0, 0);
    free(env);
}

static const struct fleet_ws_ops env_ops = {
    .message = env_message,
    .closed = env_closed,
    .drained = env_drained,
};

/* ---- upgrades ---- */

struct upgrade_job {
    struct fleet_job job;
    struct fleet_conn *c;
    struct fleet_url_claims claims;
    char env[FLEET_MAX_ID + 1];
};

static void upgrade_free(struct upgrade_job *u)
{
    fleet_conn_release(u->c);
    free(u);
}

static bool upgrade_db_failed(struct upgrade_job *u, const char *what)
{
    if (u->job.result != -EIO && u->job.result != -EBUSY && u->job.result != -EINVAL) return false;
    fleet_api_refuse(u->c, what, u->env, "", 503, "database_unavailable", "database_unavailable",
                     "the registry's database is unavailable; retry");
    return true;
}

static void attach_run(struct fleet_job *j, struct fleet_db *db)
{
    struct upgrade_job *u = (struct upgrade_job *)j;
    j->result = fleet_store_attach(db, u->env, u->claims.registration, fleet_cfg.node, j->now_ms,
                                   j->err, sizeof j->err);
}

static void env_accept(struct upgrade_job *u)
{
    struct relay_env *old = strmap_get(&envs, u->env, strlen(u->env));
    if (old) {
        old->replaced = true;
        fleet_conn_ws_close(old->conn, 1000, "replaced by a newer connection");
    }
    struct relay_env *env = xcalloc(1, sizeof *env);
    memcpy(env->id, u->env, sizeof env->id);
    snprintf(env->reg, sizeof env->reg, "%s", u->claims.registration);
    env->conn = u->c;
    uint8_t seed[16];
    crypto_random_bytes(seed, sizeof seed);
    strmap_init(&env->streams, seed);
    strmap_put(&envs, env->id, strlen(env->id), env);
    fleet_metrics_gauges(1, 0, 0);
    log_notice("event=attach environment=%s registration=%s peer=%s", env->id, env->reg,
               fleet_conn_peer(u->c));
    fleet_audit("registry.attach", &(struct fleet_audit_event){.environment = env->id,
                                                               .registration = env->reg,
                                                               .peer = fleet_conn_peer(u->c),
                                                               .valid = -1});
    fleet_conn_upgrade(u->c, fleet_cfg.max_frame, &env_ops, env);
}

static void attach_done(struct fleet_job *j)
{
    struct upgrade_job *u = (struct upgrade_job *)j;
    if (strmap_get(&attaching, u->env, strlen(u->env)) == u)
        strmap_del(&attaching, u->env, strlen(u->env));
    if (!fleet_conn_is_open(u->c) || upgrade_db_failed(u, "attach")) goto out;
    if (j->result == -ESTALE)
        fleet_api_refuse(u->c, "attach", u->env, "", 401, "unauthorized", "superseded",
                         "this registration is not the environment's current one; register "
                         "again");
    else if (j->result == -EKEYREVOKED)
        fleet_api_refuse(u->c, "attach", u->env, "", 401, "unauthorized", "revoked_token",
                         "the token that registered this environment was revoked or expired");
    else if (j->result < 0)
        fleet_api_refuse(u->c, "attach", u->env, "", 500, "internal_error", "other",
                         "the attachment could not be recorded");
    else
        env_accept(u);
out:
    upgrade_free(u);
}

static void take_run(struct fleet_job *j, struct fleet_db *db)
{
    struct upgrade_job *u = (struct upgrade_job *)j;
    j->result =
        fleet_store_bundle_take(db, u->claims.nonce, u->env, j->now_ms, j->err, sizeof j->err);
}

/* The environment a harness URL names, attached here under the URL's registration;
 * NULL after refusing. */
static struct relay_env *harness_target(struct fleet_conn *c, const char *env_id,
                                        const struct fleet_url_claims *cl)
{
    struct relay_env *env = strmap_get(&envs, env_id, strlen(env_id));
    if (!env) {
        fleet_api_refuse(c, "harness", env_id, "", 409, "environment_offline",
                         "environment_offline",
                         "the executor of this environment is not connected to this node");
        return NULL;
    }
    if (strcmp(env->reg, cl->registration) != 0) {
        fleet_api_refuse(c, "harness", env_id, "", 401, "unauthorized", "superseded",
                         "the executor registered again; ask /connect for a new bundle");
        return NULL;
    }
    return env;
}

static void take_done(struct fleet_job *j)
{
    struct upgrade_job *u = (struct upgrade_job *)j;
    if (!fleet_conn_is_open(u->c) || upgrade_db_failed(u, "harness")) goto out;
    if (j->result == -ENOENT) {
        fleet_api_refuse(u->c, "harness", u->env, "", 401, "unauthorized", "replayed_url",
                         "this rendezvous URL was used already or has expired; ask /connect "
                         "for a new one");
        goto out;
    }
    struct relay_env *env = harness_target(u->c, u->env, &u->claims);
    if (!env) goto out;
    struct relay_harness *h = xcalloc(1, sizeof *h);
    h->conn = u->c;
    h->env = env;
    h->next = env->harnesses;
    if (h->next) h->next->prev = h;
    env->harnesses = h;
    h->last_activity = now_loop();
    fleet_metrics_gauges(0, 0, 1);
    log_info("event=harness_open environment=%s peer=%s", env->id, fleet_conn_peer(u->c));
    fleet_conn_upgrade(u->c, fleet_cfg.max_frame, &harness_ops, h);
    if (fleet_conn_is_open(u->c))
        fleet_conn_set_deadline(u->c, h->last_activity + fleet_cfg.claim_ms);
out:
    upgrade_free(u);
}

void fleet_relay_upgrade(struct fleet_conn *c, const struct fleet_request *req, const char *env,
                         size_t env_len)
{
    char id[FLEET_MAX_ID + 1];
    if (!fleet_env_id_ok(env, env_len)) {
        fleet_conn_reply_error(c, 404, "not_found", "no such environment path", NULL);
        return;
    }
    memcpy(id, env, env_len);
    id[env_len] = '\0';
    if (!req->ws_ok) {
        fleet_conn_reply_error(c, 400, "bad_request",
                               "expected a WebSocket upgrade (version 13, with a valid key)",
                               "sec-websocket-version: 13\r\n");
        return;
    }
    struct fleet_url_claims cl;
    int r = fleet_url_verify(fleet_cfg.secret, id, req->head.query, req->head.query_len,
                             fleet_now_ms() / 1000, &cl);
    if (r < 0) {
        fleet_api_refuse(c, "upgrade", id, "", 401, "unauthorized",
                         r == -ETIMEDOUT ? "expired_url" : "bad_signature",
                         r == -ETIMEDOUT ? "this rendezvous URL has expired"
                                         : "this rendezvous URL is not signed by this registry");
        return;
    }
    fleet_conn_set_endpoint(c, cl.role == FLEET_ROLE_HARNESS ? FLEET_EP_RENDEZVOUS_HARNESS
                                                             : FLEET_EP_RENDEZVOUS_ENVIRONMENT);
    if (cl.role == FLEET_ROLE_HARNESS && !harness_target(c, id, &cl)) return;
    struct upgrade_job *u = xcalloc(1, sizeof *u);
    u->c = c;
    u->claims = cl;
    memcpy(u->env, id, sizeof u->env);
    fleet_conn_hold(c);
    bool harness = cl.role == FLEET_ROLE_HARNESS;
    if (!harness) strmap_put(&attaching, u->env, strlen(u->env), u);
    if (fleet_worker_submit(&u->job, harness ? take_run : attach_run,
                            harness ? take_done : attach_done) < 0) {
        if (!harness) strmap_del(&attaching, u->env, strlen(u->env));
        fleet_api_refuse(c, "upgrade", id, "", 503, "database_unavailable", "database_unavailable",
                         "the registry is overloaded; retry");
        upgrade_free(u);
    }
}

/* ---- the heartbeat's view ---- */

struct fleet_held *fleet_relay_held(size_t *n)
{
    struct fleet_held *out = xcalloc(envs.n + attaching.n + 1, sizeof *out);
    size_t pos = 0, k = 0;
    struct relay_env *env;
    while ((env = strmap_next(&envs, &pos))) {
        out[k].env = xstrdup(env->id);
        out[k].reg = xstrdup(env->reg);
        out[k].streams = env->nstreams;
        out[k].streams_changed = env->streams_changed || lost_heartbeat;
        env->streams_changed = false;
        k++;
    }
    pos = 0;
    struct upgrade_job *u;
    while ((u = strmap_next(&attaching, &pos))) {
        if (strmap_get(&envs, u->env, strlen(u->env))) continue; /* a replacement */
        out[k].env = xstrdup(u->env);
        out[k].reg = xstrdup(u->claims.registration);
        k++;
    }
    *n = k;
    return out;
}

void fleet_relay_held_free(struct fleet_held *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)h[i].env);
        free((char *)h[i].reg);
    }
    free(h);
}

void fleet_relay_heartbeat_done(int ok)
{
    lost_heartbeat = !ok;
}

void fleet_relay_drop(const char *id, const char *why)
{
    struct relay_env *env = strmap_get(&envs, id, strlen(id));
    if (!env) return;
    log_notice("event=drop environment=%s reason=%s: closing its executor socket", id, why);
    env->replaced = true; /* the database already says it is not here */
    fleet_conn_ws_close(env->conn, 1008, why);
}
