/* Unit tests for process/env_policy: PROTOCOL.md §5.1.3, step by step.
 *
 * The server environment is a fixed array, so every rule is checked without
 * touching the test's own environ. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "process/env_policy.h"
#include "rpc/params.h"

static char *server_env[] = {"PATH=/usr/bin:/bin",
                             "HOME=/home/u",
                             "LANG=C.UTF-8",
                             "SHELL=/bin/bash",
                             "USER=u",
                             "EDITOR=vi",
                             "API_KEY=k1",
                             "my_secret=s",
                             "GH_TOKEN=t",
                             "lower_key=lk",
                             "ZZ_EXP=zz",
                             "PYENV_ROOT=/p",
                             NULL};

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    assert_non_null(v);
    return v;
}

/* Builds from params text {"envPolicy":..., "env":...}; returns the envp. */
static char **build(const char *params_text, json_t **keep)
{
    json_t *params = parse(params_text);
    struct pdec d;
    pdec_begin(&d, params, "ExecParams");
    struct env_policy pol;
    bool present;
    env_policy_decode(&d, &pol, &present);
    assert_false(d.failed);
    json_t *env = json_object_get(params, "env");
    char **out = env_build(server_env, present ? &pol : NULL, env ? env : json_object());
    *keep = params;
    return out;
}

static size_t count(char **envp)
{
    size_t n = 0;
    while (envp[n])
        n++;
    return n;
}

static const char *decode_error(const char *params_text)
{
    static char err[512];
    json_t *params = parse(params_text);
    struct pdec d;
    pdec_begin(&d, params, "ExecParams");
    struct env_policy pol;
    bool present;
    env_policy_decode(&d, &pol, &present);
    strcpy(err, d.failed ? d.err : "");
    json_decref(params);
    return err;
}

static void no_policy_is_exactly_env(void **state)
{
    (void)state;
    json_t *keep;
    char **e = build("{\"env\":{\"ZZ\":\"1\"}}", &keep);
    assert_int_equal(count(e), 1);
    assert_string_equal(e[0], "ZZ=1");
    env_free(e);
    json_decref(keep);
    e = build("{\"envPolicy\":null,\"env\":{}}", &keep);
    assert_int_equal(count(e), 0);
    env_free(e);
    json_decref(keep);
}

static void inherit_all_drops_default_excludes(void **state)
{
    (void)state;
    json_t *keep;
    char **e = build("{\"envPolicy\":{\"inherit\":\"all\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{},\"includeOnly\":[]},\"env\":{\"ZZ\":\"1\"}}",
                     &keep);
    assert_string_equal(env_get(e, "HOME"), "/home/u");
    assert_string_equal(env_get(e, "EDITOR"), "vi");
    assert_string_equal(env_get(e, "ZZ"), "1");
    /* *KEY*, *SECRET*, *TOKEN*, case-insensitively */
    assert_null(env_get(e, "API_KEY"));
    assert_null(env_get(e, "my_secret"));
    assert_null(env_get(e, "GH_TOKEN"));
    assert_null(env_get(e, "lower_key"));
    assert_int_equal(count(e), 9);
    env_free(e);
    json_decref(keep);
}

static void inherit_core_and_set_and_env_wins(void **state)
{
    (void)state;
    json_t *keep;
    char **e = build("{\"envPolicy\":{\"inherit\":\"core\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{\"ZZ\":\"set\",\"Q\":\"q\",\"HOME\":\"/h2\"},"
                     "\"includeOnly\":[]},\"env\":{\"ZZ\":\"env\"}}",
                     &keep);
    assert_string_equal(env_get(e, "PATH"), "/usr/bin:/bin");
    assert_string_equal(env_get(e, "HOME"), "/h2"); /* set replaces the inherited value */
    assert_string_equal(env_get(e, "ZZ"), "env");   /* env wins over set */
    assert_string_equal(env_get(e, "Q"), "q");
    assert_string_equal(env_get(e, "USER"), "u");
    assert_null(env_get(e, "EDITOR")); /* not a core name */
    assert_null(env_get(e, "PYENV_ROOT"));
    assert_int_equal(count(e), 7); /* PATH HOME LANG SHELL USER ZZ Q */
    env_free(e);
    json_decref(keep);
}

