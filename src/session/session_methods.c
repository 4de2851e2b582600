/* session_methods: initialize (create or resume a session), environment/info,
 * environment/status, and ours: session/close, session/keep and session/list, over
 * the registry in session.c (PROTOCOL.md sections 3, 9 and 11 (i)). */
#include "session/session.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/process_path.h"
#include "core/limits.h"
#include "core/host_env.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "transport/conn.h"

#define INFO_FNS_MAX 8
static session_info_fn info_fns[INFO_FNS_MAX];
static int n_info_fns;

void session_add_info(session_info_fn fn)
{
    if (n_info_fns < INFO_FNS_MAX) info_fns[n_info_fns++] = fn;
}

static json_t *uri_json(const char *path)
{
    char *u = uri_from_path(path, strlen(path));
    json_t *j = json_string(u);
    free(u);
    return j ? j : json_null();
}

/* What environment/info and initialize report about this host. Capabilities we
 * do not implement are false so clients never send the fields they gate.
 * capabilityDiscoverySandbox: capabilityRoots/discoverV1 scans a root that carries
 * a sandbox inside the sandbox helper (capabilities/capability_roots.c). capabilityDiscoveryV2:
 * `capabilities/discoverV2`, the executor's own inventory of installed plugins and
 * skills, cached and watched (capabilities/capabilities_v2.c). shellSnapshotV2: process/start's
 * `shellSnapshot` (process/shell_snapshot.c).
 * networkProxyLaunch and networkProxyReviewDomains: process/start's networkProxy runs
 * the child behind src/netproxy (with proxy.reviewDomains); networkProxyTransparentTcp:
 * its proxy.transparentTcp (a TUN device in the sandbox, src/netproxy/np_tun.c);
 * credentialMasking and credentialMaskingCustomProviders: its proxy.credentialMasking
 * and proxy.credentialProviders (src/netproxy/np_cred.c). */
static json_t *environment_info(void)
{
    char cwd[4096], home_buf[4096], tmp[4096];
    if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
    const char *home = host_env_home(home_buf, sizeof home_buf);
    int tmp_from_env;
    host_env_temp_dir(cwd, tmp, sizeof tmp, &tmp_from_env);
    json_t *caps = json_pack(
        "{s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b}", "networkProxyLaunch",
        1, "networkProxyReviewDomains", 1, "networkProxyTransparentTcp", 1, "credentialMasking", 1,
        "credentialMaskingCustomProviders", 1, "capabilityDiscoverySandbox", 1, "fsWatchMissing", 1,
        "capabilityDiscoveryV2", 1, "environmentConfigRead", 1, "httpHeaderEnvVars", 1,
        "sandboxedFileStreaming", 1, "fileWriteStreaming", 1, "shellSnapshotV2", 1, "windowsMxc", 0,
        "linuxRootWritePreservesDevices", 1, "linuxApprovedRootWritePreservesRestrictions", 1);
    /* Ours (PROTOCOL.md §11 (g)): terminal and stdin controls a client may use
     * once it sees them here; the reference has none of them. */
    json_object_set_new(caps, "processStartSize", json_true());
    json_object_set_new(caps, "processResize", json_true());
    json_object_set_new(caps, "processCloseStdin", json_true());
    json_object_set_new(caps, "processSignalAny", json_true());
    json_object_set_new(caps, "sessionClose", json_true());
    json_object_set_new(caps, "fsPermissions", json_true());
    json_object_set_new(caps, "fsRename", json_true());
    /* Ours (§11 (i)): work that outlives its client, and TCP forwarding. */
    json_object_set_new(caps, "processList", json_true());
    json_object_set_new(caps, "processAttach", json_true());
    json_object_set_new(caps, "sessionList", json_true());
    json_object_set_new(caps, "sessionKeep", json_boolean(server_limits.max_keep_ms != 0));
    json_object_set_new(caps, "tcpForward", json_boolean(server_limits.tcp_forwarding));
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
    for (int i = 0; i < n_info_fns; i++)
        info_fns[i](info, caps);
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

const struct rpc_method session_methods[] = {
    {"initialize", "initialize", handle_initialize},
    {"environment/info", "environment info", handle_env_info},
    {"environment/status", "environment status", handle_env_status},
    {"session/close", "session", handle_session_close},
    {"session/keep", "session", handle_session_keep},
    {"session/list", "session", handle_session_list},
    {NULL, NULL, NULL},
};
