/* http_client: one outbound HTTP(S) call (see http_client.h; PROTOCOL.md §7 for
 * what the reference does). Transfers run on libcurl's multi interface on the loop
 * (curl_loop.c). Buffered, the body is collected up to HTTP_BUFFERED_MAX; streamed,
 * each curl write is handed to the owner as it comes (curl reads up to its 512 KiB
 * buffer and hands it over 16 KiB at a time), and the owner may pause the call
 * (CURL_WRITEFUNC_PAUSE: curl keeps the bytes and offers them again), so at most one
 * curl buffer per call is held. */
#include "http/http_client.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "util/mem.h"

#define HTTP_CURL_BUFFER (512 * 1024) /* one write callback, one delta, at most this */
#define HTTP_MAX_REDIRECTS 10

/* ---- validation ------------------------------------------------------------------------ */

static bool is_token(const char *s)
{
    if (!*s) return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch)) continue;
        return false;
    }
    return true;
}

static bool valid_header_value(const char *v)
{
    for (; *v; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) continue;
        return false;
    }
    return true;
}

/* The URL's scheme (lowercased into out), or false for a relative URL. */
static bool url_scheme(const char *url, char *out, size_t n)
{
    const char *p = url;
    if (!isalpha((unsigned char)*p)) return false;
    while (*p && (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.'))
        p++;
    if (*p != ':' || (size_t)(p - url) >= n) return false;
    for (size_t i = 0; url + i < p; i++)
        out[i] = (char)tolower((unsigned char)url[i]);
    out[p - url] = 0;
    return true;
}

/* The reference's (WHATWG URL parser) words for the common cases. */
static const char *url_error_text(CURLUcode uc)
{
    switch (uc) {
    case CURLUE_NO_HOST: return "empty host";
    case CURLUE_BAD_PORT_NUMBER: return "invalid port number";
    case CURLUE_BAD_IPV6: return "invalid IPv6 address";
    case CURLUE_BAD_HOSTNAME: return "invalid domain character";
    default: return curl_dl_fns.url_strerror(uc);
    }
}

/* The hosts that go direct whatever the proxy variables say: literal loopback always,
 * plus the environment's NO_PROXY (read before no_proxy, and set-but-empty counts, as
 * the reference reads them). Setting CURLOPT_NOPROXY replaces libcurl's own reading
 * of those variables, so they must be folded in here or a NO_PROXY host would go
 * through the proxy. A `*` entry anywhere means no proxy at all, which libcurl only
 * understands as the whole list. Returns a heap string the caller frees. */
static char *noproxy_list(void)
{
    const char *env = env_vars.no_proxy;
    if (!env) env = env_vars.no_proxy_lower;
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "localhost,127.0.0.0/8,::1");
    for (const char *p = env ? env : ""; *p;) {
        size_t n = strcspn(p, ",");
        const char *s = p, *e = p + n;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (e - s == 1 && *s == '*') {
            buf_reset(&b);
            buf_puts(&b, "*");
            break;
        }
        if (e > s) {
            buf_putc(&b, ',');
            buf_append(&b, s, (size_t)(e - s));
        }
        p += n;
        if (*p == ',') p++;
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

int http_call_check(const char *method, const char *url, char *err, size_t errlen)
{
    const char *why = NULL;
    if (curl_dl_load(&why) < 0) {
        snprintf(err, errlen, "failed to build http/request client: %s", why);
        return -ENOSYS;
    }
    if (!is_token(method)) {
        snprintf(err, errlen, "http/request method is invalid: invalid HTTP method");
        return -EINVAL;
    }
    char scheme[32];
    if (!url_scheme(url, scheme, sizeof scheme)) {
        snprintf(err, errlen, "http/request url is invalid: relative URL without a base");
        return -EINVAL;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        snprintf(err, errlen, "http/request only supports http and https URLs, got %s", scheme);
        return -EINVAL;
    }
    CURLU *cu = curl_dl_fns.url();
    CURLUcode uc = curl_dl_fns.url_set(cu, CURLUPART_URL, url, 0);
    curl_dl_fns.url_cleanup(cu);
    if (uc != CURLUE_OK) {
        snprintf(err, errlen, "http/request url is invalid: %s", url_error_text(uc));
        return -EINVAL;
    }
    return 0;
}

int http_call_add_header(struct http_call *c, const char *name, const char *value,
                         const char *env_var, char *err, size_t errlen)
{
    if (!is_token(name)) {
        snprintf(err, errlen, "http/request header name is invalid: invalid HTTP header name");
        return -EINVAL;
    }
    const char *env = NULL;
    if (env_var) {
        env = getenv(env_var);
        if (!env) {
            snprintf(err, errlen,
                     "http/request header %s requires executor environment variable %s", name,
                     env_var);
            return -EINVAL;
        }
    }
    struct buf val;
    buf_init(&val);
    if (value) buf_puts(&val, value);
    if (env) buf_puts(&val, env);
    buf_putc(&val, '\0');
    if (!valid_header_value(val.data)) {
        buf_free(&val);
        snprintf(err, errlen,
                 "http/request header value is invalid for %s: failed to parse header value", name);
        return -EINVAL;
    }
    struct buf line;
    buf_init(&line);
    for (const char *p = name; *p; p++)
        buf_putc(&line, (char)tolower((unsigned char)*p));
    /* curl drops "name:" with no value; "name;" sends it empty. */
    if (val.len > 1)
        buf_printf(&line, ": %s", val.data);
    else
        buf_putc(&line, ';');
    buf_putc(&line, '\0');
    c->hdrs = curl_dl_fns.slist_append(c->hdrs, line.data);
    buf_free(&val);
    buf_free(&line);
    return 0;
}

/* ---- curl callbacks ------------------------------------------------------------------- */

static bool visible_header_value(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == '\t' || (ch >= 0x20 && ch != 0x7f)) continue;
        return false;
    }
    return true;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
    struct http_call *r = ud;
    size_t n = size * nitems;
    size_t len = n;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (1xx, a redirect hop, or the final one) starts afresh. */
        json_decref(r->resp_headers);
        r->resp_headers = json_array();
        return n;
    }
    if (len == 0) {
        long code = 0;
        curl_dl_fns.easy_getinfo(r->job.easy, CURLINFO_RESPONSE_CODE, &code);
        r->status = code;
        char *redirect = NULL;
        if (r->follow) curl_dl_fns.easy_getinfo(r->job.easy, CURLINFO_REDIRECT_URL, &redirect);
        bool final = code >= 200 && !(code >= 300 && code < 400 && redirect);
        if (final && r->stream) r->events->response(r);
        return n;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon || !r->resp_headers) return n;
    size_t nl = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (!visible_header_value(v, vl)) return n; /* dropped, as the reference does */
    char *name = xstrndup(line, nl);
    for (char *p = name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_array_append_new(r->resp_headers, json_pack("{s:s, s:s%}", "name", name, "value", v, vl));
    free(name);
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct http_call *r = ud;
    size_t n = size * nmemb;
    if (!r->stream) {
        if (r->body_buf.len + n > HTTP_BUFFERED_MAX) {
            r->too_big = true;
            return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        }
        buf_append(&r->body_buf, data, n);
        return n;
    }
    if (!r->events->body(r, data, n)) {
        r->paused = true;
        return CURL_WRITEFUNC_PAUSE; /* curl keeps these bytes and offers them again */
    }
    return n;
}

static bool body_error(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_WRITE_ERROR ||
           rc == CURLE_BAD_CONTENT_ENCODING || rc == CURLE_HTTP2_STREAM || rc == CURLE_HTTP2 ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING;
}

static void on_done(struct curl_loop_job *job, CURLcode rc)
{
    struct http_call *c = (struct http_call *)job;
    enum http_outcome o = HTTP_SEND_FAILED;
    if (rc == CURLE_OK)
        o = HTTP_OK;
    else if (c->too_big)
        o = HTTP_TOO_BIG;
    else if (c->status >= 200 && rc == CURLE_OPERATION_TIMEDOUT)
        o = HTTP_BODY_TIMEOUT;
    else if (c->status >= 200 && body_error(rc))
        o = HTTP_BODY_BROKEN;
    c->events->done(c, o);
}

/* ---- the call ------------------------------------------------------------------------- */

/* The curl handle for r: method, URL, headers and body, redirects, proxies, trust,
 * the callbacks; timeout_ms < 0 for none. */
static CURL *easy_for(struct http_call *r, const char *method, const char *url, long timeout_ms)
{
    CURL *e = curl_dl_fns.easy_init();
    curl_dl_fns.easy_setopt(e, CURLOPT_URL, url);
    curl_dl_fns.easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0) curl_dl_fns.easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_dl_fns.easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    if (r->body) {
        curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDS, (char *)r->body);
        curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    }
    curl_dl_fns.easy_setopt(e, CURLOPT_FOLLOWLOCATION, r->follow ? 1L : 0L);
    curl_dl_fns.easy_setopt(e, CURLOPT_MAXREDIRS, (long)HTTP_MAX_REDIRECTS);
    curl_dl_fns.easy_setopt(e, CURLOPT_AUTOREFERER, 1L);
    /* A followed redirect keeps the method (the reference does not turn POST into GET). */
    curl_dl_fns.easy_setopt(e, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    curl_dl_fns.easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
    char *noproxy = noproxy_list();
    curl_dl_fns.easy_setopt(e, CURLOPT_NOPROXY, noproxy); /* libcurl keeps its own copy */
    free(noproxy);
    curl_dl_fns.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_dl_fns.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_dl_fns.easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_dl_fns.easy_setopt(e, CURLOPT_BUFFERSIZE, (long)HTTP_CURL_BUFFER);
    if (timeout_ms >= 0) curl_dl_fns.easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    /* The standard curl / OpenSSL variables name extra trust (a private CA): libcurl
     * itself reads none of them, only its built-in bundle path. */
    const char *ca = env_vars.curl_ca_bundle;
    if (!ca || !*ca) ca = env_vars.ssl_cert_file;
    if (ca && *ca) curl_dl_fns.easy_setopt(e, CURLOPT_CAINFO, ca);
    const char *cadir = env_vars.ssl_cert_dir;
    if (cadir && *cadir) curl_dl_fns.easy_setopt(e, CURLOPT_CAPATH, cadir);
    curl_dl_fns.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_dl_fns.easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEDATA, r);
    return e;
}

