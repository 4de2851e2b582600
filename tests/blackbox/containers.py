"""Where the server under test runs: on the host, or inside one of the places agents run
it (EXEC_SERVER_CONTAINER=NAME, read by harness.Server):

  podman          a rootful podman container: runc, podman's default seccomp profile and
                  capabilities, its own PID, mount, UTS and IPC namespaces, the host's
                  network. No image is pulled: the host's / is the container's root as an
                  overlay (`--rootfs /:O`), with /tmp, /var/tmp, /dev/shm and the checkout
                  (and a build tree outside it) bound in, so both sides see one file system
                  where the tests work. An init (catatonit, `--init`) is the container's
                  pid 1 and the server one of its processes, as in a dev container.
  docker-seccomp  the same container under Docker's (and Kubernetes' RuntimeDefault)
                  seccomp rules, made at run time from podman's own default profile as
                  Docker makes its default (docker_profile): no unshare, setns or mount
                  calls, clone only without CLONE_NEW* flags, clone3 ENOSYS.
  no-userns       bubblewrap with user namespaces disabled (`--disable-userns`): as root
                  the server keeps every capability of bubblewrap's user namespace and can
                  still make namespaces other than a user one; as another uid it can make
                  none.

Each is a command prefix (wrap); available() says whether it can start anything here, and
the suites skip (77) naming the cause only when it cannot. From the host, find_server()
finds the server's own process (by a mark in its environment: inside podman it is a
grandchild of conmon in another PID namespace), ns_pid() gives its number where it runs
(what a command it starts would call it), and Beside starts a process in its namespaces
(a neighbour in the same container).

Run as a program (`python3 tests/blackbox/containers.py --help`), it runs the sandbox
suites in every place, ours and the reference, as root and as uid 65534, and prints a
table of every test's result in each.

podman here: crun refuses this machine's hybrid cgroup layout, hence runc; and root lacks
CAP_SYS_RESOURCE, so the container's limits must not exceed podman's own (see
podman_ulimits)."""

import atexit
import errno
import glob
import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

ENV_VAR = "EXEC_SERVER_CONTAINER"
KINDS = ("podman", "docker-seccomp", "no-userns")
MARK_VAR = "EXECBB_SERVER_MARK"  # in the wrapper's environment, so in the server's
PODMAN_PROFILE = "/usr/share/containers/seccomp.json"  # Debian's containers-common
START_ALLOWANCE = 60  # seconds a container may take to start, on top of the server's own
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = ("/tmp", "/var/tmp", "/dev/shm")

# Variables podman adds to the environment it hands on (--env-host) when the caller has
# none: its own TMPDIR=/var/tmp (where it copies images) made the reference refuse to
# make its helper aliases under a home in /var/tmp, and HOSTNAME.
PODMAN_ADDS = ("TMPDIR", "HOSTNAME")

# Processes of the container machinery that carry the mark but are not the server.
MACHINERY = ("podman", "conmon", "podman-init", "catatonit", "bwrap")

# Podman 4.3, rootful, sets its own RLIMIT_NPROC to 32768 (hard and soft) as it starts
# (seen with strace: setrlimit(RLIMIT_NPROC, 32768) before it parses its arguments), so
# runc, its grandchild, can set the container's limit at or below that only: a higher
# --ulimit nproc fails with "error setting rlimit type 6: operation not permitted"
# without CAP_SYS_RESOURCE, whatever the caller's own hard limit is.
PODMAN_NPROC_CEILING = 32768

