#!/usr/bin/env python3
"""The server explains itself (issue 26): --log-level debug shows each request (method,
id, duration, error), parse failures and process start failures with errno; refused
logins log their reason; plain HTTP is logged as http, not websocket; under systemd
(JOURNAL_STREAM) lines carry <N> priority prefixes and no timestamp; SIGHUP reloads on
every listener and never stops the server; a non-loopback listener without auth is
refused unless --allow-unauthenticated. All ours."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\w+) +exec-server: (.*)$")


def events(text, name):
    """The key=value pairs of every `event=NAME` line (values may be quoted)."""
    out = []
    for line in text.splitlines():
        m = re.search(r"\bevent=%s\b(.*)$" % re.escape(name), line)
        if not m:
            continue
        kv = {}
        for k, q, b in re.findall(r'(\w+)=(?:"((?:[^"\\]|\\.)*)"|(\S*))', m.group(1)):
            kv[k] = q if q else b
        out.append(kv)
    return out


def wait_log(srv, pred, what):
    try:
        wait_until(lambda: pred(srv.stderr_text(1 << 20)), what=what)
    except Timeout as e:  # say what the server did log, and whether it still runs
        raise Timeout("%s; server %s; its log ends:\n%s" % (
            e, "alive" if srv.alive() else "exited", srv.stderr_text(3000))) from None
    return srv.stderr_text(1 << 20)


def token_file(text):
    fd, path = tempfile.mkstemp(prefix="execbb-tok-")
    os.write(fd, text.encode())
    os.close(fd)
    return path


@ours_only
@needs_own_server
def test_debug_shows_requests_parse_failures_and_start_errors(_):
    with Server(extra_args=["--log-level", "debug"]) as srv:
        s = srv.session()
        s.call("environment/status")
        s.error("fs/readFile", {"path": "file:///nonexistent-execbb-debug"})
        # a process whose cwd is missing: the start fails with ENOENT
        m = s.wait_response(s.send_request("process/start", {
            "processId": "nocwd", "argv": ["/bin/true"], "cwd": "file:///nonexistent-execbb-cwd",
            "env": {}, "tty": False}))
        assert "error" in m, m
        m, _ = s.raw_roundtrip("{not json")
        assert "error" in m, m
        text = wait_log(srv, lambda t: "event=parse_error" in t, "parse_error line")
        reqs = events(text, "request")
        ok = [r for r in reqs if r.get("method") == "environment/status"]
        assert ok and ok[0]["result"] == "ok" and int(ok[0]["duration_us"]) >= 0, reqs
        assert ok[0]["id"].isdigit() and ok[0]["peer"].startswith("127.0.0.1:"), ok
        err = [r for r in reqs if r.get("method") == "fs/readFile"]
        assert err and err[0]["result"] == "error" and err[0]["code"] == "-32004", reqs
        assert "No such file" in err[0]["error"], err
        fail = events(text, "process_start_failed")
        assert fail and fail[0]["errno"] == "ENOENT", (fail, text)
        assert fail[0]["cwd"] == "/nonexistent-execbb-cwd" and fail[0]["argv0"] == "/bin/true"
        assert "line 1" in events(text, "parse_error")[0]["error"], text
        s.close()
    # info does not show them
    with Server(extra_args=["--log-level", "info"]) as srv:
        s = srv.session()
        s.call("environment/status")
        s.close()
        text = wait_log(srv, lambda t: "event=connection_close" in t, "close line")
        assert "event=request" not in text, text


@ours_only
@needs_own_server
def test_refused_login_logs_its_reason_and_http_is_http(_):
    path = token_file("log-token-123-a1b2c3")
    try:
        with Server(extra_args=["--log-level", "info", "--ws-auth", "capability-token",
                                "--ws-token-file", path]) as srv:
            up = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  "%s\r\n")
            assert http_raw(srv.host, srv.port, up % "")[0] == 401
            assert http_raw(srv.host, srv.port,
                            up % "Authorization: Bearer wrong\r\n")[0] == 401
            assert http_raw(srv.host, srv.port, "GET /readyz HTTP/1.1\r\n\r\n")[0] == 200
            text = wait_log(srv, lambda t: len(events(t, "http_request")) >= 3, "3 requests")
            refused = events(text, "auth")
            assert [r["reason"] for r in refused] == ["missing_token", "invalid_token"], text
            assert refused[0]["detail"] == "missing websocket bearer token", refused
            assert "wrong" not in text  # never the presented token
            http = events(text, "http_request")
            assert {(h["path"], h["status"]) for h in http} == {("/", "401"), ("/readyz", "200")}
            assert all(h["transport"] == "http" for h in http), http
            assert all(o["transport"] == "http" for o in events(text, "connection_open"))
            closes = events(text, "connection_close")
            assert closes and all(c["transport"] == "http" for c in closes), closes
            assert "transport=websocket" not in text, text
    finally:
        os.unlink(path)


@ours_only
@needs_own_server
def test_journald_priorities_without_timestamps(_):
    srv = Server(extra_args=["--log-level", "debug"], start=False)
    st = os.fstat(srv.stderr_file.fileno())
    old = os.environ.get("JOURNAL_STREAM")
    os.environ["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
    try:
        srv.start()
    finally:
        if old is None:
            os.environ.pop("JOURNAL_STREAM")
        else:
            os.environ["JOURNAL_STREAM"] = old
    with srv:
        s = srv.session()
        s.error("fs/readFile", {"path": "file:///nonexistent-execbb-j"})
        s.close()
        srv.proc.send_signal(signal.SIGHUP)
        text = wait_log(srv, lambda t: "event=reload" in t and "event=connection_close" in t,
                        "reload and close lines")
        lines = [l for l in text.splitlines() if l]
        for l in lines:
            assert re.match(r"^<[3-7]>", l), l
            assert not STAMP.match(l[3:]), l
        assert any(l.startswith("<7>event=request") for l in lines), lines
        assert any(l.startswith("<6>event=connection_open") for l in lines), lines
        assert any(l.startswith("<5>event=reload") for l in lines), lines
    # a JOURNAL_STREAM that is not our stderr (a child of a service) changes nothing
    with server_with_env({"JOURNAL_STREAM": "1:1"}, extra_args=["--log-level", "info"]) as srv:
        srv.session().close()
        text = wait_log(srv, lambda t: "event=connection_close" in t, "close line")
        for l in text.splitlines():
            m = STAMP.match(l)
            assert m and m.group(1) in ("error", "warn", "notice", "info", "debug"), l


@ours_only
@needs_own_server
def test_sighup_reloads_the_token_and_keeps_jobs(_):
    path = token_file("first-token-123-a1b2c3")
    try:
        with Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file",
                                path]) as srv:
            s = srv.session(headers=["Authorization: Bearer first-token-123-a1b2c3"])
            s.start("sleeper", ["/bin/sleep", "30"])
            with open(path, "w") as f:
                f.write("second-token-456\n")
            srv.proc.send_signal(signal.SIGHUP)
            text = wait_log(srv, lambda t: "event=reload" in t, "reload line")
            rl = events(text, "reload")[0]
            assert rl == {"result": "ok", "reloaded": "auth"}, rl
            assert srv.alive()
            # the job and its session live on; the new token logs in, the old one not
            assert s.call("process/read", {"processId": "sleeper", "maxBytes": 10,
                                           "waitMs": 0})["exited"] is False
            srv.session(headers=["Authorization: Bearer second-token-456"]).close()
            up = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  "Authorization: Bearer first-token-123-a1b2c3\r\n\r\n")
            assert http_raw(srv.host, srv.port, up)[0] == 401
            # an emptied file keeps the key in force
            with open(path, "w") as f:
                f.write("\n")
            srv.proc.send_signal(signal.SIGHUP)
            text = wait_log(srv, lambda t: len(events(t, "reload")) >= 2, "second reload")
            assert len(events(text, "reload")) == 2, text
            assert events(text, "reload")[1]["result"] == "partial", text
            assert "keeping the current authentication key" in text, text
            srv.session(headers=["Authorization: Bearer second-token-456"]).close()
            s.call("process/terminate", {"processId": "sleeper"})
            s.close()
    finally:
        os.unlink(path)


@ours_only
@needs_own_server
def test_sighup_never_stops_a_plain_or_stdio_server(_):
    with Server() as srv:
        s = srv.session()
        s.start("job", ["/bin/sleep", "30"])
        for i in range(1, 4):  # one at a time: pending signals of a kind coalesce
            srv.proc.send_signal(signal.SIGHUP)
            wait_log(srv, lambda t: t.count("event=reload") == i, "reload %d" % i)
        assert srv.alive()
        assert s.call("process/read", {"processId": "job", "maxBytes": 1,
                                       "waitMs": 0})["exited"] is False
        s.call("process/terminate", {"processId": "job"})
        s.close()
    with Server(listen="stdio") as srv:
        s = Rpc(StdioTransport(srv.proc), srv)
        s.initialize("stdio-client")  # the server is up: its handlers are installed
        srv.proc.send_signal(signal.SIGHUP)
        wait_log(srv, lambda t: "event=reload result=ok reloaded=nothing" in t, "reload")
        assert srv.alive()
        assert s.call("environment/status") == {"status": "ready"}
        srv.proc.stdin.close()  # the end of a stdio server
        srv.proc.wait(DEFAULT_TIMEOUT)


@ours_only
@needs_own_server
def test_non_loopback_needs_auth_or_an_explicit_flag(_):
    r = subprocess.run(WRAPPER + [SERVER_PATH, "--listen", "ws://0.0.0.0:0"],
                       capture_output=True, timeout=DEFAULT_TIMEOUT)
    assert r.returncode == 2 and r.stdout == b"", r
    err = r.stderr.decode()
    assert "refusing to listen on ws://0.0.0.0:0 without --ws-auth" in err, err
    assert "--allow-unauthenticated" in err, err
    with Server(listen="ws://0.0.0.0:0", extra_args=["--allow-unauthenticated"]) as srv:
        text = srv.stderr_text()
        assert "WARNING" in text and srv.url in text and " warn " in text, text


if __name__ == "__main__":
    run_tests(globals())
