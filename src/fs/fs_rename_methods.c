/* fs_rename_methods: `fs/rename {sourcePath, destinationPath, keepAttributes?, fsync?}` (ours,
 * capability fsRename), the last step of an upload that never leaves a half-written
 * file under its final name.
 *
 * The reference's fs API cannot rename, so a client that streams a large file (fs/open
 * "replace" and fs/writeBlock) can only write it in place, and an interrupted upload
 * leaves the old file truncated: rsync's model needs a temporary name beside the target
 * and one rename(2) over it once the bytes are all there. keepAttributes gives the new
 * file the owner and group (where permitted) and permission bits of the regular file it
 * replaces, as fs/writeFile keeps them; fsync flushes the file before the rename and the
 * directory after it, so the replacement survives a crash whole or not at all. rename(2)
 * semantics otherwise: the destination is replaced at once (never absent), both paths
 * must be on one file system, a symbolic link at the destination is replaced itself
 * (resolve it first to write through it). It runs on libuv's thread pool, never on the
 * loop, and takes no sandbox: a non-null `sandbox` is refused rather than run unconfined
 * (PROTOCOL.md §11 (h)). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_audit.h"
#include "fs/fs_methods.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "util/mem.h"

struct rename_work {
    uv_work_t work;
    struct rpc_req *req;
    char *src, *dst;                 /* native paths (owned) */
    bool keep;                       /* keepAttributes */
    bool sync;                       /* fsync */
    int err;                         /* the failure's errno, 0 when it worked */
    char session[FS_SESSION_ID_LEN]; /* for the audit record */
};

/* The destination's owner, group and mode onto the open source fd. The owner first:
 * chown clears set-id bits, which the chmod then restores. A chown we may not do
 * (EPERM: not root, another owner) leaves the file ours, as with cp. */
static int keep_attributes(int fd, const struct stat *dst)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return errno;
    if ((st.st_uid != dst->st_uid || st.st_gid != dst->st_gid) &&
        fchown(fd, dst->st_uid, dst->st_gid) < 0 && errno != EPERM)
        return errno;
    if (fchmod(fd, dst->st_mode & 07777) < 0) return errno;
    return 0;
}

/* The directory holding path, fsync'd (after the rename: the new entry is durable). */
static int sync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash && slash != path ? xstrndup(path, (size_t)(slash - path)) : xstrdup("/");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    int e = fd < 0 || fsync(fd) < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    return e;
}

static void rename_run(uv_work_t *w)
{
    struct rename_work *r = w->data;
    struct stat dst;
    bool keep = r->keep && lstat(r->dst, &dst) == 0 && S_ISREG(dst.st_mode);
    if (keep || r->sync) {
        int fd = open(r->src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            r->err = errno;
            return;
        }
        r->err = keep ? keep_attributes(fd, &dst) : 0;
        if (!r->err && r->sync && fsync(fd) < 0) r->err = errno;
        close(fd);
        if (r->err) return;
    }
    if (rename(r->src, r->dst) < 0)
        r->err = errno;
    else if (r->sync)
        r->err = sync_parent(r->dst);
}

static void rename_done(uv_work_t *w, int status)
{
    struct rename_work *r = w->data;
    if (status < 0 && !r->err) r->err = -status;
    fs_audit_rename(r->session, r->src, r->dst, r->err);
    if (r->err)
        rpc_reply_errno(r->req, r->err);
    else
        rpc_reply_json(r->req, json_object());
    free(r->src);
    free(r->dst);
    free(r);
}

static void handle_rename(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "RenameParams");
    size_t slen = 0, dlen = 0;
    const char *src = pdec_string_len(&d, "sourcePath", PDEC_REQUIRED, &slen);
    const char *dst = pdec_string_len(&d, "destinationPath", PDEC_REQUIRED, &dlen);
    bool keep = pdec_bool(&d, "keepAttributes", PDEC_OPTIONAL, false);
    bool sync = pdec_bool(&d, "fsync", PDEC_OPTIONAL, false);
    json_t *sandbox = pdec_object(&d, "sandbox", PDEC_OPTIONAL);
    if (!d.failed && sandbox)
        pdec_fail(&d, "fs/rename cannot run sandboxed; send it without a sandbox");
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct rename_work *r = xcalloc(1, sizeof *r);
    r->req = req;
    r->keep = keep;
    r->sync = sync;
    r->work.data = r;
    fs_session_id(req, r->session);
    size_t n;
    if (!fs_param_path(req, src, slen, &r->src, &n) ||
        !fs_param_path(req, dst, dlen, &r->dst, &n)) {
        free(r->src);
        free(r);
        return;
    }
    int rc = uv_queue_work(req->loop, &r->work, rename_run, rename_done);
    if (rc < 0) {
        r->err = -rc;
        rename_done(&r->work, 0);
    }
}

const struct rpc_method fs_rename_methods[] = {
    {"fs/rename", "filesystem", handle_rename},
    {NULL, NULL, NULL},
};
