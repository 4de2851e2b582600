#!/usr/bin/env python3
"""exec-client (issue 5): the command-line client against the real server.

Exit status propagation, stdout/stderr separation, stdin forwarding with an exact EOF,
a tty session driven through a pseudo-terminal (raw mode restored, Ctrl-C delivered
remotely), fs round trips (small and streamed), rpc, and clear errors. The run/fs
checks are repeated against the reference server when it is installed."""
import json
import os
import pty
import shutil
import signal
import socket
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def client_path():
    bdir = os.environ.get("EXEC_BUILD_DIR")
    cands = [os.path.join(bdir, "exec-client")] if bdir else []
    here = os.path.dirname(os.path.abspath(__file__))
    cands += [os.path.join(here, "..", "..", d, "exec-client")
              for d in ("build/asan", "build", "build/dev")]
    for c in cands:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    return None


CLIENT = client_path()


def ec(srv, *args, stdin=b"", timeout=60, env=None):
    """Runs exec-client against srv; returns CompletedProcess (bytes)."""
    e = dict(os.environ)
    e.pop("EXEC_SERVER_URL", None)
    e.update(env or {})
    argv = [CLIENT] + (["--url", srv.url] if srv is not None else []) + list(args)
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, env=e)


def need_client():
    if CLIENT is None:
        raise TestSkip("exec-client not built")


# ---- run -------------------------------------------------------------------------

