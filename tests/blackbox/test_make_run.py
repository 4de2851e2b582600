#!/usr/bin/env python3
"""`make run` shows a newcomer the server's URL and nothing else: the Makefile's own
target, run in a small CMake project of the same shape (its scripts/, an `exec-server`
that prints a URL), so the test takes seconds instead of a release build. Not on a
terminal: the URL is the only output. On one: a progress line rewritten in place and
erased before the URL. A build that fails shows the compiler's error and fails."""
import os
import pty
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import read_to_eof  # noqa

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
URL = "ws://127.0.0.1:45678"


def project(broken=False):
    d = tempfile.mkdtemp(prefix="execbb-make-run-")
    os.mkdir(os.path.join(d, "scripts"))
    shutil.copy(os.path.join(ROOT, "scripts", "quiet-build.sh"), os.path.join(d, "scripts"))
    with open(os.path.join(d, "scripts", "install-deps.sh"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(d, "scripts", "install-deps.sh"), 0o755)
    parts = []
    for i in range(12):  # a dozen objects: a dozen "[N/M] Building" lines to hide
        with open(os.path.join(d, "p%d.c" % i), "w") as f:
            f.write("int p%d(void) { return %d; }\n" % (i, i))
        parts.append("p%d.c" % i)
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write('#include <stdio.h>\nint main(void) { %s puts("%s"); return 0; }\n'
                % ("this is not C;" if broken else "", URL))
    with open(os.path.join(d, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.13)\nproject(fake C)\n"
                "add_executable(exec-server main.c %s)\n" % " ".join(parts))
    return d


def make_run(d):
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(k, None)
    return subprocess.run(["make", "-f", os.path.join(ROOT, "Makefile"), "run"], cwd=d, env=env,
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL)


def need_tools():
    for tool in ("make", "cmake", "ninja", "cc"):
        if shutil.which(tool) is None:
            raise TestSkip("%s is not installed" % tool)


@ours_only
def test_the_url_is_all_it_prints(_srv):
    need_tools()
    d = project()
    try:
        r = make_run(d)
        assert r.returncode == 0, r
        assert (r.stdout, r.stderr) == ((URL + "\n").encode(), b""), r
        with open(os.path.join(d, "build", "build.log")) as f:
            assert "Building C object" in f.read()  # the build's output is kept
    finally:
        shutil.rmtree(d)


@ours_only
def test_progress_on_a_terminal_then_the_url(_srv):
    need_tools()
    d = project()
    try:
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(d)
            for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
                os.environ.pop(k, None)
            os.execvp("make", ["make", "-f", os.path.join(ROOT, "Makefile"), "run"])
        out = read_to_eof(fd, 300)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        assert os.waitstatus_to_exitcode(status) == 0, out
        assert b"\rbuilding exec-server [" in out, out
        assert out.endswith(b"\r\x1b[K" + URL.encode() + b"\r\n"), out
        assert b"Building C object" not in out and out.count(b"\n") == 1, out
    finally:
        shutil.rmtree(d)


@ours_only
def test_a_failed_build_shows_its_error(_srv):
    need_tools()
    d = project(broken=True)
    try:
        r = make_run(d)
        assert r.returncode != 0 and r.stdout == b"", r
        assert b"FAILED: " in r.stderr and b"main.c" in r.stderr, r
        assert b"make run: the build failed" in r.stderr, r
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    run_tests(globals())
