#!/usr/bin/env python3
"""envPolicy (§5.1.3): the child's environment is the server's, filtered by the policy,
with `env` laid on top. The codex client sends a policy with every process/start; without
one the environment is exactly `env` (§5.1.1). Every test also runs against the reference."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The server inherits these from the test (names chosen to hit each rule).
os.environ.update({"EXECBB_API_KEY": "k", "execbb_lower_secret": "s", "EXECBB_GH_TOKEN": "t",
                   "EXECBB_PLAIN": "plain", "EXECBB_ZZ_EXP": "zz", "HOME": os.environ.get(
                       "HOME", "/root"), "LANG": os.environ.get("LANG", "C.UTF-8")})
from harness import *  # noqa


def policy(inherit="all", ignore=False, exclude=(), set_=None, include_only=()):
    return {"inherit": inherit, "ignoreDefaultExcludes": ignore, "exclude": list(exclude),
            "set": dict(set_ or {}), "includeOnly": list(include_only)}


def child_env(s, pid, env, pol, argv=("/usr/bin/env",)):
    extra = {} if pol is None else {"envPolicy": pol}
    s.start(pid, list(argv), env=env, marker=False, **extra)
    out = s.collect_until_closed(pid)
    assert out["exit_code"] == 0, out
    return dict(line.split("=", 1) for line in out["stdout"].decode().splitlines() if "=" in line)


def test_no_policy_is_exactly_env(srv):
    s = srv.session()
    assert child_env(s, "a", {"ZZ": "1"}, None) == {"ZZ": "1"}
    s.close()


def test_inherit_all_like_codex_sends(srv):
    """What codex sends on every start: the child gets HOME, PATH, LANG from the server."""
    s = srv.session()
    e = child_env(s, "a", {"ZZ": "1"}, policy("all"))
    assert e["HOME"] == os.environ["HOME"] and e["PATH"], e
    assert e["LANG"] == os.environ["LANG"], e
    assert e["EXECBB_PLAIN"] == "plain" and e["ZZ"] == "1", e
    for gone in ("EXECBB_API_KEY", "execbb_lower_secret", "EXECBB_GH_TOKEN"):
        assert gone not in e, (gone, e)
    s.close()


def test_core_set_and_env_wins(srv):
    s = srv.session()
    e = child_env(s, "a", {"ZZ": "env"}, policy("core", set_={"ZZ": "set", "Q": "q"}))
    assert e["ZZ"] == "env" and e["Q"] == "q" and e["HOME"] == os.environ["HOME"], e
    assert "EXECBB_PLAIN" not in e, e
    assert set(e) <= {"PATH", "SHELL", "TMPDIR", "TEMP", "TMP", "HOME", "LANG", "LC_ALL",
                      "LC_CTYPE", "LOGNAME", "USER", "ZZ", "Q"}, e
    s.close()


def test_exclude_include_only(srv):
    s = srv.session()
    e = child_env(s, "a", {"ZZ": "1"}, policy("all", ignore=True, exclude=["execbb_zz_*"],
                                                include_only=["*key*", "execbb_z?_exp",
                                                              "*SECRET", "PATH"]))
    assert e == {"EXECBB_API_KEY": "k", "execbb_lower_secret": "s", "PATH": e["PATH"],
                 "ZZ": "1"}, e
    s.close()


def test_none_with_set(srv):
    s = srv.session()
    assert child_env(s, "a", {}, policy("none", set_={"A_KEY": "x"})) == {"A_KEY": "x"}
    s.close()


def test_policy_path_finds_programs(srv):
    """With PATH only from the inherited environment, a bare program name resolves,
    in pipe and PTY mode."""
    s = srv.session()
    for tty in (False, True):
        pid = "p%d" % tty
        s.start(pid, ["env"], env={}, marker=False, tty=tty, envPolicy=policy("core"))
        out = s.collect_until_closed(pid)
        assert out["exit_code"] == 0, out
        text = (out["pty"] if tty else out["stdout"]).decode()
        assert "HOME=" + os.environ["HOME"] in text, text
    s.close()


def test_policy_errors(srv):
    s = srv.session()

    def err(pol):
        return s.error("process/start", {"processId": "e", "argv": ["true"], "cwd": "file:///",
                                         "env": {}, "tty": False, "envPolicy": pol})
    assert err({"inherit": "all"}) == (-32602, "missing field `ignoreDefaultExcludes`")
    bad = policy()
    bad["inherit"] = "bogus"
    assert err(bad) == (-32602, "unknown variant `bogus`, expected one of `core`, `all`, "
                                "`none`")
    assert err(policy(exclude=[1])) == (-32602, "invalid type: number, expected a string")
    assert err(policy(set_={"X": 1})) == (-32602, "invalid type: number, expected a string")
    assert err(5) == (-32602, "invalid type: number, expected struct ExecEnvPolicy")
    assert err(True) == (-32602, "invalid type: boolean `true`, expected struct ExecEnvPolicy")
    assert err([]) == (-32602, "invalid length 0, expected struct ExecEnvPolicy with 5 elements")
    s.close()


if __name__ == "__main__":
    run_tests(globals())
