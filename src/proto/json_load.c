/* json_load: json_loadb with large printable string values spliced in by memcpy
 * (see json_load.h). */
#include "proto/json_load.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "util/buf.h"

const char *json_load_string_end(const char *p, const char *e)
{
    p++;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (!q) return NULL;
        size_t bs = 0;
        for (const char *b = q; b > p && b[-1] == '\\'; b--) bs++;
        if (bs % 2 == 0) return q + 1;
        p = q + 1;
    }
}

/* Printable ASCII, no backslash: the JSON text is the string's value as is.
 * Eight bytes per step with the classic "has a byte less than / more than / equal
 * to" word tricks (exact as yes/no answers), so the scan runs near memory speed. */
static bool plain(const char *p, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t bad = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        uint64_t bs = v ^ (ones * '\\');
        bad |= ((v - ones * 0x20) & ~v)                /* a byte < 0x20 */
               | ((v + ones * (127 - 0x7e)) | v)       /* a byte > 0x7e */
               | ((bs - ones) & ~bs);                  /* a backslash */
    }
    if (bad & highs) return false;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c > 0x7e || c == '\\') return false;
    }
    return true;
}

/* A placeholder no client can guess: \u0001 + a per-process random tag + index. */
static char tag[24];

static void make_tag(void)
{
    if (tag[0]) return;
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint64_t)(uintptr_t)&r ^ 0x9E3779B97F4A7C15ull;
    snprintf(tag, sizeof tag, "%016llx", (unsigned long long)r);
}

int json_load_big_index(const json_t *v, const struct json_load_bigs *bigs)
{
    if (!bigs || bigs->n == 0 || !json_is_string(v) || json_string_length(v) != 18) return -1;
    const char *s = json_string_value(v);
    if (s[0] != '\1' || memcmp(s + 1, tag, 16) != 0) return -1;
    int i = s[17] - 'a';
    return i >= 0 && i < bigs->n ? i : -1;
}

/* Replaces placeholder strings under v (but keep) by their big values. Returns
 * how many placeholders it met, keep included. */
static int splice(json_t *v, const struct json_load_bigs *bigs, const json_t *keep, int depth)
{
    if (depth > 64) return 0;
    int found = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            int i = json_load_big_index(x, bigs);
            if (i >= 0) {
                found++;
                if (x != keep)
                    json_object_set_new(v, k, json_stringn_nocheck(bigs->v[i].p, bigs->v[i].n));
            } else if (json_is_object(x) || json_is_array(x)) {
                found += splice(x, bigs, keep, depth + 1);
            }
        }
    } else if (json_is_array(v)) {
        for (size_t j = 0; j < json_array_size(v); j++) {
            json_t *x = json_array_get(v, j);
            int i = json_load_big_index(x, bigs);
            if (i >= 0) {
                found++;
                if (x != keep)
                    json_array_set_new(v, j, json_stringn_nocheck(bigs->v[i].p, bigs->v[i].n));
            } else if (json_is_object(x) || json_is_array(x)) {
                found += splice(x, bigs, keep, depth + 1);
            }
        }
    }
    return found;
}

bool json_load_splice(json_t *root, const struct json_load_bigs *bigs, const json_t *keep)
{
    if (bigs->n == 0) return true;
    return splice(root, bigs, keep, 0) == bigs->n;
}

json_t *json_load_message_split(const char *data, size_t len, size_t flags, json_error_t *err,
                                struct json_load_bigs *bigs)
{
    bigs->n = 0;
    if (len < JSON_LOAD_BIG_STRING) return json_loadb(data, len, flags, err);
    const char *p = data, *e = data + len;
    while (p < e) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (!q) break;
        const char *end = json_load_string_end(q, e);
        if (!end) break;
        size_t n = (size_t)(end - q) - 2;
        if (n >= JSON_LOAD_BIG_STRING) {
            /* Only values: a key is followed by ':'. */
            const char *a = end;
            while (a < e && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r')) a++;
            if ((a >= e || *a != ':') && plain(q + 1, n)) {
                if (bigs->n == JSON_LOAD_MAX_BIG) {
                    bigs->n = 0;
                    return json_loadb(data, len, flags, err);
                }
                bigs->v[bigs->n].p = q + 1;
                bigs->v[bigs->n++].n = n;
            }
        }
        p = end;
    }
    if (bigs->n == 0) return json_loadb(data, len, flags, err);

    make_tag();
    struct buf copy;
    buf_init(&copy);
    const char *from = data;
    for (int i = 0; i < bigs->n; i++) {
        buf_append(&copy, from, (size_t)(bigs->v[i].p - from)); /* up to and with the quote */
        buf_puts(&copy, "\\u0001");
        buf_puts(&copy, tag);
        buf_putc(&copy, (char)('a' + i));
        from = bigs->v[i].p + bigs->v[i].n; /* the closing quote comes next */
    }
    buf_append(&copy, from, (size_t)(e - from));
    json_t *msg = json_loadb(copy.data, copy.len, flags, err);
    buf_free(&copy);
    if (!msg) {
        /* The error text must be json_loadb's on the bytes as sent. */
        bigs->n = 0;
        return json_loadb(data, len, flags, err);
    }
    return msg;
}

json_t *json_load_message(const char *data, size_t len, size_t flags, json_error_t *err)
{
    struct json_load_bigs bigs;
    json_t *msg = json_load_message_split(data, len, flags, err, &bigs);
    if (msg && !json_load_splice(msg, &bigs, NULL)) {
        json_decref(msg);
        return json_loadb(data, len, flags, err);
    }
    return msg;
}
