/* noise_ik: Clatter's hybrid IK over X25519 + ML-KEM-768, AES-256-GCM, SHA-256
 * (see noise_ik.h for the pattern, the sizes and the randomness draw order).
 *
 * Built from the Noise specification's objects: a SymmetricState (h, ck and the
 * current handshake key with its nonce) whose MixHash / MixKey / MixKeyAndHash /
 * EncryptAndHash are the only ways bytes reach the transcript, and one function per
 * message and role that walks that message's tokens in order. The token order
 * follows Clatter 2.2.0 as used by the reference: the responder's message puts its
 * KEM ciphertexts first (ekem, skem) and its ephemeral keys after them. Primitives
 * come from OpenSSL 3.0 EVP (X25519, AES-256-GCM, SHA-256, HMAC) and the project's
 * own ML-KEM-768 (crypto/mlkem768.h). */
#include "crypto/noise_ik.h"
#include "crypto/random.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/mem.h"

#define HASHLEN NOISE_IK_HASH_BYTES
#define KEYLEN 32
#define TAGLEN NOISE_IK_TAG_BYTES
#define SEEDLEN MLKEM768_SEED_BYTES

/* ---- primitives -------------------------------------------------------------- */

static int default_rng(void *ctx, uint8_t *out, size_t n)
{
    (void)ctx;
    crypto_random_bytes(out, n);
    return 0;
}

/* h = SHA-256(a || b); out may alias a. */
static int sha256_two(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
                      uint8_t out[HASHLEN])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int len = 0;
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, a, alen) &&
             (blen == 0 || EVP_DigestUpdate(md, b, blen)) && EVP_DigestFinal_ex(md, out, &len);
    EVP_MD_CTX_free(md);
    return ok && len == HASHLEN ? 0 : -EIO;
}

static int hmac_sha256(const uint8_t key[HASHLEN], const uint8_t *data, size_t len,
                       uint8_t out[HASHLEN])
{
    unsigned int olen = 0;
    if (!HMAC(EVP_sha256(), key, HASHLEN, data, len, out, &olen) || olen != HASHLEN) return -EIO;
    return 0;
}

/* Noise HKDF(ck, ikm) with two or three outputs (out3 NULL for two). */
static int hkdf(const uint8_t ck[HASHLEN], const uint8_t *ikm, size_t ikm_len,
                uint8_t out1[HASHLEN], uint8_t out2[HASHLEN], uint8_t *out3)
{
    uint8_t temp[HASHLEN], buf[HASHLEN + 1];
    int rc = hmac_sha256(ck, ikm, ikm_len, temp);
    if (rc == 0) {
        buf[0] = 0x01;
        rc = hmac_sha256(temp, buf, 1, out1);
    }
    if (rc == 0) {
        memcpy(buf, out1, HASHLEN);
        buf[HASHLEN] = 0x02;
        rc = hmac_sha256(temp, buf, sizeof buf, out2);
    }
    if (rc == 0 && out3) {
        memcpy(buf, out2, HASHLEN);
        buf[HASHLEN] = 0x03;
        rc = hmac_sha256(temp, buf, sizeof buf, out3);
    }
    OPENSSL_cleanse(temp, sizeof temp);
    OPENSSL_cleanse(buf, sizeof buf);
    return rc;
}

static void gcm_nonce(uint64_t n, uint8_t iv[12])
{
    memset(iv, 0, 4);
    for (int i = 0; i < 8; i++)
        iv[4 + i] = (uint8_t)(n >> (56 - 8 * i));
}

/* out (len + 16 bytes, may equal in) = AES-256-GCM(key, nonce n, ad, in) || tag.
 * key NULL: c was keyed before (a transport direction), only the nonce changes: the
 * key schedule and GHASH tables are not built again for every record. */
static int gcm_seal(EVP_CIPHER_CTX *c, const uint8_t *key, uint64_t n, const uint8_t *ad,
                    size_t adlen, const uint8_t *in, size_t len, const uint8_t *in2, size_t len2,
                    uint8_t *out)
{
    uint8_t iv[12];
    int outl = 0, finl = 0;
    gcm_nonce(n, iv);
    if (!EVP_EncryptInit_ex(c, key ? EVP_aes_256_gcm() : NULL, NULL, key, iv)) return -EIO;
    if (adlen && !EVP_EncryptUpdate(c, NULL, &outl, ad, (int)adlen)) return -EIO;
    /* GCM is a stream mode: each update writes exactly its input's length. */
    if (len && !EVP_EncryptUpdate(c, out, &outl, in, (int)len)) return -EIO;
    if (len2 && !EVP_EncryptUpdate(c, out + len, &outl, in2, (int)len2)) return -EIO;
    if (!EVP_EncryptFinal_ex(c, out + len + len2, &finl)) return -EIO;
    if (!EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAGLEN, out + len + len2)) return -EIO;
    return 0;
}

