#!/usr/bin/env python3
"""environment/info `prependPathDirs` (PROTOCOL.md §8.3): the server reports one
directory holding only `rg`, and puts it first on its own PATH, so children that
inherit the server's PATH (envPolicy `all` or `core` with no PATH of their own) run
ripgrep from it; a request that names its PATH gets nothing prepended. Every test
also runs against the reference (whose directory is its bundled `codex-path`)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def policy(inherit):
    return {"inherit": inherit, "ignoreDefaultExcludes": False, "exclude": [], "set": {},
            "includeOnly": []}


def the_dir(s):
    dirs = s.call("environment/info")["prependPathDirs"]
    assert isinstance(dirs, list) and len(dirs) == 1, dirs
    assert dirs[0].startswith("file:///"), dirs
    return dirs[0][len("file://"):]


def run(s, pid, script, env, pol):
    s.start(pid, ["/bin/sh", "-c", script], env=env, marker=False, envPolicy=pol)
    out = s.collect_until_closed(pid, timeout=DEFAULT_TIMEOUT * 3)
    assert out["exit_code"] == 0, out
    return out["stdout"].decode()


def test_reported_dir_holds_only_rg(srv):
    s = srv.session()
    d = the_dir(s)
    assert os.listdir(d) == ["rg"], os.listdir(d)
    rg = os.path.join(d, "rg")
    assert os.access(rg, os.X_OK), rg
    s.close()


def test_inherited_path_finds_rg_first(srv):
    s = srv.session()
    d = the_dir(s)
    # `core` too on ours; the reference builds `core` from the environment it was
    # started with, before its own prepend (docs/CAPABILITIES.md).
    for inherit in ("all",) if IS_REF else ("all", "core"):
        out = run(s, "a-" + inherit, 'echo "$PATH"; command -v rg; rg --version', {},
                  policy(inherit))
        path, where, version = out.split("\n", 2)
        # Before everything the server was started with (the reference puts its
        # apply_patch alias directory in front of it).
        parts = path.split(":")
        assert d in parts and parts.index(d) < len(parts) - 1, (inherit, path, d)
        assert path.endswith(":" + os.environ["PATH"]), (inherit, path)
        assert where == os.path.join(d, "rg"), (inherit, where)
        assert version.startswith("ripgrep "), (inherit, version)
    s.close()


def test_rg_searches(srv):
    """The model's typical call: rg over the working directory, through the PATH."""
    s = srv.session()
    with open(os.path.join(srv.workdir, "needle.txt"), "w") as f:
        f.write("hay\nneedle-xyz\n")
    out = run(s, "g", "rg --no-heading -n needle-xyz .", {}, policy("all"))
    assert "needle.txt:2:needle-xyz" in out, out
    s.close()


def test_explicit_path_is_left_alone(srv):
    s = srv.session()
    out = run(s, "b", 'echo "$PATH"', {"PATH": "/usr/bin:/bin"}, policy("all"))
    assert out == "/usr/bin:/bin\n", out
    s.close()


@ours_only
@needs_own_server
def test_dir_removed_at_exit(_):
    with Server() as srv:
        s = srv.session()
        d = the_dir(s)
        assert os.path.isdir(d)
        s.close()
    assert not os.path.exists(d), d


if __name__ == "__main__":
    run_tests(globals())
