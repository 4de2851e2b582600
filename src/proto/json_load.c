/* json_load: json_loadb with large printable string values spliced in by memcpy
 * (see json_load.h). */
#include "proto/json_load.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "crypto/random.h"
#include "util/buf.h"
#include "util/mem.h"

const char *json_load_string_end(const char *p, const char *e)
{
    p++;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (!q) return NULL;
        size_t bs = 0;
        for (const char *b = q; b > p && b[-1] == '\\'; b--)
            bs++;
        if (bs % 2 == 0) return q + 1;
        p = q + 1;
    }
}

/* A plain string is printable ASCII without a backslash: its JSON text is its
 * value as is. plain_stop finds the first byte at or after p that ends or spoils
 * one: the closing '"', a backslash, a control byte, DEL or a non-ASCII byte (e
 * when there is none). One pass finds both where a string ends and whether it is
 * plain: 32 bytes per step with AVX2, else 8 with the classic "has a byte less
 * than / equal to" word tricks (no false negatives; a hit is confirmed byte by
 * byte), so a 40 MB base64 value is scanned once at memory speed. */
#if defined(__x86_64__)
static int have_avx2 = -1;

__attribute__((constructor)) static void json_load_init(void)
{
    have_avx2 = __builtin_cpu_supports("avx2");
}

__attribute__((target("avx2"))) static const char *plain_stop_avx2(const char *p, const char *e)
{
    const __m256i quote = _mm256_set1_epi8('"'), bslash = _mm256_set1_epi8('\\'),
                  space = _mm256_set1_epi8(0x20), del = _mm256_set1_epi8(0x7f);
    while (e - p >= 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)p);
        /* Signed compare: bytes >= 0x80 are negative, so "< 0x20" catches them too. */
        __m256i bad = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, bslash)),
            _mm256_or_si256(_mm256_cmpgt_epi8(space, v), _mm256_cmpeq_epi8(v, del)));
        unsigned m = (unsigned)_mm256_movemask_epi8(bad);
        if (m) return p + __builtin_ctz(m);
        p += 32;
    }
    return p;
}
#endif

static bool stops_plain(unsigned char c)
{
    return c == '"' || c == '\\' || c < 0x20 || c > 0x7e;
}

static const char *plain_stop(const char *p, const char *e)
{
#if defined(__x86_64__)
    if (have_avx2 > 0) {
        p = plain_stop_avx2(p, e);
        if (e - p >= 32) return p; /* stopped on a byte */
    }
#endif
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (e - p >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        uint64_t bs = v ^ (ones * '\\'), qs = v ^ (ones * '"');
        uint64_t bad = ((v - ones * 0x20) & ~v)          /* a byte < 0x20 */
                       | ((v + ones * (127 - 0x7e)) | v) /* a byte > 0x7e */
                       | ((bs - ones) & ~bs)             /* a backslash */
                       | ((qs - ones) & ~qs);            /* a quote */
        if (bad & highs)
            for (int i = 0; i < 8; i++)
                if (stops_plain((unsigned char)p[i])) return p + i;
        p += 8;
    }
    for (; p < e; p++)
        if (stops_plain((unsigned char)*p)) return p;
    return e;
}

/* A placeholder no client can guess: \u0001 + a per-process random tag + index. */
static char tag[24];

static pthread_once_t tag_once = PTHREAD_ONCE_INIT;

static void draw_tag(void)
{
    uint64_t r;
    crypto_random_bytes(&r, sizeof r);
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

static int splice(json_t *v, const struct json_load_bigs *bigs, const json_t *keep, int depth);

/* One member x of a container: the value to put in its place when it is a
 * placeholder (not keep), else NULL after splicing inside it; *found counts the
 * placeholders met. */
static json_t *splice_member(json_t *x, const struct json_load_bigs *bigs, const json_t *keep,
                             int depth, int *found)
{
    int i = json_load_big_index(x, bigs);
    if (i >= 0) {
        (*found)++;
        return x != keep ? json_stringn_nocheck(bigs->v[i].p, bigs->v[i].n) : NULL;
    }
    if (json_is_object(x) || json_is_array(x)) *found += splice(x, bigs, keep, depth + 1);
    return NULL;
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
        json_object_foreach(v, k, x)
        {
            json_t *n = splice_member(x, bigs, keep, depth, &found);
            if (n) json_object_set_new(v, k, n);
        }
    } else if (json_is_array(v)) {
        for (size_t j = 0; j < json_array_size(v); j++) {
            json_t *n = splice_member(json_array_get(v, j), bigs, keep, depth, &found);
            if (n) json_array_set_new(v, j, n);
        }
    }
    return found;
}

