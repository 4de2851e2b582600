/* Unit tests for proto/uri: every row of PROTOCOL.md section 6.1's parsing table, the
 * encoding rules for server-produced URIs, and round trips of names that are not
 * UTF-8 or have no plain URL form. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/uri.h"
#include "rpc/rpc.h"

static void expect_path(const char *uri, bool bare, const char *want, size_t want_len)
{
    char *out = NULL;
    size_t out_len = 0;
    struct uri_error err = {0};
    int rc = uri_to_path(uri, strlen(uri), bare, &out, &out_len, &err);
    if (rc != 0) fail_msg("%s: unexpected error %d %s", uri, (int)err.kind, err.message);
    assert_non_null(out);
    assert_int_equal(out_len, want_len);
    assert_memory_equal(out, want, want_len);
    assert_int_equal(out[out_len], '\0');
    free(out);
}

static void ok(const char *uri, const char *want)
{
    expect_path(uri, false, want, strlen(want));
}

static void bad(const char *uri, bool bare, enum uri_error_kind kind, int code, const char *msg)
{
    char *out = NULL;
    size_t out_len = 0;
    struct uri_error err = {0};
    int rc = uri_to_path(uri, strlen(uri), bare, &out, &out_len, &err);
    if (rc == 0) fail_msg("%s: accepted as %s", uri, out);
    assert_null(out);
    assert_int_equal(err.kind, kind);
    assert_int_equal(rpc_uri_error_code(&err), code);
    assert_string_equal(err.message, msg);
}

static void roundtrip(const char *path, size_t len)
{
    char *uri = uri_from_path(path, len);
    char *out = NULL;
    size_t out_len = 0;
    struct uri_error err = {0};
    if (uri_to_path(uri, strlen(uri), false, &out, &out_len, &err) != 0)
        fail_msg("%s: %s", uri, err.message);
    assert_int_equal(out_len, len);
    assert_memory_equal(out, path, len);
    free(out);
    free(uri);
}

static void test_table_accepted(void **state)
{
    ok("file:///tmp/x/a.txt", "/tmp/x/a.txt");
    ok("file://localhost/tmp/x/a.txt", "/tmp/x/a.txt");
    ok("file:/tmp/x/a.txt", "/tmp/x/a.txt");
    ok("file:///tmp/x/dir/sub/../a.txt", "/tmp/x/dir/a.txt");
    ok("file:///tmp/x/dir/%61.txt", "/tmp/x/dir/a.txt");
}

static void test_table_rejected(void **state)
{
    const char *rel = "invalid URI: relative URL without a base";
    bad("/tmp/x/a.txt", false, URI_ERR_SYNTAX, -32602, rel);
    bad("dir/a.txt", false, URI_ERR_SYNTAX, -32602, rel);
    bad("https://x/y", false, URI_ERR_SCHEME, -32602, "unsupported path URI scheme `https`");
    bad("file:///tmp/x/a.txt?x=1", false, URI_ERR_QUERY, -32602,
        "query parameters are not allowed in path URIs");
    bad("file:///tmp/x/a.txt#f", false, URI_ERR_FRAGMENT, -32602,
        "fragments are not allowed in path URIs");
    const char *idn = "invalid URI: invalid international domain name";
    bad("file://localhost:8/x", false, URI_ERR_SYNTAX, -32602, idn);
    bad("file://u:p@localhost/x", false, URI_ERR_SYNTAX, -32602, idn);
    bad("file:///tmp/x/a%00.txt", false, URI_ERR_PLATFORM, -32602,
        "'file:///tmp/x/a%00.txt' is invalid on 'linux'");
    bad("file://server/share/x", false, URI_ERR_HOST, -32600,
        "'file://server/share/x' is invalid on 'linux'");
}

static void test_other_forms(void **state)
{
    ok("FILE:///a", "/a");
    ok("file://LocalHost/a", "/a");
    ok("file://localhost", "/");
    ok("file:", "/");
    ok("file:a/b", "/a/b");
    ok("file:\\\\localhost\\tmp\\x", "/tmp/x");
    ok("file:///tmp/a\\b", "/tmp/a/b");
    ok("  file:///tmp/a\tb\n ", "/tmp/ab");
    ok("file:///a//b/", "/a//b/");
    ok("file:////a", "//a");
    ok("file:///tmp/%zz/%4", "/tmp/%zz/%4");
    ok("file:///tmp/%%41", "/tmp/%A");
    ok("file:///tmp/%2Fx", "/tmp//x");
    bad("HTTP://x", false, URI_ERR_SCHEME, -32602, "unsupported path URI scheme `http`");
    bad("", false, URI_ERR_SYNTAX, -32602, "invalid URI: relative URL without a base");
    bad("file:///C:/x", false, URI_ERR_DRIVE, -32602, "'file:///C:/x' is invalid on 'linux'");
    bad("file://C|/x", false, URI_ERR_DRIVE, -32602, "'file:///C:/x' is invalid on 'linux'");
    bad("file:///C:/../x", false, URI_ERR_DRIVE, -32602, "'file:///C:/x' is invalid on 'linux'");
    bad("file://127.0.0.1/x", false, URI_ERR_HOST, -32600,
        "'file://127.0.0.1/x' is invalid on 'linux'");
    bad("file://Server/x?q", false, URI_ERR_QUERY, -32602,
        "query parameters are not allowed in path URIs");
    bad("file:/a/b%00/../c%00", false, URI_ERR_PLATFORM, -32602,
        "'file:///a/c%00' is invalid on 'linux'");
}

static void test_dot_segments(void **state)
{
    ok("file:///a/./b/.", "/a/b/");
    ok("file:///a/b/..", "/a/");
    ok("file:///a/b/%2e%2E/c", "/a/c");
    ok("file:///a/.%2e/c/%2E", "/c/");
    ok("file:///..", "/");
    ok("file:///../../../etc/passwd", "/etc/passwd");
    ok("file://localhost/a/../../..", "/");
    ok("file:///a/...", "/a/...");
}

static void test_bare_path_flag(void **state)
{
    expect_path("/tmp/x", true, "/tmp/x", 6);
    /* Taken as is: no decoding or resolution. */
    expect_path("/tmp/a%20b/../c", true, "/tmp/a%20b/../c", 15);
    bad("tmp/x", true, URI_ERR_SYNTAX, -32602, "invalid URI: relative URL without a base");
    bad("/tmp/x", false, URI_ERR_SYNTAX, -32602, "invalid URI: relative URL without a base");
    expect_path("file:///tmp/x", true, "/tmp/x", 6);

    char *out = NULL;
    size_t out_len;
    struct uri_error err;
    assert_int_equal(uri_to_path("/a\0b", 4, true, &out, &out_len, &err), -EINVAL);
    assert_int_equal(err.kind, URI_ERR_PLATFORM);
    assert_int_equal(rpc_uri_error_code(&err), -32602);
    assert_string_equal(err.message, "'/a%00b' is invalid on 'linux'");
}

