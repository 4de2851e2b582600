/* Unit tests for fleet/fleet_sign (tokens, signed rendezvous URLs, harness-key
 * authorizations) and fleet/fleet_throttle (token buckets): pure functions, so every
 * bad input is tried directly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fleet/fleet_sign.h"
#include "fleet/fleet_throttle.h"

static const uint8_t secret[FLEET_SECRET_LEN] = {1, 2, 3};
static const uint8_t other_secret[FLEET_SECRET_LEN] = {9};

static void test_tokens(void **state)
{
    uint8_t rnd[40];
    for (int i = 0; i < 40; i++)
        rnd[i] = (uint8_t)(i * 7);
    char token[FLEET_TOKEN_LEN + 1], id[FLEET_TOKEN_ID_LEN + 1], digest[FLEET_DIGEST_HEX + 1];
    fleet_token_make(rnd, token, id, digest);
    assert_int_equal(strlen(token), FLEET_TOKEN_LEN);
    assert_memory_equal(token, "exrt_", 5);
    char id2[FLEET_TOKEN_ID_LEN + 1], digest2[FLEET_DIGEST_HEX + 1];
    assert_int_equal(fleet_token_split(token, strlen(token), id2, digest2), 0);
    assert_string_equal(id, id2);
    assert_true(fleet_digest_equal(digest, digest2));
    /* the digest is of the secret: one changed secret digit changes it */
    token[FLEET_TOKEN_LEN - 1] = token[FLEET_TOKEN_LEN - 1] == '0' ? '1' : '0';
    assert_int_equal(fleet_token_split(token, strlen(token), id2, digest2), 0);
    assert_false(fleet_digest_equal(digest, digest2));
    /* shapes that are not tokens */
    assert_int_equal(fleet_token_split(token, strlen(token) - 1, id2, digest2), -EINVAL);
    char bad[FLEET_TOKEN_LEN + 1];
    memcpy(bad, token, sizeof bad);
    bad[0] = 'X';
    assert_int_equal(fleet_token_split(bad, FLEET_TOKEN_LEN, id2, digest2), -EINVAL);
    memcpy(bad, token, sizeof bad);
    bad[21] = '-';
    assert_int_equal(fleet_token_split(bad, FLEET_TOKEN_LEN, id2, digest2), -EINVAL);
    memcpy(bad, token, sizeof bad);
    bad[30] = 'G';
    assert_int_equal(fleet_token_split(bad, FLEET_TOKEN_LEN, id2, digest2), -EINVAL);
}

static void test_environment_ids_and_patterns(void **state)
{
    assert_true(fleet_env_id_ok("ci-1.linux_x", 12));
    assert_false(fleet_env_id_ok("", 0));
    assert_false(fleet_env_id_ok("..", 2));
    assert_false(fleet_env_id_ok("a/b", 3));
    assert_false(fleet_env_id_ok("a?b", 3));
    char longid[FLEET_MAX_ID + 2];
    memset(longid, 'a', sizeof longid);
    assert_true(fleet_env_id_ok(longid, FLEET_MAX_ID));
    assert_false(fleet_env_id_ok(longid, FLEET_MAX_ID + 1));
    assert_true(fleet_env_pattern_ok("ci-*"));
    assert_true(fleet_env_pattern_ok("*"));
    assert_false(fleet_env_pattern_ok("c*i"));
    assert_false(fleet_env_pattern_ok("a/*"));
    assert_true(fleet_env_pattern_match("ci-*", "ci-7", 4));
    assert_false(fleet_env_pattern_match("ci-*", "cd-7", 4));
    assert_true(fleet_env_pattern_match("*", "anything", 8));
    assert_true(fleet_env_pattern_match("dev", "dev", 3));
    assert_false(fleet_env_pattern_match("dev", "dev2", 4));
    assert_false(fleet_env_pattern_match("dev", "de", 2));
}

