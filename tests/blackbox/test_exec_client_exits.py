#!/usr/bin/env python3
"""exec-client's exit statuses (exec-client(1), EXIT STATUS): one per class of outcome,
the same in every command, whichever side a file is on. Every command of the client's
--help is walked through each class that applies to it:

  2    the command line is wrong (an unknown option; a wrong operand count)
  255  the server cannot be reached (a port that refuses)
  3    the server refuses the credentials (no token for a server that wants one)
  1    what was asked failed: a missing file, local or remote, a target that is not a
       directory on either side, a JSON-RPC error reply, a session that is not there,
       a capability the server lacks
run and shell exit with the remote command's status instead (127: cannot start)."""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_exec_client import CLIENT, ec, need_client  # noqa

TOKEN = "exits-token-0123456789abcdef"

# Every command: its words and operands that are well formed (for the usage, connection
# and credentials classes), and the calls that must fail with 1 given a scratch
# directory d (its "f" a file, "missing" absent).
COMMANDS = {
    "run": (["run", "true"], [], None),
    "shell": (["shell"], [], None),
    "fs cat": (["fs", "cat", "/"], [["fs", "cat", "{d}/missing"]], None),
    "fs get": (["fs", "get", "/etc/hostname", "-"], [
        ["fs", "get", "{d}/missing", "{d}/down"],          # remote source missing
        ["fs", "get", "{d}/f", "{d}/missingdir/"],          # local target dir missing
        ["fs", "get", "{d}/f", "{d}/f", "{d}/f"],           # several into a non-directory
        ["fs", "get", "{d}/sub", "{d}/down"]], None),       # a directory without -r
    "fs put": (["fs", "put", "-", "/dev/null"], [
        ["fs", "put", "{d}/missing", "{d}/down/"],          # local source missing
        ["fs", "put", "{d}/f", "{d}/missingdir/"],          # remote target dir missing
        ["fs", "put", "{d}/f", "{d}/f", "{d}/f"],           # several into a non-directory
        ["fs", "put", "{d}/sub", "{d}/down"]], None),       # a directory without -r
    "fs ls": (["fs", "ls", "/"], [["fs", "ls", "{d}/missing"]], None),
    "fs stat": (["fs", "stat", "/"], [["fs", "stat", "{d}/missing"]], None),
    "fs rm": (["fs", "rm", "{d}/nothing"], [["fs", "rm", "{d}/missing"],
                                             ["fs", "rm", "{d}/sub"]], None),
    "fs cp": (["fs", "cp", "{d}/f", "{d}/f2"], [["fs", "cp", "{d}/missing", "{d}/x"],
                                                 ["fs", "cp", "{d}/f", "{d}/missingdir/"]],
              None),
    "fs mkdir": (["fs", "mkdir", "-p", "{d}/m"], [["fs", "mkdir", "{d}/missing/x"]], None),
    "fs walk": (["fs", "walk", "/"], [["fs", "walk", "{d}/missing"]], None),
    "rpc": (["rpc"], [["rpc"]], b'{"id":1,"method":"no/such"}\n'),
    "sessions": (["sessions"], [["sessions", "--end", "nosuchsession"]], None),
    "ps": (["ps"], [["ps", "nosuchsession"]], None),
    "attach": (["attach", "nosuchsession"], [["attach", "nosuchsession"]], None),
    "forward": (["forward", "-L", "0:127.0.0.1:9"], [["forward", "-L", "0:127.0.0.1:9"]], None),
    "help": (["help"], [], None),
}


def listed_commands():
    out = subprocess.run([CLIENT, "--help"], capture_output=True, timeout=30).stdout.decode()
    names = set()
    for line in out[out.index("Commands:"):out.index("Options:")].splitlines():
        m = re.match(r"  (fs [a-z]+|[a-z]+)\b", line)
        if m:
            names.add(m.group(1))
    return names


def scratch():
    d = tempfile.mkdtemp(prefix="ec-exits-")
    with open(os.path.join(d, "f"), "w") as f:
        f.write("f\n")
    os.mkdir(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", "x"), "w") as f:
        f.write("x\n")
    os.mkdir(os.path.join(d, "down"))
    return d


def words(args, d):
    return [a.replace("{d}", d) for a in args]


@ours_only
def test_every_command_is_walked(_srv):
    need_client()
    assert listed_commands() == set(COMMANDS), (listed_commands() ^ set(COMMANDS))


def run_all(calls):
    """Runs every (argv, stdin) at once (most of each is the client starting, or waiting
    on a refused port); their CompletedProcess in the same order."""
    def one(call):
        argv, stdin = call
        return subprocess.run(argv, input=stdin or b"", capture_output=True, timeout=120)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, calls))


@ours_only
def test_usage_errors_exit_2(_srv):
    need_client()
    d = scratch()
    try:
        calls = []
        for name, (good, _, _) in COMMANDS.items():
            n = len(name.split())
            calls.append(([CLIENT, "--url", "ws://127.0.0.1:1"] + good[:n] +
                          ["--no-such-option"] + words(good[n:], d), None))
        for args in (["fs", "cp", "a"], ["fs", "walk"], ["shell", "x"], ["help", "a", "b", "c"],
                     ["fs"], ["nosuchcommand"], ["run"]):
            calls.append(([CLIENT, "--url", "ws://127.0.0.1:1"] + args, None))
        for (argv, _), r in zip(calls, run_all(calls)):
            assert r.returncode == 2, (argv, r)
    finally:
        shutil.rmtree(d)


@ours_only
def test_unreachable_exits_255_and_refused_credentials_3(_srv):
    need_client()
    d = scratch()
    fd, tok = tempfile.mkstemp(prefix="ec-exits-tok-")
    os.write(fd, TOKEN.encode())
    os.close(fd)
    try:
        with Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok]) as auth:
            names = [n for n in COMMANDS if n != "help"]
            calls = [([CLIENT, "--url", "ws://127.0.0.1:1", "--connect-timeout", "1"] +
                      words(COMMANDS[n][0], d), COMMANDS[n][2]) for n in names]
            calls += [([CLIENT, "--url", auth.url] + words(COMMANDS[n][0], d), COMMANDS[n][2])
                      for n in names]
            results = run_all(calls)
            for name, r in zip(names, results[:len(names)]):
                assert r.returncode == 255, (name, r)
            for name, r in zip(names, results[len(names):]):
                assert r.returncode == 3, (name, r)
    finally:
        shutil.rmtree(d)
        os.unlink(tok)


@ours_only
@needs_own_server
def test_failures_exit_1_whichever_side(_):
    need_client()
    d = scratch()
    try:
        with Server() as srv:
            calls = [(name, args, stdin) for name, (_, failing, stdin) in COMMANDS.items()
                     for args in failing]
            results = run_all([([CLIENT, "--url", srv.url] + words(args, d), stdin)
                               for _, args, stdin in calls])
            for (name, args, _), r in zip(calls, results):
                assert r.returncode == 1, (name, args, r)
                assert r.stderr.startswith(b"exec-client: ") or name == "rpc", (args, r)
            # run and shell: the remote command's status
            assert ec(srv, "run", "exit 7").returncode == 7
            assert ec(srv, "run", "--", "/nonexistent-ec-exits").returncode == 127
            assert ec(srv, "shell", stdin=b"exit 5\n").returncode == 5
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    run_tests(globals())
