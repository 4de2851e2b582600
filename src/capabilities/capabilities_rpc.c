/* capabilities_rpc: the JSON-RPC face of capability discovery,
 * `capabilityRoots/discoverV1` and `capabilities/discoverV2` (PROTOCOL.md sections 8.2
 * and 8.3). It decodes the params, decides the JSON-RPC code of every refusal (URIs,
 * sandbox policies, the lifecycle gate, the bounds), finds the session whose sandbox
 * helper reads a sandboxed root, and replies; what is found is the domain modules'
 * (capability_roots.c for V1, capabilities_v2.c for V2), which know nothing of
 * requests.
 *
 * V1 params {"roots":[{"id","path","sandbox"?}]} (at most CAPROOTS_MAX_ROOTS): each
 * root is echoed as sent the way the reference's URL parser writes it back, and its
 * sandbox, when it restricts reads, is kept as compact JSON for the helper. V2 params
 * {"cwd": file URI, "sandbox"?}: the cwd is checked but adds nothing, the locations
 * come from the server's own environment (CODEX_HOME, HOME). Scans run on the thread
 * pool; the handlers run on the loop thread. */
#include "capabilities/capabilities_rpc.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/capabilities_v2.h"
#include "capabilities/capability_roots.h"
#include "capabilities/caproots_scan.h"
#include "core/host_env.h"
#include "fs/fs_work.h"
#include "fs/fs_helper_pool.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "sandbox/landlock.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "util/buf.h"
#include "util/mem.h"

/* ---- capabilityRoots/discoverV1 ---------------------------------------------------- */

struct disc_work {
    uv_work_t w;
    struct rpc_req *req;
    struct caproots_root *roots;
    size_t n;
    char owner[40]; /* the session id, for the sandbox helper */
    struct buf out; /* the reply, begun on the loop thread */
};

static void disc_run(uv_work_t *w)
{
    struct disc_work *dw = w->data;
    caproots_discover(dw->roots, dw->n, dw->owner, &dw->out);
}

static void disc_free(struct disc_work *dw)
{
    for (size_t i = 0; i < dw->n; i++)
        caproots_root_free(&dw->roots[i]);
    free(dw->roots);
    buf_free(&dw->out);
    free(dw);
}

static void disc_done(uv_work_t *w, int status)
{
    struct disc_work *dw = w->data;
    for (size_t i = 0; i < dw->n; i++)
        if (dw->roots[i].sb) fs_helper_sweep_arm(dw->req->loop);
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
static bool decode_root(struct pdec *d, json_t *v, struct caproots_root *r, int *code)
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
    r->id = pdec_string_len(&rd, "id", PDEC_REQUIRED, &r->id_len);
    size_t ulen = 0;
    const char *uri = pdec_string_len(&rd, "path", PDEC_REQUIRED, &ulen);
    json_t *sb = pdec_object(&rd, "sandbox", PDEC_OPTIONAL);
    if (rd.failed) goto fail;
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
    struct sandbox_error se;
    if (fs_sandbox_decode(sb, true, false, &r->sb, &se) < 0) {
        *code = sandbox_error_code(&se);
        pdec_fail(d, "%s", se.message);
        return false;
    }
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
        if (!decode_root(&d, json_array_get(roots, i), &dw->roots[i], &code)) {
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

/* ---- capabilities/discoverV2 ------------------------------------------------------- */

static char *user_home_dir(void)
{
    char home[PATH_MAX];
    return host_env_home(home, sizeof home) ? xstrdup(home) : NULL;
}

/* caproots_v2_done_fn: the answer (or the pool's failure) becomes the reply. */
static void discover_v2_done(void *arg, int status, const struct buf *answer)
{
    struct rpc_req *req = arg;
    if (status < 0) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", uv_strerror(status));
        return;
    }
    struct buf b;
    rpc_result_begin(req, &b);
    buf_append(&b, answer->data, answer->len);
    rpc_result_finish(req, &b);
}

/* Decodes the params: the sandbox to read through in *sbp (NULL: none needed). false
 * when a reply (an error) has been made. */
static bool decode_v2(struct rpc_req *req, struct fs_sandbox **sbp)
{
    struct pdec d;
    pdec_begin(&d, req->params, "DiscoverV2CapabilitiesRequest");
    size_t cwd_len = 0;
    const char *cwd = pdec_string_len(&d, "cwd", PDEC_REQUIRED, &cwd_len);
    json_t *sb = pdec_object(&d, "sandbox", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return false;
    char *cwd_path = NULL;
    size_t plen;
    struct uri_error ue;
    if (uri_to_path(cwd, cwd_len, false, &cwd_path, &plen, &ue) < 0) {
        rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
        return false;
    }
    free(cwd_path);
    struct sandbox_error se;
    if (fs_sandbox_decode(sb, true, false, sbp, &se) < 0) {
        rpc_reply_error(req, sandbox_error_code(&se), "%s", se.message);
        return false;
    }
    /* Here the sandbox has no request cwd to fall back on (the reference's wording). */
    if (sb && !json_object_get(sb, "cwd")) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "missing field `cwd`");
    } else if (rpc_check_ready(req)) {
        if (!*sbp || sandbox_landlock_abi() >= 1) return true;
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "filesystem sandbox is unavailable on this executor");
    }
    fs_sandbox_free(*sbp);
    *sbp = NULL;
    return false;
}

static void handle_discover_v2(struct rpc_req *req)
{
    struct caproots_v2_query q = {0};
    if (!decode_v2(req, &q.sb)) return;
    char *why;
    q.codex_home = host_env_codex_home(&why);
    if (!q.codex_home) {
        rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", why);
        free(why);
        fs_sandbox_free(q.sb);
        return;
    }
    q.user_home = user_home_dir();
    struct session *s = session_of(req->conn);
    snprintf(q.owner, sizeof q.owner, "%s", s ? s->id : "");
    int r = caproots_v2_discover(req->loop, &q, discover_v2_done, req);
    if (r < 0) rpc_reply_error(req, RPC_INTERNAL_ERROR, "%s", uv_strerror(r));
}

const struct rpc_method capability_roots_methods[] = {
    {"capabilityRoots/discoverV1", "capability discovery", handle_discover},
    {NULL, NULL, NULL},
};

const struct rpc_method capability_roots_v2_methods[] = {
    {"capabilities/discoverV2", "capability discovery", handle_discover_v2},
    {NULL, NULL, NULL},
};

static const struct rpc_method *const capability_roots_tables[] = {
    capability_roots_methods, capability_roots_v2_methods, NULL};

/* capabilityDiscoverySandbox: capabilityRoots/discoverV1 scans a root that carries a
 * sandbox inside the sandbox helper (capability_roots.c). capabilityDiscoveryV2:
 * capabilities/discoverV2, the executor's own inventory of installed plugins and
 * skills, cached and watched (capabilities_v2.c). */
static const struct rpc_capability capability_roots_capabilities[] = {
    {"capabilityDiscoverySandbox", true, NULL},
    {"capabilityDiscoveryV2", true, NULL},
    {NULL, false, NULL},
};

const struct rpc_domain capability_roots_domain = {
    .name = "capabilities",
    .methods = capability_roots_tables,
    .capabilities = capability_roots_capabilities,
};
