#!/usr/bin/env python3
"""Remote-mode rows of `make bench`: one-shot commands and streaming output through the
relay (registry + rendezvous = tests/remote/fake_cloud.py, harness = relay-harness, the
C Noise initiator of tests/remote), our executor against the reference executor.

  python3 bench/relay_bench.py [--build DIR] [--oneshot N] [--stream-mb MB] [--runs R]
                               [--no-ref] [--ref-version V]

Both executors register with the same kind of local fake cloud and are driven by the
same harness, so the rendezvous (a Python byte proxy) and the harness cost the same on
both sides; the rows compare the executors' relay paths (Noise records, framing, frame
codec, WebSocket client), not absolute speeds of a hosted rendezvous. Prints a markdown
table like exec-bench's. Exit 0 when our rows ran, 1 otherwise."""
import argparse
import base64
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
import fake_cloud  # noqa
import codex_ref  # noqa

TOKEN = "tok-bench"
ENV_ID = "env-bench"


class Harness:
    """relay-harness as a JSON-RPC pipe; count: it is a C sink of process output (it counts
    the bytes and prints {"counted": N} before each process/closed instead of the output)."""

    def __init__(self, path, cloud, token=TOKEN, count=False):
        self.proc = subprocess.Popen([path, "--registry", cloud.base_url, "--environment-id",
                                      ENV_ID, "--token", token] + (["--count-output"] if count else []),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.buf = b""
        self.next_id = 0

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def recv(self, timeout=120):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.proc.stdout], [], [], max(deadline - time.monotonic(), 0))
            if not r:
                raise TimeoutError("no message from the executor")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                raise EOFError(self.proc.stderr.read().decode("utf-8", "replace"))
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def request(self, method, params):
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def initialize(self):
        rid = self.request("initialize", {"clientName": "relay-bench"})
        while self.recv().get("id") != rid:
            pass
        self.send({"method": "initialized", "params": {}})

    def run_until_closed(self, pid, argv):
        """process/start, then every notification until process/closed; output bytes."""
        self.request("process/start", {"processId": pid, "argv": argv, "cwd": "file:///tmp",
                                       "env": {"PATH": "/usr/bin:/bin"}, "tty": False})
        got = 0
        while True:
            m = self.recv()
            if "error" in m:
                raise RuntimeError(str(m["error"]))
            method = m.get("method")
            if "counted" in m:
                got += m["counted"]
            elif method == "process/output" and m["params"]["processId"] == pid:
                got += len(base64.b64decode(m["params"]["chunk"]))
            elif method == "process/closed" and m["params"]["processId"] == pid:
                return got

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_executor(which, cmd, cloud, tmp):
    env = dict(os.environ)
    env.pop("CODEX_API_KEY", None)
    stdin = subprocess.PIPE
    if which == "ref":
        env.update(CODEX_HOME=tempfile.mkdtemp(prefix="rxhome-", dir="/var/tmp"),
                   CODEX_API_KEY=TOKEN, RUST_LOG="error")
        args = [cmd, "exec-server", "--remote", cloud.base_url, "--environment-id", ENV_ID]
    else:
        args = [cmd, "--remote", cloud.base_url, "--environment-id", ENV_ID,
                "--registration-bearer-stdin"]
    p = subprocess.Popen(args, env=env, stdin=stdin, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, which + ".stderr"), "wb"), cwd=tmp)
    if which == "ours":
        p.stdin.write((TOKEN + "\n").encode())
        p.stdin.flush()
    cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30, which + " executor socket")
    return p


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def cpu_s(pid):
    """User + system CPU seconds of a process so far."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def bench_one(which, cmd, harness_path, a, tmp):
    cloud = fake_cloud.FakeCloud(token=TOKEN)
    p = start_executor(which, cmd, cloud, tmp)
    try:
        h = Harness(harness_path, cloud)
        h.initialize()
        times = []
        for i in range(a.oneshot + 10):
            t0 = time.perf_counter()
            h.run_until_closed("o%d" % i, ["/bin/true"])
            if i >= 10:
                times.append((time.perf_counter() - t0) * 1e3)
        rates, cpus = [], []
        size = a.stream_mb * 1000 * 1000
        for r in range(a.runs):
            c0 = cpu_s(p.pid)
            t0 = time.perf_counter()
            got = h.run_until_closed("s%d" % r, ["/usr/bin/head", "-c", str(size), "/dev/zero"])
            dt = time.perf_counter() - t0
            if got != size:
                raise RuntimeError("received %d of %d bytes" % (got, size))
            rates.append(size / dt / 1e6)
            cpus.append((cpu_s(p.pid) - c0) * 1e3 / a.stream_mb)
        h.close()
        return {"oneshot": (statistics.median(times), pct(times, 0.95)),
                "stream": (statistics.median(rates), min(rates)),
                "stream_cpu": (statistics.median(cpus), max(cpus))}
    finally:
        stop(p)
        cloud.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--oneshot", type=int, default=200)
    ap.add_argument("--stream-mb", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--ref-version", default=codex_ref.DEFAULT_VERSION,
                    help="the reference codex's version (tests/blackbox/codex_ref.py)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)  # the servers run with cwd in a temp dir
    harness = os.path.join(a.build, "relay-harness")
    ours = os.path.join(a.build, "exec-server")
    for f in (harness, ours):
        if not os.access(f, os.X_OK):
            print("relay bench: %s is not built" % f)
            return 1
    ref = None if a.no_ref else codex_ref.find(a.ref_version)
    tmp = tempfile.mkdtemp(prefix="relay-bench-")
    res = {}
    for which, cmd in (("ours", ours), ("ref", ref)):
        if not cmd:
            continue
        try:
            res[which] = bench_one(which, cmd, harness, a, tmp)
        except Exception as e:  # noqa: one side failing only shows in the table
            res[which] = {"error": str(e)[:120]}

    def cell(which, key, unit):
        r = res.get(which)
        if r is None:
            return "not run"
        if "error" in r:
            return "failed: " + r["error"]
        v = r[key]
        return "%.2f / %.2f %s" % (v[0], v[1], unit)

    print("\nRemote mode through the relay (fake registry + rendezvous, relay-harness):\n")
    print("| scenario | ours | reference |")
    print("| --- | --- | --- |")
    print("| relay one-shot `/bin/true` x%d (p50 / p95) | %s | %s |"
          % (a.oneshot, cell("ours", "oneshot", "ms"), cell("ref", "oneshot", "ms")))
    print("| relay streaming %d MB stdout (median / min) | %s | %s |"
          % (a.stream_mb, cell("ours", "stream", "MB/s"), cell("ref", "stream", "MB/s")))
    print("| relay streaming: executor CPU per MB (median / max) | %s | %s |"
          % (cell("ours", "stream_cpu", "ms"), cell("ref", "stream_cpu", "ms")))
    print("\nStreaming throughput is bounded by the Python rendezvous double on both sides; "
          "the executor's own CPU per MB is the comparable figure.")
    return 0 if "error" not in res.get("ours", {"error": 1}) else 1


if __name__ == "__main__":
    sys.exit(main())
