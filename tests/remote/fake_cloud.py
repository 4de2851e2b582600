#!/usr/bin/env python3
"""A local environment registry + rendezvous relay for tests and self-hosters.

THIS IS A TEST DOUBLE, not the hosted service. It implements what
docs/REMOTE.md (§1, §2.1, §4.1) says the executor and the harness observe
on the wire, and nothing of the hosted
service's real policy (accounts, quotas, URL signing scheme, expiry rules,
what it does with a harness socket when the executor leaves). Where the
hosted behaviour is unknown the choice made here is named in a comment.

One TCP port serves both parts (Python 3 standard library only):

  Registry (HTTP/1.1, JSON, `Authorization: Bearer <token>` when a token is set)
    POST /cloud/environment/{id}/register   executor: its Noise public key -> rendezvous URL
    POST /cloud/environment/{id}/connect    harness: its public key -> connect bundle
    POST /cloud/environment/{id}/validate   executor: is this harness key authorized?
    POST /cloud/environment/{id}/direct/register   (`--remote-transport direct`) -> ws URL
    Errors: {"error":{"code":..,"message":..}} with 400/401/404/405/409.

  Rendezvous (RFC 6455 server, binary messages, ping/pong, 256 KiB cap)
    GET /cloud-agent/fake/ws/environment/{id}?role=environment|harness&sig=...
    One environment socket per environment (a new one replaces the old), many harness
    sockets. Frames are protobuf RelayMessageFrames; only field 2 (stream_id) is read:
    harness->environment frames are forwarded unchanged to the environment socket and
    the harness socket becomes the owner of that stream_id; environment->harness frames
    go to the owner of their stream_id. Nothing is decrypted or rewritten. When a harness
    socket goes away, the environment gets `reset{"harness_disconnected"}` for each stream
    it owned (reset_on_harness_close; see docs/REMOTE.md §8.5b for why).
    GET /cloud-agent/fake/ws/direct/{id}?role=environment&sig=...   direct transport: the
    executor's socket carries cleartext JSON-RPC; a test talks to it via direct_send().
  Signatures are HMAC-SHA256(secret, role, environment, registration id): a re-register
  invalidates the previous URLs (they then get 401). Harness-key authorizations are bound
  to the registration id and the harness key, single use, 60 s TTL (knobs).

Knobs for tests (all thread-safe): drop_environment(), drop_harness(),
reject_upgrades(status, role, count), fail_next(endpoint, status, code, message),
override_response(endpoint, member=value|None), answer_pings / ping_interval /
reset_on_harness_close (constructor), records requests / upgrades / frames / events,
cleartext_hits(needle), wait_for(pred, timeout), stop(). A Noise harness for driving an
executor through it is in tests/remote/noise_client.py.

Standalone:  python3 tests/remote/fake_cloud.py --port 0 [--token T] [--host H]
[--public-host NAME] prints one line `FAKE_CLOUD url=http://HOST:PORT token=T` and serves
until SIGINT/SIGTERM (--log prints requests and upgrades on stderr).
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid

SECURITY_PROFILE = "noise_hybrid_ik_v1"
SUITE = "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256"
DIRECT_TRANSPORT = "direct_jsonrpc_v1"
MAX_MESSAGE = 256 * 1024          # REMOTE.md §2.2: 256 KiB frame and message cap
MAX_HTTP_HEAD = 64 * 1024
MAX_HTTP_BODY = 1 << 20
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
BODY_NAMES = {5: "data", 6: "ack_frame", 7: "resume", 8: "reset", 9: "heartbeat",
              10: "handshake"}
PATH_RE = re.compile(r"^/cloud/environment/([^/]+)/(register|connect|validate|direct/register)$")
WS_RE = re.compile(r"^/cloud-agent/fake/ws/(environment|direct)/([^/]+)$")


# ---------------------------------------------------------------------------------------
# Protobuf: just enough of the wire format to read a RelayMessageFrame's top level.
# ---------------------------------------------------------------------------------------

def pb_varint(buf, pos):
    """Return (value, new_pos); raises ValueError on truncation or > 10 bytes."""
    value = shift = 0
    for i in range(10):
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint too long")


def pb_fields(buf):
    """Yield (field_number, wire_type, value) for each top-level field; value is an int
    for varints, bytes for length-delimited and fixed fields."""
    pos = 0
    while pos < len(buf):
        key, pos = pb_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field number 0")
        if wt == 0:
            v, pos = pb_varint(buf, pos)
        elif wt == 2:
            n, pos = pb_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated bytes field")
            v, pos = buf[pos:pos + n], pos + n
        elif wt == 1 or wt == 5:
            n = 8 if wt == 1 else 4
            if pos + n > len(buf):
                raise ValueError("truncated fixed field")
            v, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("unsupported wire type %d" % wt)
        yield num, wt, v


def parse_frame(buf):
    """Routing view of a RelayMessageFrame: dict(version, stream_id, body, body_bytes,
    traceparent). Raises ValueError when it is not a parseable frame with a stream id."""
    out = {"version": 0, "stream_id": None, "body": None, "body_bytes": b"",
           "traceparent": None}
    for num, wt, v in pb_fields(buf):
        if num == 1 and wt == 0:
            out["version"] = v
        elif num == 2 and wt == 2:
            out["stream_id"] = v.decode("utf-8")
        elif num in BODY_NAMES and wt == 2:
            out["body"], out["body_bytes"] = BODY_NAMES[num], v
        elif num == 11 and wt == 2:
            out["traceparent"] = v.decode("utf-8", "replace")
    if not out["stream_id"]:
        raise ValueError("frame without stream_id")
    return out


def pb_key(num, wt):
    return bytes([(num << 3) | wt])


def pb_len(num, data):
    n, out = len(data), bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return pb_key(num, 2) + bytes(out) + data


def make_frame(stream_id, body, inner=b""):
    """Encode a version-1 frame with one body (used by tests that play the harness)."""
    num = {v: k for k, v in BODY_NAMES.items()}[body]
    return b"\x08\x01" + pb_len(2, stream_id.encode()) + pb_len(num, inner)


# ---------------------------------------------------------------------------------------
# WebSocket (server side of RFC 6455 plus a tiny client used by tests)
# ---------------------------------------------------------------------------------------

def _xor_mask(payload, key):
    """RFC 6455 masking as one big-integer XOR (a per-byte loop held the relay to a few
    MB/s, which made the remote-mode bench rows measure this proxy)."""
    n = len(payload)
    if n == 0:
        return payload
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


class WsClosed(Exception):
    pass


class WsConn:
    """One accepted (or, with client=True, initiated) WebSocket. send_* are thread-safe;
    recv() is used by one reader thread only."""

    def __init__(self, sock, client=False, leftover=b"", answer_pings=True):
        self.answer_pings = answer_pings
        self.sock = sock
        self.client = client
        self.buf = bytearray(leftover)
        self.wlock = threading.Lock()
        self.closed = False

    def _read(self, n):
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except OSError as e:
                raise WsClosed(str(e))
            if not chunk:
                raise WsClosed("eof")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _send_raw(self, opcode, payload):
        head = bytearray([0x80 | opcode])
        mask = 0x80 if self.client else 0
        n = len(payload)
        if n < 126:
            head.append(mask | n)
        elif n < 65536:
            head.append(mask | 126)
            head += struct.pack(">H", n)
        else:
            head.append(mask | 127)
            head += struct.pack(">Q", n)
        if self.client:
            key = os.urandom(4)
            head += key
            payload = _xor_mask(payload, key)
        with self.wlock:
            if self.closed and opcode != 8:
                raise WsClosed("closed")
            try:
                self.sock.sendall(bytes(head) + payload)
            except OSError as e:
                raise WsClosed(str(e))

    def send_binary(self, data):
        self._send_raw(2, data)

    def send_text(self, text):
        self._send_raw(1, text.encode())

    def send_ping(self, data=b""):
        self._send_raw(9, data)

    def close(self, code=1000, reason="", linger=2.0):
        """Send a close frame; the reader sees the peer's close reply (or EOF), and the
        TCP connection is shut down after `linger` seconds in any case."""
        try:
            self._send_raw(8, struct.pack(">H", code) + reason.encode())
        except WsClosed:
            pass
        self.closed = True
        t = threading.Timer(linger, self.abort, kwargs={"shutdown_only": True})
        t.daemon = True
        t.start()

    def abort(self, shutdown_only=False):
        """Drop the TCP connection without a close frame (shutdown wakes the reader)."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if not shutdown_only:
            try:
                self.sock.close()
            except OSError:
                pass

    def recv(self, on_control=None):
        """Return (opcode, payload) for the next data message (1 text / 2 binary), answering
        pings. Control frames are reported to on_control(opcode, payload). Raises WsClosed
        on close, EOF or a protocol violation (after sending the matching close code)."""
        parts, first_op = [], None
        while True:
            b0, b1 = self._read(2)
            fin, op, masked, n = b0 & 0x80, b0 & 0x0F, b1 & 0x80, b1 & 0x7F
            if b0 & 0x70:
                self.close(1002, "reserved bits")
                raise WsClosed("rsv bits")
            if not self.client and not masked:
                self.close(1002, "unmasked client frame")
                raise WsClosed("unmasked")
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            if op >= 8 and (n > 125 or not fin):
                self.close(1002, "bad control frame")
                raise WsClosed("bad control")
            if op < 8 and n + sum(len(p) for p in parts) > MAX_MESSAGE:
                self.close(1009, "message too big")
                raise WsClosed("too big")
            key = self._read(4) if masked else None
            payload = self._read(n)
            if key:
                payload = _xor_mask(payload, key)
            if op >= 8:
                if on_control:
                    on_control(op, payload)
                if op == 9 and self.answer_pings:
                    try:
                        self._send_raw(10, payload)
                    except WsClosed:
                        pass
                elif op == 8:
                    if not self.closed:
                        self.close(1000)
                    raise WsClosed("close %s" % (struct.unpack(">H", payload[:2])[0]
                                                 if len(payload) >= 2 else "-"))
                continue
            if op == 0:
                if first_op is None:
                    self.close(1002, "unexpected continuation")
                    raise WsClosed("continuation")
            elif op in (1, 2):
                if first_op is not None:
                    self.close(1002, "expected continuation")
                    raise WsClosed("interleaved")
                first_op = op
            else:
                self.close(1002, "bad opcode")
                raise WsClosed("opcode %d" % op)
            parts.append(payload)
            if fin:
                return first_op, b"".join(parts)


