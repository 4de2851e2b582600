/* noise_ik: the remote-mode Noise channel, exactly one pattern and one suite.
 *
 * Clatter's true-hybrid IK, Noise protocol name
 * "Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256" (X25519 + ML-KEM-768 for both KEM
 * tokens, AES-256-GCM, SHA-256), as spoken by `codex exec-server --remote`:
 *
 *     <- s                            (responder X25519 pub, then ML-KEM pub)
 *     ...
 *     -> skem, e, es, s, ss           (msg 1: 3568 + payload bytes)
 *     <- ekem, skem, e, ee, se        (msg 2: 3424 bytes, empty payload)
 *
 * Harness = initiator, executor = responder. The responder surfaces the
 * initiator's static key and the msg-1 payload (the registry's harness-key
 * authorization) before it decides to answer, because the registry check sits
 * between reading msg 1 and writing msg 2. After msg 2 both ends split into a
 * transport: one AES-256-GCM cipher per direction, 12-byte nonce = 4 zero bytes ||
 * 64-bit big-endian counter, empty AD, record = plaintext + 16-byte tag.
 *
 * Pure computation, no I/O: bytes in, bytes out. Every randomness draw goes through
 * an injectable `noise_ik_rng_fn` so tests reproduce handshakes byte for byte
 * (getrandom(2) when none is given). Draw order, which the deterministic vectors
 * depend on: static key = X25519 private (32), ML-KEM d (32), z (32); msg 1 =
 * skem m (32), then e = X25519 private (32), d (32), z (32); msg 2 = ekem m (32),
 * skem m (32), then e as above.
 *
 * Errors are negative errno values: -EBADMSG when authentication or a peer's bytes
 * fail, -EMSGSIZE for a size outside the limits, -EINVAL for misuse (wrong role or
 * state, bad arguments), -EIO when the randomness source fails. A handshake that
 * failed once stays failed. Secrets are wiped when objects are freed. */
#ifndef EXEC_CRYPTO_NOISE_IK_H
#define EXEC_CRYPTO_NOISE_IK_H

#include <stddef.h>
#include <stdint.h>

#include "crypto/mlkem768.h"

/* Tag carried in public-key JSON (note "X25519"; the hashed name says "25519"). */
#define NOISE_IK_SUITE "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256"
/* The Noise protocol name; 43 bytes, so the initial h is its SHA-256. */
#define NOISE_IK_PROTOCOL_NAME "Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256"
#define NOISE_IK_PROLOGUE_LABEL "codex-exec-server-relay-noise/v1"

#define NOISE_IK_X25519_BYTES 32
#define NOISE_IK_HASH_BYTES 32
#define NOISE_IK_TAG_BYTES 16
/* Largest handshake message or transport record (Clatter's MAX_MESSAGE_LEN). */
#define NOISE_IK_MAX_MESSAGE 65535
/* skem-ct 1088 + e 32 + e.kem 1184 + enc(s) 48 + enc(s.kem) 1200 + payload tag 16. */
#define NOISE_IK_MSG1_OVERHEAD 3568
#define NOISE_IK_MAX_MSG1_PAYLOAD (NOISE_IK_MAX_MESSAGE - NOISE_IK_MSG1_OVERHEAD)
/* ekem-ct 1088 + enc(skem-ct) 1104 + e 32 + e.kem 1184 + empty payload tag 16. */
#define NOISE_IK_MSG2_BYTES 3424
#define NOISE_IK_MAX_RECORD_PLAINTEXT (NOISE_IK_MAX_MESSAGE - NOISE_IK_TAG_BYTES)

/* Fills out[0..n) with random bytes; 0 or a negative errno. ctx is the caller's. */
typedef int (*noise_ik_rng_fn)(void *ctx, uint8_t *out, size_t n);

/* A peer's static public key: both halves travel together. */
struct noise_ik_public_key {
    uint8_t x25519[NOISE_IK_X25519_BYTES];
    uint8_t mlkem[MLKEM768_EK_BYTES];
};

/* An endpoint's static identity. Plain struct so it can live anywhere; wipe it
 * with noise_ik_static_key_wipe() when done. */
struct noise_ik_static_key {
    struct noise_ik_public_key pub;
    uint8_t x25519_priv[NOISE_IK_X25519_BYTES]; /* raw scalar, clamped on use */
    uint8_t mlkem_dk[MLKEM768_DK_BYTES];        /* FIPS 203 decapsulation key */
};

struct noise_ik_handshake; /* opaque; one role, one attempt */
struct noise_ik_transport; /* opaque; the two cipher states after the handshake */

/* Generates a fresh identity (rng NULL = getrandom). 0, -EIO, or the rng's error. */
int noise_ik_static_key_generate(struct noise_ik_static_key *key, noise_ik_rng_fn rng,
                                 void *rng_ctx);
/* Zeroes every byte of the key (not freed: the caller owns its storage). */
void noise_ik_static_key_wipe(struct noise_ik_static_key *key);

/* The prologue binding one registration and stream: four parts, each an 8-byte
 * big-endian length then the bytes: label, environment id, registration id,
 * stream id. Returns a malloc'd buffer (caller frees) and sets *len. */
uint8_t *noise_ik_prologue(const char *environment_id, const char *registration_id,
                           const char *stream_id, size_t *len);

/* SHA-256 of NOISE_IK_PROTOCOL_NAME: the initial h (and ck) of every handshake. */
void noise_ik_protocol_hash(uint8_t out[NOISE_IK_HASH_BYTES]);

/* Initiator (harness). Copies self, the pinned responder key and the prologue; the
 * handshake owns its copies. rng NULL = getrandom. 0 or -EINVAL. */
