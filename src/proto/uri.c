/* uri: file: URIs <-> native paths (PROTOCOL.md section 6.1).
 *
 * uri_to_path follows the WHATWG URL parser's path for file: URLs with no base
 * (the reference server uses the Rust url crate, which implements it), restricted to
 * what a Linux path can be: no host but localhost, no drive letter, no NUL byte, no
 * query or fragment. It keeps raw bytes until the end and percent-decodes each segment
 * once, so a name that is not UTF-8 survives. uri_from_path is its inverse: every path
 * it encodes parses back to the same bytes; a path with no such URL form (a NUL, a "."
 * or ".." component, a drive-letter-like first component) is sent in the server's
 * `file:///%00/bad/path/<base64url>` form, which uri_to_path also takes back. */
#include "proto/uri.h"

#include <errno.h>
#include "proto/utf8.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base64.h"
#include "proto/hex.h"
#include "util/buf.h"
#include "util/mem.h"

/* The prefix of the server's form for paths without a URL form. */
#define BAD_PATH_PREFIX "file:///%00/bad/path/"

/* Longest URI quoted into an error message; messages are truncated on an ASCII
 * boundary (we quote our own percent-encoded serialization), so they stay UTF-8. */
#define MSG_URI_MAX 400

struct seg {
    size_t off; /* start in the working copy of the input */
    size_t len;
};

/* The parse of one file: URL: segments point into the caller's working copy. */
struct parsed {
    struct seg *segs; /* owned array */
    size_t nsegs, cap;
    const char *host; /* decoded, lowercased foreign host or NULL (owned) */
    size_t host_len;
    bool drive; /* the first segment is a Windows drive letter */
};

static void set_err(struct uri_error *err, enum uri_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(struct uri_error *err, enum uri_error_kind kind, const char *fmt, ...)
{
    va_list ap;
    err->kind = kind;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static bool is_alpha(unsigned char c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Special URLs (file is one) treat a backslash as a slash. */
static bool is_slash(char c)
{
    return c == '/' || c == '\\';
}

/* The WHATWG path percent-encode set, used when we quote a URI back in a message. */
static bool in_path_set(unsigned char c)
{
    return c < 0x20 || c > 0x7E || c == ' ' || c == '"' || c == '#' || c == '<' || c == '>' ||
           c == '?' || c == '`' || c == '{' || c == '}';
}

/* What uri_from_path escapes: the path set, plus '%' so escapes read back literally
 * and '\' because a parser reads a raw one as a separator. */
static bool in_encode_set(unsigned char c)
{
    return in_path_set(c) || c == '%' || c == '\\';
}

static void put_pct(struct buf *b, unsigned char c)
{
    char e[3] = {'%', hex_upper[c >> 4], hex_upper[c & 15]};
    buf_append(b, e, 3);
}

static bool is_drive_letter(const char *s, size_t n)
{
    return n == 2 && is_alpha((unsigned char)s[0]) && (s[1] == ':' || s[1] == '|');
}

static bool ieq(const char *s, size_t n, const char *lit)
{
    if (strlen(lit) != n) return false;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != lit[i]) return false;
    return true;
}

/* WHATWG single-dot and double-dot path segments, escapes included. */
static bool is_single_dot(const char *s, size_t n)
{
    return ieq(s, n, ".") || ieq(s, n, "%2e");
}

static bool is_double_dot(const char *s, size_t n)
{
    return ieq(s, n, "..") || ieq(s, n, ".%2e") || ieq(s, n, "%2e.") || ieq(s, n, "%2e%2e");
}

/* Decodes percent escapes in n bytes at s into d (at least n bytes); an escape that
 * is not two hex digits stays literal, as in WHATWG. Returns the decoded length. */
static size_t pct_decode(const char *s, size_t n, char *d)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hex_value((unsigned char)s[i + 1])) >= 0 &&
            (lo = hex_value((unsigned char)s[i + 2])) >= 0) {
            d[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            d[o++] = s[i];
        }
    }
    return o;
}

/* WHATWG forbidden domain code points (the ASCII ones; the rest is left to IDNA). */
static bool forbidden_in_domain(unsigned char c)
{
    return c <= 0x20 || c == 0x7F || strchr("#%/:<>?@[\\]^|", c) != NULL;
}

