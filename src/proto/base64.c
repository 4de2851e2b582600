/* base64: standard padded table codec (see base64.h for why it is our own). */
#include "proto/base64.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static const char enc_table[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63 for alphabet bytes, 0xFF otherwise. */
static const uint8_t dec_table[256] = {
#define X 0xFF
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  62, X,  X,  X,  63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, X,  X,  X,  X,  X,  X,  X,  0,  1,  2,  3,  4,  5,  6,
    7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, X,  X,  X,  X,  X,
    X,  26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
    49, 50, 51, X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
#undef X
};

/* Fast paths, filled once at load time (before any thread-pool thread exists):
 * enc_pairs maps 12 input bits to their two output characters, so the encoder does
 * two lookups per 3 bytes; dec_shift[k] holds each symbol's 6 bits already shifted
 * for position k of a quad, with DEC_BAD set for non-alphabet bytes, so the decoder
 * ORs four lookups and checks one bit. */
static uint16_t enc_pairs[4096];
static uint32_t dec_shift[4][256];
#define DEC_BAD 0x80000000u

#if defined(__x86_64__)
static bool have_avx2, have_vbmi;

/* 48 bytes -> 64 characters per step (Mula and Lemire's AVX-512 VBMI method, about
 * twice the AVX2 loop's rate): vpermb spreads each 3 bytes b0 b1 b2 over a 32-bit
 * word as [b1 b0 b2 b1], vpmultishiftqb picks an 8-bit window at each 6-bit field's
 * bit offset (10, 4, 22, 16 in each word), and vpermb with the alphabet as its table
 * maps them, reading only each index's low 6 bits. Reads 64 bytes per step (uses 48).
 * Returns the bytes consumed. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static size_t
encode_vbmi(const uint8_t *s, size_t n, char **dp)
{
    const __m512i spread =
        _mm512_setr_epi32(0x01020001, 0x04050304, 0x07080607, 0x0a0b090a, 0x0d0e0c0d, 0x10110f10,
                          0x13141213, 0x16171516, 0x191a1819, 0x1c1d1b1c, 0x1f201e1f, 0x22232122,
                          0x25262425, 0x28292728, 0x2b2c2a2b, 0x2e2f2d2e);
    const __m512i fields = _mm512_set1_epi64(0x3036242a1016040a);
    const __m512i alphabet = _mm512_loadu_si512((const void *)enc_table);
    char *d = *dp;
    size_t i = 0;
    for (; i + 64 <= n; i += 48) {
        __m512i in = _mm512_permutexvar_epi8(spread, _mm512_loadu_si512((const void *)(s + i)));
        __m512i idx = _mm512_multishift_epi64_epi8(fields, in);
        _mm512_storeu_si512((void *)d, _mm512_permutexvar_epi8(idx, alphabet));
        d += 64;
    }
    *dp = d;
    return i;
}

/* 24 bytes -> 32 characters per step (Wojciech Mula's pshufb method): spread each 3
 * bytes over 4 lanes, isolate the four 6-bit fields with two multiplies, then map
 * 0..63 to the alphabet with one 16-entry offset table. Needs 28 readable bytes
 * per step (two 16-byte loads 12 bytes apart). Returns the bytes consumed. */
__attribute__((target("avx2"))) static size_t encode_avx2(const uint8_t *s, size_t n, char **dp)
{
    const __m256i shuf = _mm256_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1, 10, 11,
                                         9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1);
    const __m256i lut =
        _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0, 65, 71, -4,
                         -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
    char *d = *dp;
    size_t i = 0;
    for (; i + 28 <= n; i += 24) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i hi = _mm_loadu_si128((const __m128i *)(s + i + 12));
        __m256i in = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), shuf);
        __m256i t0 = _mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00));
        __m256i t1 = _mm256_mulhi_epu16(t0, _mm256_set1_epi32(0x04000040));
        __m256i t2 = _mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0));
        __m256i t3 = _mm256_mullo_epi16(t2, _mm256_set1_epi32(0x01000010));
        __m256i idx = _mm256_or_si256(t1, t3);
        __m256i sel = _mm256_subs_epu8(idx, _mm256_set1_epi8(51));
        __m256i gt25 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(25));
        sel = _mm256_sub_epi8(sel, gt25);
        __m256i out = _mm256_add_epi8(idx, _mm256_shuffle_epi8(lut, sel));
        _mm256_storeu_si256((__m256i *)d, out);
        d += 32;
    }
    *dp = d;
    return i;
}

