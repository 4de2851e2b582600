#!/usr/bin/env python3
"""The sandbox (PROTOCOL.md §10), enforced by the kernel: the denial matrix through fs
requests and through a sandboxed shell, reads, the network, sandboxDenied, tty, and a
sandbox helper killed in the middle of a request. Skips (77) without Landlock."""
import ctypes
import os
import re
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

FAMILY = re.compile(r"read-only file system|no such file or directory|permission denied|"
                    r"operation not permitted|is not permitted", re.I)


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))


def uri(p):
    return "file://" + p


def entry(kind=None, path=None, access="read"):
    if kind:
        return {"path": {"type": "special", "value": {"kind": kind}}, "access": access}
    return {"path": {"type": "path", "path": uri(path)}, "access": access}


def policy(entries, cwd=None, roots=None, network="restricted"):
    sb = {"permissions": {"type": "managed",
                          "file_system": {"type": "restricted", "entries": entries},
                          "network": network},
          "windowsSandboxLevel": "disabled"}
    if cwd:
        sb["cwd"] = uri(cwd)
    if roots:
        sb["workspaceRoots"] = [uri(r) for r in roots]
    return sb


class Tree:
    """d/ws (the writable workspace, with .git/cfg), d/out (readable only)."""

    def __init__(self):
        self.d = tempfile.mkdtemp(prefix="sbx-")
        self.ws = self.d + "/ws"
        self.out = self.d + "/out"
        self.git = self.ws + "/.git"
        for t in (self.out, self.git, self.ws + "/work"):
            os.makedirs(t)
            self.populate(t)
        self.sb = policy([entry("root"), entry("project_roots", access="write")],
                         cwd=self.ws, roots=[self.ws])

    @staticmethod
    def populate(t):
        with open(t + "/f", "w") as fh:
            fh.write("orig")
        os.chmod(t + "/f", 0o644)
        os.makedirs(t + "/emptydir")

    def unchanged(self, t):
        assert open(t + "/f").read() == "orig", t
        assert stat.S_IMODE(os.stat(t + "/f").st_mode) == 0o644, t
        assert os.path.isdir(t + "/emptydir"), t
        extra = set(os.listdir(t)) - {"f", "emptydir"}
        assert not extra, (t, extra)

    def cleanup(self):
        shutil.rmtree(self.d, ignore_errors=True)


def expect_denied(s, method, params):
    code, msg = s.error(method, params)
    assert FAMILY.search(msg), (method, params, code, msg)
    return code, msg


def test_fs_denial_matrix(srv):
    t = Tree()
    s = srv.session()
    sb = t.sb
    for target in (t.out, t.git):
        expect_denied(s, "fs/writeFile", {"path": uri(target + "/f"), "dataBase64": b64("x"),
                                          "sandbox": sb})
        expect_denied(s, "fs/writeFile", {"path": uri(target + "/new"), "dataBase64": b64("x"),
                                          "sandbox": sb})
        expect_denied(s, "fs/open", {"handleId": "h", "path": uri(target + "/f"),
                                     "mode": "replace", "sandbox": sb})
        expect_denied(s, "fs/copy", {"sourcePath": uri(t.ws + "/work/f"),
                                     "destinationPath": uri(target + "/copied"),
                                     "recursive": False, "sandbox": sb})
        expect_denied(s, "fs/remove", {"path": uri(target + "/f"), "sandbox": sb})
        expect_denied(s, "fs/createDirectory", {"path": uri(target + "/newdir"), "sandbox": sb})
        expect_denied(s, "fs/remove", {"path": uri(target + "/emptydir"), "recursive": True,
                                       "sandbox": sb})
        t.unchanged(target)
        # reads are allowed everywhere under root:read
        r = s.call("fs/readFile", {"path": uri(target + "/f"), "sandbox": sb})
        assert unb64(r["dataBase64"]) == b"orig"
    # the same operations inside the writable root succeed
    w = t.ws + "/work"
    s.call("fs/writeFile", {"path": uri(w + "/f"), "dataBase64": b64("new"), "sandbox": sb})
    s.call("fs/writeFile", {"path": uri(w + "/created"), "dataBase64": b64("c"), "sandbox": sb})
    s.call("fs/open", {"handleId": "h", "path": uri(w + "/trunc"), "mode": "replace",
                       "sandbox": sb})
    s.call("fs/writeBlock", {"handleId": "h", "offset": 0, "chunk": b64("blk")})
    s.call("fs/close", {"handleId": "h"})
    s.call("fs/copy", {"sourcePath": uri(t.out + "/f"), "destinationPath": uri(w + "/copied"),
                       "recursive": False, "sandbox": sb})
    s.call("fs/createDirectory", {"path": uri(w + "/newdir"), "sandbox": sb})
    s.call("fs/remove", {"path": uri(w + "/emptydir"), "recursive": True, "sandbox": sb})
    s.call("fs/remove", {"path": uri(w + "/created"), "sandbox": sb})
    assert open(w + "/f").read() == "new"
    assert open(w + "/trunc").read() == "blk"
    assert open(w + "/copied").read() == "orig"
    assert os.path.isdir(w + "/newdir") and not os.path.exists(w + "/emptydir")
    assert not os.path.exists(w + "/created")
    # fs/open for reading under an enforced policy hands back a working fd
    ro = policy([entry(path=t.out)])
    s.call("fs/open", {"handleId": "r", "path": uri(t.out + "/f"), "sandbox": ro})
    blk = s.call("fs/readBlock", {"handleId": "r", "offset": 0, "len": 100})
    assert unb64(blk["chunk"]) == b"orig", blk
    s.call("fs/close", {"handleId": "r"})
    s.close()
    t.cleanup()


