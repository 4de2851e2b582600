/* Unit tests for process/shell_snapshot's pure parts: parsing a capture's output,
 * the restore prelude, the command's environment, and the applicability rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "process/env_policy.h"
#include "process/shell_snapshot.h"
#include "rpc/params.h"

#define CAPTURE(s) s, sizeof(s) - 1

static void test_parse_bash(void **st)
{
    (void)st;
    /* Startup noise, the marker, probe, functions, options, environment. */
    static const char out[] =
        "noise from .profile\n\0EXECSNAP\0"
        "1\0"
        "shopt -s extglob\nf () \n{ \n    echo f\n}\n\0"
        "set +o allexport\nset -o braceexpand\nset -o noclobber\nset +o xtrace\n\0"
        "HOME=/h\0PWD=/somewhere\0OLDPWD=/x\0A=b=c\0NOEQUALS\0\xff\xfe=bad\0";
    char *state, **env;
    size_t len;
    bool fd;
    assert_int_equal(proc_snapshot_parse(SNAP_BASH, CAPTURE(out), &state, &len, &env, &fd), 0);
    assert_true(fd);
    assert_int_equal(strlen(state), len);
    assert_non_null(strstr(state, "shopt -s extglob\nf () \n{ \n    echo f\n}\n"));
    /* Only options that are on, last, in one group. */
    assert_non_null(strstr(state, "{\nset -o braceexpand\nset -o noclobber\n}\n"));
    assert_null(strstr(state, "allexport"));
    assert_null(strstr(state, "xtrace"));
    assert_string_equal(env[0], "HOME=/h");
    assert_string_equal(env[1], "A=b=c");
    assert_null(env[2]);
    free(state);
    env_free(env);
}

static void test_parse_rejects(void **st)
{
    (void)st;
    char *state, **env;
    size_t len;
    bool fd;
    assert_int_equal(proc_snapshot_parse(SNAP_BASH, CAPTURE("no marker"), &state, &len, &env, &fd),
                     -EINVAL);
    assert_int_equal(proc_snapshot_parse(SNAP_BASH,
                                         CAPTURE("\0EXECSNAP\0"
                                                 "1\0funcs"),
                                         &state, &len, &env, &fd),
                     -EINVAL);
    assert_int_equal(proc_snapshot_parse(SNAP_BASH,
                                         CAPTURE("\0EXECSNAP\0"
                                                 "2\0\0\0"),
                                         &state, &len, &env, &fd),
                     -EINVAL);
    /* Over 512 KiB of state and environment. */
    size_t big = 600 * 1024;
    char *out = calloc(1, big + 32);
    memcpy(out,
           "\0EXECSNAP\0"
           "0\0",
           12);
    memset(out + 12, 'x', big);
    memcpy(out + 12 + big, "\0\0", 2);
    assert_int_equal(proc_snapshot_parse(SNAP_BASH, out, 14 + big, &state, &len, &env, &fd),
                     -E2BIG);
    free(out);
}

static void test_parse_zsh_options(void **st)
{
    (void)st;
    static const char out[] = "\0EXECSNAP\0"
                              "0\0\0extendedglob\nnoclobber\nbad name!\n\0";
    char *state, **env;
    size_t len;
    bool fd;
    assert_int_equal(proc_snapshot_parse(SNAP_ZSH, CAPTURE(out), &state, &len, &env, &fd), 0);
    assert_false(fd);
    assert_non_null(
        strstr(state, "{\nsetopt extendedglob 2>/dev/null\nsetopt noclobber 2>/dev/null\n}\n"));
    assert_null(strstr(state, "bad"));
    assert_null(env[0]);
    free(state);
    env_free(env);
}

static void test_command_fd_source(void **st)
{
    (void)st;
    struct proc_snapshot snap = {.state = "f() { :; }\n", .state_len = 11, .fd_source = true};
    const char *flag;
    char *script, **extra;
    size_t n;
    proc_snapshot_command(SNAP_BASH, &snap, "echo hi", &flag, &script, &extra, &n);
    assert_string_equal(flag, "-pc");
    assert_int_equal(n, 0);
    assert_string_equal(script, "set +o privileged\nif ! . /dev/fd/3 >/dev/null; then printf "
                                "'failed to restore shell snapshot\\n' >&2; fi\necho hi");
    free(script);
    proc_snapshot_command(SNAP_SH, &snap, "x", &flag, &script, &extra, &n);
    assert_string_equal(flag, "-c");
    assert_int_equal(strncmp(script, "if ! . /dev/fd/3", 16), 0);
    free(script);
}

