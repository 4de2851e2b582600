#!/usr/bin/env python3
"""exec-client behaving like ssh (issue 13), driven on real PTYs (python `pty`).

The client runs on a pseudo-terminal this test owns, so window changes, typed input,
Ctrl-C and end of input reach it exactly as from a person at a terminal. Checks:
the remote PTY follows the local window (start size and SIGWINCH), input that ends
ends the remote command (no hangs), Ctrl-C and SIGTERM leave no remote process (found
by pid through a marker in its environment), signal deaths give 128+N, `fs get`/`fs put`
keep modes, a 401 is explained, a finished call leaves no session behind. Against the
reference the extensions are off; test_exec_client.py covers that fallback."""
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, CutProxy, ec, need_client, reap  # noqa


def set_winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Tty:
    """exec-client (argv after the binary) on a new PTY of rows x cols."""

    def __init__(self, srv, args, rows=24, cols=80, env=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            e = dict(os.environ, TERM="xterm")
            e.pop("EXEC_SERVER_URL", None)
            e.update(env or {})
            try:
                os.execve(CLIENT, [CLIENT, "--url", srv.url] + list(args), e)
            finally:
                os._exit(127)
        set_winsize(self.fd, rows, cols)
        self.out = b""
        self.status = None

    def read_until(self, needle, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, "no %r from the client in time; got %r" % (needle, self.out)
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, "the client ended before %r; got %r" % (needle, self.out)
                self.out += chunk

    def write(self, data):
        os.write(self.fd, data)

    def finish(self, timeout=DEFAULT_TIMEOUT):
        """Reads to EOF and returns the client's exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.out += chunk
            elif os.waitpid(self.pid, os.WNOHANG)[0]:
                break
        status = reap(self.pid, timeout=max(1.0, deadline - time.monotonic()))
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def wait_gone(marker, timeout=DEFAULT_TIMEOUT):
    deadline = time.monotonic() + timeout
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above
    return marked_pids(marker)


@ours_only
def test_window_size_at_start_and_on_resize(srv):
    need_client()
    script = ("stty size; trap 'stty size; exit 0' WINCH; echo ready; "
              "while :; do sleep 0.05; done")
    t = Tty(srv, ["run", "--tty", "--", "/bin/bash", "-c", script], rows=33, cols=101)
    t.read_until(b"ready")
    assert b"33 101" in t.out, t.out
    set_winsize(t.fd, 44, 120)  # the kernel sends SIGWINCH to the client
    t.read_until(b"44 120")
    assert t.finish() == 0, t.out


@ours_only
def test_piped_input_ends_instead_of_hanging(srv):
    need_client()
    r = ec(srv, "run", "--", "cat", stdin=b"hello\n", timeout=30)
    assert (r.returncode, r.stdout) == (0, b"hello\n"), r
    r = ec(srv, "run", "--tty", "--", "cat", stdin=b"hello\n", timeout=30)
    assert r.returncode == 0 and b"hello" in r.stdout, r
    r = ec(srv, "shell", stdin=b"echo from-shell; exit 4\n", timeout=30)
    assert r.returncode == 4 and b"from-shell" in r.stdout, r
    r = subprocess.run([CLIENT, "--url", srv.url, "shell"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r
    # a login-like environment from the server side (envPolicy "core")
    r = ec(srv, "run", "--", "/bin/sh", "-c", 'echo "home=$HOME lang=$LANG"', env={
        "HOME": "/nonexistent-client-home"})
    assert r.stdout == ("home=%s lang=%s\n" % (os.environ.get("HOME", ""),
                                               os.environ.get("LANG", ""))).encode(), r


@ours_only
def test_typed_input_without_tty_and_end_of_input(srv):
    """`run -- cat` from a terminal: typed lines reach cat, ^D ends it."""
    need_client()
    t = Tty(srv, ["run", "--", "/bin/sh", "-c", "echo ready; cat; echo cat-done"])
    t.read_until(b"ready")
    t.write(b"typed line\n")
    t.read_until(b"typed line\r\ntyped line")  # local echo, then cat's copy
    t.write(b"\x04")  # ^D: end of input on the local terminal
    t.read_until(b"cat-done")
    assert t.finish() == 0, t.out


@ours_only
def test_ctrl_c_without_tty_leaves_no_remote_process(srv):
    need_client()
    mk = "bb-ctrlc-" + MARKER
    t = Tty(srv, ["run", "--env", "%s=%s" % (MARKER_VAR, mk), "--", "/bin/sh", "-c",
                  "echo ready; exec sleep 300"])
    t.read_until(b"ready")
    assert marked_pids(mk), "the remote command is not running"
    t.write(b"\x03")  # Ctrl-C: SIGINT to the client, forwarded to the remote group
    assert t.finish() == 130, t.out
    assert not wait_gone(mk), "the remote sleep survived Ctrl-C"


@ours_only
def test_sigterm_to_the_client_ends_the_remote_command(srv):
    need_client()
    mk = "bb-term-" + MARKER
    p = subprocess.Popen([CLIENT, "--url", srv.url, "run", "--env",
                          "%s=%s" % (MARKER_VAR, mk), "--", "/bin/sh", "-c",
                          "trap '' TERM; echo ready; sleep 300 & wait"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)  # the remote shell ignores TERM: 2 s grace, then kill
    assert p.wait(30) == 143
    assert not wait_gone(mk), "the remote command outlived the client"


@ours_only
def test_signal_deaths_exit_128_plus_n(srv):
    need_client()
    r = ec(srv, "run", "--tty", "--", "/bin/sh", "-c", "kill -TERM $$", timeout=30)
    assert r.returncode == 143, r
    r = ec(srv, "run", "--", "/bin/sh", "-c", "kill -KILL $$", timeout=30)
    assert r.returncode == 137, r
    t = Tty(srv, ["run", "--tty", "--", "/bin/sh", "-c", "kill -SEGV $$"])
    assert t.finish() == 139, t.out


@ours_only
def test_fs_get_and_put_keep_modes(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-modes-")
    local = os.path.join(d, "tool.sh")
    with open(local, "wb") as f:
        f.write(b"#!/bin/sh\necho tool\n" + os.urandom(5 << 20))  # big: the block path
    os.chmod(local, 0o750)
    remote = os.path.join(d, "remote", "tool.sh")
    assert ec(srv, "fs", "mkdir", "-p", os.path.dirname(remote)).returncode == 0
    r = ec(srv, "fs", "put", local, remote)
    assert r.returncode == 0, r
    assert os.stat(remote).st_mode & 0o7777 == 0o750
    os.chmod(remote, 0o741)
    back = os.path.join(d, "back.sh")
    r = ec(srv, "fs", "get", remote, back)
    assert r.returncode == 0, r
    with open(local, "rb") as f1, open(back, "rb") as f2:
        assert f1.read() == f2.read()
    assert os.stat(back).st_mode & 0o7777 == 0o741
    r = ec(srv, "fs", "ls", "-l", os.path.dirname(remote))
    assert r.returncode == 0 and b"-rwxr----x" in r.stdout and b"tool.sh" in r.stdout, r
    r = ec(srv, "fs", "stat", remote)
    assert b"Mode: 0741 (-rwxr----x)" in r.stdout, r
    r = ec(srv, "fs", "rm", os.path.dirname(remote))
    assert r.returncode == 1 and b"(use -r)" in r.stderr and b"code" not in r.stderr, r
    r = ec(srv, "fs", "cp", os.path.dirname(remote), os.path.join(d, "copy"))
    assert r.returncode == 1 and r.stderr.endswith(b": Is a directory (use -r)\n"), r
    r = ec(srv, "fs", "cat", os.path.join(d, "missing"))
    assert r.returncode == 1 and r.stderr.endswith(b": No such file or directory\n"), r


@needs_own_server
def test_authentication_failure_is_explained(_):
    need_client()
    if IS_REF:
        raise TestSkip("our auth flags")
    d = tempfile.mkdtemp(prefix="ec-auth-")
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write("s3cret-token-for-the-test\n")
    os.chmod(tok, 0o600)  # a secret: the server refuses it open to others
    srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok])
    try:
        r = ec(srv, "run", "--", "true")
        assert r.returncode == 3, r
        assert b"authentication failed" in r.stderr and b"--token" in r.stderr, r
        r = ec(srv, "--token", "s3cret-token-for-the-test", "run", "--", "true")
        assert r.returncode == 0, r
    finally:
        srv.stop()


def test_reconnecting_line_on_a_terminal(srv):
    """A dropped connection shows on the terminal, then the command goes on."""
    need_client()
    px = CutProxy(srv, b"b25lCg==")  # cut right after the chunk "one\n"
    try:
        pid, fd = pty.fork()
        if pid == 0:
            e = dict(os.environ, TERM="xterm")
            e.pop("EXEC_SERVER_URL", None)
            os.execve(CLIENT, [CLIENT, "--url", px.url, "run", "-n", "--", "sh", "-c",
                               "echo one; sleep 1; echo two"], e)
        t = Tty.__new__(Tty)
        t.pid, t.fd, t.out, t.status = pid, fd, b"", None
        t.read_until(b"two")
        assert t.finish() == 0, t.out
        assert b"connection lost; reconnecting..." in t.out and b"reconnected" in t.out, t.out
        assert px.connections == 2, px.connections
    finally:
        px.close()


def test_version(srv):
    need_client()
    r = subprocess.run([CLIENT, "--version"], capture_output=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith(b"exec-client "), r


@needs_own_server
def test_a_finished_call_leaves_no_session(_):
    need_client()
    if IS_REF:
        raise TestSkip("session/close is ours")
    srv = Server(extra_args=["--log-level", "info"])
    try:
        assert ec(srv, "run", "--", "true").returncode == 0
        assert ec(srv, "fs", "ls", "/").returncode == 0
        wait_until(lambda: srv.stderr_text().count("event=session_end") >= 2, DEFAULT_TIMEOUT,
                   "both sessions to end")
    finally:
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