def test_large_payloads_through_the_helper(srv):
    """Issue 39 item 1: every sandboxed fs method with payloads well over 64 KiB, under a
    no-network policy (whose filter once refused the helper's send() of a reply's tail:
    every sandboxed reply over 64 KiB failed with "sandbox helper exited"). Each answer
    must equal the unsandboxed one, byte for byte."""
    t = Tree()
    s = srv.session()
    ro = policy([entry("project_roots")], cwd=t.ws, roots=[t.ws])
    data = os.urandom(32 << 20)
    for size in (64 << 10, (64 << 10) + 1, 1 << 20, 32 << 20):
        path = "%s/work/r%d" % (t.ws, size)
        with open(path, "wb") as fh:
            fh.write(data[:size])
        got = unb64(s.call("fs/readFile", {"path": uri(path), "sandbox": ro},
                           timeout=120)["dataBase64"])
        assert got == data[:size], ("fs/readFile", size, len(got))
    # a directory and a walk whose replies are several hundred KiB
    big = t.ws + "/work/many"
    for i in range(2500):
        os.makedirs("%s/d%04d-%s" % (big, i, "x" * 80))
    walk = {"maxDepth": 3, "maxDirectories": 5000, "maxEntries": 5000,
            "followDirectorySymlinks": False}
    for method, params in [("fs/readDirectory", {"path": uri(big)}),
                           ("fs/walk", {"path": uri(big), "options": walk})]:
        want = s.call(method, params, timeout=120)
        got = s.call(method, dict(params, sandbox=ro), timeout=120)
        if method == "fs/readDirectory":
            key = lambda e: e["fileName"]
            want, got = sorted(want["entries"], key=key), sorted(got["entries"], key=key)
            assert len(got) == 2500, len(got)
        assert got == want, method
    # streaming reads in 1 MiB blocks (the largest a block may be)
    src = "%s/work/r%d" % (t.ws, 32 << 20)
    s.call("fs/open", {"handleId": "big", "path": uri(src), "sandbox": ro})
    got = bytearray()
    while True:
        r = s.call("fs/readBlock", {"handleId": "big", "offset": len(got), "len": 1 << 20})
        got += unb64(r["chunk"])
        if r["eof"]:
            break
    s.call("fs/close", {"handleId": "big"})
    assert bytes(got) == data, len(got)
    # writes: a whole file, blocks through a replace handle, and a copy
    dst = t.ws + "/work/w"
    s.call("fs/writeFile", {"path": uri(dst), "dataBase64": b64(data[:8 << 20]),
                            "sandbox": t.sb}, timeout=120)
    assert open(dst, "rb").read() == data[:8 << 20]
    s.call("fs/open", {"handleId": "wr", "path": uri(dst + "2"), "mode": "replace",
                       "sandbox": t.sb})
    for off in range(0, 4 << 20, 1 << 20):
        s.call("fs/writeBlock", {"handleId": "wr", "offset": off,
                                 "chunk": b64(data[off:off + (1 << 20)])})
    s.call("fs/close", {"handleId": "wr"})
    assert open(dst + "2", "rb").read() == data[:4 << 20]
    s.call("fs/copy", {"sourcePath": uri(src), "destinationPath": uri(dst + "3"),
                       "recursive": False, "sandbox": t.sb}, timeout=120)
    assert open(dst + "3", "rb").read() == data
    s.close()
    t.cleanup()


def test_set_permissions_refused_sandboxed(srv):
    """fs/setPermissions takes no sandbox (PROTOCOL.md §11 (h)): one whose writable roots
    leave the file out, one that denies it, and even one that would let it be written
    are all refused, never run unconfined, and the file keeps its mode. The reference has
    no such method: it refuses them all too."""
    t = Tree()
    s = srv.session()
    secret = t.ws + "/secret"
    os.makedirs(secret)
    with open(secret + "/k", "w") as fh:
        fh.write("k")
    os.chmod(secret + "/k", 0o600)
    deny = policy([entry("root"), entry("project_roots", access="write"),
                   entry(path=secret, access="none")], cwd=t.ws, roots=[t.ws])
    ro = policy([entry("root")], cwd=t.ws, roots=[t.ws])
    for path, sb in [(t.out + "/f", t.sb),         # outside the writable roots
                     (t.ws + "/work/f", ro),       # nothing writable
                     (secret + "/k", deny),        # denied
                     (t.ws + "/work/f", t.sb)]:    # writable: refused all the same
        before = stat.S_IMODE(os.stat(path).st_mode)
        code, msg = s.error("fs/setPermissions", {"path": uri(path), "mode": 0o777,
                                                  "sandbox": sb})
        if IS_REF:
            assert code == -32601, (path, code, msg)
        else:
            assert (code, msg) == (
                -32602, "fs/setPermissions cannot run sandboxed; send it without a sandbox"), msg
        assert stat.S_IMODE(os.stat(path).st_mode) == before, path
    t.unchanged(t.out)
    t.unchanged(t.ws + "/work")
    s.close()
    t.cleanup()


