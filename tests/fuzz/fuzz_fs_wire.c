/* libFuzzer target for fs/fs_wire, the frames the sandbox helper decodes.
 *
 * Whatever decodes must lie inside the frame (the paths: copies of what does) and
 * re-encode to the same bytes; the reply codec is checked the same way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
    if (n && (p < (const char *)data || p + n > (const char *)data + size)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fs_request rq;
    if (fs_wire_decode_request(data, size, &rq) == 0) {
        const char *body = (const char *)data + FS_REQUEST_HEAD_SIZE;
        if (memcmp(rq.path, body, rq.path_len) || rq.path[rq.path_len] ||
            memcmp(rq.path2, body + rq.path_len, rq.path2_len) || rq.path2[rq.path2_len])
            abort();
        inside(rq.b64, rq.b64_len, data, size);
        struct buf b;
        buf_init(&b);
        fs_wire_encode_request(&b, &rq);
        if (b.len != size || memcmp(b.data, data, size) != 0) abort();
        buf_free(&b);
        free(rq.path);
        free(rq.path2);
    }
    struct fs_wire_reply rp;
    if (fs_wire_decode_reply(data, size, &rp) == 0) {
        inside(rp.msg, rp.msg_len, data, size);
        inside(rp.out, rp.out_len, data, size);
        struct buf b;
        buf_init(&b);
        fs_wire_encode_reply(&b, &rp);
        if (b.len != size || memcmp(b.data, data, size) != 0) abort();
        buf_free(&b);
    }
    return 0;
}