/* out (len - 16 bytes, may equal in) = plaintext, or -EBADMSG and out zeroed. key as
 * for gcm_seal. */
static int gcm_open(EVP_CIPHER_CTX *c, const uint8_t *key, uint64_t n, const uint8_t *ad,
                    size_t adlen, const uint8_t *in, size_t len, uint8_t *out)
{
    uint8_t iv[12], tag[TAGLEN];
    int outl = 0, finl = 0;
    uint8_t dummy[1];
    size_t ptlen = len - TAGLEN;
    if (!out) out = dummy; /* empty plaintext: OpenSSL still wants a pointer */
    gcm_nonce(n, iv);
    memcpy(tag, in + ptlen, TAGLEN); /* before out (possibly == in) is written */
    if (!EVP_DecryptInit_ex(c, key ? EVP_aes_256_gcm() : NULL, NULL, key, iv)) return -EIO;
    if (adlen && !EVP_DecryptUpdate(c, NULL, &outl, ad, (int)adlen)) return -EIO;
    if (ptlen && !EVP_DecryptUpdate(c, out, &outl, in, (int)ptlen)) goto bad;
    if (!EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAGLEN, tag)) goto bad;
    if (EVP_DecryptFinal_ex(c, out + outl, &finl) <= 0) goto bad;
    return 0;
bad:
    if (ptlen) OPENSSL_cleanse(out, ptlen);
    return -EBADMSG;
}

static int x25519_public(const uint8_t priv[32], uint8_t pub[32])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    size_t len = 32;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &len) && len == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : -EIO;
}

/* X25519(priv, peer). OpenSSL refuses an all-zero result (a low-order peer point):
 * that is the peer's fault, hence -EBADMSG. */
static int x25519_dh(const uint8_t priv[32], const uint8_t peer[32], uint8_t out[32])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    EVP_PKEY *p = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer, 32);
    EVP_PKEY_CTX *c = k ? EVP_PKEY_CTX_new(k, NULL) : NULL;
    size_t len = 32;
    int rc = -EIO;
    if (k && p && c && EVP_PKEY_derive_init(c) > 0 && EVP_PKEY_derive_set_peer(c, p) > 0)
        rc = EVP_PKEY_derive(c, out, &len) > 0 && len == 32 ? 0 : -EBADMSG;
    EVP_PKEY_CTX_free(c);
    EVP_PKEY_free(p);
    EVP_PKEY_free(k);
    return rc;
}

/* ---- SymmetricState -------------------------------------------------------- */

struct symstate {
    uint8_t h[HASHLEN];  /* transcript hash */
    uint8_t ck[HASHLEN]; /* chaining key */
    uint8_t k[KEYLEN];   /* handshake cipher key, valid when has_key */
    uint64_t n;          /* its nonce */
    bool has_key;
};

static int mix_hash(struct symstate *ss, const uint8_t *data, size_t len)
{
    return sha256_two(ss->h, HASHLEN, data, len, ss->h);
}

static int mix_key(struct symstate *ss, const uint8_t *ikm, size_t len)
{
    uint8_t ck[HASHLEN], k[HASHLEN];
    int rc = hkdf(ss->ck, ikm, len, ck, k, NULL);
    if (rc == 0) {
        memcpy(ss->ck, ck, HASHLEN);
        memcpy(ss->k, k, KEYLEN);
        ss->n = 0;
        ss->has_key = true;
    }
    OPENSSL_cleanse(ck, sizeof ck);
    OPENSSL_cleanse(k, sizeof k);
    return rc;
}

static int mix_key_and_hash(struct symstate *ss, const uint8_t *ikm, size_t len)
{
    uint8_t ck[HASHLEN], th[HASHLEN], k[HASHLEN];
    int rc = hkdf(ss->ck, ikm, len, ck, th, k);
    if (rc == 0) {
        memcpy(ss->ck, ck, HASHLEN);
        rc = mix_hash(ss, th, HASHLEN);
        memcpy(ss->k, k, KEYLEN);
        ss->n = 0;
        ss->has_key = true;
    }
    OPENSSL_cleanse(ck, sizeof ck);
    OPENSSL_cleanse(th, sizeof th);
    OPENSSL_cleanse(k, sizeof k);
    return rc;
}

