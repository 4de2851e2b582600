/* Unit tests for server/options and config_parse: the table's invariants, defaults
 * (the same as core/limits.h's), each kind's parsing and bounds, the error texts,
 * and that --help and the man page derive every option from the table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/limits.h"
#include "server/codex_config.h"
#include "server/config.h"
#include "server/options.h"

/* config_parse over a NULL-terminated list of arguments (argv[0] added). */
static int parse(const char *first, ...)
{
    static char *argv[32];
    static char store[32][128];
    int argc = 0;
    strcpy(store[argc], "exec-server");
    argv[argc] = store[argc];
    argc++;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        snprintf(store[argc], sizeof store[argc], "%s", a);
        argv[argc] = store[argc];
        argc++;
    }
    va_end(ap);
    argv[argc] = NULL;
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w"); /* the error texts are checked below, not here */
    int r = config_parse(argc, argv);
    fclose(stderr);
    stderr = saved;
    return r;
}

static void test_table_invariants(void **state)
{
    for (size_t i = 0; i < server_options.count; i++) {
        const struct opt_spec *o = &server_options.rows[i];
        assert_non_null(o->help);
        assert_true(o->modes != 0);
        assert_true(o->section < server_options.section_count);
        bool takes_value = o->kind != OPT_FLAG && o->kind != OPT_ACTION;
        assert_int_equal(takes_value, o->meta != NULL);
        if (o->kind != OPT_ACTION) assert_non_null(o->target);
        if (o->kind == OPT_CHOICE) assert_non_null(o->choices);
        if (o->style == OPT_OURS && (o->kind == OPT_COUNT || o->kind == OPT_BYTES ||
                                     o->kind == OPT_SECONDS || o->kind == OPT_PARSE))
            assert_non_null(o->expect);
        assert_ptr_equal(options_find(&server_options, o->name), o);
        for (size_t j = i + 1; j < server_options.count; j++) {
            assert_string_not_equal(o->name, server_options.rows[j].name);
            if (o->short_name)
                assert_int_not_equal(o->short_name, server_options.rows[j].short_name);
        }
    }
    assert_null(options_find(&server_options, "no-such-option"));
}

static void test_defaults(void **state)
{
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_int_equal(server_limits.max_connections, LIMITS_DEFAULT_MAX_CONNECTIONS);
    assert_int_equal(server_limits.max_processes, LIMITS_DEFAULT_MAX_PROCESSES);
    assert_int_equal(server_limits.max_message, LIMITS_DEFAULT_MAX_MESSAGE);
    assert_int_equal(server_limits.max_queued, LIMITS_DEFAULT_MAX_QUEUED);
    assert_int_equal(server_limits.max_detached, LIMITS_DEFAULT_MAX_DETACHED);
    assert_string_equal(server_config.listen_url, "ws://127.0.0.1:0");
    assert_int_equal(server_config.session_ttl_ms, 80000);
    assert_int_equal(server_config.ws_auth, -1);
    assert_int_equal(server_config.ws_skew, 30);
    assert_int_equal(server_config.remote_transport, 0);
    assert_string_equal(server_config.aws_service, "execute-api");
    assert_false(config_given("listen"));
    assert_false(server_config.forward);
}

static void test_values_and_bounds(void **state)
{
    assert_int_equal(parse("--max-message-bytes", "5K", "--max-queued-bytes", "2g", NULL),
                     CONFIG_OK);
    assert_int_equal(server_limits.max_message, 5 << 10);
    assert_int_equal(server_limits.max_queued, 2ull << 30);
    assert_int_equal(parse("--max-connections", "1000000", NULL), CONFIG_OK);
    assert_int_equal(parse("--max-connections", "1000001", NULL), 2);
    assert_int_equal(parse("--max-connections", "0", NULL), 2);
    assert_int_equal(parse("--max-connections", "+5", NULL), 2);
    assert_int_equal(parse("--max-detached-sessions", "0", NULL), CONFIG_OK);
    assert_int_equal(server_limits.max_detached, 0);
    assert_int_equal(parse("--max-message-bytes", "1025G", NULL), 2);
    assert_int_equal(parse("--max-message-bytes", "5Kb", NULL), 2);
    assert_int_equal(parse("--session-ttl", "1.5", NULL), CONFIG_OK);
    assert_int_equal(server_config.session_ttl_ms, 1500);
    assert_int_equal(parse("--session-ttl", "nan", NULL), 2);
    assert_int_equal(parse("--session-ttl", "", NULL), 2);
    assert_int_equal(parse("--session-ttl", "-1", NULL), 2);
    assert_int_equal(parse("--log-level", "debug", NULL), CONFIG_OK);
    assert_int_equal(parse("--log-level", "loud", NULL), 2);
    assert_int_equal(parse("--remote-transport", "direct", NULL), CONFIG_OK);
    assert_int_equal(server_config.remote_transport, 1);
    assert_int_equal(parse("--ws-auth", "signed-bearer-token", NULL), CONFIG_OK);
    assert_int_equal(server_config.ws_auth, 1);
    assert_int_equal(parse("--ws-max-clock-skew-seconds", "-1", NULL), 2);
    assert_int_equal(parse("--listen", "stdio", NULL), CONFIG_OK);
    assert_true(config_given("listen"));
    /* A later parse starts from the defaults again. */
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_false(config_given("listen"));
    assert_int_equal(server_limits.max_message, LIMITS_DEFAULT_MAX_MESSAGE);
}

