#!/usr/bin/env python3
"""`exec-server registry` against bad input (issue 37), on SQLite. Most scenarios play
the executor and the harness themselves (a well-formed executor key is all the
registry checks; its relay never decrypts), so each frame and each answer is seen
exactly; two use our real executor and exec-client.

  tokens          unknown, malformed, revoked, expired, another environment's, another
                  role's: 401/403 with the error shape at /register, /connect and
                  /validate; the database holds no token secret; a revoked executor
                  token's socket is closed within a heartbeat
  urls            a rendezvous URL with a wrong signature, for another environment,
                  expired, or used twice (single use): 401
  frames          routed unchanged both ways; a malformed frame or a text message
                  from a harness closes that harness (1002/1003) and nothing else; a
                  frame over 256 KiB closes with 1009; a harness that never sends is
                  closed after --claim-timeout; a departing harness makes the
                  executor see reset{harness_disconnected}
  executor gone   mid-stream: the harness gets reset{environment_disconnected} and a
                  close, /connect says 409 environment_offline until it returns; with
                  exec-client and our executor, a command started before the cut
                  finishes and its output arrives after the resume
  limits          streams per environment, pending bundles, the /connect rate per
                  token (another token is still served), HTTP framing errors
  database        locked by another writer: 503 with the error shape, no crash,
                  relaying goes on, served again once released
  operators       /readyz, /metrics, one log line per registration, connect and
                  refusal, and no secret or payload in the log"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fake_cloud  # noqa: E402
import fleet_lib  # noqa: E402
import remote_testlib  # noqa: E402

SERVER = remote_testlib.our_server()
SUITE = "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256"


def key():
    return {"suite": SUITE, "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
            "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}


def post(base, path, body, token=None, ctype="application/json", raw=None, ca=None):
    """(status, decoded JSON or text, headers) of one POST (https: trusting ca)."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST")
    if ctype:
        req.add_header("content-type", ctype)
    if token:
        req.add_header("authorization", "Bearer " + token)
    try:
        import ssl
        ctx = ssl.create_default_context(cafile=ca) if ca else None
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            status, text, headers = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, text, headers = e.code, e.read(), e.headers
    try:
        return status, json.loads(text), headers
    except ValueError:
        return status, text.decode("utf-8", "replace"), headers


def error_code(doc):
    assert isinstance(doc, dict) and set(doc) == {"error"}, doc
    assert set(doc["error"]) == {"code", "message"} and doc["error"]["message"], doc
    return doc["error"]["code"]


class Fleet:
    """A registry with an environment, its two tokens and helpers to play the parts."""

    def __init__(self, args=(), env_id="env-a"):
        self.dir = tempfile.mkdtemp(prefix="execbb-fleet-reg-")
        self.db = os.path.join(self.dir, "fleet.db")
        self.reg = fleet_lib.Registry(SERVER, "sqlite:" + self.db, args=list(args),
                                      wrapper=WRAPPER)
        self.url, self.env = self.reg.url, env_id
        self.ex_token = self.reg.token(env_id, "executor")
        self.h_token = self.reg.token(env_id, "harness")
        self.socks = []
        self.log = None

    def register(self, token=None, env=None):
        return post(self.url, "/cloud/environment/%s/register" % (env or self.env),
                    {"security_profile": "noise_hybrid_ik_v1", "executor_public_key": key()},
                    token or self.ex_token)

    def executor(self):
        """Registers and attaches a played executor: (registration doc, socket)."""
        st, doc, _ = self.register()
        assert st == 200, doc
        status, _, ws = fake_cloud.ws_connect(doc["url"])
        assert status == 101, status
        self.socks.append(ws)
        return doc, ws

    def connect(self, token=None, env=None):
        return post(self.url, "/cloud/environment/%s/connect" % (env or self.env),
                    {"harness_public_key": key()}, token or self.h_token)

    def harness(self):
        st, doc, _ = self.connect()
        assert st == 200, doc
        status, _, ws = fake_cloud.ws_connect(doc["url"])
        assert status == 101, status
        self.socks.append(ws)
        return doc, ws

    def close(self, check=True):
        """Stops the registry (once) and returns its log."""
        if self.log is None:
            for s in self.socks:
                s.abort()
            self.log = self.reg.stop(check=check)
        return self.log

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        self.close(check=exc_type is None)
        return False