def test_fs_reads(srv):
    t = Tree()
    s = srv.session()
    with open(t.ws + "/secret.env", "w") as fh:
        fh.write("k=v")
    os.makedirs(t.ws + "/hidden")
    with open(t.ws + "/hidden/k", "w") as fh:
        fh.write("k")
    # only the workspace is readable
    ro = policy([entry("project_roots")], cwd=t.ws, roots=[t.ws])
    assert unb64(s.call("fs/readFile", {"path": uri(t.ws + "/work/f"),
                                        "sandbox": ro})["dataBase64"]) == b"orig"
    expect_denied(s, "fs/readFile", {"path": uri(t.out + "/f"), "sandbox": ro})
    # every read method goes through the helper and answers as it does unsandboxed
    walk = {"maxDepth": 4, "maxDirectories": 100, "maxEntries": 100,
            "followDirectorySymlinks": False}
    for method, params in [("fs/readDirectory", {"path": uri(t.ws)}),
                           ("fs/getMetadata", {"path": uri(t.ws + "/work/f")}),
                           ("fs/canonicalize", {"path": uri(t.ws + "/work/../work/f")}),
                           ("fs/walk", {"path": uri(t.ws), "options": walk})]:
        want = s.call(method, params)
        got = s.call(method, dict(params, sandbox=ro))
        if method == "fs/readDirectory":
            key = lambda e: e["fileName"]
            want, got = sorted(want["entries"], key=key), sorted(got["entries"], key=key)
        if method == "fs/getMetadata":
            # owner/group names need the user database, which the sandbox may hide
            for k in ("owner", "group"):
                want.pop(k, None), got.pop(k, None)
        assert got == want, (method, got, want)
    expect_denied(s, "fs/getMetadata", {"path": uri(t.out + "/f"), "sandbox": ro})
    expect_denied(s, "fs/readDirectory", {"path": uri(t.out), "sandbox": ro})
    expect_denied(s, "fs/writeFile", {"path": uri(t.ws + "/work/f"), "dataBase64": b64("x"),
                                      "sandbox": ro})
    assert open(t.ws + "/work/f").read() == "orig"
    # none entries (a path and a glob) under a readable root
    deny = policy([entry("root"), entry(path=t.ws + "/hidden", access="none"),
                   {"path": {"type": "glob_pattern", "pattern": "**/*.env"}, "access": "none"}],
                  cwd=t.ws)
    code, msg = s.error("fs/readFile", {"path": uri(t.ws + "/hidden/k"), "sandbox": deny})
    assert FAMILY.search(msg), msg
    code, msg = s.error("fs/readFile", {"path": uri(t.ws + "/secret.env"), "sandbox": deny})
    assert FAMILY.search(msg) or "is not a file" in msg, msg
    assert unb64(s.call("fs/readFile", {"path": uri(t.out + "/f"),
                                        "sandbox": deny})["dataBase64"]) == b"orig"
    # a dynamic profile without cwd is refused
    assert s.error("fs/readFile", {"path": uri(t.out + "/f"), "sandbox": policy(
        [entry("project_roots")], roots=[t.ws])}) == (
        -32602, "file system sandbox context with dynamic permissions requires cwd")
    s.close()
    t.cleanup()


SHELL_OPS = [
    ("write", "echo new > {t}/f"),
    ("create", "echo new > {t}/created"),
    ("truncate", "truncate -s 0 {t}/f"),
    ("rename within", "mv {t}/f {t}/renamed"),
    ("rename into", "mv {ws}/work/mvsrc {t}/moved"),
    ("rename out of", "mv {t}/f {ws}/work/moved_out"),
    ("unlink", "rm -f {t}/f"),
    ("mkdir", "mkdir {t}/newdir"),
    ("rmdir", "rmdir {t}/emptydir"),
    ("symlink", "ln -s f {t}/sym"),
    ("hard link", "ln {t}/f {t}/hard"),
    ("chmod", "chmod 600 {t}/f"),
]


def run_ops(s, pid, t, target, sandbox, tty=False):
    script = "exec 2>&1\n" + "".join("echo '@@{}'; {} 2>&1; echo \"@@rc=$?\"\n".format(
        name, cmd.format(t=target, ws=t.ws)) for name, cmd in SHELL_OPS)
    r = s.start(pid, ["/bin/sh", "-c", script], cwd=uri(t.ws), sandbox=sandbox, tty=tty)
    assert r["sandboxType"] == "linuxSeccomp", r
    out = s.collect_until_closed(pid)
    text = (out["stdout"] + out["stderr"] + out["pty"]).decode(errors="replace")
    results = {}
    for block in text.split("@@")[1:]:
        if block.startswith("rc="):
            results[last] = (int(block[3:].split()[0]), results[last][1])
        else:
            last = block.splitlines()[0].strip()
            results[last] = (None, block)
    return results


def test_process_denial_matrix(srv):
    t = Tree()
    s = srv.session()
    for i, target in enumerate((t.out, t.git)):
        with open(t.ws + "/work/mvsrc", "w") as fh:
            fh.write("m")
        res = run_ops(s, "deny-%d" % i, t, target, t.sb)
        for name, _ in SHELL_OPS:
            rc, text = res[name]
            assert rc != 0, (target, name, text)
            assert FAMILY.search(text), (target, name, text)
        t.unchanged(target)
        assert os.path.exists(t.ws + "/work/mvsrc")
        if os.path.exists(t.ws + "/work/moved_out"):  # mv copies across mounts, then fails
            os.unlink(t.ws + "/work/moved_out")
    # inside the writable root every operation succeeds (fresh tree per op sequence)
    target = t.ws + "/work"
    with open(t.ws + "/work/mvsrc", "w") as fh:
        fh.write("m")
    script = ("echo new > {t}/f && echo new > {t}/created && truncate -s 0 {t}/created && "
              "mv {t}/created {t}/renamed && mkdir {t}/newdir && rmdir {t}/emptydir && "
              "ln -s f {t}/sym && ln {t}/f {t}/hard && chmod 600 {t}/f && rm {t}/hard && "
              "echo ok").format(t=target)
    s.start("allow", ["/bin/sh", "-c", script], cwd=uri(t.ws), sandbox=t.sb)
    out = s.collect_until_closed("allow")
    assert out["exit_code"] == 0 and out["stdout"] == b"ok\n", out
    assert open(target + "/f").read() == "new\n"
    assert stat.S_IMODE(os.stat(target + "/f").st_mode) == 0o600
    assert os.path.islink(target + "/sym") and os.path.exists(target + "/renamed")
    assert os.path.isdir(target + "/newdir") and not os.path.exists(target + "/emptydir")
    s.close()
    t.cleanup()


