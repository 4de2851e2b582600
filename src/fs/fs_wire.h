/* fs_wire: the frames between the daemon and its sandbox helper for fs requests.
 *
 * Pure codec, no I/O: a request frame carries a validated fs operation whole (the head
 * of struct fs_request, fs_request.h, then its three byte strings), a reply frame its
 * outcome (errno or a JSON-RPC error code and message, or the result text). Both ends
 * are the same build, so a head is native-endian and laid out as in memory; no pointer
 * crosses. Decoding checks every length against the frame and every flag byte (0 or 1),
 * which is the whole validation the helper relies on; the daemon trusts a reply no
 * further than its lengths. */
#ifndef EXEC_FS_FS_WIRE_H
#define EXEC_FS_FS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs_request.h"
#include "util/buf.h"

struct fs_wire_reply {
    int32_t err;  /* errno of the failed operation, or 0 */
    int32_t kind; /* enum fs_err_kind (fs_work.h) when msg_len > 0 */
    /* Borrowed like the request's strings. */
    const char *msg; /* error message, msg_len bytes (0: none) */
    const char *out; /* result text, out_len bytes */
    size_t msg_len, out_len;
};

/* Appends the frame for rq to out: its head as it is (spare zeroed), then path, path2
 * and b64 (each its length's bytes, none when NULL). */
void fs_wire_encode_request(struct buf *out, const struct fs_request *rq);
/* Decodes a request frame into *rq. On 0, rq->path and rq->path2 are NUL-terminated
 * copies (the caller frees them) and rq->b64 points into frame; -EPROTO, with nothing
 * allocated, when the lengths do not add up or a flag byte is neither 0 nor 1. */
int fs_wire_decode_request(const void *frame, size_t len, struct fs_request *rq);

/* Appends the frame for rp to out. */
void fs_wire_encode_reply(struct buf *out, const struct fs_wire_reply *rp);
/* Decodes a reply frame; 0, or -EPROTO when the lengths do not add up. */
int fs_wire_decode_reply(const void *frame, size_t len, struct fs_wire_reply *rp);

#endif
