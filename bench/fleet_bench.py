#!/usr/bin/env python3
"""`exec-server registry` rows of `make bench` (issue 37), side by side in one run:

  F1  one-shot `/bin/true` (process/start to process/closed) through the relay, p50 /
      p95: our registry (SQLite) | the test double tests/remote/fake_cloud.py | the
      floor bench/fleet_floor.c (a minimal registry + frame-copying rendezvous, no
      checks). Target: ours adds <= 0.2 ms p50 to the floor and to the double.
  F2  256 MiB of process output through the relay into a C sink (relay-harness
      --count-output: it decrypts and counts, never decodes or prints the output), MB/s:
      ours | the floor | the stock codex executor through our registry. Targets: ours
      >= 400 MB/s and >= 0.8 of the floor. (Before issue 48 the consumer was Python,
      4-7 s of CPU per 256 MiB, and the floor used the same consumer: it measured the
      consumer.)
  F3  10,000 idle attached executors (played: /register, then a rendezvous
      WebSocket each, over real sockets): registry memory per executor (RSS growth /
      N; target <= 16 KiB) and /connect latency p50 / p99 under that load (target
      <= 5 ms on SQLite).

The executor in F1/F2 is ours (`exec-server --remote`), the harness relay-harness (the
C Noise initiator of tests/remote), the same in every column, so the columns differ by
the rendezvous only; F2's third column differs from the first by the executor only (the
reference's, `codex exec-server --remote`, --ref-version). Runs alternate the columns
(--runs R) and report medians.

  python3 bench/fleet_bench.py [--build DIR] [--oneshot N] [--stream-mib M] [--runs R]
                               [--idle N] [--connects N] [--only F1,F2,F3]
Prints a markdown table; exit 0 when every row ran."""
import argparse
import base64
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fake_cloud  # noqa: E402
import relay_bench  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
import codex_ref  # noqa: E402

ENV_ID = relay_bench.ENV_ID
SUITE = "Noise_hybridIK_X25519+MLKEM768_AESGCM_SHA256"


def pct(v, q):
    return relay_bench.pct(v, q)


