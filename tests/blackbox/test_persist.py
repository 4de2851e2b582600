#!/usr/bin/env python3
"""Work that outlives its client (issue 27; ours, docs/PROTOCOL.md §11 (i)): session/keep,
session/list, process/list, process/attach (a second viewer), `sessionId` on the process
methods, and exec-client's `run -d`, `sessions`, `ps` and `attach`.

The issue's checks: a process keeps running after its client leaves (well past the
--session-ttl), is listed from a new connection, is re-attached by resuming its session
and its output continues with no gap (numbered lines, every number once, in order); a
second viewer gets the same terminal output byte for byte (the retained part, then live)
and may type into it. Around them: what may be kept (--max-session-keep, and never more
than --max-detached-sessions kept sessions; a kept session is never the one expired
early), who may see what (the same capability token; the same JWT subject), and the
command line driven on a real PTY (attach, the ^B d detach, a second viewer). The
reference has none of this: every test is ours-only."""
import base64
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, ec, need_client  # noqa
from test_exec_client_tty import Tty  # noqa
from test_auth import token_file  # noqa
from test_jwt import jwt, secret_file  # noqa

COUNTER = "i=0; while :; do i=$((i+1)); echo line$i; sleep 0.02; done"


def lines_of(data):
    return [int(m) for m in re.findall(rb"line(\d+)\r?\n", data)]


def pty_bytes(notes):
    return b"".join(base64.b64decode(n["chunk"]) for n in notes
                    if n["method"] == "process/output")


@ours_only
@needs_own_server
def test_kept_process_outlives_its_client_and_resumes_without_a_gap(_):
    # A short --session-ttl: without session/keep the process would be killed in 1 s.
    with Server(ttl=1) as srv:
        a = srv.session(client_name="builder")
        caps = a.call("environment/info")["capabilities"]
        assert caps["sessionKeep"] and caps["sessionList"] and caps["processList"], caps
        assert a.call("session/keep", {}) == {"ttlSeconds": None}
        a.start("build", ["/bin/sh", "-c", COUNTER], env={MARKER_VAR: MARKER, "PATH": "/usr/bin:/bin"})
        a.wait_notification(lambda n: n["method"] == "process/output" and
                            b"line5\n" in base64.b64decode(n["chunk"]), process_id="build")
        seen = summarize(a.notes["build"])
        last_seq = seen["seqs"][-1]
        last_line = lines_of(seen["stdout"])[-1]
        sid = a.session_id
        a.close()

        # A new connection lists it: detached, kept, still running.
        b = srv.session(client_name="looker")
        b.call("session/keep", {"ttlSeconds": 0})  # this one goes when it leaves

        def detached_and_moving():
            ss = {s["sessionId"]: s for s in b.call("session/list")["sessions"]}
            s = ss.get(sid)
            if not s or s["attached"]:
                return None
            p = b.call("process/list", {"sessionId": sid})["processes"]
            # Well past the 1 s TTL and still producing output.
            if p[0]["nextSeq"] > last_seq + 150 and time.time() * 1000 - s["detachedAtMs"] > 2000:
                return s, p
            return None
        s, procs = wait_until(detached_and_moving, timeout=3 * DEFAULT_TIMEOUT,
                              what="the kept session to stay and run")
        assert s["kept"] and s["keepSeconds"] is None and s["expiresAtMs"] is None, s
        assert s["clientName"] == "builder" and s["running"] == 1 and s["processes"] == 1, s
        p = procs[0]
        assert p["processId"] == "build" and p["state"] == "running" and p["exitCode"] is None, p
        assert p["argv"] == ["/bin/sh", "-c", COUNTER] and p["tty"] is False, p
        assert p["pid"] in marked_pids(), (p, marked_pids())
        b.close()

        # Re-attaching is the resume: the output continues with no gap.
        c = Rpc(WsTransport(srv.connect()), srv)
        r = c.initialize("builder", resume=sid)
        assert r["sessionId"] == sid
        got = b""
        after = last_seq
        while len(lines_of(got)) < 100:
            rd = c.read("build", after_seq=after, wait_ms=2000)
            seqs = [ch["seq"] for ch in rd["chunks"]]
            assert seqs == list(range(after + 1, after + 1 + len(seqs))), (after, seqs[:5])
            got += b"".join(unb64(ch["chunk"]) for ch in rd["chunks"])
            after = rd["nextSeq"] - 1
        nums = lines_of(got)
        assert nums == list(range(last_line + 1, last_line + 1 + len(nums))), nums[:10]
        c.call("session/close")
        c.close()
        wait_no_marked(timeout=DEFAULT_TIMEOUT)
        # Ended: gone from the list.
        d = srv.session()
        assert sid not in [x["sessionId"] for x in d.call("session/list")["sessions"]]
        d.close()


