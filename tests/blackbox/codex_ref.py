#!/usr/bin/env python3
"""The reference server (openai's `codex`, from npm) for the tests and the bench: where
each version lives, finding its binary, and installing it once, under a lock.

Where: 0.169.0 in ~/.cache/codex-ref (its place since the first tests), any other X.Y.Z in
~/.cache/codex-ref-X.Y; the binary is PREFIX/node_modules/@openai/codex-linux-x64/vendor/
*/bin/codex, and PREFIX/node_modules/@openai/codex/package.json names the version. This
file is the one place that knows it (bench/bench.c follows the same rule in C).

    python3 tests/blackbox/codex_ref.py install [VERSION]   # prints the binary's path
    python3 tests/blackbox/codex_ref.py path [VERSION]      # exit 1 when not installed

`install` is what the ctest fixture reference/codex-VERSION runs (CMakeLists.txt), once per
run and before every test that drives that version. Why it is built the way it is:

  * One installer at a time per version: an exclusive flock on PREFIX.lock, taken with a
    deadline. Another ctest (another worktree, the same HOME) waits, then finds it done.
    The wait is a blocking flock (in a thread, as flock has no timeout): it costs
    nothing and ends the moment the lock is let go, not at the next poll.
  * No half-written binary is ever visible: npm installs into a fresh PREFIX.tmp-* beside
    PREFIX, which is renamed into place only once the binary is there. Executing a file
    another process still writes fails with ETXTBSY ("Text file busy"): that was the failure
    on a fresh machine when three tests each ran npm into the same folder under ctest -j.
  * npm's time fits ctest's: the whole install (lock wait included) gets INSTALL_BUDGET
    seconds, under the fixture's 300 s TIMEOUT; npm's own fetch timeout is no longer, and
    npm's process group is killed when the budget is spent.
  * An npm failure is a visible skip naming npm: exit 77 (ctest's "Skipped") with the reason,
    which is also recorded in $EXEC_BUILD_DIR/codex-ref-VERSION.npm-failed. Under ctest
    (EXEC_REF_FIXTURE=1) a test never runs npm itself: require() finds the binary or skips
    with that recorded reason. Run directly, require() installs it.

Standard library only."""

import atexit
import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_VERSION = "0.171.0"
PACKAGE = "@openai/codex"
INSTALL_BUDGET = 270.0  # seconds: lock wait + npm, under the fixture's ctest TIMEOUT (300)
BINARY_GLOB = "node_modules/@openai/codex-linux-x64/vendor/*/bin/codex"
SKIP = 77


class Unavailable(Exception):
    """The reference is not installed and cannot be (the message says why, naming npm)."""


def prefix(version=DEFAULT_VERSION):
    """The npm prefix that holds `version`."""
    if version == "0.169.0":
        return os.path.expanduser("~/.cache/codex-ref")
    return os.path.expanduser("~/.cache/codex-ref-" + ".".join(version.split(".")[:2]))


def _binary_under(root, version):
    """The codex binary under the npm prefix root when it is `version`, else None."""
    try:
        with open(os.path.join(root, "node_modules", PACKAGE, "package.json")) as f:
            if json.load(f).get("version") != version:
                return None
    except (OSError, ValueError):
        return None
    hits = sorted(h for h in glob.glob(os.path.join(root, BINARY_GLOB)) if os.access(h, os.X_OK))
    return hits[0] if hits else None


def find(version=DEFAULT_VERSION):
    """The installed codex binary of `version`, or None. Never runs npm."""
    return _binary_under(prefix(version), version)


def _status_file(version):
    build = os.environ.get("EXEC_BUILD_DIR")
    return os.path.join(build, "codex-ref-%s.npm-failed" % version) if build else None


def require(version=DEFAULT_VERSION):
    """The codex binary of `version`; installs it when run outside ctest. Raises Unavailable."""
    found = find(version)
    if found:
        return found
    if os.environ.get("EXEC_REF_FIXTURE") != "1":
        return install(version)
    status = _status_file(version)
    try:
        with open(status) as f:
            why = f.read().strip()
    except (OSError, TypeError):
        why = ("the ctest fixture reference/codex-%s, which installs it with npm, did not "
               "run or did not finish" % version)
    raise Unavailable("reference codex %s is not installed in %s: %s"
                      % (version, prefix(version), why))


