#!/usr/bin/env python3
"""TCP forwarding (issue 27; ours, docs/PROTOCOL.md §11 (i)): tcp/connect, tcp/data both
ways, tcp/ack, tcp/close, and `exec-client forward -L` like ssh -L.

The protocol checks drive a real echo server through a stream: data both ways, both
half-closes, the receive window (never more unacknowledged bytes than the client
allowed), failures (refused port, unknown host, disabled server, a sandbox with the
network restricted) and streams ending with their connection. The end-to-end check is
the issue's: an HTTP server started with `exec-client run` on the server side, reached
by a local curl through `exec-client forward -L`, with 100 requests in parallel and a
256 MiB download whose checksum must match. The reference has none of this: every
test is ours-only."""
import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, need_client  # noqa

FWD = ["--allow-tcp-forwarding"]
RESTRICTED = {"permissions": {"type": "managed", "file_system": {"type": "unrestricted"},
                              "network": "restricted"},
              "windowsSandboxLevel": "disabled"}


class EchoServer:
    """A TCP server on 127.0.0.1 that upper-cases what it gets (or sends `blob` first),
    then half-closes after the client's EOF. Records what it saw per connection."""

    def __init__(self, blob=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.blob = blob
        self.closed = threading.Event()  # a connection saw EOF from our side's peer
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()

    def _serve(self, c):
        try:
            if self.blob is not None:
                c.sendall(self.blob)
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d.upper())
            self.closed.set()
            c.shutdown(socket.SHUT_WR)
        except OSError:
            self.closed.set()
        finally:
            c.close()

    def close(self):
        self.sock.close()


def tcp_events(s, stream, timeout=DEFAULT_TIMEOUT):
    """Collects tcp/data and tcp/closed of `stream` until tcp/closed: (data, eof, error)."""
    data, eof = b"", False
    while True:
        m, _ = s.next_other(timeout)
        if m.get("method") == "tcp/data" and m["params"]["streamId"] == stream:
            data += base64.b64decode(m["params"]["dataBase64"])
            eof = eof or m["params"]["eof"]
        elif m.get("method") == "tcp/closed" and m["params"]["streamId"] == stream:
            return data, eof, m["params"]["error"]


@ours_only
@needs_own_server
def test_echo_both_ways_with_half_close(_):
    echo = EchoServer()
    with Server(extra_args=FWD) as srv:
        s = srv.session()
        caps = s.call("environment/info")["capabilities"]
        assert caps["tcpForward"] is True, caps
        r = s.call("tcp/connect", {"streamId": "s1", "host": "127.0.0.1", "port": echo.port})
        assert r["streamId"] == "s1" and r["address"] == "127.0.0.1" and r["port"] == echo.port, r
        payload = os.urandom(300000)
        s.call("tcp/data", {"streamId": "s1", "dataBase64": b64(payload[:100000])})
        s.call("tcp/data", {"streamId": "s1", "dataBase64": b64(payload[100000:]), "eof": True})
        data, eof, err = tcp_events(s, "s1")
        assert data == payload.upper() and eof and err is None, (len(data), eof, err)
        # The id is free again; a duplicate live id is refused.
        s.call("tcp/connect", {"streamId": "s1", "host": "127.0.0.1", "port": echo.port})
        code, msg = s.error("tcp/connect", {"streamId": "s1", "host": "127.0.0.1",
                                            "port": echo.port})
        assert code == -32600 and "already exists" in msg, msg
        s.call("tcp/close", {"streamId": "s1"})
        s.call("tcp/close", {"streamId": "s1"})  # idempotent
        code, msg = s.error("tcp/data", {"streamId": "s1", "dataBase64": "eA=="})
        assert code == -32600 and "unknown stream id" in msg, msg
    echo.close()


@ours_only
@needs_own_server
def test_window_bounds_what_the_server_sends_ahead(_):
    blob = os.urandom(3 << 20)
    echo = EchoServer(blob=blob)
    window = 64 * 1024
    with Server(extra_args=FWD) as srv:
        s = srv.session()
        s.call("tcp/connect", {"streamId": "w", "host": "127.0.0.1", "port": echo.port,
                               "window": window})
        got, acked = b"", 0
        while len(got) < len(blob):
            m, _ = s.next_other()
            assert m.get("method") == "tcp/data", m
            got += base64.b64decode(m["params"]["dataBase64"])
            # Never more unacknowledged bytes than the window allowed.
            assert len(got) - acked <= window, (len(got), acked)
            if len(got) - acked == window:
                s.call("tcp/ack", {"streamId": "w", "bytes": window})
                acked += window
        assert got == blob
        s.call("tcp/close", {"streamId": "w"})
    echo.close()


@ours_only
@needs_own_server
def test_failures_are_errors(_):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    with Server(extra_args=FWD) as srv:
        s = srv.session()
        code, msg = s.error("tcp/connect", {"streamId": "a", "host": "127.0.0.1", "port": port})
        assert code == -32603 and "connection refused" in msg, msg
        code, msg = s.error("tcp/connect", {"streamId": "b", "host": "no-such-host.invalid",
                                            "port": 80})
        assert code == -32603 and "no-such-host.invalid" in msg, msg
        code, msg = s.error("tcp/connect", {"streamId": "c", "host": "127.0.0.1", "port": 0})
        assert code == -32602, msg
        code, msg = s.error("tcp/connect", {"streamId": "c", "host": "127.0.0.1"})
        assert code == -32602 and "missing field `port`" in msg, msg
        if CLIENT:
            for bad in ("8080", "8080:host", "1:2:3:4:5", "8080:host:0",
                        "8080::80"):
                r = subprocess.run([CLIENT, "--url", srv.url, "forward", "-L", bad],
                                   capture_output=True, timeout=60)
                assert r.returncode == 2 and b"bad -L" in r.stderr, (bad, r)