/* Writes len (+16 once a key exists) bytes to out, returns how many via *wrote. */
static int encrypt_and_hash(struct symstate *ss, EVP_CIPHER_CTX *c, const uint8_t *pt, size_t len,
                            uint8_t *out, size_t *wrote)
{
    int rc;
    if (ss->has_key) {
        if ((rc = gcm_seal(c, ss->k, ss->n, ss->h, HASHLEN, pt, len, NULL, 0, out)) < 0) return rc;
        ss->n++;
        len += TAGLEN;
    } else if (len) {
        memmove(out, pt, len);
    }
    *wrote = len;
    return mix_hash(ss, out, len);
}

/* Reads clen bytes of in into out (clen - 16 once a key exists). */
static int decrypt_and_hash(struct symstate *ss, EVP_CIPHER_CTX *c, const uint8_t *in, size_t clen,
                            uint8_t *out)
{
    int rc;
    if (ss->has_key) {
        if ((rc = gcm_open(c, ss->k, ss->n, ss->h, HASHLEN, in, clen, out)) < 0) return rc;
        ss->n++;
    } else if (clen) {
        memmove(out, in, clen);
    }
    return mix_hash(ss, in, clen);
}

/* ---- static keys and public-key JSON ---------------------------------------- */

int noise_ik_static_key_generate(struct noise_ik_static_key *key, noise_ik_rng_fn rng,
                                 void *rng_ctx)
{
    uint8_t dz[2 * SEEDLEN];
    int rc;
    if (!key) return -EINVAL;
    if (!rng) rng = default_rng;
    memset(key, 0, sizeof *key);
    if ((rc = rng(rng_ctx, key->x25519_priv, sizeof key->x25519_priv)) < 0) goto out;
    if ((rc = x25519_public(key->x25519_priv, key->pub.x25519)) < 0) goto out;
    if ((rc = rng(rng_ctx, dz, sizeof dz)) < 0) goto out;
    rc = mlkem768_keypair_derand(key->pub.mlkem, key->mlkem_dk, dz, dz + SEEDLEN) < 0 ? -EIO : 0;
out:
    OPENSSL_cleanse(dz, sizeof dz);
    if (rc < 0) noise_ik_static_key_wipe(key);
    return rc;
}

void noise_ik_static_key_wipe(struct noise_ik_static_key *key)
{
    if (key) OPENSSL_cleanse(key, sizeof *key);
}

/* ---- prologue ---------------------------------------------------------------- */

static uint8_t *put_part(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)((uint64_t)n >> (56 - 8 * i));
    memcpy(p, s, n);
    return p + n;
}

uint8_t *noise_ik_prologue(const char *environment_id, const char *registration_id,
                           const char *stream_id, size_t *len)
{
    size_t n = 4 * 8 + strlen(NOISE_IK_PROLOGUE_LABEL) + strlen(environment_id) +
               strlen(registration_id) + strlen(stream_id);
    uint8_t *buf = xmalloc(n), *p = buf;
    p = put_part(p, NOISE_IK_PROLOGUE_LABEL);
    p = put_part(p, environment_id);
    p = put_part(p, registration_id);
    put_part(p, stream_id);
    *len = n;
    return buf;
}

void noise_ik_protocol_hash(uint8_t out[NOISE_IK_HASH_BYTES])
{
    /* Longer than HASHLEN, so Noise hashes the name instead of zero-padding it. */
    if (sha256_two((const uint8_t *)NOISE_IK_PROTOCOL_NAME, strlen(NOISE_IK_PROTOCOL_NAME), NULL, 0,
                   out) < 0)
        abort(); /* SHA-256 cannot fail short of a broken libcrypto */
}

/* ---- handshake --------------------------------------------------------------- */

enum hs_state { HS_WRITE1, HS_READ1, HS_WRITE2, HS_READ2, HS_DONE, HS_FAILED };

struct noise_ik_handshake {
    enum hs_state state;
    bool initiator;
    struct symstate ss;
    EVP_CIPHER_CTX *cipher;        /* reused for every handshake AEAD operation */
    struct noise_ik_static_key s;  /* our static identity (copy) */
    struct noise_ik_public_key rs; /* peer static: pinned (initiator) or learned */
    bool have_rs;
    uint8_t e_priv[32]; /* our ephemeral X25519 */
    uint8_t e_pub[32];
    uint8_t e_kem_ek[MLKEM768_EK_BYTES]; /* our ephemeral ML-KEM pair */
    uint8_t e_kem_dk[MLKEM768_DK_BYTES];
    uint8_t re[32];                    /* peer ephemeral X25519 */
    uint8_t re_kem[MLKEM768_EK_BYTES]; /* peer ephemeral ML-KEM */
    uint8_t *payload;                  /* msg-1 payload as read by the responder (owned) */
    size_t payload_len;
    noise_ik_rng_fn rng;
    void *rng_ctx;
};

