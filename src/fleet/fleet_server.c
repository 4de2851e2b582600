/* fleet_server: the registry's serve loop (see fleet_server.h). */
#include "fleet/fleet_server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "audit/audit.h"
#include "core/log.h"
#include "core/readiness.h"
#include "crypto/random.h"
#include "fleet/fleet_api.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_http.h"
#include "fleet/fleet_relay.h"
#include "fleet/fleet_store.h"
#include "fleet/fleet_worker.h"
#include "proto/hex.h"
#include "transport/tls.h"
#include "util/mem.h"

static uv_loop_t *loop;
static struct fleet_http *listener;
static uv_signal_t sig_term, sig_int, sig_hup;
static uv_timer_t heartbeat;
static uv_timer_t heartbeat_early; /* a beat ahead of the interval: a stream count changed */
static bool heartbeat_busy, stopping;

/* How soon a changed stream count reaches the database (`registry environments`
 * reads it there): changes within it share one heartbeat. */
#define STREAMS_WRITE_MS 500

/* ---- routing ---- */

static bool path_is(const struct fleet_request *r, const char *p)
{
    return r->head.path_len == strlen(p) && memcmp(r->head.path, p, r->head.path_len) == 0;
}

static bool path_prefix(const struct fleet_request *r, const char *p, const char **rest,
                        size_t *rest_len)
{
    size_t n = strlen(p);
    if (r->head.path_len < n || memcmp(r->head.path, p, n) != 0) return false;
    *rest = r->head.path + n;
    *rest_len = r->head.path_len - n;
    return true;
}

static bool method_get(const struct fleet_request *r)
{
    return (r->head.method_len == 3 && memcmp(r->head.method, "GET", 3) == 0) ||
           (r->head.method_len == 4 && memcmp(r->head.method, "HEAD", 4) == 0);
}

static void serve_status_page(struct fleet_conn *c, const struct fleet_request *req, bool metrics)
{
    fleet_conn_set_endpoint(c, metrics ? FLEET_EP_METRICS : FLEET_EP_READYZ);
    if (!method_get(req)) {
        fleet_conn_reply_error(c, 405, "method_not_allowed", "use GET", "allow: GET, HEAD\r\n");
        return;
    }
    if (!metrics) {
        bool ok = readiness_ok() && fleet_worker_available();
        const char *body = ok ? "ready\n" : "not ready: the database is unavailable\n";
        fleet_conn_reply(c, ok ? 200 : 503, "text/plain; charset=utf-8", body, strlen(body), NULL);
        return;
    }
    struct buf b;
    buf_init(&b);
    fleet_metrics_render(&b, fleet_worker_available(), fleet_worker_pending());
    audit_metrics_render(&b, "exec_registry");
    fleet_conn_reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL);
    buf_free(&b);
}

/* /cloud/environment/{id}/{register|connect|validate} */
static void serve_api(struct fleet_conn *c, const struct fleet_request *req, const char *rest,
                      size_t n)
{
    static const char *const names[] = {"register", "connect", "validate"};
    const char *slash = memchr(rest, '/', n);
    if (slash) {
        size_t idl = (size_t)(slash - rest), el = n - idl - 1;
        for (int i = 0; i < 3; i++)
            if (el == strlen(names[i]) && memcmp(slash + 1, names[i], el) == 0) {
                fleet_api_handle(c, req, rest, idl, (enum fleet_api_endpoint)i);
                return;
            }
    }
    fleet_conn_reply_error(c, 404, "not_found", "no such endpoint", NULL);
}

static void on_request(struct fleet_conn *c, const struct fleet_request *req)
{
    const char *rest;
    size_t n;
    if (path_is(req, "/readyz")) {
        serve_status_page(c, req, false);
    } else if (path_is(req, "/metrics")) {
        serve_status_page(c, req, true);
    } else if (path_prefix(req, "/cloud/environment/", &rest, &n)) {
        serve_api(c, req, rest, n);
    } else if (path_prefix(req, "/rendezvous/v1/environment/", &rest, &n)) {
        if (!(req->head.method_len == 3 && memcmp(req->head.method, "GET", 3) == 0))
            fleet_conn_reply_error(c, 405, "method_not_allowed", "use GET", NULL);
        else
            fleet_relay_upgrade(c, req, rest, n);
    } else {
        fleet_conn_reply_error(c, 404, "not_found", "no such endpoint", NULL);
    }
}

