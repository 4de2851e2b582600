/* fs_wire: see fs_wire.h. */
#include "fs/fs_wire.h"

#include <errno.h>
#include <string.h>

#include "util/mem.h"

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

/* A head's flag bytes follow its op; its spare bytes end where the limits begin. */
#define FLAGS_AT (offsetof(struct fs_request, op) + sizeof(uint32_t))
#define SPARE_AT offsetof(struct fs_request, spare)
#define SPARE_END offsetof(struct fs_request, max_depth)

void fs_wire_encode_request(struct buf *out, const struct fs_request *rq)
{
    size_t path_len = rq->path ? rq->path_len : 0, path2_len = rq->path2 ? rq->path2_len : 0;
    size_t b64_len = rq->b64 ? rq->b64_len : 0;
    struct fs_request head = *rq;
    memset(head.spare, 0, sizeof head.spare);
    head.path_len = path_len;
    head.path2_len = path2_len;
    head.b64_len = b64_len;
    buf_reserve(out, FS_REQUEST_HEAD_SIZE + path_len + path2_len + b64_len);
    buf_append(out, &head, FS_REQUEST_HEAD_SIZE);
    if (path_len) buf_append(out, rq->path, path_len);
    if (path2_len) buf_append(out, rq->path2, path2_len);
    if (b64_len) buf_append(out, rq->b64, b64_len);
}

/* A NUL-terminated copy of a frame's slice (the caller frees). */
static char *dup_slice(const char *p, size_t n)
{
    char *d = xmalloc(n + 1);
    if (n) memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

int fs_wire_decode_request(const void *frame, size_t len, struct fs_request *rq)
{
    if (len < FS_REQUEST_HEAD_SIZE) return -EPROTO;
    /* The flags byte by byte before they are read as bool (another value would be no
     * bool at all), and the spare bytes zero as the encoder writes them. */
    const unsigned char *f = frame;
    for (size_t i = FLAGS_AT; i < SPARE_END; i++)
        if (f[i] > (i < SPARE_AT ? 1 : 0)) return -EPROTO;
    struct fs_request h;
    memcpy(&h, frame, FS_REQUEST_HEAD_SIZE);
    uint64_t body = len - FS_REQUEST_HEAD_SIZE;
    /* Each length within the body first, so the sum cannot wrap. */
    if (h.path_len > body || h.path2_len > body || h.b64_len > body ||
        h.path_len + h.path2_len + h.b64_len != body)
        return -EPROTO;
    const char *p = (const char *)frame + FS_REQUEST_HEAD_SIZE;
    h.path = dup_slice(p, h.path_len);
    h.path2 = dup_slice(p + h.path_len, h.path2_len);
    h.b64 = p + h.path_len + h.path2_len;
    *rq = h;
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
