/* libFuzzer target for proto/utf8.
 *
 * The checker and the lossy conversion share one decoder and must agree: input is
 * valid exactly when the lossy conversion returns it unchanged, and whatever the
 * lossy conversion returns is valid. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf b;
    buf_init(&b);
    utf8_lossy(&b, (const char *)data, size);
    bool same = b.len == size && (size == 0 || memcmp(b.data, data, size) == 0);
    if (utf8_valid(data, size) != same) abort();
    if (!utf8_valid(b.data, b.len)) abort();
    buf_free(&b);
    return 0;
}
