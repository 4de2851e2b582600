/* jwt: HS256 JSON Web Token verification (see jwt.h). */
#include "transport/jwt.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* base64url without padding -> bytes; false on any other character or length. */
static bool b64url_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
    if (n % 4 == 1) return false;
    uint8_t *buf = malloc(n * 3 / 4 + 3);
    if (!buf) return false;
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '-'             ? 62
                : c == '_'             ? 63
                                       : -1;
        if (v < 0) {
            free(buf);
            return false;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[k++] = (uint8_t)(acc >> bits);
        }
    }
    /* Canonical only: the bits left over past the last byte must be zero (as the
     * reference's base64 decoder demands), so one token has one spelling. */
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
        free(buf);
        return false;
    }
    *out = buf;
    *outlen = k;
    return true;
}

static json_t *segment_json(const char *s, size_t n)
{
    uint8_t *raw;
    size_t len;
    if (!b64url_decode(s, n, &raw, &len)) return NULL;
    json_error_t e;
    /* A key twice (`exp` expired then valid, `alg` two ways) means whatever the
     * last-wins parser here reads may differ from what the issuer or another
     * verifier read: reject, as the reference does. */
    json_t *j = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, &e);
    free(raw);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static bool int_claim(json_t *claims, const char *key, bool required, int64_t *out, bool *present)
{
    json_t *v = json_object_get(claims, key);
    *present = v && !json_is_null(v);
    if (!*present) return !required;
    if (!json_is_integer(v)) return false;
    *out = json_integer_value(v);
    return true;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

enum jwt_verdict jwt_verify(const char *token, size_t len, const uint8_t *secret, size_t secret_len,
                            const char *issuer, const char *audience, int64_t skew, int64_t now)
{
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token))) return JWT_INVALID;
    json_t *header = segment_json(token, (size_t)(d1 - token));
    const char *alg = json_string_value(json_object_get(header, "alg"));
    bool alg_ok = alg && strcmp(alg, "HS256") == 0;
    json_decref(header);
    if (!alg_ok) return JWT_INVALID;
    uint8_t *sig;
    size_t siglen;
    if (!b64url_decode(d2 + 1, len - (size_t)(d2 + 1 - token), &sig, &siglen)) return JWT_INVALID;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    HMAC(EVP_sha256(), secret, (int)secret_len, (const unsigned char *)token, (size_t)(d2 - token),
         mac, &maclen);
    bool sig_ok = siglen == maclen && CRYPTO_memcmp(sig, mac, maclen) == 0;
    free(sig);
    if (!sig_ok) return JWT_INVALID;
    json_t *claims = segment_json(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!claims) return JWT_INVALID;
    enum jwt_verdict v = JWT_OK;
    int64_t exp = 0, nbf = 0;
    bool has_exp, has_nbf;
    json_t *iss = json_object_get(claims, "iss"), *aud = json_object_get(claims, "aud");
    if (!int_claim(claims, "exp", true, &exp, &has_exp))
        v = has_exp ? JWT_BAD_EXP : JWT_NO_EXP;
    else if (!int_claim(claims, "nbf", false, &nbf, &has_nbf) ||
             (iss && !json_is_null(iss) && !json_is_string(iss)))
        v = JWT_INVALID;
    bool aud_ok = false, aud_shape = !aud || json_is_null(aud) || json_is_string(aud);
    if (json_is_array(aud)) {
        aud_shape = true;
        size_t i;
        json_t *a;
        json_array_foreach(aud, i, a) if (!json_is_string(a)) aud_shape = false;
    }
    if (v == JWT_OK && !aud_shape) v = JWT_INVALID;
    if (v == JWT_OK && now > sat_add(exp, skew)) v = JWT_EXPIRED;
    if (v == JWT_OK && has_nbf && now < sat_add(nbf, -skew)) v = JWT_NOT_YET;
    if (v == JWT_OK && issuer &&
        !(json_is_string(iss) && strcmp(json_string_value(iss), issuer) == 0))
        v = JWT_ISSUER;
    if (v == JWT_OK && audience) {
        if (json_is_string(aud)) {
            aud_ok = strcmp(json_string_value(aud), audience) == 0;
        } else if (json_is_array(aud)) {
            size_t i;
            json_t *a;
            json_array_foreach(aud, i, a) if (strcmp(json_string_value(a), audience) == 0) aud_ok =
                true;
        }
        if (!aud_ok) v = JWT_AUDIENCE;
    }
    json_decref(claims);
    return v;
}

int jwt_subject(const char *token, size_t len, char *out, size_t n)
{
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2) return -EINVAL;
    json_t *claims = segment_json(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!claims) return -EINVAL;
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    const char *iss = json_string_value(json_object_get(claims, "iss"));
    int rc = -ENOENT;
    if (sub) {
        snprintf(out, n, "%s\n%s", iss ? iss : "", sub);
        rc = 0;
    }
    json_decref(claims);
    return rc;
}

const char *jwt_verdict_text(enum jwt_verdict v)
{
    switch (v) {
    case JWT_OK: return "ok";
    case JWT_EXPIRED: return "expired websocket jwt";
    case JWT_NOT_YET: return "websocket jwt is not valid yet";
    case JWT_ISSUER: return "websocket jwt issuer mismatch";
    case JWT_AUDIENCE: return "websocket jwt audience mismatch";
    case JWT_NO_EXP:
        return "invalid websocket jwt: no exp claim (required: the expiry, in seconds since the "
               "epoch)";
    case JWT_BAD_EXP:
        return "invalid websocket jwt: exp is not an integer (seconds since the epoch)";
    default: return "invalid websocket jwt";
    }
}

json_t *jwt_claims(const char *token, size_t len)
{
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token))) return NULL;
    json_t *header = segment_json(token, (size_t)(d1 - token));
    if (!header) return NULL;
    json_decref(header);
    return segment_json(d1 + 1, (size_t)(d2 - d1 - 1));
}
