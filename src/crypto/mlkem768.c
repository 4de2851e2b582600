/* ML-KEM-768 (FIPS 203) written from the standard, on OpenSSL 3.0's SHA3 and SHAKE.
 *
 * Layout follows the standard: K-PKE (Algorithms 13-15) underneath, the KEM (16-18, and the
 * checked wrappers 19-21) on top; comments cite the algorithm numbers. Polynomials hold their
 * 256 coefficients fully reduced in [0, q) as uint16_t, in the NTT domain or not as the
 * algorithm says. Every reduction goes through mod_q(), an exact multiply-and-shift division
 * by q, so no secret ever meets a hardware divide (whose latency depends on its operands:
 * the KyberSlash timing attacks). Loops and branches depend only on public data: the
 * parameters, the public matrix seed rho (SampleNTT's rejection sampling), and the public
 * ek/ct when checking them.
 *
 * The four hash functions of Section 4.1 map onto OpenSSL EVP digests fetched once per
 * process: H = SHA3-256, G = SHA3-512, J = SHAKE256 with 32 bytes out, PRF_eta = SHAKE256
 * with 64*eta bytes out, and the XOF of SampleNTT = SHAKE128. One EVP_MD_CTX per public call
 * is reinitialised for each hash. */
#include "crypto/mlkem768.h"
#include "crypto/random.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

enum {
    MLKEM_N = 256,
    MLKEM_Q = 3329,
    MLKEM_K = 3,
    MLKEM_DU = 10,
    MLKEM_DV = 4,
    /* eta1 = eta2 = 2 for ML-KEM-768, so one CBD sampler and one PRF length serve both. */
    MLKEM_ETA = 2,
    MLKEM_PRF_BYTES = 64 * MLKEM_ETA,
    MLKEM_POLY_BYTES = 384, /* ByteEncode_12 of one polynomial */
    MLKEM_PKE_DK_BYTES = MLKEM_K * MLKEM_POLY_BYTES,
    MLKEM_CT_U_BYTES = MLKEM_K * 32 * MLKEM_DU,
    /* offsets into dk = dk_pke || ek || H(ek) || z */
    MLKEM_DK_EK = MLKEM_PKE_DK_BYTES,
    MLKEM_DK_H = MLKEM_DK_EK + MLKEM768_EK_BYTES,
    MLKEM_DK_Z = MLKEM_DK_H + 32,
};

_Static_assert(MLKEM_DK_Z + 32 == MLKEM768_DK_BYTES, "dk layout");
_Static_assert(MLKEM_PKE_DK_BYTES + 32 == MLKEM768_EK_BYTES, "ek layout");
_Static_assert(MLKEM_CT_U_BYTES + 32 * MLKEM_DV == MLKEM768_CT_BYTES, "ct layout");

/* How many SHAKE128 bytes SampleNTT squeezes first. OpenSSL 3.0's EVP_DigestFinalXOF can
 * be called only once per absorbed input (EVP_DigestSqueeze arrived in 3.3), so we cannot
 * draw 168-byte blocks on demand as Algorithm 7 does. Instead we squeeze 4 blocks
 * (672 bytes = 448 candidates, each accepted with probability q/4096 ~ 0.81, about 364
 * expected) at once. Fewer than 256 of 448 are accepted with probability ~2^-105, and only
 * then do we squeeze again, twice as long: SHAKE output is prefix-consistent, so the longer
 * output starts with the bytes already parsed and parsing simply continues. rho is public,
 * so neither the rejection branches nor the retry leak anything. Overridable so a test can
 * force the retry path. */
#ifndef MLKEM768_XOF_FIRST_BYTES
#define MLKEM768_XOF_FIRST_BYTES (4 * 168)
#endif
_Static_assert(MLKEM768_XOF_FIRST_BYTES % 3 == 0, "SampleNTT parses 3-byte groups");

