/* buf: growable byte buffer and hand-written JSON text (see buf.h). */
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/bigbuf.h"
#include "util/mem.h"

void buf_init(struct buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->big = false;
}

void buf_init_msg(struct buf *b)
{
    buf_init(b);
    buf_extend(b, BUF_MSG_HEADROOM);
}

void buf_free(struct buf *b)
{
    if (b->big)
        bigbuf_free(b->data);
    else
        free(b->data);
    buf_init(b);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
}

void buf_reserve(struct buf *b, size_t n)
{
    if (b->cap - b->len >= n) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    if (b->big)
        b->data = bigbuf_grow(b->data, cap, &b->cap);
    else
        b->data = xrealloc(b->data, cap), b->cap = cap;
}

void buf_reserve_big(struct buf *b, size_t n)
{
    if (b->big || b->len + n < BIGBUF_MIN) {
        buf_reserve(b, n);
        return;
    }
    size_t cap;
    char *d = bigbuf_alloc(b->len + n, &cap);
    if (b->len) memcpy(d, b->data, b->len);
    free(b->data);
    b->data = d;
    b->cap = cap;
    b->big = true;
}

char *buf_extend(struct buf *b, size_t n)
{
    buf_reserve(b, n);
    char *p = b->data + b->len;
    b->len += n;
    return p;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
    if (n) memcpy(buf_extend(b, n), p, n);
}

void buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_putc(struct buf *b, char c)
{
    *buf_extend(b, 1) = c;
}

void buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n <= 0) return;
    buf_reserve(b, (size_t)n + 1);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_put_u64(struct buf *b, uint64_t v)
{
    char tmp[24];
    int i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_append(b, tmp + i, sizeof tmp - (size_t)i);
}

void buf_put_i64(struct buf *b, int64_t v)
{
    if (v < 0) {
        buf_putc(b, '-');
        buf_put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        buf_put_u64(b, (uint64_t)v);
    }
}

void buf_put_json_str(struct buf *b, const char *s, size_t n)
{
    buf_reserve(b, n + 2);
    buf_putc(b, '"');
    buf_put_json_chars(b, s, n);
    buf_putc(b, '"');
}

void buf_put_json_chars(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_append(b, s + start, i - start);
        start = i + 1;
        switch (c) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        case '\b': buf_puts(b, "\\b"); break;
        case '\f': buf_puts(b, "\\f"); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_append(b, u, 6);
        }
        }
    }
    buf_append(b, s + start, n - start);
}

char *buf_steal(struct buf *b) /* see buf.h: bigbuf_free_any frees either kind */
{
    char *p = b->data;
    buf_init(b);
    return p;
}
