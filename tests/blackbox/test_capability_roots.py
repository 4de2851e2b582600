#!/usr/bin/env python3
"""capabilityRoots/discoverV1 (PROTOCOL.md §8.2): the plugin and skill files below the
roots a client selected, found and read by the executor in one request. Every case
here was first run against 0.169.0; the file passes on both servers (EXEC_SERVER=ref).

Per root: a bounded walk (depth 6, symlinked directories followed), every SKILL.md
(sorted by URI) with its agents/openai.yaml, a root plugin manifest with its declared
mcpServers/apps files (.mcp.json by default), namespace manifests (the root's or the
nearest ancestor's first), warnings and a root-local error; results in request order."""
import ctypes
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

M = "capabilityRoots/discoverV1"


class Tree:
    def __init__(self):
        self.d = tempfile.mkdtemp(prefix="caproots-")

    def w(self, rel, data):
        p = os.path.join(self.d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return p

    def u(self, rel=""):
        return "file://" + os.path.join(self.d, rel).rstrip("/")

    def tf(self, rel, contents):
        """A CapabilityTextFile as the server answers it."""
        return {"path": self.u(rel), "contents": contents}

    def cleanup(self):
        shutil.rmtree(self.d, ignore_errors=True)


def discover(s, roots):
    return s.call(M, {"roots": roots})["roots"]


def empty(root_id, uri, error=None, warnings=()):
    return {"id": root_id, "path": uri, "plugin": None, "skills": [], "namespaceManifests": [],
            "warnings": list(warnings), "error": error}


def test_plugin_root(srv):
    t = Tree()
    man = '{"name":"p1","mcpServers":"./conf/mcp.json","apps":"./apps.json"}'
    t.w("plug/.codex-plugin/plugin.json", man)
    t.w("plug/.claude-plugin/plugin.json", '{"name":"lower priority"}')
    t.w("plug/conf/mcp.json", '{"mcpServers":{}}')
    t.w("plug/apps.json", '{"apps":[]}')
    t.w("plug/.mcp.json", '{"not":"used: declared path wins"}')
    t.w("plug/skills/b/SKILL.md", "B\n")
    t.w("plug/skills/a/SKILL.md", "---\nname: a\n---\nA\n")
    t.w("plug/skills/a/agents/openai.yaml", "x: 1\n")
    t.w("plug/nested/.cursor-plugin/plugin.json", '{"name":"nest"}')
    t.w("plug/nested/skills/c/SKILL.md", "C")
    t.w("plug/bad/SKILL.md", b"ok\xff\xfe")
    t.w("plug/cut/SKILL.md", b"ab\xe2\x82")
    t.w("plug/big/SKILL.md", "x" * (1024 * 1024 + 1))
    t.w("plug/d1/d2/d3/d4/d5/d6/SKILL.md", "depth 6")
    t.w("plug/d1/d2/d3/d4/d5/d6/d7/SKILL.md", "too deep")
    t.w("ext/SKILL.md", "through a symlinked directory")
    os.symlink(os.path.join(t.d, "ext"), os.path.join(t.d, "plug/linked"))
    s = srv.session()
    [r] = discover(s, [{"id": "demo@1", "path": t.u("plug")}])
    want = {
        "id": "demo@1", "path": t.u("plug"),
        "plugin": {"manifest": t.tf("plug/.codex-plugin/plugin.json", man),
                   "mcpConfig": t.tf("plug/conf/mcp.json", '{"mcpServers":{}}'),
                   "appsConfig": t.tf("plug/apps.json", '{"apps":[]}')},
        "skills": [{"instructions": t.tf(p, c), "metadata": m} for p, c, m in [
            ("plug/d1/d2/d3/d4/d5/d6/SKILL.md", "depth 6", None),
            ("plug/linked/SKILL.md", "through a symlinked directory", None),
            ("plug/nested/skills/c/SKILL.md", "C", None),
            ("plug/skills/a/SKILL.md", "---\nname: a\n---\nA\n",
             t.tf("plug/skills/a/agents/openai.yaml", "x: 1\n")),
            ("plug/skills/b/SKILL.md", "B\n", None)]],
        "namespaceManifests": [t.tf("plug/.codex-plugin/plugin.json", man),
                               t.tf("plug/nested/.cursor-plugin/plugin.json", '{"name":"nest"}')],
        "warnings": [
            "capability file %s is not UTF-8: invalid utf-8 sequence of 1 bytes from index 2"
            % t.u("plug/bad/SKILL.md"),
            "capability file %s exceeds the 1048576-byte limit" % t.u("plug/big/SKILL.md"),
            "capability file %s is not UTF-8: incomplete utf-8 byte sequence from index 2"
            % t.u("plug/cut/SKILL.md")],
        "error": None}
    assert r == want, r
    s.close()
    t.cleanup()


def test_subroot_inherits_ancestor_manifest_and_root_errors(srv):
    t = Tree()
    man = '{"name":"outer"}'
    t.w("plug/.claude-plugin/plugin.json", man)
    t.w("plug/skills/a/SKILL.md", "A")
    t.w("plug/file.txt", "not a dir")
    s = srv.session()
    roots = discover(s, [{"id": "sub", "path": t.u("plug/skills")},
                         {"id": "file", "path": t.u("plug/file.txt")},
                         {"id": "missing", "path": t.u("nope")},
                         {"id": "sub", "path": t.u("plug/skills") + "/"}])
    sub = {"id": "sub", "path": t.u("plug/skills"), "plugin": None,
           "skills": [{"instructions": t.tf("plug/skills/a/SKILL.md", "A"), "metadata": None}],
           "namespaceManifests": [t.tf("plug/.claude-plugin/plugin.json", man)],
           "warnings": [], "error": None}
    assert roots[0] == sub, roots[0]
    assert roots[1] == empty("file", t.u("plug/file.txt"),
                             "capability root %s is not a directory" % t.u("plug/file.txt"))
    assert roots[2] == empty("missing", t.u("nope"),
                             "failed to inspect capability root %s: No such file or directory "
                             "(os error 2)" % t.u("nope"))
    # a trailing slash is echoed; files below it are joined without doubling it
    assert roots[3] == dict(sub, path=t.u("plug/skills") + "/"), roots[3]
    assert discover(s, []) == []
    s.close()
    t.cleanup()


def test_declarations(srv):
    t = Tree()
    cases = {
        "inline": ('{"mcpServers":{"x":{}},"apps":"apps.json"}', None, None,
                   ["ignoring apps in %s: path must start with `./`"]),
        "escape": ('{"mcpServers":"./../x.json","apps":"./"}', ".mcp.json", None,
                   ["ignoring mcpServers in %s: path must remain below the capability root",
                    "ignoring apps in %s: path must remain below the capability root"]),
        "notjson": ("not json", ".mcp.json", None, []),
        "missing": ('{"mcpServers":"./missing.json","apps":5}', None, None, []),
        "nulls": ('{"mcpServers":null,"apps":null}', ".mcp.json", None, []),
    }
    for name, (man, _, _, _) in cases.items():
        t.w(name + "/.codex-plugin/plugin.json", man)
        t.w(name + "/.mcp.json", "{}")
    s = srv.session()
    roots = discover(s, [{"id": n, "path": t.u(n)} for n in cases])
    assert [r["id"] for r in roots] == list(cases)
    for r, (name, (man, mcp, apps, warns)) in zip(roots, cases.items()):
        mpath = name + "/.codex-plugin/plugin.json"
        assert r["plugin"] == {
            "manifest": t.tf(mpath, man),
            "mcpConfig": t.tf(name + "/" + mcp, "{}") if mcp else None,
            "appsConfig": None}, (name, r)
        assert r["warnings"] == [w % t.u(mpath) for w in warns], (name, r["warnings"])
        assert r["namespaceManifests"] == [t.tf(mpath, man)] and r["error"] is None, r
    s.close()
    t.cleanup()


def test_param_errors(srv):
    s = srv.session()
    cases = [
        ({}, -32602, "missing field `roots`"),
        ({"roots": "x"}, -32602, 'invalid type: string "x", expected a sequence'),
        ({"roots": ["x"]}, -32602,
         'invalid type: string "x", expected struct WireCapabilityRootDiscoverRequest'),
        ({"roots": [{"path": "file:///tmp"}]}, -32602, "missing field `id`"),
        ({"roots": [{"id": "a"}]}, -32602, "missing field `path`"),
        ({"roots": [{"id": 1, "path": "file:///tmp"}]}, -32602,
         "invalid type: number, expected a string"),
        ({"roots": [{"id": None, "path": "file:///tmp"}]}, -32602,
         "invalid type: null, expected a string"),
        ({"roots": [{"id": "a", "path": 5}]}, -32602, "invalid type: number, expected a string"),
        ({"roots": [{"id": "a", "path": "relative"}]}, -32602,
         "invalid URI: relative URL without a base"),
        ({"roots": [{"id": "a", "path": "http://x/tmp"}]}, -32602,
         "unsupported path URI scheme `http`"),
        ({"roots": [{"id": "a", "path": "file:///tmp", "sandbox": 3}]}, -32602,
         "invalid type: number, expected struct WireFileSystemSandboxContext"),
        ({"roots": [{"id": "a", "path": "file:///tmp", "sandbox": {"x": 1}}]}, -32602,
         "missing field `permissions`"),
        ({"roots": [{"id": str(i), "path": "file:///nope"} for i in range(129)]}, -32600,
         "capability root discovery accepts at most 128 roots"),
    ]
    for params, code, msg in cases:
        assert s.error(M, params) == (code, msg), (params, s.error(M, params))
    assert s.error(M, None) == (
        -32602, "invalid type: null, expected struct WireCapabilityRootsDiscoverParams")
    # 128 roots are fine; unknown members are ignored
    r = discover(s, [{"id": str(i), "path": "file:///nope", "x": 1} for i in range(128)])
    assert [x["id"] for x in r] == [str(i) for i in range(128)]
    s.close()
    s = srv.session(init=False)
    assert s.error(M, {"roots": []}) == (
        -32600, "client must call initialize before using capability discovery methods")
    s.close()


def test_capabilities_advertised(srv):
    s = srv.session()
    caps = s.call("environment/info")["capabilities"]
    assert caps["capabilityDiscoverySandbox"] is True, caps
    # capabilities/discoverV2 itself: test_discover_v2.py
    assert caps["capabilityDiscoveryV2"] is True, caps
    s.close()


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))


