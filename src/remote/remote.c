/* remote: registration, the rendezvous connection loop and readiness (remote.h).
 *
 * One state object for the process (remote mode has one registration). The loop:
 * connect to the registered URL, serve until the socket ends, then sleep a jittered
 * backoff that doubles up to 30 s and is not reset by success (0.169.0's policy,
 * docs/REMOTE.md §8.4; its §4.4 describes an older one). A refused upgrade
 * with a 4xx status means the signed URL is no longer accepted: register again
 * (a failing re-registration is fatal, as in the reference) and connect to the new
 * URL. Everything runs on the loop thread. */
#include "remote/remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/env_vars.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/readiness.h"
#include "crypto/noise_ik.h"
#include "proto/noise_key.h"
#include "proto/hex.h"
#include "crypto/random.h"
#include "remote/registry.h"
#include "remote/relay_demux.h"
#include "remote/relay_fwd.h"
#include "remote/rv_ws.h"
#include "remote/sigv4.h"
#include "remote/direct_conn.h"
#include "remote/relay_conn.h"
#include "util/mem.h"

#define REMOTE_STABLE_UNITS 120 /* a connection up this many units resets the backoff */

struct remote {
    uv_loop_t *loop;
    char *env_id, *name;
    char *base_url;       /* the registry, for messages */
    bool announced;       /* "registered and connected" has been said (once) */
    uint64_t offline_ms;  /* uv_now when a served connection was lost, 0 while online */
    char *base_url_shown; /* the registry URL without userinfo or query, for messages */
    struct noise_ik_static_key identity;
    char *key_json; /* our public key JSON */
    struct registry_client *registry;
    struct registry_registration reg;
    struct registry_call *registering; /* the /register call in flight, or NULL */
    struct rv_ws *ws;                  /* the rendezvous socket, NULL between attempts */
    struct relay_demux *demux;         /* while ws is open */
    uv_timer_t retry;
    uint64_t backoff_unit_ms; /* 1000 (tests shrink it) */
    unsigned retries;         /* reconnect attempts since the last stable connection */
    uint64_t opened_ms;       /* uv_now when the current socket opened */
    uint64_t ping_ms, pong_ms;
    uint64_t attempt_started_ns;
    unsigned attempt;
    bool stopping;
    void (*on_fatal)(void);
    struct relay_conn_kind serve;        /* streams served by our rpc */
    struct relay_fwd_kind forward;       /* or forwarded to a destination */
    const struct relay_sink_kind *sinks; /* the one in use */
    /* --remote-transport direct */
    bool direct;
    struct conn *dconn; /* the direct socket's connection, while open */
    conn_message_fn on_message;
    char *aws[5]; /* access key, secret, session token (or NULL), region, service */
};

static struct remote *R;

static void connect_now(void);

static void fatal(const char *what)
{
    log_error("remote: %s; exiting", what);
    readiness_set(false);
    if (R->on_fatal) R->on_fatal();
}

/* The sleep before the next attempt, as 0.169.0 does it (REMOTE.md §8.4): a
 * random time in [b/2, b] with b = min(unit * 2^n, 30 units) for the n-th retry.
 * n is not reset by a connection that drops soon; 0.169.0 resets it after one that
 * stayed up somewhere between 65 and 200 s (measured), REMOTE_STABLE_UNITS units
 * here. unit is 1 s (a test knob shrinks it). */
