/* Unit tests for crypto/mlkem768: known answers from the independent @noble/post-quantum
 * implementation (tests/unit/mlkem768_vectors.h, generated offline by
 * tests/oracle/gen_mlkem_vectors.mjs), an accumulated 200-round run against the same oracle,
 * the FIPS 203 input checks, implicit rejection, random round trips, and exhaustive checks
 * of the arithmetic helpers (exact mod q, compression, NTT against schoolbook products). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "crypto/mlkem768.h"
#include "mlkem768_vectors.h"

/* A second copy of the module, compiled here with a one-block first SHAKE128 squeeze (112
 * candidates, never enough for 256 coefficients) so SampleNTT always takes its re-squeeze
 * path, which the real build reaches with probability ~2^-105. Its public names are
 * renamed so it links beside the library's copy; its static helpers (mod_q, compress,
 * poly_ntt, ...) also become reachable for the exhaustive tests below. */
#define MLKEM768_XOF_FIRST_BYTES 168
#define mlkem768_keypair_derand resqueeze_keypair_derand
#define mlkem768_keypair resqueeze_keypair
#define mlkem768_encaps_derand resqueeze_encaps_derand
#define mlkem768_encaps resqueeze_encaps
#define mlkem768_decaps resqueeze_decaps
#include "crypto/mlkem768.c"
#undef mlkem768_keypair_derand
#undef mlkem768_keypair
#undef mlkem768_encaps_derand
#undef mlkem768_encaps
#undef mlkem768_decaps

static void unhex(const char *s, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(s), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void digest(const char *name, const uint8_t *in, size_t len, uint8_t *out, size_t outlen)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const EVP_MD *md = EVP_get_digestbyname(name);
    assert_non_null(ctx);
    assert_non_null(md);
    assert_int_equal(EVP_DigestInit_ex(ctx, md, NULL), 1);
    assert_int_equal(EVP_DigestUpdate(ctx, in, len), 1);
    if (EVP_MD_get_flags(md) & EVP_MD_FLAG_XOF)
        assert_int_equal(EVP_DigestFinalXOF(ctx, out, outlen), 1);
    else
        assert_int_equal(EVP_DigestFinal_ex(ctx, out, NULL), 1);
    EVP_MD_CTX_free(ctx);
}

static void assert_sha3_hex(const uint8_t *in, size_t len, const char *want_hex)
{
    uint8_t got[32], want[32];
    digest("SHA3-256", in, len, got, 32);
    unhex(want_hex, want, 32);
    assert_memory_equal(got, want, 32);
}

/* One set of buffers, static so the tests stay off the small cmocka stacks. */
static uint8_t ek[MLKEM768_EK_BYTES], dk[MLKEM768_DK_BYTES], ct[MLKEM768_CT_BYTES];
static uint8_t ek2[MLKEM768_EK_BYTES], dk2[MLKEM768_DK_BYTES], ct2[MLKEM768_CT_BYTES];

/* One implementation of the KEM, so the known answers can check both copies. */
struct kem {
    int (*keypair_derand)(uint8_t *, uint8_t *, const uint8_t *, const uint8_t *);
    int (*encaps_derand)(uint8_t *, uint8_t *, const uint8_t *, const uint8_t *);
    int (*decaps)(uint8_t *, const uint8_t *, const uint8_t *);
};
static const struct kem library = {mlkem768_keypair_derand, mlkem768_encaps_derand,
                                   mlkem768_decaps};
static const struct kem resqueeze = {resqueeze_keypair_derand, resqueeze_encaps_derand,
                                     resqueeze_decaps};