int noise_ik_initiator_new(struct noise_ik_handshake **out, const struct noise_ik_static_key *self,
                           const struct noise_ik_public_key *responder, const uint8_t *prologue,
                           size_t prologue_len, noise_ik_rng_fn rng, void *rng_ctx);
/* Responder (executor). Same ownership rules. 0 or -EINVAL. */
int noise_ik_responder_new(struct noise_ik_handshake **out, const struct noise_ik_static_key *self,
                           const uint8_t *prologue, size_t prologue_len, noise_ik_rng_fn rng,
                           void *rng_ctx);
/* Frees the handshake and wipes every secret in it. NULL is fine. */
void noise_ik_handshake_free(struct noise_ik_handshake *hs);

/* Initiator: writes msg 1 carrying payload (encrypted) into out (cap bytes, at
 * least NOISE_IK_MSG1_OVERHEAD + payload_len) and sets *out_len to exactly that.
 * -EMSGSIZE when payload_len > NOISE_IK_MAX_MSG1_PAYLOAD or cap is too small. */
int noise_ik_write_message1(struct noise_ik_handshake *hs, const uint8_t *payload,
                            size_t payload_len, uint8_t *out, size_t cap, size_t *out_len);
/* Responder: reads msg 1. On success *payload points at the decrypted payload
 * (owned by hs, valid until it is freed) and noise_ik_remote_static() names the
 * initiator, whom the caller authorizes before writing msg 2. -EMSGSIZE for a
 * length outside [NOISE_IK_MSG1_OVERHEAD, NOISE_IK_MAX_MESSAGE], -EBADMSG when
 * decryption fails (wrong responder key, prologue mismatch, tampering). */
int noise_ik_read_message1(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len,
                           const uint8_t **payload, size_t *payload_len);
/* Responder, after msg 1: writes the NOISE_IK_MSG2_BYTES of msg 2 into out. The
 * handshake is then complete. -EBADMSG if the initiator's ML-KEM keys are invalid. */
int noise_ik_write_message2(struct noise_ik_handshake *hs, uint8_t out[NOISE_IK_MSG2_BYTES]);
/* The same with a payload (out: cap >= NOISE_IK_MSG2_BYTES + payload_len; *out_len
 * the bytes written). The 0.169.0 executor sends one only to tell the harness that
 * the registry refused its own credentials (NOISE_IK_REGISTRY_REJECTED). */
int noise_ik_write_message2_payload(struct noise_ik_handshake *hs, const uint8_t *payload,
                                    size_t payload_len, uint8_t *out, size_t cap, size_t *out_len);
/* Initiator, after msg 1: reads msg 2, which must be exactly NOISE_IK_MSG2_BYTES
 * (its payload must be empty). -EBADMSG when it does not authenticate: the
 * responder does not own the pinned key, or the bytes were altered. */
int noise_ik_read_message2(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len);
/* The same, accepting a payload of at most cap bytes (copied to payload, its length
 * in *payload_len; -EMSGSIZE when longer). The handshake completes either way: what
 * a non-empty payload means is the caller's business. */
int noise_ik_read_message2_payload(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len,
                                   uint8_t *payload, size_t cap, size_t *payload_len);
/* The msg-2 payload with which the executor says that the registry's /validate
 * answered 401: its executor credentials were rejected (observed on 0.169.0). */
#define NOISE_IK_REGISTRY_REJECTED "codex-registry-authentication-rejected/v1"

/* The peer's static key once learned (initiator: the pinned key from the start;
 * responder: after msg 1), else NULL. Owned by hs. */
const struct noise_ik_public_key *noise_ik_remote_static(const struct noise_ik_handshake *hs);
/* The current handshake hash h (channel binding once complete). */
void noise_ik_handshake_hash(const struct noise_ik_handshake *hs, uint8_t out[NOISE_IK_HASH_BYTES]);
/* 1 once both messages went through. */
int noise_ik_handshake_complete(const struct noise_ik_handshake *hs);

/* Split a complete handshake into its transport (caller frees it). The handshake
 * is still to be freed by the caller. 0 or -EINVAL (not complete). */
int noise_ik_transport_new(struct noise_ik_handshake *hs, struct noise_ik_transport **out);
/* Frees and wipes. NULL is fine. */
void noise_ik_transport_free(struct noise_ik_transport *t);

/* Encrypts one record: out (cap ≥ len + 16; may equal in) gets len + 16 bytes.
 * Every call consumes one send nonce. -EMSGSIZE above NOISE_IK_MAX_RECORD_PLAINTEXT
 * or a short cap; -EOVERFLOW once the nonces are exhausted. */
int noise_ik_transport_encrypt(struct noise_ik_transport *t, const uint8_t *in, size_t len,
                               uint8_t *out, size_t cap, size_t *out_len);
/* The same record from two pieces (head || body), e.g. a length prefix and a slice of
 * the message, without first copying them into one buffer. out must not overlap them. */
int noise_ik_transport_encrypt2(struct noise_ik_transport *t, const uint8_t *head, size_t hlen,
                                const uint8_t *body, size_t blen, uint8_t *out, size_t cap,
                                size_t *out_len);
/* Decrypts one record (the next in order): out (cap ≥ len - 16; may equal in).
 * -EMSGSIZE for len < 16 or > NOISE_IK_MAX_MESSAGE; -EBADMSG when it does not
 * authenticate, in which case out is zeroed and the receive nonce does not advance. */
int noise_ik_transport_decrypt(struct noise_ik_transport *t, const uint8_t *in, size_t len,
                               uint8_t *out, size_t cap, size_t *out_len);

#endif
