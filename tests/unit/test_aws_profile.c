/* Unit tests for remote/aws_profile: sections of the credentials and config files,
 * comments, trimming, precedence of the credentials file, indirect profiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "remote/aws_profile.h"

static const char creds[] = "# comment\n"
                            "[default]\n"
                            "aws_access_key_id = AKDEFAULT\n"
                            "aws_secret_access_key = sdefault\n"
                            "\n"
                            "[ work ]\n"
                            "  ; indented lines are nested settings, skipped\n"
                            "AWS_ACCESS_KEY_ID=AKWORK\n"
                            "aws_secret_access_key =  swork  \n"
                            "aws_session_token = tok\n"
                            "[role]\n"
                            "role_arn = arn:aws:iam::1:role/x\n"
                            "source_profile = default\n";

static const char config[] = "[default]\n"
                             "region = eu-west-3\n"
                             "[profile work]\n"
                             "region=us-east-2\n"
                             "aws_access_key_id = AKFROMCONFIG\n"
                             "[work]\n"
                             "region = not-this-one\n"
                             "[profile cfgonly]\n"
                             "aws_access_key_id = AKCFG\n"
                             "aws_secret_access_key = scfg\n"
                             "[profile sso]\n"
                             "sso_session = corp\n";

static void test_credentials_then_config(void **state)
{
    struct aws_profile p = {0};
    aws_profile_parse(creds, "work", false, &p);
    aws_profile_parse(config, "work", true, &p);
    assert_true(p.found);
    assert_string_equal(p.access_key, "AKWORK"); /* the credentials file wins */
    assert_string_equal(p.secret_key, "swork");
    assert_string_equal(p.session_token, "tok");
    assert_string_equal(p.region, "us-east-2"); /* [profile work], not [work] */
    assert_null(p.indirect);
    aws_profile_clear(&p);
    assert_null(p.access_key);
    assert_false(p.found);
}

static void test_default_profile(void **state)
{
    struct aws_profile p = {0};
    aws_profile_parse(creds, "default", false, &p);
    aws_profile_parse(config, "default", true, &p);
    assert_string_equal(p.access_key, "AKDEFAULT");
    assert_string_equal(p.region, "eu-west-3");
    aws_profile_clear(&p);
}

static void test_config_only_and_missing(void **state)
{
    struct aws_profile p = {0};
    aws_profile_parse(creds, "cfgonly", false, &p);
    assert_false(p.found);
    aws_profile_parse(config, "cfgonly", true, &p);
    assert_true(p.found);
    assert_string_equal(p.access_key, "AKCFG");
    assert_string_equal(p.secret_key, "scfg");
    aws_profile_clear(&p);
    aws_profile_parse(creds, "nope", false, &p);
    aws_profile_parse(config, "nope", true, &p);
    assert_false(p.found);
    assert_null(p.access_key);
}

static void test_indirect_profiles(void **state)
{
    struct aws_profile p = {0};
    aws_profile_parse(creds, "role", false, &p);
    assert_true(p.found);
    assert_null(p.access_key);
    assert_string_equal(p.indirect, "role_arn");
    aws_profile_clear(&p);
    aws_profile_parse(config, "sso", true, &p);
    assert_string_equal(p.indirect, "sso_session");
    aws_profile_clear(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credentials_then_config),
        cmocka_unit_test(test_default_profile),
        cmocka_unit_test(test_config_only_and_missing),
        cmocka_unit_test(test_indirect_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
