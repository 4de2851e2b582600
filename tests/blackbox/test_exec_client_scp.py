#!/usr/bin/env python3
"""exec-client with scp's everyday habits and no debris (issue 36), against a live
server: transfers that stream (stdin past the 64 MiB message limit, get to a pipe);
several sources to a directory and remote patterns; ls on files and several paths;
-q and -p; --json for ps and sessions and exited -d sessions shown as exited; no
temporary file after SIGINT, SIGTERM, SIGHUP, a lost link or a failed read, and no
session left by a failed command; --help for every command without a server, usage
errors in one line and a pointer; the scheme, certificate and token hints; rpc's exit
status; a refusing server given up after --connect-timeout with one message; a
relative --ws-shared-secret-file; per-user units on distinct ports.

EXEC_CLIENT_UNDER_TEST=PATH runs these against another exec-client binary (how each
was seen to fail before the change)."""
import glob
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
import test_exec_client  # noqa

CLIENT = os.environ.get("EXEC_CLIENT_UNDER_TEST") or test_exec_client.CLIENT


def need_client():
    if CLIENT is None:
        raise TestSkip("exec-client not built")


def ec(srv, *args, stdin=b"", timeout=120, env=None, url=None):
    e = dict(os.environ)
    e.pop("EXEC_SERVER_URL", None)
    e.update(env or {})
    pre = ["--url", url or srv.url] if (url or srv is not None) else []
    return subprocess.run([CLIENT] + pre + list(args), input=stdin, capture_output=True,
                          timeout=timeout, env=e)


def lines(b):
    return [x for x in b.decode(errors="replace").split("\n") if x]


class Scratch:
    """A local and a remote directory (the same machine: the server's files are ours)."""

    def __enter__(self):
        self.local = tempfile.mkdtemp(prefix="ec36-local-")
        self.remote = tempfile.mkdtemp(prefix="ec36-remote-")
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.local, ignore_errors=True)
        shutil.rmtree(self.remote, ignore_errors=True)
        return False

    def write(self, where, name, data):
        path = os.path.join(where, name)
        with open(path, "wb") as f:
            f.write(data)
        return path


def temp_debris(d):
    return glob.glob(os.path.join(d, ".*.exec-client.*"))


# ---- the transfer path ---------------------------------------------------------------

def test_stdin_and_pipes_stream_past_the_message_limit(srv):
    """fs put - of 80 MiB streams in blocks (it used to be one fs/writeFile, over the
    64 MiB message limit); fs get - and fs cat write a pipe in order."""
    need_client()
    with Scratch() as s:
        data = os.urandom(1 << 20) * 79 + os.urandom(12345)
        dst = os.path.join(s.remote, "big.bin")
        r = ec(srv, "fs", "put", "-", dst, stdin=data)
        assert r.returncode == 0, r.stderr
        with open(dst, "rb") as f:
            assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
        for args in (("fs", "get", dst, "-"), ("fs", "cat", dst)):
            r = ec(srv, *args)
            assert r.returncode == 0 and r.stdout == data, (args, r.returncode, len(r.stdout))
        got = os.path.join(s.local, "got.bin")
        r = ec(srv, "fs", "get", dst, got)
        assert r.returncode == 0, r.stderr
        with open(got, "rb") as f:
            assert f.read() == data


# ---- scp's argument forms ------------------------------------------------------------