def recv(ws, timeout=10.0):
    """The next data message, or ('closed', reason) when the socket ended."""
    ws.sock.settimeout(timeout)
    try:
        return ws.recv()
    except fake_cloud.WsClosed as e:
        return "closed", str(e)
    except socket.timeout:
        return "timeout", None


def frame(stream, body, inner=b""):
    return fake_cloud.make_frame(stream, body, inner)


def data_frame(stream, payload):
    return frame(stream, "data", b"\x18\x01" + fake_cloud.pb_len(4, payload))


def reset_reason(msg):
    op, payload = msg
    f = fake_cloud.parse_frame(payload)
    assert f["body"] == "reset", f
    return f["stream_id"], f["body_bytes"][2:].decode()


@needs_own_server
def test_tokens(_):
    with Fleet(args=["--heartbeat-interval", "0.3"]) as fl:
        other_h = fl.reg.token("env-b", "harness")
        expiring = fl.reg.token(fl.env, "harness", expires="1s")
        revoked = fl.reg.token(fl.env, "harness")
        rid = revoked[5:21]
        fl.reg.cli("token", "revoke", rid)
        fake = "exrt_%s_%s" % ("0" * 16, "1" * 64)
        # the executor's endpoints
        for tok, status, code in ((None, 401, "unauthorized"), ("garbage", 401, "unauthorized"),
                                  (fake, 401, "unauthorized"), (fl.h_token, 403, "forbidden"),
                                  (fl.reg.token("env-b", "executor"), 403, "forbidden")):
            st, doc, _ = post(fl.url, "/cloud/environment/%s/register" % fl.env,
                              {"security_profile": "noise_hybrid_ik_v1",
                               "executor_public_key": key()}, tok)
            assert (st, error_code(doc)) == (status, code), (tok, st, doc)
        doc, ws = fl.executor()
        time.sleep(1.1)  # sleep-ok: let the 1 s token expire
        for tok, status, reason in ((fake, 401, "unknown_token"), (revoked, 401, "revoked_token"),
                                    (expiring, 401, "expired_token"),
                                    (other_h, 403, "wrong_environment"),
                                    (fl.ex_token, 403, "wrong_role"),
                                    (fl.h_token[:-1] + ("1" if fl.h_token[-1] == "0" else "0"),
                                     401, "unknown_token")):
            st, d, _ = fl.connect(tok)
            assert st == status and error_code(d) in ("unauthorized", "forbidden"), (reason, st, d)
            fl.reg.wait_log(r"event=refusal what=connect .*reason=%s" % reason)
        st, d, _ = fl.connect()
        assert st == 200, d
        # /validate with a harness token is refused; with ours it answers
        vbody = {"executor_registration_id": doc["executor_registration_id"],
                 "harness_public_key": key(), "harness_key_authorization": "hka1.1.2.3"}
        st, v, _ = post(fl.url, "/cloud/environment/%s/validate" % fl.env, vbody, fl.h_token)
        assert st == 403, v
        st, v, _ = post(fl.url, "/cloud/environment/%s/validate" % fl.env, vbody, fl.ex_token)
        assert (st, v) == (200, {"valid": False}), v
        # nothing secret at rest: no token's secret half is in the database file
        blob = open(fl.db, "rb").read() + open(fl.db + "-wal", "rb").read()
        for t in (fl.ex_token, fl.h_token, expiring):
            assert t[22:].encode() not in blob, "a token secret is stored in clear"
        # revoking the executor's token closes its socket within a heartbeat
        fl.reg.cli("token", "revoke", fl.ex_token[5:21])
        kind, why = recv(ws, 10)
        assert kind == "closed", (kind, why)
        st, _, _ = fake_cloud.ws_connect(doc["url"])
        assert st == 401, st
        log = fl.close()
        for t in (fl.ex_token, fl.h_token, expiring, revoked):
            assert t[22:] not in log, "a token secret in the log"


