#!/usr/bin/env python3
"""exec-client keeps ssh's and scp's habits (issue 26), against a live server, the
terminal ones on a real PTY: one argument with shell syntax goes to the remote shell
(argv after -- does not); relative paths and run's directory are the remote home; a
missing --cwd is named; `shell` has USER/LOGNAME from passwd; fs put/get/cp follow
scp/cp for directory targets and -r, with errors naming the right operand;
--token-file; the progress line (name, rate, time left); `~.` disconnects; a server
that hangs is given up on promptly."""
import json
import os
import pwd
import re
import uuid
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, ec, need_client  # noqa
from test_exec_client_tty import Tty  # noqa


class Home:
    """A server whose HOME is a fresh directory (the remote home of these tests)."""

    def __init__(self, extra_args=()):
        self.home = tempfile.mkdtemp(prefix="ec-home-")
        self.srv = server_with_env({"HOME": self.home}, extra_args=list(extra_args))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.__exit__(*exc)
        shutil.rmtree(self.home, ignore_errors=True)
        return False


@ours_only
@needs_own_server
def test_shell_syntax_home_and_missing_cwd(_):
    need_client()
    with Home() as h:
        srv = h.srv
        r = ec(srv, "run", "echo a; echo b | tr b c; pwd")
        assert (r.returncode, r.stdout) == (0, ("a\nc\n%s\n" % h.home).encode()), r
        r = ec(srv, "run", "--", "echo a; echo b")  # after --: a program name, not a script
        assert r.returncode == 127 and b"cannot start `echo a; echo b`" in r.stderr, r
        # one word is a command line too, as with ssh: the remote shell's "not found", 127
        r = ec(srv, "run", "nosuchcmd-ec47")
        assert r.returncode == 127 and b"nosuchcmd-ec47" in r.stderr, r
        assert b"not found" in r.stderr and b"cannot start" not in r.stderr, r
        r = ec(srv, "run", "--", "nosuchcmd-ec47")  # after --: exec'd, our message
        assert r.returncode == 127 and b"cannot start `nosuchcmd-ec47`" in r.stderr, r
        r = ec(srv, "run", "--", "pwd")
        assert r.stdout == (h.home + "\n").encode(), r  # run starts in the remote home
        r = ec(srv, "run", "--cwd", "sub", "--", "pwd")
        assert r.returncode == 127 and r.stderr == (
            "exec-client: --cwd %s/sub: No such file or directory\n" % h.home).encode(), r
        os.mkdir(os.path.join(h.home, "sub"))
        r = ec(srv, "run", "--cwd", "sub", "pwd")
        assert r.stdout == (h.home + "/sub\n").encode(), r
        with open(os.path.join(h.home, "afile"), "w") as f:
            f.write("x")
        r = ec(srv, "run", "--cwd", "/nonexistent-ec-cwd", "--", "pwd")
        assert r.returncode == 127 and b"--cwd /nonexistent-ec-cwd: No such file" in r.stderr, r
        r = ec(srv, "run", "--cwd", "~/afile", "pwd")
        assert r.returncode == 127 and b"afile: Not a directory" in r.stderr, r
        # relative fs paths start in the same home
        r = ec(srv, "fs", "put", "-", "rel.txt", stdin=b"rel\n")
        assert r.returncode == 0, r
        with open(os.path.join(h.home, "rel.txt")) as f:
            assert f.read() == "rel\n"
        assert ec(srv, "fs", "cat", "~/rel.txt").stdout == b"rel\n"
        assert b"rel.txt" in ec(srv, "fs", "ls", ".").stdout
        # ls hides names that start with a dot, like ls(1); -a (or -A) shows them
        os.mkdir(os.path.join(h.home, ".cache"))
        with open(os.path.join(h.home, ".profile"), "w") as f:
            f.write("x")
        r = ec(srv, "fs", "ls", "~/")
        assert r.returncode == 0 and r.stdout == b"afile\nrel.txt\nsub/\n", r
        for flag in ("-a", "-A", "--all"):
            r = ec(srv, "fs", "ls", flag, "~/")
            assert r.stdout == b".cache/\n.profile\nafile\nrel.txt\nsub/\n", (flag, r)
        assert ec(srv, "fs", "ls", "~/.profile").stdout == b"~/.profile\n"  # named: shown
        assert b".profile" in ec(srv, "fs", "ls", "-la", "~").stdout
        r = ec(srv, "fs", "cat", "-a", "~/.profile")
        assert r.returncode == 2 and b"-a is for ls" in r.stderr, r


