/* fleet_sign: tokens, signed rendezvous URLs and authorizations (see fleet_sign.h). */
#include "fleet/fleet_sign.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hex.h"

const char *fleet_role_name(enum fleet_role r)
{
    return r == FLEET_ROLE_HARNESS ? "harness" : "executor";
}

int fleet_role_parse(const char *s, enum fleet_role *out)
{
    if (strcmp(s, "executor") == 0)
        *out = FLEET_ROLE_EXECUTOR;
    else if (strcmp(s, "harness") == 0)
        *out = FLEET_ROLE_HARNESS;
    else
        return -EINVAL;
    return 0;
}

static bool id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

bool fleet_env_id_ok(const char *s, size_t n)
{
    if (n == 0 || n > FLEET_MAX_ID) return false;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
    for (size_t i = 0; i < n; i++)
        if (!id_char(s[i])) return false;
    return true;
}

bool fleet_env_pattern_ok(const char *p)
{
    size_t n = strlen(p);
    if (n && p[n - 1] == '*') {
        for (size_t i = 0; i + 1 < n; i++)
            if (!id_char(p[i])) return false;
        return n - 1 <= FLEET_MAX_ID;
    }
    return fleet_env_id_ok(p, n);
}

bool fleet_env_pattern_match(const char *p, const char *env, size_t env_len)
{
    size_t n = strlen(p);
    if (n && p[n - 1] == '*') return env_len >= n - 1 && memcmp(p, env, n - 1) == 0;
    return n == env_len && memcmp(p, env, n) == 0;
}

static void sha256_hex(const void *p, size_t n, char *out)
{
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256(p, n, d);
    hex_encode(d, sizeof d, out);
}

void fleet_token_make(const uint8_t random[40], char *token, char *id, char *digest)
{
    char secret[FLEET_TOKEN_SECRET_LEN + 1];
    hex_encode(random, FLEET_TOKEN_ID_LEN / 2, id);
    hex_encode(random + FLEET_TOKEN_ID_LEN / 2, FLEET_TOKEN_SECRET_LEN / 2, secret);
    snprintf(token, FLEET_TOKEN_LEN + 1, FLEET_TOKEN_PREFIX "%s_%s", id, secret);
    sha256_hex(secret, FLEET_TOKEN_SECRET_LEN, digest);
    OPENSSL_cleanse(secret, sizeof secret);
}

static bool all_lower_hex(const char *s, size_t n)
{
    return hex_is_lower(s, n);
}

int fleet_token_split(const char *token, size_t len, char *id, char *digest)
{
    const size_t pre = sizeof FLEET_TOKEN_PREFIX - 1;
    if (len != FLEET_TOKEN_LEN || memcmp(token, FLEET_TOKEN_PREFIX, pre) != 0 ||
        token[pre + FLEET_TOKEN_ID_LEN] != '_')
        return -EINVAL;
    const char *ip = token + pre, *sp = ip + FLEET_TOKEN_ID_LEN + 1;
    if (!all_lower_hex(ip, FLEET_TOKEN_ID_LEN) || !all_lower_hex(sp, FLEET_TOKEN_SECRET_LEN))
        return -EINVAL;
    memcpy(id, ip, FLEET_TOKEN_ID_LEN);
    id[FLEET_TOKEN_ID_LEN] = '\0';
    sha256_hex(sp, FLEET_TOKEN_SECRET_LEN, digest);
    return 0;
}

bool fleet_digest_equal(const char *a, const char *b)
{
    return CRYPTO_memcmp(a, b, FLEET_DIGEST_HEX) == 0;
}

void fleet_hmac_hex(const uint8_t secret[FLEET_SECRET_LEN], const char *msg, size_t n, char *out)
{
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned ml = 0;
    HMAC(EVP_sha256(), secret, FLEET_SECRET_LEN, (const unsigned char *)msg, n, mac, &ml);
    hex_encode(mac, 32, out);
}

/* The signed text of a URL: every claim, one a line, after a domain label. */
static int url_message(const char *env, const struct fleet_url_claims *c, char *out, size_t cap)
{
    int n = snprintf(out, cap, "exec-fleet-rendezvous/v1\n%s\n%s\n%s\n%" PRId64 "\n%s",
                     fleet_role_name(c->role), env, c->registration, c->expires, c->nonce);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

int fleet_url_sign(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                   const struct fleet_url_claims *c, char *out, size_t cap)
{
    char msg[512], sig[FLEET_DIGEST_HEX + 1];
    int n = url_message(env, c, msg, sizeof msg);
    if (n < 0) return n;
    fleet_hmac_hex(secret, msg, (size_t)n, sig);
    int k;
    if (c->role == FLEET_ROLE_HARNESS)
        k = snprintf(out, cap, "role=harness&reg=%s&exp=%" PRId64 "&n=%s&sig=%s", c->registration,
                     c->expires, c->nonce, sig);
    else
        k = snprintf(out, cap, "role=environment&reg=%s&exp=%" PRId64 "&sig=%s", c->registration,
                     c->expires, sig);
    return k < 0 || (size_t)k >= cap ? -ENOSPC : 0;
}

/* Copies the value of `name=` from a query into out (cap bytes); -EINVAL when absent,
 * repeated, too long or not made of id characters. */
static int query_get(const char *q, size_t n, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    bool found = false;
    const char *p = q, *end = q + n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t vl = (size_t)(stop - p) - nl - 1;
            if (found || vl == 0 || vl >= cap) return -EINVAL;
            for (size_t i = 0; i < vl; i++)
                if (!id_char(p[nl + 1 + i])) return -EINVAL;
            memcpy(out, p + nl + 1, vl);
            out[vl] = '\0';
            found = true;
        }
        p = stop + 1;
    }
    return found ? 0 : -EINVAL;
}