@ours_only
def test_several_sources_and_remote_patterns(srv):
    need_client()
    with Scratch() as s:
        l1 = s.write(s.local, "one.txt", b"1\n")
        l2 = s.write(s.local, "two.txt", b"2\n")
        r = ec(srv, "fs", "put", l1, l2, s.remote)
        assert r.returncode == 0, r.stderr
        assert sorted(os.listdir(s.remote)) == ["one.txt", "two.txt"]
        r = ec(srv, "fs", "put", l1, l2, os.path.join(s.remote, "one.txt"))
        assert r.returncode == 1 and b"Not a directory" in r.stderr, r
        s.write(s.remote, "c.log", b"log\n")
        s.write(s.remote, ".hidden.txt", b"h\n")
        into = os.path.join(s.local, "into")
        os.mkdir(into)
        r = ec(srv, "fs", "get", os.path.join(s.remote, "*.txt"), into)
        assert r.returncode == 0, r.stderr
        assert sorted(os.listdir(into)) == ["one.txt", "two.txt"]  # a dot file needs a dot
        into2 = os.path.join(s.local, "into2")
        os.mkdir(into2)
        r = ec(srv, "fs", "get", os.path.join(s.remote, "c.log"),
               os.path.join(s.remote, "t*.txt"), into2)
        assert r.returncode == 0 and sorted(os.listdir(into2)) == ["c.log", "two.txt"], r
        r = ec(srv, "fs", "get", os.path.join(s.remote, "*.zz"), into2)
        assert r.returncode == 1 and b"No such file or directory" in r.stderr, r
        r = ec(srv, "fs", "get", os.path.join(s.remote, "*.txt"), os.path.join(s.local, "nodir"))
        assert r.returncode == 1 and b"Not a directory" in r.stderr, r


@ours_only
def test_ls_takes_files_and_several_paths(srv):
    need_client()
    with Scratch() as s:
        f = s.write(s.remote, "a.txt", b"abc")
        sub = os.path.join(s.remote, "sub")
        os.mkdir(sub)
        s.write(sub, "x", b"")
        r = ec(srv, "fs", "ls", f)
        assert r.returncode == 0 and r.stdout == (f + "\n").encode(), r
        r = ec(srv, "fs", "ls", f, sub)
        assert r.returncode == 0 and r.stdout == ("%s\n\n%s:\nx\n" % (f, sub)).encode(), r
        r = ec(srv, "fs", "ls", "-l", f)
        assert r.returncode == 0 and re.match(rb"-rw.* 3 .* %s\n$" % re.escape(f.encode()),
                                              r.stdout), r
        r = ec(srv, "fs", "ls", os.path.join(s.remote, "nope"), sub)
        assert r.returncode == 1 and b"nope: No such file" in r.stderr and b"x\n" in r.stdout, r


@ours_only
def test_quiet_and_preserve(srv):
    need_client()
    with Scratch() as s:
        big = s.write(s.remote, "big.bin", os.urandom(3 << 20))
        tiny = s.write(s.remote, "tiny.txt", b"0123456789")
        # Progress goes to a terminal; -q silences it; a tiny file's rate is not "0B/s".
        for quiet, src in ((False, big), (True, big), (False, tiny)):
            out = os.path.join(s.local, "q%d%s" % (quiet, os.path.basename(src)))
            master, slave = os.openpty()
            r = subprocess.run([CLIENT, "--url", srv.url, "fs", "get"] +
                               (["-q"] if quiet else []) + [src, out],
                               stdout=subprocess.DEVNULL, stderr=slave, timeout=60)
            os.close(slave)
            seen = b""
            if select.select([master], [], [], 1)[0]:  # the line is there or never
                try:
                    seen = os.read(master, 65536)
                except OSError:  # EIO: the terminal's only writer is gone, nothing written
                    pass
            os.close(master)
            assert r.returncode == 0, seen
            assert (b"100%" in seen) != quiet and b" 0B/s" not in seen, (quiet, src, seen)
        # -p: the modification time travels both ways (the mode always does).
        when = 1000000000  # 2001-09-09
        src = s.write(s.local, "old.txt", b"old\n")
        os.chmod(src, 0o640)
        os.utime(src, (when, when))
        r = ec(srv, "fs", "put", "-p", src, s.remote)
        assert r.returncode == 0, r.stderr
        st = os.stat(os.path.join(s.remote, "old.txt"))
        assert int(st.st_mtime) == when and st.st_mode & 0o777 == 0o640, st
        os.utime(big, (when + 7, when + 7))
        back = os.path.join(s.local, "back.bin")
        r = ec(srv, "fs", "get", "-p", big, back)
        assert r.returncode == 0 and int(os.stat(back).st_mtime) == when + 7, r


