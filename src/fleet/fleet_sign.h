/* fleet_sign: the registry's credentials and signatures, as pure functions (no I/O,
 * no clock: callers pass the time).
 *
 *   bearer tokens   `exrt_<id: 16 hex>_<secret: 64 hex>`; the database keeps the id
 *                   and SHA-256 of the secret, never the secret; checks compare digests
 *                   in constant time.
 *   rendezvous URLs the query of a role=environment or role=harness WebSocket URL:
 *                   role, registration id, expiry and (harness) a single-use nonce,
 *                   bound to the environment in the path by an HMAC-SHA256 under the
 *                   fleet's secret (shared by every node through the database).
 *   authorizations  the harness_key_authorization of a /connect bundle,
 *                   `hka1.<expiry>.<nonce>.<hmac>`: bound to the environment, the
 *                   executor's registration and the harness's public key, which
 *                   /validate recomputes from what the executor sends.
 * Unit-tested in tests/unit/test_fleet_sign.c. */
#ifndef EXEC_FLEET_SIGN_H
#define EXEC_FLEET_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLEET_SECRET_LEN 32
#define FLEET_TOKEN_PREFIX "exrt_"
#define FLEET_TOKEN_ID_LEN 16     /* hex digits */
#define FLEET_TOKEN_SECRET_LEN 64 /* hex digits */
#define FLEET_TOKEN_LEN (5 + FLEET_TOKEN_ID_LEN + 1 + FLEET_TOKEN_SECRET_LEN)
#define FLEET_DIGEST_HEX 64 /* SHA-256 / HMAC-SHA256 in hex */
#define FLEET_NONCE_HEX 32
#define FLEET_MAX_ID 128 /* environment and registration ids */

enum fleet_role { FLEET_ROLE_EXECUTOR, FLEET_ROLE_HARNESS };
/* "executor" / "harness"; fleet_role_parse returns 0 or -EINVAL. */
const char *fleet_role_name(enum fleet_role r);
int fleet_role_parse(const char *s, enum fleet_role *out);

/* An environment id: [A-Za-z0-9_.-], 1..FLEET_MAX_ID bytes, not "." or "..". */
bool fleet_env_id_ok(const char *s, size_t n);
/* A token's scope: an environment id, or a prefix of one followed by '*' ("ci-*";
 * a lone "*" is every environment). */
bool fleet_env_pattern_ok(const char *pattern);
bool fleet_env_pattern_match(const char *pattern, const char *env, size_t env_len);

/* A new token (out: FLEET_TOKEN_LEN + 1 bytes) from 40 random bytes, and its id
 * (FLEET_TOKEN_ID_LEN + 1) and secret digest (FLEET_DIGEST_HEX + 1) to store. */
void fleet_token_make(const uint8_t random[40], char *token, char *id, char *digest);
/* Splits a presented token: 0 with id and digest (as above) filled, or -EINVAL when
 * it does not have the token's shape. */
int fleet_token_split(const char *token, size_t len, char *id, char *digest);
/* Constant-time comparison of two digests of FLEET_DIGEST_HEX characters. */
bool fleet_digest_equal(const char *a, const char *b);

/* Lower-case hex HMAC-SHA256 of msg under secret (out: FLEET_DIGEST_HEX + 1). */
void fleet_hmac_hex(const uint8_t secret[FLEET_SECRET_LEN], const char *msg, size_t n, char *out);

/* What a rendezvous URL's query carries. */
struct fleet_url_claims {
    enum fleet_role role;
    char registration[FLEET_MAX_ID + 1];
    int64_t expires;                 /* unix seconds */
    char nonce[FLEET_NONCE_HEX + 1]; /* harness URLs only; "" for the environment */
};

/* The query (no '?') of a signed rendezvous URL for env: appended to out (cap bytes,
 * NUL-terminated). Returns 0 or -ENOSPC. */
int fleet_url_sign(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                   const struct fleet_url_claims *c, char *out, size_t cap);
/* Verifies a query for env at time now: 0 with *c filled, -EINVAL (malformed or a
 * wrong signature), -ETIMEDOUT (expired). The signature is checked first, in
 * constant time, before the expiry is believed. */
int fleet_url_verify(const uint8_t secret[FLEET_SECRET_LEN], const char *env, const char *query,
                     size_t query_len, int64_t now, struct fleet_url_claims *c);

/* The SHA-256 (hex) of a harness public key's raw bytes (32 + 1184), the form an
 * authorization binds. */
void fleet_key_digest(const uint8_t *raw, size_t n, char *out);
/* An authorization (out: at least 128 bytes) for env, registration and key digest. */
void fleet_authorization_make(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                              const char *registration, const char *key_digest, int64_t expires,
                              const char *nonce, char *out, size_t cap);
/* Whether an authorization is one of ours for exactly these, not expired at now. */
bool fleet_authorization_ok(const uint8_t secret[FLEET_SECRET_LEN], const char *env,
                            const char *registration, const char *key_digest, const char *auth,
                            size_t auth_len, int64_t now);

#endif
