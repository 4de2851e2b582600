/* capability_roots: what `capabilityRoots/discoverV1` answers, root by root (see
 * capability_roots.h; the method's params are decoded in capabilities_rpc.c).
 *
 * codex asks an executor for the plugin and skill files below the capability roots
 * it selected (installed plugins, skill directories) in one request instead of
 * walking them with one fs request per directory and file; it does so when its
 * executor_capability_discovery feature is on, or when the environment's file system
 * reads are restricted, and then with each root's `sandbox`. The result
 * {"roots":[...]} is in request order; every per-root failure is reported in that
 * root's entry (`error`, `warnings`), so one broken package never hides its siblings.
 * What a root's scan finds is caproots_scan.c's.
 *
 * Blocking: this runs on the thread pool. A root with a sandbox that needs enforcing
 * is scanned inside the session's sandbox helper (the scan is the fs operation
 * OP_DISCOVER, served by fs_helper_serve), so Landlock bounds every walk and read of
 * it; discoverV2 scans its locations the same way (caproots_scan_root). */
#include "capabilities/capability_roots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/caproots_scan.h"
#include "fs/fs_work.h"
#include "fs/fs_helper_pool.h"
#include "util/mem.h"
#include "util/oserr.h"

int caproots_scan_root(const char *path, const char *uri, struct fs_sandbox *sb, const char *owner,
                       struct buf *out, char *err, size_t errlen)
{
    if (!sb) {
        caproots_scan(path, uri, out);
        return 0;
    }
    struct fs_work fw = {.rq.op = OP_DISCOVER, .fd = -1, .displaced_fd = -1};
    buf_init(&fw.out);
    fw.rq.path = (char *)path;
    fw.rq.path_len = strlen(path);
    fw.rq.path2 = (char *)uri;
    fw.rq.path2_len = strlen(uri);
    fw.sb = sb; /* borrowed: this work is never freed by fs_methods.c */
    snprintf(fw.sb_owner, sizeof fw.sb_owner, "%s", owner);
    fs_work_run(&fw);
    int rc = 0;
    if (fs_work_failed(&fw)) {
        if (fw.msg)
            snprintf(err, errlen, "%s", fw.msg);
        else
            oserr_format(fw.err, err, errlen);
        rc = -1;
    } else {
        buf_append(out, fw.out.data, fw.out.len);
    }
    free(fw.msg);
    buf_free(&fw.out);
    return rc;
}

void caproots_discover(const struct caproots_root *roots, size_t n, const char *owner,
                       struct buf *out)
{
    buf_puts(out, "{\"roots\":[");
    for (size_t i = 0; i < n; i++) {
        const struct caproots_root *r = &roots[i];
        if (i) buf_putc(out, ',');
        buf_puts(out, "{\"id\":");
        buf_put_json_str(out, r->id, r->id_len);
        buf_puts(out, ",\"path\":");
        buf_put_json_str(out, r->uri, r->uri_len);
        buf_putc(out, ',');
        struct buf one;
        buf_init(&one);
        char *uri = xmemdup(r->uri, r->uri_len + 1);
        uri[r->uri_len] = '\0';
        char err[4096];
        if (caproots_scan_root(r->path, uri, r->sb, owner, &one, err, sizeof err) < 0)
            caproots_put_error(&one, err);
        free(uri);
        /* one is an object: splice its members after id and path. */
        if (one.len >= 2) buf_append(out, one.data + 1, one.len - 1);
        buf_free(&one);
    }
    buf_puts(out, "]}");
}

void caproots_root_free(struct caproots_root *r)
{
    free(r->path);
    fs_sandbox_free(r->sb);
    free(r->uri_own);
}
