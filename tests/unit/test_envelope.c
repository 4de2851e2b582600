/* Unit tests for the JSON-RPC envelope: classification of incoming messages,
 * the malformed-message reply, id echo, the lifecycle gate and the encoding of
 * responses. Messages go through rpc_dispatch on an in-memory connection whose
 * send operation captures what would go on the wire (no socket, no loop I/O). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/limits.h"
#include "rpc/dispatch.h"
#include "server/server_methods.h"
#include "session/session.h"
#include "transport/conn_impl.h"

struct memconn {
    struct conn base;
    char sent[16][4096]; /* captured payloads, NUL-terminated */
    int nsent;
    bool closed;
};

static void mem_send(struct conn *c, struct buf *msg)
{
    struct memconn *m = (struct memconn *)c;
    size_t n = msg->len - BUF_MSG_HEADROOM;
    assert_true(m->nsent < 16 && n < sizeof m->sent[0]);
    memcpy(m->sent[m->nsent], msg->data + BUF_MSG_HEADROOM, n);
    m->sent[m->nsent++][n] = '\0';
    buf_free(msg);
}

static void mem_close(struct conn *c)
{
    ((struct memconn *)c)->closed = true;
}

static void mem_destroy(struct conn *c) {}

static const struct conn_ops mem_ops = {
    .kind = "websocket", .send = mem_send, .close = mem_close, .destroy = mem_destroy};

static struct memconn *mc;

static int setup(void **state)
{
    mc = calloc(1, sizeof *mc);
    conn_init(&mc->base, &mem_ops, uv_default_loop(), rpc_dispatch);
    server_methods_register();
    strcpy(mc->base.peer, "127.0.0.1:50000");
    session_configure(uv_default_loop(), 80000);
    return 0;
}

static int teardown(void **state)
{
    conn_closed(&mc->base); /* what the transport does: frees the rpc gate slot */
    session_destroy_all();
    uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    free(mc);
    return 0;
}

static const char *send_msg(const char *text)
{
    int before = mc->nsent;
    rpc_dispatch(&mc->base, text, strlen(text));
    return mc->nsent > before ? mc->sent[mc->nsent - 1] : NULL;
}

#define PREFIX                                                                                     \
    "{\"error\":{\"code\":-32600,\"message\":\"failed to parse websocket JSON-RPC message from "   \
    "exec-server websocket 127.0.0.1:50000: "

static void assert_malformed(const char *text)
{
    const char *out = send_msg(text);
    assert_non_null(out);
    assert_memory_equal(out, PREFIX, strlen(PREFIX));
    assert_non_null(strstr(out, "\"},\"id\":-1}"));
    assert_false(mc->closed);
}

static void test_malformed_messages(void **state)
{
    assert_malformed("not-json");
    assert_malformed("[1,2]");
    assert_malformed("{}");
    assert_malformed("{\"id\":1,\"method\":5}");
    assert_malformed("{\"id\":1,\"method\":\"environment/status\"}xx");
    assert_malformed("{\"id\":1,\"id\":2,\"method\":\"x\"}");
    assert_malformed("{\"id\":null,\"method\":\"x\"}");
    assert_malformed("{\"id\":1.0,\"method\":\"x\"}");
    assert_malformed("{\"id\":1,\"method\":\"x\",\"trace\":5}");
    assert_malformed("");
    assert_string_equal(strstr(send_msg("[]"), "websocket 127.0.0.1:50000: ") + 27,
                        "expected a JSON-RPC object\"},\"id\":-1}");
}

static void test_ids_echoed_with_their_type(void **state)
{
    assert_string_equal(send_msg("{\"id\":\"s-1\",\"method\":\"no/such\"}"),
                        "{\"error\":{\"code\":-32601,\"message\":\"exec-server stub does not "
                        "implement `no/such` yet\"},\"id\":\"s-1\"}");
    assert_non_null(strstr(send_msg("{\"id\":9223372036854775807,\"method\":\"no/such\"}"),
                           "\"id\":9223372036854775807}"));
    assert_non_null(strstr(send_msg("{\"id\":-9223372036854775808,\"method\":\"no/such\"}"),
                           "\"id\":-9223372036854775808}"));
    assert_non_null(
        strstr(send_msg("{\"id\":0,\"method\":\"no/such\",\"jsonrpc\":\"2.0\"}"), "\"id\":0}"));
}

