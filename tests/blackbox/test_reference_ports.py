#!/usr/bin/env python3
"""Wire assertions ported from the reference's own integration tests
(openai/codex codex-rs/exec-server/tests/), so both servers are held to them.

Each test names its origin (file::function). Only what is visible on the wire is ported:
the reference tests drive the server through its Rust client, whose own behaviour (event
fan-out, failure synthesis on disconnect) is not the server's. The list of ported and
not-ported tests, with reasons, is in tests/blackbox/README.md."""
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def read_all(s, pid, timeout_ms=2000):
    """exec_process.rs collect_process_output_from_reads: read until closed, continuing
    from each chunk's seq or nextSeq - 1. Returns (output, exit_code, closed)."""
    out, code, after = b"", None, None
    for _ in range(200):
        r = s.read(pid, after_seq=after, wait_ms=timeout_ms)
        assert r["failure"] is None, r
        for c in r["chunks"]:
            out += unb64(c["chunk"])
            after = c["seq"]
        if r["exited"]:
            code = r["exitCode"]
        if r["closed"]:
            return out, code, True
        after = r["nextSeq"] - 1 if r["nextSeq"] > 0 else after
    raise AssertionError("process %s never closed" % pid)


def sh(s, pid, script, **kw):
    return s.start(pid, ["/bin/sh", "-c", script], env={}, **kw)


# -- process.rs ---------------------------------------------------------------------

def test_process_rs_starts_process_over_websocket(srv):
    s = srv.session()
    r = s.start("proc-1", ["true"], env={}, marker=False)
    assert r == {"processId": "proc-1", "sandboxType": "none"}, r
    s.close()


# -- exec_process.rs (remote cases) -------------------------------------------------------

def test_exec_process_starts_and_exits(srv):
    s = srv.session()
    s.start("proc-1", ["true"], env={})
    _, code, closed = read_all(s, "proc-1")
    assert code == 0 and closed
    s.close()


def test_exec_process_streams_output(srv):
    s = srv.session()
    sh(s, "proc-stream", "sleep 0.05; printf 'session output\\n'")
    assert read_all(s, "proc-stream") == (b"session output\n", 0, True)
    s.close()


def test_exec_process_pushes_events(srv):
    s = srv.session()
    sh(s, "proc-events",
       "printf 'event output\\n'; sleep 0.1; printf 'event err\\n' >&2; sleep 0.1; exit 7")
    s.collect_until_closed("proc-events")
    got = []
    for n in sorted(s.notes["proc-events"], key=lambda n: n["seq"]):
        if n["method"] == "process/output":
            got.append(("output", n["seq"], n["stream"], unb64(n["chunk"])))
        elif n["method"] == "process/exited":
            got.append(("exited", n["seq"], n["exitCode"]))
        else:
            got.append(("closed", n["seq"]))
    assert got == [("output", 1, "stdout", b"event output\n"),
                   ("output", 2, "stderr", b"event err\n"),
                   ("exited", 3, 7), ("closed", 4)], got
    s.close()


def test_exec_process_replays_events_after_close(srv):
    s = srv.session()
    sh(s, "proc-events-late", "printf 'late one\\n'; printf 'late two\\n'")
    s.collect_until_closed("proc-events-late")
    assert read_all(s, "proc-events-late") == (b"late one\nlate two\n", 0, True)
    s.close()


def test_exec_process_retains_output_after_exit_until_streams_close(srv):
    # the reference uses a helper binary whose child writes after the parent exits
    s = srv.session()
    sh(s, "proc-output-after-exit",
       "(sleep 0.3; printf 'late output after exit\\n') & exit 0")
    assert read_all(s, "proc-output-after-exit") == (b"late output after exit\n", 0, True)
    s.close()


def test_exec_process_write_then_read(srv):
    s = srv.session()
    sh(s, "proc-stdin", "IFS= read line; printf 'from-stdin:%s\\n' \"$line\"", tty=True)
    assert s.write("proc-stdin", b"hello\n", "1") == {"status": "accepted"}
    out, code, closed = read_all(s, "proc-stdin")
    assert b"from-stdin:hello" in out and code == 0 and closed, out
    s.close()


def test_exec_process_write_then_read_without_tty(srv):
    s = srv.session()
    sh(s, "proc-stdin-pipe", "IFS= read line; printf 'from-stdin:%s\\n' \"$line\"",
       pipe_stdin=True)
    assert s.write("proc-stdin-pipe", b"hello\n", "1") == {"status": "accepted"}
    assert read_all(s, "proc-stdin-pipe") == (b"from-stdin:hello\n", 0, True)
    s.close()


