#!/usr/bin/env python3
"""Experiment driver behind docs/REMOTE.md §8: runs the reference `codex exec-server`
in remote mode against tests/remote/fake_cloud.py and prints what it observed on the wire
(HTTP requests, upgrade requests, frames, pings, timings). Not a test; each scenario prints
a JSON-ish log on stdout. It watches for fixed times (its sleeps say `sleep-ok`): what the
reference does in a while, and when, is what it records.

  python3 tests/remote/probe_ref.py SCENARIO [seconds]
  scenarios: basic, drop, drop_graceful, reject401, reject403, reject404, reject409,
             reject500, register_fail, direct, forward, bearer_stdin, credential_stdin
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "blackbox"))
import fake_cloud  # noqa
import codex_ref  # noqa

# The version observed: 0.169.0 unless PROBE_REF_VERSION says (installed on first use).
REF = codex_ref.require(os.environ.get("PROBE_REF_VERSION", codex_ref.DEFAULT_VERSION))


def show_request(r):
    print("HTTP %s %s  status=%s" % (r["method"], r["target"], r.get("status")))
    for k, v in r["headers"]:
        print("   %s: %s" % (k, v))
    body = r["body"]
    print("   body(%d): %s" % (len(body), body[:300].decode("utf-8", "replace")
                              + ("..." if len(body) > 300 else "")))


def show_upgrade(u, t0):
    print("UPGRADE +%.3fs %s status=%s" % (u["t"] - t0, u["target"][:120], u["status"]))
    for k, v in u["headers"]:
        print("   %s: %s" % (k, v))


def post_json(cloud, path, doc, token):
    import urllib.request
    req = urllib.request.Request(cloud.base_url + path, data=json.dumps(doc).encode(),
                                 headers={"content-type": "application/json",
                                          "authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def fake_key():
    import base64
    return {"suite": fake_cloud.SUITE,
            "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
            "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}


def harness_garbage(cloud, token):
    """Play a harness without Noise: what does the executor answer to bad frames?"""
    cloud.wait_for(lambda c: c.environment_connected("env-1"), 20, "env socket")
    bundle = post_json(cloud, "/cloud/environment/env-1/connect",
                       {"harness_public_key": fake_key()}, token)
    print("BUNDLE keys", sorted(bundle))
    st, _, ws = fake_cloud.ws_connect(bundle["url"])
    mk = fake_cloud.make_frame
    steps = [
        ("resume s-1", mk("s-1", "resume")),
        ("handshake s-1 garbage 3600B", mk("s-1", "handshake",
                                           fake_cloud.pb_len(1, os.urandom(3600)))),
        ("data s-unknown", mk("s-unknown", "data", b"\x18\x01" + fake_cloud.pb_len(4, b"xx"))),
        ("heartbeat s-2", mk("s-2", "heartbeat")),
        ("ack s-2", mk("s-2", "ack_frame")),
        ("reset s-3", mk("s-3", "reset", fake_cloud.pb_len(1, b"bye"))),
        ("version 2 handshake s-4", b"\x08\x02" + mk("s-4", "handshake",
                                     fake_cloud.pb_len(1, b"x"))[2:]),
        ("empty handshake s-5", mk("s-5", "handshake")),
    ]
    for label, frame in steps:
        n = len(cloud.frames)
        ws.send_binary(frame)
        time.sleep(0.7)  # sleep-ok: a probe, not a test
        with cloud.lock:
            new = [f for f in cloud.frames[n:] if f["dir"] == "e2h"]
        print("STEP %-28s -> e2h %s" % (label, [(f["stream_id"], f["body"],
                                              f["parsed"] and f["parsed"]["body_bytes"]) for f in new]))
    for i in range(10):
        if not cloud.environment_connected("env-1"):
            print("ENV SOCKET CLOSED after %d more garbage handshakes" % i)
            break
        ws.send_binary(mk("g-%d" % i, "handshake", fake_cloud.pb_len(1, os.urandom(3600))))
        time.sleep(0.5)  # sleep-ok: a probe, not a test


def run(scenario, seconds):
    home = tempfile.mkdtemp(prefix="rxhome-", dir="/var/tmp")
    token = "tok-probe"
    cloud = fake_cloud.FakeCloud(token=token, ping_interval=5 if scenario == "pings" else None,
                                 answer_pings=scenario != "nopong")
    env = dict(os.environ, CODEX_HOME=home, RUST_LOG=os.environ.get("RUST_LOG", "info"))
    env.pop("CODEX_API_KEY", None)
    cmd = [REF, "exec-server", "--remote", cloud.base_url, "--environment-id", "env-1"]
    stdin_data = None
    if scenario == "bearer_stdin":
        cmd.append("--registration-bearer-stdin")
        stdin_data = (token + "\n").encode()
    elif scenario == "credential_stdin":
        cmd.append("--executor-credential-stdin")
        stdin_data = os.environ.get("PROBE_STDIN", token + "\n").encode()
    elif scenario == "direct":
        cmd += ["--remote-transport", "direct", "--aws-sigv4"]
        env.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secretEXAMPLE",
                   AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    elif scenario == "forward":
        cmd[2:2] = ["forward"]
        cmd += ["--connect", os.environ.get("PROBE_CONNECT", "ws://127.0.0.1:9")]
        env["CODEX_API_KEY"] = token
    else:
        env["CODEX_API_KEY"] = token
    if scenario.startswith("reject"):
        cloud.reject_upgrades(int(scenario[6:]), role="environment", count=1000)
    if scenario.startswith("override_"):
        k, _, v = scenario[9:].partition("=")
        cloud.override_response("register", **{k: None if v == "DEL" else v})
    if scenario == "register_fail":
        cloud.fail_next("register", 503, "unavailable", "try later", count=1000)
    print("CMD", " ".join(cmd))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    if stdin_data is not None:
        proc.stdin.write(stdin_data)
        proc.stdin.flush()
    errbuf = []
    threading.Thread(target=lambda: errbuf.append(proc.stderr.read()), daemon=True).start()
    outbuf = []
    threading.Thread(target=lambda: outbuf.append(proc.stdout.read()), daemon=True).start()
    try:
        if scenario in ("drop", "drop_graceful"):
            for _ in range(3):
                cloud.wait_for(lambda c: c.environment_connected("env-1"), 20, "env socket")
                time.sleep(2)  # sleep-ok: a probe, not a test
                cloud.drop_environment("env-1", graceful=scenario == "drop_graceful")
                cloud.wait_for(lambda c: not c.environment_connected("env-1"), 5, "drop")
        if scenario == "direct":
            cloud.wait_for(lambda c: c.environment_connected("env-1"), 20, "direct socket")
            cloud.direct_send("env-1", {"id": 1, "method": "initialize",
                                        "params": {"clientName": "probe"}})
            cloud.wait_for(lambda c: c.frames, 10, "initialize response")
            cloud.direct_send("env-1", {"method": "initialized", "params": {}})
            cloud.direct_send("env-1", {"id": 2, "method": "process/start", "params": {
                "processId": "p1", "argv": ["/bin/echo", "direct-hello"], "cwd": "/",
                "env": {}, "tty": False}})
            time.sleep(1)  # sleep-ok: a probe, not a test
            cloud.drop_environment("env-1")
        if scenario == "drop_reset":
            for _ in range(3):
                cloud.wait_for(lambda c: c.environment_connected("env-1"), 20, "env socket")
                time.sleep(1)  # sleep-ok: a probe, not a test
                cloud.drop_environment("env-1")
                cloud.wait_for(lambda c: not c.environment_connected("env-1"), 5, "drop")
            cloud.wait_for(lambda c: c.environment_connected("env-1"), 20, "env socket")
            time.sleep(float(os.environ.get("PROBE_STABLE", "65")))  # sleep-ok: a probe, not a test
            cloud.drop_environment("env-1")
        if scenario == "harness_garbage":
            harness_garbage(cloud, token)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)  # sleep-ok: a probe, not a test
    finally:
        rc = proc.poll()
        if rc is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        time.sleep(0.3)  # sleep-ok: a probe, not a test
    print("EXIT rc=%s (None = still running, terminated by probe)" % rc)
    for r in cloud.requests:
        print("+%.3fs" % (r["t"] - t0), end=" ")
        show_request(r)
    for u in cloud.upgrades:
        show_upgrade(u, t0)
    for f in cloud.frames:
        print("FRAME +%.3fs %s %s %s %s" % (f["t"] - t0, f["dir"], f["stream_id"], f["body"],
                                            f["raw"][:80].hex() if f["parsed"] or
                                            scenario != "direct" else f["raw"][:300]))
    for t, kind, detail in cloud.events:
        print("EVENT +%.3fs %s %r" % (t - t0, kind, detail))
    print("STDOUT", (outbuf[0] if outbuf else b"")[:2000])
    err = (errbuf[0] if errbuf else b"").decode("utf-8", "replace")
    err = "\n".join(l for l in err.splitlines() if "inotify" not in l)
    print("STDERR (tail)\n" + err[-4000:])
    cloud.stop()
    import shutil
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10)
