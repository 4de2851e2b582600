/* registry: the environment registry client (see registry.h).
 *
 * Each call is one curl easy handle on the shared multi (curl_loop): POST with the
 * JSON body, the auth header lines and Content-Type/Accept; the
 * response body is collected up to REGISTRY_MAX_BODY. Redirects are never followed
 * (CURLOPT_FOLLOWLOCATION stays off and a 3xx is an error). /validate runs under
 * its 10 s timeout; /register has a generous one so a stalled registry cannot
 * wedge startup forever. Error texts carry the HTTP status only: bodies may echo a
 * secret (the authorization) and are never surfaced. */
#include "remote/registry.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/env_vars.h"
#include "remote/rv_ws.h"
#include "remote/sigv4.h"
#include "outbound/curl_loop.h"
#include "util/buf.h"
#include "util/mem.h"

#define REGISTRY_MAX_BODY (1u << 20)
#define REGISTRY_REGISTER_TIMEOUT_MS 30000

struct registry_client {
    uv_loop_t *loop;
    char *base; /* base URL without trailing '/' */
    char *env_id;
    char *env_escaped; /* environment id as one percent-encoded path segment */
    char **auth;       /* owned header lines */
};

struct registry_call {
    struct curl_loop_job job;
    struct registry_client *rc;
    struct curl_slist *hdrs;
    char *body;
    struct buf resp;
    bool too_big;
    char curl_err[CURL_ERROR_SIZE]; /* libcurl's words for a failed transfer */
    bool is_validate;
    bool is_direct;
    registry_register_cb reg_cb;
    registry_validate_cb val_cb;
    void *arg;
};

void registry_registration_clear(struct registry_registration *r)
{
    free(r->environment_id);
    free(r->url);
    free(r->registration_id);
    memset(r, 0, sizeof *r);
}

