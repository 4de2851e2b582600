/* auth: capability-token check of WebSocket upgrades (see auth.h). */
#include "transport/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "proto/hex.h"
#include "transport/jwt.h"
#include "util/oserr.h"

static struct auth_key configured;
static bool enabled;
static char *reload_path; /* the token or secret file SIGHUP re-reads, if any */

void auth_set_token_file(const char *path)
{
    if (reload_path == path) return;
    free(reload_path);
    reload_path = path ? strdup(path) : NULL;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int auth_key_from_hex(const char *hex, struct auth_key *out)
{
    if (strlen(hex) != 2 * sizeof out->sha256) return -EINVAL;
    return hex_decode(hex, 2 * sizeof out->sha256, out->sha256);
}

int auth_key_from_token(const char *content, size_t len, struct auth_key *out)
{
    while (len && is_space(content[len - 1]))
        len--;
    while (len && is_space(*content)) {
        content++;
        len--;
    }
    if (len == 0) return -ENODATA;
    if (len > AUTH_TOKEN_MAX) return -E2BIG;
    SHA256((const unsigned char *)content, len, out->sha256);
    return 0;
}

/* Reads the secret file at path (a token or the JWT secret, `what` in messages) into
 * buf, at most cap bytes. A regular file is refused as sshd refuses a key file
 * (sshkey_perm_ok): one of ours that group or others may use, or anyone's that
 * others may read, since every user of the host could then take the secret. The
 * message says how to fix it. Returns 0 or a negative errno with err written. */
static int secret_file_read(const char *path, const char *what, char *buf, size_t cap, size_t *len,
                            char *err, size_t errlen)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int e = fd < 0 ? errno : 0;
    struct stat st;
    if (!e && fstat(fd, &st) < 0) e = errno;
    if (!e && S_ISREG(st.st_mode) &&
        ((st.st_uid == geteuid() && (st.st_mode & 077)) || (st.st_mode & 004))) {
        close(fd);
        snprintf(err, errlen,
                 "websocket auth %s %s is open to group or others (mode %04o), so other users "
                 "of this host may read the secret; it must be its owner's alone: run `chmod "
                 "600 %s`",
                 what, path, (unsigned)(st.st_mode & 07777), path);
        return -EACCES;
    }
    while (!e && *len < cap) {
        ssize_t n = read(fd, buf + *len, cap - *len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) e = errno;
        if (n <= 0) break;
        *len += (size_t)n;
    }
    if (fd >= 0) close(fd);
    if (e) {
        char why[256];
        oserr_format(e, why, sizeof why);
        snprintf(err, errlen, "failed to read websocket auth secret %s: %s", path, why);
        OPENSSL_cleanse(buf, cap);
        return -e;
    }
    return 0;
}

int auth_key_from_file(const char *path, struct auth_key *out, char *err, size_t errlen)
{
    char text[4096]; /* far beyond AUTH_TOKEN_MAX: a longer file is refused below */
    size_t len = 0;
    int r = secret_file_read(path, "token file", text, sizeof text, &len, err, errlen);
    if (r < 0) return r;
    const char *t = text;
    size_t n = len;
    while (n && is_space(t[n - 1]))
        n--;
    while (n && is_space(*t))
        t++, n--;
    r = n && n < AUTH_TOKEN_MIN ? -EINVAL : auth_key_from_token(text, len, out);
    OPENSSL_cleanse(text, sizeof text);
    if (r == -ENODATA)
        snprintf(err, errlen, "websocket auth secret %s must not be empty", path);
    else if (r == -EINVAL)
        snprintf(err, errlen,
                 "websocket auth token in %s is %zu bytes, too short to be a secret: use at least "
                 "%d random ones, e.g. `(umask 077; openssl rand -hex 32 > %s)`",
                 path, n, AUTH_TOKEN_MIN, path);
    else if (r == -E2BIG)
        snprintf(err, errlen, "websocket auth secret %s is longer than %d bytes", path,
                 AUTH_TOKEN_MAX);
    return r;
}

/* "<scheme> <token>": the scheme is case-insensitive, the separator a space, and
 * blanks around the token are not part of it (the reference does the same). */
