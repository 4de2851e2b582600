/* utf8: see utf8.h. One decoder (utf8_seq) serves both the checker and the lossy
 * conversion, so they can never disagree on what is valid. */
#include "proto/utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if invalid;
 * *bad gets the length of the maximal invalid prefix to replace (>= 1). The
 * second-byte bounds exclude overlong forms (E0, F0), surrogates (ED) and values
 * above U+10FFFF (F4). */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    *bad = 1;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) return 0;
        unsigned char x = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (x < l || x > h) return 0;
        *bad = i + 1;
    }
    return need;
}

/* Past the ASCII run at p[i], eight bytes at a time (nearly all JSON is ASCII): the
 * index of the first eight-byte word with a byte >= 0x80, or of the tail shorter than
 * eight, which the callers then take a byte at a time. */
static size_t ascii_run_end(const unsigned char *p, size_t i, size_t n)
{
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
    }
    return i;
}

bool utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < n) {
        i = ascii_run_end(p, i, n);
        if (i >= n) break;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t bad;
        size_t k = utf8_seq(p + i, n - i, &bad);
        if (!k) return false;
        i += k;
    }
    return true;
}

bool utf8_check(const void *s, size_t n, size_t *valid_up_to, size_t *error_len)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < n;) {
        i = ascii_run_end(p, i, n); /* a terminal's output, which recordings decode, too */
        if (i >= n) break;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t bad;
        size_t k = utf8_seq(p + i, n - i, &bad);
        if (k) {
            i += k;
            continue;
        }
        *valid_up_to = i;
        /* A good lead whose valid continuation runs into the end may yet complete. */
        bool lead = p[i] >= 0xC2 && p[i] <= 0xF4;
        *error_len = lead && i + bad == n ? 0 : bad;
        return false;
    }
    return true;
}

/* Unicode White_Space. */
static bool white_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

bool utf8_all_white_space(const void *s, size_t n)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < n;) {
        size_t bad;
        size_t k = utf8_seq(p + i, n - i, &bad);
        if (!k) return false;
        static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
        uint32_t cp = p[i] & lead_mask[k];
        for (size_t j = 1; j < k; j++)
            cp = cp << 6 | (p[i + j] & 0x3f);
        if (!white_space(cp)) return false;
        i += k;
    }
    return true;
}

void utf8_lossy(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t bad;
        size_t k = utf8_seq(p + i, n - i, &bad);
        if (k) {
            buf_append(b, p + i, k);
            i += k;
        } else {
            buf_append(b, "\xEF\xBF\xBD", 3);
            i += bad;
        }
    }
}
