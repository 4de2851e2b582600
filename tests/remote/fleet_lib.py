"""Helpers of the `exec-server registry` black-box tests (test_fleet_*.py): start a
registry node, make tokens with its CLI, start executors (ours or stock codex) against
it, and a recording TCP proxy that shows the WebSocket messages the rendezvous routed
as they crossed the wire (to check that nothing in them is cleartext).

  reg = Registry(server, "sqlite:" + path)     # `exec-server registry ...`, URL read back
  tok = reg.token("env-1", "executor")         # `registry token create`
  ex = Executor(server, reg.url, "env-1", tok) # ours: --remote with the bearer on stdin
  ex = Executor(codex, reg.url, ..., stock=True)  # `codex exec-server --remote`, CODEX_API_KEY
  reg.wait_attached("env-1")                   # the registry's own log says so
  reg.stop()                                   # SIGTERM; exit 0, no sanitizer report
"""
import os
import sys
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "blackbox"))
import codex_ref  # noqa: E402  (the one place that knows where each version lives)


def codex_171():
    """The stock codex 0.171.0 binary (installed by the ctest fixture, or by npm when run
    alone), or None when it cannot be had."""
    try:
        return codex_ref.require("0.171.0")
    except codex_ref.Unavailable:
        return None


def poll_until(check, timeout, what, every=0.1):
    """Calls check() until it returns something true (returned), at most timeout s;
    check may assert on what it must never see meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)  # sleep-ok: the poll interval


def readyz(url):
    """The registry's /readyz status."""
    import urllib.error
    import urllib.request
    try:
        return urllib.request.urlopen(url + "/readyz", timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def _stop(proc, timeout=20):
    """SIGTERM, then SIGKILL of the group after timeout; the exit status (None: killed)."""
    rc = proc.poll()
    if rc is None:
        proc.terminate()
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return rc


def _check_exit(rc, text, what):
    assert rc == 0, "%s exit status %r:\n%s" % (what, rc, text[-4000:])
    for bad in SANITIZER_MARKS:
        assert bad not in text, text[-6000:]


class _Process:
    """A process the tests started in its own group (self.proc)."""

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class Registry(_Process):
    """One `exec-server registry` node. Its stderr goes to a file the tests read."""

    def __init__(self, server, database, args=(), env=None, wrapper=(), timeout=20.0):
        self.server, self.database = server, database
        self.dir = tempfile.mkdtemp(prefix="execbb-fleet-")
        self.log_path = os.path.join(self.dir, "registry.log")
        self.err = open(self.log_path, "wb")
        e = dict(os.environ, **(env or {}))
        cmd = list(wrapper) + [server, "registry"] + (["--database", database] if database
                                                      else []) + ["--log-level", "info"] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.err, env=e, start_new_session=True)
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().decode().strip() if r else ""
        if not line.startswith("http"):
            self.proc.kill()
            raise AssertionError("the registry printed no URL (rc=%s):\n%s"
                                 % (self.proc.wait(), self.log()))
        self.url = line
        self.port = int(line.rsplit(":", 1)[1].split("/")[0])

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def cli(self, *args, check=True):
        r = subprocess.run([self.server, "registry"] + list(args) +
                           ["--database", self.database], capture_output=True, timeout=60)
        if check:
            assert r.returncode == 0, "registry %s: %s" % (args, r.stderr.decode())
        return r

    def token(self, env, role, expires=None):
        extra = ["--expires", expires] if expires else []
        r = self.cli("token", "create", "--environment", env, "--role", role, *extra)
        return r.stdout.decode().strip()

    def count(self, pattern):
        return len(re.findall(pattern, self.log()))

    def wait_log(self, pattern, timeout=20.0, count=1):
        deadline = time.monotonic() + timeout
        while self.count(pattern) < count:
            if time.monotonic() > deadline:
                raise AssertionError("registry log: no %r (x%d) in time:\n%s"
                                     % (pattern, count, self.log()[-3000:]))
            if self.proc.poll() is not None:
                raise AssertionError("the registry exited (rc=%s):\n%s"
                                     % (self.proc.returncode, self.log()[-3000:]))
            time.sleep(0.05)  # sleep-ok: polling the log file

    def wait_attached(self, env, timeout=30.0, count=1):
        self.wait_log(r"event=attach environment=%s " % re.escape(env), timeout, count)

    def metric(self, name):
        import urllib.request
        body = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        total = 0.0
        for line in body.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, check=True):
        rc = _stop(self.proc)
        self.err.close()
        text = self.log()
        shutil.rmtree(self.dir, ignore_errors=True)
        if check:
            _check_exit(rc, text, "registry")
        return text


class Executor(_Process):
    """An executor registered at a registry: ours (--remote, bearer line on stdin) or
    stock codex (`codex exec-server --remote`, CODEX_API_KEY: loopback registry)."""

    def __init__(self, binary, registry_url, env_id, token, stock=False, extra_env=None,
                 wrapper=()):
        self.stock = stock
        # codex refuses helper aliases under /tmp: a HOME under /var/tmp.
        self.home = tempfile.mkdtemp(prefix="execbb-fleet-exec-", dir="/var/tmp")
        e = dict(os.environ, HOME=self.home, CODEX_HOME=self.home, RUST_LOG="warn",
                 EXEC_SERVER_REMOTE_BACKOFF_MS="300", **(extra_env or {}))
        if stock:
            e["CODEX_API_KEY"] = token
            cmd = [binary, "exec-server", "--remote", registry_url, "--environment-id", env_id]
        else:
            e.pop("CODEX_API_KEY", None)
            cmd = list(wrapper) + [binary, "--remote", registry_url, "--environment-id", env_id,
                                   "--registration-bearer-stdin"]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=e, cwd=self.home, stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        if not stock:
            self.proc.stdin.write((token + "\n").encode())
        self.proc.stdin.flush()

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")[-6000:]

    def stop(self, check=True):
        rc = _stop(self.proc)
        err = self.stderr_text()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        shutil.rmtree(self.home, ignore_errors=True)
        if check and not self.stock:
            _check_exit(rc, err, "executor")
        return err


