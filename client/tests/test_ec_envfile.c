/* Unit tests of environments.toml: the strict TOML reader (ec_toml.c) on the syntax
 * and table rules of TOML 1.0 (+ the 1.1 additions codex's parser has), and the
 * schema (ec_envfile.c): codex's fields, checks and wording, our three additions, and
 * the mapping to ec_client_options. Text in, values or one-line errors out. */
#include "ec_toml.h"
#include "execclient.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- the reader -------------------------------------------------------------------- */

/* toml parses and equals the JSON text want. */
static void ok(const char *toml, const char *want)
{
    json_t *got = NULL;
    char err[300];
    int rc = ec_toml_parse(toml, strlen(toml), &got, err, sizeof err);
    if (rc != 0) fail_msg("%s\n  refused: %s", toml, err);
    json_error_t je;
    json_t *w = json_loads(want, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    assert_non_null(w);
    if (!json_equal(got, w)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
        fail_msg("%s\n  got  %s\n  want %s", toml, g, want);
    }
    json_decref(got);
    json_decref(w);
}

/* toml is refused with an error containing needle. */
static void bad(const char *toml, size_t len, const char *needle)
{
    json_t *got = NULL;
    char err[300] = "";
    int rc = ec_toml_parse(toml, len ? len : strlen(toml), &got, err, sizeof err);
    if (rc == 0) {
        char *g = json_dumps(got, JSON_COMPACT);
        fail_msg("%s\n  accepted as %s (want an error with `%s`)", toml, g, needle);
    }
    assert_null(got);
    if (!strstr(err, needle)) fail_msg("%s\n  error `%s` lacks `%s`", toml, err, needle);
    assert_non_null(strstr(err, "line ")); /* every error says where */
}

static void test_toml_basics(void **state)
{
    (void)state;
    ok("", "{}");
    ok("a = 1", "{\"a\":1}");
    ok("# c\r\na = \"x\" # t\r\n\r\n", "{\"a\":\"x\"}");
    ok("\xEF\xBB\xBF"
       "a = true\nb = false",
       "{\"a\":true,\"b\":false}");
    ok("\"a b\" = 1\n'lit' = 2\n\"\" = 3", "{\"a b\":1,\"lit\":2,\"\":3}");
    ok("true = 1\n1234 = 2\n1.2 = 3", "{\"true\":1,\"1234\":2,\"1\":{\"2\":3}}");
    ok("a . b = 1\na.\"c\" = 2", "{\"a\":{\"b\":1,\"c\":2}}");
    ok("  \t a = 1 \t \n", "{\"a\":1}");
}

static void test_toml_strings(void **state)
{
    (void)state;
    ok("s = \"tab\\tq\\\"b\\\\ \\u00e9 \\U0001F600 \\e \\x41 \\b\\f\\r\\n\"",
       "{\"s\":\"tab\\tq\\\"b\\\\ \\u00e9 \\ud83d\\ude00 \\u001b A \\b\\f\\r\\n\"}");
    ok("s = 'C:\\path\\\"x'", "{\"s\":\"C:\\\\path\\\\\\\"x\"}");
    ok("s = \"\"\"\nline1\\\n   \n  line2\"\"\"", "{\"s\":\"line1line2\"}");
    ok("s = \"\"\"a\nb\"\"\"", "{\"s\":\"a\\nb\"}");
    ok("s = \"\"\"a\r\nb\"\"\"", "{\"s\":\"a\\nb\"}"); /* CRLF read as LF */
    ok("s = \"\"\"a\"\"\"\"", "{\"s\":\"a\\\"\"}");
    ok("s = \"\"\"a\"\"\"\"\"", "{\"s\":\"a\\\"\\\"\"}");
    ok("s = \"\"\"a\"b\"\"c\"\"\"", "{\"s\":\"a\\\"b\\\"\\\"c\"}");
    ok("s = '''\nraw \\n 'q' '''", "{\"s\":\"raw \\\\n 'q' \"}");
    ok("s = ''''x'''''", "{\"s\":\"'x''\"}");
    ok("s = \"tab\tinside\"", "{\"s\":\"tab\\tinside\"}");
    ok("s = \"\\u0000\"", "{\"s\":\"\\u0000\"}");
    ok("s = \"caf\xC3\xA9\"", "{\"s\":\"caf\\u00e9\"}");
    bad("s = \"x", 0, "unterminated string");
    bad("s = \"x\ny\"", 0, "unterminated string");
    bad("s = 'x\ny'", 0, "unterminated string");
    bad("s = \"\\q\"", 0, "invalid escape");
    bad("s = \"\\uD800\"", 0, "not a Unicode scalar value");
    bad("s = \"\\U00110000\"", 0, "not a Unicode scalar value");
    bad("s = \"\\u12\"", 0, "exactly 4 hexadecimal digits");
    bad("s = \"\\x4\"", 0, "exactly 2 hexadecimal digits");
    bad("s = \"a\x01\"", 0, "control character U+0001");
    bad("s = \"a\x7f\"", 0, "control character U+007F");
    bad("s = \"\"\"a\x0c\"\"\"", 0, "control character U+000C");
    bad("s = \"\"\"a \\ b\"\"\"", 0, "backslash");
    bad("s = \"\"\"a\"\"\"\"\"\"", 0, "end of the line");
    bad("s = \"\xff\"", 0, "not valid UTF-8");
    bad("s = \"\xC3\"", 0, "not valid UTF-8");
}

static void test_toml_numbers(void **state)
{
    (void)state;
    ok("a = +1_000\nb = -0\nc = 0\nd = 9223372036854775807\ne = -9223372036854775808",
       "{\"a\":1000,\"b\":0,\"c\":0,\"d\":9223372036854775807,\"e\":-9223372036854775808}");
    ok("h = 0xDEAD_beef\no = 0o17\nb = 0b1010\nz = 0x0",
       "{\"h\":3735928559,\"o\":15,\"b\":10,\"z\":0}");
    ok("f = 3.5\ng = -1e-3\nh = 6.25e+2\nz = 0e0\nk = 1_000.5_5\nm = 1E2\nn = 0.0\nx = 1e06",
       "{\"f\":3.5,\"g\":-0.001,\"h\":625.0,\"z\":0.0,\"k\":1000.55,\"m\":100.0,\"n\":0.0,"
       "\"x\":1000000.0}");
    bad("a = 01", 0, "leading zeros");
    bad("a = 0_1", 0, "leading zeros");
    bad("a = 00.5", 0, "leading zeros");
    bad("a = 1__0", 0, "invalid");
    bad("a = 1_", 0, "invalid");
    bad("a = _1", 0, "invalid value");
    bad("a = 0x", 0, "hexadecimal");
    bad("a = 0x_1", 0, "hexadecimal");
    bad("a = 0xG", 0, "hexadecimal");
    bad("a = 0o8", 0, "octal");
    bad("a = 0b2", 0, "binary");
    bad("a = 0X1", 0, "invalid number");
    bad("a = +0x1", 0, "invalid number");
    bad("a = 1.", 0, "decimal point");
    bad("a = .5", 0, "invalid value");
    bad("a = 1.e5", 0, "decimal point");
    bad("a = 1e", 0, "exponent");
    bad("a = 1e_5", 0, "exponent");
    bad("a = 9223372036854775808", 0, "out of range");
    bad("a = -9223372036854775809", 0, "out of range");
    bad("a = 0x8000000000000000", 0, "out of range");
    bad("a = 1e999", 0, "out of range");
    bad("a = inf", 0, "inf and nan");
    bad("a = -nan", 0, "inf and nan");
    bad("a = 1979-05-27", 0, "dates and times");
    bad("a = 07:32:00", 0, "dates and times");
    bad("a = 1 2", 0, "end of the line");
}

static void test_toml_arrays_inline(void **state)
{
    (void)state;
    ok("a = []\nb = [1, \"x\", [true], {k = 1}]", "{\"a\":[],\"b\":[1,\"x\",[true],{\"k\":1}]}");
    ok("a = [\n  1, # one\n  2,\n  # nothing\n]\n", "{\"a\":[1,2]}");
    ok("env = { A = \"1\", \"B.C\" = \"2\" }", "{\"env\":{\"A\":\"1\",\"B.C\":\"2\"}}");
    ok("x = { a.b = 1, a.c = 2 }", "{\"x\":{\"a\":{\"b\":1,\"c\":2}}}");
    ok("x = {}", "{\"x\":{}}");
    /* TOML 1.1 (codex's `toml` crate): newlines, comments and a trailing comma */
    ok("x = {\n  a = 1, # c\n  b = 2,\n}", "{\"x\":{\"a\":1,\"b\":2}}");
    bad("a = [1,,2]", 0, "invalid value");
    bad("a = [1 2]", 0, "expected ',' or ']'");
    bad("a = [1", 0, "expected ',' or ']'");
    bad("a = {b = 1, b = 2}", 0, "duplicate key `b`");
    bad("a = {b = {c = 1}, b.d = 2}", 0, "inline table or array");
    bad("a = {b = 1 c = 2}", 0, "expected ',' or '}'");
    bad("a = {b}", 0, "expected '='");
    char deep[200] = "a = ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    bad(deep, 0, "nested too deeply");
}

static void test_toml_tables(void **state)
{
    (void)state;
    ok("[a]\nx = 1\n[a.b]\ny = 2", "{\"a\":{\"x\":1,\"b\":{\"y\":2}}}");
    ok("[ a . \"b c\" ]\nk = 1", "{\"a\":{\"b c\":{\"k\":1}}}");
    ok("[x.y.z]\n[x]\nk = 1", "{\"x\":{\"y\":{\"z\":{}},\"k\":1}}"); /* implicit, then defined */
    ok("[a.b.c]\n[a]\nb.d = 1", "{\"a\":{\"b\":{\"c\":{},\"d\":1}}}");
    ok("[[e]]\nid = \"a\"\n[[e]]\nid = \"b\"\n[e.sub]\nk = 1\n[[e.list]]\nn = 1",
       "{\"e\":[{\"id\":\"a\"},{\"id\":\"b\",\"sub\":{\"k\":1},\"list\":[{\"n\":1}]}]}");
    ok("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple.texture]\n"
       "smooth = true",
       "{\"fruit\":{\"apple\":{\"color\":\"red\",\"taste\":{\"sweet\":true},"
       "\"texture\":{\"smooth\":true}}}}");
    ok("a.b = 1\n[c]\nd = 2", "{\"a\":{\"b\":1},\"c\":{\"d\":2}}");
    bad("a = 1\na = 2", 0, "`a` is defined twice");
    bad("a.b = 1\na.b = 2", 0, "`a.b` is defined twice");
    bad("a = 1\na.b = 2", 0, "defined twice");
    bad("[a]\n[a]", 0, "table `a` is defined twice");
    bad("[a]\nb = 1\n[a.b]", 0, "`a.b` is already a value");
    bad("a = {x = 1}\na.y = 2", 0, "inline table or array");
    bad("a = {x = 1}\n[a]", 0, "defined twice");
    bad("a = {x = 1}\n[a.b]", 0, "defined twice");
    bad("a = [1]\n[[a]]", 0, "static array");
    bad("a = []\n[a.b]", 0, "defined twice");
    bad("[[a]]\n[a]", 0, "table `a` is defined twice");
    bad("[a]\n[[a]]", 0, "not an array of tables");
    bad("[a.b.c]\nz = 1\n[a]\nb.c.t = 1", 0, "dotted key");
    bad("[a.b.c.d]\n[a]\nb.c.d.k.t = 1", 0, "dotted key");
    bad("[fruit]\napple.color = \"red\"\n[fruit.apple]", 0, "defined twice");
    bad("a.b = 1\n[c]\n[a]\nx = 1", 0, "defined twice");
    bad("[a]\nb.c = 1\n[d]\n[a]\nb.e = 2", 0, "defined twice");
    bad("[a", 0, "expected ']'");
    bad("[]", 0, "expected a key");
    bad("[[a]", 0, "expected ']]'");
    bad("[[a] ]", 0, "expected ']]'");
    bad("[a] x = 1", 0, "end of the line");
}

static void test_toml_statements(void **state)
{
    (void)state;
    bad("a", 0, "expected '='");
    bad("= 1", 0, "expected a key");
    bad("a =", 0, "expected a value");
    bad("a = \n1", 0, "expected a value");
    bad("a = b", 0, "strings need quotes");
    bad("a = true1", 0, "invalid value");
    bad("a = 1 # ok\x01", 0, "control character U+0001 in a comment");
    bad("a = 1\r", 0, "end of the line");
    bad("\ra = 1", 0, "control character");
    bad("\"a\\u0000\" = 1", 0, "U+0000");
    bad("\"\"\"a\"\"\" = 1", 0, "multi-line");
    bad("a = 1\n\xff = 2", 0, "not valid UTF-8");
    bad("a = \"\xe2\x82\"", 0, "not valid UTF-8");
    bad("a = 1\0b = 2", 11, "end of the line");
    /* where: the line and the column (in characters) of the culprit */
    json_t *out = NULL;
    char err[300];
    assert_int_equal(ec_toml_parse("a = 1\n\xC3\xA9 = 2", 10, &out, err, sizeof err), -1);
    assert_string_equal(err, "line 2, column 1: expected a key, a [table] header or a comment");
    assert_int_equal(ec_toml_parse("a = 1\nbb = 01", 13, &out, err, sizeof err), -1);
    assert_string_equal(err, "line 2, column 6: leading zeros are not allowed in a number");
    /* bounded */
    size_t big = EC_TOML_MAX_BYTES + 1;
    char *text = malloc(big);
    memset(text, '#', big);
    assert_int_equal(ec_toml_parse(text, big, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "too large"));
    free(text);
}

/* ---- the schema --------------------------------------------------------------------- */

static ec_env_file *parse_ok(const char *text, const char *dir)
{
    ec_env_file *f = NULL;
    ec_error e = {0};
    int rc = ec_env_file_parse(text, strlen(text), dir, &f, &e);
    if (rc != 0) fail_msg("%s\n  refused: %s", text, e.message);
    return f;
}

static void parse_bad(const char *text, const char *want)
{
    ec_env_file *f = NULL;
    ec_error e = {0};
    int rc = ec_env_file_parse(text, strlen(text), "/etc/codex", &f, &e);
    if (rc == 0) fail_msg("%s\n  accepted (want `%s`)", text, want);
    assert_int_equal(rc, -EC_ERR_USAGE);
    assert_int_equal(e.kind, EC_ERR_USAGE);
    assert_null(f);
    if (!strstr(e.message, want)) fail_msg("%s\n  error `%s` lacks `%s`", text, e.message, want);
}

static void test_schema_transports(void **state)
{
    (void)state;
    ec_env_file *f = parse_ok("default = \"ssh-dev\"\n"
                              "[[environments]]\n"
                              "id = \"devbox\"\n"
                              "url = \" ws://127.0.0.1:8765 \"\n"
                              "auth_bearer_token = \"t0k\"\n"
                              "connect_timeout_sec = 2.5\n"
                              "[[environments]]\n"
                              "id = \"ssh-dev\"\n"
                              "program = \" ssh \"\n"
                              "args = [\"dev\", \"codex exec-server --listen stdio\"]\n"
                              "env = { CODEX_LOG = \"debug\", B = \"x=y\" }\n"
                              "cwd = \"work\"\n"
                              "initialize_timeout_sec = 3\n"
                              "[[environments]]\n"
                              "id = \"cloud_1\"\n"
                              "remote = \"https://registry.example\"\n"
                              "environment_id = \" env-42 \"\n"
                              "auth_bearer_token = \"reg\"\n"
                              "ca_file = \"/etc/ssl/ca.pem\"\n",
                              "/home/u/.codex");
    assert_int_equal(ec_env_file_count(f), 3);
    assert_string_equal(ec_env_file_default(f), "ssh-dev");
    assert_true(ec_env_file_include_local(f));

    assert_string_equal(ec_env_file_id(f, 0), "devbox");
    const ec_client_options *o = ec_env_file_options(f, 0);
    assert_string_equal(o->url, "ws://127.0.0.1:8765"); /* trimmed, as codex does */
    assert_string_equal(o->bearer_token, "t0k");
    assert_null(o->program_argv);
    assert_null(o->remote_url);
    assert_int_equal(o->connect_timeout_ms, 2500 + 10000); /* connect + initialize */
    assert_int_equal(o->reconnect_timeout_ms, 30000);

    o = ec_env_file_find(f, "ssh-dev");
    assert_ptr_equal(o, ec_env_file_options(f, 1));
    assert_null(o->url);
    assert_string_equal(o->program_argv[0], "ssh");
    assert_string_equal(o->program_argv[1], "dev");
    assert_string_equal(o->program_argv[2], "codex exec-server --listen stdio");
    assert_null(o->program_argv[3]);
    assert_string_equal(o->program_env[0], "CODEX_LOG=debug");
    assert_string_equal(o->program_env[1], "B=x=y");
    assert_null(o->program_env[2]);
    assert_string_equal(o->program_cwd, "/home/u/.codex/work");
    assert_int_equal(o->connect_timeout_ms, 3000); /* a program: initialize only */
    assert_int_equal(o->reconnect_timeout_ms, 0);  /* stdio has no resume */

    o = ec_env_file_find(f, "cloud_1");
    assert_string_equal(o->remote_url, "https://registry.example");
    assert_string_equal(o->environment_id, "env-42");
    assert_string_equal(o->bearer_token, "reg");
    assert_string_equal(o->ca_file, "/etc/ssl/ca.pem");
    assert_null(o->url);
    assert_null(ec_env_file_find(f, "nope"));
    assert_null(ec_env_file_id(f, 3));
    ec_env_file_free(f);
}

static void test_schema_defaults(void **state)
{
    (void)state;
    ec_env_file *f = parse_ok("", NULL);
    assert_int_equal(ec_env_file_count(f), 0);
    assert_string_equal(ec_env_file_default(f), "local"); /* omitted: local, as codex */
    ec_env_file_free(f);
    f = parse_ok("default = \"none\"", NULL);
    assert_null(ec_env_file_default(f));
    ec_env_file_free(f);
    f = parse_ok("default = \"NONE\"\ninclude_local = false", NULL);
    assert_null(ec_env_file_default(f));
    assert_false(ec_env_file_include_local(f));
    ec_env_file_free(f);
    f = parse_ok("include_local = false", NULL);
    assert_null(ec_env_file_default(f));
    ec_env_file_free(f);
    f = parse_ok("default = \" local \"", NULL);
    assert_string_equal(ec_env_file_default(f), "local");
    ec_env_file_free(f);
    f = parse_ok("[[environments]]\nid = \"a-B_9\"\nprogram = \"x\"\n", NULL);
    const ec_client_options *o = ec_env_file_options(f, 0);
    assert_null(o->program_argv[1]);
    assert_null(o->program_env[0]);
    assert_null(o->program_cwd);
    assert_int_equal(o->connect_timeout_ms, 10000);
    ec_env_file_free(f);
}

static void test_schema_errors(void **state)
{
    (void)state;
    parse_bad("a = ", "line 1, column 5: expected a value");
    parse_bad("defaults = \"x\"", "unknown field `defaults`, expected one of `default`");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nurls = 1", "unknown field `urls`");
    parse_bad("include_local = 1", "`include_local` must be a boolean");
    parse_bad("environments = 1", "`environments` must be an array of tables");
    parse_bad("environments = [1]", "must be a table");
    parse_bad("[[environments]]\nurl = \"ws://h:1\"", "missing field `id`");
    parse_bad("[[environments]]\nid = 7\nurl = \"ws://h:1\"", "`id` must be a string");
    parse_bad("[[environments]]\nid = \"\"\nurl = \"ws://h:1\"", "environment id cannot be empty");
    parse_bad("[[environments]]\nid = \" a\"\nurl = \"ws://h:1\"",
              "environment id ` a` must not contain surrounding whitespace");
    parse_bad("[[environments]]\nid = \"local\"\nurl = \"ws://h:1\"",
              "environment id `local` is reserved");
    parse_bad("[[environments]]\nid = \"None\"\nurl = \"ws://h:1\"", "is reserved");
    parse_bad("[[environments]]\nid = \"a.b\"\nurl = \"ws://h:1\"",
              "must contain only ASCII letters, numbers, '-' or '_'");
    parse_bad("[[environments]]\nid = "
              "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n"
              "url = \"ws://h:1\"",
              "cannot be longer than 64 characters");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\n[[environments]]\nid = \"a\"\n"
              "program = \"x\"",
              "environment id `a` is duplicated");
    parse_bad("[[environments]]\nid = \"a\"", "must set exactly one of url, program or remote");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nprogram = \"x\"",
              "must set exactly one of url, program or remote");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nargs = []",
              "environment `a` args, env, and cwd require program");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nconnect_timeout_sec = 1",
              "connect_timeout_sec requires url");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nauth_bearer_token = \"t\"",
              "auth_bearer_token and ca_file require url or remote");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"  \"", "program cannot be empty");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nargs = \"y\"",
              "`args` must be an array of strings");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nargs = [1]", "must be a string");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nenv = { A = 1 }", "must be a string");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nenv = [\"A=1\"]",
              "`env` must be a table of strings");
    parse_bad("[[environments]]\nid = \"a\"\nprogram = \"x\"\nargs = [\"a\\u0000b\"]",
              "must not contain U+0000");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"http://h:1\"",
              "environment url `http://h:1` must use ws:// or wss://");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"  \"", "environment url cannot be empty");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:99999\"", "is invalid: bad URL");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nconnect_timeout_sec = -1",
              "must be a non-negative number of seconds");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nconnect_timeout_sec = \"1\"",
              "must be a number of seconds");
    parse_bad("[[environments]]\nid = \"a\"\nremote = \"https://r\"",
              "remote and environment_id go together");
    parse_bad("[[environments]]\nid = \"a\"\nurl = \"ws://h:1\"\nenvironment_id = \"e\"",
              "remote and environment_id go together");
    parse_bad("[[environments]]\nid = \"a\"\nremote = \"ftp://r\"\nenvironment_id = \"e\"",
              "must be an http:// or https:// URL");
    parse_bad("default = \"\"", "default environment id cannot be empty");
    parse_bad("default = \"x\"", "default environment `x` is not configured");
    parse_bad("default = \"local\"\ninclude_local = false",
              "default environment `local` is not configured");
    ec_env_file *f = NULL;
    ec_error e = {0};
    const char *rel = "[[environments]]\nid = \"a\"\nprogram = \"x\"\ncwd = \"rel\"";
    assert_int_equal(ec_env_file_parse(rel, strlen(rel), NULL, &f, &e), -EC_ERR_USAGE);
    assert_non_null(strstr(e.message, "cwd must be absolute"));
}