@ours_only
@needs_own_server
def test_a_second_viewer_sees_the_same_tty_output(_):
    with Server() as srv:
        a = srv.session()
        a.start("sh", ["/bin/sh", "-c", "echo ready; while read l; do echo got:$l; done"],
                tty=True, env={"PATH": "/usr/bin:/bin"})
        a.wait_notification(lambda n: n["method"] == "process/output" and
                            b"ready" in base64.b64decode(n["chunk"]), process_id="sh")
        a.write("sh", b"one\n")
        a.wait_notification(lambda n: b"got:one" in pty_bytes(a.notes["sh"]), process_id="sh")
        # The viewer: another connection (its own session), same user.
        v = srv.session()
        assert v.call("environment/info")["capabilities"]["processAttach"]
        r = v.call("process/attach", {"sessionId": a.session_id, "processId": "sh"})
        replay = b"".join(unb64(ch["chunk"]) for ch in r["chunks"])
        assert b"ready" in replay and b"got:one" in replay, replay
        assert [ch["seq"] for ch in r["chunks"]] == list(range(1, r["nextSeq"])), r
        # Both may type; both see everything, in the same order.
        v.call("process/write", {"sessionId": a.session_id, "processId": "sh",
                                 "chunk": b64("two\n")})
        a.write("sh", b"three\n")
        # Both lines echoed before the end (a TERM first would race the shell's echo).
        a.wait_notification(lambda n: b"got:three" in pty_bytes(a.notes["sh"]) and
                            b"got:two" in pty_bytes(a.notes["sh"]), process_id="sh")
        v.call("process/signal", {"sessionId": a.session_id, "processId": "sh",
                                  "signal": "TERM"})
        a.wait_notification(lambda n: n["method"] == "process/closed", process_id="sh")
        v.wait_notification(lambda n: n["method"] == "process/closed", process_id="sh")
        owner = pty_bytes(a.notes["sh"])
        live = [n for n in v.notes["sh"] if n.get("sessionId") == a.session_id]
        assert all(n["seq"] >= r["nextSeq"] for n in live), live[:3]
        assert [n["seq"] for n in live] == list(range(r["nextSeq"], r["nextSeq"] + len(live)))
        assert replay + pty_bytes(live) == owner, (replay + pty_bytes(live), owner)
        assert b"got:two" in owner and b"got:three" in owner, owner
        # The viewer's own namespace is separate: its session has no such process.
        code, msg = v.error("process/read", {"processId": "sh"})
        assert code == -32600 and "unknown process id" in msg, msg
        # A viewer hears when the watched session ends (it kills without an exit).
        a.start("sleep", ["sleep", "1000"], env={MARKER_VAR: MARKER})
        v.call("process/attach", {"sessionId": a.session_id, "processId": "sleep"})
        a.call("session/close")
        a.close()
        n = v.wait_notification(lambda n: n["method"] == "process/attachEnded",
                                process_id="sleep")
        assert n["sessionId"] == a.session_id and n["reason"] == "sessionEnded", n
        wait_no_marked()
        v.close()


