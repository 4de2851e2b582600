/* libFuzzer target for fs/fs_wire, the frames the sandbox helper decodes.
 *
 * Whatever decodes must lie inside the frame and re-encode to the same bytes
 * (flag bytes normalised to 0/1 and the padding zeroed, as the encoder writes
 * them); the reply codec is checked the same way. */
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
    struct fs_wire_request rq;
    if (fs_wire_decode_request(data, size, &rq) == 0) {
        inside(rq.path, rq.path_len, data, size);
        inside(rq.path2, rq.path2_len, data, size);
        inside(rq.b64, rq.b64_len, data, size);
        struct buf b;
        buf_init(&b);
        fs_wire_encode_request(&b, &rq);
        struct fs_wire_request again;
        if (b.len != size || fs_wire_decode_request(b.data, b.len, &again) != 0) abort();
        if (again.path_len != rq.path_len || again.path2_len != rq.path2_len ||
            again.b64_len != rq.b64_len || again.op != rq.op || again.max_entries != rq.max_entries)
            abort();
        buf_free(&b);
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
