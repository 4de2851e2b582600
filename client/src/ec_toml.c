/* ec_toml: the strict TOML reader of environments.toml (see ec_toml.h for why it
 * exists and what it accepts).
 *
 * One pass over the text with a cursor. The table rules follow the model of CPython's
 * tomllib (itself checked against the toml-test suite): two flags kept on key paths,
 * not on values, because an array of tables reuses one path for each new element.
 *   FROZEN   (recursive): an inline table or a static array, and all inside it;
 *            nothing may add to it.
 *   EXPLICIT: a table defined by a [header] or an [[element]] header, or one that
 *            dotted keys created in an earlier section; a later header may not define
 *            it again and dotted keys may not reopen it. Tables that dotted keys create
 *            only become EXPLICIT when the next header starts (the "pending" list), so
 *            several dotted keys of one section can fill the same table.
 * CRLF is read as LF (TOML lets a parser normalize newlines); a CR on its own is an
 * error like any other control character. */
#include "ec_toml.h"

#include "proto/utf8.h"
#include "util/buf.h"
#include "util/mem.h"

#include <errno.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_FROZEN = 1, F_EXPLICIT = 2 };

/* A key path ("a", "b", "c" for a.b.c); the parts are owned. */
struct kpath {
    char **k;
    size_t n, cap;
};

/* The flags trie: one node per key path that carries flags. */
struct fnode {
    char *key;
    unsigned flags, rflags; /* on this path only / on it and everything below */
    struct fnode *child, *next;
};

struct tp {
    const char *s; /* the text, CRLF already turned into LF */
    size_t n, i;
    int depth;
    bool failed;
    char *err;
    size_t errlen;
    struct fnode *flags;   /* the document's flags */
    struct kpath *pending; /* paths to mark EXPLICIT at the next header */
    size_t npending, cappending;
};

/* ---- errors ------------------------------------------------------------------------ */

