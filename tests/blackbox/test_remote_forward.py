#!/usr/bin/env python3
"""`exec-server forward` (issue 15, docs/REMOTE.md §8.7): our forwarder registers
with an environment registry (tests/remote/fake_cloud.py) like --remote, but relays
each harness stream, once its Noise handshake is done, to a destination exec-server
WebSocket, one destination connection per stream.

Destinations: (a) our own `exec-server --listen ws://127.0.0.1:0`, (b) the reference
`codex exec-server --listen ws://127.0.0.1:0` (skipped with a message when it is not
installed), (a') ours on `--listen wss://` with a certificate of a test CA the
forwarder trusts through SSL_CERT_FILE, driven by `exec-client --remote`: a process's output and exit code, an fs
write then read of a file spanning several relay records, a one-message JSON-RPC
exchange. Then (c) a destination that refuses every upgrade with HTTP 500: the client
must fail with an error, within a bound, not hang. Throughout: the destination is not
contacted before a stream exists, and no destination socket stays open in the
forwarder after its streams ended (counted in /proc/PID/fd and at the destination).
Every wait is bounded; exit 77 when nothing could run."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import fake_cloud  # noqa: E402
from harness import tcp_sockets  # noqa: E402
from remote_testlib import (find_build_file, fs_round_trip, our_server, reference,  # noqa: E402
                            run_one, skip_reason, stop_group, summary)  # noqa: E402

SKIP = 77
ENV_ID = "env-forward-test"
TOKEN = "tok-" + os.urandom(8).hex()
CLIENT = find_build_file("exec-client")
SERVER = our_server()


class Destination:
    """An exec-server listening on a loopback port (ours or the reference's)."""

    def __init__(self, kind, path, tls=False):
        self.kind = kind
        self.home = tempfile.mkdtemp(prefix="fwd-dest-")
        cmd = [path, "exec-server"] if kind == "reference" else [path]
        self.ca = None
        if tls:
            self.ca, cert, key = fake_cloud.make_test_ca(self.home)
            cmd += ["--listen", "wss://127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]
        else:
            cmd += ["--listen", "ws://127.0.0.1:0"]
        env = dict(os.environ, CODEX_HOME=self.home, RUST_LOG="warn")
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.url = None
        deadline = time.monotonic() + 30
        buf = b""
        while time.monotonic() < deadline:
            b = self.proc.stdout.read1(4096) if hasattr(self.proc.stdout, "read1") else \
                os.read(self.proc.stdout.fileno(), 4096)
            if not b:
                break
            buf += b
            m = re.search(rb"wss?://127\.0\.0\.1:\d+", buf)
            if m:
                self.url = m.group(0).decode()
                break
        if not self.url:
            self.stop()
            raise RuntimeError("the %s destination printed no URL: %r" % (kind, buf))
        self.port = int(self.url.rsplit(":", 1)[1])

    def conns(self):
        """Peer ports of the TCP connections established to the destination's port."""
        return {peer for st, local, peer in tcp_sockets() if st == "01" and local == self.port}

    def established(self):
        return len(self.conns())

    def stop(self):
        stop_group(self.proc)
        shutil.rmtree(self.home, ignore_errors=True)


class Refuser:
    """A destination that answers every HTTP request with 500; counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "ws://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.accepted = 0
        self.requests = []
        self.stopping = False
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                b = c.recv(4096)
                if not b:
                    return
                buf += b
            self.requests.append(buf.split(b"\r\n\r\n")[0].decode("latin-1"))
            c.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n"
                      b"connection: close\r\n\r\n")
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.stopping = True
        self.sock.close()


class Forwarder:
    """Our `exec-server forward --connect URL` registered at a fresh fake cloud."""

    def __init__(self, dest_url, ca=None):
        self.cloud = fake_cloud.FakeCloud(token=TOKEN)
        self.home = tempfile.mkdtemp(prefix="fwd-test-")
        env = dict(os.environ, CODEX_HOME=self.home, CODEX_API_KEY=TOKEN)
        if ca:
            env["SSL_CERT_FILE"] = ca  # a wss:// destination signed by the test CA
        cmd = [SERVER, "forward", "--connect", dest_url, "--remote", self.cloud.base_url,
               "--environment-id", ENV_ID]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        try:
            self.cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30,
                                "the forwarder to reach the rendezvous")
        except BaseException:
            self.stop()
            raise

    def sockets(self):
        n = 0
        try:
            for fd in os.listdir("/proc/%d/fd" % self.proc.pid):
                try:
                    if os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd)).startswith("socket:"):
                        n += 1
                except OSError:
                    pass
        except OSError:
            return -1
        return n

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")[-3000:]

    def stop(self):
        rc = stop_group(self.proc)
        self.cloud.stop()
        shutil.rmtree(self.home, ignore_errors=True)
        return rc


def client(fw, *args, stdin=b"", timeout=60):
    argv = [CLIENT, "--remote", fw.cloud.base_url, "--environment-id", ENV_ID,
            "--token", TOKEN] + list(args)
    env = dict(os.environ)
    env.pop("EXEC_SERVER_URL", None)
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, env=env)


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above
    raise AssertionError("timed out waiting for " + what)


# ---- scenarios (fw: the forwarder, dest: the destination) -----------------------------

def scenario_process(fw, dest):
    r = client(fw, "run", "-n", "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 7")
    assert r.returncode == 7, (r.returncode, r.stderr)
    assert r.stdout == b"out-line\n", r.stdout
    assert b"err-line" in r.stderr, r.stderr


def scenario_fs(fw, dest):
    fs_round_trip(lambda *a: client(fw, *a), dest.home, "destination")


def scenario_rpc(fw, dest):
    req = '{"id":77,"method":"fs/getMetadata","params":{"path":"file://%s"}}\n' % dest.home
    r = client(fw, "rpc", stdin=req.encode())
    assert r.returncode == 0 and b'"id":77' in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert b"isDirectory" in r.stdout, r.stdout


def scenario_big(fw, dest):
    """Messages over the 8 MiB fragment size both ways: a 12 MiB fs/writeFile request
    (base64 of 9 MiB) to the destination, then its 12 MiB answer to fs/readFile."""
    import base64
    data = os.urandom(9 * 1024 * 1024)
    path = os.path.join(dest.home, "big.bin")
    req = ('{"id":5,"method":"fs/writeFile","params":{"path":"file://%s","dataBase64":"%s"}}\n'
           % (path, base64.b64encode(data).decode()))
    r = client(fw, "rpc", stdin=req.encode(), timeout=120)
    assert r.returncode == 0 and b'"id":5,"result"' in r.stdout.replace(b" ", b""), (
        r.returncode, r.stdout[-300:], r.stderr[-500:])
    with open(path, "rb") as f:
        assert f.read() == data, "the destination's file differs"
    # Answered separately: an exec-server may run two fs requests concurrently.
    req = '{"id":6,"method":"fs/readFile","params":{"path":"file://%s"}}\n' % path
    r = client(fw, "rpc", stdin=req.encode(), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert base64.b64encode(data) in r.stdout, "the 12 MiB answer did not come back whole"


def scenario_client_gone(fw, dest):
    """A client killed mid-process: its stream is reset and the destination socket
    of that stream closes."""
    argv = [CLIENT, "--remote", fw.cloud.base_url, "--environment-id", ENV_ID, "--token",
            TOKEN, "run", "-n", "--", "sleep", "30"]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: dest.established() >= 1, 20, "the stream's destination socket")
    finally:
        p.kill()
        p.wait(10)
    wait_until(lambda: dest.established() == 0, 15, "the destination socket to close")


def scenario_rendezvous_drop(fw, dest):
    """The forwarder's rendezvous socket drops: every stream on it dies, and so does
    its destination socket (the client then resumes on a new stream)."""
    argv = [CLIENT, "--remote", fw.cloud.base_url, "--environment-id", ENV_ID, "--token",
            TOKEN, "--reconnect-ms", "20000", "run", "-n", "--", "sleep", "30"]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: dest.established() >= 1, 20, "the stream's destination socket")
        first = dest.conns()
        assert fw.cloud.drop_environment(ENV_ID) == 1
        wait_until(lambda: not (first & dest.conns()), 15,
                   "the dropped stream's destination socket to close")
    finally:
        p.kill()
        p.wait(10)
    fw.cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30, "the forwarder back")
    wait_until(lambda: dest.established() == 0, 15, "every destination socket to close")


def scenario_no_leak(fw, dest):
    """After the streams ended, the forwarder holds no destination socket."""
    wait_until(lambda: fw.sockets() == fw.base_sockets and dest.established() == 0, 15,
               "destination sockets to close (forwarder fds %d, base %d; established %d)"
               % (fw.sockets(), fw.base_sockets, dest.established()))


SCENARIOS = [scenario_process, scenario_fs, scenario_rpc, scenario_big, scenario_client_gone,
             scenario_rendezvous_drop, scenario_no_leak]
# A wss:// destination (ours, --listen wss:// with a certificate of the test CA).
WSS_SCENARIOS = [scenario_process, scenario_fs, scenario_rpc, scenario_client_gone,
                 scenario_no_leak]


def run_destination(kind, path, only, tls=False):
    passed = failed = 0
    label = kind + ("+wss" if tls else "")
    try:
        dest = Destination(kind, path, tls=tls)
    except BaseException as e:  # noqa
        print("FAIL %s destination did not come up: %s" % (label, e))
        return 0, 1
    fw = None
    try:
        assert dest.url.startswith("wss://" if tls else "ws://"), dest.url
        fw = Forwarder(dest.url, ca=dest.ca)  # returns once registered at the rendezvous
        time.sleep(0.3)  # sleep-ok: a window in which an early destination connection shows
        assert dest.established() == 0, "the forwarder contacted the destination at start"
        fw.base_sockets = fw.sockets()
        for sc in WSS_SCENARIOS if tls else SCENARIOS:
            if only and sc.__name__ not in only:
                continue
            p, f = run_one("%s/%s" % (label, sc.__name__), sc, fw, dest,
                           on_fail=lambda: "forwarder stderr: " + fw.stderr_text())
            passed += p
            failed += f
    except BaseException as e:  # noqa
        failed += 1
        print("FAIL %s: %r" % (label, e))
    finally:
        if fw:
            rc = fw.stop()
            if rc != 0:
                failed += 1
                print("FAIL %s: the forwarder exited %r on SIGTERM\n%s" % (
                    label, rc, fw.stderr_text()))
        dest.stop()
    return passed, failed


def run_refuser():
    ref = Refuser()
    fw = None
    try:
        fw = Forwarder(ref.url)
        base = fw.sockets()
        t0 = time.monotonic()
        r = client(fw, "run", "-n", "--", "true", timeout=40)
        took = time.monotonic() - t0
        assert r.returncode != 0, "the client succeeded through a refusing destination"
        assert r.stderr.strip(), "no error message on stderr"
        assert took < 30, "the client took %.1fs to fail" % took
        assert ref.accepted >= 1, "the forwarder never dialed the destination"
        head = ref.requests[0].split("\r\n")
        names = [h.split(":", 1)[0].lower() for h in head[1:]]
        assert head[0] == "GET / HTTP/1.1", head[0]
        assert names == ["host", "connection", "upgrade", "sec-websocket-version",
                         "sec-websocket-key"], names
        wait_until(lambda: fw.sockets() == base, 15, "the refused sockets to close")
        print("PASS refusing/error (%.2fs, exit %d: %s)" % (
            took, r.returncode, r.stderr.decode("utf-8", "replace").strip().splitlines()[-1]))
        return 1, 0
    except BaseException as e:  # noqa
        print("FAIL refusing/error: %r\n  forwarder stderr: %s" % (
            e, fw.stderr_text() if fw else ""))
        return 0, 1
    finally:
        if fw:
            fw.stop()
        ref.stop()


def main():
    why = "exec-client is not built" if CLIENT is None else \
        skip_reason(SERVER, "forward", "forward subcommand")
    if why:
        print("SKIP: " + why)
        return SKIP
    only = set(sys.argv[1:])
    passed = failed = 0
    for kind, path in (("ours", SERVER), ("reference", reference())):
        if path is None:
            print("SKIP %s destination: the reference codex is not installed" % kind)
            continue
        p, f = run_destination(kind, path, only)
        passed += p
        failed += f
    p, f = run_destination("ours", SERVER, only, tls=True)
    passed += p
    failed += f
    if not only or "refusing" in only:
        p, f = run_refuser()
        passed += p
        failed += f
    return summary(passed, failed)


if __name__ == "__main__":
    sys.exit(main())
