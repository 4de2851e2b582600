/* audit_cast: asciicast v2 lines (see audit_cast.h).
 *
 * The event encoder is on the recording's hot path (every chunk a terminal prints),
 * so valid text is escaped eight bytes at a time: a word with no byte below 0x20, no
 * quote and no backslash is copied as it is. */
#include "audit/audit_cast.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit_record.h"
#include "proto/hex.h"
#include "proto/utf8.h"

void audit_cast_put_header(struct buf *out, unsigned width, unsigned height, uint64_t unix_s,
                           const char *command)
{
    buf_printf(out, "{\"version\":2,\"width\":%u,\"height\":%u,\"timestamp\":%llu", width, height,
               (unsigned long long)unix_s);
    if (command) {
        buf_puts(out, ",\"command\":\"");
        audit_json_escape(out, command, strlen(command), AUDIT_VALUE_MAX);
        buf_putc(out, '"');
    }
    buf_puts(out, "}\n");
}

static void put_time(struct buf *out, uint64_t t_us)
{
    char t[32];
    int n = snprintf(t, sizeof t, "[%llu.%06u,\"", (unsigned long long)(t_us / 1000000u),
                     (unsigned)(t_us % 1000000u));
    buf_append(out, t, (size_t)n);
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether any byte of w is below 0x20, a quote or a backslash (bytes from 0x80 up
 * never are: they are part of valid UTF-8 here). */
static uint64_t needs_escape(uint64_t w)
{
    uint64_t q = w ^ (ONES * '"'), s = w ^ (ONES * '\\');
    return ((w - ONES * 0x20) | (q - ONES) | (s - ONES)) & ~w & HIGHS;
}

/* The escape of one byte that needs one (below 0x20, a quote, a backslash), written
 * as eight bytes at d (the buffer has room) of which the first esc_len[c] count. */
static const char esc_text[][8] = {
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006",
    "\\u0007", "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",
    "\\u000e", "\\u000f", "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014",
    "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019", "\\u001a", "\\u001b",
    "\\u001c", "\\u001d", "\\u001e", "\\u001f", "\\\"",    "\\\\",
};

static char *put_escape(char *d, unsigned char c)
{
    const char *e = esc_text[c < 0x20 ? c : c == '"' ? 32 : 33];
    memcpy(d, e, 8);
    return d + (e[1] == 'u' ? 6 : 2);
}

/* One byte of text at d: as it is, escaped, or (a NUL, with shown) left out; returns
 * where the next goes. */
static char *put_byte(char *d, unsigned char c, bool shown)
{
    if (c >= 0x20 && c != '"' && c != '\\') {
        *d = (char)c;
        return d + 1;
    }
    return c || !shown ? put_escape(d, c) : d;
}

/* Valid UTF-8 as JSON string content; writes at most 6n + 8 bytes at dst, returns
 * how many count. A word with nothing to escape is copied whole; one with something
 * is copied up to its first such byte (the lowest flagged byte of the mask is exact)
 * and the rest of it goes byte by byte. With ascii, s is not known to be UTF-8 yet:
 * the escaping stops before its first byte from 0x80 up (*used says where), so that
 * ASCII, most of what a terminal shows, is checked and escaped in one pass. With
 * shown (a terminal's output), NULs are left out (audit_cast.h). */
static size_t escape_text(char *dst, const unsigned char *s, size_t n, bool ascii, bool shown,
                          size_t *used)
{
    char *d = dst;
    size_t i = 0;
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (ascii && (w & HIGHS)) break;
        memcpy(d, &w, 8);
        uint64_t m = needs_escape(w);
        if (!m) {
            d += 8;
            i += 8;
            continue;
        }
        if (!w && shown) { /* eight NULs (binary output: dumps, zeroed blocks) */
            i += 8;
            continue;
        }
        size_t k = (size_t)__builtin_ctzll(m) / 8;
        d += k;
        for (i += k; k < 8; k++, i++)
            d = put_byte(d, s[i], shown);
    }
    for (; i < n && !(ascii && s[i] >= 0x80); i++)
        d = put_byte(d, s[i], shown);
    *used = i;
    return (size_t)(d - dst);
}

static void put_escaped(struct buf *out, const unsigned char *s, size_t n, bool shown)
{
    size_t used;
    buf_reserve(out, 6 * n + 8);
    out->len += escape_text(out->data + out->len, s, n, false, shown, &used);
}