int fleet_url_verify(const uint8_t secret[FLEET_SECRET_LEN], const char *env, const char *query,
                     size_t query_len, int64_t now, struct fleet_url_claims *c)
{
    char role[16], exp[24], sig[FLEET_DIGEST_HEX + 1], want[FLEET_DIGEST_HEX + 1], msg[512];
    memset(c, 0, sizeof *c);
    if (query_get(query, query_len, "role", role, sizeof role) < 0 ||
        query_get(query, query_len, "reg", c->registration, sizeof c->registration) < 0 ||
        query_get(query, query_len, "exp", exp, sizeof exp) < 0 ||
        query_get(query, query_len, "sig", sig, sizeof sig) < 0 || strlen(sig) != FLEET_DIGEST_HEX)
        return -EINVAL;
    if (strcmp(role, "harness") == 0) {
        c->role = FLEET_ROLE_HARNESS;
        if (query_get(query, query_len, "n", c->nonce, sizeof c->nonce) < 0) return -EINVAL;
    } else if (strcmp(role, "environment") == 0) {
        c->role = FLEET_ROLE_EXECUTOR;
    } else {
        return -EINVAL;
    }
    char *e;
    c->expires = strtoll(exp, &e, 10);
    if (*e || exp[0] == '-') return -EINVAL;
    int n = url_message(env, c, msg, sizeof msg);
    if (n < 0) return -EINVAL;
    fleet_hmac_hex(secret, msg, (size_t)n, want);
    if (!fleet_digest_equal(want, sig)) return -EINVAL;
    return now > c->expires ? -ETIMEDOUT : 0;
}

void fleet_key_digest(const uint8_t *raw, size_t n, char *out)
{
    sha256_hex(raw, n, out);
}

static int auth_message(const char *env, const char *reg, const char *key_digest, int64_t expires,
                        const char *nonce, char *out, size_t cap)
{
    int n = snprintf(out, cap, "exec-fleet-harness-key/v1\n%s\n%s\n%s\n%" PRId64 "\n%s", env, reg,
                     key_digest, expires, nonce);
    return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

void fleet_authorization_make(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                              const char *registration, const char *key_digest, int64_t expires,
                              const char *nonce, char *out, size_t cap)
{
    char msg[640], sig[FLEET_DIGEST_HEX + 1];
    int n = auth_message(env, registration, key_digest, expires, nonce, msg, sizeof msg);
    if (n < 0) {
        snprintf(out, cap, "invalid");
        return;
    }
    fleet_hmac_hex(secret, msg, (size_t)n, sig);
    snprintf(out, cap, "hka1.%" PRId64 ".%s.%s", expires, nonce, sig);
}

bool fleet_authorization_ok(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                            const char *registration, const char *key_digest, const char *auth,
                            size_t auth_len, int64_t now)
{
    char copy[160], msg[640], want[FLEET_DIGEST_HEX + 1];
    if (auth_len >= sizeof copy || auth_len < 5 || memcmp(auth, "hka1.", 5) != 0) return false;
    memcpy(copy, auth, auth_len);
    copy[auth_len] = '\0';
    char *exp = copy + 5, *nonce = strchr(exp, '.');
    if (!nonce) return false;
    *nonce++ = '\0';
    char *sig = strchr(nonce, '.');
    if (!sig) return false;
    *sig++ = '\0';
    char *e;
    int64_t expires = strtoll(exp, &e, 10);
    if (*e || !*exp || exp[0] == '-' || strlen(nonce) != FLEET_NONCE_HEX ||
        !all_lower_hex(nonce, FLEET_NONCE_HEX) || strlen(sig) != FLEET_DIGEST_HEX)
        return false;
    int n = auth_message(env, registration, key_digest, expires, nonce, msg, sizeof msg);
    if (n < 0) return false;
    fleet_hmac_hex(secret, msg, (size_t)n, want);
    return fleet_digest_equal(want, sig) && now <= expires;
}
