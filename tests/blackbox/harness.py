"""Black-box test harness for exec-server (Python 3 standard library only).

Pieces:
  * Server          - starts `$EXEC_SERVER --listen ws://127.0.0.1:0`, reads the URL line,
                      stops it with SIGTERM and checks the exit status.
  * WebSocket       - a minimal RFC 6455 client (masked frames, fragmentation, raw bytes).
  * Rpc             - a JSON-RPC session over a WebSocket (or stdio) transport, with
                      buffering of notifications and responses matched by id.
  * http_raw        - send a raw HTTP request and parse the response.
  * proc helpers    - find leftover children (by marker env var / parent chain), count fds.
  * run_tests       - a tiny runner: runs every test_* function, prints a summary.

Running our server under a wrapper (e.g. valgrind, see `make valgrind`):
  EXEC_SERVER_WRAPPER="valgrind --leak-check=full --error-exitcode=99"
                                     prefixes our server's command line (never the
                                     reference's); EXEC_TEST_TIMEOUT_SCALE=N stretches
                                     every deadline N times (default 1; 8 with a wrapper).

Running the server inside a container (tests/blackbox/containers.py):
  EXEC_SERVER_CONTAINER=podman|docker-seccomp|no-userns
                                     every Server, ours or the reference, and whatever
                                     command a test gives it, runs in a fresh one; srv.pid
                                     is still the server's own process as the host sees it
                                     (srv.inner_pid: as it sees itself; srv.host_path(p):
                                     its file p from the host). The run skips (77) only
                                     when that place cannot start anything here.

Selecting the server under test:
  EXEC_SERVER=/path/to/exec-server   (set by ctest)
  EXEC_SERVER=ref                    run against the installed reference (`codex exec-server`)
  EXEC_SERVER=/path/to/.../codex     same, explicit path
Tests that check behaviour where ours deliberately differs from the reference ("Ours:" in
PROTOCOL.md) are decorated with @ours_only and are skipped against the reference.
"""

import atexit
import base64
import glob
import hashlib
import json
import os
import re
import shlex
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

import codex_ref  # beside this file: where the reference codex is, and installing it
import containers  # beside this file: the places the server can be run in

CONTAINER = containers.selected()

WRAPPER = shlex.split(os.environ.get("EXEC_SERVER_WRAPPER", ""))
# Extra arguments for our server wherever a test starts it (EXEC_SERVER_ARGS="--sandbox-mode
# landlock" runs a suite against the sandbox without namespaces on a host that has them).
SERVER_ARGS = shlex.split(os.environ.get("EXEC_SERVER_ARGS", ""))
TIMEOUT_SCALE = float(os.environ.get("EXEC_TEST_TIMEOUT_SCALE", "8" if WRAPPER else "1"))
DEFAULT_TIMEOUT = 10.0 * TIMEOUT_SCALE
MARKER_VAR = "EXECBB_MARKER"
SKIP = 77


class TestSkip(Exception):
    pass


class Timeout(AssertionError):
    pass


class ConnectionClosed(Exception):
    pass


class WaitFailed(AssertionError):
    """A wait on the JSON-RPC session failed (deadline or connection closed)."""


def find_reference(version=codex_ref.DEFAULT_VERSION):
    """The installed reference codex of version (tests/blackbox/codex_ref.py), or None."""
    return codex_ref.find(version)


def require_reference(version=codex_ref.DEFAULT_VERSION):
    """The reference codex of version; TestSkip naming npm when it cannot be had."""
    try:
        return codex_ref.require(version)
    except codex_ref.Unavailable as e:
        raise TestSkip(str(e))


def server_path():
    """Return (path, is_reference)."""
    p = os.environ.get("EXEC_SERVER", "")
    if p in ("", "ref", "reference"):
        if p == "":
            # Not under ctest: fall back to a local build, then the reference.
            here = os.path.dirname(os.path.abspath(__file__))
            for cand in ("build/asan/exec-server", "build/exec-server",
                         "build/debug/exec-server", "build/release/exec-server"):
                full = os.path.join(here, "..", "..", cand)
                if os.access(full, os.X_OK):
                    return os.path.normpath(full), False
        ref = find_reference()
        if ref is None:
            return None, True
        return ref, True
    # A path relative to where the test was started: every server runs in a scratch
    # directory of its own (Server.workdir), where it would name nothing. A bare name is
    # left for PATH to find.
    if os.sep in p:
        p = os.path.abspath(p)
    return p, os.path.basename(p) == "codex"


SERVER_PATH, IS_REF = server_path()


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def unb64(s):
    return base64.b64decode(s)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------
# Server process
# ---------------------------------------------------------------------------------------