@ours_only
def test_help_command(_srv):
    """`exec-client help [COMMAND [SUBCOMMAND]]`, as git, kubectl and go take it: the
    same texts as --help, with no server."""
    need_client()
    for words, flag in (([], ["--help"]), (["fs"], ["fs", "--help"]),
                        (["fs", "put"], ["fs", "put", "--help"]), (["run"], ["run", "--help"])):
        a = subprocess.run([CLIENT, "help"] + words, capture_output=True, timeout=30)
        b = subprocess.run([CLIENT] + flag, capture_output=True, timeout=30)
        assert a.returncode == 0 and a.stdout == b.stdout and a.stdout, (words, a, b)
    for words in (["nope"], ["fs", "nope"], ["run", "x"]):
        r = subprocess.run([CLIENT, "help"] + words, capture_output=True, timeout=30)
        assert r.returncode == 2 and r.stderr.startswith(b"exec-client: help: no command"), r


@ours_only
@needs_own_server
def test_shell_sets_user_and_logname_from_passwd(_):
    need_client()
    me = pwd.getpwuid(os.getuid()).pw_name
    env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME")}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        srv = Server()
    finally:
        os.environ.clear()
        os.environ.update(old)
    with srv:
        r = ec(srv, "shell", stdin=b'echo "user=$USER logname=$LOGNAME"\n')
        assert r.returncode == 0 and ("user=%s logname=%s\n" % (me, me)).encode() in r.stdout, r


def fails(srv, status, message, *args):
    """exec-client ARGS exits with status and exactly the one-line message."""
    r = ec(srv, *args)
    assert (r.returncode, r.stderr) == (status, ("exec-client: %s\n" % message).encode()), r


