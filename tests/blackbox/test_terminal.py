#!/usr/bin/env python3
"""Terminal and stdin controls of ours (PROTOCOL.md §11 (g)): process/start `size`,
process/resize (the child sees SIGWINCH and the new size), process/closeStdin (EOF on a
pipe after every written byte; the terminal's VEOF on a PTY), process/signal with any
signal. Against the reference, only the check that it lacks them runs."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

CAPS = ("processStartSize", "processResize", "processCloseStdin", "processSignalAny",
        "sessionClose")


def test_reference_lacks_them(srv):
    if not IS_REF:
        raise TestSkip("reference-only check")
    s = srv.session()
    caps = s.call("environment/info", {})["capabilities"]
    assert not any(caps.get(c) for c in CAPS), caps
    for m in ("process/resize", "process/closeStdin"):
        assert s.error(m, {"processId": "x"})[0] == -32601
    s.close()


@ours_only
def test_capabilities_advertised(srv):
    s = srv.session()
    caps = s.call("environment/info", {})["capabilities"]
    assert all(caps.get(c) is True for c in CAPS), caps
    s.close()


@ours_only
def test_start_size_and_resize(srv):
    s = srv.session()
    script = ("trap 'stty size; echo winch' WINCH; stty size; echo ready; "
              "while :; do sleep 0.05; done")
    s.start("t", ["/bin/bash", "-c", script], tty=True, size={"rows": 40, "cols": 120})
    s.wait_for(lambda: b"ready" in s.output_so_far("t")["pty"], process_id="t",
               what="ready")
    assert b"40 120" in s.output_so_far("t")["pty"], s.output_so_far("t")
    assert s.call("process/resize", {"processId": "t", "rows": 50, "cols": 132}) == {}
    s.wait_for(lambda: b"winch" in s.output_so_far("t")["pty"], process_id="t",
               what="SIGWINCH")
    assert b"50 132" in s.output_so_far("t")["pty"], s.output_so_far("t")
    s.terminate("t")
    s.collect_until_closed("t")
    s.close()


@ours_only
def test_resize_errors(srv):
    s = srv.session()
    assert s.error("process/resize", {"processId": "nope", "rows": 1, "cols": 1}) == \
        (-32600, "unknown process id nope")
    s.start("p", ["sleep", "30"])
    assert s.error("process/resize", {"processId": "p", "rows": 10, "cols": 10}) == \
        (-32600, "process p has no terminal to resize (started with tty:false)")
    assert s.error("process/resize", {"processId": "p", "rows": 0, "cols": 10}) == \
        (-32602, "rows must be between 1 and 65535")
    assert s.error("process/resize", {"processId": "p", "rows": 5})[0] == -32602
    assert s.error("process/start", {"processId": "q", "argv": ["true"], "cwd": "file:///",
                                     "env": {}, "tty": True, "size": {"rows": 0, "cols": 5}}) \
        == (-32602, "size: rows must be between 1 and 65535")
    s.terminate("p")
    s.close()


@ours_only
def test_close_stdin_pipe_delivers_every_byte_then_eof(srv):
    s = srv.session()
    s.start("c", ["/bin/sh", "-c", "wc -c; echo done"], pipe_stdin=True)
    big = b"x" * (1 << 20)
    s.write("c", big)
    assert s.call("process/closeStdin", {"processId": "c"}) == {}
    assert s.call("process/closeStdin", {"processId": "c"}) == {}  # idempotent
    assert s.write("c", b"late") == {"status": "stdinClosed"}
    out = s.collect_until_closed("c")
    assert out["stdout"].split() == [str(len(big)).encode(), b"done"], out
    assert out["exit_code"] == 0, out
    s.close()


@ours_only
def test_close_stdin_pty_sends_eof(srv):
    s = srv.session()
    s.start("c", ["/bin/sh", "-c", "cat; echo after-eof"], tty=True)
    s.write("c", b"hello\n")
    s.call("process/closeStdin", {"processId": "c"})
    out = s.collect_until_closed("c")
    assert b"after-eof" in out["pty"] and out["exit_code"] == 0, out
    s.close()


@ours_only
def test_close_stdin_errors(srv):
    s = srv.session()
    assert s.error("process/closeStdin", {"processId": "nope"}) == \
        (-32600, "unknown process id nope")
    s.start("n", ["sleep", "30"])  # no stdin at all: nothing to close
    assert s.call("process/closeStdin", {"processId": "n"}) == {}
    s.terminate("n")
    s.close()


@ours_only
def test_signal_any(srv):
    s = srv.session()
    s.start("g", ["/bin/bash", "-c", "trap 'echo got-usr1' USR1; trap 'exit 9' TERM; "
                                     "echo ready; while :; do sleep 0.05; done"])
    s.wait_for(lambda: b"ready" in s.output_so_far("g")["stdout"], process_id="g",
               what="ready")
    assert s.call("process/signal", {"processId": "g", "signal": "SIGUSR1"}) == {}
    s.wait_for(lambda: b"got-usr1" in s.output_so_far("g")["stdout"], process_id="g",
               what="USR1")
    assert s.call("process/signal", {"processId": "g", "signal": 15}) == {}
    assert s.collect_until_closed("g")["exit_code"] == 9
    s.start("k", ["sleep", "30"])
    s.call("process/signal", {"processId": "k", "signal": "kill"})
    assert s.collect_until_closed("k")["exit_code"] == 137
    code, msg = s.error("process/signal", {"processId": "k", "signal": "bogus"})
    assert code == -32602 and "unknown signal `bogus`" in msg, msg
    assert s.error("process/signal", {"processId": "k", "signal": 99999})[0] == -32602
    assert s.error("process/signal", {"processId": "k"}) == (-32602, "missing field `signal`")
    s.close()


@ours_only
def test_session_close_ends_with_the_connection(srv):
    """session/close: closing the connection then ends the session at once (its
    processes die, resume is refused) instead of after the TTL."""
    s = srv.session()
    mk = "bb-close-" + MARKER
    s.start("bg", ["sleep", "300"], env={"PATH": "/usr/bin:/bin", MARKER_VAR: mk},
            marker=False)
    sid = s.session_id
    assert s.call("session/close", {}) == {}
    s.close()
    wait_until(lambda: not marked_pids(mk), DEFAULT_TIMEOUT,
               "the session's process to end with session/close")
    r = srv.session(init=False)
    m = r.request("initialize", {"clientName": "x", "resumeSessionId": sid})
    assert "error" in m, m
    r.close()


if __name__ == "__main__":
    run_tests(globals())