/* A polynomial of R_q or T_q; coefficients always in [0, q). */
typedef struct {
    uint16_t c[MLKEM_N];
} mlkem_poly;

/* Process-wide constants, set once by mlkem_init(). The zeta tables are public values
 * (powers of the root of unity), so indexing them by loop counters is fine. */
static pthread_once_t mlkem_once = PTHREAD_ONCE_INIT;
static int mlkem_init_rc = -EIO;
static EVP_MD *md_sha3_256, *md_sha3_512, *md_shake128, *md_shake256;
static uint16_t zetas[128];  /* 17^BitRev7(i) mod q, for NTT and its inverse */
static uint16_t gammas[128]; /* 17^(2*BitRev7(i)+1) mod q, for MultiplyNTTs */

/* a mod q for a < 2^26, without a divide instruction. With M = ceil(2^40 / q) =
 * 330282857, M*q = 2^40 + 3177, so a*M / 2^40 = a/q + a*3177/(q*2^40) and the error
 * term stays below 1/q for every a < 2^26 (a*3177 < 2^38): the floor is exact, hence so
 * is the remainder. Products of two reduced coefficients (< q^2 < 2^24) and sums of two
 * such products stay in range. */
static inline uint16_t mod_q(uint32_t a)
{
    uint32_t quot = (uint32_t)(((uint64_t)a * 330282857u) >> 40);
    return (uint16_t)(a - quot * MLKEM_Q);
}

static uint8_t bitrev7(unsigned i)
{
    uint8_t r = 0;
    for (int b = 0; b < 7; b++)
        r |= (uint8_t)(((i >> b) & 1) << (6 - b));
    return r;
}

static void mlkem_init(void)
{
    uint32_t pow[256]; /* pow[e] = 17^e mod q */
    pow[0] = 1;
    for (int e = 1; e < 256; e++)
        pow[e] = mod_q(pow[e - 1] * 17);
    for (unsigned i = 0; i < 128; i++) {
        zetas[i] = (uint16_t)pow[bitrev7(i)];
        gammas[i] = (uint16_t)pow[2 * bitrev7(i) + 1];
    }
    md_sha3_256 = EVP_MD_fetch(NULL, "SHA3-256", NULL);
    md_sha3_512 = EVP_MD_fetch(NULL, "SHA3-512", NULL);
    md_shake128 = EVP_MD_fetch(NULL, "SHAKE128", NULL);
    md_shake256 = EVP_MD_fetch(NULL, "SHAKE256", NULL);
    /* Kept for the process lifetime: every later call shares them read-only. */
    if (md_sha3_256 && md_sha3_512 && md_shake128 && md_shake256) mlkem_init_rc = 0;
}

/* out = md(a || b) with outlen bytes (an XOF's output length is ours to choose). */
static int mlkem_hash(EVP_MD_CTX *ctx, const EVP_MD *md, const uint8_t *a, size_t alen,
                      const uint8_t *b, size_t blen, uint8_t *out, size_t outlen)
{
    int xof = md == md_shake128 || md == md_shake256;
    if (EVP_DigestInit_ex2(ctx, md, NULL) != 1 || EVP_DigestUpdate(ctx, a, alen) != 1 ||
        (blen && EVP_DigestUpdate(ctx, b, blen) != 1))
        return -EIO;
    if (xof) return EVP_DigestFinalXOF(ctx, out, outlen) == 1 ? 0 : -EIO;
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx, out, &n) != 1 || n != outlen) return -EIO;
    return 0;
}

/* PRF_eta(s, b) = SHAKE256(s || b, 64*eta) (eq. 4.3). */
static int mlkem_prf(EVP_MD_CTX *ctx, const uint8_t s[32], uint8_t nonce,
                     uint8_t out[MLKEM_PRF_BYTES])
{
    return mlkem_hash(ctx, md_shake256, s, 32, &nonce, 1, out, MLKEM_PRF_BYTES);
}