static void test_usage_errors(void **state)
{
    assert_int_equal(parse("--bogus", NULL), 2);
    assert_int_equal(parse("--listen", NULL), 2);
    assert_int_equal(parse("extra", NULL), 2);
    assert_int_equal(parse("--connect", "ws://127.0.0.1:1", NULL), 2);
    assert_int_equal(parse("forward", "--connect", "ws://127.0.0.1:1", NULL), CONFIG_OK);
    assert_true(server_config.forward);
    assert_string_equal(server_config.connect_url, "ws://127.0.0.1:1");
}

static void test_error_texts(void **state)
{
    char err[512];
    assert_int_equal(
        options_store(options_find(&server_options, "max-connections"), "0", err, sizeof err),
        -EINVAL);
    assert_string_equal(err, "invalid --max-connections `0`; expected a positive count");
    assert_int_equal(
        options_store(options_find(&server_options, "remote-transport"), "quic", err, sizeof err),
        -EINVAL);
    assert_string_equal(err, "unsupported --remote-transport `quic`; expected `noise` or "
                             "`direct`");
    assert_int_equal(options_store(options_find(&server_options, "ws-auth"), "x", err, sizeof err),
                     -EINVAL);
    assert_string_equal(err, "invalid value 'x' for '--ws-auth <MODE>'; expected "
                             "capability-token or signed-bearer-token");
}

static void test_compat_options(void **state)
{
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_int_equal(limits_sandbox_pid_namespace(), LIMITS_PID_NS_ISOLATE);
    assert_int_equal(server_limits.max_concurrent_requests, 0); /* no limit */
    assert_false(limits_proxy_private_ips_via_upstream());
    assert_int_equal(parse("--linux-sandbox-pid-namespace", "inherit", "--concurrent-requests",
                           "+3", "--proxy-private-ips-via-upstream", NULL),
                     CONFIG_OK);
    assert_int_equal(limits_sandbox_pid_namespace(), LIMITS_PID_NS_INHERIT);
    assert_int_equal(server_limits.max_concurrent_requests, 3);
    assert_true(limits_proxy_private_ips_via_upstream());
    assert_int_equal(parse("--linux-sandbox-pid-namespace", "Isolate", NULL), 2);
    assert_int_equal(parse("--concurrent-requests", "0", NULL), 2);
    /* Back to the defaults on the next parse. */
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_int_equal(limits_sandbox_pid_namespace(), LIMITS_PID_NS_ISOLATE);
    assert_int_equal(server_limits.max_concurrent_requests, 0);
    assert_int_equal(parse("-c", "a=1", "--config", "b=2", "--enable", "x", "--disable", "y",
                           "--strict-config", NULL),
                     CONFIG_OK);
    assert_int_equal(server_config.codex_overrides.n, 2);
    assert_string_equal(server_config.codex_overrides.v[1], "b=2");
    assert_int_equal(server_config.codex_enable.n, 1);
    assert_int_equal(server_config.codex_disable.n, 1);
    assert_true(server_config.strict_config);
    assert_int_equal(parse("forward", "--concurrent-requests", "2", NULL), 2);
    char err[256];
    assert_int_equal(
        options_store(options_find(&server_options, "concurrent-requests"), "abc", err, sizeof err),
        -EINVAL);
    assert_string_equal(err, "invalid value 'abc' for '--concurrent-requests <COUNT>': invalid "
                             "digit found in string");
}

/* --tcp-upstream-proxy and --linux-sandbox-transparent-tcp (0.171.0): the value is
 * split and checked in the reference's order, with its texts. */
