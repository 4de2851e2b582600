#!/usr/bin/env python3
"""fs put never destroys the file it replaces (rsync's model): the upload goes to a
hidden temporary beside the target, renamed over it only when complete. The client is
interrupted mid-transfer, by SIGINT, SIGTERM, SIGHUP, SIGKILL or a lost connection
(the server killed), and the old file is checked byte for byte, with its mode and
owner; the temporary is gone (a signal) or named in the error (a lost connection; after
SIGKILL it stays, nothing can remove it). The same for -r trees: every file is its old
content or its whole new one, never a part. A completed put keeps an existing file's
mode and owner (a new file gets the local mode; -p the local one always) and writes
through a symbolic link."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, ec, need_client  # noqa

BIG = 48 << 20  # big enough to be caught half-way, streamed in 1 MiB blocks
STREAMED = 4 << 20  # past the 1 MiB of one fs/writeFile: streamed
OLD = b"precious\n"


def temporaries(d):
    return glob.glob(os.path.join(d, "**", ".*.exec-client.*"), recursive=True)


def random_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def old_file(path):
    """The file a put replaces: OLD, mode 0640 and, when we may chown (root), another
    owner (returned, else None)."""
    with open(path, "wb") as f:
        f.write(OLD)
    os.chmod(path, 0o640)
    uid = 65534 if os.getuid() == 0 else None
    if uid is not None:
        os.chown(path, uid, uid)
    return uid


def interrupt_mid_transfer(srv, args, d, how):
    """Runs `exec-client fs put ARGS`, freezes it once a temporary under d holds part of
    the upload, sends `how` (or kills the server: "lost") and lets it go on. Returns
    (exit status, stderr)."""
    p = subprocess.Popen([CLIENT, "--url", srv.url, "fs", "put", "-q"] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def partial():
            return any(0 < os.path.getsize(t) < BIG for t in temporaries(d) if
                       os.path.exists(t)) or p.poll() is not None
        wait_until(partial, 60, "a temporary holding part of the upload")
        assert p.poll() is None, ("the upload ended before it could be interrupted (with no "
                                  "temporary beside the target)", p.stderr.read())
        os.kill(p.pid, signal.SIGSTOP)
        assert any(os.path.getsize(t) < BIG for t in temporaries(d)), temporaries(d)
        if how == "lost":
            os.kill(srv.pid, signal.SIGKILL)
        else:
            os.kill(p.pid, how)
        if how != signal.SIGKILL:
            os.kill(p.pid, signal.SIGCONT)
        rc = p.wait(timeout=60)
        return rc, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@ours_only
@needs_own_server
def test_interrupted_put_keeps_the_old_file(_):
    need_client()
    for how in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL, "lost"):
        d = tempfile.mkdtemp(prefix="ec-put-")
        try:
            src = random_file(os.path.join(d, "big.bin"), BIG)
            remote = os.path.join(d, "remote")
            os.mkdir(remote)
            target = os.path.join(remote, "p.txt")
            old_file(target)
            before = os.stat(target)
            srv = Server()
            try:
                rc, err = interrupt_mid_transfer(srv, [src, target], remote, how)
            finally:
                srv.stop(check=how != "lost")
            with open(target, "rb") as f:
                assert f.read() == OLD, (how, "the old file was touched")
            st = os.stat(target)
            assert (st.st_ino, st.st_mode, st.st_uid) == (
                before.st_ino, before.st_mode, before.st_uid), how
            left = temporaries(remote)
            if how == "lost":
                assert rc == 255 and left and ("left in %s" % left[0]).encode() in err, (
                    rc, err, left)
            elif how == signal.SIGKILL:
                assert rc == -signal.SIGKILL and len(left) == 1, (rc, left)
            else:
                assert rc == -how and left == [], (how, rc, err, left)
        finally:
            shutil.rmtree(d)


@ours_only
@needs_own_server
def test_interrupted_put_r_leaves_no_part_under_a_final_name(_):
    """-r: a tree over an older copy of itself, interrupted during its second big file:
    each file is either its old content or its whole new one; no temporary is left."""
    need_client()
    d = tempfile.mkdtemp(prefix="ec-put-r-")
    try:
        tree, remote = os.path.join(d, "tree"), os.path.join(d, "remote")
        os.makedirs(os.path.join(tree, "sub"))
        new = {"a.bin": os.urandom(BIG), "b.txt": b"small new\n",
               os.path.join("sub", "c.bin"): os.urandom(BIG)}
        for name, data in new.items():
            with open(os.path.join(tree, name), "wb") as f:
                f.write(data)
        shutil.copytree(tree, os.path.join(remote, "tree"))
        for name in new:
            with open(os.path.join(remote, "tree", name), "wb") as f:
                f.write(b"old " + name.encode() + b"\n")
        with Server() as srv:
            # let a.bin (or c.bin) complete, then catch the other one half-way
            rc, err = interrupt_mid_transfer(srv, ["-r", tree, remote],
                                             os.path.join(remote, "tree"), signal.SIGINT)
        assert rc == -signal.SIGINT, (rc, err)
        for name, data in new.items():
            with open(os.path.join(remote, "tree", name), "rb") as f:
                got = f.read()
            assert got in (data, b"old " + name.encode() + b"\n"), (name, len(got))
        assert temporaries(remote) == [], temporaries(remote)
    finally:
        shutil.rmtree(d)


@ours_only
def test_completed_put_keeps_the_files_mode_and_owner(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-put-done-")
    try:
        for size in (STREAMED, 100):  # streamed, and one fs/writeFile
            src = random_file(os.path.join(d, "src-%d" % size), size)
            os.chmod(src, 0o755)
            target = os.path.join(d, "old-%d" % size)
            uid = old_file(target)
            r = ec(srv, "fs", "put", src, target)
            assert r.returncode == 0, r
            with open(src, "rb") as f1, open(target, "rb") as f2:
                assert f1.read() == f2.read()
            st = os.stat(target)
            assert st.st_mode & 0o7777 == 0o640, (size, oct(st.st_mode))  # the file's own
            if uid is not None:
                assert (st.st_uid, st.st_gid) == (uid, uid), size
            r = ec(srv, "fs", "put", "-p", src, target)  # -p: the local mode
            assert r.returncode == 0 and os.stat(target).st_mode & 0o7777 == 0o755, r
            fresh = os.path.join(d, "new-%d" % size)  # a new file: the local mode
            assert ec(srv, "fs", "put", src, fresh).returncode == 0
            assert os.stat(fresh).st_mode & 0o7777 == 0o755
        # through a symbolic link: the file it names is replaced, the link stays
        src = os.path.join(d, "src-%d" % STREAMED)
        real = os.path.join(d, "real")
        with open(real, "wb") as f:
            f.write(OLD)
        os.symlink("real", os.path.join(d, "link"))
        assert ec(srv, "fs", "put", src, os.path.join(d, "link")).returncode == 0
        assert os.path.islink(os.path.join(d, "link"))
        with open(src, "rb") as f1, open(real, "rb") as f2:
            assert f1.read() == f2.read()
        # standard input streams the same way
        r = ec(srv, "fs", "put", "-", real, stdin=b"x" * (3 << 20))
        assert r.returncode == 0 and os.path.getsize(real) == 3 << 20, r
        assert temporaries(d) == [], temporaries(d)
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    run_tests(globals())
