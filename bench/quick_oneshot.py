#!/usr/bin/env python3
"""Quick one-shot latency: process/start sent -> process/closed received for
/bin/true, N sequential runs, against our server and (if installed) the reference,
in one run, plus the posix_spawn-equivalent floor measured from Python's
os.posix_spawn. A stop-gap until the C benchmark driver of the benchmarks issue.

    python3 bench/quick_oneshot.py [build/exec-server] [N]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "blackbox"))
import harness  # noqa: E402


def measure(server, n):
    s = server.session()
    times = []
    for i in range(n):
        pid = "t%d" % i
        t0 = time.perf_counter()
        s.send_request("process/start", {"processId": pid, "argv": ["/bin/true"],
                                         "cwd": "file:///tmp", "env": {}, "tty": False})
        s.wait_notification(lambda m: m["method"] == "process/closed", process_id=pid)
        times.append(time.perf_counter() - t0)
    s.close()
    times.sort()
    return statistics.median(times) * 1e3, times[int(len(times) * 0.95)] * 1e3


def floor(n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times) * 1e3, times[int(len(times) * 0.95)] * 1e3


def main():
    ours_bin = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/exec-server")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rows = [("posix_spawn floor", floor(n))]
    srv = harness.Server(cmd=[ours_bin, "--listen", "ws://127.0.0.1:0"])
    rows.append(("exec-server (ours)", measure(srv, n)))
    srv.stop(check=False)
    ref = harness.find_reference()
    if ref:
        rsrv = harness.Server(cmd=[ref, "exec-server", "--listen", "ws://127.0.0.1:0"])
        rows.append(("codex exec-server 0.169.0", measure(rsrv, n)))
        rsrv.stop(check=False)
    print("one-shot /bin/true, %d sequential runs: start sent -> closed received" % n)
    for name, (p50, p95) in rows:
        print("  %-28s p50 %7.3f ms   p95 %7.3f ms" % (name, p50, p95))
    if ref:
        print("  reference / ours (p50): %.1fx" % (rows[2][1][0] / rows[1][1][0]))


if __name__ == "__main__":
    main()