static int hs_new(struct noise_ik_handshake **out, bool initiator,
                  const struct noise_ik_static_key *self,
                  const struct noise_ik_public_key *responder, const uint8_t *prologue,
                  size_t prologue_len, noise_ik_rng_fn rng, void *rng_ctx)
{
    struct noise_ik_handshake *hs;
    const struct noise_ik_public_key *rpub = initiator ? responder : &self->pub;
    int rc;
    *out = NULL;
    hs = xcalloc(1, sizeof *hs);
    hs->initiator = initiator;
    hs->state = initiator ? HS_WRITE1 : HS_READ1;
    hs->s = *self;
    if (initiator) {
        hs->rs = *responder;
        hs->have_rs = true;
    }
    hs->rng = rng ? rng : default_rng;
    hs->rng_ctx = rng_ctx;
    hs->cipher = EVP_CIPHER_CTX_new();
    if (!hs->cipher) {
        noise_ik_handshake_free(hs);
        return -ENOMEM;
    }
    noise_ik_protocol_hash(hs->ss.h);
    memcpy(hs->ss.ck, hs->ss.h, HASHLEN);
    /* MixHash(prologue), then the responder's pre-message `s`: both halves. */
    if ((rc = mix_hash(&hs->ss, prologue, prologue_len)) < 0 ||
        (rc = mix_hash(&hs->ss, rpub->x25519, sizeof rpub->x25519)) < 0 ||
        (rc = mix_hash(&hs->ss, rpub->mlkem, sizeof rpub->mlkem)) < 0) {
        noise_ik_handshake_free(hs);
        return rc;
    }
    *out = hs;
    return 0;
}

int noise_ik_initiator_new(struct noise_ik_handshake **out, const struct noise_ik_static_key *self,
                           const struct noise_ik_public_key *responder, const uint8_t *prologue,
                           size_t prologue_len, noise_ik_rng_fn rng, void *rng_ctx)
{
    if (!out || !self || !responder || (!prologue && prologue_len)) return -EINVAL;
    return hs_new(out, true, self, responder, prologue, prologue_len, rng, rng_ctx);
}

int noise_ik_responder_new(struct noise_ik_handshake **out, const struct noise_ik_static_key *self,
                           const uint8_t *prologue, size_t prologue_len, noise_ik_rng_fn rng,
                           void *rng_ctx)
{
    if (!out || !self || (!prologue && prologue_len)) return -EINVAL;
    return hs_new(out, false, self, NULL, prologue, prologue_len, rng, rng_ctx);
}

static void hs_wipe_secrets(struct noise_ik_handshake *hs)
{
    OPENSSL_cleanse(&hs->ss, sizeof hs->ss);
    OPENSSL_cleanse(&hs->s, sizeof hs->s);
    OPENSSL_cleanse(hs->e_priv, sizeof hs->e_priv);
    OPENSSL_cleanse(hs->e_kem_dk, sizeof hs->e_kem_dk);
}

void noise_ik_handshake_free(struct noise_ik_handshake *hs)
{
    if (!hs) return;
    hs_wipe_secrets(hs);
    if (hs->payload) {
        OPENSSL_cleanse(hs->payload, hs->payload_len);
        free(hs->payload);
    }
    EVP_CIPHER_CTX_free(hs->cipher);
    OPENSSL_cleanse(hs, sizeof *hs);
    free(hs);
}

/* Once the split keys are derivable, the ephemeral secrets have done their job. */
static void hs_done(struct noise_ik_handshake *hs)
{
    hs->state = HS_DONE;
    OPENSSL_cleanse(hs->e_priv, sizeof hs->e_priv);
    OPENSSL_cleanse(hs->e_kem_dk, sizeof hs->e_kem_dk);
}

/* A failed handshake keeps no usable secrets and refuses every later step. */
static int hs_fail(struct noise_ik_handshake *hs, int rc)
{
    hs->state = HS_FAILED;
    OPENSSL_cleanse(hs->e_priv, sizeof hs->e_priv);
    OPENSSL_cleanse(hs->e_kem_dk, sizeof hs->e_kem_dk);
    OPENSSL_cleanse(hs->ss.k, sizeof hs->ss.k);
    OPENSSL_cleanse(hs->ss.ck, sizeof hs->ss.ck);
    return rc;
}

/* Token `e` (sending side): fresh X25519 and ML-KEM pairs, both public halves in
 * clear and mixed into h. Writes 32 + 1184 bytes at out. */
