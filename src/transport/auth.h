/* auth: capability-token authentication of WebSocket upgrades
 * (`--ws-auth capability-token`, like the reference server).
 *
 * The daemon keeps only the SHA-256 of the token, taken from --ws-token-file (the
 * file's content, surrounding whitespace trimmed) or given as --ws-token-sha256. An
 * upgrade must then carry `Authorization: Bearer <token>`; the presented token is
 * hashed and the digests compared with CRYPTO_memcmp, so neither the time taken nor
 * anything else depends on how much of the token was right. A refused upgrade gets
 * a 401 with a short text body (the reference's wording) and `WWW-Authenticate:
 * Bearer`, and the connection is closed. Only requests that would upgrade are
 * checked: /readyz, 403 for Origin, 404 and the other plain answers are unchanged.
 * Off until auth_configure() is called with a key. */
#ifndef EXEC_TRANSPORT_AUTH_H
#define EXEC_TRANSPORT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Longest token that fits the Authorization header the upgrade parser keeps
 * (511 bytes, "Bearer " included). */
#define AUTH_TOKEN_MAX 504
/* A token file's shortest token: 16 bytes, so a word or a PIN is never a key. */
#define AUTH_TOKEN_MIN 16

struct auth_key {
    unsigned char sha256[32];
};

enum auth_verdict {
    AUTH_OK,
    AUTH_MISSING,    /* no Authorization header (or an empty one) */
    AUTH_BAD_HEADER, /* not "Bearer <token>" */
    AUTH_WRONG,      /* a bearer token that does not match */
};

/* Pure: parses 64 hex digits (either case). Returns 0 or -EINVAL. */
int auth_key_from_hex(const char *hex, struct auth_key *out);

/* Pure: the key of a token given as file content: surrounding ASCII whitespace is
 * trimmed. Returns 0, -ENODATA when nothing is left, -E2BIG above AUTH_TOKEN_MAX. */
int auth_key_from_token(const char *content, size_t len, struct auth_key *out);

/* Reads the token file at path. On failure returns a negative errno-style code (the
 * read's errno, -EACCES for a file group or others may read, -EINVAL for a token
 * shorter than AUTH_TOKEN_MIN, or auth_key_from_token's) and writes the complete
 * message for the user, with the fix, into err (errlen bytes). */
int auth_key_from_file(const char *path, struct auth_key *out, char *err, size_t errlen);

/* Pure: judges an Authorization header value ("" when absent) against key. */
enum auth_verdict auth_check(const struct auth_key *key, const char *authorization);

/* The 401 body for a refusal, e.g. "missing websocket bearer token". */
const char *auth_verdict_text(enum auth_verdict v);

/* Process-wide switch: with a key, every WebSocket upgrade is checked (the key is
 * copied); NULL turns checking off. */
void auth_configure(const struct auth_key *key);
/* signed-bearer-token mode (`--ws-auth signed-bearer-token`, jwt.h): the shared
 * secret is read from secret_file (whitespace trimmed, at least AUTH_JWT_SECRET_MIN
 * bytes, a file that group or others may not read); issuer/audience may be NULL.
 * Returns 0, or with the message in err: the read's -errno, -EACCES (open to
 * others), -ENODATA (empty), -EINVAL (too short) or -E2BIG (too long). */
#define AUTH_JWT_SECRET_MIN 32
int auth_configure_jwt(const char *secret_file, const char *issuer, const char *audience,
                       int64_t skew, char *err, size_t errlen);
bool auth_enabled(void);

/* Why a request was refused: text is the 401 body (the reference's wording), reason
 * a short label from a fixed set (missing_token, invalid_header, invalid_token,
 * invalid_jwt, expired, not_yet_valid, wrong_issuer, wrong_audience) for logs and
 * metrics. Both are static strings. */
struct auth_refusal {
    const char *text;
    const char *reason;
};

/* Called by the listener for a request the upgrade parser accepted, with the 101 in
 * *reply. Returns true to upgrade; false after replacing *reply with the 401 (the
 * caller then sends it and closes, as for any other plain HTTP reply) and, when why
 * is not NULL, filling *why. */
bool auth_admit(const char *authorization, struct buf *reply, struct auth_refusal *why);

/* Who an admitted upgrade's Authorization header speaks for, as 64 hex digits into
 * out (AUTH_IDENTITY_LEN bytes with the NUL): the SHA-256 of "token:" and the bearer
 * token (capability tokens: one token, one identity; a new token after SIGHUP is a
 * new identity), or of "jwt:", the issuer, a newline and the subject (a JWT with a
 * `sub` claim: every token for that subject is the same identity; without `sub`,
 * the token itself, as for capability tokens). "" when authentication is off. */
#define AUTH_IDENTITY_LEN 65
void auth_identity(const char *authorization, char *out);

/* The login record of the audit trail (audit/audit.h) for a WebSocket upgrade to
 * target ("websocket", "/metrics") from peer: admitted (refused NULL: the
 * capability token's id, the first 16 hex digits of its SHA-256, or the JWT's sub
 * and iss, and the first 16 digits of identity) or refused (the reason; nothing of
 * what was presented). */
void auth_audit_login(const char *peer, const char *target, const char *authorization,
                      const char *identity, const struct auth_refusal *refused);

/* SIGHUP: re-reads the token file or the JWT secret file the server was started
 * with (a --ws-token-sha256 digest has nothing to re-read). On failure the old key
 * stays and the message is in err. Returns 0 (also when there is nothing to reload)
 * or the negative error of auth_key_from_file / auth_configure_jwt. */
int auth_reload(char *err, size_t errlen);
/* The --ws-token-file path auth_reload re-reads (copied; NULL forgets it). */
void auth_set_token_file(const char *path);

#endif