/* 32 characters -> 24 bytes per step (Mula/Klomp): classify each byte by its two
 * nibbles through two bit-set tables (any overlap means "not in the alphabet"),
 * add a per-class offset to get 0..63, then pack four 6-bit fields into 3 bytes
 * with two multiply-adds and a shuffle. Stops at the first step holding a byte
 * outside the alphabet ('=' included) and leaves it to the scalar code. Writes 32
 * bytes per step (8 beyond the 24 produced), so the caller keeps 48 characters of
 * slack. Returns the characters consumed. */
__attribute__((target("avx2"))) static size_t decode_avx2(const uint8_t *s, size_t n, uint8_t **dp)
{
    const __m256i lut_lo =
        _mm256_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A,
                         0x1B, 0x1B, 0x1B, 0x1A, 0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
                         0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
    const __m256i lut_hi =
        _mm256_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10,
                         0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08,
                         0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
    const __m256i lut_roll =
        _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 19, 4,
                         -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i mask_2f = _mm256_set1_epi8(0x2f);
    const __m256i pack = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1, 2,
                                          1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1);
    uint8_t *d = *dp;
    size_t i = 0;
    for (; i + 48 <= n; i += 32) {
        __m256i str = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i hi_nib = _mm256_and_si256(_mm256_srli_epi32(str, 4), mask_2f);
        __m256i lo_nib = _mm256_and_si256(str, mask_2f);
        __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_nib);
        __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_nib);
        if (!_mm256_testz_si256(lo, hi)) break;
        __m256i eq_2f = _mm256_cmpeq_epi8(str, mask_2f);
        __m256i roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(eq_2f, hi_nib));
        str = _mm256_add_epi8(str, roll);
        __m256i ab = _mm256_maddubs_epi16(str, _mm256_set1_epi32(0x01400140));
        __m256i out = _mm256_madd_epi16(ab, _mm256_set1_epi32(0x00011000));
        out = _mm256_shuffle_epi8(out, pack);
        out = _mm256_permutevar8x32_epi32(out, lanes);
        _mm256_storeu_si256((__m256i *)d, out);
        d += 24;
    }
    *dp = d;
    return i;
}
#endif

__attribute__((constructor)) static void base64_tables_init(void)
{
#if defined(__x86_64__)
    have_avx2 = __builtin_cpu_supports("avx2");
    have_vbmi = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
#endif
    for (unsigned i = 0; i < 4096; i++) {
        char pair[2] = {enc_table[i >> 6], enc_table[i & 63]};
        memcpy(&enc_pairs[i], pair, 2);
    }
    for (unsigned c = 0; c < 256; c++)
        for (unsigned k = 0; k < 4; k++)
            dec_shift[k][c] =
                dec_table[c] == 0xFF ? DEC_BAD : (uint32_t)dec_table[c] << (18 - 6 * k);
}

size_t base64_encode(const void *src, size_t n, char *dst)
{
    const uint8_t *s = src;
    char *d = dst;
    size_t i = 0;
#if defined(__x86_64__)
    if (have_vbmi && n >= 64) i = encode_vbmi(s, n, &d);
    if (have_avx2 && n - i >= 64) i += encode_avx2(s + i, n - i, &d);
#endif
    /* 6 bytes per step from one 8-byte load (so stop 8 bytes before the end). */
    for (; i + 8 <= n; i += 6) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        v = __builtin_bswap64(v);
        memcpy(d, &enc_pairs[v >> 52], 2);
        memcpy(d + 2, &enc_pairs[(v >> 40) & 0xFFF], 2);
        memcpy(d + 4, &enc_pairs[(v >> 28) & 0xFFF], 2);
        memcpy(d + 6, &enc_pairs[(v >> 16) & 0xFFF], 2);
        d += 8;
    }
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        memcpy(d, &enc_pairs[v >> 12], 2);
        memcpy(d + 2, &enc_pairs[v & 0xFFF], 2);
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