static enum auth_verdict bearer_token(const char *authorization, const char **tok, size_t *len)
{
    if (authorization[0] == '\0') return AUTH_MISSING;
    const char *sp = strchr(authorization, ' ');
    if (!sp || (size_t)(sp - authorization) != 6 || strncasecmp(authorization, "Bearer", 6) != 0)
        return AUTH_BAD_HEADER;
    const char *t = sp;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n && t[n - 1] == ' ')
        n--;
    if (n == 0) return AUTH_BAD_HEADER;
    *tok = t;
    *len = n;
    return AUTH_OK;
}

enum auth_verdict auth_check(const struct auth_key *key, const char *authorization)
{
    const char *tok;
    size_t len;
    enum auth_verdict v = bearer_token(authorization, &tok, &len);
    if (v != AUTH_OK) return v;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)tok, len, digest);
    return CRYPTO_memcmp(digest, key->sha256, sizeof digest) == 0 ? AUTH_OK : AUTH_WRONG;
}

const char *auth_verdict_text(enum auth_verdict v)
{
    switch (v) {
    case AUTH_OK: return "ok";
    case AUTH_MISSING: return "missing websocket bearer token";
    case AUTH_BAD_HEADER: return "invalid authorization header";
    default: return "invalid websocket bearer token";
    }
}

/* signed-bearer-token mode (jwt.c): the secret and the expected claims. */
static bool jwt_mode;
static uint8_t jwt_secret[4096];
static size_t jwt_secret_len;
static char *jwt_issuer, *jwt_audience;
static int64_t jwt_skew;

int auth_configure_jwt(const char *secret_file, const char *issuer, const char *audience,
                       int64_t skew, char *err, size_t errlen)
{
    char text[sizeof jwt_secret + 1];
    size_t len = 0;
    int e = secret_file_read(secret_file, "secret file", text, sizeof text, &len, err, errlen);
    if (e < 0) return e;
    const char *t = text;
    while (len && is_space(t[len - 1]))
        len--;
    while (len && is_space(*t))
        t++, len--;
    int rc = 0;
    if (len == 0) {
        snprintf(err, errlen, "websocket auth secret %s must not be empty", secret_file);
        rc = -ENODATA;
    } else if (len < AUTH_JWT_SECRET_MIN) {
        snprintf(err, errlen,
                 "signed websocket bearer secret %s must be at least %d bytes (HS256 wants a "
                 "key as long as its hash), e.g. `(umask 077; openssl rand -hex 32 > %s)`",
                 secret_file, AUTH_JWT_SECRET_MIN, secret_file);
        rc = -EINVAL;
    } else if (len > sizeof jwt_secret) {
        snprintf(err, errlen, "signed websocket bearer secret %s is longer than %zu bytes",
                 secret_file, sizeof jwt_secret);
        rc = -E2BIG;
    } else {
        memcpy(jwt_secret, t, len);
        jwt_secret_len = len;
        jwt_issuer = issuer ? strdup(issuer) : NULL;
        jwt_audience = audience ? strdup(audience) : NULL;
        jwt_skew = skew;
        jwt_mode = enabled = true;
        auth_set_token_file(secret_file);
    }
    OPENSSL_cleanse(text, sizeof text);
    return rc;
}

void auth_configure(const struct auth_key *key)
{
    enabled = key != NULL;
    if (key)
        configured = *key;
    else
        OPENSSL_cleanse(&configured, sizeof configured);
}

bool auth_enabled(void)
{
    return enabled;
}

static const char *verdict_reason(enum auth_verdict v)
{
    switch (v) {
    case AUTH_MISSING: return "missing_token";
    case AUTH_BAD_HEADER: return "invalid_header";
    default: return "invalid_token";
    }
}

static const char *jwt_reason(enum jwt_verdict v)
{
    switch (v) {
    case JWT_EXPIRED: return "expired";
    case JWT_NOT_YET: return "not_yet_valid";
    case JWT_ISSUER: return "wrong_issuer";
    case JWT_AUDIENCE: return "wrong_audience";
    default: return "invalid_jwt";
    }
}

