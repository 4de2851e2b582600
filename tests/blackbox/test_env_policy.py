#!/usr/bin/env python3
"""process/start `envPolicy` (PROTOCOL.md §5.1.3): the child sees the server's environment
filtered by the policy, with `env` on top; without a policy it sees exactly `env`.

The server inherits this script's environment, so the variables set below are what
"the server's environment" holds. PATH is compared by suffix: the reference puts its own
helper directories in front of its PATH at startup."""
import os
import sys

os.environ["BBENV_PLAIN"] = "plain"
os.environ["BBENV_API_KEY"] = "secret-key"
os.environ["BBENV_lower"] = "lower"
os.environ.setdefault("HOME", "/root")
os.environ.setdefault("LANG", "C.UTF-8")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def policy(inherit="all", ignore=False, exclude=(), set_=None, include=()):
    return {"inherit": inherit, "ignoreDefaultExcludes": ignore, "exclude": list(exclude),
            "set": dict(set_ or {}), "includeOnly": list(include)}


def child_env(s, pid, env, pol=None, tty=False):
    extra = {} if pol is None else {"envPolicy": pol}
    s.start(pid, ["/usr/bin/env", "-0"] if not tty else ["/usr/bin/env"], env=env,
            marker=False, tty=tty, **extra)
    out = s.collect_until_closed(pid)
    assert out["exit_code"] == 0, out
    if tty:
        lines = out["pty"].decode().replace("\r\n", "\n").split("\n")
    else:
        lines = out["stdout"].decode().split("\0")
    return dict(l.split("=", 1) for l in lines if "=" in l)


def test_absent_policy_gives_exactly_env(srv):
    s = srv.session()
    assert child_env(s, "e1", {"ZZ": "1"}) == {"ZZ": "1"}
    s.start("e1n", ["/usr/bin/env"], env={"ZZ": "1"}, marker=False, envPolicy=None)
    assert s.collect_until_closed("e1n")["stdout"] == b"ZZ=1\n"
    s.close()


def test_inherit_all(srv):
    s = srv.session()
    env = child_env(s, "e2", {"ZZ": "1", "BBENV_lower": "from-env"}, policy("all"))
    assert env["HOME"] == os.environ["HOME"], env
    assert env["PATH"].endswith(os.environ["PATH"]), env
    assert env["BBENV_PLAIN"] == "plain", env
    assert "BBENV_API_KEY" not in env, env          # default exclude *KEY*
    assert env["BBENV_lower"] == "from-env", env    # env wins
    assert env["ZZ"] == "1", env
    s.close()


def test_inherit_core_with_set(srv):
    s = srv.session()
    env = child_env(s, "e3", {}, policy("core", set_={"S": "1"}))
    assert env["HOME"] == os.environ["HOME"] and env["LANG"] == os.environ["LANG"], env
    assert env["PATH"].endswith(os.environ["PATH"]), env
    assert "BBENV_PLAIN" not in env and env["S"] == "1", env
    s.close()


def test_inherit_none_set_and_env_wins(srv):
    s = srv.session()
    env = child_env(s, "e4", {"ZZ": "1"}, policy("none", set_={"ZZ": "set", "S": "s"}))
    assert env == {"ZZ": "1", "S": "s"}, env
    s.close()


def test_exclude_and_include_only_case_insensitive(srv):
    s = srv.session()
    env = child_env(s, "e5", {"Q": "q"},
                    policy("all", ignore=True, exclude=["bbenv_pl*"], set_={"S": "1"},
                           include=["bbenv*", "s"]))
    assert env == {"BBENV_API_KEY": "secret-key", "BBENV_lower": "lower", "S": "1", "Q": "q"}, \
        env
    s.close()


def test_pty_child_gets_policy_env(srv):
    s = srv.session()
    env = child_env(s, "e6", {"ZZ": "1"}, policy("all"), tty=True)
    assert env["HOME"] == os.environ["HOME"] and env["ZZ"] == "1", env
    assert "BBENV_API_KEY" not in env, env
    s.close()


def test_program_found_on_inherited_path(srv):
    # env has no PATH: the program is looked up on the PATH the policy produced
    s = srv.session()
    s.start("e7", ["env"], env={}, marker=False, envPolicy=policy("core"))
    out = s.collect_until_closed("e7")
    assert out["exit_code"] == 0 and b"HOME=" in out["stdout"], out
    s.close()


def test_malformed_policy_errors(srv):
    s = srv.session()
    base = {"processId": "bad", "argv": ["true"], "cwd": "file:///tmp", "env": {}, "tty": False}
    code, msg = s.error("process/start", dict(base, envPolicy={"inherit": "all"}))[:2]
    assert (code, msg) == (-32602, "missing field `ignoreDefaultExcludes`"), (code, msg)
    code, msg = s.error("process/start", dict(base, envPolicy=policy("some")))[:2]
    assert (code, msg) == (-32602, "unknown variant `some`, expected one of `core`, `all`, "
                           "`none`"), (code, msg)
    for bad in (policy(exclude=[1]), policy(set_={"A": 1})):
        assert s.error("process/start", dict(base, envPolicy=bad)) == \
            (-32602, "invalid type: number, expected a string")
    assert s.error("process/start", dict(base, envPolicy=dict(policy(), exclude=None))) == \
        (-32602, "invalid type: null, expected a sequence")
    # unknown members are ignored
    r = s.call("process/start", dict(base, processId="extra", envPolicy=dict(policy(), x=1)))
    assert r["processId"] == "extra", r
    s.collect_until_closed("extra")
    s.close()


if __name__ == "__main__":
    run_tests(globals())
