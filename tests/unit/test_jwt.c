/* Unit tests for transport/jwt: the reference's checks, with the clock passed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/jwt.h"

/* Tokens made with Python hmac/base64 (an independent implementation), secret
 * "unit-test-secret-of-at-least-32-bytes!". */
#define TOK_GOOD                                                                                   \
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."                                                        \
    "eyJleHAiOjIwMDAsIm5iZiI6MTAwMCwiaXNzIjoiaSIsImF1ZCI6WyJhIiwiYiJdfQ.Jaav7-"                    \
    "4NpsvfiN6WU8NZk09kVrgp2peNS5gKrSh4XC8"
#define TOK_NOEXP                                                                                  \
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJpIn0.vOqy_"                                   \
    "y1a5sgUYiT7MvP3MaA6319HSZJL2vX7RiYSyeE"
#define TOK_HS384                                                                                  \
    "eyJhbGciOiJIUzM4NCIsInR5cCI6IkpXVCJ9.eyJleHAiOjIwMDB9.L72AvCaeB0aLpUNy218rWRc2-"              \
    "ayWfthgLhaUZxu_uS8"
#define TOK_OTHERKEY                                                                               \
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjIwMDB9.PdAg_B9ay6MYVC_ulfGp1vS55uBMzhyY4EJW7-" \
    "Ob6Ks"

/* Signed correctly, but with a key twice: {"exp":1000,"exp":2000} (the first expired at
 * 1500, the last valid) and a header {"alg":"none","alg":"HS256"}. */
#define TOK_DUP_EXP                                                                                \
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjEwMDAsImV4cCI6MjAwMH0."                        \
    "OPc0kvzNiH3ce761qW3YLcLyXAg3AkUp6Itnvzn9AVA"
#define TOK_DUP_ALG                                                                                \
    "eyJhbGciOiJub25lIiwiYWxnIjoiSFMyNTYifQ.eyJleHAiOjIwMDB9."                                     \
    "bB0CU7ieL5MPw94CYabMibppumrr9HvzK3os8nz-52U"

#define SECRET "unit-test-secret-of-at-least-32-bytes!"

static enum jwt_verdict check(const char *tok, const char *iss, const char *aud, int64_t skew,
                              int64_t now)
{
    return jwt_verify(tok, strlen(tok), (const uint8_t *)SECRET, strlen(SECRET), iss, aud, skew,
                      now);
}

static void times_and_claims(void **state)
{
    (void)state;
    assert_int_equal(check(TOK_GOOD, "i", "b", 0, 1500), JWT_OK);
    assert_int_equal(check(TOK_GOOD, NULL, NULL, 0, 2000), JWT_OK); /* exp itself */
    assert_int_equal(check(TOK_GOOD, NULL, NULL, 0, 2001), JWT_EXPIRED);
    assert_int_equal(check(TOK_GOOD, NULL, NULL, 30, 2030), JWT_OK); /* skew */
    assert_int_equal(check(TOK_GOOD, NULL, NULL, 0, 999), JWT_NOT_YET);
    assert_int_equal(check(TOK_GOOD, NULL, NULL, 5, 995), JWT_OK);
    assert_int_equal(check(TOK_GOOD, "j", NULL, 0, 1500), JWT_ISSUER);
    assert_int_equal(check(TOK_GOOD, NULL, "c", 0, 1500), JWT_AUDIENCE);
    assert_int_equal(check(TOK_GOOD, NULL, NULL, INT64_MAX, INT64_MAX), JWT_OK); /* saturates */
}

static void malformed(void **state)
{
    (void)state;
    assert_int_equal(check(TOK_NOEXP, NULL, NULL, 0, 1), JWT_NO_EXP);
    assert_string_equal(jwt_verdict_text(JWT_NO_EXP), "invalid websocket jwt: no exp claim "
                                                      "(required: the expiry, in seconds since "
                                                      "the epoch)");
    assert_int_equal(check(TOK_HS384, NULL, NULL, 0, 1), JWT_INVALID);
    assert_int_equal(check(TOK_OTHERKEY, NULL, NULL, 0, 1), JWT_INVALID);
    assert_int_equal(check("a.b", NULL, NULL, 0, 1), JWT_INVALID);
    assert_int_equal(check("a.b.c.d", NULL, NULL, 0, 1), JWT_INVALID);
    assert_int_equal(check("", NULL, NULL, 0, 1), JWT_INVALID);
    char t[sizeof TOK_GOOD];
    memcpy(t, TOK_GOOD, sizeof t);
    t[sizeof t - 2] ^= 1; /* one signature character off */
    assert_int_equal(check(t, NULL, NULL, 0, 1500), JWT_INVALID);
    assert_int_equal(check(TOK_DUP_EXP, NULL, NULL, 0, 1500), JWT_INVALID);
    assert_int_equal(check(TOK_DUP_ALG, NULL, NULL, 0, 1500), JWT_INVALID);
    assert_string_equal(jwt_verdict_text(JWT_EXPIRED), "expired websocket jwt");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(times_and_claims),
        cmocka_unit_test(malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
