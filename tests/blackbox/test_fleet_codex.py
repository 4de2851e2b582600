#!/usr/bin/env python3
"""Stock codex through `exec-server registry` on SQLite (issue 37): the harness is
`codex app-server` 0.171 (CODEX_EXEC_SERVER_NOISE_REGISTRY_URL / _ENVIRONMENT_ID /
_AUTH_TOKEN = the registry's URL, the environment and a harness token), and the
executor is, in turn, ours (`exec-server --remote`, the executor token on stdin) and
stock `codex exec-server --remote` 0.171 (the token as CODEX_API_KEY). One turn of a
scripted model each (as test_codex_remote.py): exec_command prints a marker only the
executor has and exits 4, then apply_patch adds a file and edits another in a project
directory codex itself cannot see; output, exit code and the files on disk are checked.

The rendezvous must have seen no cleartext: the registry hands out rendezvous URLs
through two recording proxies (--public-url for harness sockets, --environment-url for
the executor's), and every WebSocket message it routed either way is decoded from
those recordings: all binary relay frames, enough of them to have carried the turn,
and none holding a JSON-RPC method, the patch or the marker.

Skipped (77) when codex 0.171 is not installed or exec-server is not built."""
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fleet_lib  # noqa: E402
import remote_testlib  # noqa: E402
from test_codex_client import can_hide, function_call  # noqa: E402
from test_codex_remote import EXEC_MARK, EXEC_MARK_VAR, SLOW, Turn  # noqa: E402

ENV_ID = "fleet-codex"
PATCH = ("*** Begin Patch\n*** Add File: notes.txt\n+written through the registry\n"
         "*** Update File: existing.txt\n@@\n-old line\n+new line\n*** End Patch\n")


def check_no_cleartext(proxies, needles):
    msgs = [m for p in proxies for m in p.messages()]
    assert msgs, "no WebSocket message went through the recording proxies"
    texts = [m for m in msgs if m[1] != 2]
    assert not texts, "non-binary messages on the rendezvous: %r" % texts[:3]
    bodies = [fleet_lib.frame_body(m[2]) for m in msgs]
    assert None not in bodies, "a message that is not a relay frame"
    for want in ("handshake", "data"):
        assert bodies.count(want) >= (2 if want == "handshake" else 8), (want, bodies)
    for needle in needles:
        hits = [m for m in msgs if needle.encode() in m[2]]
        assert not hits, "%r in clear in a routed frame" % needle


def run_turn(stock_executor, database=None, two_nodes=False):
    """One codex turn through the registry at database (default: a new SQLite file).
    two_nodes: the executor registers at node A, codex asks node B, which sends it to
    A (both on database, which must be PostgreSQL then)."""
    server, codex = remote_testlib.our_server(), fleet_lib.codex_171()
    tmp = tempfile.mkdtemp(prefix="execbb-fleet-codex-")
    database = database or "sqlite:" + os.path.join(tmp, "fleet.db")
    harness_proxy, env_proxy = fleet_lib.RecordingProxy(), fleet_lib.RecordingProxy()
    reg = fleet_lib.Registry(server, database, wrapper=WRAPPER,
                             args=["--public-url", harness_proxy.url, "--environment-url",
                                   env_proxy.url, "--node-id", "node-a",
                                   "--heartbeat-interval", "0.5"])
    harness_proxy.target = env_proxy.target = ("127.0.0.1", reg.port)
    asked = fleet_lib.Registry(server, database, wrapper=WRAPPER,
                               args=["--node-id", "node-b"]) if two_nodes else reg
    ex = turn = None
    try:
        ex = fleet_lib.Executor(codex if stock_executor else server, reg.url, ENV_ID,
                                reg.token(ENV_ID, "executor"), stock=stock_executor,
                                extra_env={EXEC_MARK_VAR: EXEC_MARK}, wrapper=WRAPPER)
        reg.wait_attached(ENV_ID, timeout=SLOW)
        steps = [
            lambda o: [function_call("cmd", "exec_command", {
                "cmd": "echo mark=$%s; exit 4" % EXEC_MARK_VAR, "workdir": turn.work,
                "yield_time_ms": 20000})],
            lambda o: [function_call("patch", "exec_command", {
                "cmd": "apply_patch <<'EOF'\n%sEOF\n" % PATCH, "workdir": turn.work,
                "yield_time_ms": 20000})],
        ]
        turn = Turn(types.SimpleNamespace(base_url=asked.url), steps, env_id=ENV_ID,
                    token=reg.token(ENV_ID, "harness"), codex=codex)
        with open(os.path.join(turn.work, "existing.txt"), "w") as f:
            f.write("old line\n")
        done = turn.run("run the script")
        out = turn.model.outputs
        ctx = "\ntool outputs: %r\ncodex stderr:\n%s\nexecutor stderr:\n%s\nregistry:\n%s" % (
            out, turn.app.stderr_text(), ex.stderr_text(), reg.log()[-3000:])
        assert done["params"]["turn"]["status"] == "completed", ctx
        assert "mark=" + EXEC_MARK in out.get("cmd", ""), ctx
        assert "Process exited with code 4" in out["cmd"], ctx
        assert "Success" in out.get("patch", ""), ctx
        with open(os.path.join(turn.work, "notes.txt")) as f:
            assert f.read() == "written through the registry\n", ctx
        with open(os.path.join(turn.work, "existing.txt")) as f:
            assert f.read() == "new line\n", ctx
        # codex asked `asked` for its bundles; the executor's node routed the streams
        assert asked.count(r"event=connect environment=%s node=node-a " % ENV_ID) >= 1, ctx
        assert reg.count(r"event=harness_open environment=%s " % ENV_ID) >= 1, ctx
        if two_nodes:
            assert reg.count(r"event=connect ") == 0, ctx
        check_no_cleartext([harness_proxy, env_proxy],
                           ("process/start", "apply_patch", "initialize", EXEC_MARK,
                            "written through the registry"))
    finally:
        if turn:
            turn.close()
        if ex:
            ex.stop()
        harness_proxy.close()
        env_proxy.close()
        if asked is not reg:
            asked.stop()
        reg.stop()


@needs_own_server
def test_codex_turn_with_our_executor(_):
    run_turn(stock_executor=False)


@needs_own_server
def test_codex_turn_with_stock_codex_executor(_):
    run_turn(stock_executor=True)


if __name__ == "__main__":
    why = remote_testlib.skip_reason(remote_testlib.our_server(), "registry", "registry")
    if why is None and fleet_lib.codex_171() is None:
        why = "codex 0.171 is not installed under ~/.cache/codex-ref-0.171"
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=400)