static int write_e(struct noise_ik_handshake *hs, uint8_t *out)
{
    uint8_t dz[2 * SEEDLEN];
    int rc;
    if ((rc = hs->rng(hs->rng_ctx, hs->e_priv, sizeof hs->e_priv)) < 0) return rc;
    if ((rc = x25519_public(hs->e_priv, hs->e_pub)) < 0) return rc;
    if ((rc = hs->rng(hs->rng_ctx, dz, sizeof dz)) < 0) return rc;
    rc = mlkem768_keypair_derand(hs->e_kem_ek, hs->e_kem_dk, dz, dz + SEEDLEN) < 0 ? -EIO : 0;
    OPENSSL_cleanse(dz, sizeof dz);
    if (rc < 0) return rc;
    memcpy(out, hs->e_pub, 32);
    memcpy(out + 32, hs->e_kem_ek, MLKEM768_EK_BYTES);
    if ((rc = mix_hash(&hs->ss, hs->e_pub, 32)) < 0) return rc;
    return mix_hash(&hs->ss, hs->e_kem_ek, MLKEM768_EK_BYTES);
}

/* Token `e` (receiving side). */
static int read_e(struct noise_ik_handshake *hs, const uint8_t *in)
{
    int rc;
    memcpy(hs->re, in, 32);
    memcpy(hs->re_kem, in + 32, MLKEM768_EK_BYTES);
    if ((rc = mix_hash(&hs->ss, hs->re, 32)) < 0) return rc;
    return mix_hash(&hs->ss, hs->re_kem, MLKEM768_EK_BYTES);
}

/* MixKey(DH(priv, pub)). */
static int mix_dh(struct noise_ik_handshake *hs, const uint8_t priv[32], const uint8_t pub[32])
{
    uint8_t shared[32];
    int rc = x25519_dh(priv, pub, shared);
    if (rc == 0) rc = mix_key(&hs->ss, shared, sizeof shared);
    OPENSSL_cleanse(shared, sizeof shared);
    return rc;
}

/* Token `skem` (sending side): encapsulate to the peer's static ML-KEM key,
 * EncryptAndHash the ciphertext, MixKeyAndHash the secret. bad_key is the error
 * for a peer key that ML-KEM refuses. */
static int write_skem(struct noise_ik_handshake *hs, uint8_t *out, size_t *wrote, int bad_key)
{
    uint8_t m[SEEDLEN], ct[MLKEM768_CT_BYTES], ss[MLKEM768_SS_BYTES];
    int rc;
    if ((rc = hs->rng(hs->rng_ctx, m, sizeof m)) < 0) goto out;
    if (mlkem768_encaps_derand(ct, ss, hs->rs.mlkem, m) < 0) {
        rc = bad_key;
        goto out;
    }
    if ((rc = encrypt_and_hash(&hs->ss, hs->cipher, ct, sizeof ct, out, wrote)) < 0) goto out;
    rc = mix_key_and_hash(&hs->ss, ss, sizeof ss);
out:
    OPENSSL_cleanse(m, sizeof m);
    OPENSSL_cleanse(ss, sizeof ss);
    return rc;
}

/* Token `skem` (receiving side): clen bytes at in. */
static int read_skem(struct noise_ik_handshake *hs, const uint8_t *in, size_t clen)
{
    uint8_t ct[MLKEM768_CT_BYTES], ss[MLKEM768_SS_BYTES];
    int rc;
    if ((rc = decrypt_and_hash(&hs->ss, hs->cipher, in, clen, ct)) < 0) goto out;
    /* Implicit rejection: a forged ciphertext yields a wrong secret, which the next
     * AEAD check catches; an error here means unusable input. */
    if (mlkem768_decaps(ss, ct, hs->s.mlkem_dk) < 0) {
        rc = -EBADMSG;
        goto out;
    }
    rc = mix_key_and_hash(&hs->ss, ss, sizeof ss);
out:
    OPENSSL_cleanse(ss, sizeof ss);
    return rc;
}

