/* fs_wire: the frames between the daemon and its sandbox helper for fs requests.
 *
 * Pure codec, no I/O: a request frame carries a validated fs operation (op, flags,
 * limits and three byte strings), a reply frame its outcome (errno or a JSON-RPC
 * error code and message, or the result text). Both ends are the same build, so
 * the fixed header is native-endian; every length is checked against the frame on
 * decode, which is the whole validation the helper relies on. */
#ifndef EXEC_FS_FS_WIRE_H
#define EXEC_FS_FS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

struct fs_wire_request {
    uint32_t op; /* enum fs_op (fs_work.h); which ops a helper serves is its policy */
    bool recursive, force, nofollow, follow_dir_links, prune_hidden, replace, fsync;
    uint64_t max_depth, max_dirs, max_entries;
    /* Borrowed: the caller's strings on encode, slices of the frame on decode
     * (not NUL-terminated); NULL with length 0 when absent. */
    const char *path, *path2, *b64;
    size_t path_len, path2_len, b64_len;
};

struct fs_wire_reply {
    int32_t err;  /* errno of the failed operation, or 0 */
    int32_t kind; /* enum fs_err_kind (fs_work.h) when msg_len > 0 */
    /* Borrowed like the request's strings. */
    const char *msg; /* error message, msg_len bytes (0: none) */
    const char *out; /* result text, out_len bytes */
    size_t msg_len, out_len;
};

/* Appends the frame for rq to out. */
void fs_wire_encode_request(struct buf *out, const struct fs_wire_request *rq);
/* Decodes a request frame; 0, or -EPROTO when the lengths do not add up. */
int fs_wire_decode_request(const void *frame, size_t len, struct fs_wire_request *rq);

/* Appends the frame for rp to out. */
void fs_wire_encode_reply(struct buf *out, const struct fs_wire_reply *rp);
/* Decodes a reply frame; 0, or -EPROTO when the lengths do not add up. */
int fs_wire_decode_reply(const void *frame, size_t len, struct fs_wire_reply *rp);

#endif
