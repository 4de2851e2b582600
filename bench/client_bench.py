#!/usr/bin/env python3
"""The client at the server's speed (issue 48): what a user of `exec-client` sees on
loopback, against our server locally and through our own registry and its rendezvous,
with the stock codex executor as the peer through the same rendezvous and the same
client (and the stock server locally).

Each figure is a whole `exec-client` process, MB/s of SIZE bytes over its wall time,
its output to /dev/null:
  run    `exec-client run 'head -c SIZE /dev/zero'`
  get    `exec-client fs get -q FILE -` of a SIZE file (sparse: the disk stays out)
Columns: local (ws:// to the server), remote (our registry; the executor registered
there), for ours and for the stock codex (`codex exec-server --listen` / `--remote`).
The client's own CPU (user + system, its rusage) is given beside ours. Floors: the same
bytes through one pipe to `cat` (`head -c SIZE /dev/zero | cat`), and `cat FILE`.

Every round runs each row once, in a rotating order, so the machine's load falls on all
alike; a row's figure is the best of the rounds (--runs, default 3) and its median.
Targets (issue 48): run >= 300 MB/s locally and >= 250 through the rendezvous and at
least twice the stock executor's there; get >= 500 MB/s through the rendezvous.

  python3 bench/client_bench.py [--build DIR] [--mib 256] [--runs 3] [--no-ref]
                                [--ref-version V] [--only run-local,get-remote,...]
  python3 bench/client_bench.py --serve    # set up, print the client commands, wait
Prints a markdown table; exit 0 when our rows ran."""
import argparse
import os
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import codex_ref  # noqa: E402
import relay_bench  # noqa: E402

ROWS = ("run-local", "run-remote", "get-local", "get-remote")


def url_line(p, what, prefix, timeout=30):
    """The first line of p's stdout that starts with prefix."""
    deadline = time.monotonic() + timeout
    while True:
        r, _, _ = select.select([p.stdout], [], [], max(deadline - time.monotonic(), 0))
        if not r:
            raise RuntimeError(what + " printed no URL")
        line = p.stdout.readline().decode().strip()
        if not line and p.poll() is not None:
            raise RuntimeError(what + " exited")
        if line.startswith(prefix):
            return line


