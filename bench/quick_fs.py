#!/usr/bin/env python3
"""Quick filesystem throughput: fs/readFile and fs/open+readBlock of a 64 MiB file,
and fs/walk of a 50,000-entry tree, against our server and (if installed) the
reference, in one run, with `cat` and `find` on the same data as floors. Times are
request sent -> last byte of the response received (the client does not decode the
payload). A stop-gap until the C benchmark driver of the benchmarks issue.

    python3 bench/quick_fs.py [build/exec-server]
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "blackbox"))
import harness  # noqa: E402


class Client:
    """Minimal WebSocket JSON-RPC client with buffered reads (fast for big frames)."""

    def __init__(self, url):
        port = int(url.rsplit(":", 1)[1])
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade"
                        "\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key)
                       .encode())
        self.f = self.s.makefile("rb", buffering=1 << 20)
        while self.f.readline() not in (b"\r\n", b""):
            pass
        self.next_id = 1
        self.call("initialize", {"clientName": "bench"})
        self.send({"method": "initialized"})

    def send(self, obj):
        p = json.dumps(obj).encode()
        n = len(p)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                               bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.s.sendall(hdr + b"\0\0\0\0" + p)

    def recv_raw(self):
        while True:
            h = self.f.read(2)
            n = h[1] & 127
            if n == 126:
                n = struct.unpack(">H", self.f.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.f.read(8))[0]
            data = self.f.read(n)
            if h[0] & 15 == 1:
                return data

    def call_raw(self, method, params):
        i = self.next_id
        self.next_id += 1
        self.send({"id": i, "method": method, "params": params})
        tag = b'"id":%d' % i
        while True:
            d = self.recv_raw()
            if tag in d[:40] or tag in d[-40:]:
                return d

    def call(self, method, params):
        m = json.loads(self.call_raw(method, params))
        if "error" in m:
            raise RuntimeError("%s: %s" % (method, m["error"]))
        return m["result"]


def best(fn, reps=3):
    return min(fn() for _ in range(reps))


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(url, big, tree):
    c = Client(url)
    uri = "file://" + big
    size = os.path.getsize(big)
    t_read = best(lambda: timed(lambda: c.call_raw("fs/readFile", {"path": uri})))

    def blocks():
        c.call("fs/open", {"handleId": "h", "path": uri})
        off = 0
        while True:
            r = c.call_raw("fs/readBlock", {"handleId": "h", "offset": off, "len": 1 << 20})
            off += 1 << 20
            if b'"eof":true' in r:
                break
        c.call("fs/close", {"handleId": "h"})
    t_blocks = best(lambda: timed(blocks))
    walk_params = {"path": "file://" + tree, "options": {
        "maxDepth": 64, "maxDirectories": 10000, "maxEntries": 50000,
        "followDirectorySymlinks": False}}
    r = c.call("fs/walk", walk_params)
    n = len(r["entries"])
    t_walk = best(lambda: timed(lambda: c.call_raw("fs/walk", walk_params)))
    return size / t_read / 1e6, size / t_blocks / 1e6, t_walk * 1e3, n


def main():
    ours_bin = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/exec-server")
    work = tempfile.mkdtemp(prefix="quickfs-")
    try:
        big = os.path.join(work, "big.bin")
        with open(big, "wb") as f:
            f.write(os.urandom(64 << 20))
        tree = os.path.join(work, "tree")
        for d in range(100):  # 100 dirs x 499 files + 100 dirs = 50,000 entries
            dp = os.path.join(tree, "d%03d" % d)
            os.makedirs(dp)
            for i in range(499):
                open(os.path.join(dp, "f%03d" % i), "w").close()
        size = os.path.getsize(big)
        t_cat_null = best(lambda: timed(lambda: subprocess.run(["cat", big],
                                                               stdout=subprocess.DEVNULL)))
        t_cat_pipe = best(lambda: timed(lambda: subprocess.run(["cat", big],
                                                               stdout=subprocess.PIPE)))
        t_find = best(lambda: timed(lambda: subprocess.run(["find", tree],
                                                           stdout=subprocess.PIPE)))
        print("64 MiB file, 50,000-entry tree; best of 3")
        print("  %-30s %10s %12s %10s" % ("", "readFile", "readBlock", "walk"))
        print("  %-30s %7.0f MB/s %8.0f MB/s %7.1f ms" % (
            "floor: cat>/dev/null | find", size / t_cat_null / 1e6, size / t_cat_null / 1e6,
            t_find * 1e3))
        print("  %-30s %7.0f MB/s %8.0f MB/s" % ("floor: cat into a pipe", size / t_cat_pipe / 1e6,
                                                size / t_cat_pipe / 1e6))
        servers = [("exec-server (ours)", [ours_bin, "--listen", "ws://127.0.0.1:0"])]
        ref = harness.find_reference()
        if ref:
            servers.append(("codex exec-server 0.169.0",
                            [ref, "exec-server", "--listen", "ws://127.0.0.1:0"]))
        for name, cmd in servers:
            srv = harness.Server(cmd=cmd)
            try:
                rd, rb, tw, n = measure(srv.url, big, tree)
                print("  %-30s %7.0f MB/s %8.0f MB/s %7.1f ms (%d entries)" % (name, rd, rb, tw, n))
            finally:
                srv.stop(check=False)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
