/* base64: standard padded table codec (see base64.h for why it is our own). */
#include "util/base64.h"

#include <stdio.h>

static const char enc_table[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63 for alphabet bytes, 0xFF otherwise. */
static const uint8_t dec_table[256] = {
#define X 0xFF
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  62,
    X,  X,  X,  63, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, X,  X,  X,  X,  X,  X,  X,  0,
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
    23, 24, 25, X,  X,  X,  X,  X,  X,  26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38,
    39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
#undef X
};

size_t base64_encode(const void *src, size_t n, char *dst)
{
    const uint8_t *s = src;
    char *d = dst;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        d[0] = enc_table[v >> 18];
        d[1] = enc_table[(v >> 12) & 63];
        d[2] = enc_table[(v >> 6) & 63];
        d[3] = enc_table[v & 63];
        d += 4;
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        d[0] = enc_table[v >> 18];
        d[1] = enc_table[(v >> 12) & 63];
        d[2] = i + 1 < n ? enc_table[(v >> 6) & 63] : '=';
        d[3] = '=';
        d += 4;
    }
    return (size_t)(d - dst);
}

int base64_decode(const char *src, size_t n, uint8_t *dst, size_t *out_len, char *err,
                  size_t errlen)
{
    const uint8_t *s = (const uint8_t *)src;
    /* Find where the symbols end: the first '=' starts the padding. */
    size_t sym = 0;
    while (sym < n && dec_table[s[sym]] != 0xFF) sym++;
    if (sym < n && s[sym] != '=') {
        snprintf(err, errlen, "Invalid symbol %u, offset %zu.", s[sym], sym);
        return -1;
    }
    /* Like the reference decoder, data after the padding, or padding where no
     * padding can be (a quad's first or second symbol), is reported as the first
     * '=' being the invalid symbol. */
    for (size_t i = sym; i < n; i++) {
        if (s[i] != '=') {
            snprintf(err, errlen, "Invalid symbol %u, offset %zu.", (unsigned)'=', sym);
            return -1;
        }
    }
    size_t rem = sym % 4;
    if (sym < n && rem < 2) {
        snprintf(err, errlen, "Invalid symbol %u, offset %zu.", (unsigned)'=', sym);
        return -1;
    }
    if (rem == 1) {
        snprintf(err, errlen, "Invalid input length: %zu", n);
        return -1;
    }
    size_t pad = n - sym;
    if ((rem == 0 && pad != 0) || (rem != 0 && pad != 4 - rem)) {
        snprintf(err, errlen, "Invalid padding");
        return -1;
    }
    uint8_t *d = dst;
    size_t i = 0;
    for (; i + 4 <= sym; i += 4) {
        uint32_t v = (uint32_t)dec_table[s[i]] << 18 | (uint32_t)dec_table[s[i + 1]] << 12 |
                     (uint32_t)dec_table[s[i + 2]] << 6 | dec_table[s[i + 3]];
        d[0] = (uint8_t)(v >> 16);
        d[1] = (uint8_t)(v >> 8);
        d[2] = (uint8_t)v;
        d += 3;
    }
    if (rem) {
        uint32_t v = (uint32_t)dec_table[s[i]] << 18 | (uint32_t)dec_table[s[i + 1]] << 12;
        if (rem == 3) v |= (uint32_t)dec_table[s[i + 2]] << 6;
        /* Canonical encodings leave the unused low bits of the last symbol zero. */
        uint32_t unused = rem == 2 ? (v & 0xFFFF) : (v & 0xFF);
        if (unused) {
            size_t last = i + rem - 1;
            snprintf(err, errlen, "Invalid last symbol %u, offset %zu.", s[last], last);
            return -1;
        }
        *d++ = (uint8_t)(v >> 16);
        if (rem == 3) *d++ = (uint8_t)(v >> 8);
    }
    *out_len = (size_t)(d - dst);
    return 0;
}