class Setup:
    """Our registry (SQLite) with our executor and the stock one registered at it, and
    a local server of each; everything started here and stopped by close()."""

    def __init__(self, a, tmp):
        self.tmp, self.procs = tmp, []
        self.server = os.path.join(a.build, "exec-server")
        self.client = os.path.join(a.build, "exec-client")
        db = "sqlite:" + os.path.join(tmp, "fleet.db")

        def reg(*x):
            return subprocess.run([self.server, "registry"] + list(x) + ["--database", db],
                                  capture_output=True, check=True).stdout.decode().strip()
        ex_tok = reg("token", "create", "--environment", "bench-*", "--role", "executor")
        self.h_tok = reg("token", "create", "--environment", "bench-*", "--role", "harness")
        self.registry = url_line(self.spawn([self.server, "registry", "--database", db,
                                             "--log-level", "warn"]), "the registry", "http")
        self.urls = {"ours": url_line(self.spawn([self.server, "--listen", "ws://127.0.0.1:0"]),
                                      "our server", "ws://")}
        env = dict(os.environ)
        env.pop("CODEX_API_KEY", None)
        p = self.spawn([self.server, "--remote", self.registry, "--environment-id", "bench-ours",
                        "--registration-bearer-stdin"], stdin=subprocess.PIPE, env=env,
                       stdout=subprocess.DEVNULL)
        p.stdin.write((ex_tok + "\n").encode())
        p.stdin.flush()
        self.ours_pid = p.pid
        self.ref = None if a.no_ref else codex_ref.find(a.ref_version)
        if self.ref:
            renv = dict(env, CODEX_HOME=tempfile.mkdtemp(prefix="rxhome-", dir="/var/tmp"),
                        RUST_LOG="error")
            self.urls["stock"] = url_line(
                self.spawn([self.ref, "exec-server", "--listen", "ws://127.0.0.1:0"], env=renv),
                "the stock server", "ws://")
            self.spawn([self.ref, "exec-server", "--remote", self.registry, "--environment-id",
                        "bench-stock"], env=dict(renv, CODEX_API_KEY=ex_tok),
                       stdout=subprocess.DEVNULL)
        for who in self.peers():
            self.wait_attached(who)

    def peers(self):
        return ["ours"] + (["stock"] if self.ref else [])

    def spawn(self, argv, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        p = subprocess.Popen(argv, stderr=open(os.path.join(self.tmp, "%d.log" % len(self.procs)),
                                               "wb"), cwd=self.tmp, **kw)
        self.procs.append(p)
        return p

    def target(self, who, where):
        if where == "local":
            return ["--url", self.urls[who]]
        return ["--remote", self.registry, "--environment-id", "bench-" + who, "--token",
                self.h_tok]

    def wait_attached(self, who, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run([self.client] + self.target(who, "remote") +
                               ["run", "--", "/bin/true"], capture_output=True)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("%s never answered: %s" % (who, r.stderr.decode()[-300:]))
            time.sleep(0.3)  # sleep-ok: the executor is still registering

    def close(self):
        for p in reversed(self.procs):
            relay_bench.stop(p)


def timed(argv, size):
    """Runs argv, output to /dev/null: (MB/s of size bytes over its wall time, its CPU s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (argv, r.returncode, r.stderr.decode()[-300:]))
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return size / dt / 1e6, cpu


def serve(s, data):
    for who in s.peers():
        for where in ("local", "remote"):
            print("%s %s: %s" % (who, where, " ".join([s.client] + s.target(who, where))))
    print("file: %s\nregistry: %s (our executor %d)" % (data, s.registry, s.ours_pid), flush=True)
    # SIGTERM too (a background job ignores SIGINT): everything started is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)  # sleep-ok: serving until interrupted
    except KeyboardInterrupt:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--ref-version", default=codex_ref.DEFAULT_VERSION)
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--serve", action="store_true",
                    help="set everything up, print the client's command for each target and "
                         "wait (for perf or strace by hand) until SIGINT or SIGTERM")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    size = a.mib << 20
    tmp = tempfile.mkdtemp(prefix="client-bench-")
    data = os.path.join(tmp, "data.bin")
    with open(data, "wb") as f:
        f.truncate(size)
    s = Setup(a, tmp)
    if a.serve:
        serve(s, data)
        s.close()
        return 0
    cmd = "head -c %d /dev/zero" % size
    jobs = {}
    for row in a.only.split(","):
        what, where = row.split("-")
        args = ["run", cmd] if what == "run" else ["fs", "get", "-q", data, "-"]
        for who in s.peers():
            jobs[(row, who)] = [s.client] + s.target(who, where) + args
    jobs[("floor-run", "-")] = ["sh", "-c", cmd + " | cat"]
    jobs[("floor-get", "-")] = ["cat", data]
    keys = list(jobs)
    res = {k: [] for k in keys}
    try:
        for r in range(a.runs):
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                res[k].append(timed(jobs[k], size))
                print("  round %d %s %s: %.1f MB/s" % (r + 1, k[0], k[1], res[k][-1][0]),
                      file=sys.stderr)
    finally:
        s.close()

    def cell(k):
        if k not in res:
            return "-"
        rates = [x[0] for x in res[k]]
        return "%.0f / %.0f" % (max(rates), statistics.median(rates))

    print("\n`exec-client` on loopback, %d MiB, output to /dev/null (bench/client_bench.py, "
          "%d rounds; MB/s, best / median):\n" % (a.mib, a.runs))
    print("| row | ours | stock codex | ours / stock (best) | client CPU with ours (s, median) |")
    print("| --- | --- | --- | --- | --- |")
    for row in a.only.split(","):
        o, st = (row, "ours"), (row, "stock")
        ratio = ("%.2fx" % (max(x[0] for x in res[o]) / max(x[0] for x in res[st]))
                 if st in res else "-")
        print("| %s | %s | %s | %s | %.2f |" % (row, cell(o), cell(st), ratio,
                                               statistics.median(x[1] for x in res[o])))
    print("| floor: `%s \\| cat` | %s | | | |" % (cmd, cell(("floor-run", "-"))))
    print("| floor: `cat FILE` | %s | | | |" % cell(("floor-get", "-")))
    print("\nload average at the end: %s" % open("/proc/loadavg").read().split()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
