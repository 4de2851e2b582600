#!/usr/bin/env python3
"""Transport: HTTP endpoint (§1.2), WebSocket framing (§1.3), stdio (§1.5)."""
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def get(srv, path, extra=""):
    return http_raw(srv.host, srv.port, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, extra))


def upgrade_headers(key="dGhlIHNhbXBsZSBub25jZQ=="):
    return ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Version: 13\r\n" % key)


def test_url_line(srv):
    assert srv.url == "ws://127.0.0.1:%d" % srv.port, srv.url
    assert srv.port > 0


def test_readyz(srv):
    st, hdr, body = get(srv, "/readyz")
    assert st == 200, st
    assert body == b"", body


def test_origin_forbidden(srv):
    for path, extra in (("/readyz", ""), ("/", ""), ("/", upgrade_headers())):
        for origin in ("http://evil.example", "null", ""):
            st, _, body = get(srv, path, extra + "Origin: %s\r\n" % origin)
            assert st == 403, (path, origin, st)
            assert body == b"", body


def test_post_root_405(srv):
    st, _, _ = http_raw(srv.host, srv.port,
                        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert st == 405, st


def test_other_path_404(srv):
    st, _, _ = get(srv, "/other")
    assert st == 404, st
    st, _, _ = get(srv, "/some/path", upgrade_headers())
    assert st == 404, st


def test_missing_connection_upgrade_400(srv):
    st, _, _ = get(srv, "/", "Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "Sec-WebSocket-Version: 13\r\n")
    assert st == 400, st
    st, _, _ = get(srv, "/")
    assert st == 400, st


def test_bad_ws_version_400(srv):
    st, _, _ = get(srv, "/", "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "Sec-WebSocket-Version: 8\r\n")
    assert st == 400, st


def test_upgrade_no_host_and_subprotocol(srv):
    ws = srv.connect(headers=("Sec-WebSocket-Protocol: foo",
                              "Sec-WebSocket-Extensions: permessage-deflate"))
    assert "sec-websocket-protocol" not in ws.headers, ws.headers
    assert "sec-websocket-extensions" not in ws.headers, ws.headers
    ws.shutdown()


def test_client_ping_pong(srv):
    ws = srv.connect()
    ws.ping(b"hello-ping")
    op, payload = ws.recv_message(auto_pong=False)
    assert op == OP_PONG and payload == b"hello-ping", (op, payload)
    ws.ping(b"")
    op, payload = ws.recv_message(auto_pong=False)
    assert op == OP_PONG and payload == b"", (op, payload)
    ws.shutdown()


def test_binary_request_answered_as_text(srv):
    ws = srv.connect()
    ws.send_binary(json.dumps({"id": 1, "method": "initialize",
                               "params": {"clientName": "bin"}}))
    op, payload = ws.recv_message()
    assert op == OP_TEXT, op
    msg = json.loads(payload)
    assert msg["id"] == 1 and "sessionId" in msg["result"], msg
    ws.shutdown()


def test_fragmented_message(srv):
    ws = srv.connect()
    ws.send_text(json.dumps({"id": 7, "method": "initialize",
                             "params": {"clientName": "fragmented" * 20}}), fragments=5)
    op, payload = ws.recv_message()
    msg = json.loads(payload)
    assert op == OP_TEXT and msg["id"] == 7 and "result" in msg, msg
    # a ping between fragments is allowed by RFC 6455
    rpc = Rpc(WsTransport(ws), srv)
    rpc.notify("initialized", {})
    data = json.dumps({"id": 8, "method": "environment/status"}).encode()
    ws.send_frame(OP_TEXT, data[:10], fin=False)
    ws.ping(b"mid")
    ws.send_frame(OP_CONT, data[10:], fin=True)
    # the Pong and the reply may come in either order
    got = [ws.recv_message(auto_pong=False), ws.recv_message(auto_pong=False)]
    pongs = [p for op, p in got if op == OP_PONG]
    texts = [p for op, p in got if op == OP_TEXT]
    assert pongs == [b"mid"], got
    assert len(texts) == 1 and json.loads(texts[0]) == {"id": 8, "result": {"status": "ready"}}, \
        got
    ws.shutdown()


def test_outgoing_compact_json(srv):
    s = srv.session()
    m, raw = s.wait_response(s.send_request("environment/status", {}), raw=True)
    assert raw == '{"id":%d,"result":{"status":"ready"}}' % m["id"], raw
    s.close()


def test_oversized_frame_closes(srv):
    ws = srv.connect()
    # announce 16 MiB + 1 of payload, send only a little
    hdr = struct.pack("!BBQ", 0x81, 0x80 | 127, 16 * 1024 * 1024 + 1) + b"\0\0\0\0"
    ws.send_raw(hdr + b"{" * 1000)
    closed, got = ws.wait_closed(10)
    assert closed, "server kept the connection open after a >16 MiB frame header"
    assert not [g for g in got if g[0] in (OP_TEXT, OP_BINARY)], got
    ws.shutdown()
    # the server keeps serving
    s = srv.session()
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_exact_16mib_frame_accepted(srv):
    ws = srv.connect()
    body = json.dumps({"id": 1, "method": "initialize", "params": {"clientName": "x"}})
    pad = 16 * 1024 * 1024 - len(body)
    data = body[:-1] + " " * pad + "}"
    assert len(data) == 16 * 1024 * 1024
    ws.send_text(data)
    op, payload = ws.recv_message(timeout=30)
    assert op == OP_TEXT and "sessionId" in json.loads(payload)["result"], payload[:200]
    ws.shutdown()


def test_large_fragmented_message_accepted(srv):
    """20 MiB in 4 MiB fragments is under the 64 MiB message limit."""
    ws = srv.connect()
    body = json.dumps({"id": 1, "method": "initialize", "params": {"clientName": "x"}})
    data = (body[:-1] + " " * (20 * 1024 * 1024 - len(body)) + "}").encode()
    ws.send_text(data, fragments=5)
    op, payload = ws.recv_message(timeout=30)
    assert op == OP_TEXT and "sessionId" in json.loads(payload)["result"], payload[:200]
    ws.shutdown()


def test_message_over_64mib_closes(srv):
    ws = srv.connect()
    piece = b" " * (8 * 1024 * 1024)
    try:
        ws.send_frame(OP_TEXT, b"{" + piece, fin=False)
        for _ in range(8):
            ws.send_frame(OP_CONT, piece, fin=False)
        ws.send_frame(OP_CONT, b"}", fin=True)
    except OSError:
        pass  # the server may drop us while we are still sending
    closed, got = ws.wait_closed(20)
    assert closed, "server kept the connection open after a >64 MiB message"
    assert not [g for g in got if g[0] in (OP_TEXT, OP_BINARY)], got
    ws.shutdown()
    s = srv.session()
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_invalid_utf8_text_closes(srv):
    ws = srv.connect()
    ws.send_frame(OP_TEXT, b'{"id":1,"method":"\xff\xfe"}')
    closed, got = ws.wait_closed(10)
    assert closed, "server kept the connection open after invalid UTF-8 in a text frame"
    ws.shutdown()
    s = srv.session()
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_invalid_utf8_binary_is_parse_error(srv):
    ws = srv.connect()
    ws.send_frame(OP_BINARY, b'{"id":1,"method":"\xff\xfe"}')
    op, payload = ws.recv_message()
    msg = json.loads(payload)
    assert msg["id"] == -1 and msg["error"]["code"] == -32600, msg
    ws.shutdown()


def test_client_close(srv):
    ws = srv.connect()
    ws.close(1000)
    closed, _ = ws.wait_closed(10)
    assert closed
    ws.shutdown()


@ours_only
def test_close_frame_echoed_ours(srv):
    """Ours SHOULD echo a client's Close frame (§1.3), then close the TCP connection."""
    ws = srv.connect()
    ws.close(1000, b"bye")
    op, payload, fin = ws.recv_frame(5)
    assert op == OP_CLOSE and fin, (op, payload)
    assert payload[:2] == b"\x03\xe8", payload
    closed, _ = ws.wait_closed(5)
    assert closed
    ws.shutdown()


def test_second_connection_after_abort(srv):
    ws = srv.connect()
    ws.send_raw(b"\x81")  # half a header, then drop
    ws.shutdown()
    a = srv.session()
    b = srv.session()
    assert a.session_id != b.session_id
    assert a.call("environment/status") == {"status": "ready"}
    assert b.call("environment/status") == {"status": "ready"}
    a.close()
    b.close()


def test_many_connections_no_fd_leak(srv):
    wait_until(lambda: server_connections(srv.port) == 0, 10, "earlier connections to close")
    before = fd_count(srv.pid)
    for _ in range(20):
        s = srv.session()
        s.call("environment/status")
        s.close()
    for _ in range(10):
        ws = srv.connect()
        ws.shutdown()
    wait_until(lambda: fd_count(srv.pid) <= before + 2, 10,
               "fd count to return near %d (now %d)" % (before, fd_count(srv.pid)))


def test_protocol_violations_close(srv):
    """RFC 6455 violations drop the connection; the server keeps serving others."""
    cases = {
        "unmasked": lambda ws: ws.send_frame(OP_TEXT, b'{"id":1,"method":"x"}', mask=False),
        "rsv1": lambda ws: ws.send_frame(OP_TEXT, b'{"id":1,"method":"x"}', rsv=4),
        "opcode3": lambda ws: ws.send_frame(3, b"x"),
        "ping>125": lambda ws: ws.send_frame(OP_PING, b"x" * 200),
        "fragmented ping": lambda ws: ws.send_frame(OP_PING, b"x", fin=False),
        "continuation without start": lambda ws: ws.send_frame(OP_CONT, b"x"),
        "text inside fragmented text": lambda ws: (ws.send_frame(OP_TEXT, b"{", fin=False),
                                                   ws.send_frame(OP_TEXT, b"}")),
    }
    keep = srv.session()
    for name, fn in cases.items():
        ws = srv.connect()
        fn(ws)
        closed, got = ws.wait_closed(5)
        assert closed, "%s: connection left open" % name
        assert not [g for g in got if g[0] in (OP_TEXT, OP_BINARY)], (name, got)
        ws.shutdown()
    assert keep.call("environment/status") == {"status": "ready"}
    keep.close()


def test_slow_handshake_and_frames(srv):
    """The upgrade request and a frame dribbled a few bytes at a time."""
    import socket as _s
    import base64 as _b
    sock = _s.create_connection((srv.host, srv.port), timeout=10)
    key = _b.b64encode(os.urandom(16)).decode()
    req = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade"
           "\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode()
    for i in range(0, len(req), 7):
        sock.sendall(req[i:i + 7])
        time.sleep(0.002)  # sleep-ok: the stimulus, 7 bytes a read
    frame = WebSocket.build_frame(OP_TEXT, json.dumps(
        {"id": 1, "method": "initialize", "params": {"clientName": "slow"}}))
    for i in range(len(frame)):
        sock.sendall(frame[i:i + 1])
        time.sleep(0.001)  # sleep-ok: the stimulus, a byte a read
    data = b""
    deadline = time.monotonic() + 10
    while b"sessionId" not in data and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    assert data.startswith(b"HTTP/1.1 101"), data[:100]
    assert b"sessionId" in data, data
    sock.close()


@needs_own_server
def test_stdio_transport(_):
    srv = Server(listen="stdio")
    try:
        s = Rpc(StdioTransport(srv.proc), srv)
        s.send_raw("")  # blank line is skipped
        s.initialize("stdio-client")
        s.start("p1", ["echo", "hi"])
        out = s.collect_until_closed("p1")
        assert out["stdout"] == b"hi\n", out
        assert out["exit_code"] == 0, out
        check_seq_rules(out)
        s.send_raw("not-json")
        m = s.wait_other(lambda m: m.get("id") == -1)
        assert m["error"]["code"] == -32600
        assert m["error"]["message"].startswith(
            "failed to parse JSON-RPC message from exec-server stdio: "), m
        s.close()  # EOF on stdin ends the server's connection
        try:
            srv.proc.wait(10)
        except Exception:
            pass
    finally:
        if srv.alive():
            srv.stop(check=False)
        srv.kill()


@needs_own_server
def test_stdio_input_from_a_file_or_dev_null(_):
    """Issue 22: stdin that epoll cannot watch (/dev/null, a regular file) is read to its
    end with plain reads; the server answers what the file holds and exits 0 (it used to
    abort in epoll_ctl). Stdout to a file works too."""
    import subprocess
    import tempfile
    cmd = [SERVER_PATH] + (["exec-server"] if IS_REF else []) + ["--listen", "stdio"]
    home = tempfile.mkdtemp(prefix="execbb-home-", dir="/var/tmp")
    env = dict(os.environ, CODEX_HOME=home)
    with open(os.devnull, "rb") as null:
        r = subprocess.run(cmd, stdin=null, capture_output=True, timeout=DEFAULT_TIMEOUT,
                           env=env)
    assert r.returncode == 0 and r.stdout == b"", (r.returncode, r.stdout, r.stderr)
    with tempfile.TemporaryFile() as inp, tempfile.TemporaryFile() as out:
        inp.write(b'\n{"id":1,"method":"initialize","params":{"clientName":"file"}}\n'
                  b'{"id":2,"method":"nope/nope"}\n')
        inp.seek(0)
        r = subprocess.run(cmd, stdin=inp, stdout=out, stderr=subprocess.PIPE,
                           timeout=DEFAULT_TIMEOUT, env=env)
        out.seek(0)
        lines = [json.loads(l) for l in out.read().splitlines()]
    assert r.returncode == 0, (r.returncode, r.stderr)
    if IS_REF:  # 0.169.0 races the end of the file: it may stop before answering
        return
    by_id = {m.get("id"): m for m in lines}
    assert "sessionId" in by_id[1]["result"], (lines, r.stderr)
    assert by_id[2]["error"]["code"] == -32601, lines


if __name__ == "__main__":
    run_tests(globals())