def test_process_tty_and_reads(srv):
    t = Tree()
    s = srv.session()
    s.start("tty", ["/bin/sh", "-c", "cat {0}/f; echo; echo x > {0}/f".format(t.out)],
            cwd=uri(t.ws), sandbox=t.sb, tty=True)
    out = s.collect_until_closed("tty")
    assert b"orig" in out["pty"] and b"Read-only file system" in out["pty"], out
    assert open(t.out + "/f").read() == "orig"
    # a read-only profile over the system dirs and the workspace: /tmp/out is unreadable
    ro = policy([entry("minimal"), entry("project_roots")], cwd=t.ws, roots=[t.ws])
    s.start("ro", ["/bin/sh", "-c", "cat work/f; echo; cat {}/f".format(t.out)],
            cwd=uri(t.ws), sandbox=ro)
    out = s.collect_until_closed("ro")
    assert out["stdout"].startswith(b"orig\n"), out
    assert out["exit_code"] != 0 and FAMILY.search(out["stderr"].decode()), out
    # a none file and a none directory under a readable root
    with open(t.ws + "/work/secret", "w") as fh:
        fh.write("s3cret")
    hide = policy([entry("root"), entry(path=t.ws + "/work/secret", access="none"),
                   entry(path=t.out, access="none")])
    s.start("hide", ["/bin/sh", "-c", "cat work/secret; ls {0}; cat {0}/f; echo done".format(
        t.out)], cwd=uri(t.ws), sandbox=hide)
    out = s.collect_until_closed("hide")
    assert b"s3cret" not in out["stdout"] and b"orig" not in out["stdout"], out
    assert out["stdout"].endswith(b"done\n"), out
    assert len(FAMILY.findall(out["stderr"].decode())) >= 2, out
    code, msg = s.error("fs/readFile", {"path": uri(t.ws + "/work/secret"), "sandbox": hide})
    assert msg == "Permission denied (os error 13)", msg
    s.close()
    t.cleanup()


def test_network(srv):
    t = Tree()
    s = srv.session()
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    port = lst.getsockname()[1]
    # socketpair(AF_UNIX) stays allowed on both (it reaches nothing but itself); send()
    # is sendto(2), which both filters deny with the network restricted: sendmsg is not.
    unix = "a, b = socket.socketpair(); a.sendmsg([b'u']); assert b.recv(1) == b'u'\n"
    code = ("import socket\n" + unix +
            "print('unix ok', flush=True)\n"
            "c = socket.create_connection(('127.0.0.1', %d), timeout=5)\n"
            "print('tcp ok')\n" % port)
    s.start("net", ["python3", "-c", code], cwd=uri(t.ws), sandbox=t.sb)
    out = s.collect_until_closed("net")
    assert out["stdout"] == b"unix ok\n", out
    assert out["exit_code"] != 0 and FAMILY.search(out["stderr"].decode()), out
    bash = "exec 3<>/dev/tcp/127.0.0.1/%d && echo connected" % port
    s.start("bash", ["/bin/bash", "-c", bash], cwd=uri(t.ws), sandbox=t.sb)
    out = s.collect_until_closed("bash")
    assert b"connected" not in out["stdout"] and out["exit_code"] != 0, out
    # the same with the network enabled connects (the test can fail)
    on = policy([entry("root"), entry("project_roots", access="write")], cwd=t.ws,
                roots=[t.ws], network="enabled")
    s.start("net-on", ["python3", "-c", code], cwd=uri(t.ws), sandbox=on)
    out = s.collect_until_closed("net-on")
    assert out["stdout"] == b"unix ok\ntcp ok\n", out
    lst.close()
    # With the network restricted: a network namespace of its own, not the host's and
    # not another sandbox's (two at once), its loopback up (SIOCGIFFLAGS on an AF_UNIX
    # socketpair: IP sockets are refused, and socket(2) itself by ours). A root server makes them ahead; these checks
    # hold for both kinds.
    own = ("import fcntl, os, socket, struct, sys, time\n"
           "s = socket.socketpair()[0]\n"
           "flags = struct.unpack('H', fcntl.ioctl(s, 0x8913, struct.pack('16sH', b'lo', 0))"
           "[16:18])[0]\n"
           "print(os.readlink('/proc/self/ns/net'), 'up' if flags & 1 else 'down', flush=True)\n"
           "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n")
    gate = t.d + "/both-seen"  # both stay until the test has seen both
    for i in range(2):
        s.start("own-%d" % i, ["python3", "-c", own, gate], cwd=uri(t.ws), sandbox=t.sb)
    seen = []
    for i in range(2):
        s.wait_notification(lambda n: n["method"] == "process/output", process_id="own-%d" % i)
        seen.append(s.output_so_far("own-%d" % i)["stdout"].decode().split())
    open(gate, "w").close()
    for i in range(2):
        out = s.collect_until_closed("own-%d" % i)
        assert out["exit_code"] == 0, out
    host = os.readlink("/proc/self/ns/net")
    if sandbox_mode(s) == "landlock":
        # without namespaces the host's network is the sandbox's: what holds is that
        # no IP socket can be made (above); a namespace of its own is namespace-only
        print("    network namespaces seen (namespace-only): host %s, sandboxes %s" % (host, seen))
    else:
        assert all(len(x) == 2 and x[1] == "up" for x in seen), seen
        assert len({host, seen[0][0], seen[1][0]}) == 3, (host, seen)
    s.close()
    t.cleanup()