bool auth_admit(const char *authorization, struct buf *reply, struct auth_refusal *why)
{
    if (!enabled) return true;
    const char *body, *reason;
    if (jwt_mode) {
        const char *tok;
        size_t len;
        enum auth_verdict v = bearer_token(authorization, &tok, &len);
        if (v != AUTH_OK) {
            body = auth_verdict_text(v);
            reason = verdict_reason(v);
        } else {
            enum jwt_verdict jv = jwt_verify(tok, len, jwt_secret, jwt_secret_len, jwt_issuer,
                                             jwt_audience, jwt_skew, (int64_t)time(NULL));
            if (jv == JWT_OK) return true;
            body = jwt_verdict_text(jv);
            reason = jwt_reason(jv);
        }
    } else {
        enum auth_verdict v = auth_check(&configured, authorization);
        if (v == AUTH_OK) return true;
        body = auth_verdict_text(v);
        reason = verdict_reason(v);
    }
    if (why) {
        why->text = body;
        why->reason = reason;
    }
    buf_reset(reply);
    buf_printf(reply,
               "HTTP/1.1 401 Unauthorized\r\ncontent-length: %zu\r\nconnection: close\r\n"
               "content-type: text/plain; charset=utf-8\r\nwww-authenticate: Bearer\r\n\r\n%s",
               strlen(body), body);
    return false;
}

void auth_identity(const char *authorization, char *out)
{
    out[0] = '\0';
    const char *tok;
    size_t len;
    if (!enabled || bearer_token(authorization, &tok, &len) != AUTH_OK) return;
    char subject[1024];
    const char *kind = "token:";
    const char *what = tok;
    size_t what_len = len;
    if (jwt_mode && jwt_subject(tok, len, subject, sizeof subject) == 0) {
        kind = "jwt:";
        what = subject;
        what_len = strlen(subject);
    }
    char text[1100]; /* a kind, and a token (at most 504 bytes) or a subject (1023) */
    int n = snprintf(text, sizeof text, "%s%.*s", kind, (int)what_len, what);
    size_t tlen = n > 0 && (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)text, tlen, digest);
    OPENSSL_cleanse(text, sizeof text);
    for (size_t i = 0; i < sizeof digest; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

void auth_audit_login(const char *peer, const char *target, const char *authorization,
                      const char *identity, const struct auth_refusal *refused)
{
    struct buf *b = audit_begin("login");
    if (!b) return;
    audit_put_str(b, "result", refused ? "refused" : "ok");
    audit_put_str(b, "transport", "websocket");
    audit_put_str(b, "peer", peer);
    audit_put_str(b, "target", target);
    audit_put_str(b, "auth",
                  !enabled   ? "none"
                  : jwt_mode ? "signed-bearer-token"
                             : "capability-token");
    const char *tok;
    size_t len;
    if (refused) {
        /* Nothing of what was presented: a wrong token may be someone's secret. */
        audit_put_str(b, "reason", refused->reason);
    } else if (enabled && bearer_token(authorization, &tok, &len) == AUTH_OK) {
        if (jwt_mode) {
            json_t *claims = jwt_claims(tok, len);
            audit_put_str(b, "sub", json_string_value(json_object_get(claims, "sub")));
            audit_put_str(b, "iss", json_string_value(json_object_get(claims, "iss")));
            json_decref(claims);
        } else {
            /* What --ws-token-sha256 names it by, cut to 16 digits. */
            unsigned char digest[SHA256_DIGEST_LENGTH];
            char hex[2 * SHA256_DIGEST_LENGTH + 1];
            SHA256((const unsigned char *)tok, len, digest);
            hex_encode(digest, sizeof digest, hex);
            audit_put_strn(b, "tokenId", hex, 16);
        }
        audit_put_strn(b, "identity", identity, identity && strlen(identity) >= 16 ? 16 : 0);
    }
    audit_commit(b);
}

int auth_reload(char *err, size_t errlen)
{
    if (!enabled || !reload_path) return 0;
    if (jwt_mode) {
        /* The claims stay as configured; only the secret is re-read. A bad file
         * changes nothing (auth_configure_jwt takes the new values only when valid). */
        char *iss = jwt_issuer, *aud = jwt_audience;
        int rc = auth_configure_jwt(reload_path, iss, aud, jwt_skew, err, errlen);
        if (rc == 0) {
            free(iss);
            free(aud);
        }
        return rc;
    }
    struct auth_key key;
    int rc = auth_key_from_file(reload_path, &key, err, errlen);
    if (rc == 0) configured = key;
    OPENSSL_cleanse(&key, sizeof key);
    return rc;
}