class Server:
    def __init__(self, ttl=None, cmd=None, listen="ws://127.0.0.1:0", extra_args=(),
                 reference=None, start=True, user=None, container=CONTAINER):
        """user: (uid, gid) to run the command as (setpriv; root only), placed where the
        container needs it; container: where it runs (containers.KINDS; None: here),
        EXEC_SERVER_CONTAINER's by default."""
        if reference is None:
            reference = IS_REF if cmd is None else False
        self.reference = reference
        if cmd is None:
            path = find_reference() if reference and not IS_REF else SERVER_PATH
            if path is None:
                raise TestSkip("no server binary")
            cmd = [path]
            if reference:
                cmd.append("exec-server")
            cmd += ["--listen", listen]
            if ttl is not None:
                if reference:
                    raise TestSkip("reference server has no --session-ttl")
                cmd += ["--session-ttl", str(ttl)]
            cmd += list(extra_args)
            if not reference:
                cmd = WRAPPER + cmd + SERVER_ARGS
        self.listen = listen
        self.proc = None
        self.url = None
        self.host = None
        self.port = None
        self.stderr_file = tempfile.TemporaryFile()
        self.workdir = tempfile.mkdtemp(prefix="execbb-")
        self.container = container
        self.mark = uuid.uuid4().hex  # in its environment: finds it inside a container
        self._pid = None
        self.cmd = containers.wrap(self.container, cmd, self.workdir, user, name=self.mark,
                                   shares=(os.environ.get("EXEC_BUILD_DIR"),
                                           os.path.dirname(SERVER_PATH or "")))
        if start:
            self.start()

    def start(self):
        # the reference's own home kept out of the temporary directory (codex_ref.server_env)
        env = codex_ref.server_env() if self.reference else None
        if self.container:
            env = dict(env or os.environ, **{containers.MARK_VAR: self.mark})
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE if self.listen == "stdio" else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=self.stderr_file, cwd=self.workdir, env=env)
        if self.container:
            # a container outlives its podman client: one this process has not stopped
            # is killed as it exits
            _contained.add(self)
            try:
                self.read_url()
                if self.listen != "stdio":  # (it has exec'd the server by now)
                    self.find_pid()  # now, while nothing else of it runs
            except BaseException:
                self.kill()
                raise
        else:
            self.read_url()

    def read_url(self):
        if self.listen == "stdio":
            return
        t0 = time.monotonic()
        # (a container's own start is not the server's: it has a deadline of its own)
        deadline = time.monotonic() + DEFAULT_TIMEOUT + (
            containers.START_ALLOWANCE if self.container else 0)
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise Timeout("server did not print its URL within %ss; got %r; stderr:\n%s"
                              % (deadline - t0, line, self.stderr_text()))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                b = os.read(fd, 1)
                if not b:
                    self.proc.wait(5)
                    raise AssertionError("server exited (rc=%s) before printing URL; got %r; "
                                         "stderr:\n%s" % (self.proc.returncode, line,
                                                          self.stderr_text()))
                line += b
        self.url = line.decode().strip()
        assert self.url.startswith(("ws://", "wss://")), "bad URL line %r" % self.url
        hostport = self.url.split("://", 1)[1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host = host.strip("[]")
        self.port = int(port)

    # `with Server(...) as srv:` is the one way a test owns a server: a clean exit
    # stops it and checks its exit status and sanitizer output (stop()); an exception
    # kills it so the failure, not a shutdown complaint, is what gets reported.
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop()
        else:
            self.kill()
        return False

    @property
    def pid(self):
        """The server's own process, as the host numbers it: the child, or inside a
        container the process that carries the mark (containers.find_server)."""
        return self.find_pid() if self.container else self.proc.pid

    def find_pid(self):
        if self._pid is None:
            self._pid = wait_until(lambda: containers.find_server(self.mark) or (
                self.proc.poll() is not None and -1), 10 * TIMEOUT_SCALE,
                "the server's process in the %s container" % self.container)
            assert self._pid > 0, "the container exited (rc=%s); stderr:\n%s" % (
                self.proc.returncode, self.stderr_text())
        return self._pid

    @property
    def inner_pid(self):
        """The server's pid where it runs (its own PID namespace): what a command it
        starts, or a path it is sent (/proc/N/...), calls it."""
        return containers.ns_pid(self.pid) if self.container else self.pid

    def host_path(self, path):
        """The server's file `path` as the host reaches it (through its root inside a
        container, whose /dev and / are its own)."""
        return "/proc/%d/root%s" % (self.pid, path) if self.container else path

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self, limit=6000):
        try:
            self.stderr_file.seek(0)
            data = self.stderr_file.read()
        except Exception:
            return "<unavailable>"
        text = data.decode("utf-8", "replace")
        return text[-limit:]

    def connect(self, **kw):
        if self.url and self.url.startswith("wss://") and "ssl_context" not in kw:
            kw["ssl_context"] = getattr(self, "ssl_context", None)
        return WebSocket(self.host, self.port, **kw)

    def session(self, init=True, client_name="blackbox", **kw):
        s = Rpc(WsTransport(self.connect(**kw)), self)
        if init:
            s.initialize(client_name)
        return s

    def stop(self, check=True):
        """SIGTERM, wait, and (for ours) require exit status 0."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(15 * TIMEOUT_SCALE)
            except subprocess.TimeoutExpired:
                self.kill()
                if check:
                    raise AssertionError("server did not exit within 15 s of SIGTERM; stderr:\n"
                                         + self.stderr_text())
        rc = self.proc.returncode
        self.cleanup()
        if check and not self.reference:
            assert rc == 0, "server exit status %r after SIGTERM; stderr:\n%s" % (
                rc, self.stderr_text())
            err = self.stderr_text(1 << 20)
            for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                        "Invalid read", "Invalid write", "definitely lost in loss record",
                        "uninitialised value"):
                assert bad not in err, "sanitizer report in server stderr:\n" + err[-6000:]
        return rc

    def signal(self, sig):
        """Sends sig to the server itself (in a container, not to the machinery around
        it, which passes on only some signals, or none)."""
        pid = self.proc.pid
        if self.container:
            pid = self._pid or containers.find_server(self.mark) or pid
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            if self.container:
                # the server first: a container outlives a killed podman client
                pid = self._pid or containers.find_server(self.mark)
                if pid:
                    self.signal(signal.SIGKILL)
                    try:
                        self.proc.wait(10 * TIMEOUT_SCALE)
                    except subprocess.TimeoutExpired:
                        pass
                if self.proc.poll() is None:
                    containers.discard(self.container, self.mark)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(5)
        self.cleanup()

    def cleanup(self):
        """Remove the server's scratch working directory (once the server is gone)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        _contained.discard(self)
        import shutil
        shutil.rmtree(self.workdir, ignore_errors=True)


