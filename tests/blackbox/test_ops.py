#!/usr/bin/env python3
"""Operator-facing behaviour: --exit-on-stdin-close (both servers) and W3C trace context
reaching a child's environment (ours: TRACEPARENT / TRACESTATE)."""
import os
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
        time.sleep(0.2)
        assert p.poll() is None, "exited while its stdin was still open"
        p.stdin.close()
        assert p.wait(DEFAULT_TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


if __name__ == "__main__":
    run_tests(globals())
