#!/usr/bin/env python3
"""Remote mode against the fake cloud: what an executor does with the registry and the
rendezvous (docs/REMOTE.md §8 has the observations these assert).

tests/remote/fake_cloud.py plays the environment registry and the rendezvous relay. The
executor is the reference `codex exec-server --remote URL --environment-id ID` (0.169.0
from npm, tests/blackbox/codex_ref.py; exit 77 naming npm when npm cannot install it), or
the command in EXEC_REMOTE_EXECUTOR (it gets `--remote URL --environment-id ID`
appended; auth comes from CODEX_API_KEY like the reference) once ours has remote mode.

Checked without any Noise crypto on the test side: the register request (path, headers,
body byte for byte), the rendezvous upgrade (role=environment, signature kept, no
subprotocol), silence until a harness speaks, reconnects after the rendezvous drops the
socket (same URL, no re-register), a fresh registration after a 4xx upgrade answer (the
URL is reused after a 5xx), pongs, resets for bad harness frames, and a clean exit on
SIGTERM. Every wait is bounded."""
import base64
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import shutil
import time
import re
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fake_cloud  # noqa
from test_codex_client import codex_binary  # codex 0.169.0, or TestSkip naming npm

TOKEN = "tok-" + uuid.uuid4().hex
ENV_ID = "env-1"
T = DEFAULT_TIMEOUT


def executor_cmd():
    custom = os.environ.get("EXEC_REMOTE_EXECUTOR")
    if custom:
        return shlex.split(custom), False
    return [codex_binary(), "exec-server"], True


class Executor:
    """The executor under test, registered at `cloud` as ENV_ID with the bearer TOKEN."""

    def __init__(self, cloud, extra=()):
        base, self.reference = executor_cmd()
        self.home = tempfile.mkdtemp(prefix="execbb-remote-", dir="/var/tmp")
        env = dict(os.environ, CODEX_HOME=self.home, CODEX_API_KEY=TOKEN, RUST_LOG="warn")
        for k in ("OPENAI_CLUSTER", "DD_SERVICE", "CODEX_ACCESS_TOKEN"):
            env.pop(k, None)
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(base + ["--remote", cloud.base_url, "--environment-id",
                                             ENV_ID] + list(extra),
                                     env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr)

    def stderr_text(self):
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10 * TIMEOUT_SCALE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("executor ignored SIGTERM for 10 s")
        shutil.rmtree(self.home, ignore_errors=True)
        return self.proc.returncode


class Rig:
    """A fake cloud plus an executor; use as a context manager."""

    def __init__(self, **cloud_kw):
        self.cloud = fake_cloud.FakeCloud(token=TOKEN, **cloud_kw)
        self.ex = None

    def __enter__(self):
        self.ex = Executor(self.cloud)
        return self

    def __exit__(self, *exc):
        try:
            if self.ex is not None:
                self.ex.stop()
        finally:
            self.cloud.stop()

    def wait(self, pred, what, timeout=T):
        try:
            return self.cloud.wait_for(pred, timeout, what)
        except TimeoutError as e:
            raise Timeout("%s; executor rc=%s stderr:\n%s" % (e, self.ex.proc.poll(),
                                                             self.ex.stderr_text()))

    def registers(self):
        return [r for r in self.cloud.requests if r["path"].endswith("/register")]

    def wait_connected(self, n_upgrades=1):
        self.wait(lambda c: len([u for u in c.upgrades if u["status"] == 101]) >= n_upgrades
                  and c.environment_connected(ENV_ID),
                  "%d accepted environment upgrade(s)" % n_upgrades)


@needs_own_server
def test_register_request_shape(_):
    with Rig() as rig:
        rig.wait(lambda c: c.requests, "the register request")
        r = rig.cloud.requests[0]
        assert r["method"] == "POST", r["method"]
        assert r["target"] == "/cloud/environment/%s/register" % ENV_ID, r["target"]
        h = dict((k.lower(), v) for k, v in r["headers"])
        assert h.get("authorization") == "Bearer " + TOKEN, h
        assert h.get("content-type") == "application/json", h
        assert int(h["content-length"]) == len(r["body"])
        body = json.loads(r["body"])
        assert list(body) == ["security_profile", "executor_public_key"], list(body)
        assert body["security_profile"] == "noise_hybrid_ik_v1"
        key = body["executor_public_key"]
        assert list(key) == ["suite", "x25519_public_key", "mlkem768_public_key"], list(key)
        assert key["suite"] == "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256"
        assert len(key["x25519_public_key"]) == 44 and len(key["mlkem768_public_key"]) == 1580
        assert len(base64.b64decode(key["x25519_public_key"], validate=True)) == 32
        assert len(base64.b64decode(key["mlkem768_public_key"], validate=True)) == 1184
        # Compact serde_json output: no whitespace, members in declaration order.
        assert r["body"] == json.dumps(body, separators=(",", ":")).encode(), r["body"][:200]
        assert len(r["body"]) == 1792, len(r["body"])
        assert r["status"] == 200, r.get("response")