_contained = set()  # servers in a container, not stopped yet


@atexit.register
def _kill_contained():
    for srv in list(_contained):
        srv.kill()


# ---------------------------------------------------------------------------------------
# Raw HTTP
# ---------------------------------------------------------------------------------------

def make_ca(d):
    """A test CA and a certificate for 127.0.0.1 signed by it, made with the openssl
    command in directory d: returns the paths (ca.pem, srv.pem, srv.key). Raises OSError
    or CalledProcessError when openssl cannot (callers skip)."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=d)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=execbb test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
        "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")
    return os.path.join(d, "ca.pem"), os.path.join(d, "srv.pem"), os.path.join(d, "srv.key")


def http_raw(host, port, request, timeout=DEFAULT_TIMEOUT):
    """Send `request` (str/bytes) and return (status, headers dict lowercased, body bytes).
    Reads until Content-Length is satisfied or the connection closes."""
    if isinstance(request, str):
        request = request.encode()
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(request)
        data = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in data:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines and lines[0].startswith("HTTP/1."), "bad HTTP response %r" % data[:200]
        status = int(lines[0].split()[1])
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(body) < n:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
        elif status != 101:
            try:
                s.settimeout(0.5)
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    body += chunk
            except (socket.timeout, OSError):
                pass
        return status, headers, body
    finally:
        s.close()


# ---------------------------------------------------------------------------------------
# WebSocket client
# ---------------------------------------------------------------------------------------

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class WebSocket:
    def __init__(self, host, port, path="/", headers=(), timeout=DEFAULT_TIMEOUT,
                 ssl_context=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:  # wss://
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self.buf = b""
        self.closed = False
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, host, port, key))
        for h in headers:
            req += h + "\r\n"
        req += "\r\n"
        self.sock.sendall(req.encode())
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            self._fill(deadline)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        if self.status != 101:
            self.sock.close()
            raise AssertionError("websocket upgrade failed: %s" % lines[0])
        expect = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert self.headers.get("sec-websocket-accept") == expect, "bad Sec-WebSocket-Accept"
        self.peer = self.sock.getsockname()  # our address as the server sees it

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Timeout("timed out waiting for data from server")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            raise Timeout("timed out waiting for data from server")
        except (ConnectionResetError, BrokenPipeError) as e:
            self.closed = True
            raise ConnectionClosed("connection reset: %s" % e)
        if not chunk:
            self.closed = True
            raise ConnectionClosed("server closed the TCP connection")
        self.buf += chunk

    def _need(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    # -- sending --
    @staticmethod
    def build_frame(opcode, payload, fin=True, mask=True, rsv=0, length_override=None):
        if isinstance(payload, str):
            payload = payload.encode()
        b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload) if length_override is None else length_override
        mbit = 0x80 if mask else 0
        if n < 126:
            hdr = struct.pack("!BB", b0, mbit | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, mbit | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, mbit | 127, n)
        if mask:
            key = os.urandom(4)
            hdr += key
            payload = _xor_mask(payload, key)
        return hdr + payload

    def send_raw(self, data):
        self.sock.sendall(data)

    def send_frame(self, opcode, payload, fin=True, **kw):
        self.sock.sendall(self.build_frame(opcode, payload, fin=fin, **kw))

    def send_text(self, text, fragments=1):
        self.send_message(OP_TEXT, text, fragments)

    def send_binary(self, data, fragments=1):
        self.send_message(OP_BINARY, data, fragments)

    def send_message(self, opcode, data, fragments=1):
        if isinstance(data, str):
            data = data.encode()
        if fragments <= 1:
            self.send_frame(opcode, data)
            return
        size = max(1, -(-len(data) // fragments))
        pieces = [data[i:i + size] for i in range(0, len(data), size)] or [b""]
        for i, p in enumerate(pieces):
            self.send_frame(opcode if i == 0 else OP_CONT, p, fin=(i == len(pieces) - 1))

    def ping(self, payload=b""):
        self.send_frame(OP_PING, payload)

    def close(self, code=1000, reason=b""):
        try:
            self.send_frame(OP_CLOSE, struct.pack("!H", code) + reason)
        except OSError:
            pass

    def shutdown(self):
        try:
            self.sock.close()
        except OSError:
            pass
        self.closed = True

    # -- receiving --
    def recv_frame(self, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        b0, b1 = self._need(2, deadline)
        fin = bool(b0 & 0x80)
        opcode = b0 & 0x0F
        assert not (b1 & 0x80), "server sent a masked frame"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._need(2, deadline))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._need(8, deadline))[0]
        payload = self._need(n, deadline)
        return opcode, payload, fin

    def recv_message(self, timeout=DEFAULT_TIMEOUT, auto_pong=True):
        """Return (opcode, payload) for a data message (reassembled), a close frame
        (OP_CLOSE, payload), or a ping when auto_pong is False. Raises ConnectionClosed on
        EOF and Timeout at the deadline."""
        deadline = time.monotonic() + timeout
        parts = []
        first_op = None
        while True:
            op, payload, fin = self.recv_frame(max(0.001, deadline - time.monotonic()))
            if op == OP_PING:
                if auto_pong:
                    try:
                        self.send_frame(OP_PONG, payload)
                    except OSError:
                        pass
                    continue
                return op, payload
            if op == OP_PONG:
                if not auto_pong:
                    return op, payload
                continue
            if op == OP_CLOSE:
                return op, payload
            if op in (OP_TEXT, OP_BINARY):
                first_op = op
                parts = [payload]
            elif op == OP_CONT:
                assert first_op is not None, "continuation frame without a start"
                parts.append(payload)
            else:
                raise AssertionError("unexpected opcode %d" % op)
            if fin:
                return first_op, b"".join(parts)

    def wait_closed(self, timeout=DEFAULT_TIMEOUT):
        """True if the server closes the connection (Close frame or EOF) before the
        deadline; data messages received meanwhile are returned in a list as second value."""
        deadline = time.monotonic() + timeout
        got = []
        while True:
            try:
                op, payload = self.recv_message(max(0.001, deadline - time.monotonic()))
            except ConnectionClosed:
                return True, got
            except Timeout:
                return False, got
            if op == OP_CLOSE:
                return True, got
            got.append((op, payload))


def _xor_mask(data, key):
    if not data:
        return b""
    n = len(data)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


# ---------------------------------------------------------------------------------------
# JSON-RPC
# ---------------------------------------------------------------------------------------

class WsTransport:
    def __init__(self, ws):
        self.ws = ws

    def send(self, text):
        self.ws.send_text(text)

    def recv(self, timeout):
        """Return the text of the next message, or None when the connection closed."""
        while True:
            try:
                op, payload = self.ws.recv_message(timeout)
            except ConnectionClosed:
                return None
            if op == OP_CLOSE:
                return None
            assert op == OP_TEXT, "server sent a non-text data message (opcode %d)" % op
            try:
                return payload.decode("utf-8")
            except UnicodeDecodeError as e:
                raise AssertionError("server sent invalid UTF-8 in a text frame (%s): %r"
                                     % (e, payload[:300]))

    def close(self):
        self.ws.close()
        self.ws.shutdown()


class StdioTransport:
    def __init__(self, proc):
        self.proc = proc
        self.buf = b""

    def send(self, text):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("timed out waiting for a line on stdout")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass


class RpcError(AssertionError):
    def __init__(self, method, error):
        AssertionError.__init__(self, "%s failed: %s" % (method, json.dumps(error)))
        self.error = error
        self.code = error.get("code")
        self.message = error.get("message")


class Rpc:
    def __init__(self, transport, server=None):
        self.t = transport
        self.server = server
        self.next_id = 1
        self.responses = {}     # id-key -> message
        self.raw_responses = {}  # id-key -> raw text
        self.notes = {}         # processId -> [params with 'method' added], arrival order
        self.other = []         # unmatched responses, id -1 errors, other notifications
        self.other_raw = []
        self.log = []           # (direction, text) of everything
        self.pending = set()    # id-keys of requests sent and not yet answered
        self.closed = False
        self.session_id = None

    # -- plumbing --
    @staticmethod
    def key(i):
        return json.dumps(i)

    def send_raw(self, text):
        self.log.append((">", text))
        self.t.send(text)

    def send_obj(self, obj):
        self.send_raw(json.dumps(obj, separators=(",", ":")))

    def transcript(self, last=60):
        lines = ["%s %s" % (d, t if len(t) < 400 else t[:400] + "...") for d, t in self.log]
        return "\n".join(lines[-last:])

    def pump(self, timeout):
        """Receive one message and file it. Returns the parsed message, or None on close."""
        if self.closed:
            return None
        text = self.t.recv(timeout)
        if text is None:
            self.closed = True
            self.log.append(("<", "[connection closed]"))
            return None
        self.log.append(("<", text))
        msg = json.loads(text)
        if "id" in msg and ("result" in msg or "error" in msg) and \
                self.key(msg["id"]) in self.pending:
            k = self.key(msg["id"])
            self.pending.discard(k)
            self.responses[k] = msg
            self.raw_responses[k] = text
        elif "method" in msg and isinstance(msg.get("params"), dict) and \
                "processId" in msg["params"]:
            p = dict(msg["params"])
            p["method"] = msg["method"]
            self.notes.setdefault(p["processId"], []).append(p)
        else:
            self.other.append(msg)
            self.other_raw.append(text)
        return msg

    def fail(self, what):
        raise WaitFailed("%s\n--- transcript ---\n%s" % (what, self.transcript()))

    # -- requests --
    def send_request(self, method, params=None, id=None, omit_params=False, trace=None):
        if id is None:
            id = self.next_id
            self.next_id += 1
        msg = {"id": id, "method": method}
        if not omit_params:
            msg["params"] = params
        if trace is not None:
            msg["trace"] = trace
        self.pending.add(self.key(id))
        self.send_obj(msg)
        return id

    def wait_response(self, id, timeout=DEFAULT_TIMEOUT, raw=False):
        k = self.key(id)
        deadline = time.monotonic() + timeout
        while k not in self.responses:
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("no response to id %s within %ss" % (k, timeout))
            try:
                m = self.pump(left)
            except Timeout:
                continue
            if m is None:
                self.fail("connection closed while waiting for response to id %s" % k)
        msg = self.responses.pop(k)
        text = self.raw_responses.pop(k)
        return (msg, text) if raw else msg

    def request(self, method, params=None, timeout=DEFAULT_TIMEOUT, **kw):
        """Send a request and return the full response message."""
        id = self.send_request(method, params, **kw)
        return self.wait_response(id, timeout)

    def call(self, method, params=None, timeout=DEFAULT_TIMEOUT, **kw):
        """Send a request and return its result; raise RpcError on an error response."""
        m = self.request(method, params, timeout, **kw)
        if "error" in m:
            raise RpcError(method, m["error"])
        return m["result"]

    def error(self, method, params=None, timeout=DEFAULT_TIMEOUT, **kw):
        """Send a request that must fail; return (code, message)."""
        m = self.request(method, params, timeout, **kw)
        assert "error" in m, "%s was expected to fail, got %s\n%s" % (
            method, json.dumps(m), self.transcript(10))
        return m["error"]["code"], m["error"]["message"]

    def notify(self, method, params=None, omit_params=False):
        msg = {"method": method}
        if not omit_params:
            msg["params"] = params
        self.send_obj(msg)

    def initialize(self, client_name="blackbox", resume=None):
        p = {"clientName": client_name}
        if resume is not None:
            p["resumeSessionId"] = resume
        r = self.call("initialize", p)
        assert isinstance(r.get("sessionId"), str), r
        self.session_id = r["sessionId"]
        self.notify("initialized", {})
        return r

    # -- waiting for other traffic --
    def wait_other(self, pred, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.other):
                if pred(m):
                    self.other_raw.pop(i)
                    return self.other.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("no matching message within %ss" % timeout)
            try:
                if self.pump(left) is None:
                    self.fail("connection closed while waiting for a message")
            except Timeout:
                pass

    def next_other(self, timeout=DEFAULT_TIMEOUT):
        """Return (msg, raw_text) of the next message that is neither a response to a
        request sent with send_request nor a process notification."""
        deadline = time.monotonic() + timeout
        while not self.other:
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("no message within %ss" % timeout)
            try:
                if self.pump(left) is None:
                    self.fail("connection closed while waiting for a message")
            except Timeout:
                pass
        return self.other.pop(0), self.other_raw.pop(0)

    def raw_roundtrip(self, text, timeout=DEFAULT_TIMEOUT):
        """Send raw text; return (msg, raw) of the next non-process message."""
        self.send_raw(text)
        return self.next_other(timeout)

    def wait_notification(self, pred, timeout=DEFAULT_TIMEOUT, process_id=None):
        """Wait for a process notification (params dict with 'method') matching pred.
        Does not consume it."""
        deadline = time.monotonic() + timeout
        while True:
            ids = [process_id] if process_id is not None else list(self.notes)
            for pid in ids:
                for n in self.notes.get(pid, []):
                    if pred(n):
                        return n
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("no matching notification within %ss" % timeout)
            try:
                if self.pump(left) is None:
                    self.fail("connection closed while waiting for a notification")
            except Timeout:
                pass

    def wait_for(self, cond, timeout=DEFAULT_TIMEOUT, process_id=None, what="condition"):
        """Pump messages until cond() is true (evaluated once per message)."""
        deadline = time.monotonic() + timeout
        while not cond():
            left = deadline - time.monotonic()
            if left <= 0:
                self.fail("%s not reached within %ss" % (what, timeout))
            try:
                if self.pump(left) is None:
                    if cond():
                        return
                    self.fail("connection closed while waiting for %s" % what)
            except Timeout:
                pass

    def wait_closed(self, timeout=DEFAULT_TIMEOUT):
        """True if the server ends the connection before the deadline."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self.pump(left)
            except Timeout:
                return False
            except ConnectionClosed:
                self.closed = True
        return True

    def quiet(self, seconds):
        """Pump messages for `seconds`; returns messages received."""
        deadline = time.monotonic() + seconds
        got = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return got
            try:
                m = self.pump(left)
            except Timeout:
                return got
            if m is None:
                return got
            got.append(m)

    # -- process helpers --
    def start(self, process_id, argv, cwd=None, env=None, tty=False, pipe_stdin=None,
              arg0=None, marker=True, wait=True, **extra):
        """process/start; its result. wait=False only sends it and returns its id, for a
        caller that must see whole what may come before the reply (the child's policy
        requests: a wait would file them as notifications, without their id)."""
        if cwd is None:
            cwd = "file://" + (self.server.workdir if self.server else "/tmp")
        if env is None:
            env = {"PATH": "/usr/bin:/bin"}
        env = dict(env)
        if marker and MARKER_VAR not in env:
            env[MARKER_VAR] = MARKER
        p = {"processId": process_id, "argv": argv, "cwd": cwd, "env": env, "tty": tty}
        if pipe_stdin is not None:
            p["pipeStdin"] = pipe_stdin
        if arg0 is not None:
            p["arg0"] = arg0
        p.update(extra)
        return self.call("process/start", p) if wait else self.send_request("process/start", p)

    def read(self, process_id, after_seq=None, max_bytes=None, wait_ms=None,
             timeout=DEFAULT_TIMEOUT):
        p = {"processId": process_id}
        if after_seq is not None:
            p["afterSeq"] = after_seq
        if max_bytes is not None:
            p["maxBytes"] = max_bytes
        if wait_ms is not None:
            p["waitMs"] = wait_ms
        return self.call("process/read", p, timeout=timeout + (wait_ms or 0) / 1000.0)

    def write(self, process_id, data, write_id=None):
        p = {"processId": process_id, "chunk": b64(data)}
        if write_id is not None:
            p["writeId"] = write_id
        return self.call("process/write", p)

    def terminate(self, process_id):
        return self.call("process/terminate", {"processId": process_id})

    def collect_until_closed(self, process_id, timeout=DEFAULT_TIMEOUT):
        """Wait for process/closed and return a summary of the notifications:
        {'stdout','stderr','pty': bytes, 'exit_code', 'exit_seq', 'closed_seq',
         'seqs': [seq in arrival order], 'events': [(method, seq, stream)]}"""
        self.wait_notification(lambda n: n["method"] == "process/closed", timeout, process_id)
        # the reference may deliver exited after closed; wait for both
        self.wait_notification(lambda n: n["method"] == "process/exited", timeout, process_id)
        return summarize(self.notes.get(process_id, []))

    def output_so_far(self, process_id):
        return summarize(self.notes.get(process_id, []))

    def close(self):
        try:
            self.t.close()
        except Exception:
            pass


