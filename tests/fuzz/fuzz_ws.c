/* libFuzzer target for the receive side of a WebSocket connection (transport/ws:
 * the HTTP upgrade, then proto/ws_reader's frame parsing, reassembly, UTF-8 checks, control
 * frames, then JSON-RPC dispatch in dry-run mode: no process, no file).
 *
 * Input layout: byte 0 selects the mode (bit 0 set: the input is the raw byte
 * stream, HTTP head included; clear: a valid upgrade request, carrying the right
 * bearer token, is sent first so the mutations go into frames; bit 1 set: the
 * capability-token check (token "sekret") is on); byte 1 is the size of each received chunk (0 =
 * all at once), which exercises frames split across reads. The connection is served over one end of
 * a socketpair through ws_conn_open_fd (no listener, no TCP); the other end is drained and
 * discarded. Each input gets a fresh connection that is closed and freed afterwards, so leaks and
 * use-after-close show up. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/dispatch.h"
#include "server/server_methods.h"
#include "session/session.h"
#include "transport/auth.h"
#include "transport/conn.h"
#include "transport/conn_impl.h"
#include "transport/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char upgrade[] = "GET / HTTP/1.1\r\n"
                              "Host: 127.0.0.1\r\n"
                              "Upgrade: websocket\r\n"
                              "Connection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                              "Authorization: Bearer sekret\r\n"
                              "Sec-WebSocket-Version: 13\r\n\r\n";

static void drain(int fd)
{
    char sink[65536];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    uv_loop_t *loop = uv_default_loop();
    if (!once) {
        once = true;
        signal(SIGPIPE, SIG_IGN);
        rpc_dry_run = true;
        session_configure(loop, 80000);
        server_methods_register();
    }
    if (size < 2) return 0;
    bool raw = data[0] & 1;
    static struct auth_key key;
    if (auth_key_from_token("sekret", 6, &key) != 0) abort();
    auth_configure(data[0] & 2 ? &key : NULL);
    size_t chunk = data[1] ? data[1] : size;
    data += 2;
    size -= 2;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) abort();
    /* Big buffers: the peer is drained only between chunks. */
    int big = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    struct conn *c = ws_conn_open_fd(loop, sv[0], rpc_dispatch);
    if (!c) abort();
    conn_ref(c); /* keep it inspectable after a close from inside */
    if (!raw) ws_conn_receive(c, upgrade, sizeof upgrade - 1);
    for (size_t off = 0; off < size && conn_is_open(c); off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        ws_conn_receive(c, (const char *)data + off, n);
        drain(sv[1]);
        uv_run(loop, UV_RUN_NOWAIT);
    }
    conn_close(c);
    conn_unref(c);
    session_destroy_all();
    for (int i = 0; i < 8 && uv_loop_alive(loop); i++) {
        drain(sv[1]);
        uv_run(loop, UV_RUN_NOWAIT);
    }
    close(sv[1]);
    return 0;
}