def exited_note(s, pid):
    return next(n for n in s.notes[pid] if n["method"] == "process/exited")


def test_sandbox_denied(srv):
    t = Tree()
    s = srv.session()
    cases = [
        ("deny-exit1", "echo x > %s/f; exit 1" % t.out, t.sb, True),
        ("deny-exit0", "echo x > %s/f; exit 0" % t.out, t.sb, False),
        ("quiet-exit1", "exit 1", t.sb, False),
        ("exit2", "(echo x > %s/f) 2>/dev/null; exit 2" % t.out, t.sb, False),
        ("unsandboxed", "echo 'permission denied'; exit 1", None, False),
    ]
    for pid, script, sb, want in cases:
        r = s.start(pid, ["/bin/sh", "-c", script], cwd=uri(t.ws), sandbox=sb)
        assert r["sandboxType"] == ("linuxSeccomp" if sb else "none"), r
        s.collect_until_closed(pid)
        assert exited_note(s, pid)["sandboxDenied"] is want, (pid, s.notes[pid])
        assert s.read(pid)["sandboxDenied"] is want, pid
    # the sandbox cannot signal the daemon (Landlock signal scoping, ABI 6+)
    if landlock_abi() >= 6:
        s.start("sig", ["/bin/sh", "-c", "kill -0 %d" % srv.inner_pid], cwd=uri(t.ws),
                sandbox=t.sb)
        out = s.collect_until_closed("sig")
        # ours: EPERM; the reference: ESRCH (its own pid namespace)
        assert out["exit_code"] != 0, out
    # a sandbox that needs no enforcement is reported as none
    r = s.start("dis", ["/bin/true"], sandbox={"permissions": {"type": "disabled"},
                                                "windowsSandboxLevel": "disabled"})
    assert r["sandboxType"] == ("none" if not IS_REF else "linuxSeccomp"), r  # §10.4
    s.collect_until_closed("dis")
    s.close()
    t.cleanup()


def helper_pids(srv):
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            st = open("/proc/%s/stat" % p).read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        if ppid == srv.pid and comm == "exec-sbx-helper":
            pids.append(int(p))
    return pids


def serving_helper(pid):
    """The process of helper pid that serves under the filter: the helper's init
    itself, or, where its init decides the helper's calls (no namespaces, deny entries
    made later: the broker), the init's child that serves. Told apart by their filter
    count: inside a container every process is under the runtime's filter already (Docker's
    rules), and the serving child has one more than its init."""
    def filters(p):
        try:
            return int(re.search(r"^Seccomp_filters:\s+(\d+)", open("/proc/%d/status" % p).read(),
                                 re.M).group(1))
        except (OSError, AttributeError):
            return 0
    try:
        kids = open("/proc/%d/task/%d/children" % (pid, pid)).read().split()
    except OSError:
        kids = []
    return next((int(k) for k in kids if filters(int(k)) > filters(pid)), pid)


def sandbox_mode(s):
    """Ours: environment/info's sandbox.mode (namespaces, or landlock without them);
    the reference sandboxes with namespaces."""
    if IS_REF:
        return "namespaces"
    return s.call("environment/info", {}).get("sandbox", {}).get("mode", "namespaces")


@ours_only
def test_helper_killed_mid_request(srv):
    t = Tree()
    s = srv.session()
    p = {"path": uri(t.ws + "/work/a"), "dataBase64": b64("1"), "sandbox": t.sb}
    before = set(helper_pids(srv))  # helpers of earlier tests' (detached) sessions
    s.call("fs/writeFile", p)
    pids = sorted(set(helper_pids(srv)) - before)
    assert len(pids) == 1, pids
    s.call("fs/writeFile", p)  # warm: the same helper serves the next request
    assert sorted(set(helper_pids(srv)) - before) == pids
    # Stop the helper so the next request is certainly in flight, then kill it.
    # (A helper is the init of its own PID namespace: it serves without exec; behind
    # the broker its child serves, and dies with it.)
    serving = serving_helper(pids[0])
    os.kill(serving, signal.SIGSTOP)
    rid = s.send_request("fs/writeFile", dict(p, dataBase64=b64("2")))
    # In flight: the request waits, unread, in the stopped helper's socket.
    wait_until(lambda: unix_socket_unread(serving) > 0, 10, "the request to reach the helper")
    os.kill(pids[0], signal.SIGKILL)
    resp = s.wait_response(rid)
    assert resp["error"]["code"] == -32603, resp
    assert "sandbox helper" in resp["error"]["message"], resp
    # the next request gets a fresh helper and works
    s.call("fs/writeFile", dict(p, dataBase64=b64("3")))
    assert open(t.ws + "/work/a").read() == "3"
    new = sorted(set(helper_pids(srv)) - before)
    assert len(new) == 1 and new != pids, (pids, new)
    s.close()
    t.cleanup()


@ours_only
def test_concurrent_sandboxed_requests(srv):
    t = Tree()
    s = srv.session()
    before = set(helper_pids(srv))
    ids = [s.send_request("fs/writeFile", {"path": uri("%s/work/c%d" % (t.ws, i)),
                                           "dataBase64": b64("v%d" % i), "sandbox": t.sb})
           for i in range(12)]
    for i in ids:
        assert s.wait_response(i).get("result") == {}, i
    for i in range(12):
        assert open("%s/work/c%d" % (t.ws, i)).read() == "v%d" % i
    new = set(helper_pids(srv)) - before
    assert 1 <= len(new) <= 2, new  # at most two helpers per policy
    s.close()
    t.cleanup()


