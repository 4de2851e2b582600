/* test_sigv4: remote/sigv4 against AWS's published SigV4 test-suite vectors
 * (aws-sig-v4-test-suite: get-vanilla, get-vanilla-query-order-key-case,
 * post-x-www-form-urlencoded; AKIDEXAMPLE, 2015-08-30T12:36:00Z, us-east-1,
 * service "service"), plus the session-token and argument checks. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "remote/sigv4.h"

static const struct sigv4_key KEY = {.access_key = "AKIDEXAMPLE",
                                     .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                     .region = "us-east-1",
                                     .service = "service"};
static const time_t WHEN = 1440938160; /* 2015-08-30T12:36:00Z */

static void test_get_vanilla(void **state)
{
    (void)state;
    struct sigv4_request r = {.method = "GET", .host = "example.amazonaws.com", .target = "/"};
    char date[SIGV4_DATE_LEN + 1], auth[512];
    assert_int_equal(sigv4_sign(&KEY, &r, WHEN, date, auth, sizeof auth), 0);
    assert_string_equal(date, "20150830T123600Z");
    assert_string_equal(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"
                              "service/aws4_request, SignedHeaders=host;x-amz-date, "
                              "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae"
                              "1d763fbf31");
}

static void test_query_order(void **state)
{
    (void)state;
    struct sigv4_request r = {.method = "GET",
                              .host = "example.amazonaws.com",
                              .target = "/?Param2=value2&Param1=value1"};
    char date[SIGV4_DATE_LEN + 1], auth[512];
    assert_int_equal(sigv4_sign(&KEY, &r, WHEN, date, auth, sizeof auth), 0);
    const char *sig = strstr(auth, "Signature=");
    assert_non_null(sig);
    assert_string_equal(sig + 10,
                        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

static void test_post_form(void **state)
{
    (void)state;
    struct sigv4_request r = {.method = "POST",
                              .host = "example.amazonaws.com",
                              .target = "/",
                              .content_type = "application/x-www-form-urlencoded",
                              .body = (const uint8_t *)"Param1=value1",
                              .body_len = 13};
    char date[SIGV4_DATE_LEN + 1], auth[512];
    assert_int_equal(sigv4_sign(&KEY, &r, WHEN, date, auth, sizeof auth), 0);
    assert_string_equal(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"
                              "service/aws4_request, SignedHeaders=content-type;host;x-amz-date, "
                              "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196"
                              "a0fe09473a");
}

static void test_token_and_errors(void **state)
{
    (void)state;
    struct sigv4_key k = KEY;
    k.session_token = "TOKEN";
    struct sigv4_request r = {.method = "GET", .host = "h:8080", .target = "/a b?x=1"};
    char date[SIGV4_DATE_LEN + 1], auth[512];
    assert_int_equal(sigv4_sign(&k, &r, WHEN, date, auth, sizeof auth), 0);
    assert_non_null(strstr(auth, "SignedHeaders=host;x-amz-date;x-amz-security-token, "));
    assert_int_equal(sigv4_sign(&k, &r, WHEN, date, auth, 40), -ENOSPC);
    r.target = "no-slash";
    assert_int_equal(sigv4_sign(&k, &r, WHEN, date, auth, sizeof auth), -EINVAL);
    k.region = NULL;
    r.target = "/";
    assert_int_equal(sigv4_sign(&k, &r, WHEN, date, auth, sizeof auth), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_vanilla),
        cmocka_unit_test(test_query_order),
        cmocka_unit_test(test_post_form),
        cmocka_unit_test(test_token_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