/* --- ring arithmetic (Section 4.3) ------------------------------------------------------ */

/* NTT (Algorithm 9), in place. */
static void poly_ntt(mlkem_poly *f)
{
    unsigned i = 1;
    for (unsigned len = 128; len >= 2; len >>= 1) {
        for (unsigned start = 0; start < MLKEM_N; start += 2 * len) {
            uint32_t zeta = zetas[i++];
            for (unsigned j = start; j < start + len; j++) {
                uint16_t t = mod_q(zeta * f->c[j + len]);
                f->c[j + len] = mod_q((uint32_t)f->c[j] + MLKEM_Q - t);
                f->c[j] = mod_q((uint32_t)f->c[j] + t);
            }
        }
    }
}

/* NTT^-1 (Algorithm 10), in place, including the final scaling by 128^-1 = 3303. */
static void poly_invntt(mlkem_poly *f)
{
    unsigned i = 127;
    for (unsigned len = 2; len <= 128; len <<= 1) {
        for (unsigned start = 0; start < MLKEM_N; start += 2 * len) {
            uint32_t zeta = zetas[i--];
            for (unsigned j = start; j < start + len; j++) {
                uint16_t t = f->c[j];
                f->c[j] = mod_q((uint32_t)t + f->c[j + len]);
                f->c[j + len] = mod_q(zeta * ((uint32_t)f->c[j + len] + MLKEM_Q - t));
            }
        }
    }
    for (unsigned j = 0; j < MLKEM_N; j++)
        f->c[j] = mod_q((uint32_t)f->c[j] * 3303);
}

/* r += f (x) g in T_q: MultiplyNTTs (Algorithm 11) with BaseCaseMultiply (Algorithm 12),
 * accumulated so a dot product of vectors needs no temporary. */
static void poly_basemul_acc(mlkem_poly *r, const mlkem_poly *f, const mlkem_poly *g)
{
    for (unsigned i = 0; i < 128; i++) {
        uint32_t a0 = f->c[2 * i], a1 = f->c[2 * i + 1];
        uint32_t b0 = g->c[2 * i], b1 = g->c[2 * i + 1];
        uint16_t c0 = mod_q(a0 * b0 + (uint32_t)mod_q(a1 * b1) * gammas[i]);
        uint16_t c1 = mod_q(a0 * b1 + a1 * b0);
        r->c[2 * i] = mod_q((uint32_t)r->c[2 * i] + c0);
        r->c[2 * i + 1] = mod_q((uint32_t)r->c[2 * i + 1] + c1);
    }
}

static void poly_add(mlkem_poly *r, const mlkem_poly *f)
{
    for (unsigned j = 0; j < MLKEM_N; j++)
        r->c[j] = mod_q((uint32_t)r->c[j] + f->c[j]);
}

/* r = f - r */
static void poly_sub_from(mlkem_poly *r, const mlkem_poly *f)
{
    for (unsigned j = 0; j < MLKEM_N; j++)
        r->c[j] = mod_q((uint32_t)f->c[j] + MLKEM_Q - r->c[j]);
}

/* --- sampling (Section 4.2.2) ----------------------------------------------------------- */

