/* hex: hexadecimal digits in and out (see hex.h). */
#include "proto/hex.h"

#include <errno.h>

const char hex_lower[17] = "0123456789abcdef";
const char hex_upper[17] = "0123456789ABCDEF";

int hex_value(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int hex_decode(const char *s, size_t n, uint8_t *out)
{
    if (n % 2) return -EINVAL;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_value((unsigned char)s[i]), lo = hex_value((unsigned char)s[i + 1]);
        if (hi < 0 || lo < 0) return -EINVAL;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

void hex_encode(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_lower[p[i] >> 4];
        out[2 * i + 1] = hex_lower[p[i] & 15];
    }
    out[2 * n] = '\0';
}

bool hex_is_lower(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hex_value((unsigned char)s[i]) < 0 || (s[i] >= 'A' && s[i] <= 'F')) return false;
    return true;
}
