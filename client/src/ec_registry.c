/* ec_registry: the harness's calls to the environment registry (REMOTE.md §4.1, §4.5).
 *
 * One endpoint matters to a harness: POST {base}/cloud/environment/{env}/connect with
 * the harness's Noise public key, answered by a single-use connect bundle (rendezvous
 * URL, the executor key to pin, the registration id the prologue binds, and the
 * authorization string msg 1 carries). The HTTP goes through libcurl's easy interface
 * (blocking, bounded by timeouts; no redirects followed, so the bearer never leaves for
 * another host). The retry policy of §4.5 lives here too, split into pure functions
 * (ec_registry_transient, ec_registry_backoff_ms) that the unit tests call directly. */
#include "ec_registry.h"

#include "proto/noise_key.h"
#include "util/mem.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGISTRY_MAX_BODY (1u << 20)
#define REGISTRY_REQUEST_MS 6000 /* per request (§4.5) */
#define REGISTRY_WINDOW_MS 14000 /* all attempts of one bundle fetch (§4.5) */
#define REGISTRY_MAX_RETRIES 4

void ec_bundle_clear(struct ec_bundle *b)
{
    free(b->url);
    free(b->registration_id);
    free(b->authorization);
    memset(b, 0, sizeof *b);
}

static bool blank(const char *s)
{
    if (!s) return true;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return false;
    return true;
}

int ec_bundle_parse(const char *body, size_t len, const char *environment_id, struct ec_bundle *out,
                    ec_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return ec_fail(err, EC_ERR_PROTOCOL, 0, "registry: connect answer is not a JSON object");
    }
    const char *env = json_string_value(json_object_get(doc, "environment_id"));
    const char *profile = json_string_value(json_object_get(doc, "security_profile"));
    const char *url = json_string_value(json_object_get(doc, "url"));
    const char *reg = json_string_value(json_object_get(doc, "executor_registration_id"));
    const char *auth = json_string_value(json_object_get(doc, "harness_key_authorization"));
    json_t *key = json_object_get(doc, "executor_public_key");
    int rc = 0;
    if (!env || strcmp(env, environment_id) != 0)
        rc = ec_fail(err, EC_ERR_PROTOCOL, 0, "registry: connect answer names environment %s",
                     env ? env : "(none)");
    else if (!profile || strcmp(profile, EC_SECURITY_PROFILE) != 0)
        rc = ec_fail(err, EC_ERR_PROTOCOL, 0, "registry: unsupported security profile %s",
                     profile ? profile : "(none)");
    else if (blank(url) || blank(reg) || blank(auth))
        rc = ec_fail(err, EC_ERR_PROTOCOL, 0,
                     "registry: connect answer lacks url, registration id or authorization");
    else if (noise_ik_public_key_from_json(key, &out->executor_key) != 0)
        rc = ec_fail(err, EC_ERR_PROTOCOL, 0, "registry: bad executor_public_key");
    if (rc == 0) {
        out->url = xstrdup(url);
        out->registration_id = xstrdup(reg);
        out->authorization = xstrdup(auth);
    }
    json_decref(doc);
    return rc;
}

bool ec_registry_transient(int http_status, const char *error_code)
{
    if (http_status == 0) return true; /* connect, timeout or body error */
    if (http_status >= 500 || http_status == 408 || http_status == 429) return true;
    return http_status == 409 && error_code && strcmp(error_code, "environment_offline") == 0;
}

int ec_registry_backoff_ms(unsigned attempt)
{
    unsigned shift = attempt < 4 ? attempt : 4;
    int base = 500 << shift;
    if (base > 5000) base = 5000;
    /* Deterministic jitter up to +50%: spreads harnesses that retry in step without a
     * random source (and keeps tests reproducible). */
    unsigned spread = (attempt * 2654435761u) >> 24; /* 0..255 */
    return base + (int)((unsigned)(base / 2) * spread / 255u);
}