static void schedule_retry(void)
{
    if (R->stopping) return;
    if (R->direct) {
        /* 0.169.0's direct policy (REMOTE.md §8.6): 500 ms * 2^min(n, 4), at most
         * 5 s, plus up to 50 % jitter; reset by a successful connect. */
        unsigned n = R->retries < 4 ? R->retries : 4;
        uint64_t base = (R->backoff_unit_ms / 2) << n;
        if (base > 5 * R->backoff_unit_ms) base = 5 * R->backoff_unit_ms;
        uint32_t jr;
        crypto_random_bytes(&jr, sizeof jr);
        R->retries++;
        uv_timer_start(&R->retry, (uv_timer_cb)connect_now, base + jr % (base / 2 + 1), 0);
        return;
    }
    uint64_t b = R->backoff_unit_ms;
    for (unsigned i = 0; i < R->retries && b < 30 * R->backoff_unit_ms; i++)
        b *= 2;
    if (b > 30 * R->backoff_unit_ms) b = 30 * R->backoff_unit_ms;
    uint32_t r;
    crypto_random_bytes(&r, sizeof r);
    uint64_t sleep_ms = b / 2 + (b / 2 ? r % (b / 2 + 1) : 0);
    R->retries++;
    uv_timer_start(&R->retry, (uv_timer_cb)connect_now, sleep_ms, 0);
}

static void on_registered(void *arg, int result, int http_status, struct registry_registration *reg,
                          const char *why)
{
    bool first = arg == NULL;
    R->registering = NULL; /* the call frees itself after this callback */
    uint64_t dur = metrics_now_ns() - R->attempt_started_ns;
    metrics_remote_registration(result == 0, dur);
    if (R->stopping) return;
    if (result < 0) {
        log_event("event=remote_registration noise_event=registration noise_outcome=error "
                  "status=%d",
                  http_status);
        char msg[256];
        snprintf(msg, sizeof msg, "%s with the registry at %s failed: %s%s%.0d",
                 first ? "registration" : "re-registration", R->base_url_shown, why ? why : "error",
                 http_status ? ", HTTP status " : "", http_status);
        fatal(msg);
        return;
    }
    registry_registration_clear(&R->reg);
    R->reg = *reg;
    memset(reg, 0, sizeof *reg); /* taken */
    char u[512];
    rv_ws_url_redacted(R->reg.url, u, sizeof u);
    log_event("event=remote_registration noise_event=registration noise_outcome=ok "
              "security_profile=" REGISTRY_SECURITY_PROFILE " rendezvous=%s",
              u);
    if (first)
        connect_now();
    else
        schedule_retry();
}

static void start_registration(bool first)
{
    R->attempt_started_ns = metrics_now_ns();
    if (R->direct) {
        struct sigv4_key k = {R->aws[0], R->aws[1], R->aws[2], R->aws[3], R->aws[4]};
        R->registering = registry_direct_register(R->registry, &k, on_registered, first ? NULL : R);
    } else {
        R->registering =
            registry_register(R->registry, R->key_json, on_registered, first ? NULL : R);
    }
    if (!R->registering) fatal("cannot start the registration request");
}

/* ---- the demux's view of the socket ---- */

static int demux_send(void *arg, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg)
{
    if (!R->ws) return -ENOTCONN;
    return rv_ws_send(R->ws, p, n, done, done_arg);
}

static uint8_t *demux_reserve(void *arg, size_t n)
{
    return R->ws ? rv_ws_reserve(R->ws, n) : NULL;
}

static int demux_commit(void *arg, rv_ws_sent_fn done, void *done_arg, size_t done_len)
{
    return R->ws ? rv_ws_commit(R->ws, done, done_arg, done_len) : -ENOTCONN;
}

static size_t demux_queued(void *arg)
{
    return R->ws ? rv_ws_queued(R->ws) : 0;
}

static struct registry_call *demux_validate(void *arg, const char *stream_id,
                                            const char *harness_key_json, const char *authorization,
                                            registry_validate_cb cb, void *cb_arg)
{
    return registry_validate(R->registry, R->reg.registration_id, stream_id, harness_key_json,
                             authorization, cb, cb_arg);
}

static void demux_cancel(void *arg, struct registry_call *call)
{
    registry_call_cancel(call);
}

