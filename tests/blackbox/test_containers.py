#!/usr/bin/env python3
"""The places tests/blackbox/containers.py runs the server in are what they say they
are, so the sandbox suites run there test what they claim: under Docker's rules the
namespace and mount calls are refused as Docker refuses them, without user namespaces
none can be made, a podman container has a PID namespace of its own; and a server
started in each is found from the host (its pid, its number inside, its /dev), is
stopped by SIGTERM with its exit status, and leaves no container behind. Each place is
skipped, saying why, where it cannot start anything here."""
import ctypes
import errno
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
import containers  # noqa

# What a process in the place can do to itself: errno names, or "ok".
PROBE = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
def clone(flags):
    r = libc.syscall(ctypes.c_long(56), ctypes.c_long(flags | 17), 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    return "ok" if r > 0 else errno.errorcode[ctypes.get_errno()]
out = {"pidns": os.readlink("/proc/self/ns/pid"), "uid": os.getuid()}
pid = os.fork()
if pid == 0:
    os._exit(0)
out["fork"] = "ok" if os.waitpid(pid, 0)[1] == 0 else "failed"
out["clone3"] = call(435, 0, 0)                      # size 0: EINVAL where allowed
out["setns"] = call(308, -1, 0)                      # EBADF where allowed
out["mount"] = call(165, 0, 0, 0, 0, 0)              # EFAULT where allowed
out["clone_newuser"] = clone(0x10000000)
out["unshare_newns"] = call(272, 0x20000)
out["unshare_newuser"] = call(272, 0x10000000)
print(json.dumps(out))
"""

NOBODY = (65534, 65534)


def probe(kind, user=None):
    why = containers.available(kind, user)
    if why:
        raise TestSkip(why)
    r = subprocess.run(containers.wrap(kind, ["/usr/bin/python3", "-c", PROBE], "/tmp", user),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, (kind, r.returncode, r.stderr[-600:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def host_pidns():
    return os.readlink("/proc/self/ns/pid")


@needs_own_server
def test_docker_profile_is_podmans_with_dockers_refusals(_):
    if not os.path.exists(containers.PODMAN_PROFILE):
        raise TestSkip(containers.PODMAN_PROFILE + " is missing (containers-common)")
    with open(containers.PODMAN_PROFILE) as f:
        podman = json.load(f)
    prof = containers.docker_profile()
    assert prof["defaultAction"] == "SCMP_ACT_ERRNO" and prof["defaultErrnoRet"] == errno.EPERM
    named = {}
    for rule in prof["syscalls"]:
        for n in rule["names"]:
            named.setdefault(n, []).append(rule)
    for n in containers.DOCKER_DENIED:
        assert [(r["action"], r.get("errnoRet")) for r in named[n]] == [
            ("SCMP_ACT_ERRNO", errno.EPERM)], (n, named[n])
    assert [(r["action"], r.get("args")) for r in named["clone"]] == [
        ("SCMP_ACT_ALLOW", [{"index": 0, "value": 0x7E020000, "valueTwo": 0,
                             "op": "SCMP_CMP_MASKED_EQ"}])], named["clone"]
    assert [(r["action"], r.get("errnoRet")) for r in named["clone3"]] == [
        ("SCMP_ACT_ERRNO", errno.ENOSYS)], named["clone3"]
    # everything else as podman has it
    taken = set(containers.DOCKER_DENIED) | {"clone", "clone3"}
    before = sorted(json.dumps(dict(r, names=sorted(set(r["names"]) - taken)), sort_keys=True)
                    for r in podman["syscalls"] if set(r["names"]) - taken)
    after = sorted(json.dumps(dict(r, names=sorted(r["names"])), sort_keys=True)
                   for r in prof["syscalls"][:-3])
    assert before == after


@needs_own_server
def test_podman_is_a_container_with_user_namespaces(_):
    got = probe("podman")
    assert got["pidns"] != host_pidns(), got
    assert got["fork"] == "ok" and got["clone_newuser"] == "ok", got
    assert got["unshare_newuser"] == "ok", got
    # podman's own profile lets these reach the kernel, which answers for itself (so
    # the refusals under Docker's rules below are the filter's)
    assert (got["clone3"], got["setns"], got["mount"]) == ("EINVAL", "EBADF", "EFAULT"), got


@needs_own_server
def test_docker_seccomp_refuses_namespaces_and_mounts(_):
    for user in (None, NOBODY):
        got = probe("docker-seccomp", user)
        assert got["pidns"] != host_pidns(), got
        assert got["fork"] == "ok", got  # clone without a namespace flag
        for call in ("clone_newuser", "unshare_newuser", "unshare_newns", "setns", "mount"):
            assert got[call] == "EPERM", (user, call, got)
        assert got["clone3"] == "ENOSYS", got


@needs_own_server
def test_no_userns_refuses_user_namespaces(_):
    got = probe("no-userns")
    assert got["pidns"] == host_pidns(), got  # bubblewrap as the issue runs it
    assert got["unshare_newuser"] == "ENOSPC" and got["clone_newuser"] == "ENOSPC", got
    assert got["unshare_newns"] == "ok", got  # root keeps its user namespace's capabilities
    got = probe("no-userns", NOBODY)
    assert got["uid"] == NOBODY[0], got
    assert got["unshare_newuser"] == "ENOSPC" and got["unshare_newns"] == "EPERM", got


def gone(kind, srv):
    if kind == "no-userns":
        return True
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"],
                           capture_output=True, text=True).stdout.split()
    return containers.container_name(srv.mark) not in names


@needs_own_server
def test_a_server_inside_is_found_from_the_host(_):
    """srv.pid is the server itself, srv.inner_pid its number where it runs (a command it
    starts unsandboxed sees itself in the same PID namespace), srv.host_path its files, and
    a Beside process is its neighbour there. SIGTERM stops it with status 0."""
    if IS_REF:
        raise TestSkip("ours: the server binary is checked by its path")
    ran = 0
    for kind in containers.KINDS:
        if containers.available(kind):
            print("  %s: %s" % (kind, containers.available(kind)))
            continue
        ran += 1
        srv = Server(container=kind)
        try:
            assert os.path.realpath("/proc/%d/exe" % srv.pid) == os.path.realpath(SERVER_PATH)
            inner = srv.inner_pid
            assert (inner == srv.pid) == (kind == "no-userns"), (kind, inner, srv.pid)
            # a podman container's /dev is its own (no kmsg); bubblewrap binds the host's
            dev = set(os.listdir(srv.host_path("/dev")))
            assert "null" in dev, (kind, dev)
            if os.path.exists("/dev/kmsg"):
                assert ("kmsg" in dev) == (kind == "no-userns"), (kind, dev)
            nb = containers.Beside(srv.pid, ["sleep", "60"], {"PATH": "/usr/bin:/bin"})
            try:
                s = srv.session()
                s.start("look", ["/bin/sh", "-c", "cat /proc/%d/comm /proc/%d/comm"
                                 % (inner, nb.pid)])
                out = s.collect_until_closed("look")["stdout"].decode().split()
                assert out == ["exec-server", "sleep"], (kind, out)  # itself, its neighbour
                s.close()
            finally:
                nb.kill()
            assert srv.stop() == 0
            wait_until(lambda: gone(kind, srv), 30, "the %s container to go" % kind)
        finally:
            srv.kill()
    if not ran:
        raise TestSkip("no place can start anything here")


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=300)