static void test_urls(void **state)
{
    struct fleet_url_claims c = {.role = FLEET_ROLE_HARNESS, .expires = 1000};
    strcpy(c.registration, "reg-1");
    strcpy(c.nonce, "00112233445566778899aabbccddeeff");
    char q[400];
    assert_int_equal(fleet_url_sign(secret, "env-1", &c, q, sizeof q), 0);
    struct fleet_url_claims got;
    assert_int_equal(fleet_url_verify(secret, "env-1", q, strlen(q), 999, &got), 0);
    assert_int_equal(got.role, FLEET_ROLE_HARNESS);
    assert_string_equal(got.registration, "reg-1");
    assert_string_equal(got.nonce, c.nonce);
    /* expired, other environment, other secret, tampered claims, missing parts */
    assert_int_equal(fleet_url_verify(secret, "env-1", q, strlen(q), 1001, &got), -ETIMEDOUT);
    assert_int_equal(fleet_url_verify(secret, "env-2", q, strlen(q), 999, &got), -EINVAL);
    assert_int_equal(fleet_url_verify(other_secret, "env-1", q, strlen(q), 999, &got), -EINVAL);
    char t[420];
    snprintf(t, sizeof t, "%s", q);
    char *exp = strstr(t, "exp=1000");
    exp[7] = '9'; /* a later expiry the signature does not cover */
    assert_int_equal(fleet_url_verify(secret, "env-1", t, strlen(t), 999, &got), -EINVAL);
    snprintf(t, sizeof t, "%s", q);
    memcpy(strstr(t, "role=harness"), "role=environ", 12);
    assert_int_equal(fleet_url_verify(secret, "env-1", t, strlen(t), 999, &got), -EINVAL);
    snprintf(t, sizeof t, "%s&reg=reg-2", q); /* a repeated member */
    assert_int_equal(fleet_url_verify(secret, "env-1", t, strlen(t), 999, &got), -EINVAL);
    assert_int_equal(fleet_url_verify(secret, "env-1", q, strlen(q) - 1, 999, &got), -EINVAL);
    assert_int_equal(fleet_url_verify(secret, "env-1", "", 0, 999, &got), -EINVAL);
    /* an environment URL carries no nonce */
    struct fleet_url_claims e = {.role = FLEET_ROLE_EXECUTOR, .expires = 5};
    strcpy(e.registration, "reg-9");
    assert_int_equal(fleet_url_sign(secret, "env-1", &e, q, sizeof q), 0);
    assert_null(strstr(q, "n="));
    assert_int_equal(fleet_url_verify(secret, "env-1", q, strlen(q), 5, &got), 0);
    assert_int_equal(got.role, FLEET_ROLE_EXECUTOR);
}

static void test_authorizations(void **state)
{
    char a[160];
    const char *nonce = "ffeeddccbbaa99887766554433221100";
    char kd[FLEET_DIGEST_HEX + 1], kd2[FLEET_DIGEST_HEX + 1];
    fleet_key_digest((const uint8_t *)"key-one", 7, kd);
    fleet_key_digest((const uint8_t *)"key-two", 7, kd2);
    fleet_authorization_make(secret, "env", "reg", kd, 100, nonce, a, sizeof a);
    size_t n = strlen(a);
    assert_true(fleet_authorization_ok(secret, "env", "reg", kd, a, n, 100));
    assert_false(fleet_authorization_ok(secret, "env", "reg", kd, a, n, 101));
    assert_false(fleet_authorization_ok(secret, "env2", "reg", kd, a, n, 50));
    assert_false(fleet_authorization_ok(secret, "env", "reg2", kd, a, n, 50));
    assert_false(fleet_authorization_ok(secret, "env", "reg", kd2, a, n, 50));
    assert_false(fleet_authorization_ok(other_secret, "env", "reg", kd, a, n, 50));
    assert_false(fleet_authorization_ok(secret, "env", "reg", kd, a, n - 1, 50));
    assert_false(fleet_authorization_ok(secret, "env", "reg", kd, "hka1.", 5, 50));
    assert_false(fleet_authorization_ok(secret, "env", "reg", kd, "garbage", 7, 50));
}

static void test_throttle(void **state)
{
    struct fleet_throttle t;
    uint8_t seed[16] = {0};
    fleet_throttle_init(&t, 2.0, 3.0, 4, seed);
    uint64_t retry = 0;
    bool first = false;
    for (int i = 0; i < 3; i++)
        assert_true(fleet_throttle_take(&t, "a", 1, 1000, &retry, &first));
    assert_false(fleet_throttle_take(&t, "a", 1, 1000, &retry, &first));
    assert_true(first);
    assert_true(retry >= 400 && retry <= 501);
    assert_false(fleet_throttle_take(&t, "a", 1, 1001, &retry, &first));
    assert_false(first); /* one log line per burst */
    /* another key is untouched by a's flood */
    assert_true(fleet_throttle_take(&t, "b", 1, 1001, &retry, &first));
    /* a refills at 2/s */
    assert_true(fleet_throttle_take(&t, "a", 1, 1600, &retry, &first));
    assert_false(fleet_throttle_take(&t, "a", 1, 1600, &retry, &first));
    /* bounded: many keys never grow the table past its limit */
    char k[16];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "k%d", i);
        fleet_throttle_take(&t, k, strlen(k), 5000 + (uint64_t)i, NULL, NULL);
        assert_true(t.map.n <= 4);
    }
    fleet_throttle_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),   cmocka_unit_test(test_environment_ids_and_patterns),
        cmocka_unit_test(test_urls),     cmocka_unit_test(test_authorizations),
        cmocka_unit_test(test_throttle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
