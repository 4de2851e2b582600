/* libFuzzer target for proto/ws_frame.
 *
 * Whatever header decodes re-encodes to exactly the same bytes when it uses the
 * shortest length form (RFC 6455 requires the minimal form; a longer one must at
 * least decode to the same fields), and unmasking twice is the identity. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ws_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ws_frame f;
    if (ws_frame_decode(data, size, &f) == 0) {
        if (size >= WS_FRAME_MAX_HEADER) abort(); /* a full header always decodes */
        return 0;
    }
    if (f.header_len != ws_frame_header_size(data[1]) || f.header_len > size) abort();
    uint8_t h[WS_FRAME_MAX_HEADER];
    size_t hl = ws_frame_encode(h, f.fin, f.opcode, f.payload_len, f.masked ? f.mask : NULL);
    if (hl != ws_frame_header_len(f.payload_len, f.masked)) abort();
    struct ws_frame g;
    if (ws_frame_decode(h, hl, &g) != 1) abort();
    if (g.fin != f.fin || g.opcode != f.opcode || g.masked != f.masked ||
        g.payload_len != f.payload_len || memcmp(g.mask, f.mask, 4) != 0)
        abort();
    /* Same bytes whenever the input used the minimal length form (and no RSV bits). */
    if (hl == f.header_len && f.rsv == 0 && memcmp(h, data, hl) != 0) abort();
    size_t n = size - f.header_len;
    uint8_t *p = malloc(n + 1);
    memcpy(p, data + f.header_len, n);
    ws_frame_unmask(p, n, f.mask);
    ws_frame_unmask(p, n, f.mask);
    if (n && memcmp(p, data + f.header_len, n) != 0) abort();
    free(p);
    return 0;
}