bool json_load_splice(json_t *root, const struct json_load_bigs *bigs, const json_t *keep)
{
    if (bigs->n == 0) return true;
    return splice(root, bigs, keep, 0) == bigs->n;
}

json_t *json_load_nul_keys(const char *data, size_t len, size_t flags, json_error_t *err)
{
    struct buf copy;
    buf_init(&copy);
    const char *p = data, *e = data + len, *from = data;
    while (p < e) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        const char *end = q ? json_load_string_end(q, e) : NULL;
        if (!end) break;
        const char *a = end;
        while (a < e && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
            a++;
        if (a < e && *a == ':') {
            /* A key: each escape is a backslash and what follows it, so an escaped
             * backslash before "u0000" is skipped whole, not read as a NUL. */
            for (const char *s = q + 1; s + 6 < end; s++) {
                if (*s != '\\') continue;
                if (memcmp(s, "\\u0000", 6) == 0) {
                    buf_append(&copy, from, (size_t)(s - from));
                    buf_puts(&copy, "\\u0001");
                    from = s + 6;
                    s += 5;
                } else {
                    s++;
                }
            }
        }
        p = end;
    }
    buf_append(&copy, from, (size_t)(e - from));
    json_t *msg = json_loadb(copy.data, copy.len, flags, err);
    buf_free(&copy);
    return msg;
}

/* ---- integers past int64 -------------------------------------------------------- */

#define MAX_BIG_INTS 1024 /* per message; more and the message stays malformed */

/* The reals made from literals in [2^63, 2^64) and their exact values. Each entry
 * holds a reference, so the pointer cannot be reused by another value while it is
 * listed; an entry whose only reference is ours (its message is gone) is dropped at
 * the next rescue. Locked: messages may be loaded on more than one thread. */
struct big_int {
    json_t *v;
    uint64_t u;
};
static pthread_mutex_t big_int_mu = PTHREAD_MUTEX_INITIALIZER;
static struct big_int *big_ints;
static size_t nbig_ints, capbig_ints;

/* Caller holds big_int_mu. */
static void big_ints_sweep(void)
{
    size_t k = 0;
    for (size_t i = 0; i < nbig_ints; i++) {
        if (big_ints[i].v->refcount <= 1)
            json_decref(big_ints[i].v);
        else
            big_ints[k++] = big_ints[i];
    }
    nbig_ints = k;
}

bool json_load_u64(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) return false;
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    if (!json_is_real(v) || json_real_value(v) < 9223372036854775808.0) return false;
    bool found = false;
    pthread_mutex_lock(&big_int_mu);
    for (size_t i = 0; i < nbig_ints && !found; i++) {
        if (big_ints[i].v == v) {
            *out = big_ints[i].u;
            found = true;
        }
    }
    pthread_mutex_unlock(&big_int_mu);
    return found;
}

/* One integer literal jansson refused: the real it becomes, and its exact value
 * when it is a u64. */
struct num_lit {
    double d;
    uint64_t u;
    bool is_u64;
};

/* Whether p[0..n) is a JSON integer literal (-?(0|[1-9][0-9]*)). */
static bool int_literal(const char *p, size_t n)
{
    size_t i = p[0] == '-';
    if (i >= n) return false;
    if (p[i] == '0') return n == i + 1;
    for (; i < n; i++)
        if (p[i] < '0' || p[i] > '9') return false;
    return true;
}

/* The value a placeholder string "\u0001<tag>n<index>" stands for (a new real,
 * registered when it is a u64), or NULL when x is not one. */
