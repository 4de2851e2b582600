#!/usr/bin/env python3
"""process/start `shellSnapshot` (capability shellSnapshotV2, PROTOCOL.md §8.3): what
~/.bashrc exports, defines and sets reaches a `[bash, "-lc", SCRIPT]` command, captured
once per (scopeId, shell, cwd, envPolicy, sandbox); the request's env wins; aliases are
not kept; a failed capture runs the plain command; the reference's errors. Every test
builds its own HOME with a ~/.bashrc and runs against ours and the reference alike.

A capture is a login bash on a loaded machine: deadlines are generous (and scaled)."""
import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_spawner_channel import answered_while_stopped, spawners  # noqa

SLOW = DEFAULT_TIMEOUT * 4
SHELL = {"name": "bash", "path": "/bin/bash"}
BASHRC = r"""
echo "sourced" >> "$HOME/captures"
export FROM_RC=rc-value
export RC_MULTI='two
lines'
rc_greet() { echo "hello $1 from rc"; }
alias rc_alias='echo alias-ran'
set -o noclobber
shopt -s extglob
"""


class Home:
    """A HOME with the given ~/.bashrc, and a server started with it."""

    def __init__(self, bashrc=BASHRC):
        self.dir = tempfile.mkdtemp(prefix="snaphome-", dir="/var/tmp")
        with open(os.path.join(self.dir, ".bashrc"), "w") as f:
            f.write(bashrc)

    def server(self):
        return server_with_env({"HOME": self.dir})

    def captures(self):
        try:
            with open(os.path.join(self.dir, "captures")) as f:
                return len(f.read().splitlines())
        except FileNotFoundError:
            return 0

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def start(s, pid, script, home, scope="scope-1", argv=None, env=None, shell=SHELL, **extra):
    e = {"PATH": "/usr/bin:/bin", "HOME": home.dir, MARKER_VAR: MARKER}
    e.update(env or {})
    p = {"processId": pid, "argv": argv or ["/bin/bash", "-lc", script],
         "cwd": "file://" + s.server.workdir, "env": e, "tty": False,
         "shellSnapshot": {"scopeId": scope, "shell": shell}}
    p.update(extra)
    s.call("process/start", p, timeout=SLOW)
    out = s.collect_until_closed(pid, timeout=SLOW)
    return out["stdout"].decode(), out["stderr"].decode(), out["exit_code"]


def with_home(fn, bashrc=BASHRC):
    """Runs fn(session, home, server) with a fresh HOME and server."""
    home = Home(bashrc)
    try:
        with home.server() as srv:
            s = srv.session()
            fn(s, home, srv)
            s.close()
    finally:
        home.cleanup()


@needs_own_server
def test_advertised(_):
    def body(s, home, srv):
        assert s.call("environment/info")["capabilities"]["shellSnapshotV2"] is True
    with_home(body)


@needs_own_server
def test_bashrc_state_reaches_lc_command(_):
    script = ('echo "var=$FROM_RC"; echo "multi=$RC_MULTI"; rc_greet you; '
              'set -o | grep -w noclobber; shopt extglob; '
              'type rc_alias >/dev/null 2>&1 && echo alias-kept || echo alias-dropped; '
              'echo "pwd=$PWD"')

    def body(s, home, srv):
        out, err, code = start(s, "a", script, home)
        assert code == 0, (out, err)
        lines = out.splitlines()
        assert "var=rc-value" in lines, out
        assert "multi=two" in lines and "lines" in lines, out
        assert "hello you from rc" in lines, out
        assert any(l.split() == ["noclobber", "on"] for l in lines), out
        assert any(l.split() == ["extglob", "on"] for l in lines), out
        assert "alias-dropped" in lines, out
        assert "pwd=" + srv.workdir in lines, out
        assert "failed to restore" not in err, err
    with_home(body)


@needs_own_server
def test_request_env_wins(_):
    def body(s, home, srv):
        out, _, code = start(s, "a", 'echo "$FROM_RC $REQ_ONLY"', home,
                             env={"FROM_RC": "from-request", "REQ_ONLY": "r"})
        assert (code, out) == (0, "from-request r\n"), out
    with_home(body)


