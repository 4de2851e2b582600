#!/usr/bin/env python3
"""Quick sandbox cost: latency of fs/writeFile of 4 KiB into a workspace, sandboxed
with a WorkspaceWrite-style profile ({root: read}, {project_roots: write}, cwd and
workspaceRoots = the workspace) versus the same request without a sandbox, against
our server and (if installed) the reference, in one run. Ours keeps a warm helper per
(session, policy); the first sandboxed request (helper start) is reported apart.
Times are request sent -> response received, per request, in microseconds.

    python3 bench/quick_sandbox.py [build/exec-server] [iterations]
"""
import base64
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "blackbox"))
import harness  # noqa: E402
from quick_fs import Client  # noqa: E402


def sandbox(ws):
    return {"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
        {"path": {"type": "special", "value": {"kind": "project_roots"}}, "access": "write"}]},
        "network": "restricted"}, "cwd": "file://" + ws, "workspaceRoots": ["file://" + ws],
        "windowsSandboxLevel": "disabled"}


def run(c, params, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        c.call("fs/writeFile", params)
        lat.append((time.perf_counter() - t) * 1e6)
    lat.sort()
    return lat


def fmt(lat):
    return "median %7.0f us  mean %7.0f us  p99 %7.0f us" % (
        statistics.median(lat), statistics.fmean(lat), lat[int(len(lat) * 0.99) - 1])


def measure(name, url, ws, n):
    c = Client(url)
    data = base64.b64encode(os.urandom(4096)).decode()
    plain = {"path": "file://%s/plain.bin" % ws, "dataBase64": data}
    boxed = dict(plain, path="file://%s/boxed.bin" % ws, sandbox=sandbox(ws))
    run(c, plain, 20)
    t = time.perf_counter()
    try:
        c.call("fs/writeFile", boxed)
    except RuntimeError as e:
        print("  %-26s unsandboxed %s" % (name, fmt(run(c, plain, n))))
        print("  %-26s sandboxed: fails: %s" % ("", e))
        return
    first = (time.perf_counter() - t) * 1e6
    run(c, boxed, 20)
    # interleave rounds so machine load hits both sides alike
    a, b = [], []
    for _ in range(5):
        a += run(c, plain, n // 5)
        b += run(c, boxed, n // 5)
    a.sort()
    b.sort()
    print("  %-26s unsandboxed %s" % (name, fmt(a)))
    print("  %-26s sandboxed   %s  (first request %.0f us)" % ("", fmt(b), first))
    print("  %-26s overhead    %+.0f us median" % ("", statistics.median(b) - statistics.median(a)))


def main():
    ours = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/exec-server")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    ws = tempfile.mkdtemp(prefix="quicksb-")
    try:
        print("fs/writeFile 4 KiB, %d requests each" % n)
        servers = [("exec-server (ours)", [ours, "--listen", "ws://127.0.0.1:0"])]
        ref = harness.find_reference()
        if ref:
            servers.append(("codex exec-server", [ref, "exec-server", "--listen",
                                                  "ws://127.0.0.1:0"]))
        for name, cmd in servers:
            srv = harness.Server(cmd=cmd)
            try:
                measure(name, srv.url, ws, n)
            finally:
                srv.stop(check=False)
    finally:
        shutil.rmtree(ws)


if __name__ == "__main__":
    main()
