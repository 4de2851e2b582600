/* Unit tests for capabilities/skill_meta (SKILL.md front matter, agents/openai.yaml) and the
 * plugin version rules of capabilities/capabilities_v2, with the cases settled against codex
 * 0.169.0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/capabilities_v2.h"
#include "capabilities/skill_meta.h"

static int parse(const char *text, struct caproots_skill *s)
{
    return caproots_skill_parse(text, strlen(text), "dir name", s);
}

static void test_front_matter(void **st)
{
    (void)st;
    struct caproots_skill s;
    assert_int_equal(parse("---\nname: a\ndescription: Does a\nmetadata:\n  short-description: "
                           "'  s  d '\n---\nbody\n",
                           &s),
                     0);
    assert_string_equal(s.name, "a");
    assert_string_equal(s.description, "Does a");
    assert_string_equal(s.short_description, "s d");
    caproots_skill_free(&s);
    /* CRLF, padded fences, the directory's name, folded text, numbers as text. */
    assert_int_equal(parse("  ---  \r\ndescription: >\r\n  folded\r\n  text\r\n --- \r\n", &s), 0);
    assert_string_equal(s.name, "dir name");
    assert_string_equal(s.description, "folded text");
    assert_null(s.short_description);
    caproots_skill_free(&s);
    assert_int_equal(parse("---\nname: true\ndescription: 5\n---\n", &s), 0);
    assert_string_equal(s.name, "true");
    assert_string_equal(s.description, "5");
    caproots_skill_free(&s);
    assert_int_equal(parse("---\nname: \"a\\tb\\u00e9\"\ndescription: \"x\\ny\"\n---\n", &s), 0);
    assert_string_equal(s.name, "a b\xc3\xa9");
    assert_string_equal(s.description, "x y");
    caproots_skill_free(&s);
}

static void test_front_matter_repair(void **st)
{
    (void)st;
    struct caproots_skill s;
    assert_int_equal(parse("---\nname: d\ndescription: Build for AWS: ECS # note\n---\n", &s), 0);
    assert_string_equal(s.description, "Build for AWS: ECS");
    caproots_skill_free(&s);
    assert_int_equal(parse("---\nname: [bad\ndescription: x\n---\n", &s), 0);
    assert_string_equal(s.name, "[bad");
    caproots_skill_free(&s);
    assert_int_equal(parse("---\nname: it's: here\ndescription: x\n---\n", &s), 0);
    assert_string_equal(s.name, "it's: here");
    caproots_skill_free(&s);
}

static void test_front_matter_invalid(void **st)
{
    (void)st;
    struct caproots_skill s;
    assert_int_equal(parse("no front matter\n", &s), -EINVAL);
    assert_int_equal(parse("---\nname: a\ndescription: d\n", &s), -EINVAL); /* unclosed */
    assert_int_equal(parse("---\n---\n", &s), -EINVAL);                     /* empty */
    assert_int_equal(parse("---\nname: a\n---\n", &s), -EINVAL);            /* no description */
    assert_int_equal(parse("---\nname: a\ndescription: ''\n---\n", &s), -EINVAL);
    assert_int_equal(parse("---\nname: a\ndescription: null\n---\n", &s), -EINVAL);
    assert_int_equal(parse("---\nname: [a, b]\ndescription: d\n---\n", &s), -EINVAL);
    assert_int_equal(parse("---\nname: a\ndescription: d\nmetadata: x\n---\n", &s), -EINVAL);
    char long_name[128];
    snprintf(long_name, sizeof long_name, "---\nname: %065d\ndescription: d\n---\n", 0);
    assert_int_equal(parse(long_name, &s), -EINVAL);
    snprintf(long_name, sizeof long_name, "---\nname: %064d\ndescription: d\n---\n", 0);
    assert_int_equal(parse(long_name, &s), 0);
    caproots_skill_free(&s);
}

static char *sidecar(const char *yaml)
{
    json_t *deps, *pol;
    caproots_skill_sidecar(yaml, strlen(yaml), &deps, &pol);
    json_t *both = json_pack("{s:o,s:o}", "d", deps, "p", pol);
    char *s = json_dumps(both, JSON_COMPACT);
    json_decref(both);
    return s;
}

static void check_sidecar(const char *yaml, const char *want)
{
    char *got = sidecar(yaml);
    assert_string_equal(got, want);
    free(got);
}

static void test_sidecar(void **st)
{
    (void)st;
    check_sidecar(
        "dependencies:\n  tools:\n    - type: mcp\n      value: v\n      command: run\n"
        "      oauth_callback_port: 8080\n    - value: no-type\n",
        "{\"d\":{\"tools\":[{\"type\":\"mcp\",\"value\":\"v\",\"description\":null,"
        "\"transport\":null,\"command\":\"run\",\"url\":null,\"oauthCallbackPort\":null}]},"
        "\"p\":null}");
    check_sidecar("policy:\n  allow_implicit_invocation: True\n  products: [CHATGPT, atlas]\n",
                  "{\"d\":null,\"p\":{\"allowImplicitInvocation\":true,"
                  "\"products\":[\"chatgpt\",\"atlas\"]}}");
    check_sidecar("policy: {}\n",
                  "{\"d\":null,\"p\":{\"allowImplicitInvocation\":null,\"products\":[]}}");
    /* A policy that does not decode takes the dependencies with it. */
    check_sidecar("dependencies:\n  tools:\n    - type: mcp\n      value: v\n"
                  "policy:\n  products: [Codex]\n",
                  "{\"d\":null,\"p\":null}");
    check_sidecar("policy:\n  allow_implicit_invocation: yes\n", "{\"d\":null,\"p\":null}");
    check_sidecar("dependencies:\n  tools: []\n", "{\"d\":null,\"p\":null}");
    check_sidecar("policy: [\n", "{\"d\":null,\"p\":null}");
    check_sidecar("", "{\"d\":null,\"p\":null}");
}

static void test_versions(void **st)
{
    (void)st;
    assert_true(caproots_version_cmp("1.10.0", "1.2.0") > 0);
    assert_true(caproots_version_cmp("1.10.0", "1.10.0-beta") > 0);
    assert_true(caproots_version_cmp("1.0.0-alpha", "1.0.0-alpha.1") < 0);
    assert_true(caproots_version_cmp("1.0.0-alpha.1", "1.0.0-alpha.beta") < 0);
    assert_true(caproots_version_cmp("1.0.0-beta.2", "1.0.0-beta.11") < 0);
    assert_true(caproots_version_cmp("1.0.0-rc.1", "1.0.0") < 0);
    assert_true(caproots_version_cmp("1.0.0+b", "1.0.0") > 0);
    assert_int_equal(caproots_version_cmp("1.0.0", "1.0.0"), 0);
    /* Not SemVer on either side: bytewise. */
    assert_true(caproots_version_cmp("9", "10") > 0);
    assert_true(caproots_version_cmp("01.0.0", "1.0.0") < 0);
    assert_true(caproots_plugin_segment_ok("a-b_C9"));
    assert_false(caproots_plugin_segment_ok("bad.mkt"));
    assert_false(caproots_plugin_segment_ok(""));
    assert_true(caproots_version_segment_ok("1.0.0+b-1_x"));
    assert_false(caproots_version_segment_ok(".."));
    assert_false(caproots_version_segment_ok("a b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_matter),
        cmocka_unit_test(test_front_matter_repair),
        cmocka_unit_test(test_front_matter_invalid),
        cmocka_unit_test(test_sidecar),
        cmocka_unit_test(test_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