def test_exec_process_rejects_write_without_pipe_stdin(srv):
    s = srv.session()
    sh(s, "proc-stdin-closed",
       "sleep 0.3; if IFS= read -r line; then printf 'read:%s\\n' \"$line\"; "
       "else printf 'eof\\n'; fi")
    assert s.write("proc-stdin-closed", b"ignored\n", "1") == {"status": "stdinClosed"}
    assert read_all(s, "proc-stdin-closed") == (b"eof\n", 0, True)
    s.close()


def test_exec_process_preserves_queued_events_before_subscribe(srv):
    s = srv.session()
    sh(s, "proc-queued", "printf 'queued output\\n'")
    s.collect_until_closed("proc-queued")  # everything happened before the first read
    assert read_all(s, "proc-queued") == (b"queued output\n", 0, True)
    s.close()


# -- initialize.rs ----------------------------------------------------------------------

def test_initialize_rs_accepts_initialize(srv):
    s = srv.session(init=False)
    r = s.call("initialize", {"clientName": "exec-server-test", "resumeSessionId": None})
    uuid.UUID(r["sessionId"])
    info = r["environmentInfo"]
    s.notify("initialized", {})
    assert s.call("environment/info", {}) == info
    assert isinstance(info["executorVersion"], str) and info["executorVersion"], info
    assert isinstance(info["providerId"], str) and info["providerId"], info
    s.close()


def test_initialize_rs_rejects_pipelined_requests_before_initialized(srv):
    s = srv.session(init=False)
    before_init = s.send_request("environment/info", {})
    init = s.send_request("initialize", {"clientName": "exec-server-test",
                                         "resumeSessionId": None})
    m = s.wait_response(before_init)
    assert m["error"] == {"code": -32600, "message":
                          "client must call initialize before using environment info methods"}, m
    assert "result" in s.wait_response(init)
    before_initialized = s.send_request("environment/info", {})
    s.notify("initialized", {})
    m = s.wait_response(before_initialized)
    assert m["error"] == {"code": -32600, "message":
                          "client must send initialized before using environment info methods"}, m
    s.close()


# -- websocket.rs -----------------------------------------------------------------------

def test_websocket_rs_reports_malformed_json_and_keeps_running(srv):
    s = srv.session(init=False)
    m, _ = s.raw_roundtrip("not-json")
    assert m["id"] == -1 and m["error"]["code"] == -32600, m
    assert m["error"]["message"].startswith(
        "failed to parse websocket JSON-RPC message from exec-server websocket"), m
    r = s.call("initialize", {"clientName": "exec-server-test"})
    assert "sessionId" in r, r
    s.close()


# -- health.rs ----------------------------------------------------------------------------

def test_health_rs_serves_readyz_alongside_websocket(srv):
    status, _, _ = http_raw(srv.host, srv.port, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200, status
    s = srv.session()  # the WebSocket endpoint on the same port still works
    s.close()


# -- file_stream.rs (the wire part: fs/open, fs/readBlock, fs/close) ------------------------

BLOCK = 1024 * 1024


def test_file_stream_rs_stops_after_exact_block_boundary(srv):
    import tempfile
    d = tempfile.mkdtemp(prefix="execbb-stream-")
    path = os.path.join(d, "exact-blocks.bin")
    with open(path, "wb") as f:
        f.write(b"x" * (2 * BLOCK))
    s = srv.session()
    s.call("fs/open", {"handleId": "blk", "path": "file://" + path})
    sizes, eof, off = [], False, 0
    while not eof:
        r = s.call("fs/readBlock", {"handleId": "blk", "offset": off, "len": BLOCK})
        n = len(unb64(r["chunk"]))
        if n:
            sizes.append(n)
        off += n
        eof = r["eof"]
        assert n or eof, r
    assert sizes == [BLOCK, BLOCK], sizes
    assert s.call("fs/close", {"handleId": "blk"}) == {}
    s.close()


def test_file_stream_rs_completed_streams_release_handle_capacity(srv):
    import tempfile
    d = tempfile.mkdtemp(prefix="execbb-stream-")
    path = os.path.join(d, "repeated.txt")
    with open(path, "wb") as f:
        f.write(b"repeated")
    s = srv.session()
    for i in range(129):  # one more than the 128-handle limit
        h = "h%d" % i
        s.call("fs/open", {"handleId": h, "path": "file://" + path})
        r = s.call("fs/readBlock", {"handleId": h, "offset": 0, "len": BLOCK})
        assert unb64(r["chunk"]) == b"repeated" and r["eof"], r
        s.call("fs/close", {"handleId": h})
    s.close()


if __name__ == "__main__":
    run_tests(globals())
