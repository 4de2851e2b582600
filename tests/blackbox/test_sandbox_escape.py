#!/usr/bin/env python3
"""Sandbox escapes (issue 20), tried as an attacker would: every attack of the issue and the
usual ones, from a command started by process/start under ReadOnly, WorkspaceWrite and
WorkspaceWrite with the network enabled, and from sandboxed fs/* requests. Each case
asserts the denial itself (which errno family, and that nothing changed on the host: no
file, no injected command run by the victim shell, hostname unchanged, no secret in any
output), never just a non-zero exit.

The system calls a shell cannot make come from tests/sandbox/escape_probe*.c (escape-probe in
the build directory); its attempts and their results are listed in
docs/SANDBOX_REFERENCE.md, measured against the reference. A case the reference itself does
not deny is marked ref_allowed(reason): nothing is asserted about it (it is printed), for
ours too. Where the reference's errno and ours may differ (EROFS/EACCES/EPERM/ENOENT...),
the case accepts the family listed with it.

Victims: an unsandboxed interactive shell on a pty started through the server (an agent's
shell), host daemons on a pathname Unix socket outside every root and on an abstract one,
a TCP listener on loopback, an unrelated process of the server's uid with
MY_SECRET_TOKEN=hunter2 in its environment, a secret in the server's own environment,
workspaces with and without .git and with .git -> ../realgit.

Two ways to run (both in ctest): ESCAPE_USER=root (default) runs the server as root, the
systemd unit's case; ESCAPE_USER=unprivileged runs it as uid 65534 (ESCAPE_UID=...) through
setpriv, copying what that user cannot reach into a world-readable directory. Without root
the test runs everything as the current user and says so. Exit 77 only when the kernel has
no Landlock (ours) or there is no server/probe.
"""
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
import seccomp_filter as sf  # noqa
import containers  # noqa
from sandbox_attack import (Daemon, dump_filters, find_marked, find_probe, parse,  # noqa
                            policy, sandboxed_sleeper, scratch, special, uri, world_copy)
from test_sandbox import helper_pids, landlock_abi, serving_helper  # noqa

# Errno families (names as escape-probe prints them).
PID = {"ESRCH", "ENOENT", "EPERM", "EACCES"}            # another process: hidden or refused
FILTER = {"EPERM", "EACCES", "ENOSYS"}                  # a call refused outright
PRIV = {"EPERM", "EACCES", "ENOSYS"}                    # needs a capability the sandbox lacks
# EEXIST and EISDIR: the reference's placeholder for a missing protected name is an empty
# read-only directory, so mkdir finds it there and a write to the name hits a directory.
FS = {"EROFS", "EACCES", "EPERM", "ENOENT", "EXDEV", "EEXIST", "EISDIR", "ENOTDIR", "EBUSY",
      "ENOTEMPTY"}
TTY = {"ENOENT", "EACCES", "EPERM", "EIO", "ENXIO", "ENODEV"}
FAMILY = re.compile(r"read-only file system|no such file or directory|permission denied|"
                    r"operation not permitted|is not permitted|cross-device|file exists|"
                    r"not a directory|is a directory", re.I)

RESTRICTED, ENABLED = "restricted", "enabled"
MODES = [("ReadOnly", "ro", RESTRICTED), ("WorkspaceWrite", "ww", RESTRICTED),
         ("WorkspaceWrite+net", "ww", ENABLED)]
PROTECTED = (".git", ".codex", ".agents", ".aws")
SECRET = "hunter2"
SERVER_SECRET = "swordfish-" + uuid.uuid4().hex[:8]


class ref_allowed:
    """The reference does not deny this. Without `ours`, nothing is asserted for either
    server (a call that reaches nothing outside the sandbox); with it, the reference's
    answer is only printed and ours must meet `ours` (a hole the reference has)."""

    def __init__(self, why, ours=None):
        self.why = why
        self.ours = ours


class ns_only:
    """Only a namespace stops this: where the server sandboxes without namespaces
    (--sandbox-mode landlock, or a host that refuses them: docs/SANDBOX.md, "Without
    namespaces", which names each such attempt and why), the answer is printed, not
    judged; with namespaces ours must meet `ours`. `when` says where the namespace is
    missing (no_namespaces, or shared_proc for a /proc of the sandbox's own)."""

    def __init__(self, why, ours, when=None):
        self.why = why
        self.ours = ours
        self.when = when or no_namespaces


OK = "ok"  # a positive control: the sandbox must allow it (or the denials prove nothing)


def no_namespaces(w):
    """Whether ours sandboxes without namespaces (environment/info's sandbox.mode)."""
    return not IS_REF and w.mode == "landlock"


def shared_proc(w):
    """Whether the sandbox's /proc is the host's (or the container's) rather than one of
    its own: without namespaces, or where the kernel refuses a fresh one (inside podman's
    containers, under bubblewrap: environment/info's sandbox.hostProc; the reference then
    starts bubblewrap without --proc)."""
    if IS_REF:
        return bool(CONTAINER)
    return w.mode == "landlock" or w.host_proc


# ---------------------------------------------------------------------------------------
# The world: the server (as root or as an unprivileged user) and its victims
# ---------------------------------------------------------------------------------------

# The unrelated process: one that blocks until it is killed (no timer to outlast).
UNTIL_KILLED = ["tail", "-f", "/dev/null"]


class World:
    def __init__(self):
        self.as_root = os.geteuid() == 0
        want = os.environ.get("ESCAPE_USER", "root")
        if want == "unprivileged" and self.as_root:
            self.uid = int(os.environ.get("ESCAPE_UID", "65534"))
            self.gid = pwd.getpwuid(self.uid).pw_gid if self._known(self.uid) else self.uid
        else:
            self.uid, self.gid = os.geteuid(), os.getegid()
        self.tag = uuid.uuid4().hex[:10]
        self.cleanup = []
        try:
            self.setup()
        except BaseException:
            self.close(stop=False)
            raise

    def setup(self):
        self.bindir = scratch("escape-bin-")
        self.cleanup.append(lambda: shutil.rmtree(self.bindir, ignore_errors=True))
        probe = find_probe()
        if probe is None:
            raise TestSkip("escape-probe is not built")
        self.probe = world_copy(probe, self.bindir)
        self.attack = world_copy(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "server_attack.py"), self.bindir)
        self.top = scratch("escape-")
        self.cleanup.append(lambda: shutil.rmtree(self.top, ignore_errors=True))
        self.out = self.mkdir(self.top + "/outside")  # outside every root, owned by the uid
        # where an unsandboxed process started by an attacker would leave its mark
        self.markers = self.mkdir(self.top + "/markers", 0o777)
        self.write(self.out + "/file", "outside")
        self.write(self.out + "/secret.txt", "outside secret")
        self.sock_path = self.out + "/daemon.sock"
        self.daemon_path = Daemon(socket.AF_UNIX, self.sock_path)
        os.chmod(self.sock_path, 0o666)
        self.abstract = "escape-abstract-" + self.tag
        self.daemon_abstract = Daemon(socket.AF_UNIX, "\0" + self.abstract)
        self.daemon_tcp = Daemon(socket.AF_INET, ("127.0.0.1", 0))
        self.tcp_port = self.daemon_tcp.sock.getsockname()[1]
        for d in (self.daemon_path, self.daemon_abstract, self.daemon_tcp):
            self.cleanup.append(d.close)
        self.srv = self.start_server()
        with open("/proc/%d/status" % self.srv.pid) as f:
            uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
        assert uid == self.uid, "the server runs as uid %d, not %d" % (uid, self.uid)
        self.spawn_unrelated()  # (in a container, beside the server: after it)
        self.cleanup.append(self.stop_unrelated)
        self.s = self.srv.session()
        info = self.s.call("environment/info", {})
        self.mode = info.get("sandbox", {}).get("mode", "namespaces")
        self.host_proc = info.get("sandbox", {}).get("hostProc", False)
        print("sandbox mode: %s%s" % (self.mode, ", the host's /proc" if self.host_proc else ""))
        self.start_tty_victim()

    @staticmethod
    def _known(uid):
        try:
            pwd.getpwuid(uid)
            return True
        except KeyError:
            return False

    @property
    def unprivileged(self):
        return self.uid != 0

    @property
    def switched(self):
        return self.uid != os.geteuid()

    def drop_kw(self):
        return {"user": self.uid, "group": self.gid, "extra_groups": []} if self.switched else {}

    def mkdir(self, path, mode=0o755):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        os.chown(path, self.uid, self.gid)
        return path

    def write(self, path, text):
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, self.uid, self.gid)

    def spawn_unrelated(self):
        """An unrelated process of the server's uid with a secret in its environment;
        where the server runs in a container, in that container (its pid is the one the
        server's world sees)."""
        env = {"PATH": "/usr/bin:/bin", "MY_SECRET_TOKEN": SECRET,
               "PROBETAG": "unrelated-" + self.tag}
        if self.srv.container:
            # Past the first few thousand pids of the container's namespace: a number the
            # sandbox's own PID namespace also has (its probe is pid 2-20 there) would be
            # that process, not this one, and an attempt on it no escape.
            # (a child made after the burn, which says its pid itself: the shell's own
            # pid was taken before the burn; it blocks until stop_unrelated kills it)
            burn = ("i=0; while [ $i -lt 3000 ]; do (:); i=$((i+1)); done; "
                    "/bin/sh -c '%s; exec %s' & exec >/dev/null; wait"
                    % (containers.Beside.ANNOUNCE, " ".join(UNTIL_KILLED)))
            self.unrelated = containers.Beside(self.srv.pid, ["/bin/sh", "-c", burn], env,
                                               user=(self.uid, self.gid), announces=True,
                                               timeout=120)
            return
        self.unrelated = subprocess.Popen(UNTIL_KILLED, env=env, **self.drop_kw())

    def stop_unrelated(self):
        self.unrelated.kill()
        self.unrelated.wait()

    def server_cmd(self):
        if not IS_REF:
            if not self.switched:
                return [SERVER_PATH, "--listen", "ws://127.0.0.1:0"] + SERVER_ARGS
            # the build tree may sit under a directory the user cannot enter
            helper = os.path.join(os.path.dirname(SERVER_PATH), "exec-sandbox-helper")
            exe = world_copy(SERVER_PATH, self.bindir)
            if os.path.exists(helper):
                world_copy(helper, self.bindir)
            return [exe, "--listen", "ws://127.0.0.1:0"] + SERVER_ARGS
        ref = SERVER_PATH
        if self.switched:
            ref = self.reference_copy(ref)
        return [ref, "exec-server", "--listen", "ws://127.0.0.1:0"]

    def reference_copy(self, ref):
        """The reference's package (bin/codex, codex-resources/bwrap) hard-linked (copied
        across file systems) into a directory the user can reach; it finds its bwrap
        relative to itself."""
        pkg = os.path.dirname(os.path.dirname(ref))
        dst = self.bindir + "/ref"
        for rel in ("bin/codex", "codex-resources/bwrap", "codex-package.json"):
            src = os.path.join(pkg, rel)
            if not os.path.exists(src):
                continue
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            try:
                os.link(src, os.path.join(dst, rel))
            except OSError:
                shutil.copy2(src, os.path.join(dst, rel))
        for root, dirs, _ in os.walk(dst):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(dst, 0o755)
        return dst + "/bin/codex"

    def start_server(self, extra_env=(), extra_args=()):
        # The environment goes on the command line (env(1) execs, so the pid stays the
        # server's): a secret for the /proc/<server>/environ attacks, and for a user who is
        # not root a HOME of its own (the reference keeps helper binaries in
        # $HOME/.codex and refuses a home under /tmp; /var/tmp is accepted).
        env = ["ESCAPE_SERVER_SECRET=" + SERVER_SECRET] + list(extra_env)
        if self.switched:
            home = self.mkdir(tempfile.mkdtemp(prefix="escape-home-", dir="/var/tmp" if
                                               os.path.isdir("/var/tmp") else None))
            self.cleanup.append(lambda: shutil.rmtree(home, ignore_errors=True))
            env += ["HOME=" + home, "CODEX_HOME=" + self.mkdir(os.path.join(home, ".codex"))]
        if not getattr(self, "cmd", None):
            self.cmd = self.server_cmd()  # copied once: a second server runs the same file
        # (the user is switched where the container, if any, needs it: harness.Server)
        cmd = self.cmd + ([] if IS_REF else list(extra_args))  # the reference has no such flags
        srv = Server(cmd=["env"] + env + cmd, reference=IS_REF, start=False,
                     user=(self.uid, self.gid) if self.switched else None)
        os.chmod(srv.workdir, 0o755)  # its cwd, for a user who is not root
        srv.start()
        return srv

    def start_tty_victim(self):
        """An unsandboxed interactive shell on a pty, started through the server like an
        agent's shell; its /dev/pts/N is the target of the tty attacks."""
        tag = "victim-" + self.tag
        self.s.start("victim", ["/bin/sh", "-i"], tty=True, cwd=uri(self.top),
                     env={"PATH": "/usr/bin:/bin", "PS1": "$ ", "PROBETAG": tag})
        pid = wait_until(lambda: (find_marked(tag, "/bin/sh") or [None])[0],
                         what="the victim shell")
        self.victim_pts = os.readlink("/proc/%d/fd/0" % pid)
        assert self.victim_pts.startswith("/dev/pts/"), self.victim_pts
        self.sync_victim()

    def sync_victim(self):
        """Have the victim shell run one command and wait for its output: every input
        queued before (an injected command included) has been run by then."""
        n = uuid.uuid4().int % 100000
        self.s.write("victim", "echo SYNC-$((%d+1))\n" % n, write_id="sync-%d" % n)
        want = ("SYNC-%d" % (n + 1)).encode()
        self.s.wait_for(lambda: want in self.s.output_so_far("victim")["pty"],
                        what="the victim shell's answer")
        return self.s.output_so_far("victim")["pty"]

    def fresh_ws(self, git=None):
        """A new workspace: git None (no .git), "dir" (.git/config, .git/hooks, .codex/),
        or "symlink" (.git -> ../realgit)."""
        d = self.mkdir(tempfile.mkdtemp(prefix="ws-", dir=self.top))
        ws = self.mkdir(d + "/ws")
        if git == "dir":
            self.mkdir(ws + "/.git")
            self.mkdir(ws + "/.git/hooks")
            self.write(ws + "/.git/config", "[core]\n")
            self.mkdir(ws + "/.codex")
            self.write(ws + "/.codex/config.toml", "model = \"x\"\n")
        elif git == "symlink":
            self.mkdir(d + "/realgit")
            self.write(d + "/realgit/config", "[core]\n")
            os.symlink("../realgit", ws + "/.git")
            os.lchown(ws + "/.git", self.uid, self.gid)
        return ws

    def close(self, stop=True):
        err = None
        srv = getattr(self, "srv", None)
        try:
            if stop and srv is not None:
                self.s.close()
                srv.stop()
            elif srv is not None:
                srv.kill()
        except AssertionError as e:
            err = e
        for f in reversed(self.cleanup):
            try:
                f()
            except Exception:  # noqa
                pass
        if err:
            raise err


WORLD = None
STEP = [0]


def world():
    global WORLD
    if WORLD is not None and not WORLD.srv.alive():
        print("note: the server is gone (%s); starting a new world" % WORLD.srv.proc.returncode)
        try:
            WORLD.close()
        except AssertionError:
            pass
        WORLD = None
    if WORLD is None:
        WORLD = World()
    return WORLD


def pid_name(w, base):
    STEP[0] += 1
    return "%s-%d" % (base, STEP[0])


# ---------------------------------------------------------------------------------------
# Running attempts and judging them
# ---------------------------------------------------------------------------------------

def probe(w, mode, attempts, ws, env=None):
    """Run the probe with `attempts` under `mode`; returns (results, stdout+stderr text)."""
    _, kind, net = mode
    sb = policy(kind, ws, net)
    pid = pid_name(w, "probe")
    envd = {"PATH": "/usr/bin:/bin"}
    envd.update(env or {})
    r = w.s.start(pid, [w.probe] + list(attempts), cwd=uri(ws), sandbox=sb, env=envd)
    assert r.get("sandboxType") == "linuxSeccomp", r
    out = w.s.collect_until_closed(pid, timeout=120)
    text = (out["stdout"] + out["stderr"]).decode(errors="replace")
    results = parse(out["stdout"].decode(errors="replace"))
    assert results, "the probe did not run under %s: exit %s, output %r" % (
        mode[0], out["exit_code"], text[-600:])
    return results, text


def shell(w, mode, script, ws, env=None, tty=False):
    _, kind, net = mode
    pid = pid_name(w, "sh")
    envd = {"PATH": "/usr/bin:/bin"}
    envd.update(env or {})
    w.s.start(pid, ["/bin/sh", "-c", script], cwd=uri(ws), sandbox=policy(kind, ws, net),
              env=envd, tty=tty)
    out = w.s.collect_until_closed(pid, timeout=60)
    return out, (out["stdout"] + out["stderr"] + out["pty"]).decode(errors="replace")


class Verdicts:
    """Collects every failed case of a test, so one run lists all holes at once."""

    def __init__(self):
        self.bad = []

    def fail(self, mode, what, why):
        self.bad.append("[%s] %s: %s" % (mode[0] if mode else "-", what, why))

    def check(self, mode, what, cond, why):
        if not cond:
            self.fail(mode, what, why)

    def done(self):
        assert not self.bad, "%d escape(s):\n  " % len(self.bad) + "\n  ".join(self.bad)


def unique(items):
    out = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def expect_for(expect, mode):
    if isinstance(expect, dict):
        return expect[mode[2]]
    return expect


def judge(v, mode, results, cases):
    """cases: [(key, expect)]; key is the probe's result name."""
    for key, expect in cases:
        expect = expect_for(expect, mode)
        got = results.get(key)
        if expect is None:  # run for its effect; the host checks judge it
            continue
        if isinstance(expect, ns_only):
            if expect.when(WORLD):
                print("    [%s] %s -> %s (namespace-only: %s)" % (
                    mode[0], key, got[0] if got else "missing", expect.why))
                continue
            expect = expect.ours
        if isinstance(expect, ref_allowed):
            if IS_REF or expect.ours is None:
                print("    [%s] %s -> %s (reference-allowed: %s)" % (
                    mode[0], key, got[0] if got else "missing", expect.why))
                continue
            expect = expect.ours
        if got is None:
            v.fail(mode, key, "no result from the probe (it did not run?)")
            continue
        res, detail = got
        if expect == OK:
            v.check(mode, key, res == "ok", "the sandbox refused a legitimate %s: %s %s"
                    % (key, res, detail))
        else:
            v.check(mode, key, res in expect, "not denied as expected (want one of %s): %s %s"
                    % ("/".join(sorted(expect)), res, detail))