int noise_ik_write_message1(struct noise_ik_handshake *hs, const uint8_t *payload,
                            size_t payload_len, uint8_t *out, size_t cap, size_t *out_len)
{
    size_t w, pos = 0;
    int rc;
    if (!hs || !out || !out_len || (!payload && payload_len) || hs->state != HS_WRITE1)
        return -EINVAL;
    if (payload_len > NOISE_IK_MAX_MSG1_PAYLOAD || cap < NOISE_IK_MSG1_OVERHEAD + payload_len)
        return -EMSGSIZE;
    /* skem: no key yet, so the ciphertext goes in clear. A pinned key that ML-KEM
     * refuses is the caller's bad input. */
    if ((rc = write_skem(hs, out, &w, -EINVAL)) < 0) goto fail;
    pos += w;
    if ((rc = write_e(hs, out + pos)) < 0) goto fail; /* e */
    pos += 32 + MLKEM768_EK_BYTES;
    if ((rc = mix_dh(hs, hs->e_priv, hs->rs.x25519)) < 0) goto fail; /* es */
    /* s: both static public halves, each under its own tag. */
    if ((rc = encrypt_and_hash(&hs->ss, hs->cipher, hs->s.pub.x25519, 32, out + pos, &w)) < 0)
        goto fail;
    pos += w;
    if ((rc = encrypt_and_hash(&hs->ss, hs->cipher, hs->s.pub.mlkem, MLKEM768_EK_BYTES, out + pos,
                               &w)) < 0)
        goto fail;
    pos += w;
    if ((rc = mix_dh(hs, hs->s.x25519_priv, hs->rs.x25519)) < 0) goto fail; /* ss */
    if ((rc = encrypt_and_hash(&hs->ss, hs->cipher, payload, payload_len, out + pos, &w)) < 0)
        goto fail;
    pos += w;
    *out_len = pos;
    hs->state = HS_READ2;
    return 0;
fail:
    OPENSSL_cleanse(out, cap < NOISE_IK_MSG1_OVERHEAD ? cap : NOISE_IK_MSG1_OVERHEAD);
    return hs_fail(hs, rc);
}

int noise_ik_read_message1(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len,
                           const uint8_t **payload, size_t *payload_len)
{
    size_t pos = 0, plen;
    int rc;
    if (!hs || !msg || hs->state != HS_READ1) return -EINVAL;
    if (len < NOISE_IK_MSG1_OVERHEAD || len > NOISE_IK_MAX_MESSAGE) return hs_fail(hs, -EMSGSIZE);
    if ((rc = read_skem(hs, msg, MLKEM768_CT_BYTES)) < 0) goto fail; /* skem (clear) */
    pos += MLKEM768_CT_BYTES;
    if ((rc = read_e(hs, msg + pos)) < 0) goto fail; /* e */
    pos += 32 + MLKEM768_EK_BYTES;
    if ((rc = mix_dh(hs, hs->s.x25519_priv, hs->re)) < 0) goto fail; /* es */
    if ((rc = decrypt_and_hash(&hs->ss, hs->cipher, msg + pos, 32 + TAGLEN, hs->rs.x25519)) < 0)
        goto fail; /* s */
    pos += 32 + TAGLEN;
    if ((rc = decrypt_and_hash(&hs->ss, hs->cipher, msg + pos, MLKEM768_EK_BYTES + TAGLEN,
                               hs->rs.mlkem)) < 0)
        goto fail;
    pos += MLKEM768_EK_BYTES + TAGLEN;
    if ((rc = mix_dh(hs, hs->s.x25519_priv, hs->rs.x25519)) < 0) goto fail; /* ss */
    plen = len - pos - TAGLEN;
    hs->payload = xmalloc(plen ? plen : 1);
    if ((rc = decrypt_and_hash(&hs->ss, hs->cipher, msg + pos, len - pos, hs->payload)) < 0)
        goto fail;
    hs->payload_len = plen;
    hs->have_rs = true;
    hs->state = HS_WRITE2;
    if (payload) *payload = hs->payload;
    if (payload_len) *payload_len = plen;
    return 0;
fail:
    memset(&hs->rs, 0, sizeof hs->rs);
    return hs_fail(hs, rc);
}

int noise_ik_write_message2(struct noise_ik_handshake *hs, uint8_t out[NOISE_IK_MSG2_BYTES])
{
    size_t n;
    return noise_ik_write_message2_payload(hs, NULL, 0, out, NOISE_IK_MSG2_BYTES, &n);
}

