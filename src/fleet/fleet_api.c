/* fleet_api: /register, /connect and /validate (see fleet_api.h). */
#include "fleet/fleet_api.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "crypto/random.h"
#include "fleet/fleet_audit.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_store.h"
#include "fleet/fleet_throttle.h"
#include "fleet/fleet_worker.h"
#include "proto/hex.h"
#include "proto/noise_key.h"
#include "util/mem.h"

#define SECURITY_PROFILE "noise_hybrid_ik_v1"
#define THROTTLE_KEYS 65536

static struct fleet_throttle connect_throttle;

/* One request on its way through the database. */
struct api_call {
    struct fleet_job job; /* first: the worker hands it back */
    struct fleet_conn *c;
    enum fleet_api_endpoint endpoint;
    char env[FLEET_MAX_ID + 1];
    char token[FLEET_TOKEN_LEN + 1]; /* the presented bearer (wiped at free) */
    size_t token_len;
    enum fleet_token_verdict verdict;
    char token_id[FLEET_TOKEN_ID_LEN + 1];
    char reg[FLEET_MAX_ID + 1];
    char *key_json;                        /* register: the executor key as sent */
    char key_digest[FLEET_DIGEST_HEX + 1]; /* connect/validate: the harness key's */
    char nonce[FLEET_NONCE_HEX + 1];       /* connect: the harness URL's */
    struct fleet_location loc;             /* connect: where the executor is */
    bool valid;                            /* validate */
};

static const char *const endpoint_words[] = {"register", "connect", "validate"};

void fleet_api_init(void)
{
    uint8_t seed[16];
    crypto_random_bytes(seed, sizeof seed);
    fleet_throttle_init(&connect_throttle, (double)fleet_cfg.connect_rate,
                        (double)fleet_cfg.connect_burst, THROTTLE_KEYS, seed);
}

void fleet_api_cleanup(void)
{
    fleet_throttle_free(&connect_throttle);
}