def run_cases(w, cases, ws_kind=None, modes=MODES, post=None, env=None):
    """cases: [(attempt, key, expect)] with {ws}, {out}, {srv}, ... placeholders. Runs
    every mode in a fresh workspace and calls post(v, mode, ws, results, text)."""
    v = Verdicts()
    for mode in modes:
        ws = w.fresh_ws(ws_kind)
        subst = {"ws": ws, "out": w.out, "srv": w.srv.inner_pid, "unrel": w.unrelated.pid,
                 "pts": w.victim_pts, "sock": w.sock_path, "abs": w.abstract,
                 "port": w.tcp_port}
        attempts = [a.format(**subst) for a, _, _ in cases]
        results, text = probe(w, mode, attempts, ws, env=env)
        judge(v, mode, results, [(k, e) for _, k, e in cases])
        for secret in (SECRET, SERVER_SECRET):
            v.check(mode, "secrets", secret not in text, "%r in the probe's output" % secret)
        if post:
            post(v, mode, ws, results, text)
    v.done()


# ---------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------

@needs_own_server
def test_capabilities(_):
    w = world()
    root_ok = ref_allowed("uid 0 inside already; setuid(0) changes nothing") \
        if not w.unprivileged else {"EPERM", "EINVAL"}
    cases = [
        ("caps", "caps", {"NOCAPS"}),
        ("capset", "capset", PRIV),
        ("setgroups", "setgroups", PRIV | {"EINVAL"}),
        ("setresuid=4242", "setresuid", PRIV | {"EINVAL"}),
        ("setuid0", "setuid0", root_ok),
    ]

    def post(v, mode, ws, res, text):
        caps = res.get("caps", ("", ""))[1]
        v.check(mode, "CapEff", "CapEff=0000000000000000" in caps, caps)
        if no_namespaces(w) and w.unprivileged:
            # emptying the bounding set needs CAP_SETPCAP, which only a user namespace
            # gives an unprivileged server; no_new_privs keeps exec from using it
            print("    [%s] CapBnd (namespace-only for a server not running as root): %s" % (
                mode[0], caps))
        else:
            v.check(mode, "CapBnd", "CapBnd=0000000000000000" in caps, caps)
        v.check(mode, "NoNewPrivs", "NoNewPrivs=1" in caps, caps)
    run_cases(w, cases, post=post)


@needs_own_server
def test_tty_injection(_):
    """Issue item 0: TIOCSTI and plain writes into the pty of an unsandboxed shell."""
    w = world()
    pwned = w.out + "/PWNED-tiocsti"
    spoof = "SPOOFED-" + w.tag
    cases = [
        ("tiocsti={pts}:touch %s\\n" % pwned, "tiocsti", TTY),
        ("ptywrite={pts}:%s\\n" % spoof, "ptywrite", TTY),
        ("ptslist", "ptslist", {"ENOENT", "EACCES", "EPERM", "EIO"}),
        ("tioclinux={pts}", "tioclinux", TTY | {"EINVAL", "ENOTTY"}),
        ("tioclinux=/dev/tty0", "tioclinux#2", TTY | {"EINVAL", "ENOTTY"}),
    ]

    def post(v, mode, ws, res, text):
        out = w.sync_victim()
        v.check(mode, "tiocsti", not os.path.exists(pwned),
                "the victim shell ran the injected command (%s exists)" % pwned)
        v.check(mode, "ptywrite", spoof.encode() not in out,
                "the victim's terminal shows the spoofed text")
        opened = res.get("ptslist", ("", ""))[1]
        v.check(mode, "ptslist", os.path.basename(w.victim_pts) not in
                opened.partition("opened=")[2].split(","), opened)
        if os.path.exists(pwned):
            os.unlink(pwned)
    run_cases(w, cases, post=post)


@needs_own_server
def test_shell_tty_injection(_):
    """The same through a shell: printf into the victim's pty."""
    w = world()
    spoof = "SHELLSPOOF-" + w.tag
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        out, text = shell(w, mode, "printf '%s\\n' > %s; echo rc=$?" % (spoof, w.victim_pts), ws)
        v.check(mode, "printf > pty", "rc=0" not in text, text)
        v.check(mode, "printf > pty", FAMILY.search(text), text)
        v.check(mode, "printf > pty", spoof.encode() not in w.sync_victim(),
                "the victim's terminal shows the text")
    v.done()


@needs_own_server
def test_proc_isolation(_):
    """Issue item 2: no other process is visible; no environ, mem, root, cwd, ns of it."""
    w = world()
    cases = [
        ("listproc={srv},{unrel}", "listproc",
         ns_only("without a /proc of its own the sandbox lists every process of the host or "
                 "container", {"ENOENT"}, shared_proc)),
        ("read=/proc/{unrel}/environ:%s" % SECRET, "read", PID),
        ("read=/proc/{srv}/environ:%s" % SERVER_SECRET, "read#2", PID),
        ("read=/proc/{srv}/cmdline", "read#3",
         ns_only("a command line is readable by every process that sees the pid", PID,
                 shared_proc)),
        ("mem={srv}", "mem", PID),
        ("mem={unrel}", "mem#2", PID),
        ("readlink=/proc/{srv}/root", "readlink", PID),
        ("readlink=/proc/{srv}/cwd", "readlink#2", PID),
        ("read=/proc/{srv}/root{out}/secret.txt", "read#4", PID),
        ("setns={srv}", None, None),
        ("setns={unrel}", None, None),
    ]

    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        subst = {"srv": w.srv.inner_pid, "unrel": w.unrelated.pid, "out": w.out}
        attempts = [a.format(**subst) for a, _, _ in cases]
        results, text = probe(w, mode, attempts, ws)
        judge(v, mode, results, [(k, e) for _, k, e in cases if k])
        for k, (r, d) in results.items():
            if k.startswith("setns:"):
                v.check(mode, k, r in PID, "not denied: %s %s" % (r, d))
        v.check(mode, "setns", any(k.startswith("setns:") for k in results), "no setns result")
        for secret in (SECRET, SERVER_SECRET):
            v.check(mode, "secrets", secret not in text, "%r in the probe's output" % secret)
        d = results.get("read", ("", ""))[1]
        v.check(mode, "environ", "needle=yes" not in d, "the unrelated process's secret: " + d)
        # and with a shell, the way the issue found it
        out, stext = shell(w, mode, "cat /proc/%d/environ /proc/%d/environ; ls /proc"
                           % (w.srv.inner_pid, w.unrelated.pid), ws)
        for secret in (SECRET, SERVER_SECRET):
            v.check(mode, "cat environ", secret not in stext, "%r printed" % secret)
        listed = set(re.findall(r"^(\d+)$", out["stdout"].decode(errors="replace"), re.M))
        if shared_proc(w):
            continue  # the host's pids are listed without a /proc of its own (listproc above)
        v.check(mode, "ls /proc", str(w.srv.inner_pid) not in listed and
                str(w.unrelated.pid) not in listed, "host pids listed: %s" % sorted(listed)[:20])
    v.done()


@needs_own_server
def test_ptrace_family(_):
    w = world()
    net_ok = ref_allowed("the reference's filter allows ptrace and process_vm_* with the "
                         "network enabled; the PID namespace still hides every other process")
    cases = [
        ("ptrace_attach={srv}", "ptrace_attach", PID),
        ("ptrace_attach={unrel}", "ptrace_attach#2", PID),
        ("ptrace_traceme", "ptrace_traceme", {RESTRICTED: FILTER, ENABLED: net_ok}),
        ("process_vm_readv=self", "process_vm_readv", {RESTRICTED: FILTER, ENABLED: net_ok}),
        ("process_vm_readv={unrel}", "process_vm_readv#2", PID | FILTER),
        ("process_vm_writev", "process_vm_writev", {RESTRICTED: FILTER, ENABLED: net_ok}),
        ("pidfd_getfd={srv}", "pidfd_getfd", PID),
        ("kcmp={srv}", "kcmp", PID),
        ("prlimit={srv}", "prlimit", PID),
        ("setpriority={unrel}", "setpriority", PID),
    ]
    run_cases(w, cases)


@needs_own_server
def test_signals(_):
    """kill of the server and of an unrelated process of the same uid."""
    w = world()
    cases = [
        ("kill0={srv}", "kill0", PID),
        ("kill0={unrel}", "kill0#2", PID),
        ("killterm={unrel}", "killterm", PID),
    ]

    def post(v, mode, ws, res, text):
        v.check(mode, "killterm", w.unrelated.poll() is None, "the unrelated process died")
        if w.unrelated.poll() is not None:
            w.spawn_unrelated()
    run_cases(w, cases, post=post)


@needs_own_server
def test_kill_server(_):
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        res, _ = probe(w, mode, ["killterm=%d" % w.srv.inner_pid], ws)
        judge(v, mode, res, [("killterm", PID)])
        v.check(mode, "server", w.srv.alive(), "the server was killed from the sandbox")
        if not w.srv.alive():
            break
    v.done()


@needs_own_server
def test_kernel_facilities(_):
    w = world()
    cases = [
        ("io_uring_setup", "io_uring_setup", FILTER),
        ("io_uring_enter", "io_uring_enter", FILTER),
        ("io_uring_register", "io_uring_register", FILTER),
        ("bpf", "bpf", PRIV),
        ("perf_event_open", "perf_event_open",
         ref_allowed("self-monitoring is allowed by perf_event_paranoid<=2")),
        ("keyctl", "keyctl", ref_allowed("keyrings are per user namespace")),
        ("add_key", "add_key", ref_allowed("the process keyring")),
        ("request_key", "request_key", ref_allowed("ENOKEY: allowed, no such key")),
        ("init_module", "init_module", PRIV),
        ("finit_module", "finit_module", PRIV | {"EBADF"}),
        ("delete_module", "delete_module", PRIV),
        ("kexec_load", "kexec_load", PRIV),
        ("kexec_file_load", "kexec_file_load", PRIV),
        ("swapon", "swapon", PRIV),
        ("swapoff", "swapoff", PRIV),
        ("reboot", "reboot", PRIV),
        ("acct", "acct", PRIV),
        ("settimeofday", "settimeofday", PRIV),
        ("clock_settime", "clock_settime", PRIV),
        ("clock_adjtime", "clock_adjtime", PRIV),
        ("syslog", "syslog", PRIV),
        ("ioperm", "ioperm", PRIV),
        ("iopl", "iopl", PRIV),
        ("fanotify", "fanotify", PRIV),
        ("vhangup", "vhangup", PRIV),
        ("quotactl", "quotactl", PRIV | {"ENOENT", "ENOTBLK"}),
        ("userfaultfd", "userfaultfd:kernel", PRIV),
        ("userfaultfd", "userfaultfd:user", ref_allowed("UFFD_USER_MODE_ONLY is unprivileged")),
        ("open_by_handle", "open_by_handle:open_by_handle_at", PRIV),
        ("open_by_handle", "open_by_handle:name_to_handle_at",
         ref_allowed("a handle alone opens nothing")),
        ("personality", "personality", ref_allowed("affects only the caller")),
    ]
    attempts = unique(a for a, _, _ in cases)  # some attempts report two results
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        res, text = probe(w, mode, attempts, ws)
        judge(v, mode, res, [(k, e) for _, k, e in cases])
    v.done()


@needs_own_server
def test_mounts(_):
    """The mount family, and the ways out of a read-only bind: remount, umount, clear
    MOUNT_ATTR_RDONLY, then write."""
    w = world()
    cases = [
        ("mount={ws}", "mount", PRIV | {"EROFS"}),
        ("bindmount={out}:{ws}", "bindmount", PRIV | {"EROFS"}),
        ("remount_rw=/", "remount_rw", PRIV),
        ("remount_rw={ws}/.git", "remount_rw#2", PRIV),
        ("mount_setattr_rw=/", "mount_setattr_rw", PRIV),
        ("mount_setattr_rw={ws}/.git", "mount_setattr_rw#2", PRIV),
        ("umount={ws}/.git", "umount", PRIV | {"EINVAL"}),
        ("umount=/proc", "umount#2", PRIV),
        ("pivot_root", "pivot_root", PRIV),
        ("chroot", "chroot", PRIV),
        ("fsopen", "fsopen", PRIV),
        ("fspick", "fspick", PRIV),
        ("open_tree", "open_tree", PRIV),
        ("move_mount", "move_mount", PRIV),
        ("write={ws}/.git/config", "write", FS),
        ("write={out}/after-mounts", "write#2", FS),
    ]

    def post(v, mode, ws, res, text):
        v.check(mode, ".git/config", open(ws + "/.git/config").read() == "[core]\n",
                "changed on the host")
        v.check(mode, "outside", not os.path.exists(w.out + "/after-mounts"), "file created")
    run_cases(w, cases, ws_kind="dir", post=post)


@needs_own_server
def test_namespaces(_):
    w = world()
    nested = ref_allowed("a nested user namespace holds no capability outside itself")
    cases = [("unshare", "unshare:user", nested), ("clone", "clone:user", nested)]
    for ns in ("mnt", "net", "pid", "uts", "ipc", "cgroup", "time"):
        cases.append((None, "unshare:" + ns, PRIV))
        if ns != "time":
            cases.append((None, "clone:" + ns, PRIV))
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        res, _ = probe(w, mode, ["unshare", "clone"], ws)
        judge(v, mode, res, [(k, e) for _, k, e in cases])
    v.done()


@needs_own_server
def test_hostname(_):
    """sethostname and setdomainname to a new value: denied, and the host's unchanged.
    (If the sandbox lets it through, the old names are put back at once.)"""
    w = world()
    pwned = "pwned-" + w.tag
    before = socket.gethostname()
    with open("/proc/sys/kernel/domainname") as f:
        dom_before = f.read().strip()
    v = Verdicts()
    try:
        for mode in MODES:
            ws = w.fresh_ws()
            res, _ = probe(w, mode, ["sethostname=" + pwned, "setdomainname=" + pwned], ws)
            judge(v, mode, res, [("sethostname", PRIV), ("setdomainname", PRIV)])
            v.check(mode, "hostname", socket.gethostname() != pwned,
                    "the host's hostname became %r" % pwned)
            with open("/proc/sys/kernel/domainname") as f:
                v.check(mode, "domainname", f.read().strip() != pwned,
                        "the host's domainname became %r" % pwned)
            restore_names(pwned, before, dom_before)
            out, text = shell(w, mode, 'hostname "$(hostname)"; echo rc=$?', ws)
            v.check(mode, "hostname(1)", "rc=0" not in text, text)
    finally:
        restore_names(pwned, before, dom_before)
    v.done()


def restore_names(pwned, host, dom):
    if os.geteuid() != 0:
        return
    if socket.gethostname() == pwned:
        socket.sethostname(host)
    with open("/proc/sys/kernel/domainname") as f:
        if f.read().strip() == pwned:
            with open("/proc/sys/kernel/domainname", "w") as g:
                g.write(dom)


@needs_own_server
def test_mknod(_):
    w = world()
    cases = [("mknod_chr={ws}/chr", "mknod_chr", PRIV | FS),
             ("mknod_blk={ws}/blk", "mknod_blk", PRIV | FS),
             ("mknod_blk={out}/blk", "mknod_blk#2", PRIV | FS)]

    def post(v, mode, ws, res, text):
        for p in (ws + "/chr", ws + "/blk", w.out + "/blk"):
            v.check(mode, "mknod", not os.path.lexists(p), "%s exists on the host" % p)
    run_cases(w, cases, post=post)


@needs_own_server
def test_sockets(_):
    """Issue item 4: with the network restricted nothing reaches a host daemon, Unix
    sockets included. With it enabled the reference allows IP and Unix sockets."""
    w = world()
    net = ref_allowed("the network is enabled")
    cases = [
        ("socket", "socket:inet", {RESTRICTED: FILTER, ENABLED: net}),
        ("socket", "socket:inet6", {RESTRICTED: FILTER, ENABLED: net}),
        ("socket", "socket:netlink", {RESTRICTED: FILTER, ENABLED: net}),
        ("socket", "socket:packet", FILTER),
        ("socket", "socket:inet_raw", FILTER),
        ("socket", "socket:vsock", FILTER),
        ("socket", "socket:unix", ref_allowed("socket(AF_UNIX) is allowed; connect is not")),
        ("socketpair", "socketpair", ref_allowed("socketpair(AF_UNIX) is allowed")),
        ("connect_path={sock}", "connect_path", {RESTRICTED: FILTER | {"ENOENT"},
                                                 ENABLED: net}),
        ("connect_abstract={abs}", "connect_abstract", {RESTRICTED: FILTER | {"ECONNREFUSED"},
                                                        ENABLED: net}),
        ("connect_tcp=127.0.0.1:{port}", "connect_tcp", {RESTRICTED: FILTER | {"ENETUNREACH",
                                                                                "ECONNREFUSED"},
                                                          ENABLED: net}),
        ("listen_path={ws}/listen.sock", "listen_path", {RESTRICTED: FILTER | FS,
                                                         ENABLED: net}),
        ("netif", "netif", ref_allowed("informational: the interfaces seen")),
    ]
    attempts = unique(a for a, _, _ in cases)
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        before = [d.accepted for d in (w.daemon_path, w.daemon_abstract, w.daemon_tcp)]
        subst = {"sock": w.sock_path, "abs": w.abstract, "port": w.tcp_port, "ws": ws}
        res, text = probe(w, mode, [a.format(**subst) for a in attempts], ws)
        judge(v, mode, res, [(k, e) for _, k, e in cases])
        if mode[2] == RESTRICTED:
            after = [d.accepted for d in (w.daemon_path, w.daemon_abstract, w.daemon_tcp)]
            v.check(mode, "daemons", after == before, "a host daemon accepted a connection "
                    "(pathname, abstract, tcp): %s -> %s" % (before, after))
            v.check(mode, "daemons", "pong" not in text, "a daemon's reply reached the sandbox")
            nets = res.get("netif", ("", ""))[1]
            if no_namespaces(w):
                print("    [%s] netif: %s (namespace-only: without a network namespace the "
                      "host's interface names are readable in /sys/class/net)" % (mode[0], nets))
            else:
                v.check(mode, "netif", nets.startswith("count=1 names=lo") or
                        res.get("netif", ("",))[0] != "ok", "host interfaces visible: " + nets)
            # the same with a shell tool
            out, stext = shell(w, mode, "python3 -c \"import socket; s=socket.socket("
                               "socket.AF_UNIX); s.connect('%s'); s.send(b'x'); "
                               "print(s.recv(9))\"" % w.sock_path, ws)
            v.check(mode, "python connect", "pong" not in stext and out["exit_code"] != 0,
                    stext)
    v.done()