@needs_own_server
def test_captured_once_per_key(_):
    def body(s, home, srv):
        for i in range(3):
            out, _, code = start(s, "same-%d" % i, 'echo "$FROM_RC"', home)
            assert (code, out) == (0, "rc-value\n"), out
        assert home.captures() == 1, home.captures()
        start(s, "other-scope", "true", home, scope="scope-2")
        assert home.captures() == 2, home.captures()
        start(s, "other-cwd", "true", home, cwd="file:///tmp")
        assert home.captures() == 3, home.captures()
        # The same key again: nothing new.
        start(s, "again", "true", home, scope="scope-2")
        assert home.captures() == 3, home.captures()
    with_home(body)


@needs_own_server
def test_not_applied_to_other_argv(_):
    def body(s, home, srv):
        for pid, argv in (("c", ["/bin/bash", "-c", 'echo "[$FROM_RC]"']),
                          ("other-path", ["bash", "-lc", 'echo "[$FROM_RC]"']),
                          ("too-short", ["/bin/bash", "-lc"])):
            out, err, code = start(s, pid, None, home, argv=argv)
            if pid == "too-short":
                assert code == 2 and "requires an argument" in err, (code, err)
            else:
                assert (code, out) == (0, "[]\n"), (pid, out, err)
        assert home.captures() == 0
        # A shell the snapshot does not support is fine when it does not apply.
        out, _, code = start(s, "fish-unused", None, home, argv=["/bin/true"],
                             shell={"name": "fish", "path": "/bin/bash"})
        assert code == 0
    with_home(body)


@needs_own_server
def test_extra_arguments_kept(_):
    def body(s, home, srv):
        out, _, code = start(s, "a", None, home,
                             argv=["/bin/bash", "-lc", 'echo "$0 $1 $FROM_RC"', "zero", "one"])
        assert (code, out) == (0, "zero one rc-value\n"), out
    with_home(body)


@needs_own_server
def test_errors(_):
    def body(s, home, srv):
        base = {"processId": "e", "argv": ["/bin/bash", "-lc", "true"], "cwd": "file:///tmp",
                "env": {}, "tty": False}
        cases = [
            ({"scopeId": "", "shell": SHELL},
             "shell snapshot scope must be non-empty and at most 256 bytes"),
            ({"scopeId": "é" * 129, "shell": SHELL},
             "shell snapshot scope must be non-empty and at most 256 bytes"),
            ({"scopeId": "a", "shell": {"name": "fish", "path": "/bin/bash"}},
             "shell snapshots are unsupported for shell `fish`"),
            ({"scopeId": "a", "shell": {"name": "Bash", "path": "/bin/bash"}},
             "shell snapshots are unsupported for shell `Bash`"),
            ({}, "missing field `scopeId`"),
            ({"scopeId": "a"}, "missing field `shell`"),
            ({"scopeId": "a", "shell": {"name": "bash"}}, "missing field `path`"),
            ({"scopeId": 1, "shell": SHELL}, "invalid type: number, expected a string"),
        ]
        for snap, msg in cases:
            p = dict(base, shellSnapshot=snap)
            assert s.error("process/start", p) == (-32602, msg), snap
        # 256 bytes is fine; an empty scope fails even when the argv does not match.
        p = dict(base, argv=["/bin/true"], shellSnapshot={"scopeId": "", "shell": SHELL})
        assert s.error("process/start", p)[0] == -32602
        assert home.captures() == 0
    with_home(body)


@needs_own_server
def test_failed_capture_runs_plain_command(_):
    def body(s, home, srv):
        out, err, code = start(s, "a", 'echo "[$FROM_RC]"', home)
        assert (code, out) == (0, "[]\n"), (out, err)
    with_home(body, bashrc='export FROM_RC=x\nexit 3\n')


