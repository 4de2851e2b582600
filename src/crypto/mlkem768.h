/* ML-KEM-768, the module-lattice key-encapsulation mechanism of FIPS 203 (August 2024),
 * parameter set k = 3, eta1 = eta2 = 2, du = 10, dv = 4 (NIST security category 3).
 *
 * Remote mode's Noise handshake (Noise_hybridIK_25519+MLKEM768_AESGCM_SHA256) needs it and
 * neither OpenSSL 3.0 nor any other bookworm package provides it, so this is our own
 * implementation of the standard, built on OpenSSL's SHA3/SHAKE. It is FIPS 203 final, not
 * Kyber round 3: keygen hashes G(d || k), and the shared secret is K from G(m || H(ek))
 * directly (no final KDF over the ciphertext), so the two do not interoperate.
 *
 * Every function writes into caller-owned buffers of the sizes below and allocates nothing
 * the caller must free. All are thread-safe. They return 0, or a negative errno-style code:
 *   -EINVAL  encaps: ek fails the FIPS 203 modulus check (a coefficient >= q);
 *            decaps: dk fails the hash check (the stored H(ek) does not match its ek);
 *   -EIO     OpenSSL (SHA3/SHAKE) failed (getrandom(2) failing aborts: crypto/random.h);
 *   -ENOMEM  an allocation failed (only in SampleNTT's re-squeeze, see mlkem768.c).
 * On failure the output buffers are zeroed, never left half-written with secrets.
 *
 * Secret-dependent work runs in constant time: no branch or table index depends on a
 * secret, compression divides by q with multiply-and-shift (KyberSlash), and decaps'
 * re-encryption compare and implicit-rejection select are branch-free. */
#ifndef CRYPTO_MLKEM768_H
#define CRYPTO_MLKEM768_H

#include <stdint.h>

#define MLKEM768_EK_BYTES 1184
#define MLKEM768_DK_BYTES 2400 /* FIPS 203 format: dk_pke || ek || H(ek) || z */
#define MLKEM768_CT_BYTES 1088
#define MLKEM768_SS_BYTES 32
#define MLKEM768_SEED_BYTES 32

/* ML-KEM.KeyGen_internal (FIPS 203 Algorithm 16) from the caller's seeds d and z: the
 * deterministic form, for tests and for callers that draw their own randomness. */
int mlkem768_keypair_derand(uint8_t ek[MLKEM768_EK_BYTES], uint8_t dk[MLKEM768_DK_BYTES],
                            const uint8_t d[MLKEM768_SEED_BYTES],
                            const uint8_t z[MLKEM768_SEED_BYTES]);

/* ML-KEM.KeyGen (Algorithm 19) with d and z from getrandom(2). */
int mlkem768_keypair(uint8_t ek[MLKEM768_EK_BYTES], uint8_t dk[MLKEM768_DK_BYTES]);

/* ML-KEM.Encaps_internal (Algorithm 17) with the caller's message m, after the input check
 * of Algorithm 20 on ek. Writes the ciphertext and the 32-byte shared secret. */
int mlkem768_encaps_derand(uint8_t ct[MLKEM768_CT_BYTES], uint8_t ss[MLKEM768_SS_BYTES],
                           const uint8_t ek[MLKEM768_EK_BYTES],
                           const uint8_t m[MLKEM768_SEED_BYTES]);

/* ML-KEM.Encaps (Algorithm 20) with m from getrandom(2). */
int mlkem768_encaps(uint8_t ct[MLKEM768_CT_BYTES], uint8_t ss[MLKEM768_SS_BYTES],
                    const uint8_t ek[MLKEM768_EK_BYTES]);

/* ML-KEM.Decaps (Algorithm 21, with the hash check of its input checking). A ciphertext
 * that does not re-encrypt to itself is rejected implicitly: the call still returns 0 and
 * ss is the pseudo-random J(z || ct), indistinguishable to anyone without dk. */
int mlkem768_decaps(uint8_t ss[MLKEM768_SS_BYTES], const uint8_t ct[MLKEM768_CT_BYTES],
                    const uint8_t dk[MLKEM768_DK_BYTES]);

#endif
