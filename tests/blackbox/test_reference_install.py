#!/usr/bin/env python3
"""tests/blackbox/codex_ref.py, the reference's installer, against a fake npm (no network):
concurrent installs run npm once and never show a binary still being written; a failing
npm is a skip that names npm and is recorded for the tests behind the ctest fixture; a
hanging npm is killed within the budget; another version in the prefix is replaced.

The fake npm (written here, put first on PATH) installs the layout npm does, writing the
binary slowly and holding it open for writing the while, as npm does a 300 MB one: whoever
executes it then gets ETXTBSY. The first test also runs it the old way (npm straight into
the prefix) to show that the watcher does catch that."""
import errno
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
import codex_ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "codex_ref.py")
VERSION = "0.169.0"

FAKE_NPM = r'''#!/usr/bin/env python3
import json, os, signal, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_NPM_LOG"], "a") as f:
    f.write(" ".join(args) + "\n")
mode = os.environ.get("FAKE_NPM_MODE", "ok")
if mode == "fail":
    print("npm error code E404\nnpm error 404 Not Found - GET https://registry/@openai%2fcodex")
    print("npm error     at somewhere (/usr/lib/node_modules/npm/x.js:1:1)")
    sys.exit(1)
if mode == "hang":
    if os.fork() == 0:
        os.execvp("sleep", [sys.argv[0] + "-child", "600"])  # killed with npm's group
    signal.pause()  # hangs until npm's group is killed
prefix = args[args.index("--prefix") + 1]
version = args[-1].rsplit("@", 1)[1]
pkg = os.path.join(prefix, "node_modules", "@openai", "codex")
os.makedirs(pkg, exist_ok=True)
with open(os.path.join(pkg, "package.json"), "w") as f:
    json.dump({"name": "@openai/codex", "version": version}, f)
bindir = os.path.join(prefix, "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin")
os.makedirs(bindir, exist_ok=True)
with open(os.path.join(bindir, "codex"), "w") as f:
    f.write("#!/bin/sh\necho fake-codex %s\n" % version)
    f.flush()
    os.chmod(f.name, 0o755)
    for i in range(40):  # the rest of a big binary, slowly, the file open for writing
        f.write("# %d\n" % i)
        f.flush()
        time.sleep(0.05)
'''