@ours_only
@needs_own_server
def test_json_lists_and_exited_detached_sessions(_):
    need_client()
    with Server() as srv:
        r = ec(srv, "run", "-d", "exit 3")
        assert r.returncode == 0, r.stderr
        sid, pid_ = r.stdout.decode().split()

        def exited():
            r = ec(srv, "sessions", "--json")
            assert r.returncode == 0, r.stderr
            ss = [x for x in json.loads(r.stdout) if x["sessionId"] == sid]
            return ss if ss and ss[0]["exited"] else None
        wait_until(exited, what="the -d session to show as exited")
        r = ec(srv, "sessions")
        row = [x for x in lines(r.stdout) if x.startswith(sid)]
        assert row and re.search(r"\bexited\b.*\b3$", row[0]), r.stdout
        r = ec(srv, "ps", "--json")
        procs = [p for p in json.loads(r.stdout) if p["sessionId"] == sid]
        assert procs and procs[0]["exitCode"] == 3 and procs[0]["processId"] == pid_, procs


# ---- no debris -------------------------------------------------------------------------

def get_until_temp_appears(srv, s, extra_env=None):
    """A get of a large remote file, held mid-transfer (the server stopped) once its
    temporary file exists; returns the Popen."""
    src = s.write(s.remote, "big.bin", os.urandom(24 << 20))
    dst = os.path.join(s.local, "big.bin")
    p = subprocess.Popen([CLIENT, "--url", srv.url, "fs", "get", src, dst],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: temp_debris(s.local) or p.poll() is not None, what="the temporary file")
    os.kill(srv.pid, signal.SIGSTOP)
    return p, dst


@ours_only
@needs_own_server
def test_no_temporary_file_after_signals_or_a_lost_link(_):
    need_client()
    for how in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, "lost"):
        srv = Server()
        with Scratch() as s:
            p, dst = get_until_temp_appears(srv, s)
            try:
                assert p.poll() is None, "the download ended before it could be interrupted"
                if how == "lost":
                    os.kill(srv.pid, signal.SIGKILL)
                else:
                    p.send_signal(how)
                rc = p.wait(timeout=30)
            finally:
                if srv.alive():
                    os.kill(srv.pid, signal.SIGCONT)
                srv.stop(check=False)
            want = 255 if how == "lost" else -how
            assert rc == want, (how, rc, p.stderr.read())
            assert temp_debris(s.local) == [] and not os.path.exists(dst), (how, os.listdir(s.local))


@ours_only
@needs_own_server
def test_failed_commands_leave_no_file_and_no_session(_):
    need_client()
    with Server() as srv, Scratch() as s:
        dst = os.path.join(s.local, "mem")
        # The server cannot read its own /proc/self/mem at 0: the read fails after the
        # temporary file was made.
        r = ec(srv, "fs", "get", "/proc/self/mem", dst)
        assert r.returncode == 1, r
        assert os.listdir(s.local) == [], os.listdir(s.local)
        r = ec(srv, "fs", "cat", os.path.join(s.remote, "missing"))
        assert r.returncode == 1 and b"No such file" in r.stderr, r
        r = ec(srv, "run", "--", "/nonexistent-program-36")
        assert r.returncode == 127, r
        r = ec(srv, "sessions", "--json")
        assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout


# ---- help and errors --------------------------------------------------------------------