/* SampleNTT (Algorithm 7) from rho || b32 || b33. Returns 0, -EIO or -ENOMEM. */
static int poly_sample_ntt(EVP_MD_CTX *ctx, mlkem_poly *a, const uint8_t rho[32], uint8_t b32,
                           uint8_t b33)
{
    uint8_t seed[34], first[MLKEM768_XOF_FIRST_BYTES];
    uint8_t *buf = first, *bigger = NULL;
    size_t len = sizeof first, pos = 0;
    unsigned n = 0;
    int rc;
    memcpy(seed, rho, 32);
    seed[32] = b32;
    seed[33] = b33;
    for (;;) {
        if ((rc = mlkem_hash(ctx, md_shake128, seed, sizeof seed, NULL, 0, buf, len)) < 0) break;
        for (; pos + 3 <= len && n < MLKEM_N; pos += 3) {
            uint16_t d1 = (uint16_t)(buf[pos] | ((buf[pos + 1] & 0x0f) << 8));
            uint16_t d2 = (uint16_t)((buf[pos + 1] >> 4) | (buf[pos + 2] << 4));
            if (d1 < MLKEM_Q) a->c[n++] = d1;
            if (d2 < MLKEM_Q && n < MLKEM_N) a->c[n++] = d2;
        }
        if (n == MLKEM_N) break;
        /* Out of bytes (see MLKEM768_XOF_FIRST_BYTES): squeeze twice as many. */
        len *= 2;
        uint8_t *p = realloc(bigger, len);
        if (!p) {
            rc = -ENOMEM;
            break;
        }
        buf = bigger = p;
    }
    free(bigger);
    return rc;
}

/* SamplePolyCBD_2 (Algorithm 8) of 128 PRF bytes: coefficient i is (b[4i] + b[4i+1]) -
 * (b[4i+2] + b[4i+3]) over the input's bits, so each byte yields two coefficients. */
static void poly_cbd2(mlkem_poly *f, const uint8_t buf[MLKEM_PRF_BYTES])
{
    for (unsigned i = 0; i < MLKEM_PRF_BYTES; i++) {
        for (unsigned h = 0; h < 2; h++) {
            unsigned nib = (unsigned)(buf[i] >> (4 * h));
            uint32_t x = (nib & 1) + ((nib >> 1) & 1);
            uint32_t y = ((nib >> 2) & 1) + ((nib >> 3) & 1);
            f->c[2 * i + h] = mod_q(x + MLKEM_Q - y);
        }
    }
}

/* --- encoding and compression (Section 4.2.1) ------------------------------------------- */

/* ByteEncode_d (Algorithm 5): d bits per coefficient, little-endian. Coefficients must be
 * < 2^d. */
static void poly_encode(uint8_t *out, const mlkem_poly *f, unsigned d)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    for (unsigned i = 0; i < MLKEM_N; i++) {
        acc |= (uint32_t)f->c[i] << bits;
        for (bits += d; bits >= 8; bits -= 8) {
            *out++ = (uint8_t)acc;
            acc >>= 8;
        }
    }
}

/* ByteDecode_d (Algorithm 6) for d < 12: coefficients in [0, 2^d). */
static void poly_decode(mlkem_poly *f, const uint8_t *in, unsigned d)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    for (unsigned i = 0; i < MLKEM_N; i++) {
        for (; bits < d; bits += 8)
            acc |= (uint32_t)*in++ << bits;
        f->c[i] = (uint16_t)(acc & ((1u << d) - 1));
        acc >>= d;
        bits -= d;
    }
}

/* ByteDecode_12: values are reduced mod q, as the standard defines it for d = 12. Returns
 * nonzero when some encoded value was >= q, which the encaps input check rejects (the
 * modulus check ByteEncode_12(ByteDecode_12(ek)) == ek fails exactly then). Used on secret
 * dk_pke too, so the check is accumulated without branching. */
static uint32_t poly_decode12(mlkem_poly *f, const uint8_t *in)
{
    uint32_t bad = 0;
    poly_decode(f, in, 12);
    for (unsigned i = 0; i < MLKEM_N; i++) {
        /* (q-1 - c) wraps to a huge value, setting bit 31, exactly when c >= q */
        bad |= ((uint32_t)(MLKEM_Q - 1) - f->c[i]) >> 31;
        f->c[i] = mod_q(f->c[i]);
    }
    return bad;
}

/* Compress_d (eq. 4.7): round(2^d / q * x) mod 2^d = floor((x*2^d + (q-1)/2) / q) mod 2^d
 * (q is odd, so no value lies exactly halfway). The division is the exact multiply-and-
 * shift of mod_q: x*2^d + 1664 < 2^23 for d <= 11. */