int noise_ik_write_message2_payload(struct noise_ik_handshake *hs, const uint8_t *payload,
                                    size_t payload_len, uint8_t *out, size_t cap, size_t *out_len)
{
    uint8_t m[SEEDLEN], ct[MLKEM768_CT_BYTES], ss[MLKEM768_SS_BYTES];
    size_t w, pos = 0;
    int rc;
    if (!hs || !out || !out_len || hs->state != HS_WRITE2 || (payload_len && !payload))
        return -EINVAL;
    if (payload_len > NOISE_IK_MAX_MESSAGE - NOISE_IK_MSG2_BYTES ||
        cap < NOISE_IK_MSG2_BYTES + payload_len)
        return -EMSGSIZE;
    /* ekem: encapsulate to the initiator's ephemeral ML-KEM key, ct in clear. */
    if ((rc = hs->rng(hs->rng_ctx, m, sizeof m)) < 0) goto fail;
    if (mlkem768_encaps_derand(ct, ss, hs->re_kem, m) < 0) {
        rc = -EBADMSG;
        goto fail;
    }
    memcpy(out, ct, sizeof ct);
    pos += sizeof ct;
    if ((rc = mix_hash(&hs->ss, ct, sizeof ct)) < 0) goto fail;
    if ((rc = mix_key(&hs->ss, ss, sizeof ss)) < 0) goto fail;
    /* skem: to the initiator's static ML-KEM key, now encrypted. */
    if ((rc = write_skem(hs, out + pos, &w, -EBADMSG)) < 0) goto fail;
    pos += w;
    /* e: our ephemeral ML-KEM key is sent (the pattern's `e` carries both) but no
     * later token uses it. */
    if ((rc = write_e(hs, out + pos)) < 0) goto fail;
    pos += 32 + MLKEM768_EK_BYTES;
    if ((rc = mix_dh(hs, hs->e_priv, hs->re)) < 0) goto fail;        /* ee */
    if ((rc = mix_dh(hs, hs->e_priv, hs->rs.x25519)) < 0) goto fail; /* se */
    if ((rc = encrypt_and_hash(&hs->ss, hs->cipher, payload, payload_len, out + pos, &w)) < 0)
        goto fail;
    pos += w;
    *out_len = pos;
    OPENSSL_cleanse(m, sizeof m);
    OPENSSL_cleanse(ss, sizeof ss);
    hs_done(hs);
    return 0;
fail:
    OPENSSL_cleanse(m, sizeof m);
    OPENSSL_cleanse(ss, sizeof ss);
    OPENSSL_cleanse(out, NOISE_IK_MSG2_BYTES + payload_len);
    return hs_fail(hs, rc);
}

int noise_ik_read_message2(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len)
{
    /* Longer carries a payload, which a plain read refuses. */
    if (hs && msg && hs->state == HS_READ2 && len > NOISE_IK_MSG2_BYTES &&
        len <= NOISE_IK_MAX_MESSAGE)
        return hs_fail(hs, -EBADMSG);
    size_t n;
    uint8_t none[1];
    return noise_ik_read_message2_payload(hs, msg, len, none, 0, &n);
}

int noise_ik_read_message2_payload(struct noise_ik_handshake *hs, const uint8_t *msg, size_t len,
                                   uint8_t *payload, size_t cap, size_t *payload_len)
{
    uint8_t ss[MLKEM768_SS_BYTES];
    size_t pos = 0;
    int rc;
    if (!hs || !msg || !payload || !payload_len || hs->state != HS_READ2) return -EINVAL;
    if (len > NOISE_IK_MAX_MESSAGE) return hs_fail(hs, -EMSGSIZE);
    /* Shorter is truncated. */
    if (len < NOISE_IK_MSG2_BYTES) return hs_fail(hs, -EBADMSG);
    size_t plen = len - NOISE_IK_MSG2_BYTES;
    if (plen > cap) return hs_fail(hs, -EMSGSIZE);
    /* ekem: ct in clear, decapsulated with our ephemeral ML-KEM key. */
    if ((rc = mix_hash(&hs->ss, msg, MLKEM768_CT_BYTES)) < 0) goto fail;
    if (mlkem768_decaps(ss, msg, hs->e_kem_dk) < 0) {
        rc = -EBADMSG;
        goto fail;
    }
    if ((rc = mix_key(&hs->ss, ss, sizeof ss)) < 0) goto fail;
    pos += MLKEM768_CT_BYTES;
    if ((rc = read_skem(hs, msg + pos, MLKEM768_CT_BYTES + TAGLEN)) < 0) goto fail; /* skem */
    pos += MLKEM768_CT_BYTES + TAGLEN;
    if ((rc = read_e(hs, msg + pos)) < 0) goto fail; /* e */
    pos += 32 + MLKEM768_EK_BYTES;
    if ((rc = mix_dh(hs, hs->e_priv, hs->re)) < 0) goto fail;        /* ee */
    if ((rc = mix_dh(hs, hs->s.x25519_priv, hs->re)) < 0) goto fail; /* se */
    if ((rc = decrypt_and_hash(&hs->ss, hs->cipher, msg + pos, TAGLEN + plen, payload)) < 0)
        goto fail;
    *payload_len = plen;
    OPENSSL_cleanse(ss, sizeof ss);
    hs_done(hs);
    return 0;
fail:
    OPENSSL_cleanse(ss, sizeof ss);
    return hs_fail(hs, rc);
}