static void none_with_set_keeps_secrets_from_set(void **state)
{
    (void)state;
    json_t *keep;
    char **e = build("{\"envPolicy\":{\"inherit\":\"none\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{\"A_KEY\":\"x\"},\"includeOnly\":[]},\"env\":{}}",
                     &keep);
    assert_int_equal(count(e), 1);
    assert_string_equal(e[0], "A_KEY=x");
    env_free(e);
    json_decref(keep);
}

static void exclude_and_include_only_globs(void **state)
{
    (void)state;
    json_t *keep;
    char **e = build("{\"envPolicy\":{\"inherit\":\"all\",\"ignoreDefaultExcludes\":true,"
                     "\"exclude\":[\"zz_*\",\"PYENV*\"],\"set\":{},"
                     "\"includeOnly\":[\"*key*\",\"z?_exp\",\"P*\"]},\"env\":{\"ZZ\":\"1\"}}",
                     &keep);
    assert_string_equal(env_get(e, "API_KEY"), "k1");
    assert_string_equal(env_get(e, "lower_key"), "lk");
    assert_string_equal(env_get(e, "PATH"), "/usr/bin:/bin");
    assert_null(env_get(e, "ZZ_EXP"));          /* excluded before includeOnly */
    assert_null(env_get(e, "PYENV_ROOT"));      /* excluded */
    assert_null(env_get(e, "HOME"));            /* not included */
    assert_string_equal(env_get(e, "ZZ"), "1"); /* env is laid on after includeOnly */
    assert_int_equal(count(e), 4);
    env_free(e);
    json_decref(keep);
}

/* Many names (the hash index grows and is rebuilt after includeOnly): every name once,
 * the last value of each, in first-seen order. */
static void many_names_keep_order_and_last_value(void **state)
{
    (void)state;
    json_t *set = json_object(), *env = json_object(), *inc = json_array();
    for (int i = 0; i < 5000; i++) {
        char k[16], v[16];
        snprintf(k, sizeof k, "S%d", i);
        snprintf(v, sizeof v, "s%d", i);
        json_object_set_new(set, k, json_string(v));
        snprintf(k, sizeof k, "E%d", i);
        snprintf(v, sizeof v, "e%d", i);
        json_object_set_new(env, k, json_string(v));
    }
    json_object_set_new(env, "S7", json_string("from-env")); /* env over set */
    json_object_set_new(env, "PATH", json_string("/x"));     /* env over inherited */
    json_array_append_new(inc, json_string("S*"));
    json_array_append_new(inc, json_string("PATH"));
    struct env_policy pol = {.inherit = ENV_INHERIT_ALL,
                             .ignore_default_excludes = true,
                             .exclude = json_array(),
                             .set = set,
                             .include_only = inc};
    char **e = env_build(server_env, &pol, env);
    assert_int_equal(count(e), 2 + 5000 + 5000); /* PATH, SHELL (S*), set, env */
    assert_string_equal(e[0], "PATH=/x");        /* inherited first, replaced in place */
    assert_string_equal(env_get(e, "S4999"), "s4999");
    assert_string_equal(env_get(e, "S7"), "from-env");
    assert_string_equal(env_get(e, "E0"), "e0");
    assert_null(env_get(e, "HOME")); /* not in includeOnly */
    env_free(e);
    json_decref(pol.exclude);
    json_decref(set);
    json_decref(env);
    json_decref(inc);
}