def policy(entries, cwd=None):
    sb = {"permissions": {"type": "managed",
                          "file_system": {"type": "restricted", "entries": entries},
                          "network": "restricted"},
          "windowsSandboxLevel": "disabled"}
    if cwd:
        sb["cwd"] = "file://" + cwd
    return sb


def read_entry(path, access="read"):
    return {"path": {"type": "path", "path": "file://" + path}, "access": access}


def test_sandboxed_roots(srv):
    if not IS_REF and landlock_abi() < 1:
        raise TestSkip("no Landlock here: sandboxed discovery fails closed (root-local error)")
    t = Tree()
    t.w("ws/plug/.codex-plugin/plugin.json", '{"mcpServers":"./m.json"}')
    t.w("ws/plug/m.json", "{}")
    t.w("ws/plug/skills/a/SKILL.md", "A")
    t.w("ws/plug/secret/SKILL.md", "secret")
    t.w("out/SKILL.md", "outside the sandbox")
    t.w("out/.codex-plugin/plugin.json", "{}")
    os.symlink(os.path.join(t.d, "out"), os.path.join(t.d, "ws/plug/escape"))
    s = srv.session()
    only_plug = policy([read_entry(t.d + "/ws/plug")])
    full = {"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled"}
    deny = policy([{"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"},
                   read_entry(t.d + "/ws/plug/secret", "none")], cwd=t.d)
    r = discover(s, [{"id": "sb", "path": t.u("ws/plug"), "sandbox": only_plug},
                     {"id": "out", "path": t.u("out"), "sandbox": only_plug},
                     {"id": "deny", "path": t.u("ws/plug"), "sandbox": deny},
                     {"id": "full", "path": t.u("ws/plug"), "sandbox": full},
                     {"id": "none", "path": t.u("ws/plug")}])
    skill = lambda rel, c: {"instructions": t.tf(rel, c), "metadata": None}
    man = t.tf("ws/plug/.codex-plugin/plugin.json", '{"mcpServers":"./m.json"}')
    plugin = {"manifest": man, "mcpConfig": t.tf("ws/plug/m.json", "{}"), "appsConfig": None}
    # the symlink out of the readable tree is not followed under the sandbox; without
    # namespaces its target exists and is refused rather than absent (a warning that says
    # so: docs/SANDBOX.md, "Without namespaces")
    landlock = not IS_REF and s.call("environment/info", {})["sandbox"]["mode"] == "landlock"
    if landlock:
        want = "failed to scan capability path %s: Permission denied (os error 13)" % \
            t.u("ws/plug/escape")
        assert r[0]["warnings"] == [want], r[0]
        r[0]["warnings"] = []
    assert r[0] == {"id": "sb", "path": t.u("ws/plug"), "plugin": plugin,
                    "skills": [skill("ws/plug/secret/SKILL.md", "secret"),
                               skill("ws/plug/skills/a/SKILL.md", "A")],
                    "namespaceManifests": [man], "warnings": [], "error": None}, r[0]
    # a root outside the readable tree cannot even be inspected (without namespaces its
    # existence is seen, a stat: nothing of it is read)
    assert landlock or r[1]["error"].startswith(
        "failed to inspect capability root %s: " % t.u("out")), r[1]
    assert r[1]["skills"] == [] and r[1]["plugin"] is None, r[1]
    # an access:none directory below a readable root stays unread
    assert skill("ws/plug/secret/SKILL.md", "secret") not in r[2]["skills"], r[2]
    assert skill("ws/plug/skills/a/SKILL.md", "A") in r[2]["skills"], r[2]
    # full access and no sandbox see everything, the symlinked directory too
    everything = [skill("ws/plug/escape/SKILL.md", "outside the sandbox"),
                  skill("ws/plug/secret/SKILL.md", "secret"),
                  skill("ws/plug/skills/a/SKILL.md", "A")]
    for x in r[3:]:
        assert x["skills"] == everything and x["plugin"] == plugin, x
        assert x["namespaceManifests"] == [man, t.tf("ws/plug/escape/.codex-plugin/plugin.json",
                                                     "{}")], x
    s.close()
    t.cleanup()


def test_unreadable_directory_warns(srv):
    if os.geteuid() == 0:
        # root reads mode-000 directories anyway; the sandbox case above covers denial
        raise TestSkip("running as root")
    t = Tree()
    t.w("r/locked/SKILL.md", "x")
    t.w("r/ok/SKILL.md", "y")
    os.chmod(os.path.join(t.d, "r/locked"), 0)
    try:
        s = srv.session()
        [r] = discover(s, [{"id": "r", "path": t.u("r")}])
        assert r["warnings"] == ["failed to scan capability path %s: Permission denied "
                                 "(os error 13)" % t.u("r/locked")], r
        assert [x["instructions"]["contents"] for x in r["skills"]] == ["y"], r
        s.close()
    finally:
        os.chmod(os.path.join(t.d, "r/locked"), 0o755)
        t.cleanup()


if __name__ == "__main__":
    run_tests(globals())