@needs_own_server
def test_env_policy_filters_the_capture(_):
    pol = {"inherit": "all", "ignoreDefaultExcludes": False, "exclude": ["FROM_*"],
           "set": {}, "includeOnly": []}

    def body(s, home, srv):
        out, _, code = start(s, "a", 'echo "[$FROM_RC] [$RC_API_KEY] [$RC_PLAIN]"; rc_greet x',
                             home, envPolicy=pol)
        assert code == 0, out
        assert out == "[] [] [plain]\nhello x from rc\n", out
    with_home(body, bashrc=BASHRC + "export RC_API_KEY=secret RC_PLAIN=plain\n")


@needs_own_server
def test_no_descriptor_leaks_to_the_command(_):
    def body(s, home, srv):
        out, _, code = start(s, "a", "ls /proc/$$/fd; exit 0", home)
        assert code == 0 and sorted(out.split()) == ["0", "1", "2"], out
    with_home(body)


@needs_own_server
def test_sandboxed_command(_):
    """The capture runs under the request's sandbox too (reads allowed everywhere)."""
    sb = {"permissions": {"type": "managed",
                          "file_system": {"type": "restricted", "entries": [
                              {"path": {"type": "special", "value": {"kind": "root"}},
                               "access": "read"}]},
                          "network": "restricted"},
          "windowsSandboxLevel": "disabled"}

    def body(s, home, srv):
        out, err, code = start(s, "a", 'echo "$FROM_RC"; rc_greet sb', home, sandbox=sb)
        assert (code, out) == (0, "rc-value\nhello sb from rc\n"), (out, err)
    with_home(body, bashrc=BASHRC.replace('echo "sourced" >> "$HOME/captures"\n', ""))


@ours_only
@needs_own_server
def test_shutdown_during_capture(_):
    """A capture that hangs neither delays shutdown nor outlives the server."""
    home = Home('sleep 600\n')
    try:
        srv = home.server()
        s = srv.session()
        s.send_request("process/start", {
            "processId": "a", "argv": ["/bin/bash", "-lc", "true"], "cwd": "file:///tmp",
            "env": {"PATH": "/usr/bin:/bin", "HOME": home.dir, MARKER_VAR: MARKER},
            "tty": False, "shellSnapshot": {"scopeId": "s", "shell": SHELL}})
        wait_until(lambda: marked_pids(), SLOW, "the capture shell")
        srv.stop()
        wait_no_marked(timeout=SLOW)
    finally:
        home.cleanup()


@ours_only
@needs_own_server
def test_capture_never_stops_the_loop(_):
    """The capture starts through the loop's spawner channel like any command, and the
    loop never waits for a spawner (issue 38): with every spawner process of the server
    stopped, a start that needs a new capture waits while a request sent behind it is
    answered; once they run again, the capture runs and the command gets its snapshot."""
    def body(s, home, srv):
        # A first capture, so that every spawner the server uses for one exists.
        assert start(s, "warm", 'echo "$FROM_RC"', home, scope="warm")[0] == "rc-value\n"
        stopped = spawners(srv)
        for p in stopped:
            os.kill(p, signal.SIGSTOP)
        try:
            wait_until(lambda: all(proc_state(p) == "T" for p in stopped), 5,
                       "the spawners to stop")
            sid = s.send_request("process/start", {
                "processId": "a", "argv": ["/bin/bash", "-lc", 'echo "$FROM_RC"; rc_greet x'],
                "cwd": "file://" + srv.workdir, "tty": False,
                "env": {"PATH": "/usr/bin:/bin", "HOME": home.dir, MARKER_VAR: MARKER},
                "shellSnapshot": {"scopeId": "scope-new", "shell": SHELL}})
            answered_while_stopped(s, stopped, "a capture's start waited for a stopped "
                                   "spawner")
        finally:
            for p in stopped:
                os.kill(p, signal.SIGCONT)
        assert s.wait_response(sid, timeout=SLOW)["result"] == {"processId": "a",
                                                                 "sandboxType": "none"}
        out = s.collect_until_closed("a", timeout=SLOW)
        assert (out["exit_code"], out["stdout"]) == (0, b"rc-value\nhello x from rc\n"), out
        assert home.captures() == 2
    with_home(body)


if __name__ == "__main__":
    run_tests(globals(), per_test_timeout=240)
