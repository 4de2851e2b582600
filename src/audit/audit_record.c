/* audit_record: a record's fields as JSON text (see audit_record.h). */
#include "audit/audit_record.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proto/hex.h"
#include "proto/utf8.h"

/* The comma a new member needs: none right after an opening brace or bracket. */
static void comma(struct buf *b)
{
    if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') buf_putc(b, ',');
}

static void key(struct buf *b, const char *k)
{
    comma(b);
    if (!k) return;
    buf_putc(b, '"');
    buf_puts(b, k); /* keys are our own identifiers: nothing to escape */
    buf_puts(b, "\":");
}

/* Valid UTF-8 (n bytes) as JSON string content. */
static void escape_valid(struct buf *b, const unsigned char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_append(b, s + start, i - start);
        start = i + 1;
        switch (c) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex_lower[c >> 4], hex_lower[c & 15]};
            buf_append(b, u, 6);
        }
        }
    }
    buf_append(b, s + start, n - start);
}

/* The longest prefix of s (valid UTF-8 up to here or not) that ends at a character
 * boundary and is at most max bytes: a cut never splits a sequence. */
static size_t cut_at(const unsigned char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && (s[k] & 0xC0) == 0x80 && max - k < 3)
        k--;
    return k;
}

void audit_json_escape(struct buf *b, const void *s, size_t n, size_t max)
{
    const unsigned char *p = s;
    size_t take = cut_at(p, n, max);
    size_t i = 0;
    while (i < take) {
        size_t ok, bad;
        if (utf8_check(p + i, take - i, &ok, &bad)) {
            escape_valid(b, p + i, take - i);
            break;
        }
        escape_valid(b, p + i, ok);
        i += ok;
        if (bad == 0) bad = take - i; /* cut inside a sequence: the rest is bytes */
        for (size_t k = 0; k < bad; k++) {
            char x[4] = {'\\', 'x', hex_lower[p[i + k] >> 4], hex_lower[p[i + k] & 15]};
            /* A backslash in JSON text is itself escaped: \\xNN decodes to \xNN. */
            buf_puts(b, "\\\\");
            buf_append(b, x + 1, 3);
        }
        i += bad;
    }
    if (take < n) buf_puts(b, "...");
}

void audit_put_strn(struct buf *b, const char *k, const void *value, size_t n)
{
    key(b, k);
    buf_putc(b, '"');
    audit_json_escape(b, value, n, AUDIT_VALUE_MAX);
    buf_putc(b, '"');
}

void audit_put_str(struct buf *b, const char *k, const char *value)
{
    if (!value) {
        audit_put_null(b, k);
        return;
    }
    audit_put_strn(b, k, value, strlen(value));
}

void audit_put_u64(struct buf *b, const char *k, uint64_t v)
{
    key(b, k);
    buf_put_u64(b, v);
}

void audit_put_i64(struct buf *b, const char *k, int64_t v)
{
    key(b, k);
    buf_put_i64(b, v);
}

void audit_put_bool(struct buf *b, const char *k, bool v)
{
    key(b, k);
    buf_puts(b, v ? "true" : "false");
}

void audit_put_null(struct buf *b, const char *k)
{
    key(b, k);
    buf_puts(b, "null");
}

void audit_put_object(struct buf *b, const char *k)
{
    key(b, k);
    buf_putc(b, '{');
}

void audit_put_array(struct buf *b, const char *k)
{
    key(b, k);
    buf_putc(b, '[');
}

void audit_put_close(struct buf *b, char closer)
{
    buf_putc(b, closer);
}

void audit_put_item(struct buf *b, const char *value)
{
    audit_put_str(b, NULL, value);
}

void audit_put_strv(struct buf *b, const char *k, char *const *v)
{
    audit_put_array(b, k);
    for (size_t i = 0; v && v[i]; i++) {
        if (i == AUDIT_LIST_MAX) {
            audit_put_item(b, "...");
            break;
        }
        audit_put_item(b, v[i]);
    }
    audit_put_close(b, ']');
}

void audit_time_format(uint64_t unix_ns, char out[AUDIT_TIME_LEN])
{
    time_t secs = (time_t)(unix_ns / 1000000000u);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, AUDIT_TIME_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, AUDIT_TIME_LEN - n, ".%06uZ", (unsigned)(unix_ns % 1000000000u / 1000u));
}

void audit_record_begin(struct buf *b, uint64_t unix_ns, const char *type)
{
    char t[AUDIT_TIME_LEN];
    audit_time_format(unix_ns, t);
    buf_reset(b);
    buf_puts(b, "\"time\":\"");
    buf_puts(b, t);
    buf_puts(b, "\",\"type\":\"");
    buf_puts(b, type); /* our own names */
    buf_putc(b, '"');
}

void audit_record_end(struct buf *b)
{
    buf_putc(b, '}');
}
