#!/usr/bin/env python3
"""Sessions and resume (§9, §12.7), detach TTL, initialize retry (§3.1)."""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

TTL = 2


def resume(srv, sid, timeout=5.0):
    """Reconnect and resume `sid`, retrying on -32010 while the server notices the old
    connection closing (as the codex client does)."""
    deadline = time.monotonic() + timeout
    while True:
        s = srv.session(init=False)
        m = s.request("initialize", {"clientName": "blackbox", "resumeSessionId": sid})
        if "result" in m:
            assert m["result"]["sessionId"] == sid, m
            s.session_id = sid
            s.notify("initialized", {})
            return s
        s.close()
        assert m["error"]["code"] == -32010 and time.monotonic() < deadline, m
        time.sleep(0.05)  # sleep-ok: the retry interval, against the deadline above


def test_resume_catch_up_12_7(srv):
    a = srv.session()
    sid = a.session_id
    # "two" is printed while detached: the child waits for `go` (made after the
    # close) and says when it has printed through `done`; no fixed sleeps.
    go = os.path.join(srv.workdir, "catch-up-go-%s" % sid)
    done = os.path.join(srv.workdir, "catch-up-done-%s" % sid)
    a.start("proc-1", ["/bin/sh", "-c",
                       "echo one; while [ ! -e '%s' ]; do sleep 0.02; done; echo two; "
                       ": > '%s'; sleep 30" % (go, done)])
    a.wait_notification(lambda n: n.get("seq") == 1, process_id="proc-1")
    assert a.output_so_far("proc-1")["stdout"] == b"one\n"
    a.close()
    open(go, "w").close()
    wait_until(lambda: os.path.exists(done), 10, "the detached child to print")
    b = resume(srv, sid)
    # The server may read "two" from the pipe a moment after the child wrote it:
    # a long poll returns as soon as it is in the log.
    rd = b.read("proc-1", after_seq=1, wait_ms=5000)
    assert [(c["seq"], unb64(c["chunk"])) for c in rd["chunks"]] == [(2, b"two\n")], rd
    assert rd["nextSeq"] == 3 and rd["exited"] is False and rd["closed"] is False, rd
    # a third connection cannot take the attached session
    c = srv.session(init=False)
    code, msg = c.error("initialize", {"clientName": "other", "resumeSessionId": sid})
    assert (code, msg) == (-32010, "session %s is already attached to another connection"
                           % sid), msg
    code, msg = c.error("initialize", {"clientName": "other",
                                       "resumeSessionId": "no-such-session"})
    assert (code, msg) == (-32600, "unknown session id no-such-session"), msg
    # still not initialized
    code, msg = c.error("environment/status")
    assert (code, msg) == (-32600, "client must call initialize before using environment "
                           "status methods"), msg
    # a failed initialize can be retried on the same connection
    r = c.call("initialize", {"clientName": "other"})
    assert r["sessionId"] != sid
    c.notify("initialized", {})
    assert c.call("environment/status") == {"status": "ready"}
    # the resumed connection receives live notifications again
    assert b.terminate("proc-1") == {"running": True}
    ex = b.wait_notification(lambda n: n["method"] == "process/exited", process_id="proc-1")
    assert ex["seq"] == 3 and ex["exitCode"] == 137, ex
    cl = b.wait_notification(lambda n: n["method"] == "process/closed", process_id="proc-1")
    assert cl["seq"] == 4, cl
    # processes of another session are invisible
    code, msg = c.error("process/read", {"processId": "proc-1"})
    assert (code, msg) == (-32600, "unknown process id proc-1"), msg
    b.close()
    c.close()


