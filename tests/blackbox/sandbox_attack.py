"""Shared pieces of the sandbox escape suite (test_sandbox_escape.py) and of the table of
what the reference's sandbox denies (tests/sandbox/reference_table.py): the policies as
they go on the wire, where the escape probe is, running it through process/start and
reading its lines, and reading back the seccomp filters of a sandboxed process."""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from harness import (IS_REF, MARKER_VAR, SERVER_PATH, all_pids, wait_until)
import seccomp_filter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def uri(p):
    return "file://" + p


def special(kind, access="read"):
    return {"path": {"type": "special", "value": {"kind": kind}}, "access": access}


def policy(kind, ws, network="restricted"):
    """'ro': ReadOnly (the whole disk readable, nothing writable); 'ww': WorkspaceWrite
    (the same plus the workspace root writable). ws is the cwd and workspace root."""
    entries = [special("root")]
    if kind == "ww":
        entries.append(special("project_roots", "write"))
    sb = {"permissions": {"type": "managed",
                          "file_system": {"type": "restricted", "entries": entries},
                          "network": network},
          "windowsSandboxLevel": "disabled", "cwd": uri(ws)}
    if kind == "ww":
        sb["workspaceRoots"] = [uri(ws)]
    return sb


# The three sandboxes every attack is tried in: (label, policy kind, network).
MODES = [("ReadOnly", "ro", "restricted"),
         ("WorkspaceWrite", "ww", "restricted"),
         ("WorkspaceWrite+net", "ww", "enabled")]


def find_probe():
    """escape-probe from the build (EXEC_BUILD_DIR under ctest, else build/asan or build)."""
    cands = []
    if os.environ.get("EXEC_PROBE"):
        cands.append(os.environ["EXEC_PROBE"])
    if os.environ.get("EXEC_BUILD_DIR"):
        cands.append(os.path.join(os.environ["EXEC_BUILD_DIR"], "escape-probe"))
    if SERVER_PATH and not IS_REF:
        cands.append(os.path.join(os.path.dirname(SERVER_PATH), "escape-probe"))
    for b in ("build/asan", "build"):
        cands.append(os.path.join(REPO, b, "escape-probe"))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    return None


def world_copy(path, into):
    """Copy an executable into a world-readable directory (the sandbox, or an
    unprivileged server, may not reach the build tree)."""
    dst = os.path.join(into, os.path.basename(path))
    shutil.copy(path, dst)
    os.chmod(dst, 0o755)
    return dst


def parse(text):
    """escape-probe output -> {name: (result, detail)}; a name seen twice keeps a list
    under name + '#2', '#3'..."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0] != "@probe":
            continue
        name, res = parts[1], parts[2]
        detail = parts[3] if len(parts) > 3 else ""
        key, n = name, 1
        while key in out:
            n += 1
            key = "%s#%d" % (name, n)
        out[key] = (res, detail)
    return out


def run_probe(s, pid, probe, attempts, ws, sandbox, env=None, timeout=120):
    """Run the probe under `sandbox` through process/start; returns (parsed, summary)."""
    s.start(pid, [probe] + list(attempts), cwd=uri(ws), sandbox=sandbox, env=env)
    out = s.collect_until_closed(pid, timeout=timeout)
    return parse(out["stdout"].decode(errors="replace")), out


def find_marked(tag, argv0=None):
    """Live pids whose environment has PROBETAG=tag (and whose argv[0] is argv0)."""
    needle = ("PROBETAG=" + tag).encode()
    hits = []
    for p in all_pids():
        try:
            with open("/proc/%d/environ" % p, "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open("/proc/%d/cmdline" % p, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if argv0 is None or cmd[0].decode(errors="replace") == argv0:
            hits.append(p)
    return hits


def dump_filters(probe, pid, timeout=10.0):
    """The seccomp filters of `pid` (escape-probe seccomp_dump; needs CAP_SYS_ADMIN).
    Returns a list of programs, [] when the process has none, or None when they cannot be
    read here. Retried while the process is still inside execve (EPERM then)."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run([probe, "seccomp_dump=%d" % pid], capture_output=True,
                             text=True).stdout
        res = parse(out)
        progs = [seccomp_filter.parse_hex(d) for k, (r, d) in sorted(res.items())
                 if k.startswith("seccomp_dump:") and r == "ok"]
        if progs:
            return progs
        first = res.get("seccomp_dump:0") or res.get("seccomp_dump")
        if first and first[0] == "EINVAL":
            return []  # no filter at all
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)  # sleep-ok: the poll interval, against the deadline above


def sandboxed_sleeper(s, pid, ws, sandbox, tag, env_extra=None):
    """Start `sleep 600` under `sandbox` and return its host pid (found by a tag in its
    environment). The caller terminates it."""
    env = {"PATH": "/usr/bin:/bin", "PROBETAG": tag}
    env.update(env_extra or {})
    s.start(pid, ["/bin/sh", "-c", "exec sleep 600"], cwd=uri(ws), sandbox=sandbox, env=env)
    return wait_until(lambda: (find_marked(tag, "sleep") or [None])[0],
                      what="the sandboxed sleep of " + pid)


def ancestors_cmdlines(pid, stop_pid):
    """argv of each ancestor of pid up to (not including) stop_pid, nearest first."""
    out = []
    p = pid
    for _ in range(16):
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            if ppid in (0, stop_pid):
                break
            with open("/proc/%d/cmdline" % ppid, "rb") as f:
                out.append([a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]])
            p = ppid
        except (OSError, ValueError):
            break
    return out


class Daemon:
    """A host daemon on a socket (AF_UNIX pathname or abstract, or AF_INET) that answers
    "pong" to whatever it is sent; counts the connections it accepted."""

    def __init__(self, family, address):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(address)
        self.sock.listen(16)
        self.accepted = 0
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                c.settimeout(2)
                c.recv(64)
                c.sendall(b"pong\n")
            except OSError:
                pass
            c.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def scratch(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d


__all__ = ["uri", "special", "policy", "MODES", "find_probe", "world_copy", "parse",
           "run_probe", "find_marked", "dump_filters", "sandboxed_sleeper",
           "ancestors_cmdlines", "scratch", "Daemon", "MARKER_VAR"]
