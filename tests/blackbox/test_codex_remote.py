#!/usr/bin/env python3
"""Real codex as the remote harness (issue 22): `codex app-server` 0.169.0 with
CODEX_EXEC_SERVER_NOISE_REGISTRY_URL / _ENVIRONMENT_ID / _AUTH_TOKEN reaches the server
under test, registered in remote mode (`--remote URL --environment-id ID`) at the local
registry + rendezvous double tests/remote/fake_cloud.py; codex names that environment
`remote`. Everything goes through the relay, Noise-encrypted (nothing of it in clear at
the rendezvous).

  test_codex_turn_through_the_relay: one turn of a scripted model (as in
    test_codex_client.py): exec_command prints a marker only the executor has in its
    environment and exits 4 (output and exit code come back), then apply_patch adds one
    file and edits another in a project directory codex itself cannot see (an empty
    tmpfs over it in codex's mount namespace, when one can be made), so the edit can
    only have gone through the relay.
  test_codex_stops_on_rejected_executor_credentials: the registry answers the
    executor's /validate with 401. The executor says so in the Noise handshake (msg 2
    payload `codex-registry-authentication-rejected/v1`), codex reports "executor
    credentials rejected", the turn's tools find no usable environment, and codex asks
    the registry for exactly one connect bundle instead of re-dialling.

Runs against ours (EXEC_SERVER) or the reference (EXEC_SERVER=ref: `codex exec-server
--remote`). codex's `bash -lc` is slow on a loaded machine: deadlines are generous."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fake_cloud  # noqa: E402
from test_codex_client import (AppServer, ScriptedModel, can_hide, codex_binary,  # noqa: E402
                               function_call, main)

ENV_ID = "env-codex-remote"
TOKEN = "tok-" + MARKER
EXEC_MARK_VAR = "EXECBB_REMOTE_MARK"
EXEC_MARK = "remote-mark-" + MARKER
SLOW = DEFAULT_TIMEOUT * 9


class RemoteExecutor:
    """The server under test in remote mode, registered at a fresh fake cloud. Its
    HOME is a directory of the test's, so the host's login files do not slow down or
    change codex's `bash -lc` commands."""

    def __init__(self, cloud):
        self.home = tempfile.mkdtemp(prefix="execbb-remote-exec-", dir="/var/tmp")
        env = dict(os.environ, HOME=self.home, CODEX_HOME=self.home, CODEX_API_KEY=TOKEN,
                   RUST_LOG="warn")
        env[EXEC_MARK_VAR] = EXEC_MARK
        cmd = [SERVER_PATH, "exec-server"] if IS_REF else WRAPPER + [SERVER_PATH]
        cmd += ["--remote", cloud.base_url, "--environment-id", ENV_ID]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        cloud.wait_for(lambda c: c.environment_connected(ENV_ID), SLOW,
                       "the executor to reach the rendezvous")

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")[-6000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15 * TIMEOUT_SCALE)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
                raise AssertionError("the executor did not stop on SIGTERM")
        rc = self.proc.returncode
        err = self.stderr_text()
        shutil.rmtree(self.home, ignore_errors=True)
        if not IS_REF:
            assert rc == 0, "executor exit status %r:\n%s" % (rc, err)
            for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
                assert bad not in err, err


class Turn:
    """A codex app-server whose `remote` environment is the executor behind the fake
    cloud, a scripted model, and a project directory hidden from codex."""

    def __init__(self, cloud, steps, env_id=ENV_ID, token=TOKEN, codex=None):
        """cloud: anything with the registry's base_url (a fake cloud, or a registry
        of test_fleet_codex.py); env_id and token: what codex connects with."""
        self.codex = codex or codex_binary()
        self.home = tempfile.mkdtemp(prefix="execbb-remote-codex-home-")
        self.hidden = tempfile.mkdtemp(prefix="execbb-remote-project-")
        self.work = os.path.join(self.hidden, "work")
        os.mkdir(self.work)
        self.model = ScriptedModel(steps)
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write('model = "mock-model"\nmodel_provider = "mock"\n'
                    'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n\n'
                    '[model_providers.mock]\nname = "mock"\n'
                    'base_url = "http://127.0.0.1:%d/v1"\nwire_api = "responses"\n'
                    'request_max_retries = 0\nstream_max_retries = 0\n' % self.model.port)
        remote = {"CODEX_EXEC_SERVER_NOISE_REGISTRY_URL": cloud.base_url,
                  "CODEX_EXEC_SERVER_NOISE_ENVIRONMENT_ID": env_id,
                  "CODEX_EXEC_SERVER_NOISE_AUTH_TOKEN": token}
        saved = {k: os.environ.get(k) for k in remote}
        os.environ.update(remote)
        try:
            self.app = AppServer(self.codex, self.home, self.work,
                                 hide=self.hidden if can_hide() else None)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def run(self, text="go"):
        app = self.app
        app.call("initialize", {"clientInfo": {"name": "execbb", "version": "0.1"},
                                "capabilities": {"experimentalApi": True}})
        app.send({"method": "initialized"})
        thread = app.call("thread/start", {
            "cwd": self.work, "environments": [{"environmentId": "remote", "cwd": self.work}]},
            timeout=SLOW)
        app.call("turn/start", {"threadId": thread["thread"]["id"],
                                "input": [{"type": "text", "text": text}]})
        done = app.wait_method("turn/completed", SLOW)
        assert not self.model.errors, self.model.errors
        return done

    def close(self):
        self.app.close()
        self.model.close()
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.hidden, ignore_errors=True)