def test_resume_contiguous_stream(srv):
    """Drop the connection mid-stream; after resume the catch-up read plus the live
    notifications give every seq exactly once and the whole output in order."""
    a = srv.session()
    sid = a.session_id
    n_lines = 60
    progress = os.path.join(srv.workdir, "progress-" + uuid.uuid4().hex[:8])
    a.start("stream", ["/bin/sh", "-c",
                       "i=1; while [ $i -le %d ]; do echo line$i; echo $i > '%s'; i=$((i+1)); "
                       "sleep 0.03; done" % (n_lines, progress)])
    a.wait_notification(lambda n: n.get("seq", 0) >= 5, process_id="stream")
    a.close()
    seen = {}
    for n in a.notes["stream"]:
        seen[n["seq"]] = n
    last = max(seen)
    got = sum(unb64(n["chunk"]).count(b"\n") for n in seen.values()
              if n["method"] == "process/output")

    def printed():
        try:
            with open(progress) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0
    # A few lines are printed while detached, for the catch-up read to return.
    wait_until(lambda: printed() >= min(n_lines, got + 3), 15, "output while detached")
    b = resume(srv, sid)
    after = last
    deadline = time.monotonic() + 15
    closed_seq = None
    while closed_seq is None and time.monotonic() < deadline:
        rd = b.read("stream", after_seq=after, wait_ms=2000)
        for c in rd["chunks"]:
            seen.setdefault(c["seq"], {"method": "process/output", "seq": c["seq"],
                                       "stream": c["stream"], "chunk": c["chunk"]})
        after = rd["nextSeq"] - 1
        if rd["closed"]:
            closed_seq = rd["nextSeq"] - 1
    assert closed_seq is not None, "process did not close"
    for n in b.notes.get("stream", []):
        if n["seq"] in seen and n["method"] == "process/output":
            assert seen[n["seq"]]["chunk"] == n["chunk"], (n, seen[n["seq"]])
    b.quiet(0.2)
    for n in b.notes.get("stream", []):
        seen.setdefault(n["seq"], n)
    outputs = [seen[k] for k in sorted(seen) if seen[k]["method"] == "process/output"]
    data = b"".join(unb64(n["chunk"]) for n in outputs)
    assert data == b"".join(b"line%d\n" % i for i in range(1, n_lines + 1)), data
    # all output seqs plus the exit seq plus the close seq form 1..closed_seq
    out_seqs = set(n["seq"] for n in outputs)
    missing = set(range(1, closed_seq + 1)) - out_seqs
    assert len(missing) == 2 and closed_seq in missing, (sorted(missing), closed_seq)
    # notifications on the resumed connection arrive in seq order (ours)
    if not IS_REF:
        live = [n["seq"] for n in b.notes.get("stream", [])]
        assert live == sorted(live), live
    b.close()


def test_write_id_survives_resume(srv):
    a = srv.session()
    sid = a.session_id
    a.start("cat", ["cat"], pipe_stdin=True)
    assert a.write("cat", b"first\n", "1") == {"status": "accepted"}
    a.wait_notification(lambda n: n["method"] == "process/output", process_id="cat")
    a.close()
    b = resume(srv, sid)
    assert b.write("cat", b"first\n", "1") == {"status": "accepted"}  # retried: no re-write
    assert b.write("cat", b"second\n", "2") == {"status": "accepted"}
    data = b""
    after = 0
    deadline = time.monotonic() + 10
    while b"second\n" not in data and time.monotonic() < deadline:
        rd = b.read("cat", after_seq=after, wait_ms=1000)
        data += b"".join(unb64(c["chunk"]) for c in rd["chunks"])
        after = rd["nextSeq"] - 1
    assert data == b"first\nsecond\n", data
    b.terminate("cat")
    b.collect_until_closed("cat")
    b.close()


def test_unknown_session_then_retry(srv):
    s = srv.session(init=False)
    for bad in ("no-such-session", str(uuid.uuid4()), ""):
        code, msg = s.error("initialize", {"clientName": "x", "resumeSessionId": bad})
        assert (code, msg) == (-32600, "unknown session id %s" % bad), msg
    code, msg = s.error("process/read", {"processId": "x"})
    assert (code, msg) == (-32600, "client must call initialize before using exec methods")
    r = s.call("initialize", {"clientName": "x"})
    s.notify("initialized", {})
    assert s.call("environment/status") == {"status": "ready"}
    code, msg = s.error("initialize", {"clientName": "x"})
    assert (code, msg) == (-32600, "initialize may only be sent once per connection")
    assert r["sessionId"]
    s.close()


def test_resume_own_live_session_conflict(srv):
    """Resuming a session held by a live connection is -32010; the owner keeps it."""
    a = srv.session()
    b = srv.session(init=False)
    code, msg = b.error("initialize", {"clientName": "x", "resumeSessionId": a.session_id})
    assert code == -32010, msg
    a.start("still", ["echo", "mine"])
    out = a.collect_until_closed("still")
    assert out["stdout"] == b"mine\n"
    a.close()
    b.close()


