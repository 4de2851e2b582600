#!/usr/bin/env python3
"""Operator-facing behaviour: --exit-on-stdin-close, W3C trace context reaching a child's
environment (TRACEPARENT / TRACESTATE), and Prometheus metrics on GET /metrics (all ours)."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def child_env(s, pid, trace=None, env=None):
    p = {"processId": pid, "argv": ["/usr/bin/env"], "cwd": "file:///",
         "env": env if env is not None else {"PATH": "/usr/bin:/bin"}, "tty": False}
    m = s.wait_response(s.send_request("process/start", p, trace=trace))
    assert "result" in m, m
    out = s.collect_until_closed(pid)
    return dict(l.split("=", 1) for l in out["stdout"].decode().splitlines() if "=" in l)


@ours_only
def test_trace_context_reaches_the_child(srv):
    s = srv.session()
    e = child_env(s, "t1", {"traceparent": TP, "tracestate": "congo=t61rcWkgMzE"})
    assert e.get("TRACEPARENT") == TP and e.get("TRACESTATE") == "congo=t61rcWkgMzE", e
    # no trace, or an invalid traceparent: nothing is added
    assert "TRACEPARENT" not in child_env(s, "t2")
    bad = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
    assert "TRACEPARENT" not in child_env(s, "t3", {"traceparent": bad})
    assert "TRACEPARENT" not in child_env(s, "t4", {"traceparent": TP.upper()})
    # the request's own env wins
    e = child_env(s, "t5", {"traceparent": TP}, env={"TRACEPARENT": "mine"})
    assert e["TRACEPARENT"] == "mine", e
    s.close()


@needs_own_server
def test_exit_on_stdin_close(_):
    """Ours in every mode; the reference accepts the flag only with --remote."""
    if IS_REF:
        raise TestSkip("the reference takes --exit-on-stdin-close only in remote mode")
    path = SERVER_PATH
    cmd = [path] + (["exec-server"] if IS_REF else []) + ["--listen", "ws://127.0.0.1:0",
                                                          "--exit-on-stdin-close"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        line = p.stdout.readline()
        assert line.startswith(b"ws://"), line
        # It serves a request with its stdin open (its loop has been round), and is
        # still there after.
        host, _, port = line.decode().strip()[len("ws://"):].rstrip("/").rpartition(":")
        s = Rpc(WsTransport(WebSocket(host, int(port))))
        s.initialize()
        assert s.call("environment/status") == {"status": "ready"}
        s.close()
        assert p.poll() is None, "exited while its stdin was still open"
        p.stdin.close()
        assert p.wait(DEFAULT_TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def parse_prometheus(text):
    """A small parser of the text exposition format: {(name, frozenset(labels)): value};
    also checks that every sample belongs to a family announced by # TYPE."""
    import re
    samples, types = {}, {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ([0-9eE+\-.]+|\+Inf|NaN)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, "bad exposition line: %r" % line
        name, labels = m.group(1), frozenset(label_re.findall(m.group(3) or ""))
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, "sample of an undeclared family: %r" % line
        samples[(name, labels)] = float(m.group(4))
    return samples, types


def scrape(srv, auth=None):
    req = "GET /metrics HTTP/1.1\r\nHost: x\r\n%s\r\n" % (
        ("Authorization: Bearer %s\r\n" % auth) if auth else "")
    return http_raw(srv.host, srv.port, req)


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


@ours_only
def test_metrics_move_as_requests_run(srv):
    status, hdrs, body = scrape(srv)
    assert status == 200 and hdrs["content-type"].startswith("text/plain; version=0.0.4"), hdrs
    before, types = parse_prometheus(body.decode())
    assert types["exec_server_requests_total"] == "counter"
    assert types["exec_server_request_duration_seconds"] == "histogram"
    assert types["exec_server_connections_active"] == "gauge"
    s = srv.session()
    for i in range(3):
        s.start("m%d" % i, ["true"])
        s.collect_until_closed("m%d" % i)
    s.error("fs/readFile", {"path": "file:///nonexistent-execbb"})
    _, _, body = scrape(srv)
    after, _ = parse_prometheus(body.decode())
    d = lambda name, **l: value(after, name, **l) - value(before, name, **l)  # noqa
    assert d("exec_server_requests_total", operation="process/start", result="ok") == 3, after
    assert d("exec_server_requests_total", operation="fs/readFile", result="error") == 1
    assert d("exec_server_request_duration_seconds_count", operation="process/start",
             result="ok") == 3
    assert d("exec_server_processes_total") == 3
    assert d("exec_server_process_duration_seconds_count", result="success") == 3
    assert value(after, "exec_server_connections_active", transport="websocket") >= 1
    # no ids, paths or commands in any label
    for (name, labels), _ in after.items():
        for k, v in labels:
            assert k in ("transport", "result", "operation", "le", "reason", "state",
                         "version"), (name, k)
            assert "/" not in v or k == "operation", (name, k, v)
    s.close()


@ours_only
@needs_own_server
def test_metrics_process_build_and_sessions(_):
    """Every family has # HELP and # TYPE; build info, the standard process_* families
    (checked against /proc), and the attached/detached session gauges."""
    with Server(ttl=30) as srv:
        _, _, body = scrape(srv)
        text = body.decode()
        samples, types = parse_prometheus(text)
        helps = {l.split(" ")[2] for l in text.splitlines() if l.startswith("# HELP ")}
        assert set(types) <= helps, set(types) - helps
        build = [(dict(l), v) for (n, l), v in samples.items() if n == "exec_server_build_info"]
        assert len(build) == 1 and build[0][1] == 1, build
        assert re.match(r"^\d+\.\d+\.\d+", build[0][0]["version"]), build
        for fam, kind in (("process_cpu_seconds_total", "counter"),
                          ("process_resident_memory_bytes", "gauge"),
                          ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
                          ("process_start_time_seconds", "gauge"),
                          ("process_virtual_memory_bytes", "gauge")):
            assert types.get(fam) == kind, (fam, types.get(fam))
        rss = value(samples, "process_resident_memory_bytes")
        assert 1 << 20 < rss < 4 << 30, rss
        fds = value(samples, "process_open_fds")
        assert abs(fds - fd_count(srv.pid)) <= 3, (fds, fd_count(srv.pid))
        start = value(samples, "process_start_time_seconds")
        assert abs(start - time.time()) < 600, start
        assert value(samples, "exec_server_sessions", state="attached") == 0
        a, b = srv.session(), srv.session()
        _, _, body = scrape(srv)
        samples, _ = parse_prometheus(body.decode())
        assert value(samples, "exec_server_sessions", state="attached") == 2, samples
        a.close()  # the connection drops: the session waits to be resumed
        def gauges():
            smp, _ = parse_prometheus(scrape(srv)[2].decode())
            return (value(smp, "exec_server_sessions", state="attached"),
                    value(smp, "exec_server_sessions", state="detached"))
        wait_until(lambda: gauges() == (1, 1), what="one attached, one detached")
        b.close()
        wait_until(lambda: gauges() == (0, 2), what="both detached")


@ours_only
@needs_own_server
def test_metrics_behind_auth(_):
    import tempfile
    fd, tok = tempfile.mkstemp(prefix="execbb-tok-")
    os.write(fd, b"metrics-token-123")
    os.close(fd)
    srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok])
    try:
        assert scrape(srv)[0] == 401
        assert scrape(srv, "wrong")[0] == 401
        up = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        for _ in range(2):
            assert http_raw(srv.host, srv.port, up)[0] == 401  # refused upgrades count
        status, _, body = scrape(srv, "metrics-token-123")
        assert status == 200 and b"exec_server_connections_total" in body
        samples, _ = parse_prometheus(body.decode())
        assert value(samples, "exec_server_connections_total", transport="websocket",
                     result="rejected") >= 2, samples
        # refusals by reason: two without a token (scrape + 2 upgrades: 3), one wrong
        assert value(samples, "exec_server_auth_refusals_total", reason="missing_token") == 3
        assert value(samples, "exec_server_auth_refusals_total", reason="invalid_token") == 1
        # the scrapes themselves are plain HTTP, not WebSocket connections
        assert value(samples, "exec_server_connections_active", transport="http") >= 1
        assert value(samples, "exec_server_connections_total", transport="websocket",
                     result="accepted") == 0, samples
    finally:
        srv.stop()
        os.unlink(tok)


@ours_only
@needs_own_server
def test_structured_log_lines(_):
    srv = Server(extra_args=["--log-level", "info"])
    try:
        s = srv.session()
        secret = "env-secret-" + MARKER
        s.start("log 1", ["/bin/echo", "hello"], env={"PATH": "/usr/bin:/bin", "SECRET": secret})
        s.collect_until_closed("log 1")
        s.close()
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while "event=connection_close" not in srv.stderr_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above
        text = srv.stderr_text()
        events = {}
        for line in text.splitlines():
            if " event=" in line:
                kv = dict(p.split("=", 1) for p in line.split(" event=", 1)[1].split(" ")
                          if "=" in p)
                events.setdefault(line.split(" event=", 1)[1].split(" ")[0], []).append(kv)
        for ev in ("connection_open", "session_attach", "process_start", "process_exit",
                   "session_detach", "connection_close"):
            assert ev in events, (ev, text)
        assert events["connection_open"][0]["peer"].startswith("127.0.0.1:"), events
        start = events["process_start"][0]
        assert start["argv0"] == "/bin/echo" and start["process_id"] == '"log' , start
        assert events["process_exit"][0]["exit_code"] == "0", events
        assert secret not in text and "hello" not in text, text  # no env values, no argv
    finally:
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
