/* capability_roots: `capabilityRoots/discoverV1` (see capability_roots.h).
 *
 * codex asks an executor for the plugin and skill files below the capability roots
 * it selected (installed plugins, skill directories) in one request instead of
 * walking them with one fs request per directory and file; it does so when its
 * executor_capability_discovery feature is on, or when the environment's file system
 * reads are restricted, and then with each root's `sandbox`. Params
 * {"roots":[{"id","path","sandbox"?}]} (at most 128), result {"roots":[...]} in
 * request order; every per-root failure is reported in that root's entry (`error`,
 * `warnings`), so one broken package never hides its siblings. What a root's scan
 * finds is caproots_scan.c's.
 *
 * The handler runs on the loop thread; the scans run on the thread pool, a root with a
 * sandbox that needs enforcing inside the session's sandbox helper (the scan is an fs
 * operation, OP_DISCOVER, served by fs_helper_serve), so Landlock bounds every walk and
 * read of it. */
#include "fs/capability_roots.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/caproots_scan.h"
#include "fs/fs_util.h"
#include "fs/fs_work.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "rpc/rpc.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "util/mem.h"
#include "util/oserr.h"

/* ---- the method ------------------------------------------------------------------- */

struct root_req {
    json_t *id;      /* borrowed from the params */
    const char *uri; /* as sent (borrowed), echoed back and used in messages */
    size_t uri_len;
    char *path;          /* native */
    char *uri_own;       /* the normalized echo when the sent URI needed it, or NULL */
    char *sb_json;       /* the sandbox to enforce, or NULL */
    const char *refusal; /* a root-local error decided on the loop thread, or NULL */
};

struct disc_work {
    uv_work_t w;
    struct rpc_req *req;
    struct root_req *roots;
    size_t n;
    char owner[40]; /* the session id, for the sandbox helper */
    struct buf out; /* the reply, begun on the loop thread */
};

static void disc_run(uv_work_t *w)
{
    struct disc_work *dw = w->data;
    buf_puts(&dw->out, "{\"roots\":[");
    for (size_t i = 0; i < dw->n; i++) {
        struct root_req *r = &dw->roots[i];
        if (i) buf_putc(&dw->out, ',');
        buf_puts(&dw->out, "{\"id\":");
        buf_put_json_str(&dw->out, json_string_value(r->id), json_string_length(r->id));
        buf_puts(&dw->out, ",\"path\":");
        buf_put_json_str(&dw->out, r->uri, r->uri_len);
        buf_putc(&dw->out, ',');
        struct buf one;
        buf_init(&one);
        char *uri = xmemdup(r->uri, r->uri_len + 1);
        uri[r->uri_len] = '\0';
        if (r->refusal) {
            caproots_put_error(&one, r->refusal);
        } else if (!r->sb_json) {
            caproots_scan(r->path, uri, &one);
        } else {
            /* The same scan inside the session's sandbox helper for this policy. */
            struct fs_work fw = {.op = OP_DISCOVER, .fd = -1, .displaced_fd = -1};
            buf_init(&fw.out);
            fw.path = r->path;
            fw.path_len = strlen(r->path);
            fw.path2 = uri;
            fw.path2_len = r->uri_len;
            fw.sb_json = r->sb_json;
            snprintf(fw.sb_owner, sizeof fw.sb_owner, "%s", dw->owner);
            fs_work_run(&fw);
            if (fs_work_failed(&fw)) {
                char os[256];
                if (!fw.msg) oserr_format(fw.err, os, sizeof os);
                caproots_put_error(&one, fw.msg ? fw.msg : os);
            } else {
                buf_append(&one, fw.out.data, fw.out.len);
            }
            free(fw.msg);
            buf_free(&fw.out);
        }
        free(uri);
        /* one is an object: splice its members after id and path. */
        if (one.len >= 2) buf_append(&dw->out, one.data + 1, one.len - 1);
        buf_free(&one);
    }
    buf_puts(&dw->out, "]}");
}

static void disc_free(struct disc_work *dw)
{
    for (size_t i = 0; i < dw->n; i++) {
        free(dw->roots[i].path);
        free(dw->roots[i].sb_json);
        free(dw->roots[i].uri_own);
    }
    free(dw->roots);
    buf_free(&dw->out);
    free(dw);
}

static void disc_done(uv_work_t *w, int status)
{
    struct disc_work *dw = w->data;
    for (size_t i = 0; i < dw->n; i++)
        if (dw->roots[i].sb_json) fs_helper_sweep_arm(dw->req->loop);
    if (status < 0)
        rpc_reply_error(dw->req, RPC_INTERNAL_ERROR, "%s", uv_strerror(status));
    else
        rpc_result_finish(dw->req, &dw->out);
    disc_free(dw);
}