# The reference's filter (docs/SANDBOX_REFERENCE.md), x86_64: what it denies with EPERM.
REF_DENIED = {
    RESTRICTED: ["socket", "connect", "accept", "sendto", "shutdown", "bind", "listen",
                 "getsockname", "getpeername", "socketpair", "setsockopt", "getsockopt",
                 "ptrace", "accept4", "recvmmsg", "sendmmsg", "process_vm_readv",
                 "process_vm_writev", "io_uring_setup", "io_uring_enter",
                 "io_uring_register"],
    ENABLED: ["io_uring_setup", "io_uring_enter", "io_uring_register"],
}


@needs_own_server
def test_filter_sweep(_):
    """Every system call the reference's filter denies, called with every argument -1:
    the kernel alone answers EBADF/EFAULT/EINVAL/ESRCH, a filter EPERM (or EACCES). A
    baseline without a sandbox shows the kernel's own answer is not already a denial."""
    w = world()
    names = sf.syscall_names()
    v = Verdicts()
    base_pid = pid_name(w, "sweep-base")
    allnr = sorted(set(names[n] for n in REF_DENIED[RESTRICTED]))
    w.s.start(base_pid, [w.probe, "sweep=" + ",".join(map(str, allnr))], cwd=uri(w.top))
    base = parse(w.s.collect_until_closed(base_pid)["stdout"].decode())
    for mode in MODES:
        ws = w.fresh_ws()
        nrs = [names[n] for n in REF_DENIED[mode[2]]]
        res, _ = probe(w, mode, ["sweep=" + ",".join(map(str, nrs))], ws)
        for n in REF_DENIED[mode[2]]:
            key = "sweep:%d" % names[n]
            b = base.get(key, ("?", ""))[0]
            if b in FILTER:
                print("    %s: %s already without a sandbox; not a test of the filter" % (n, b))
                continue
            got = res.get(key, ("missing", ""))[0]
            v.check(mode, n, got in FILTER, "allowed through (%s; %s without a sandbox)"
                    % (got, b))
    v.done()


@needs_own_server
def test_filter_readback(_):
    """The installed seccomp filters, read back (root only: PTRACE_SECCOMP_GET_FILTER):
    the reference's denials per syscall, and the architecture checks: an i386 call and an
    unknown architecture are killed, an x32 number does not slip past."""
    if os.geteuid() != 0:
        raise TestSkip("reading another process's seccomp filter needs root")
    w = world()
    names = sf.syscall_names()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        tag = "filter-%s-%s" % (w.tag, STEP[0])
        pid = pid_name(w, "hold")
        sleeper = sandboxed_sleeper(w.s, pid, ws, policy(mode[1], ws, mode[2]), tag)
        filters = dump_filters(w.probe, sleeper)
        w.s.terminate(pid)
        w.s.collect_until_closed(pid)
        if filters is None:
            v.fail(mode, "filter", "could not be read back")
            continue
        v.check(mode, "filter", filters, "no seccomp filter installed")
        for n in REF_DENIED[mode[2]]:
            args = (socket.AF_INET,) if n in ("socket", "socketpair") else ()
            act = sf.combined(filters, names[n], args=args)
            v.check(mode, n, sf.denied(act), "allowed by the filter (%s)" % sf.describe(act))
        act = sf.combined(filters, names["socket"], args=(40,))  # AF_VSOCK
        v.check(mode, "socket(AF_VSOCK)", sf.denied(act), sf.describe(act))
        i386 = sf.combined(filters, 3, arch=sf.AUDIT_ARCH_I386)
        v.check(mode, "i386", i386 & sf.ACTION_FULL in (sf.RET_KILL_PROCESS,
                                                        sf.RET_KILL_THREAD),
                "an i386 system call is not killed: " + sf.describe(i386))
        other = sf.combined(filters, 0, arch=0x12345678)
        v.check(mode, "unknown arch", sf.denied(other),
                "an unknown architecture is allowed: " + sf.describe(other))
        x32 = sf.combined(filters, names["socket"] | sf.X32_SYSCALL_BIT, args=(2,))
        if IS_REF:
            print("    [%s] x32 socket(AF_INET) -> %s (reference-allowed: its filter has no "
                  "x32 check; this kernel has no x32 ABI)" % (mode[0], sf.describe(x32)))
        else:  # fail closed: on a kernel with the x32 ABI this number is a real call
            v.check(mode, "x32", sf.denied(x32), "x32 socket(AF_INET) passes: " +
                    sf.describe(x32))
    v.done()


@ours_only
@needs_own_server
def test_fs_helper_filter_is_an_allowlist(_):
    """Issue 33: the sandboxed fs helper runs our own request parser inside the sandbox,
    so its filter is an allowlist (OpenSSH's model), not the denylist arbitrary commands
    get: read back from the running helper, every process, network, mount, ptrace and
    prctl call is refused, and the calls the fs methods need are allowed."""
    if os.geteuid() != 0:
        raise TestSkip("reading another process's seccomp filter needs root")
    w = world()
    names = sf.syscall_names()
    v = Verdicts()
    for mode in MODES:
        if mode[1] != "ww":
            continue
        ws = w.fresh_ws()
        w.s.call("fs/writeFile", {"path": uri(ws + "/f"), "dataBase64": b64("x"),
                                  "sandbox": policy("ww", ws, mode[2])})
        pids = helper_pids(w.srv)
        if not pids:
            v.fail(mode, "helper", "no helper found")
            continue
        pid = serving_helper(pids[-1])
        filters = dump_filters(w.probe, pid)
        if not filters:
            v.fail(mode, "filter", "could not be read back: %r" % filters)
            continue
        refused = ["socket", "socketpair", "connect", "bind", "listen", "accept4", "clone",
                   "clone3", "fork", "vfork", "execve", "execveat", "ptrace",
                   "process_vm_readv", "mount", "umount2", "setns", "unshare", "prctl", "kill",
                   "bpf", "io_uring_setup", "keyctl", "memfd_create", "setuid", "chroot",
                   "pivot_root", "open_tree", "move_mount", "seccomp", "landlock_create_ruleset"]
        for n in refused:
            act = sf.combined(filters, names[n], args=(socket.AF_UNIX,))
            v.check(mode, n, sf.denied(act), "allowed by the helper's filter (%s)" %
                    sf.describe(act))
        for n in ("read", "openat", "newfstatat", "getdents64", "recvmsg", "sendmsg", "mmap",
                  "exit_group", "renameat", "unlinkat", "mkdirat"):
            act = sf.combined(filters, names[n])
            # without namespaces the init makes the helper's changes (its broker decides
            # them): a notification, not a refusal
            brokered = no_namespaces(w) and act & sf.ACTION_FULL == sf.RET_USER_NOTIF
            v.check(mode, n, not sf.denied(act) or brokered,
                    "refused by the helper's filter (%s)" % sf.describe(act))
        act = sf.combined(filters, names["ioctl"], args=(0, 0x5412))  # TIOCSTI
        v.check(mode, "ioctl(TIOCSTI)", sf.denied(act), sf.describe(act))
        # getrlimit only: prlimit64(0, r, NULL, old). A new limit whose pointer's low half
        # is 0 is not NULL (ours let it through: only the low 32 bits were compared),
        # nor is another process.
        for what, args, want in (("getrlimit", (0, 7, 0, 0x1000), False),
                                 ("a new limit at 0x7f0000000000", (0, 7, 0x7f0000000000, 0),
                                  True),
                                 ("another pid", (1234, 7, 0, 0x1000), True)):
            act = sf.combined(filters, names["prlimit64"], args=args)
            v.check(mode, "prlimit64: " + what, sf.denied(act) == want, sf.describe(act))
        allowed = [n for n, nr in names.items() if not sf.denied(sf.combined(filters, nr))]
        v.check(mode, "size", len(allowed) < 140, "%d calls allowed" % len(allowed))
    v.done()


def host_protected_gone_soon(v, mode, ws, what):
    """After sandboxed fs/* requests: a missing protected name may exist on the host
    only as the empty mount point of a placeholder while a warm sandbox helper uses it
    (ours retires idle helpers after a few seconds, the reference after each request);
    nothing may ever be inside, and it must be gone once the helper is."""
    for name in PROTECTED:
        p = os.path.join(ws, name)
        if os.path.lexists(p):
            v.check(mode, what, os.path.isdir(p) and not os.path.islink(p) and
                    not os.listdir(p), "%s holds something on the host (%s)" % (
                        name, sorted(os.listdir(p)) if os.path.isdir(p) else "not a dir"))
    deadline = time.monotonic() + 20 * TIMEOUT_SCALE
    while time.monotonic() < deadline and any(
            os.path.lexists(os.path.join(ws, n)) for n in PROTECTED):
        time.sleep(0.2)  # sleep-ok: the poll interval, against the deadline above
    host_protected_absent(v, mode, ws, what)


def host_protected_absent(v, mode, ws, what):
    for name in PROTECTED:
        p = os.path.join(ws, name)
        v.check(mode, what, not os.path.lexists(p), "%s exists on the host afterwards "
                "(%s)" % (name, sorted(os.listdir(p)) if os.path.isdir(p) else "file"))


@needs_own_server
def test_protected_missing_process(_):
    """Issue item 3: a missing .git/.codex/.agents/.aws cannot be created, directly or by
    renaming, symlinking or hard-linking a prepared one into place."""
    w = world()
    cases = [
        ("write={ws}/control", "write", {"ro": FS, "ww": OK}),
        ("mkdir={ws}/.git", "mkdir", FS),
        ("write={ws}/.git/config", "write#2", FS),
        ("mkdir={ws}/.codex", "mkdir#2", FS),
        ("write={ws}/.codex/config.toml", "write#3", FS),
        ("write={ws}/.agents/x", "write#4", FS),
        ("mkdir={ws}/.agents", "mkdir#3", FS),
        ("mkdir={ws}/.aws", "mkdir#4", FS),
        ("write={ws}/.aws/credentials", "write#5", FS),
        ("mkdir={ws}/stage", "mkdir#5", {"ro": FS, "ww": OK}),
        ("write={ws}/stage/config", "write#6", {"ro": FS, "ww": OK}),
        ("rename={ws}/stage:{ws}/.git", "rename", FS),
        ("symlink=stage:{ws}/.git", "symlink", FS),
        ("symlink=stage:{ws}/.codex", "symlink#2", FS),
        ("link={ws}/stage/config:{ws}/.git", "link", FS),
        ("write={ws}/.git:gitdir\\: /tmp/evil\\n", "write#7", FS),
        ("rename={ws}/control:{ws}/.aws", "rename#2", FS),
    ]

    def per_mode(expect, mode):
        return expect[mode[1]] if isinstance(expect, dict) and "ro" in expect else expect

    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        res, text = probe(w, mode, [a.format(ws=ws) for a, _, _ in cases], ws)
        judge(v, mode, res, [(k, per_mode(e, mode)) for _, k, e in cases])
        host_protected_absent(v, mode, ws, "probe")
        # and the issue's shell line
        ws = w.fresh_ws()
        out, stext = shell(w, mode, "mkdir .git; echo x > .git/config; mkdir .codex; "
                           "mkdir -p .agents/skills; echo k > .aws; ls -a", ws)
        host_protected_absent(v, mode, ws, "shell")
    v.done()


@needs_own_server
def test_protected_existing_process(_):
    """An existing .git and .codex stay as they are: no write, no rename away and
    replace, no chmod, no new hook."""
    w = world()
    cases = [
        ("write={ws}/.git/config:[core]\\n\\tfsmonitor = touch /tmp/pwned\\n", "write", FS),
        ("write={ws}/.git/hooks/pre-commit", "write#2", FS),
        ("write={ws}/.codex/config.toml", "write#3", FS),
        ("chmod={ws}/.git/config", "chmod", FS),
        ("unlink={ws}/.git/config", "unlink", FS),
        ("rename={ws}/.git:{ws}/git-moved", "rename", FS),
        ("rename={ws}/.codex:{ws}/codex-moved", "rename#2", FS),
        ("rmdir={ws}/.git/hooks", "rmdir", FS),
        ("mkdir={ws}/.git/newdir", "mkdir", FS),
        ("write={ws}/ok", "write#4", None),  # control: ReadOnly refuses, WorkspaceWrite not
    ]

    def post(v, mode, ws, res, text):
        v.check(mode, ".git/config", open(ws + "/.git/config").read() == "[core]\n",
                "changed on the host")
        v.check(mode, ".git", sorted(os.listdir(ws + "/.git")) == ["config", "hooks"],
                "changed: %s" % sorted(os.listdir(ws + "/.git")))
        v.check(mode, ".git/hooks", os.listdir(ws + "/.git/hooks") == [], "a hook was planted")
        v.check(mode, ".codex", open(ws + "/.codex/config.toml").read() == "model = \"x\"\n",
                "changed on the host")
        v.check(mode, "moved", not os.path.exists(ws + "/git-moved") and
                not os.path.exists(ws + "/codex-moved"), "renamed away")
        mode_bits = os.stat(ws + "/.git/config").st_mode & 0o777
        v.check(mode, "chmod", mode_bits != 0o777, "mode changed")

    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws("dir")
        mcases = [(a, k, (FS if mode[1] == "ro" else OK) if k == "write#4" else e)
                  for a, k, e in cases]
        res, text = probe(w, mode, [a.format(ws=ws) for a, _, _ in mcases], ws)
        judge(v, mode, res, [(k, e) for _, k, e in mcases])
        post(v, mode, ws, res, text)
        # the classic swap through a shell
        ws = w.fresh_ws("dir")
        shell(w, mode, "mv .git .git.old && mkdir .git && echo evil > .git/config; "
                       "rm -rf .codex; mkdir -p .codex && echo evil > .codex/config.toml", ws)
        v.check(mode, "mv .git", open(ws + "/.git/config").read() == "[core]\n" and
                not os.path.exists(ws + "/.git.old"), "the .git swap worked")
        v.check(mode, "rm .codex", os.path.exists(ws + "/.codex/config.toml") and
                open(ws + "/.codex/config.toml").read() == "model = \"x\"\n",
                ".codex replaced")
    v.done()


