"""Shared helpers of the remote-mode black-box tests (test_remote_forward.py,
test_remote_direct.py): where the built binaries and the reference codex are, and
stopping a process group within a bound."""
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))
import codex_ref  # noqa: E402  (where the reference codex is installed)


def find_build_file(name):
    """$EXEC_BUILD_DIR/name, else build/asan, build, build/dev; None if not built."""
    bdir = os.environ.get("EXEC_BUILD_DIR")
    cands = [os.path.join(bdir, name)] if bdir else []
    cands += [os.path.join(ROOT, d, name) for d in ("build/asan", "build", "build/dev")]
    for c in cands:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    return None


def our_server():
    """$EXEC_SERVER unless it points at the reference codex, else the built one."""
    p = os.environ.get("EXEC_SERVER")
    if not p or os.path.basename(p) == "codex":
        p = find_build_file("exec-server")
    return p


def reference(version=codex_ref.DEFAULT_VERSION):
    """The reference codex binary of version, or None when it is not installed."""
    return codex_ref.find(version)


def stop_group(proc, timeout=10):
    """SIGTERM to proc's process group (SIGKILL after timeout); returns its exit code
    (None when it had to be killed)."""
    rc = proc.poll()
    if rc is not None:
        return rc
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)
        return None


def skip_reason(server, needle, what):
    """Why a test of `what` cannot run against server (not built, or its --help lacks
    needle), or None."""
    if server is None:
        return "exec-server is not built"
    h = subprocess.run([server, "--help"], capture_output=True, timeout=10)
    if needle.encode() not in h.stdout:
        return "this exec-server has no " + what
    return None


def summary(passed, failed):
    """Prints the counts; the exit status (1 failed, 77 nothing ran, 0 passed)."""
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else (0 if passed else 77)


def run_one(label, fn, *args, on_fail=None):
    """Runs one scenario, printing PASS/FAIL with its time; on_fail() (optional) adds
    context to a failure. Returns (passed, failed) increments."""
    t0 = time.monotonic()
    try:
        fn(*args)
        print("PASS %s (%.2fs)" % (label, time.monotonic() - t0))
        return 1, 0
    except BaseException as e:  # noqa: a failing scenario must not stop the others
        print("FAIL %s: %r%s" % (label, e, ("\n  " + on_fail()) if on_fail else ""))
        return 0, 1


def fs_round_trip(client, remote_dir, what):
    """exec-client `fs put` of 150 KiB (several relay records each way) into remote_dir,
    checked on disk, then `fs cat` back; client(*argv) runs exec-client."""
    data = os.urandom(150 * 1024) + b"tail"
    with tempfile.TemporaryDirectory() as d:
        local = os.path.join(d, "up.bin")
        with open(local, "wb") as f:
            f.write(data)
        remote = os.path.join(remote_dir, "remote.bin")
        r = client("fs", "put", local, remote)
        assert r.returncode == 0, r.stderr
        with open(remote, "rb") as f:
            assert f.read() == data, "the %s's file differs" % what
        r = client("fs", "cat", remote)
        assert r.returncode == 0, r.stderr
        assert r.stdout == data, "read back %d bytes, want %d" % (len(r.stdout), len(data))
