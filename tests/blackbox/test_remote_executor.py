#!/usr/bin/env python3
"""Remote mode, executor side (issue 15): our `exec-server --remote URL --environment-id ID`
against tests/remote/fake_cloud.py (local registry + rendezvous), driven by the C harness
tests/remote/relay_harness.c (registry /connect, rendezvous socket, Noise initiator).

Checks: registration body and auth, JSON-RPC through the relay (process and fs) with no
cleartext on the wire, /readyz following the registration + relay connection, reconnect
after the rendezvous drops the socket and session resume on a new stream, a 4xx upgrade
re-registers, the rejected handshakes (wrong executor key, foreign prologue, harness key
the registry did not authorize, forged authorization, tampered record, replayed record)
and the 8-failure budget (a 10 s pause), no secrets in the log, usage errors. Every wait is bounded."""
import base64
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fake_cloud  # noqa

TOKEN = "tok-remote-test-5f2a"
ENV_ID = "env-rexec"
BUILD = os.environ.get("EXEC_BUILD_DIR", "")
RELAY_HARNESS = os.path.join(BUILD, "relay-harness")


def need_tools():
    if not SERVER_PATH or IS_REF:
        raise TestSkip("needs our exec-server (EXEC_SERVER)")
    if not os.access(RELAY_HARNESS, os.X_OK):
        raise TestSkip("relay-harness not built (EXEC_BUILD_DIR)")


