/* ws_mask: RFC 6455 masking, a word at a time (see ws_mask.h). */
#include "util/ws_mask.h"

#include <string.h>

void ws_mask(uint8_t *p, size_t n, const uint8_t key[4])
{
    uint32_t k32;
    memcpy(&k32, key, 4);
    uint64_t k64 = (uint64_t)k32 << 32 | k32;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        v ^= k64;
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] ^= key[i & 3];
}