static void test_command_env_source(void **st)
{
    (void)st;
    /* 130 KiB of state: three variables, cut where a UTF-8 sequence does not split. */
    size_t len = 130 * 1024;
    char *state = malloc(len + 1);
    memset(state, 'a', len);
    memcpy(state + 60 * 1024 - 1, "\xc3\xa9", 2);
    state[len] = 0;
    struct proc_snapshot snap = {.state = state, .state_len = len, .fd_source = false};
    const char *flag;
    char *script, **extra;
    size_t n;
    proc_snapshot_command(SNAP_BASH, &snap, "true", &flag, &script, &extra, &n);
    assert_int_equal(n, 3);
    assert_non_null(strstr(script, "eval \"unset __EXEC_SHELL_SNAPSHOT_0 __EXEC_SHELL_SNAPSHOT_1 "
                                   "__EXEC_SHELL_SNAPSHOT_2\n${__EXEC_SHELL_SNAPSHOT_0}"
                                   "${__EXEC_SHELL_SNAPSHOT_1}${__EXEC_SHELL_SNAPSHOT_2}\""));
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = strchr(extra[i], '=') + 1;
        total += strlen(v);
        assert_true(strlen(v) <= 60 * 1024);
    }
    assert_int_equal(total, len);
    /* The first chunk stops before the two-byte character. */
    assert_int_equal(strlen(strchr(extra[0], '=') + 1), 60 * 1024 - 1);
    for (size_t i = 0; i < n; i++)
        free(extra[i]);
    free(extra);
    free(script);
    free(state);
}

static void test_env_merge(void **st)
{
    (void)st;
    char *cenv[] = {"PATH=/req/bin", "HOME=/h", "KEEP=cenv", "CODEX_EXEC_SERVER_NOISE_AUTH_TOKEN=t",
                    NULL};
    char *captured[] = {"PATH=/snap/bin", "HOME=/snap", "FROM_RC=1", "NODE_REPL_AUTH_TOKEN=x",
                        NULL};
    json_error_t e;
    json_t *req_env = json_loads("{\"PATH\":\"/req/bin\"}", 0, &e);
    struct proc_snapshot snap = {.env = captured};
    char **extra = malloc(sizeof *extra);
    extra[0] = strdup("__EXEC_SHELL_SNAPSHOT_0=s");
    char **out = proc_snapshot_env(cenv, req_env, &snap, extra, 1);
    /* The request's env wins; otherwise the capture wins over the inherited. */
    assert_string_equal(env_get(out, "PATH"), "/req/bin");
    assert_string_equal(env_get(out, "HOME"), "/snap");
    assert_string_equal(env_get(out, "FROM_RC"), "1");
    assert_string_equal(env_get(out, "KEEP"), "cenv");
    assert_string_equal(env_get(out, "__EXEC_SHELL_SNAPSHOT_0"), "s");
    assert_null(env_get(out, "CODEX_EXEC_SERVER_NOISE_AUTH_TOKEN"));
    assert_null(env_get(out, "NODE_REPL_AUTH_TOKEN"));
    env_free(out);
    json_decref(req_env);
}

static void test_check(void **st)
{
    (void)st;
    json_error_t e;
    json_t *params = json_loads("{\"shellSnapshot\":{\"scopeId\":\"s\",\"shell\":"
                                "{\"name\":\"bash\",\"path\":\"/bin/bash\"}}}",
                                0, &e);
    struct pdec d;
    pdec_begin(&d, params, "ExecParams");
    struct proc_snapshot_req r;
    bool present;
    proc_snapshot_decode(&d, &r, &present);
    assert_true(present);
    assert_false(d.failed);
    char err[300];
    json_t *lc = json_loads("[\"/bin/bash\",\"-lc\",\"x\"]", 0, &e);
    json_t *c = json_loads("[\"/bin/bash\",\"-c\",\"x\"]", 0, &e);
    json_t *other = json_loads("[\"bash\",\"-lc\",\"x\"]", 0, &e);
    assert_int_equal(proc_snapshot_check(&r, lc, err, sizeof err), 1);
    assert_int_equal(r.shell, SNAP_BASH);
    assert_int_equal(proc_snapshot_check(&r, c, err, sizeof err), 0);
    assert_int_equal(proc_snapshot_check(&r, other, err, sizeof err), 0);
    r.shell_name = "fish";
    assert_int_equal(proc_snapshot_check(&r, c, err, sizeof err), 0);
    assert_int_equal(proc_snapshot_check(&r, lc, err, sizeof err), -1);
    assert_string_equal(err, "shell snapshots are unsupported for shell `fish`");
    r.scope_len = 257;
    assert_int_equal(proc_snapshot_check(&r, c, err, sizeof err), -1);
    assert_string_equal(err, "shell snapshot scope must be non-empty and at most 256 bytes");
    json_decref(lc);
    json_decref(c);
    json_decref(other);
    json_decref(params);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_bash),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_parse_zsh_options),
        cmocka_unit_test(test_command_fd_source),
        cmocka_unit_test(test_command_env_source),
        cmocka_unit_test(test_env_merge),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