static inline uint16_t compress(uint16_t x, unsigned d)
{
    uint64_t num = ((uint64_t)x << d) + (MLKEM_Q - 1) / 2;
    return (uint16_t)(((num * 330282857u) >> 40) & ((1u << d) - 1));
}

/* Decompress_d (eq. 4.8): round(q / 2^d * y); a multiply and shift, no secret division. */
static inline uint16_t decompress(uint16_t y, unsigned d)
{
    return (uint16_t)(((uint32_t)y * MLKEM_Q + (1u << (d - 1))) >> d);
}

static void poly_compress(mlkem_poly *f, unsigned d)
{
    for (unsigned i = 0; i < MLKEM_N; i++)
        f->c[i] = compress(f->c[i], d);
}

static void poly_decompress(mlkem_poly *f, unsigned d)
{
    for (unsigned i = 0; i < MLKEM_N; i++)
        f->c[i] = decompress(f->c[i], d);
}

/* --- K-PKE (Section 5) ------------------------------------------------------------------- */

/* K-PKE.KeyGen (Algorithm 13): ek = ByteEncode_12(t^) || rho, dk_pke = ByteEncode_12(s^).
 * ek is MLKEM768_EK_BYTES, dk_pke MLKEM_PKE_DK_BYTES. */
static int pke_keygen(EVP_MD_CTX *ctx, uint8_t *ek, uint8_t *dk_pke, const uint8_t d[32])
{
    struct { /* every secret intermediate, wiped in one go */
        uint8_t g_in[33], rho_sigma[64], prf[MLKEM_PRF_BYTES];
        mlkem_poly s[MLKEM_K], e[MLKEM_K];
    } sec;
    mlkem_poly a, t;
    const uint8_t *rho = sec.rho_sigma, *sigma = sec.rho_sigma + 32;
    uint8_t nonce = 0;
    int rc;

    /* (rho, sigma) = G(d || k): the k byte is FIPS 203's domain separation between
     * parameter sets (absent from Kyber round 3). */
    memcpy(sec.g_in, d, 32);
    sec.g_in[32] = MLKEM_K;
    if ((rc = mlkem_hash(ctx, md_sha3_512, sec.g_in, 33, NULL, 0, sec.rho_sigma, 64)) < 0) goto out;
    for (unsigned i = 0; i < MLKEM_K; i++) {
        if ((rc = mlkem_prf(ctx, sigma, nonce++, sec.prf)) < 0) goto out;
        poly_cbd2(&sec.s[i], sec.prf);
        poly_ntt(&sec.s[i]);
    }
    for (unsigned i = 0; i < MLKEM_K; i++) {
        if ((rc = mlkem_prf(ctx, sigma, nonce++, sec.prf)) < 0) goto out;
        poly_cbd2(&sec.e[i], sec.prf);
        poly_ntt(&sec.e[i]);
    }
    /* t^[i] = sum_j A^[i][j] (x) s^[j] + e^[i], with A^[i][j] = SampleNTT(rho || j || i) */
    for (unsigned i = 0; i < MLKEM_K; i++) {
        t = sec.e[i];
        for (unsigned j = 0; j < MLKEM_K; j++) {
            if ((rc = poly_sample_ntt(ctx, &a, rho, (uint8_t)j, (uint8_t)i)) < 0) goto out;
            poly_basemul_acc(&t, &a, &sec.s[j]);
        }
        poly_encode(ek + i * MLKEM_POLY_BYTES, &t, 12);
        poly_encode(dk_pke + i * MLKEM_POLY_BYTES, &sec.s[i], 12);
    }
    memcpy(ek + MLKEM_PKE_DK_BYTES, rho, 32);
out:
    OPENSSL_cleanse(&sec, sizeof sec);
    OPENSSL_cleanse(&t, sizeof t); /* partial sums e^ + ... are secret until complete */
    return rc;
}