def _lock(path, deadline, budget):
    """An exclusive flock on path, waited for until deadline.

    flock has no timeout of its own, so a thread makes the blocking call: the kernel wakes
    it the moment the holder lets go, and this thread waits on an Event for at most the
    time left. Given up at the deadline, the waiting thread keeps the descriptor and
    closes it once it gets the lock (so the lock is let go at once, and no descriptor
    number is closed under anyone else); it is a daemon, so it never holds up an exit."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    got = threading.Event()
    mu = threading.Lock()
    state = {"abandoned": False, "error": None}

    def take():
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:
            state["error"] = e
        with mu:
            if state["abandoned"]:
                os.close(fd)
            else:
                got.set()

    threading.Thread(target=take, name="codex_ref lock", daemon=True).start()
    got.wait(max(deadline - time.monotonic(), 0))
    with mu:
        if not got.is_set():
            state["abandoned"] = True
            raise Unavailable("another npm install of codex held %s for %.0f s" % (path, budget))
    if state["error"] is not None:
        os.close(fd)
        raise state["error"]
    return fd


def _npm(version, into, deadline, budget):
    """npm install @openai/codex@version --prefix into, bounded by deadline."""
    npm = shutil.which("npm")
    if not npm:
        raise Unavailable("npm is not on PATH (the reference codex comes from npm)")
    left = deadline - time.monotonic()
    cmd = [npm, "install", "--prefix", into, "--no-audit", "--no-fund", "--loglevel=error",
           "--fetch-timeout=%d" % int(left * 1000), "%s@%s" % (PACKAGE, version)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(left, 1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise Unavailable("npm install %s@%s did not finish within %.0f s"
                          % (PACKAGE, version, budget))
    if proc.returncode != 0:
        # npm's first lines say what went wrong (code, syscall, message); then a stack
        lines = [ln.replace("npm error ", "", 1).strip()
                 for ln in out.decode("utf-8", "replace").splitlines()
                 if ln.strip() and not ln.replace("npm error", "", 1).strip().startswith("at ")]
        raise Unavailable("npm install %s@%s failed (exit %d): %s"
                          % (PACKAGE, version, proc.returncode, " / ".join(lines[:4])))


def install(version=DEFAULT_VERSION, budget=INSTALL_BUDGET):
    """Installs `version` unless it is there (see the module's paragraph on why this way);
    returns the binary's path. Raises Unavailable, naming npm, when npm cannot."""
    deadline = time.monotonic() + budget
    root = prefix(version)
    parent = os.path.dirname(root)
    os.makedirs(parent, exist_ok=True)
    lock = _lock(root + ".lock", deadline, budget)
    try:
        found = find(version)
        if found:
            return found
        for stale in glob.glob(root + ".tmp-*") + glob.glob(root + ".old-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a killed install's; we hold the lock
        tmp = tempfile.mkdtemp(prefix=os.path.basename(root) + ".tmp-", dir=parent)
        os.chmod(tmp, 0o755)  # as npm would have made it (mkdtemp's is 0700)
        try:
            _npm(version, tmp, deadline, budget)
            if not _binary_under(tmp, version):
                raise Unavailable("npm installed %s@%s but it holds no codex binary for this "
                                  "platform (%s)" % (PACKAGE, version, BINARY_GLOB))
            if os.path.lexists(root):
                # incomplete or another version: moved aside, never written over
                os.rename(root, tempfile.mkdtemp(prefix=os.path.basename(root) + ".old-",
                                                 dir=parent))
            os.rename(tmp, root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            for old in glob.glob(root + ".old-*"):
                shutil.rmtree(old, ignore_errors=True)
        found = find(version)
        if not found:
            raise Unavailable("codex %s vanished from %s after npm installed it" % (version, root))
        return found
    finally:
        os.close(lock)


def path_under(path, root):
    """Whether path is root or below it (both resolved; path need not exist yet)."""
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def in_temp_dir(path, env=None):
    """Whether path is under the temporary directory ($TMPDIR, and /tmp whatever it says),
    where the reference refuses its helper binaries and a bubblewrap of its own."""
    env = os.environ if env is None else env
    return any(path_under(path, t) for t in {env.get("TMPDIR") or "/tmp", "/tmp"})


_private_home = []  # the CODEX_HOME server_env made for this process, removed at exit


def server_env(env=None):
    """The environment to start a reference exec-server with: `env` (default ours) with a
    CODEX_HOME of its own when the one it would use is under the temporary directory.

    The reference keeps its sandbox helper (a `codex-linux-sandbox` alias of itself, which
    its bubblewrap execs by name) in $CODEX_HOME (default ~/.codex), and refuses to make it
    under the temporary directory: 'Refusing to create helper binaries under temporary dir
    "/tmp"'. Every sandboxed command then fails with `bwrap: execvp codex-linux-sandbox: No
    such file or directory`, e.g. on a fresh machine's `HOME=$(mktemp -d)`. Its home here
    is then a directory under /var/tmp (or the build tree) made once per test process."""
    env = dict(os.environ if env is None else env)
    home = env.get("CODEX_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".codex")
    if not in_temp_dir(home, env):
        return env
    if not _private_home:
        for parent in ("/var/tmp", os.environ.get("EXEC_BUILD_DIR") or os.getcwd()):
            if os.path.isdir(parent) and not in_temp_dir(parent, env):
                made = tempfile.mkdtemp(prefix="codex-ref-home-", dir=parent)
                _private_home.append(made)
                atexit.register(shutil.rmtree, made, True)
                break
        else:
            return env  # nowhere outside the temporary directory: its sandbox will say so
    env["CODEX_HOME"] = _private_home[0]
    return env


def main(argv):
    if len(argv) not in (2, 3) or argv[1] not in ("install", "path"):
        print("usage: codex_ref.py install|path [VERSION]", file=sys.stderr)
        return 2
    version = argv[2] if len(argv) == 3 else DEFAULT_VERSION
    if argv[1] == "path":
        found = find(version)
        if found:
            print(found)
        return 0 if found else 1
    status = _status_file(version)
    if status and os.path.exists(status):
        os.unlink(status)
    try:
        print(install(version))
        return 0
    except Unavailable as e:
        print("SKIP: %s" % e)
        if status:
            with open(status, "w") as f:
                f.write("%s\n" % e)
        return SKIP


if __name__ == "__main__":
    sys.exit(main(sys.argv))