const char *fleet_api_bearer(const struct fleet_request *req, size_t *len)
{
    *len = 0;
    if (!req->authorization || req->authorization_len < 7 ||
        strncasecmp(req->authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *t = req->authorization + 7;
    size_t n = req->authorization_len - 7;
    while (n && *t == ' ')
        t++, n--;
    *len = n;
    return n ? t : NULL;
}

void fleet_api_refuse(struct fleet_conn *c, const char *what, const char *env, const char *token_id,
                      int status, const char *code, const char *reason, const char *message)
{
    char ev[FLEET_MAX_ID + 8];
    fleet_metrics_refusal(reason);
    fleet_audit("registry.refusal", &(struct fleet_audit_event){.what = what,
                                                                .environment = env,
                                                                .token = token_id,
                                                                .peer = fleet_conn_peer(c),
                                                                .status = status,
                                                                .reason = reason,
                                                                .valid = -1});
    log_notice("event=refusal what=%s environment=%s peer=%s token=%s status=%d reason=%s", what,
               *env ? log_value(env, ev, sizeof ev) : "-", fleet_conn_peer(c),
               token_id && *token_id ? token_id : "-", status, reason);
    fleet_conn_reply_error(c, status, code, message, NULL);
}

static void call_free(struct api_call *a)
{
    OPENSSL_cleanse(a->token, sizeof a->token);
    free(a->key_json);
    fleet_location_clear(&a->loc);
    fleet_conn_release(a->c);
    free(a);
}

/* ---- answers ---- */

static void reply_json(struct fleet_conn *c, int status, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    fleet_conn_reply(c, status, "application/json", text, strlen(text), NULL);
    free(text);
    json_decref(doc);
}

/* The answer to a refused token. */
static void refuse_token(struct api_call *a)
{
    const char *what = endpoint_words[a->endpoint];
    const char *reason = fleet_token_verdict_name(a->verdict);
    switch (a->verdict) {
    case FLEET_TOKEN_WRONG_ROLE:
        fleet_api_refuse(a->c, what, a->env, a->token_id, 403, "forbidden", reason,
                         a->endpoint == FLEET_API_CONNECT
                             ? "this token is an executor token; /connect needs a harness token"
                             : "this token is a harness token; executors need an executor token");
        return;
    case FLEET_TOKEN_WRONG_ENV:
        fleet_api_refuse(a->c, what, a->env, a->token_id, 403, "forbidden", reason,
                         "this token does not open this environment");
        return;
    default:
        fleet_api_refuse(a->c, what, a->env, a->token_id, 401, "unauthorized", reason,
                         a->verdict == FLEET_TOKEN_REVOKED   ? "the bearer token was revoked"
                         : a->verdict == FLEET_TOKEN_EXPIRED ? "the bearer token has expired"
                                                             : "unknown bearer token");
        return;
    }
}

/* The answer to a job that failed in the database; true when it did. */
static bool database_failed(struct api_call *a)
{
    int r = a->job.result;
    if (r != -EIO && r != -EBUSY && r != -EINVAL && r != -EPROTO) return false;
    const char *what = endpoint_words[a->endpoint];
    if (r == -EINVAL || r == -EPROTO) {
        log_error("event=database endpoint=%s error=\"%s\"", what, a->job.err);
        fleet_api_refuse(a->c, what, a->env, a->token_id, 500, "internal_error",
                         "database_unavailable", "the registry failed to read its database");
    } else {
        fleet_api_refuse(a->c, what, a->env, a->token_id, 503, "database_unavailable",
                         "database_unavailable",
                         r == -EBUSY ? "the registry's database is busy; retry"
                                     : "the registry's database is unavailable; retry");
    }
    return true;
}

/* Common start of every job: the token, for role and environment. False when the
 * job is over (verdict or database error set). */
static bool job_token(struct api_call *a, struct fleet_db *db, enum fleet_role role)
{
    a->job.result =
        fleet_store_token_check(db, a->token, a->token_len, role, a->env, a->job.now_ms,
                                &a->verdict, a->token_id, a->job.err, sizeof a->job.err);
    return a->job.result == 0 && a->verdict == FLEET_TOKEN_OK;
}

/* The signed rendezvous URL (ws base + path + query) into out. */
static void rendezvous_url(const char *base, const char *env, const struct fleet_url_claims *cl,
                           char *out, size_t cap)
{
    char q[400];
    if (fleet_url_sign(fleet_cfg.secret, env, cl, q, sizeof q) < 0) q[0] = '\0';
    snprintf(out, cap, "%s/rendezvous/v1/environment/%s?%s", base, env, q);
}

/* ---- /register ---- */

static void register_run(struct fleet_job *j, struct fleet_db *db)
{
    struct api_call *a = (struct api_call *)j;
    if (!job_token(a, db, FLEET_ROLE_EXECUTOR)) return;
    j->result = fleet_store_register(db, a->env, a->reg, a->token_id, a->key_json,
                                     (int64_t)fleet_cfg.max_envs_per_token, j->now_ms, j->err,
                                     sizeof j->err);
}

static void register_done(struct fleet_job *j)
{
    struct api_call *a = (struct api_call *)j;
    if (!fleet_conn_is_open(a->c) || database_failed(a)) goto out;
    if (a->verdict != FLEET_TOKEN_OK) {
        refuse_token(a);
    } else if (j->result == -EDQUOT) {
        fleet_api_refuse(a->c, "register", a->env, a->token_id, 403, "too_many_environments",
                         "too_many_environments",
                         "this token has registered its limit of environments "
                         "(--max-environments-per-token)");
    } else {
        struct fleet_url_claims cl = {.role = FLEET_ROLE_EXECUTOR,
                                      .expires =
                                          (j->now_ms + (int64_t)fleet_cfg.env_url_ttl_ms) / 1000};
        snprintf(cl.registration, sizeof cl.registration, "%s", a->reg);
        char url[1024];
        rendezvous_url(fleet_cfg.environment_base, a->env, &cl, url, sizeof url);
        char ev[FLEET_MAX_ID + 8];
        log_notice("event=register environment=%s registration=%s token=%s peer=%s",
                   log_value(a->env, ev, sizeof ev), a->reg, a->token_id, fleet_conn_peer(a->c));
        fleet_audit("registry.register", &(struct fleet_audit_event){.environment = a->env,
                                                                     .registration = a->reg,
                                                                     .token = a->token_id,
                                                                     .peer = fleet_conn_peer(a->c),
                                                                     .valid = -1});
        reply_json(a->c, 200,
                   json_pack("{s:s, s:s, s:s, s:s}", "environment_id", a->env, "url", url,
                             "security_profile", SECURITY_PROFILE, "executor_registration_id",
                             a->reg));
    }
out:
    call_free(a);
}

/* ---- /connect ---- */

static void connect_run(struct fleet_job *j, struct fleet_db *db)
{
    struct api_call *a = (struct api_call *)j;
    if (!job_token(a, db, FLEET_ROLE_HARNESS)) return;
    /* Not simply now - dead: after an outage the holding node may not have
     * heartbeated yet (fleet_worker_alive_after). */
    int64_t alive_after = fleet_worker_alive_after(j->now_ms, (int64_t)fleet_cfg.dead_ms);
    j->result = fleet_store_locate(db, a->env, alive_after, &a->loc, j->err, sizeof j->err);
    if (j->result < 0) return;
    j->result =
        fleet_store_bundle_add(db, a->nonce, a->env, j->now_ms + (int64_t)fleet_cfg.bundle_ttl_ms,
                               (int64_t)fleet_cfg.max_pending, j->now_ms, j->err, sizeof j->err);
}

/* http(s)://... of a node -> ws(s)://... */
static void ws_base(const char *http, char *out, size_t cap)
{
    if (strncmp(http, "https://", 8) == 0)
        snprintf(out, cap, "wss://%s", http + 8);
    else if (strncmp(http, "http://", 7) == 0)
        snprintf(out, cap, "ws://%s", http + 7);
    else
        snprintf(out, cap, "%s", http);
}

static void connect_answer(struct api_call *a)
{
    int64_t expires_ms = a->job.now_ms + (int64_t)fleet_cfg.bundle_ttl_ms;
    struct fleet_url_claims cl = {.role = FLEET_ROLE_HARNESS, .expires = expires_ms / 1000};
    snprintf(cl.registration, sizeof cl.registration, "%s", a->loc.registration);
    snprintf(cl.nonce, sizeof cl.nonce, "%s", a->nonce);
    char base[600], url[1200], auth[160], anonce[FLEET_NONCE_HEX + 1];
    ws_base(a->loc.node_url, base, sizeof base);
    rendezvous_url(base, a->env, &cl, url, sizeof url);
    uint8_t raw[FLEET_NONCE_HEX / 2];
    crypto_random_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, anonce);
    fleet_authorization_make(fleet_cfg.secret, a->env, a->loc.registration, a->key_digest,
                             expires_ms / 1000, anonce, auth, sizeof auth);
    json_t *key = json_loads(a->loc.key_json, 0, NULL);
    char ev[FLEET_MAX_ID + 8];
    log_notice("event=connect environment=%s node=%s token=%s peer=%s",
               log_value(a->env, ev, sizeof ev), a->loc.node_id, a->token_id,
               fleet_conn_peer(a->c));
    fleet_audit("registry.connect", &(struct fleet_audit_event){.environment = a->env,
                                                                .registration = a->loc.registration,
                                                                .token = a->token_id,
                                                                .node = a->loc.node_id,
                                                                .peer = fleet_conn_peer(a->c),
                                                                .harness_key = a->key_digest,
                                                                .valid = -1});
    reply_json(a->c, 200,
               json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "environment_id", a->env, "url", url,
                         "security_profile", SECURITY_PROFILE, "executor_registration_id",
                         a->loc.registration, "executor_public_key", key ? key : json_object(),
                         "harness_key_authorization", auth));
}