static char *dump_compact(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static json_t *key_object(const char *key_json)
{
    json_t *k = json_loads(key_json, 0, NULL);
    if (k && !json_is_object(k)) {
        json_decref(k);
        k = NULL;
    }
    return k;
}

char *registry_register_body(const char *key_json)
{
    json_t *k = key_object(key_json);
    if (!k) return NULL;
    return dump_compact(json_pack("{s:s,s:o}", "security_profile", REGISTRY_SECURITY_PROFILE,
                                  "executor_public_key", k));
}

char *registry_validate_body(const char *registration_id, const char *harness_key_json,
                             const char *authorization)
{
    json_t *k = key_object(harness_key_json);
    if (!k) return NULL;
    return dump_compact(json_pack("{s:s,s:o,s:s}", "executor_registration_id", registration_id,
                                  "harness_public_key", k, "harness_key_authorization",
                                  authorization));
}

static bool blank(const char *s)
{
    if (!s) return true;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

/* Takes the checked members into out; NULL why means they passed. */
static int registration_take(const char *why_in, const char **why, const char *env, const char *url,
                             const char *reg, struct registry_registration *out)
{
    if (why_in) {
        *why = why_in;
        return -EPROTO;
    }
    out->environment_id = xstrdup(env);
    out->url = xstrdup(url);
    out->registration_id = xstrdup(reg);
    return 0;
}

int registry_parse_register(const char *body, size_t n, const char *environment_id,
                            struct registry_registration *out, const char **why)
{
    memset(out, 0, sizeof *out);
    json_t *j = json_loadb(body, n, 0, NULL);
    const char *env = json_string_value(json_object_get(j, "environment_id"));
    const char *url = json_string_value(json_object_get(j, "url"));
    const char *prof = json_string_value(json_object_get(j, "security_profile"));
    const char *reg = json_string_value(json_object_get(j, "executor_registration_id"));
    const char *bad = NULL;
    if (!json_is_object(j))
        bad = "the registry's answer is not a JSON object";
    else if (!env || strcmp(env, environment_id) != 0)
        bad = "the registry answered for a different environment";
    else if (!prof || strcmp(prof, REGISTRY_SECURITY_PROFILE) != 0)
        bad = "the registry answered with an unsupported security profile";
    else if (blank(url))
        bad = "the registry's answer has no rendezvous url";
    else if (blank(reg))
        bad = "the registry's answer has no executor_registration_id";
    int r = registration_take(bad, why, env, url, reg, out);
    json_decref(j);
    return r;
}

/* Whether a parsed URL's host is loopback (localhost, 127.0.0.0/8, ::1). */
static bool loopback_host(const char *h)
{
    if (strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0) return true;
    return strncmp(h, "127.", 4) == 0 && strspn(h, "0123456789.") == strlen(h);
}

int registry_parse_direct_register(const char *body, size_t n, const char *environment_id,
                                   struct registry_registration *out, const char **why)
{
    memset(out, 0, sizeof *out);
    json_t *j = json_loadb(body, n, 0, NULL);
    const char *env = json_string_value(json_object_get(j, "environment_id"));
    const char *tr = json_string_value(json_object_get(j, "transport"));
    const char *url = json_string_value(json_object_get(j, "url"));
    const char *reg = json_string_value(json_object_get(j, "registration_id"));
    struct rv_ws_url u;
    const char *bad = NULL;
    if (!json_is_object(j))
        bad = "the registry's answer is not a JSON object";
    else if (!env || strcmp(env, environment_id) != 0)
        bad = "the registry answered for a different environment";
    else if (!tr || strcmp(tr, REGISTRY_DIRECT_TRANSPORT) != 0)
        bad = "the registry answered with an unsupported transport";
    else if (blank(reg))
        bad = "the registry's answer has no registration_id";
    else if (blank(url))
        bad = "the registry's answer has no url";
    else if (rv_ws_parse_url(url, &u) < 0 || (!u.tls && !loopback_host(u.host)))
        bad = "the registry's direct url must be wss:// (or ws:// to a loopback host)";
    int r = registration_take(bad, why, env, url, reg, out);
    json_decref(j);
    return r;
}

bool registry_parse_validate(const char *body, size_t n)
{
    json_t *j = json_loadb(body, n, 0, NULL);
    bool ok = json_is_object(j) && json_is_true(json_object_get(j, "valid"));
    json_decref(j);
    return ok;
}

/* Percent-encodes everything outside RFC 3986 unreserved characters. */
static char *escape_segment(const char *s)
{
    struct buf b;
    buf_init(&b);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~')
            buf_putc(&b, (char)*p);
        else
            buf_printf(&b, "%%%02X", *p);
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

struct registry_client *registry_client_new(uv_loop_t *loop, const char *base_url,
                                            const char *environment_id,
                                            const char *const *auth_headers)
{
    struct registry_client *rc = xcalloc(1, sizeof *rc);
    rc->loop = loop;
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    rc->base = xstrndup(base_url, n);
    rc->env_id = xstrdup(environment_id);
    rc->env_escaped = escape_segment(environment_id);
    size_t nh = 0;
    for (const char *const *h = auth_headers; h && *h; h++)
        nh++;
    rc->auth = xcalloc(nh + 1, sizeof *rc->auth);
    for (size_t i = 0; i < nh; i++)
        rc->auth[i] = xstrdup(auth_headers[i]);
    return rc;
}

void registry_client_free(struct registry_client *rc)
{
    if (!rc) return;
    free(rc->base);
    free(rc->env_id);
    free(rc->env_escaped);
    for (char **h = rc->auth; *h; h++) {
        /* Headers may hold a bearer token: wipe before freeing. */
        memset(*h, 0, strlen(*h));
        free(*h);
    }
    free(rc->auth);
    free(rc);
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *user)
{
    struct registry_call *c = user;
    size_t n = size * nmemb;
    if (c->resp.len + n > REGISTRY_MAX_BODY) {
        c->too_big = true;
        return 0; /* aborts the transfer */
    }
    buf_append(&c->resp, p, n);
    return n;
}

static void call_free(struct registry_call *c)
{
    if (c->job.easy) curl_dl_fns.easy_cleanup(c->job.easy);
    curl_dl_fns.slist_free_all(c->hdrs);
    if (c->body) {
        memset(c->body, 0, strlen(c->body)); /* may hold an authorization */
        free(c->body);
    }
    buf_free(&c->resp);
    free(c);
}

static void call_done(struct curl_loop_job *job, CURLcode rc)
{
    struct registry_call *c = (struct registry_call *)job;
    long status = 0;
    curl_dl_fns.easy_getinfo(job->easy, CURLINFO_RESPONSE_CODE, &status);
    bool ok = rc == CURLE_OK && status >= 200 && status < 300;
    if (c->is_validate) {
        enum registry_verdict v =
            ok && registry_parse_validate(c->resp.data ? c->resp.data : "", c->resp.len)
                ? REGISTRY_VALID
            : rc == CURLE_OK && status == 401 ? REGISTRY_CREDENTIALS_REJECTED
                                              : REGISTRY_INVALID;
        registry_validate_cb cb = c->val_cb;
        void *arg = c->arg;
        call_free(c);
        cb(arg, v);
        return;
    }
    struct registry_registration reg = {0};
    const char *why = NULL;
    char why_buf[CURL_ERROR_SIZE + 64];
    int result;
    if (rc != CURLE_OK) {
        result = -EIO;
        why = rc == CURLE_OPERATION_TIMEDOUT ? "the registry did not answer in time"
              : c->too_big                   ? "the registry's answer is too large"
                                             : "the registry could not be reached";
        if (rc != CURLE_OPERATION_TIMEDOUT && !c->too_big && c->curl_err[0]) {
            /* Say why, in libcurl's words ("Failed to connect to ... port 9: Couldn't
             * connect to server"): the operator's next step depends on it. */
            snprintf(why_buf, sizeof why_buf, "%s (%s)", why, c->curl_err);
            why = why_buf;
        }
    } else if (!ok) {
        result = status == 401 || status == 403 ? -EACCES : -EPROTO;
        why = status == 401 || status == 403 ? "the registry refused our credentials"
              : status >= 300 && status < 400
                  ? "the registry answered with a redirect (not followed)"
                  : "the registry answered with an error status";
    } else {
        result = (c->is_direct ? registry_parse_direct_register : registry_parse_register)(
            c->resp.data ? c->resp.data : "", c->resp.len, c->rc->env_id, &reg, &why);
    }
    registry_register_cb cb = c->reg_cb;
    void *arg = c->arg;
    call_free(c);
    cb(arg, result, (int)status, result == 0 ? &reg : NULL, why);
    registry_registration_clear(&reg);
}

static struct registry_call *start(struct registry_client *rc, const char *what, char *body,
                                   long timeout_ms, const char *first_header,
                                   const char *const *signed_headers)
{
    const char *why;
    if (!body || curl_dl_load(&why) < 0) {
        free(body);
        return NULL;
    }
    struct registry_call *c = xcalloc(1, sizeof *c);
    c->rc = rc;
    c->body = body;
    buf_init(&c->resp);
    char url[4096];
    snprintf(url, sizeof url, "%s/cloud/environment/%s/%s", rc->base, rc->env_escaped, what);
    /* The headers and their order as 0.169.0 sends them (REMOTE.md §8.2, §8.5a): no
     * traceparent without a tracing exporter, Accept: any. */
    if (first_header) c->hdrs = curl_dl_fns.slist_append(c->hdrs, first_header);
    c->hdrs = curl_dl_fns.slist_append(c->hdrs, "Content-Type: application/json");
    for (const char *const *h = signed_headers; h && *h; h++)
        c->hdrs = curl_dl_fns.slist_append(c->hdrs, *h);
    for (char **h = rc->auth; *h; h++)
        c->hdrs = curl_dl_fns.slist_append(c->hdrs, *h);
    c->hdrs = curl_dl_fns.slist_append(c->hdrs, "Accept: */*");
    CURL *e = c->job.easy = curl_dl_fns.easy_init();
    if (!e) {
        call_free(c);
        return NULL;
    }
    curl_dl_fns.easy_setopt(e, CURLOPT_URL, url);
    curl_dl_fns.easy_setopt(e, CURLOPT_ERRORBUFFER, c->curl_err);
    curl_dl_fns.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_dl_fns.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_dl_fns.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    /* A custom CA bundle as the reference takes it (CODEX_CA_CERTIFICATE, else
     * SSL_CERT_FILE), then CURL_CA_BUNDLE: libcurl's built-in bundle path would
     * otherwise win over the variable OpenSSL alone honours (the rendezvous socket,
     * transport/tls.c, does). */
    const char *ca = env_vars.codex_ca_certificate;
    if (!ca || !*ca) ca = env_vars.ssl_cert_file;
    if (!ca || !*ca) ca = env_vars.curl_ca_bundle;
    if (ca && *ca) curl_dl_fns.easy_setopt(e, CURLOPT_CAINFO, ca);
    curl_dl_fns.easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
    curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
    curl_dl_fns.easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(c->body));
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_dl_fns.easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_dl_fns.easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_dl_fns.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    c->job.done = call_done;
    if (curl_loop_add(rc->loop, &c->job) < 0) {
        call_free(c);
        return NULL;
    }
    return c;
}

struct registry_call *registry_register(struct registry_client *rc, const char *key_json,
                                        registry_register_cb cb, void *arg)
{
    struct registry_call *c = start(rc, "register", registry_register_body(key_json),
                                    REGISTRY_REGISTER_TIMEOUT_MS, NULL, NULL);
    if (!c) return NULL;
    c->reg_cb = cb;
    c->arg = arg;
    return c;
}

struct registry_call *registry_validate(struct registry_client *rc, const char *registration_id,
                                        const char *stream_id, const char *harness_key_json,
                                        const char *authorization, registry_validate_cb cb,
                                        void *arg)
{
    char sh[200];
    snprintf(sh, sizeof sh, "x-codex-noise-stream-id: %s", stream_id);
    struct registry_call *c = start(
        rc, "validate", registry_validate_body(registration_id, harness_key_json, authorization),
        REGISTRY_VALIDATE_TIMEOUT_MS, sh, NULL);
    if (!c) return NULL;
    c->is_validate = true;
    c->val_cb = cb;
    c->arg = arg;
    return c;
}

struct registry_call *registry_direct_register(struct registry_client *rc,
                                               const struct sigv4_key *key, registry_register_cb cb,
                                               void *arg)
{
    static const char body[] = "{\"transport\":\"" REGISTRY_DIRECT_TRANSPORT "\"}";
    /* What goes on the wire, to sign it: the Host header is set explicitly so curl
     * sends exactly the value signed (it would drop a default port). */
    const char *p = strstr(rc->base, "://");
    if (!p) return NULL;
    p += 3;
    size_t hn = strcspn(p, "/?#");
    char host[300], target[4096];
    if (hn == 0 || hn >= sizeof host) return NULL;
    memcpy(host, p, hn);
    host[hn] = '\0';
    int tn = snprintf(target, sizeof target, "%.*s/cloud/environment/%s/direct/register",
                      (int)strcspn(p + hn, "?#"), p + hn, rc->env_escaped);
    if (tn < 0 || (size_t)tn >= sizeof target) return NULL;
    if (target[0] != '/') return NULL;
    struct sigv4_request sr = {.method = "POST",
                               .host = host,
                               .target = target,
                               .content_type = "application/json",
                               .body = (const uint8_t *)body,
                               .body_len = sizeof body - 1};
    char date[SIGV4_DATE_LEN + 1], auth[1024];
    if (sigv4_sign(key, &sr, time(NULL), date, auth, sizeof auth) < 0) return NULL;
    char h_date[64], h_auth[1100], h_host[320], h_tok[4200];
    snprintf(h_host, sizeof h_host, "Host: %s", host);
    snprintf(h_date, sizeof h_date, "x-amz-date: %s", date);
    snprintf(h_auth, sizeof h_auth, "authorization: %s", auth);
    const char *hdrs[5] = {h_date, h_auth, NULL, NULL, NULL};
    size_t k = 2;
    if (key->session_token && *key->session_token) {
        snprintf(h_tok, sizeof h_tok, "x-amz-security-token: %s", key->session_token);
        hdrs[k++] = h_tok;
    }
    hdrs[k++] = h_host;
    struct registry_call *c =
        start(rc, "direct/register", xstrdup(body), REGISTRY_REGISTER_TIMEOUT_MS, NULL, hdrs);
    memset(h_tok, 0, sizeof h_tok);
    if (!c) return NULL;
    c->is_direct = true;
    c->reg_cb = cb;
    c->arg = arg;
    return c;
}

void registry_call_cancel(struct registry_call *call)
{
    if (!call) return;
    curl_loop_remove(&call->job);
    call_free(call);
}