/* Parses the host of a file: URL. localhost is dropped (p->host stays NULL); any
 * other host is kept for a later "invalid on linux" error, because the reference
 * reports query and fragment first. Returns -1 with *err set for a host the URL
 * parser itself rejects: a port or credentials land here as ':' and '@', which the
 * reference reports as an IDNA failure. We do not run IDNA mapping, so a host that
 * only maps to "localhost" (fullwidth letters, say) counts as foreign. */
static int parse_host(const char *s, size_t n, struct parsed *p, struct uri_error *err)
{
    if (s[0] == '[') {
        if (s[n - 1] != ']' || n < 3) {
            set_err(err, URI_ERR_SYNTAX, "invalid URI: invalid IPv6 address");
            return -EINVAL;
        }
        p->host = xmemdup(s, n);
        p->host_len = n;
        return 0;
    }
    char *h = xmalloc(n);
    size_t hn = pct_decode(s, n, h);
    bool bad = !utf8_valid(h, hn);
    for (size_t i = 0; i < hn && !bad; i++) {
        if (forbidden_in_domain((unsigned char)h[i])) bad = true;
        if (h[i] >= 'A' && h[i] <= 'Z') h[i] = (char)(h[i] | 0x20);
    }
    if (bad) {
        free(h);
        set_err(err, URI_ERR_SYNTAX, "invalid URI: invalid international domain name");
        return -EINVAL;
    }
    if (hn == 9 && memcmp(h, "localhost", 9) == 0) {
        free(h);
        return 0;
    }
    p->host = h;
    p->host_len = hn;
    return 0;
}

static void push_seg(struct parsed *p, size_t off, size_t len)
{
    if (p->nsegs == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->segs = xrealloc(p->segs, p->cap * sizeof *p->segs);
    }
    p->segs[p->nsegs].off = off;
    p->segs[p->nsegs].len = len;
    p->nsegs++;
}

/* The WHATWG path state from s[pos]: splits on '/' and '\', resolves dot segments
 * (never above the root) and stops at '?', '#' or the end, which it returns. */
static char parse_path(char *s, size_t n, size_t pos, struct parsed *p)
{
    for (;;) {
        size_t st = pos;
        while (pos < n && !is_slash(s[pos]) && s[pos] != '?' && s[pos] != '#')
            pos++;
        char c = pos < n ? s[pos] : '\0';
        bool more = pos < n && is_slash(c);
        const char *b = s + st;
        size_t bl = pos - st;
        if (is_double_dot(b, bl)) {
            /* A leading drive letter is never popped (WHATWG "shorten a path"). */
            if (p->nsegs > 0 && !(p->nsegs == 1 && p->drive)) p->nsegs--;
            if (!more) push_seg(p, st, 0);
        } else if (is_single_dot(b, bl)) {
            if (!more) push_seg(p, st, 0);
        } else {
            if (p->nsegs == 0 && is_drive_letter(b, bl)) {
                s[st + 1] = ':';
                p->drive = true;
            }
            push_seg(p, st, bl);
        }
        if (!more) return pos < n ? c : '\0';
        pos++;
    }
}

/* Writes 'uri' (our serialization of what was parsed) is invalid on 'linux'. */
static void invalid_on_linux(struct uri_error *err, enum uri_error_kind kind, const char *s,
                             const struct parsed *p)
{
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "file://");
    for (size_t i = 0; i < p->host_len; i++) {
        unsigned char c = (unsigned char)p->host[i];
        if (c > 0x7E)
            put_pct(&b, c);
        else
            buf_putc(&b, (char)c);
    }
    for (size_t i = 0; i < p->nsegs; i++) {
        buf_putc(&b, '/');
        for (size_t j = 0; j < p->segs[i].len; j++) {
            unsigned char c = (unsigned char)s[p->segs[i].off + j];
            if (in_path_set(c))
                put_pct(&b, c);
            else
                buf_putc(&b, (char)c);
        }
    }
    if (b.len > MSG_URI_MAX)
        set_err(err, kind, "'%.*s...' is invalid on 'linux'", MSG_URI_MAX, b.data);
    else
        set_err(err, kind, "'%.*s' is invalid on 'linux'", (int)b.len, b.data);
    buf_free(&b);
}

