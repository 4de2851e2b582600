/* sigv4: AWS SigV4 header signing (see sigv4.h).
 *
 * Builds the canonical request, the string to sign and the derived signing key
 * (HMAC chain over date, region, service, "aws4_request") with OpenSSL's one-shot
 * HMAC and EVP digests. Intermediate secrets are wiped before returning. */
#include "remote/sigv4.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hex.h"
#include "util/buf.h"
#include "util/mem.h"

static void sha256_hex(const void *p, size_t n, char out[65])
{
    uint8_t d[32];
    unsigned dl = 0;
    EVP_Digest(p, n, d, &dl, EVP_sha256(), NULL);
    hex_encode(d, 32, out);
}

static void hmac(const uint8_t *key, size_t kn, const char *msg, size_t mn, uint8_t out[32])
{
    unsigned ol = 32;
    HMAC(EVP_sha256(), key, (int)kn, (const unsigned char *)msg, mn, out, &ol);
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

/* RFC 3986 encoding as SigV4 wants it (uppercase hex); keep_slash for paths. */
static void uri_encode(struct buf *b, const char *p, size_t n, bool keep_slash)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (unreserved(c) || (keep_slash && c == '/'))
            buf_putc(b, (char)c);
        else
            buf_printf(b, "%%%02X", c);
    }
}

/* Percent-decodes p[0..n) into a new string (an invalid escape stays literal). */
static char *uri_decode(const char *p, size_t n, size_t *out_n)
{
    char *o = xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (p[i] == '%' && i + 2 < n && (h = hex_value((unsigned char)p[i + 1])) >= 0 &&
            (l = hex_value((unsigned char)p[i + 2])) >= 0) {
            o[k++] = (char)(h * 16 + l);
            i += 2;
        } else {
            o[k++] = p[i];
        }
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

struct qparam {
    char *enc; /* "name=value", both encoded */
    size_t name_len;
};

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->enc, y->enc, n);
    if (c) return c;
    if (x->name_len != y->name_len) return x->name_len < y->name_len ? -1 : 1;
    return strcmp(x->enc + x->name_len, y->enc + y->name_len);
}

/* The canonical query string of q[0..n): decoded, re-encoded, sorted by name then value. */
static void canonical_query(struct buf *out, const char *q, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (q[i] == '&') count++;
    struct qparam *ps = xcalloc(count + 1, sizeof *ps);
    size_t np = 0;
    const char *p = q, *end = q + n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        if (!amp) amp = end;
        if (amp > p) {
            const char *eq = memchr(p, '=', (size_t)(amp - p));
            const char *ne = eq ? eq : amp;
            size_t dn, dv;
            char *name = uri_decode(p, (size_t)(ne - p), &dn);
            char *val = eq ? uri_decode(eq + 1, (size_t)(amp - eq - 1), &dv) : xstrdup("");
            if (!eq) dv = 0;
            struct buf e;
            buf_init(&e);
            uri_encode(&e, name, dn, false);
            ps[np].name_len = e.len;
            buf_putc(&e, '=');
            uri_encode(&e, val, dv, false);
            buf_putc(&e, '\0');
            ps[np++].enc = buf_steal(&e);
            free(name);
            free(val);
        }
        p = amp + 1;
    }
    qsort(ps, np, sizeof *ps, qparam_cmp);
    for (size_t i = 0; i < np; i++) {
        if (i) buf_putc(out, '&');
        buf_puts(out, ps[i].enc);
        free(ps[i].enc);
    }
    free(ps);
}

int sigv4_sign(const struct sigv4_key *k, const struct sigv4_request *r, time_t t,
               char amz_date[SIGV4_DATE_LEN + 1], char *auth, size_t auth_n)
{
    if (!k || !r || !k->access_key || !k->secret_key || !k->region || !k->service || !r->method ||
        !r->host || !r->target || r->target[0] != '/' || (r->body_len && !r->body))
        return -EINVAL;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) return -EINVAL;
    strftime(amz_date, SIGV4_DATE_LEN + 1, "%Y%m%dT%H%M%SZ", &tm);
    char date[9];
    memcpy(date, amz_date, 8);
    date[8] = '\0';
    bool token = k->session_token && *k->session_token;

    /* The canonical request. */
    struct buf cr;
    buf_init(&cr);
    buf_printf(&cr, "%s\n", r->method);
    size_t pn = strcspn(r->target, "?#");
    uri_encode(&cr, r->target, pn, true);
    buf_putc(&cr, '\n');
    if (r->target[pn] == '?') {
        const char *q = r->target + pn + 1;
        canonical_query(&cr, q, strcspn(q, "#"));
    }
    buf_putc(&cr, '\n');
    const char *signed_headers;
    if (r->content_type) buf_printf(&cr, "content-type:%s\n", r->content_type);
    buf_printf(&cr, "host:%s\nx-amz-date:%s\n", r->host, amz_date);
    if (token) buf_printf(&cr, "x-amz-security-token:%s\n", k->session_token);
    if (r->content_type)
        signed_headers = token ? "content-type;host;x-amz-date;x-amz-security-token"
                               : "content-type;host;x-amz-date";
    else
        signed_headers = token ? "host;x-amz-date;x-amz-security-token" : "host;x-amz-date";
    char ph[65];
    sha256_hex(r->body_len ? (const void *)r->body : "", r->body_len, ph);
    buf_printf(&cr, "\n%s\n%s", signed_headers, ph);

    /* The string to sign. */
    char crh[65];
    sha256_hex(cr.data, cr.len, crh);
    buf_free(&cr);
    char scope[256];
    int sn = snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, k->region, k->service);
    if (sn < 0 || (size_t)sn >= sizeof scope) return -EINVAL;
    struct buf sts;
    buf_init(&sts);
    buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, crh);

    /* The signing key and the signature. */
    size_t skn = strlen(k->secret_key) + 4;
    char *sk = xmalloc(skn + 1);
    snprintf(sk, skn + 1, "AWS4%s", k->secret_key);
    uint8_t a[32], b[32];
    hmac((const uint8_t *)sk, skn, date, strlen(date), a);
    OPENSSL_cleanse(sk, skn);
    free(sk);
    hmac(a, 32, k->region, strlen(k->region), b);
    hmac(b, 32, k->service, strlen(k->service), a);
    hmac(a, 32, "aws4_request", 12, b);
    hmac(b, 32, sts.data, sts.len, a);
    buf_free(&sts);
    char sig[65];
    hex_encode(a, 32, sig);
    OPENSSL_cleanse(a, sizeof a);
    OPENSSL_cleanse(b, sizeof b);
    int n =
        snprintf(auth, auth_n, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                 k->access_key, scope, signed_headers, sig);
    return n < 0 || (size_t)n >= auth_n ? -ENOSPC : 0;
}