@needs_own_server
def test_rendezvous_urls(_):
    with Fleet(args=["--bundle-ttl", "1"]) as fl:
        doc, env_ws = fl.executor()
        st, c, _ = fl.connect()
        url = c["url"]
        assert "role=harness" in url and "sig=" in url
        # a wrong signature, another environment's path, no signature
        bad_sig = re.sub(r"sig=([0-9a-f])", lambda m: "sig=" + ("0" if m.group(1) != "0" else "1"),
                         url)
        for u in (bad_sig, url.replace("/environment/%s?" % fl.env, "/environment/env-b?"),
                  url.split("&sig=")[0]):
            status, _, ws = fake_cloud.ws_connect(u)
            assert status == 401 and ws is None, (u, status)
        # single use: the first upgrade works, the replay is refused
        status, _, ws = fake_cloud.ws_connect(url)
        assert status == 101
        fl.socks.append(ws)
        status, _, _ = fake_cloud.ws_connect(url)
        assert status == 401, status
        fl.reg.wait_log(r"reason=replayed_url")
        # expired: a bundle older than --bundle-ttl
        st, c2, _ = fl.connect()
        time.sleep(2.1)  # sleep-ok: let the 1 s bundle expire (URL expiry has 1 s steps)
        status, _, _ = fake_cloud.ws_connect(c2["url"])
        assert status == 401, status
        fl.reg.wait_log(r"reason=expired_url")
        # the executor's own URL, tampered
        status, _, _ = fake_cloud.ws_connect(doc["url"].replace("reg=", "reg=x"))
        assert status == 401


@needs_own_server
def test_frames(_):
    with Fleet(args=["--claim-timeout", "1"]) as fl:
        _, env_ws = fl.executor()
        _, h = fl.harness()
        # routed unchanged both ways
        resume = frame("s-1", "resume")
        h.send_binary(resume)
        assert recv(env_ws) == (2, resume)
        back = data_frame("s-1", b"\x01" * 1000)
        env_ws.send_binary(back)
        assert recv(h) == (2, back)
        # a frame of the executor for a stream nobody holds goes nowhere (and nothing breaks)
        env_ws.send_binary(data_frame("nobody", b"x"))
        env_ws.send_binary(b"\xff\xff not protobuf")
        env_ws.send_text("text from the executor")
        env_ws.send_binary(back)
        assert recv(h) == (2, back)
        # a malformed frame from a harness closes that harness only
        _, h2 = fl.harness()
        h2.send_binary(b"\x08\x02\x12\x03abc")  # version 2
        assert recv(h2) == ("closed", "close 1002")
        _, h3 = fl.harness()
        h3.send_text("hello")
        assert recv(h3) == ("closed", "close 1003")
        # an oversized frame (over 256 KiB): 1009
        _, h4 = fl.harness()
        h4.send_binary(data_frame("s-4", os.urandom(300 * 1024)))
        assert recv(h4) == ("closed", "close 1009")
        # the first harness still works
        h.send_binary(data_frame("s-1", b"still here"))
        assert recv(env_ws) == (2, data_frame("s-1", b"still here"))
        # a harness that never sends is closed after --claim-timeout
        t0 = time.monotonic()
        _, h5 = fl.harness()
        assert recv(h5, 10) == ("closed", "close 1008")
        assert time.monotonic() - t0 < 5
        fl.reg.wait_log(r"reason=claim_timeout")
        # the first harness leaves: the executor hears reset{harness_disconnected}
        h.abort()
        assert reset_reason(recv(env_ws)) == ("s-1", "harness_disconnected")
        assert fl.reg.metric('exec_registry_refusals_total{reason="malformed_frame"}') >= 2
        assert fl.reg.metric('exec_registry_refusals_total{reason="unknown_stream"}') >= 1


