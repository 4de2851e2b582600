/* http_head: the HTTP/1.x head tokenizer (see http_head.h). The rules are checked
 * here once, so the listener, the registry and the proxy cannot drift apart in what
 * they accept. */
#include "proto/http_head.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

bool http_is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool http_span_eq_ci(struct http_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

struct http_span http_trim(struct http_span s)
{
    while (s.n && (s.p[0] == ' ' || s.p[0] == '\t'))
        s.p++, s.n--;
    while (s.n && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

bool http_list_has(const char *value, size_t len, const char *token)
{
    const char *p = value, *end = value + len;
    while (p && p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (http_span_eq_ci(http_trim((struct http_span){p, (size_t)(stop - p)}), token))
            return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}

/* Splits one "Name: value" line. Returns 0 or -EINVAL when malformed. */
static int split_field(struct http_span line, struct http_span *name, struct http_span *value)
{
    const char *p = line.p, *end = line.p + line.n;
    while (p < end && http_is_tchar((unsigned char)*p))
        p++;
    /* No whitespace before the colon (RFC 9112 5.1), and no obsolete line folding:
     * both are request-smuggling vectors, so a strict peer refuses them. */
    if (p == line.p || p == end || *p != ':') return -EINVAL;
    *name = (struct http_span){line.p, (size_t)(p - line.p)};
    *value = (struct http_span){p + 1, (size_t)(end - p - 1)};
    for (size_t i = 0; i < value->n; i++) {
        unsigned char c = (unsigned char)value->p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) return -EINVAL;
    }
    *value = http_trim(*value);
    return 0;
}

void http_head_scan(const char *data, size_t len, size_t max, http_field_fn fn, void *ctx,
                    struct http_head *h)
{
    memset(h, 0, sizeof *h);
    size_t pos = 0;
    bool calling = fn != NULL;
    while (pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        if (!nl) return;
        struct http_span line = {data + pos, (size_t)(nl - (data + pos))};
        if (line.n && line.p[line.n - 1] == '\r') line.n--;
        pos = (size_t)(nl - data) + 1;
        if (pos > max) return;
        if (!h->has_start) {
            if (line.n == 0) continue;
            h->start = line;
            h->has_start = true;
            continue;
        }
        if (line.n == 0) {
            h->end = pos;
            return;
        }
        struct http_span name, value;
        if (split_field(line, &name, &value) < 0) {
            h->bad_field = true;
            calling = false;
        } else if (calling) {
            h->stopped = fn(ctx, name, value);
            if (h->stopped) calling = false;
        }
    }
}

static int parse_version(struct http_span v, bool *http10)
{
    if (v.n != 8 || memcmp(v.p, "HTTP/1.", 7) != 0 || (v.p[7] != '0' && v.p[7] != '1'))
        return -EINVAL;
    if (http10) *http10 = v.p[7] == '0';
    return 0;
}

int http_parse_request_line(struct http_span line, struct http_span *method,
                            struct http_span *target, bool *http10)
{
    const char *p = line.p, *end = line.p + line.n;
    const char *m = p;
    while (p < end && http_is_tchar((unsigned char)*p))
        p++;
    if (p == m || p == end || *p != ' ') return -EINVAL;
    *method = (struct http_span){m, (size_t)(p - m)};
    const char *t = ++p;
    while (p < end && (unsigned char)*p > 0x20 && *p != 0x7f)
        p++;
    if (p == t || p == end || *p != ' ') return -EINVAL;
    *target = (struct http_span){t, (size_t)(p - t)};
    return parse_version((struct http_span){p + 1, (size_t)(end - p - 1)}, http10);
}

int http_parse_status_line(struct http_span line, bool *http10, struct http_span *reason)
{
    const char *p = line.p;
    if (line.n < 12 || parse_version((struct http_span){p, 8}, http10) < 0 || p[8] != ' ')
        return -EINVAL;
    for (int i = 9; i < 12; i++)
        if (p[i] < '0' || p[i] > '9') return -EINVAL;
    if (line.n > 12 && p[12] != ' ') return -EINVAL;
    if (reason)
        *reason = line.n > 13 ? (struct http_span){p + 13, line.n - 13} : (struct http_span){"", 0};
    return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
}