@needs_own_server
def test_rendezvous_connection_is_role_environment(_):
    with Rig() as rig:
        rig.wait_connected()
        reg = rig.cloud.requests[0]["response"]
        up = [u for u in rig.cloud.upgrades if u["status"] == 101][0]
        # The URL from /register is used verbatim: path, role and signature untouched.
        assert reg["url"].endswith(up["target"]), (reg["url"], up["target"])
        assert up["query"].get("role") == "environment", up["query"]
        h = dict((k.lower(), v) for k, v in up["headers"])
        assert "sec-websocket-protocol" not in h, h
        assert "authorization" not in h, "the bearer must not travel to the rendezvous"
        assert h.get("sec-websocket-version") == "13"
        # Nothing is sent before a harness speaks (no hello, no resume, no heartbeat).
        time.sleep(1.0 * TIMEOUT_SCALE)  # sleep-ok: a window in which nothing may be sent
        assert not rig.cloud.frames, rig.cloud.frames[:3]
        assert len(rig.registers()) == 1


@needs_own_server
def test_reconnects_with_same_url_after_drop(_):
    with Rig() as rig:
        rig.wait_connected()
        first = rig.cloud.upgrades[-1]["target"]
        t0 = time.monotonic()
        assert rig.cloud.drop_environment(ENV_ID) == 1
        rig.wait_connected(2)
        delay = time.monotonic() - t0
        assert delay < 5 * TIMEOUT_SCALE, "reconnect took %.1fs" % delay
        assert rig.cloud.upgrades[-1]["target"] == first, "a plain drop must reuse the URL"
        assert len(rig.registers()) == 1, "a plain drop must not re-register"
        # Graceful close frame: same behaviour.
        rig.cloud.drop_environment(ENV_ID, graceful=True)
        rig.wait_connected(3)
        assert rig.cloud.upgrades[-1]["target"] == first
        assert len(rig.registers()) == 1


@needs_own_server
def test_reregisters_after_401_upgrade(_):
    with Rig() as rig:
        rig.cloud.reject_upgrades(401, role="environment", count=1)
        rig.wait(lambda c: len([r for r in c.requests if r["path"].endswith("/register")]) >= 2,
                 "a second register after the 401")
        rig.wait_connected(1)
        ups = rig.cloud.upgrades
        assert ups[0]["status"] == 401 and ups[-1]["status"] == 101, [u["status"] for u in ups]
        regs = rig.registers()
        assert ups[-1]["query"]["sig"] != ups[0]["query"]["sig"], "expected the new URL"
        assert rig.cloud.requests[-1]["response"]["url"].endswith(ups[-1]["target"])
        # The executor identity is per process: the same public key is registered again.
        assert json.loads(regs[0]["body"]) == json.loads(regs[1]["body"])


@needs_own_server
def test_reuses_url_after_5xx_upgrade(_):
    with Rig() as rig:
        rig.cloud.reject_upgrades(503, role="environment", count=1)
        rig.wait_connected(1)
        ups = rig.cloud.upgrades
        assert [u["status"] for u in ups] == [503, 101], [u["status"] for u in ups]
        assert ups[0]["target"] == ups[1]["target"]
        assert len(rig.registers()) == 1


@needs_own_server
def test_answers_rendezvous_pings(_):
    with Rig(ping_interval=0.3) as rig:
        rig.wait_connected()
        rig.wait(lambda c: [e for e in c.events if e[1] == "pong" and e[2][1] == b"fake"],
                 "a pong echoing the ping payload")