static void test_schema_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/ec-envfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/environments.toml", dir);
    FILE *fp = fopen(path, "w");
    fputs("[[environments]]\nid = \"p\"\nprogram = \"x\"\ncwd = \"sub\"\n", fp);
    fclose(fp);
    ec_env_file *f = NULL;
    ec_error e = {0};
    assert_int_equal(ec_env_file_load(path, &f, &e), 0);
    char want[400];
    snprintf(want, sizeof want, "%s/sub", dir);
    assert_string_equal(ec_env_file_options(f, 0)->program_cwd, want);
    ec_env_file_free(f);
    /* CODEX_HOME: the default location */
    setenv("CODEX_HOME", dir, 1);
    assert_int_equal(ec_env_file_load(NULL, &f, &e), 0);
    assert_string_equal(ec_env_file_id(f, 0), "p");
    ec_env_file_free(f);
    /* errors name the file */
    fp = fopen(path, "w");
    fputs("[[environments]]\nid = 1\n", fp);
    fclose(fp);
    assert_int_equal(ec_env_file_load(path, &f, &e), -EC_ERR_USAGE);
    char head[400];
    snprintf(head, sizeof head, "failed to parse environment config `%s`: ", path);
    assert_memory_equal(e.message, head, strlen(head));
    unlink(path);
    assert_int_equal(ec_env_file_load(path, &f, &e), -EC_ERR_USAGE);
    assert_non_null(strstr(e.message, "failed to read environment config"));
    assert_non_null(strstr(e.message, "No such file"));
    rmdir(dir);
    unsetenv("CODEX_HOME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_toml_basics),       cmocka_unit_test(test_toml_strings),
        cmocka_unit_test(test_toml_numbers),      cmocka_unit_test(test_toml_arrays_inline),
        cmocka_unit_test(test_toml_tables),       cmocka_unit_test(test_toml_statements),
        cmocka_unit_test(test_schema_transports), cmocka_unit_test(test_schema_defaults),
        cmocka_unit_test(test_schema_errors),     cmocka_unit_test(test_schema_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