def summarize(notes):
    out = {"stdout": b"", "stderr": b"", "pty": b"", "exit_code": None, "exit_seq": None,
           "closed_seq": None, "seqs": [], "events": []}
    parts = {"stdout": [], "stderr": [], "pty": []}
    for n in notes:
        m = n["method"]
        seq = n.get("seq")
        out["seqs"].append(seq)
        if m == "process/output":
            parts.setdefault(n["stream"], []).append(unb64(n["chunk"]))
            out["events"].append((m, seq, n["stream"]))
        elif m == "process/exited":
            out["exit_code"] = n["exitCode"]
            out["exit_seq"] = seq
            out["events"].append((m, seq, None))
        elif m == "process/closed":
            out["closed_seq"] = seq
            out["events"].append((m, seq, None))
    for k, v in parts.items():
        out[k] = b"".join(v)
    return out


def check_seq_rules(summary, ctx="", strict=None):
    """§5.7: seqs start at 1, strictly increasing in arrival order, no gaps, closed last.
    Against the reference (strict=False) arrival order is not required (it is only
    "Ours MUST")."""
    if strict is None:
        strict = not IS_REF
    seqs = summary["seqs"]
    assert seqs, "no notifications %s" % ctx
    if not strict:
        seqs = sorted(seqs)
        assert summary["closed_seq"] == seqs[-1], "closed does not carry the last seq: %r %s" % (
            summary["events"], ctx)
    assert seqs == list(range(1, len(seqs) + 1)), "seqs not 1..n in order: %r %s" % (seqs, ctx)
    assert summary["closed_seq"] == seqs[-1], "closed does not carry the last seq: %r %s" % (
        summary["events"], ctx)
    assert summary["exit_seq"] is not None, "no process/exited %s" % ctx