def test_every_command_has_help_without_a_server(_):
    need_client()
    cmds = [["run"], ["shell"], ["fs"], ["rpc"], ["sessions"], ["ps"], ["attach"], ["forward"]]
    cmds += [["fs", s] for s in ("cat", "get", "put", "ls", "stat", "rm", "cp", "mkdir", "walk")]
    for c in cmds:
        r = ec(None, *(c + ["--help"]))
        assert r.returncode == 0 and r.stdout.startswith(b"usage: exec-client"), (c, r)
        assert (" ".join(c) + " ").encode() in r.stdout.split(b"\n")[0] + b" ", (c, r.stdout)


def test_usage_errors_are_one_line_and_a_pointer(_):
    need_client()
    for args, ptr in ((["--bogus", "run", "true"], "exec-client --help"),
                      (["fs", "put", "onlyone"], "exec-client fs put --help"),
                      (["fs", "ls", "--bogus", "x"], "exec-client fs ls --help"),
                      (["run", "--bogus", "true"], "exec-client run --help"),
                      (["frobnicate"], "exec-client --help")):
        r = ec(None, *args)
        ls = lines(r.stderr)
        assert r.returncode == 2 and len(ls) == 2 and ls[0].startswith("exec-client: ") and \
            ls[1] == "Try '%s'." % ptr, (args, r.stderr)


@ours_only
@needs_own_server
def test_scheme_certificate_and_token_hints(_):
    need_client()
    d = tempfile.mkdtemp(prefix="ec36-tls-")
    try:
        try:
            ca, cert, key = make_ca(d)
        except (OSError, subprocess.CalledProcessError):
            raise TestSkip("openssl cannot make a test CA")
        with Server(listen="wss://127.0.0.1:0", extra_args=["--tls-cert", cert, "--tls-key", key]) \
                as tls, Server() as plain:
            port = tls.url.rsplit(":", 1)[1]
            r = ec(None, "fs", "ls", "/", url="ws://127.0.0.1:%s" % port)
            assert r.returncode == 255 and \
                ("use wss://127.0.0.1:%s" % port).encode() in r.stderr, r.stderr
            pport = plain.url.rsplit(":", 1)[1]
            r = ec(None, "fs", "ls", "/", url="wss://127.0.0.1:%s" % pport)
            assert r.returncode == 255 and \
                ("use ws://127.0.0.1:%s" % pport).encode() in r.stderr, r.stderr
            r = ec(None, "--ca-file", ca, "fs", "ls", "/", url="wss://localhost:%s" % port)
            assert r.returncode == 255 and b"names another host" in r.stderr and \
                b"not signed by a CA" not in r.stderr, r.stderr
            r = ec(None, "--ca-file", ca, "fs", "ls", "/", url=tls.url)
            assert r.returncode == 0, r.stderr
        tok = os.path.join(d, "token")
        with open(tok, "w") as f:
            f.write("s3cret-token-36-b7e1\n")
        os.chmod(tok, 0o600)  # a secret: the server refuses it open to others
        with Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok]) as auth:
            r = ec(auth, "fs", "ls", "/")
            assert r.returncode == 3 and b"--token-file" in r.stderr, r.stderr
            r = ec(auth, "--token-file", tok, "fs", "ls", "/")
            assert r.returncode == 0, r.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_rpc_exit_status_and_quiet_stderr(srv):
    need_client()
    ok = b'{"id":1,"method":"fs/getMetadata","params":{"path":"file:///"}}\n'
    r = ec(srv, "rpc", stdin=ok)
    assert r.returncode == 0 and r.stderr == b"" and b'"id":1' in r.stdout, r
    bad = b'{"id":1,"method":"fs/getMetadata","params":{"path":"file:///nonexistent-36"}}\n'
    r = ec(srv, "rpc", stdin=bad)
    assert r.returncode == 1 and r.stderr == b"" and b'"error"' in r.stdout, r


