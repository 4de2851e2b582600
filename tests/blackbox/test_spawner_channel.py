#!/usr/bin/env python3
"""The loop thread's channel to the spawner process never blocks (issue 38).

The server starts every child through its spawner process (docs/ARCHITECTURE.md,
"Processes and threads"). A spawner that is stopped (SIGSTOP, a debugger, a machine
paging) must not stop the server: starts wait in the server's queue, in order, while
every other request is answered; a spawner that died is replaced and the queue goes
to the new one. These tests stop or kill the spawner themselves and check what a
client sees."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_process import burst  # noqa: one write, the server dispatches them together
from test_process import new_marker  # noqa

# Enough request bytes to fill the spawner's socket several times over (the server
# asks for 1 MiB of send buffer, which the kernel doubles): each start carries a
# 64 KiB variable.
STARTS = 200
PAD = "x" * 65536


def spawners(srv):
    """The server's spawner processes (its children named exec-spawner)."""
    out = []
    for pid in all_pids():
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        if int(fields[1]) == srv.pid and proc_comm(pid) == "exec-spawner":
            out.append(pid)
    return out


def the_spawner(srv):
    wait_until(lambda: len(spawners(srv)) == 1, 10, "one spawner process")
    return spawners(srv)[0]


def answered_while_stopped(s, stopped, what):
    """A request sent on session s now is answered while the spawners `stopped` stay
    stopped: the loop did not wait for them (`what` names what was waiting)."""
    rid = s.send_request("process/read", {"processId": "nonesuch"})
    try:
        assert "error" in s.wait_response(rid, timeout=20)
    except Timeout:
        raise AssertionError("the server stopped answering while " + what)
    assert all(proc_state(p) == "T" for p in stopped), "a spawner ran again before the answer"


def starts(prefix, n, argv):
    env = {"PATH": "/usr/bin:/bin", "PAD": PAD}
    return [("process/start", {"processId": "%s%d" % (prefix, i), "argv": argv,
                               "cwd": "file:///tmp", "env": env, "tty": False,
                               "pipeStdin": False}) for i in range(n)]


def burst_while_stopped(s, sp, prefix):
    """With spawner sp stopped (SIGSTOP sent): sends STARTS starts in one write and a
    request behind them, whose answer comes only once the loop has dispatched every
    start before it; returns the starts' ids."""
    wait_until(lambda: proc_state(sp) == "T", 5, "the spawner to stop")
    try:
        ids = burst(s, starts(prefix, STARTS, ["/bin/sh", "-c", "echo ran"]))
    except TimeoutError:
        raise AssertionError("the server stopped reading while its spawner was stopped")
    behind = s.send_request("process/read", {"processId": "nonesuch"})
    assert "error" in s.wait_response(behind, timeout=20)
    return ids


@ours_only
def test_stopped_spawner_does_not_stop_the_loop(srv):
    """With the spawner stopped, 200 starts (13 MB of requests) are taken and queued:
    a request behind them on the same connection and an initialize on a new one are
    answered while the spawner is still stopped; once it runs again every start
    succeeds and runs its command."""
    sp = the_spawner(srv)
    s = srv.session()
    os.kill(sp, signal.SIGSTOP)
    try:
        ids = burst_while_stopped(s, sp, "st")
        other = srv.session()  # initialize on a new connection
        assert proc_state(sp) == "T", "the spawner ran again before the replies came"
        other.close()
    finally:
        os.kill(sp, signal.SIGCONT)
    for i, rid in enumerate(ids):
        r = s.wait_response(rid, timeout=60)
        assert r.get("result") == {"processId": "st%d" % i, "sandboxType": "none"}, r
    for i in range(STARTS):
        assert s.collect_until_closed("st%d" % i)["stdout"] == b"ran\n"
    s.close()
    assert spawners(srv) == [sp]


@ours_only
def test_killed_spawner_is_replaced(srv):
    """A spawner killed while idle is replaced at the next start; one killed with
    starts queued behind a full socket is replaced and the queue goes to the new one:
    every start is answered (those the dead one had taken fail, the rest run), the
    dead one is reaped, and starts work afterwards."""
    s = srv.session()
    sp = the_spawner(srv)
    os.kill(sp, signal.SIGKILL)
    wait_until(lambda: proc_state(sp) in ("Z", None), 5, "the spawner to die")
    s.start("k0", ["/bin/sh", "-c", "echo again"])
    assert s.collect_until_closed("k0")["stdout"] == b"again\n"
    wait_until(lambda: proc_state(sp) is None, 10, "the dead spawner to be reaped")
    sp = the_spawner(srv)
    os.kill(sp, signal.SIGSTOP)
    try:
        ids = burst_while_stopped(s, sp, "kq")
    finally:
        os.kill(sp, signal.SIGKILL)
    ran = 0
    for i, rid in enumerate(ids):
        r = s.wait_response(rid, timeout=60)
        if "result" in r:
            assert s.collect_until_closed("kq%d" % i)["stdout"] == b"ran\n"
            ran += 1
        else:
            assert "error" in r, r
    # The socket held only a part of the burst; the rest went to the new spawner.
    assert ran > 0, "no queued start reached the new spawner"
    wait_until(lambda: proc_state(sp) is None, 10, "the dead spawner to be reaped")
    s.start("k1", ["/bin/sh", "-c", "echo after"])
    assert s.collect_until_closed("k1")["stdout"] == b"after\n"
    s.close()


@ours_only
@needs_own_server
def test_cancel_at_stopped_spawner_does_not_stop_the_loop(_):
    """A session that ends while its start is with a stopped spawner (the request sent,
    not queued, so it cannot be taken back): the start is cancelled without waiting for
    the spawner, and another connection is answered while the spawner is still stopped.
    Once the spawner runs again, the child it starts is killed and reaped, and the
    server holds the descriptors it held before: nothing of the start is left."""
    with Server(extra_args=["--log-level", "info"]) as srv:
        sp = the_spawner(srv)
        other = srv.session()
        other.start("w", ["true"])  # whatever a first start makes once is made now
        other.collect_until_closed("w")
        before = fd_count(srv.pid)
        s = srv.session()
        mk = new_marker()
        os.kill(sp, signal.SIGSTOP)
        try:
            wait_until(lambda: proc_state(sp) == "T", 5, "the spawner to stop")
            start = {"processId": "c", "argv": ["sleep", "600"], "cwd": "file:///tmp",
                     "env": {"PATH": "/usr/bin:/bin", MARKER_VAR: mk}, "tty": False,
                     "pipeStdin": False}
            _, closing = burst(s, [("process/start", start), ("session/close", {})])
            assert "result" in s.wait_response(closing)
            s.close()
            wait_until(lambda: "event=session_end" in srv.stderr_text(1 << 20), 10,
                       "the session to end (its start cancelled)")
            answered_while_stopped(other, [sp], "a cancelled start waited for its stopped "
                                   "spawner")
        finally:
            os.kill(sp, signal.SIGCONT)
        wait_until(lambda: fd_count(srv.pid) <= before, 20,
                   "the cancelled start's descriptors to close (%d before)" % before)
        wait_until(lambda: not descendants(srv.pid), 10, "no child of the server left")
        assert not marked_pids(mk), "the cancelled start's command runs"
        assert spawners(srv) == [sp]
        other.close()


if __name__ == "__main__":
    run_tests(globals())