/* Recognises the server's `file:///%00/bad/path/<base64url>` form. On a match stores
 * the decoded bytes (malloc'd, NUL-terminated) and returns true. */
static bool decode_bad_path(const char *s, const struct parsed *p, char **out, size_t *out_len)
{
    if (p->nsegs != 4) return false;
    const struct seg *g = p->segs;
    if (g[0].len != 3 || memcmp(s + g[0].off, "%00", 3) != 0) return false;
    if (g[1].len != 3 || memcmp(s + g[1].off, "bad", 3) != 0) return false;
    if (g[2].len != 4 || memcmp(s + g[2].off, "path", 4) != 0) return false;
    size_t n = g[3].len;
    const char *b = s + g[3].off;
    if (n % 4 == 1) return false;
    /* Base64url without padding -> the standard padded alphabet our codec reads. */
    char *std = xmalloc(n + 4);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!(is_alpha((unsigned char)c) || is_digit((unsigned char)c))) {
            free(std);
            return false;
        }
        std[m++] = c;
    }
    while (m % 4)
        std[m++] = '=';
    uint8_t *d = xmalloc(base64_decoded_max(m) + 1);
    size_t dl;
    char e[64];
    int rc = base64_decode(std, m, d, &dl, e, sizeof e);
    free(std);
    if (rc != 0) {
        free(d);
        return false;
    }
    d[dl] = '\0';
    *out = (char *)d;
    *out_len = dl;
    return true;
}

static int bare_path(const char *uri, size_t len, char **out, size_t *out_len,
                     struct uri_error *err)
{
    if (memchr(uri, '\0', len)) {
        struct buf b;
        buf_init(&b);
        for (size_t i = 0; i < len && b.len <= MSG_URI_MAX; i++) {
            unsigned char c = (unsigned char)uri[i];
            if (in_path_set(c) || c == '%')
                put_pct(&b, c);
            else
                buf_putc(&b, (char)c);
        }
        set_err(err, URI_ERR_PLATFORM, "'%.*s%s' is invalid on 'linux'",
                (int)(b.len > MSG_URI_MAX ? MSG_URI_MAX : b.len), b.data,
                b.len > MSG_URI_MAX ? "..." : "");
        buf_free(&b);
        return -EINVAL;
    }
    char *p = xmalloc(len + 1);
    memcpy(p, uri, len);
    p[len] = '\0';
    *out = p;
    *out_len = len;
    return 0;
}

int uri_to_path(const char *uri, size_t len, bool allow_bare_path, char **out, size_t *out_len,
                struct uri_error *err)
{
    if (allow_bare_path && len > 0 && uri[0] == '/') return bare_path(uri, len, out, out_len, err);

    /* WHATWG: strip leading and trailing C0 controls and spaces, drop every tab and
     * newline. */
    size_t a = 0, z = len;
    while (a < z && (unsigned char)uri[a] <= 0x20)
        a++;
    while (z > a && (unsigned char)uri[z - 1] <= 0x20)
        z--;
    char *s = xmalloc(z - a + 1);
    size_t n = 0;
    for (size_t i = a; i < z; i++)
        if (uri[i] != '\t' && uri[i] != '\n' && uri[i] != '\r') s[n++] = uri[i];
    s[n] = '\0';

    struct parsed p = {0};
    int rc = -EINVAL;

    size_t i = 0;
    if (n > 0 && is_alpha((unsigned char)s[0])) {
        i = 1;
        while (i < n && (is_alpha((unsigned char)s[i]) || is_digit((unsigned char)s[i]) ||
                         s[i] == '+' || s[i] == '-' || s[i] == '.'))
            i++;
    }
    if (i == 0 || i >= n || s[i] != ':') {
        set_err(err, URI_ERR_SYNTAX, "invalid URI: relative URL without a base");
        goto out;
    }
    if (!ieq(s, i, "file")) {
        for (size_t k = 0; k < i; k++)
            if (s[k] >= 'A' && s[k] <= 'Z') s[k] = (char)(s[k] | 0x20);
        set_err(err, URI_ERR_SCHEME, "unsupported path URI scheme `%.*s`", (int)(i > 200 ? 200 : i),
                s);
        goto out;
    }