static json_t *placeholder_number(const json_t *x, const struct num_lit *lits, size_t nlits)
{
    const char *s = json_string_value(x);
    if (!s || s[0] != '\1' || strncmp(s + 1, tag, 16) != 0 || s[17] != 'n') return NULL;
    size_t i = strtoul(s + 18, NULL, 10);
    if (i >= nlits) return NULL;
    json_t *r = json_real(lits[i].d);
    if (r && lits[i].is_u64) {
        pthread_mutex_lock(&big_int_mu);
        if (nbig_ints == capbig_ints) {
            capbig_ints = capbig_ints ? 2 * capbig_ints : 16;
            big_ints = xrealloc(big_ints, capbig_ints * sizeof *big_ints);
        }
        big_ints[nbig_ints++] = (struct big_int){json_incref(r), lits[i].u};
        pthread_mutex_unlock(&big_int_mu);
    }
    return r;
}

/* Replaces the placeholders under v by their numbers. Returns how many. */
static size_t splice_numbers(json_t *v, const struct num_lit *lits, size_t nlits, int depth)
{
    if (depth > 4096) return 0;
    size_t found = 0;
    const char *k;
    json_t *x, *r;
    size_t j;
    if (json_is_object(v)) {
        json_object_foreach(v, k, x)
        {
            if ((r = placeholder_number(x, lits, nlits))) {
                json_object_set_new(v, k, r);
                found++;
            } else {
                found += splice_numbers(x, lits, nlits, depth + 1);
            }
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, j, x)
        {
            if ((r = placeholder_number(x, lits, nlits))) {
                json_array_set_new(v, j, r);
                found++;
            } else {
                found += splice_numbers(x, lits, nlits, depth + 1);
            }
        }
    }
    return found;
}

/* jansson refused an integer literal outside int64: parse again with each such
 * literal as a real (see json_load.h). NULL when the message has another problem
 * too, or a literal that is no finite double: the caller keeps jansson's error. */
static json_t *load_big_ints(const char *data, size_t len, size_t flags)
{
    struct num_lit *lits = NULL;
    size_t nlits = 0;
    struct buf copy;
    buf_init(&copy);
    json_t *msg = NULL;
    const char *p = data, *e = data + len, *from = data;
    pthread_once(&tag_once, draw_tag);
    while (p < e) {
        if (*p == '"') {
            p = json_load_string_end(p, e);
            if (!p) goto out;
            continue;
        }
        if (*p != '-' && (*p < '0' || *p > '9')) {
            p++;
            continue;
        }
        const char *q = p;
        while (q < e && (*q == '-' || *q == '+' || *q == '.' || *q == 'e' || *q == 'E' ||
                         (*q >= '0' && *q <= '9')))
            q++;
        size_t n = (size_t)(q - p);
        char num[400];
        if (int_literal(p, n)) {
            if (n >= sizeof num) goto out; /* hundreds of digits: past any double */
            memcpy(num, p, n);
            num[n] = '\0';
            errno = 0;
            (void)strtoll(num, NULL, 10);
            if (errno == ERANGE) {
                struct num_lit l = {.d = strtod(num, NULL)};
                if (!isfinite(l.d) || nlits == MAX_BIG_INTS) goto out;
                if (num[0] != '-') {
                    errno = 0;
                    l.u = strtoull(num, NULL, 10);
                    l.is_u64 = errno != ERANGE;
                }
                if (nlits % 16 == 0) lits = xrealloc(lits, (nlits + 16) * sizeof *lits);
                buf_append(&copy, from, (size_t)(p - from));
                buf_printf(&copy, "\"\\u0001%sn%zu\"", tag, nlits);
                lits[nlits++] = l;
                from = q;
            }
        }
        p = q;
    }
    if (nlits == 0) goto out;
    buf_append(&copy, from, (size_t)(e - from));
    json_error_t e2;
    msg = json_loadb(copy.data, copy.len, flags, &e2);
    pthread_mutex_lock(&big_int_mu);
    big_ints_sweep();
    pthread_mutex_unlock(&big_int_mu);
    if (msg && splice_numbers(msg, lits, nlits, 0) != nlits) {
        json_decref(msg);
        msg = NULL;
    }
out:
    free(lits);
    buf_free(&copy);
    return msg;
}

/* json_loadb; jansson's words for an integer outside int64 ("too big integer", "too
 * big negative integer") get the literals read as serde_json would before giving up. */
