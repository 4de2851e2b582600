/* sha1: plain FIPS 180-4 SHA-1 (see sha1.h for why it is our own). */
#include "proto/sha1.h"

#include <string.h>

static uint32_t rol(uint32_t v, int s)
{
    return v << s | v >> (32 - s);
}

static void block(uint32_t h[5], const uint8_t *b)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (bb & c) | (~bb & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = bb ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (bb & c) | (bb & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = bb ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = t;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void sha1(const void *p, size_t n, uint8_t out[SHA1_LEN])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const uint8_t *s = p;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        block(h, s + i);
    /* Last block(s): the tail, 0x80, zeros, then the bit length big-endian. */
    uint8_t last[128] = {0};
    size_t rem = n - i;
    memcpy(last, s + i, rem);
    last[rem] = 0x80;
    size_t total = rem + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        last[total - 1 - (size_t)k] = (uint8_t)(bits >> (8 * k));
    block(h, last);
    if (total == 128) block(h, last + 64);
    for (int k = 0; k < 5; k++) {
        out[4 * k] = (uint8_t)(h[k] >> 24);
        out[4 * k + 1] = (uint8_t)(h[k] >> 16);
        out[4 * k + 2] = (uint8_t)(h[k] >> 8);
        out[4 * k + 3] = (uint8_t)h[k];
    }
}