def connects(cloud):
    with cloud.lock:
        return sum(1 for r in cloud.requests if r["path"].endswith("/connect"))


class Setup:
    """A fake cloud and the executor under test registered there (ex); the test
    creates its Turn (turn). Everything is stopped on the way out."""

    def __enter__(self):
        self.cloud = fake_cloud.FakeCloud(token=TOKEN)
        self.turn = None
        try:
            self.ex = RemoteExecutor(self.cloud)
        except BaseException:
            self.cloud.stop()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.turn:
                self.turn.close()
            self.ex.stop()
        finally:
            self.cloud.stop()
        return False


@needs_own_server
def test_codex_turn_through_the_relay(_):
    patch = ("*** Begin Patch\n*** Add File: notes.txt\n+written through the relay\n"
             "*** Update File: existing.txt\n@@\n-old line\n+new line\n*** End Patch\n")
    with Setup() as st:
        cloud, ex = st.cloud, st.ex
        steps = [
            lambda o: [function_call("cmd", "exec_command", {
                "cmd": "echo mark=$%s; exit 4" % EXEC_MARK_VAR,
                "workdir": turn.work, "yield_time_ms": 20000})],
            lambda o: [function_call("patch", "exec_command", {
                "cmd": "apply_patch <<'EOF'\n%sEOF\n" % patch, "workdir": turn.work,
                "yield_time_ms": 20000})],
        ]
        turn = st.turn = Turn(cloud, steps)
        with open(os.path.join(turn.work, "existing.txt"), "w") as f:
            f.write("old line\n")
        done = turn.run("run the script")
        assert done["params"]["turn"]["status"] == "completed", done
        out = turn.model.outputs
        ctx = "\ntool outputs: %s\ncodex stderr:\n%s\nexecutor stderr:\n%s" % (
            json.dumps(out, indent=1), turn.app.stderr_text(), ex.stderr_text())
        # the command ran on the executor, its output and exit code came back
        assert "mark=" + EXEC_MARK in out.get("cmd", ""), ctx
        assert "Process exited with code 4" in out["cmd"], ctx
        execs = {n["params"]["item"]["id"]: n["params"]["item"] for n in turn.app.notes
                 if n.get("method") == "item/completed"
                 and n["params"]["item"].get("type") == "commandExecution"}
        assert execs.get("cmd", {}).get("exitCode") == 4, execs.get("cmd")
        # apply_patch edited the executor's files (hidden from codex itself)
        assert "Success" in out.get("patch", ""), ctx
        with open(os.path.join(turn.work, "notes.txt")) as f:
            assert f.read() == "written through the relay\n", ctx
        with open(os.path.join(turn.work, "existing.txt")) as f:
            assert f.read() == "new line\n", ctx
        # through the relay, encrypted: one bundle, nothing of the JSON-RPC in clear
        assert connects(cloud) >= 1
        for needle in ("process/start", "apply_patch", EXEC_MARK):
            assert not cloud.cleartext_hits(needle), needle


@needs_own_server
def test_codex_stops_on_rejected_executor_credentials(_):
    with Setup() as st:
        cloud, ex = st.cloud, st.ex
        cloud.fail_next("validate", 401, "unauthorized", "executor token revoked", count=50)
        turn = st.turn = Turn(cloud, [lambda o: [function_call("cmd", "exec_command", {
            "cmd": "echo should-not-run", "workdir": turn.work, "yield_time_ms": 5000})]])
        done = turn.run()
        err = turn.app.stderr_text()
        ctx = "\ncodex stderr:\n%s\nexecutor stderr:\n%s" % (err, ex.stderr_text())
        assert done["params"]["turn"]["status"] == "completed", done
        assert "executor credentials rejected" in err, ctx
        assert "No usable execution environment" in turn.model.outputs.get("cmd", ""), ctx
        # It stops: no retry loop. Codex usually asks for one connect bundle; once in a
        # clean-clone CI run (ed9a1a6) it asked for two, its environment start and
        # another of its tasks racing (one rejection in the executor's log, one
        # failure in codex's), so two is codex's own doing, a third would be a loop.
        n = connects(cloud)
        assert 1 <= n <= 2, "codex asked for %d connect bundles%s" % (n, ctx)
        # each msg 2 came back with the 41-byte rejection in it (3424 + 41 + framing)
        with cloud.lock:
            shakes = [f for f in cloud.frames if f["dir"] == "e2h" and f["body"] == "handshake"]
        assert 1 <= len(shakes) <= n and all(len(f["raw"]) > 3424 + 41 for f in shakes), shakes


if __name__ == "__main__":
    main(globals(), 400)