@ours_only
@needs_own_server
def test_what_may_be_kept(_):
    with Server(extra_args=["--max-session-keep", "0"]) as srv:
        s = srv.session()
        assert s.call("environment/info")["capabilities"]["sessionKeep"] is False
        code, msg = s.error("session/keep", {})
        assert code == -32600 and "--max-session-keep 0" in msg, msg
    with Server(extra_args=["--max-session-keep", "5", "--max-detached-sessions", "1"]) as srv:
        a = srv.session()
        assert a.call("session/keep", {}) == {"ttlSeconds": 5}  # "until ended", cut to 5
        assert a.call("session/keep", {"ttlSeconds": 3}) == {"ttlSeconds": 3}
        code, msg = a.error("session/keep", {"ttlSeconds": -1})
        assert code == -32602, msg
        # At most --max-detached-sessions kept sessions.
        b = srv.session()
        code, msg = b.error("session/keep", {})
        assert code == -32600 and "--max-detached-sessions 1" in msg, msg
        # A kept session is never the one expired early: b detaching goes over the limit
        # of one detached session, and b (not kept) is the one that goes.
        a.start("p", ["sleep", "1000"], env={MARKER_VAR: MARKER})
        a_id, b_id = a.session_id, b.session_id
        a.close()
        b.close()
        c = srv.session()

        def settled():
            ids = {x["sessionId"]: x for x in c.call("session/list")["sessions"]}
            return b_id not in ids and a_id in ids and not ids[a_id]["attached"] and ids[a_id]
        s = wait_until(settled, what="b expired early, a kept")
        assert s["kept"] and s["keepSeconds"] == 3 and s["expiresAtMs"], s
        # ...and a kept session still expires after its own time: 3 s.
        wait_until(lambda: a_id not in [x["sessionId"] for x in
                                       c.call("session/list")["sessions"]],
                   timeout=DEFAULT_TIMEOUT + 3, what="the kept session to expire after 3 s")
        wait_no_marked()
        c.close()


@ours_only
@needs_own_server
def test_only_the_same_identity_sees_a_session(_):
    # Capability tokens: sessions opened with one token are invisible to another.
    path = token_file("token-one-0123456789\n")
    with Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", path]) as srv:
        one = srv.session(headers=["Authorization: Bearer token-one-0123456789"])
        one.start("p", ["sleep", "1000"], env={MARKER_VAR: MARKER})
        sid = one.session_id
        mine = srv.session(headers=["Authorization: Bearer token-one-0123456789"])
        assert sid in [x["sessionId"] for x in mine.call("session/list")["sessions"]]
        assert mine.call("process/list", {"sessionId": sid})["processes"][0]["processId"] == "p"
        mine.close()
        with open(path, "w") as f:
            f.write("token-two-0123456789\n")
        srv.proc.send_signal(signal.SIGHUP)

        def two():
            try:
                return srv.session(headers=["Authorization: Bearer token-two-0123456789"])
            except AssertionError:
                return None
        other = wait_until(two, what="the reloaded token")
        assert sid not in [x["sessionId"] for x in other.call("session/list")["sessions"]]
        for method, params in (("process/list", {"sessionId": sid}),
                               ("process/attach", {"sessionId": sid, "processId": "p"}),
                               ("process/terminate", {"sessionId": sid, "processId": "p"})):
            code, msg = other.error(method, params)
            assert code == -32600 and msg == "unknown session id %s" % sid, (method, msg)
        assert marked_pids(), "the other token's request reached the process"
        other.close()
        one.close()
    os.unlink(path)
    kill_marked()
    # JWTs: one subject is one identity, whatever the token; another subject sees nothing.
    path = secret_file()
    now = int(time.time())
    with Server(extra_args=["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file",
                            path]) as srv:
        alice = srv.session(headers=["Authorization: Bearer " +
                                     jwt({"exp": now + 600, "sub": "alice"})])
        sid = alice.session_id
        alice2 = srv.session(headers=["Authorization: Bearer " +
                                      jwt({"exp": now + 900, "sub": "alice", "x": 1})])
        bob = srv.session(headers=["Authorization: Bearer " +
                                   jwt({"exp": now + 600, "sub": "bob"})])
        assert sid in [x["sessionId"] for x in alice2.call("session/list")["sessions"]]
        assert sid not in [x["sessionId"] for x in bob.call("session/list")["sessions"]]
        for s in (alice, alice2, bob):
            s.close()
    os.unlink(path)


