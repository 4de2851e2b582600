#!/usr/bin/env python3
"""environmentConfig/read (§8.3): the executor's own codex config.toml, filtered to the
key paths asked for. Compared as TOML (Python's tomllib), since both servers may spell
the same document differently (the reference re-serialises, ours keeps the lines).
Runs against both servers."""
import os
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

CONFIG = '''model = "x"  # the model
approval_policy = "never"

[mcp_servers.foo]
command = "foo-cmd"
args = [
  "a",
  "b # not a comment",
]
env = { K = "v" }

[mcp_servers.bar]
url = "http://127.0.0.1:1/mcp"

[other]
k = 1
j = 2

[profiles.p]
model = "y"
'''


def read(s, *paths):
    return s.call("environmentConfig/read", {"cwd": "file:///tmp",
                                             "configPaths": [list(p) for p in paths],
                                             "requirementsPaths": []})


@needs_own_server
def test_filters_the_user_layer(_):
    home = tempfile.mkdtemp(prefix="execbb-codex-home-")
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(CONFIG)
    srv = server_with_env({"CODEX_HOME": home})
    try:
        s = srv.session()
        r = read(s, ["mcp_servers"])
        assert r["codexHomeDir"] == "file://" + home, r
        assert r["hostname"] and r["requirements"] == {"layers": [], "cloudInsertionIndex": 0}, r
        (layer,) = r["config"]["layers"]
        assert layer["source"] == "user (%s/config.toml)" % home, layer
        assert layer["baseDir"] == "file://" + home, layer
        assert tomllib.loads(layer["toml"]) == {"mcp_servers": {
            "foo": {"command": "foo-cmd", "args": ["a", "b # not a comment"], "env": {"K": "v"}},
            "bar": {"url": "http://127.0.0.1:1/mcp"}}}, layer["toml"]
        (layer,) = read(s, ["model"], ["other", "k"])["config"]["layers"]
        assert tomllib.loads(layer["toml"]) == {"model": "x", "other": {"k": 1}}, layer["toml"]
        (layer,) = read(s, ["profiles", "p", "model"])["config"]["layers"]
        assert tomllib.loads(layer["toml"]) == {"profiles": {"p": {"model": "y"}}}
        assert read(s, ["nothing"])["config"]["layers"] == []
        s.close()
    finally:
        srv.stop()


@needs_own_server
def test_no_config_file(_):
    home = tempfile.mkdtemp(prefix="execbb-codex-home-")
    srv = server_with_env({"CODEX_HOME": home})
    try:
        s = srv.session()
        assert read(s, ["mcp_servers"])["config"]["layers"] == []
        s.close()
    finally:
        srv.stop()


@needs_own_server
def test_codex_home_resolution(_):
    """CODEX_HOME, when set, must be an existing directory and is reported canonical;
    unset, it is ~/.codex of $HOME or (HOME unset, as under a service manager) of the
    password entry's home, as the reference resolves it."""
    import pwd
    d = tempfile.mkdtemp(prefix="execbb-codex-home-")
    link = d + "-link"
    os.symlink(d, link)
    afile = os.path.join(d, "file")
    open(afile, "w").close()
    try:
        pw_home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        pw_home = None
    cases = [
        ({"CODEX_HOME": link + "//./"}, d, None),
        ({"CODEX_HOME": None, "HOME": None}, pw_home and pw_home.rstrip("/") + "/.codex", None),
        ({"CODEX_HOME": "", "HOME": "//srv/./u/"}, "/srv/u/.codex", None),
        ({"CODEX_HOME": d + "/missing"}, None,
         'failed to find Codex home: CODEX_HOME points to "%s/missing", but that path does '
         'not exist' % d),
        ({"CODEX_HOME": afile}, None,
         'failed to find Codex home: CODEX_HOME points to "%s", but that path is not a '
         'directory' % afile),
        ({"CODEX_HOME": d + '/q"\n'}, None,
         'failed to find Codex home: CODEX_HOME points to "%s/q\\"\\n", but that path does '
         'not exist' % d),
    ]
    try:
        for changes, home, err in cases:
            srv = server_with_env(changes)
            try:
                s = srv.session()
                params = {"cwd": "file:///tmp", "configPaths": [["model"]],
                          "requirementsPaths": []}
                if err:
                    code, text = s.error("environmentConfig/read", params)
                    assert (code, text) == (-32603, err), (changes, code, text)
                elif home:
                    r = s.call("environmentConfig/read", params)
                    assert r["codexHomeDir"] == "file://" + home, (changes, r)
                s.close()
            finally:
                srv.stop()
    finally:
        os.unlink(link)
        os.unlink(afile)
        os.rmdir(d)


def test_errors(srv):
    s = srv.session(init=False)
    m = s.request("environmentConfig/read", {"cwd": "file:///tmp", "configPaths": [],
                                             "requirementsPaths": []})
    assert m["error"] == {"code": -32600, "message": "client must call initialize before "
                                                     "using environment config methods"}, m
    s.close()
    s = srv.session()
    assert s.error("environmentConfig/read", {}) == (-32602, "missing field `cwd`")
    assert s.error("environmentConfig/read", {"cwd": "file:///tmp"}) == \
        (-32602, "missing field `configPaths`")
    assert s.error("environmentConfig/read", {"cwd": "file:///tmp", "configPaths": [],
                                              "requirementsPaths": []}) == \
        (-32602, "at least one config or requirements path is required")
    s.close()


if __name__ == "__main__":
    run_tests(globals())
