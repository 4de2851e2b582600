/* ws_frame: see ws_frame.h. */
#include "proto/ws_frame.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* 32 bytes per step where the CPU has AVX2 (checked once, at load time). */
static int have_avx2 = -1;

__attribute__((constructor)) static void ws_frame_init(void)
{
    have_avx2 = __builtin_cpu_supports("avx2");
}

/* Unmasks the first n / 32 * 32 bytes; returns them ORed into the low byte of
 * each 64-bit lane of *any. */
__attribute__((target("avx2"))) static size_t unmask_avx2(uint8_t *p, size_t n, uint32_t k32,
                                                          uint64_t *any)
{
    const __m256i k = _mm256_set1_epi32((int)k32);
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + i)), k);
        acc = _mm256_or_si256(acc, v);
        _mm256_storeu_si256((__m256i *)(p + i), v);
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, acc);
    *any |= lanes[0] | lanes[1] | lanes[2] | lanes[3];
    return i;
}

/* The same OR of the first n / 32 * 32 bytes, reading only. */
__attribute__((target("avx2"))) static size_t or_avx2(const uint8_t *p, size_t n, uint64_t *any)
{
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        acc = _mm256_or_si256(acc, _mm256_loadu_si256((const __m256i *)(p + i)));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, acc);
    *any |= lanes[0] | lanes[1] | lanes[2] | lanes[3];
    return i;
}
#endif

size_t ws_frame_header_size(uint8_t second_byte)
{
    uint8_t len7 = second_byte & 0x7f;
    size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
    return 2 + ext + ((second_byte & 0x80) ? 4 : 0);
}

int ws_frame_decode(const uint8_t *buf, size_t n, struct ws_frame *f)
{
    if (n < 2) return 0;
    size_t h = ws_frame_header_size(buf[1]);
    if (n < h) return 0;
    f->fin = buf[0] & 0x80;
    f->rsv = buf[0] & 0x70;
    f->opcode = buf[0] & 0x0f;
    f->masked = buf[1] & 0x80;
    uint64_t len = buf[1] & 0x7f;
    size_t at = 2;
    if (len == 126) {
        len = (uint64_t)buf[2] << 8 | buf[3];
        at = 4;
    } else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | buf[2 + i];
        at = 10;
    }
    if (f->masked)
        memcpy(f->mask, buf + at, 4);
    else
        memset(f->mask, 0, 4);
    f->header_len = h;
    f->payload_len = len;
    return 1;
}

bool ws_frame_valid(const struct ws_frame *f)
{
    if (f->rsv) return false;
    bool control = f->opcode >= WS_OP_CLOSE && f->opcode <= WS_OP_PONG;
    if (!(f->opcode <= WS_OP_BINARY || control)) return false;
    return !control || (f->fin && f->payload_len <= 125);
}

size_t ws_frame_header_len(uint64_t len, bool masked)
{
    return (len < 126 ? 2u : len < 65536 ? 4u : 10u) + (masked ? 4u : 0u);
}

size_t ws_frame_encode(uint8_t *out, bool fin, int opcode, uint64_t len, const uint8_t *mask)
{
    size_t h = 0;
    out[h++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    uint8_t mbit = mask ? 0x80 : 0;
    if (len < 126) {
        out[h++] = (uint8_t)(mbit | len);
    } else if (len < 65536) {
        out[h++] = mbit | 126;
        out[h++] = (uint8_t)(len >> 8);
        out[h++] = (uint8_t)len;
    } else {
        out[h++] = mbit | 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)(len >> (8 * i));
    }
    if (mask) {
        memcpy(out + h, mask, 4);
        h += 4;
    }
    return h;
}

uint8_t ws_frame_unmask(uint8_t *p, size_t n, const uint8_t mask[4])
{
    /* Eight bytes per step: byte-wise XOR dominated large requests (BENCHMARKS.md).
     * The OR of the results comes with it, so a text message whose bytes are all
     * ASCII needs no second pass for its UTF-8 check. */
    uint32_t k32;
    memcpy(&k32, mask, 4);
    uint64_t k64 = (uint64_t)k32 << 32 | k32, any = 0;
    size_t i = 0;
#if defined(__x86_64__)
    if (have_avx2 > 0 && n >= 64) i = unmask_avx2(p, n, k32, &any);
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        v ^= k64;
        any |= v;
        memcpy(p + i, &v, 8);
    }
    uint8_t or = 0;
    for (; i < n; i++)
        or |= p[i] ^= mask[i & 3];
    for (int b = 0; b < 8; b++)
        or |= (uint8_t)(any >> (8 * b));
    return or ;
}

uint8_t ws_frame_or(const uint8_t *p, size_t n)
{
    uint64_t any = 0;
    size_t i = 0;
#if defined(__x86_64__)
    if (have_avx2 > 0 && n >= 64) i = or_avx2(p, n, &any);
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        any |= v;
    }
    uint8_t or = 0;
    for (; i < n; i++)
        or |= p[i];
    for (int b = 0; b < 8; b++)
        or |= (uint8_t)(any >> (8 * b));
    return or ;
}
