/* session_methods: initialize (create or resume a session), environment/info,
 * environment/status, and ours: session/close, session/keep and session/list, over
 * the registry in session.c (PROTOCOL.md sections 3, 9 and 11 (i)); the domains'
 * records (struct rpc_domain) registered here, whose capabilities and info those
 * answers carry; and the session domain's own record. */
#include "session/session.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/env_config.h"
#include "session/process_path.h"
#include "core/limits.h"
#include "core/host_env.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "transport/conn.h"

static const struct rpc_domain *domains[SESSION_DOMAINS_MAX];
static size_t n_domains;

void session_register_domain(const struct rpc_domain *d)
{
    for (size_t i = 0; i < n_domains; i++)
        if (domains[i] == d) return;
    if (n_domains == SESSION_DOMAINS_MAX) abort(); /* a build-time mistake */
    domains[n_domains++] = d;
    for (const struct rpc_method *const *t = d->methods; t && *t; t++)
        rpc_register_methods(*t);
    if (d->payloads) rpc_register_payloads(d->payloads);
}

/* The order `capabilities` has always been sent in: the reference's own 16, in the
 * order 0.171.0 sends them, then ours in the order they were added (PROTOCOL.md
 * §11). JSON does not order an object's members, but clients and tests compare the
 * answer as bytes, so the order stays; a capability of a record that is not listed
 * here follows these, in the order of the records. */
static const char *const capability_order[] = {
    "networkProxyLaunch",
    "networkProxyReviewDomains",
    "networkProxyTransparentTcp",
    "credentialMasking",
    "credentialMaskingCustomProviders",
    "capabilityDiscoverySandbox",
    "fsWatchMissing",
    "capabilityDiscoveryV2",
    "environmentConfigRead",
    "httpHeaderEnvVars",
    "sandboxedFileStreaming",
    "fileWriteStreaming",
    "shellSnapshotV2",
    "windowsMxc",
    "linuxRootWritePreservesDevices",
    "linuxApprovedRootWritePreservesRestrictions",
    "processStartSize",
    "processResize",
    "processCloseStdin",
    "processSignalAny",
    "sessionClose",
    "fsPermissions",
    "fsRename",
    "processList",
    "processAttach",
    "sessionList",
    "sessionKeep",
    "tcpForward",
    "sandboxModes",
};

static bool capability_listed(const char *name)
{
    for (size_t i = 0; i < sizeof capability_order / sizeof capability_order[0]; i++)
        if (strcmp(capability_order[i], name) == 0) return true;
    return false;
}

static const struct rpc_capability *capability_find(const char *name)
{
    for (size_t i = 0; i < n_domains; i++)
        for (const struct rpc_capability *c = domains[i]->capabilities; c && c->name; c++)
            if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

static void capability_set(json_t *caps, const struct rpc_capability *c)
{
    json_object_set_new(caps, c->name, json_boolean(c->on ? c->on() : c->value));
}

/* The registered records' capabilities, in capability_order and then the rest. */
static json_t *capabilities_json(void)
{
    json_t *caps = json_object();
    for (size_t i = 0; i < sizeof capability_order / sizeof capability_order[0]; i++) {
        const struct rpc_capability *c = capability_find(capability_order[i]);
        if (c) capability_set(caps, c);
    }
    for (size_t i = 0; i < n_domains; i++)
        for (const struct rpc_capability *c = domains[i]->capabilities; c && c->name; c++)
            if (!capability_listed(c->name)) capability_set(caps, c);
    return caps;
}

static json_t *uri_json(const char *path)
{
    char *u = uri_from_path(path, strlen(path));
    json_t *j = json_string(u);
    free(u);
    return j ? j : json_null();
}

/* What environment/info and initialize report about this host: the registered
 * domains' capabilities (each record says what its capabilities mean) and info. */
static json_t *environment_info(void)
{
    char cwd[4096], home_buf[4096], tmp[4096];
    if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
    const char *home = host_env_home(home_buf, sizeof home_buf);
    int tmp_from_env;
    host_env_temp_dir(cwd, tmp, sizeof tmp, &tmp_from_env);
    json_t *caps = capabilities_json();
    json_t *info = json_object();
    json_object_set_new(
        info, "shell",
        json_pack("{s:s,s:s}", "name", host_env_shell_name(), "path", host_env_shell_path()));
    json_object_set_new(info, "executorVersion", json_string(EXEC_SERVER_VERSION));
    json_object_set_new(info, "providerId", json_string("exec-server-c"));
    json_object_set_new(info, "cwd", uri_json(cwd));
    if (home) json_object_set_new(info, "userHomeDir", uri_json(home));
    json_object_set_new(info, "platformOs", json_string("linux"));
    json_t *prepend = json_array();
    if (process_path_dir()) json_array_append_new(prepend, uri_json(process_path_dir()));
    json_object_set_new(info, "prependPathDirs", prepend);
    json_t *temps = json_array();
    if (tmp_from_env) json_array_append_new(temps, uri_json(tmp));
    json_object_set_new(info, "temporaryDirectories", temps);
    json_object_set_new(info, "tempDir", uri_json(tmp));
    json_object_set_new(info, "capabilities", caps);
    for (size_t i = 0; i < n_domains; i++)
        if (domains[i]->info) domains[i]->info(info);
    return info;
}

static void handle_initialize(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "InitializeParams");
    const char *name = pdec_string(&d, "clientName", PDEC_REQUIRED);
    const char *resume = pdec_string(&d, "resumeSessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    struct conn *c = req->conn;
    if (rpc_conn_initialized(c)) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "initialize may only be sent once per connection");
        return;
    }
    struct session *s;
    if (resume) {
        s = session_find(resume);
        if (!s) {
            rpc_reply_error(req, RPC_INVALID_REQUEST, "unknown session id %s", resume);
            return;
        }
        if (s->conn) {
            rpc_reply_error(req, RPC_SESSION_ATTACHED,
                            "session %s is already attached to another connection", s->id);
            return;
        }
        session_resume(s, c);
    } else {
        s = session_create(c, name);
    }
    json_t *res = json_object();
    json_object_set_new(res, "sessionId", json_string(s->id));
    json_object_set_new(res, "environmentInfo", environment_info());
    rpc_reply_json(req, res);
}