@needs_own_server
def test_executor_vanishes_mid_stream(_):
    with Fleet() as fl:
        doc, env_ws = fl.executor()
        _, h = fl.harness()
        h.send_binary(frame("s-1", "resume"))
        recv(env_ws)
        env_ws.abort()  # gone without a close frame
        sid, reason = reset_reason(recv(h))
        assert (sid, reason) == ("s-1", "environment_disconnected")
        assert recv(h) == ("closed", "close 1001")
        fl.reg.wait_log(r"event=detach environment=%s " % fl.env)
        st, d, _ = fl.connect()
        assert st == 409 and error_code(d) == "environment_offline", d
        # it returns with the same URL: served again
        status, _, env2 = fake_cloud.ws_connect(doc["url"])
        assert status == 101
        fl.socks.append(env2)
        _, h2 = fl.harness()
        h2.send_binary(frame("s-2", "resume"))
        assert recv(env2) == (2, frame("s-2", "resume"))


@needs_own_server
def test_real_executor_vanishes_and_the_harness_resumes(_):
    """Our executor behind a proxy that the test cuts while exec-client's command runs:
    the client gets a reset, reconnects through /connect (409 until the executor is
    back), resumes its session and prints what the command wrote meanwhile."""
    client = remote_testlib.find_build_file("exec-client")
    if client is None:
        raise TestSkip("exec-client is not built")
    env_proxy = fleet_lib.RecordingProxy()
    fl = Fleet(args=["--environment-url", env_proxy.url])
    env_proxy.target = ("127.0.0.1", fl.reg.port)
    ex = fleet_lib.Executor(SERVER, fl.url, fl.env, fl.ex_token, wrapper=WRAPPER)
    try:
        fl.reg.wait_attached(fl.env)
        out = tempfile.TemporaryFile()
        p = subprocess.Popen([client, "--remote", fl.url, "--environment-id", fl.env,
                              "--token", fl.h_token, "--reconnect-ms", "30000", "run",
                              "echo before; sleep 3; echo after-the-cut"],
                             stdout=out, stderr=subprocess.PIPE)
        fl.reg.wait_log(r"event=stream_open environment=%s" % fl.env)
        time.sleep(1)  # sleep-ok: the command is in its sleep when the socket goes
        assert env_proxy.cut() >= 1
        rc = p.wait(60)
        out.seek(0)
        text = out.read().decode()
        err = p.stderr.read().decode()
        assert rc == 0 and "before" in text and "after-the-cut" in text, (rc, text, err,
                                                                          fl.reg.log()[-3000:])
        assert fl.reg.count(r"event=attach environment=%s " % fl.env) >= 2
        assert fl.reg.count(r"event=connect environment=%s " % fl.env) >= 2
    finally:
        ex.stop()
        env_proxy.close()
        fl.close()


@needs_own_server
def test_limits(_):
    with Fleet(args=["--max-streams-per-environment", "2", "--max-pending-bundles", "3"]) as fl:
        _, env_ws = fl.executor()
        _, h = fl.harness()
        for sid in ("a", "b"):
            h.send_binary(frame(sid, "resume"))
            assert recv(env_ws) == (2, frame(sid, "resume"))
        h.send_binary(frame("c", "resume"))
        assert reset_reason(recv(h)) == ("c", "too_many_streams")
        # a stream id another harness holds is not routed
        _, h2 = fl.harness()
        h2.send_binary(data_frame("a", b"hijack"))
        h.send_binary(data_frame("a", b"mine"))
        assert recv(env_ws) == (2, data_frame("a", b"mine"))
        # pending bundles: the two used above are gone, three unused are allowed
        statuses = [fl.connect()[0] for _ in range(3)]
        st, d, _ = fl.connect()
        assert statuses == [200, 200, 200] and st == 429, (statuses, st, d)
        assert error_code(d) == "too_many_pending_bundles", d
    # a flood of /connect from one token is throttled; another token is served
    with Fleet(args=["--connect-rate", "1", "--connect-burst", "3"]) as fl:
        fl.executor()
        statuses = [fl.connect()[0] for _ in range(3)]
        st, d, hdr = fl.connect()
        assert statuses == [200, 200, 200] and st == 429, (statuses, st, d)
        assert error_code(d) == "rate_limited" and int(hdr.get("retry-after")) >= 1, d
        other = fl.reg.token(fl.env, "harness")
        st, d, _ = fl.connect(other)
        assert st == 200, d
        assert fl.reg.count(r"reason=rate_limited") == 1  # one line per burst


