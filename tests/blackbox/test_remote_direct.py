#!/usr/bin/env python3
"""`exec-server --remote URL --environment-id ID --remote-transport direct --aws-sigv4`
(docs/REMOTE.md §8.6) against tests/remote/fake_cloud.py, which verifies every SigV4
signature with its own implementation of the algorithm (checked here against the
reference codex 0.169.0's signatures too, when it is installed).

Scenarios (ours; the first three also for the reference): the signed /direct/register
(body, headers) and the signed upgrade; the keys and region of an --aws-profile from the
shared credentials and config files; JSON-RPC over the direct socket (initialize,
then fs/getMetadata, answered as text); a dropped socket reconnects to the same URL
without registering again; a 409 upgrade registers again; a 401 upgrade and a
registry refusing the signature are fatal (exit 1, a message); usage errors. Every
wait is bounded; exit 77 when nothing could run."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import fake_cloud  # noqa: E402
from remote_testlib import (our_server, reference, run_one, skip_reason,  # noqa: E402
                            stop_group, summary)  # noqa: E402

SKIP = 77
ENV_ID = "env-direct-test"
AK = "AKIDEXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SERVER = our_server()


class Executor:
    def __init__(self, kind, path, secret=SK, extra=(), wait=True, env_extra=None,
                 env_drop=()):
        self.kind = kind
        self.cloud = fake_cloud.FakeCloud(token=None, aws_secret=SK)
        self.home = tempfile.mkdtemp(prefix="direct-test-")
        env = dict(os.environ, CODEX_HOME=self.home, AWS_ACCESS_KEY_ID=AK,
                   AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1", RUST_LOG="warn",
                   EXEC_SERVER_REMOTE_BACKOFF_MS="1000",
                   AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
                   AWS_CONFIG_FILE="/nonexistent/config")
        for k in ("CODEX_API_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE") + tuple(env_drop):
            env.pop(k, None)
        env.update(env_extra or {})
        cmd = [path, "exec-server"] if kind == "reference" else [path]
        cmd += ["--remote", self.cloud.base_url, "--environment-id", ENV_ID,
                "--remote-transport", "direct", "--aws-sigv4"] + list(extra)
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        if wait:
            try:
                self.cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30,
                                    "the %s executor's direct socket" % kind)
            except BaseException:
                self.stop()
                raise

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")[-3000:]

    def registrations(self):
        with self.cloud.lock:
            return [r for r in self.cloud.requests if r["path"].endswith("/direct/register")]

    def direct_upgrades(self):
        with self.cloud.lock:
            return [u for u in self.cloud.upgrades if "/ws/direct/" in u["path"]]

    def call(self, msg_id, method, params, notify=False):
        """Sends a request on the direct socket; returns its answer (bounded wait)."""
        obj = {"method": method, "params": params}
        if not notify:
            obj["id"] = msg_id
        before = len(self.cloud.frames)
        self.cloud.direct_send(ENV_ID, obj)
        if notify:
            return None
        found = []

        def answered(c):
            for f in c.frames[before:]:
                if f["dir"] != "e2h":
                    continue
                try:
                    j = json.loads(f["raw"])
                except ValueError:
                    continue
                if j.get("id") == msg_id:
                    found.append((f["opcode"], j))
                    return True
            return False
        self.cloud.wait_for(answered, 15, "the answer to %s" % method)
        return found[0]

    def stop(self):
        rc = stop_group(self.proc)
        self.cloud.stop()
        shutil.rmtree(self.home, ignore_errors=True)
        return rc


def scenario_signed_register_and_rpc(kind, path):
    ex = Executor(kind, path)
    try:
        regs = ex.registrations()
        assert len(regs) == 1, len(regs)
        assert regs[0]["body"] == b'{"transport":"direct_jsonrpc_v1"}', regs[0]["body"]
        names = [k.lower() for k, _ in regs[0]["headers"]]
        for h in ("content-type", "x-amz-date", "authorization"):
            assert h in names, names
        auth = dict((k.lower(), v) for k, v in regs[0]["headers"])["authorization"]
        assert "SignedHeaders=content-type;host;x-amz-date," in auth, auth
        assert "/us-east-1/execute-api/aws4_request" in auth, auth
        up = ex.direct_upgrades()[0]
        uh = dict((k.lower(), v) for k, v in up["headers"])
        assert "SignedHeaders=host;x-amz-date," in uh["authorization"], uh
        assert "x-request-id" not in uh, uh
        with ex.cloud.lock:
            checks = list(ex.cloud.sigv4_checks)
        assert checks == [("direct/register", True), ("direct/upgrade", True)], checks
        op, ans = ex.call(1, "initialize", {"clientName": "direct-test"})
        assert op == 1, "the answer must be a text message, got opcode %d" % op
        assert "sessionId" in ans.get("result", {}), ans
        ex.call(None, "initialized", {}, notify=True)
        op, ans = ex.call(2, "fs/getMetadata", {"path": "file://" + ex.home})
        assert ans.get("result", {}).get("isDirectory") is True, ans
    finally:
        rc = ex.stop()
    assert kind == "reference" or rc == 0, "exit %r on SIGTERM" % rc


def scenario_aws_profile(kind, path):
    """--aws-profile: the keys and the region come from the shared credentials and config
    files (no AWS_* keys in the environment); the registration and upgrade are signed
    with them (the registry checks each signature)."""
    d = tempfile.mkdtemp(prefix="direct-aws-")
    creds, conf = os.path.join(d, "credentials"), os.path.join(d, "config")
    with open(creds, "w") as f:
        f.write("[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n\n"
                "# the one to use\n[execbb]\naws_access_key_id = %s\n"
                "aws_secret_access_key=%s\n" % (AK, SK))
    with open(conf, "w") as f:
        f.write("[default]\nregion = eu-west-3\n[profile execbb]\nregion = us-east-1\n")
    ex = Executor(kind, path, extra=["--aws-profile", "execbb"],
                  env_extra={"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_CONFIG_FILE": conf},
                  env_drop=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                            "AWS_DEFAULT_REGION"))
    try:
        auth = dict((k.lower(), v) for k, v in ex.registrations()[0]["headers"])["authorization"]
        assert "Credential=%s/" % AK in auth and "/us-east-1/execute-api/" in auth, auth
        with ex.cloud.lock:
            checks = list(ex.cloud.sigv4_checks)
        assert checks == [("direct/register", True), ("direct/upgrade", True)], checks
    finally:
        rc = ex.stop()
        shutil.rmtree(d, ignore_errors=True)
    assert kind == "reference" or rc == 0, "exit %r on SIGTERM" % rc


def scenario_reconnect_same_url(kind, path):
    ex = Executor(kind, path)
    try:
        url0 = ex.direct_upgrades()[0]["target"]
        ex.cloud.drop_environment(ENV_ID)
        t0 = time.monotonic()
        ex.cloud.wait_for(lambda c: len([u for u in c.upgrades if u["status"] == 101]) >= 2,
                          15, "a reconnect")
        took = time.monotonic() - t0
        ups = ex.direct_upgrades()
        assert ups[1]["target"] == url0, "a reconnect must reuse the URL"
        assert len(ex.registrations()) == 1, "a drop must not register again"
        assert took < 5, "reconnected after %.1fs (expected 0.5-0.75 s)" % took
    finally:
        ex.stop()


def scenario_409_registers_again(kind, path):
    ex = Executor(kind, path)
    try:
        ex.cloud.reject_upgrades(409, count=1)
        ex.cloud.drop_environment(ENV_ID)
        ex.cloud.wait_for(lambda c: len(ex.registrations()) >= 2 and
                          c.environment_connected(ENV_ID), 20, "a re-registration")
        ups = ex.direct_upgrades()
        assert ups[-1]["target"] != ups[0]["target"], "the new URL must be used"
    finally:
        ex.stop()


def exits_1(ex):
    """Waits (bounded) for the executor to give up with exit 1; returns its stderr."""
    rc = ex.proc.wait(20)
    assert rc == 1, (rc, ex.stderr_text())
    return ex.stderr_text()


def scenario_401_is_fatal(kind, path):
    ex = Executor(kind, path)
    try:
        ex.cloud.reject_upgrades(401, count=5)
        ex.cloud.drop_environment(ENV_ID)
        text = exits_1(ex)
        assert "401" in text and "sig=" not in text, text
    finally:
        ex.stop()


def scenario_bad_signature_is_fatal(kind, path):
    ex = Executor(kind, path, secret="not-the-secret", wait=False)
    try:
        text = exits_1(ex)
        assert "403" in text or "refused" in text, text
        with ex.cloud.lock:
            assert ex.cloud.sigv4_checks == [("direct/register", False)], ex.cloud.sigv4_checks
    finally:
        ex.stop()


def scenario_usage(kind, path):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION="x",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
               AWS_CONFIG_FILE="/nonexistent/config")
    base = [path, "--remote", "http://127.0.0.1:9", "--environment-id", "e"]
    cases = [(base + ["--remote-transport", "direct"], 2, "--aws-sigv4"),
             (base + ["--remote-transport", "direct", "--aws-sigv4",
                      "--registration-bearer-stdin"], 2, "cannot be used"),
             ([path, "--remote", "http://example.com", "--environment-id", "e",
               "--remote-transport", "direct", "--aws-sigv4"], 2, "https://")]
    for argv, want, text in cases:
        r = subprocess.run(argv, capture_output=True, timeout=10, env=env,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == want and text.encode() in r.stderr, (argv, r.returncode,
                                                                    r.stderr)
    env.pop("AWS_ACCESS_KEY_ID")
    r = subprocess.run(base + ["--remote-transport", "direct", "--aws-sigv4"],
                       capture_output=True, timeout=10, env=env)
    assert r.returncode == 1 and b"AWS_ACCESS_KEY_ID" in r.stderr, r.stderr


SCENARIOS = [(scenario_signed_register_and_rpc, True), (scenario_aws_profile, True),
             (scenario_reconnect_same_url, True),
             (scenario_409_registers_again, False), (scenario_401_is_fatal, False),
             (scenario_bad_signature_is_fatal, False), (scenario_usage, False)]


def main():
    why = skip_reason(SERVER, "--aws-sigv4", "direct transport")
    if why:
        print("SKIP: " + why)
        return SKIP
    only = set(sys.argv[1:])
    passed = failed = 0
    for kind, path in (("reference", reference()), ("ours", SERVER)):
        if path is None:
            print("SKIP reference: the reference codex is not installed")
            continue
        for sc, both in SCENARIOS:
            if (kind == "reference" and not both) or (only and sc.__name__ not in only):
                continue
            p, f = run_one("%s/%s" % (kind, sc.__name__), sc, kind, path)
            passed += p
            failed += f
    return summary(passed, failed)


if __name__ == "__main__":
    sys.exit(main())
