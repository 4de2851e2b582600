/* Unit tests for process/env_policy: every step of PROTOCOL.md section 5.1.3 (inherit
 * all/core/none, default excludes, exclude, set, includeOnly, `env` wins), the
 * pattern matcher, and the decode errors for malformed policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "process/env_policy.h"

static char *const server_env[] = {
    "PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "Path_lower=x", "API_KEY=k",
    "MY_SECRET_THING=s", "gh_token=t", "PLAIN=p", "PLAIN=second", "NOEQUALS", "=novalue",
    "shell=/bin/zsh", NULL};

/* Decodes `policy_json` (an envPolicy object, or "null") and builds with `env_json`. */
static char **build(const char *policy_json, const char *env_json)
{
    char params[2048];
    snprintf(params, sizeof params, "{\"envPolicy\":%s}", policy_json);
    json_t *p = json_loads(params, 0, NULL);
    assert_non_null(p);
    json_t *env = json_loads(env_json, 0, NULL);
    assert_non_null(env);
    struct pdec d;
    pdec_begin(&d, p, "ExecParams");
    struct env_policy pol;
    if (!env_policy_decode(&d, "envPolicy", &pol)) fail_msg("decode failed: %s", d.err);
    char **envp = env_policy_build(&pol, server_env, env);
    json_decref(p);
    json_decref(env);
    return envp;
}

/* Joins envp with spaces for compact comparisons. */
static void expect_env(char **envp, const char *want)
{
    char got[4096] = "";
    for (char **e = envp; *e; e++) {
        if (e != envp) strcat(got, " ");
        strcat(got, *e);
    }
    assert_string_equal(got, want);
    env_free(envp);
}

#define POL(inherit, ide, exclude, set, include)                                            \
    "{\"inherit\":\"" inherit "\",\"ignoreDefaultExcludes\":" ide ",\"exclude\":" exclude \
    ",\"set\":" set ",\"includeOnly\":" include "}"

static void test_absent_policy_is_exactly_env(void **state)
{
    (void)state;
    expect_env(build("null", "{\"ZZ\":\"1\",\"A\":\"2\"}"), "A=2 ZZ=1");
    expect_env(build("null", "{}"), "");
}

static void test_inherit_all_with_default_excludes(void **state)
{
    (void)state;
    expect_env(build(POL("all", "false", "[]", "{}", "[]"), "{\"ZZ\":\"1\"}"),
               "HOME=/home/u LANG=C.UTF-8 PATH=/usr/bin:/bin PLAIN=p Path_lower=x ZZ=1 "
               "shell=/bin/zsh");
}

static void test_ignore_default_excludes_keeps_secrets(void **state)
{
    (void)state;
    expect_env(build(POL("all", "true", "[]", "{}", "[\"*key*\",\"*SECRET*\",\"GH_*\"]"), "{}"),
               "API_KEY=k MY_SECRET_THING=s gh_token=t");
}

static void test_inherit_core_case_insensitive(void **state)
{
    (void)state;
    /* `shell` matches SHELL case-insensitively; Path_lower is not a core name */
    expect_env(build(POL("core", "false", "[]", "{}", "[]"), "{}"),
               "HOME=/home/u LANG=C.UTF-8 PATH=/usr/bin:/bin shell=/bin/zsh");
}

static void test_inherit_none_then_set(void **state)
{
    (void)state;
    expect_env(build(POL("none", "false", "[]", "{\"S\":\"1\",\"TOKEN_X\":\"kept\"}", "[]"), "{}"),
               "S=1 TOKEN_X=kept");
}

static void test_exclude_patterns(void **state)
{
    (void)state;
    expect_env(build(POL("all", "false", "[\"pla?n\",\"*_LOWER\",\"s*\"]", "{}", "[]"), "{}"),
               "HOME=/home/u LANG=C.UTF-8 PATH=/usr/bin:/bin");
}

static void test_set_before_include_only(void **state)
{
    (void)state;
    /* set happens before includeOnly, so a set name outside includeOnly is dropped;
     * env comes after and always survives */
    expect_env(build(POL("all", "false", "[]", "{\"S\":\"1\",\"HOME\":\"/other\"}",
                         "[\"home\",\"PATH\"]"),
                     "{\"Q\":\"q\"}"),
               "HOME=/other PATH=/usr/bin:/bin Q=q");
}

static void test_env_wins_over_set(void **state)
{
    (void)state;
    expect_env(build(POL("none", "false", "[]", "{\"ZZ\":\"set\"}", "[]"), "{\"ZZ\":\"1\"}"),
               "ZZ=1");
    expect_env(build(POL("all", "false", "[]", "{}", "[]"), "{\"PATH\":\"/p\",\"API_KEY\":\"e\"}"),
               "API_KEY=e HOME=/home/u LANG=C.UTF-8 PATH=/p PLAIN=p Path_lower=x shell=/bin/zsh");
}

static void test_pattern_match(void **state)
{
    (void)state;
    assert_true(env_pattern_match("*", ""));
    assert_true(env_pattern_match("*KEY*", "api_key"));
    assert_true(env_pattern_match("*KEY*", "KEY"));
    assert_true(env_pattern_match("a*b*c", "aXXbYYbc"));
    assert_true(env_pattern_match("?x", "Ax"));
    assert_false(env_pattern_match("?x", "x"));
    assert_false(env_pattern_match("abc", "abcd"));
    assert_false(env_pattern_match("a*d", "abc"));
    assert_true(env_pattern_match("**", "z"));
}

static void expect_decode_error(const char *policy_json, const char *want)
{
    char params[1024];
    snprintf(params, sizeof params, "{\"envPolicy\":%s}", policy_json);
    json_t *p = json_loads(params, 0, NULL);
    assert_non_null(p);
    struct pdec d;
    pdec_begin(&d, p, "ExecParams");
    struct env_policy pol;
    assert_false(env_policy_decode(&d, "envPolicy", &pol));
    assert_true(d.failed);
    assert_string_equal(d.err, want);
    assert_false(pol.present);
    json_decref(p);
}

static void test_decode_errors(void **state)
{
    (void)state;
    expect_decode_error("{\"inherit\":\"all\"}", "missing field `ignoreDefaultExcludes`");
    expect_decode_error(POL("some", "false", "[]", "{}", "[]"),
                        "unknown variant `some`, expected one of `core`, `all`, `none`");
    expect_decode_error(POL("all", "false", "[1]", "{}", "[]"),
                        "invalid type: number, expected a string");
    expect_decode_error(POL("all", "false", "[]", "{\"A\":true}", "[]"),
                        "invalid type: boolean `true`, expected a string");
    expect_decode_error("5", "invalid type: number, expected struct ExecEnvPolicy");
}

static void test_lookup(void **state)
{
    (void)state;
    char *const envp[] = {"PATHX=1", "PATH=/a", NULL};
    assert_string_equal(env_lookup(envp, "PATH"), "/a");
    assert_null(env_lookup(envp, "PAT"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_policy_is_exactly_env),
        cmocka_unit_test(test_inherit_all_with_default_excludes),
        cmocka_unit_test(test_ignore_default_excludes_keeps_secrets),
        cmocka_unit_test(test_inherit_core_case_insensitive),
        cmocka_unit_test(test_inherit_none_then_set),
        cmocka_unit_test(test_exclude_patterns),
        cmocka_unit_test(test_set_before_include_only),
        cmocka_unit_test(test_env_wins_over_set),
        cmocka_unit_test(test_pattern_match),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