def ws_connect(url, headers=(), timeout=10.0):
    """Minimal client: returns (status, response_headers, WsConn or None). Tests use it to
    play the harness (or the executor's peer in direct mode)."""
    m = re.match(r"^ws://([^/:]+):(\d+)(/.*)$", url)
    if not m:
        raise ValueError("only ws://host:port/... URLs: %r" % url)
    host, port, target = m.group(1), int(m.group(2)), m.group(3)
    sock = socket.create_connection((host, port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ["GET %s HTTP/1.1" % target, "Host: %s:%d" % (host, port), "Upgrade: websocket",
           "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    req += ["%s: %s" % kv for kv in headers]
    sock.sendall(("\r\n".join(req) + "\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise WsClosed("eof during upgrade")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if status != 101:
        sock.close()
        return status, hdrs, None
    sock.settimeout(None)
    return status, hdrs, WsConn(sock, client=True, leftover=rest)


# ---------------------------------------------------------------------------------------
# The fake cloud
# ---------------------------------------------------------------------------------------

def _canonical_key(obj):
    """Validate a NoiseChannelPublicKey JSON object; return its canonical JSON text or raise
    ValueError. Unknown members are rejected (the reference deserializer denies them)."""
    if not isinstance(obj, dict) or set(obj) != {"suite", "x25519_public_key",
                                                 "mlkem768_public_key"}:
        raise ValueError("public key must have exactly suite, x25519_public_key, "
                         "mlkem768_public_key")
    if obj["suite"] != SUITE:
        raise ValueError("unsupported suite")
    for name, size in (("x25519_public_key", 32), ("mlkem768_public_key", 1184)):
        v = obj[name]
        try:
            raw = base64.b64decode(v, validate=True) if isinstance(v, str) else None
        except ValueError:
            raw = None
        if raw is None or len(raw) != size:
            raise ValueError("%s must be standard base64 of %d bytes" % (name, size))
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class HttpError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeCloud:
    REASONS = {101: "Switching Protocols", 200: "OK", 400: "Bad Request",
               401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
               405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
               429: "Too Many Requests", 500: "Internal Server Error",
               503: "Service Unavailable"}

    def __init__(self, host="127.0.0.1", port=0, token=None, authorization_ttl=60.0,
                 single_use_authorizations=True, ping_interval=None,
                 reset_on_harness_close=True, answer_pings=True, public_host=None,
                 aws_secret=None, tls=None):
        """token: expected bearer (None = accept any request without checking auth).
        ping_interval: seconds between rendezvous->peer pings (None = never ping).
        tls: (certfile, keyfile) to serve both parts over TLS: the registry is then
        https://, the rendezvous URLs it hands out wss:// (tests make them with
        make_test_ca()).
        reset_on_harness_close: send the environment a `reset` frame for every stream
        a departing harness socket owned. Whether the hosted service does this is unknown,
        but codex 0.169.0 has no other way to learn that a harness left: without it the
        stream and its session stay attached and `initialize{resumeSessionId}` fails with
        -32010 "already attached" (docs/REMOTE.md §8.5b)."""
        self.token = token
        # aws_secret: verify the SigV4 signature of direct/register and of direct
        # upgrades with this secret access key (None: only check the scheme is there).
        self.aws_secret = aws_secret
        self.sigv4_checks = []    # (what, ok) for every verified signature
        self.authorization_ttl = authorization_ttl
        self.single_use = single_use_authorizations
        self.ping_interval = ping_interval
        self.reset_on_harness_close = reset_on_harness_close
        self.answer_pings = answer_pings  # False: never pong (tests the peer's pong deadline)
        self.secret = os.urandom(32)
        self.lock = threading.Condition()
        self.requests = []        # dicts: t, method, target, path, query, headers, body, json
        self.upgrades = []        # dicts: t, role, env, query, headers, status, request
        self.frames = []          # dicts: t, dir ('h2e'|'e2h'), env, stream_id, body, raw
        self.events = []          # (t, kind, detail) for connects/drops/pings/pongs
        self.registrations = {}   # env -> dict(id, key, key_json, transport)
        self.authorizations = {}  # token -> dict(env, reg, key, expires, used)
        self.env_socks = {}       # env -> WsConn (current environment socket)
        self.harness_socks = {}   # stream_id -> (env, WsConn)
        self.harness_conns = []   # every live harness WsConn
        self.rejects = []         # [status, role or None, remaining]
        self.failures = {}        # endpoint -> [(status, code, message)] queued
        self.overrides = {}       # endpoint -> {member: value or None (delete)} on success
        self.registration_seq = 0
        self.stopping = False
        self.listener = socket.create_server((host, port), backlog=64)
        self.host, self.port = self.listener.getsockname()[:2]
        # Name put into the URLs handed out (a wildcard bind address is not dialable).
        self.public_host = public_host or self.host
        self.tls = None
        if tls:
            import ssl
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(tls[0], tls[1])
        self.base_url = "%s://%s:%d" % ("https" if tls else "http", self.public_host, self.port)
        self.tls_handshakes = 0
        self.threads = []
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self.threads.append(t)
        if ping_interval:
            threading.Thread(target=self._ping_loop, daemon=True).start()

    # ---- public knobs ------------------------------------------------------------------

    def reject_upgrades(self, status, role=None, count=1):
        """Answer the next `count` rendezvous upgrades (of `role`, or any) with `status`."""
        with self.lock:
            self.rejects.append([status, role, count])

    def fail_next(self, endpoint, status, code="injected", message="injected failure",
                  count=1):
        """Answer the next `count` calls of endpoint ('register', 'connect', 'validate',
        'direct/register') with an error body."""
        with self.lock:
            self.failures.setdefault(endpoint, []).extend([(status, code, message)] * count)

    def override_response(self, endpoint, **members):
        """Replace (or with None, delete) members of every later successful response of
        endpoint, e.g. override_response('register', security_profile='other')."""
        with self.lock:
            self.overrides[endpoint] = members

    def drop_environment(self, env=None, graceful=False):
        """Drop the environment socket(s): a close frame 1001 if graceful, else a TCP reset
        without a close frame. Returns how many were dropped."""
        with self.lock:
            victims = [(e, c) for e, c in self.env_socks.items() if env in (None, e)]
        for e, c in victims:
            self._event("drop_environment", e)
            c.close(1001, "going away") if graceful else c.abort()
        return len(victims)

    def drop_harness(self, stream_id=None, graceful=False):
        """Drop the harness socket owning stream_id (None: every harness socket)."""
        with self.lock:
            if stream_id is None:
                victims = list(self.harness_conns)
            else:
                hit = self.harness_socks.get(stream_id)
                victims = [hit[1]] if hit else []
        for c in victims:
            self._event("drop_harness", stream_id)
            c.close(1001, "going away") if graceful else c.abort()
        return len(victims)

    def environment_connected(self, env):
        with self.lock:
            return env in self.env_socks

    def wait_for(self, pred, timeout=10.0, what="condition"):
        """Wait (bounded) until pred(self) is true under the lock; return its value."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                v = pred(self)
                if v:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("fake cloud: timed out waiting for " + what)
                self.lock.wait(min(left, 0.2))

    def cleartext_hits(self, needle):
        """Data/handshake frames whose bytes contain `needle` (bytes or str) in clear."""
        if isinstance(needle, str):
            needle = needle.encode()
        with self.lock:
            return [f for f in self.frames if needle in f["raw"]]

    def stop(self):
        with self.lock:
            self.stopping = True
            conns = list(self.env_socks.values()) + list(self.harness_conns)
        try:
            self.listener.close()
        except OSError:
            pass
        for c in conns:
            c.abort()

    # ---- internals ---------------------------------------------------------------------

    def _event(self, kind, detail=None):
        with self.lock:
            self.events.append((time.monotonic(), kind, detail))
            self.lock.notify_all()

    def _sign(self, role, env, reg):
        msg = ("%s\n%s\n%s" % (role, env, reg)).encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()

    def _ping_loop(self):
        while not self.stopping:
            time.sleep(self.ping_interval)  # sleep-ok: the ping period is the behaviour
            with self.lock:
                conns = list(self.env_socks.values()) + list(self.harness_conns)
            for c in conns:
                try:
                    c.send_ping(b"fake")
                except WsClosed:
                    pass

    def _accept_loop(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _read_request(self, sock):
        buf = b""
        while b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HTTP_HEAD:
                raise HttpError(413, "too_large", "request head too large")
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
        n = int(dict((k.lower(), v) for k, v in headers).get("content-length", "0") or 0)
        if n > MAX_HTTP_BODY:
            raise HttpError(413, "too_large", "request body too large")
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            rest += chunk
        path, _, query = target.partition("?")
        q = {}
        for part in query.split("&") if query else []:
            k, _, v = part.partition("=")
            q[k] = v
        return {"t": time.monotonic(), "method": method, "target": target, "path": path,
                "query": q, "headers": headers, "raw_head": head, "body": rest[:n],
                "leftover": rest[n:]}

    def _respond(self, sock, status, doc=None, extra=()):
        body = b"" if doc is None else json.dumps(doc).encode()
        head = "HTTP/1.1 %d %s\r\n" % (status, self.REASONS.get(status, "Status"))
        head += "content-type: application/json\r\ncontent-length: %d\r\n" % len(body)
        for k, v in extra:
            head += "%s: %s\r\n" % (k, v)
        head += "connection: close\r\n\r\n"
        sock.sendall(head.encode() + body)

    def _serve(self, sock):
        if self.tls:
            try:
                sock.settimeout(30)
                sock = self.tls.wrap_socket(sock, server_side=True)
                sock.settimeout(None)
            except OSError:
                sock.close()
                return
            with self.lock:
                self.tls_handshakes += 1
        try:
            req = self._read_request(sock)
            if req is None:
                sock.close()
                return
            hdr = dict((k.lower(), v) for k, v in req["headers"])
            if hdr.get("upgrade", "").lower() == "websocket":
                self._serve_upgrade(sock, req, hdr)
                return
            status, doc = self._registry(req, hdr)
            req["status"], req["response"] = status, doc
            with self.lock:  # recorded complete (with its answer) before the peer sees it
                self.requests.append(req)
                self.lock.notify_all()
            self._respond(sock, status, doc)
        except HttpError as e:
            self._respond(sock, e.status, {"error": {"code": e.code, "message": e.message}})
        except (OSError, ValueError):
            pass
        try:
            sock.close()
        except OSError:
            pass

    # ---- registry ----------------------------------------------------------------------

    def _registry(self, req, hdr):
        try:
            m = PATH_RE.match(req["path"])
            if not m:
                raise HttpError(404, "not_found", "no such endpoint")
            env, endpoint = m.group(1), m.group(2)
            if req["method"] != "POST":
                raise HttpError(405, "method_not_allowed", "use POST")
            with self.lock:
                queued = self.failures.get(endpoint)
                injected = queued.pop(0) if queued else None
            if injected:
                raise HttpError(*injected)
            if endpoint == "direct/register":
                # Direct mode is SigV4-signed by the reference; the fake only checks that
                # an AWS4-HMAC-SHA256 Authorization header is present (no verification).
                if not hdr.get("authorization", "").startswith("AWS4-HMAC-SHA256 "):
                    raise HttpError(401, "unauthorized", "missing SigV4 authorization")
                if not self._sigv4_ok("direct/register", req, hdr):
                    raise HttpError(403, "forbidden", "SigV4 signature does not match")
            elif self.token is not None and hdr.get("authorization") != "Bearer " + self.token:
                raise HttpError(401, "unauthorized", "missing or wrong bearer token")
            if "application/json" not in hdr.get("content-type", ""):
                raise HttpError(400, "bad_request", "content-type must be application/json")
            try:
                body = json.loads(req["body"].decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise HttpError(400, "bad_request", "body is not JSON")
            if not isinstance(body, dict):
                raise HttpError(400, "bad_request", "body must be an object")
            req["json"] = body
            doc = getattr(self, "_ep_" + endpoint.replace("/", "_"))(env, body)
            with self.lock:
                override = self.overrides.get(endpoint)
            for k, v in (override or {}).items():  # test knob: corrupt a success body
                if v is None:
                    doc.pop(k, None)
                else:
                    doc[k] = v
            return 200, doc
        except HttpError as e:
            return e.status, {"error": {"code": e.code, "message": e.message}}

    def _ws_url(self, kind, env, role, reg):
        sig = self._sign(role, env, reg)
        return "%s://%s:%d/cloud-agent/fake/ws/%s/%s?role=%s&sig=%s" % (
            "wss" if self.tls else "ws", self.public_host, self.port, kind, env, role, sig)

    def _ep_register(self, env, body):
        if body.get("security_profile") != SECURITY_PROFILE:
            raise HttpError(400, "bad_request", "security_profile must be " + SECURITY_PROFILE)
        if set(body) != {"security_profile", "executor_public_key"}:
            raise HttpError(400, "bad_request", "unexpected members in register body")
        try:
            canon = _canonical_key(body["executor_public_key"])
        except ValueError as e:
            raise HttpError(400, "bad_request", str(e))
        with self.lock:
            self.registration_seq += 1
            reg = "reg-%d-%s" % (self.registration_seq, secrets.token_hex(4))
            # A new registration supersedes the old one: URLs signed for the old id stop
            # working (assumption; matches the executor's "4xx => re-register" loop).
            self.registrations[env] = {"id": reg, "key": canon, "transport": "noise",
                                       "key_json": body["executor_public_key"]}
        return {"environment_id": env, "url": self._ws_url("environment", env, "environment",
                                                           reg),
                "security_profile": SECURITY_PROFILE, "executor_registration_id": reg}

    def _ep_direct_register(self, env, body):
        if body != {"transport": DIRECT_TRANSPORT}:
            raise HttpError(400, "bad_request", "transport must be " + DIRECT_TRANSPORT)
        with self.lock:
            self.registration_seq += 1
            reg = "dreg-%d-%s" % (self.registration_seq, secrets.token_hex(4))
            self.registrations[env] = {"id": reg, "key": None, "transport": "direct"}
        return {"environment_id": env, "transport": DIRECT_TRANSPORT, "registration_id": reg,
                "url": self._ws_url("direct", env, "environment", reg)}

    def _ep_connect(self, env, body):
        if set(body) != {"harness_public_key"}:
            raise HttpError(400, "bad_request", "body must be {harness_public_key}")
        try:
            canon = _canonical_key(body["harness_public_key"])
        except ValueError as e:
            raise HttpError(400, "bad_request", str(e))
        with self.lock:
            reg = self.registrations.get(env)
            if reg is None or reg["transport"] != "noise":
                raise HttpError(404, "environment_not_found", "environment is not registered")
            if env not in self.env_socks:
                raise HttpError(409, "environment_offline", "environment is not connected")
            auth = "hka-" + secrets.token_urlsafe(24)
            self.authorizations[auth] = {"env": env, "reg": reg["id"], "key": canon,
                                         "expires": time.monotonic() + self.authorization_ttl,
                                         "used": False}
            return {"environment_id": env,
                    "url": self._ws_url("environment", env, "harness", reg["id"]),
                    "security_profile": SECURITY_PROFILE,
                    "executor_registration_id": reg["id"],
                    "executor_public_key": reg["key_json"],
                    "harness_key_authorization": auth}

    def _ep_validate(self, env, body):
        need = {"executor_registration_id", "harness_public_key", "harness_key_authorization"}
        if set(body) != need:
            raise HttpError(400, "bad_request", "body must have exactly " + ", ".join(sorted(need)))
        try:
            canon = _canonical_key(body["harness_public_key"])
        except ValueError as e:
            raise HttpError(400, "bad_request", str(e))
        with self.lock:
            a = self.authorizations.get(body["harness_key_authorization"])
            ok = (a is not None and a["env"] == env
                  and a["reg"] == body["executor_registration_id"]
                  and a["key"] == canon and not a["used"]
                  and time.monotonic() < a["expires"])
            if ok and self.single_use:
                a["used"] = True
        return {"valid": bool(ok)}

    # ---- rendezvous --------------------------------------------------------------------

    def _serve_upgrade(self, sock, req, hdr):
        rec = {"t": req["t"], "target": req["target"], "path": req["path"],
               "query": req["query"], "headers": req["headers"],
               "raw_head": req["raw_head"], "role": req["query"].get("role"), "env": None,
               "status": None}
        status, reason = self._check_upgrade(req, hdr, rec)
        rec["status"] = status
        with self.lock:
            self.upgrades.append(rec)
            self.lock.notify_all()
        if status != 101:
            self._respond(sock, status, {"error": {"code": reason, "message": reason}})
            sock.close()
            return
        accept = base64.b64encode(hashlib.sha1(hdr["sec-websocket-key"].encode()
                                               + WS_GUID).digest()).decode()
        sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                      % accept).encode())
        conn = WsConn(sock, leftover=req["leftover"], answer_pings=self.answer_pings)
        if rec["kind"] == "direct":
            self._serve_direct(conn, rec["env"])
        elif rec["role"] == "environment":
            self._serve_environment(conn, rec["env"])
        else:
            self._serve_harness(conn, rec["env"])

    def _check_upgrade(self, req, hdr, rec):
        if req["method"] != "GET" or hdr.get("sec-websocket-version") != "13" \
                or not hdr.get("sec-websocket-key"):
            return 400, "bad_upgrade"
        m = WS_RE.match(req["path"])
        if not m:
            return 404, "not_found"
        kind, env = m.group(1), m.group(2)
        rec["kind"], rec["env"] = kind, env
        role = req["query"].get("role")
        with self.lock:
            for r in self.rejects:
                if r[2] > 0 and r[1] in (None, role):
                    r[2] -= 1
                    return r[0], "injected"
            reg = self.registrations.get(env)
        if kind == "direct" and not self._sigv4_ok("direct/upgrade", req, hdr):
            return 403, "bad_sigv4"
        if role not in ("environment", "harness") or (kind == "direct" and role != "environment"):
            return 400, "bad_role"
        if reg is None:
            return 404, "environment_not_found"
        want = self._sign(role, env, reg["id"])
        if not hmac.compare_digest(req["query"].get("sig", ""), want):
            return 401, "bad_signature"
        return 101, None

    def _sigv4_ok(self, what, req, hdr):
        """Recomputes an AWS SigV4 header signature (an independent implementation of
        the published algorithm) with self.aws_secret; records and returns the result.
        Without aws_secret every request passes unchecked."""
        if self.aws_secret is None:
            return True
        ok = False
        try:
            m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/"
                         r"aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$",
                         hdr.get("authorization", ""))
            amz = hdr.get("x-amz-date", "")
            if m and amz[:8] == m.group(2):
                _ak, date, region, service, signed, sig = m.groups()
                path, _, query = req["target"].partition("?")
                enc = lambda v, safe: urllib.parse.quote(v, safe=safe)  # noqa: E731
                canon_path = enc(path, "/-_.~")
                pairs = []
                for part in query.split("&") if query else []:
                    k, _, v = part.partition("=")
                    pairs.append((enc(urllib.parse.unquote(k), "-_.~"),
                                  enc(urllib.parse.unquote(v), "-_.~")))
                canon_query = "&".join("%s=%s" % kv for kv in sorted(pairs))
                names = signed.split(";")
                canon_headers = "".join("%s:%s\n" % (n, hdr.get(n, "").strip()) for n in names)
                creq = "\n".join([req["method"], canon_path, canon_query, canon_headers, signed,
                                  hashlib.sha256(req.get("body", b"")).hexdigest()])
                scope = "%s/%s/%s/aws4_request" % (date, region, service)
                sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                                 hashlib.sha256(creq.encode()).hexdigest()])
                key = ("AWS4" + self.aws_secret).encode()
                for part in (date, region, service, "aws4_request"):
                    key = hmac.new(key, part.encode(), hashlib.sha256).digest()
                want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
                ok = hmac.compare_digest(want, sig) and "host" in names and \
                    "x-amz-date" in names
        except (ValueError, KeyError):
            ok = False
        with self.lock:
            self.sigv4_checks.append((what, ok))
        return ok

    def _record_frame(self, direction, env, raw, parsed, opcode=2, synthetic=False):
        with self.lock:
            self.frames.append({"t": time.monotonic(), "dir": direction, "env": env,
                                "opcode": opcode, "synthetic": synthetic,
                                "stream_id": parsed and parsed["stream_id"],
                                "body": parsed and parsed["body"], "raw": raw,
                                "parsed": parsed})
            self.lock.notify_all()

    def _control_recorder(self, who):
        def on_control(op, payload):
            self._event({9: "ping", 10: "pong", 8: "close"}[op], (who, payload))
        return on_control

    def _serve_environment(self, conn, env):
        with self.lock:
            old = self.env_socks.get(env)
            self.env_socks[env] = conn
        if old is not None:
            old.close(1000, "replaced")  # one environment socket per environment
        self._event("environment_connected", env)
        on_control = self._control_recorder(("environment", env))
        try:
            while True:
                op, msg = conn.recv(on_control)
                if op != 2:
                    self._event("text_message", ("environment", env, msg))
                    continue
                try:
                    f = parse_frame(msg)
                except ValueError:
                    self._record_frame("e2h", env, msg, None)
                    continue
                self._record_frame("e2h", env, msg, f)
                with self.lock:
                    target = self.harness_socks.get(f["stream_id"])
                if target is not None and target[0] == env:
                    try:
                        target[1].send_binary(msg)
                    except WsClosed:
                        pass
        except WsClosed as e:
            self._event("environment_closed", (env, str(e)))
        finally:
            self._forget_environment(env, conn)

    def _forget_environment(self, env, conn):
        with self.lock:
            if self.env_socks.get(env) is conn:  # a replacement may already be registered
                del self.env_socks[env]
            self.lock.notify_all()
        conn.abort()

    def _serve_harness(self, conn, env):
        owned = set()
        with self.lock:
            self.harness_conns.append(conn)
        self._event("harness_connected", env)
        on_control = self._control_recorder(("harness", env))
        try:
            while True:
                op, msg = conn.recv(on_control)
                if op != 2:
                    conn.close(1003, "binary frames only")
                    raise WsClosed("text from harness")
                try:
                    f = parse_frame(msg)
                except ValueError:
                    self._record_frame("h2e", env, msg, None)
                    conn.close(1002, "not a relay frame")
                    raise WsClosed("bad frame from harness")
                self._record_frame("h2e", env, msg, f)
                with self.lock:
                    cur = self.harness_socks.get(f["stream_id"])
                    if cur is not None and cur[1] is not conn:
                        cur = "taken"
                    else:
                        self.harness_socks[f["stream_id"]] = (env, conn)
                        owned.add(f["stream_id"])
                    target = self.env_socks.get(env)
                if cur == "taken":
                    continue  # another socket owns this stream id: drop (assumption)
                if target is not None:
                    try:
                        target.send_binary(msg)
                    except WsClosed:
                        pass
        except WsClosed as e:
            self._event("harness_closed", (env, str(e)))
        finally:
            with self.lock:
                for sid in owned:
                    if self.harness_socks.get(sid, (None, None))[1] is conn:
                        del self.harness_socks[sid]
                if conn in self.harness_conns:
                    self.harness_conns.remove(conn)
                target = self.env_socks.get(env)
                self.lock.notify_all()
            if self.reset_on_harness_close and target is not None:
                for sid in owned:
                    frame = make_frame(sid, "reset", pb_len(1, b"harness_disconnected"))
                    # Recorded as h2e with synthetic=True: the fake, not a harness, sent it.
                    self._record_frame("h2e", env, frame, parse_frame(frame), synthetic=True)
                    try:
                        target.send_binary(frame)
                    except WsClosed:
                        pass
            conn.abort()

    def _serve_direct(self, conn, env):
        """Direct transport: the executor's socket carries plain JSON-RPC text messages.
        The fake records them; a test talks to the executor through direct_send()."""
        with self.lock:
            self.env_socks[env] = conn
        self._event("direct_connected", env)
        on_control = self._control_recorder(("direct", env))
        try:
            while True:
                op, msg = conn.recv(on_control)
                self._record_frame("e2h", env, msg, None, opcode=op)
        except WsClosed as e:
            self._event("direct_closed", (env, str(e)))
        finally:
            self._forget_environment(env, conn)

    def direct_send(self, env, obj):
        """Send one JSON-RPC message (as a text frame) to a direct-mode executor."""
        with self.lock:
            conn = self.env_socks[env]
        conn.send_text(json.dumps(obj))


USAGE_EPILOG = """\
what it is:
  A local stand-in for an environment registry and its rendezvous relay, so remote
  mode can be tried and tested on one machine. It is not the hosted service: no
  accounts, no quotas, nothing persisted; everything lives until it stops.

remote mode on one machine, in three commands (each in its own terminal):
  python3 tests/remote/fake_cloud.py --port 8800 --token devtoken
  echo devtoken | ./build/exec-server --remote http://127.0.0.1:8800 \\
      --environment-id dev --registration-bearer-stdin
  ./build/exec-client --remote http://127.0.0.1:8800 --environment-id dev \\
      --token devtoken run 'uname -a'

output:
  One line on stdout once it listens, `FAKE_CLOUD url=http://HOST:PORT token=TOKEN`;
  it serves until SIGINT or SIGTERM. With --log, each registry request and
  rendezvous upgrade is printed on stderr.

endpoints (one port for both parts):
  POST /cloud/environment/ID/register | connect | validate | direct/register
  GET  /cloud-agent/fake/ws/environment/ID?role=environment|harness&sig=...

See docs/REMOTE_QUICKSTART.md and docs/REMOTE.md.
"""


def make_test_ca(directory, host="127.0.0.1"):
    """A test CA and a server certificate it signs for host (IP or name), made with
    openssl in directory. Returns (ca_file, cert_file, key_file): serve with cert/key,
    trust ca_file (SSL_CERT_FILE, a client's --ca-file). Strict verifiers (rustls)
    refuse a self-signed CA used as the server's own certificate, hence the pair."""
    import subprocess
    san = ("IP:" if host.replace(".", "").isdigit() else "DNS:") + host
    ca, ca_key = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca-key.pem")
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    csr, ext = os.path.join(directory, "cert.csr"), os.path.join(directory, "cert.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % san)
    for argv in (
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
             "-out", ca, "-days", "2", "-subj", "/CN=fake-cloud test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", "/CN=" + host],
            ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
             "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext]):
        subprocess.run(argv, check=True, capture_output=True)
    return ca, cert, key


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="fake_cloud.py",
        description="A local environment registry + rendezvous relay (a test double) for "
                    "exec-server's remote mode.",
        epilog=USAGE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default: 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0,
                    help="TCP port; 0 picks a free one (default: 0)")
    ap.add_argument("--public-host", default=None,
                    help="host name to put in issued URLs (default: the bind address)")
    ap.add_argument("--token", default=None,
                    help="expected registry bearer (default: a random one is generated)")
    ap.add_argument("--no-auth", action="store_true", help="accept any registry request")
    ap.add_argument("--ping-interval", type=float, default=None, metavar="SECONDS",
                    help="send WebSocket pings to connected sockets this often (default: "
                         "never)")
    ap.add_argument("--log", action="store_true", help="print requests/upgrades on stderr")
    args = ap.parse_args(argv)
    token = None if args.no_auth else (args.token or "fake-" + secrets.token_hex(16))
    cloud = FakeCloud(args.host, args.port, token=token, ping_interval=args.ping_interval,
                      public_host=args.public_host)
    stop = threading.Event()
    # Handlers first: whoever reads the line below may signal at once (a SIGTERM
    # before them killed the process with -15 on a loaded machine).
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    print("FAKE_CLOUD url=%s token=%s" % (cloud.base_url, token or ""), flush=True)
    seen = [0, 0]
    while not stop.wait(0.2):
        if args.log:
            with cloud.lock:
                reqs, ups = cloud.requests[seen[0]:], cloud.upgrades[seen[1]:]
                seen[0] += len(reqs)
                seen[1] += len(ups)
            for r in reqs:
                print("HTTP %s %s -> %s" % (r["method"], r["target"], r.get("status")),
                      file=sys.stderr, flush=True)
            for u in ups:
                print("UPGRADE %s role=%s -> %s" % (u["path"], u["role"], u["status"]),
                      file=sys.stderr, flush=True)
    cloud.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
