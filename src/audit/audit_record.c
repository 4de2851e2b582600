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

size_t audit_utf8_walk(struct buf *b, const unsigned char *s, size_t n,
                       void (*valid)(struct buf *, const unsigned char *, size_t),
                       void (*invalid)(struct buf *, const unsigned char *, size_t),
                       bool keep_unfinished)
{
    size_t i = 0;
    while (i < n) {
        size_t ok, bad;
        if (utf8_check(s + i, n - i, &ok, &bad)) {
            valid(b, s + i, n - i);
            return n;
        }
        valid(b, s + i, ok);
        i += ok;
        if (bad == 0) { /* s ends inside a sequence that may yet be completed */
            if (keep_unfinished) return i;
            bad = n - i;
        }
        invalid(b, s + i, bad);
        i += bad;
    }
    return n;
}

static void escape_valid(struct buf *b, const unsigned char *s, size_t n)
{
    buf_put_json_chars(b, (const char *)s, n);
}

/* Bytes that are not UTF-8 as \xNN; the backslash is itself escaped in JSON text, so
 * the string decodes to \xNN. */
static void escape_bytes(struct buf *b, const unsigned char *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char x[5] = {'\\', '\\', 'x', hex_lower[s[k] >> 4], hex_lower[s[k] & 15]};
        buf_append(b, x, 5);
    }
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
    audit_utf8_walk(b, p, take, escape_valid, escape_bytes, false);
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
    /* The date and time of day change once a second: formatted again only then (per
     * thread: the loop's records and the writer's own). */
    static _Thread_local time_t last = -1;
    static _Thread_local char date[20];
    time_t secs = (time_t)(unix_ns / 1000000000u);
    if (secs != last) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
        last = secs;
    }
    memcpy(out, date, 19);
    unsigned us = (unsigned)(unix_ns % 1000000000u / 1000u);
    out[19] = '.';
    for (int i = 25; i >= 20; i--, us /= 10)
        out[i] = (char)('0' + us % 10);
    out[26] = 'Z';
    out[27] = '\0';
}

uint64_t audit_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