/* K-PKE.Encrypt (Algorithm 14) of the 32-byte message m with randomness r. The ek must
 * have passed the modulus check (encaps) or the hash check (decaps, whose ek came from
 * our own keygen); out-of-range values are reduced, not rejected, here. */
static int pke_encrypt(EVP_MD_CTX *ctx, uint8_t ct[MLKEM768_CT_BYTES], const uint8_t *ek,
                       const uint8_t m[32], const uint8_t r[32])
{
    struct {
        uint8_t prf[MLKEM_PRF_BYTES];
        mlkem_poly y[MLKEM_K], acc, e, mu;
    } sec;
    mlkem_poly a, t;
    const uint8_t *rho = ek + MLKEM_PKE_DK_BYTES;
    uint8_t nonce = 0;
    int rc = 0;

    for (unsigned i = 0; i < MLKEM_K; i++) {
        if ((rc = mlkem_prf(ctx, r, nonce++, sec.prf)) < 0) goto out;
        poly_cbd2(&sec.y[i], sec.prf);
        poly_ntt(&sec.y[i]);
    }
    /* u[i] = NTT^-1(sum_j A^[j][i] (x) y^[j]) + e1[i]: the transpose, so A^[j][i] comes
     * from SampleNTT(rho || i || j). Each u[i] is compressed and encoded at once. */
    for (unsigned i = 0; i < MLKEM_K; i++) {
        memset(&sec.acc, 0, sizeof sec.acc);
        for (unsigned j = 0; j < MLKEM_K; j++) {
            if ((rc = poly_sample_ntt(ctx, &a, rho, (uint8_t)i, (uint8_t)j)) < 0) goto out;
            poly_basemul_acc(&sec.acc, &a, &sec.y[j]);
        }
        poly_invntt(&sec.acc);
        if ((rc = mlkem_prf(ctx, r, (uint8_t)(MLKEM_K + i), sec.prf)) < 0) goto out;
        poly_cbd2(&sec.e, sec.prf);
        poly_add(&sec.acc, &sec.e);
        poly_compress(&sec.acc, MLKEM_DU);
        poly_encode(ct + i * 32 * MLKEM_DU, &sec.acc, MLKEM_DU);
    }
    /* v = NTT^-1(t^ . y^) + e2 + Decompress_1(ByteDecode_1(m)) */
    memset(&sec.acc, 0, sizeof sec.acc);
    for (unsigned i = 0; i < MLKEM_K; i++) {
        poly_decode12(&t, ek + i * MLKEM_POLY_BYTES);
        poly_basemul_acc(&sec.acc, &t, &sec.y[i]);
    }
    poly_invntt(&sec.acc);
    if ((rc = mlkem_prf(ctx, r, 2 * MLKEM_K, sec.prf)) < 0) goto out;
    poly_cbd2(&sec.e, sec.prf);
    poly_add(&sec.acc, &sec.e);
    poly_decode(&sec.mu, m, 1);
    poly_decompress(&sec.mu, 1);
    poly_add(&sec.acc, &sec.mu);
    poly_compress(&sec.acc, MLKEM_DV);
    poly_encode(ct + MLKEM_CT_U_BYTES, &sec.acc, MLKEM_DV);
out:
    OPENSSL_cleanse(&sec, sizeof sec);
    return rc;
}