def check_run_basics(srv):
    r = ec(srv, "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 3, r
    assert r.stdout == b"out\n" and r.stderr == b"err\n", r
    r = ec(srv, "run", "--", "true")
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r
    # Signals map to 128+N like a shell.
    r = ec(srv, "run", "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 143, r
    # stdin reaches the command, byte-exact, followed by EOF.
    data = bytes(range(256)) * 300
    r = ec(srv, "run", "--", "sh", "-c", "cat; echo done >&2", stdin=data)
    assert r.returncode == 0 and r.stdout == data and r.stderr == b"done\n", \
        (r.returncode, len(r.stdout), r.stderr)
    r = ec(srv, "run", "--", "wc", "-l", stdin=b"a\nb\nc\n")
    assert r.stdout.strip() == b"3", r


def test_run_status_streams_and_stdin(srv):
    need_client()
    check_run_basics(srv)


def test_run_large_stdin_echoed_back_is_complete(srv):
    need_client()
    # 40 MiB in and out at the same time: more than the client buffers before it
    # lags (32 MiB), so output must be forwarded while the input is still being fed.
    data = os.urandom(40 * 1024 * 1024)
    r = ec(srv, "run", "--", "cat", stdin=data, timeout=180)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert len(r.stdout) == len(data) and r.stdout == data, len(r.stdout)


def test_run_endless_stdin_is_streamed(srv):
    need_client()
    # More than the client buffers for an exact EOF: forwarded as it comes.
    r = subprocess.run('yes | "%s" --url %s run -- head -n 2' % (CLIENT, srv.url),
                       shell=True, capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"y\ny\n", r


def test_run_env_cwd_and_no_stdin(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-cwd-")
    r = ec(srv, "run", "--cwd", d, "--env", "FOO=bar baz", "--",
           "sh", "-c", 'pwd; echo "$FOO"')
    assert r.returncode == 0 and r.stdout == (d + "\nbar baz\n").encode(), r
    # -n: stdin is not forwarded (the command sees EOF at once).
    r = ec(srv, "run", "-n", "--", "sh", "-c", "cat; echo end", stdin=b"ignored\n")
    assert r.returncode == 0 and r.stdout == b"end\n", r
    os.rmdir(d)


def test_run_errors_are_one_line(srv):
    need_client()
    if WRAPPER:
        raise TestSkip("under valgrind vfork runs like fork: exec errors are exit 127")
    r = ec(srv, "run", "--", "/no/such/program")
    assert r.returncode == 127, r
    assert r.stderr.count(b"\n") == 1 and b"No such file or directory" in r.stderr, r
    r = ec(srv, "run")
    assert r.returncode == 2 and b"missing command" in r.stderr, r


def test_run_tty_without_local_terminal(srv):
    need_client()
    r = ec(srv, "run", "--tty", "--", "sh", "-c", "tty; printf 'a\\n'; exit 4")
    assert r.returncode == 4, r
    assert b"/dev/pts/" in r.stdout and b"a\r\n" in r.stdout, r
    assert r.stderr == b"", r


def test_connection_errors(srv):
    need_client()
    # Unreachable: a port nobody listens on.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.run([CLIENT, "--url", "ws://127.0.0.1:%d" % port, "run", "--", "true"],
                       capture_output=True, timeout=30)
    assert r.returncode == 255, r
    assert b"cannot reach server" in r.stderr and b"refused" in r.stderr, r
    assert r.stderr.count(b"\n") == 1, r.stderr
    r = subprocess.run([CLIENT, "--url", "http://127.0.0.1:1", "fs", "ls", "/"],
                       capture_output=True, timeout=30)
    assert r.returncode == 2 and b"bad URL" in r.stderr, r
    env = dict(os.environ)
    env.pop("EXEC_SERVER_URL", None)
    r = subprocess.run([CLIENT, "fs", "ls", "/"], capture_output=True, timeout=30, env=env)
    assert r.returncode == 2 and b"EXEC_SERVER_URL" in r.stderr, r
    # --url defaults to $EXEC_SERVER_URL.
    r = ec(None, "run", "--", "echo", "via-env", env={"EXEC_SERVER_URL": srv.url})
    assert r.returncode == 0 and r.stdout == b"via-env\n", r
    r = subprocess.run([CLIENT, "--help"], capture_output=True, timeout=30)
    assert r.returncode == 0 and b"run" in r.stdout and b"fs cat" in r.stdout, r
    r = ec(srv, "bogus")
    assert r.returncode == 2 and b"unknown command" in r.stderr, r


class CutProxy:
    """A TCP proxy to the server that cuts the first connection right after forwarding
    server bytes containing `marker`; later connections are forwarded (or refused when
    refuse_after_cut)."""

    def __init__(self, srv, marker, refuse_after_cut=False):
        import threading
        self.target = (srv.host, srv.port)
        self.marker = marker
        self.refuse = refuse_after_cut
        self.cut = False
        # The reference may push the first output before the process/start reply; a
        # cut between the two is a start in flight, which the client rightly refuses
        # to replay. So cut only once both the marker and the start reply went by.
        self.seen_marker = self.seen_start = False
        self.connections = 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.url = "ws://127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        pairs = []
        while not self.stop:
            rl = [self.lsock] + [s for p in pairs for s in p]
            r, _, _ = select.select(rl, [], [], 0.05)
            for s in r:
                if s is self.lsock:
                    c, _ = self.lsock.accept()
                    if self.cut and self.refuse:
                        c.close()
                        continue
                    self.connections += 1
                    pairs.append((c, socket.create_connection(self.target)))
                    continue
                pair = next((p for p in pairs if s in p), None)
                if pair is None:
                    continue
                other = pair[1] if s is pair[0] else pair[0]
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data:
                    other.sendall(data)
                from_server = s is pair[1]
                if from_server and self.marker in data:
                    self.seen_marker = True
                if from_server and b'"sandboxType"' in data:
                    self.seen_start = True
                if not data or (from_server and not self.cut and self.seen_marker
                                and self.seen_start):
                    if data:
                        self.cut = True
                    for x in pair:
                        x.close()
                    pairs.remove(pair)
        for p in pairs:
            for x in p:
                x.close()
        self.lsock.close()

    def close(self):
        self.stop = True
        self.thread.join()


def test_run_survives_a_dropped_connection(srv):
    need_client()
    check_run_survives_a_dropped_connection(srv)


def check_run_survives_a_dropped_connection(srv):
    # "one\n" travels as the base64 chunk "b25lCg==": cut right after it.
    px = CutProxy(srv, b"b25lCg==")
    try:
        r = subprocess.run([CLIENT, "--url", px.url, "run", "--", "sh", "-c",
                            "echo one; sleep 1; echo two; sleep 0.5; echo three >&2; exit 6"],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert px.cut and px.connections == 2, (px.cut, px.connections)
        assert r.returncode == 6, r
        assert r.stdout == b"one\ntwo\n" and r.stderr == b"three\n", r
    finally:
        px.close()


def test_run_reports_a_lost_server(srv):
    need_client()
    px = CutProxy(srv, b"b25lCg==", refuse_after_cut=True)
    try:
        r = subprocess.run([CLIENT, "--url", px.url, "--reconnect-ms", "800", "run", "--",
                            "sh", "-c", "echo one; sleep 5"],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 255, r
        assert r.stdout == b"one\n", r
        assert b"connection lost" in r.stderr and r.stderr.count(b"\n") == 1, r.stderr
    finally:
        px.close()


# ---- shell through a pseudo-terminal ----------------------------------------------

def read_until(fd, needle, timeout=20.0):
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("timed out waiting for %r; got %r" % (needle, buf[-500:]))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    assert needle in buf, (needle, buf[-500:])
    return buf


def read_to_eof(fd, timeout=20.0):
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the last slave closed
            break
        if not chunk:
            break
        buf += chunk
    return buf


def running_sleep_30(srv):
    """The remote shell's `sleep 30` runs (a live descendant of the server)."""
    for p in descendants(srv.pid):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                if f.read() == b"sleep\x0030\x00" and proc_state(p) not in ("Z", "X"):
                    return True
        except OSError:
            pass
    return False


def reap(pid, timeout=15.0):
    """Waits for pid; kills it if it outlives the timeout (a failed test must not hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def test_shell_over_a_pty(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-shell-")
    before, after = os.path.join(d, "before"), os.path.join(d, "after")
    # The local terminal settings before and after must match: raw mode is undone.
    script = 'stty -g > %s; "%s" --url %s shell; rc=$?; stty -g > %s; echo "local-rc=$rc"' % (
        before, CLIENT, srv.url, after)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/bin/sh", ["/bin/sh", "-c", script])
    try:
        # A login shell that is still starting may drop what is typed ahead (bash does
        # on a loaded machine): type the first line again until the shell answers.
        deadline = time.monotonic() + 30
        while True:
            os.write(fd, b"echo hi-$((40+2))\r")
            try:
                read_until(fd, b"hi-42", timeout=2)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        # Ctrl-C travels as a byte to the remote PTY, whose line discipline interrupts
        # the foreground job; the remote shell survives and keeps answering.
        os.write(fd, b"sleep 30; echo not-interrupted\r")
        wait_until(lambda: running_sleep_30(srv), DEFAULT_TIMEOUT, "the remote sleep to run")
        os.write(fd, b"\x03")
        os.write(fd, b"echo after-$((6*7))\r")
        out = read_until(fd, b"after-42")
        assert b"\nnot-interrupted" not in out, out  # only the typed line echoes it
        os.write(fd, b"exit 7\r")
        out = read_to_eof(fd)
        assert b"local-rc=7" in out, out
    finally:
        reap(pid)
        os.close(fd)
    with open(before) as f1, open(after) as f2:
        assert f1.read() == f2.read(), "terminal not restored"
    shutil.rmtree(d)


def test_shell_restores_terminal_on_signal(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-shsig-")
    before, during, after = (os.path.join(d, n) for n in ("before", "during", "after"))
    # Without job control a background job's stdin is /dev/null: give it the terminal.
    # Wait (up to 20 s on a loaded machine) until the client has switched to raw mode.
    script = ('stty -g > {b}; "{c}" --url {u} shell </dev/tty & pid=$!; '
              'for i in $(seq 100); do sleep 0.2; stty -g > {d}; cmp -s {b} {d} || break; done; '
              'sleep 0.3; kill -TERM $pid; wait $pid; echo "local-rc=$?"; stty -g > {a}'
              ).format(b=before, c=CLIENT, u=srv.url, d=during, a=after)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/bin/sh", ["/bin/sh", "-c", script])
    try:
        out = read_to_eof(fd)
        assert b"local-rc=143" in out, out
    finally:
        reap(pid)
        os.close(fd)
    with open(before) as f1, open(during) as f2, open(after) as f3:
        b, du, a = f1.read(), f2.read(), f3.read()
    assert du != b, "the client never put the terminal in raw mode"
    assert a == b, "terminal not restored after SIGTERM"
    shutil.rmtree(d)


# ---- fs --------------------------------------------------------------------------

def check_fs_round_trip(srv, big=True):
    d = tempfile.mkdtemp(prefix="ec-fs-")
    local = os.path.join(d, "local.bin")
    small = os.urandom(5000)
    with open(local, "wb") as f:
        f.write(small)
    r = ec(srv, "fs", "mkdir", "-p", d + "/r/sub dir")
    assert r.returncode == 0, r
    r = ec(srv, "fs", "put", local, d + "/r/sub dir/f.bin")
    assert r.returncode == 0, r
    r = ec(srv, "fs", "cat", d + "/r/sub dir/f.bin")
    assert r.returncode == 0 and r.stdout == small, (r.returncode, len(r.stdout), r.stderr)
    r = ec(srv, "fs", "put", "-", d + "/r/stdin.txt", stdin=b"from stdin\n")
    assert r.returncode == 0, r
    r = ec(srv, "fs", "ls", d + "/r")
    assert r.returncode == 0 and r.stdout == b"stdin.txt\nsub dir/\n", r
    r = ec(srv, "fs", "stat", d + "/r/stdin.txt")
    assert r.returncode == 0 and b"Type: regular file" in r.stdout and b"Size: 11" in r.stdout, r
    r = ec(srv, "fs", "cp", "-r", d + "/r", d + "/copy")
    assert r.returncode == 0, r
    r = ec(srv, "fs", "walk", d + "/copy")
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == [
        d + "/copy/stdin.txt", d + "/copy/sub dir/", d + "/copy/sub dir/f.bin"], r.stdout
    if big:
        data = os.urandom(6 * 1024 * 1024 + 123)
        with open(local, "wb") as f:
            f.write(data)
        r = ec(srv, "fs", "put", local, d + "/big.bin")
        assert r.returncode == 0, r
        with open(d + "/big.bin", "rb") as f:
            assert f.read() == data
        r = ec(srv, "fs", "cat", d + "/big.bin")
        assert r.returncode == 0 and r.stdout == data, (r.returncode, len(r.stdout), r.stderr)
        assert r.stderr == b"", r.stderr  # no progress bar when stderr is not a tty
    r = ec(srv, "fs", "cat", d + "/missing")
    assert r.returncode == 1 and b"No such file or directory" in r.stderr, r
    assert r.stderr.count(b"\n") == 1, r.stderr
    r = ec(srv, "fs", "rm", d + "/copy")  # a directory without -r
    assert r.returncode == 1, r
    r = ec(srv, "fs", "rm", "-r", d + "/copy")
    assert r.returncode == 0 and not os.path.exists(d + "/copy"), r
    r = ec(srv, "fs", "rm", "-f", d + "/copy")
    assert r.returncode == 0, r
    r = ec(srv, "fs", "bogus", "x")
    assert r.returncode == 2, r
    shutil.rmtree(d)


def test_fs_round_trips(srv):
    need_client()
    check_fs_round_trip(srv)


def test_fs_progress_bar_on_a_tty(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-prog-")
    with open(d + "/big", "wb") as f:
        f.write(os.urandom(5 * 1024 * 1024))
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLIENT, [CLIENT, "--url", srv.url, "fs", "put", d + "/big", d + "/copy"])
    try:
        out = read_until(fd, b"100%")
    finally:
        status = reap(pid)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"\rbig " in out and b"/s" in out, out  # scp's line: name, percent, rate
    shutil.rmtree(d)


# ---- rpc -------------------------------------------------------------------------

def test_rpc_lines(srv):
    need_client()
    lines = (b'{"id":1,"method":"environment/status"}\n'
             b'{"id":2,"method":"process/start","params":{"processId":"r1","argv":["echo","hi"],'
             b'"cwd":"file:///tmp","env":{"PATH":"/bin:/usr/bin"},"tty":false}}\n'
             b'{"id":3,"method":"no/such"}\n')
    r = ec(srv, "rpc", stdin=lines)
    assert r.returncode == 1, r  # one reply was an error (issue 36: as the man page says)
    msgs = [json.loads(l) for l in r.stdout.decode().splitlines()]
    by_id = {m.get("id"): m for m in msgs if "id" in m}
    assert by_id[1]["result"] == {"status": "ready"}, msgs
    assert by_id[2]["result"]["processId"] == "r1", msgs
    assert by_id[3]["error"]["code"] == -32601, msgs
    assert r.stderr == b"", r.stderr  # the session id is for -v only
    r = ec(srv, "-v", "rpc", stdin=lines[:-len(b'{"id":3,"method":"no/such"}\n')])
    assert r.returncode == 0 and b"session " in r.stderr, r
    # --raw skips the handshake, so the server's gate answers.
    r = ec(srv, "rpc", "--raw", stdin=b'{"id":9,"method":"environment/status"}\n')
    assert r.returncode == 1, r  # the gate's answer is an error reply
    m = json.loads(r.stdout.decode().splitlines()[0])
    assert m["id"] == 9 and "must call initialize" in m["error"]["message"], m


# ---- against the reference --------------------------------------------------------

def test_run_and_fs_against_reference(srv):
    need_client()
    if find_reference() is None:
        raise TestSkip("reference server not installed")
    ref = Server(reference=True)
    try:
        check_run_basics(ref)
        check_fs_round_trip(ref, big=True)
        check_run_survives_a_dropped_connection(ref)
    finally:
        ref.stop(check=False)


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=120)