@ours_only
@needs_own_server
def test_helpers_die_with_session(_):
    srv = Server(ttl=1)
    try:
        t = Tree()
        s = srv.session()
        s.call("fs/writeFile", {"path": uri(t.ws + "/work/a"), "dataBase64": b64("1"),
                                "sandbox": t.sb})
        assert len(helper_pids(srv)) == 1
        s.close()  # detached; the session (and its helper) ends after the 1 s TTL
        wait_until(lambda: not helper_pids(srv), 20, "the session's helper to go")
        t.cleanup()
    finally:
        srv.stop()


@ours_only
@needs_own_server
def test_helpers_shared_across_sessions(_):
    """One warm helper per policy, whichever session asks; it lives while any
    session that used it does."""
    srv = Server(ttl=1)
    t = Tree()
    try:
        a, b = srv.session(), srv.session()
        w = lambda s, n: s.call("fs/writeFile", {"path": uri(t.ws + "/work/" + n),
                                                 "dataBase64": b64(n), "sandbox": t.sb})
        w(a, "a")
        w(b, "b")
        assert len(helper_pids(srv)) == 1, helper_pids(srv)
        a.call("session/close", {})
        a.close()
        w(b, "b2")  # still served by the same helper
        assert len(helper_pids(srv)) == 1, helper_pids(srv)
        b.close()
        wait_until(lambda: not helper_pids(srv), 20, "the helper to end with the last session")
    finally:
        srv.stop()
        t.cleanup()


@ours_only
def test_helper_dead_while_idle_is_replaced(srv):
    """A helper that died between requests is noticed: the next request gets a
    fresh helper and runs, instead of failing."""
    t = Tree()
    s = srv.session()
    p = {"path": uri(t.ws + "/work/a"), "dataBase64": b64("1"), "sandbox": t.sb}
    before = set(helper_pids(srv))
    s.call("fs/writeFile", p)
    pids = sorted(set(helper_pids(srv)) - before)
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    wait_until(lambda: _state(pids[0]) in (None, "Z"), 10, "the helper to die")
    s.call("fs/writeFile", dict(p, dataBase64=b64("2")))
    assert open(t.ws + "/work/a").read() == "2"
    new = sorted(set(helper_pids(srv)) - before)
    assert len(new) == 1 and new != pids, (pids, new)
    s.close()
    t.cleanup()


def _state(pid):
    try:
        st = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    return st[st.rindex(")") + 2:].split()[0]


@ours_only
@needs_own_server
def test_helper_out_of_fds_says_what_ran_out(_):
    """A helper that cannot start because the server ran out of descriptors is not
    reported as a host that cannot sandbox."""
    if not os.path.exists("/usr/bin/prlimit") or WRAPPER:
        raise TestSkip("needs prlimit and no wrapper")
    srv = Server(cmd=["/usr/bin/prlimit", "--nofile=40", SERVER_PATH, "--listen",
                      "ws://127.0.0.1:0"])
    t = Tree()
    socks = []
    try:
        s = srv.session()
        for _ in range(60):  # past the limit: libuv accepts and drops the excess
            socks.append(socket.create_connection((srv.host, srv.port)))
        wait_until(lambda: fd_count(srv.pid) >= 38, 10, "the server to reach its fd limit")
        err = s.error("fs/writeFile", {"path": uri(t.ws + "/work/x"), "dataBase64": b64("x"),
                                       "sandbox": t.sb})
        assert "Too many open files" in err[1] and "cannot be enforced" not in err[1], err
        assert not os.path.exists(t.ws + "/work/x")
        for k in socks:
            k.close()
        socks = []
        s.close()
    finally:
        for k in socks:
            k.close()
        srv.stop(check=False)
        t.cleanup()


def test_root_write_keeps_devices_and_denials(srv):
    """An approved write to "/" (linuxRootWritePreservesDevices,
    linuxApprovedRootWritePreservesRestrictions): the child writes anywhere, the
    standard devices work, and a `none` entry is still denied."""
    t = Tree()
    s = srv.session()
    caps = s.call("environment/info", {})["capabilities"]
    assert caps["linuxRootWritePreservesDevices"] and caps[
        "linuxApprovedRootWritePreservesRestrictions"], caps
    assert caps["sandboxedFileStreaming"], caps
    secret = t.d + "/secret"
    os.makedirs(secret)
    with open(secret + "/s", "w") as fh:
        fh.write("topsecret")
    sb = policy([entry("root", access="write"), entry(path=secret, access="none")],
                cwd=t.ws, roots=[t.ws])
    target = t.out + "/written"
    s.start("rw", ["/bin/sh", "-c", "echo x > /dev/null && echo devnull-ok; "
                   "head -c 4 /dev/urandom | wc -c; cat %s/s; echo w > %s && echo wrote"
                   % (secret, target)], cwd=uri(t.ws), sandbox=sb)
    s.collect_until_closed("rw")
    out = s.output_so_far("rw")
    assert b"devnull-ok" in out["stdout"] and b"4" in out["stdout"], out
    assert b"wrote" in out["stdout"] and open(target).read() == "w\n", out
    assert b"topsecret" not in out["stdout"] and FAMILY.search(out["stderr"].decode()), out
    t.cleanup()