static void check_known_answers(const struct kem *kem)
{
    size_t count = sizeof mlkem768_vectors / sizeof mlkem768_vectors[0];
    assert_true(count >= 6);
    for (size_t i = 0; i < count; i++) {
        const struct mlkem768_vector *v = &mlkem768_vectors[i];
        uint8_t d[32], z[32], m[32], ss[32], ss2[32], want[32], jin[32 + MLKEM768_CT_BYTES];
        unhex(v->d, d, 32);
        unhex(v->z, z, 32);
        unhex(v->m, m, 32);
        assert_int_equal(kem->keypair_derand(ek, dk, d, z), 0);
        assert_sha3_hex(ek, sizeof ek, v->ek_sha3);
        assert_sha3_hex(dk, sizeof dk, v->dk_sha3);
        assert_int_equal(kem->encaps_derand(ct, ss, ek, m), 0);
        assert_sha3_hex(ct, sizeof ct, v->ct_sha3);
        unhex(v->ss, want, 32);
        assert_memory_equal(ss, want, 32);
        assert_int_equal(kem->decaps(ss2, ct, dk), 0);
        assert_memory_equal(ss2, want, 32);

        /* Implicit rejection: the oracle's answer, and by definition J(z || ct'). */
        ct[v->flip_pos] ^= (uint8_t)v->flip_mask;
        assert_int_equal(kem->decaps(ss2, ct, dk), 0);
        unhex(v->ss_reject, want, 32);
        assert_memory_equal(ss2, want, 32);
        memcpy(jin, z, 32);
        memcpy(jin + 32, ct, sizeof ct);
        digest("SHAKE256", jin, sizeof jin, want, 32);
        assert_memory_equal(ss2, want, 32);
    }
}

static void test_known_answers(void **state)
{
    (void)state;
    check_known_answers(&library);
}

static void test_accumulated(void **state)
{
    (void)state;
    enum { ITER = MLKEM768_ACCUMULATED_ITERATIONS };
    static uint8_t stream[96 * ITER];
    const char *label = MLKEM768_ACCUMULATED_LABEL;
    uint8_t ss[32], ssr[32], got[32], want[32];
    EVP_MD_CTX *acc = EVP_MD_CTX_new();
    assert_non_null(acc);
    digest("SHAKE128", (const uint8_t *)label, strlen(label), stream, sizeof stream);
    assert_int_equal(EVP_DigestInit_ex(acc, EVP_get_digestbyname("SHA3-256"), NULL), 1);
    for (unsigned i = 0; i < ITER; i++) {
        const uint8_t *s = stream + 96 * i;
        assert_int_equal(mlkem768_keypair_derand(ek, dk, s, s + 32), 0);
        assert_int_equal(mlkem768_encaps_derand(ct, ss, ek, s + 64), 0);
        assert_int_equal(mlkem768_decaps(ssr, ct, dk), 0);
        assert_memory_equal(ss, ssr, 32);
        EVP_DigestUpdate(acc, ek, sizeof ek);
        EVP_DigestUpdate(acc, dk, sizeof dk);
        EVP_DigestUpdate(acc, ct, sizeof ct);
        EVP_DigestUpdate(acc, ss, sizeof ss);
        ct[(131 * i) % MLKEM768_CT_BYTES] ^= (uint8_t)(1u << (i % 8));
        assert_int_equal(mlkem768_decaps(ssr, ct, dk), 0);
        EVP_DigestUpdate(acc, ssr, sizeof ssr);
    }
    assert_int_equal(EVP_DigestFinal_ex(acc, got, NULL), 1);
    EVP_MD_CTX_free(acc);
    unhex(MLKEM768_ACCUMULATED_SHA3, want, 32);
    assert_memory_equal(got, want, 32);
}

/* Sets 12-bit coefficient idx (0..767) of ek's t^ encoding to val. */
static void set_coeff(uint8_t *e, unsigned idx, unsigned val)
{
    uint8_t *p = e + 3 * (idx / 2);
    if (idx % 2 == 0) {
        p[0] = (uint8_t)val;
        p[1] = (uint8_t)((p[1] & 0xf0) | (val >> 8));
    } else {
        p[1] = (uint8_t)((p[1] & 0x0f) | ((val & 0x0f) << 4));
        p[2] = (uint8_t)(val >> 4);
    }
}