/* The strict decoder: validates padding and canonical trailing bits and words
 * every error like the reference. base64_decode runs it on the last quad of
 * well-formed input, and on the rest of the input from the quad where the fast
 * loop met anything unusual, so errors (and their offsets) always come from here.
 * `from` (a multiple of 4) is where it starts: src[0..from) are alphabet symbols
 * already decoded into dst, and may have been overwritten by that output when the
 * decode is in place. */
static int decode_strict(const char *src, size_t n, size_t from, uint8_t *dst, size_t *out_len,
                         char *err, size_t errlen);

int base64_decode(const char *src, size_t n, uint8_t *dst, size_t *out_len, char *err,
                  size_t errlen)
{
    if (n % 4 != 0 || n < 8) return decode_strict(src, n, 0, dst, out_len, err, errlen);
    const uint8_t *s = (const uint8_t *)src;
    uint8_t *d = dst;
    size_t body = n - 4; /* every quad but the last, which may hold padding */
    size_t i = 0;
#if defined(__x86_64__)
    if (have_avx2) i = decode_avx2(s, body, &d);
#endif
    for (; i < body; i += 4) {
        uint32_t v = dec_shift[0][s[i]] | dec_shift[1][s[i + 1]] | dec_shift[2][s[i + 2]] |
                     dec_shift[3][s[i + 3]];
        if (v & DEC_BAD) return decode_strict(src, n, i, dst, out_len, err, errlen);
        d[0] = (uint8_t)(v >> 16);
        d[1] = (uint8_t)(v >> 8);
        d[2] = (uint8_t)v;
        d += 3;
    }
    size_t tail;
    if (decode_strict(src + body, 4, 0, d, &tail, err, errlen) < 0)
        return decode_strict(src, n, body, dst, out_len, err, errlen);
    *out_len = (size_t)(d - dst) + tail;
    return 0;
}

static int decode_strict(const char *src, size_t n, size_t from, uint8_t *dst, size_t *out_len,
                         char *err, size_t errlen)
{
    const uint8_t *s = (const uint8_t *)src;
    /* Find where the symbols end: the first '=' starts the padding. */
    size_t sym = from;
    while (sym < n && dec_table[s[sym]] != 0xFF)
        sym++;
    if (sym < n && s[sym] != '=') {
        snprintf(err, errlen, "Invalid symbol %u, offset %zu.", s[sym], sym);
        return -EINVAL;
    }
    /* Like the reference decoder, data after the padding, or padding where no
     * padding can be (a quad's first or second symbol), is reported as the first
     * '=' being the invalid symbol. */
    for (size_t i = sym; i < n; i++) {
        if (s[i] != '=') {
            snprintf(err, errlen, "Invalid symbol %u, offset %zu.", (unsigned)'=', sym);
            return -EINVAL;
        }
    }
    size_t rem = sym % 4;
    if (sym < n && rem < 2) {
        snprintf(err, errlen, "Invalid symbol %u, offset %zu.", (unsigned)'=', sym);
        return -EINVAL;
    }
    if (rem == 1) {
        snprintf(err, errlen, "Invalid input length: %zu", n);
        return -EINVAL;
    }
    size_t pad = n - sym;
    if ((rem == 0 && pad != 0) || (rem != 0 && pad != 4 - rem)) {
        snprintf(err, errlen, "Invalid padding");
        return -EINVAL;
    }
    uint8_t *d = dst + from / 4 * 3;
    size_t i = from;
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
            return -EINVAL;
        }
        *d++ = (uint8_t)(v >> 16);
        if (rem == 3) *d++ = (uint8_t)(v >> 8);
    }
    *out_len = (size_t)(d - dst);
    return 0;
}

void base64_append(struct buf *b, const void *src, size_t n)
{
    buf_reserve(b, base64_encoded_len(n));
    b->len += base64_encode(src, n, b->data + b->len);
}