@ours_only
@needs_own_server
def test_refused_reconnect_gives_up_after_connect_timeout(_):
    need_client()
    srv = Server()
    try:
        p = subprocess.Popen([CLIENT, "--url", srv.url, "--connect-timeout", "1", "run",
                              "echo started; sleep 60"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        assert p.stdout.readline() == b"started\n"
        os.kill(srv.pid, signal.SIGKILL)
        t0 = time.monotonic()
        rc = p.wait(timeout=60)
        took = time.monotonic() - t0
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
    finally:
        srv.stop(check=False)
    assert rc == 255 and took < 10, (rc, took, err)  # not the 30 s of --reconnect-ms
    ls = lines(err)
    assert len(ls) == 1 and "Connection refused" in ls[0], err


# ---- the server's side of the habits -----------------------------------------------------

@ours_only
@needs_own_server
def test_relative_shared_secret_file(_):
    """A relative path starts in the server's working directory, as --ws-token-file's
    does (it used to be refused: "must be an absolute path")."""
    srv = Server(extra_args=["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file",
                             "secret"], start=False)
    with open(os.path.join(srv.workdir, "secret"), "w") as f:
        f.write("x" * 40)
    os.chmod(os.path.join(srv.workdir, "secret"), 0o600)
    with srv:
        srv.start()
        assert srv.alive() and srv.url.startswith("ws://"), srv.stderr_text()
        r = ec(srv, "fs", "ls", "/")  # no token: refused, so the secret is in force
        assert r.returncode == 3, r


def unit_files():
    here = os.path.dirname(os.path.abspath(__file__))
    bdir = os.environ.get("EXEC_BUILD_DIR")
    for b in ([bdir] if bdir else []) + [os.path.join(here, "..", "..", x)
                                          for x in ("build/asan", "build")]:
        sysu = os.path.join(b, "exec-server@.service")
        useru = os.path.join(b, "user", "exec-server.service")
        if os.path.exists(sysu) and os.path.exists(useru):
            return sysu, useru
    raise TestSkip("no configured systemd units in the build directory")


def unit_listen(unit, uid, env_file_text=""):
    """What --listen the unit's ExecStart gives when started as uid: its Environment=
    lines and an env file applied, the line run by sh as systemd would (with "$$" a
    literal "$"), exec-server replaced by a stub that prints its argv."""
    env = {"PATH": "/usr/bin:/bin"}
    execstart = None
    for line in open(unit):
        if line.startswith("Environment="):
            k, v = line[len("Environment="):].strip().split("=", 1)
            env[k] = v
        if line.startswith("ExecStart="):
            execstart = line[len("ExecStart="):].strip()
    for line in env_file_text.splitlines():
        k, v = line.split("=", 1)
        env[k] = v
    d = tempfile.mkdtemp(prefix="ec36-unit-")
    try:
        stub = os.path.join(d, "exec-server")
        with open(stub, "w") as f:
            f.write('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
        os.chmod(stub, 0o755)
        os.chmod(d, 0o755)
        cmd = re.sub(r"\S*/exec-server\b", stub, execstart, count=1).replace("$$", "$")
        if not cmd.startswith("/bin/sh -c "):
            cmd = "exec " + cmd
        else:
            cmd = cmd[len("/bin/sh -c "):].strip("'")
        pre = [] if uid == 0 else ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid,
                                   "--clear-groups"]
        out = subprocess.run(pre + ["/bin/sh", "-c", cmd], env=env, capture_output=True,
                             check=True).stdout.decode().split("\n")
        return out[out.index("--listen") + 1]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_per_user_units_listen_on_distinct_ports(_):
    if shutil.which("setpriv") is None or os.getuid() != 0:
        raise TestSkip("needs root and setpriv to start the unit's line as two users")
    for unit in unit_files():
        a, b = unit_listen(unit, 0), unit_listen(unit, 65534)
        assert a.startswith("ws://127.0.0.1:") and a != b, (unit, a, b)
        assert unit_listen(unit, 65534, "EXEC_SERVER_LISTEN=ws://127.0.0.1:9999") == \
            "ws://127.0.0.1:9999", unit


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=180)