const struct noise_ik_public_key *noise_ik_remote_static(const struct noise_ik_handshake *hs)
{
    return hs && hs->have_rs ? &hs->rs : NULL;
}

void noise_ik_handshake_hash(const struct noise_ik_handshake *hs, uint8_t out[NOISE_IK_HASH_BYTES])
{
    memcpy(out, hs->ss.h, HASHLEN);
}

int noise_ik_handshake_complete(const struct noise_ik_handshake *hs)
{
    return hs && hs->state == HS_DONE;
}

/* ---- transport --------------------------------------------------------------- */

struct noise_ik_cipher {
    uint64_t n;          /* next nonce */
    EVP_CIPHER_CTX *ctx; /* keyed once at the split; each record sets only its nonce */
};

struct noise_ik_transport {
    struct noise_ik_cipher send, recv;
};

int noise_ik_transport_new(struct noise_ik_handshake *hs, struct noise_ik_transport **out)
{
    uint8_t k1[HASHLEN], k2[HASHLEN];
    struct noise_ik_transport *t;
    int rc;
    if (!hs || !out || hs->state != HS_DONE) return -EINVAL;
    *out = NULL;
    /* Split: k1 protects initiator -> responder, k2 the other direction. */
    if ((rc = hkdf(hs->ss.ck, NULL, 0, k1, k2, NULL)) < 0) return rc;
    t = xcalloc(1, sizeof *t);
    t->send.ctx = EVP_CIPHER_CTX_new();
    t->recv.ctx = EVP_CIPHER_CTX_new();
    rc = t->send.ctx && t->recv.ctx ? 0 : -ENOMEM;
    if (rc == 0 &&
        (!EVP_EncryptInit_ex(t->send.ctx, EVP_aes_256_gcm(), NULL, hs->initiator ? k1 : k2, NULL) ||
         !EVP_DecryptInit_ex(t->recv.ctx, EVP_aes_256_gcm(), NULL, hs->initiator ? k2 : k1, NULL)))
        rc = -EIO;
    OPENSSL_cleanse(k1, sizeof k1);
    OPENSSL_cleanse(k2, sizeof k2);
    if (rc < 0) {
        noise_ik_transport_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void noise_ik_transport_free(struct noise_ik_transport *t)
{
    if (!t) return;
    EVP_CIPHER_CTX_free(t->send.ctx);
    EVP_CIPHER_CTX_free(t->recv.ctx);
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
}

int noise_ik_transport_encrypt(struct noise_ik_transport *t, const uint8_t *in, size_t len,
                               uint8_t *out, size_t cap, size_t *out_len)
{
    return noise_ik_transport_encrypt2(t, in, len, NULL, 0, out, cap, out_len);
}

int noise_ik_transport_encrypt2(struct noise_ik_transport *t, const uint8_t *head, size_t hlen,
                                const uint8_t *body, size_t blen, uint8_t *out, size_t cap,
                                size_t *out_len)
{
    int rc;
    if (!t || !out || !out_len || (!head && hlen) || (!body && blen)) return -EINVAL;
    size_t len = hlen + blen;
    if (hlen > NOISE_IK_MAX_RECORD_PLAINTEXT || len > NOISE_IK_MAX_RECORD_PLAINTEXT ||
        cap < len + TAGLEN)
        return -EMSGSIZE;
    /* Noise reserves nonce 2^64-1; reaching it ends the channel. */
    if (t->send.n == UINT64_MAX) return -EOVERFLOW;
    rc = gcm_seal(t->send.ctx, NULL, t->send.n, NULL, 0, head, hlen, body, blen, out);
    if (rc < 0) return rc;
    t->send.n++;
    *out_len = len + TAGLEN;
    return 0;
}

int noise_ik_transport_decrypt(struct noise_ik_transport *t, const uint8_t *in, size_t len,
                               uint8_t *out, size_t cap, size_t *out_len)
{
    int rc;
    if (!t || !in || !out_len || (!out && len > TAGLEN)) return -EINVAL;
    if (len < TAGLEN || len > NOISE_IK_MAX_MESSAGE) return -EMSGSIZE;
    if (cap < len - TAGLEN) return -EMSGSIZE;
    if (t->recv.n == UINT64_MAX) return -EOVERFLOW;
    if ((rc = gcm_open(t->recv.ctx, NULL, t->recv.n, NULL, 0, in, len, out)) < 0) return rc;
    t->recv.n++;
    *out_len = len - TAGLEN;
    return 0;
}