/* K-PKE.Decrypt (Algorithm 15): m = ByteEncode_1(Compress_1(v' - NTT^-1(s^ . NTT(u')))). */
static void pke_decrypt(uint8_t m[32], const uint8_t *dk_pke, const uint8_t ct[MLKEM768_CT_BYTES])
{
    struct {
        mlkem_poly s, u, w;
    } sec;
    memset(&sec.w, 0, sizeof sec.w);
    for (unsigned i = 0; i < MLKEM_K; i++) {
        poly_decode(&sec.u, ct + i * 32 * MLKEM_DU, MLKEM_DU);
        poly_decompress(&sec.u, MLKEM_DU);
        poly_ntt(&sec.u);
        poly_decode12(&sec.s, dk_pke + i * MLKEM_POLY_BYTES);
        poly_basemul_acc(&sec.w, &sec.s, &sec.u);
    }
    poly_invntt(&sec.w);
    poly_decode(&sec.u, ct + MLKEM_CT_U_BYTES, MLKEM_DV); /* u now holds v' */
    poly_decompress(&sec.u, MLKEM_DV);
    poly_sub_from(&sec.w, &sec.u);
    poly_compress(&sec.w, 1);
    poly_encode(m, &sec.w, 1);
    OPENSSL_cleanse(&sec, sizeof sec);
}

/* --- ML-KEM (Sections 6 and 7) ---------------------------------------------------------- */

static int mlkem_begin(EVP_MD_CTX **ctx)
{
    if (pthread_once(&mlkem_once, mlkem_init) != 0 || mlkem_init_rc < 0) return -EIO;
    *ctx = EVP_MD_CTX_new();
    return *ctx ? 0 : -EIO;
}

int mlkem768_keypair_derand(uint8_t ek[MLKEM768_EK_BYTES], uint8_t dk[MLKEM768_DK_BYTES],
                            const uint8_t d[MLKEM768_SEED_BYTES],
                            const uint8_t z[MLKEM768_SEED_BYTES])
{
    EVP_MD_CTX *ctx = NULL;
    int rc;
    /* Algorithm 16: dk = dk_pke || ek || H(ek) || z */
    if ((rc = mlkem_begin(&ctx)) < 0 || (rc = pke_keygen(ctx, ek, dk, d)) < 0 ||
        (rc = mlkem_hash(ctx, md_sha3_256, ek, MLKEM768_EK_BYTES, NULL, 0, dk + MLKEM_DK_H, 32)) <
            0)
        goto out;
    memcpy(dk + MLKEM_DK_EK, ek, MLKEM768_EK_BYTES);
    memcpy(dk + MLKEM_DK_Z, z, 32);
out:
    if (rc < 0) {
        OPENSSL_cleanse(dk, MLKEM768_DK_BYTES);
        memset(ek, 0, MLKEM768_EK_BYTES);
    }
    EVP_MD_CTX_free(ctx);
    return rc;
}

int mlkem768_keypair(uint8_t ek[MLKEM768_EK_BYTES], uint8_t dk[MLKEM768_DK_BYTES])
{
    uint8_t dz[64];
    crypto_random_bytes(dz, sizeof dz);
    int rc = mlkem768_keypair_derand(ek, dk, dz, dz + 32);
    OPENSSL_cleanse(dz, sizeof dz);
    return rc;
}

int mlkem768_encaps_derand(uint8_t ct[MLKEM768_CT_BYTES], uint8_t ss[MLKEM768_SS_BYTES],
                           const uint8_t ek[MLKEM768_EK_BYTES],
                           const uint8_t m[MLKEM768_SEED_BYTES])
{
    EVP_MD_CTX *ctx = NULL;
    uint8_t h[32], kr[64]; /* kr = K || r = G(m || H(ek)) */
    mlkem_poly t;
    uint32_t bad = 0;
    int rc;

    if ((rc = mlkem_begin(&ctx)) < 0) goto out;
    /* Algorithm 20's modulus check; ek is public, so branching on the result is fine. */
    for (unsigned i = 0; i < MLKEM_K; i++)
        bad |= poly_decode12(&t, ek + i * MLKEM_POLY_BYTES);
    if (bad) {
        rc = -EINVAL;
        goto out;
    }
    /* Algorithm 17 */
    if ((rc = mlkem_hash(ctx, md_sha3_256, ek, MLKEM768_EK_BYTES, NULL, 0, h, 32)) < 0 ||
        (rc = mlkem_hash(ctx, md_sha3_512, m, 32, h, 32, kr, 64)) < 0 ||
        (rc = pke_encrypt(ctx, ct, ek, m, kr + 32)) < 0)
        goto out;
    memcpy(ss, kr, 32);
out:
    if (rc < 0) {
        memset(ct, 0, MLKEM768_CT_BYTES);
        OPENSSL_cleanse(ss, MLKEM768_SS_BYTES);
    }
    OPENSSL_cleanse(kr, sizeof kr);
    EVP_MD_CTX_free(ctx);
    return rc;
}

