/* fs_wire: see fs_wire.h. */
#include "fs/fs_wire.h"

#include <errno.h>
#include <string.h>

/* The request frame: this header, then path, path2 and b64 bytes. */
struct wire_req_head {
    uint32_t op;
    uint8_t recursive, force, nofollow, follow_dir_links, prune_hidden, replace, fsync, pad;
    uint64_t max_depth, max_dirs, max_entries;
    uint64_t path_len, path2_len, b64_len;
};

/* The reply frame: this header, then msg_len bytes of message, out_len of result. */
struct wire_rep_head {
    int32_t err, kind;
    uint64_t msg_len, out_len;
};

/* Copies a frame's fixed header (hlen bytes) into head; returns the length of
 * the body after it, or -EPROTO when the frame is shorter than the header. */
static long take_head(const void *frame, size_t len, void *head, size_t hlen)
{
    if (len < hlen) return -EPROTO;
    memcpy(head, frame, hlen);
    return (long)(len - hlen);
}

void fs_wire_encode_request(struct buf *out, const struct fs_wire_request *rq)
{
    struct wire_req_head h = {.op = rq->op,
                              .recursive = rq->recursive,
                              .force = rq->force,
                              .nofollow = rq->nofollow,
                              .follow_dir_links = rq->follow_dir_links,
                              .prune_hidden = rq->prune_hidden,
                              .replace = rq->replace,
                              .fsync = rq->fsync,
                              .max_depth = rq->max_depth,
                              .max_dirs = rq->max_dirs,
                              .max_entries = rq->max_entries,
                              .path_len = rq->path_len,
                              .path2_len = rq->path2_len,
                              .b64_len = rq->b64_len};
    buf_reserve(out, sizeof h + h.path_len + h.path2_len + h.b64_len);
    buf_append(out, &h, sizeof h);
    if (h.path_len) buf_append(out, rq->path, h.path_len);
    if (h.path2_len) buf_append(out, rq->path2, h.path2_len);
    if (h.b64_len) buf_append(out, rq->b64, h.b64_len);
}

int fs_wire_decode_request(const void *frame, size_t len, struct fs_wire_request *rq)
{
    struct wire_req_head h;
    long r = take_head(frame, len, &h, sizeof h);
    if (r < 0) return (int)r;
    uint64_t body = (uint64_t)r;
    /* Each length within the body first, so the sum cannot wrap. */
    if (h.path_len > body || h.path2_len > body || h.b64_len > body ||
        h.path_len + h.path2_len + h.b64_len != body)
        return -EPROTO;
    const char *p = (const char *)frame + sizeof h;
    *rq = (struct fs_wire_request){.op = h.op,
                                   .recursive = h.recursive,
                                   .force = h.force,
                                   .nofollow = h.nofollow,
                                   .follow_dir_links = h.follow_dir_links,
                                   .prune_hidden = h.prune_hidden,
                                   .replace = h.replace,
                                   .fsync = h.fsync,
                                   .max_depth = h.max_depth,
                                   .max_dirs = h.max_dirs,
                                   .max_entries = h.max_entries,
                                   .path = p,
                                   .path_len = h.path_len,
                                   .path2 = p + h.path_len,
                                   .path2_len = h.path2_len,
                                   .b64 = p + h.path_len + h.path2_len,
                                   .b64_len = h.b64_len};
    return 0;
}

void fs_wire_encode_reply(struct buf *out, const struct fs_wire_reply *rp)
{
    struct wire_rep_head h = {rp->err, rp->kind, rp->msg_len, rp->out_len};
    buf_append(out, &h, sizeof h);
    if (h.msg_len) buf_append(out, rp->msg, h.msg_len);
    if (h.out_len) buf_append(out, rp->out, h.out_len);
}

int fs_wire_decode_reply(const void *frame, size_t len, struct fs_wire_reply *rp)
{
    struct wire_rep_head h;
    long r = take_head(frame, len, &h, sizeof h);
    if (r < 0) return (int)r;
    uint64_t body = (uint64_t)r;
    if (h.msg_len > body || h.out_len != body - h.msg_len) return -EPROTO;
    const char *p = (const char *)frame + sizeof h;
    *rp = (struct fs_wire_reply){.err = h.err,
                                 .kind = h.kind,
                                 .msg = p,
                                 .msg_len = h.msg_len,
                                 .out = p + h.msg_len,
                                 .out_len = h.out_len};
    return 0;
}
