#!/usr/bin/env python3
"""A test harness (the exec-server *client* side of remote mode) speaking through
tests/remote/fake_cloud.py: /connect for a bundle, a role=harness WebSocket, resume +
Noise handshake, then JSON-RPC in encrypted data frames (REMOTE.md §1, §2.3, §3).

The Noise crypto runs in tests/remote/noise_harness.mjs (node + the npm oracle packages
installed by tests/oracle/install.sh); everything else is Python stdlib. Test-only.

    h = NoiseHarness(cloud, token, "env-1")   # keygen, /connect, upgrade, handshake
    h.request("initialize", {"clientName": "x"}) -> result dict
    h.close()
"""
import base64
import json
import os
import queue
import struct
import subprocess
import threading
import time
import urllib.request
import uuid

import fake_cloud

HERE = os.path.dirname(os.path.abspath(__file__))
PROLOGUE_LABEL = b"codex-exec-server-relay-noise/v1"
RECORD_PLAINTEXT = 61440


class HarnessError(Exception):
    pass


def oracle_modules():
    """Path of the oracle node_modules, or None when it cannot be installed (exit 77)."""
    script = os.path.join(HERE, "..", "oracle", "install.sh")
    try:
        # install.sh bounds its lock wait and npm to 240 s, under ctest's 300 s a test
        p = subprocess.run(["bash", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=280)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.decode().strip() if p.returncode == 0 else None


def prologue(env_id, registration_id, stream_id):
    out = b""
    for part in (PROLOGUE_LABEL, env_id.encode(), registration_id.encode(), stream_id.encode()):
        out += struct.pack(">Q", len(part)) + part
    return out


class Crypto:
    def __init__(self, modules):
        self.proc = subprocess.Popen(["node", os.path.join(HERE, "noise_harness.mjs")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=dict(os.environ, ORACLE_NODE_MODULES=modules))

    def call(self, **req):
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise HarnessError("noise_harness.mjs exited")
        out = json.loads(line)
        if "error" in out:
            raise HarnessError("noise: " + out["error"])
        return out

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class NoiseHarness:
    def __init__(self, cloud, token, env_id, modules, timeout=10.0, stream_id=None):
        self.timeout = timeout
        self.crypto = Crypto(modules)
        self.public_key = self.crypto.call(op="keygen")["public_key"]
        req = urllib.request.Request(
            cloud.base_url + "/cloud/environment/%s/connect" % env_id,
            data=json.dumps({"harness_public_key": self.public_key}).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            self.bundle = json.loads(r.read())
        self.stream_id = stream_id or str(uuid.uuid4())
        st, _, self.ws = fake_cloud.ws_connect(self.bundle["url"], timeout=timeout)
        if st != 101:
            raise HarnessError("harness upgrade answered %d" % st)
        self.frames = queue.Queue()
        self.seq_out = 0
        self.seq_in = 0
        self.plain = b""
        self.next_id = 1
        threading.Thread(target=self._reader, daemon=True).start()
        self._handshake(env_id)

    def _reader(self):
        try:
            while True:
                op, msg = self.ws.recv()
                if op == 2:
                    self.frames.put(fake_cloud.parse_frame(msg))
        except (fake_cloud.WsClosed, ValueError) as e:
            self.frames.put(e)

    def _next_frame(self, deadline):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError("timed out waiting for a frame")
            try:
                f = self.frames.get(timeout=left)
            except queue.Empty:
                raise HarnessError("timed out waiting for a frame")
            if isinstance(f, Exception):
                raise HarnessError("socket closed: %s" % f)
            if f["stream_id"] == self.stream_id:
                return f

    def _handshake(self, env_id):
        mk = fake_cloud.make_frame
        self.ws.send_binary(mk(self.stream_id, "resume"))
        pro = prologue(env_id, self.bundle["executor_registration_id"], self.stream_id)
        m1 = self.crypto.call(op="msg1", prologue=base64.b64encode(pro).decode(),
                              rs=self.bundle["executor_public_key"],
                              payload=base64.b64encode(
                                  self.bundle["harness_key_authorization"].encode()).decode())
        self.msg1_len = len(base64.b64decode(m1["msg"]))
        self.ws.send_binary(mk(self.stream_id, "handshake",
                               fake_cloud.pb_len(1, base64.b64decode(m1["msg"]))))
        f = self._next_frame(time.monotonic() + self.timeout)
        if f["body"] == "reset":
            raise HarnessError("executor reset the stream: %r" % f["body_bytes"])
        if f["body"] != "handshake":
            raise HarnessError("expected handshake, got %s" % f["body"])
        inner = dict((n, v) for n, _, v in fake_cloud.pb_fields(f["body_bytes"]))
        self.msg2_len = len(inner[1])
        out = self.crypto.call(op="msg2", msg=base64.b64encode(inner[1]).decode())
        if base64.b64decode(out["payload"]):
            raise HarnessError("non-empty msg2 payload: %r" % base64.b64decode(out["payload"])[:500])

    def send(self, obj):
        body = json.dumps(obj, separators=(",", ":")).encode()
        data = struct.pack(">I", len(body)) + body
        for i in range(0, len(data), RECORD_PLAINTEXT):
            ct = base64.b64decode(self.crypto.call(
                op="encrypt", plaintext=base64.b64encode(data[i:i + RECORD_PLAINTEXT]).decode()
            )["ciphertext"])
            inner = (b"" if self.seq_out == 0 else b"\x08" + _varint(self.seq_out)) \
                + b"\x18\x01" + fake_cloud.pb_len(4, ct)
            self.ws.send_binary(fake_cloud.make_frame(self.stream_id, "data", inner))
            self.seq_out += 1

    def recv(self, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            if len(self.plain) >= 4:
                n = struct.unpack(">I", self.plain[:4])[0]
                if len(self.plain) >= 4 + n:
                    msg, self.plain = self.plain[4:4 + n], self.plain[4 + n:]
                    return json.loads(msg)
            f = self._next_frame(deadline)
            if f["body"] == "reset":
                raise HarnessError("executor reset the stream: %r" % f["body_bytes"])
            if f["body"] != "data":
                continue
            d = dict((n, v) for n, _, v in fake_cloud.pb_fields(f["body_bytes"]))
            if d.get(1, 0) != self.seq_in:
                raise HarnessError("out-of-order seq %s (expected %d)" % (d.get(1, 0),
                                                                       self.seq_in))
            self.seq_in += 1
            self.plain += base64.b64decode(self.crypto.call(
                op="decrypt", ciphertext=base64.b64encode(d[4]).decode())["plaintext"])

    def request(self, method, params, timeout=None):
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        while True:
            m = self.recv(timeout)
            if m.get("id") == rid:
                if "error" in m:
                    raise HarnessError("%s failed: %r" % (method, m["error"]))
                return m["result"]

    def close(self):
        self.ws.abort()
        self.crypto.close()


def _varint(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7