static const struct relay_demux_ops demux_ops = {
    .send = demux_send,
    .validate = demux_validate,
    .cancel = demux_cancel,
    .reserve = demux_reserve,
    .commit = demux_commit,
    .queued = demux_queued,
};

/* ---- the rendezvous socket ---- */

/* The first time the executor is reachable, say so at the default log level (once:
 * later reconnects are info events). */
static void remote_announce(void)
{
    if (R->announced) return;
    R->announced = true;
    char idv[128];
    log_notice("remote: registered environment %s with %s and connected to its %s; serving "
               "harnesses",
               log_value(R->env_id, idv, sizeof idv), R->base_url_shown,
               R->direct ? "direct WebSocket" : "rendezvous");
}

/* Losing a connection that served harnesses, and getting one back, are notices: an
 * executor that is offline for a minute (the registry restarted, the network went)
 * says so at the default log level, once each way, with the reason. */
static void remote_went_offline(const char *reason, int http_status)
{
    if (R->offline_ms || R->stopping) return;
    R->offline_ms = uv_now(R->loop);
    if (!R->offline_ms) R->offline_ms = 1;
    char st[32] = "";
    if (http_status) snprintf(st, sizeof st, ", HTTP status %d", http_status);
    log_notice("remote: lost the %s to %s (%s%s); offline, reconnecting",
               R->direct ? "direct WebSocket" : "rendezvous", R->base_url_shown, reason, st);
}

static void remote_back_online(void)
{
    if (!R->offline_ms) return;
    uint64_t ms = uv_now(R->loop) - R->offline_ms;
    R->offline_ms = 0;
    log_notice("remote: reconnected to the %s of %s after %llu.%01llu s offline; serving "
               "harnesses again",
               R->direct ? "direct WebSocket" : "rendezvous", R->base_url_shown,
               (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000 / 100));
}

static void ws_opened(void *arg)
{
    metrics_remote_connect(true, metrics_now_ns() - R->attempt_started_ns);
    if (R->direct) {
        R->dconn = direct_conn_new(R->loop, R->ws, R->on_message);
        R->opened_ms = uv_now(R->loop);
        R->retries = 0;
        readiness_set(true);
        remote_announce();
        remote_back_online();
        log_event("event=remote_direct noise_event=direct_connection noise_outcome=ok "
                  "connection_attempt=%u",
                  R->attempt);
        return;
    }
    R->demux = relay_demux_new(R->loop, &R->identity, R->env_id, R->reg.registration_id, &demux_ops,
                               NULL, R->sinks);
    R->opened_ms = uv_now(R->loop);
    readiness_set(true);
    remote_announce();
    remote_back_online();
    log_event("event=remote_rendezvous noise_event=rendezvous_connection noise_outcome=ok "
              "connection_attempt=%u",
              R->attempt);
}

static void ws_binary(void *arg, const uint8_t *p, size_t n)
{
    if (R->dconn) direct_conn_deliver(R->dconn, p, n);
    if (R->demux) relay_demux_on_message(R->demux, p, n);
}

/* The direct socket ended (REMOTE.md §8.6): 409 registers again, 401, 403 and
 * any other 4xx but 408 and 429 are fatal, the rest retries the same URL. */
static void direct_closed(bool was_open, int http_status, const char *reason)
{
    if (R->dconn) direct_conn_detach(R->dconn);
    R->dconn = NULL;
    if (!was_open) metrics_remote_connect(false, metrics_now_ns() - R->attempt_started_ns);
    if (R->stopping) return;
    log_event("event=remote_direct noise_event=direct_connection noise_outcome=%s "
              "noise_reason=%s status=%d",
              was_open ? "disconnected" : "error", reason, http_status);
    if (was_open) remote_went_offline(reason, http_status);
    if (!was_open && http_status == 409) {
        metrics_remote_reconnect("registration_rejected");
        start_registration(false);
        return;
    }
    if (!was_open && http_status >= 400 && http_status < 500 && http_status != 408 &&
        http_status != 429) {
        char u[512], msg[700];
        rv_ws_url_redacted(R->reg.url, u, sizeof u);
        u[strcspn(u, "?")] = '\0';
        snprintf(msg, sizeof msg, "failed to connect to exec-server websocket `%s`: HTTP error: %d",
                 u, http_status);
        fatal(msg);
        return;
    }
    metrics_remote_reconnect(reason);
    schedule_retry();
}