@needs_own_server
def test_http_errors(_):
    with Fleet() as fl:
        base = "/cloud/environment/%s/register" % fl.env
        cases = [
            (post(fl.url, base, None, fl.ex_token, raw=b"{not json"), 400),
            (post(fl.url, base, {"security_profile": "noise_hybrid_ik_v1"}, fl.ex_token), 400),
            (post(fl.url, base, {"security_profile": "other", "executor_public_key": key()},
                  fl.ex_token), 400),
            (post(fl.url, base, {"security_profile": "noise_hybrid_ik_v1",
                                 "executor_public_key": key(), "extra": 1}, fl.ex_token), 400),
            (post(fl.url, base, {"security_profile": "noise_hybrid_ik_v1",
                                 "executor_public_key": dict(key(), suite="x")}, fl.ex_token),
             400),
            (post(fl.url, base, None, fl.ex_token, ctype="text/plain", raw=b"{}"), 400),
            (post(fl.url, base, None, fl.ex_token, raw=b"x" * (65 * 1024)), 413),
            (post(fl.url, "/cloud/environment/a%2Fb/register", {}, fl.ex_token), 404),
            (post(fl.url, "/cloud/environment/%s/nothing" % fl.env, {}, fl.ex_token), 404),
            (post(fl.url, "/elsewhere", {}, fl.ex_token), 404),
        ]
        for (st, doc, _), want in cases:
            assert st == want, (st, doc)
            error_code(doc)
        r = http_raw("127.0.0.1", fl.reg.port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % base.encode())
        assert r[0] == 405, r
        r = http_raw("127.0.0.1", fl.reg.port, b"GARBAGE\r\n\r\n")
        assert r[0] == 400, r


@needs_own_server
def test_database_locked_by_another_writer(_):
    with Fleet() as fl:
        _, env_ws = fl.executor()
        _, h = fl.harness()
        h.send_binary(frame("s-1", "resume"))
        recv(env_ws)
        lock = sqlite3.connect(fl.db, isolation_level=None, timeout=10)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            st, d, _ = fl.connect()
            assert st == 503 and error_code(d) == "database_unavailable", (st, d)
            # the established relay does not need the database
            h.send_binary(data_frame("s-1", b"during the outage"))
            assert recv(env_ws) == (2, data_frame("s-1", b"during the outage"))
            assert fl.reg.proc.poll() is None
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        st, d, _ = fl.connect()
        assert st == 200, d


@needs_own_server
def test_operators(_):
    with Fleet(args=["--heartbeat-interval", "0.2"]) as fl:
        assert fleet_lib.readyz(fl.url) == 200
        _, env_ws = fl.executor()
        _, h = fl.harness()
        h.send_binary(data_frame("s-1", b"secret payload bytes"))
        assert recv(env_ws)[0] == 2
        fl.reg.wait_log(r"event=stream_open")
        assert fl.reg.metric("exec_registry_environments_online") == 1
        assert fl.reg.metric("exec_registry_streams_open") == 1
        assert fl.reg.metric('exec_registry_relayed_frames_total{direction="to_environment"}') >= 1
        fl.connect(fl.ex_token)  # one refusal
        metrics = urllib.request.urlopen(fl.url + "/metrics", timeout=10).read().decode()
        assert 'exec_registry_refusals_total{reason="wrong_role"} 1' in metrics, metrics
        assert fl.env not in metrics and fl.h_token[5:21] not in metrics
        fleet_lib.poll_until(  # the stream count reaches the database with the next heartbeat
            lambda: re.search(r"^%s\s+yes\s+\S+\s+\S+\s+1$" % fl.env,
                              fl.reg.cli("environments", "--heartbeat-interval",
                                         "0.2").stdout.decode(), re.M), 10,
            "environments to show the stream")
        log = fl.close()
        for event in ("event=register", "event=attach", "event=connect", "event=refusal"):
            assert event in log, (event, log)
        assert "secret payload bytes" not in log and "sig=" not in log and "hka1." not in log