# ---- the command line ----------------------------------------------------------------

def sessions_table(srv):
    r = ec(srv, "sessions")
    assert r.returncode == 0, r
    return r.stdout.decode()


@ours_only
@needs_own_server
def test_cli_run_detached_then_ps_sessions_attach_and_detach(_):
    need_client()
    with Server(ttl=1) as srv:
        script = "echo ready; while read l; do echo got:$l; done"
        r = ec(srv, "run", "-d", "--tty", "--env", "%s=%s" % (MARKER_VAR, MARKER), "--",
               "/bin/sh", "-c", script)
        assert r.returncode == 0, r
        sid, pid = r.stdout.decode().split()
        table = sessions_table(srv)
        assert re.search(r"%s\s+detached\s+exec-client\s+1/1\s+forever\s+never" % sid, table), table
        ps = ec(srv, "ps")
        assert ps.returncode == 0 and re.search(
            r"%s\s+%s\s+\d+\s+running\s+yes\s+\S+\s+-\s+/bin/sh -c %s" % (
                sid[:8], pid, re.escape(script)), ps.stdout.decode()), ps
        # attach (by a prefix of the id): the retained output first, then live; typing
        # works; ^B d detaches and leaves it running.
        t = Tty(srv, ["attach", sid[:8]])
        t.read_until(b"ready")
        t.read_until(b"detach with ^B d]")
        t.write(b"hello\r")
        t.read_until(b"got:hello")
        # While attached the session is held: a second attach watches as a viewer.
        t2 = Tty(srv, ["attach", sid[:8], pid])
        t2.read_until(b"as a second viewer")
        t2.read_until(b"got:hello")  # the retained output
        t2.write(b"from-two\r")
        t.read_until(b"got:from-two")  # both see it
        t2.read_until(b"got:from-two")
        t2.write(b"\x02d")
        assert t2.finish() == 0 and b"[detached" in t2.out, t2.out
        t.write(b"\x02d")
        assert t.finish() == 0 and b"[detached from session" in t.out, t.out
        # Still there after the client left (and past the 1 s TTL: it is kept).
        assert marked_pids(), "the detached process died"
        table = wait_until(lambda: (lambda tb: tb if re.search(r"%s\s+detached" % sid, tb)
                                    else None)(sessions_table(srv)), what="detached again")
        # Attach again and end it from the inside: the exit status comes back.
        t = Tty(srv, ["attach"])  # the only session that runs something
        t.read_until(b"got:from-two")
        t.write(b"\x04")  # ^D ends the read loop: the shell exits 0
        assert t.finish() == 0 and b"exited with status 0" in t.out, t.out
        wait_no_marked()
        r = ec(srv, "sessions", "--end", sid[:8])
        assert r.returncode == 0, r
        assert sid not in sessions_table(srv)


@ours_only
@needs_own_server
def test_cli_keep_survives_a_lost_terminal(_):
    need_client()
    with Server(ttl=1) as srv:
        t = Tty(srv, ["run", "--keep", "--tty", "--env", "%s=%s" % (MARKER_VAR, MARKER), "--",
                      "/bin/sh", "-c", COUNTER])
        t.read_until(b"line3")
        os.kill(t.pid, signal.SIGHUP)  # the terminal went away
        t.finish()
        assert b"detached (SIGHUP)" in t.out, t.out
        assert marked_pids(), "the kept command died with its terminal"
        ps = wait_until(lambda: (lambda r: r if b"running" in r.stdout else None)(ec(srv, "ps")),
                        what="ps to list the command")
        sid8 = ps.stdout.split(b"\n")[1].split()[0].decode()
        r = ec(srv, "sessions", "--end", sid8)
        assert r.returncode == 0, r
        wait_no_marked()


if __name__ == "__main__":
    run_tests(globals())
