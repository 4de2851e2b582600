/* fs_mode: `fs/setPermissions {path, mode}` (ours, capability fsPermissions).
 *
 * The reference's fs API cannot change a file's permission bits, so a client that
 * copies files (exec-client `fs put`) would lose the executable bit. The mode is
 * the permission bits (0-07777, as `fs/getMetadata`'s `mode` reports them); the
 * call follows symlinks like chmod(2). It runs on libuv's thread pool
 * (uv_fs_chmod), never on the loop. It does not take a sandbox: a request with a
 * non-null `sandbox` is refused rather than run unconfined (PROTOCOL.md §11 (h)). */
#include <stdlib.h>
#include <string.h>

#include "fs/fs_audit.h"
#include "fs/fs_methods.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "util/mem.h"

struct chmod_work {
    uv_fs_t fs;
    struct rpc_req *req;
    unsigned mode;
    char session[FS_SESSION_ID_LEN]; /* for the audit record */
};

static void chmod_done(uv_fs_t *f)
{
    struct chmod_work *w = f->data;
    int r = (int)f->result;
    fs_audit_chmod(w->session, f->path, w->mode, r);
    uv_fs_req_cleanup(f);
    if (r < 0)
        rpc_reply_errno(w->req, -r);
    else
        rpc_reply_json(w->req, json_object());
    free(w);
}

static void handle_set_permissions(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "SetPermissionsParams");
    size_t ulen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    uint64_t mode = pdec_u64(&d, "mode", PDEC_REQUIRED, 0, NULL);
    json_t *sandbox = pdec_object(&d, "sandbox", PDEC_OPTIONAL);
    if (!d.failed && mode > 07777) pdec_fail(&d, "mode must be permission bits (0-4095)");
    if (!d.failed && sandbox)
        pdec_fail(&d, "fs/setPermissions cannot run sandboxed; send it without a sandbox");
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    char *path = NULL;
    size_t plen;
    if (!fs_param_path(req, uri, ulen, &path, &plen)) return;
    struct chmod_work *w = xcalloc(1, sizeof *w);
    w->req = req;
    w->fs.data = w;
    w->mode = (unsigned)mode;
    fs_session_id(req, w->session);
    int r = uv_fs_chmod(req->loop, &w->fs, path, (int)mode, chmod_done);
    free(path);
    if (r < 0) {
        free(w);
        rpc_reply_errno(req, -r);
    }
}

const struct rpc_method fs_mode_methods[] = {
    {"fs/setPermissions", "filesystem", handle_set_permissions},
    {NULL, NULL, NULL},
};