static void ws_closed(void *arg, int http_status, const char *reason)
{
    bool was_open = R->demux != NULL || R->dconn != NULL;
    R->ws = NULL;
    readiness_set(false);
    if (R->direct) {
        direct_closed(was_open, http_status, reason);
        return;
    }
    relay_demux_free(R->demux);
    R->demux = NULL;
    if (!was_open) metrics_remote_connect(false, metrics_now_ns() - R->attempt_started_ns);
    if (R->stopping) return;
    if (was_open && uv_now(R->loop) - R->opened_ms >= REMOTE_STABLE_UNITS * R->backoff_unit_ms)
        R->retries = 0;
    bool rejected = !was_open && http_status >= 400 && http_status < 500;
    const char *why = rejected ? "registration_rejected" : reason;
    metrics_remote_reconnect(why);
    log_event("event=remote_rendezvous noise_event=rendezvous_connection noise_outcome=%s "
              "noise_reason=%s status=%d",
              was_open ? "disconnected" : "error", why, http_status);
    if (was_open) remote_went_offline(why, http_status);
    if (rejected) {
        start_registration(false);
        return;
    }
    schedule_retry();
}

static void ws_drained(void *arg)
{
    if (R->demux) relay_demux_drained(R->demux);
}

static const struct rv_ws_ops ws_ops = {
    .on_open = ws_opened,
    .on_binary = ws_binary,
    .on_closed = ws_closed,
    .on_drained = ws_drained,
};

/* A header value from an environment variable's value v, if it is a safe one-line
 * value. */
static void env_header(const char *v, const char *name, char *out, size_t n, const char **lines,
                       size_t *k)
{
    if (!v || !*v || strlen(v) > 256) return;
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) return;
    snprintf(out, n, "%s: %s", name, v);
    lines[(*k)++] = out;
}

/* The direct socket's upgrade, signed (host;x-amz-date; 0.169.0 sends no
 * x-request-id there). */
static void connect_direct(void)
{
    struct rv_ws_url u;
    char date[SIGV4_DATE_LEN + 1], auth[1024], host[300];
    char h_date[64], h_auth[1100], h_tok[4200];
    const char *lines[4] = {NULL, NULL, NULL, NULL};
    int r = rv_ws_parse_url(R->reg.url, &u);
    if (r == 0) {
        bool v6 = strchr(u.host, ':') != NULL;
        bool default_port = u.port == (u.tls ? 443 : 80);
        char port[16] = "";
        if (!default_port) snprintf(port, sizeof port, ":%d", u.port);
        snprintf(host, sizeof host, "%s%s%s%s", v6 ? "[" : "", u.host, v6 ? "]" : "", port);
        struct sigv4_key k = {R->aws[0], R->aws[1], R->aws[2], R->aws[3], R->aws[4]};
        struct sigv4_request sr = {.method = "GET", .host = host, .target = u.target};
        r = sigv4_sign(&k, &sr, time(NULL), date, auth, sizeof auth);
    }
    if (r == 0) {
        snprintf(h_date, sizeof h_date, "x-amz-date: %s", date);
        snprintf(h_auth, sizeof h_auth, "authorization: %s", auth);
        lines[0] = h_date;
        lines[1] = h_auth;
        if (R->aws[2]) {
            snprintf(h_tok, sizeof h_tok, "x-amz-security-token: %s", R->aws[2]);
            lines[2] = h_tok;
        }
        /* The same limits as --listen: 64 MiB messages; no Ping (0.169.0 sends none
         * on this socket). */
        struct rv_ws_opts o = {.url = R->reg.url,
                               .headers = lines,
                               .connect_timeout_ms = 10000,
                               .max_message = 64u * 1024u * 1024u,
                               .fragment = 8u * 1024u * 1024u,
                               .text = true,
                               .no_ping = true};
        r = rv_ws_open(R->loop, &o, &ws_ops, NULL, &R->ws);
        memset(h_tok, 0, sizeof h_tok);
    }
    if (r < 0) {
        R->ws = NULL;
        log_warn("remote: cannot connect to the registry's direct URL");
        metrics_remote_connect(false, 0);
        metrics_remote_reconnect("connect_failed");
        schedule_retry();
    }
}