def ws_messages(raw):
    """The WebSocket messages in one direction of a recorded connection (the HTTP
    head first, then frames; masked client frames are unmasked). Returns a list of
    (opcode, payload) of data messages; stops at a truncated frame."""
    head_end = raw.find(b"\r\n\r\n")
    if head_end < 0:
        return []
    pos, out, parts, first = head_end + 4, [], [], None
    while pos + 2 <= len(raw):
        b0, b1 = raw[pos], raw[pos + 1]
        n, pos = b1 & 0x7F, pos + 2
        if n == 126:
            n, pos = struct.unpack(">H", raw[pos:pos + 2])[0], pos + 2
        elif n == 127:
            n, pos = struct.unpack(">Q", raw[pos:pos + 8])[0], pos + 8
        key = None
        if b1 & 0x80:
            key, pos = raw[pos:pos + 4], pos + 4
        if pos + n > len(raw):
            break
        payload = raw[pos:pos + n]
        pos += n
        if key:
            payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload)) if n < 4096 else \
                (int.from_bytes(payload, "little") ^ int.from_bytes(
                    (key * (n // 4 + 1))[:n], "little")).to_bytes(n, "little")
        op = b0 & 0x0F
        if op >= 8:
            continue
        if op != 0:
            first, parts = op, []
        parts.append(payload)
        if b0 & 0x80:
            out.append((first, b"".join(parts)))
    return out


class _Recorder:
    """One direction's bytes, as a Proxy sink."""

    def __init__(self):
        self.data = bytearray()

    def feed(self, d):
        self.data += d


def _proxy_base():
    from test_codex_client import Proxy  # tests/blackbox, on the path of every caller
    return Proxy


class RecordingProxy(_proxy_base()):
    """test_codex_client's TCP forwarder keeping every byte of every connection, both
    ways. Its target may be set after it starts (a registry's --public-url must name the
    proxy before the registry's own port is known); cut() drops every connection."""

    def __init__(self, target=None):
        self.records = []
        super().__init__("127.0.0.1", 0)
        self.target = target
        self.url = "http://127.0.0.1:%d" % self.port

    def _sinks(self):
        rec = (_Recorder(), _Recorder())
        with self.lock:
            self.records.append(rec)
        return rec

    def messages(self):
        """Every WebSocket data message either way: (direction, opcode, payload),
        direction 'up' (client to registry) or 'down'."""
        with self.lock:
            conns = [(bytes(a.data), bytes(b.data)) for a, b in self.records]
        out = []
        for up, down in conns:
            if not up.startswith(b"GET "):
                continue
            out += [("up",) + m for m in ws_messages(up)]
            out += [("down",) + m for m in ws_messages(down)]
        return out


def frame_body(payload):
    """The body field number (5 data ... 10 handshake) of a RelayMessageFrame, or None."""
    import fake_cloud
    try:
        return fake_cloud.parse_frame(payload)["body"]
    except ValueError:
        return None


class PgCluster:
    """A throwaway PostgreSQL cluster from Debian's postgresql package: initdb and
    pg_ctl as an unprivileged user (uid 65534 through setpriv when the tests run as
    root; PostgreSQL refuses root), listening only on a Unix socket in a temp dir,
    trust authentication for its one user. url is a libpq URI for it."""

    @staticmethod
    def bindir():
        import glob
        hits = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        return os.path.dirname(hits[-1]) if hits else None

    def __init__(self):
        self.bin = self.bindir()
        if not self.bin:
            raise RuntimeError("Debian's postgresql package is not installed")
        self.dir = tempfile.mkdtemp(prefix="execbb-pg-")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        self.logfile = os.path.join(self.dir, "postgres.log")
        os.mkdir(self.sock)
        self.prefix = []
        if os.getuid() == 0:
            os.chown(self.dir, 65534, 65534)
            os.chown(self.sock, 65534, 65534)
            self.prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "fleet", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        self.start()
        self.url = "postgresql:///postgres?host=%s&user=fleet" % self.sock

    def _run(self, tool, *args, check=True):
        r = subprocess.run(self.prefix + [os.path.join(self.bin, tool)] + list(args),
                           capture_output=True, timeout=120, cwd=self.dir)
        if check and r.returncode != 0:
            raise AssertionError("%s failed: %s%s" % (tool, r.stdout.decode(), r.stderr.decode()))
        return r

    def start(self):
        self._run("pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "60", "-o",
                  "-k %s -c listen_addresses='' -c fsync=off -c full_page_writes=off "
                  "-c max_connections=40" % self.sock, "start")

    def running(self):
        return self._run("pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def stop(self):
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop", check=False)

    def destroy(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