static void test_tcp_upstream_proxy(void **state)
{
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_null(limits_tcp_upstream_proxy());
    assert_false(limits_sandbox_transparent_tcp());
    assert_int_equal(parse("--tcp-upstream-proxy", "proxy.example.:3128",
                           "--linux-sandbox-transparent-tcp", NULL),
                     CONFIG_OK);
    assert_true(limits_sandbox_transparent_tcp());
    assert_string_equal(limits_tcp_upstream_proxy()->host, "proxy.example.");
    assert_int_equal(limits_tcp_upstream_proxy()->port, 3128);
    assert_int_equal(parse("--tcp-upstream-proxy=[::ffff:10.0.0.1]:+08", NULL), CONFIG_OK);
    assert_string_equal(limits_tcp_upstream_proxy()->host, "::ffff:10.0.0.1");
    assert_int_equal(limits_tcp_upstream_proxy()->port, 8);
    const struct opt_spec *o = options_find(&server_options, "tcp-upstream-proxy");
    static const char *const cases[][2] = {
        {"foo", ": missing port"},
        {"h:", ": parse port as u16\n \xe2\x86\xaa cannot parse integer from empty string"},
        {"h:-1", ": parse port as u16\n \xe2\x86\xaa invalid digit found in string"},
        {"h:65536", ": parse port as u16\n \xe2\x86\xaa number too large to fit in target type"},
        {"[::1]", ": parse port as u16\n \xe2\x86\xaa invalid digit found in string"},
        {"a b:0", ": parse host from host-with-port\n \xe2\x86\xaa parse host from string\n"
                  " \xe2\x86\xaa Option is None"},
        {"::1:0", ": missing brackets for IPv6 address with port (in host-with-port)"},
        {"[::1]:0", ": TCP upstream proxy port must be nonzero"},
    };
    char err[512], want[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(options_store(o, cases[i][0], err, sizeof err), -EINVAL);
        snprintf(want, sizeof want, "invalid value '%s' for '--tcp-upstream-proxy <HOST:PORT>'%s",
                 cases[i][0], cases[i][1]);
        assert_string_equal(err, want);
    }
    /* The host: labels of letters, digits, `_` and `-` (not at a label's ends), 253
     * bytes at most with a final dot, no empty label. */
    char name[300];
    memset(name, 'a', sizeof name);
    for (int i = 63; i < 253; i += 64)
        name[i] = '.';
    strcpy(name + 253, ":1");
    assert_int_equal(options_store(o, name, err, sizeof err), 0);
    strcpy(name + 252, ".:1"); /* 253 with the final dot: still fine */
    assert_int_equal(options_store(o, name, err, sizeof err), 0);
    strcpy(name + 253, ".:1"); /* 254 */
    assert_int_equal(options_store(o, name, err, sizeof err), -EINVAL);
    const char *good[] = {"_:1", "a-_:1", "123:1", "999.1.1.1:1", "h.:1", "[::]:1"};
    const char *bad[] = {"-h:1", "h-:1", ".h:1", "h..:1", "h/x:1", "u@h:1", "[x]:1", "[]:1"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        assert_int_equal(options_store(o, good[i], err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(options_store(o, bad[i], err, sizeof err), -EINVAL);
    assert_int_equal(parse(NULL), CONFIG_OK);
    assert_null(limits_tcp_upstream_proxy());
}

static void test_codex_config_rules(void **state)
{
    const char *ok[] = {"model=\"o3\"", "features.shell_snapshot=true", "otel.x=1",
                        "features.network_proxy={enabled=true}", "web_search=\"live\""};
    const char *bad[] = {"foo=1",
                         "nokey",
                         "features.nope=true",
                         "features.shell_snapshot=1",
                         "features.shell_snapshot=maybe",
                         "profile=x",
                         "tui2.x=1"};
    const char *feat[] = {"shell_snapshot", "collab"}, *nofeat[] = {"nope"};
    struct opt_list none = {0}, one = {0}, f = {feat, 2}, nf = {nofeat, 1};
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        one = (struct opt_list){&ok[i], 1};
        assert_int_equal(codex_config_check(&one, &none, &none, true), 0);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        one = (struct opt_list){&bad[i], 1};
        assert_int_equal(codex_config_check(&one, &none, &none, true), 1);
        assert_int_equal(codex_config_check(&one, &none, &none, false), 0); /* a warning */
    }
    assert_int_equal(codex_config_check(&none, &f, &f, false), 0);
    assert_int_equal(codex_config_check(&none, &nf, &none, false), 1);
    assert_int_equal(codex_config_check(&none, &none, &nf, false), 1);
    fclose(stderr);
    stderr = saved;
    assert_true(codex_config_feature_known("guardianv2.thread_context"));
    assert_false(codex_config_feature_known("Shell_snapshot"));
}

/* Every option the command takes is in its --help, and every option in the page. */
static void test_help_and_man_list_every_option(void **state)
{
    char *text;
    size_t n;
    for (unsigned mode = OPT_SERVE; mode <= OPT_FORWARD; mode++) {
        FILE *f = open_memstream(&text, &n);
        server_options_help(f, mode);
        fclose(f);
        for (size_t i = 0; i < server_options.count; i++) {
            char needle[96];
            snprintf(needle, sizeof needle, "--%s", server_options.rows[i].name);
            bool listed = strstr(text, needle) != NULL;
            if (server_options.rows[i].modes & mode) assert_true(listed);
        }
        free(text);
    }
    FILE *f = open_memstream(&text, &n);
    server_options_man(f);
    fclose(f);
    for (size_t i = 0; i < server_options.count; i++) {
        char needle[128] = "\\fB\\-\\-";
        size_t k = strlen(needle);
        for (const char *p = server_options.rows[i].name; *p && k + 3 < sizeof needle; p++) {
            if (*p == '-') needle[k++] = '\\';
            needle[k++] = *p;
        }
        needle[k] = '\0';
        assert_non_null(strstr(text, needle));
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_invariants),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_values_and_bounds),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_error_texts),
        cmocka_unit_test(test_compat_options),
        cmocka_unit_test(test_tcp_upstream_proxy),
        cmocka_unit_test(test_codex_config_rules),
        cmocka_unit_test(test_help_and_man_list_every_option),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    config_free();
    return r;
}