static void glob_matching(void **state)
{
    (void)state;
    assert_true(env_name_matches("*", ""));
    assert_true(env_name_matches("*KEY*", "my_key_2"));
    assert_true(env_name_matches("a?c", "ABC"));
    assert_false(env_name_matches("a?c", "ac"));
    assert_true(env_name_matches("a*b*c", "axxbyyc"));
    assert_false(env_name_matches("a*b*c", "axxbyy"));
    assert_true(env_name_matches("PATH", "path"));
    assert_false(env_name_matches("PATH", "PATHX"));
    assert_true(env_name_matches("**x", "x"));
}

static void decode_errors_use_serde_wording(void **state)
{
    (void)state;
    assert_string_equal(decode_error("{\"envPolicy\":{\"inherit\":\"all\"}}"),
                        "missing field `ignoreDefaultExcludes`");
    assert_string_equal(
        decode_error("{\"envPolicy\":{\"inherit\":\"bogus\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{},\"includeOnly\":[]}}"),
        "unknown variant `bogus`, expected one of `core`, `all`, `none`");
    assert_string_equal(
        decode_error("{\"envPolicy\":{\"inherit\":\"none\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[1],\"set\":{},\"includeOnly\":[]}}"),
        "invalid type: number, expected a string");
    assert_string_equal(
        decode_error("{\"envPolicy\":{\"inherit\":\"none\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{\"X\":1},\"includeOnly\":[]}}"),
        "invalid type: number, expected a string");
    /* a non-object policy: the reference names the struct, and any number "number" */
    assert_string_equal(decode_error("{\"envPolicy\":5}"),
                        "invalid type: number, expected struct ExecEnvPolicy");
    assert_string_equal(decode_error("{\"envPolicy\":\"x\"}"),
                        "invalid type: string \"x\", expected struct ExecEnvPolicy");
    assert_string_equal(decode_error("{\"envPolicy\":[]}"),
                        "invalid length 0, expected struct ExecEnvPolicy with 5 elements");
    assert_string_equal(decode_error("{\"envPolicy\":null}"), "");
    /* unknown members are ignored, as the reference does */
    assert_string_equal(
        decode_error("{\"envPolicy\":{\"inherit\":\"none\",\"ignoreDefaultExcludes\":false,"
                     "\"exclude\":[],\"set\":{},\"includeOnly\":[],\"extra\":1}}"),
        "");
}

static void trace_context(void **state)
{
    (void)state;
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_true(env_trace_parent_valid(tp));
    assert_false(env_trace_parent_valid("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
    assert_false(env_trace_parent_valid("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    assert_false(env_trace_parent_valid("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
    assert_false(env_trace_parent_valid("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));
    assert_false(env_trace_parent_valid("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"));
    json_t *keep;
    char **e = build("{\"env\":{\"A\":\"1\"}}", &keep);
    json_t *trace = json_pack("{s:s, s:s}", "traceparent", tp, "tracestate", "k=v");
    e = env_add_trace(e, trace);
    assert_string_equal(env_get(e, "TRACEPARENT"), tp);
    assert_string_equal(env_get(e, "TRACESTATE"), "k=v");
    assert_string_equal(env_get(e, "A"), "1");
    assert_int_equal(count(e), 3);
    env_free(e);
    json_decref(keep);
    /* the request's env wins */
    e = build("{\"env\":{\"TRACEPARENT\":\"mine\"}}", &keep);
    e = env_add_trace(e, trace);
    assert_string_equal(env_get(e, "TRACEPARENT"), "mine");
    assert_int_equal(count(e), 1);
    env_free(e);
    json_decref(keep);
    json_decref(trace);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_policy_is_exactly_env),
        cmocka_unit_test(inherit_all_drops_default_excludes),
        cmocka_unit_test(inherit_core_and_set_and_env_wins),
        cmocka_unit_test(none_with_set_keeps_secrets_from_set),
        cmocka_unit_test(exclude_and_include_only_globs),
        cmocka_unit_test(many_names_keep_order_and_last_value),
        cmocka_unit_test(glob_matching),
        cmocka_unit_test(decode_errors_use_serde_wording),
        cmocka_unit_test(trace_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
