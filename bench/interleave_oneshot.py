#!/usr/bin/env python3
"""Row 1b between server binaries, interleaved: sandboxed one-shots of /bin/true (the
bench's ReadOnly sandbox, network restricted) against several servers at once, one
start each per round in a shuffled order, so the machine's drift and other tenants'
load fall on every binary alike. Two exec-bench runs of one binary, one after the
other, differed by up to 0.5 ms at p50 on this two-core machine; interleaved rounds
tell 0.1 ms apart. Each start's time is process/start sent -> process/closed seen, in
milliseconds; the first 10 rounds warm up and are left out. The first binary named
is the one the others are divided by.

    python3 bench/interleave_oneshot.py [--rounds N] [--unsandboxed | --writefile
                                         [--sandboxed] | --stream MIB [--tty] [--text]]
                                         NAME=PATH ...

--writefile times row 7b's operation instead, fs/writeFile of 4 KiB (unsandboxed), request
sent -> reply read; with --sandboxed row 7a's, the same write under a WorkspaceWrite
sandbox (a warm fs helper). --stream MIB is row 2's: MIB MiB of NUL bytes (--text: lines of text)
from one process (--tty: on a terminal), start -> closed, as MB/s (higher is better).

e.g. old=/tmp/old/build/exec-server new=build/exec-server. A PATH may carry arguments
after it, split on spaces ("new=build/exec-server --sandbox-max-processes 64")."""
import argparse
import base64
import os
import random
import shutil
import statistics
import tempfile
import time

from interleave import READ_ONLY, servers

WARM = 10


def one_shot(session, pid, sandbox):
    t = time.perf_counter()
    extra = {"sandbox": sandbox} if sandbox else {}
    session.start(pid, ["/bin/true"], cwd="file:///tmp", **extra)
    out = session.collect_until_closed(pid)
    if out["exit_code"] != 0:
        raise SystemExit("%s: /bin/true exited %s: %r" % (pid, out["exit_code"], out["stderr"]))
    session.notes.pop(pid, None)
    return (time.perf_counter() - t) * 1e3


def write_4k(session, path, data, sandbox=None):
    extra = {"sandbox": sandbox} if sandbox else {}
    t = time.perf_counter()
    session.call("fs/writeFile", dict({"path": "file://" + path, "dataBase64": data}, **extra))
    return (time.perf_counter() - t) * 1e3


def write_sandbox(scratch):
    """Row 7a's policy: "/" read, the scratch directory written, no network."""
    return {"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
        {"path": {"type": "path", "path": "file://" + scratch}, "access": "write"}]},
        "network": "restricted"}, "cwd": "file://" + scratch, "windowsSandboxLevel": "disabled"}


def stream(session, pid, mib, tty, text):
    n = mib << 20
    argv = ["/bin/sh", "-c", "yes 'a line of text, as a build or a test prints it' | head -c %d"
            % n] if text else ["/usr/bin/head", "-c", str(n), "/dev/zero"]
    t = time.perf_counter()
    session.start(pid, argv, cwd="file:///tmp", tty=tty)
    out = session.collect_until_closed(pid, timeout=600)
    dt = time.perf_counter() - t
    got = len(out["pty" if tty else "stdout"])
    if got < n:  # a terminal's \r\n may add bytes, never lose them
        raise SystemExit("%s: %d of %d bytes" % (pid, got, n))
    session.notes.pop(pid, None)
    return n / dt / 1e6


def cpu_ms(pid):
    """The CPU time (user + system, every thread) process pid has used, in ms: what each
    server spends, which the machine's other load stretches far less than latency."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def pct(v, q):
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--unsandboxed", action="store_true", help="row 1's one-shot instead")
    ap.add_argument("--writefile", action="store_true", help="row 7b's 4 KiB fs/writeFile")
    ap.add_argument("--sandboxed", action="store_true", help="--writefile in a sandbox (7a)")
    ap.add_argument("--stream", type=int, metavar="MIB", help="row 2's stream, MB/s")
    ap.add_argument("--tty", action="store_true", help="--stream on a terminal")
    ap.add_argument("--text", action="store_true", help="--stream lines of text")
    ap.add_argument("servers", nargs="+", metavar="NAME=PATH")
    a = ap.parse_args()
    sandbox = None if a.unsandboxed else READ_ONLY
    scratch = tempfile.mkdtemp(prefix="interleave-")
    data = base64.b64encode(os.urandom(4096)).decode()
    try:
        with servers(ap, a.servers) as started:
            runs = [(name, srv, session, []) for name, srv, session in started]
            cpu = measure(a, runs, sandbox, scratch, data)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(a, runs, cpu)


def measure(a, runs, sandbox, scratch, data):
    """The rounds: each server's times into its list; returns the server CPU a round (ms),
    by name."""
    k = 0
    cpu = {}
    warm = 2 if a.stream else WARM  # a stream warms what it needs in one round
    for r in range(a.rounds + warm):
        if r == warm:
            cpu = {name: cpu_ms(srv.pid) for name, srv, _, _ in runs}
        for name, _, session, lat in random.sample(runs, len(runs)):
            k += 1
            if a.stream:
                t = stream(session, "s%d" % k, a.stream, a.tty, a.text)
            elif a.writefile:
                t = write_4k(session, os.path.join(scratch, "%s.bin" % name), data,
                             write_sandbox(scratch) if a.sandboxed else None)
            else:
                t = one_shot(session, "p%d" % k, sandbox)
            if r >= warm:
                lat.append(t)
    return {name: (cpu_ms(srv.pid) - cpu[name]) / a.rounds for name, srv, _, _ in runs}


def report(a, runs, cpu):
    for _, _, _, lat in runs:
        lat.sort()
    base = pct(runs[0][3], 0.5)
    what = ("%d MiB of %s%s (MB/s)" % (a.stream, "text" if a.text else "NUL bytes",
                                       " on a terminal" if a.tty else "") if a.stream else
            "4 KiB fs/writeFile%s (ms)" % (", sandboxed" if a.sandboxed else "") if a.writefile else
            "unsandboxed one-shots (ms)" if a.unsandboxed else "ReadOnly sandboxed one-shots (ms)")
    print("%d rounds, %s:" % (a.rounds, what))
    base_cpu = cpu[runs[0][0]]
    for name, _, _, lat in runs:
        print("  %-10s p50 %6.3f  p25 %6.3f  p75 %6.3f  p95 %6.3f  mean %6.3f  p50/%s %.3f  "
              "server CPU/op %.3f (%.3f)" %
              (name, pct(lat, 0.5), pct(lat, 0.25), pct(lat, 0.75), pct(lat, 0.95),
               statistics.mean(lat), runs[0][0], pct(lat, 0.5) / base, cpu[name],
               cpu[name] / base_cpu if base_cpu else 0))


if __name__ == "__main__":
    main()
