/* Unit tests for sandbox/policy: the wire shapes of PROTOCOL.md section 10.2, the
 * resolution and precedence rules of section 10.3 (special kinds, carve-outs,
 * "requires cwd", full-disk shortcuts) and the serde-worded decode errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"

static char tmp[64];

static int setup(void **state)
{
    strcpy(tmp, "/tmp/sbpolXXXXXX");
    if (!mkdtemp(tmp)) return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/ws", tmp);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ws/.git", tmp);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ws/secret", tmp);
    mkdir(p, 0755);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* Parses text with %s replaced by the temp dir (up to 4 times). */
static int parse(const char *fmt, const char *fallback, struct sandbox_policy *p,
                 struct sandbox_error *e)
{
    char text[4096];
    snprintf(text, sizeof text, fmt, tmp, tmp, tmp, tmp);
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) fail_msg("bad test json: %s: %s", je.text, text);
    int rc = sandbox_policy_parse(j, fallback, p, e);
    json_decref(j);
    return rc;
}

static bool has(const struct sb_paths *l, const char *suffix)
{
    char want[256];
    snprintf(want, sizeof want, "%s%s", strcmp(suffix, "/") ? tmp : "", suffix);
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], want) || !strcmp(l->v[i], suffix)) return true;
    return false;
}

#define ROOT_READ                                                                                  \
    "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},\"access\":\"read\"}"
#define PROJ_WRITE                                                                                 \
    "{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"project_roots\"}},\"access\":"          \
    "\"write\"}"

static void test_null_and_disabled(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    assert_int_equal(sandbox_policy_parse(NULL, NULL, &p, &e), 0);
    assert_false(sandbox_policy_needs_process(&p));
    assert_int_equal(parse("{\"permissions\":{\"type\":\"disabled\"},\"windowsSandboxLevel\":"
                           "\"disabled\"}",
                           NULL, &p, &e),
                     0);
    assert_false(sandbox_policy_needs_process(&p));
    assert_false(sandbox_policy_needs_fs(&p, true, true));
    sandbox_policy_free(&p);
    assert_int_equal(parse("{\"permissions\":{\"type\":\"external\",\"network\":\"restricted\"},"
                           "\"windowsSandboxLevel\":\"disabled\"}",
                           NULL, &p, &e),
                     0);
    assert_false(sandbox_policy_needs_process(&p));
    sandbox_policy_free(&p);
}

static void test_unrestricted_network(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    assert_int_equal(parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
                           "\"unrestricted\"},\"network\":\"restricted\"},"
                           "\"windowsSandboxLevel\":\"disabled\"}",
                           NULL, &p, &e),
                     0);
    assert_true(p.net_restricted);
    assert_false(p.enforce_fs);
    assert_true(sandbox_policy_needs_process(&p));
    assert_false(sandbox_policy_needs_fs(&p, true, true));
    sandbox_policy_free(&p);
}

static void test_workspace_write(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    int rc =
        parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
              "\"entries\":[" ROOT_READ "," PROJ_WRITE
              ",{\"path\":{\"type\":\"path\",\"path\":\"file://%s/ws/secret\"},"
              "\"access\":\"none\"}]},\"network\":\"restricted\"},"
              "\"cwd\":\"file://%s/ws\",\"workspaceRoots\":[\"file://%s/ws\"],"
              "\"windowsSandboxLevel\":\"disabled\"}",
              NULL, &p, &e);
    if (rc) fail_msg("%d %s", (int)e.kind, e.message);
    assert_true(p.enforce_fs);
    assert_true(p.net_restricted);
    assert_false(p.full_read); /* a none entry exists */
    assert_true(has(&p.readable, "/"));
    assert_true(has(&p.writable, "/ws"));
    /* protected names go on their own list, whatever their state on the host */
    assert_true(has(&p.protected_names, "/ws/.git"));
    assert_true(has(&p.protected_names, "/ws/.codex"));
    assert_false(has(&p.readonly_sub, "/ws/.git"));
    assert_true(has(&p.denied, "/ws/secret"));
    assert_true(sandbox_policy_needs_fs(&p, true, false));
    assert_true(sandbox_policy_needs_fs(&p, false, true));
    sandbox_policy_free(&p);
}

/* Full-disk read still goes through the helper's view: the server itself could read
 * what no sandboxed process can (another process's environ, a raw disk). */
