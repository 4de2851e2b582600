#!/usr/bin/env python3
"""Row 9 between server binaries, interleaved: curl in a child downloads 64 MiB through
the server's managed network proxy (its proxy variables, as row 9), from several
servers at once, one download each per round in a shuffled order, so the machine's
drift and other tenants' load fall on every binary alike (exec-bench runs of row 9 one
after the other differed by 1.7x here under others' builds). Per download: curl's
time_total, and the CPU the server spent (all its threads, from
/proc/PID/task/*/schedstat: what the relay's syscalls cost, which the machine's load hardly
moves). The first round warms up and is left out; the first server named is the one
the others are divided by.

    python3 bench/interleave_proxy.py [--rounds N] [--mib N] [--transparent] NAME=CMD ...

--transparent is row 9c (curl in a sandbox, through transparent TCP, ours only: the
name it fetches is resolved by EXEC_SERVER_TEST_RESOLVE).

e.g. new=build/exec-server old=/tmp/old/exec-server "ref=PATH/codex exec-server". The
web server is a thread of this script that sends the body with one sendall (the copy
is the kernel's)."""
import argparse
import os
import random
import socket
import statistics
import threading

from interleave import READ_ONLY, servers


def web_server(body):
    """Answers every connection with body (HTTP/1.1, Connection: close); its port."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    head = ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" %
            len(body)).encode()

    def serve(c):
        with c:
            data = b""
            while b"\r\n\r\n" not in data:
                d = c.recv(4096)
                if not d:
                    return
                data += d
            c.sendall(head)
            c.sendall(body)

    def accept():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return ls.getsockname()[1]


def cpu_ms(pid):
    """The CPU time of the process's threads (schedstat: nanoseconds, where stat counts
    10 ms ticks), ms."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e6


NAME = "bench-web.test"  # row 9c's name, resolved by our servers only (EXEC_SERVER_TEST_RESOLVE)


def download(srv, session, pid, url, size, transparent):
    np = {"proxy": {"enabled": True, "enableSocks5": transparent, "enableSocks5Udp": False,
                    "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                    "mode": "full", "domains": {NAME if transparent else "127.0.0.1": "allow"},
                    "allowLocalBinding": True, "transparentTcp": transparent}}
    extra = {"sandbox": READ_ONLY, "enforceManagedNetwork": True} if transparent else {}
    if transparent:
        url = url.replace("127.0.0.1", NAME + ".")
    cpu = cpu_ms(srv.pid)
    session.start(pid, ["/usr/bin/curl", "-s", "--noproxy", "*" if transparent else "", "-o",
                        "/dev/null", "-w", "%{time_total} %{size_download}", url],
                  cwd="file:///tmp", networkProxy=np, **extra)
    out = session.collect_until_closed(pid, timeout=120)
    cpu = cpu_ms(srv.pid) - cpu
    session.notes.pop(pid, None)
    words = out["stdout"].decode().split()
    if len(words) != 2 or int(words[1]) != size:
        raise SystemExit("%s: curl printed %r %r" % (pid, out["stdout"], out["stderr"]))
    return float(words[0]) * 1e3, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--transparent", action="store_true",
                    help="row 9c: curl in a sandbox, through transparent TCP (ours only)")
    ap.add_argument("servers", nargs="+", metavar="NAME=CMD")
    a = ap.parse_args()
    size = a.mib << 20
    url = "http://127.0.0.1:%d/body.bin" % web_server(b"\xa5" * size)
    os.environ["EXEC_SERVER_TEST_RESOLVE"] = NAME + "=127.0.0.1"
    with servers(ap, a.servers) as started:
        runs = [(name, srv, session, [], []) for name, srv, session in started]
        k = 0
        for r in range(a.rounds + 1):
            for name, srv, session, wall, cpu in random.sample(runs, len(runs)):
                k += 1
                t, c = download(srv, session, "d%d" % k, url, size, a.transparent)
                if r:
                    wall.append(t)
                    cpu.append(c)
    base = statistics.median(runs[0][3])
    print("%d rounds, %d MiB through %s (ms; best, median; the server's CPU median):" % (
        a.rounds, a.mib, "transparent TCP" if a.transparent else "the proxy variables"))
    for name, _, _, wall, cpu in runs:
        print("  %-8s best %7.1f  p50 %7.1f  cpu %6.1f  p50/%s %.2f" % (
            name, min(wall), statistics.median(wall), statistics.median(cpu), runs[0][0],
            statistics.median(wall) / base))


if __name__ == "__main__":
    main()