static void test_encoding(void **state)
{
    const char *p = "/tmp/x/sp ace/\xC3\xA9";
    char *uri = uri_from_path(p, strlen(p));
    assert_string_equal(uri, "file:///tmp/x/sp%20ace/%C3%A9");
    free(uri);
    roundtrip(p, strlen(p));

    const char *all = "/a\x01\x7f \"#%<>?`{}\\|:@[]^~!$&'()*+,;=b";
    uri = uri_from_path(all, strlen(all));
    assert_string_equal(uri, "file:///a%01%7F%20%22%23%25%3C%3E%3F%60%7B%7D%5C|:@[]^~!$&'()*+,;=b");
    free(uri);
    roundtrip(all, strlen(all));

    uri = uri_from_path("/", 1);
    assert_string_equal(uri, "file:///");
    free(uri);
    roundtrip("/", 1);
    roundtrip("//x//", 5);
}

static void test_non_utf8(void **state)
{
    const char p[] = "/tmp/x/\xFF\xFE";
    char *uri = uri_from_path(p, sizeof p - 1);
    assert_string_equal(uri, "file:///tmp/x/%FF%FE");
    free(uri);
    roundtrip(p, sizeof p - 1);
    expect_path("file:///tmp/x/%ff%fe", false, p, sizeof p - 1);
}

static void test_bad_path_form(void **state)
{
    /* Paths the URL parser would change travel as base64url and come back intact. */
    const char nul[] = "/a\0b";
    char *uri = uri_from_path(nul, sizeof nul - 1);
    assert_string_equal(uri, "file:///%00/bad/path/L2EAYg");
    free(uri);
    const char *odd[] = {"/a/../b", "/a/./b", "/.", "/C:/x", "/c|", "/x/..", "relative"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        uri = uri_from_path(odd[i], strlen(odd[i]));
        assert_memory_equal(uri, "file:///%00/bad/path/", 21);
        free(uri);
        if (odd[i][0] == '/') roundtrip(odd[i], strlen(odd[i]));
    }
    /* "-" and "_" are base64url for "+" and "/". */
    expect_path("file:///%00/bad/path/L_8-", false, "/\xFF>", 3);
    ok("file://localhost/%00/bad/path/L2EvLi4vYg", "/a/../b");
    /* A NUL inside, a relative result, or bad base64 are refused. */
    bad("file:///%00/bad/path/L2EAYg", false, URI_ERR_PLATFORM, -32602,
        "'file:///%00/bad/path/L2EAYg' is invalid on 'linux'");
    bad("file:///%00/bad/path/YWJj", false, URI_ERR_PLATFORM, -32602,
        "'file:///%00/bad/path/YWJj' is invalid on 'linux'");
    bad("file:///%00/bad/path/L2E=", false, URI_ERR_PLATFORM, -32602,
        "'file:///%00/bad/path/L2E=' is invalid on 'linux'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_accepted), cmocka_unit_test(test_table_rejected),
        cmocka_unit_test(test_other_forms),    cmocka_unit_test(test_dot_segments),
        cmocka_unit_test(test_bare_path_flag), cmocka_unit_test(test_encoding),
        cmocka_unit_test(test_non_utf8),       cmocka_unit_test(test_bad_path_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