@needs_own_server
def test_environments_is_current(_):
    """`registry environments` shows a stream within a second of its opening and closing,
    not a heartbeat (here 30 s) later, and never a LAST SEEN before the registration
    (the node's last beat, here older than the registration, used to be shown)."""
    with Fleet(args=["--heartbeat-interval", "30"]) as fl:
        def envs():
            out = fl.reg.cli("environments", "--heartbeat-interval", "30").stdout.decode()
            rows = [l.split() for l in out.splitlines()[1:] if l.startswith(fl.env + " ")]
            return rows[0] if rows else None
        db = sqlite3.connect(fl.db)

        def beat():
            row = db.execute("SELECT heartbeat_at FROM fleet_nodes").fetchone()
            return row and row[0] // 1000
        hb = wait_until(beat, 10, "the node's first heartbeat")
        wait_until(lambda: int(time.time()) > hb, 5, "a second after it")
        registered = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time())))
        _, env_ws = fl.executor()
        fl.reg.wait_attached(fl.env)
        row = envs()
        assert row[1] == "yes" and row[3] >= registered and row[4] == "0", (row, registered)
        _, h = fl.harness()
        h.send_binary(data_frame("s-1", b"a shell"))
        assert recv(env_ws)[0] == 2
        t0 = time.monotonic()
        wait_until(lambda: envs()[4] == "1", 5, "environments to count the stream")
        assert time.monotonic() - t0 < 3, "the count waited for a heartbeat"
        h.abort()
        wait_until(lambda: envs()[4] == "0", 5, "environments to see it close")
        db.close()


def peer_ca_ok(port, ca):
    """Whether a TLS handshake with the registry verifies against ca."""
    import ssl
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1"):
                return True
    except ssl.SSLError:
        return False


@needs_own_server
def test_tls(_):
    """https:// and wss://: our executor and stock codex's (SSL_CERT_FILE), exec-client
    (--ca-file) through it; SIGHUP puts a new certificate in force for new sockets."""
    client = remote_testlib.find_build_file("exec-client")
    d = tempfile.mkdtemp(prefix="execbb-fleet-tls-")
    ca, cert, key_file = fake_cloud.make_test_ca(d)
    fl = Fleet(args=["--listen", "https://127.0.0.1:0", "--tls-cert", cert, "--tls-key",
                     key_file])
    exs = []
    try:
        assert fl.url.startswith("https://"), fl.url
        kinds = [("ours", SERVER, False)]
        if fleet_lib.codex_171():
            kinds.append(("stock", fleet_lib.codex_171(), True))
        for name, binary, stock in kinds:
            env_id = "tls-" + name
            ex = fleet_lib.Executor(binary, fl.url, env_id, fl.reg.token(env_id, "executor"),
                                    stock=stock, extra_env={"SSL_CERT_FILE": ca},
                                    wrapper=() if stock else WRAPPER)
            exs.append(ex)
            fl.reg.wait_attached(env_id)
            if client:
                r = subprocess.run([client, "--remote", fl.url, "--environment-id", env_id,
                                    "--token", fl.reg.token(env_id, "harness"), "--ca-file", ca,
                                    "run", "echo over-tls; exit 2"], capture_output=True,
                                   timeout=60)
                assert (r.returncode, r.stdout) == (2, b"over-tls\n"), (r, ex.stderr_text())
        st, doc, _ = post(fl.url, "/cloud/environment/tls-ours/register",
                          {"security_profile": "noise_hybrid_ik_v1", "executor_public_key": key()},
                          fl.reg.token("tls-ours", "executor"), ca=ca)
        assert st == 200 and doc["url"].startswith("wss://"), doc
        # SIGHUP: a new pair (of another CA) for new connections
        d2 = tempfile.mkdtemp(prefix="execbb-fleet-tls2-")
        ca2, cert2, key2 = fake_cloud.make_test_ca(d2)
        assert peer_ca_ok(fl.reg.port, ca) and not peer_ca_ok(fl.reg.port, ca2)
        shutil.copy(cert2, cert)
        shutil.copy(key2, key_file)
        fl.reg.proc.send_signal(signal.SIGHUP)
        fl.reg.wait_log(r"event=reload result=ok reloaded=tls")
        assert peer_ca_ok(fl.reg.port, ca2) and not peer_ca_ok(fl.reg.port, ca)
        shutil.rmtree(d2, ignore_errors=True)
    finally:
        for ex in exs:
            ex.stop()
        fl.close()
        shutil.rmtree(d, ignore_errors=True)