static json_t *load_plain(const char *data, size_t len, size_t flags, json_error_t *err)
{
    json_t *msg = json_loadb(data, len, flags, err);
    if (!msg && strncmp(err->text, "too big ", 8) == 0) msg = load_big_ints(data, len, flags);
    return msg;
}

/* ---- the reference's limit on values per message --------------------------------- */

/* Counts the values that start in [p, stop), a stretch without strings (the caller
 * stops it at the next quote): '{', '[', numbers and literals. Returns where the
 * value past max starts, or NULL. Malformed text is counted loosely; jansson
 * rejects it anyway. */
static const char *count_bare_values(const char *p, const char *stop, size_t *count, size_t max)
{
    while (p < stop) {
        unsigned char c = (unsigned char)*p;
        if (c == '{' || c == '[') {
            if (++*count > max) return p;
            p++;
        } else if (c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
            if (++*count > max) return p;
            while (p < stop && (*p == '-' || *p == '+' || *p == '.' || (*p >= '0' && *p <= '9') ||
                                (*p >= 'a' && *p <= 'z') || *p == 'E'))
                p++;
        } else {
            p++;
        }
    }
    return NULL;
}

/* The over-limit error, placed as serde_json places it: at the last byte read
 * before the value that did not fit (its column, 1-based, counted in bytes). */
static void values_error(const char *data, const char *at, size_t max, json_error_t *err)
{
    int line = 1;
    const char *line_start = data;
    for (const char *p = data; (p = memchr(p, '\n', (size_t)(at - p))); p++) {
        line++;
        line_start = p + 1;
    }
    memset(err, 0, sizeof *err);
    snprintf(err->text, sizeof err->text - 1,
             "JSON-RPC message exceeds the limit of %zu JSON values", max);
    err->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_invalid_syntax;
    snprintf(err->source, sizeof err->source, "<buffer>");
    err->line = line;
    err->column = (int)(at - line_start);
    err->position = (int)(at - data);
}

json_t *json_load_message_split(const char *data, size_t len, size_t flags, json_error_t *err,
                                struct json_load_bigs *bigs, size_t max_values)
{
    bigs->n = 0;
    /* Every value takes a byte at least: a shorter message cannot pass the limit. */
    if (len <= max_values) max_values = 0;
    if (len < JSON_LOAD_BIG_STRING && !max_values) return load_plain(data, len, flags, err);
    const char *p = data, *e = data + len, *over = NULL;
    size_t nvalues = 0;
    bool too_many_bigs = false;
    while (p < e) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (max_values && (over = count_bare_values(p, q ? q : e, &nvalues, max_values))) break;
        if (!q) break;
        const char *stop = plain_stop(q + 1, e), *end;
        bool is_plain = stop < e && *stop == '"';
        if (is_plain) end = stop + 1;
        /* Not plain: find its end the escape-aware way, from where plain text
         * stopped (no backslash comes before that). */
        else if (!(end = json_load_string_end(stop - 1, e)))
            break;
        size_t n = (size_t)(end - q) - 2;
        /* Only values: a key is followed by ':'. */
        const char *a = end;
        while (a < e && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
            a++;
        bool is_value = a >= e || *a != ':';
        if (max_values && is_value && ++nvalues > max_values) {
            over = q;
            break;
        }
        if (n >= JSON_LOAD_BIG_STRING && is_value && is_plain && !too_many_bigs) {
            if (bigs->n == JSON_LOAD_MAX_BIG) {
                too_many_bigs = true;
                bigs->n = 0;
            } else {
                bigs->v[bigs->n].p = q + 1;
                bigs->v[bigs->n++].n = n;
            }
        }
        p = end;
    }
    if (over) {
        bigs->n = 0;
        values_error(data, over, max_values, err);
        return NULL;
    }
    if (bigs->n == 0) return load_plain(data, len, flags, err);

    pthread_once(&tag_once, draw_tag);
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
        return load_plain(data, len, flags, err);
    }
    return msg;
}

json_t *json_load_message(const char *data, size_t len, size_t flags, json_error_t *err)
{
    struct json_load_bigs bigs;
    json_t *msg = json_load_message_split(data, len, flags, err, &bigs, 0);
    if (msg && !json_load_splice(msg, &bigs, NULL)) {
        json_decref(msg);
        return load_plain(data, len, flags, err);
    }
    return msg;
}