static void connect_now(void)
{
    if (R->stopping || R->ws) return;
    R->attempt++;
    R->attempt_started_ns = metrics_now_ns();
    if (R->direct) {
        connect_direct();
        return;
    }
    /* x-request-id as the reference sends it: "req_" and 32 hex digits. */
    uint8_t rnd[16];
    crypto_random_bytes(rnd, sizeof rnd);
    char reqid[64] = "x-request-id: req_", cluster[300], caller[300];
    hex_encode(rnd, sizeof rnd, reqid + strlen(reqid));
    const char *lines[4];
    size_t k = 0;
    lines[k++] = reqid;
    env_header(env_vars.openai_cluster, "x-cluster-name", cluster, sizeof cluster, lines, &k);
    env_header(env_vars.dd_service, "x-openai-internal-caller", caller, sizeof caller, lines, &k);
    lines[k] = NULL;
    struct rv_ws_opts o = {.url = R->reg.url,
                           .headers = lines,
                           .ping_ms = R->ping_ms,
                           .pong_deadline_ms = R->pong_ms,
                           .connect_timeout_ms = 10000};
    int r = rv_ws_open(R->loop, &o, &ws_ops, NULL, &R->ws);
    if (r < 0) {
        /* Not ws:// or wss://: a connect failure like any other (as 0.169.0). */
        R->ws = NULL;
        log_warn("remote: the registry's rendezvous URL is not ws:// or wss://");
        metrics_remote_connect(false, 0);
        metrics_remote_reconnect("connect_failed");
        schedule_retry();
    }
}