class Executor:
    """Our executor in remote mode, with a local --listen for /readyz."""

    def __init__(self, cloud, extra=(), env_extra=None, listen=True):
        env = dict(os.environ, EXEC_SERVER_REMOTE_BACKOFF_MS="200")
        env.pop("CODEX_API_KEY", None)
        env.update(env_extra or {})
        cmd = WRAPPER + [SERVER_PATH, "--remote", cloud.base_url, "--environment-id", ENV_ID,
                         "--registration-bearer-stdin", "--log-level", "info"]
        if listen:
            cmd += ["--listen", "ws://127.0.0.1:0"]
        cmd += list(extra)
        self.errf = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errf, env=env)
        self.proc.stdin.write((TOKEN + "\n").encode())
        self.proc.stdin.flush()
        self.url = None
        if listen:
            r, _, _ = select.select([self.proc.stdout], [], [], DEFAULT_TIMEOUT)
            assert r, "executor printed no URL; stderr:\n" + self.stderr()
            self.url = self.proc.stdout.readline().decode().strip()
            assert self.url.startswith("ws://"), self.url + self.stderr()

    def readyz(self):
        host_port = self.url[len("ws://"):]
        try:
            with urllib.request.urlopen("http://%s/readyz" % host_port, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def stderr(self):
        self.errf.seek(0)
        return self.errf.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(DEFAULT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("executor did not stop on SIGTERM")
        self.proc.stdin.close()
        self.proc.stdout.close()
        err = self.stderr()
        assert self.proc.returncode == 0, "executor exit %s:\n%s" % (self.proc.returncode, err)
        assert "Sanitizer" not in err, err
        return err


class RelayHarness:
    """relay-harness as a JSON-RPC pipe: one message per line each way."""

    def __init__(self, cloud, mode="ok"):
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        self.proc = subprocess.Popen([RELAY_HARNESS, "--registry", cloud.base_url,
                                      "--environment-id", ENV_ID, "--token", TOKEN,
                                      "--mode", mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.buf = b""
        self.pending = []
        self.next_id = 100

    def outcome(self, timeout=DEFAULT_TIMEOUT):
        """Waits for the harness to end; returns (rc, stderr)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("relay-harness did not finish: " + err.decode())
        return self.proc.returncode, err.decode("utf-8", "replace")

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def recv(self, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not r:
                raise Timeout("no message from the executor within %ss" % timeout)
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                err = self.proc.stderr.read().decode("utf-8", "replace")
                raise ConnectionClosed("relay-harness ended: " + err)
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def request(self, method, params, timeout=DEFAULT_TIMEOUT):
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.pending):
                if m.get("id") == rid:
                    return self.pending.pop(i)
            m = self.recv(max(deadline - time.monotonic(), 0.01))
            if m.get("id") == rid:
                return m
            self.pending.append(m)

    def notifications(self, method, count, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        got = [m for m in self.pending if m.get("method") == method]
        while len(got) < count:
            m = self.recv(max(deadline - time.monotonic(), 0.01))
            self.pending.append(m)
            if m.get("method") == method:
                got.append(m)
        return got

    def initialize(self, resume=None):
        params = {"clientName": "relay-harness"}
        if resume:
            params["resumeSessionId"] = resume
        r = self.request("initialize", params)
        assert "result" in r, r
        self.send({"method": "initialized", "params": {}})
        return r["result"]["sessionId"]

    def close(self):
        rc, err = self.outcome()
        return rc, err


def with_cloud(cloud_kw=None, prepare=None, **ex_kw):
    """Runs fn(cloud, executor) with a fresh fake cloud (FakeCloud(**cloud_kw)) and our
    executor (Executor(cloud, **ex_kw)) connected to it; afterwards the executor must
    stop cleanly and its log must hold no secret. prepare(cloud), if given, runs before
    the executor starts and returns extra environment for it."""
    def deco(fn):
        def wrapper(_srv):
            need_tools()
            cloud = fake_cloud.FakeCloud(token=TOKEN, **(cloud_kw or {}))
            ex = None
            try:
                kw = dict(ex_kw)
                if prepare:
                    kw["env_extra"] = dict(kw.get("env_extra") or {}, **prepare(cloud))
                ex = Executor(cloud, **kw)
                cloud.wait_for(lambda c: c.environment_connected(ENV_ID), DEFAULT_TIMEOUT,
                               "the executor's rendezvous socket")
                fn(cloud, ex)
                err = ex.stop()
                for secret in (TOKEN, "hka-", "sig="):
                    assert secret not in err, "log line reveals %r:\n%s" % (secret, err)
            finally:
                if ex and ex.proc.poll() is None:
                    ex.proc.kill()
                if getattr(cloud, "front", None):
                    cloud.front.close()
                cloud.stop()
        wrapper.own_server = True
        wrapper.__name__ = fn.__name__
        wrapper.__code__ = wrapper.__code__.replace(co_firstlineno=fn.__code__.co_firstlineno)
        return wrapper
    return deco


@with_cloud()
def test_registers_and_serves_process_and_fs(cloud, ex):
    reg = [r for r in cloud.requests if r["path"].endswith("/register")]
    assert len(reg) == 1, reg
    hdrs = {k.lower(): v for k, v in reg[0]["headers"]}
    assert hdrs.get("authorization") == "Bearer " + TOKEN
    assert hdrs.get("content-type") == "application/json"
    body = reg[0]["json"]
    assert set(body) == {"security_profile", "executor_public_key"}, body
    assert body["security_profile"] == "noise_hybrid_ik_v1"
    up = [u for u in cloud.upgrades if u["role"] == "environment"][0]
    names = [k.lower() for k, _ in up["headers"]]
    assert names[:6] == ["host", "connection", "upgrade", "sec-websocket-version",
                         "sec-websocket-key", "x-request-id"], names
    assert "authorization" not in names
    assert ex.readyz() == 200
    h = RelayHarness(cloud)
    h.initialize()
    val = [r for r in cloud.requests if r["path"].endswith("/validate")]
    assert len(val) == 1, val
    vh = [(k.lower(), v) for k, v in val[0]["headers"]]
    names = [k for k, _ in vh]
    assert names.index("x-codex-noise-stream-id") < names.index("content-type") < \
        names.index("authorization") < names.index("accept"), names
    vd = dict(vh)
    assert vd["authorization"] == "Bearer " + TOKEN
    assert vd["x-codex-noise-stream-id"] in {f["stream_id"] for f in cloud.frames}, vd
    assert list(val[0]["json"]) == ["executor_registration_id", "harness_public_key",
                                    "harness_key_authorization"], val[0]["json"]
    r = h.request("process/start", {"processId": "p1", "argv": ["/bin/sh", "-c",
                                                                  "echo relay-hello"],
                                    "cwd": "/", "env": {}, "tty": False})
    assert r.get("result", {}).get("processId") == "p1", r
    h.notifications("process/closed", 1)
    out = b"".join(unb64(m["params"]["chunk"]) for m in h.pending
                   if m.get("method") == "process/output")
    assert out == b"relay-hello\n", out
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(os.urandom(200 * 1024))  # several Noise records each way
        path = f.name
    try:
        r = h.request("fs/readFile", {"path": "file://" + path})
        assert unb64(r["result"]["dataBase64"]) == open(path, "rb").read(), str(r)[:200]
    finally:
        os.unlink(path)
    # Harness -> executor spanning many records (the reassembly side).
    blob = os.urandom(700 * 1024)
    target = tempfile.mktemp(prefix="rexec-w-")
    try:
        r = h.request("fs/writeFile", {"path": "file://" + target,
                                       "dataBase64": base64.b64encode(blob).decode()})
        assert r.get("result") == {}, str(r)[:300]
        assert open(target, "rb").read() == blob
    finally:
        if os.path.exists(target):
            os.unlink(target)
    # Several streams at once on the one socket.
    others = [RelayHarness(cloud) for _ in range(4)]
    for o in others:
        o.initialize()
    for i, o in enumerate(others):
        r = o.request("process/start", {"processId": "q", "argv": ["/bin/echo", "s%d" % i],
                                        "cwd": "/", "env": {}, "tty": False})
        assert "result" in r, r
    for i, o in enumerate(others):
        o.notifications("process/closed", 1)
        out = b"".join(unb64(m["params"]["chunk"]) for m in o.pending
                       if m.get("method") == "process/output")
        assert out == b"s%d\n" % i, out
        assert o.close()[0] == 0
    for needle in ("initialize", "process/start", "relay-harness", "relay-hello"):
        assert not cloud.cleartext_hits(needle), "%r crossed the relay in clear" % needle
    rc, err = h.close()
    assert rc == 0, err


@with_cloud()
def test_reconnects_after_drop_and_resumes_session(cloud, ex):
    h = RelayHarness(cloud)
    sid = h.initialize()
    r = h.request("process/start", {"processId": "p1", "argv": ["/bin/sh", "-c",
                                                                  "sleep 1; echo after-drop"],
                                    "cwd": "/", "env": {}, "tty": False})
    assert "result" in r, r
    def env_upgrades(c):
        return len([u for u in c.upgrades if u["role"] == "environment"])
    n_up = env_upgrades(cloud)
    cloud.drop_environment(ENV_ID)
    h.outcome()  # its stream died with the executor's socket
    wait_until(lambda: ex.readyz() == 503 or env_upgrades(cloud) > n_up, 5, "readyz 503")
    cloud.wait_for(lambda c: env_upgrades(c) > n_up and c.environment_connected(ENV_ID),
                   DEFAULT_TIMEOUT, "reconnect")
    wait_until(lambda: ex.readyz() == 200, 5, "readyz 200 after reconnect")
    # Same registration (plain drop reuses the URL): one /register in all.
    assert len([r for r in cloud.requests if r["path"].endswith("/register")]) == 1
    h2 = RelayHarness(cloud)
    assert h2.initialize(resume=sid) == sid
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    out = b""
    while b"after-drop" not in out and time.monotonic() < deadline:
        r = h2.request("process/read", {"processId": "p1", "afterSeq": 0, "waitMs": 500})
        out = b"".join(unb64(c["chunk"]) for c in r["result"].get("chunks", []))
    assert b"after-drop" in out, r
    rc, err = h2.close()
    assert rc == 0, err
    # Said once, however often it reconnects (the events are info).
    line = "registered environment %s with %s and connected to its rendezvous" % (
        ENV_ID, cloud.base_url)
    assert ex.stderr().count(line) == 1, ex.stderr()


@with_cloud(extra=["--log-level", "notice"])
def test_says_once_that_it_is_registered(cloud, ex):
    """At the default log level a healthy executor says once that it registered and is
    connected (not again after a reconnect), and that it went offline and is back when it
    loses the rendezvous; its remote metric families have # HELP."""
    wait_until(lambda: "registered environment" in ex.stderr(), DEFAULT_TIMEOUT, "the notice")
    line = [l for l in ex.stderr().splitlines() if "registered environment" in l]
    assert len(line) == 1 and " notice " in line[0] and ENV_ID in line[0], line
    assert cloud.base_url in line[0] and "rendezvous" in line[0], line
    def env_upgrades(c):
        return len([u for u in c.upgrades if u["role"] == "environment"])
    n_up = env_upgrades(cloud)
    cloud.drop_environment(ENV_ID)
    cloud.wait_for(lambda c: env_upgrades(c) > n_up and c.environment_connected(ENV_ID),
                   DEFAULT_TIMEOUT, "reconnect")
    wait_until(lambda: ex.readyz() == 200, 5, "readyz 200 after reconnect")
    assert ex.stderr().count("registered environment") == 1, ex.stderr()
    assert "event=" not in ex.stderr(), ex.stderr()  # info events stay below the default
    wait_until(lambda: "remote: reconnected" in ex.stderr(), 5, "the notice of being back")
    lost = [l for l in ex.stderr().splitlines() if "remote: lost the rendezvous" in l]
    back = [l for l in ex.stderr().splitlines() if "remote: reconnected to the rendezvous" in l]
    assert len(lost) == 1 and " notice " in lost[0] and cloud.base_url in lost[0], ex.stderr()
    assert "offline, reconnecting" in lost[0], lost
    assert len(back) == 1 and " notice " in back[0] and "s offline" in back[0], ex.stderr()
    assert ex.stderr().index(lost[0]) < ex.stderr().index(back[0]), ex.stderr()
    host_port = ex.url[len("ws://"):]
    with urllib.request.urlopen("http://%s/metrics" % host_port, timeout=5) as r:
        text = r.read().decode()
    types = [l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")]
    helps = {l.split()[2] for l in text.splitlines() if l.startswith("# HELP ")}
    remote = [t for t in types if t.startswith("exec_server_remote_")]
    assert len(remote) == 5 and set(remote) <= helps, (remote, helps)


@with_cloud()
def test_upgrade_4xx_registers_again(cloud, ex):
    # A close frame (1001) first: the same URL again, no registration.
    cloud.drop_environment(ENV_ID, graceful=True)
    cloud.wait_for(lambda c: len([u for u in c.upgrades if u["role"] == "environment"]) == 2
                   and c.environment_connected(ENV_ID), DEFAULT_TIMEOUT, "reconnect after 1001")
    assert len([r for r in cloud.requests if r["path"].endswith("/register")]) == 1
    cloud.reject_upgrades(401, role="environment", count=1)
    cloud.drop_environment(ENV_ID)
    cloud.wait_for(lambda c: len([r for r in c.requests if r["path"].endswith("/register")]) == 2,
                   DEFAULT_TIMEOUT, "re-registration after a 401 upgrade")
    cloud.wait_for(lambda c: c.environment_connected(ENV_ID), DEFAULT_TIMEOUT, "reconnect")
    h = RelayHarness(cloud)
    h.initialize()
    rc, err = h.close()
    assert rc == 0, err


@with_cloud()
def test_rejects_bad_handshakes_and_records(cloud, ex):
    for mode, why in (("wrong-key", "bad_message1"), ("foreign-prologue", "bad_message1"),
                      ("unauthorized-key", "rejected"), ("bad-authorization", "rejected"),
                      ("tamper", "decrypt_failed"), ("replay", "decrypt_failed")):
        rc, err = RelayHarness(cloud, mode).outcome()
        assert rc == 3 and "RESULT reset noise_relay_protocol_error" in err, (mode, rc, err)
        assert ("RESULT open" in err) == (mode in ("tamper", "replay")), (mode, err)
        wait_until(lambda: "noise_reason=" + why in ex.stderr(), 5, "log of " + mode)
    # Four handshake failures so far: the socket stays, and a good harness works.
    assert cloud.environment_connected(ENV_ID)
    h = RelayHarness(cloud)
    h.initialize()
    rc, err = h.close()
    assert rc == 0, err


@with_cloud()
def test_failure_budget_pauses_handshakes(cloud, ex):
    """As 0.169.0 (docs/REMOTE.md §8.5a): the 8th failed handshake pauses every
    handshake for about 10 s, a valid one included; the rendezvous socket stays."""
    n_up = len([u for u in cloud.upgrades if u["role"] == "environment"])
    for _ in range(8):
        rc, err = RelayHarness(cloud, "wrong-key").outcome()
        assert rc in (3, 4), err
    t_paused = time.monotonic()
    wait_until(lambda: "pausing Noise relay handshakes" in ex.stderr(), DEFAULT_TIMEOUT,
               "the pause in the log")
    rc, err = RelayHarness(cloud).outcome()
    assert rc == 3 and "RESULT reset" in err, (rc, err)
    assert time.monotonic() - t_paused < 10, "too slow to see the pause"
    # Still paused until 10 s after the 8th failure, then a valid harness gets through.
    def opens():
        h = RelayHarness(cloud)
        try:
            h.initialize()
        except (AssertionError, ConnectionClosed, Timeout):
            h.outcome()
            return False
        rc, err = h.close()
        assert rc == 0, err
        return True
    wait_until(opens, DEFAULT_TIMEOUT * 3, "handshakes accepted again", interval=1.0)
    assert time.monotonic() - t_paused >= 9.5, "the pause ended early"
    # The socket was never closed: still the first environment upgrade.
    assert len([u for u in cloud.upgrades if u["role"] == "environment"]) == n_up


class TlsFront:
    """A TLS terminator in front of the fake rendezvous: wss://127.0.0.1:PORT -> the
    fake's plain port, one thread pair per connection. The registry is patched to hand
    the executor wss:// URLs; the executor trusts the test CA through SSL_CERT_FILE."""

    def __init__(self, cloud, d):
        import ssl
        import socket as so
        import threading
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        "k.pem", "-out", "c.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], cwd=d, check=True,
                       capture_output=True)
        self.ca = os.path.join(d, "c.pem")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.ca, os.path.join(d, "k.pem"))
        self.lsock = so.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.handshakes = 0

        def pump(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            for s_ in (a, b):
                try:
                    s_.shutdown(so.SHUT_RDWR)
                except OSError:
                    pass

        def accept():
            while True:
                try:
                    raw, _ = self.lsock.accept()
                except OSError:
                    return
                try:
                    tls = ctx.wrap_socket(raw, server_side=True)
                except (OSError, ssl.SSLError):
                    raw.close()
                    continue
                self.handshakes += 1
                up = so.create_connection((cloud.host, cloud.port))
                threading.Thread(target=pump, args=(tls, up), daemon=True).start()
                threading.Thread(target=pump, args=(up, tls), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        orig = cloud._ws_url

        def wss_url(kind, env, role, reg):
            u = orig(kind, env, role, reg)
            if role != "environment":
                return u
            return u.replace("ws://%s:%d" % (cloud.host, cloud.port),
                             "wss://127.0.0.1:%d" % self.port)
        cloud._ws_url = wss_url

    def close(self):
        self.lsock.close()


def tls_front(cloud):
    cloud.front = TlsFront(cloud, tempfile.mkdtemp(prefix="rexec-tls-"))
    return {"SSL_CERT_FILE": cloud.front.ca}


@with_cloud(prepare=tls_front)
def test_wss_rendezvous(cloud, ex):
    """The executor's rendezvous socket over TLS (wss://, OpenSSL memory BIOs)."""
    front = cloud.front
    assert front.handshakes >= 1
    h = RelayHarness(cloud)
    h.initialize()
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(os.urandom(300 * 1024))
        path = f.name
    try:
        r = h.request("fs/readFile", {"path": "file://" + path})
        assert unb64(r["result"]["dataBase64"]) == open(path, "rb").read()
    finally:
        os.unlink(path)
    rc, err = h.close()
    assert rc == 0, err
    assert "wss://127.0.0.1:%d/cloud-agent" % front.port in ex.stderr()
    # Without the CA the certificate is refused: no connection, not ready, retrying.
    ex2 = Executor(cloud, env_extra={"SSL_CERT_FILE": "/nonexistent"})
    try:
        n = front.handshakes
        wait_until(lambda: "connect_failed" in ex2.stderr(), DEFAULT_TIMEOUT,
                   "the connection without the CA to fail")
        assert ex2.readyz() == 503
        assert front.handshakes == n, "a TLS session was established without the CA"
        ex2.stop()
    finally:
        if ex2.proc.poll() is None:
            ex2.proc.kill()




@with_cloud(cloud_kw={"reset_on_harness_close": True}, extra=["--max-queued-bytes", "2M"])
def test_slow_harness_is_closed_by_the_backlog_limit(cloud, ex):
    """A harness that stops reading while its process floods stdout: the stream's queued
    bytes pass --max-queued-bytes and the executor drops that stream (its output stays
    resumable) without harm to the server. The fake resets a departing harness's stream
    towards the executor (as a reconnecting client does), so the session resumes."""
    h = RelayHarness(cloud)
    sid = h.initialize()
    h.request("process/start", {"processId": "big", "argv": ["/usr/bin/head", "-c",
                                                             "200000000", "/dev/zero"],
                                "cwd": "/", "env": {}, "tty": False})
    # Stop reading: relay-harness blocks on its stdout, the relay backs up.
    wait_until(lambda: "slow client" in ex.stderr() or "over the limit" in ex.stderr(),
               30, "the backlog limit to act")
    h.proc.kill()
    h.proc.wait()
    h2 = RelayHarness(cloud)
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    while True:
        r = h2.request("initialize", {"clientName": "t", "resumeSessionId": sid})
        if "result" in r or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # sleep-ok: the retry interval, against the deadline above
    assert r.get("result", {}).get("sessionId") == sid, r
    h2.send({"method": "initialized", "params": {}})
    r = h2.request("process/terminate", {"processId": "big"})
    assert "result" in r or "error" in r, r
    assert h2.close()[0] == 0




@with_cloud(cloud_kw={"answer_pings": False},
            env_extra={"EXEC_SERVER_REMOTE_PING_MS": "150", "EXEC_SERVER_REMOTE_PONG_MS": "300"})
def test_pong_deadline_reconnects(cloud, ex):
    """A rendezvous that never answers pings: the executor closes after the pong deadline
    (shortened here) and reconnects with the same URL; /metrics counts the reason."""
    cloud.wait_for(lambda c: len([u for u in c.upgrades if u["role"] == "environment"]) >= 2,
                   DEFAULT_TIMEOUT, "a reconnect after the pong deadline")
    pings = [e for e in cloud.events if e[1] == "ping"]
    assert pings and all(e[2][1] == b"" for e in pings), pings[:3]
    assert len([r for r in cloud.requests if r["path"].endswith("/register")]) == 1
    host_port = ex.url[len("ws://"):]
    with urllib.request.urlopen("http://%s/metrics" % host_port, timeout=5) as r:
        text = r.read().decode()
    line = [l for l in text.splitlines()
            if l.startswith('exec_server_remote_reconnects_total{reason="pong_timeout"}')]
    assert line and int(line[0].split()[-1]) >= 1, line




def so_free_port():
    """A loopback port nobody listens on (bound, then closed)."""
    import socket as so
    s = so.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_usage_and_registration_errors(_srv):
    need_tools()
    def run(args, stdin=b""):
        p = subprocess.run([SERVER_PATH] + args, input=stdin, capture_output=True,
                           timeout=DEFAULT_TIMEOUT)
        return p.returncode, p.stderr.decode()
    rc, err = run(["--remote", "http://127.0.0.1:9"])
    assert rc == 2 and "--environment-id" in err, err
    rc, err = run(["--environment-id", "x"])
    assert rc == 2 and "--remote" in err, err
    rc, err = run(["--remote", "http://127.0.0.1:9", "--environment-id", "x",
                   "--remote-transport", "direct"])
    assert rc == 2 and "--aws-sigv4" in err, err  # as 0.169.0: direct needs SigV4
    rc, err = run(["--remote", "http://127.0.0.1:9", "--environment-id", "x",
                   "--remote-transport", "quic"])
    assert rc == 2 and "noise" in err, err
    rc, err = run(["--remote", "http://127.0.0.1:9", "--environment-id", "x",
                   "--registration-bearer-stdin"])
    assert rc == 1 and "newline-terminated registration bearer" in err, err
    rc, err = run(["--remote", "http://127.0.0.1:9", "--environment-id", "x",
                   "--registration-bearer-stdin"], stdin=b" padded\n")
    assert rc == 1 and "invalid registration bearer" in err, err
    rc, err = run(["--remote", "http://127.0.0.1:9", "--environment-id", "a/b",
                   "--registration-bearer-stdin"], stdin=b"t\n")
    assert rc == 2 and "--environment-id" in err, err
    env = dict(os.environ, CODEX_API_KEY="k")
    p = subprocess.run([SERVER_PATH, "--remote", "http://example.com", "--environment-id", "x"],
                       env=env, capture_output=True, timeout=DEFAULT_TIMEOUT)
    assert p.returncode == 1 and b"loopback" in p.stderr, p.stderr
    rc, _ = run(["--help"])
    assert rc == 0
    # An unreachable registry: the exit says where and why (libcurl's words).
    dead = so_free_port()
    rc, err = run(["--remote", "http://127.0.0.1:%d" % dead, "--environment-id", "x",
                   "--registration-bearer-stdin"], stdin=b"t\n")
    assert rc == 1 and "registry at http://127.0.0.1:%d failed" % dead in err, err
    assert "could not be reached (" in err and "onnect" in err, err
    # SIGTERM while the registry has not answered yet: out at once, status 0.
    import socket as so
    silent = so.create_server(("127.0.0.1", 0))
    try:
        p = subprocess.Popen([SERVER_PATH, "--remote", "http://127.0.0.1:%d" %
                              silent.getsockname()[1], "--environment-id", ENV_ID,
                              "--registration-bearer-stdin"], stdin=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdin.write(b"t\n")
        p.stdin.flush()
        # Its registration connects once the loop runs (signal handlers in place).
        silent.settimeout(DEFAULT_TIMEOUT)
        held, _ = silent.accept()
        t0 = time.monotonic()
        p.terminate()
        _, err = p.communicate(timeout=DEFAULT_TIMEOUT)
        assert p.returncode == 0 and time.monotonic() - t0 < 3, (p.returncode, err)
        held.close()
    finally:
        silent.close()
    cloud = fake_cloud.FakeCloud(token=TOKEN)
    try:
        cloud.fail_next("register", 503, "unavailable", "try later", count=100)
        rc, err = run(["--remote", cloud.base_url, "--environment-id", ENV_ID,
                       "--registration-bearer-stdin"], stdin=(TOKEN + "\n").encode())
        assert rc == 1 and "registration with the registry at %s failed" % cloud.base_url \
            in err and "HTTP status 503" in err, (rc, err)
        assert TOKEN not in err
        cloud.failures.clear()
        cloud.fail_next("register", 307, "moved", "elsewhere")
        rc, err = run(["--remote", cloud.base_url, "--environment-id", ENV_ID,
                       "--registration-bearer-stdin"], stdin=(TOKEN + "\n").encode())
        assert rc == 1 and "redirect (not followed)" in err, (rc, err)
        rc, err = run(["--remote", cloud.base_url, "--environment-id", ENV_ID,
                       "--registration-bearer-stdin"], stdin=b"wrong-token\n")
        assert rc == 1 and "refused our credentials" in err, (rc, err)
    finally:
        cloud.stop()


test_usage_and_registration_errors.own_server = True


def test_reference_executor_through_relay_harness(_srv):
    """Interop the other way: the reference executor registered with the fake registry,
    driven by our harness code (relay-harness) through the fake rendezvous; the same
    rejections hold."""
    need_tools()
    ref = find_reference()
    if not ref:
        raise TestSkip("reference codex not installed (make bench installs it)")
    cloud = fake_cloud.FakeCloud(token=TOKEN)
    home = tempfile.mkdtemp(prefix="rxhome-", dir="/var/tmp")
    env = dict(os.environ, CODEX_HOME=home, CODEX_API_KEY=TOKEN, RUST_LOG="warn")
    proc = subprocess.Popen([ref, "exec-server", "--remote", cloud.base_url,
                             "--environment-id", ENV_ID], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cloud.wait_for(lambda c: c.environment_connected(ENV_ID), DEFAULT_TIMEOUT,
                       "the reference's rendezvous socket")
        h = RelayHarness(cloud)
        h.initialize()
        r = h.request("process/start", {"processId": "p1", "argv": ["/bin/sh", "-c",
                                                                      "echo ref-hello"],
                                        "cwd": "file:///", "env": {}, "tty": False})
        assert "result" in r, r
        h.notifications("process/closed", 1)
        out = b"".join(unb64(m["params"]["chunk"]) for m in h.pending
                       if m.get("method") == "process/output")
        assert out == b"ref-hello\n", out
        rc, err = h.close()
        assert rc == 0, err
        for mode in ("wrong-key", "foreign-prologue", "unauthorized-key", "bad-authorization",
                     "tamper", "replay"):
            rc, err = RelayHarness(cloud, mode).outcome()
            assert rc == 3 and "RESULT reset noise_relay_protocol_error" in err, (mode, rc, err)
    finally:
        proc.terminate()
        try:
            proc.wait(DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        cloud.stop()


test_reference_executor_through_relay_harness.own_server = True

if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=90)
