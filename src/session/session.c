/* session: registry, attach/detach/resume, detached TTL, initialize and the
 * environment methods (see session.h). */
#include "session/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "fs/fs_watch.h"
#include "proto/uri.h"
#include "process/process.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/helper.h"
#include "transport/conn.h"
#include "util/mem.h"

static struct session *sessions;
static uv_loop_t *session_loop;
static uint64_t session_ttl_ms = 80000;
static uint64_t detach_counter;

void session_configure(uv_loop_t *loop, uint64_t detached_ttl_ms)
{
    session_loop = loop;
    session_ttl_ms = detached_ttl_ms;
}

static void uuid_v4(char out[37])
{
    uint8_t r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        for (size_t i = 0; i < sizeof r; i++) r[i] = (uint8_t)random();
    }
    r[6] = (uint8_t)((r[6] & 0x0F) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
             r[13], r[14], r[15]);
}

static struct session *session_find(const char *id)
{
    for (struct session *s = sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0) return s;
    return NULL;
}

static void session_free_cb(uv_handle_t *h)
{
    free(h->data);
}

static void session_destroy(struct session *s)
{
    if (s->prev) s->prev->next = s->next;
    else sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    if (s->conn) conn_set_owner(s->conn, NULL, NULL);
    s->conn = NULL;
    proc_table_destroy(s->procs);
    fs_watch_table_destroy(s->watches);
    sandbox_helper_release_owner(s->id); /* its warm sandbox helpers die with it */
    s->ttl.data = s;
    uv_close((uv_handle_t *)&s->ttl, session_free_cb);
}

static void session_expired(uv_timer_t *t)
{
    struct session *s = t->data;
    log_event("event=session_expire session=%s detached_ms=%llu processes=killed", s->id,
             (unsigned long long)session_ttl_ms);
    session_destroy(s);
}

/* conn_owner_ops.closed: the bound connection is gone. */
static void session_conn_closed(void *owner, struct conn *c)
{
    struct session *s = owner;
    if (s->conn != c) return;
    s->conn = NULL;
    proc_table_detached(s->procs, c);
    if (conn_flags(c) & CONN_F_NO_RESUME) {
        /* There is no resume over stdio: the only connection is gone. */
        session_destroy(s);
        return;
    }
    if (s->ending) {
        /* The client said it is done (session/close): nothing to resume. */
        log_event("event=session_end session=%s peer=%s reason=session_close", s->id,
                  conn_peer(c));
        session_destroy(s);
        return;
    }
    log_event("event=session_detach session=%s peer=%s ttl_ms=%llu", s->id, conn_peer(c),
              (unsigned long long)session_ttl_ms);
    s->detach_order = ++detach_counter;
    uv_timer_start(&s->ttl, session_expired, session_ttl_ms, 0);
    /* Over max_detached: the session detached longest ago expires now. */
    size_t detached = 0;
    struct session *oldest = NULL;
    for (struct session *o = sessions; o; o = o->next) {
        if (o->conn) continue;
        detached++;
        if (!oldest || o->detach_order < oldest->detach_order) oldest = o;
    }
    if (detached > server_limits.max_detached && oldest) {
        log_warn("session %s expired early: %zu detached sessions exceed the limit of %u "
                 "(--max-detached-sessions); killing its processes",
                 oldest->id, detached, server_limits.max_detached);
        session_destroy(oldest);
    }
}

/* conn_owner_ops.output_safe: every process output notification the connection
 * has queued past written_total is still in its process's retained log. */
static bool session_conn_output_safe(void *owner, const struct conn *c, uint64_t written_total)
{
    struct session *s = owner;
    return proc_table_output_safe(s->procs, written_total);
}

/* conn_owner_ops.unblocked: the session's producers are its processes. */
static void session_conn_unblocked(void *owner, struct conn *c)
{
    struct session *s = owner;
    proc_table_resume_output(s->procs);
}

static const struct conn_owner_ops session_conn_owner = {
    .closed = session_conn_closed,
    .unblocked = session_conn_unblocked,
    .output_safe = session_conn_output_safe,
};

struct session *session_of(const struct conn *c)
{
    return conn_owner(c, &session_conn_owner);
}

void session_destroy_all(void)
{
    while (sessions) session_destroy(sessions);
}

static void attach(struct session *s, struct conn *c)
{
    uv_timer_stop(&s->ttl);
    s->conn = c;
    conn_set_owner(c, &session_conn_owner, s);
    rpc_conn_set_initialized(c);
}

static json_t *uri_json(const char *path)
{
    char *u = uri_from_path(path, strlen(path));
    json_t *j = json_string(u);
    free(u);
    return j ? j : json_null();
}

/* What environment/info and initialize report about this host. Capabilities we
 * do not implement are false so clients never send the fields they gate. */