@needs_own_server
def test_bad_harness_frames_get_a_reset(_):
    with Rig() as rig:
        rig.wait_connected()
        key = {"suite": fake_cloud.SUITE,
               "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
               "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}
        st, _, body = http_raw(rig.cloud.host, rig.cloud.port, _post(
            "/cloud/environment/%s/connect" % ENV_ID, {"harness_public_key": key}))
        assert st == 200, (st, body)
        bundle = json.loads(body)
        st, _, ws = fake_cloud.ws_connect(bundle["url"])
        assert st == 101
        try:
            mk = fake_cloud.make_frame
            ws.send_binary(mk("s-1", "resume"))
            ws.send_binary(mk("s-1", "handshake", fake_cloud.pb_len(1, os.urandom(3600))))
            ws.send_binary(mk("s-2", "data", b"\x18\x01" + fake_cloud.pb_len(4, b"xx")))
            resets = rig.wait(lambda c: [f for f in c.frames if f["dir"] == "e2h"
                                         and f["body"] == "reset"] if len(
                [f for f in c.frames if f["dir"] == "e2h"]) >= 2 else None,
                "two resets from the executor")
            got = sorted((f["stream_id"], f["parsed"]["body_bytes"]) for f in resets)
            reason = b"\x0a\x1anoise_relay_protocol_error"
            assert got == [("s-1", reason), ("s-2", reason)], got
            assert rig.cloud.environment_connected(ENV_ID)
        finally:
            ws.abort()


_ORACLE = []


def noise_harness(rig, **kw):
    """A Noise harness connected through the fake cloud (skips when the npm oracle packages
    cannot be installed)."""
    import noise_client
    if not _ORACLE:
        _ORACLE.append(noise_client.oracle_modules())
    if not _ORACLE[0]:
        raise TestSkip("npm could not install the @noble oracle packages (tests/oracle)")
    return noise_client.NoiseHarness(rig.cloud, TOKEN, ENV_ID, _ORACLE[0], timeout=T, **kw)


def read_output(h, process_id, needle):
    """Poll process/read (bounded by T) until `needle` shows up; return all output."""
    out, deadline = b"", time.monotonic() + T
    while needle not in out and time.monotonic() < deadline:
        r = h.request("process/read", {"processId": process_id, "afterSeq": 0,
                                       "waitMs": 500})
        out = b"".join(base64.b64decode(c["chunk"]) for c in r["chunks"])
    return out


@needs_own_server
def test_noise_session_end_to_end(_):
    """A real hybrid-IK handshake and JSON-RPC over encrypted data frames."""
    import noise_client
    with Rig() as rig:
        rig.wait_connected()
        h = noise_harness(rig)
        try:
            assert (h.msg1_len, h.msg2_len) == (3568 + len(h.bundle["harness_key_authorization"]),
                                                3424), (h.msg1_len, h.msg2_len)
            v = [r for r in rig.cloud.requests if r["path"].endswith("/validate")]
            assert len(v) == 1 and v[0]["response"] == {"valid": True}, v
            hv = dict((k.lower(), val) for k, val in v[0]["headers"])
            assert hv.get("authorization") == "Bearer " + TOKEN, hv
            assert hv.get("x-codex-noise-stream-id") == h.stream_id, hv
            body = json.loads(v[0]["body"])
            assert list(body) == ["executor_registration_id", "harness_public_key",
                                  "harness_key_authorization"], list(body)
            assert body["harness_public_key"] == h.public_key
            assert v[0]["body"] == json.dumps(body, separators=(",", ":")).encode()
            init = h.request("initialize", {"clientName": "noise-blackbox"})
            assert init.get("sessionId"), init
            h.send({"method": "initialized", "params": {}})
            h.request("process/start", {"processId": "p1", "argv": ["/bin/echo", "via-noise"],
                                        "cwd": "file:///", "env": {}, "tty": False})
            out = read_output(h, "p1", b"via-noise")
            assert out == b"via-noise\n", out
            # A message bigger than one Noise record (60 KiB plaintext) spans several frames.
            tmp = tempfile.NamedTemporaryFile(prefix="execbb-noise-", delete=False)
            data = os.urandom(150000)
            tmp.write(data)
            tmp.close()
            try:
                r = h.request("fs/readFile", {"path": "file://" + tmp.name})
                assert base64.b64decode(r["dataBase64"]) == data
            finally:
                os.unlink(tmp.name)
            frames = [f for f in rig.cloud.frames if f["stream_id"] == h.stream_id]
            data_e2h = [f for f in frames if f["dir"] == "e2h" and f["body"] == "data"]
            assert max(len(f["raw"]) for f in data_e2h) <= 61456 + 64
            assert len([f for f in data_e2h if len(f["raw"]) > 61456]) >= 2
            for needle in ("process/start", "noise-blackbox", "via-noise", "initialize"):
                assert not rig.cloud.cleartext_hits(needle), "%r in clear" % needle
        finally:
            h.close()


@needs_own_server
def test_noise_authorization_is_checked(_):
    """The executor asks /validate and resets the stream unless it answers valid:true;
    a reused (single-use) authorization is refused."""
    import noise_client
    with Rig() as rig:
        rig.wait_connected()
        h = noise_harness(rig)
        auth = h.bundle["harness_key_authorization"]
        h.close()
        # Replay: same key material is not available to a new harness, so replay the
        # authorization with a fresh key: the fake answers valid:false (key mismatch, used).
        def refused(why, expect):
            try:
                noise_harness(rig).close()
            except noise_client.HarnessError as e:
                assert expect in str(e), (why, e)
                return
            raise AssertionError("handshake succeeded although " + why)

        rig.cloud.override_response("connect", harness_key_authorization=auth)
        refused("the authorization was replayed", "noise_relay_protocol_error")
        v = [r["response"] for r in rig.cloud.requests if r["path"].endswith("/validate")]
        assert v == [{"valid": True}, {"valid": False}], v
        rig.cloud.override_response("connect")
        rig.cloud.fail_next("validate", 403, "forbidden", "no")
        refused("/validate answered 403", "noise_relay_protocol_error")
        # 401 from /validate (the executor's own registry credential was refused): the
        # executor finishes the handshake with an authenticated rejection payload instead.
        rig.cloud.fail_next("validate", 401, "unauthorized", "no")
        refused("/validate answered 401", "codex-registry-authentication-rejected/v1")
        assert rig.cloud.environment_connected(ENV_ID)
        assert len(rig.registers()) == 1, "a refused harness must not cause a re-register"


@needs_own_server
def test_noise_resume_after_harness_drop(_):
    """The rendezvous drops a harness mid-command (and resets its stream towards the
    executor); a new harness resumes the session and reads the output produced meanwhile."""
    with Rig() as rig:
        rig.wait_connected()
        h = noise_harness(rig)
        try:
            sid = h.request("initialize", {"clientName": "resume-1"})["sessionId"]
            h.send({"method": "initialized", "params": {}})
            h.request("process/start", {"processId": "long", "argv": [
                "/bin/sh", "-c", "echo before; sleep 1; echo after"], "cwd": "file:///",
                "env": {}, "tty": False})
            assert rig.cloud.drop_harness(h.stream_id) == 1
        finally:
            h.close()
        # The executor is told through a reset frame on that stream (fake_cloud default).
        rig.wait(lambda c: [f for f in c.frames if f["stream_id"] == h.stream_id
                            and f["dir"] == "h2e" and f["body"] == "reset"], "reset sent")
        h2 = noise_harness(rig)
        try:
            r = h2.request("initialize", {"clientName": "resume-2", "resumeSessionId": sid})
            assert r["sessionId"] == sid, r
            h2.send({"method": "initialized", "params": {}})
            out = read_output(h2, "long", b"after")
            assert out == b"before\nafter\n", out
        finally:
            h2.close()


def _post(path, doc):
    body = json.dumps(doc)
    return ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (path, TOKEN, len(body), body))


