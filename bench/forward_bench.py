#!/usr/bin/env python3
"""The TCP forwarding row of `make bench` (issue 27): a 256 MiB HTTP download through
`exec-client forward -L` (curl -> exec-client -> WebSocket -> exec-server tcp/connect ->
the HTTP server) against the same download straight from the HTTP server over loopback.

  python3 bench/forward_bench.py [--build DIR] [--mb MB] [--runs R]

Ours only (the reference has no forwarding). The HTTP server is Python's http.server on
127.0.0.1 serving a file of random bytes; every download is checked by length and
SHA-256. Prints a markdown table with the median and best throughput of each path, the
ratio, and the load average before and after (the bench machine may be shared: the
figures mean little without it). Exit 0 when the rows ran, 1 otherwise."""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
import harness  # noqa: the stream and download helpers the forwarding test uses too


def download(url, size, digest):
    """One curl download, hashed as it streams; returns MB/s."""
    t0 = time.monotonic()
    n, got = harness.curl_sha256(url)
    if n != size or got != digest:
        raise RuntimeError("download of %s differs (%d bytes)" % (url, n))
    return size / 1e6 / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    server, client = (os.path.join(a.build, x) for x in ("exec-server", "exec-client"))
    if not (os.access(server, os.X_OK) and os.access(client, os.X_OK) and shutil.which("curl")):
        print("forward_bench: needs %s, %s and curl" % (server, client))
        return 1
    root = tempfile.mkdtemp(prefix="fwd-bench-")
    procs = []
    try:
        size = a.mb << 20
        h = hashlib.sha256()
        with open(os.path.join(root, "big.bin"), "wb") as f:
            for _ in range(a.mb):
                chunk = os.urandom(1 << 20)
                h.update(chunk)
                f.write(chunk)
        digest = h.hexdigest()
        http = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind",
                                 "127.0.0.1", "--directory", root],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(http)
        hport = int(harness.read_line_matching(http.stdout, rb"port (\d+)").group(1))
        srv = subprocess.Popen([server, "--listen", "ws://127.0.0.1:0", "--allow-tcp-forwarding"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(srv)
        url = harness.read_line_matching(srv.stdout, rb"(ws://\S+)").group(1).decode()
        fwd = subprocess.Popen([client, "--url", url, "forward", "-L", "0:127.0.0.1:%d" % hport],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(fwd)
        lport = int(harness.read_line_matching(fwd.stderr, rb"forwarding 127\.0\.0\.1:(\d+) ->").group(1))
        load0 = os.getloadavg()
        direct, forwarded = [], []
        for _ in range(a.runs):  # alternated, so load changes hit both alike
            direct.append(download("http://127.0.0.1:%d/big.bin" % hport, size, digest))
            forwarded.append(download("http://127.0.0.1:%d/big.bin" % lport, size, digest))
        load1 = os.getloadavg()
        md, mf = statistics.median(direct), statistics.median(forwarded)
        print("| scenario | forwarded (median / best) | direct loopback (median / best) | "
              "forwarded / direct | load average (1 min) before / after |")
        print("|---|---|---|---|---|")
        print("| 9. HTTP download %d MiB through `exec-client forward -L` (MB/s) | %.0f / %.0f | "
              "%.0f / %.0f | %.2f | %.1f / %.1f |" % (a.mb, mf, max(forwarded), md, max(direct),
                                                     mf / md, load0[0], load1[0]))
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