/* ---- heartbeat ---- */

struct heartbeat_job {
    struct fleet_job job;
    struct fleet_held *held;
    size_t nheld;
    char **lost;
    size_t nlost;
};

static void heartbeat_run(struct fleet_job *j, struct fleet_db *db)
{
    struct heartbeat_job *h = (struct heartbeat_job *)j;
    j->result =
        fleet_store_heartbeat(db, fleet_cfg.node, fleet_cfg.public_base, h->held, h->nheld,
                              fleet_worker_alive_after(j->now_ms, (int64_t)fleet_cfg.dead_ms),
                              j->now_ms, &h->lost, &h->nlost, j->err, sizeof j->err);
}

static void heartbeat_done(struct fleet_job *j)
{
    struct heartbeat_job *h = (struct heartbeat_job *)j;
    heartbeat_busy = false;
    fleet_relay_heartbeat_done(j->result == 0);
    readiness_set(j->result == 0 && !stopping);
    if (j->result < 0 && j->result != -EIO)
        log_warn("event=heartbeat result=error detail=\"%s\"", j->err);
    for (size_t i = 0; i < h->nlost; i++) {
        if (!stopping) fleet_relay_drop(h->lost[i], "taken over, superseded or revoked");
        free(h->lost[i]);
    }
    free(h->lost);
    fleet_relay_held_free(h->held, h->nheld);
    free(h);
}

static void heartbeat_tick(uv_timer_t *t)
{
    if (heartbeat_busy || stopping) return;
    struct heartbeat_job *h = xcalloc(1, sizeof *h);
    h->held = fleet_relay_held(&h->nheld);
    heartbeat_busy = true;
    h->job.reconnect_now = true; /* paced by this timer: no need to wait for the throttle */
    if (fleet_worker_submit(&h->job, heartbeat_run, heartbeat_done) < 0) {
        heartbeat_busy = false;
        fleet_relay_heartbeat_done(0);
        fleet_relay_held_free(h->held, h->nheld);
        free(h);
    }
}

/* A stream opened or closed: the next heartbeat writes its count within
 * STREAMS_WRITE_MS rather than up to --heartbeat-interval later, so `registry
 * environments` does not show 0 streams beside an attached shell. A beat already
 * under way leaves the change to the next one. */
static void heartbeat_early_tick(uv_timer_t *t)
{
    if (heartbeat_busy)
        uv_timer_start(t, heartbeat_early_tick, STREAMS_WRITE_MS, 0);
    else
        heartbeat_tick(t);
}

static void streams_changed(void)
{
    if (stopping || uv_is_active((uv_handle_t *)&heartbeat_early)) return;
    uv_timer_start(&heartbeat_early, heartbeat_early_tick, STREAMS_WRITE_MS, 0);
}

/* ---- start and stop ---- */

struct leave_job {
    struct fleet_job job;
};

static void leave_run(struct fleet_job *j, struct fleet_db *db)
{
    j->result = fleet_store_node_leave(db, fleet_cfg.node, j->now_ms, j->err, sizeof j->err);
}

static void leave_done(struct fleet_job *j)
{
    if (j->result < 0)
        log_warn("event=leave result=error detail=\"%s\": other nodes will notice this node's "
                 "heartbeat stopping instead",
                 j->err);
    free(j);
}

static void close_signal(uv_signal_t *s)
{
    uv_signal_stop(s);
    if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, NULL);
}

static void stop_serving(void)
{
    if (stopping) return;
    stopping = true;
    readiness_set(false);
    fleet_relay_shutdown();
    if (listener) fleet_http_shutdown(listener);
    listener = NULL;
    uv_timer_stop(&heartbeat);
    uv_close((uv_handle_t *)&heartbeat, NULL);
    uv_timer_stop(&heartbeat_early);
    uv_close((uv_handle_t *)&heartbeat_early, NULL);
    struct leave_job *l = xcalloc(1, sizeof *l);
    if (fleet_worker_submit(&l->job, leave_run, leave_done) < 0) free(l);
    close_signal(&sig_term);
    close_signal(&sig_int);
    close_signal(&sig_hup);
}