def test_process_closes_while_detached(srv):
    a = srv.session()
    sid = a.session_id
    pidfile = os.path.join(srv.workdir, "bg-pid-%s" % sid)
    a.start("bg", ["/bin/sh", "-c", "echo $$ > '%s'; sleep 0.5; echo done; exit 6" % pidfile])
    a.close()
    # Closed while detached: wait until the server has reaped the child (its /proc
    # entry stays, a zombie, until then) instead of sleeping for a guessed time.
    pid = int(wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(),
                         10, "the child's pid"))
    wait_until(lambda: not os.path.exists("/proc/%d" % pid), 10, "the server to reap the child")
    b = resume(srv, sid)
    rd = b.read("bg", after_seq=0, wait_ms=3000)
    if not rd["closed"]:
        rd = b.read("bg", after_seq=0, wait_ms=3000)
    assert rd["exited"] and rd["closed"] and rd["exitCode"] == 6, rd
    assert [unb64(c["chunk"]) for c in rd["chunks"]] == [b"done\n"], rd
    assert rd["nextSeq"] == 4, rd
    # nothing more is sent for it
    b.quiet(0.3)
    assert not b.notes.get("bg"), b.notes.get("bg")
    b.close()


@needs_own_server
def test_ttl_expiry_kills_processes(_):
    with Server(ttl=TTL) as srv:
        mk = "bb-" + uuid.uuid4().hex[:12]
        a = srv.session()
        sid = a.session_id
        a.start("long", ["/bin/sh", "-c", "sleep 300 & sleep 300; wait"],
                env={"PATH": "/usr/bin:/bin", MARKER_VAR: mk})
        a.start("ptylong", ["sleep", "300"], env={"PATH": "/usr/bin:/bin", MARKER_VAR: mk},
                tty=True)
        wait_until(lambda: len(marked_pids(mk)) >= 4, 5, "processes to start")
        a.close()
        t0 = time.monotonic()
        # still alive well inside the TTL
        time.sleep(TTL * 0.4)  # sleep-ok: the TTL is what is tested (nothing dies before it)
        assert len(marked_pids(mk)) >= 4, "processes died before the TTL"
        wait_no_marked(mk, TTL + 6)
        dt = time.monotonic() - t0
        assert dt >= TTL * 0.8, "processes killed after %.2fs, TTL is %ss" % (dt, TTL)
        s = srv.session(init=False)
        code, msg = s.error("initialize", {"clientName": "x", "resumeSessionId": sid})
        assert (code, msg) == (-32600, "unknown session id %s" % sid), msg
        s.initialize()
        s.close()


@needs_own_server
def test_resume_within_ttl_cancels_expiry(_):
    with Server(ttl=TTL) as srv:
        mk = "bb-" + uuid.uuid4().hex[:12]
        a = srv.session()
        sid = a.session_id
        a.start("keep", ["sleep", "300"], env={MARKER_VAR: mk})
        wait_until(lambda: marked_pids(mk), 5, "process to start")
        a.close()
        time.sleep(TTL * 0.5)  # sleep-ok: the TTL is what is tested (resume within it)
        b = resume(srv, sid)
        time.sleep(TTL + 1.0)  # sleep-ok: the TTL is what is tested (it no longer applies)
        assert marked_pids(mk), "process of a resumed session was killed by the TTL"
        rd = b.read("keep")
        assert rd["exited"] is False, rd
        # detach again: the TTL starts afresh and kills it
        b.close()
        wait_no_marked(mk, TTL + 6)


@needs_own_server
def test_shutdown_with_live_processes(_):
    """SIGTERM with running processes: exit status 0 (ours), and (SHOULD) no children left."""
    srv = Server(ttl=TTL) if not IS_REF else Server()
    try:
        mk = "bb-" + uuid.uuid4().hex[:12]
        a = srv.session()
        a.start("p1", ["sleep", "300"], env={MARKER_VAR: mk})
        a.start("p2", ["sleep", "300"], env={"PATH": "/usr/bin:/bin", MARKER_VAR: mk}, tty=True)
        wait_until(lambda: len(marked_pids(mk)) >= 2, 5, "processes to start")
        # a long poll in flight and a detached session must not hold up shutdown
        a.send_request("process/read", {"processId": "p1", "afterSeq": 0, "waitMs": 60000})
        d = srv.session()
        d.start("p3", ["sleep", "300"], env={MARKER_VAR: mk})
        d.close()
        # d is detached once the server has closed its end (only a's connection is left).
        wait_until(lambda: server_connections(srv.port) == 1, 10, "the server to detach d")
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 10, "shutdown took %.1fs" % (time.monotonic() - t0)
        if not IS_REF:
            wait_no_marked(mk, 5)
    finally:
        srv.kill()
        kill_marked(mk)


if __name__ == "__main__":
    run_tests(globals())