void http_call_init(struct http_call *c, const struct http_call_events *events, bool stream,
                    bool follow)
{
    memset(c, 0, sizeof *c);
    c->events = events;
    c->stream = stream;
    c->follow = follow;
    buf_init(&c->body_buf);
}

void http_call_free(struct http_call *c)
{
    if (c->job.easy) curl_dl_fns.easy_cleanup(c->job.easy);
    c->job.easy = NULL;
    curl_dl_fns.slist_free_all(c->hdrs);
    c->hdrs = NULL;
    free(c->body);
    c->body = NULL;
    buf_free(&c->body_buf);
    json_decref(c->resp_headers);
    c->resp_headers = NULL;
}

int http_call_start(struct http_call *c, uv_loop_t *loop, const char *method, const char *url,
                    long timeout_ms)
{
    c->hdrs = curl_dl_fns.slist_append(c->hdrs, "Expect:"); /* no 100-continue round trip */
    c->job.easy = easy_for(c, method, url, timeout_ms);
    c->job.done = on_done;
    return curl_loop_add(loop, &c->job);
}

void http_call_resume(struct http_call *c)
{
    c->paused = false;
    curl_loop_unpause(&c->job);
}

void http_call_abort(struct http_call *c)
{
    curl_loop_remove(&c->job);
}