class Sandbox:
    """A HOME of its own and the fake npm first on PATH (for this process and its children)."""

    def __init__(self, mode="ok"):
        self.dir = tempfile.mkdtemp(prefix="refinst-")
        self.home = os.path.join(self.dir, "home")
        self.bin = os.path.join(self.dir, "bin")
        self.build = os.path.join(self.dir, "build")
        for d in (self.home, self.bin, self.build):
            os.mkdir(d)
        npm = os.path.join(self.bin, "npm")
        with open(npm, "w") as f:
            f.write(FAKE_NPM)
        os.chmod(npm, 0o755)
        self.log = os.path.join(self.dir, "npm.log")
        open(self.log, "w").close()
        self.saved = dict(os.environ)
        os.environ.update(HOME=self.home, PATH=self.bin + ":" + os.environ["PATH"],
                          FAKE_NPM_LOG=self.log, FAKE_NPM_MODE=mode, EXEC_BUILD_DIR=self.build)
        os.environ.pop("EXEC_REF_FIXTURE", None)

    def npm_runs(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def close(self):
        os.environ.clear()
        os.environ.update(self.saved)
        shutil.rmtree(self.dir, ignore_errors=True)


class Watcher(threading.Thread):
    """Executes whatever `locate()` returns, as often as it can, until stopped: what a test
    that finds the reference while it is being installed does. Records each outcome."""

    def __init__(self, locate):
        super().__init__(daemon=True)
        self.locate = locate
        self.stop = threading.Event()
        self.busy = 0       # ETXTBSY: the file was still open for writing
        self.ran = []       # what the binary printed
        self.other = []

    def run(self):
        while not self.stop.is_set():
            path = self.locate()
            if path:
                try:
                    out = subprocess.run([path], capture_output=True, timeout=10)
                    self.ran.append(out.stdout.decode().strip())
                except OSError as e:
                    if e.errno == errno.ETXTBSY:
                        self.busy += 1
                    else:
                        self.other.append(repr(e))
            self.stop.wait(0.005)

    def finish(self):
        self.stop.set()
        self.join(10)


def test_concurrent_installs_run_npm_once_and_hide_the_partial_binary(_):
    sb = Sandbox()
    try:
        # The old way first: npm straight into the prefix while a test finds and runs it.
        root = codex_ref.prefix(VERSION)
        w = Watcher(lambda: next(iter(glob.glob(os.path.join(root, codex_ref.BINARY_GLOB))),
                                 None))
        w.start()
        subprocess.run(["npm", "install", "--prefix", root, "@openai/codex@" + VERSION],
                       check=True, timeout=60)
        w.finish()
        assert w.busy > 0, "the watcher never caught the half-written binary (%d runs)" % len(
            w.ran)
        shutil.rmtree(root)
        open(sb.log, "w").close()

        # Now three installers at once, as three tests under ctest -j did.
        w = Watcher(lambda: codex_ref.find(VERSION))
        w.start()
        procs = [subprocess.Popen([sys.executable, TOOL, "install", VERSION],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for _ in range(3)]
        outs = [p.communicate(timeout=60)[0].decode().strip() for p in procs]
        wait_until(lambda: w.ran, what="the installed binary to run")
        w.finish()
        assert [p.returncode for p in procs] == [0, 0, 0], outs
        assert len(set(outs)) == 1 and outs[0] == codex_ref.find(VERSION), outs
        assert outs[0].startswith(root + "/"), outs
        assert len(sb.npm_runs()) == 1, sb.npm_runs()
        assert w.busy == 0 and not w.other, (w.busy, w.other)
        assert set(w.ran) == {"fake-codex " + VERSION}, set(w.ran)
        assert not glob.glob(root + ".tmp-*") and not glob.glob(root + ".old-*")
        assert oct(os.stat(root).st_mode & 0o777) == "0o755", oct(os.stat(root).st_mode)
    finally:
        sb.close()


def test_npm_failure_is_a_skip_naming_npm(_):
    sb = Sandbox(mode="fail")
    try:
        p = subprocess.run([sys.executable, TOOL, "install", VERSION], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == SKIP, (p.returncode, p.stdout, p.stderr)
        assert p.stdout.startswith("SKIP: npm install @openai/codex@%s failed (exit 1): "
                                   "code E404 / 404 Not Found" % VERSION), p.stdout
        assert " at somewhere" not in p.stdout, p.stdout  # npm's stack is left out
        status = os.path.join(sb.build, "codex-ref-%s.npm-failed" % VERSION)
        with open(status) as f:
            recorded = f.read().strip()
        assert recorded in p.stdout, (recorded, p.stdout)
        # behind the fixture, a test skips with the recorded reason and runs no npm
        os.environ["EXEC_REF_FIXTURE"] = "1"
        try:
            require_reference(VERSION)
            raise AssertionError("require_reference found a reference npm did not install")
        except TestSkip as e:
            assert "is not installed" in str(e) and recorded in str(e), str(e)
        assert len(sb.npm_runs()) == 1, sb.npm_runs()
        # a later successful run clears the record
        os.environ["FAKE_NPM_MODE"] = "ok"
        p = subprocess.run([sys.executable, TOOL, "install", VERSION], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0 and not os.path.exists(status), (p.stdout, p.stderr)
    finally:
        sb.close()


def test_no_npm_is_a_skip_naming_npm(_):
    sb = Sandbox()
    try:
        os.environ["PATH"] = sb.bin
        os.unlink(os.path.join(sb.bin, "npm"))
        try:
            codex_ref.install(VERSION)
            raise AssertionError("install succeeded without npm")
        except codex_ref.Unavailable as e:
            assert "npm is not on PATH" in str(e), str(e)
    finally:
        sb.close()


def test_hanging_npm_is_killed_within_the_budget(_):
    sb = Sandbox(mode="hang")
    try:
        t0 = time.monotonic()
        try:
            codex_ref.install(VERSION, budget=2)
            raise AssertionError("install succeeded with an npm that hangs")
        except codex_ref.Unavailable as e:
            assert "npm install @openai/codex@%s did not finish within 2 s" % VERSION in str(e), e
        assert time.monotonic() - t0 < 2 + 5 * TIMEOUT_SCALE, time.monotonic() - t0
        left = subprocess.run(["pgrep", "-af", sb.bin], capture_output=True, text=True).stdout
        assert not left, "npm or its child outlived the budget: %s" % left
        root = codex_ref.prefix(VERSION)
        assert not os.path.exists(root) and not glob.glob(root + ".tmp-*"), os.listdir(
            os.path.dirname(root))
    finally:
        sb.close()


def test_another_version_in_the_prefix_is_replaced(_):
    sb = Sandbox()
    try:
        root = codex_ref.prefix(VERSION)
        old = os.path.join(root, "node_modules", "@openai", "codex")
        os.makedirs(old)
        with open(os.path.join(old, "package.json"), "w") as f:
            f.write('{"version": "0.168.0"}')
        assert codex_ref.find(VERSION) is None
        path = codex_ref.install(VERSION)
        assert subprocess.run([path], capture_output=True, text=True).stdout.strip() == \
            "fake-codex " + VERSION
        assert codex_ref.prefix("0.171.0").endswith("/.cache/codex-ref-0.171")
        assert not glob.glob(root + ".old-*"), os.listdir(os.path.dirname(root))
    finally:
        sb.close()


def blocked_on_lock(path, pid):
    """Whether pid waits in the kernel for a flock on path (/proc/locks lists a blocked
    waiter as "N: -> FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...")."""
    ino = os.stat(path).st_ino
    with open("/proc/locks") as f:
        for line in f:
            w = line.split()
            if len(w) > 5 and w[1] == "->" and w[2] == "FLOCK" and int(w[5]) == pid \
                    and int(w[6].rsplit(":", 1)[1]) == ino:
                return True
    return False


def test_lock_is_waited_for_in_flock(_):
    """The installer waits for another's lock in flock itself, blocked in the kernel (which
    wakes it when the lock is let go) rather than polling: a second installer is listed as
    a blocked waiter in /proc/locks, runs no npm while the lock is held, and installs once it
    is let go. A lock held past the budget is a skip that names the lock."""
    sb = Sandbox()
    try:
        root = codex_ref.prefix(VERSION)
        os.makedirs(os.path.dirname(root), exist_ok=True)
        holder = os.open(root + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(holder, fcntl.LOCK_EX)
        try:
            codex_ref.install(VERSION, budget=1)
            raise AssertionError("install went on while another held the lock")
        except codex_ref.Unavailable as e:
            assert "another npm install of codex held %s.lock for 1 s" % root in str(e), e
        proc = subprocess.Popen([sys.executable, TOOL, "install", VERSION],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: blocked_on_lock(root + ".lock", proc.pid), 20,
                       "the second installer to wait in flock")
            assert proc.poll() is None and sb.npm_runs() == [], sb.npm_runs()
        finally:
            os.close(holder)
        out = proc.communicate(timeout=60)[0].decode().strip()
        assert proc.returncode == 0 and out == codex_ref.find(VERSION), out
        assert len(sb.npm_runs()) == 1, sb.npm_runs()
    finally:
        sb.close()


for _name, _fn in list(globals().items()):
    if _name.startswith("test_"):
        _fn.own_server = True

if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=120)