static void test_lifecycle_gate(void **state)
{
    assert_string_equal(send_msg("{\"id\":1,\"method\":\"environment/status\"}"),
                        "{\"error\":{\"code\":-32600,\"message\":\"client must call initialize "
                        "before using environment status methods\"},\"id\":1}");
    /* Params are decoded before the gate. */
    assert_string_equal(send_msg("{\"id\":2,\"method\":\"process/start\",\"params\":{}}"),
                        "{\"error\":{\"code\":-32602,\"message\":\"missing field `processId`\"},"
                        "\"id\":2}");
    const char *init =
        send_msg("{\"id\":3,\"method\":\"initialize\",\"params\":{\"clientName\":\"u\"}}");
    const char *want = "{\"id\":3,\"result\":{\"sessionId\":\"";
    assert_memory_equal(init, want, strlen(want));
    assert_string_equal(
        send_msg("{\"id\":4,\"method\":\"process/read\",\"params\":{\"processId\":\"p\"}}"),
        "{\"error\":{\"code\":-32600,\"message\":\"client must send initialized "
        "before using exec methods\"},\"id\":4}");
    assert_null(send_msg("{\"method\":\"initialized\"}"));
    assert_string_equal(send_msg("{\"id\":5,\"method\":\"environment/status\",\"params\":null}"),
                        "{\"id\":5,\"result\":{\"status\":\"ready\"}}");
    assert_string_equal(
        send_msg("{\"id\":6,\"method\":\"initialize\",\"params\":{\"clientName\":\"u\"}}"),
        "{\"error\":{\"code\":-32600,\"message\":\"initialize may only be sent "
        "once per connection\"},\"id\":6}");
    assert_string_equal(send_msg("{\"method\":\"foo/bar\"}"),
                        "{\"error\":{\"code\":-32600,\"message\":\"unexpected notification "
                        "`foo/bar`\"},\"id\":-1}");
    assert_false(mc->closed);
    /* A response object from the client closes the connection. */
    assert_null(send_msg("{\"id\":99,\"result\":{}}"));
    assert_true(mc->closed);
}

static void test_initialized_before_initialize_closes(void **state)
{
    assert_null(send_msg("{\"method\":\"initialized\"}"));
    assert_true(mc->closed);
}

/* The `capabilities` object environment/info sends, as text: from "{" to its "}". */
static const char *capabilities_text(char *out, size_t n)
{
    const char *r = send_msg("{\"id\":3,\"method\":\"environment/info\"}");
    assert_non_null(r);
    const char *b = strstr(r, "\"capabilities\":");
    assert_non_null(b);
    b += strlen("\"capabilities\":");
    size_t k = strcspn(b, "}") + 1;
    assert_true(k < n);
    memcpy(out, b, k);
    out[k] = '\0';
    return out;
}

/* The capabilities come from the domains' records (rpc_domain), in the order they
 * have always been sent: the reference's 16 as 0.171.0 sends them, then ours; a
 * record's on() decides at each answer (sessionKeep, tcpForward follow the limits). */
static void test_capabilities_from_records(void **state)
{
    char text[2048];
    assert_non_null(strstr(send_msg("{\"id\":1,\"method\":\"initialize\",\"params\":"
                                    "{\"clientName\":\"t\"}}"),
                           "\"sandboxModes\":true}"));
    assert_null(send_msg("{\"method\":\"initialized\"}"));
    static const char *const fmt =
        "{\"networkProxyLaunch\":true,\"networkProxyReviewDomains\":true,"
        "\"networkProxyTransparentTcp\":true,\"credentialMasking\":true,"
        "\"credentialMaskingCustomProviders\":true,\"capabilityDiscoverySandbox\":true,"
        "\"fsWatchMissing\":true,\"capabilityDiscoveryV2\":true,"
        "\"environmentConfigRead\":true,\"httpHeaderEnvVars\":true,"
        "\"sandboxedFileStreaming\":true,\"fileWriteStreaming\":true,"
        "\"shellSnapshotV2\":true,\"windowsMxc\":false,"
        "\"linuxRootWritePreservesDevices\":true,"
        "\"linuxApprovedRootWritePreservesRestrictions\":true,\"processStartSize\":true,"
        "\"processResize\":true,\"processCloseStdin\":true,\"processSignalAny\":true,"
        "\"sessionClose\":true,\"fsPermissions\":true,\"fsRename\":true,"
        "\"processList\":true,\"processAttach\":true,\"sessionList\":true,"
        "\"sessionKeep\":%s,\"tcpForward\":%s,\"sandboxModes\":true}";
    char want[2048];
    struct server_limits saved = server_limits;
    server_limits.max_keep_ms = 0;
    server_limits.tcp_forwarding = false;
    snprintf(want, sizeof want, fmt, "false", "false");
    assert_string_equal(capabilities_text(text, sizeof text), want);
    server_limits.max_keep_ms = 1000;
    server_limits.tcp_forwarding = true;
    snprintf(want, sizeof want, fmt, "true", "true");
    assert_string_equal(capabilities_text(text, sizeof text), want);
    server_limits = saved;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_malformed_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_echoed_with_their_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifecycle_gate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_initialized_before_initialize_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_capabilities_from_records, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