static json_t *environment_info(void)
{
    const char *shell = getenv("SHELL");
    if (!shell || shell[0] != '/') shell = "/bin/sh";
    const char *base = strrchr(shell, '/') + 1;
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
    const char *home = getenv("HOME");
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    json_t *caps = json_pack(
        "{s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b}", "networkProxyLaunch", 0,
        "networkProxyReviewDomains", 0, "credentialMasking", 0, "credentialMaskingCustomProviders",
        0, "capabilityDiscoverySandbox", 0, "fsWatchMissing", 1, "capabilityDiscoveryV2", 0,
        "environmentConfigRead", 1, "httpHeaderEnvVars", 1, "sandboxedFileStreaming", 0,
        "fileWriteStreaming", 1, "shellSnapshotV2", 0, "windowsMxc", 0,
        "linuxRootWritePreservesDevices", 0, "linuxApprovedRootWritePreservesRestrictions", 0);
    /* Ours (PROTOCOL.md §11 (g)): terminal and stdin controls a client may use
     * once it sees them here; the reference has none of them. */
    json_object_set_new(caps, "processStartSize", json_true());
    json_object_set_new(caps, "processResize", json_true());
    json_object_set_new(caps, "processCloseStdin", json_true());
    json_object_set_new(caps, "processSignalAny", json_true());
    json_object_set_new(caps, "sessionClose", json_true());
    json_object_set_new(caps, "fsPermissions", json_true());
    json_t *info = json_object();
    json_object_set_new(info, "shell", json_pack("{s:s,s:s}", "name", base, "path", shell));
    json_object_set_new(info, "executorVersion", json_string(EXEC_SERVER_VERSION));
    json_object_set_new(info, "providerId", json_string("exec-server-c"));
    json_object_set_new(info, "cwd", uri_json(cwd));
    if (home && home[0] == '/') json_object_set_new(info, "userHomeDir", uri_json(home));
    json_object_set_new(info, "platformOs", json_string("linux"));
    json_object_set_new(info, "prependPathDirs", json_array());
    json_object_set_new(info, "temporaryDirectories", json_array());
    json_object_set_new(info, "tempDir", uri_json(tmp));
    json_object_set_new(info, "capabilities", caps);
    return info;
}

static void handle_initialize(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "InitializeParams");
    pdec_string(&d, "clientName", PDEC_REQUIRED);
    const char *resume = pdec_string(&d, "resumeSessionId", PDEC_OPTIONAL);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    struct conn *c = req->conn;
    if (rpc_conn_initialized(c))
        return rpc_reply_error(req, RPC_INVALID_REQUEST,
                               "initialize may only be sent once per connection");
    struct session *s;
    if (resume) {
        s = session_find(resume);
        if (!s) return rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown session id %s", resume);
        if (s->conn)
            return rpc_reply_error(req, RPC_SESSION_ATTACHED,
                                   "session %s is already attached to another connection", s->id);
        attach(s, c);
        proc_table_attached(s->procs, c);
        log_event("event=session_attach session=%s peer=%s resumed=true", s->id, conn_peer(c));
    } else {
        s = xcalloc(1, sizeof *s);
        uuid_v4(s->id);
        s->loop = session_loop;
        uv_timer_init(session_loop, &s->ttl);
        s->ttl.data = s;
        s->procs = proc_table_new(s);
        s->next = sessions;
        if (sessions) sessions->prev = s;
        sessions = s;
        attach(s, c);
        log_event("event=session_attach session=%s peer=%s resumed=false", s->id, conn_peer(c));
    }
    json_t *res = json_object();
    json_object_set_new(res, "sessionId", json_string(s->id));
    json_object_set_new(res, "environmentInfo", environment_info());
    rpc_reply_json(req, res);
}

static void handle_env_info(struct rpc_req *req)
{
    struct pdec d;
    if (!pdec_unit(&d, req->params)) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    rpc_reply_json(req, environment_info());
}

static void handle_env_status(struct rpc_req *req)
{
    struct pdec d;
    if (!pdec_unit(&d, req->params)) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    rpc_reply_json(req, json_pack("{s:s}", "status", "ready"));
}

/* session/close (ours, capability sessionClose): the client is done with the
 * session, so when this connection closes the session ends at once (its processes
 * are killed) instead of waiting out the resume TTL. A short-lived CLI call leaves
 * nothing behind this way. */
static void handle_session_close(struct rpc_req *req)
{
    struct pdec d;
    pdec_unit(&d, req->params);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    session_of(req->conn)->ending = true;
    rpc_reply_json(req, json_object());
}

const struct rpc_method session_methods[] = {
    {"initialize", "initialize", handle_initialize},
    {"environment/info", "environment info", handle_env_info},
    {"environment/status", "environment status", handle_env_status},
    {"session/close", "session", handle_session_close},
    {NULL, NULL, NULL},
};