int mlkem768_encaps(uint8_t ct[MLKEM768_CT_BYTES], uint8_t ss[MLKEM768_SS_BYTES],
                    const uint8_t ek[MLKEM768_EK_BYTES])
{
    uint8_t m[32];
    crypto_random_bytes(m, sizeof m);
    int rc = mlkem768_encaps_derand(ct, ss, ek, m);
    OPENSSL_cleanse(m, sizeof m);
    return rc;
}

int mlkem768_decaps(uint8_t ss[MLKEM768_SS_BYTES], const uint8_t ct[MLKEM768_CT_BYTES],
                    const uint8_t dk[MLKEM768_DK_BYTES])
{
    EVP_MD_CTX *ctx = NULL;
    struct {
        uint8_t m[32], kr[64], kbar[32], ct2[MLKEM768_CT_BYTES];
    } sec;
    uint8_t h[32];
    int rc;

    if ((rc = mlkem_begin(&ctx)) < 0) goto out;
    /* Algorithm 21's hash check: H(dk[384k : 768k+32]) must equal dk[768k+32 : 768k+64]. */
    if ((rc = mlkem_hash(ctx, md_sha3_256, dk + MLKEM_DK_EK, MLKEM768_EK_BYTES, NULL, 0, h, 32)) <
        0)
        goto out;
    if (CRYPTO_memcmp(h, dk + MLKEM_DK_H, 32) != 0) {
        rc = -EINVAL;
        goto out;
    }
    /* Algorithm 18: m' = Decrypt(dk_pke, c); (K', r') = G(m' || h); K_bar = J(z || c);
     * c' = Encrypt(ek_pke, m', r'); K' if c == c' else K_bar. */
    pke_decrypt(sec.m, dk, ct);
    if ((rc = mlkem_hash(ctx, md_sha3_512, sec.m, 32, dk + MLKEM_DK_H, 32, sec.kr, 64)) < 0 ||
        (rc = mlkem_hash(ctx, md_shake256, dk + MLKEM_DK_Z, 32, ct, MLKEM768_CT_BYTES, sec.kbar,
                         32)) < 0 ||
        (rc = pke_encrypt(ctx, sec.ct2, dk + MLKEM_DK_EK, sec.m, sec.kr + 32)) < 0)
        goto out;
    {
        /* Branch-free: diff is CRYPTO_memcmp's result (0 when equal, nonzero otherwise,
         * computed in constant time), widened so (diff | -diff) has its top bit set exactly
         * when diff != 0; reject is then all ones on a mismatch. The empty asm keeps the
         * compiler from turning the select back into a branch. */
        uint64_t diff = (uint32_t)CRYPTO_memcmp(ct, sec.ct2, MLKEM768_CT_BYTES);
        uint8_t reject = (uint8_t)(0u - ((diff | (0u - diff)) >> 63));
        __asm__("" : "+r"(reject));
        for (unsigned i = 0; i < 32; i++)
            ss[i] = (uint8_t)(sec.kr[i] ^ (reject & (sec.kr[i] ^ sec.kbar[i])));
    }
out:
    if (rc < 0) OPENSSL_cleanse(ss, MLKEM768_SS_BYTES);
    OPENSSL_cleanse(&sec, sizeof sec);
    EVP_MD_CTX_free(ctx);
    return rc;
}