@ours_only
@needs_own_server
def test_refused_when_disabled_and_under_a_restricted_sandbox(_):
    echo = EchoServer()
    with Server() as srv:  # no --allow-tcp-forwarding
        s = srv.session()
        assert s.call("environment/info")["capabilities"]["tcpForward"] is False
        code, msg = s.error("tcp/connect", {"streamId": "a", "host": "127.0.0.1",
                                            "port": echo.port})
        assert code == -32600 and "--allow-tcp-forwarding" in msg, msg
        if CLIENT:
            r = subprocess.run([CLIENT, "--url", srv.url, "forward", "-L",
                                "0:127.0.0.1:%d" % echo.port], capture_output=True, timeout=60)
            assert r.returncode == 1 and b"--allow-tcp-forwarding" in r.stderr, r
    with Server(extra_args=FWD) as srv:
        s = srv.session()
        code, msg = s.error("tcp/connect", {"streamId": "a", "host": "127.0.0.1",
                                            "port": echo.port, "sandbox": RESTRICTED})
        assert code == -32600 and "sandbox restricts network" in msg, msg
        assert not echo.closed.is_set()
        # The same policy with the network enabled connects.
        open_net = dict(RESTRICTED, permissions=dict(RESTRICTED["permissions"],
                                                     network="enabled"))
        s.call("tcp/connect", {"streamId": "b", "host": "127.0.0.1", "port": echo.port,
                               "sandbox": open_net})
    echo.close()


@ours_only
@needs_own_server
def test_streams_end_with_their_connection(_):
    echo = EchoServer()
    with Server(extra_args=FWD) as srv:
        s = srv.session()
        s.call("tcp/connect", {"streamId": "a", "host": "127.0.0.1", "port": echo.port})
        s.call("tcp/data", {"streamId": "a", "dataBase64": b64("x")})
        s.close()
        # The server closes the TCP connection it opened: the echo server sees EOF.
        assert echo.closed.wait(DEFAULT_TIMEOUT), "the forwarded connection outlived its client"
    echo.close()


# ---- exec-client forward -L, end to end -------------------------------------------------

@ours_only
@needs_own_server
def test_curl_through_forward_to_a_server_started_with_run(_):
    need_client()
    if not shutil.which("curl"):
        raise TestSkip("curl not installed (deps/debian-packages.txt lists it)")
    root = tempfile.mkdtemp(prefix="fwd-www-")
    big = os.path.join(root, "big.bin")
    digest = hashlib.sha256()
    with open(big, "wb") as f:
        for _ in range(256):
            chunk = os.urandom(1 << 20)
            digest.update(chunk)
            f.write(chunk)
    for i in range(100):
        with open(os.path.join(root, "f%d.txt" % i), "wb") as f:
            f.write(("file %d\n" % i).encode() * (i + 1))
    procs = []
    try:
        with Server(extra_args=FWD) as srv:
            # The HTTP server runs on the server side, started like any remote command.
            # Python's http.server with a listen backlog for 100 connections at once: its
            # default of 5 dropped SYNs on a loaded machine, and the kernel's retries (1, 2,
            # 4, ... s) outran the 30 s a tcp/connect is given (curl: "Empty reply").
            web = ("import functools, http.server as h\n"
                   "class S(h.ThreadingHTTPServer):\n    request_queue_size = 128\n"
                   "s = S(('127.0.0.1', 0), functools.partial(h.SimpleHTTPRequestHandler, "
                   "directory=%r))\n"
                   "print('Serving HTTP on 127.0.0.1 port %%d' %% s.server_address[1])\n"
                   "s.serve_forever()\n" % root)
            http = subprocess.Popen([CLIENT, "--url", srv.url, "run", "-n", "--", sys.executable,
                                     "-u", "-c", web],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append(http)
            rport = int(read_line_matching(http.stdout, rb"port (\d+)").group(1))
            fwd = subprocess.Popen([CLIENT, "--url", srv.url, "forward", "-L",
                                    "0:127.0.0.1:%d" % rport],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs.append(fwd)
            lport = int(read_line_matching(fwd.stderr,
                                           rb"forwarding 127\.0\.0\.1:(\d+) ->").group(1))
            base = "http://127.0.0.1:%d/" % lport
            # 100 requests at once, each with its own answer.
            out = tempfile.mkdtemp(prefix="fwd-out-")
            cfg = os.path.join(out, "curl.cfg")
            with open(cfg, "w") as f:
                for i in range(100):
                    f.write('url = "%sf%d.txt"\noutput = "%s/o%d"\n' % (base, i, out, i))
            r = subprocess.run(["curl", "-sS", "--fail", "--parallel", "--parallel-immediate",
                                "--parallel-max", "100", "-K", cfg],
                               capture_output=True, timeout=300 * TIMEOUT_SCALE)
            assert r.returncode == 0, r
            for i in range(100):
                with open(os.path.join(out, "o%d" % i), "rb") as f:
                    assert f.read() == ("file %d\n" % i).encode() * (i + 1), i
            shutil.rmtree(out, ignore_errors=True)
            # 256 MiB, checksum compared, streamed straight into the hash.
            n, got = curl_sha256(base + "big.bin")
            assert n == 256 << 20 and got == digest.hexdigest(), n
            # Stopping: the forwarder exits 0 on SIGTERM; the HTTP server's client passes
            # SIGTERM on, so the remote server stops too.
            fwd.send_signal(signal.SIGTERM)
            assert fwd.wait(30) == 0
            http.send_signal(signal.SIGTERM)
            http.wait(30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=600)