/* Whether a file: URI has dot segments or a host the reference's parser rewrites. */
static bool uri_has_dots_or_host(const char *u, size_t n)
{
    if (n >= 16 && strncmp(u, "file://localhost", 16) == 0) return true;
    for (size_t i = 0; i + 1 < n; i++) {
        if (u[i] != '/' || u[i + 1] != '.') continue;
        size_t j = i + 2;
        if (j < n && u[j] == '.') j++;
        if (j == n || u[j] == '/' || u[j] == '?' || u[j] == '#') return true;
    }
    return false;
}

/* Decodes one root object into r; returns false with the error in d. */
static bool decode_root(struct pdec *d, json_t *v, struct root_req *r, struct rpc_req *req,
                        int *code)
{
    struct pdec rd;
    *code = RPC_INVALID_PARAMS;
    if (!pdec_begin(&rd, v, "WireCapabilityRootDiscoverRequest")) goto fail;
    /* The reference decodes roots through a buffered value, which words every
     * number as "number" and names its wire structs. */
    static const char *const strings[] = {"id", "path"};
    for (int k = 0; k < 2; k++)
        if (json_is_number(json_object_get(v, strings[k])))
            pdec_fail(&rd, "invalid type: number, expected a string");
    json_t *sbv = json_object_get(v, "sandbox");
    if (sbv && !json_is_null(sbv) && !json_is_object(sbv)) {
        char what[128] = "number";
        if (!json_is_number(sbv)) pdec_describe(sbv, what, sizeof what);
        pdec_fail(&rd, "invalid type: %s, expected struct WireFileSystemSandboxContext", what);
    }
    const char *id = pdec_string(&rd, "id", PDEC_REQUIRED);
    size_t ulen = 0;
    const char *uri = pdec_string_len(&rd, "path", PDEC_REQUIRED, &ulen);
    json_t *sb = pdec_object(&rd, "sandbox", PDEC_OPTIONAL);
    if (rd.failed) goto fail;
    (void)id;
    r->id = json_object_get(v, "id");
    size_t plen;
    struct uri_error ue;
    if (uri_to_path(uri, ulen, false, &r->path, &plen, &ue) < 0) {
        *code = rpc_uri_error_code(&ue);
        pdec_fail(d, "%s", ue.message);
        return false;
    }
    /* The root is echoed as sent, the way the reference's URL parser writes it back:
     * dot segments resolved and a localhost host dropped, percent escapes kept. */
    if (uri_has_dots_or_host(uri, ulen)) r->uri_own = uri_from_path(r->path, plen);
    r->uri = r->uri_own ? r->uri_own : uri;
    r->uri_len = r->uri_own ? strlen(r->uri_own) : ulen;
    struct sandbox_policy pol;
    struct sandbox_error se;
    if (sandbox_policy_parse(sb, NULL, &pol, &se) < 0) {
        *code = sandbox_error_code(&se);
        pdec_fail(d, "%s", se.message);
        return false;
    }
    bool need = sandbox_policy_needs_fs(&pol, true, false);
    sandbox_policy_free(&pol);
    if (need) r->sb_json = json_dumps(sb, JSON_COMPACT | JSON_SORT_KEYS);
    (void)req;
    return true;
fail:
    pdec_fail(d, "%s", rd.err);
    return false;
}

static void handle_discover(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WireCapabilityRootsDiscoverParams");
    json_t *roots = pdec_array(&d, "roots", PDEC_REQUIRED);
    if (rpc_reply_if_invalid(req, &d)) return;
    struct disc_work *dw = xcalloc(1, sizeof *dw);
    buf_init(&dw->out);
    dw->req = req;
    dw->n = json_array_size(roots);
    dw->roots = xcalloc(dw->n ? dw->n : 1, sizeof *dw->roots);
    for (size_t i = 0; i < dw->n; i++) {
        int code;
        if (!decode_root(&d, json_array_get(roots, i), &dw->roots[i], req, &code)) {
            disc_free(dw);
            rpc_reply_error(req, code, "%s", d.err);
            return;
        }
    }
    if (!rpc_check_ready(req)) {
        disc_free(dw);
        return;
    }
    if (dw->n > CAPROOTS_MAX_ROOTS) {
        disc_free(dw);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "capability root discovery accepts at most %d roots", CAPROOTS_MAX_ROOTS);
        return;
    }
    snprintf(dw->owner, sizeof dw->owner, "%s", session_of(req->conn)->id);
    rpc_result_begin(req, &dw->out);
    dw->w.data = dw;
    int r = uv_queue_work(req->loop, &dw->w, disc_run, disc_done);
    if (r < 0) {
        buf_free(&dw->out);
        buf_init(&dw->out);
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", uv_strerror(r));
        disc_free(dw);
    }
}

const struct rpc_method capability_roots_methods[] = {
    {"capabilityRoots/discoverV1", "capability discovery", handle_discover},
    {NULL, NULL, NULL},
};
