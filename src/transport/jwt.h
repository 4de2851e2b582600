/* jwt: verification of HS256 JSON Web Tokens for `--ws-auth signed-bearer-token`.
 *
 * The reference's rules exactly: the header's alg must be HS256; the signature is
 * HMAC-SHA-256 of "header.payload" with the shared secret, compared in constant
 * time; `exp` (an integer) is required; then, with `skew` seconds of tolerance,
 * now > exp is "expired", now < nbf is "not valid yet"; a configured issuer must
 * equal `iss`; a configured audience must equal `aud` or be one of its members.
 * Segments are base64url without padding. Pure: the caller passes the time.
 * A token signed right whose exp is missing or not an integer is refused as the
 * reference refuses it, but the text names the claim (the reference says only
 * "invalid websocket jwt", which left a user who forgot exp guessing). */
#ifndef EXEC_TRANSPORT_JWT_H
#define EXEC_TRANSPORT_JWT_H

#include <stddef.h>
#include <stdint.h>

enum jwt_verdict {
    JWT_OK,
    JWT_INVALID, /* malformed, wrong algorithm, bad signature */
    JWT_NO_EXP,  /* signed right, but without the exp claim the reference requires */
    JWT_BAD_EXP, /* signed right, but exp is not an integer */
    JWT_EXPIRED,
    JWT_NOT_YET,
    JWT_ISSUER,
    JWT_AUDIENCE,
};

enum jwt_verdict jwt_verify(const char *token, size_t len, const uint8_t *secret, size_t secret_len,
                            const char *issuer, const char *audience, int64_t skew, int64_t now);

/* The claims (payload object) of a token of three base64url segments whose header
 * and payload are JSON objects, without checking the signature: for tokens this
 * server only passes on (the ChatGPT access token of --chatgpt-token-stdin). NULL
 * when malformed; the caller owns the result. */
struct json_t;
struct json_t *jwt_claims(const char *token, size_t len);
/* Who a token (already verified) speaks for: "<iss>\n<sub>" into out (n bytes) when
 * it has a string `sub` claim. Returns 0, or -ENOENT without one (-EINVAL when the
 * token is malformed). */
int jwt_subject(const char *token, size_t len, char *out, size_t n);

/* The 401 body the reference sends for a verdict. */
const char *jwt_verdict_text(enum jwt_verdict v);

#endif