static void test_encaps_modulus_check(void **state)
{
    (void)state;
    uint8_t d[32] = {1}, z[32] = {2}, m[32] = {3}, ss[32];
    const unsigned idx[] = {0, 1, 255, 256, 511, 766, 767};
    assert_int_equal(mlkem768_keypair_derand(ek, dk, d, z), 0);
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        for (unsigned val = MLKEM_Q - 1; val <= 4095; val += val < MLKEM_Q + 1 ? 1 : 1000) {
            memcpy(ek2, ek, sizeof ek);
            set_coeff(ek2, idx[i], val);
            memset(ct, 0xaa, sizeof ct);
            memset(ss, 0xaa, sizeof ss);
            int rc = mlkem768_encaps_derand(ct, ss, ek2, m);
            if (val < MLKEM_Q) {
                assert_int_equal(rc, 0);
                continue;
            }
            assert_int_equal(rc, -EINVAL);
            /* nothing half-written on failure */
            for (size_t j = 0; j < sizeof ct; j++)
                assert_int_equal(ct[j], 0);
            for (size_t j = 0; j < sizeof ss; j++)
                assert_int_equal(ss[j], 0);
            assert_int_equal(mlkem768_encaps(ct, ss, ek2), -EINVAL);
        }
        memcpy(ek2, ek, sizeof ek);
        set_coeff(ek2, idx[i], 4095);
        assert_int_equal(mlkem768_encaps_derand(ct, ss, ek2, m), -EINVAL);
    }
    /* rho (the last 32 bytes) is not range-checked: any value is valid */
    memcpy(ek2, ek, sizeof ek);
    memset(ek2 + MLKEM768_EK_BYTES - 32, 0xff, 32);
    assert_int_equal(mlkem768_encaps_derand(ct, ss, ek2, m), 0);
}

static void test_decaps_hash_check(void **state)
{
    (void)state;
    uint8_t d[32] = {4}, z[32] = {5}, ss[32], ss2[32];
    assert_int_equal(mlkem768_keypair_derand(ek, dk, d, z), 0);
    assert_int_equal(mlkem768_encaps(ct, ss, ek), 0);
    /* A flipped bit in the stored H(ek), or in the ek it covers, fails the hash check. */
    const size_t bad[] = {1152, 1152 + 600, 2335, 2336, 2350, 2367};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(dk2, dk, sizeof dk);
        dk2[bad[i]] ^= 0x04;
        memset(ss2, 0xaa, sizeof ss2);
        assert_int_equal(mlkem768_decaps(ss2, ct, dk2), -EINVAL);
        for (size_t j = 0; j < sizeof ss2; j++)
            assert_int_equal(ss2[j], 0);
    }
    /* z is outside the check and only matters on rejection */
    memcpy(dk2, dk, sizeof dk);
    dk2[MLKEM768_DK_BYTES - 1] ^= 1;
    assert_int_equal(mlkem768_decaps(ss2, ct, dk2), 0);
    assert_memory_equal(ss, ss2, 32);
    /* dk_pke is outside it too: a wrong secret decrypts wrongly and rejects implicitly */
    memcpy(dk2, dk, sizeof dk);
    dk2[10] ^= 0x20;
    assert_int_equal(mlkem768_decaps(ss2, ct, dk2), 0);
    assert_memory_not_equal(ss, ss2, 32);
}

static void test_random_round_trips(void **state)
{
    (void)state;
    uint8_t ss[32], ss2[32], ss3[32];
    for (int i = 0; i < 30; i++) {
        assert_int_equal(mlkem768_keypair(ek, dk), 0);
        assert_int_equal(mlkem768_encaps(ct, ss, ek), 0);
        assert_int_equal(mlkem768_decaps(ss2, ct, dk), 0);
        assert_memory_equal(ss, ss2, 32);
        /* fresh randomness every call */
        assert_int_equal(mlkem768_encaps(ct2, ss3, ek), 0);
        assert_memory_not_equal(ct, ct2, sizeof ct);
        assert_memory_not_equal(ss, ss3, 32);
        assert_int_equal(mlkem768_keypair(ek2, dk2), 0);
        assert_memory_not_equal(ek, ek2, sizeof ek);
        /* someone else's key: implicit rejection, a different secret */
        assert_int_equal(mlkem768_decaps(ss2, ct, dk2), 0);
        assert_memory_not_equal(ss, ss2, 32);
    }
}