class Column:
    """One rendezvous under test with our executor registered at it."""

    def __init__(self, kind, a, tmp):
        self.kind, self.procs = kind, []
        server = os.path.join(a.build, "exec-server")
        if kind in ("ours", "ref"):
            db = "sqlite:" + os.path.join(tempfile.mkdtemp(dir=tmp), "fleet.db")
            cli = lambda *x: subprocess.run([server, "registry"] + list(x) + ["--database", db],  # noqa
                                            capture_output=True, check=True).stdout.decode().strip()
            ex_tok = cli("token", "create", "--environment", ENV_ID, "--role", "executor")
            self.h_tok = cli("token", "create", "--environment", ENV_ID, "--role", "harness")
            p = subprocess.Popen([server, "registry", "--database", db, "--log-level", "warn"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self.url = p.stdout.readline().decode().strip()
            self.procs.append(p)
        elif kind == "double":
            self.cloud = fake_cloud.FakeCloud(token=relay_bench.TOKEN)
            self.url, ex_tok, self.h_tok = self.cloud.base_url, relay_bench.TOKEN, relay_bench.TOKEN
        else:
            p = subprocess.Popen([os.path.join(a.build, "fleet-floor")], stdout=subprocess.PIPE)
            self.url = p.stdout.readline().decode().strip()
            self.procs.append(p)
            ex_tok = self.h_tok = "floor"
        env = dict(os.environ)
        env.pop("CODEX_API_KEY", None)
        if kind == "ref":
            env.update(CODEX_HOME=tempfile.mkdtemp(prefix="rxhome-", dir="/var/tmp"),
                       CODEX_API_KEY=ex_tok, RUST_LOG="error")
            ex = subprocess.Popen([a.ref, "exec-server", "--remote", self.url, "--environment-id",
                                   ENV_ID], env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        else:
            ex = subprocess.Popen([server, "--remote", self.url, "--environment-id", ENV_ID,
                                   "--registration-bearer-stdin"], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
            ex.stdin.write((ex_tok + "\n").encode())
            ex.stdin.flush()
        self.procs.insert(0, ex)
        self.harness = None
        deadline = time.monotonic() + 30
        self._open_harness(a, deadline)

    def _open_harness(self, a, deadline):
        while True:
            h = relay_bench.Harness(os.path.join(a.build, "relay-harness"),
                                    type("C", (), {"base_url": self.url})(), self.h_tok,
                                    count=True)
            try:
                h.initialize()
                self.harness = h
                return
            except (EOFError, TimeoutError, OSError, ValueError):
                h.proc.kill()
                h.proc.wait()
                if time.monotonic() > deadline:
                    raise RuntimeError(self.kind + ": the harness could not connect")
                time.sleep(0.2)  # sleep-ok: the executor is still attaching

    def stream(self, mib):
        size = mib << 20
        t0 = time.perf_counter()
        self.nstream = getattr(self, "nstream", 0) + 1
        got = self.harness.run_until_closed("s%d" % self.nstream,
                                            ["/usr/bin/head", "-c", str(size), "/dev/zero"])
        dt = time.perf_counter() - t0
        if got != size:
            raise RuntimeError("received %d of %d bytes" % (got, size))
        return size / dt / 1e6

    def close(self):
        if self.harness:
            self.harness.close()
        for p in self.procs:
            relay_bench.stop(p)
        if self.kind == "double":
            self.cloud.stop()


def rows_f1_f2(a, tmp, only):
    """The three columns side by side, alive at once: one-shots interleaved (each round
    runs one through every column, in a rotating order), so the machine's load falls
    on all of them alike and the paired differences are what the relays add."""
    kinds = ("ours", "double", "floor")
    streamers = ("ours", "floor") + (("ref",) if a.ref else ())
    cols = {}
    one = {k: [] for k in kinds}
    diffs = {"floor": [], "double": []}
    stream = {k: [] for k in streamers}
    try:
        for k in kinds + (streamers[2:] if "F2" in only else ()):
            cols[k] = Column(k, a, tmp)
        if "F1" in only:
            for i in range(a.oneshot * a.runs + 20):
                order = kinds[i % 3:] + kinds[:i % 3]
                t = {}
                for k in order:
                    t0 = time.perf_counter()
                    cols[k].harness.run_until_closed("o%d" % i, ["/bin/true"])
                    t[k] = (time.perf_counter() - t0) * 1e3
                if i < 20:
                    continue  # warm-up
                for k in kinds:
                    one[k].append(t[k])
                for k in diffs:
                    diffs[k].append(t["ours"] - t[k])
        if "F2" in only:
            for r in range(a.runs):
                for k in streamers[r % len(streamers):] + streamers[:r % len(streamers)]:
                    stream[k].append(cols[k].stream(a.stream_mib))
    finally:
        for c in cols.values():
            c.close()
    return one, diffs, stream


def key_json():
    return {"suite": SUITE, "x25519_public_key": base64.b64encode(os.urandom(32)).decode(),
            "mlkem768_public_key": base64.b64encode(os.urandom(1184)).decode()}


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def post(conn, path, body, token):
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json",
                                                  "authorization": "Bearer " + token})
    r = conn.getresponse()
    data = r.read()
    return r.status, data


def upgrade(url):
    """Opens a rendezvous WebSocket (the 101 read); the socket."""
    status, _, ws = fake_cloud.ws_connect(url, timeout=60)
    if status != 101:
        raise RuntimeError("upgrade answered %d" % status)
    return ws.sock


class Ponger:
    """Answers the registry's Pings on every played executor socket (what an idle
    executor does), from one thread over epoll."""

    def __init__(self):
        import selectors
        import threading
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.stopped = False
        self.pongs = 0
        threading.Thread(target=self._run, daemon=True).start()

    def add(self, s):
        s.setblocking(False)
        with self.lock:
            self.sel.register(s, 1, bytearray())

    def _run(self):
        while not self.stopped:
            with self.lock:
                events = self.sel.select(timeout=0) if self.sel.get_map() else []
            if not events:
                time.sleep(0.02)  # sleep-ok: idle poll of the played executors
                continue
            for key, _ in events:
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    continue
                buf = key.data
                buf += data
                while len(buf) >= 2 and len(buf) >= 2 + (buf[1] & 0x7F):
                    op, n = buf[0] & 0x0F, buf[1] & 0x7F
                    payload = bytes(buf[2:2 + n])
                    del buf[:2 + n]
                    if op == 9:  # Ping -> masked Pong (zero mask key)
                        key.fileobj.sendall(bytes([0x8A, 0x80 | n]) + b"\0\0\0\0" + payload)
                        self.pongs += 1

    def stop(self):
        self.stopped = True


def row_f3(a, tmp):
    """N played executors attached to one registry: RSS per executor, /connect latency."""
    # Each side holds a.idle sockets (the registry inherits the limit).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = a.idle + 1000 if hard == resource.RLIM_INFINITY else min(a.idle + 1000, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    server = os.path.join(a.build, "exec-server")
    db = "sqlite:" + os.path.join(tempfile.mkdtemp(dir=tmp), "idle.db")
    cli = lambda *x: subprocess.run([server, "registry"] + list(x) + ["--database", db],  # noqa
                                    capture_output=True, check=True).stdout.decode().strip()
    ex_tok = cli("token", "create", "--environment", "idle-*", "--role", "executor")
    h_tok = cli("token", "create", "--environment", "idle-*", "--role", "harness")
    p = subprocess.Popen([server, "registry", "--database", db, "--log-level", "warn",
                          "--max-environments-per-token", str(a.idle + 10),
                          "--max-connections", str(a.idle + 100), "--connect-rate", "1000000",
                          "--connect-burst", "1000000", "--max-pending-bundles", "100000"],
                         stdout=subprocess.PIPE)
    url = p.stdout.readline().decode().strip()
    host, port = url[len("http://"):].rsplit(":", 1)
    socks = []
    ponger = Ponger()
    try:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        st, _ = post(conn, "/cloud/environment/idle-warm/register",
                     {"security_profile": "noise_hybrid_ik_v1", "executor_public_key": key_json()},
                     ex_tok)
        time.sleep(1)  # sleep-ok: let the first heartbeat and the database cache settle
        before = rss_kib(p.pid)
        t0 = time.monotonic()
        for i in range(a.idle):
            st, body = post(conn, "/cloud/environment/idle-%d/register" % i,
                            {"security_profile": "noise_hybrid_ik_v1",
                             "executor_public_key": key_json()}, ex_tok)
            if st != 200:
                raise RuntimeError("register %d: %d %s" % (i, st, body[:200]))
            socks.append(upgrade(json.loads(body)["url"]))
            ponger.add(socks[-1])
        attach_s = time.monotonic() - t0
        time.sleep(1)  # sleep-ok: a heartbeat with every environment in it
        after = rss_kib(p.pid)
        lat = []
        for i in range(a.connects):
            t = time.perf_counter()
            st, body = post(conn, "/cloud/environment/idle-%d/connect" % ((i * 7919) % a.idle),
                            {"harness_public_key": key_json()}, h_tok)
            lat.append((time.perf_counter() - t) * 1e3)
            if st != 200:
                raise RuntimeError("connect: %d %s" % (st, body[:200]))
        # The registry's own view (head in to answer out), without the client's scheduling.
        import urllib.request
        within = 0
        for line in urllib.request.urlopen(url + "/metrics", timeout=30).read().decode().splitlines():
            if line.startswith('exec_registry_request_duration_seconds_bucket{endpoint="connect",'
                               'le="0.005"}'):
                within = int(line.split()[-1])
        return {"per_exec_kib": (after - before) / a.idle, "before": before, "after": after,
                "attach_s": attach_s, "connect": (statistics.median(lat), pct(lat, 0.99)),
                "server_within_5ms": within / a.connects}
    finally:
        ponger.stop()
        for s in socks:
            s.close()
        relay_bench.stop(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--oneshot", type=int, default=300)
    ap.add_argument("--stream-mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--connects", type=int, default=2000)
    ap.add_argument("--only", default="F1,F2,F3")
    ap.add_argument("--ref-version", default=codex_ref.DEFAULT_VERSION,
                    help="the stock executor of F2's third column (not run when absent)")
    ap.add_argument("--no-ref", action="store_true")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.ref = None if a.no_ref else codex_ref.find(a.ref_version)
    only = set(a.only.split(","))
    for f in ("exec-server", "relay-harness", "fleet-floor"):
        if not os.access(os.path.join(a.build, f), os.X_OK):
            print("fleet bench: %s is not built" % os.path.join(a.build, f))
            return 1
    tmp = tempfile.mkdtemp(prefix="fleet-bench-")
    print("\n`exec-server registry` (bench/fleet_bench.py; executor: ours, harness: "
          "relay-harness):\n")
    print("| row | ours | test double | floor | ours vs floor | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    ok = True
    if only & {"F1", "F2"}:
        one, diffs, stream = rows_f1_f2(a, tmp, only)
        if "F1" in only:
            v = {k: (statistics.median(x), pct(x, 0.95)) for k, x in one.items()}
            d = statistics.median(diffs["floor"])
            print("| F1. one-shot `/bin/true` through the rendezvous, x%d interleaved (ms, p50 "
                  "/ p95) | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %+.3f ms (median paired "
                  "difference; vs double %+.3f) | <= +0.2 ms |"
                  % (len(one["ours"]), *v["ours"], *v["double"], *v["floor"], d,
                     statistics.median(diffs["double"])))
            ok &= d <= 0.2
        if "F2" in only:
            o, f = statistics.median(stream["ours"]), statistics.median(stream["floor"])
            ref = ("; stock codex executor %.1f (best %.1f)" % (statistics.median(stream["ref"]),
                                                               max(stream["ref"]))
                   if stream.get("ref") else "")
            print("| F2. %d MiB of process output through the rendezvous into a C sink (MB/s, "
                  "median of %d, alternated; best %.1f / %.1f%s) | %.1f | - | %.1f | %.2fx | "
                  ">= 400 MB/s, >= 0.8x |"
                  % (a.stream_mib, a.runs, max(stream["ours"]), max(stream["floor"]), ref, o, f,
                     o / f))
            ok &= o / f >= 0.8 and o >= 400
    if "F3" in only:
        r = row_f3(a, tmp)
        print("| F3a. %d idle attached executors: registry memory each (KiB; RSS %d -> %d KiB, "
              "attached in %.1f s) | %.2f | - | - | - | <= 16 KiB |"
              % (a.idle, r["before"], r["after"], r["attach_s"], r["per_exec_kib"]))
        print("| F3b. /connect under that load, x%d (ms, p50 / p99 at the client; share the "
              "registry answered within 5 ms) | %.3f / %.3f; %.1f%% | - | - | - | p99 <= 5 ms |"
              % (a.connects, *r["connect"], 100 * r["server_within_5ms"]))
        ok &= r["per_exec_kib"] <= 16 and r["connect"][1] <= 5
    print("\ntargets %s (load average at the end: %s)"
          % ("met" if ok else "NOT all met", open("/proc/loadavg").read().split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