@needs_own_server
def test_codex_api_key_holding_a_registry_token(_):
    """Ours takes CODEX_API_KEY for any registry when it is one of our registry tokens
    (the reference's restriction keeps OpenAI keys from other hosts; ours still does):
    past the configuration to the registration (http://0.0.0.0:9 refuses at once)."""
    for key, want in (("exrt_%s_%s" % ("1" * 16, "2" * 64), "could not be reached"),
                      ("sk-not-a-registry-token", "restricted to HTTPS openai.com")):
        r = subprocess.run(WRAPPER + [SERVER, "--remote", "http://0.0.0.0:9",
                                      "--environment-id", "x"], capture_output=True,
                           timeout=60, env=dict(os.environ, CODEX_API_KEY=key))
        assert r.returncode == 1 and want in r.stderr.decode(), r


@needs_own_server
def test_systemd_unit(_):
    """The installed unit is well formed (systemd-analyze verify, when there is one) and
    its command line, as systemd would run it, serves a registry."""
    unit = os.path.join(os.environ.get("EXEC_BUILD_DIR", os.path.dirname(SERVER)),
                        "exec-server-registry.service")
    if not os.path.exists(unit):
        raise TestSkip("the configured unit is not in the build directory")
    text = open(unit).read()
    start = re.search(r"^ExecStart=(\S+) (.*)$", text, re.M)
    assert start and re.search(r"^ExecReload=", text, re.M), text
    assert "StandardError=journal" in text and "DynamicUser=yes" in text
    assert re.search(r"^Environment=EXEC_REGISTRY_DATABASE=sqlite:", text, re.M)
    with tempfile.TemporaryDirectory() as d:
        if shutil.which("systemd-analyze"):
            mine = os.path.join(d, "exec-server-registry.service")
            with open(mine, "w") as f:
                f.write(text.replace(start.group(1), SERVER))
            r = subprocess.run(["systemd-analyze", "verify", "--man=no", mine],
                               capture_output=True, timeout=60)
            assert "exec-server-registry" not in (r.stdout + r.stderr).decode(), r
        args = start.group(2).replace("$EXEC_REGISTRY_ARGS", "").split()
        args = [a.replace("127.0.0.1:8800", "127.0.0.1:0") for a in args]
        env = dict(os.environ, EXEC_REGISTRY_DATABASE="sqlite:" + os.path.join(d, "r.db"))
        p = subprocess.Popen(WRAPPER + [SERVER] + args, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            url = p.stdout.readline().decode().strip()
            assert url.startswith("http://127.0.0.1:"), p.stderr.read().decode()
            assert urllib.request.urlopen(url + "/readyz", timeout=10).status == 200
        finally:
            p.terminate()
            assert p.wait(20) == 0, p.stderr.read().decode()


if __name__ == "__main__":
    why = remote_testlib.skip_reason(SERVER, "registry", "registry")
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=120)