@ours_only
def test_fs_directory_targets_like_scp(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-scp-")
    try:
        os.makedirs(d + "/ldir/sub")
        os.makedirs(d + "/rdir")
        for p, t in (("f", "top"), ("ldir/a", "A"), ("ldir/sub/b", "B")):
            with open(os.path.join(d, p), "w") as f:
                f.write(t)
        os.mkdir(d + "/down")
        # put into an existing directory, with or without a trailing slash
        assert ec(srv, "fs", "put", d + "/f", d + "/rdir/").returncode == 0
        assert ec(srv, "fs", "put", d + "/f", d + "/rdir").returncode == 0
        assert os.listdir(d + "/rdir") == ["f"]
        fails(srv, 1, "fs put %s/nodir/: No such file or directory" % d,
              "fs", "put", d + "/f", d + "/nodir/")
        fails(srv, 1, "fs put %s/ldir: Is a directory (use -r)" % d,
              "fs", "put", d + "/ldir", d + "/rdir")
        r = ec(srv, "fs", "put", "-r", d + "/ldir", d + "/rdir")
        assert r.returncode == 0, r
        with open(d + "/rdir/ldir/sub/b") as f:
            assert f.read() == "B"
        assert ec(srv, "fs", "put", "-r", d + "/ldir", d + "/newtree").returncode == 0
        assert sorted(os.listdir(d + "/newtree")) == ["a", "sub"]
        # get into a directory (., a name with /), -r for a tree, errors name the operand
        r = subprocess.run([CLIENT, "--url", srv.url, "fs", "get", d + "/f", "."],
                           cwd=d + "/down", capture_output=True, timeout=60)
        assert r.returncode == 0 and os.listdir(d + "/down") == ["f"], r
        assert ec(srv, "fs", "get", d + "/ldir/a", d + "/down/").returncode == 0
        assert sorted(os.listdir(d + "/down")) == ["a", "f"]
        fails(srv, 1, "fs get %s/ldir: Is a directory (use -r)" % d,
              "fs", "get", d + "/ldir", d + "/down")
        assert ec(srv, "fs", "get", "-r", d + "/ldir", d + "/down").returncode == 0
        with open(d + "/down/ldir/sub/b") as f:
            assert f.read() == "B"
        fails(srv, 1, "fs get: %s/nolocal/: No such file or directory" % d,
              "fs", "get", d + "/f", d + "/nolocal/")
        fails(srv, 1, "fs get %s/missing: No such file or directory" % d,
              "fs", "get", d + "/missing", d + "/down")
        # cp: into an existing directory, -r for a tree
        assert ec(srv, "fs", "cp", d + "/f", d + "/ldir").returncode == 0
        assert os.path.exists(d + "/ldir/f")
        fails(srv, 1, "fs cp %s/ldir: Is a directory (use -r)" % d,
              "fs", "cp", d + "/ldir", d + "/rdir")
        assert ec(srv, "fs", "cp", "-r", d + "/ldir/sub", d + "/rdir").returncode == 0
        assert os.path.exists(d + "/rdir/sub/b")
        r = ec(srv, "fs", "mkdir", "-r", d + "/x")
        assert r.returncode == 2, r
    finally:
        shutil.rmtree(d)


@ours_only
@needs_own_server
def test_token_file(_):
    need_client()
    fd, tok = tempfile.mkstemp(prefix="ec-tok-")
    os.write(fd, b"  file-token-42-5e7d09\n")
    os.close(fd)
    fd, empty = tempfile.mkstemp(prefix="ec-tok-")
    os.close(fd)
    try:
        with server_with_env({}, extra_args=["--ws-auth", "capability-token",
                                             "--ws-token-file", tok]) as srv:
            r = ec(srv, "--token-file", tok, "run", "--", "true")
            assert r.returncode == 0, r
            r = ec(srv, "run", "--", "true")
            assert r.returncode == 3 and b"--token" in r.stderr, r
            r = ec(srv, "--token-file", empty, "run", "--", "true")
            assert r.returncode == 2 and b"holds no token" in r.stderr, r
            r = ec(srv, "--token-file", tok + ".missing", "run", "--", "true")
            assert r.returncode == 2 and b"No such file" in r.stderr, r
            os.chmod(tok, 0o644)  # refused as ssh refuses such an identity file
            r = ec(srv, "--token-file", tok, "run", "--", "true")
            assert r.returncode == 2 and r.stderr == (
                "exec-client: --token-file %s is open to group or others (mode 0644), so other "
                "users of this host may read the token; it must be its owner's alone: run "
                "`chmod 600 %s`\n" % (tok, tok)).encode(), r
    finally:
        os.unlink(tok)
        os.unlink(empty)


@ours_only
def test_progress_line_names_the_file_with_rate_and_time_left(srv):
    need_client()
    d = tempfile.mkdtemp(prefix="ec-prog-")
    try:
        with open(d + "/big.bin", "wb") as f:
            f.write(os.urandom(9 * 1024 * 1024))
        for args in (["fs", "put", d + "/big.bin", d + "/copy.bin"],
                     ["fs", "get", d + "/copy.bin", d + "/back.bin"]):
            t = Tty(srv, args)
            assert t.finish() == 0, t.out
            final = t.out.rstrip(b"\r\n").split(b"\r")[-1]
            name = os.path.basename(args[2]).encode()
            assert final.startswith(name) and b" 100% " in final and b"/s" in final, t.out
            assert b"9.0MiB" in final, t.out
            assert b" ETA" in t.out and final.rstrip()[-5:-2] in (b"00:", b"01:"), t.out
        with open(d + "/back.bin", "rb") as f1, open(d + "/big.bin", "rb") as f2:
            assert f1.read() == f2.read()
    finally:
        shutil.rmtree(d)


@ours_only
def test_tilde_dot_disconnects(srv):
    need_client()
    t = Tty(srv, ["run", "--tty", "--", "/bin/sh", "-c", "echo ready; exec cat"])
    t.read_until(b"ready")
    t.write(b"a~b\r")  # a ~ inside a line is typed through
    t.read_until(b"a~b")
    t.write(b"~?")
    t.read_until(b"~.  - disconnect")
    t.write(b"~~x\r")  # ~~ sends one ~
    t.read_until(b"~x")
    t.write(b"~.")
    t.read_until(b"closed (~.)")
    assert t.finish() == 255, t.out


@ours_only
def test_tilde_dot_hangs_up_the_shell(srv):
    """`~.` in a shell hangs up as sshd does: the login shell gets SIGHUP (bash passes it
    to its jobs, so a `sleep &` goes too) and the session ends, instead of both waiting
    out the session's time to live; with --keep they run on, to attach to later."""
    need_client()
    for keep in (False, True):
        mk = "ec-hup-" + uuid.uuid4().hex[:8]
        t = Tty(srv, ["-v", "shell"] + (["--keep"] if keep else []) +
                ["--env", "%s=%s" % (MARKER_VAR, mk)])
        t.read_until(b"session ")
        for _ in range(10):  # what is typed before the shell's line editor is up may be lost
            t.write(b"sleep 987 & echo started-$((20+27))\r")
            try:
                t.read_until(b"started-47", timeout=3)
                break
            except AssertionError:
                continue
        # A line typed again above may still be read after the one that answered: it would
        # start its job while the hang-up is under way, a job bash does not know yet. One
        # more line, answered, means every earlier one has run (the terminal keeps order).
        t.write(b"echo synced-$((40+2))\r")
        t.read_until(b"synced-42")
        sid = re.search(rb"connected, session (\S+)", t.out).group(1).decode()
        wait_until(lambda: len(marked_pids(mk)) >= 2, 10, "the shell and its job")
        t.write(b"~.")
        t.read_until(b"closed (~.)")
        assert t.finish() == 255, t.out
        listed = json.loads(ec(srv, "sessions", "--json").stdout or b"[]")
        if not keep:
            wait_until(lambda: not marked_pids(mk), 10, "the shell and its job to hang up")
            assert sid not in [s["sessionId"] for s in listed], listed
        else:
            assert b"detached (~.)" in t.out and len(marked_pids(mk)) >= 2, t.out
            assert sid in [s["sessionId"] for s in listed], listed
            assert ec(srv, "sessions", "--end", sid).returncode == 0
            kill_marked(mk)  # its job, in a process group of its own, outlives the session


@ours_only
@needs_own_server
def test_a_hung_server_is_given_up_promptly(_):
    need_client()
    with Server() as srv:
        t = Tty(srv, ["--keepalive-ms", "1000", "run", "--tty", "--", "/bin/sh", "-c",
                      "echo ready; exec sleep 60"])
        t.read_until(b"ready")
        os.kill(srv.pid, signal.SIGSTOP)
        try:
            t.read_until(b"giving up in", timeout=10)
            t0 = time.monotonic()
            t.read_until(b"giving up (--keepalive-ms)", timeout=10)
            assert t.finish() == 255, t.out
        finally:
            os.kill(srv.pid, signal.SIGCONT)
        # a live server answers the pings: a quiet command is not given up on
        t = Tty(srv, ["--keepalive-ms", "300", "run", "--", "/bin/sh", "-c",
                      "sleep 2; echo done"])
        t.read_until(b"done")
        assert t.finish() == 0 and b"no answer" not in t.out, t.out


if __name__ == "__main__":
    run_tests(globals())