static void handle_env_info(struct rpc_req *req)
{
    struct pdec d;
    if (!pdec_unit(&d, req->params)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
        return;
    }
    if (!rpc_check_ready(req)) return;
    rpc_reply_json(req, environment_info());
}

static void handle_env_status(struct rpc_req *req)
{
    struct pdec d;
    if (!pdec_unit(&d, req->params)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
        return;
    }
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
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    session_of(req->conn)->ending = true;
    rpc_reply_json(req, json_object());
}

/* session/keep {ttlSeconds?} (ours, capability sessionKeep): once detached, this
 * session waits ttlSeconds to be resumed instead of the --session-ttl, or with
 * ttlSeconds absent or null until it is ended (session/close after a resume, or the
 * server stopping). At most --max-session-keep (longer asks are cut to it, and the
 * result says what was granted); at most --max-detached-sessions kept sessions. */
static void handle_session_keep(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "KeepParams");
    bool given = false;
    uint64_t secs = pdec_u64(&d, "ttlSeconds", PDEC_OPTIONAL, 0, &given);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    uint64_t max = server_limits.max_keep_ms;
    if (max == 0) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "session/keep is disabled on this server (--max-session-keep 0)");
        return;
    }
    uint64_t ms = !given                                    ? LIMITS_KEEP_FOREVER
                  : secs > (LIMITS_KEEP_FOREVER - 1) / 1000 ? LIMITS_KEEP_FOREVER - 1
                                                            : secs * 1000;
    if (ms > max) ms = max;
    if (session_keep(session_of(req->conn), ms) < 0) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "cannot keep this session: %u sessions are kept already "
                        "(--max-detached-sessions %u)",
                        server_limits.max_detached, server_limits.max_detached);
        return;
    }
    rpc_reply_json(
        req,
        json_pack("{s:o}", "ttlSeconds",
                  ms == LIMITS_KEEP_FOREVER ? json_null() : json_integer((json_int_t)(ms / 1000))));
}

/* session/list (ours, capability sessionList): the sessions this client may see,
 * which are those opened by the same identity (conn_identity: the same capability
 * token, or the same JWT subject; everyone when authentication is off). */
static void handle_session_list(struct rpc_req *req)
{
    struct pdec d;
    if (!pdec_unit(&d, req->params)) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
        return;
    }
    if (!rpc_check_ready(req)) return;
    rpc_reply_json(req, json_pack("{s:o}", "sessions", session_list_json(req->conn)));
}

static const struct rpc_method session_methods[] = {
    {"initialize", "initialize", handle_initialize},
    {"environment/info", "environment info", handle_env_info},
    {"environment/status", "environment status", handle_env_status},
    {"session/close", "session", handle_session_close},
    {"session/keep", "session", handle_session_keep},
    {"session/list", "session", handle_session_list},
    {NULL, NULL, NULL},
};

static bool keep_on(void)
{
    return server_limits.max_keep_ms != 0;
}

static const struct rpc_method *const session_tables[] = {session_methods, env_config_methods,
                                                          NULL};

/* sessionClose, sessionList and sessionKeep (ours, PROTOCOL.md §11 (g), (i)): the
 * methods above, sessionKeep while --max-session-keep is not 0. environmentConfigRead:
 * environment/config (env_config.c). */
static const struct rpc_capability session_capabilities[] = {
    {"environmentConfigRead", true, NULL},
    {"sessionClose", true, NULL},
    {"sessionList", true, NULL},
    {"sessionKeep", false, keep_on},
    {NULL, false, NULL},
};

const struct rpc_domain session_domain = {
    .name = "session",
    .methods = session_tables,
    .capabilities = session_capabilities,
};