/* The copy that always re-squeezes in SampleNTT gives the same known answers. */
static void test_sample_ntt_resqueeze(void **state)
{
    (void)state;
    check_known_answers(&resqueeze);
}

static void test_mod_q_exact(void **state)
{
    (void)state;
    /* every input the module can pass (< 2^26), against the hardware divide */
    for (uint32_t a = 0; a < (1u << 26); a++)
        if (mod_q(a) != a % MLKEM_Q) fail_msg("mod_q(%u) = %u", a, mod_q(a));
}

static void test_compress_exact(void **state)
{
    (void)state;
    const unsigned ds[] = {1, 4, 10, 11};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        unsigned d = ds[k];
        for (uint32_t x = 0; x < MLKEM_Q; x++) {
            /* round(2^d x / q), half up, as floor((2 * 2^d x + q) / 2q) */
            uint32_t want = ((2u * (x << d) + MLKEM_Q) / (2u * MLKEM_Q)) % (1u << d);
            assert_int_equal(compress((uint16_t)x, d), want);
        }
        for (uint32_t y = 0; y < (1u << d); y++) {
            uint32_t want = (2u * MLKEM_Q * y + (1u << d)) / (2u << d);
            assert_int_equal(decompress((uint16_t)y, d), want);
        }
    }
}

/* NTT^-1(NTT(f) (x) NTT(g)) equals f * g in Z_q[X]/(X^256 + 1) computed by schoolbook. */
static void test_ntt_multiplies(void **state)
{
    (void)state;
    assert_int_equal(pthread_once(&mlkem_once, mlkem_init), 0); /* the zeta tables */
    for (int round = 0; round < 20; round++) {
        mlkem_poly f, g, fh, gh, r;
        uint8_t rnd[2 * MLKEM_N * 2];
        int64_t school[MLKEM_N] = {0};
        crypto_random_bytes(rnd, sizeof rnd);
        for (int i = 0; i < MLKEM_N; i++) {
            f.c[i] = (uint16_t)((rnd[2 * i] | rnd[2 * i + 1] << 8) % MLKEM_Q);
            g.c[i] = (uint16_t)((rnd[512 + 2 * i] | rnd[512 + 2 * i + 1] << 8) % MLKEM_Q);
        }
        if (round == 0) f.c[0] = g.c[MLKEM_N - 1] = MLKEM_Q - 1; /* extremes */
        for (int i = 0; i < MLKEM_N; i++)
            for (int j = 0; j < MLKEM_N; j++) {
                int64_t p = (int64_t)f.c[i] * g.c[j];
                if (i + j < MLKEM_N)
                    school[i + j] += p;
                else
                    school[i + j - MLKEM_N] -= p; /* X^256 = -1 */
            }
        fh = f;
        gh = g;
        poly_ntt(&fh);
        poly_ntt(&gh);
        memset(&r, 0, sizeof r);
        poly_basemul_acc(&r, &fh, &gh);
        poly_invntt(&r);
        for (int i = 0; i < MLKEM_N; i++)
            assert_int_equal(r.c[i], ((school[i] % MLKEM_Q) + MLKEM_Q) % MLKEM_Q);
        poly_invntt(&fh);
        assert_memory_equal(fh.c, f.c, sizeof f.c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),        cmocka_unit_test(test_accumulated),
        cmocka_unit_test(test_encaps_modulus_check), cmocka_unit_test(test_decaps_hash_check),
        cmocka_unit_test(test_random_round_trips),   cmocka_unit_test(test_sample_ntt_resqueeze),
        cmocka_unit_test(test_mod_q_exact),          cmocka_unit_test(test_compress_exact),
        cmocka_unit_test(test_ntt_multiplies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