@needs_own_server
def test_sigterm_exits_cleanly(_):
    with Rig() as rig:
        rig.wait_connected()
        rc = rig.ex.stop()
        assert rc == 0, "executor exit status %r after SIGTERM" % rc
        rig.wait(lambda c: not c.environment_connected(ENV_ID), "the socket to close", 5)


@needs_own_server
def test_fake_registry_checks(_):
    """The double itself: auth, body checks, offline/not-found, single-use authorizations
    bound to the registration and the harness key. Runs without any executor."""
    cloud = fake_cloud.FakeCloud(token=TOKEN)
    try:
        def post(path, doc, token=TOKEN):
            req = _post(path, doc)
            if token != TOKEN:
                req = req.replace("Bearer " + TOKEN, "Bearer " + token)
            st, _, body = http_raw(cloud.host, cloud.port, req)
            return st, json.loads(body)

        def key():
            return {"suite": fake_cloud.SUITE,
                    "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
                    "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}
        base = "/cloud/environment/e1/"
        ek, hk = key(), key()
        st, doc = post(base + "register", {"security_profile": "noise_hybrid_ik_v1",
                                           "executor_public_key": ek}, token="wrong")
        assert st == 401 and doc["error"]["code"] == "unauthorized", (st, doc)
        st, doc = post(base + "register", {"security_profile": "x", "executor_public_key": ek})
        assert st == 400 and "error" in doc
        st, doc = post(base + "connect", {"harness_public_key": hk})
        assert st == 404 and doc["error"]["code"] == "environment_not_found", doc
        st, reg = post(base + "register", {"security_profile": "noise_hybrid_ik_v1",
                                           "executor_public_key": ek})
        assert st == 200 and "role=environment&sig=" in reg["url"], reg
        st, doc = post(base + "connect", {"harness_public_key": hk})
        assert st == 409 and doc["error"]["code"] == "environment_offline", doc
        st, _, env_ws = fake_cloud.ws_connect(reg["url"])
        assert st == 101
        cloud.wait_for(lambda c: c.environment_connected("e1"), 5)
        st, bundle = post(base + "connect", {"harness_public_key": hk})
        assert st == 200 and bundle["executor_public_key"] == ek, bundle
        assert "role=harness&sig=" in bundle["url"]
        v = {"executor_registration_id": reg["executor_registration_id"],
             "harness_public_key": key(),
             "harness_key_authorization": bundle["harness_key_authorization"]}
        assert post(base + "validate", v) == (200, {"valid": False})  # other key
        v["harness_public_key"] = hk
        assert post(base + "validate", v) == (200, {"valid": True})
        assert post(base + "validate", v) == (200, {"valid": False})  # single use
        # A forged signature is refused at the upgrade.
        st, _, _ = fake_cloud.ws_connect(bundle["url"][:-4] + "0000")
        assert st == 401, st
        # Routing: harness frame -> environment; environment reply -> that harness only.
        st, _, h_ws = fake_cloud.ws_connect(bundle["url"])
        frame = fake_cloud.make_frame("sid-1", "resume")
        h_ws.send_binary(frame)
        op, got = env_ws.recv()
        assert (op, got) == (2, frame)
        reply = fake_cloud.make_frame("sid-1", "reset", fake_cloud.pb_len(1, b"r"))
        env_ws.send_binary(reply)
        assert h_ws.recv() == (2, reply)
        # 256 KiB cap: a bigger message closes the socket with 1009.
        h_ws.send_binary(b"\x08\x01" + fake_cloud.pb_len(2, b"big") + b"\x00" * (256 << 10))
        try:
            h_ws.recv()
            raise AssertionError("oversized message was accepted")
        except fake_cloud.WsClosed as e:
            assert "1009" in str(e) or "eof" in str(e) or "reset" in str(e), e
        env_ws.abort()
        h_ws.abort()
    finally:
        cloud.stop()


def test_standalone_prints_url_and_token(_):
    script = os.path.join(HERE, "..", "remote", "fake_cloud.py")
    p = subprocess.Popen([sys.executable, script, "--port", "0", "--token", "abc"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        import select as _select
        r, _, _ = _select.select([p.stdout], [], [], T)
        assert r, "no line from fake_cloud.py within %ss" % T
        line = p.stdout.readline().decode()
        m = re.match(r"^FAKE_CLOUD url=(http://127\.0\.0\.1:(\d+)) token=abc$", line.strip())
        assert m, line
        st, _, body = http_raw("127.0.0.1", int(m.group(2)), _post("/nope", {}))
        assert st == 404 and json.loads(body)["error"]["code"] == "not_found"
    finally:
        p.terminate()
        p.wait(10)
    assert p.returncode == 0, p.returncode


test_standalone_prints_url_and_token.own_server = True

if __name__ == "__main__":
    try:
        if not os.environ.get("EXEC_REMOTE_EXECUTOR"):
            codex_binary()  # install before the clock starts; exit 77 when npm cannot
    except TestSkip as e:
        print("SKIP: %s" % e)
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=90)