# ---------------------------------------------------------------------------------------
# Process / fd inspection
# ---------------------------------------------------------------------------------------

MARKER = "bb-" + uuid.uuid4().hex[:12]


def _proc_stat(pid):
    st = containers.proc_stat(pid)
    return st and st[1:3]  # state, ppid


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


proc_comm = _comm  # public, for the tests


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, D, T, Z, ...), None when pid is gone."""
    st = _proc_stat(pid)
    return st[0] if st else None


# The server's own long-lived helper processes, not children it was asked to run.
SERVER_HELPERS = ("exec-spawner",)


def descendants(root):
    """Processes below root, except the server's own spawner."""
    parent = {}
    for pid in all_pids():
        st = _proc_stat(pid)
        if st:
            parent[pid] = st[1]
    out = []
    for pid in parent:
        if _comm(pid) in SERVER_HELPERS:
            continue
        p = parent.get(pid)
        seen = 0
        while p and seen < 64:
            if p == root:
                out.append(pid)
                break
            p = parent.get(p)
            seen += 1
    return out


def rss_kib(pid):
    """Resident memory of pid in KiB (0 when it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def server_with_env(env, **kw):
    """A Server whose process environment has `env` laid over this process's, a value
    of None removing that variable (the test's own environment is left as it was)."""
    old = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        return Server(**kw)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def marked_pids(marker=None):
    """Live (non-zombie) processes whose environment contains MARKER_VAR=marker."""
    needle = ("%s=%s" % (MARKER_VAR, marker or MARKER)).encode()
    out = []
    me = os.getpid()
    for pid in all_pids():
        if pid == me:
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            st = _proc_stat(pid)
            if st and st[0] not in ("Z", "X"):
                out.append(pid)
    return out


def wait_no_marked(marker=None, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        left = marked_pids(marker)
        if not left:
            return
        if time.monotonic() > deadline:
            info = []
            for p in left:
                try:
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        info.append("%d %r" % (p, f.read().replace(b"\0", b" ")))
                except OSError:
                    pass
            raise AssertionError("processes left behind: %s" % info)
        time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above


def kill_marked(marker=None):
    for p in marked_pids(marker):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def read_line_matching(f, pattern, timeout=DEFAULT_TIMEOUT):
    """Reads lines of the binary stream f (a child's stdout or stderr) until one matches
    the bytes regex `pattern`; returns the match."""
    deadline = time.monotonic() + timeout
    seen = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([f], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        line = f.readline()
        if not line:
            break
        seen += line
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError("no line matching %r; got %r" % (pattern, seen))


def curl_sha256(url, timeout=600):
    """Downloads url with curl, hashing it as it streams (nothing on disk); returns
    (bytes, sha256 hex)."""
    p = subprocess.Popen(["curl", "-sS", "--fail", url], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    h = hashlib.sha256()
    n = 0
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        h.update(chunk)
        n += len(chunk)
    rc = p.wait(timeout)
    assert rc == 0, "curl %s: exit %d: %r" % (url, rc, p.stderr.read())
    return n, h.hexdigest()


def wait_until(pred, timeout=DEFAULT_TIMEOUT, what="condition", interval=0.05):
    """Polls pred until it returns something true (returned) or the deadline passes.
    Tests wait with this (or the helpers below), never with a fixed sleep
    (tests/arch/test_sleeps.py)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Timeout("timed out waiting for %s" % what)
        time.sleep(interval)  # sleep-ok: the poll interval, against the deadline above


# Observable states to wait for (instead of sleeping and hoping).

# Where a writer to a full pipe sleeps, by kernel version (anon_pipe_write since 6.15).
PIPE_WAITS = ("pipe_write", "anon_pipe_write", "pipe_wait", "pipe_wait_writable")


def blocked_on_pipe(pid):
    """Whether pid sleeps in a write to a full pipe: a child whose output the server
    is not reading (back-pressure), seen in /proc/PID/stat and /proc/PID/wchan."""
    st = _proc_stat(pid)
    if not st or st[0] != "S":
        return False
    try:
        with open("/proc/%d/wchan" % pid) as f:
            return f.read().strip() in PIPE_WAITS
    except OSError:
        return False


def held_back_or_done(marker):
    """A process tagged `marker` is held back by back-pressure, or all have finished
    (their output is in the server's hands)."""
    pids = marked_pids(marker)
    return not pids or any(blocked_on_pipe(p) for p in pids)


def tcp_sockets():
    """(state, local port, remote port) of every TCP socket in /proc/net/tcp{,6};
    state is the kernel's hex code ("01" ESTABLISHED, "08" CLOSE_WAIT, ...)."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    p = line.split()
                    out.append((p[3], int(p[1].rsplit(":", 1)[1], 16),
                                int(p[2].rsplit(":", 1)[1], 16)))
        except OSError:
            pass
    return out


def server_connections(port):
    """The server-side TCP connections of a server listening on `port` that it has not
    closed yet (ESTABLISHED or CLOSE_WAIT): a connection the client dropped stays
    counted until the server has noticed and closed its end."""
    return sum(1 for st, local, _ in tcp_sockets() if st in ("01", "08") and local == port)


def socket_unread(sock):
    """Bytes waiting in sock's receive queue (FIONREAD): the peer has sent them."""
    import fcntl
    import termios
    buf = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", buf)[0]


def unix_socket_unread(pid):
    """Bytes waiting unread in the receive queues of pid's Unix sockets (the kernel's
    sock_diag, as `ss -x` shows them): a request written to a stopped process."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
    NLM_F_REQUEST, NLM_F_DUMP, NLMSG_ERROR, NLMSG_DONE = 1, 0x300, 2, 3
    UDIAG_SHOW_RQLEN, UNIX_DIAG_RQLEN = 0x10, 4
    req = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xffffffff, 0, UDIAG_SHOW_RQLEN, 0, 0)
    msg = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY,
                      NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + req
    total = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.sendall(msg)
        while True:
            data = nl.recv(1 << 16)
            off = 0
            while off + 16 <= len(data):
                ln, typ = struct.unpack_from("=IH", data, off)
                if typ == NLMSG_DONE:
                    return total
                if typ == NLMSG_ERROR:
                    raise OSError("sock_diag: %d" % -struct.unpack_from("=i", data, off + 16)[0])
                ino = struct.unpack_from("=I", data, off + 20)[0]
                a = off + 32  # nlmsghdr (16) + unix_diag_msg (16), then attributes
                while a + 4 <= off + ln:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if atype == UNIX_DIAG_RQLEN and ino in inodes:
                        total += struct.unpack_from("=I", data, a + 4)[0]
                    a += (alen + 3) & ~3
                off += (ln + 3) & ~3


# ---------------------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------------------

def ours_only(fn):
    fn.ours_only = True
    return fn


def needs_own_server(fn):
    """The test starts its own server(s); the runner passes None."""
    fn.own_server = True
    return fn


def run_tests(namespace, per_test_timeout=60):
    """Run every test_* function in `namespace` (definition order). Each takes one
    argument: a shared Server (restarted if a test kills it). Exit 1 on any failure,
    77 if there is no server binary."""
    if SERVER_PATH is None:
        print("SKIP: no server binary (set EXEC_SERVER)")
        sys.exit(SKIP)
    if CONTAINER:
        containers.require(CONTAINER)
    print("server under test: %s%s%s" % (SERVER_PATH, " (reference)" if IS_REF else "",
                                         " in " + CONTAINER if CONTAINER else ""))
    only = set(sys.argv[1:])
    tests = [(n, f) for n, f in namespace.items()
             if n.startswith("test_") and callable(f) and (not only or n in only)]
    tests.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
    passed = failed = skipped = 0
    failures = []
    srv = None

    class TestTimeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise TestTimeout("test exceeded %ss" % per_test_timeout)

    per_test_timeout = int(per_test_timeout * TIMEOUT_SCALE)
    signal.signal(signal.SIGALRM, on_alarm)
    for name, fn in tests:
        if getattr(fn, "ours_only", False) and IS_REF:
            print("SKIP %s (ours-only behaviour)" % name)
            skipped += 1
            continue
        arg = None
        if not getattr(fn, "own_server", False):
            if srv is None or not srv.alive():
                srv = Server()
            arg = srv
        t0 = time.monotonic()
        signal.alarm(per_test_timeout)
        try:
            fn(arg)
            signal.alarm(0)
            if arg is not None and not arg.alive():
                raise AssertionError("server died during the test (rc=%s); stderr:\n%s"
                                     % (arg.proc.returncode, arg.stderr_text()))
            passed += 1
            print("PASS %s (%.2fs)" % (name, time.monotonic() - t0))
        except TestSkip as e:
            signal.alarm(0)
            skipped += 1
            print("SKIP %s (%s)" % (name, e))
        except BaseException as e:  # noqa
            signal.alarm(0)
            if isinstance(e, KeyboardInterrupt):
                raise
            failed += 1
            failures.append(name)
            print("FAIL %s (%.2fs)" % (name, time.monotonic() - t0))
            traceback.print_exc()
            if arg is not None and not arg.alive():
                print("server died (rc=%s); stderr:\n%s" % (arg.proc.returncode,
                                                             arg.stderr_text()))
        sys.stdout.flush()
    if srv is not None:
        try:
            srv.stop()
        except AssertionError as e:
            failed += 1
            failures.append("server_shutdown")
            print("FAIL server_shutdown: %s" % e)
    kill_marked()
    print("%d passed, %d failed, %d skipped%s" % (
        passed, failed, skipped, (": " + ", ".join(failures)) if failures else ""))
    sys.exit(1 if failed else 0)