    /* File state, file slash state and file host state of the WHATWG parser. */
    size_t pos = i + 1;
    if (pos < n && is_slash(s[pos])) {
        pos++;
        if (pos < n && is_slash(s[pos])) {
            pos++;
            size_t q = pos;
            while (q < n && !is_slash(s[q]) && s[q] != '?' && s[q] != '#')
                q++;
            /* The drive-letter quirk: file://C:/x has no host, its path starts at C:. */
            if (!is_drive_letter(s + pos, q - pos)) {
                if (q > pos && parse_host(s + pos, q - pos, &p, err) != 0) goto out;
                pos = q;
                if (pos < n && is_slash(s[pos])) pos++;
            }
        }
    }
    char end = parse_path(s, n, pos, &p);

    if (end == '?') {
        set_err(err, URI_ERR_QUERY, "query parameters are not allowed in path URIs");
        goto out;
    }
    if (end == '#') {
        set_err(err, URI_ERR_FRAGMENT, "fragments are not allowed in path URIs");
        goto out;
    }
    if (p.host) {
        invalid_on_linux(err, URI_ERR_HOST, s, &p);
        goto out;
    }
    if (p.drive) {
        invalid_on_linux(err, URI_ERR_DRIVE, s, &p);
        goto out;
    }

    char *path;
    size_t plen;
    if (decode_bad_path(s, &p, &path, &plen)) {
        /* A relative result would resolve against our cwd; refuse it too. */
        if (plen == 0 || path[0] != '/' || memchr(path, '\0', plen)) {
            free(path);
            invalid_on_linux(err, URI_ERR_PLATFORM, s, &p);
            goto out;
        }
    } else {
        size_t cap = 1;
        for (size_t k = 0; k < p.nsegs; k++)
            cap += p.segs[k].len + 1;
        path = xmalloc(cap);
        plen = 0;
        for (size_t k = 0; k < p.nsegs; k++) {
            path[plen++] = '/';
            plen += pct_decode(s + p.segs[k].off, p.segs[k].len, path + plen);
        }
        path[plen] = '\0';
        if (memchr(path, '\0', plen)) {
            free(path);
            invalid_on_linux(err, URI_ERR_PLATFORM, s, &p);
            goto out;
        }
    }
    *out = path;
    *out_len = plen;
    rc = 0;
out:
    free(p.segs);
    free((char *)p.host);
    free(s);
    return rc;
}

/* True when the WHATWG parser would read path back as different bytes. */
static bool needs_bad_path_form(const char *path, size_t len)
{
    if (len == 0 || path[0] != '/' || memchr(path, '\0', len)) return true;
    size_t i = 1;
    bool first = true;
    for (;;) {
        size_t st = i;
        while (i < len && path[i] != '/')
            i++;
        const char *c = path + st;
        size_t cl = i - st;
        if ((cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.')) return true;
        if (first && is_drive_letter(c, cl)) return true;
        first = false;
        if (i >= len) return false;
        i++;
    }
}

char *uri_from_path(const char *path, size_t len)
{
    struct buf b;
    buf_init(&b);
    if (needs_bad_path_form(path, len)) {
        buf_puts(&b, BAD_PATH_PREFIX);
        char *e = buf_extend(&b, base64_encoded_len(len));
        size_t el = base64_encode(path, len, e);
        /* Standard padded base64 -> base64url without padding. */
        while (el > 0 && e[el - 1] == '=')
            el--;
        for (size_t i = 0; i < el; i++) {
            if (e[i] == '+')
                e[i] = '-';
            else if (e[i] == '/')
                e[i] = '_';
        }
        b.len = b.len - base64_encoded_len(len) + el;
    } else {
        buf_puts(&b, "file://");
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)path[i];
            if (in_encode_set(c))
                put_pct(&b, c);
            else
                buf_putc(&b, (char)c);
        }
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}