static int fail_at(struct tp *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(struct tp *p, size_t pos, const char *fmt, ...)
{
    if (p->failed) return -1;
    p->failed = true;
    if (!p->err || !p->errlen) return -1;
    if (pos > p->n) pos = p->n;
    size_t line = 1, col = 1;
    for (size_t j = 0; j < pos; j++) {
        unsigned char ch = (unsigned char)p->s[j];
        if (ch == '\n') {
            line++;
            col = 1;
        } else if ((ch & 0xC0) != 0x80) {
            col++; /* count characters, not the continuation bytes of one */
        }
    }
    int k = snprintf(p->err, p->errlen, "line %zu, column %zu: ", line, col);
    if (k < 0 || (size_t)k >= p->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- key paths --------------------------------------------------------------------- */

static void kp_push(struct kpath *kp, char *part)
{
    if (kp->n == kp->cap) {
        kp->cap = kp->cap ? kp->cap * 2 : 4;
        kp->k = xrealloc(kp->k, kp->cap * sizeof *kp->k);
    }
    kp->k[kp->n++] = part;
}

static void kp_clear(struct kpath *kp)
{
    for (size_t j = 0; j < kp->n; j++)
        free(kp->k[j]);
    free(kp->k);
    memset(kp, 0, sizeof *kp);
}

/* a + the first m parts of b (copies). */
static void kp_concat(struct kpath *out, const struct kpath *a, const struct kpath *b, size_t m)
{
    memset(out, 0, sizeof *out);
    for (size_t j = 0; j < a->n; j++)
        kp_push(out, xstrdup(a->k[j]));
    for (size_t j = 0; j < m && j < b->n; j++)
        kp_push(out, xstrdup(b->k[j]));
}

static bool bare_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* The path as TOML would write it, for messages (static storage, truncated). */
static const char *kp_text(const struct kpath *kp, size_t m)
{
    static _Thread_local char out[200];
    size_t o = 0;
    out[0] = 0;
    for (size_t j = 0; j < m && j < kp->n && o + 4 < sizeof out; j++) {
        const char *part = kp->k[j];
        bool bare = *part != 0;
        for (const char *c = part; *c; c++)
            if (!bare_char((unsigned char)*c)) bare = false;
        int w = snprintf(out + o, sizeof out - o, bare ? "%s%s" : "%s\"%s\"", j ? "." : "", part);
        if (w < 0) break;
        o += (size_t)w;
        if (o >= sizeof out) o = sizeof out - 1;
    }
    return out;
}

/* ---- the flags trie ------------------------------------------------------------------ */

static void fnode_free(struct fnode *f)
{
    while (f) {
        struct fnode *next = f->next;
        fnode_free(f->child);
        free(f->key);
        free(f);
        f = next;
    }
}

static struct fnode **fnode_slot(struct fnode **list, const char *key)
{
    for (; *list; list = &(*list)->next)
        if (strcmp((*list)->key, key) == 0) return list;
    return list;
}

static void flags_set(struct fnode **root, const struct kpath *kp, size_t m, unsigned flag,
                      bool recursive)
{
    struct fnode **list = root, *node = NULL;
    for (size_t j = 0; j < m; j++) {
        struct fnode **slot = fnode_slot(list, kp->k[j]);
        if (!*slot) {
            *slot = xcalloc(1, sizeof **slot);
            (*slot)->key = xstrdup(kp->k[j]);
        }
        node = *slot;
        list = &node->child;
    }
    if (!node) return;
    if (recursive)
        node->rflags |= flag;
    else
        node->flags |= flag;
}

static bool flags_is(struct fnode *root, const struct kpath *kp, size_t m, unsigned flag)
{
    if (m == 0) return false;
    struct fnode *list = root;
    for (size_t j = 0; j + 1 < m; j++) {
        struct fnode **slot = fnode_slot(&list, kp->k[j]);
        if (!*slot) return false;
        if ((*slot)->rflags & flag) return true;
        list = (*slot)->child;
    }
    struct fnode **slot = fnode_slot(&list, kp->k[m - 1]);
    return *slot && (((*slot)->flags | (*slot)->rflags) & flag);
}

/* Forgets the flags of a path and everything below it (a new [[element]]). */
static void flags_unset_all(struct fnode **root, const struct kpath *kp)
{
    struct fnode **list = root;
    for (size_t j = 0; j + 1 < kp->n; j++) {
        struct fnode **slot = fnode_slot(list, kp->k[j]);
        if (!*slot) return;
        list = &(*slot)->child;
    }
    struct fnode **slot = fnode_slot(list, kp->k[kp->n - 1]);
    if (*slot) {
        struct fnode *gone = *slot;
        *slot = gone->next;
        gone->next = NULL;
        fnode_free(gone);
    }
}

static void pending_add(struct tp *p, struct kpath *kp)
{
    if (p->npending == p->cappending) {
        p->cappending = p->cappending ? p->cappending * 2 : 8;
        p->pending = xrealloc(p->pending, p->cappending * sizeof *p->pending);
    }
    p->pending[p->npending++] = *kp; /* takes it */
    memset(kp, 0, sizeof *kp);
}

static void pending_finalize(struct tp *p)
{
    for (size_t j = 0; j < p->npending; j++) {
        flags_set(&p->flags, &p->pending[j], p->pending[j].n, F_EXPLICIT, false);
        kp_clear(&p->pending[j]);
    }
    p->npending = 0;
}

/* ---- the value tree ---------------------------------------------------------------- */

/* Walks (creating tables as needed) to the table at the first m parts of kp; through
 * an array of tables it goes into the last element when access_lists. NULL when a
 * part is some other value. */
static json_t *nest(json_t *root, const struct kpath *kp, size_t m, bool access_lists)
{
    json_t *cont = root;
    for (size_t j = 0; j < m; j++) {
        json_t *v = json_object_get(cont, kp->k[j]);
        if (!v) {
            v = json_object();
            json_object_set_new(cont, kp->k[j], v);
        }
        cont = v;
        if (access_lists && json_is_array(cont)) {
            size_t len = json_array_size(cont);
            if (len == 0) return NULL;
            cont = json_array_get(cont, len - 1);
        }
        if (!json_is_object(cont)) return NULL;
    }
    return cont;
}

/* ---- lexical pieces ---------------------------------------------------------------- */

static int peek(const struct tp *p, size_t off)
{
    return p->i + off < p->n ? (unsigned char)p->s[p->i + off] : -1;
}

static bool starts(const struct tp *p, const char *lit)
{
    size_t l = strlen(lit);
    return p->i + l <= p->n && memcmp(p->s + p->i, lit, l) == 0;
}

static void skip_ws(struct tp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t'))
        p->i++;
}

static bool is_ctrl(int c)
{
    return (c >= 0 && c < 0x20) || c == 0x7f;
}

static int skip_comment(struct tp *p)
{
    if (peek(p, 0) != '#') return 0;
    p->i++;
    while (p->i < p->n && p->s[p->i] != '\n') {
        int c = (unsigned char)p->s[p->i];
        if (c != '\t' && is_ctrl(c))
            return fail_at(p, p->i, "control character U+%04X in a comment", c);
        p->i++;
    }
    return 0;
}

/* White space, newlines and comments (inside arrays and inline tables). */
static int skip_ws_nl_comments(struct tp *p)
{
    for (;;) {
        size_t before = p->i;
        while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n'))
            p->i++;
        if (skip_comment(p)) return -1;
        if (p->i == before) return 0;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_utf8(struct buf *b, uint32_t cp)
{
    char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    buf_append(b, u, k);
}

/* One escape at p->i (the backslash) of a basic string, appended to out. */
static int parse_escape(struct tp *p, bool multiline, struct buf *out)
{
    size_t at = p->i;
    int c = peek(p, 1);
    if (multiline && (c == ' ' || c == '\t' || c == '\n')) {
        /* line-ending backslash: white space up to the newline, then every white
         * space and newline after it, are dropped */
        p->i++;
        skip_ws(p);
        if (peek(p, 0) != '\n')
            return fail_at(p, at,
                           "a backslash in a string must end the line "
                           "or start an escape");
        while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n'))
            p->i++;
        return 0;
    }
    p->i += 2;
    switch (c) {
    case 'b': buf_putc(out, '\b'); return 0;
    case 't': buf_putc(out, '\t'); return 0;
    case 'n': buf_putc(out, '\n'); return 0;
    case 'f': buf_putc(out, '\f'); return 0;
    case 'r': buf_putc(out, '\r'); return 0;
    case 'e': buf_putc(out, 0x1b); return 0; /* TOML 1.1 */
    case '"': buf_putc(out, '"'); return 0;
    case '\\': buf_putc(out, '\\'); return 0;
    case 'x': /* TOML 1.1: \xHH, a code point up to U+00FF */
    case 'u':
    case 'U': {
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int j = 0; j < digits; j++) {
            int h = hexval(peek(p, 0));
            if (h < 0) return fail_at(p, at, "\\%c needs exactly %d hexadecimal digits", c, digits);
            cp = cp << 4 | (uint32_t)h;
            p->i++;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return fail_at(p, at, "escape \\%c names U+%X, which is not a Unicode scalar value", c,
                           (unsigned)cp);
        put_utf8(out, cp);
        return 0;
    }
    default: return fail_at(p, at, "invalid escape sequence in a string");
    }
}

/* A string of any of the four kinds at p->i; out receives its value. */
static int parse_string(struct tp *p, struct buf *out)
{
    size_t at = p->i;
    char q = p->s[p->i];
    bool literal = q == '\'';
    bool multiline = starts(p, literal ? "'''" : "\"\"\"");
    p->i += multiline ? 3 : 1;
    if (multiline && peek(p, 0) == '\n') p->i++; /* a newline right after the opening */
    for (;;) {
        int c = peek(p, 0);
        if (c < 0) return fail_at(p, at, "unterminated string");
        if (c == q) {
            if (!multiline) {
                p->i++;
                return 0;
            }
            if (peek(p, 1) == q && peek(p, 2) == q) {
                /* the closing delimiter; up to two more quotes belong to the value */
                p->i += 3;
                for (int extra = 0; extra < 2 && peek(p, 0) == q; extra++) {
                    buf_putc(out, q);
                    p->i++;
                }
                return 0;
            }
            buf_putc(out, q);
            p->i++;
            continue;
        }
        if (c == '\\' && !literal) {
            if (parse_escape(p, multiline, out)) return -1;
            continue;
        }
        if (c == '\n') {
            if (!multiline)
                return fail_at(p, p->i,
                               "unterminated string (newline before the "
                               "closing quote)");
        } else if (c != '\t' && is_ctrl(c)) {
            return fail_at(p, p->i, "control character U+%04X in a string (escape it)", c);
        }
        buf_putc(out, (char)c);
        p->i++;
    }
}

/* One part of a key: bare, "basic" or 'literal'. Caller frees *out. */
static int parse_key_part(struct tp *p, char **out)
{
    *out = NULL;
    int c = peek(p, 0);
    if (c >= 0 && bare_char((unsigned char)c)) {
        size_t st = p->i;
        while (p->i < p->n && bare_char((unsigned char)p->s[p->i]))
            p->i++;
        *out = xstrndup(p->s + st, p->i - st);
        return 0;
    }
    if (c == '"' || c == '\'') {
        size_t at = p->i;
        if (starts(p, c == '"' ? "\"\"\"" : "'''"))
            return fail_at(p, at, "a key cannot be a multi-line string");
        struct buf b;
        buf_init(&b);
        if (parse_string(p, &b)) {
            buf_free(&b);
            return -1;
        }
        if (b.len && memchr(b.data, 0, b.len)) {
            buf_free(&b);
            return fail_at(p, at, "a key containing U+0000 is not supported");
        }
        buf_putc(&b, 0);
        *out = buf_steal(&b);
        return 0;
    }
    return fail_at(p, p->i, "expected a key (letters, digits, '_', '-', or a quoted string)");
}

/* A dotted key; white space around the dots is allowed and skipped. */
static int parse_key(struct tp *p, struct kpath *kp)
{
    memset(kp, 0, sizeof *kp);
    for (;;) {
        char *part;
        if (parse_key_part(p, &part)) {
            kp_clear(kp);
            return -1;
        }
        kp_push(kp, part);
        skip_ws(p);
        if (peek(p, 0) != '.') return 0;
        p->i++;
        skip_ws(p);
    }
}

/* ---- numbers ------------------------------------------------------------------------ */

static bool is_digit(int c, int base)
{
    if (base == 16) return hexval(c) >= 0;
    return c >= '0' && c < '0' + (base < 10 ? base : 10);
}

/* digits with single underscores between them: d(_?d)* from s[*j]. */
static bool digits_us(const char *s, size_t e, size_t *j, int base)
{
    if (*j >= e || !is_digit((unsigned char)s[*j], base)) return false;
    (*j)++;
    while (*j < e) {
        if (s[*j] == '_') {
            if (*j + 1 >= e || !is_digit((unsigned char)s[*j + 1], base)) return false;
            *j += 2;
        } else if (is_digit((unsigned char)s[*j], base)) {
            (*j)++;
        } else {
            break;
        }
    }
    return true;
}

static int parse_number(struct tp *p, json_t **out)
{
    const char *s = p->s;
    size_t st = p->i, e = st;
    while (e < p->n && (bare_char((unsigned char)s[e]) || s[e] == '+' || s[e] == '.'))
        e++;
    size_t j = st;
    bool sign = s[j] == '+' || s[j] == '-';
    if (sign) j++;
    if ((e - j == 3 && (memcmp(s + j, "inf", 3) == 0 || memcmp(s + j, "nan", 3) == 0)))
        return fail_at(p, st, "inf and nan are not supported here");
    int base = 10;
    if (!sign && e - j >= 2 && s[j] == '0' &&
        (s[j + 1] == 'x' || s[j + 1] == 'o' || s[j + 1] == 'b'))
        base = s[j + 1] == 'x' ? 16 : s[j + 1] == 'o' ? 8 : 2;
    bool is_float = false;
    if (base != 10) {
        j += 2;
        if (!digits_us(s, e, &j, base) || j != e)
            return fail_at(p, st, "invalid %s integer",
                           base == 16  ? "hexadecimal"
                           : base == 8 ? "octal"
                                       : "binary");
    } else {
        if (j < e && s[j] == '0') {
            j++;
            if (j < e && (is_digit((unsigned char)s[j], 10) || s[j] == '_'))
                return fail_at(p, st, "leading zeros are not allowed in a number");
        } else if (!digits_us(s, e, &j, 10)) {
            return fail_at(p, st, "invalid value");
        }
        if (j < e && s[j] == '.') {
            j++;
            is_float = true;
            if (!digits_us(s, e, &j, 10))
                return fail_at(p, st, "a decimal point must have digits on both sides");
        }
        if (j < e && (s[j] == 'e' || s[j] == 'E')) {
            j++;
            is_float = true;
            if (j < e && (s[j] == '+' || s[j] == '-')) j++;
            if (!digits_us(s, e, &j, 10)) return fail_at(p, st, "invalid exponent");
        }
        if (j != e) return fail_at(p, st, "invalid number");
    }
    /* the digits without underscores (and without the base prefix) */
    char tmp[128];
    size_t k = 0;
    for (size_t q = st + (base != 10 ? 2 : 0); q < e; q++) {
        if (s[q] == '_') continue;
        if (k + 1 >= sizeof tmp) return fail_at(p, st, "number too long");
        tmp[k++] = s[q];
    }
    tmp[k] = 0;
    errno = 0;
    if (!is_float) {
        if (base == 10) {
            long long v = strtoll(tmp, NULL, 10);
            if (errno == ERANGE) return fail_at(p, st, "integer out of range (64-bit signed)");
            *out = json_integer(v);
        } else {
            unsigned long long v = strtoull(tmp, NULL, base);
            if (errno == ERANGE || v > INT64_MAX)
                return fail_at(p, st, "integer out of range (64-bit signed)");
            *out = json_integer((json_int_t)v);
        }
    } else {
        /* strtod reads the locale's decimal point; a host program may have set one. */
        locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        double v = c_loc ? strtod_l(tmp, NULL, c_loc) : strtod(tmp, NULL);
        if (c_loc) freelocale(c_loc);
        *out = json_real(v); /* NULL for an overflow to infinity */
        if (!*out) return fail_at(p, st, "number out of range");
    }
    p->i = e;
    return 0;
}

/* "1979-05-27", "07:32:00": a date or time, which no field here takes. */
static bool looks_like_datetime(const struct tp *p)
{
    int d[5];
    for (int j = 0; j < 5; j++)
        d[j] = peek(p, (size_t)j);
    bool dd = is_digit(d[0], 10) && is_digit(d[1], 10);
    if (dd && d[2] == ':') return true;
    return dd && is_digit(d[2], 10) && is_digit(d[3], 10) && d[4] == '-';
}

/* ---- values -------------------------------------------------------------------------- */

static int parse_value(struct tp *p, json_t **out);

static int parse_array(struct tp *p, json_t **out)
{
    p->i++; /* [ */
    json_t *arr = json_array();
    if (skip_ws_nl_comments(p)) goto fail;
    if (peek(p, 0) == ']') {
        p->i++;
        *out = arr;
        return 0;
    }
    for (;;) {
        json_t *v;
        if (parse_value(p, &v)) goto fail;
        json_array_append_new(arr, v);
        if (skip_ws_nl_comments(p)) goto fail;
        int c = peek(p, 0);
        if (c == ']') break;
        if (c != ',') {
            fail_at(p, p->i, "expected ',' or ']' in an array");
            goto fail;
        }
        p->i++;
        if (skip_ws_nl_comments(p)) goto fail;
        if (peek(p, 0) == ']') break; /* trailing comma */
    }
    p->i++;
    *out = arr;
    return 0;
fail:
    json_decref(arr);
    return -1;
}

static int parse_inline_table(struct tp *p, json_t **out)
{
    size_t at = p->i;
    p->i++; /* { */
    json_t *obj = json_object();
    struct fnode *flags = NULL; /* the table's own: its keys start from it */
    struct kpath kp = {0};
    /* TOML 1.1: newlines and comments inside, and a trailing comma. */
    if (skip_ws_nl_comments(p)) goto fail;
    if (peek(p, 0) == '}') goto done;
    for (;;) {
        size_t kat = p->i;
        if (parse_key(p, &kp)) goto fail;
        if (peek(p, 0) != '=') {
            fail_at(p, p->i, "expected '=' after a key");
            goto fail;
        }
        p->i++;
        skip_ws(p);
        json_t *v;
        if (parse_value(p, &v)) goto fail;
        if (flags_is(flags, &kp, kp.n, F_FROZEN)) {
            json_decref(v);
            fail_at(p, kat, "cannot add to `%s`: it is an inline table or array",
                    kp_text(&kp, kp.n - 1));
            goto fail;
        }
        json_t *cont = nest(obj, &kp, kp.n - 1, false);
        if (!cont || json_object_get(cont, kp.k[kp.n - 1])) {
            json_decref(v);
            fail_at(p, kat, "duplicate key `%s` in an inline table", kp_text(&kp, kp.n));
            goto fail;
        }
        if (json_is_object(v) || json_is_array(v)) flags_set(&flags, &kp, kp.n, F_FROZEN, true);
        json_object_set_new(cont, kp.k[kp.n - 1], v);
        kp_clear(&kp);
        if (skip_ws_nl_comments(p)) goto fail;
        int c = peek(p, 0);
        if (c == '}') break;
        if (c != ',') {
            fail_at(p, c < 0 ? at : p->i, "expected ',' or '}' in an inline table");
            goto fail;
        }
        p->i++;
        if (skip_ws_nl_comments(p)) goto fail;
        if (peek(p, 0) == '}') break;
    }
done:
    p->i++;
    fnode_free(flags);
    *out = obj;
    return 0;
fail:
    kp_clear(&kp);
    fnode_free(flags);
    json_decref(obj);
    return -1;
}

static int parse_value(struct tp *p, json_t **out)
{
    *out = NULL;
    int c = peek(p, 0);
    if (c == '"' || c == '\'') {
        size_t at = p->i;
        struct buf b;
        buf_init(&b);
        int rc = parse_string(p, &b);
        if (rc == 0) {
            *out = json_stringn(b.data ? b.data : "", b.len);
            if (!*out) rc = fail_at(p, at, "string is not valid UTF-8");
        }
        buf_free(&b);
        return rc;
    }
    if (c == '[' || c == '{') {
        if (++p->depth > EC_TOML_MAX_DEPTH) return fail_at(p, p->i, "nested too deeply");
        int rc = c == '[' ? parse_array(p, out) : parse_inline_table(p, out);
        p->depth--;
        return rc;
    }
    if (starts(p, "true") && !(peek(p, 4) >= 0 && bare_char((unsigned char)peek(p, 4)))) {
        p->i += 4;
        *out = json_true();
        return 0;
    }
    if (starts(p, "false") && !(peek(p, 5) >= 0 && bare_char((unsigned char)peek(p, 5)))) {
        p->i += 5;
        *out = json_false();
        return 0;
    }
    if (looks_like_datetime(p)) return fail_at(p, p->i, "dates and times are not supported here");
    if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'i' || c == 'n')
        return parse_number(p, out);
    if (c < 0 || c == '\n') return fail_at(p, p->i, "expected a value");
    return fail_at(p, p->i, "invalid value (strings need quotes)");
}

/* ---- statements ------------------------------------------------------------------ */

/* key = value, in the section `header`. */
static int key_value_rule(struct tp *p, json_t *root, const struct kpath *header)
{
    size_t at = p->i;
    struct kpath key = {0}, path = {0};
    json_t *v = NULL;
    if (parse_key(p, &key)) return -1;
    if (peek(p, 0) != '=') {
        fail_at(p, p->i, "expected '=' after a key");
        goto fail;
    }
    p->i++;
    skip_ws(p);
    if (parse_value(p, &v)) goto fail;
    /* Every table the dotted key goes through must not be one a header defined (or
     * dotted keys of an earlier section created); they become so for later sections. */
    for (size_t m = 1; m < key.n; m++) {
        kp_concat(&path, header, &key, m);
        if (flags_is(p->flags, &path, path.n, F_EXPLICIT)) {
            fail_at(p, at,
                    "cannot add to table `%s` with a dotted key here: it is defined "
                    "elsewhere",
                    kp_text(&path, path.n));
            goto fail;
        }
        pending_add(p, &path);
    }
    kp_concat(&path, header, &key, key.n - 1);
    if (flags_is(p->flags, &path, path.n, F_FROZEN)) {
        fail_at(p, at, "cannot add to `%s`: it is an inline table or array",
                kp_text(&path, path.n));
        goto fail;
    }
    json_t *cont = nest(root, &path, path.n, true);
    const char *stem = key.k[key.n - 1];
    if (!cont || json_object_get(cont, stem)) {
        kp_push(&path, xstrdup(stem));
        fail_at(p, at, "`%s` is defined twice", kp_text(&path, path.n));
        goto fail;
    }
    kp_push(&path, xstrdup(stem));
    if (json_is_object(v) || json_is_array(v)) flags_set(&p->flags, &path, path.n, F_FROZEN, true);
    json_object_set_new(cont, stem, v);
    kp_clear(&key);
    kp_clear(&path);
    return 0;
fail:
    json_decref(v);
    kp_clear(&key);
    kp_clear(&path);
    return -1;
}

/* [table]: *header becomes its path. */
static int table_rule(struct tp *p, json_t *root, struct kpath *header)
{
    size_t at = p->i;
    p->i++;
    skip_ws(p);
    struct kpath key;
    if (parse_key(p, &key)) return -1;
    if (flags_is(p->flags, &key, key.n, F_EXPLICIT) || flags_is(p->flags, &key, key.n, F_FROZEN)) {
        fail_at(p, at, "table `%s` is defined twice", kp_text(&key, key.n));
        kp_clear(&key);
        return -1;
    }
    flags_set(&p->flags, &key, key.n, F_EXPLICIT, false);
    if (!nest(root, &key, key.n, true)) {
        fail_at(p, at, "`%s` is already a value, not a table", kp_text(&key, key.n));
        kp_clear(&key);
        return -1;
    }
    if (peek(p, 0) != ']') {
        kp_clear(&key);
        return fail_at(p, p->i, "expected ']' at the end of a table header");
    }
    p->i++;
    kp_clear(header);
    *header = key;
    return 0;
}

/* [[array]]: a new table at the end of the array; *header becomes its path. */
static int array_table_rule(struct tp *p, json_t *root, struct kpath *header)
{
    size_t at = p->i;
    p->i += 2;
    skip_ws(p);
    struct kpath key;
    if (parse_key(p, &key)) return -1;
    if (flags_is(p->flags, &key, key.n, F_FROZEN)) {
        fail_at(p, at, "cannot append to `%s`: it is a static array", kp_text(&key, key.n));
        goto fail;
    }
    flags_unset_all(&p->flags, &key);
    flags_set(&p->flags, &key, key.n, F_EXPLICIT, false);
    json_t *cont = nest(root, &key, key.n - 1, true);
    if (!cont) {
        fail_at(p, at, "`%s` is already a value, not a table", kp_text(&key, key.n - 1));
        goto fail;
    }
    json_t *arr = json_object_get(cont, key.k[key.n - 1]);
    if (arr && !json_is_array(arr)) {
        fail_at(p, at, "cannot append to `%s`: it is not an array of tables", kp_text(&key, key.n));
        goto fail;
    }
    if (!arr) {
        arr = json_array();
        json_object_set_new(cont, key.k[key.n - 1], arr);
    }
    json_array_append_new(arr, json_object());
    if (!starts(p, "]]")) {
        fail_at(p, p->i, "expected ']]' at the end of an array-of-tables header");
        goto fail;
    }
    p->i += 2;
    kp_clear(header);
    *header = key;
    return 0;
fail:
    kp_clear(&key);
    return -1;
}

int ec_toml_parse(const char *text, size_t len, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = 0;
    struct tp p = {.err = err, .errlen = errlen};
    if (len > EC_TOML_MAX_BYTES) {
        if (err && errlen)
            snprintf(err, errlen, "file too large (over %u bytes)", EC_TOML_MAX_BYTES);
        return -1;
    }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) { /* a byte order mark */
        text += 3;
        len -= 3;
    }
    size_t valid = 0, bad = 0;
    char *norm = xmalloc(len + 1);
    size_t n = 0;
    for (size_t j = 0; j < len; j++) {
        if (text[j] == '\r' && j + 1 < len && text[j + 1] == '\n') continue;
        norm[n++] = text[j];
    }
    norm[n] = 0;
    p.s = norm;
    p.n = n;
    json_t *root = json_object();
    struct kpath header = {0};
    if (!utf8_check(norm, n, &valid, &bad)) {
        fail_at(&p, valid, "the file is not valid UTF-8");
        goto done;
    }
    for (;;) {
        skip_ws(&p);
        if (p.i >= p.n) break;
        int c = peek(&p, 0);
        if (c == '\n') {
            p.i++;
            continue;
        }
        if (bare_char((unsigned char)c) || c == '"' || c == '\'') {
            if (key_value_rule(&p, root, &header)) break;
            skip_ws(&p);
        } else if (c == '[') {
            pending_finalize(&p);
            if (peek(&p, 1) == '[' ? array_table_rule(&p, root, &header)
                                   : table_rule(&p, root, &header))
                break;
            skip_ws(&p);
        } else if (c != '#') {
            fail_at(&p, p.i,
                    is_ctrl(c) ? "control character in the file"
                               : "expected a key, a [table] header or a comment");
            break;
        }
        if (skip_comment(&p)) break;
        if (p.i >= p.n) break;
        if (peek(&p, 0) != '\n') {
            fail_at(&p, p.i, "expected the end of the line after a statement");
            break;
        }
        p.i++;
    }
done:
    kp_clear(&header);
    for (size_t j = 0; j < p.npending; j++)
        kp_clear(&p.pending[j]);
    free(p.pending);
    fnode_free(p.flags);
    free(norm);
    if (p.failed) {
        json_decref(root);
        return -1;
    }
    *out = root;
    return 0;
}