struct body_buf {
    char *p;
    size_t n;
    bool too_big;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct body_buf *b = ud;
    size_t n = size * nmemb;
    if (b->n + n > REGISTRY_MAX_BODY) {
        b->too_big = true;
        return 0; /* aborts the transfer */
    }
    b->p = xrealloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

/* One POST. *status = HTTP status (0 when no answer came); *body is the answer
 * (caller frees, NUL-terminated). Returns 0 when an answer came, else -1 with err. */
static int post_once(const struct ec_registry_req *rq, const char *url, const char *json,
                     int timeout_ms, long *status, char **body, ec_error *err)
{
    *status = 0;
    *body = NULL;
    CURL *h = curl_easy_init();
    if (!h) return ec_fail(err, EC_ERR_TRANSPORT, 0, "registry: cannot initialise libcurl");
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Accept: application/json");
    char *auth = NULL;
    if (rq->bearer_token) {
        size_t n = strlen(rq->bearer_token) + 32;
        auth = xmalloc(n);
        snprintf(auth, n, "Authorization: Bearer %s", rq->bearer_token);
        hdr = curl_slist_append(hdr, auth);
    }
    struct body_buf b = {0};
    char curl_err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (rq->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, rq->ca_file);
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        *body = b.p ? b.p : xstrdup("");
        b.p = NULL;
    } else {
        /* The URL is not echoed: a self-hoster's may carry credentials. */
        rc = ec_fail(err, cc == CURLE_OPERATION_TIMEDOUT ? EC_ERR_TIMEOUT : EC_ERR_TRANSPORT, 0,
                     "registry: %s",
                     b.too_big     ? "answer too large"
                     : curl_err[0] ? curl_err
                                   : curl_easy_strerror(cc));
    }
    free(b.p);
    free(auth);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return rc;
}

int ec_registry_connect(const struct ec_registry_req *rq, const json_t *harness_key,
                        int64_t deadline, struct ec_bundle *out, ec_error *err)
{
    memset(out, 0, sizeof *out);
    /* Base URL trimmed of trailing '/', like the reference. */
    size_t blen = strlen(rq->base_url);
    while (blen > 0 && rq->base_url[blen - 1] == '/')
        blen--;
    size_t ulen = blen + strlen(rq->environment_id) * 3 + 64;
    char *url = xmalloc(ulen);
    int off = snprintf(url, ulen, "%.*s/cloud/environment/", (int)blen, rq->base_url);
    /* The id is one path segment. The reference interpolates it raw, so every byte a
     * segment may hold (RFC 3986 pchar) stays as it is; only the rest ('/', '?', '#',
     * '%', spaces, controls, non-ASCII) is percent-encoded so it cannot change the URL. */
    for (const unsigned char *p = (const unsigned char *)rq->environment_id; *p; p++) {
        bool pchar = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || (*p && strchr("-._~!$&'()*+,;=:@", *p));
        off += snprintf(url + off, ulen - (size_t)off, pchar ? "%c" : "%%%02X", *p);
    }
    snprintf(url + off, ulen - (size_t)off, "/connect");
    json_t *req = json_pack("{s:O}", "harness_public_key", harness_key);
    char *json = json_dumps(req, JSON_COMPACT);
    json_decref(req);

    /* §4.5: a window of 14 s (or less: the caller's deadline) for up to 5 attempts. */
    int64_t window = ec_deadline(REGISTRY_WINDOW_MS);
    if (deadline >= 0 && deadline < window) window = deadline;
    int rc = 0;
    for (unsigned attempt = 0;; attempt++) {
        int left = ec_remaining(window);
        long status = 0;
        char *body = NULL;
        ec_error e = {0};
        const char *code = NULL;
        json_t *doc = NULL;
        rc = post_once(rq, url, json, left < REGISTRY_REQUEST_MS ? left : REGISTRY_REQUEST_MS,
                       &status, &body, &e);
        if (rc == 0 && status == 200) {
            rc = ec_bundle_parse(body, strlen(body), rq->environment_id, out, err);
            free(body);
            break; /* a malformed success is not retried */
        }
        if (rc == 0) {
            doc = json_loads(body, 0, NULL);
            json_t *eo = json_object_get(doc, "error");
            code = json_string_value(json_object_get(eo, "code"));
            const char *msg = json_string_value(json_object_get(eo, "message"));
            ec_fail(&e, status == 401 || status == 403 ? EC_ERR_TRANSPORT : EC_ERR_SERVER, status,
                    "registry refused connect (HTTP %ld%s%s%s%s)", status, code ? ", " : "",
                    code ? code : "", msg ? ": " : "", msg ? msg : "");
            rc = -(int)e.kind;
        }
        bool again = ec_registry_transient((int)status, code) && attempt < REGISTRY_MAX_RETRIES;
        json_decref(doc);
        free(body);
        int delay = ec_registry_backoff_ms(attempt);
        if (!again || ec_remaining(window) <= delay) {
            if (err) *err = e;
            break;
        }
        usleep((useconds_t)delay * 1000);
    }
    free(json);
    free(url);
    return rc;
}