static void connect_done(struct fleet_job *j)
{
    struct api_call *a = (struct api_call *)j;
    if (!fleet_conn_is_open(a->c) || database_failed(a)) goto out;
    if (a->verdict != FLEET_TOKEN_OK)
        refuse_token(a);
    else if (j->result == -ENOENT)
        fleet_api_refuse(a->c, "connect", a->env, a->token_id, 409, "environment_offline",
                         "environment_offline", "no executor of this environment is connected");
    else if (j->result == -EDQUOT)
        fleet_api_refuse(a->c, "connect", a->env, a->token_id, 429, "too_many_pending_bundles",
                         "too_many_pending_bundles",
                         "this environment has too many unused connect bundles "
                         "(--max-pending-bundles); retry later");
    else
        connect_answer(a);
out:
    call_free(a);
}

/* ---- /validate ---- */

static void validate_run(struct fleet_job *j, struct fleet_db *db)
{
    struct api_call *a = (struct api_call *)j;
    if (!job_token(a, db, FLEET_ROLE_EXECUTOR)) return;
    j->result =
        fleet_store_registration_check(db, a->env, a->reg, j->now_ms, j->err, sizeof j->err);
    if (j->result == -ESTALE || j->result == -EKEYREVOKED) {
        a->valid = false;
        j->result = 0;
    }
}