static void on_signal(uv_signal_t *s, int signum)
{
    if (signum == SIGHUP) {
        audit_reopen(); /* --audit-log: logrotate moved it */
        char err[600];
        if (!tls_server_enabled())
            log_notice("event=reload result=ok reloaded=nothing");
        else if (tls_server_reload(err, sizeof err) < 0)
            log_warn("reload: keeping the current TLS certificate and key: %s", err);
        else
            log_notice("event=reload result=ok reloaded=tls");
        return;
    }
    log_notice("received %s; stopping", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    stop_serving();
}

static int open_database(struct fleet_db **db)
{
    char err[512];
    int r = fleet_db_open(fleet_cfg.database, db, err, sizeof err);
    if (r == 0) r = fleet_store_migrate(*db, err, sizeof err);
    if (r == 0) r = fleet_store_secret(*db, fleet_cfg.secret, err, sizeof err);
    if (r == 0) r = fleet_db_serve_mode(*db, err, sizeof err);
    if (r < 0) {
        char shown[512];
        fleet_db_url_redact(fleet_cfg.database, shown, sizeof shown); /* no password shown */
        fprintf(stderr, "exec-server registry: database %s: %s\n", shown, err);
        if (*db) fleet_db_close(*db);
        *db = NULL;
        return 1;
    }
    return 0;
}

static int start_listening(void)
{
    struct fleet_http_opts o = {.host = fleet_cfg.host,
                                .port = fleet_cfg.port,
                                .tls = fleet_cfg.tls,
                                .max_connections = (unsigned)fleet_cfg.max_connections,
                                .ping_ms = fleet_cfg.ping_ms,
                                .pong_ms = fleet_cfg.pong_ms,
                                .on_request = on_request};
    int bound = 0;
    int r = fleet_http_listen(loop, &o, &listener, &bound);
    if (r != 0) {
        fprintf(stderr, "exec-server registry: cannot listen on %s: %s\n", fleet_cfg.listen_url,
                uv_strerror(r));
        return 1;
    }
    bool v6 = strchr(fleet_cfg.host, ':') != NULL;
    char url[160];
    snprintf(url, sizeof url, v6 ? "%s://[%s]:%d" : "%s://%s:%d", fleet_cfg.tls ? "https" : "http",
             fleet_cfg.host, bound);
    /* The defaults of --public-url and --environment-url are the bound URL. */
    if (!fleet_cfg.public_url)
        snprintf(fleet_cfg.public_base, sizeof fleet_cfg.public_base, "%s", url);
    const char *envurl =
        fleet_cfg.environment_url ? fleet_cfg.environment_url : fleet_cfg.public_base;
    /* http... -> ws... (the scheme was checked by fleet_command); harness URLs are
     * made from the holding node's public URL as the database has it. */
    snprintf(fleet_cfg.environment_base, sizeof fleet_cfg.environment_base, "ws%.500s", envurl + 4);
    printf("%s\n", url);
    fflush(stdout);
    return 0;
}

int fleet_server_run(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct fleet_db *db = NULL;
    if (open_database(&db) != 0) return 1;
    loop = uv_default_loop();
    if (start_listening() != 0) {
        fleet_db_close(db);
        return 1;
    }
    log_notice("event=start node=%s url=%s database=\"%s\" schema=%d", fleet_cfg.node,
               fleet_cfg.public_base, fleet_db_where(db), FLEET_SCHEMA_VERSION);
    struct audit_options ao = {.log_path = fleet_cfg.audit_log, .program = "exec-server registry"};
    char aerr[600];
    if (audit_start(loop, &ao, aerr, sizeof aerr) < 0) {
        fprintf(stderr, "exec-server registry: %s\n", aerr);
        fleet_db_close(db);
        return 1;
    }
    if (fleet_worker_start(loop, db) < 0) {
        fprintf(stderr, "exec-server registry: cannot start the database thread\n");
        fleet_db_close(db);
        return 1;
    }
    fleet_api_init();
    fleet_relay_init(streams_changed);
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_init(loop, &sig_hup);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_signal_start(&sig_hup, on_signal, SIGHUP);
    uv_timer_init(loop, &heartbeat);
    uv_timer_init(loop, &heartbeat_early);
    uv_timer_start(&heartbeat, heartbeat_tick, 0, fleet_cfg.heartbeat_ms);
    uv_run(loop, UV_RUN_DEFAULT);
    audit_stop(); /* what the stop recorded is written; its handle closes below */
    fleet_worker_stop();
    uv_run(loop, UV_RUN_DEFAULT); /* the worker's async handle (and the audit's) closing */
    fleet_api_cleanup();
    tls_server_shutdown();
    uv_loop_close(loop);
    return 0;
}
