#!/usr/bin/env python3
"""Command line (issue 2 item 2) and backpressure (item 7): a client that stops
reading must not grow server memory without bound, and nothing may be lost."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def run_cli(*args):
    return subprocess.run([SERVER_PATH, *args], capture_output=True, timeout=10)


def test_bad_listen_urls_exit_2(srv):
    for url, word in [("ws://nosuch.invalid:1234", "cannot resolve nosuch.invalid"),
                      ("ws://127.0.0.1", "invalid websocket --listen URL"),
                      ("ws://127.0.0.1:0/path", "invalid websocket --listen URL"),
                      ("ws://127.0.0.1:99999", "invalid websocket --listen URL"),
                      ("http://127.0.0.1:1234", "unsupported --listen URL")]:
        r = run_cli("--listen", url)
        assert r.returncode == 2, (url, r.returncode, r.stderr)
        err = r.stderr.decode()
        assert word in err and url in err, (url, err)
        assert err.count("\n") == 1, err  # one line
        assert r.stdout == b"", r.stdout


@ours_only
@needs_own_server
def test_listen_takes_a_host_name(_):
    """As sshd's ListenAddress: a name is looked up once at start and its address bound
    (the first IPv4 one: localhost is 127.0.0.1), the registry's --listen alike."""
    with Server(listen="ws://localhost:0") as s:
        assert s.url.startswith("ws://127.0.0.1:") and not s.url.endswith(":0"), s.url
        c = s.session()
        assert c.call("environment/status") == {"status": "ready"}
        c.close()
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen([SERVER_PATH, "registry", "--database", "sqlite:%s/r.db" % d,
                              "--listen", "http://localhost:0"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            url = p.stdout.readline().decode().strip()
            assert url.startswith("http://127.0.0.1:"), (url, p.stderr.read1())
        finally:
            p.terminate()
            p.wait(20)
    r = run_cli("registry", "--database", "sqlite:/nonexistent/r.db", "--listen",
                "http://nosuch.invalid:0")
    assert r.returncode == 2 and b"cannot resolve nosuch.invalid" in r.stderr, r


def test_help_version_and_unknown_flag(srv):
    r = run_cli("--help")
    assert r.returncode == 0 and b"--listen" in r.stdout and b"--session-ttl" in r.stdout
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith(b"exec-server "), r.stdout
    r = run_cli("--bogus")
    assert r.returncode == 2 and b"--bogus" in r.stderr
    r = run_cli("--session-ttl", "soon")
    assert r.returncode == 2 and b"--session-ttl" in r.stderr


def test_ipv6_listen_prints_bound_url(srv):
    try:
        s6 = Server(listen="ws://[::1]:0")
    except Exception as e:  # no IPv6 loopback on this host
        raise TestSkip("no [::1]: %s" % e)
    try:
        assert s6.url.startswith("ws://[::1]:") and not s6.url.endswith(":0"), s6.url
        s = s6.session()
        assert s.call("environment/status") == {"status": "ready"}
        s.close()
    finally:
        s6.stop()


def test_stalled_client_bounded_memory_then_complete(srv):
    """40 MB of output while the client reads nothing: the child is held back (not
    finished), server RSS grows by far less than the output, and once the client
    reads again every byte arrives, in order."""
    if WRAPPER:
        raise TestSkip("the RSS bound is for the server, not valgrind")
    s = srv.session()
    total = 40 * 1000 * 1000
    base = rss_kib(srv.pid)
    mk = "bb-flood-" + uuid.uuid4().hex[:8]
    s.start("flood", ["/bin/sh", "-c", "head -c %d /dev/zero | tr '\\0' 'z'" % total],
            env={"PATH": "/usr/bin:/bin", MARKER_VAR: mk})
    # Read nothing: kernel socket buffers and our queue fill up until the child blocks.
    wait_until(lambda: any(blocked_on_pipe(p) for p in marked_pids(mk)), 30,
               "the child to be held back")
    time.sleep(2.0 * TIMEOUT_SCALE)  # sleep-ok: a server that kept reading would grow here
    grown_mib = (rss_kib(srv.pid) - base) / 1024
    # Retained log (1 MiB) + write queue high-water mark (4 MiB) + one frame in
    # flight, with room for allocator and sanitizer slack, is far below 40 MB.
    assert grown_mib < 24, "server RSS grew by %.1f MiB while the client stalled" % grown_mib
    r = s.call("process/read", {"processId": "flood", "afterSeq": 0, "waitMs": 0},
               timeout=30)
    assert not r["exited"], "the child should be held back by backpressure"
    out = s.collect_until_closed("flood", timeout=120)
    assert len(out["stdout"]) == total, len(out["stdout"])
    assert out["stdout"].count(b"z") == total
    check_seq_rules(out)
    s.close()


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=150)
