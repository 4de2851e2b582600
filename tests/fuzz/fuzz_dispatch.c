/* libFuzzer target for JSON-RPC decode and dispatch (rpc/dispatch + every method's
 * params decoding), with side effects disabled.
 *
 * The input is a sequence of messages separated by '\n' (raw newlines cannot occur
 * inside JSON strings), dispatched in order on one in-memory connection, like
 * tests/unit/test_envelope.c does. rpc_dry_run makes every request that passes its
 * params decoding and the lifecycle gate stop there with an error reply, so no
 * process is spawned and no file is touched; initialize and initialized still run,
 * so seeds that start with them reach every method's decoder. Every reply must be a
 * JSON object with an "id" and either "result" or "error"; the connection, its
 * session and everything they hold is freed after each input (leaks are reported). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/dispatch.h"
#include "server/server_methods.h"
#include "session/session.h"
#include "transport/conn_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct memconn {
    struct conn base;
    bool closed;
};

static void mem_send(struct conn *c, struct buf *msg)
{
    const char *payload = msg->data + BUF_MSG_HEADROOM;
    size_t n = msg->len - BUF_MSG_HEADROOM;
    json_error_t jerr;
    /* A reply may carry a NUL the request had (an unknown method's name, issue 39). */
    json_t *v = json_loadb(payload, n, JSON_ALLOW_NUL, &jerr);
    if (!v || !json_is_object(v) || !json_object_get(v, "id") ||
        !!json_object_get(v, "result") == !!json_object_get(v, "error")) {
        fprintf(stderr, "bad reply: %.*s\n", (int)n, payload);
        abort();
    }
    json_decref(v);
    buf_free(msg);
}

static void mem_close(struct conn *c)
{
    ((struct memconn *)c)->closed = true;
}

static void mem_destroy(struct conn *c)
{
    free(c);
}

static const struct conn_ops mem_ops = {
    .kind = "websocket", .send = mem_send, .close = mem_close, .destroy = mem_destroy};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    uv_loop_t *loop = uv_default_loop();
    if (!once) {
        once = true;
        rpc_dry_run = true;
        session_configure(loop, 80000);
        server_methods_register();
    }
    struct memconn *mc = calloc(1, sizeof *mc);
    conn_init(&mc->base, &mem_ops, loop, rpc_dispatch);
    strcpy(mc->base.peer, "127.0.0.1:50000");

    const char *p = (const char *)data, *end = p + size;
    int count = 0;
    while (p <= end && !mc->closed && count++ < 256) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        rpc_dispatch(&mc->base, p, (size_t)(stop - p));
        if (!nl) break;
        p = nl + 1;
    }
    /* What the transport does when the connection goes away. */
    mc->base.open = false;
    conn_closed(&mc->base);
    session_destroy_all();
    for (int i = 0; i < 4 && uv_loop_alive(loop); i++)
        uv_run(loop, UV_RUN_NOWAIT);
    return 0;
}