/* Valid UTF-8 into out: as it is (input, the replacement, a carried sequence), or as a
 * terminal's output, without its NULs (the callbacks of audit_utf8_walk). */
static void put_text(struct buf *out, const unsigned char *s, size_t n)
{
    put_escaped(out, s, n, false);
}

static void put_shown(struct buf *out, const unsigned char *s, size_t n)
{
    put_escaped(out, s, n, true);
}

static const unsigned char replacement[3] = {0xEF, 0xBF, 0xBD}; /* U+FFFD */

/* One U+FFFD for a maximal invalid subpart, as asciinema's decoder replaces it. */
static void put_replacement(struct buf *out, const unsigned char *s, size_t n)
{
    put_text(out, replacement, sizeof replacement);
}

/* Decodes s (n bytes) lossily into out; an unfinished sequence at the end goes to
 * e's carry, to be finished by the next call. shown: output, without its NULs. */
static void put_decoded(struct audit_cast_enc *e, struct buf *out, const unsigned char *s, size_t n,
                        bool shown)
{
    size_t ascii; /* the ASCII start, checked and escaped in one pass */
    buf_reserve(out, 6 * n + 8);
    out->len += escape_text(out->data + out->len, s, n, true, shown, &ascii);
    s += ascii;
    n -= ascii;
    size_t used = audit_utf8_walk(out, s, n, shown ? put_shown : put_text, put_replacement, true);
    memcpy(e->carry, s + used, n - used);
    e->ncarry = (uint8_t)(n - used);
}

/* The length of the sequence lead byte c starts (it began a carry, so it is a lead). */
static size_t seq_len(unsigned char c)
{
    return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
}

/* Finishes the sequence carried from the last call with the first bytes of s:
 * writes it (or U+FFFD for it) and returns how many bytes of s it took; keeps it
 * carried, taking all of s, when s is too short to tell. */
static size_t put_carried(struct audit_cast_enc *e, struct buf *out, const unsigned char *s,
                          size_t n)
{
    unsigned char join[8];
    size_t c = e->ncarry, take = n < 4 ? n : 4;
    memcpy(join, e->carry, c);
    memcpy(join + c, s, take);
    size_t ok, bad;
    if (utf8_check(join, c + take, &ok, &bad) || ok > 0) {
        /* The carried character is complete: a carry is a valid start, so the valid
         * prefix begins with it. */
        size_t len = seq_len(join[0]);
        put_text(out, join, len);
        e->ncarry = 0;
        return len - c;
    }
    if (bad == 0) { /* still unfinished: s was one or two bytes */
        memcpy(e->carry, join, c + take);
        e->ncarry = (uint8_t)(c + take);
        return n;
    }
    /* An invalid sequence: one U+FFFD for its maximal subpart, which holds the whole
     * carry (a carry is a valid prefix) and perhaps bytes of s. */
    put_text(out, replacement, sizeof replacement);
    e->ncarry = 0;
    return bad > c ? bad - c : 0;
}

void audit_cast_put_event(struct audit_cast_enc *e, struct buf *out, uint64_t t_us, char kind,
                          const void *data, size_t n)
{
    const unsigned char *s = data;
    size_t start = out->len;
    put_time(out, t_us);
    buf_putc(out, kind);
    buf_puts(out, "\",\"");
    size_t text = out->len;
    size_t used = e->ncarry ? put_carried(e, out, s, n) : 0;
    if (used < n) put_decoded(e, out, s + used, n - used, kind == 'o');
    if (out->len == text) { /* nothing to show yet */
        out->len = start;
        return;
    }
    buf_puts(out, "\"]\n");
}

void audit_cast_put_resize(struct buf *out, uint64_t t_us, unsigned cols, unsigned rows)
{
    put_time(out, t_us);
    buf_printf(out, "r\",\"%ux%u\"]\n", cols, rows);
}

void audit_cast_put_finish(struct audit_cast_enc *e, struct buf *out, uint64_t t_us, char kind)
{
    if (!e->ncarry) return;
    e->ncarry = 0;
    put_time(out, t_us);
    buf_putc(out, kind);
    buf_puts(out, "\",\"");
    put_text(out, replacement, sizeof replacement);
    buf_puts(out, "\"]\n");
}