# Docker's default seccomp profile: these fail with EPERM for a container without
# CAP_SYS_ADMIN (the default); clone passes only without a namespace flag, and clone3,
# whose flags a filter cannot read, answers ENOSYS so that libc falls back to clone.
DOCKER_DENIED = ("unshare", "setns", "mount", "umount", "umount2", "pivot_root", "open_tree",
                 "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET


def selected():
    """The container kind the environment asks for (EXEC_SERVER_CONTAINER), or None for
    the host. An unknown name is an error, not a skip."""
    name = os.environ.get(ENV_VAR, "")
    if not name or name == "host":
        return None
    if name not in KINDS:
        raise SystemExit("%s=%s: not one of %s" % (ENV_VAR, name, ", ".join(KINDS)))
    return name


def as_user(user):
    """The prefix that runs a command as user (uid, gid), groups cleared; [] for None."""
    if user is None:
        return []
    return ["setpriv", "--reuid=%d" % user[0], "--regid=%d" % user[1], "--clear-groups", "--"]


def podman_ulimits():
    """--ulimit values runc can set: the caller's hard limits (root lacks
    CAP_SYS_RESOURCE to raise them; podman's default for a rootful container, 1048576,
    fails here), nproc at most podman's own (PODMAN_NPROC_CEILING)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if nproc == resource.RLIM_INFINITY or nproc > PODMAN_NPROC_CEILING:
        nproc = PODMAN_NPROC_CEILING
    if nofile == resource.RLIM_INFINITY:
        nofile = 1 << 20
    return ["--ulimit", "nofile=%d:%d" % (nofile, nofile),
            "--ulimit", "nproc=%d:%d" % (nproc, nproc)]


def shared_dirs(extra=()):
    """The directories bound into a podman container at the same path: the scratch
    directories, the checkout, and each of `extra` (a build tree, a server binary's
    directory) not already inside one of them."""
    out = []
    for d in list(SHARED) + [REPO] + [os.path.realpath(e) for e in extra if e]:
        if os.path.isdir(d) and not any(d == o or d.startswith(o + "/") for o in out):
            out.append(d)
    return out


_profile = []


def docker_profile_path():
    """A seccomp profile file with Docker's default rules (docker_profile), written once
    per process under the temporary directory and removed at exit."""
    if not _profile:
        fd, path = tempfile.mkstemp(prefix="execbb-docker-seccomp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(docker_profile(), f)
        atexit.register(os.unlink, path)
        _profile.append(path)
    return _profile[0]


def docker_profile(src=PODMAN_PROFILE):
    """Podman's default profile made into Docker's: the namespace and mount calls taken
    out of every rule and denied with EPERM, clone allowed only with no CLONE_NEW* flag,
    clone3 answered ENOSYS, and (as Docker's) EPERM for every call no rule names, where
    podman answers ENOSYS. Everything else is podman's."""
    with open(src) as f:
        prof = json.load(f)
    taken = set(DOCKER_DENIED) | {"clone", "clone3"}
    rules = []
    for rule in prof["syscalls"]:
        names = [n for n in rule["names"] if n not in taken]
        if names:
            rules.append(dict(rule, names=names))
    rules += [
        {"names": list(DOCKER_DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
        # OCI's MASKED_EQ: (argument & value) == valueTwo
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": CLONE_NEW_FLAGS, "valueTwo": 0,
                   "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
    ]
    prof["syscalls"] = rules
    prof["defaultErrnoRet"] = errno.EPERM
    if "defaultErrno" in prof:  # podman's own spelling, which it reads first
        prof["defaultErrno"] = "EPERM"
    return prof


def container_name(name):
    return "execbb-" + name[:12]


def prefix(kind, cwd, shares=(), name=None):
    """The command prefix that runs a command in a fresh place of `kind`, in directory
    cwd (which must be on a shared path); a podman container is named for `name`."""
    if kind == "no-userns":
        # (bubblewrap does not pass signals on: the server goes with it, not after it)
        return ["bwrap", "--unshare-user", "--disable-userns", "--dev-bind", "/", "/",
                "--proc", "/proc", "--chdir", cwd, "--die-with-parent", "--"]
    cmd = ["podman", "--runtime", "runc", "run", "--rm", "-i", "--init", "--env-host",
           "--network", "host", "--name", container_name(name or uuid.uuid4().hex)]
    cmd += podman_ulimits()
    for d in shared_dirs(shares):
        cmd += ["-v", "%s:%s" % (d, d)]
    if kind == "docker-seccomp":
        cmd += ["--security-opt", "seccomp=" + docker_profile_path()]
    cmd += ["-w", cwd, "--rootfs", "/:O"]
    unset = [v for v in PODMAN_ADDS if v not in os.environ]
    if unset:  # (env execs the command: it is the container's process still)
        cmd += ["env"] + ["--unset=" + v for v in unset]
    return cmd


def wrap(kind, argv, cwd, user=None, shares=(), name=None):
    """argv run in `kind` (None: on the host) as user (uid, gid) or as the caller. The
    user is switched inside a podman container (podman itself must run as root) and
    outside bubblewrap (whose user namespace maps only its caller's uid)."""
    if kind is None:
        return as_user(user) + list(argv)
    if kind == "no-userns":
        return as_user(user) + prefix(kind, cwd, shares, name) + list(argv)
    return prefix(kind, cwd, shares, name) + as_user(user) + list(argv)


def discard(kind, name):
    """Removes a podman container named for `name` that is still there (its client was
    killed before the container started, say); nothing else of `kind` outlives its
    command."""
    if kind in ("podman", "docker-seccomp"):
        subprocess.run(["podman", "rm", "--force", "--time", "0", container_name(name)],
                       capture_output=True, timeout=60)


def missing_tools(kind):
    need = ("bwrap",) if kind == "no-userns" else ("podman", "runc", "catatonit")
    return [t for t in need if shutil.which(t) is None and
            not os.path.exists("/usr/libexec/podman/" + t)]


_checked = {}


def available(kind, user=None):
    """None when a trivial command runs in `kind` as user; otherwise why not (a tool
    missing, or the container refused to start, with its own message)."""
    key = (kind, user)
    if key not in _checked:
        gone = missing_tools(kind)
        if gone:
            _checked[key] = "%s is not installed (scripts/install-deps.sh)" % ", ".join(gone)
        else:
            if kind == "docker-seccomp" and not os.path.exists(PODMAN_PROFILE):
                _checked[key] = "%s is missing (containers-common)" % PODMAN_PROFILE
                return _checked[key]
            try:
                r = subprocess.run(wrap(kind, ["true"], "/tmp", user), capture_output=True,
                                   stdin=subprocess.DEVNULL, timeout=120)
                _checked[key] = None if r.returncode == 0 else (
                    "%s cannot start a container here: exit %d: %s" % (
                        kind, r.returncode, r.stderr.decode(errors="replace").strip()[-400:]))
            except subprocess.TimeoutExpired:
                _checked[key] = "%s did not start a container within 120 s" % kind
    return _checked[key]


def require(kind, user=None):
    """Exit 77 (skipped) saying why when `kind` cannot start anything here."""
    why = available(kind, user)
    if why:
        print("SKIP: " + why)
        raise SystemExit(77)


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def proc_stat(pid):
    """(comm, state, ppid, start time) of pid from /proc/PID/stat; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    return s[s.find("(") + 1:s.rfind(")")], rest[0], int(rest[1]), int(rest[19])


def _descendants(pid):
    """pid's descendants, children first (/proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        for t in glob.glob("/proc/%d/task/*/children" % p):
            try:
                kids = [int(k) for k in open(t).read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _read_line(fd, timeout):
    """The first line written to the pipe fd (without waiting past timeout seconds), or
    what came before its writers closed it."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").split("\n", 1)[0]


def marked(var, value):
    """{pid: (comm, ppid, start time)} of the live processes whose environment has
    var=value."""
    needle = ("%s=%s" % (var, value)).encode()
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        env = _environ(int(d))
        if env and needle in env:
            st = proc_stat(int(d))
            if st and st[1] not in ("Z", "X"):
                out[int(d)] = (st[0], st[2], st[3])
    return out


def find_server(mark):
    """The host pid of the server started with MARK_VAR=mark: the first started of the
    outermost marked processes that are not container machinery (setpriv and env exec
    the server, so they are it; its helpers are its children, or, forked twice like our
    guardian, orphans started after it). None while there is none."""
    procs = marked(MARK_VAR, mark)
    cands = {p: v for p, v in procs.items() if v[0] not in MACHINERY}
    top = sorted((v[2], p) for p, v in cands.items() if v[1] not in cands)
    return top[0][1] if top else None


def ns_pid(pid):
    """pid's number in its own PID namespace (the last NSpid of /proc/PID/status): what
    a process beside it, or started by it without a PID namespace, calls it."""
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^NSpid:\s*(.*)$", f.read(), re.M)
    return int(m.group(1).split()[-1]) if m else pid


class Beside:
    """A process started in every namespace of the process host_pid (nsenter: in its
    container, beside it), as user (uid, gid) or root, with environment env. It says it is
    up by writing its pid, as its namespace numbers it, on its standard output (a pipe to
    us, then /dev/null): argv is wrapped to do so before it execs; a command that makes the
    process to keep as a child of its own (announces=True) writes that child's pid itself.
    pid is its number there, which is what the server and the commands it starts see;
    host_pid the host's; poll, kill and wait are Popen's."""

    ANNOUNCE = "echo $$; exec >/dev/null"

    def __init__(self, host_pid, argv, env, user=None, timeout=30, announces=False):
        r, w = os.pipe()
        if not announces:
            argv = ["/bin/sh", "-c", self.ANNOUNCE + '; exec "$@"', "sh"] + list(argv)
        # nsenter switches the user itself: in a user namespace (bubblewrap's) that maps
        # only the server's uid, root is not there to run setpriv
        ids = ["-S", str(user[0]), "-G", str(user[1])] if user else []
        self.nsenter = subprocess.Popen(["nsenter", "--target", str(host_pid), "--all"] +
                                        ids + ["--"] + list(argv), env=env,
                                        stdin=subprocess.DEVNULL, stdout=w)
        os.close(w)
        try:
            line = _read_line(r, timeout)  # EOF at once if nsenter or the command failed
        finally:
            os.close(r)
        if not line.strip().isdigit():
            raise AssertionError("%s did not start beside pid %d (nsenter exit %s)"
                                 % (argv, host_pid, self.nsenter.poll()))
        self.pid = int(line)
        # among nsenter's descendants (not by its environment, which reads as empty while
        # the announced process execs)
        self.host_pid = next(p for p in _descendants(self.nsenter.pid) if ns_pid(p) == self.pid)

    def poll(self):
        return self.nsenter.poll()

    def kill(self):
        # nsenter waits for the process it forked and does not pass SIGKILL on
        try:
            os.kill(self.host_pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.nsenter.wait(10)
        except subprocess.TimeoutExpired:
            self.nsenter.kill()

    def wait(self, timeout=None):
        return self.nsenter.wait(timeout)


# ---------------------------------------------------------------------------------------
# By hand: the suites in every place, ours and the reference, and a table of the results
# ---------------------------------------------------------------------------------------

SUITES = ("test_sandbox", "test_sandbox_escape")
RESULT = re.compile(r"^(PASS|FAIL|SKIP) (test_\w+)")


def run_matrix(kinds, servers, users, suites, server_path, build_dir, log_dir):
    """Runs each suite for each (kind, server, user) as ctest would (the escape suite
    alone takes the user: ESCAPE_USER); returns [(combination, seconds, exit status,
    {test: PASS|FAIL|SKIP})] and leaves each run's output in log_dir."""
    out = []
    for suite in suites:
        for kind in kinds:
            for server in servers:
                for user in (users if suite == "test_sandbox_escape" else ["root"]):
                    name = "%s.%s.%s.%s" % (suite, kind, server, user)
                    env = dict(os.environ, EXEC_SERVER_CONTAINER=kind, ESCAPE_USER=user,
                               EXEC_BUILD_DIR=build_dir,
                               EXEC_SERVER="ref" if server == "ref" else server_path)
                    t0 = time.monotonic()
                    with open(os.path.join(log_dir, name + ".log"), "w") as log:
                        rc = subprocess.run(["python3", os.path.join(HERE, suite + ".py")],
                                            env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL).returncode
                    took = time.monotonic() - t0
                    with open(os.path.join(log_dir, name + ".log")) as log:
                        res = dict(reversed(m.groups()) for m in map(RESULT.match, log) if m)
                    out.append((name, took, rc, res))
                    print("%-60s %6.0f s  exit %d" % (name, took, rc), flush=True)
    return out


def print_table(runs):
    """One markdown table per suite: a row per test, a column per place."""
    for suite in SUITES:
        cols = [r for r in runs if r[0].startswith(suite + ".")]
        if not cols:
            continue
        tests = []
        for _, _, _, res in cols:
            tests += [t for t in res if t not in tests]
        print("\n| %s | %s |" % (suite, " | ".join(c[0].split(".", 1)[1] for c in cols)))
        print("|---|%s" % ("---|" * len(cols)))
        for t in tests:
            print("| %s | %s |" % (t, " | ".join(c[3].get(t, "-") for c in cols)))
        print("| (seconds) | %s |" % " | ".join("%.0f" % c[1] for c in cols))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="the sandbox suites inside containers, by hand")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated places (host too); default: %(default)s")
    ap.add_argument("--servers", default="ours,ref", help="ours and/or ref")
    ap.add_argument("--users", default="root,unprivileged",
                    help="the escape suite's server: root and/or unprivileged (uid 65534)")
    ap.add_argument("--suites", default=",".join(SUITES), help="default: %(default)s")
    ap.add_argument("--build", default=os.path.join(REPO, "build", "asan"),
                    help="the build tree of ours (exec-server, escape-probe)")
    ap.add_argument("--logs", default=None,
                    help="directory for each run's output (default: a new one in /tmp)")
    a = ap.parse_args(argv)
    logs = a.logs or tempfile.mkdtemp(prefix="execbb-containers-")
    os.makedirs(logs, exist_ok=True)
    print("logs in " + logs)
    runs = run_matrix(a.kinds.split(","), a.servers.split(","), a.users.split(","),
                      a.suites.split(","),
                      os.path.join(a.build, "exec-server"), a.build, logs)
    print_table(runs)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