static void validate_done(struct fleet_job *j)
{
    struct api_call *a = (struct api_call *)j;
    if (!fleet_conn_is_open(a->c) || database_failed(a)) goto out;
    if (a->verdict != FLEET_TOKEN_OK) {
        refuse_token(a);
    } else {
        char ev[FLEET_MAX_ID + 8];
        log_info("event=validate environment=%s valid=%s", log_value(a->env, ev, sizeof ev),
                 a->valid ? "true" : "false");
        fleet_audit("registry.validate", &(struct fleet_audit_event){.environment = a->env,
                                                                     .registration = a->reg,
                                                                     .token = a->token_id,
                                                                     .peer = fleet_conn_peer(a->c),
                                                                     .harness_key = a->key_digest,
                                                                     .valid = a->valid});
        reply_json(a->c, 200, json_pack("{s:b}", "valid", a->valid));
    }
out:
    call_free(a);
}

/* ---- request checks (on the loop) ---- */

/* The body as a JSON object with exactly the members named in need[] (NULL-ended);
 * NULL after answering 400. */
static json_t *body_object(struct api_call *a, const struct fleet_request *req,
                           const char *const *need)
{
    const char *what = endpoint_words[a->endpoint];
    if (!req->content_type ||
        !memmem(req->content_type, req->content_type_len, "application/json", 16)) {
        fleet_api_refuse(a->c, what, a->env, "", 400, "bad_request", "bad_request",
                         "content-type must be application/json");
        return NULL;
    }
    json_t *doc = json_loadb(req->body, req->body_len, 0, NULL);
    size_t n = 0;
    bool ok = json_is_object(doc);
    for (; ok && need[n]; n++)
        ok = json_object_get(doc, need[n]) != NULL;
    if (!ok || json_object_size(doc) != n) {
        char msg[200];
        snprintf(msg, sizeof msg, "the body must be a JSON object with exactly %s%s%s%s%s", need[0],
                 need[1] ? ", " : "", need[1] ? need[1] : "", need[1] && need[2] ? ", " : "",
                 need[1] && need[2] ? need[2] : "");
        fleet_api_refuse(a->c, what, a->env, "", 400, "bad_request", "bad_request", msg);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* A public key member: its digest into a->key_digest; false after answering 400. */
static bool harness_key(struct api_call *a, json_t *doc)
{
    struct noise_ik_public_key pub;
    if (noise_ik_public_key_from_json(json_object_get(doc, "harness_public_key"), &pub) < 0) {
        fleet_api_refuse(a->c, endpoint_words[a->endpoint], a->env, "", 400, "bad_request",
                         "bad_request",
                         "harness_public_key is not a " NOISE_IK_SUITE " public key");
        return false;
    }
    fleet_key_digest((const uint8_t *)&pub, sizeof pub, a->key_digest);
    return true;
}

static bool register_prepare(struct api_call *a, json_t *doc)
{
    const char *profile = json_string_value(json_object_get(doc, "security_profile"));
    struct noise_ik_public_key pub;
    json_t *key = json_object_get(doc, "executor_public_key");
    if (!profile || strcmp(profile, SECURITY_PROFILE) != 0 ||
        noise_ik_public_key_from_json(key, &pub) < 0) {
        fleet_api_refuse(a->c, "register", a->env, "", 400, "bad_request", "bad_request",
                         "security_profile must be " SECURITY_PROFILE
                         " and executor_public_key a " NOISE_IK_SUITE " public key");
        return false;
    }
    a->key_json = json_dumps(key, JSON_COMPACT | JSON_PRESERVE_ORDER);
    uint8_t raw[8];
    crypto_random_bytes(raw, sizeof raw);
    char hexid[17];
    hex_encode(raw, sizeof raw, hexid);
    snprintf(a->reg, sizeof a->reg, "reg-%s", hexid);
    return true;
}

static bool connect_prepare(struct api_call *a, json_t *doc)
{
    if (!harness_key(a, doc)) return false;
    /* Before the database: a flood from one token is answered here. */
    char tid[FLEET_TOKEN_ID_LEN + 1], digest[FLEET_DIGEST_HEX + 1];
    if (fleet_token_split(a->token, a->token_len, tid, digest) < 0) {
        a->verdict = FLEET_TOKEN_MALFORMED;
        refuse_token(a);
        return false;
    }
    uint64_t retry = 0;
    bool first = false;
    if (!fleet_throttle_take(&connect_throttle, digest, FLEET_DIGEST_HEX, (uint64_t)fleet_now_ms(),
                             &retry, &first)) {
        char hdr[64], msg[160];
        snprintf(hdr, sizeof hdr, "retry-after: %" PRIu64 "\r\n", (retry + 999) / 1000);
        snprintf(msg, sizeof msg,
                 "too many /connect requests with this token (--connect-rate %" PRIu64
                 "/s); retry in %" PRIu64 " ms",
                 fleet_cfg.connect_rate, retry);
        fleet_metrics_refusal("rate_limited");
        if (first) {
            char ev[FLEET_MAX_ID + 8];
            log_notice("event=refusal what=connect environment=%s peer=%s token=%s status=429 "
                       "reason=rate_limited (logged once per burst)",
                       log_value(a->env, ev, sizeof ev), fleet_conn_peer(a->c), tid);
        }
        fleet_conn_reply_error(a->c, 429, "rate_limited", msg, hdr);
        return false;
    }
    uint8_t raw[FLEET_NONCE_HEX / 2];
    crypto_random_bytes(raw, sizeof raw);
    hex_encode(raw, sizeof raw, a->nonce);
    return true;
}

static bool validate_prepare(struct api_call *a, json_t *doc)
{
    const char *reg = json_string_value(json_object_get(doc, "executor_registration_id"));
    const char *auth = json_string_value(json_object_get(doc, "harness_key_authorization"));
    if (!reg || !auth || !harness_key(a, doc)) {
        if (reg && auth) return false; /* harness_key answered */
        fleet_api_refuse(a->c, "validate", a->env, "", 400, "bad_request", "bad_request",
                         "executor_registration_id and harness_key_authorization must be "
                         "strings");
        return false;
    }
    snprintf(a->reg, sizeof a->reg, "%s", reg);
    a->valid = strlen(reg) <= FLEET_MAX_ID &&
               fleet_authorization_ok(fleet_cfg.secret, a->env, reg, a->key_digest, auth,
                                      strlen(auth), fleet_now_ms() / 1000);
    return true;
}

/* Checks the request and fills a; false after answering. */
static bool prepare(struct api_call *a, const struct fleet_request *req)
{
    static const char *const need[3][4] = {
        {"security_profile", "executor_public_key", NULL, NULL},
        {"harness_public_key", NULL, NULL, NULL},
        {"executor_registration_id", "harness_public_key", "harness_key_authorization", NULL},
    };
    size_t tl;
    const char *t = fleet_api_bearer(req, &tl);
    if (!t) {
        fleet_api_refuse(a->c, endpoint_words[a->endpoint], a->env, "", 401, "unauthorized",
                         "malformed_token", "an Authorization: Bearer token is required");
        return false;
    }
    a->token_len = tl < sizeof a->token ? tl : 0; /* longer than ours: never a match */
    memcpy(a->token, t, a->token_len);
    json_t *doc = body_object(a, req, need[a->endpoint]);
    if (!doc) return false;
    bool ok = a->endpoint == FLEET_API_REGISTER  ? register_prepare(a, doc)
              : a->endpoint == FLEET_API_CONNECT ? connect_prepare(a, doc)
                                                 : validate_prepare(a, doc);
    json_decref(doc);
    return ok;
}

void fleet_api_handle(struct fleet_conn *c, const struct fleet_request *req, const char *env,
                      size_t env_len, enum fleet_api_endpoint endpoint)
{
    static const enum fleet_endpoint eps[] = {FLEET_EP_REGISTER, FLEET_EP_CONNECT,
                                              FLEET_EP_VALIDATE};
    static const fleet_job_run_fn runs[] = {register_run, connect_run, validate_run};
    static const fleet_job_done_fn dones[] = {register_done, connect_done, validate_done};
    fleet_conn_set_endpoint(c, eps[endpoint]);
    if (!(req->head.method_len == 4 && memcmp(req->head.method, "POST", 4) == 0)) {
        fleet_conn_reply_error(c, 405, "method_not_allowed", "use POST", "allow: POST\r\n");
        return;
    }
    if (!fleet_env_id_ok(env, env_len)) {
        fleet_conn_reply_error(c, 404, "not_found",
                               "environment ids are 1-128 characters of [A-Za-z0-9_.-]", NULL);
        return;
    }
    struct api_call *a = xcalloc(1, sizeof *a);
    a->c = c;
    a->endpoint = endpoint;
    memcpy(a->env, env, env_len);
    fleet_conn_hold(c);
    if (!prepare(a, req)) {
        call_free(a);
        return;
    }
    if (fleet_worker_submit(&a->job, runs[endpoint], dones[endpoint]) < 0) {
        fleet_api_refuse(c, endpoint_words[endpoint], a->env, "", 503, "database_unavailable",
                         "database_unavailable",
                         "the registry has too many requests waiting for its database; retry");
        call_free(a);
    }
}
