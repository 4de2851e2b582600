/* fs_audit: the audit records of the fs methods (audit/audit.h, docs/AUDIT.md): one
 * per operation once it is done (its path or paths, byte counts, its error), written
 * where the reply is made (fs_methods.c's after_cb). Changes are always recorded;
 * reads only with --audit-fs-reads. Never the contents of a file. */
#include "fs/fs_audit.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "util/mem.h"
#include "util/oserr.h"

/* The record type of an operation (fs_op_table.c), and whether it only reads. */
static const char *op_type(const struct fs_work *fw, bool *reads)
{
    const struct fs_op_info *op = fs_op_info(fw->rq.op);
    *reads = !op->changes && !(fw->rq.op == OP_OPEN && fw->rq.replace);
    return op->audit;
}

/* The "error" field of a failure's errno (nothing for 0). */
static void put_errno(struct buf *b, int err)
{
    if (!err) return;
    char text[160];
    oserr_format(err, text, sizeof text);
    audit_put_str(b, "error", text);
}

static void put_error(struct buf *b, const struct fs_work *fw)
{
    if (fw->msg)
        audit_put_str(b, "error", fw->msg);
    else
        put_errno(b, fw->err);
}

void fs_audit_op(const struct fs_work *fw)
{
    bool reads;
    const char *type = op_type(fw, &reads);
    if (!type || !audit_enabled() || (reads && !audit_fs_reads())) return;
    struct buf *b = audit_begin(type);
    audit_put_str(b, "session", fw->sb_owner);
    if (fw->h) { /* handle I/O: the handle and the file it was opened on */
        audit_put_strn(b, "handle", fw->h->id, fw->h->id_len);
        audit_put_str(b, "path", fw->h->path);
        audit_put_u64(b, "offset", fw->offset);
        audit_put_u64(b, "bytes", fw->rq.op == OP_WRITE_BLOCK ? fw->audit_bytes : fw->len);
    } else if (fw->rq.op == OP_COPY) {
        audit_put_strn(b, "source", fw->rq.path, fw->rq.path_len);
        audit_put_strn(b, "destination", fw->rq.path2, fw->rq.path2_len);
    } else {
        audit_put_strn(b, "path", fw->rq.path, fw->rq.path_len);
    }
    if (fw->rq.op == OP_WRITE_FILE) audit_put_u64(b, "bytes", fw->audit_bytes);
    if (fw->rq.op == OP_OPEN) {
        audit_put_strn(b, "handle", fw->hid, fw->hid_len);
        audit_put_str(b, "mode", fw->rq.replace ? "replace" : "read");
    }
    if (fw->rq.op == OP_REMOVE || fw->rq.op == OP_CREATE_DIR || fw->rq.op == OP_COPY)
        audit_put_bool(b, "recursive", fw->rq.recursive);
    if (fw->rq.op == OP_REMOVE) audit_put_bool(b, "force", fw->rq.force);
    if (!fw->h) audit_put_bool(b, "sandboxed", fw->sb != NULL);
    put_error(b, fw);
    audit_commit(b);
}

uint64_t fs_audit_payload_bytes(const char *b64, size_t len)
{
    if (!b64 || len < 2) return 0;
    uint64_t n = len / 4 * 3;
    if (len % 4) /* unpadded: the last group holds len % 4 - 1 bytes */
        return n + (len % 4) - 1;
    return n - (b64[len - 1] == '=') - (b64[len - 2] == '=');
}

char *fs_audit_handle_path(const char *path)
{
    return audit_enabled() ? xstrdup(path) : NULL;
}

void fs_audit_chmod(const char *session, const char *path, unsigned mode, int result)
{
    struct buf *b = audit_begin("fs.setPermissions");
    if (!b) return;
    char octal[8];
    snprintf(octal, sizeof octal, "%04o", mode & 07777u);
    audit_put_str(b, "session", session);
    audit_put_str(b, "path", path);
    audit_put_str(b, "mode", octal);
    put_errno(b, result < 0 ? -result : 0);
    audit_commit(b);
}

void fs_audit_rename(const char *session, const char *src, const char *dst, int err)
{
    struct buf *b = audit_begin("fs.rename");
    if (!b) return;
    audit_put_str(b, "session", session);
    audit_put_str(b, "source", src);
    audit_put_str(b, "destination", dst);
    put_errno(b, err);
    audit_commit(b);
}
