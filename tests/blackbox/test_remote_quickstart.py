#!/usr/bin/env python3
"""docs/REMOTE_QUICKSTART.md, run as written: its shell blocks are taken from the page
and run by bash in a scratch directory, with `./build/` the build under test and port
8800 a free one (the only two changes). The tokens are made once (files of their owner
alone); the registry (command 1), the executor (2) and a harness command (3) give the
command's output; then a shell through the relay (4) lives through a registry restart
(SIGINT, as Ctrl-C, and command 1 again) and goes on where it was, within the client's
--reconnect-ms; the executor says it was offline and is back; `registry environments`,
as the page gives it, lists the environment online."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import remote_testlib  # noqa: E402

PAGE = os.path.join(HERE, "..", "..", "docs", "REMOTE_QUICKSTART.md")
SERVER = remote_testlib.our_server()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    """The page's shell blocks and commands, made to run here."""

    def __init__(self, build, port):
        text = open(PAGE).read()
        self.text = text.replace("./build/", build + "/").replace("127.0.0.1:8800",
                                                                  "127.0.0.1:%d" % port)
        self.blocks = re.findall(r"```sh\n(.*?)```", self.text, re.S)
        assert len(self.blocks) == 3, "the page's shell blocks changed: %d" % len(self.blocks)

    def command(self, n):
        """Command `# n.` of the page (its comment lines dropped)."""
        for block in self.blocks[1:]:
            parts = re.split(r"^# (\d+)\. .*\n(?:#.*\n)*", block, flags=re.M)
            for i in range(1, len(parts), 2):
                if int(parts[i]) == n:
                    return parts[i + 1].strip()
        raise AssertionError("no command %d on the page" % n)

    def inline(self, prefix):
        m = re.search(r"`(%s[^`]*)`" % re.escape(prefix), self.text)
        assert m, "no `%s...` on the page" % prefix
        return m.group(1)


def start(cmd, cwd, log, stdin=subprocess.DEVNULL):
    return subprocess.Popen(["bash", "-c", "exec " + cmd], cwd=cwd, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=open(log, "wb"))


def read_until(f, needle, timeout, got=b""):
    deadline = time.monotonic() + timeout
    while needle not in got:
        left = deadline - time.monotonic()
        assert left > 0, "no %r in time; got %r" % (needle, got[-2000:])
        r, _, _ = select.select([f], [], [], left)
        if r:
            chunk = os.read(f.fileno(), 65536)
            assert chunk, "ended before %r; got %r" % (needle, got[-2000:])
            got += chunk
    return got


def log_has(path, text, timeout):
    wait_until(lambda: text in open(path, errors="replace").read(), timeout,
               "%r in %s" % (text, os.path.basename(path)))


def stop(p):
    if p and p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


@ours_only
@needs_own_server
def test_quickstart_as_written(_):
    why = remote_testlib.skip_reason(SERVER, "registry", "registry")
    if why:
        raise TestSkip(why)
    build = os.path.dirname(os.path.abspath(SERVER))
    if not os.access(os.path.join(build, "exec-client"), os.X_OK):
        raise TestSkip("exec-client is not built beside exec-server")
    d = tempfile.mkdtemp(prefix="execbb-quickstart-")
    page = Page(build, free_port())
    procs = {}
    try:
        # once: the database and the two tokens, files of their owner alone
        r = subprocess.run(["bash", "-c", page.blocks[0]], cwd=d, capture_output=True,
                           timeout=120)
        assert r.returncode == 0, r
        for t in ("executor.token", "harness.token"):
            st = os.stat(os.path.join(d, t))
            assert st.st_mode & 0o077 == 0 and st.st_size > 16, (t, oct(st.st_mode))
        # 1, 2, 3
        reg_log, ex_log = os.path.join(d, "registry.log"), os.path.join(d, "executor.log")
        procs["registry"] = start(page.command(1), d, reg_log)
        url = read_until(procs["registry"].stdout, b"\n", 30).decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        procs["executor"] = start(page.command(2), d, ex_log)
        log_has(ex_log, "remote: registered environment dev with %s and connected" % url, 30)
        r = subprocess.run(["bash", "-c", page.command(3)], cwd=d, capture_output=True,
                           timeout=120)
        assert r.returncode == 0 and b"hello from " in r.stdout, r
        # 4: a shell through the relay lives through a registry restart
        shell = start(page.command(4), d, os.path.join(d, "shell.log"), stdin=subprocess.PIPE)
        procs["shell"] = shell
        shell.stdin.write(b"echo before-$((1+1))\n")
        shell.stdin.flush()
        got = read_until(shell.stdout, b"before-2", 60)
        stop(procs.pop("registry"))
        procs["registry"] = start(page.command(1), d, reg_log + "2")
        read_until(procs["registry"].stdout, b"\n", 30)
        shell.stdin.write(b"echo after-$((2+2))\nexit 3\n")
        shell.stdin.flush()
        got = read_until(shell.stdout, b"after-4", 60, got)
        shell.stdin.close()
        assert shell.wait(60) == 3, open(os.path.join(d, "shell.log")).read()
        log_has(ex_log, "remote: lost the rendezvous", 10)
        log_has(ex_log, "remote: reconnected to the rendezvous", 10)
        envs = page.inline(build + "/exec-server registry environments")
        r = subprocess.run(["bash", "-c", envs], cwd=d, capture_output=True, timeout=60)
        assert r.returncode == 0 and re.search(rb"^dev\s+yes\s", r.stdout, re.M), r
    finally:
        for p in procs.values():
            stop(p)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals())