@needs_own_server
def test_protected_symlink(_):
    """Issue item 5: .git -> ../realgit in a writable root: the reference refuses to run
    the command (the link could be swapped); at the least the link must survive and
    nothing may be written through it."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        if mode[1] != "ww":
            continue
        ws = w.fresh_ws("symlink")
        real = os.path.join(os.path.dirname(ws), "realgit")
        marker = "RAN-" + w.tag
        script = ("echo %s; rm .git && mkdir .git && echo evil > .git/config; "
                  "echo x >> .git/config" % marker)
        pid = pid_name(w, "symlink")
        try:
            w.s.start(pid, ["/bin/sh", "-c", script], cwd=uri(ws),
                      sandbox=policy("ww", ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
            out = w.s.collect_until_closed(pid, timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
            refused = marker not in text and out["exit_code"] != 0
            how = text
        except RpcError as e:  # refusing at process/start is as good
            refused, how, text = True, str(e), str(e)
        v.check(mode, ".git link", os.path.islink(ws + "/.git") and
                os.readlink(ws + "/.git") == "../realgit", "the symlink was replaced")
        v.check(mode, "realgit", open(real + "/config").read() == "[core]\n",
                "written through the symlink")
        # the reference: "cannot enforce sandbox read-only path ... because it crosses
        # writable symlink"; ours may word it differently but must refuse too
        v.check(mode, "refused", refused and (not IS_REF or "symlink" in how),
                "the command ran with a symlinked .git in a writable root: " + text[-300:])
        # the same through sandboxed fs requests
        sb = policy("ww", ws, mode[2])
        for method, params in [
                ("fs/writeFile", {"path": uri(ws + "/.git/config"), "dataBase64": b64("e")}),
                ("fs/remove", {"path": uri(ws + "/.git"), "recursive": False}),
                ("fs/createDirectory", {"path": uri(ws + "/.git/hooks")})]:
            m = w.s.request(method, dict(params, sandbox=sb))
            v.check(mode, method, "error" in m, "succeeded: %s" % m)
        v.check(mode, ".git link (fs)", os.path.islink(ws + "/.git"), "replaced by fs/*")
        v.check(mode, "realgit (fs)", sorted(os.listdir(real)) == ["config"] and
                open(real + "/config").read() == "[core]\n", "written through the link")
    v.done()


@needs_own_server
def test_protected_fs(_):
    """Issue item 3 by fs/*: fs/writeFile and fs/createDirectory into missing protected
    names, and into existing ones."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        if mode[1] != "ww":
            continue
        ws = w.fresh_ws()
        sb = policy("ww", ws, mode[2])
        w.s.call("fs/writeFile", {"path": uri(ws + "/control"), "dataBase64": b64("c"),
                                  "sandbox": sb})
        v.check(mode, "control", os.path.exists(ws + "/control"), "fs/writeFile refused")
        reqs = [("fs/createDirectory", {"path": uri(ws + "/" + n)}) for n in PROTECTED]
        reqs += [("fs/createDirectory", {"path": uri(ws + "/.git/hooks"), "recursive": True}),
                 ("fs/writeFile", {"path": uri(ws + "/.git/config"), "dataBase64": b64("x")}),
                 ("fs/writeFile", {"path": uri(ws + "/.codex/config.toml"),
                                   "dataBase64": b64("x")}),
                 ("fs/writeFile", {"path": uri(ws + "/.aws"), "dataBase64": b64("x")}),
                 ("fs/writeFile", {"path": uri(ws + "/.agents"), "dataBase64": b64("x")}),
                 ("fs/copy", {"sourcePath": uri(ws + "/control"),
                              "destinationPath": uri(ws + "/.git"), "recursive": False})]
        for method, params in reqs:
            m = w.s.request(method, dict(params, sandbox=sb))
            what = "%s %s" % (method, params.get("path", params.get("destinationPath")))
            if "error" in m:
                v.check(mode, what, FAMILY.search(m["error"]["message"]), m["error"])
            elif method != "fs/createDirectory" or "recursive" in params:
                v.fail(mode, what, "succeeded")
            # else: the reference answers {} (its read-only placeholder directory is there
            # already); what counts is that nothing lands on the host (checked below)
        host_protected_gone_soon(v, mode, ws, "fs")
        # existing ones
        ws = w.fresh_ws("dir")
        sb = policy("ww", ws, mode[2])
        for method, params in [
                ("fs/writeFile", {"path": uri(ws + "/.git/config"), "dataBase64": b64("x")}),
                ("fs/writeFile", {"path": uri(ws + "/.git/hooks/post-checkout"),
                                  "dataBase64": b64("x")}),
                ("fs/remove", {"path": uri(ws + "/.git"), "recursive": True}),
                ("fs/remove", {"path": uri(ws + "/.codex/config.toml")}),
                ("fs/copy", {"sourcePath": uri(ws + "/.git"), "destinationPath":
                             uri(ws + "/.codex/x"), "recursive": True})]:
            m = w.s.request(method, dict(params, sandbox=sb))
            v.check(mode, method, "error" in m and FAMILY.search(m["error"]["message"]),
                    "not denied: %s" % m)
        v.check(mode, ".git", open(ws + "/.git/config").read() == "[core]\n" and
                os.listdir(ws + "/.git/hooks") == [], "changed on the host")
        v.check(mode, ".codex", sorted(os.listdir(ws + "/.codex")) == ["config.toml"],
                "changed on the host")
    v.done()


# A sandboxed shell that, for `secs` seconds, keeps trying to create the protected names
# and, once one is made, plants what git and codex would run later outside any sandbox.
PLANT = ("end=$(( $(date +%s) + {secs} )); echo LOOP-STARTED; "
         "while [ $(date +%s) -lt $end ]; do "
         "if mkdir .git 2>/dev/null; then printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n'"
         " > .git/config; mkdir .git/hooks; echo 'touch /tmp/pwned' > .git/hooks/pre-commit; "
         "echo PLANTED-git; fi; "
         "if mkdir .codex 2>/dev/null; then echo 'x' > .codex/config.toml; echo PLANTED-codex; "
         "fi; done; echo LOOP-DONE")


def loop_started(session, pid):
    """Waits until PLANT's loop in process pid runs: the host acts on the workspace then."""
    session.wait_for(lambda: b"LOOP-STARTED" in session.output_so_far(pid)["stdout"],
                     process_id=pid, what="the command's loop to start")


def host_nothing_planted(v, mode, ws, text, what):
    """Protected names on the host may exist only as empty directories."""
    v.check(mode, what, "LOOP-DONE" in text, "the planting loop did not run: " + text[-300:])
    v.check(mode, what, "PLANTED" not in text, "created inside the sandbox: " + text[-300:])
    for name in PROTECTED:
        p = os.path.join(ws, name)
        if os.path.lexists(p):
            v.check(mode, what, os.path.isdir(p) and not os.path.islink(p) and
                    not os.listdir(p), "%s holds something on the host (%s)" % (
                        name, sorted(os.listdir(p)) if os.path.isdir(p) else "not a dir"))


@needs_own_server
def test_placeholder_outlives_every_sandbox(_):
    """Issue 33: sandbox A's placeholder for a missing .git must not go while sandbox B on
    the same workspace still counts on it. Ours made an empty W/.git for A and removed it
    when A ended; the kernel then detached B's read-only mount on it (in every other mount
    namespace) and B, whose Landlock rule covers all of W, created .git with hooks and
    config that git would run later outside any sandbox. The same with a warm fs helper
    (it retired after 3 s idle and removed its placeholders) instead of A."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        if mode[1] != "ww":
            continue
        # A: a short sandboxed command; B starts while A runs and outlives it
        ws = w.fresh_ws()
        a, b = pid_name(w, "ph-a"), pid_name(w, "ph-b")
        sb = policy("ww", ws, mode[2])
        w.s.start(a, ["/bin/sh", "-c", "sleep 1"], cwd=uri(ws), sandbox=sb,
                  env={"PATH": "/usr/bin:/bin"})
        w.s.start(b, ["/bin/sh", "-c", PLANT.format(secs=3)], cwd=uri(ws), sandbox=sb,
                  env={"PATH": "/usr/bin:/bin"})
        w.s.collect_until_closed(a, timeout=60)
        out = w.s.collect_until_closed(b, timeout=60)
        host_nothing_planted(v, mode, ws, (out["stdout"] + out["stderr"]).decode(
            errors="replace"), "after sandbox A ended")
        # the fs helper's placeholders instead of A's
        ws = w.fresh_ws()
        sb = policy("ww", ws, mode[2])
        w.s.call("fs/writeFile", {"path": uri(ws + "/control"), "dataBase64": b64("c"),
                                  "sandbox": sb})
        w.s.start(b + "-fs", ["/bin/sh", "-c", PLANT.format(secs=5)], cwd=uri(ws),
                  sandbox=sb, env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(b + "-fs", timeout=60)
        host_nothing_planted(v, mode, ws, (out["stdout"] + out["stderr"]).decode(
            errors="replace"), "after the fs helper retired")
    v.done()


@needs_own_server
def test_protected_name_removed_on_the_host(_):
    """Issue 33: an empty protected directory that exists when a sandbox starts is not
    trusted to stay: here another program's placeholder (an empty .git the test makes)
    is removed on the host while a sandboxed command runs. The kernel detaches the
    sandbox's read-only mount on it; ours notices the change of the view's mount table
    and ends the sandbox, saying why, before its slow loop can plant anything. The
    reference's sandbox goes on without its carve-out (a hole it has). The same for a
    warm fs helper: its next request must not write into the name."""
    w = world()
    v = Verdicts()
    slow = PLANT.replace("fi; done;", "fi; sleep 0.1; done;")
    for mode in MODES:
        if mode[1] != "ww":
            continue
        ws = w.fresh_ws()
        w.mkdir(ws + "/.git")
        b = pid_name(w, "ph-host")
        w.s.start(b, ["/bin/sh", "-c", slow.format(secs=6)], cwd=uri(ws),
                  sandbox=policy("ww", ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
        loop_started(w.s, b)
        os.rmdir(ws + "/.git")
        out = w.s.collect_until_closed(b, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        if IS_REF:
            print("    [%s] reference: exit %s, %s" % (mode[0], out["exit_code"],
                                                      "planted" if "PLANTED" in text
                                                      else "nothing planted"))
        else:
            # without namespaces there is no mount to lose: the broker refuses the name
            # whatever the host did, so the command goes on and plants nothing
            v.check(mode, "ended", no_namespaces(w) or
                    ("sandbox ended" in text and out["exit_code"] == 137),
                    "the sandbox went on after losing a mount: exit %s, %s" % (
                        out["exit_code"], text[-300:]))
            v.check(mode, "planted", "PLANTED" not in text, text[-300:])
            for name in PROTECTED:
                p = os.path.join(ws, name)
                v.check(mode, name, not os.path.lexists(p) or not os.listdir(p),
                        "%s holds something on the host" % name)
        # a warm fs helper whose view lost the name
        ws = w.fresh_ws()
        w.mkdir(ws + "/.git")
        sb = policy("ww", ws, mode[2])
        w.s.call("fs/writeFile", {"path": uri(ws + "/control"), "dataBase64": b64("c"),
                                  "sandbox": sb})
        os.rmdir(ws + "/.git")
        for _ in range(2):
            w.s.request("fs/createDirectory", {"path": uri(ws + "/.git/hooks"),
                                               "recursive": True, "sandbox": sb})
            w.s.request("fs/writeFile", {"path": uri(ws + "/.git/config"),
                                         "dataBase64": b64("x"), "sandbox": sb})
        planted = os.path.isdir(ws + "/.git") and os.listdir(ws + "/.git")
        if IS_REF:
            print("    [%s] reference fs: %s" % (mode[0], planted or "nothing planted"))
        else:
            v.check(mode, "fs helper", not planted, "written through fs/*: %s" % planted)
    v.done()


@needs_own_server
def test_protected_name_renamed_on_the_host(_):
    """Issue 33 red team: an existing protected directory renamed on the host (a user's
    `mv .git .git.bak`, `git init --separate-git-dir`, another program moving its
    placeholder aside). The kernel does not detach the sandbox's read-only mount: it moves
    with the directory (mountinfo then shows `.git.bak` as its mount point), the mount
    table's change counter does not move, so the init's watch sees nothing, and `.git` is
    free in the sandbox for as long as it runs. Ours planted .git/config and a hook with
    the same slow loop the removal case stops."""
    w = world()
    v = Verdicts()
    slow = PLANT.replace("fi; done;", "fi; sleep 0.1; done;")
    mode = MODES[1]
    ws = w.fresh_ws()
    w.mkdir(ws + "/.git")
    pid = pid_name(w, "ph-moved")
    w.s.start(pid, ["/bin/sh", "-c", slow.format(secs=3)], cwd=uri(ws),
              sandbox=policy("ww", ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
    loop_started(w.s, pid)
    os.rename(ws + "/.git", ws + "/.git.bak")
    out = w.s.collect_until_closed(pid, timeout=60)
    text = (out["stdout"] + out["stderr"]).decode(errors="replace")
    planted = os.path.isdir(ws + "/.git") and sorted(os.listdir(ws + "/.git"))
    if IS_REF:
        print("    [%s] reference: %s" % (mode[0], planted or "nothing planted"))
    else:
        v.check(mode, "renamed .git", not planted and "PLANTED-git" not in text,
                "planted after the host moved .git: %s (exit %s)" % (planted, out["exit_code"]))
    v.done()


@needs_own_server
def test_protected_name_removed_under_a_tight_loop(_):
    """Issue 33 red team: the same removal as above, against a command that does not sleep:
    four processes loop on mkdir(".git") and write .git/config the moment one succeeds.
    The init ends the sandbox when it sees the mount table change, but the name is free
    from the host's rmdir on, and the kill comes a scheduler wake-up later (a child of the
    command had 1 to 11 ms; with every process killed at once, about one round in three
    still plants). No mount or Landlock rule can keep a name that does not exist
    (SANDBOX.md, known holes). What ours guarantees, and this asserts: the sandbox ends at
    once, and with every process gone a name made again is moved aside (nothing planted is
    left where git reads it) and named on the command's standard error. Whether the loop
    won the race is printed. The reference's sandbox goes on (it plants at once)."""
    w = world()
    v = Verdicts()
    mode = MODES[1]
    for rnd in range(3):
        ws = w.fresh_ws()
        w.mkdir(ws + "/.git")
        pid = pid_name(w, "ph-race")
        w.s.start(pid, [w.probe, "plant=.git:3:4"], cwd=uri(ws),
                  sandbox=policy("ww", ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
        time.sleep(0.7)  # sleep-ok: the loops are running; the host acts then
        os.rmdir(ws + "/.git")
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        aside = ws + "/.git.quarantined-by-exec-server.1"
        remade = os.path.exists(ws + "/.git")
        planted = os.path.exists(ws + "/.git/config")
        if IS_REF:
            print("    [%s] reference, round %d: %s" % (mode[0], rnd, "planted .git/config"
                                                      if planted else "nothing planted"))
            break
        print("    [%s] round %d: %s" % (mode[0], rnd, "the loop made .git again: moved aside"
                                         if os.path.exists(aside) else "nothing made"))
        v.check(mode, "round %d: the sandbox ends" % rnd, no_namespaces(w) or
                (out["exit_code"] == 137 and "sandbox ended" in text),
                "went on: exit %s, %s" % (out["exit_code"], text[-300:]))
        v.check(mode, "round %d: nothing left where git reads" % rnd, not remade,
                ".git exists again (%s): %s" % ("with config" if planted else "empty",
                                                text[-400:]))
        v.check(mode, "round %d: a name moved aside is reported" % rnd,
                not os.path.exists(aside) or ("moved to " + aside) in text,
                "moved aside silently: %s" % text[-400:])
    v.done()


def attack_server(w, mode, ws, target, extra=None, env=None, how="direct", proxy=None):
    """Runs server_attack.py in a sandbox of mode against the WebSocket at target
    (host, port); returns (its JSON result or {}, the marker path, the output text). The
    marker is written by the unsandboxed process it asks for, outside every root."""
    marker = "%s/pwned-%s-%d" % (w.markers, w.tag, STEP[0])
    spec = {"host": target[0], "port": target[1], "marker": marker, "via": how}
    if proxy:
        spec["proxy"] = proxy
    pid = pid_name(w, "srv-attack")
    envd = {"PATH": "/usr/bin:/bin"}
    envd.update(env or {})
    params = dict(extra or {})
    params.setdefault("sandbox", policy(mode[1], ws, mode[2]))
    w.s.start(pid, ["/usr/bin/python3", w.attack, json.dumps(spec)], cwd=uri(ws), env=envd,
              **params)
    out = w.s.collect_until_closed(pid, timeout=60)
    text = (out["stdout"] + out["stderr"]).decode(errors="replace")
    try:
        res = json.loads(out["stdout"].decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {}
    # (the attacker waits for its process's close, so a marker is there by now)
    return res, marker, text


def server_port(w):
    return int(w.srv.url.rsplit(":", 1)[1].split("/")[0])


@needs_own_server
def test_server_unreachable_with_the_network_enabled(_):
    """Issue 33: with the network enabled a sandboxed command shares the host's network;
    the loopback WebSocket has no authentication, so it could connect to its own server and
    ask for an unsandboxed process/start. Ours refuses a connect to any of the server's
    listening ports, on every address (127.0.0.1, 127.0.0.2, ::ffff:127.0.0.1, 0.0.0.0),
    and to another sandbox's managed proxy; a positive control connects to a host daemon.
    The reference lets the command in (a reference escape: SANDBOX.md)."""
    w = world()
    v = Verdicts()
    mode = MODES[2]  # WorkspaceWrite+net
    port = server_port(w)
    for host in ("127.0.0.1", "127.0.0.2", "::ffff:127.0.0.1", "0.0.0.0"):
        ws = w.fresh_ws()
        res, marker, text = attack_server(w, mode, ws, (host, port))
        ran = os.path.exists(marker)
        if IS_REF:
            print("    [%s] reference via %s: %s" % (mode[0], host, "ESCAPED (unsandboxed "
                  "process ran)" if ran else res.get("error", res.get("stage"))))
            continue
        v.check(mode, "server via " + host, not ran and res.get("stage") == "connect" and
                "refused" in res.get("error", "").lower(),
                "reached the server: %s %s" % (res, text[-300:]))
    # The guard must connect the very socket it looked at: another task sharing the
    # descriptor table swaps an IP socket into the slot of a Unix one it let through
    # (ours let the kernel continue such a call and reached the WebSocket in ~100
    # tries). A connect from a second thread is the positive control (ours answered
    # ESRCH: a thread has no pidfd of its own before Linux 6.9 without PIDFD_THREAD).
    ws = w.fresh_ws()
    res, text = probe(w, mode, ["connect_swap=127.0.0.1:%d" % port,
                                "connect_thread=127.0.0.1:%d" % w.tcp_port], ws)
    got = res.get("connect_swap", ("missing", ""))
    if IS_REF:
        print("    [%s] reference, descriptor swapped under the guard: %s %s" % (
            mode[0], got[0], got[1]))
    else:
        v.check(mode, "server through a swapped descriptor", got[0] == "ECONNREFUSED",
                "reached the server: %s %s" % got)
    got = res.get("connect_thread", ("missing", ""))
    v.check(mode, "control: a connect from a second thread", got[0] == "ok",
            "refused: %s %s" % got)
    # a listener of another sandbox's managed proxy
    pid = pid_name(w, "np-holder")
    np = {"proxy": {"enabled": True, "enableSocks5": True, "enableSocks5Udp": False,
                    "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                    "mode": "full", "domains": {"localhost": "allow", "127.0.0.1": "allow"},
                    "unixSockets": None,
                    "allowLocalBinding": True}}
    w.s.start(pid, ["/bin/sh", "-c", "echo $HTTP_PROXY; sleep 30"], networkProxy=np,
              env={"PATH": "/usr/bin:/bin"})
    w.s.wait_for(lambda: b"\n" in w.s.output_so_far(pid)["stdout"], what="the proxy address")
    proxy = w.s.output_so_far(pid)["stdout"].decode().split()[0].split("://")[-1].rstrip("/")
    ws = w.fresh_ws()
    res, marker, text = attack_server(w, mode, ws, ("127.0.0.1", port), how="connect",
                                      proxy=proxy)
    if IS_REF:
        print("    [%s] reference through another proxy: %s" % (
            mode[0], "ESCAPED" if os.path.exists(marker) else res))
    else:
        v.check(mode, "another sandbox's proxy", not os.path.exists(marker) and
                res.get("stage") == "connect" and "refused" in res.get("error", "").lower(),
                "reached it: %s" % res)
    w.s.call("process/terminate", {"processId": pid})
    # the positive control: a host daemon on loopback is reachable
    ws = w.fresh_ws()
    res, marker, text = attack_server(w, mode, ws, ("127.0.0.1", w.tcp_port))
    v.check(mode, "control", res.get("stage") != "connect" or "error" not in res,
            "a host daemon was not reachable: %s %s" % (res, text[-300:]))
    v.done()


def managed(domains, local=True, socks=True, timeout=None):
    p = {"proxy": {"enabled": True, "enableSocks5": socks, "enableSocks5Udp": False,
                   "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                   "mode": "full", "domains": domains, "unixSockets": None,
                   "allowLocalBinding": local}}
    if timeout is not None:
        p["policyDecisionTimeoutMs"] = timeout
    return p


@needs_own_server
def test_managed_proxy_refuses_the_server(_):
    """Issue 33: the managed proxy refuses the server's own ports whatever the policy
    (`localhost` and `127.0.0.1` allowed, local binding allowed) or the client's decision
    says, over HTTP CONNECT and SOCKS5, from a sandboxed command (enforceManagedNetwork).
    The reference forwards it (a reference escape; it is shown through an unsandboxed
    command with the proxy variables, as its bubblewrap bridge cannot run on this host)."""
    w = world()
    v = Verdicts()
    port = server_port(w)
    mode = MODES[1]  # WorkspaceWrite, network restricted, managed proxy
    cases = [("policy allows localhost", managed({"localhost": "allow", "127.0.0.1": "allow"}),
              None),
             ("the client allows it", managed({}, timeout=20000), "allow")]
    for what, np, answer in cases:
        for how, var in (("connect", "HTTP_PROXY"), ("socks", "ALL_PROXY")):
            ws = w.fresh_ws()
            extra = {"networkProxy": np}
            if not IS_REF:
                extra.update(sandbox=policy("ww", ws), enforceManagedNetwork=True)
            else:
                extra["sandbox"] = None
            marker = "%s/pwned-%s-%d" % (w.markers, w.tag, STEP[0])
            spec = {"host": "localhost" if how == "socks" else "127.0.0.1", "port": port,
                    "marker": marker, "via": how}
            pid = pid_name(w, "np-attack")
            script = ("import os,json,sys,subprocess; u=os.environ['%s']; "
                      "spec=json.loads(sys.argv[1]); "
                      "spec['proxy']=u.split('://')[-1].rstrip('/'); "
                      "os.execv('/usr/bin/python3', ['python3', sys.argv[2], json.dumps(spec)])"
                      % var)
            w.s.start(pid, ["/usr/bin/python3", "-c", script, json.dumps(spec), w.attack],
                      cwd=uri(ws), env={"PATH": "/usr/bin:/bin"}, **extra)
            deadline = time.monotonic() + 60 * TIMEOUT_SCALE
            while True:
                m = w.s.pump(max(0.1, deadline - time.monotonic()))
                if m is None or time.monotonic() > deadline:
                    break
                if m.get("method") == "network/policyRequest" and answer:
                    w.s.send_obj({"id": m["id"], "result": {"decision": {"type": answer}}})
                if m.get("method") == "process/closed" and m["params"]["processId"] == pid:
                    break
            out = w.s.output_so_far(pid)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
            ran = os.path.exists(marker)
            if IS_REF:
                print("    [%s] reference, %s, %s: %s" % (mode[0], what, how, "ESCAPED "
                      "(unsandboxed process ran)" if ran else text.strip()[-200:]))
                continue
            v.check(mode, "%s over %s" % (what, how), not ran and "refused" in text.lower(),
                    "reached the server: %s" % text[-300:])
    v.done()


@needs_own_server
def test_process_flood(_):
    """Issue 33: a fork bomb in a sandbox meets a cap on its processes, with the usual
    "Resource temporarily unavailable" (EAGAIN) a shell shows; a build's worth of
    processes (200 at once) does not. The reference has no cap (3,000 forks succeeded)."""
    w = world()
    v = Verdicts()
    script = ("import os,sys,time\n"
              "want=int(sys.argv[1]); n=0; err=''\n"
              "for i in range(want):\n"
              "    try:\n"
              "        pid=os.fork()\n"
              "    except OSError as e:\n"
              "        err=e.strerror; break\n"
              "    if pid==0:\n"
              "        time.sleep(30); os._exit(0)\n"
              "    n+=1\n"
              "print('forked', n, err, flush=True)\n")
    # Without namespaces the cap is a pids cgroup, which only a root server can make:
    # RLIMIT_NPROC counts every process of the uid there, the server's included.
    uncapped = no_namespaces(w) and w.unprivileged
    # A server of its own with a cap of 1,024 rather than 4,096: the same cap, met a
    # quarter as slowly (three floods of thousands of processes were the suite's
    # longest minutes on two cores).
    srv = w.start_server(extra_args=["--sandbox-max-processes", "1024"])
    shared, w.s = w.s, srv.session()
    try:
        flood_attempts(w, v, script, uncapped)
    finally:
        w.s = shared
        srv.stop()
    v.done()


def flood_attempts(w, v, script, uncapped):
    for mode in MODES:
        for want, flood in ((200, False), (6000, True)):
            if flood and uncapped:
                print("    [%s] fork bomb: not tried (namespace-only without a pids cgroup: the "
                      "cap is RLIMIT_NPROC in a user namespace of the sandbox's own)" % mode[0])
                continue
            ws = w.fresh_ws()
            out, text = shell(w, mode, "/usr/bin/python3 -c \"$S\" %d" % want, ws,
                              env={"S": script})
            m = re.search(r"forked (\d+) ?(.*)", text)
            if IS_REF:
                print("    [%s] reference, %d wanted: %s" % (mode[0], want,
                                                            m.group(0) if m else text[-200:]))
                continue
            if not m:
                v.fail(mode, "flood", "no answer: %s" % text[-300:])
                continue
            n = int(m.group(1))
            if flood:
                v.check(mode, "fork bomb", n < want and "temporarily unavailable" in m.group(2),
                        "no cap met: %s" % m.group(0))
            else:
                v.check(mode, "a build's worth", n == want, "capped too low: %s" % m.group(0))
    # The cap must hold where the view shows cgroupfs as the host has it (a full-disk
    # policy, network restricted): a root server's cap is a pids cgroup, and cgroup v1
    # lets a task of the same uid move itself to another one (ours let it: 6,000 forks),
    # by cgroup.procs or, a thread at a time, by tasks ("0": the writer).
    # Deepest first, so a move that works at all ends at a hierarchy's root (no cap).
    leave = ("import glob,os\n"
             "for f in sorted(glob.glob('/sys/fs/cgroup/**/cgroup.procs', recursive=True) + "
             "glob.glob('/sys/fs/cgroup/**/tasks', recursive=True), key=len, reverse=True):\n"
             "    try:\n"
             "        open(f, 'w').write('0' if f.endswith('tasks') else str(os.getpid())); "
             "print('moved to', f)\n"
             "    except OSError:\n"
             "        pass\n")
    # The same with the cgroup file systems inside a writable root of a restricted
    # policy: only there, or with "/" writable, does the view keep the host's flags
    # (the server looks nowhere else, and a cgroup mount found there is sealed).
    cgroupfs_root = {"type": "restricted", "entries": [
        {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
        {"path": {"type": "path", "path": uri("/sys/fs/cgroup")}, "access": "write"}]}
    for name, fs in (("full disk", {"type": "unrestricted"}),
                     ("cgroupfs in a writable root", cgroupfs_root)):
        if uncapped:
            break
        mode = (name, "-", RESTRICTED)
        ws = w.fresh_ws()
        pid = pid_name(w, "flood-out")
        sb = {"permissions": {"type": "managed", "file_system": fs, "network": RESTRICTED},
              "windowsSandboxLevel": "disabled", "cwd": uri(ws)}
        w.s.start(pid, ["/usr/bin/python3", "-c", leave + script, "6000"], cwd=uri(ws),
                  sandbox=sb, env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        m = re.search(r"forked (\d+) ?(.*)", text)
        if IS_REF:
            print("    [%s] reference: %s" % (mode[0], m.group(0) if m else text[-200:]))
        else:
            v.check(mode, "fork bomb after leaving its cgroup", m and int(m.group(1)) < 6000 and
                    "temporarily unavailable" in m.group(2), "no cap met: %s" % text[-300:])


@needs_own_server
def test_fs_path_tricks(_):
    """Sandboxed fs/* with `..`, percent-encoded dots and slashes, /proc/self/root, and
    /proc/<server>/environ: nothing outside the root is written, no secret is read."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        sb = policy(mode[1], ws, mode[2])
        rel_out = os.path.relpath(w.out, ws)
        targets = [
            "file://" + ws + "/../" + os.path.relpath(w.out, os.path.dirname(ws)) + "/dotdot",
            "file://" + ws + "/%2e%2e/" + os.path.relpath(w.out, os.path.dirname(ws)) + "/pct",
            "file://" + ws + "/%2E%2E%2F" + os.path.relpath(w.out, os.path.dirname(ws)) +
            "/pct2",
            "file://" + ws + "/" + rel_out.replace("/", "%2F") + "/pct3",
            "file:///proc/self/root" + w.out + "/procroot",
            "file:///proc/%d/root%s/srvroot" % (w.srv.inner_pid, w.out),
            "file://" + w.out + "/plain",
        ]
        for t in targets:
            m = w.s.request("fs/writeFile", {"path": t, "dataBase64": b64("x"), "sandbox": sb})
            v.check(mode, "fs/writeFile " + t, "error" in m, "succeeded")
        for name in ("dotdot", "pct", "pct2", "pct3", "procroot", "srvroot", "plain"):
            v.check(mode, "outside/" + name, not os.path.exists(w.out + "/" + name),
                    "written outside the root")
        m = w.s.request("fs/createDirectory", {"path": "file://" + ws + "/../escape-dir",
                                               "sandbox": sb})
        v.check(mode, "fs/createDirectory ..", not os.path.exists(
            os.path.join(os.path.dirname(ws), "escape-dir")), "created: %s" % m)
        for path, secret in [("/proc/%d/environ" % w.srv.inner_pid, SERVER_SECRET),
                             ("/proc/%d/environ" % w.unrelated.pid, SECRET),
                             ("/proc/%d/root/proc/%d/environ" % (w.srv.inner_pid,
                                                                 w.srv.inner_pid),
                              SERVER_SECRET)]:
            m = w.s.request("fs/readFile", {"path": uri(path), "sandbox": sb})
            data = unb64(m["result"]["dataBase64"]) if "result" in m else b""
            if IS_REF:
                # the reference's sandboxed reads see the host's /proc: a hole of its own
                print("    [%s] fs/readFile %s -> %s (reference-allowed: its fs reads are "
                      "not in a PID namespace)" % (mode[0], path, "secret read" if
                                                   secret.encode() in data else "no secret"))
                continue
            v.check(mode, "fs/readFile " + path, secret.encode() not in data,
                    "the secret was read")
    v.done()


@needs_own_server
def test_links_out_of_root(_):
    """Symlink, hard link and rename out of the writable root, and writes outside it."""
    w = world()
    ww = {"ro": FS, "ww": OK}
    cases = [
        ("symlink={out}/file:{ws}/lnk", "symlink", ww),
        ("write={ws}/lnk", "write", FS),
        ("symlink={out}:{ws}/dirlnk", "symlink#2", ww),
        ("write={ws}/dirlnk/through", "write#2", FS),
        ("link={out}/file:{ws}/hard", "link", FS),
        ("write={ws}/hard", "write#3", None),  # a new file unless the link was made
        ("rename={out}/file:{ws}/moved-in", "rename", FS),
        ("write={ws}/mine", "write#4", ww),
        ("rename={ws}/mine:{out}/moved-out", "rename#2", FS),
        ("write={out}/new", "write#5", FS),
        ("write=/proc/self/root{out}/procroot", "write#6", FS),
        ("mkdir={out}/newdir", "mkdir", FS),
        ("unlink={out}/file", "unlink", FS),
        ("chmod={out}/file", "chmod", FS),
    ]
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        mcases = [(a, k, e[mode[1]] if isinstance(e, dict) else e) for a, k, e in cases]
        res, text = probe(w, mode, [a.format(ws=ws, out=w.out) for a, _, _ in mcases], ws)
        judge(v, mode, res, [(k, e) for _, k, e in mcases])
        v.check(mode, "outside/file", open(w.out + "/file").read() == "outside",
                "changed on the host")
        v.check(mode, "outside", sorted(os.listdir(w.out)) == ["daemon.sock", "file",
                                                               "secret.txt"],
                "outside changed: %s" % sorted(os.listdir(w.out)))
        v.check(mode, "outside/file mode", os.stat(w.out + "/file").st_mode & 0o777 == 0o644,
                "mode changed")
        if mode[1] == "ww":
            # a symlink planted by the sandboxed command, then followed by a sandboxed fs
            # request
            sb = policy("ww", ws, mode[2])
            m = w.s.request("fs/writeFile", {"path": uri(ws + "/dirlnk/via-fs"),
                                             "dataBase64": b64("x"), "sandbox": sb})
            v.check(mode, "fs/writeFile through a planted symlink", "error" in m and
                    not os.path.exists(w.out + "/via-fs"), "written outside: %s" % m)
    v.done()


def nested_policy(grant, ws, network="restricted"):
    """Root readable, `grant` writable, and the workspace `ws` (a directory under grant)
    writable as the project root: a writable root nested in another, as /tmp with a
    workspace under it, or TMPDIR under /tmp."""
    entries = [special("root"), {"path": {"type": "path", "path": uri(grant)},
                                 "access": "write"}, special("project_roots", "write")]
    return {"permissions": {"type": "managed", "file_system": {"type": "restricted",
                                                               "entries": entries},
                            "network": network},
            "windowsSandboxLevel": "disabled", "cwd": uri(ws), "workspaceRoots": [uri(ws)]}


@needs_own_server
def test_writable_root_through_a_planted_symlink(_):
    """A writable root inside another (a workspace under a writable /tmp, TMPDIR under
    /tmp): a sandboxed command moves the inner root's parent aside and leaves a symlink
    where the inner root was, pointing at a host directory of its choosing (/root, /etc,
    ~/.ssh; here one outside every root). The next start with the same policy must not
    make the link's target writable: ours refuses the policy, in the words the reference
    uses for a read-only path ("cannot enforce sandbox writable path ... because it
    crosses writable symlink ..."), and so do sandboxed fs requests. The reference
    follows the link and writes there (a hole it has: printed)."""
    w = world()
    v = Verdicts()
    for mode in [m for m in MODES if m[1] == "ww"]:
        d = w.mkdir(tempfile.mkdtemp(prefix="nest-", dir=w.top))
        grant = w.mkdir(d + "/grant")
        ws = w.mkdir(w.mkdir(grant + "/proj") + "/ws")
        target = w.mkdir(tempfile.mkdtemp(prefix="target-", dir=w.out))
        sb = nested_policy(grant, ws, mode[2])
        script = ("cd / && mv {g}/proj {g}/proj.moved && mkdir {g}/proj && "
                  "ln -s {t} {g}/proj/ws && echo planted").format(g=grant, t=target)
        pid = pid_name(w, "plant")
        w.s.start(pid, ["/bin/sh", "-c", script], cwd=uri(ws), sandbox=sb,
                  env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        if no_namespaces(w) and "planted" not in text and os.path.isdir(ws + "/.."):
            # the broker keeps a directory holding another root's protected names from
            # moving (they would lose their protection at the new name)
            v.check(mode, "plant refused", not os.path.islink(ws), text)
            print("    [%s] the move that plants the link is refused: %s" % (mode[0],
                                                                         text.strip()[-200:]))
            continue
        v.check(mode, "plant", "planted" in text and os.path.islink(ws),
                "the setup did not plant the link (a control): %s" % text)
        # the same policy again, as the client sends it for the next command
        pid = pid_name(w, "through")
        r = w.s.request("process/start", {
            "processId": pid, "argv": ["/bin/sh", "-c", "echo pwned > %s/escaped; "
                                       "echo pwned > escaped-cwd" % ws],
            "cwd": uri(ws), "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "sandbox": sb})
        text, code = json.dumps(r.get("error")), None
        if "error" not in r:
            out = w.s.collect_until_closed(pid, timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
            code = out["exit_code"]
        m = w.s.request("fs/writeFile", {"path": uri(ws + "/escaped-fs"),
                                         "dataBase64": b64("x"), "sandbox": sb})
        written = sorted(os.listdir(target))
        if IS_REF:
            print("    [%s] reference: %s" % (mode[0], "wrote %s outside every root through "
                                              "the link" % written if written else
                                              "nothing written outside (%s)" % text[-200:]))
            continue
        v.check(mode, "through the link", not written,
                "written outside every root through the planted link: %s" % written)
        want = "cannot enforce sandbox writable path %s because it crosses writable " \
               "symlink %s" % (ws, ws)
        v.check(mode, "refused", want in text and code == 1,
                "not refused as the reference refuses a read-only path: exit %s, %s" % (
                    code, text[-300:]))
        v.check(mode, "fs refused", want in json.dumps(m.get("error")), "fs/writeFile: %s" % m)
    v.done()


@needs_own_server
def test_carve_out_through_a_planted_symlink(_):
    """A deny (and a read-only) entry two levels under the writable workspace: the command
    moves the entry's parent aside (its cover moves along) and plants a symlink on the
    entry's path. The next sandbox with the same policy must not cover the link's target
    and leave the moved original open: the secret is read, the read-only file written.
    The reference refuses such a policy ("cannot enforce sandbox deny-read path ...
    because it crosses writable symlink ...")."""
    w = world()
    v = Verdicts()
    for mode in [m for m in MODES if m[1] == "ww"]:
        ws = w.fresh_ws()
        w.mkdir(ws + "/a")
        w.mkdir(ws + "/a/secret")
        w.write(ws + "/a/secret/s.txt", SECRET)
        w.mkdir(ws + "/a/ro")
        w.write(ws + "/a/ro/f.txt", "original")
        sb = policy("ww", ws, mode[2])
        sb["permissions"]["file_system"]["entries"] += [
            {"path": {"type": "path", "path": uri(ws + "/a/secret")}, "access": "none"},
            {"path": {"type": "path", "path": uri(ws + "/a/ro")}, "access": "read"}]
        decoy = w.mkdir(tempfile.mkdtemp(prefix="decoy-", dir=w.out))
        script = ("cat a/secret/s.txt; echo x > a/ro/f.txt; mv a b && mkdir a && "
                  "ln -s {d} a/secret && ln -s {d} a/ro && echo planted").format(d=decoy)
        pid = pid_name(w, "plant")
        w.s.start(pid, ["/bin/sh", "-c", script], cwd=uri(ws), sandbox=sb,
                  env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        if no_namespaces(w) and "planted" not in text:
            # the broker keeps the entries' parent from moving (it holds a deny and a
            # read-only entry, which would not follow it)
            v.check(mode, "plant refused", SECRET not in text and
                    open(ws + "/a/ro/f.txt").read() == "original" and not os.path.exists(ws + "/b"),
                    text)
            print("    [%s] the move that plants the links is refused: %s" % (
                mode[0], text.strip()[-200:]))
            continue
        v.check(mode, "control", "planted" in text and SECRET not in text and
                open(ws + "/b/ro/f.txt").read() == "original",
                "the first sandbox did not hold or did not plant: %s" % text)
        pid = pid_name(w, "through")
        r = w.s.request("process/start", {
            "processId": pid, "argv": ["/bin/sh", "-c", "cat b/secret/s.txt; "
                                       "echo changed > b/ro/f.txt"],
            "cwd": uri(ws), "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "sandbox": sb})
        text = ""
        if "error" not in r:
            out = w.s.collect_until_closed(pid, timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        print("    [%s] the next start: %s" % (mode[0], (text or json.dumps(r)).strip()[-300:]))
        v.check(mode, "deny entry moved", SECRET not in text,
                "the denied file was read at its new place")
        v.check(mode, "read-only entry moved", open(ws + "/b/ro/f.txt").read() == "original",
                "the read-only file was written at its new place")
        m = w.s.request("fs/readFile", {"path": uri(ws + "/b/secret/s.txt"), "sandbox": sb})
        data = unb64(m["result"]["dataBase64"]) if "result" in m else b""
        v.check(mode, "fs/readFile", SECRET.encode() not in data,
                "the denied file was read at its new place")
    v.done()


def later_secret_run(w, mode, ws, sb, target, script):
    """Starts `script` under sb (it waits for a line on its stdin), then writes the secret
    to target as the host would (after the start: the view, the glob scan and the helper
    are all made by then) and lets the script go. A warm helper with the same policy has served
    a request before. Returns the command's output text."""
    m = w.s.request("fs/readFile", {"path": uri(ws + "/readme.txt"), "sandbox": sb})
    assert "result" in m, "the helper did not serve a plain read: %s" % m
    pid = pid_name(w, "later")
    w.s.start(pid, ["/bin/sh", "-c", "read go; " + script],
              cwd=uri(ws), sandbox=sb, env={"PATH": "/usr/bin:/bin"})
    w.write(target, SECRET)
    w.s.write(pid, b"go\n", write_id="go-" + pid)
    out = w.s.collect_until_closed(pid, timeout=60)
    return (out["stdout"] + out["stderr"]).decode(errors="replace")


def later_secret_fs(v, w, mode, ws, sb, target):
    """The warm helper's fs/readFile and fs/copy of target, and of a host's link to it."""
    os.symlink(target, ws + "/link-to-secret")
    for what, method, params in [
            ("fs/readFile", "fs/readFile", {"path": uri(target)}),
            ("fs/readFile through a link", "fs/readFile", {"path": uri(ws + "/link-to-secret")}),
            ("fs/copy", "fs/copy", {"sourcePath": uri(target),
                                    "destinationPath": uri(ws + "/fs-copy.txt")})]:
        params["sandbox"] = sb
        m = w.s.request(method, params)
        data = unb64(m["result"].get("dataBase64", "")) if "result" in m else b""
        copied = os.path.exists(ws + "/fs-copy.txt") and SECRET in open(ws + "/fs-copy.txt").read()
        v.check(mode, what, "error" in m and SECRET.encode() not in data and not copied,
                "the denied file was served: %s" % json.dumps(m)[:300])


def later_secret_command(v, mode, ws, text, target):
    if IS_REF:
        print("    [%s] reference command: %s" % (mode[0], text.strip()[-300:]))
        return
    v.check(mode, "command", SECRET not in text, "the command read it: %s" % text[-300:])
    for name in ("copy.txt", "moved.txt", "hard.txt"):
        p = os.path.join(ws, name)
        v.check(mode, name, not os.path.exists(p) or SECRET not in open(p).read(),
                "the command copied it to %s" % name)
    v.check(mode, "still there", os.path.exists(target), "the command moved it away")


LATER_SCRIPT = ("cat {t}; cp {t} copy.txt; mv {t} moved.txt && cat moved.txt; "
                "ln {t} hard.txt && cat hard.txt; echo done")


@needs_own_server
def test_deny_entry_for_a_later_file(_):
    """A deny entry for a path that does not exist when the command starts: the host
    writes a secret there afterwards. Neither the command (cat, cp, mv, ln) nor a warm
    fs helper with the same policy (fs/readFile, through a link, fs/copy) gets it. The
    reference's fs requests refuse (-32600); its command, as root, reads the file."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        w.write(ws + "/readme.txt", "hello")
        target = ws + "/late.env"
        sb = policy(mode[1], ws, mode[2])
        sb["permissions"]["file_system"]["entries"].append(
            {"path": {"type": "path", "path": uri(target)}, "access": "none"})
        text = later_secret_run(w, mode, ws, sb, target, LATER_SCRIPT.format(t="late.env"))
        later_secret_command(v, mode, ws, text, target)
        later_secret_fs(v, w, mode, ws, sb, target)
    v.done()


@needs_own_server
def test_deny_glob_for_a_later_file(_):
    """A `**/*.env` none glob, and W/sub/new.env made by the host after the start: the
    glob is matched whenever a path is asked, not only at start. The reference's fs
    requests refuse; its command reads the file."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        w.write(ws + "/readme.txt", "hello")
        w.mkdir(ws + "/sub")
        target = ws + "/sub/new.env"
        sb = policy(mode[1], ws, mode[2])
        sb["permissions"]["file_system"]["entries"].append(
            {"path": {"type": "glob_pattern", "pattern": "**/*.env"}, "access": "none"})
        text = later_secret_run(w, mode, ws, sb, target, LATER_SCRIPT.format(t="sub/new.env"))
        later_secret_command(v, mode, ws, text, target)
        later_secret_fs(v, w, mode, ws, sb, target)
    v.done()


def answer_or_unstick(w, rid, fifo):
    """The reply to request rid within 10 s, or None: then the FIFO goes (a writer lets
    the open waiting on it return, and it is removed before the writer closes, so the
    reader sees the end and nothing opens it again) and a server stuck on it goes on
    with the rest of the suite."""
    try:
        return w.s.wait_response(rid, timeout=10)
    except WaitFailed:
        if os.path.lexists(fifo):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                fd = None
            os.unlink(fifo)
            if fd is not None:
                os.close(fd)
        w.s.wait_response(rid, timeout=30)
        return None


@needs_own_server
def test_fifo_where_the_server_reads(_):
    """A sandboxed command makes a FIFO named .git in a directory of its writable
    workspace (another policy's root: a subproject, a second session's workspace under
    the same writable tree). Resolving that other policy reads `.git` on the server's
    side (a `.git` file names a worktree's git dir): opening the FIFO for reading waited
    for a writer on the loop thread and the whole server stopped answering, every
    session included. The start and a sandboxed fs request must be answered, and a
    second session served meanwhile."""
    w = world()
    v = Verdicts()
    for mode in [m for m in MODES if m[1] == "ww"]:
        ws = w.fresh_ws()
        sub = w.mkdir(ws + "/sub")
        fifo = sub + "/.git"
        pid = pid_name(w, "fifo")
        w.s.start(pid, ["/bin/sh", "-c", "mkfifo sub/.git && echo made"], cwd=uri(ws),
                  sandbox=policy("ww", ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        v.check(mode, "control", "made" in text and os.path.exists(fifo),
                "the FIFO was not made: %s" % text)
        sb = policy("ww", sub, mode[2])
        pid = pid_name(w, "sub")
        rid = w.s.send_request("process/start", {
            "processId": pid, "argv": ["/bin/true"], "cwd": uri(sub),
            "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "sandbox": sb})
        wid = w.s.send_request("fs/writeFile", {"path": uri(sub + "/f"),
                                                "dataBase64": b64("x"), "sandbox": sb})
        try:
            s2 = w.srv.session(timeout=5)
            other = s2.request("fs/getMetadata", {"path": uri(ws)}, timeout=5)
            s2.close()
        except Exception as e:  # noqa: a stuck server fails in several ways
            other = repr(e)[:200]
        reply = answer_or_unstick(w, rid, fifo)
        wrote = answer_or_unstick(w, wid, fifo)
        v.check(mode, "another session", isinstance(other, dict) and "result" in other,
                "not served while the other session's requests were pending: %s" % other)
        v.check(mode, "process/start", reply is not None and "result" in reply,
                "no reply in 10 s: the server is stuck (%s)" % reply)
        v.check(mode, "fs/writeFile", wrote is not None and "result" in wrote,
                "no reply in 10 s: the server is stuck (%s)" % wrote)
        if reply is not None and "result" in reply:
            w.s.collect_until_closed(pid, timeout=60)
    v.done()


def reply_or_release(w, rid, fifo):
    """The reply to request rid within 10 s, or None: then a reader opens the FIFO (the
    open waiting on it returns), the FIFO is removed and the reply awaited, so that a
    stuck writer goes on with the rest of the suite."""
    try:
        return w.s.wait_response(rid, timeout=10)
    except WaitFailed:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if os.path.lexists(fifo) else None
        if fd is not None:
            os.unlink(fifo)
        try:
            w.s.wait_response(rid, timeout=30)
        finally:
            if fd is not None:
                os.close(fd)
        return None


@needs_own_server
def test_fifo_where_the_client_writes(_):
    """A sandboxed command leaves a FIFO where the client will write (a file the agent
    edits next). fs/writeFile wrote such a path in place with a blocking open, which
    waits for a reader: with the sandbox, the policy's helper (shared by every session
    using that policy) stopped serving; without, a pool thread of the server's four was
    held for good. Both must be answered at once (ENXIO: no reader), and the helper go
    on serving. The reference waits in both (printed)."""
    w = world()
    v = Verdicts()
    for mode in [m for m in MODES if m[1] == "ww"]:
        ws = w.fresh_ws()
        fifo = ws + "/edit-me.txt"
        sb = policy("ww", ws, mode[2])
        pid = pid_name(w, "fifo")
        w.s.start(pid, ["/bin/sh", "-c", "mkfifo edit-me.txt && echo made"], cwd=uri(ws),
                  sandbox=sb, env={"PATH": "/usr/bin:/bin"})
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        v.check(mode, "control", "made" in text and os.path.exists(fifo),
                "the FIFO was not made: %s" % text)
        for label, extra in (("sandboxed", {"sandbox": sb}), ("unsandboxed", {})):
            if not os.path.exists(fifo):
                os.mkfifo(fifo)
                os.chown(fifo, w.uid, w.gid)
            params = {"path": uri(fifo), "dataBase64": b64("patched\n")}
            params.update(extra)
            r = reply_or_release(w, w.s.send_request("fs/writeFile", params), fifo)
            if IS_REF:  # the reference waits too (a hole it has): printed
                print("    [%s] reference, %s fs/writeFile: %s" % (
                    mode[0], label, "answered" if r else "no reply in 10 s"))
                continue
            v.check(mode, "%s fs/writeFile" % label, r is not None,
                    "no reply in 10 s: the write waits for a reader of the FIFO")
        m = w.s.request("fs/writeFile", {"path": uri(ws + "/next.txt"), "dataBase64": b64("x"),
                                         "sandbox": sb})
        v.check(mode, "helper", "result" in m, "the policy's helper no longer serves: %s" % m)
    v.done()


DNS_FLOOD = r"""
import socket, struct, sys, time
q = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x01a\x00" + struct.pack(">HH", 1, 1)
blob = (struct.pack(">H", len(q)) + q) * 4000
conns = []
for i in range(16):
    s = socket.create_connection(("127.0.0.53", 53), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    conns.append(s)
sent, t0 = 0, time.time()
while time.time() - t0 < float(sys.argv[1]):
    for s in list(conns):
        try:
            sent += s.send(blob)
        except BlockingIOError:
            pass
        except OSError:
            conns.remove(s)
print("sent", sent)
"""


PY3 = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))


@needs_own_server
def test_resolver_client_that_never_reads(_):
    """Transparent TCP: the synthetic resolver on 127.0.0.53:53 inside the sandbox is
    served by the server itself. A command that sends queries over TCP as fast as it can
    and never reads the answers (16 connections, 25 s) must not grow the server: each
    21-byte query was answered into a buffer of about 700 bytes queued in the server
    for as long as the client did not read, about a gigabyte in half a minute, towards
    the OOM killer (which picks the largest process: the server, and every session with
    it). The answers queued now stop the connection's reading (TCP holds the client
    back), so the server grows by less than 64 MiB. Its own server, with ASan's
    quarantine of freed memory off (a release build ignores the variable): the freed
    answers would fill it and be counted."""
    w = world()
    if not os.path.exists(w.srv.host_path("/dev/net/tun")):  # where the server runs
        print("  SKIP: no /dev/net/tun on this host")
        return
    v = Verdicts()
    mode = ("WorkspaceWrite+transparent", "ww", RESTRICTED)
    asan = os.environ.get("ASAN_OPTIONS", "")
    srv = w.start_server(["ASAN_OPTIONS=" + (asan + ":" if asan else "") +
                          "quarantine_size_mb=0"])
    try:
        s = srv.session()
        ws = w.fresh_ws()
        script = ws + "/flood.py"
        w.write(script, DNS_FLOOD)
        proxy = {"enabled": True, "enableSocks5": True, "enableSocks5Udp": False,
                 "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                 "mode": "full", "domains": {}, "unixSockets": None,
                 "allowLocalBinding": False, "transparentTcp": True}
        before = vm_rss_kb(srv.pid)
        pid = "dns-flood"
        r = s.request("process/start", {
            "processId": pid, "argv": [PY3, script, "25"], "cwd": uri(ws),
            "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "sandbox": policy("ww", ws),
            "networkProxy": {"proxy": proxy}, "enforceManagedNetwork": True})
        if "error" in r:
            # transparent TCP needs what a server not running as root may not have here
            print("    [%s] %s: transparent TCP not started: %s" % (
                mode[0], "reference" if IS_REF else "ours", r["error"]))
            # transparent TCP's device lives in a network namespace of the sandbox's own
            v.check(mode, "started", IS_REF or w.unprivileged or no_namespaces(w),
                    "transparent TCP did not start: %s" % r["error"])
            return v.done()
        peak = before
        deadline = time.monotonic() + 60

        def closed():
            return "process/closed" in [n["method"] for n in s.notes.get(pid, [])]
        while not closed() and time.monotonic() < deadline:
            try:
                s.pump(0.5)
            except Timeout:
                pass
            peak = max(peak, vm_rss_kb(srv.pid))
        out = summarize([n for n in s.notes.get(pid, []) if n["method"].startswith("process/")])
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        grew = (peak - before) // 1024
        print("    [%s] %s: %s; the server grew by %d MiB" % (
            mode[0], "reference" if IS_REF else "ours", text.strip()[-120:], grew))
        if not IS_REF:  # the reference's transparent TCP wants a distro bubblewrap
            v.check(mode, "flood ran", "sent" in text, "the child did not run: %s" % text[-300:])
            v.check(mode, "server memory", grew < 64,
                    "the server grew by %d MiB for answers the child never read" % grew)
        s.close()
    finally:
        srv.stop()
    v.done()


FLOW_FLOOD = r"""
import errno, json, os, select, socket, sys, time
host, port, n, via = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if via == "socks":  # the managed proxy's SOCKS5, by its variable
    p = os.environ["ALL_PROXY"].split("://")[-1].rstrip("/").rsplit(":", 1)
    addr = (p[0], int(p[1]))
else:  # transparent TCP: straight to the name
    addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]


def socks(s):
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise ConnectionRefusedError(errno.ECONNREFUSED, "greeting")
    h = host.rstrip(".").encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + port.to_bytes(2, "big"))
    r = s.recv(10)
    if len(r) < 2 or r[1] != 0:
        raise ConnectionRefusedError(errno.ECONNREFUSED, "reply %r" % r)


conns, errors, stalled = [], {}, 0
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.settimeout(3)
    try:
        s.connect(addr)
        if via == "socks":
            socks(s)
        conns.append(s)
        stalled = 0
    except OSError as e:
        k = "timeout" if isinstance(e, socket.timeout) else errno.errorcode.get(e.errno, str(e))
        errors[k] = errors.get(k, 0) + 1
        s.close()
        stalled = stalled + 1 if k == "timeout" else 0
        if stalled == 3:
            break  # connecting itself stalls: no use waiting on the rest
print(json.dumps({"connected": len(conns), "errors": errors}), flush=True)
select.select([sys.stdin], [], [], 120)  # holds them, reading nothing, until told
# then reads the last 48 whole, one after the other, the last first (its bytes least
# likely in the server, the budget full of the first ones'): nothing was lost, and the
# one whose turn it is never waits for the others' bytes to be read
got, short, t0 = 0, 0, time.monotonic()
for s in conns[::-1][:48]:
    s.settimeout(30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # a window of 64 KiB now
    left = 1 << 20
    try:
        while left:
            d = s.recv(min(left, 1 << 16))
            if not d:
                break
            left -= len(d)
    except OSError:
        pass
    got += (1 << 20) - left
    short += left > 0
print(json.dumps({"read": got, "short": short, "s": round(time.monotonic() - t0, 1)}),
      flush=True)
"""

# Another sandbox's download from the same service, read whole.
FLOW_CONTROL = r"""
import os, socket, sys
host, port, size, via = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if via == "socks":
    p = os.environ["ALL_PROXY"].split("://")[-1].rstrip("/").rsplit(":", 1)
    s = socket.create_connection((p[0], int(p[1])), timeout=20)
    h = host.rstrip(".").encode()
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + port.to_bytes(2, "big"))
    s.recv(10)
else:
    s = socket.create_connection((host, port), timeout=20)
got = 0
while got < size:
    d = s.recv(1 << 16)
    if not d:
        break
    got += len(d)
print("read", got)
"""


import selectors  # noqa: E402  (the flow flood's host service)
import threading  # noqa: E402


class Sender:
    """A host service that sends `size` bytes to every connection and reads nothing:
    counts the connections it accepted and the bytes the kernel took from it."""

    def __init__(self, size):
        self.size = size
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.accepted = self.sent = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        data = memoryview(b"x" * self.size)
        left = {}
        while not self.stop:
            for key, _ in sel.select(0.2):
                if key.fileobj is self.sock:
                    try:
                        c, _ = self.sock.accept()
                    except OSError:
                        continue
                    c.setblocking(False)
                    self.accepted += 1
                    left[c] = 0
                    sel.register(c, selectors.EVENT_WRITE)
                    continue
                c = key.fileobj
                try:
                    k = c.send(data[left[c]:])
                except OSError:
                    k = -1
                if k < 0 or left[c] + k >= self.size:
                    sel.unregister(c)
                    if k > 0:
                        self.sent += k
                    continue  # kept open (closing would end the flow), never read
                left[c] += k
                self.sent += k
        for c in left:
            c.close()
        self.sock.close()

    def close(self):
        self.stop = True
        self.thread.join()


def fd_total(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def flood_flows(w, v, via):
    """One flood of FLOW_FLOOD through `via` (transparent or socks) on a server of its
    own; judged for ours, printed for both."""
    mode = ("WorkspaceWrite+" + via, "ww", RESTRICTED)
    who = "reference" if IS_REF else "ours"
    asan = os.environ.get("ASAN_OPTIONS", "")
    srv = w.start_server(["ASAN_OPTIONS=" + (asan + ":" if asan else "") +
                          "quarantine_size_mb=0"])
    sender = Sender(1 << 20)
    try:
        s = srv.session()
        proxy = {"enabled": True, "enableSocks5": True, "enableSocks5Udp": False,
                 "allowUpstreamProxy": False, "dangerouslyAllowAllUnixSockets": False,
                 "mode": "full", "domains": {"localhost": "allow"}, "unixSockets": None,
                 "allowLocalBinding": True, "transparentTcp": via == "transparent"}

        def start(pid, script, args):
            ws = w.fresh_ws()
            w.write(ws + "/flows.py", script)
            return s.request("process/start", {
                "processId": pid, "argv": [PY3, ws + "/flows.py", "localhost.",
                                           str(sender.port)] + args + [via],
                "cwd": uri(ws), "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
                "pipeStdin": True, "sandbox": policy("ww", ws),
                "networkProxy": {"proxy": proxy}, "enforceManagedNetwork": True})
        before, fds_before = vm_rss_kb(srv.pid), fd_total(srv.pid)
        pid = "flow-flood"
        r = start(pid, FLOW_FLOOD, ["700"])
        if "error" in r:
            # transparent TCP needs a TUN device, which a server not running as root may
            # not make here, in a network namespace of the sandbox's own
            print("    [%s] %s: not started: %s" % (mode[0], who, r["error"]))
            v.check(mode, "started", IS_REF or ((w.unprivileged or no_namespaces(w)) and
                                                via == "transparent"),
                    "did not start: %s" % r["error"])
            return
        peak, fds_peak = before, fds_before
        state = {"last": None, "since": time.monotonic()}

        def settled():
            """The child said what it connected, and nothing moved for 3 s since."""
            nonlocal peak, fds_peak
            try:
                s.pump(0.3)
            except Timeout:
                pass
            peak = max(peak, vm_rss_kb(srv.pid))
            fds_peak = max(fds_peak, fd_total(srv.pid))
            now = (sender.accepted, sender.sent, peak // 1024)
            if now != state["last"]:
                state["last"], state["since"] = now, time.monotonic()
            said = b"connected" in s.output_so_far(pid)["stdout"]
            return said and time.monotonic() - state["since"] > 3
        try:
            wait_until(settled, 120, "the flood to settle", interval=0)
        except Timeout:
            out = s.output_so_far(pid)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")[-300:]
            if IS_REF:  # printed, as every result of the reference's
                print("    [%s] reference: the child said nothing in 120 s: %s" % (mode[0], text))
            else:
                v.fail(mode, "flood", "the child did not say what it connected: %s" % text)
            s.terminate(pid)
            return
        said = s.output_so_far(pid)["stdout"].decode(errors="replace").strip()
        grew = (peak - before) // 1024
        flood = sender.accepted
        print("    [%s] %s: child %s; the service accepted %d and sent %d MiB; the server "
              "grew by %d MiB and %d descriptors" % (
                  mode[0], who, said, flood, sender.sent >> 20, grew, fds_peak - fds_before))
        # while the flood holds its connections: another sandbox's download
        start("flow-control", FLOW_CONTROL, [str(1 << 20)])
        try:
            out = s.collect_until_closed("flow-control", timeout=60)
        except Timeout:
            s.terminate("flow-control")
            out = s.output_so_far("flow-control")
            out["stderr"] += b" (no end in 60 s)"
        control = (out["stdout"] + out["stderr"]).decode(errors="replace").strip()
        print("    [%s] %s: another sandbox meanwhile: %s" % (mode[0], who, control[-200:]))
        s.write(pid, b"done\n", write_id="done")
        out = s.collect_until_closed(pid, timeout=120)
        lines = out["stdout"].decode(errors="replace").strip().splitlines()
        read = json.loads(lines[-1]) if len(lines) > 1 else {
            "exit": out["exit_code"], "stderr": out["stderr"].decode(errors="replace")[-300:]}
        print("    [%s] %s: then read one after the other: %s" % (mode[0], who, read))
        if not IS_REF:
            res = json.loads(said.splitlines()[0])
            v.check(mode, "stalled, not lost", read.get("read") == 48 << 20,
                    "read back %s of 48 connections of 1 MiB" % read)
            v.check(mode, "server memory", grew < 64,
                    "the server grew by %d MiB for bytes the child never read" % grew)
            # refused: at the handshake (transparent), or closed at once (the proxy)
            refused = sum(res["errors"].get(k, 0) for k in ("ECONNREFUSED", "ECONNRESET"))
            v.check(mode, "flows", flood <= 256 and refused >= 700 - 256,
                    "not refused past the sandbox's 256 connections: %s, %d reached the "
                    "service" % (said, flood))
            v.check(mode, "another sandbox", control == "read %d" % (1 << 20),
                    "its download did not get through: %s" % control[-300:])
            try:
                wait_until(lambda: fd_total(srv.pid) <= fds_before, 30,
                           "the server to let go of the flows' descriptors")
            except Timeout:
                v.fail(mode, "descriptors", "%d left after the process closed" % (
                    fd_total(srv.pid) - fds_before))
        s.close()
    finally:
        sender.close()
        srv.stop()


@needs_own_server
def test_flows_that_never_read(_):
    """Issue 46: a command opens 700 connections to a host service that sends 1 MiB on
    each, shrinks its receive buffer (SO_RCVBUF 2048) and never reads, through
    transparent TCP and through the managed proxy's SOCKS5. Every byte the service sent
    and the child did not take waited in the server, charged to no cgroup of the
    sandbox: through transparent TCP ours grew by about 1 GB (2,048 flows allowed per
    sandbox, no bound across sandboxes), towards the OOM killer, which picks the server.
    The flow budget (docs/SANDBOX.md) stalls the sandbox's connections once they hold
    its bytes and refuses its connections past its count: the server grows by less than
    64 MiB (the budget, the connections' state and ASan's allocator), another sandbox
    still gets its download through, and the stalled connections, read at last one
    after the other, give every byte (none waits for the others' to be read). The
    reference is printed side by side (it stalls connecting at 128). A server not
    running as root has no transparent TCP here: the SOCKS5 flood runs for it."""
    w = world()
    v = Verdicts()
    if os.path.exists(w.srv.host_path("/dev/net/tun")):  # where the server runs
        flood_flows(w, v, "transparent")
    else:
        print("  (no /dev/net/tun where the server runs: transparent TCP not tried)")
    flood_flows(w, v, "socks")
    v.done()


@needs_own_server
def test_no_survivors(_):
    """Issue item 6: `setsid sleep 1000 &` (and a double fork) inside a sandbox do not
    outlive the process."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        tag = "survivor-%s-%d" % (w.tag, STEP[0])
        quiet = ">/dev/null 2>&1 </dev/null"
        out, text = shell(w, mode, "setsid sleep 1000 %s & (setsid sleep 1001 %s &) & "
                          "nohup sleep 1002 %s & echo started" % (quiet, quiet, quiet), ws,
                          env={"PROBETAG": tag})
        v.check(mode, "started", "started" in text, text)
        none_left(v, mode, tag, "setsid sleep", "after the process closed")
    v.done()


def none_left(v, mode, tag, what, when):
    """Waits for every process marked tag to end; fails (and kills them) when some
    are still running after 10 s."""
    try:
        wait_until(lambda: not find_marked(tag), timeout=10,
                   what="the sandboxed background processes to end")
    except Timeout:
        left = find_marked(tag)
        v.fail(mode, what, "still running %s: %s" % (when, left))
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


# What a command tries on its workspace's .git and on a file outside, by every path the
# kernel offers (links, descriptors, /proc's magic links, renames, attributes), and what
# it may do (the controls): run in a WorkspaceWrite sandbox, it prints one line a try.
TRIES = r"""
import errno, os, sys, threading
out = sys.argv[1]
def t(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def wr(path, flags=os.O_WRONLY, **kw):
    fd = os.open(path, flags, 0o644, **kw)
    os.write(fd, b"PWNED")
    os.close(fd)
t("create", lambda: wr("new.txt", os.O_WRONLY | os.O_CREAT))
t("config", lambda: wr(".git/config"))
os.symlink(".git/config", "l1")
t("link-to-config", lambda: wr("l1"))
os.symlink(".git/hooks/pre-commit", "l2")
t("dangling-link-into-git", lambda: wr("l2", os.O_WRONLY | os.O_CREAT))
d = os.open(".git", os.O_RDONLY | os.O_DIRECTORY)
t("openat-dirfd", lambda: wr("config", dir_fd=d))
t("hardlink", lambda: os.link(".git/config", "hl"))
t("rename-git", lambda: os.rename(".git", "g2"))
t("mkdir-codex", lambda: os.mkdir(".codex"))
t("chmod-config", lambda: os.chmod(".git/config", 0o777))
t("utime-config", lambda: os.utime(".git/config", (0, 0)))
t("xattr-config", lambda: os.setxattr(".git/config", "user.x", b"1"))
t("truncate-config", lambda: os.truncate(".git/config", 0))
r = os.open(".git/config", os.O_RDONLY)
t("reopen-magic", lambda: wr("/proc/self/fd/%d" % r))
t("fchmod-outside", lambda: os.fchmod(os.open(out, os.O_RDONLY), 0o777))
t("utime-outside", lambda: os.utime(out, (0, 0)))
t("stdout", lambda: os.write(os.open("/dev/stdout", os.O_WRONLY), b""))
os.chdir(".git")
t("cwd-relative", lambda: wr("config"))
os.chdir("..")
os.mkdir("sub")
t("dotdot", lambda: wr("sub/../new2.txt", os.O_WRONLY | os.O_CREAT))
t("rename-in-ws", lambda: os.rename("new2.txt", "sub/moved.txt"))
os.mkfifo("fifo")
got = []
th = threading.Thread(target=lambda: got.append(open("fifo").read()))
th.start()
t("fifo", lambda: wr("fifo"))
th.join(10)
print("fifo-read", "ok" if got == ["PWNED"] else "got %r" % got)
"""


@needs_own_server
def test_every_way_to_write(_):
    """Every way a command has to change a protected name or a file outside its roots
    (a link, a dangling link into .git, a directory descriptor, its working directory,
    /proc/self/fd, a hard link, a rename, modes, times, extended attributes, truncation,
    a descriptor of a read-only file) is refused, and what the workspace allows works
    (create, .., rename, a FIFO). With namespaces the view refuses; without, the init's
    broker (docs/SANDBOX.md) refuses the same, whichever path the call names."""
    w = world()
    v = Verdicts()
    refused = FS | {"ENOTDIR"}
    for mode in [m for m in MODES if m[1] == "ww"]:
        ws = w.fresh_ws("dir")
        script = w.out + "/tries.py"
        w.write(script, TRIES)
        out, text = shell(w, mode, "%s %s %s" % (PY3, script, w.out + "/file"), ws)
        res = dict(l.split(" ", 1) for l in text.splitlines() if " " in l and
                   not l.startswith("Traceback"))
        for key in ("create", "dotdot", "rename-in-ws", "fifo", "fifo-read", "stdout"):
            v.check(mode, key, res.get(key) == "ok", "%s: %s" % (res.get(key), text[-400:]))
        for key in ("config", "link-to-config", "dangling-link-into-git", "openat-dirfd",
                    "hardlink", "rename-git", "mkdir-codex", "chmod-config", "utime-config",
                    "xattr-config", "truncate-config", "reopen-magic", "fchmod-outside",
                    "utime-outside", "cwd-relative"):
            v.check(mode, key, res.get(key) in refused, "not refused: %s" % res.get(key))
        v.check(mode, "host", open(ws + "/.git/config").read() == "[core]\n" and
                not os.path.exists(ws + "/.git/hooks/pre-commit") and
                not os.path.exists(ws + "/.codex/config.toml.x") and
                oct(os.stat(w.out + "/file").st_mode & 0o777) != "0o777" and
                os.stat(w.out + "/file").st_mtime > 0, "the host changed")
    v.done()


@needs_own_server
def test_host_mounts_come_and_go(_):
    """The host's own mount table changes while a sandbox runs (a container started and
    removed beside it: its mount point, in the sandbox's copy of the tree, is detached
    when the host removes the directory). The view's watch must not take that for a
    lost mount of its own: the command goes on (it was killed, "a path its view mounts
    on was removed", and long commands died whenever podman cleaned up beside them)."""
    w = world()
    if os.geteuid() != 0:
        raise TestSkip("mounting on the host needs root")
    v = Verdicts()
    for mode in MODES:
        if no_namespaces(w):
            break  # no view, no watch
        m = tempfile.mkdtemp(prefix="hostmount-", dir=w.top)
        subprocess.run(["mount", "-t", "tmpfs", "hostmount", m], check=True)
        ws = w.fresh_ws()
        pid = pid_name(w, "mounts")
        w.s.start(pid, ["/bin/sh", "-c", "echo started; read go; echo went-on"], cwd=uri(ws),
                  sandbox=policy(mode[1], ws, mode[2]), env={"PATH": "/usr/bin:/bin"})
        w.s.wait_for(lambda: b"started" in w.s.output_so_far(pid)["stdout"],
                     what="the command to start")
        subprocess.run(["umount", m], check=True)
        os.rmdir(m)  # detaches the sandbox's copy of the mount
        w.s.write(pid, b"go\n", write_id="go-" + pid)
        out = w.s.collect_until_closed(pid, timeout=60)
        text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        v.check(mode, "went on", "went-on" in text and out["exit_code"] == 0,
                "exit %s: %s" % (out["exit_code"], text[-300:]))
    v.done()


@needs_own_server
def test_terminate_ends_what_left_the_session(_):
    """process/terminate of a sandboxed command whose children left its session and
    process group (setsid, a double fork): none of them outlives it. With a PID
    namespace the kernel ends them with the init; without one (no namespaces) the init
    ends them itself when the server asks (SANDBOX_END_SIGNAL), since killing its group
    would end the init first."""
    w = world()
    v = Verdicts()
    for mode in MODES:
        ws = w.fresh_ws()
        tag = "term-%s-%d" % (w.tag, STEP[0])
        quiet = ">/dev/null 2>&1 </dev/null"
        pid = pid_name(w, "term")
        w.s.start(pid, ["/bin/sh", "-c", "setsid sleep 1000 %s & (setsid sleep 1001 %s &) & "
                        "sleep 1002 %s & echo started; wait" % (quiet, quiet, quiet)],
                  cwd=uri(ws), sandbox=policy(mode[1], ws, mode[2]),
                  env={"PATH": "/usr/bin:/bin", "PROBETAG": tag})
        w.s.wait_for(lambda: b"started" in w.s.output_so_far(pid)["stdout"],
                     what="the command's children")
        wait_until(lambda: len(find_marked(tag, "sleep")) >= 3, timeout=10,
                   what="the three sleeps")
        w.s.call("process/terminate", {"processId": pid})
        w.s.collect_until_closed(pid, timeout=30)
        none_left(v, mode, tag, "terminate", "after process/terminate")
    v.done()



# ---------------------------------------------------------------------------------------
# The kernel's per-user counts (issue 46)
# ---------------------------------------------------------------------------------------

# What the probe takes from inside the sandbox, and how to read its share of a uid's limit.
# Held to the end: inotify instances and fanotify groups (128 a uid by default), queued
# signals and message-queue bytes (the server's rlimits). Bounded by the test, since taking
# all would take minutes: nested user namespaces and inotify watches (an eighth of the
# limit and one more is asked for; a share must refuse it).
BUDGET_KINDS = ("userns", "inotify_watch", "inotify", "fanotify", "sigqueue", "mqueue",
                "inflight")
BOUNDED_KINDS = ("userns", "inotify_watch")
MQUEUE_BYTES = 81920  # what a message queue of the default size (10 x 8 KiB) charges, at least


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


NO_SHARES_NOTE = "sandboxes get no share of the kernel's per-user counts here"
NO_USERNS_NOTE = "sandboxes run without a user namespace of their own here"


def uid_limits(srv):
    """What one uid may hold, as the server sees it: the kernel's sysctls and the server's
    own rlimits (mqueue in bytes)."""
    limits = {"inotify": read_int("/proc/sys/fs/inotify/max_user_instances"),
              "inotify_watch": read_int("/proc/sys/fs/inotify/max_user_watches"),
              "fanotify": read_int("/proc/sys/fs/fanotify/max_user_groups"),
              "userns": read_int("/proc/sys/user/max_user_namespaces")}
    with open("/proc/%d/limits" % srv.pid) as f:
        text = f.read()
    for kind, name in (("sigqueue", "Max pending signals"), ("mqueue", "Max msgqueue size"),
                       ("inflight", "Max open files")):
        limits[kind] = int(re.search(name + r"\s+(\d+)", text).group(1))
    return limits


def host_gets_one_of_each(w):
    """A process of the server's uid on the host, outside every sandbox: one of each
    kind (escape-probe's hold=KIND:1 says ok)."""
    r = subprocess.run([w.probe] + ["hold=%s:1" % k for k in BUDGET_KINDS],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60, **w.drop_kw())
    got = parse(r.stdout.decode(errors="replace"))
    return {k: got.get("hold:" + k, ("missing", ""))[0] for k in BUDGET_KINDS}


def hog_start(w, s, pid, ws, limits):
    """A ReadOnly, network-restricted command that takes every count it can and holds
    them until its standard input has something; returns its results once it holds, and
    its pid on the host."""
    attempts = ["hold=%s:%d" % (k, limits[k] // 8 + 1) if k in BOUNDED_KINDS else "hold=" + k
                for k in BUDGET_KINDS] + ["hold_wait=240"]
    tag = "hog-%s-%d" % (w.tag, STEP[0])
    s.start(pid, [w.probe] + attempts, cwd=uri(ws), sandbox=policy("ro", ws),
            env={"PATH": "/usr/bin:/bin", "PROBETAG": tag}, pipe_stdin=True)
    s.wait_for(lambda: b"hold_wait" in s.output_so_far(pid)["stdout"] or
               "process/closed" in [n["method"] for n in s.notes.get(pid, [])],
               timeout=180, what="the command holding every count it could take")
    return (parse(s.output_so_far(pid)["stdout"].decode(errors="replace")),
            (find_marked(tag, w.probe) or [None])[0])


def rlimits_of(pid):
    """A process's soft limits on queued signals and message-queue bytes, from the host."""
    try:
        with open("/proc/%d/limits" % pid) as f:
            text = f.read()
    except (OSError, TypeError):
        return {}
    return {k: int(re.search(n + r"\s+(\d+)", text).group(1)) for k, n in (
        ("sigqueue", "Max pending signals"), ("mqueue", "Max msgqueue size"))}


def judge_hog(v, mode, held, rlimits, limits):
    """Each count the command took stopped at its share, refused as the kernel refuses
    a uid at its limit. Landlock refuses a message queue outright (EACCES), under every
    policy of ours: the queue's file lies on no path a rule can grant. So the queues'
    share is checked where it lives too, in the command's RLIMIT_MSGQUEUE."""
    refusal = {"userns": {"ENOSPC"}, "inotify_watch": {"ENOSPC"}, "inotify": {"EMFILE"},
               "fanotify": {"EMFILE"}, "sigqueue": {"EAGAIN"}, "mqueue": {"EMFILE", "EACCES"},
               "inflight": {"ETOOMANYREFS"}}
    for k in BUDGET_KINDS:
        res, detail = held.get("hold:" + k, ("missing", ""))
        m = re.search(r"made=(\d+)", detail)
        made = int(m.group(1)) if m else 0
        cost = MQUEUE_BYTES if k == "mqueue" else 1
        if k == "inflight":  # short of the server's own limit, which it sends under
            v.check(mode, "the command's " + k, res in refusal[k] and made < limits[k],
                    "took %d (%s), not stopped short of the server's %d" % (made, res,
                                                                         limits[k]))
            continue
        v.check(mode, "the command's " + k, res in refusal[k] and made * cost <= limits[k] // 8,
                "took %d (%s), not stopped at an eighth of the uid's %d" % (made, res, limits[k]))
    for k, lim in sorted(rlimits.items()):
        v.check(mode, "the command's limit on " + k, lim <= limits[k] // 8,
                "%d, more than an eighth of the uid's %d" % (lim, limits[k]))


@needs_own_server
def test_per_uid_budgets_held_by_a_command(_):
    """Issue 46 point 3: the kernel counts inotify instances and watches, fanotify groups,
    user namespaces, queued signals and message-queue bytes per uid, through the tree of
    user namespaces, so what a sandboxed command holds is charged to the server's uid. A
    ReadOnly, network-restricted command takes all it can and holds it. Meanwhile another
    session's WorkspaceWrite start (its init watches the protected names with inotify:
    ours failed, "sandbox intent cannot be enforced") and a sandboxed fs/writeFile ("cannot
    start the filesystem sandbox helper: Too many open files") must work, a server of the
    same uid started now must see fs/watchMissing's path appear, and a process of the uid
    on the host (for a root server: any root process) must still get one of each. Ours
    gives each sandbox an eighth of each count (docs/SANDBOX.md, per-uid budgets)."""
    w = world()
    v = Verdicts()
    mode = MODES[0]
    limits = uid_limits(w.srv)
    ws = w.fresh_ws()
    hog = pid_name(w, "budget-hog")
    held, hog_pid = hog_start(w, w.s, hog, ws, limits)
    rlimits = rlimits_of(hog_pid)
    srv2 = None
    try:
        s2 = w.srv.session()
        ws2 = w.fresh_ws("dir")
        sb = policy("ww", ws2)
        r = s2.request("process/start", {
            "processId": "ww", "argv": ["/bin/sh", "-c", "echo written > f; echo started"],
            "cwd": uri(ws2), "env": {"PATH": "/usr/bin:/bin"}, "tty": False, "sandbox": sb})
        if "error" in r:
            text = "error: %s" % r["error"]
        else:
            out = s2.collect_until_closed("ww", timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
        start_ok = "started" in text and os.path.exists(ws2 + "/f")
        r = s2.request("fs/writeFile", {"path": uri(ws2 + "/g"), "dataBase64": b64("g"),
                                        "sandbox": sb})
        write_ok = "error" not in r and os.path.exists(ws2 + "/g")
        srv2 = w.start_server()
        s3 = srv2.session()
        s3.call("fs/watchMissing", {"watchId": 1, "missing": [uri(ws2 + "/late")],
                                    "present": None})
        os.mkdir(ws2 + "/late")
        try:
            s3.wait_other(lambda m: m.get("method") == "fs/missingChanged", timeout=10)
            watch_ok = True
        except (WaitFailed, Timeout):
            watch_ok = False
        host = host_gets_one_of_each(w)
    finally:
        if srv2 is not None:
            srv2.stop(check=False)
        w.s.write(hog, b"done\n", write_id="release-" + hog)
        w.s.collect_until_closed(hog, timeout=60)
    who = "reference" if IS_REF else "ours"
    print("    [%s] %s: the command took %s" % (mode[0], who, ", ".join(
        "%s %s" % (k, held.get("hold:" + k, ("missing", ""))[1].replace("made=", ""))
        for k in BUDGET_KINDS)))
    print("    [%s] %s: its limits %s (the uid's %s)" % (mode[0], who, rlimits, {
        k: limits[k] for k in rlimits}))
    print("    [%s] %s: meanwhile start %s, fs/writeFile %s, fs/watchMissing %s, the host's "
          "uid %d %s" % (mode[0], who, "ok" if start_ok else text[-200:],
                          "ok" if write_ok else r.get("error"), "fired" if watch_ok else
                          "never fired", w.uid, host))
    if IS_REF:
        return
    v.check(mode, "the command's limits", rlimits, "its pid was not found on the host")
    v.check(mode, "another session's WorkspaceWrite start", start_ok, text[-300:])
    v.check(mode, "a sandboxed fs/writeFile", write_ok, r.get("error"))
    if no_namespaces(w):
        # the kernel's per-uid counts are split through user namespaces: without one the
        # sandbox's are the uid's own (docs/SANDBOX.md, per-uid budgets); what holds is
        # that the server's starts and helpers do not depend on them
        print("    [%s] the counts' shares, the server's inotify and the host's: "
              "namespace-only" % mode[0])
        return v.done()
    log = w.srv.stderr_text(limit=10 ** 6)
    if NO_SHARES_NOTE in log or NO_USERNS_NOTE in log:
        # /proc/sys read-only where the server runs (podman's and Docker's containers), or
        # a root server's namespaces made without a user namespace (user namespaces
        # refused): no user namespace's limits to write, the server said so once, and
        # what holds is the same as without namespaces (docs/SANDBOX.md, per-uid budgets)
        print("    [%s] the counts' shares, the server's inotify and the host's: not here "
              "(%s)" % (mode[0], "/proc/sys is read-only where the server runs"
                        if NO_SHARES_NOTE in log else "no user namespace"))
        return v.done()
    judge_hog(v, mode, held, rlimits, limits)
    v.check(mode, "fs/watchMissing of a server started meanwhile", watch_ok,
            "fs/missingChanged never came")
    for k, res in host.items():
        v.check(mode, "the host's uid %d gets %s" % (w.uid, k), res == "ok",
                "refused: %s" % res)
    v.done()



class HostHog:
    """A process of the server's uid on the host, outside every sandbox, holding every
    inotify instance the uid has left (escape-probe hold=inotify) until closed."""

    def __init__(self, w):
        self.p = subprocess.Popen([w.probe, "hold=inotify", "hold_wait=240"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, **w.drop_kw())
        lines = []
        for line in self.p.stdout:
            lines.append(line.decode(errors="replace"))
            if "hold_wait" in lines[-1]:
                break
        self.held = parse("".join(lines)).get("hold:inotify", ("missing", ""))

    def close(self):
        if self.p.returncode is not None:
            return
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=60)
        self.p.stdout.close()


@needs_own_server
def test_protected_names_watched_without_inotify(_):
    """Issue 46 point 3, what the budgets cannot give: with every inotify instance of the
    server's uid taken outside the sandboxes (a host process of the uid holds them while
    two sandboxes and an fs helper start; for a root server, any root process could), a
    sandbox's init gets none to watch the protected names with. Ours failed the start ("sandbox intent cannot be enforced") and
    the fs helper ("Too many open files"). Now the start and the helper work, the init
    looks at the names' inodes on a timer instead, so the host renaming .git away still
    ends the sandbox (a little later: what the command made meanwhile is moved aside),
    and the server's log says so once, however many sandboxes meet it. Run where the
    server's uid is one no other test uses (ESCAPE_USER=unprivileged): as root the hog
    would take root's instances from every process of the host, the tests running beside
    this one included."""
    w = world()
    if not w.switched:
        raise TestSkip("the server's uid is the other tests' too: the unprivileged run "
                       "takes its instances")
    v = Verdicts()
    mode = MODES[1]
    srv = w.start_server()  # a log of its own
    hog = None
    slow = PLANT.replace("fi; done;", "fi; sleep 0.1; done;")
    started = []
    try:
        s = srv.session()
        # Held only while the inits decide (every root process of the host shares a
        # root server's count): the sandboxes and the fs helper start, then it lets go.
        hog = HostHog(w)
        for i in range(2):
            ws = w.fresh_ws()
            w.mkdir(ws + "/.git")
            r = s.request("process/start", {
                "processId": "moved-%d" % i, "argv": ["/bin/sh", "-c", slow.format(secs=5)],
                "cwd": uri(ws), "env": {"PATH": "/usr/bin:/bin"}, "tty": False,
                "sandbox": policy("ww", ws)})
            started.append((i, ws, r.get("error", {}).get("message")))
        ws = w.fresh_ws("dir")
        r = s.request("fs/writeFile", {"path": uri(ws + "/f"), "dataBase64": b64("f"),
                                       "sandbox": policy("ww", ws)})
        write = r.get("error", {}).get("message") or (
            "ok" if os.path.exists(ws + "/f") else "answered, but no file")
        hog.close()
        for i, _, refused in started:
            if not refused:
                loop_started(s, "moved-%d" % i)
        results = []
        for i, ws, refused in started:
            if refused:
                results.append(("start refused: %s" % refused, None, ws))
                continue
            os.rename(ws + "/.git", ws + "/.git.bak")
            out = s.collect_until_closed("moved-%d" % i, timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
            results.append((text, out["exit_code"], ws))
        s.close()
    finally:
        if hog is not None:
            hog.close()
        srv.stop(check=False)
    log = srv.stderr_text(limit=100000)
    notes = log.count("got no inotify watch on the protected names")
    who = "reference" if IS_REF else "ours"
    print("    [%s] %s: the host held %s inotify instances; fs/writeFile %s; %d log note(s)" % (
        mode[0], who, hog.held[1] if hog else "?", write, notes))
    for text, code, ws in results:
        planted = os.path.isdir(ws + "/.git") and sorted(os.listdir(ws + "/.git"))
        print("    [%s] %s: .git renamed on the host: exit %s, %s, %s" % (
            mode[0], who, code, "ended" if "sandbox ended" in text else text.strip()[-120:],
            planted or "nothing at .git"))
        if IS_REF:
            continue
        v.check(mode, "start", code is not None, text)
        # without namespaces there is no view to watch: the broker refuses the name
        # whatever the host did, and the command goes on
        v.check(mode, "ended", no_namespaces(w) or ("sandbox ended" in text and code == 137),
                "the sandbox went on after .git was renamed: exit %s, %s" % (code, text[-300:]))
        v.check(mode, ".git", not planted, "planted after the host moved .git: %s" % planted)
    if not IS_REF:
        v.check(mode, "fs/writeFile", write == "ok", write)
        v.check(mode, "the log", notes == (0 if no_namespaces(w) else 1),
                "%d notes, want one:\n%s" % (notes, log[-2000:]))
    v.done()


@ours_only
@needs_own_server
def test_per_uid_budgets_where_proc_sys_is_read_only(_):
    """Issue 46 point 3, degrading: where /proc/sys is read-only to the server (Docker's
    default), the init cannot write its user namespace's limits. The sandbox starts as it
    did before there were shares (its namespace's limits are the kernel's INT_MAX, its
    queued signals still capped by the rlimit), and the server's log says once why."""
    if os.geteuid() != 0:
        raise TestSkip("a mount namespace of the test's own needs root")
    w = world()
    if no_namespaces(w):
        raise TestSkip("without namespaces there is no user namespace to write limits in")
    if w.srv.container:
        raise TestSkip("in a container (or bubblewrap) /proc/sys is read-only already or no "
                       "mount of the test's own can be made around the server: "
                       "test_per_uid_budgets_held_by_a_command judges that place")
    v = Verdicts()
    drop = ["setpriv", "--reuid=%d" % w.uid, "--regid=%d" % w.gid, "--clear-groups", "--"] \
        if w.switched else []
    cmd = ["unshare", "-m", "sh", "-c", 'mount -o bind,ro /proc/sys /proc/sys && exec "$@"',
           "sh"] + drop + (getattr(w, "cmd", None) or w.server_cmd())
    srv = Server(cmd=cmd, reference=False, start=False)
    os.chmod(srv.workdir, 0o755)
    srv.start()
    limits = uid_limits(srv)
    try:
        s = srv.session()
        for i in range(2):
            ws = w.fresh_ws()
            s.start("ro-%d" % i, ["/bin/sh", "-c", "cat /proc/sys/user/max_inotify_instances; "
                                  "grep 'Max pending signals' /proc/self/limits"],
                    cwd=uri(ws), sandbox=policy("ro", ws), env={"PATH": "/usr/bin:/bin"})
            out = s.collect_until_closed("ro-%d" % i, timeout=60)
            text = (out["stdout"] + out["stderr"]).decode(errors="replace")
            m = re.search(r"Max pending signals\s+(\d+)", text)
            v.check(None, "start %d" % i, out["exit_code"] == 0 and "2147483647" in text,
                    "exit %s: %s" % (out["exit_code"], text[-300:]))
            v.check(None, "queued signals %d" % i, m and int(m.group(1)) <= limits["sigqueue"] // 8,
                    text[-300:])
        s.close()
    finally:
        srv.stop(check=False)
    log = srv.stderr_text(limit=100000)
    notes = log.count(NO_SHARES_NOTE)
    v.check(None, "the log", notes == 1 and "Read-only file system" in log,
            "%d notes, want one:\n%s" % (notes, log[-2000:]))
    v.done()


@ours_only
@needs_own_server
def test_per_uid_budgets_without_a_user_namespace(_):
    """Issue 46 point 3, where they cannot be split: a root server on a host that refuses
    root a user namespace (no-namespaces --user) runs its sandboxes without one, and what
    they hold is root's own. The start works, the rlimits still cap the command's queued
    signals (a host process of root still gets one while it holds them all), and the
    server's log says once that the rest cannot be split. A server that is not root
    gets no sandbox at all there (test_fail_closed_without_namespaces)."""
    w = world()
    if w.unprivileged:
        raise TestSkip("without a user namespace only a root server has sandboxes")
    tool = os.path.join(os.environ.get("EXEC_BUILD_DIR", os.path.dirname(SERVER_PATH)),
                        "no-namespaces")
    if not os.access(tool, os.X_OK):
        raise TestSkip("no-namespaces test tool not built")
    v = Verdicts()
    mode = MODES[0]
    srv = Server(cmd=[tool, "--user", SERVER_PATH, "--listen", "ws://127.0.0.1:0"])
    limits = uid_limits(srv)
    try:
        s = srv.session()
        ws = w.fresh_ws()
        s.start("hog", [w.probe, "hold=sigqueue", "hold_wait=120"], cwd=uri(ws),
                sandbox=policy("ro", ws), env={"PATH": "/usr/bin:/bin"}, pipe_stdin=True)
        s.wait_for(lambda: b"hold_wait" in s.output_so_far("hog")["stdout"] or
                   "process/closed" in [n["method"] for n in s.notes.get("hog", [])],
                   timeout=120, what="the command holding queued signals")
        held = parse(s.output_so_far("hog")["stdout"].decode(errors="replace"))
        host = host_gets_one_of_each(w)["sigqueue"]
        s.write("hog", b"done\n", write_id="release")
        s.collect_until_closed("hog", timeout=60)
        s.start("second", ["/bin/true"], cwd=uri(ws), sandbox=policy("ro", ws),
                env={"PATH": "/usr/bin:/bin"})
        s.collect_until_closed("second", timeout=60)
        s.close()
    finally:
        srv.stop(check=False)
    res, detail = held.get("hold:sigqueue", ("missing", ""))
    m = re.search(r"made=(\d+)", detail)
    print("    [%s] ours without a user namespace: the command queued %s (%s); meanwhile "
          "the host's root %s" % (mode[0], m.group(1) if m else "?", res, host))
    v.check(mode, "queued signals", res == "EAGAIN" and m and
            int(m.group(1)) <= limits["sigqueue"] // 8, "%s %s" % (res, detail))
    v.check(mode, "the host's root gets a queued signal", host == "ok", host)
    log = srv.stderr_text(limit=100000)
    notes = log.count("sandboxes run without a user namespace of their own here")
    v.check(mode, "the log", notes == 1, "%d notes, want one:\n%s" % (notes, log[-2000:]))
    v.done()

if __name__ == "__main__":
    if SERVER_PATH is None:
        print("SKIP: no server binary")
        sys.exit(SKIP)
    if not IS_REF and landlock_abi() < 1:
        print("SKIP: Landlock is not available on this kernel")
        sys.exit(SKIP)
    if WRAPPER:
        print("SKIP: the sandbox cannot be enforced under " + WRAPPER[0])
        sys.exit(SKIP)
    if find_probe() is None:
        print("SKIP: escape-probe is not built (cmake --build BUILD --target escape-probe)")
        sys.exit(SKIP)
    want = os.environ.get("ESCAPE_USER", "root")
    if os.geteuid() != 0:
        print("NOTE: not root: the server runs as uid %d (ESCAPE_USER=%s cannot be honoured)"
              % (os.geteuid(), want))
    elif CONTAINER and want == "unprivileged":
        # (bubblewrap runs as that user, and may be refused a user namespace there)
        uid = int(os.environ.get("ESCAPE_UID", "65534"))
        containers.require(CONTAINER, (uid, pwd.getpwuid(uid).pw_gid if World._known(uid)
                                       else uid))
    print("escape suite: server as %s" % ("uid %s" % os.environ.get("ESCAPE_UID", "65534")
                                        if want == "unprivileged" and os.geteuid() == 0
                                        else "uid %d" % os.geteuid()))
    try:
        run_tests(globals(), per_test_timeout=240)
    finally:
        if WORLD is not None:
            WORLD.close()