static void test_root_read_still_runs_in_the_helper(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    assert_int_equal(parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
                           "\"restricted\",\"entries\":[" ROOT_READ "]},\"network\":\"enabled\"},"
                           "\"windowsSandboxLevel\":\"disabled\"}",
                           NULL, &p, &e),
                     0);
    assert_true(p.full_read);
    assert_false(p.full_write);
    assert_true(sandbox_policy_needs_fs(&p, true, false));
    assert_true(sandbox_policy_needs_fs(&p, false, true));
    assert_true(sandbox_policy_needs_process(&p));
    sandbox_policy_free(&p);
}

static void test_requires_cwd(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    const char *j = "{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
                    "\"restricted\",\"entries\":[" PROJ_WRITE "]},\"network\":\"enabled\"},"
                    "\"workspaceRoots\":[\"file://%s/ws\"],\"windowsSandboxLevel\":\"disabled\"}";
    assert_int_equal(parse(j, NULL, &p, &e), -EINVAL);
    assert_int_equal(sandbox_error_code(&e), -32602);
    assert_string_equal(e.message,
                        "file system sandbox context with dynamic permissions requires cwd");
    /* process/start's request cwd stands in. */
    assert_int_equal(parse(j, "/tmp", &p, &e), 0);
    assert_true(has(&p.writable, "/ws"));
    sandbox_policy_free(&p);
}

static void test_project_roots_without_roots_resolve_to_nothing(void **state)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    assert_int_equal(parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
                           "\"restricted\",\"entries\":[" PROJ_WRITE "]},\"network\":\"enabled\"},"
                           "\"cwd\":\"file://%s/ws\",\"windowsSandboxLevel\":\"disabled\"}",
                           NULL, &p, &e),
                     0);
    assert_int_equal(p.writable.n, 0);
    assert_int_equal(p.readable.n, 0);
    assert_true(sandbox_policy_needs_fs(&p, true, false));
    sandbox_policy_free(&p);
}

static void test_glob_none(void **state)
{
    char f[128];
    snprintf(f, sizeof f, "%s/ws/a.env", tmp);
    FILE *fp = fopen(f, "w");
    fclose(fp);
    struct sandbox_policy p;
    struct sandbox_error e;
    int rc = parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
                   "\"restricted\",\"entries\":[" ROOT_READ ",{\"path\":{\"type\":\"glob_pattern\","
                   "\"pattern\":\"**/*.env\"},\"access\":\"none\"}]},\"network\":\"enabled\"},"
                   "\"cwd\":\"file://%s/ws\",\"windowsSandboxLevel\":\"disabled\"}",
                   NULL, &p, &e);
    if (rc) fail_msg("%s", e.message);
    assert_true(has(&p.denied, "/ws/a.env"));
    sandbox_policy_free(&p);
    unlink(f);
}

static void expect_err(const char *j, int code, const char *msg)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    if (parse(j, NULL, &p, &e) == 0) fail_msg("accepted: %s", j);
    assert_int_equal(sandbox_error_code(&e), code);
    assert_string_equal(e.message, msg);
}

static void test_decode_errors(void **state)
{
    expect_err("{\"windowsSandboxLevel\":\"disabled\"}", -32602, "missing field `permissions`");
    expect_err("{\"permissions\":{\"type\":\"disabled\"}}", -32602,
               "missing field `windowsSandboxLevel`");
    expect_err("{\"permissions\":{\"type\":\"bogus\"},\"windowsSandboxLevel\":\"disabled\"}",
               -32602,
               "unknown variant `bogus`, expected one of `managed`, `disabled`, `external`");
    expect_err("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
               "\"entries\":[{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},"
               "\"access\":\"bogus\"}]},\"network\":\"enabled\"},\"windowsSandboxLevel\":"
               "\"disabled\"}",
               -32602, "unknown variant `bogus`, expected one of `read`, `write`, `deny`, `none`");
    expect_err("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
               "\"entries\":[{\"path\":{\"type\":\"path\",\"path\":\"/tmp/x\"},"
               "\"access\":\"read\"}]},\"network\":\"enabled\"},\"windowsSandboxLevel\":"
               "\"disabled\"}",
               -32602, "invalid URI: relative URL without a base");
    expect_err("{\"permissions\":{\"type\":\"disabled\"},\"cwd\":\"/tmp\","
               "\"windowsSandboxLevel\":\"disabled\"}",
               -32602, "invalid URI: relative URL without a base");
}

/* A path named through a symbolic link that lies in a writable root (one a sandboxed
 * command could have planted there) is refused; a link outside every writable root
 * (a user's symlinked workspace) and one under a writable "/" are not. */