int remote_start(uv_loop_t *loop, const struct remote_opts *opts, void (*on_fatal)(void))
{
    R = xcalloc(1, sizeof *R);
    R->loop = loop;
    R->on_fatal = on_fatal;
    R->env_id = xstrdup(opts->environment_id);
    R->base_url = xstrdup(opts->base_url);
    R->name = xstrdup(opts->name ? opts->name : "codex-exec-server");
    R->ping_ms = opts->ping_ms;
    R->pong_ms = opts->pong_deadline_ms;
    R->backoff_unit_ms = opts->backoff_ms ? opts->backoff_ms : 1000;
    R->direct = opts->direct;
    R->on_message = opts->on_message;
    if (R->direct) {
        const char *a[5] = {opts->aws_access_key, opts->aws_secret_key, opts->aws_session_token,
                            opts->aws_region, opts->aws_service};
        for (int i = 0; i < 5; i++)
            R->aws[i] = a[i] && *a[i] ? xstrdup(a[i]) : NULL;
        if (!R->aws[0] || !R->aws[1] || !R->aws[3] || !R->aws[4]) return -EINVAL;
    }
    if (opts->forward_url) {
        if (relay_fwd_kind_init(&R->forward, opts->forward_url) < 0) return -EINVAL;
        R->sinks = &R->forward.base;
    } else {
        relay_conn_kind_init(&R->serve, opts->on_message);
        R->sinks = &R->serve.base;
    }
    int r = noise_ik_static_key_generate(&R->identity, NULL, NULL);
    if (r < 0) return r;
    json_t *kj = noise_ik_public_key_to_json(&R->identity.pub);
    R->key_json = json_dumps(kj, JSON_COMPACT);
    json_decref(kj);
    char auth[16384 + 64], account[512];
    const char *hdrs[3] = {NULL, NULL, NULL};
    if (opts->bearer && *opts->bearer) {
        if (strlen(opts->bearer) > sizeof auth - 32) return -EINVAL;
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", opts->bearer);
        hdrs[0] = auth;
        /* The ChatGPT account the token belongs to, in 0.169.0's header. */
        if (opts->chatgpt_account_id && *opts->chatgpt_account_id) {
            if (strlen(opts->chatgpt_account_id) > sizeof account - 32) return -EINVAL;
            snprintf(account, sizeof account, "chatgpt-account-id: %s", opts->chatgpt_account_id);
            hdrs[1] = account;
        }
    }
    R->registry = registry_client_new(loop, opts->base_url, opts->environment_id, hdrs);
    {
        const char *u = opts->base_url, *sep = strstr(u, "://");
        const char *host = sep ? sep + 3 : u;
        const char *at = strchr(host, '@'), *slash = strchr(host, '/');
        if (at && (!slash || at < slash)) host = at + 1;
        R->base_url_shown =
            xasprintf("%.*s%.*s", sep ? (int)(sep + 3 - u) : 0, u, (int)strcspn(host, "?#"), host);
    }
    memset(auth, 0, sizeof auth);
    uv_timer_init(loop, &R->retry);
    readiness_set(false);
    char idv[128];
    log_event("event=remote_start environment=%s", log_value(R->env_id, idv, sizeof idv));
    start_registration(true);
    return 0;
}

void remote_stop(void)
{
    if (!R || R->stopping) return;
    R->stopping = true;
    readiness_set(false);
    uv_timer_stop(&R->retry);
    uv_close((uv_handle_t *)&R->retry, NULL);
    if (R->ws) rv_ws_close(R->ws, "local_shutdown");
    /* A registration in flight would hold the loop open until it times out. */
    registry_call_cancel(R->registering);
    R->registering = NULL;
    /* R itself stays: late callbacks (the socket's close, a registry answer) still
     * look at it; the process is exiting. */
}

void remote_cleanup(void)
{
    if (!R) return;
    relay_demux_free(R->demux);
    registry_client_free(R->registry);
    registry_registration_clear(&R->reg);
    noise_ik_static_key_wipe(&R->identity);
    free(R->key_json);
    for (int i = 0; i < 5; i++) {
        if (R->aws[i]) memset(R->aws[i], 0, strlen(R->aws[i])); /* secrets */
        free(R->aws[i]);
    }
    free(R->env_id);
    free(R->base_url);
    free(R->name);
    free(R->base_url_shown);
    free(R);
    R = NULL;
}

static bool host_suffix(const char *host, size_t n, const char *dom)
{
    size_t d = strlen(dom);
    if (n == d) return strncasecmp(host, dom, n) == 0;
    return n > d && host[n - d - 1] == '.' && strncasecmp(host + n - d, dom, d) == 0;
}

bool remote_api_key_url_allowed(const char *url)
{
    bool https = strncasecmp(url, "https://", 8) == 0;
    if (!https && strncasecmp(url, "http://", 7) != 0) return false;
    const char *h = url + (https ? 8 : 7);
    size_t n;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e) return false;
        h++;
        n = (size_t)(e - h);
        return n == 3 && memcmp(h, "::1", 3) == 0;
    }
    n = strcspn(h, ":/?#");
    if (memchr(h, '@', n)) return false;
    if (n == 9 && strncasecmp(h, "localhost", 9) == 0) return true;
    if (n > 4 && strncmp(h, "127.", 4) == 0 && strspn(h, "0123456789.") >= n) return true;
    return https && (host_suffix(h, n, "openai.com") || host_suffix(h, n, "openai.org"));
}
