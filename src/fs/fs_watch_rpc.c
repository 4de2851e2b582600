/* fs_watch_rpc: `fs/watchMissing` on the wire, and fs's part of a session.
 *
 * Params {"watchId", "missing": [file: URI...], "present": URI or null}; the result is
 * `{"watching":true}` when the watch is armed, `false` when fs_watch.c says there is
 * nothing to watch (PROTOCOL.md §6.14). More than FS_WATCH_MAX_PATHS paths is -32602,
 * an armed watch over FS_WATCH_MAX_ACTIVE is -32600. When a watch fires, the session's
 * connection of the moment (if any) gets `fs/missingChanged {watchId}`; the watches
 * belong to the session (session part fs_session_part), so they survive a reconnect. */
#include "fs/fs_watch_rpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_watch.h"
#include "fs/fs_helper_pool.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "session/session.h"
#include "transport/conn.h"
#include "util/buf.h"
#include "util/mem.h"

/* fs_watch_fired_fn: tells the session's client, if one is attached. */
static void notify_changed(void *arg, uint64_t id)
{
    struct session *s = arg;
    struct conn *c = s->conn;
    if (!c) return;
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"method\":\"fs/missingChanged\",\"params\":{\"watchId\":");
    buf_put_u64(&b, id);
    buf_puts(&b, "}}");
    conn_send(c, &b);
}

/* session_part_ops.ended: the session's watches stop, and the warm sandbox helpers
 * only it used (fs_methods.c) are retired. */
static void fs_session_ended(struct session *s)
{
    fs_watch_table_destroy(session_part(s, &fs_session_part));
    session_set_part(s, &fs_session_part, NULL);
    fs_helper_pool_release_owner(s->id);
}

const struct session_part_ops fs_session_part = {.ended = fs_session_ended};

static void reply_watching(struct rpc_req *req, bool watching)
{
    rpc_reply_json(req, json_pack("{s:b}", "watching", watching));
}

static void free_paths(char **paths, size_t n, char *present)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(present);
}

/* The params' URIs as native paths in *missing and *present; false when one is not a
 * usable file: URI (replied). */
static bool decode_paths(struct rpc_req *req, json_t *uris, const char *present_uri,
                         char ***missing, char **present)
{
    size_t n = json_array_size(uris), i, plen;
    json_t *v;
    struct uri_error ue;
    *missing = xcalloc(n ? n : 1, sizeof **missing);
    *present = NULL;
    json_array_foreach(uris, i, v)
    {
        if (uri_to_path(json_string_value(v), json_string_length(v), false, &(*missing)[i], &plen,
                        &ue) < 0) {
            free_paths(*missing, i, NULL);
            rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
            return false;
        }
    }
    if (present_uri &&
        uri_to_path(present_uri, strlen(present_uri), false, present, &plen, &ue) < 0) {
        free_paths(*missing, n, NULL);
        rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
        return false;
    }
    return true;
}

static void handle_watch_missing(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WatchMissingParams");
    uint64_t id = pdec_u64(&d, "watchId", PDEC_REQUIRED, 0, NULL);
    json_t *missing = pdec_array(&d, "missing", PDEC_REQUIRED);
    const char *present = pdec_string(&d, "present", PDEC_OPTIONAL);
    size_t i;
    json_t *v;
    if (!d.failed) {
        json_array_foreach(missing, i, v)
        {
            if (json_is_string(v)) continue;
            char what[128];
            pdec_describe(v, what, sizeof what);
            pdec_fail(&d, "invalid type: %s, expected a string", what);
            break;
        }
    }
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    size_t n = json_array_size(missing);
    if (n + (present != NULL) > FS_WATCH_MAX_PATHS) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "fs/watchMissing watches at most %d paths",
                        FS_WATCH_MAX_PATHS);
        return;
    }
    char **paths, *present_path;
    if (!decode_paths(req, missing, present, &paths, &present_path)) return;

    struct session *s = session_of(req->conn);
    struct fs_watch_table *t = session_part(s, &fs_session_part);
    if (!t)
        session_set_part(s, &fs_session_part, t = fs_watch_table_new(req->loop, notify_changed, s));
    int r = fs_watch_arm(t, id, paths, n, present_path);
    if (r == -ENOSPC) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "watch limit reached: this session already has %d active "
                        "fs/watchMissing watches",
                        FS_WATCH_MAX_ACTIVE);
        return;
    }
    reply_watching(req, r > 0);
}

const struct rpc_method fs_watch_methods[] = {
    {"fs/watchMissing", "filesystem", handle_watch_missing},
    {NULL, NULL, NULL},
};
