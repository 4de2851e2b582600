#!/usr/bin/env python3
"""A started process holds the descriptors it was given and nothing of the server's
(issue 23 item 5): a listening socket or another client's pipe kept by a long-lived
command would keep that peer waiting.

The child closes everything above its own with close_range(2), which a kernel before
Linux 5.9 does not have (ENOSYS) and an old seccomp profile refuses (EPERM); then it
reads /proc/self/fd instead. The second test makes that happen: the server runs under
a seccomp filter that fails close_range with ENOSYS, holding a descriptor it inherited
without close-on-exec (above 65536 where the limit allows, past what a loop to a
capped limit would reach), and the child must not see it."""
import ctypes
import os
import resource
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

# `ls` lists the shell's table, not its own (the `; true` keeps the shell from
# exec'ing ls in its place).
LIST_FDS = ["/bin/sh", "-c", "ls /proc/$$/fd; true"]
EXEC_FLAG = "--exec-without-close-range"
SYS_CLOSE_RANGE = 436  # the same number on x86-64, i386 and arm64
ENOSYS = 38


def child_fds(srv, tty=False):
    s = srv.session()
    s.start("fds", LIST_FDS, tty=tty)
    out = s.collect_until_closed("fds")
    s.close()
    assert out["exit_code"] == 0, out
    text = out["pty"] if tty else out["stdout"]
    return sorted(int(x) for x in text.split())


def test_child_has_only_stdio(srv):
    assert child_fds(srv) == [0, 1, 2]


def test_tty_child_has_only_stdio(srv):
    assert child_fds(srv, tty=True) == [0, 1, 2]


def exec_without_close_range(leak_fd, path, argv):
    """(In the helper process.) Installs a seccomp filter failing close_range with
    ENOSYS, opens path on leak_fd without close-on-exec, and execs argv."""
    # A = seccomp_data.nr; A == close_range ? ERRNO(ENOSYS) : ALLOW
    prog = [(0x20, 0, 0, 0), (0x15, 0, 1, SYS_CLOSE_RANGE), (0x06, 0, 0, 0x00050000 | ENOSYS),
            (0x06, 0, 0, 0x7FFF0000)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(code))
    libc = ctypes.CDLL(None, use_errno=True)
    ul = ctypes.c_ulong
    if libc.prctl(38, ul(1), ul(0), ul(0), ul(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        sys.exit("PR_SET_NO_NEW_PRIVS: %s" % os.strerror(ctypes.get_errno()))
    if libc.prctl(22, ul(2), ctypes.byref(fprog), ul(0), ul(0)) != 0:  # SECCOMP_MODE_FILTER
        sys.exit("PR_SET_SECCOMP: %s" % os.strerror(ctypes.get_errno()))
    fd = os.open(path, os.O_RDONLY)
    os.dup2(fd, leak_fd, inheritable=True)
    os.close(fd)
    os.execv(argv[0], argv)


@ours_only
@needs_own_server
def test_no_close_range_no_leak(_):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    leak_fd = 70000
    if hard != resource.RLIM_INFINITY and hard <= leak_fd:
        leak_fd = hard - 1
    if soft == resource.RLIM_INFINITY or soft <= leak_fd:
        soft = leak_fd + 1
    marker = tempfile.NamedTemporaryFile(prefix="leak-marker-")
    cmd = [sys.executable, os.path.abspath(__file__), EXEC_FLAG, str(leak_fd), marker.name]
    cmd += WRAPPER + [SERVER_PATH, "--listen", "ws://127.0.0.1:0"]
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        srv = Server(cmd=cmd)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)
    with srv:
        # The setup the test relies on: the filter is on, the server holds the leak.
        with open("/proc/%d/status" % srv.pid) as f:
            assert "Seccomp:\t2" in f.read(), "no seccomp filter on the server"
        assert os.readlink("/proc/%d/fd/%d" % (srv.pid, leak_fd)) == marker.name
        assert child_fds(srv) == [0, 1, 2]
        assert child_fds(srv, tty=True) == [0, 1, 2]
    marker.close()


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == EXEC_FLAG:
        exec_without_close_range(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    run_tests(globals())