def test_workspace_in_dev_shm(srv):
    """A workspace under /dev/shm (a CI runner's tmpfs): the sandbox's private /dev
    used to hide it, so every sandboxed write there failed with ENOENT while the
    reference's (bubblewrap binds roots after --dev) succeeded. Both kinds of view:
    "/" readable, and only the minimal platform readable. The rest of /dev stays
    private: another directory in the host's /dev/shm is not there, and /dev/pts
    holds no other terminal."""
    if not os.path.isdir("/dev/shm"):
        raise TestSkip("no /dev/shm")
    d = tempfile.mkdtemp(prefix="sbx-shm-", dir="/dev/shm")
    other = tempfile.mkdtemp(prefix="sbx-shm-other-", dir="/dev/shm")
    try:
        ws = d + "/ws"
        os.makedirs(ws + "/work")
        with open(other + "/host", "w") as fh:
            fh.write("host")
        s = srv.session()
        for i, readable in enumerate(("root", "minimal")):
            # A device node granted as a root is not shown in the private /dev (ours;
            # stricter than binding it there).
            dev = [] if IS_REF else [entry(path="/dev/kmsg", access="write")]
            sb = policy([entry(readable), entry("project_roots", access="write")] + dev,
                        cwd=ws, roots=[ws])
            f = ws + "/work/f%d" % i
            assert s.call("fs/writeFile", {"path": uri(f), "dataBase64": b64("fs"),
                                           "sandbox": sb}) == {}
            assert open(f).read() == "fs"
            r = unb64(s.call("fs/readFile", {"path": uri(f), "sandbox": sb})["dataBase64"])
            assert r == b"fs", r
            pid = "shm%d" % i
            s.start(pid, ["/bin/sh", "-c",
                          "echo sh > work/p && cat work/p; ls %s 2>&1; echo x > %s/w 2>&1; "
                          "test -e /dev/kmsg && echo KMSG-SHOWN; ls /dev/pts" % (other, other)],
                    cwd=uri(ws), sandbox=sb)
            out = s.collect_until_closed(pid)
            text = out["stdout"].decode()
            assert out["stdout"].startswith(b"sh\n") and open(ws + "/work/p").read() == "sh\n", out
            if sandbox_mode(s) == "landlock":
                # without namespaces the host's /dev is there: its names (a listing of
                # /dev/shm's other directories, a stat of /dev/kmsg, /dev/pts's
                # entries) are namespace-only; nothing there opens or is written
                err = out["stderr"].decode()
                assert FAMILY.search(err) and not os.path.exists(other + "/w"), (text, err)
                print("    /dev without a view of its own: %s" % text.split("\n")[1:])
                continue
            assert "host" not in text and FAMILY.search(text), text
            assert IS_REF or "KMSG-SHOWN" not in text, text
            assert text.split()[-1] == "ptmx", text
            assert not os.path.exists(other + "/w")
        s.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