static void test_planted_links(void **state)
{
    char p[160], t[160];
    snprintf(p, sizeof p, "%s/grant", tmp);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/grant/proj", tmp);
    mkdir(p, 0755);
    snprintf(t, sizeof t, "%s/elsewhere", tmp);
    mkdir(t, 0755);
    snprintf(p, sizeof p, "%s/grant/proj/ws", tmp);
    assert_int_equal(symlink(t, p), 0);
    snprintf(p, sizeof p, "%s/link-ws", tmp);
    assert_int_equal(symlink(t, p), 0);
    struct sandbox_policy pol;
    struct sandbox_error e;
#define NESTED(ACCESS)                                                                             \
    "{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","             \
    "\"entries\":[" ROOT_READ ",{\"path\":{\"type\":\"path\",\"path\":\"file://%s/grant\"},"       \
    "\"access\":\"" ACCESS "\"}," PROJ_WRITE "]},\"network\":\"restricted\"},"                     \
    "\"cwd\":\"file://%s/grant/proj/ws\",\"workspaceRoots\":[\"file://%s/grant/proj/ws\"],"        \
    "\"windowsSandboxLevel\":\"disabled\"}"
    char want[512];
    /* the workspace under a writable root, through a link in it */
    assert_int_equal(parse(NESTED("write"), NULL, &pol, &e), 0);
    snprintf(want, sizeof want,
             "cannot enforce sandbox writable path %s/grant/proj/ws because it crosses "
             "writable symlink %s/grant/proj/ws",
             tmp, tmp);
    assert_non_null(pol.refusal);
    assert_string_equal(pol.refusal, want);
    sandbox_policy_free(&pol);
    /* the same link where nothing writable holds it: the user's own, followed */
    assert_int_equal(parse(NESTED("read"), NULL, &pol, &e), 0);
    assert_null(pol.refusal);
    assert_true(has(&pol.writable, "/elsewhere"));
    sandbox_policy_free(&pol);
#undef NESTED
    assert_int_equal(
        parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
              "\"entries\":[" ROOT_READ "," PROJ_WRITE "]},\"network\":\"restricted\"},"
              "\"cwd\":\"file://%s/link-ws\",\"workspaceRoots\":[\"file://%s/link-ws\"],"
              "\"windowsSandboxLevel\":\"disabled\"}",
              NULL, &pol, &e),
        0);
    assert_null(pol.refusal);
    assert_true(has(&pol.writable, "/elsewhere"));
    sandbox_policy_free(&pol);
    /* a read-only entry under the writable root, through the link: the reference's words */
    assert_int_equal(
        parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
              "\"entries\":[" ROOT_READ ",{\"path\":{\"type\":\"path\",\"path\":"
              "\"file://%s/grant\"},\"access\":\"write\"},{\"path\":{\"type\":\"path\","
              "\"path\":\"file://%s/grant/proj/ws\"},\"access\":\"read\"}]},"
              "\"network\":\"restricted\"},\"windowsSandboxLevel\":\"disabled\"}",
              NULL, &pol, &e),
        0);
    snprintf(want, sizeof want,
             "cannot enforce sandbox read-only path %s/grant/proj/ws because it crosses "
             "writable symlink %s/grant/proj/ws",
             tmp, tmp);
    assert_non_null(pol.refusal);
    assert_string_equal(pol.refusal, want);
    sandbox_policy_free(&pol);
    /* under a writable "/": the whole disk is the command's, nothing to refuse */
    assert_int_equal(
        parse("{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":\"restricted\","
              "\"entries\":[{\"path\":{\"type\":\"special\",\"value\":{\"kind\":\"root\"}},"
              "\"access\":\"write\"},{\"path\":{\"type\":\"path\",\"path\":"
              "\"file://%s/grant/proj/ws\"},\"access\":\"read\"}]},\"network\":\"restricted\"},"
              "\"windowsSandboxLevel\":\"disabled\"}",
              NULL, &pol, &e),
        0);
    assert_null(pol.refusal);
    sandbox_policy_free(&pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_and_disabled),
        cmocka_unit_test(test_unrestricted_network),
        cmocka_unit_test(test_workspace_write),
        cmocka_unit_test(test_root_read_still_runs_in_the_helper),
        cmocka_unit_test(test_requires_cwd),
        cmocka_unit_test(test_project_roots_without_roots_resolve_to_nothing),
        cmocka_unit_test(test_glob_none),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_planted_links),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