@ours_only
def test_granted_dev_directory_has_no_working_devices(srv):
    """A directory under /dev granted as a root (/dev/input, /dev/dri) is shown
    inside the private /dev with nodev: its device nodes do not open, where the host's
    devtmpfs would have handed out the devices themselves. Both kinds of view, the
    grant read and write. Without namespaces (no /dev of the sandbox's own) such a root
    is not granted: its nodes do not open (the directory lists where "/" is readable)."""
    if os.geteuid() != 0:
        raise TestSkip("needs root to make a device node under /dev")
    # made in the server's /dev (a container's is its own), named as the server sees it
    made = tempfile.mkdtemp(prefix="sbx-devdir-", dir=srv.host_path("/dev"))
    d = "/dev/" + os.path.basename(made)
    ws = tempfile.mkdtemp(prefix="sbx-devws-")
    try:
        os.mknod(made + "/zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
        os.chmod(made + "/zero", 0o666)
        s = srv.session()
        landlock = sandbox_mode(s) == "landlock"
        s.start("devdir", ["/bin/sh", "-c", "head -c 4 %s/zero | wc -c" % d], cwd=uri(ws))
        out = s.collect_until_closed("devdir")  # a working node where the server runs
        assert out["stdout"] == b"4\n", out
        for i, (readable, access) in enumerate((("root", "write"), ("minimal", "read"),
                                                ("minimal", "write"))):
            sb = policy([entry(readable), entry("project_roots", access="write"),
                         entry(path=d, access=access)], cwd=ws, roots=[ws])
            pid = "devdir%d" % i
            s.start(pid, ["/bin/sh", "-c", "ls %s; head -c 4 %s/zero | wc -c" % (d, d)],
                    cwd=uri(ws), sandbox=sb)
            out = s.collect_until_closed(pid)
            text = (out["stdout"] + out["stderr"]).decode()
            if landlock:  # no /dev of its own: a root under the host's /dev is left out
                assert out["stdout"].split()[-1] == b"0" and "Permission denied" in text, text
                continue
            assert out["stdout"].startswith(b"zero\n"), text  # the directory is there
            assert out["stdout"].split()[-1] == b"0" and FAMILY.search(text), text
        s.close()
    finally:
        shutil.rmtree(made, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


def deleted_files_held(pid, under):
    """The deleted files under `under` that process pid still holds open."""
    held = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith(under) and target.endswith(" (deleted)"):
            held.append(target)
    return held


def test_replaced_files_are_let_go(srv):
    """fs/writeFile replaces a file by renaming a new one over it, and holds the old
    one open until its reply is out (freeing an inode waits for its writeback):
    afterwards no process of the server keeps a replaced file, so its disk space
    comes back. Sandboxed (served in the helper) and not."""
    t = Tree()
    s = srv.session()
    f = t.ws + "/work/f"
    for i in range(20):
        sb = t.sb if i % 2 else None
        p = {"path": uri(f), "dataBase64": b64(os.urandom(64 << 10))}
        if sb:
            p["sandbox"] = sb
        assert s.call("fs/writeFile", p) == {}
    if not IS_REF:
        pids = [srv.pid] + helper_pids(srv)
        wait_until(lambda: not any(deleted_files_held(p, t.d) for p in pids), 10,
                   "replaced files to be closed")
    s.close()
    t.cleanup()


def no_namespaces_server(*args):
    """Our server under no-namespaces, the test tool whose seccomp filter makes every
    namespace-creating call fail (what Docker's and Kubernetes' default rules do)."""
    if IS_REF:
        raise TestSkip("ours: the wrapper is our test tool")
    tool = os.path.join(os.environ.get("EXEC_BUILD_DIR", os.path.dirname(SERVER_PATH)),
                        "no-namespaces")
    if not os.access(tool, os.X_OK):
        raise TestSkip("no-namespaces test tool not built")
    return Server(cmd=[tool, SERVER_PATH, "--listen", "ws://127.0.0.1:0"] + list(args))


@ours_only
@needs_own_server
def test_fail_closed_without_namespaces(_):
    """A host that refuses namespaces, and an operator who asked for them
    (--sandbox-mode namespaces): sandboxed requests are refused, never run unconfined,
    with the cause and what to do in the words; unsandboxed ones still work."""
    srv = no_namespaces_server("--sandbox-mode", "namespaces")
    t = Tree()
    try:
        s = srv.session()
        assert s.call("environment/info", {})["sandbox"]["mode"] == "none"
        marker = t.ws + "/work/ran"
        err = s.error("process/start", {"processId": "p", "argv": ["/bin/sh", "-c",
                                                                     "touch " + marker],
                                        "cwd": uri(t.ws), "env": {"PATH": "/usr/bin:/bin"},
                                        "tty": False, "sandbox": t.sb})
        assert err[0] == -32602 and err[1].startswith(
            "sandbox intent cannot be enforced on this executor (--sandbox-mode namespaces, "
            "and namespaces are refused here: unshare refused;"), err
        assert "--sandbox-mode auto or landlock" in err[1], err
        err = s.error("fs/writeFile", {"path": uri(t.ws + "/work/x"), "dataBase64": b64("x"),
                                       "sandbox": t.sb})
        assert err[0] == -32600 and "sandbox" in err[1] and "--sandbox-mode" in err[1], err
        assert not os.path.exists(t.ws + "/work/x") and not os.path.exists(marker)
        # a sandboxed read is refused too, even with the whole disk readable (it is
        # served in the helper's view, never by the server itself)
        err = s.error("fs/readFile", {"path": uri(t.out + "/f"), "sandbox": t.sb})
        assert err[0] == -32600 and "sandbox" in err[1], err
        # unsandboxed requests still run
        s.call("fs/readFile", {"path": uri(t.out + "/f")})
        s.start("u", ["/bin/sh", "-c", "echo unsandboxed"], cwd=uri(t.ws))
        s.collect_until_closed("u")
        assert b"unsandboxed" in s.output_so_far("u")["stdout"]
        assert not os.path.exists(t.ws + "/.git/x")
        s.close()
    finally:
        srv.stop()
        t.cleanup()
    assert "sandbox: none; " in srv.stderr_text(), srv.stderr_text()


@ours_only
@needs_own_server
def test_sandbox_without_namespaces(_):
    """The same host with the default --sandbox-mode auto: the sandbox without
    namespaces runs instead (Landlock, seccomp, the init deciding every change), says
    so at start and in environment/info, and holds: the command writes in its
    workspace and nowhere else, .git stays read-only, sandboxed fs requests work
    within the policy."""
    srv = no_namespaces_server()
    t = Tree()
    try:
        s = srv.session()
        info = s.call("environment/info", {})["sandbox"]
        assert info["mode"] == "landlock" and info["available"] == ["landlock"], info
        r = s.start("p", ["/bin/sh", "-c", "echo in > work/new; cat work/new; "
                          "echo x > %s/f; echo x > .git/x; echo done" % t.out],
                    cwd=uri(t.ws), sandbox=t.sb)
        assert r.get("sandboxMode") == "landlock", r
        out = s.collect_until_closed("p")
        assert out["stdout"] == b"in\ndone\n", out
        assert FAMILY.search(out["stderr"].decode()), out
        t.unchanged(t.out)
        assert not os.path.exists(t.ws + "/.git/x")
        assert s.call("fs/writeFile", {"path": uri(t.ws + "/work/fs"), "dataBase64": b64("fs"),
                                       "sandbox": t.sb}) == {}
        assert open(t.ws + "/work/fs").read() == "fs"
        expect_denied(s, "fs/writeFile", {"path": uri(t.git + "/f"), "dataBase64": b64("x"),
                                          "sandbox": t.sb})
        assert open(t.git + "/f").read() == "orig"
        s.close()
    finally:
        srv.stop()
        t.cleanup()
    assert "sandbox: Landlock without namespaces" in srv.stderr_text(), srv.stderr_text()


if __name__ == "__main__":
    if not IS_REF and landlock_abi() < 1:
        print("SKIP: Landlock is not available on this kernel")
        sys.exit(SKIP)
    if WRAPPER:
        # valgrind 3.19 does not know the Landlock system calls, so the server (rightly)
        # fails closed on every sandboxed request; nothing here can be exercised.
        print("SKIP: Landlock is not available under " + WRAPPER[0])
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=120)
